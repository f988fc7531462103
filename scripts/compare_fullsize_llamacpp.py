#!/usr/bin/env python3
"""Greedy top-1 agreement of statelm and llama.cpp on the full-size random-weight GGUFs (real
LFM2-350M and Qwen3.5-0.8B shapes, Q4_0 and Q8_0; scripts/gen_tiny_models.py --full writes them
to ~/.cache/statelm/models). Both are fed the same 128 random ids (teacher forcing) and the argmax
of the next-token logits is compared at every position. Random weights make near-ties, so exact
agreement is not expected; the goal is >= 95% of positions. Prints a markdown table; exits 1 below
the goal. Not a CTest test (needs llama-cpp-python and files outside the repository).

Usage: ~/.cache/statelm/venv-llama-new/bin/python scripts/compare_fullsize_llamacpp.py build/statelm"""
import json
import os
import subprocess
import sys
from pathlib import Path

import llama_cpp
import numpy as np

STATELM = sys.argv[1] if len(sys.argv) > 1 else "build/statelm"
MODELS = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm")) / "models"
NAMES = ["random-lfm2-350m-q4_0", "random-lfm2-350m-q8_0", "random-qwen35-0.8b-q4_0", "random-qwen35-0.8b-q8_0"]
N, GOAL = 128, 0.95

rows, ok = [], True
for name in NAMES:
    path = MODELS / f"{name}.gguf"
    if not path.exists():
        print(f"skipping {name}: {path} is absent")
        continue
    llm = llama_cpp.Llama(str(path), n_ctx=N, n_batch=N, n_ubatch=N, n_threads=2, logits_all=True, verbose=False)
    rng = np.random.default_rng(7)
    ids = [int(x) for x in rng.integers(16, min(llm.n_vocab(), 60000), N)]
    llm.eval(ids)
    ref = np.array(llm.scores[:N])
    del llm
    out = subprocess.run([STATELM, "score", "-m", str(path), "--prompt-ids", ",".join(map(str, ids)), "--top", "1",
                          "-t", "2", "-c", str(N)], capture_output=True, text=True, check=True).stdout
    ours = [json.loads(line)["top"][0][0] for line in out.splitlines()]
    theirs = ref.argmax(axis=1).tolist()
    agree = sum(a == b for a, b in zip(ours, theirs)) / N
    srt = np.sort(ref, axis=1)
    margins = [float(srt[i, -1] - srt[i, -2]) for i in range(N) if ours[i] != theirs[i]]
    rows.append((name, agree, max(margins) if margins else 0.0))
    ok &= agree >= GOAL

print("| model | top-1 agreement (128 positions) | largest llama.cpp top-2 margin where they differ |")
print("|---|---|---|")
for name, agree, margin in rows:
    print(f"| {name} | {agree:.1%} | {margin:.4f} |")
sys.exit(0 if ok and rows else 1)
