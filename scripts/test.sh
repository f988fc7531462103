#!/usr/bin/env bash
# Sets up and runs every statelm test: installs the build dependencies, fetches the real test
# model, builds the release tree (build/), the ASan+UBSan tree (build-asan/) and a ThreadSanitizer
# tree (build-tsan/, threaded tests only: pool, sessions in threads, concurrent state saves, the
# sessions of a batched decode step as tasks), and runs CTest in each (unit, golden, CLI, Python
# and fuzz-corpus replay tests). Exit status is non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/fetch-models.sh || echo "test.sh: could not fetch the real models; tests that need them will report SKIPPED"
# Independent Python readers the tests compare against (no torch): a small cached venv.
# venv_pkgs: what pip installs; venv_mods: the modules whose import proves it is there.
venv="${STATELM_CACHE:-$HOME/.cache/statelm}/venv-test"
venv_pkgs=(gguf jsonschema numpy)
venv_mods=(gguf jsonschema numpy)
venv_pkgs+=(openai)
venv_mods+=(openai)
venv_pkgs+=(coremltools==9.0)
venv_mods+=(coremltools)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import $(IFS=,; echo "${venv_mods[*]}")" 2>/dev/null; then
  { [ -x "$venv/bin/python" ] || python3 -m venv "$venv"; } \
    && "$venv/bin/pip" install -q --disable-pip-version-check "${venv_pkgs[@]}" \
    || echo "test.sh: could not set up $venv; Python comparison tests will report SKIPPED"
fi
py="$venv/bin/python"
[ -x "$py" ] || py=python3
# Full-size random-weight models (LFM2-350M, Qwen3.5-0.8B shapes) for the release-build tests; made once.
bash scripts/gen-fullsize-models.sh "$py" || echo "test.sh: could not generate the full-size random models; tests that need them will FAIL"
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSLM_PYTHON="$py" >/dev/null
cmake --build build -j "$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSLM_SANITIZE=ON -DSLM_PYTHON="$py" >/dev/null
cmake --build build-asan -j "$jobs"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSLM_TSAN=ON -DSLM_PYTHON="$py" >/dev/null
cmake --build build-tsan -j "$jobs" --target test_threads test_kern_ref test_session test_state test_batch
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
status=0
echo "== release build tests"
ctest --test-dir build --output-on-failure -j "$jobs" || status=1
echo "== ASan+UBSan build tests"
ctest --test-dir build-asan --output-on-failure -j "$jobs" || status=1
echo "== ThreadSanitizer build: sessions in threads, thread pool, concurrent state saves"
ctest --test-dir build-tsan --output-on-failure -R '^(test_threads|test_kern_ref|test_session|test_state|test_batch)$' || status=1
exit $status
