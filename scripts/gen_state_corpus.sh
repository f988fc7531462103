#!/usr/bin/env bash
# gen_state_corpus.sh — seeds for tests/fuzz/fuzz_state.c in tests/data/corpus/state/: state files
# saved by `statelm run --prompt-cache` on the tiny Qwen3.5 model (KV, conv and recurrent states;
# n_ctx 64, f16 KV, as the fuzz target's session; one with q8_0 K and q4_0 V caches, which the
# target's session refuses), and damaged copies of one (truncated, a flipped data byte, bad magic,
# unknown version, empty). valid_v1_pos5.slmstate, kept from before, is a version 1 file (no V
# dtype). Usage: scripts/gen_state_corpus.sh build/statelm
set -euo pipefail
bin=${1:?usage: gen_state_corpus.sh path/to/statelm}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/tests/data/tiny/qwen35/qwen35-f32.gguf
out=$root/tests/data/corpus/state
mkdir -p "$out"
save() { # name, prompt ids, options: saves the state after all but the last id
    rm -f "$out/$1"
    "$bin" run -m "$model" --prompt-ids "$2" -n 1 --temp 0 -c 64 -t 1 --prompt-cache "$out/$1" "${@:3}" > /dev/null
}
save valid_pos1.slmstate 1,2
save valid_pos5.slmstate 1,70,81,90,100,120
save valid_pos20.slmstate 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21
save valid_q8k_q4v_pos5.slmstate 1,70,81,90,100,120 -ctk q8_0 -ctv q4_0
src=$out/valid_pos5.slmstate
n=$(stat -c %s "$src")
head -c $((n / 2)) "$src" > "$out/damaged_truncated.slmstate"
cp "$src" "$out/damaged_flipped.slmstate"
printf '\xff' | dd of="$out/damaged_flipped.slmstate" bs=1 seek=$((n / 3)) conv=notrunc status=none
{ printf 'SLMSTATX'; tail -c +9 "$src"; } > "$out/damaged_magic.slmstate"
{ head -c 8 "$src"; printf '\x09\x00\x00\x00'; tail -c +13 "$src"; } > "$out/damaged_version.slmstate"
: > "$out/damaged_empty.slmstate"
ls -l "$out"
