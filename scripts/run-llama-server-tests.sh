#!/usr/bin/env bash
# run-llama-server-tests.sh — llama.cpp's own server tests (tools/server/tests/unit/*.py of the
# llama.cpp that llama-cpp-python 0.3.36 vendors) against `statelm serve`, through
# scripts/llama-server-shim.py, offline on one local model. Not run by CI.
#
#   scripts/run-llama-server-tests.sh STATELM [TEST_FILE...]
#
# Needs the sdist in $STATELM_CACHE/src (scripts/fetch-models.sh), SmolLM2 in $STATELM_CACHE/models,
# and a Python with pytest, requests, wget, filelock, openai, numpy, prometheus-client
# ($SLM_PYTHON; default python3). Default files: the ones issue 37 measures. Prints per file the
# passed/failed/skipped counts and writes the pytest logs to $OUT (default ./llama-server-tests).
set -uo pipefail
statelm=$(realpath "${1:?usage: run-llama-server-tests.sh STATELM [TEST_FILE...]}")
shift
cache=${STATELM_CACHE:-$HOME/.cache/statelm}
src=$cache/src/llama_cpp_python-0.3.36/vendor/llama.cpp/tools/server/tests
model=${STATELM_SHIM_MODEL:-$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
py=${SLM_PYTHON:-python3}
out=$(realpath -m "${OUT:-./llama-server-tests}")
[ -d "$src" ] || { echo "SKIPPED: $src is absent (scripts/fetch-models.sh)"; exit 77; }
[ -f "$model" ] || { echo "SKIPPED: $model is absent (scripts/fetch-models.sh)"; exit 77; }
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(test_basic test_tokenize test_chat_completion test_completion test_template
                                  test_embedding test_tool_call test_compat_anthropic test_compat_oai_responses
                                  test_security test_slot_save test_metrics)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/tests"
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export LLAMA_SERVER_BIN_PATH=$here/llama-server-shim.py STATELM_SHIM_BIN=$statelm STATELM_SHIM_MODEL=$model
cd "$work/tests" || exit 1
total_p=0 total_f=0 total_s=0
for f in "${files[@]}"; do
    timeout 1800 "$py" -m pytest -q -m "not slow" -p no:cacheprovider "unit/$f.py" > "$out/$f.log" 2>&1
    line=$(grep -E '(passed|failed|error|skipped)' "$out/$f.log" | tail -1)
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    fl=$(( $(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || echo 0) +
           $(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || echo 0) ))
    s=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    printf '%-28s passed %3d  failed %3d  skipped %3d\n' "$f" "$p" "$fl" "$s"
    total_p=$((total_p + p)) total_f=$((total_f + fl)) total_s=$((total_s + s))
done
printf '%-28s passed %3d  failed %3d  skipped %3d\n' total "$total_p" "$total_f" "$total_s"
