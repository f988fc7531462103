#!/usr/bin/env python3
"""Python overhead of the statelm package on generation (not a test): tokens/s of

  cli       `statelm bench -n N -p 0` (N decode calls of the C API from an empty session),
  py-loop   a Python loop of Session.decode + greedy argmax (numpy.argmax over the zero-copy
            logits) from an empty session,
  py-argmax the same loop with Logits.argmax (no numpy),
  generate  model.generate(1-token prompt, N, stop_at_eog=False) (detokenizing as it goes),
  llama-cpp llama-cpp-python's Llama(path)(prompt, max_tokens=N) on the same file, when it is
            installed (eval time of its own timings; ignored otherwise),

each the median of --reps timed runs after one warm-up, and the ratios to cli. The issue's
targets: py-loop >= 0.97x cli, generate >= 0.95x cli.

usage: python bench/python_decode.py [--model GGUF] [--cli build/statelm] [-n 128] [-t THREADS] [--reps 5]
Needs the statelm package (pip install . or PYTHONPATH=build/python) and numpy."""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

import statelm

ap = argparse.ArgumentParser()
ap.add_argument("--model", default=os.path.expanduser("~/.cache/statelm/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
ap.add_argument("--cli", default="build/statelm")
ap.add_argument("-n", type=int, default=128)
ap.add_argument("-t", type=int, default=os.cpu_count())
ap.add_argument("--reps", type=int, default=5)
args = ap.parse_args()
n = args.n


def median_tps(run):
    run()
    return statistics.median(n / run() for _ in range(args.reps))


cli = json.loads(subprocess.run([args.cli, "bench", "-m", args.model, "-p", "0", "-n", str(n), "-r", str(args.reps),
                                 "-t", str(args.t), "--json"], capture_output=True, text=True, check=True).stdout)
results = {"cli": cli["tg_tps"]}

model = statelm.Model(args.model, n_threads=args.t)
session = statelm.Session(model, n_ctx=max(512, n + 8))


def loop(argmax):
    def run():
        session.reset()
        tok = model.info["tokenizer"]["bos"] if model.info["tokenizer"]["bos"] >= 0 else 1
        t0 = time.perf_counter()
        for _ in range(n):
            tok = argmax(session.decode(tok))
        return time.perf_counter() - t0
    return run


results["py-loop"] = median_tps(loop(lambda logits: int(np.argmax(logits))))
results["py-argmax"] = median_tps(loop(lambda logits: logits.argmax()))


def generate():
    session.reset()
    t0 = time.perf_counter()
    got = sum(1 for _ in model.generate([1], n, session=session, stop_at_eog=False))
    assert got == n
    return time.perf_counter() - t0


results["generate"] = median_tps(generate)

try:
    import llama_cpp
except ImportError:
    llama_cpp = None
if llama_cpp is not None:
    llm = llama_cpp.Llama(args.model, n_ctx=max(512, n + 8), n_threads=args.t, verbose=False)

    def llama_run():
        llm.reset()
        t0 = time.perf_counter()
        llm("The", max_tokens=n, temperature=0, top_k=1)
        return time.perf_counter() - t0

    results["llama-cpp (whole call)"] = median_tps(llama_run)

print(f"model {os.path.basename(args.model)}, -n {n}, -t {args.t}, kernels {session.kernels}, "
      f"median of {args.reps} runs (tokens/s)")
for name, tps in results.items():
    print(f"  {name:24s} {tps:8.1f}  {tps / results['cli']:.3f}x cli")
