#!/usr/bin/env python3
"""bench/quantize_k.py — writes a K-quant mix (default Q4_K_M) of an F32/F16 GGUF with llama.cpp's own
quantiser (llama-cpp-python's llama_model_quantize), for benchmarking statelm on the format most
GGUF downloads use. Run it with an interpreter that imports llama_cpp (llama-cpp-python), e.g.

    ~/.cache/statelm/venv-llama-new/bin/python bench/quantize_k.py \\
        ~/.cache/statelm/models/random-lfm2-350m-f32.gguf ~/.cache/statelm/models/random-lfm2-350m-q4_k_m.gguf
"""
import argparse
import ctypes
import os
import sys

import llama_cpp

FTYPES = {"q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q4_k_s": "LLAMA_FTYPE_MOSTLY_Q4_K_S",
          "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", default="q4_k_m", choices=sorted(FTYPES))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, FTYPES[a.type])
    p.nthread = a.threads
    rc = llama_cpp.llama_model_quantize(a.src.encode(), a.dst.encode(), ctypes.byref(p))
    if rc != 0:
        sys.exit("llama_model_quantize failed (%d)" % rc)
    print("%s: %.1f MiB" % (a.dst, os.path.getsize(a.dst) / 2**20))


if __name__ == "__main__":
    main()
