#!/usr/bin/env python3
"""Golden greedy continuations of real models from llama.cpp (llama-cpp-python), for
tests/py/test_real_llamacpp.py. For each prompt: llama.cpp's tokenisation (special tokens parsed,
no BOS added: SmolLM2's GGUF says add_bos_token = false) and 64 greedy tokens (argmax of the logits,
generation not stopped at end-of-generation tokens), twice:
  - `greedy`: llama.cpp on the quantised file as shipped (its kernels quantise activations to 8 bits
    for quantised weights; default f16 KV cache);
  - `greedy_f32`, `top5_f32`: llama.cpp on the same weights dequantised to F32 by the gguf package
    (f32 KV cache) — the exact-arithmetic reference for statelm's scalar reference kernels.

Usage: ~/.cache/statelm/venv-llama-new/bin/python scripts/gen_real_golden.py [MODEL.gguf] [OUT.json]
(llama-cpp-python built with CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON
-DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_INT8=OFF ..." — the native build's AMX path
crashes on this machine's CPU; with such a build set SLM_LLAMA_NO_EXTRA_BUFTS=1 instead.)"""
import hashlib
import json
import os
import sys
from pathlib import Path

import tempfile

import gguf
import llama_cpp
import numpy as np

MODEL = Path(sys.argv[1] if len(sys.argv) > 1 else Path.home() / ".cache/statelm/models/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parents[1] / "tests/data/real/smollm2-135m-instruct-q4_1.json")
N_GEN = 64
PROMPTS = [
    "The history of the printing press begins",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite a short poem about the sea.<|im_end|>\n<|im_start|>assistant\n",
]

if os.environ.get("SLM_LLAMA_NO_EXTRA_BUFTS"):
    # For llama.cpp builds whose AMX path crashes on this CPU (GGML_NATIVE on AMX machines).
    _defaults = llama_cpp.llama_model_default_params

    def _no_extra_bufts():
        p = _defaults()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_model_default_params = _no_extra_bufts
    llama_cpp.llama.llama_cpp.llama_model_default_params = _no_extra_bufts



def dequantize_to_f32(src: Path, dst: Path) -> None:
    """Copies src to dst with every tensor dequantised to F32 by gguf-py (metadata unchanged)."""
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


def greedy(llm, ids):
    llm.reset()
    llm.eval(ids)
    row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    lse = row.max() + np.log(np.exp(row - row.max()).sum())
    top5 = [[int(i), float(row[i] - lse)] for i in np.argsort(-row, kind="stable")[:5]]
    out, margins = [], []
    for _ in range(N_GEN):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top2 = np.sort(row)[-2:]
        tok = int(np.argmax(row))
        out.append(tok)
        margins.append(float(top2[1] - top2[0]))
        llm.eval([tok])
    return out, margins, top5


llm = llama_cpp.Llama(str(MODEL), n_ctx=512, n_batch=512, n_threads=2, logits_all=True, verbose=False)
cases = []
for text in PROMPTS:
    ids = llm.tokenize(text.encode(), add_bos=False, special=True)
    out, margins, _ = greedy(llm, ids)
    cases.append({"text": text, "prompt_ids": ids, "greedy": out, "top2_margins": margins,
                  "text_out": llm.detokenize(out).decode("utf-8", "replace")})
    print(repr(cases[-1]["text_out"][:80]), "min margin", min(margins))
del llm
with tempfile.TemporaryDirectory() as tmp:
    deq = Path(tmp) / "f32.gguf"
    dequantize_to_f32(MODEL, deq)
    llm = llama_cpp.Llama(str(deq), n_ctx=512, n_batch=512, n_threads=2, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    for c in cases:
        out, margins, top5 = greedy(llm, c["prompt_ids"])
        c["greedy_f32"], c["top2_margins_f32"], c["top5_f32"] = out, margins, top5
    del llm
sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text(json.dumps({"model": MODEL.name, "sha256": sha, "llama_cpp_python": llama_cpp.__version__,
                           "n_gen": N_GEN, "cases": cases}, indent=1) + "\n")
print("wrote", OUT)
