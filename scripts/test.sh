#!/usr/bin/env bash
# Sets up and runs every statelm test: installs the build dependencies, fetches the real test
# model, builds the release tree (build/) and the ASan+UBSan tree (build-asan/), and runs CTest in
# both (unit, golden, CLI and fuzz-corpus replay tests). Exit status is CTest's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/fetch-models.sh || echo "test.sh: could not fetch the real models; tests that need them will report SKIPPED"
# Python's jsonschema validates `statelm plan --json` (tests/cli/test_plan_schema.sh): use python3's
# when it has one, else a small venv of our own.
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  venv=$HOME/.cache/statelm/venv-schema
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -c 'import jsonschema' 2>/dev/null || "$venv/bin/pip" install -q jsonschema
  export SLM_PYTHON=$venv/bin/python
fi
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSLM_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
echo "== release build tests"
ctest --test-dir build --output-on-failure -j "$jobs" || status=1
echo "== ASan+UBSan build tests"
ctest --test-dir build-asan --output-on-failure -j "$jobs" || status=1
exit $status
