#!/usr/bin/env python3
"""Runs the statelm package tests (pytest over python/tests) for CTest (tests/CMakeLists.txt,
py_package): against the extension of the build tree when PYTHONPATH points at <build>/python,
else against the installed package. Exits 77 (skipped, with a SKIPPED line) when this Python lacks
pytest or numpy, or finds no statelm package. Arguments go on to pytest."""
import importlib.util
import os
import sys

missing = [m for m in ("pytest", "numpy", "statelm") if importlib.util.find_spec(m) is None]
if missing:
    print(f"SKIPPED: {sys.executable} lacks {', '.join(missing)} "
          "(pip install -r scripts/requirements-test.txt; statelm: pip install . or a build tree's python/)")
    sys.exit(77)
import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.dirname(os.path.abspath(__file__)), *sys.argv[1:]]))
