#!/usr/bin/env bash
# test_bench.sh — the `statelm bench --json` contract bench/compare relies on: one JSON object on
# stdout with numeric pp_tps and tg_tps (medians, tokens/s), null for a test skipped with -p 0 or
# -n 0, and the sample counts asked for; "kernels" names the tier used (never "auto"), and
# SLM_KERNELS naming a tier this machine lacks is refused with a message; bad options exit non-zero
# with a message. With -d N both tests start from the state after an N-token prefill (restored
# before every run): the table names the depth, --json carries n_depth, hybrids too.
# Usage: test_bench.sh STATELM TESTS_DATA_DIR
set -euo pipefail
statelm=$1
model=$2/tiny/llama/llama-q8_0.gguf
out=$("$statelm" bench -m "$model" -p 8 -n 4 -r 3 -t 2 --json)
python3 - "$out" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
assert isinstance(d["pp_tps"], float) and d["pp_tps"] > 0, d
assert isinstance(d["tg_tps"], float) and d["tg_tps"] > 0, d
assert len(d["pp_samples"]) == 3 and len(d["tg_samples"]) == 3, d
assert d["pp_min"] <= d["pp_tps"] <= d["pp_max"] and d["tg_min"] <= d["tg_tps"] <= d["tg_max"], d
assert d["n_prompt"] == 8 and d["n_gen"] == 4 and d["n_threads"] == 2 and d["peak_rss_bytes"] > 0, d
assert d["kernels"] in ("generic", "neon", "i8mm", "avx2", "avxvnni", "avx512", "amx"), d
PY
out=$(SLM_KERNELS=generic "$statelm" bench -m "$model" -p 2 -n 1 -r 1 --json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["kernels"] == "generic", d' "$out"
SLM_KERNELS=ref "$statelm" bench -m "$model" -p 2 -n 1 -r 1 | grep -q '| ref | pp2 |'
# a tier not built for this architecture: refused, never replaced by another
case $(uname -m) in x86_64 | amd64) lacking=neon ;; *) lacking=avx2 ;; esac
if err=$(SLM_KERNELS=$lacking "$statelm" bench -m "$model" -p 2 -n 1 -r 1 2>&1); then
  echo "bench with SLM_KERNELS=$lacking should fail"; exit 1
fi
grep -q "SLM_KERNELS=$lacking" <<<"$err" || { echo "no message naming SLM_KERNELS=$lacking: $err"; exit 1; }
out=$("$statelm" bench -m "$model" -p 0 -n 2 -r 1 --json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["pp_tps"] is None and d["tg_tps"] > 0, d' "$out"
"$statelm" bench -m "$model" -p 4 -n 2 -r 1 | grep -q '| pp4 |'
out=$("$statelm" bench -m "$model" -p 4 -n 3 -d 700 -r 2 --json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["n_depth"] == 700 and d["pp_tps"] > 0 and d["tg_tps"] > 0, d' "$out"
"$statelm" bench -m "$2/tiny/lfm2/lfm2-f32.gguf" -p 4 -n 2 -d 600 -r 1 | grep -q '| tg2 @ d600 |'
"$statelm" bench -m "$2/tiny/qwen35/qwen35-f32.gguf" -p 4 -n 2 -d 600 -r 1 | grep -q '| pp4 @ d600 |'
if "$statelm" bench -m "$model" -d -1 2>/dev/null; then echo "bench -d -1 should fail"; exit 1; fi
if "$statelm" bench -m "$model" -r 0 2>/dev/null; then echo "bench -r 0 should fail"; exit 1; fi
if "$statelm" bench -m /nonexistent.gguf 2>/dev/null; then echo "bench on a missing file should fail"; exit 1; fi
echo "bench contract ok"
