#!/usr/bin/env python3
"""scripts/gen_kvq_golden.py — golden bytes for the KV cache write into Q8_0 / Q4_0 states
(tests/unit/test_attn_q.c, kvq_write_golden).

Writes tests/data/kvq/rows.f32 (ROWS rows of NE0 float32: the shape of SmolLM2-135M's K state row,
head_dim 64 x 3 KV heads; key- and value-like values: per-channel scales with outlier channels,
rows with exact rounding ties, zeros, tiny values) and tests/data/kvq/<type>.bin: each row rotated
per 32-block by the orthonormal Walsh-Hadamard matrix (the butterflies of base/quant.h
quant_hadamard32, in float32 in the same order, so the bits are the C's), then quantised by
gguf-py's numpy quantisers (gguf.quants.quantize), the independent reference of ggml's block
encoding and rounding (Q8_0: d = amax/127, q = round-half-away(x/d); Q4_0: d = max/-8, q =
min(15, trunc(x/d + 8.5))). The rotation is also checked against the Hadamard matrix in float64.
Needs numpy and gguf (scripts/requirements-test.txt):

    python scripts/gen_kvq_golden.py
"""
import os
from importlib import metadata

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "kvq")
NE0 = 192
ROWS = 24


def rows():
    rng = np.random.default_rng(39)
    chan = np.exp(rng.standard_normal(NE0) * 0.8)       # per-channel scales, as keys have
    chan[[5, 70, 133]] = 25.0                           # outlier channels
    r = [rng.standard_normal(NE0) * chan * s for s in (0.05, 0.3, 1.0, 3.0)]
    r += [rng.standard_normal(NE0) * s for s in (0.02, 0.5, 4.0)]
    r += [rng.uniform(-1, 1, NE0), rng.standard_t(3, NE0)]
    ties = np.zeros(NE0)                                # Q8_0: amax 127 -> d 1: x.5 are ties
    for b in range(NE0 // 32):
        ties[32 * b:32 * b + 32] = np.linspace(-15.5, 15.5, 32)
        ties[32 * b] = 127.0
    r.append(ties)
    t4 = np.zeros(NE0)                                  # Q4_0: max -8 -> d 1: x + 8.5 at integers
    for b in range(NE0 // 32):
        t4[32 * b:32 * b + 32] = np.linspace(-7.5, 7.0, 32)
        t4[32 * b + 7] = -8.0
    r.append(t4)
    r.append(np.zeros(NE0))
    r.append(rng.standard_normal(NE0) * 1e-30)
    r.append(np.full(NE0, 0.75))
    while len(r) < ROWS:
        r.append(rng.standard_normal(NE0) * chan * rng.uniform(0.1, 2.0))
    return np.stack(r[:ROWS]).astype(np.float32)


def hadamard32(x):
    """Each 32-block of the rows of x (float32) rotated: quant_hadamard32's butterflies, in float32."""
    y = x.reshape(-1, 32).copy()
    h = 1
    while h < 32:
        for i in range(0, 32, 2 * h):
            a, b = y[:, i:i + h].copy(), y[:, i + h:i + 2 * h].copy()
            y[:, i:i + h], y[:, i + h:i + 2 * h] = a + b, a - b
        h *= 2
    y *= np.float32(0.17677669529663687)
    return y.reshape(x.shape)


def main():
    os.makedirs(OUT, exist_ok=True)
    x = rows()
    x.tofile(os.path.join(OUT, "rows.f32"))
    xr = hadamard32(x)
    hm = np.array([[(-1) ** bin(i & j).count("1") for j in range(32)] for i in range(32)]) / np.sqrt(32)
    want = (x.reshape(-1, 32).astype(np.float64) @ hm.T).reshape(x.shape)
    assert np.allclose(xr, want, rtol=1e-5, atol=1e-5 * np.abs(x).max()), "the butterflies are not H x"
    for name, t in (("q8_0", GGMLQuantizationType.Q8_0), ("q4_0", GGMLQuantizationType.Q4_0)):
        q = quantize(xr, t)
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(q.tobytes())
    print(f"wrote {OUT} with gguf {metadata.version('gguf')}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
