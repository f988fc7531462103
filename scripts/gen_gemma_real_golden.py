#!/usr/bin/env python3
"""Golden teacher-forced logits of the real Gemma 3 270M (Q4_K_M) from llama.cpp, for
tests/py/test_real_gemma3.py. llama.cpp is driven through its C API by scripts/llama_logits.cpp
(built by scripts/build-llama-logits.sh against the native build in ~/.cache/statelm).

For each plain-text prompt (no chat template: this is a base model): llama.cpp's token ids (BOS
added, as the GGUF's add_bos_token says) plus N_GEN greedy tokens from llama.cpp with its default
context settings on the Q4_K_M file (flash attention auto, f16 KV cache), so the sequence is
llama.cpp's own path. Over that sequence, run teacher-forced in one batch, per position t (logits
after ids[0..t]) the argmax and top-2 logit margin for
  - `default`: the Q4_K_M file, llama.cpp defaults (flash attention auto, f16 KV);
  - `fa_off`:  the same with flash attention off;
  - `fa_on`:   the same with flash attention forced on;
  - `f32`:     the weights dequantised to F32 by the gguf package, f32 KV, flash attention off —
               the exact-arithmetic reference for statelm's scalar reference kernels;
and `top5_f32`, the top-5 log-probabilities of `f32` at the prompt end. `fa_agreement` counts the
positions where llama.cpp's default and flash-attention-off argmaxes agree, over all cases.

Usage: ~/.cache/statelm/venv-test/bin/python scripts/gen_gemma_real_golden.py [MODEL.gguf] [OUT.json]"""
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL = Path(sys.argv[1] if len(sys.argv) > 1 else Path.home() / ".cache/statelm/models/gemma-3-270m.Q4_K_M.gguf")
OUT = Path(sys.argv[2] if len(sys.argv) > 2 else ROOT / "tests/data/real/gemma-3-270m-q4_k_m.json")
N_GEN = 48
PROMPTS = [
    "The history of the printing press begins",
    "The capital of France is Paris. The capital of Germany is",
    "La Révolution française a commencé en 1789, lorsque",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
]
LLAMA = subprocess.run(["bash", str(ROOT / "scripts/build-llama-logits.sh")], check=True, capture_output=True,
                       text=True).stdout.strip()


def llama(model, *args):
    p = subprocess.run([LLAMA, "-m", str(model), "-t", "2", "-c", "512", *args], check=True, capture_output=True,
                       text=True)
    return json.loads(p.stdout)


def dequantize_to_f32(src: Path, dst: Path) -> None:
    """Copies src to dst with every tensor dequantised to F32 by gguf-py (metadata unchanged);
    as in scripts/gen_real_golden.py."""
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"]
    w = gguf.GGUFWriter(str(dst), bytes(arch.parts[arch.data[0]]).decode())
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            et = f.types[-1]
            val = [bytes(f.parts[i]) for i in f.data] if et == gguf.GGUFValueType.STRING else \
                [f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(k, val, vt, sub_type=et)
        elif vt == gguf.GGUFValueType.STRING:
            w.add_key_value(k, bytes(f.parts[f.data[0]]).decode(), vt)
        else:
            w.add_key_value(k, f.parts[f.data[0]].tolist()[0], vt)
    for t in r.tensors:
        arr = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, arr.reshape(list(reversed([int(x) for x in t.shape]))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def summary(run):
    return {"argmax": [p["argmax"] for p in run["positions"]],
            "margin": [round(p["margin"], 5) for p in run["positions"]]}


cases = []
fa_agree = fa_total = 0
for text in PROMPTS:
    gen = llama(MODEL, "--text", text, "--gen", str(N_GEN))
    ids, n_prompt = gen["ids"], gen["n_prompt"]
    seq = ",".join(map(str, ids))
    fa_off = llama(MODEL, "--ids", seq, "--fa", "off")
    fa_on = llama(MODEL, "--ids", seq, "--fa", "on")
    case = {"text": text, "n_prompt": n_prompt, "ids": ids, "default": summary(gen), "fa_off": summary(fa_off),
            "fa_on": summary(fa_on)}
    fa_agree += sum(a == b for a, b in zip(case["default"]["argmax"], case["fa_off"]["argmax"]))
    fa_total += len(ids)
    cases.append(case)
    print(repr(text[:40]), "->", ids[n_prompt:][:12], "...")
with tempfile.TemporaryDirectory() as tmp:
    deq = Path(tmp) / "f32.gguf"
    dequantize_to_f32(MODEL, deq)
    for case in cases:
        f32 = llama(deq, "--ids", ",".join(map(str, case["ids"])), "--fa", "off", "--kv-f32")
        case["f32"] = summary(f32)
        case["top5_f32"] = f32["positions"][case["n_prompt"] - 1]["top"]
print(f"llama.cpp default vs flash attention off: {fa_agree}/{fa_total} teacher-forced argmaxes agree")
h = hashlib.sha256()
with open(MODEL, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text(json.dumps({"model": MODEL.name, "sha256": h.hexdigest(),
                           "llama_cpp": "llama-cpp-python 0.3.36 sdist, native CPU build (AVX2), C API",
                           "n_gen": N_GEN, "fa_agreement": [fa_agree, fa_total], "cases": cases}) + "\n")
print("wrote", OUT)
