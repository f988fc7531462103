#!/usr/bin/env bash
# Bad input through the command line: each case must exit non-zero with a one-line message on
# stderr naming what is wrong (and the byte offset for binary files) — never crash.
# Usage: test_bad_input.sh STATELM TESTS_DATA_DIR
set -u
statelm="$1"; data="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0

# expect_fail DESCRIPTION 'regex the message must match' command...
expect_fail() {
  local what="$1" pattern="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
    echo "FAIL: $what: exit status $rc (want an error exit, not success or a signal)"; fails=$((fails+1)); return
  fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    echo "FAIL: $what: expected one line on stderr, got:"; cat "$tmp/err"; fails=$((fails+1)); return
  fi
  if ! grep -Eq "$pattern" "$tmp/err"; then
    echo "FAIL: $what: message does not match /$pattern/:"; cat "$tmp/err"; fails=$((fails+1)); return
  fi
  echo "ok: $what: $(cat "$tmp/err")"
}

gguf="$data/tiny/llama/llama-f32.gguf"
size=$(stat -c %s "$gguf")
head -c 2 "$gguf" >"$tmp/magic_only.gguf"
head -c 100 "$gguf" >"$tmp/in_metadata.gguf"
head -c $((size - 1000)) "$gguf" >"$tmp/in_data.gguf"
printf 'GGUX\003\000\000\000' >"$tmp/bad_magic.gguf"; head -c 200 /dev/zero >>"$tmp/bad_magic.gguf"
{ printf 'GGUF\001\000\000\000'; head -c 200 /dev/zero; } >"$tmp/v1.gguf"
: >"$tmp/empty.gguf"

expect_fail "missing file" "cannot open" "$statelm" info -m "$tmp/nope.gguf"
expect_fail "empty file" "truncated|offset" "$statelm" info -m "$tmp/empty.gguf"
expect_fail "truncated in the magic" "truncated.*offset" "$statelm" info -m "$tmp/magic_only.gguf"
expect_fail "truncated in the metadata" "offset [0-9]+" "$statelm" info -m "$tmp/in_metadata.gguf"
expect_fail "truncated in the tensor data" "(outside|beyond|past|end of) .*file|offset" "$statelm" info -m "$tmp/in_data.gguf"
expect_fail "wrong magic" "magic" "$statelm" info -m "$tmp/bad_magic.gguf"
expect_fail "GGUF version 1" "version" "$statelm" info -m "$tmp/v1.gguf"

# Hugging Face folders
cp -r "$data/tiny/qwen3/hf" "$tmp/hf_broken"
head -c 120 "$data/tiny/qwen3/hf/config.json" >"$tmp/hf_broken/config.json"
expect_fail "config.json truncated" "config.json.*offset [0-9]+" "$statelm" info -m "$tmp/hf_broken"
cp -r "$data/tiny/qwen3/hf" "$tmp/hf_arch"
sed -i 's/"model_type": "qwen3"/"model_type": "gpt_neox"/' "$tmp/hf_arch/config.json"
expect_fail "unsupported architecture" "unsupported architecture 'gpt_neox' \(supported: llama, qwen3, lfm2, qwen35, gemma3\)" \
  "$statelm" info -m "$tmp/hf_arch"
cp -r "$data/tiny/qwen3/hf" "$tmp/hf_noweights"
rm "$tmp/hf_noweights/model.safetensors"
expect_fail "folder without weights" "safetensors" "$statelm" info -m "$tmp/hf_noweights"
cp -r "$data/tiny/qwen3/hf" "$tmp/hf_shape"
sed -i 's/"intermediate_size": [0-9]*/"intermediate_size": 64/; s/"head_dim": 32/"head_dim": 16/' "$tmp/hf_shape/config.json"
expect_fail "tensor shape disagrees with config" "tensor blk\.0\.attn_q\.weight has shape" \
  "$statelm" run -m "$tmp/hf_shape" --prompt-ids 1,2,3 -n 1

# Bad prompts and options: a status and a message, nothing generated
expect_fail "token id out of range" "out-of-range id|out of range" "$statelm" run -m "$gguf" --prompt-ids 1,2,999999 -n 1
expect_fail "negative token id" "entry 2 '-5' has a sign" "$statelm" run -m "$gguf" --prompt-ids 1,-5 -n 1
expect_fail "prompt longer than the context" "do not fit" "$statelm" run -m "$gguf" --prompt-ids 1,2,3,4,5,6 -c 4 -n 1
expect_fail "malformed option value" "expects a number" "$statelm" run -m "$gguf" --prompt-ids 1 --temp abc
expect_fail "unknown option" "unknown option" "$statelm" run -m "$gguf" --prompt-ids 1 --frobnicate
expect_fail "both prompt forms" "exactly one" "$statelm" run -m "$gguf" --prompt-ids 1 -p hi
expect_fail "unknown chat template" "chat template" "$statelm" run -m "$gguf" -p hi --chat-template nosuch -n 1
printf '{%% for m in messages %%}\n{{ m.content ]] }}' >"$tmp/bad.jinja"
printf '{{ raise_exception("no system role here") }}' >"$tmp/raises.jinja"
expect_fail "chat template that does not parse" "2:[0-9]+: .*SLM_ERR_FORMAT" "$statelm" run -m "$gguf" -p hi --chat-template-file "$tmp/bad.jinja" -n 1
expect_fail "chat template that raises" "no system role here" "$statelm" run -m "$gguf" -p hi --chat-template-file "$tmp/raises.jinja" -n 1
expect_fail "missing chat template file" "nosuch.jinja: cannot open" "$statelm" run -m "$gguf" -p hi --chat-template-file "$tmp/nosuch.jinja" -n 1
expect_fail "both template options" "one of --chat-template and --chat-template-file" "$statelm" run -m "$gguf" -p hi --chat-template chatml --chat-template-file "$tmp/bad.jinja" -n 1
expect_fail "chat_template_kwargs not an object" "chat_template_kwargs" "$statelm" run -m "$gguf" -p hi --chat-template-kwargs '[1]' -n 1

[ $fails -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "all bad-input cases handled"
