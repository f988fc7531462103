#!/usr/bin/env python3
"""Greedy top-1 agreement of statelm and llama.cpp on the full-size random-weight GGUFs (real
LFM2-350M and Qwen3.5-0.8B shapes; scripts/gen_tiny_models.py --full writes them to
~/.cache/statelm/models). Both are fed the same 128 random ids (teacher forcing) and the argmax of
the next-token logits is compared at every position.

Random weights make near-ties, so the table also gives the noise floor: llama.cpp against itself
with flash attention switched on (same file, same arithmetic otherwise). For the F32 files both
engines run f32 everywhere (f32 KV cache, statelm's scalar reference kernels): there the two must
agree on every position. Goal for the quantised files: >= 95%. Prints a markdown table; exits 1 if
an F32 file disagrees anywhere. Not a CTest test (needs llama-cpp-python and files outside the
repository).

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
NAMES = ["random-lfm2-350m-q4_0", "random-lfm2-350m-q8_0", "random-lfm2-350m-f32",
         "random-qwen35-0.8b-q4_0", "random-qwen35-0.8b-q8_0", "random-qwen35-0.8b-f32"]
N = 128


def llama_logits(path, ids, **kw):
    llm = llama_cpp.Llama(str(path), n_ctx=N, n_batch=N, n_ubatch=N, n_threads=2, logits_all=True, verbose=False, **kw)
    llm.eval(ids)
    rows = np.array(llm.scores[:N])
    del llm
    return rows


rows, ok = [], True
for name in NAMES:
    path = MODELS / f"{name}.gguf"
    if not path.exists():
        print(f"skipping {name}: {path} is absent")
        continue
    f32 = name.endswith("f32")
    rng = np.random.default_rng(7)
    ids = [int(x) for x in rng.integers(16, 60000, N)]
    kv = {"type_k": 0, "type_v": 0} if f32 else {}
    ref = llama_logits(path, ids, **kv)
    alt = llama_logits(path, ids, flash_attn=True, **kv)
    args = [STATELM, "score", "-m", str(path), "--prompt-ids", ",".join(map(str, ids)), "--top", "1", "-t", "2",
            "-c", str(N)] + (["--kv-f32"] if f32 else [])
    env = dict(os.environ, **({"SLM_KERNELS": "ref"} if f32 else {}))
    out = subprocess.run(args, capture_output=True, text=True, check=True, env=env).stdout
    ours = np.array([json.loads(line)["top"][0][0] for line in out.splitlines()])
    theirs = ref.argmax(axis=1)
    agree, floor = float((ours == theirs).mean()), float((alt.argmax(axis=1) == theirs).mean())
    srt = np.sort(ref, axis=1)
    margins = srt[:, -1] - srt[:, -2]
    worst = float(margins[ours != theirs].max()) if (ours != theirs).any() else 0.0
    rows.append((name, agree, floor, float(np.median(margins)), worst))
    if f32 and agree < 1.0:
        ok = False

print("| model | statelm = llama.cpp | llama.cpp flash-attn = llama.cpp | median top-2 margin | largest margin where statelm differs |")
print("|---|---|---|---|---|")
for name, agree, floor, med, worst in rows:
    print(f"| {name} | {agree:.1%} | {floor:.1%} | {med:.3f} | {worst:.3f} |")
sys.exit(0 if ok and rows else 1)
