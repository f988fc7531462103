#!/usr/bin/env bash
# statelm run --lookup / --draft-model on the full-size random-weight LFM2-350M and Qwen3.5-0.8B
# shapes (scripts/gen-fullsize-models.sh): at --temp 0, with --draft-max 1, 4 and 8, the generated
# ids equal plain greedy decoding token for token. Draft models: the target itself (every draft
# accepted) and a small random model with the same vocabulary (drafts almost all rejected); the
# summary line's counts are checked to be those cases. Lookup runs on a plain and a repetitive
# prompt; random weights do not copy their context, so lookup drafts little there (counts printed).
# A missing model file FAILS (exit 1): CI generates them. Skipped (77) only when the files are
# missing and cannot be generated here (no Python with gguf + numpy).
# Usage: spec_fullsize.sh STATELM (models in ${STATELM_CACHE:-~/.cache/statelm}/models; Python: $SLM_PYTHON)
set -u
statelm="$1"; models="${STATELM_CACHE:-$HOME/.cache/statelm}/models"; py="${SLM_PYTHON:-python3}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=1; }
for a in lfm2-350m qwen35-0.8b; do
  for f in "random-$a-q4_0.gguf" "random-$a-draft-q4_0.gguf"; do
    [ -s "$models/$f" ] && continue
    if ! "$py" -c "import gguf, numpy" 2>/dev/null; then
      echo "SKIPPED: $models/$f is missing and $py has no gguf + numpy to generate it"
      echo "SKIPPED: run scripts/gen-fullsize-models.sh PYTHON (scripts/test.sh does)"
      exit 77
    fi
    echo "FAIL: $models/$f is missing (scripts/gen-fullsize-models.sh makes it; scripts/test.sh runs it)"
    exit 1
  done
done
plain_ids="3,17,42,99,5,17,42,99,7,250,17,42"
rep_ids=$(printf '11,23,5,77,190,%.0s' {1..10})11,23,5
summary() { # file -> "drafted accepted"
  sed -nE 's/^statelm: speculation \((lookup|draft model), draft-max [0-9]+\): [0-9]+ tokens in [0-9]+ passes, ([0-9]+) drafted, ([0-9]+) accepted.*/\2 \3/p' "$1"
}
n=24
for a in lfm2-350m qwen35-0.8b; do
  m="$models/random-$a-q4_0.gguf"; small="$models/random-$a-draft-q4_0.gguf"
  for prompt in plain rep; do
    ids=$plain_ids; [ $prompt = rep ] && ids=$rep_ids
    run() { "$statelm" run -m "$m" --prompt-ids "$ids" -n $n --temp 0 --ignore-eos --ids -c 256 "$@"; }
    run > "$tmp/plain" 2> "$tmp/err" || { fail "$a $prompt plain run: $(cat "$tmp/err")"; continue; }
    for k in 1 4 8; do
      opts=("--lookup --draft-max $k")
      [ $prompt = plain ] && opts+=("--draft-model $m --draft-max $k" "--draft-model $small --draft-max $k")
      for opt in "${opts[@]}"; do
        # shellcheck disable=SC2086
        run $opt > "$tmp/spec" 2> "$tmp/err" || { fail "$a $prompt $opt: $(cat "$tmp/err")"; continue; }
        cmp -s "$tmp/plain" "$tmp/spec" ||
          fail "$a $prompt $opt: ids differ from greedy decoding: $(cat "$tmp/spec") vs $(cat "$tmp/plain")"
        read -r drafted accepted <<< "$(summary "$tmp/err")"
        [ -n "${accepted:-}" ] || { fail "$a $prompt $opt: no summary line: $(cat "$tmp/err")"; continue; }
        echo "$a $prompt $opt: $drafted drafted, $accepted accepted"
        case "$opt" in
          "--draft-model $m "*) [ "$drafted" -gt 0 ] && [ "$accepted" -eq "$drafted" ] ||
                                  fail "$a $opt: the target as its own draft must have every draft accepted";;
          "--draft-model $small "*) [ "$drafted" -gt 0 ] && [ $((accepted * 4)) -le "$drafted" ] ||
                                      fail "$a $opt: a random draft model should have most drafts rejected";;
        esac
      done
    done
  done
done
[ $fails -eq 0 ] && echo "speculation on full-size shapes: all checks passed"
exit $fails
