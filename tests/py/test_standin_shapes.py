#!/usr/bin/env python3
"""The random-weight stand-ins for the real test models (scripts/tinylm/spec.py FULL_CONFIG
smollm2-135m and gemma3-270m, for benchmarks where the real files cannot be had) have the real
files' shapes: each hyper-parameter against the real GGUF's metadata and the parameter count of
the HF shapes (scripts/tinylm/shapes.py) against the sum of the real tensors' elements, read by the
gguf Python package. Runs for each real file that fetch-models.sh put in the model cache.
Usage: test_standin_shapes.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import math
import os
import sys
from pathlib import Path

try:
    import gguf
except ImportError:
    print("SKIPPED: the gguf Python package is not installed")
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from tinylm import spec  # noqa: E402
from tinylm.shapes import hf_shapes  # noqa: E402

cache = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm")) / "models"
REAL = {"smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3-270m": "gemma-3-270m.Q4_K_M.gguf"}
failures, checked = [], 0


def field(r, key):
    f = r.fields.get(key)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        return len(f.data)
    return f.parts[f.data[0]].tolist()[0]


for shape, name in REAL.items():
    path = cache / name
    if not path.is_file():
        print(f"note: {path} is absent; {shape} not checked")
        continue
    checked += 1
    arch, hp = spec.FULL_CONFIG[shape]
    r = gguf.GGUFReader(path)
    ga = bytes(r.fields["general.architecture"].parts[-1]).decode()
    a = lambda k: field(r, f"{ga}.{k}")
    rope = hp["rope_parameters"]
    theta = rope["full_attention"]["rope_theta"] if "full_attention" in rope else rope["rope_theta"]
    want = {
        "architecture": (spec.GGUF_ARCH[arch], ga),
        "block_count": (hp["num_hidden_layers"], a("block_count")),
        "embedding_length": (hp["hidden_size"], a("embedding_length")),
        "feed_forward_length": (hp["intermediate_size"], a("feed_forward_length")),
        "head_count": (hp["num_attention_heads"], a("attention.head_count")),
        "head_count_kv": (hp["num_key_value_heads"], a("attention.head_count_kv")),
        "key_length": (hp["head_dim"], a("attention.key_length") or hp["hidden_size"] // hp["num_attention_heads"]),
        "context_length": (hp["max_position_embeddings"], a("context_length")),
        "vocab": (hp["vocab_size"], field(r, "tokenizer.ggml.tokens")),
        "sliding_window": (hp.get("sliding_window"), a("attention.sliding_window")),
    }
    for k, (stand_in, real) in want.items():
        if stand_in != real:
            failures.append(f"{shape} {k}: stand-in {stand_in!r}, {name} {real!r}")
    if not math.isclose(theta, a("rope.freq_base"), rel_tol=1e-6):
        failures.append(f"{shape} rope theta: stand-in {theta}, {name} {a('rope.freq_base')}")
    n_stand_in = sum(math.prod(s) for s in hf_shapes(arch, hp).values())
    n_real = sum(int(t.n_elements) for t in r.tensors)
    if n_stand_in != n_real:
        failures.append(f"{shape} parameters: stand-in {n_stand_in}, {name} {n_real}")

if not checked:
    print("SKIPPED: neither real model is in the model cache (bash scripts/fetch-models.sh)")
    sys.exit(77)
for f in failures:
    print("FAIL:", f)
print(f"{checked} stand-in shape(s) checked, {len(failures)} difference(s)")
sys.exit(1 if failures else 0)
