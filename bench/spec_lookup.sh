#!/usr/bin/env bash
# Speculative decoding benchmarks of issue 16, one run (not a test; the machine it runs on may be
# shared, so read the ratios, which compare runs of the same tool moments apart, before the tok/s):
#  (a) the cost of a verify pass of k = 1, 2, 4, 8 tokens relative to one decode step
#      (bench_verify_cost) on SmolLM2-135M and the full-size random LFM2-350M / Qwen3.5-0.8B shapes,
#      next to the same ratio for llama.cpp (llama-bench -p 1,2,4,8 -d 128: k * pp1 / ppk);
#  (b) decode tokens/s with prompt lookup vs plain greedy decoding on input-grounded prompts (rewrite
#      code with one change, quote a paragraph, fix one word in a list, rename a variable, change a
#      JSON field, comment a config file, correct spelling, extend a numbered list) with the real
#      SmolLM2 file, generation ending at the end-of-turn token (at most -n): statelm
#      (bench_spec_lookup -e 1: same prefill, then plain decode vs slm_spec lookup, medians of R)
#      next to llama.cpp's own prompt-lookup tool llama-lookup (--spec-draft-n-max K vs 0, same
#      text, runs alternated, medians of R), built from the vendored llama.cpp by
#      bench/build-llama-bench.sh; then the geometric mean of the ratios of each engine.
# What SmolLM2-135M answers matters more than the drafter: it copies the JSON, the spelling
# paragraph and the numbered list verbatim (making no edit), copies the list with one item
# changed, rewrites part of the code, paraphrases the quote, turns the config into other text and
# answers the rename with a different function (statelm run --no-chat --temp 0 -p "$(cat F)").
# llama-speculative-simple needs a smaller draft model with SmolLM2's vocabulary; there is none
# (SmolLM2-135M is the family's smallest), so it is not run.
# Threads default to 1: on a loaded machine (more runnable threads than cores) llama.cpp's
# spin-waiting worker threads collapse (measured 2.8 tok/s with -t 2 vs 37 with -t 1 on 2 busy cores).
# Usage: bench/spec_lookup.sh [BUILD_DIR] [-t THREADS] [-n TOKENS] [-r REPS] [-k DRAFT_MAX] [-a 0|1]
#   -n: the most tokens generated per task (default 256); -a 0 skips (a).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build="$1"; shift; fi
threads=1 n=256 reps=3 k=8 verify_cost=1
while [ $# -gt 1 ]; do
  case "$1" in -t) threads="$2";; -n) n="$2";; -r) reps="$2";; -k) k="$2";; -a) verify_cost="$2";;
    *) echo "unknown option $1" >&2; exit 2;; esac
  shift 2
done
models="${STATELM_CACHE:-$HOME/.cache/statelm}/models"
smol="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $threads, at most $n generated tokens, medians of $reps, draft-max $k"

llama_bench=""
[ "$verify_cost" = 0 ] || llama_bench=$(bash "$here/build-llama-bench.sh" 2>/dev/null) || llama_bench=""
[ "$verify_cost" = 0 ] || echo "## (a) verify(k) / decode(1), prompt 128, medians of 9"
[ "$verify_cost" = 0 ] || for f in SmolLM2-135M-Instruct.Q4_1.gguf random-lfm2-350m-q4_0.gguf random-qwen35-0.8b-q4_0.gguf; do
  [ -s "$models/$f" ] || { echo "$f: missing (scripts/fetch-models.sh, scripts/gen-fullsize-models.sh)"; continue; }
  echo "### $f"
  "$build/bench_verify_cost" "$models/$f" -t "$threads" -p 128 -r 9
  # llama.cpp's ceiling of the same kind: a batch of k tokens after 128 (llama-bench -p k -d 128)
  # against a batch of 1, as time per pass: k * pp1 / ppk
  [ -n "$llama_bench" ] || continue
  if "$llama_bench" -m "$models/$f" -p 1,2,4,8 -n 0 -d 128 -r 5 -t "$threads" -o json > "$tmp/lb.json" 2> "$tmp/lb.err"; then
    python3 - "$tmp/lb.json" <<'PY'
import json, sys
tps = {r["n_prompt"]: r["avg_ts"] for r in json.load(open(sys.argv[1]))}
print("llama.cpp pass of k / pass of 1: " + ", ".join(f"k={k} {k * tps[1] / tps[k]:.2f}x" for k in (2, 4, 8) if k in tps and 1 in tps))
PY
  else
    echo "llama-bench failed: $(tail -2 "$tmp/lb.err")"
  fi
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
cat > "$tmp/rename.txt" <<EOT
${sys}In this Python function, rename the variable "total" to "amount". Output the whole function.

