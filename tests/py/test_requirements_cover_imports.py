#!/usr/bin/env python3
"""Every module that a Python file run by CI imports comes from scripts/requirements-test.txt.

Which files CI runs: starting from .ci/run, the CMake files and the CTest scripts (tests/cli/*.sh,
tests/cross/*.sh; CTest registers every tests/py/test_*.py), every *.sh and *.py a file names is
followed, and so is every local module a Python file imports (a sibling .py, a package of the
repository). In each such file, every import of a module that is neither standard library nor
the repository's own must belong, through the installed distributions
(importlib.metadata.packages_distributions), to a distribution the requirements file lists by
name. An import that only a path CI never takes needs (torch in a golden generator, say) carries
`# not-in-ci: <why>` on its line.

Benchmarks that build their own venv (a file in bench/ naming a bench/requirements-*.txt) are
held to the same rule against their own file: the script itself runs on whatever python3 runs it,
so it imports the standard library only, and every Python file it names (run by the venv's Python,
bench/executorch_run.py say) imports only what that requirements file lists, the module's own name
standing for its distribution unless an installed distribution says otherwise. What the peer's
own code imports (ExecuTorch's exporter) is not in the repository; the bench checks it itself,
importing the exporter's modules in the fresh venv before it exports (`peer_imports_ok`).

The scan is also run on throwaway trees whose CI-run test, or whose bench venv's script, imports
a module its requirements file lacks, and must report it: the check can fail.
Usage: test_requirements_cover_imports.py [STATELM TESTS_DATA_DIR] (both unused). Exit 77 =
skipped (this Python has none of the listed distributions: not the test venv)."""
import ast
import importlib.metadata
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = "scripts/requirements-test.txt"
BENCH_REQUIREMENTS = re.compile(r"\b(requirements-[A-Za-z0-9_\-]+\.txt)\b")
SEEDS = [".ci/run", "CMakeLists.txt", "tests/CMakeLists.txt", "tests/py/test_*.py",
         "tests/cli/*.sh", "tests/cross/*.sh"]
NAMED_FILE = re.compile(r"([A-Za-z0-9_.\-]+\.(?:sh|py))\b")
EXEMPT = re.compile(r"#\s*not-in-ci:\s*\S")


def normalise(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def listed_distributions(req_file: Path) -> set[str]:
    names = set()
    for line in req_file.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(normalise(re.split(r"[\s<>=!~;\[]", line, maxsplit=1)[0]))
    return names


def tracked_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, text=True, check=True)
        return [root / p for p in out.stdout.splitlines() if (root / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in root.rglob("*") if p.is_file() and not p.relative_to(root).parts[0].startswith(("build", "."))]


def local_module_names(files: list[Path]) -> set[str]:
    """Top-level names the repository itself provides: every .py file's stem and package folder."""
    names = set()
    for f in files:
        if f.suffix == ".py":
            names.add(f.stem)
            if f.name == "__init__.py":
                names.add(f.parent.name)
    return names


def imports_of(path: Path) -> list[tuple[int, str, bool]]:
    """(line, top-level module, exempted) for every absolute import in the file."""
    source = path.read_text(encoding="utf-8", errors="replace")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module]
        else:
            continue
        exempt = bool(EXEMPT.search(lines[node.lineno - 1]))
        found += [(node.lineno, m.split(".")[0], exempt) for m in mods]
    return found


