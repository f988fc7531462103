#!/usr/bin/env bash
# bench/quantize_compare.sh — `statelm quantize` next to llama.cpp's `llama-quantize` on the same
# F16 files of the full-size random shapes (Qwen3.5-0.8B, LFM2-350M): per shape and type, RUNS runs
# of each, interleaved (the order alternates from run to run, so drifting load hits both alike), each
# under /usr/bin/time. Printed per shape and type: wall time, CPU time (user + system) and peak RSS
# (maxresident) of each, median and min–max, and statelm / llama-quantize as ratios of the medians;
# "same bytes" says whether the two outputs of the first run are identical (cmp).
# Usage: bench/quantize_compare.sh [-r RUNS] [-t THREADS] [-s "qwen35-0.8b lfm2-350m"]
#            [-q "q4_0 q8_0 q4_k_m q6_k"]
#   RUNS default 3; THREADS default all online CPUs, given to both (statelm -t N, llama-quantize's
#   trailing nthreads argument).
# Binaries: $STATELM (default build/statelm) and $LLAMA_QUANTIZE (default: what
# `bench/build-llama-bench.sh llama-quantize` prints — llama.cpp's Release GGML_NATIVE=ON build, with
# the AMX flags that script decides). Sources: $SLM_MODELS_DIR (default ~/.cache/statelm/models)
# random-SHAPE-f16.gguf, written once if missing by `scripts/gen_tiny_models.py --full SHAPE --type
# f16` with $PYTHON (default python3; needs numpy, gguf, tokenizers). Outputs go to a temporary
# folder ($TMPDIR) and are deleted after each run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
runs=3
threads="$(nproc)"
shapes="qwen35-0.8b lfm2-350m"
types="q4_0 q8_0 q4_k_m q6_k"
while getopts "r:t:s:q:h" o; do
  case $o in
    r) runs=$OPTARG ;;
    t) threads=$OPTARG ;;
    s) shapes=$OPTARG ;;
    q) types=$OPTARG ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
statelm="${STATELM:-$root/build/statelm}"
[ -x "$statelm" ] || { echo "quantize_compare: no statelm at $statelm (build it, or set STATELM)" >&2; exit 1; }
llama="${LLAMA_QUANTIZE:-$(bash "$here/build-llama-bench.sh" llama-quantize)}"
[ -x "$llama" ] || { echo "quantize_compare: no llama-quantize at $llama" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "quantize_compare: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
models="${SLM_MODELS_DIR:-$HOME/.cache/statelm/models}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

source_file() { # SHAPE: the path of its F16 file, written once
  local f="$models/random-$1-f16.gguf"
  if [ ! -s "$f" ]; then
    echo "quantize_compare: writing $f" >&2
    mkdir -p "$models"
    "${PYTHON:-python3}" "$root/scripts/gen_tiny_models.py" --full "$1" --type f16 --out "$work/gen" >&2
    mv "$work/gen/random-$1-f16.gguf" "$f"
  fi
  echo "$f"
}

# timed TOOL SRC TYPE: one run, appends "wall cpu rss_kib" to $work/TOOL.times; the output stays in
# $work/TOOL.gguf.
timed() {
  local out="$work/$1.gguf" rc=0
  rm -f "$out"
  if [ "$1" = statelm ]; then
    /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$statelm" quantize --quiet -t "$threads" "$2" "$out" "$3" \
      >"$work/log" 2>&1 || rc=$?
  else
    /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$llama" "$2" "$out" "$3" "$threads" >"$work/log" 2>&1 || rc=$?
  fi
  if [ $rc -ne 0 ]; then
    echo "quantize_compare: $1 $3 failed ($rc):" >&2
    tail -n 5 "$work/log" >&2
    exit 1
  fi
  awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/t" >>"$work/$1.times"
}

# stats FILE COLUMN: "median min max" of that column
stats() {
  cut -d' ' -f"$2" "$1" | sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $threads, $runs runs each, interleaved; llama-quantize: $llama"
printf '%-12s %-7s %-22s %-22s %-7s %-7s %-8s %-8s %-6s %s\n' shape type "statelm wall s" "llama wall s" \
  "wall x" "cpu x" "RSS MiB" "(llama)" "RSS x" "same bytes"
for shape in $shapes; do
  src="$(source_file "$shape")"
  cat "$src" >/dev/null # both start from a warm page cache
  for type in $types; do
    rm -f "$work"/*.times
    same=?
    for ((r = 0; r < runs; r++)); do
      if ((r % 2 == 0)); then order="statelm llama"; else order="llama statelm"; fi
      for tool in $order; do timed "$tool" "$src" "$type"; done
      if ((r == 0)); then
        if cmp -s "$work/statelm.gguf" "$work/llama.gguf"; then same=yes; else same=no; fi
      fi
      rm -f "$work/statelm.gguf" "$work/llama.gguf"
    done
    read -r sw swlo swhi <<<"$(stats "$work/statelm.times" 1)"
    read -r lw lwlo lwhi <<<"$(stats "$work/llama.times" 1)"
    read -r sc _ _ <<<"$(stats "$work/statelm.times" 2)"
    read -r lc _ _ <<<"$(stats "$work/llama.times" 2)"
    read -r sr _ _ <<<"$(stats "$work/statelm.times" 3)"
    read -r lr _ _ <<<"$(stats "$work/llama.times" 3)"
    awk -v shape="$shape" -v type="$type" -v sw="$sw" -v swlo="$swlo" -v swhi="$swhi" -v lw="$lw" \
      -v lwlo="$lwlo" -v lwhi="$lwhi" -v sc="$sc" -v lc="$lc" -v sr="$sr" -v lr="$lr" -v same="$same" 'BEGIN {
      printf "%-12s %-7s %-22s %-22s %-7.2f %-7.2f %-8.0f %-8.0f %-6.2f %s\n", shape, type,
        sprintf("%.1f [%.1f-%.1f]", sw, swlo, swhi), sprintf("%.1f [%.1f-%.1f]", lw, lwlo, lwhi),
        sw / lw, sc / lc, sr / 1024, lr / 1024, sr / lr, same }'
  done
done
