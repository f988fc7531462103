#!/usr/bin/env bash
# Sets up and runs every statelm test: installs the build dependencies, fetches the real test
# model, builds the release tree (build/), the ASan+UBSan tree (build-asan/) and a ThreadSanitizer
# tree (build-tsan/, threaded tests only: pool, sessions in threads, decode attention split across
# threads, concurrent state saves, the sessions of a batched decode step as tasks, the serving
# engine), and runs CTest in each (unit, golden, CLI, Python and fuzz-corpus replay tests), then
# installs the Python package from the checkout into the test venv (pip install .) and runs its
# tests against it. Exit status is non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
bash scripts/fetch-models.sh || echo "test.sh: could not fetch the real models; tests that need them will report SKIPPED"
# The Python packages the tests import (independent readers they compare against; no torch): a
# cached venv holding exactly scripts/requirements-test.txt, made anew when that file changes
# (its sha256 is kept beside the venv).
venv="${STATELM_CACHE:-$HOME/.cache/statelm}/venv-test"
requirements=scripts/requirements-test.txt
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ "$(cat "$venv.sha256" 2>/dev/null)" != "$want" ] || [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv" "$venv.sha256"
  if python3 -m venv "$venv" \
     && "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"; then
    echo "$want" > "$venv.sha256"
  else
    echo "test.sh: could not set up $venv from $requirements"
    exit 1
  fi
fi
py="$venv/bin/python"
# Full-size random-weight models (LFM2-350M, Qwen3.5-0.8B shapes) for the release-build tests; made once.
bash scripts/gen-fullsize-models.sh "$py" || echo "test.sh: could not generate the full-size random models; tests that need them will FAIL"
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSLM_TESTS=ON -DSLM_PYTHON="$py" >/dev/null
cmake --build build -j "$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSLM_TESTS=ON -DSLM_SANITIZE=ON -DSLM_PYTHON="$py" >/dev/null
cmake --build build-asan -j "$jobs"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSLM_TESTS=ON -DSLM_TSAN=ON -DSLM_PYTHON="$py" >/dev/null
cmake --build build-tsan -j "$jobs" --target test_pool test_threads test_kern_ref test_kern_fast test_session test_state test_batch test_engine
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
status=0
echo "== release build tests"
ctest --test-dir build --output-on-failure -j "$jobs" || status=1
echo "== ASan+UBSan build tests"
ctest --test-dir build-asan --output-on-failure -j "$jobs" || status=1
echo "== ThreadSanitizer build: sessions in threads, thread pool, decode attention split across threads, concurrent state saves, the serving engine"
ctest --test-dir build-tsan --output-on-failure -R '^(test_pool|test_threads|test_kern_ref|test_kern_fast_split|test_session|test_state|test_batch|test_engine)$' || status=1
echo "== the Python package, pip-installed from this checkout into the test venv"
if "$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps . ; then
  # the leak cycles already ran against the build trees' extension (py_package)
  STATELM_CLI="$PWD/build/statelm" "$venv/bin/python" python/tests/run.py -k "not leak" || status=1
else
  echo "test.sh: pip install . failed"
  status=1
fi
exit $status