def files_ci_runs(root: Path, files: list[Path], local: set[str]) -> list[Path]:
    by_name: dict[str, list[Path]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    todo = [p for seed in SEEDS for p in sorted(root.glob(seed)) if p.is_file()]
    seen: set[Path] = set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if f.suffix == ".py":
            for _, mod, _ in imports_of(f):
                if mod in local:
                    todo += [c for c in files if c.suffix == ".py" and mod in (c.stem, c.parent.name)]
        else:
            for name in NAMED_FILE.findall(f.read_text(encoding="utf-8", errors="replace")):
                todo += by_name.get(Path(name).name, [])
    return sorted(p for p in seen if p.suffix == ".py")


def uncovered_imports(root: Path) -> list[str]:
    files = tracked_files(root)
    local = local_module_names(files)
    listed = listed_distributions(root / REQUIREMENTS)
    provided_by = importlib.metadata.packages_distributions()
    problems = []
    for f in files_ci_runs(root, files, local):
        for line, mod, exempt in imports_of(f):
            if exempt or mod in sys.stdlib_module_names or mod in local or mod == "__future__":
                continue
            dists = {normalise(d) for d in provided_by.get(mod, [])}
            where = f"{f.relative_to(root)}:{line}: import {mod}"
            if not dists:
                problems.append(f"{where}: no installed distribution provides it and {REQUIREMENTS} cannot list it")
            elif not dists & listed:
                problems.append(f"{where}: provided by {', '.join(sorted(dists))}, not listed in {REQUIREMENTS}")
    return problems


def bench_venv_problems(root: Path) -> list[str]:
    """Imports of the bench scripts that build a venv, and of the files they run in it, that the
    script's own requirements file does not cover."""
    files = tracked_files(root)
    local = local_module_names(files)
    provided_by = importlib.metadata.packages_distributions()
    bench_files = [f for f in files if f.parent == root / "bench"]
    by_name = {f.name: f for f in bench_files}
    problems = []
    for script in sorted(bench_files):
        text = script.read_text(encoding="utf-8", errors="replace")
        reqs = sorted(set(BENCH_REQUIREMENTS.findall(text)))
        if not reqs or script.suffix in (".txt", ".md"):  # the file itself, the README
            continue
        rel = script.relative_to(root)
        is_python = script.suffix == ".py" or text.startswith("#!/usr/bin/env python")
        if is_python:  # run by the caller's python3, before any venv exists
            for line, mod, exempt in imports_of(script):
                if not exempt and mod not in sys.stdlib_module_names and mod not in local and mod != "__future__":
                    problems.append(f"{rel}:{line}: import {mod}: the script that builds the venv must need "
                                    "only the standard library")
        for req in reqs:
            if req not in by_name:
                problems.append(f"{rel}: names {req}, which bench/ does not have")
                continue
            listed = listed_distributions(by_name[req])
            todo = [by_name[n] for n in NAMED_FILE.findall(text) if n in by_name and n.endswith(".py")]
            seen: set[Path] = set()
            while todo:
                f = todo.pop()
                if f in seen or f == script:
                    continue
                seen.add(f)
                for line, mod, exempt in imports_of(f):
                    if exempt or mod in sys.stdlib_module_names or mod == "__future__":
                        continue
                    if mod in local:
                        todo += [c for c in bench_files if c.suffix == ".py" and c.stem == mod]
                        continue
                    dists = {normalise(d) for d in provided_by.get(mod, [])} or {normalise(mod)}
                    if not dists & listed:
                        problems.append(f"{f.relative_to(root)}:{line}: import {mod}: run in the venv of {rel}, "
                                        f"not listed in bench/{req}")
    return problems


def bench_scan_must_fail_on_unlisted_import() -> str | None:
    """A bench whose venv script imports an unlisted module, or which imports one itself, is reported."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "bench").mkdir()
        (root / "bench/peer_compare").write_text("#!/usr/bin/env python3\nimport os\nimport yaml\n"
                                                 "REQ = 'requirements-peer.txt'\nRUN = 'peer_run.py'\n")
        (root / "bench/peer_run.py").write_text("import json\nimport torch\nimport safetensors.torch\n")
        (root / "bench/requirements-peer.txt").write_text("# the peer\ntorch==2\n")
        problems = bench_venv_problems(root)
        want = ["bench/peer_compare:3: import yaml", "bench/peer_run.py:3: import safetensors"]
        if len(problems) != 2 or not all(any(w in p for p in problems) for w in want):
            return f"the scan of a bench importing unlisted yaml and safetensors reported {problems!r}"
    return None


def scan_must_fail_on_unlisted_import() -> str | None:
    """A tree whose CTest script runs a Python file importing an unlisted module must be reported."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "scripts").mkdir()
        (root / "tests/py").mkdir(parents=True)
        (root / ".ci").mkdir()
        (root / ".ci/run").write_text("bash scripts/test.sh\n")
        (root / "scripts/test.sh").write_text('python3 "$(dirname "$0")/helper.py"\n')
        (root / "scripts/helper.py").write_text("import localmod\n")
        (root / "scripts/localmod.py").write_text("import json\nimport jsonschema\n")
        (root / "tests/py/test_x.py").write_text("import os\nimport numpy  # not-in-ci: exempted here\n")
        (root / REQUIREMENTS).write_text("numpy==1\n")
        problems = uncovered_imports(root)
        if len(problems) != 1 or "scripts/localmod.py:2: import jsonschema" not in problems[0]:
            return f"the scan of a tree importing unlisted jsonschema reported {problems!r}"
    return None


def main() -> int:
    listed = listed_distributions(ROOT / REQUIREMENTS)
    installed = {normalise(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    if not listed & installed:
        print(f"SKIPPED: {sys.executable} has none of {REQUIREMENTS} installed (not the test venv)")
        return 77
    failures = uncovered_imports(ROOT) + bench_venv_problems(ROOT)
    for self_check in (scan_must_fail_on_unlisted_import(), bench_scan_must_fail_on_unlisted_import()):
        if self_check:
            failures.append("self-check: " + self_check)
    for f in failures:
        print("FAIL", f)
    if not failures:
        print("every import of the Python files CI runs is provided by", REQUIREMENTS,
              "and every bench venv's by its own requirements file")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
