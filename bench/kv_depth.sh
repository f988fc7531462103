#!/usr/bin/env bash
# kv_depth.sh — decode at a depth with each KV cache type, statelm and llama.cpp interleaved:
#   statelm bench -d D -p 0 -n N -ctk T -ctv T   and   llama-bench -d D -p 0 -n N -ctk T -ctv T -fa on
# for T in f16 q8_0 q4_0, rounds times, then the medians and ranges per type and side, and the KV
# bytes per token statelm's sessions hold (bench --json kv_bytes / n_ctx).
# Usage: bench/kv_depth.sh STATELM LLAMA_BENCH MODEL [DEPTH 8192] [N 32] [THREADS 2] [ROUNDS 3]
set -euo pipefail
statelm=$1; llama=$2; model=$3; depth=${4:-8192}; n=${5:-32}; t=${6:-2}; rounds=${7:-3}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  for ty in f16 q8_0 q4_0; do
    "$statelm" bench -m "$model" -d "$depth" -p 0 -n "$n" -r 1 -t "$t" -ctk "$ty" -ctv "$ty" --json \
      >>"$out/statelm_$ty" 2>/dev/null
    "$llama" -m "$model" -d "$depth" -p 0 -n "$n" -r 1 -t "$t" -ctk "$ty" -ctv "$ty" -fa on -o jsonl \
      >>"$out/llama_$ty" 2>/dev/null
  done
done
python3 - "$out" "$depth" <<'PY'
import json, statistics, sys, os
out, depth = sys.argv[1], int(sys.argv[2])
print(f"| KV K/V | statelm tg t/s @ d{depth} (median, range) | llama.cpp | ratio | statelm KV bytes/token |")
print("|---|---:|---:|---:|---:|")
for ty in ("f16", "q8_0", "q4_0"):
    s = [json.loads(l) for l in open(os.path.join(out, "statelm_" + ty)) if l.strip()]
    l = [json.loads(x) for x in open(os.path.join(out, "llama_" + ty)) if x.strip()]
    st = [d["tg_tps"] for d in s]
    lt = [d["avg_ts"] for d in l if d.get("n_gen", 0) > 0]
    per_tok = s[0]["kv_bytes"] / s[0]["n_ctx"] if s else float("nan")
    sm, lm = statistics.median(st), statistics.median(lt) if lt else float("nan")
    print(f"| {ty} | {sm:.1f} ({min(st):.1f}-{max(st):.1f}) | {lm:.1f} ({min(lt):.1f}-{max(lt):.1f}) | "
          f"{sm / lm:.2f} | {per_tok:.0f} |")
PY
