#!/usr/bin/env bash
# logits_digest_all.sh — before/after bit-identity records across refactors. Runs logits_digest
# (scripts/logits_digest.c) from one build over every model and kernel setting below and writes one
# text file per model x setting into OUT_DIR. Record once with the build before a change and once
# with the build after it, then `diff -r BEFORE AFTER`: any difference is a changed logit bit.
#
# Usage: scripts/logits_digest_all.sh BUILD_DIR OUT_DIR [MODELS_DIR...]
#   BUILD_DIR   a build with the logits_digest target (cmake --build BUILD_DIR --target logits_digest)
#   OUT_DIR     created if missing; existing *.txt there are replaced
#   MODELS_DIR  folders searched for the full-size models (default: ~/.cache/statelm/models and
#               /tmp/peer/models): SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-models.sh) and
#               random-lfm2-350m-q4_0.gguf, random-lfm2-350m-q8_0.gguf, random-qwen35-0.8b-q4_0.gguf
#               (scripts/gen_tiny_models.py --full). A model not found is listed in OUT_DIR/MISSING.
# Models and settings (threads 2, KV f16 unless named):
#   tiny (tests/data/tiny/<arch>: f32 and q8_0 GGUF, HF folder): kernels auto, generic, ref, each
#     also with --kv f32;
#   SmolLM2-135M Q4_1: auto, generic, ref;  full-size random models: auto, generic (ref is too slow).
# The tiny models come from this script's checkout, else from BUILD_DIR's source tree (SLM_TINY_DIR
# overrides). The tier is passed with
# logits_digest --kernels, so the records stay comparable when the library's way of choosing it
# changes. Exit status 1 if any run failed (its error text is in its file).
set -u

if [ $# -lt 2 ]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
fi
build=$1
out=$2
shift 2
if [ $# -gt 0 ]; then model_dirs=("$@"); else model_dirs=("$HOME/.cache/statelm/models" /tmp/peer/models); fi

tool=$build/logits_digest
if [ ! -x "$tool" ]; then
    echo "logits_digest_all: $tool not found; build it with: cmake --build $build --target logits_digest" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
tiny=${SLM_TINY_DIR:-$here/../tests/data/tiny}
if [ -z "${SLM_TINY_DIR:-}" ] && [ ! -d "$tiny/llama" ] && [ -f "$build/CMakeCache.txt" ]; then
    tiny=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")/tests/data/tiny
fi
if [ ! -d "$tiny/llama" ]; then
    echo "logits_digest_all: no tiny models in $tiny (set SLM_TINY_DIR)" >&2
    exit 2
fi
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/MISSING
n_fail=0
start=$(date +%s)

# run NAME MODEL_PATH KERNELS [extra args...]: one record, OUT_DIR/NAME.KERNELS[.extra].txt
run() {
    local name=$1 model=$2 kernels=$3
    shift 3
    local file=$out/$name.$kernels
    [ "$*" = "--kv f32" ] && file=$file.kv-f32
    file=$file.txt
    local t0=$(date +%s)
    if ! "$tool" -m "$model" -t 2 --kernels "$kernels" "$@" >"$file" 2>&1; then
        echo "FAILED: $name $kernels $*" >&2
        n_fail=$((n_fail + 1))
    fi
    echo "$(basename "$file"): $(( $(date +%s) - t0 )) s" >&2
}

for arch in llama qwen3 lfm2 qwen35; do
    for form in f32 q8_0 hf; do
        if [ "$form" = hf ]; then model=$tiny/$arch/hf; else model=$tiny/$arch/$arch-$form.gguf; fi
        for k in auto generic ref; do
            run "tiny-$arch-$form" "$model" "$k"
            run "tiny-$arch-$form" "$model" "$k" --kv f32
        done
    done
done

find_model() {
    local d
    for d in "${model_dirs[@]}"; do
        if [ -f "$d/$1" ]; then echo "$d/$1"; return 0; fi
    done
    return 1
}

: >"$out/MISSING"
for spec in "SmolLM2-135M-Instruct.Q4_1.gguf smollm2-135m-q4_1 auto generic ref" \
            "random-lfm2-350m-q4_0.gguf random-lfm2-350m-q4_0 auto generic" \
            "random-lfm2-350m-q8_0.gguf random-lfm2-350m-q8_0 auto generic" \
            "random-qwen35-0.8b-q4_0.gguf random-qwen35-0.8b-q4_0 auto generic"; do
    read -r file name kernels <<<"$spec"
    if ! model=$(find_model "$file"); then
        echo "$file" >>"$out/MISSING"
        echo "missing: $file" >&2
        continue
    fi
    for k in $kernels; do run "$name" "$model" "$k"; done
done

echo "logits_digest_all: $(ls "$out"/*.txt | wc -l) files in $out, $n_fail failed, $(( $(date +%s) - start )) s" >&2
[ "$n_fail" -eq 0 ]
