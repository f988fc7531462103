#!/usr/bin/env python3
"""scripts/gen_quant_golden.py — golden bytes for statelm's quantisers (tests/unit/test_quant.c).

Writes tests/data/quant/input.f32 (rows of 512 float32: random normal and uniform rows and the
edge cases the rounding rules branch on) and, per type, tests/data/quant/<type>.bin: those rows
quantised by llama.cpp's own reference quantisers (ggml/src/ggml-quants.c quantize_row_*_ref,
compiled here from a llama.cpp source tree with scripts/quant_ref/ggml_quant_ref.c). The legacy
types are also checked against gguf-py's numpy quantisers (gguf.quants.quantize) before anything
is written. Needs a C compiler, numpy, gguf and a llama.cpp tree, e.g. the one vendored in the
llama-cpp-python sdist:

    pip download --no-binary :all: --no-deps llama-cpp-python && tar xzf llama_cpp_python-*.tar.gz
    python scripts/gen_quant_golden.py llama_cpp_python-*/vendor/llama.cpp
"""
import json
import os
import subprocess
import sys
import tempfile
from importlib import metadata

import numpy as np
import gguf
from gguf.quants import quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "quant")
K = 512
TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"]


def rows():
    rng = np.random.default_rng(27)
    r = [rng.standard_normal(K) * s for s in (0.02, 0.1, 1.0, 30.0)]
    r += [rng.uniform(0.1, 2.0, K), -rng.uniform(0.1, 2.0, K), rng.standard_t(3, K) * 0.05]
    r.append(np.zeros(K))
    r.append(np.full(K, 0.75))                       # max == min in every block
    r.append(rng.standard_normal(K) * 1e-20)         # below ggml's GROUP_MAX_EPS
    x = rng.standard_normal(K) * 0.01
    x[::37] = 5.0                                    # outliers
    r.append(x)
    r.append(np.round(rng.standard_normal(K) * 8) / 8)  # exact multiples: ties in the rounding
    x = rng.standard_normal(K)
    x[:256] = 0                                      # one all-zero super-block, one live
    r.append(x)
    r.append(rng.standard_normal(K) * 1e4)
    return np.stack(r).astype(np.float32)


def src_name(path):
    """The llama.cpp tree's name without this machine's folders (the sdist's, when vendored)."""
    parts = os.path.abspath(path).split(os.sep)
    for i, p in enumerate(parts):
        if p.startswith("llama_cpp_python-") or p.startswith("llama.cpp"):
            return "/".join(parts[i:])
    return parts[-1]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ggml = os.path.join(sys.argv[1], "ggml")
    x = rows()
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "ggml_quant_ref")
        subprocess.run(["cc", "-O3", "-std=gnu11", "-I", os.path.join(ggml, "include"), "-I", os.path.join(ggml, "src"),
                        os.path.join(ROOT, "scripts", "quant_ref", "ggml_quant_ref.c"),
                        os.path.join(ggml, "src", "ggml-quants.c"), "-lm", "-o", exe], check=True)
        inp = os.path.join(tmp, "in.f32")
        x.tofile(inp)
        golden = {}
        for t in TYPES:
            out = os.path.join(tmp, t + ".bin")
            subprocess.run([exe, t, str(K), inp, out], check=True)
            golden[t] = open(out, "rb").read()
    for t in ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]:
        ref = quantize(x, getattr(gguf.GGMLQuantizationType, t.upper())).tobytes()
        if ref != golden[t]:
            sys.exit("gguf-py and llama.cpp disagree on %s" % t)
    x.tofile(os.path.join(OUT, "input.f32"))
    for t, b in golden.items():
        open(os.path.join(OUT, t.lower() + ".bin"), "wb").write(b)
    manifest = {"rows": int(x.shape[0]), "row_elems": K, "types": [t.lower() for t in TYPES],
                "reference": "llama.cpp ggml-quants.c quantize_row_*_ref from %s" % src_name(sys.argv[1]),
                "legacy_types_also_equal_to": "gguf-py %s gguf.quants.quantize" % metadata.version("gguf")}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote %d rows x %d to %s" % (x.shape[0], K, OUT))


if __name__ == "__main__":
    main()
