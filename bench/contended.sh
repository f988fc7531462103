#!/usr/bin/env bash
# Decode under CPU contention (issue 28 item 6), one run (not a test): `statelm bench` decode tok/s
# of one model alone at -t 1 and -t 2; the same with one CPU-bound competitor process
# (python3 -c 'while True: pass') running throughout; and two statelm processes at once at -t T
# (their sum). Targets on a 2-core machine: with one competitor, -t 2 >= 0.6x idle -t 2 and >= the
# contended -t 1; two processes together >= 0.9x one idle process. Every figure is the median of
# R repetitions of one process; on a shared machine read the ratios of runs moments apart.
# Usage: bench/contended.sh [BUILD_DIR] [-m MODEL] [-p PROMPT] [-n TOKENS] [-r REPS] [-t THREADS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build="$1"; shift; fi
models="${STATELM_CACHE:-$HOME/.cache/statelm}/models"
model="$models/random-lfm2-350m-q4_0.gguf" p=64 n=128 reps=3 threads=2
while [ $# -gt 1 ]; do
  case "$1" in -m) model="$2";; -p) p="$2";; -n) n="$2";; -r) reps="$2";; -t) threads="$2";;
    *) echo "unknown option $1" >&2; exit 2;; esac
  shift 2
done
[ -x "$build/statelm" ] || { echo "$build/statelm missing (cmake --build $build --target statelm)"; exit 1; }
[ -s "$model" ] || { echo "$model missing (scripts/gen-fullsize-models.sh)"; exit 1; }
tmp=$(mktemp -d)
competitor=""
cleanup() { [ -z "$competitor" ] || kill "$competitor" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(basename "$model"), statelm bench -p $p -n $n -r $reps, decode tok/s (median)"
# decode tok/s of one statelm bench run at -t $1 (its JSON's tg_tps)
tg() {
  "$build/statelm" bench -m "$model" -p "$p" -n "$n" -r "$reps" -t "$1" --json |
    python3 -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["tg_tps"])'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 > 0) printf "%.2f", a / b; else print "-"}'; }
idle1=$(tg 1)
idle2=$(tg "$threads")
python3 -c 'while True: pass' &
competitor=$!
sleep 0.5
busy1=$(tg 1)
busy2=$(tg "$threads")
kill "$competitor"
wait "$competitor" 2>/dev/null || true
competitor=""
tg "$threads" > "$tmp/a" &
pa=$!
tg "$threads" > "$tmp/b"
wait "$pa"
pair_a=$(cat "$tmp/a") pair_b=$(cat "$tmp/b")
pair=$(awk -v a="$pair_a" -v b="$pair_b" 'BEGIN {printf "%.1f", a + b}')
echo "idle            -t 1: $idle1   -t $threads: $idle2"
echo "one competitor  -t 1: $busy1   -t $threads: $busy2   (-t $threads: $(ratio "$busy2" "$idle2")x idle, $(ratio "$busy2" "$busy1")x contended -t 1)"
echo "two processes   -t $threads: $pair_a + $pair_b = $pair   ($(ratio "$pair" "$idle2")x one idle process)"
