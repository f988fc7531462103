#!/usr/bin/env bash
# The KV cache types on the command line (-ctk/-ctv, --cache-type-k/-v: f16, f32, q8_0, q4_0):
# run with each, bench naming them (--json type_k, type_v, kv_bytes: q8_0 34/64 and q4_0 18/64 of
# f16's bytes), the refusals (an unknown type; a model whose head dimension is not a multiple of
# 32), and the ane profile converting a quantised cache to f16 with a reason (check, export
# --check-only).
# Usage: test_kv_types.sh STATELM TESTS_DATA_DIR
set -u
statelm="$1"; data="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }
qwen3="$data/tiny/qwen3/qwen3-f32.gguf"
llama="$data/tiny/llama/llama-f32.gguf"
gemma3="$data/tiny/gemma3/gemma3-f32.gguf"

for t in "-ctk q8_0 -ctv q8_0" "--cache-type-k q4_0 --cache-type-v q4_0" "-ctk q8_0 -ctv f16" "-ctk f32 -ctv q4_0"; do
  # shellcheck disable=SC2086
  if ! "$statelm" run -m "$gemma3" --prompt-ids 1,2,3,4,5 -n 12 --temp 0 --ids -c 64 $t >"$tmp/out" 2>"$tmp/err"; then
    fail "run $t: $(cat "$tmp/err")"
  elif [ "$(wc -w <"$tmp/out")" -lt 12 ]; then
    fail "run $t: fewer than 12 ids: $(cat "$tmp/out")"
  else
    echo "ok: run $t"
  fi
done

# bench names the types; the KV bytes scale with the block sizes
kvb() { "$statelm" bench -m "$qwen3" -p 4 -n 2 -r 1 -t 1 --json "$@" 2>"$tmp/err" |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["type_k"], d["type_v"], d["kv_bytes"])'; }
f16=$(kvb) q8=$(kvb -ctk q8_0 -ctv q8_0) q4=$(kvb -ctk q4_0 -ctv q4_0) mix=$(kvb -ctk q8_0)
set -- $f16; b16=$3; [ "$1 $2" = "f16 f16" ] || fail "bench default: $f16"
set -- $q8; [ "$1 $2" = "q8_0 q8_0" ] && [ $(( $3 * 64 )) -eq $(( b16 * 34 )) ] || fail "bench q8_0: $q8 (f16 $b16)"
set -- $q4; [ "$1 $2" = "q4_0 q4_0" ] && [ $(( $3 * 64 )) -eq $(( b16 * 18 )) ] || fail "bench q4_0: $q4 (f16 $b16)"
set -- $mix; [ "$1 $2" = "q8_0 f16" ] || fail "bench -ctk q8_0: $mix"
echo "ok: bench types and bytes: f16 $f16 | $q8 | $q4 | $mix"

# refusals: one line naming what is wrong
expect_fail() {
  local what="$1" pattern="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then fail "$what: exit status $rc"; return; fi
  if ! grep -Eq -e "$pattern" "$tmp/err"; then fail "$what: message does not match /$pattern/: $(cat "$tmp/err")"; return; fi
  echo "ok: $what: $(head -1 "$tmp/err")"
}
expect_fail "unknown type" "-ctk q5_1: not f16, f32, q8_0 or q4_0" "$statelm" run -m "$qwen3" -p hi -n 1 -ctk q5_1
expect_fail "head dimension 16" "quantised V cache needs a head dimension that is a multiple of 32 \(this model's is 16\)" \
  "$statelm" run -m "$llama" -p hi -n 1 -ctv q4_0
expect_fail "bench head dimension 16" "multiple of 32" "$statelm" bench -m "$llama" -p 4 -n 2 -r 1 -ctk q8_0

# the ane profile casts a quantised cache to f16, saying why; the export then goes through
"$statelm" check -m "$qwen3" --target ane -ctk q8_0 -ctv q4_0 >"$tmp/check" 2>&1
grep -q "cast blk.0.kv_k to f16; warning: the q8_0 KV cache becomes f16 on the target: not quantised there" "$tmp/check" ||
  fail "check --target ane -ctk q8_0: no cast with a reason: $(grep -m2 kv_k "$tmp/check")"
grep -q "cast blk.0.kv_v to f16; warning: the q4_0 KV cache becomes f16" "$tmp/check" || fail "check: no cast of the q4_0 V cache"
if "$statelm" export -m "$qwen3" --target coreml --check-only -ctk q8_0 -ctv q4_0 >"$tmp/export" 2>&1 &&
   grep -q "exportable: yes" "$tmp/export"; then
  echo "ok: export --check-only with q8_0/q4_0 KV: converted to f16 with a reason"
else
  fail "export --check-only -ctk q8_0: $(tail -2 "$tmp/export")"
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all KV type checks passed"
