"""bench/executorch_run.py — the ExecuTorch side of bench/executorch_compare, run with the Python of
its venv: loads one exported program (.pte, an XNNPACK-delegated llama-family or LFM2 model with
a KV cache, as ExecuTorch's export_llm writes it), sizes ExecuTorch's thread pool, and times REPS
prefills of P random token ids (one forward call at input_pos 0) and REPS decodes of N single
tokens from position 0 (a forward call per token), printing per-repetition tokens/s as JSON
({"pp_samples": [...], "tg_samples": [...]}). One untimed run of each first. The program's states
are not cleared between repetitions: every call names its start position and attention reads the
positions this repetition wrote only, and LFM2's conv states carry over, which changes values, not
the work, so each repetition costs what a fresh one would.

Usage: python executorch_run.py MODEL.pte -t THREADS -p P -n N -r REPS
"""
import argparse
import json
import time

import torch
from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (llama::custom_sdpa, update_cache)
import executorch.kernels.quantized  # noqa: F401  (the quantized_decomposed out-variants)
from executorch.extension.pybindings import portable_lib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pte")
    ap.add_argument("-t", type=int, required=True)
    ap.add_argument("-p", type=int, required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("-r", type=int, required=True)
    a = ap.parse_args()
    module = portable_lib._load_for_executorch(a.pte)
    portable_lib._unsafe_reset_threadpool(a.t)
    vocab = module.run_method("get_vocab_size", ())[0]
    gen = torch.Generator().manual_seed(1)
    out = {"pp_samples": [], "tg_samples": [], "threads": portable_lib._threadpool_get_thread_count()}

    def at(pos):
        return torch.tensor([pos], dtype=torch.long)

    if a.p > 0:
        tokens = torch.randint(0, vocab, (1, a.p), dtype=torch.long, generator=gen)
        for rep in range(a.r + 1):
            t0 = time.perf_counter()
            module.forward((tokens, at(0)))
            if rep:
                out["pp_samples"].append(a.p / (time.perf_counter() - t0))
    if a.n > 0:
        tokens = torch.randint(0, vocab, (a.n, 1, 1), dtype=torch.long, generator=gen)
        for rep in range(a.r + 1):
            t0 = time.perf_counter()
            for i in range(a.n):
                module.forward((tokens[i], at(i)))
            if rep:
                out["tg_samples"].append(a.n / (time.perf_counter() - t0))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
