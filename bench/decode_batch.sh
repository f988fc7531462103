#!/usr/bin/env bash
# Batched decode benchmark of issue 15, one run (not a test): aggregate decode tok/s of 1, 2, 4, 8
# concurrent streams, statelm's slm_session_decode_batch (bench_decode_batch: B sessions at prompts
# of 32 + 8 i tokens stepping together, and the same B sessions stepping one decode after another)
# side by side with llama.cpp's own llama-batched-bench -npl 1,2,4,8 (one llama_decode of B
# sequences per step, prompt -npp 64, built from the vendored llama.cpp by bench/build-llama-bench.sh),
# on SmolLM2-135M Q4_1 and the full-size random LFM2-350M / Qwen3.5-0.8B Q4_0 shapes. Every figure
# is the median of R runs; the machine it runs on may be shared and noisy, so read the ratios (runs
# of the two tools moments apart) before the tok/s.
# Threads default to 1: on a loaded machine llama.cpp's spin-waiting worker threads collapse.
# Usage: bench/decode_batch.sh [BUILD_DIR] [-t THREADS] [-n STEPS] [-r REPS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build="$1"; shift; fi
threads=1 n=32 reps=3
while [ $# -gt 1 ]; do
  case "$1" in -t) threads="$2";; -n) n="$2";; -r) reps="$2";; *) echo "unknown option $1" >&2; exit 2;; esac
  shift 2
done
models="${STATELM_CACHE:-$HOME/.cache/statelm}/models"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x "$build/bench_decode_batch" ] || { echo "$build/bench_decode_batch missing (cmake --build $build --target bench_decode_batch)"; exit 1; }
llama=$(bash "$here/build-llama-bench.sh" llama-batched-bench 2>/dev/null) || llama=""
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $threads, $n decode steps per stream, medians of $reps runs"
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 > 0 && a != "nan") printf "%.2f", a / b; else print "-"}'; }
for f in SmolLM2-135M-Instruct.Q4_1.gguf random-lfm2-350m-q4_0.gguf random-qwen35-0.8b-q4_0.gguf; do
  [ -s "$models/$f" ] || { echo "## $f: missing (scripts/fetch-models.sh, scripts/gen-fullsize-models.sh)"; continue; }
  echo "## $f"
  rm -f "$tmp"/s_* "$tmp"/l_* "$tmp"/o_*
  for _ in $(seq "$reps"); do
    "$build/bench_decode_batch" "$models/$f" -t "$threads" -n "$n" -c $((n + 128 > 512 ? n + 128 : 512)) > "$tmp/out"
    # rows: B, batched tok/s, one-by-one tok/s, ...
    awk '$1 ~ /^[0-9]+$/ {print $2 > "'"$tmp"'/s_" $1; print $3 > "'"$tmp"'/o_" $1}' "$tmp/out"
    [ -n "$llama" ] || continue
    if "$llama" -m "$models/$f" -t "$threads" -c $((8 * (64 + n))) -npp 64 -ntg "$n" -npl 1,2,4,8 --output-format jsonl \
        > "$tmp/lout" 2> "$tmp/lerr"; then
      # one JSON object per B; speed_tg = B * ntg / (time of the ntg decode steps)
      sed -nE 's/.*"pl": *([0-9]+).*"speed_tg": *([0-9.eE+-]+).*/\1 \2/p' "$tmp/lout" |
        while read -r b v; do echo "$v" >> "$tmp/l_$b"; done
    else
      echo "llama-batched-bench failed: $(tail -2 "$tmp/lerr" | tr '\n' ' ')"
    fi
  done
  printf "%-8s %12s %12s %9s %12s %9s %8s\n" streams statelm one-by-one "x single" llama.cpp "x single" "s/llama"
  s1=$(median < "$tmp/s_1") l1=nan
  [ -s "$tmp/l_1" ] && l1=$(median < "$tmp/l_1")
  for b in 1 2 4 8; do
    s=$(median < "$tmp/s_$b") o=$(median < "$tmp/o_$b") l=nan
    [ -s "$tmp/l_$b" ] && l=$(median < "$tmp/l_$b")
    printf "%-8s %12.1f %12.1f %9s %12.1f %9s %8s\n" "$b" "$s" "$o" "$(ratio "$s" "$s1")" "$l" "$(ratio "$l" "$l1")" \
      "$(ratio "$s" "$l")"
  done
done
echo "# tok/s = aggregate decode tokens per second over all streams; x single = against 1 stream of the"
echo "# same tool; s/llama = statelm batched / llama.cpp; one-by-one = statelm without batching"
