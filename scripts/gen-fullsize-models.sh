#!/usr/bin/env bash
# Writes the full-size random-weight GGUFs that the release tests and bench/ use into the model
# cache (STATELM_CACHE, default ~/.cache/statelm/models), once: random-lfm2-350m-q4_0.gguf
# (LFM2-350M shapes, ~192 MiB, ~15 s) and random-qwen35-0.8b-q4_0.gguf (Qwen3.5-0.8B shapes,
# ~411 MiB, ~1-2 min), and their small random draft models with the same vocabularies
# (random-lfm2-350m-draft-q4_0.gguf, 12 MiB; random-qwen35-0.8b-draft-q4_0.gguf, 42 MiB), by
# scripts/gen_tiny_models.py --full (deterministic seeds; needs gguf + numpy).
# Usage: gen-fullsize-models.sh [PYTHON]. Idempotent; a file is moved into place only when complete.
set -euo pipefail
py="${1:-python3}"
models="${STATELM_CACHE:-$HOME/.cache/statelm}/models"
mkdir -p "$models"
tmp=""
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT
for shape in lfm2-350m qwen35-0.8b lfm2-350m-draft qwen35-0.8b-draft; do
  dest="$models/random-$shape-q4_0.gguf"
  [ -s "$dest" ] && continue
  tmp=$(mktemp -d "$models/.gen-XXXXXX")
  "$py" "$(dirname "$0")/gen_tiny_models.py" --full "$shape" --type q4_0 --out "$tmp" >/dev/null
  mv "$tmp/random-$shape-q4_0.gguf" "$dest"
  rmdir "$tmp"
  tmp=""
done
