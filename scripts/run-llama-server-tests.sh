#!/usr/bin/env bash
# run-llama-server-tests.sh — llama.cpp's own server tests (tools/server/tests/unit/*.py of the
# llama.cpp that llama-cpp-python 0.3.36 vendors) against `statelm serve`, through
# scripts/llama-server-shim.py, offline on one local model; with --llama-server, against the real
# llama-server on the same model too, and a per-test comparison. Not run by CI.
#
#   scripts/run-llama-server-tests.sh [--llama-server BIN] [--skip-statelm] STATELM [TEST_FILE...]
#
# Needs the sdist in $STATELM_CACHE/src (scripts/fetch-models.sh), SmolLM2 in $STATELM_CACHE/models,
# and a Python with pytest, requests, wget, filelock, openai, numpy, prometheus-client
# ($SLM_PYTHON; default python3). Default files: the ones issue 37 measures. Prints per server and
# file the passed/failed/skipped counts; writes each run's pytest log and JUnit XML to
# $OUT/<server>/<file>.{log,xml} (default ./llama-server-tests); with both servers run, prints the
# comparison scripts/llama-server-suite-table.py makes of them (docs/llama-server-suite.md is one).
# --skip-statelm keeps statelm's results already in $OUT (re-runs llama-server only). The servers
# listen on $PORT (default 18080); each file may run $SUITE_FILE_TIMEOUT seconds (default 5400).
set -uo pipefail
llama=""
skip_statelm=0
while [ $# -gt 0 ]; do
    case $1 in
        --llama-server) llama=$(realpath "${2:?--llama-server BIN}"); shift 2 ;;
        --skip-statelm) skip_statelm=1; shift ;;
        *) break ;;
    esac
done
statelm=$(realpath "${1:?usage: run-llama-server-tests.sh [--llama-server BIN] [--skip-statelm] STATELM [TEST_FILE...]}")
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
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$(realpath "$src/../../../models")" "$work/models"
export LLAMA_SERVER_BIN_PATH=$here/llama-server-shim.py STATELM_SHIM_BIN=$statelm STATELM_SHIM_MODEL=$model
export PORT=${PORT:-18080}

# run_suite NAME: every file against the server the shim starts, fresh copy of the tests each time
# (tests write slot files and caches under their directory), laid out as in llama.cpp's tree (the
# tests name chat templates as ../../../models/templates/*.jinja).
run_suite() {
    local name=$1 total_p=0 total_f=0 total_s=0
    mkdir -p "$out/$name"
    for f in "${files[@]}"; do
        rm -rf "$work/tools" && mkdir -p "$work/tools/server" && cp -r "$src" "$work/tools/server/tests"
        (cd "$work/tools/server/tests" && timeout "${SUITE_FILE_TIMEOUT:-5400}" "$py" -m pytest -q -m "not slow" -p no:cacheprovider \
            --junitxml="$out/$name/$f.xml" "unit/$f.py") > "$out/$name/$f.log" 2>&1
        local line p fl s
        line=$(grep -E '(passed|failed|error|skipped)' "$out/$name/$f.log" | tail -1)
        p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
        fl=$(( $(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || echo 0) +
               $(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || echo 0) ))
        s=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)
        printf '%-12s %-28s passed %3d  failed %3d  skipped %3d\n' "$name" "$f" "$p" "$fl" "$s"
        total_p=$((total_p + p)) total_f=$((total_f + fl)) total_s=$((total_s + s))
    done
    printf '%-12s %-28s passed %3d  failed %3d  skipped %3d\n' "$name" total "$total_p" "$total_f" "$total_s"
}

[ $skip_statelm = 1 ] || (unset LLAMA_SHIM_REAL; run_suite statelm)
if [ -n "$llama" ]; then
    (export LLAMA_SHIM_REAL=$llama; run_suite llama-server)
    "$py" "$here/llama-server-suite-table.py" "$out" --summary
fi
