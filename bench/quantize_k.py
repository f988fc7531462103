#!/usr/bin/env python3
"""bench/quantize_k.py — writes a K-quant mix (default Q4_K_M) of an F32/F16 GGUF for benchmarking
statelm on the format most GGUF downloads use. By default with `statelm quantize` (the same tensor
types as llama-quantize and, for every type statelm writes, the same bytes: docs/quantize.md);
with --llama-cpp with llama.cpp's own quantiser (llama-cpp-python's llama_model_quantize), to
compare the two (each run prints its wall time):

    python3 bench/quantize_k.py ~/.cache/statelm/models/random-lfm2-350m-f32.gguf \\
        ~/.cache/statelm/models/random-lfm2-350m-q4_k_m.gguf
    ~/.cache/statelm/venv-llama-new/bin/python bench/quantize_k.py --llama-cpp SRC.gguf DST.gguf
"""
import argparse
import os
import subprocess
import sys
import time

FTYPES = {"q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q4_k_s": "LLAMA_FTYPE_MOSTLY_Q4_K_S",
          "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def with_llama_cpp(a):
    import ctypes
    import llama_cpp

    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, FTYPES[a.type])
    p.nthread = a.threads
    rc = llama_cpp.llama_model_quantize(a.src.encode(), a.dst.encode(), ctypes.byref(p))
    if rc != 0:
        sys.exit("llama_model_quantize failed (%d)" % rc)


def with_statelm(a):
    rc = subprocess.run([a.statelm, "quantize", "--quiet", "--force", "-t", str(a.threads), a.src, a.dst,
                         a.type]).returncode
    if rc != 0:
        sys.exit("statelm quantize failed (%d)" % rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", default="q4_k_m", choices=sorted(FTYPES))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--llama-cpp", action="store_true", help="quantise with llama.cpp (needs llama_cpp)")
    ap.add_argument("--statelm", default=os.path.join(ROOT, "build", "statelm"), help="the statelm binary")
    a = ap.parse_args()
    t0 = time.perf_counter()
    (with_llama_cpp if a.llama_cpp else with_statelm)(a)
    dt = time.perf_counter() - t0
    print("%s: %.1f MiB, %.1f s (%s)" % (a.dst, os.path.getsize(a.dst) / 2**20, dt,
                                         "llama.cpp" if a.llama_cpp else "statelm"))


if __name__ == "__main__":
    main()
