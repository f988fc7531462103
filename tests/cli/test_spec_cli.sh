#!/usr/bin/env bash
# statelm run --lookup / --draft-model: at --temp 0 the generated ids equal plain greedy decoding on
# every tiny architecture, for several --draft-max, with a draft model of another architecture;
# the summary line on stderr names drafted and accepted tokens; option misuse is refused.
# Usage: test_spec_cli.sh STATELM TESTS_DATA_DIR
set -u
statelm="$1"; data="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=1; }
ids="3,17,42,99,5,17,42,99,7,250,17,42"
for arch in llama qwen3 lfm2 qwen35 gemma3; do
  m="$data/tiny/$arch/$arch-f32.gguf"
  "$statelm" run -m "$m" --prompt-ids "$ids" -n 40 --temp 0 --ignore-eos --ids -c 128 > "$tmp/plain" 2> "$tmp/err" || fail "$arch plain run: $(cat "$tmp/err")"
  for opt in "--lookup" "--lookup --draft-max 1" "--lookup --draft-max 3" "--draft-model $data/tiny/lfm2/lfm2-f32.gguf --draft-max 4" \
             "--draft-model $m"; do
    "$statelm" run -m "$m" --prompt-ids "$ids" -n 40 --temp 0 --ignore-eos --ids -c 128 $opt > "$tmp/spec" 2> "$tmp/err" ||
      { fail "$arch $opt: $(cat "$tmp/err")"; continue; }
    cmp -s "$tmp/plain" "$tmp/spec" || fail "$arch $opt: ids differ from greedy decoding: $(cat "$tmp/spec") vs $(cat "$tmp/plain")"
    grep -qE "^statelm: speculation \((lookup|draft model), draft-max [0-9]+\): 40 tokens in [0-9]+ passes, [0-9]+ drafted, [0-9]+ accepted \(acceptance [0-9.]+%\)" "$tmp/err" ||
      fail "$arch $opt: no summary line: $(cat "$tmp/err")"
  done
done
m="$data/tiny/llama/llama-f32.gguf"
refuse() { # what, pattern, args...
  local what="$1" pattern="$2"; shift 2
  if "$statelm" run -m "$m" --prompt-ids "$ids" -n 4 "$@" > "$tmp/out" 2> "$tmp/err"; then fail "$what succeeded"; return; fi
  grep -qE "$pattern" "$tmp/err" || fail "$what: message: $(cat "$tmp/err")"
}
# sampling: speculative sampling runs (its distribution is checked in tests/unit/test_spec.c)
"$statelm" run -m "$m" --prompt-ids "$ids" -n 24 --temp 0.7 --seed 3 --ignore-eos --ids --lookup > "$tmp/spec" 2> "$tmp/err" ||
  fail "sampling with --lookup: $(cat "$tmp/err")"
[ "$(wc -w < "$tmp/spec")" -eq 24 ] || fail "sampling with --lookup: not 24 ids: $(cat "$tmp/spec")"
grep -q "^statelm: speculation (lookup" "$tmp/err" || fail "sampling with --lookup: no summary line"
refuse "both drafters" "give one of" --lookup --draft-model "$m"
refuse "draft-max alone" "need --lookup" --draft-max 4
refuse "draft-max 0" "draft-max" --lookup --draft-max 0
refuse "logprobs with lookup" "logprobs" --lookup --logprobs 3
refuse "missing draft model" "draft model" --draft-model "$tmp/none.gguf"
[ $fails -eq 0 ] && echo "speculation CLI: all checks passed"
exit $fails
