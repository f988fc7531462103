#!/usr/bin/env bash
# Speculative decoding benchmarks of issue 16, one run (not a test; the machine it runs on may be
# shared, so read the ratios, which compare runs of the same tool moments apart, before the tok/s):
#  (a) the cost of a verify pass of k = 1, 2, 4, 8 tokens relative to one decode step
#      (bench_verify_cost) on SmolLM2-135M and the full-size random LFM2-350M / Qwen3.5-0.8B shapes;
#  (b) decode tokens/s with prompt lookup vs plain greedy decoding on input-grounded prompts (rewrite
#      code with one change, quote a paragraph, fix one word in a list) with the real SmolLM2 file:
#      statelm (bench_spec_lookup: same prefill, then plain decode vs slm_spec lookup, medians of R)
#      next to llama.cpp's own prompt-lookup tool llama-lookup (--spec-draft-n-max K vs 0, same
#      text, medians of R), built from the vendored llama.cpp by bench/build-llama-bench.sh.
# llama-speculative-simple needs a smaller draft model with SmolLM2's vocabulary; there is none
# (SmolLM2-135M is the family's smallest), so it is not run.
# Threads default to 1: on a loaded machine (more runnable threads than cores) llama.cpp's
# spin-waiting worker threads collapse (measured 2.8 tok/s with -t 2 vs 37 with -t 1 on 2 busy cores).
# Usage: bench/spec_lookup.sh [BUILD_DIR] [-t THREADS] [-n TOKENS] [-r REPS] [-k DRAFT_MAX]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build="$1"; shift; fi
threads=1 n=128 reps=3 k=8
while [ $# -gt 1 ]; do
  case "$1" in -t) threads="$2";; -n) n="$2";; -r) reps="$2";; -k) k="$2";; *) echo "unknown option $1" >&2; exit 2;; esac
  shift 2
done
models="${STATELM_CACHE:-$HOME/.cache/statelm}/models"
smol="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $threads, $n generated tokens, medians of $reps, draft-max $k"

echo "## (a) verify(k) / decode(1), prompt 128, medians of 9"
for f in SmolLM2-135M-Instruct.Q4_1.gguf random-lfm2-350m-q4_0.gguf random-qwen35-0.8b-q4_0.gguf; do
  [ -s "$models/$f" ] || { echo "$f: missing (scripts/fetch-models.sh, scripts/gen-fullsize-models.sh)"; continue; }
  echo "### $f"
  "$build/bench_verify_cost" "$models/$f" -t "$threads" -p 128 -r 9
done

sys="<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
<|im_start|>user
"
cat > "$tmp/code.txt" <<EOT
${sys}Rewrite this Python function so that it skips empty lines. Output the whole function.

def count_words(path):
    counts = {}
    with open(path) as f:
        for line in f:
            for word in line.split():
                word = word.lower().strip(".,;:!?")
                counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda kv: kv[1], reverse=True)
<|im_end|>
<|im_start|>assistant
EOT
cat > "$tmp/quote.txt" <<EOT
${sys}Here is a text.

The river starts in the mountains, where snow melts every spring and feeds dozens of small streams.
In the valley the river slows down and farmers use its water to grow wheat, barley and apples.
Near the coast the river splits into many channels, and the delta is home to thousands of birds.

Quote, word for word, the paragraph that talks about farmers.<|im_end|>
<|im_start|>assistant
EOT
cat > "$tmp/list.txt" <<EOT
${sys}Copy this shopping list, but replace "pears" with "plums".

- two litres of milk
- a loaf of brown bread
- six eggs
- a kilo of pears
- a bag of rice
- a jar of honey
- three tins of tomatoes<|im_end|>
<|im_start|>assistant
EOT
[ -s "$smol" ] || { echo "$smol: missing (scripts/fetch-models.sh)"; exit 1; }
llama_lookup=$(bash "$here/build-llama-bench.sh" llama-lookup 2>/dev/null) || llama_lookup=""
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "## (b) prompt lookup vs plain greedy decoding, SmolLM2-135M-Instruct Q4_1, decode tok/s"
for p in code quote list; do
  echo "### $p"
  echo "statelm:   $("$build/bench_spec_lookup" "$smol" "$tmp/$p.txt" -n "$n" -t "$threads" -r "$reps" -k "$k")"
  [ -n "$llama_lookup" ] || { echo "llama.cpp: llama-lookup could not be built (bench/build-llama-bench.sh llama-lookup)"; continue; }
  for kk in 0 "$k"; do
    : > "$tmp/tps$kk"
    for _ in $(seq "$reps"); do
      "$llama_lookup" -m "$smol" -f "$tmp/$p.txt" -n "$n" --temp 0 -t "$threads" -c 2048 --ignore-eos \
        --spec-draft-n-max "$kk" > "$tmp/out" 2> "$tmp/err" || { echo "llama-lookup failed: $(tail -3 "$tmp/err")"; break; }
      sed -nE 's/.*decoded +[0-9]+ tokens in .* speed: +([0-9.]+) t\/s.*/\1/p' "$tmp/err" >> "$tmp/tps$kk"
      acc="$(sed -nE 's/.*n_drafted += ([0-9]+).*/\1 drafted/p; s/.*n_accept += ([0-9]+).*/\1 accepted/p' "$tmp/err" | paste -sd, -)"
    done
  done
  plain=$(median < "$tmp/tps0") look=$(median < "$tmp/tps$k")
  echo "llama.cpp: plain $plain tok/s, lookup $look tok/s, x$(awk -v a="$look" -v b="$plain" 'BEGIN {printf "%.2f", a / b}'); $acc"
done
