#!/usr/bin/env bash
# Sets up and runs every statelm test: installs the build dependencies, fetches the real test
# model, builds the release tree (build/) and the ASan+UBSan tree (build-asan/), and runs CTest in
# both (unit, golden, CLI and fuzz-corpus replay tests). Exit status is CTest's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/fetch-models.sh || echo "test.sh: could not fetch the real models; tests that need them will report SKIPPED"
# Independent Python readers the tests compare against (no torch): a small cached venv.
venv="${STATELM_CACHE:-$HOME/.cache/statelm}/venv-test"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import gguf, jsonschema" 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check gguf jsonschema numpy \
    || echo "test.sh: could not set up $venv; Python comparison tests will report SKIPPED"
fi
py="$venv/bin/python"
[ -x "$py" ] || py=python3
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSLM_PYTHON="$py" >/dev/null
cmake --build build -j "$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSLM_SANITIZE=ON -DSLM_PYTHON="$py" >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
echo "== release build tests"
ctest --test-dir build --output-on-failure -j "$jobs" || status=1
echo "== ASan+UBSan build tests"
ctest --test-dir build-asan --output-on-failure -j "$jobs" || status=1
exit $status
