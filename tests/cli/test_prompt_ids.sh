#!/usr/bin/env bash
# --prompt-ids, one parser for run, plan and score: ids separated by commas or spaces give the
# same result; every malformed list (empty entry, sign, non-digit, past INT32_MAX, outside the
# vocabulary) is refused before anything runs: a non-signal error exit, one line on stderr naming
# the entry and its position, nothing on stdout. Space-separated lists once overflowed a buffer
# sized by counting commas (ASan heap-buffer-overflow in score).
# Usage: test_prompt_ids.sh STATELM TESTS_DATA_DIR
set -u
statelm="$1"; data="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
gguf="$data/tiny/llama/llama-f32.gguf"   # vocabulary of 320 ids

# expect_refused WHAT 'regex of the message' command...
expect_refused() {
  local what="$1" pattern="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
    echo "FAIL: $what: exit status $rc (want an error exit)"; cat "$tmp/err"; fails=$((fails+1)); return
  fi
  if [ -s "$tmp/out" ]; then
    echo "FAIL: $what: printed on stdout before refusing:"; head -3 "$tmp/out"; fails=$((fails+1)); return
  fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -Eq "$pattern" "$tmp/err"; then
    echo "FAIL: $what: want one line matching /$pattern/, got:"; cat "$tmp/err"; fails=$((fails+1)); return
  fi
  echo "ok: $what: $(cat "$tmp/err")"
}

# expect_same WHAT FILE_A FILE_B
expect_same() {
  if ! cmp -s "$2" "$3"; then
    echo "FAIL: $1: outputs differ:"; diff "$2" "$3" | head -5; fails=$((fails+1)); return
  fi
  echo "ok: $1"
}

# A long space-separated list: 200 ids in a buffer once sized for 1.
spaced=$(seq -s ' ' 1 200)
commas=$(seq -s ',' 1 200)
for cmd in score run; do
  extra=(); [ $cmd = run ] && extra=(--temp 0 --ids -n 2 --ignore-eos -c 256)
  "$statelm" $cmd -m "$gguf" --prompt-ids "$spaced" "${extra[@]}" >"$tmp/spaced" 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: $cmd with 200 space-separated ids: exit $rc"; head -5 "$tmp/err"; fails=$((fails+1)); fi
  "$statelm" $cmd -m "$gguf" --prompt-ids "$commas" "${extra[@]}" >"$tmp/commas" 2>/dev/null
  "$statelm" $cmd -m "$gguf" --prompt-ids " ${commas//,/ , } " "${extra[@]}" >"$tmp/mixed" 2>/dev/null
  expect_same "$cmd: '1 2 3 ...' reads as '1,2,3,...'" "$tmp/spaced" "$tmp/commas"
  expect_same "$cmd: ' 1 , 2 , 3 ... ' reads as '1,2,3,...'" "$tmp/mixed" "$tmp/commas"
done
"$statelm" score -m "$gguf" --prompt-ids "$spaced" | wc -l >"$tmp/n"
[ "$(cat "$tmp/n")" -eq 200 ] || { echo "FAIL: score printed $(cat "$tmp/n") positions for 200 ids"; fails=$((fails+1)); }

for cmd in run score plan; do
  args=(-m "$gguf")
  [ $cmd = run ] && args+=(-n 1)
  [ $cmd = plan ] && args+=(--simulate -n 1)
  expect_refused "$cmd: empty list" "no ids" "$statelm" $cmd "${args[@]}" --prompt-ids " "
  expect_refused "$cmd: empty entry" "entry 2 is empty" "$statelm" $cmd "${args[@]}" --prompt-ids "1,,2"
  expect_refused "$cmd: trailing comma" "entry 3 is empty" "$statelm" $cmd "${args[@]}" --prompt-ids "1,2,"
  expect_refused "$cmd: negative id" "entry 2 '-5' has a sign" "$statelm" $cmd "${args[@]}" --prompt-ids "1,-5"
  expect_refused "$cmd: plus sign" "entry 1 '\+1' has a sign" "$statelm" $cmd "${args[@]}" --prompt-ids "+1,2"
  expect_refused "$cmd: not a number" "entry 3 '3x' is not a decimal id" "$statelm" $cmd "${args[@]}" --prompt-ids "1 2 3x"
  expect_refused "$cmd: past INT32_MAX" "entry 2 '4294967297' is larger than 2147483647" \
    "$statelm" $cmd "${args[@]}" --prompt-ids "1,4294967297"
  expect_refused "$cmd: outside the vocabulary" "entry 2 '320' is out of range.* 0 to 319" \
    "$statelm" $cmd "${args[@]}" --prompt-ids "1,320,2"
done

[ $fails -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "all --prompt-ids cases handled"
