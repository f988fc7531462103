#!/usr/bin/env bash
# Which tier runs each quantised matmul shape fastest (the measurements behind kern_pick.c's
# table; a benchmark, not a test): bench_mm_cols -c on one base tier and each other tier, back to
# back in every round, so that each round gives a paired ratio (tier time / base time) per weight
# type and column count (1, 2, 3, 4, 8, 16, 64) under the same machine load. Prints, per type and
# tier, the median ratio over the rounds, its range and the number of rounds the tier beat the
# base: on a shared machine only a ratio below 1 in (nearly) every round is a result.
# Usage: bench/mm_tiers.sh [BUILD_DIR] [-m ROWS] [-k COLS] [-r ROUNDS] [-t TYPE] [-b BASE] TIER...
# Defaults: -m 65536 -k 1024 (38 MB of Q4_0: the streaming case), 5 rounds, every type the base
# tier has tiles for, base avx512. Tiers this CPU lacks are left out with a line saying so.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build="$1"; shift; fi
m=65536 k=1024 rounds=5 base=avx512 types="q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k"
while [ $# -gt 1 ] && [ "${1#-}" != "$1" ]; do
  case "$1" in -m) m="$2";; -k) k="$2";; -r) rounds="$2";; -t) types="$2";; -b) base="$2";;
  *) echo "unknown option $1" >&2; exit 2;; esac
  shift 2
done
[ $# -gt 0 ] || { echo "usage: bench/mm_tiers.sh [BUILD_DIR] [-m ROWS] [-k COLS] [-r ROUNDS] [-t TYPE] [-b BASE] TIER..." >&2; exit 2; }
bin="$build/bench_mm_cols"
[ -x "$bin" ] || { echo "$bin missing (cmake --build $build --target bench_mm_cols)"; exit 1; }
tiers=""
for t in "$base" "$@"; do
  if "$bin" -m 16 -k 256 -r 1 -i "$t" -t q8_0 > /dev/null 2>&1; then tiers="$tiers $t"
  else echo "# $t: not run (not supported on this CPU or without tiles)"; fi
done
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs"
echo "# -m $m -k $k, $rounds rounds, base $base, thread CPU time (best of 7 per run)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ty in $types; do
    for t in $tiers; do
      # lines "TYPE cols N: US us ..." -> "round type tier cols us"
      "$bin" -m "$m" -k "$k" -r 7 -i "$t" -t "$ty" -c |
        awk -v r="$r" -v t="$t" '$2 == "cols" { sub(":", "", $3); print r, $1, t, $3, $4 }' >> "$tmp/all"
    done
  done
done
awk -v base="$base" '
  { us[$1, $2, $3, $4] = $5; types[$2]; tiers[$3]; cols[$4]; rounds[$1] }
  END {
    nc = 0; for (c in cols) cl[++nc] = c + 0
    for (i = 1; i <= nc; i++) for (j = i + 1; j <= nc; j++) if (cl[j] < cl[i]) { x = cl[i]; cl[i] = cl[j]; cl[j] = x }
    for (ty in types) for (t in tiers) {
      if (t == base) continue
      line = sprintf("%-5s %-8s /%s:", ty, t, base)
      for (i = 1; i <= nc; i++) {
        n = 0; wins = 0
        for (r in rounds) if ((r, ty, t, cl[i]) in us && (r, ty, base, cl[i]) in us && us[r, ty, base, cl[i]] > 0) {
          v[++n] = us[r, ty, t, cl[i]] / us[r, ty, base, cl[i]]; if (v[n] < 1) wins++
        }
        if (n == 0) continue
        for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++) if (v[b] < v[a]) { x = v[a]; v[a] = v[b]; v[b] = x }
        med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        line = line sprintf("  %d: %.2f [%.2f-%.2f] %d/%d", cl[i], med, v[1], v[n], wins, n)
      }
      print line
    }
  }' "$tmp/all" | sort
