#!/usr/bin/env bash
# The schema corpus at full size (issue 25: 100% valid over >= 1,000 samples per model): every JSON
# Schema of tests/data/grammar/schemas sampled with `statelm run --json-schema` at temperature 1
# (no top-k, top-p or min-p cut) over 31 seeds each (31 x 34 = 1,054 samples per model) on
# SmolLM2-135M-Instruct and Gemma 3 270M, each output validated by the jsonschema package
# (tests/py/test_grammar_schemas.py does the work; CI runs it with one seed). Outputs are capped at
# 160 tokens; one cut there is counted, not validated. Too slow for every CI run: tens of CPU
# minutes, most of them Gemma's (each sample is one process, which builds the 262k-token trie).
# Usage: grammar-corpus.sh [BUILD_DIR] (default build); SLM_GRAMMAR_MODELS, SLM_GRAMMAR_JOBS as the
# test takes them. Exit status: the test's (0 when every complete output validated).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
python="${SLM_PYTHON:-$HOME/.cache/statelm/venv-test/bin/python}"
SLM_GRAMMAR_SAMPLES="${SLM_GRAMMAR_SAMPLES:-31}" SLM_GRAMMAR_N_PREDICT="${SLM_GRAMMAR_N_PREDICT:-160}" \
  exec "$python" "$root/tests/py/test_grammar_schemas.py" "$build/statelm" "$root/tests/data"
