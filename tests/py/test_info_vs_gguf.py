#!/usr/bin/env python3
"""`statelm info --json` against the gguf Python package's reading of the same files.

For every tiny GGUF model in tests/data/tiny and, when present, the real SmolLM2-135M-Instruct
Q4_1 file, the architecture, hyper-parameters, layer kinds, tensor count, type histogram, weight
bytes, tokenizer ids and chat-template presence come from gguf.GGUFReader, and the states a
session holds are computed here from the metadata with the formulas of docs/spec/*.md — independently
of statelm. Usage: test_info_vs_gguf.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import json
import os
import subprocess
import sys
from pathlib import Path

try:
    import gguf
except ImportError:
    print("SKIPPED: the gguf Python package is not installed")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
failures = []


def check(label, got, want):
    if got != want:
        failures.append(f"{label}: statelm {got!r}, gguf {want!r}")


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]].tolist()[0]


def expected(path):
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    a = lambda k, d=None: field(r, f"{arch}.{k}", d)
    tensors = {t.name: t for t in r.tensors}
    n_embd, n_head = a("embedding_length"), a("attention.head_count")
    n_layer = a("block_count") - a("nextn_predict_layers", 0)
    kv = a("attention.head_count_kv", n_head)
    if isinstance(kv, list):
        kinds = ["conv" if v == 0 else "attention" for v in kv[:n_layer]]
        n_head_kv = max(kv)
    elif arch == "qwen35":
        interval = a("full_attention_interval", 4)
        kinds = ["linear_attention" if (i + 1) % interval else "attention" for i in range(n_layer)]
        n_head_kv = kv
    elif arch == "gemma3":
        # llama.cpp's rule without a pattern key: every 6th layer global, the others sliding
        kinds = ["sliding_attention" if i % 6 < 5 else "attention" for i in range(n_layer)]
        n_head_kv = kv
    else:
        kinds = ["attention"] * n_layer
        n_head_kv = kv
    head_dim = a("attention.key_length", n_embd // n_head)
    head_dim_v = a("attention.value_length", head_dim)
    hist = {}
    for t in r.tensors:
        name = gguf.GGMLQuantizationType(t.tensor_type).name.lower()
        hist[name] = hist.get(name, 0) + 1
    tokens = field(r, "tokenizer.ggml.tokens", [])
    ctx = min(a("context_length", 4096), 4096)
    states = []
    # sliding layers: a ring of 2 W rows rounded up to 16 (docs/spec/gemma3.md), unless the context is smaller
    ring = (2 * a("attention.sliding_window", 0) + 15) // 16 * 16
    for il, kind in enumerate(kinds):
        if kind in ("attention", "sliding_attention"):
            rows = min(ring, ctx) if kind == "sliding_attention" else ctx
            for suffix, hd in (("kv_k", head_dim), ("kv_v", head_dim_v)):
                states.append((f"blk.{il}.{suffix}", [hd * n_head_kv, rows], hd * n_head_kv * rows * 2))
        elif kind == "conv":
            k = a("shortconv.l_cache", 3)
            states.append((f"blk.{il}.conv", [n_embd, k - 1], n_embd * (k - 1) * 4))
        else:
            dk, hk, hv = a("ssm.state_size"), a("ssm.group_count"), a("ssm.time_step_rank")
            dv = a("ssm.inner_size") // hv
            conv_dim = 2 * hk * dk + hv * dv
            k = a("ssm.conv_kernel", 4)
            states.append((f"blk.{il}.ssm_conv", [conv_dim, k - 1], conv_dim * (k - 1) * 4))
            states.append((f"blk.{il}.ssm_state", [dv, dk, hv], dv * dk * hv * 4))
    return {
        "architecture": arch,
        "n_layer": n_layer, "n_embd": n_embd, "n_head": n_head, "n_head_kv": n_head_kv, "head_dim": head_dim,
        "n_ff": int(tensors["blk.0.ffn_gate.weight"].shape[1]),
        "n_vocab": int(tensors["token_embd.weight"].shape[1]),
        "layers": kinds,
        "count": len(r.tensors), "types": hist, "bytes": int(sum(int(t.n_bytes) for t in r.tensors)),
        "vocab_size": len(tokens),
        "bos": field(r, "tokenizer.ggml.bos_token_id", -1), "eos": field(r, "tokenizer.ggml.eos_token_id", -1),
        "chat_template": field(r, "tokenizer.chat_template") is not None,
        "n_ctx": ctx, "states": states,
    }


models = sorted((data / "tiny").glob("*/*.gguf"))
cache = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm")) / "models"
real = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
if real.exists():
    models.append(real)
else:
    print(f"note: {real} is absent; checking the tiny models only")
models += sorted(cache.glob("random-*-q8_0.gguf"))  # full-size random shapes, where generated
if not models:
    print("SKIPPED: no GGUF models found")
    sys.exit(77)

for path in models:
    out = subprocess.run([statelm, "info", "--json", "-m", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        failures.append(f"{path}: statelm info failed: {out.stderr.strip()}")
        continue
    got, want = json.loads(out.stdout), expected(str(path))
    tag = path.name
    check(f"{tag} architecture", got["architecture"], want["architecture"])
    for k in ("n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab"):
        check(f"{tag} {k}", int(got["hparams"][k]), want[k])
    check(f"{tag} layers", got["layers"], want["layers"])
    for k in ("count", "types", "bytes"):
        check(f"{tag} tensors.{k}", got["tensors"][k], want[k])
    check(f"{tag} vocab_size", got["tokenizer"]["vocab_size"], want["vocab_size"])
    check(f"{tag} bos", got["tokenizer"]["bos"], want["bos"])
    check(f"{tag} eos", got["tokenizer"]["eos"], want["eos"])
    check(f"{tag} chat_template", got["chat_template"], want["chat_template"])
    check(f"{tag} n_ctx", got["n_ctx"], want["n_ctx"])
    check(f"{tag} states", [(s["name"], s["shape"], s["bytes"]) for s in got["states"]],
          [(n, s, b) for n, s, b in want["states"]])
    print(f"{tag}: {len(want['states'])} states, {want['count']} tensors checked")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"statelm info agrees with gguf on {len(models)} files")
