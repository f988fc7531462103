#!/usr/bin/env bash
# Decode at depth (issue 39), one run (not a test): `statelm bench -d D` against llama.cpp's
# `llama-bench -d D` (both f16 K/V, the same thread count), for every model and depth, the two
# engines alternated (order swapped every round); decode tok/s median [min–max] of all samples and
# the ratio. Also the bandwidth limit of each (model, depth): STREAM-style read bandwidth
# (bench/stream_read.c, same threads, huge pages, best pass of reads before every round) over the
# bytes a decode step must read, weights (bench/compare's count: all tensors but the token
# embedding table unless tied) + K/V (per attention layer min(D + 1, window) keys x n_head_kv x
# (head_dim + head_dim_v) x 2 bytes; sliding layers keep `sliding_window` keys) + the recurrent
# states read and written (LFM2 conv, Qwen3.5 conv and DeltaNet; `statelm info --json`).
# Usage: bench/depth_compare.sh [-s STATELM] [-d "0 4096 8192 16384"] [-r ROUNDS] [-R REPS] [-n TOKENS]
#                               [-t THREADS] [-L "LLAMA-BENCH ARGS"] [MODEL.gguf ...]
# -L: extra llama-bench arguments, e.g. "--poll 0" on a loaded machine, where llama-bench's
# busy-waiting threads collapse its decode (bench/README.md).
# Default models: SmolLM2-135M Q4_1, Gemma 3 270M Q4_K_M and the random-weight LFM2-350M / Qwen3.5-0.8B
# shapes in ~/.cache/statelm/models. llama-bench: $LLAMA_BENCH, else bench/build-llama-bench.sh's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
slm="$here/../build/statelm" depths="0 4096 8192 16384" rounds=2 reps=3 n=32 threads=2 largs=""
while getopts "s:d:r:R:n:t:L:" o; do
  case "$o" in s) slm="$OPTARG";; d) depths="$OPTARG";; r) rounds="$OPTARG";; R) reps="$OPTARG";;
    n) n="$OPTARG";; t) threads="$OPTARG";; L) largs="$OPTARG";; *) exit 2;; esac
done
shift $((OPTIND - 1))
mdir="${STATELM_CACHE:-$HOME/.cache/statelm}/models"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("$mdir/SmolLM2-135M-Instruct.Q4_1.gguf" "$mdir/gemma-3-270m.Q4_K_M.gguf"
  "$mdir/random-lfm2-350m-q4_0.gguf" "$mdir/random-qwen35-0.8b-q4_0.gguf")
[ -x "$slm" ] || { echo "$slm missing (cmake --build build --target statelm)" >&2; exit 1; }
llama="${LLAMA_BENCH:-$(bash "$here/build-llama-bench.sh" | tail -1)}"
[ -x "$llama" ] || { echo "llama-bench missing: $llama" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O3 -march=native -pthread -I"$here" "$here/stream_read.c" -o "$tmp/stream_read"
py=python3

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs," \
  "load $(cut -d' ' -f1-3 /proc/loadavg); -t $threads, tg$n, $rounds rounds x $reps reps, f16 K/V," \
  "llama-bench args: ${largs:-none}"
echo "| model | depth | statelm tg/s | llama.cpp tg/s | ratio | GB/s | MB/token | limit tg/s | statelm of limit |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in "${models[@]}"; do
  [ -s "$m" ] || { echo "missing $m" >&2; continue; }
  "$slm" info -m "$m" --json > "$tmp/info.json"
  for d in $depths; do
    : > "$tmp/slm" && : > "$tmp/ll" && : > "$tmp/bw"
    for r in $(seq 1 "$rounds"); do
      "$tmp/stream_read" "$threads" 1024 5 | head -1 >> "$tmp/bw"
      order="slm ll"; [ $((r % 2)) -eq 0 ] && order="ll slm"
      for who in $order; do
        if [ "$who" = slm ]; then
          "$slm" bench -m "$m" -p 0 -n "$n" -d "$d" -r "$reps" -t "$threads" --json |
            $py -c 'import json,sys; print("\n".join(str(v) for v in json.load(sys.stdin)["tg_samples"]))' >> "$tmp/slm"
        else
          "$llama" -m "$m" -p 0 -n "$n" -d "$d" -r "$reps" -t "$threads" -ctk f16 -ctv f16 $largs -o json 2>/dev/null |
            $py -c 'import json,sys; [print("\n".join(str(v) for v in t["samples_ts"])) for t in json.load(sys.stdin) if t["n_gen"] > 0]' >> "$tmp/ll"
        fi
      done
    done
    $py - "$m" "$d" "$tmp" "$here/compare" <<'EOF'
import importlib.machinery, importlib.util, json, os, statistics, sys
model, depth, tmp, compare = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
loader = importlib.machinery.SourceFileLoader("bench_compare", compare)
spec = importlib.util.spec_from_loader("bench_compare", loader)
cmp = importlib.util.module_from_spec(spec)
loader.exec_module(cmp)
read = lambda f: [float(x) for x in open(os.path.join(tmp, f)).read().split()]
s, l, bw = read("slm"), read("ll"), max(read("bw"))
info = json.load(open(os.path.join(tmp, "info.json")))
hp = info["hparams"]
kv = 0
for kind in info["layers"]:
    if kind in ("attention", "sliding_attention"):
        keys = depth + 1 if kind == "attention" or not hp.get("sliding_window") else min(depth + 1, hp["sliding_window"])
        kv += keys * hp["n_head_kv"] * (hp["head_dim"] + hp.get("head_dim_v", hp["head_dim"])) * 2
rec = 2 * sum(st["bytes"] for st in info["states"] if st["role"] in ("conv", "recurrent"))
total = cmp.decode_bytes_per_token(model) + kv + rec
limit = bw * 1e9 / total
f = lambda v: "%.1f [%.1f–%.1f]" % (statistics.median(v), min(v), max(v)) if v else "-"
ratio = statistics.median(s) / statistics.median(l) if s and l else float("nan")
print("| %s | %d | %s | %s | %.2fx | %.1f | %.1f | %.1f | %.0f%% |" % (os.path.basename(model), depth, f(s), f(l), ratio,
      bw, total / 1e6, limit, 100 * statistics.median(s) / limit if s else float("nan")))
EOF
  done
done
