#!/usr/bin/env bash
# Builds scripts/llama_logits.cpp against the native llama.cpp build (static libraries of the
# llama-cpp-python 0.3.36 sdist, GGML_NATIVE=ON, GGML_OPENMP=ON) into
# ~/.cache/statelm/llama-logits/llama-logits; does nothing when that binary is newer than the source.
# Link line (the libraries' order matters for static linking; -fopenmp because ggml-cpu uses OpenMP):
#   c++ -O2 -std=c++17 -I$SRC/include -I$SRC/ggml/include llama_logits.cpp
#       $BUILD/src/libllama.a $BUILD/ggml/src/libggml.a $BUILD/ggml/src/libggml-cpu.a
#       $BUILD/ggml/src/libggml-base.a -fopenmp -lpthread -ldl -lm
# Usage: bash scripts/build-llama-logits.sh   (prints the binary's path)
set -euo pipefail
CACHE=${STATELM_CACHE:-$HOME/.cache/statelm}
BUILD=$CACHE/llama-bench-0.3.36-native/build
SRC=$CACHE/src/llama_cpp_python-0.3.36/vendor/llama.cpp
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$CACHE/llama-logits/llama-logits
for f in "$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$SRC/include/llama.h"; do
    [ -e "$f" ] || { echo "build-llama-logits: $f is missing (the native llama.cpp build)" >&2; exit 1; }
done
mkdir -p "$(dirname "$OUT")"
if [ ! "$OUT" -nt "$HERE/llama_logits.cpp" ] || [ ! "$OUT" -nt "$BUILD/src/libllama.a" ]; then
    c++ -O2 -std=c++17 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" "$HERE/llama_logits.cpp" \
        "$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a" \
        "$BUILD/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -lm -o "$OUT.tmp"
    mv "$OUT.tmp" "$OUT"
fi
echo "$OUT"