def apply_discounts(items, rules):
    total = 0.0
    for item in items:
        price = item["price"] * item["quantity"]
        for rule in rules:
            if rule["category"] == item["category"]:
                price = price * (1.0 - rule["percent"] / 100.0)
        total += price
    if total > 100.0:
        total = total - 5.0
    return round(total, 2)
<|im_end|>
<|im_start|>assistant
EOT
cat > "$tmp/json.txt" <<EOT
${sys}Change the "port" field of this JSON object to 8443 and output the whole JSON object.

{
  "name": "inventory-service",
  "version": "2.4.1",
  "host": "0.0.0.0",
  "port": 8080,
  "debug": false,
  "database": {
    "driver": "postgres",
    "user": "inventory",
    "max_connections": 20
  },
  "allowed_origins": ["https://shop.example.com", "https://admin.example.com"]
}
<|im_end|>
<|im_start|>assistant
EOT
cat > "$tmp/config.txt" <<EOT
${sys}Add the comment "# keep logs for two weeks" above the retention line of this config file and output the whole file.

[server]
listen = 127.0.0.1:9000
workers = 4
timeout = 30

[logging]
level = info
path = /var/log/app/app.log
retention = 14d
<|im_end|>
<|im_start|>assistant
EOT
cat > "$tmp/spelling.txt" <<EOT
${sys}Correct the spelling mistakes in this paragraph and output the corrected paragraph.

Every morning the baker opens his shop at six oclock. He makes bread, rolls and cakes, and the smell of fresh bred fills the hole street. Children stop at the window on there way to school, and old people come in to buy a small loaf and talk about the wheather.
<|im_end|>
<|im_start|>assistant
EOT
cat > "$tmp/numbered.txt" <<EOT
${sys}Repeat this numbered list and add a sixth step at the end: "Enjoy your tea."

1. Fill the kettle with fresh water.
2. Bring the water to a boil.
3. Warm the teapot with a little hot water.
4. Put one spoon of tea per cup into the pot.
5. Pour the water and wait four minutes.
<|im_end|>
<|im_start|>assistant
EOT
[ -s "$smol" ] || { echo "$smol: missing (scripts/fetch-models.sh)"; exit 1; }
llama_lookup=$(bash "$here/build-llama-bench.sh" llama-lookup 2>/dev/null) || llama_lookup=""
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "## (b) prompt lookup vs plain greedy decoding, SmolLM2-135M-Instruct Q4_1, decode tok/s"
tasks="code quote list rename json config spelling numbered"
ratios_slm="" ratios_llama=""
for p in $tasks; do
  echo "### $p"
  line="$("$build/bench_spec_lookup" "$smol" "$tmp/$p.txt" -n "$n" -t "$threads" -r "$reps" -k "$k" -e 1)" || true
  echo "statelm:   $line"
  ratios_slm="$ratios_slm $(sed -nE 's/.*, x([0-9.]+);.*/\1/p' <<< "$line")"
  [ -n "$llama_lookup" ] || { echo "llama.cpp: llama-lookup could not be built (bench/build-llama-bench.sh llama-lookup)"; continue; }
  : > "$tmp/tps0"; : > "$tmp/tps$k"
  for _ in $(seq "$reps"); do
    for kk in 0 "$k"; do # alternated: the load of a shared machine changes by the minute
      "$llama_lookup" -m "$smol" -f "$tmp/$p.txt" -n "$n" --temp 0 -t "$threads" -c 2048 \
        --spec-draft-n-max "$kk" > "$tmp/out" 2> "$tmp/err" || { echo "llama-lookup failed: $(tail -3 "$tmp/err")"; break 2; }
      sed -nE 's/.*decoded +[0-9]+ tokens in .* speed: +([0-9.]+) t\/s.*/\1/p' "$tmp/err" >> "$tmp/tps$kk"
      [ "$kk" = 0 ] || acc="$(sed -nE 's/.*decoded +([0-9]+) tokens in .*/\1 decoded/p; s/.*n_drafted += ([0-9]+).*/\1 drafted/p; s/.*n_accept += ([0-9]+).*/\1 accepted/p' "$tmp/err" | paste -sd, -)"
    done
  done
  plain=$(median < "$tmp/tps0") look=$(median < "$tmp/tps$k")
  ratio=$(awk -v a="$look" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')
  ratios_llama="$ratios_llama $ratio"
  echo "llama.cpp: plain $plain tok/s, lookup $look tok/s, x$ratio; $acc"
done
geomean() { awk '{s = 0; for (i = 1; i <= NF; i++) s += log($i); printf "%.2f (%d tasks)", exp(s / NF), NF}'; }
echo "## geometric mean of lookup / plain: statelm x$(geomean <<< "$ratios_slm"), llama.cpp x$(geomean <<< "$ratios_llama")"
