#!/usr/bin/env python3
"""Cost of the Python package's constrained decoding and logprobs (not a test): tokens/s of a
greedy decode loop from a chat prompt driven from Python,

  plain     Session.decode + Logits.argmax,
  schema    Sampler(temperature=0, json_schema=SCHEMA).sample (the grammar mask every token),
  logprobs  plain + Logits.logprobs(id, 5) (log-softmax over the vocabulary every token),

interleaved, --reps rounds, the median and range of each, then the time to compile SCHEMA and to
embed 8 texts with create_embedding. The first schema round includes building the grammar
vocabulary of the model's tokenizer (once per model).

usage: python bench/python_constrained.py [--model GGUF] [-n 48] [--reps 5]
Needs the statelm package (pip install . or PYTHONPATH=build/python)."""
import argparse
import os
import statistics
import time
from pathlib import Path

import statelm

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "colors": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "colors"]}


def run(m, ids, kind, n_max):
    with statelm.Session(m) as s:
        logits = s.prefill(ids)
        smp = statelm.Sampler(temperature=0, json_schema=SCHEMA) if kind == "schema" else None
        n, t0 = 0, time.perf_counter()
        for _ in range(n_max):
            tok = smp.sample(s) if smp else logits.argmax()
            if kind == "logprobs":
                logits.logprobs(tok, 5)
            if m.is_eog(tok):
                break
            logits = s.decode(tok)
            n += 1
        return n / (time.perf_counter() - t0), n


def main():
    cache = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("-n", type=int, default=48)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    m = statelm.Model(a.model)
    ids = m.chat_template([{"role": "user", "content": "Describe a cat in JSON with name, age and colors."}],
                          tokenize=True)
    res = {k: [] for k in ("plain", "schema", "logprobs")}
    for _ in range(a.reps):
        for k in res:
            res[k].append(run(m, ids, k, a.n))
    for k, v in res.items():
        r = [x[0] for x in v]
        print(f"{k:9s} tok/s median {statistics.median(r):.1f} range {min(r):.1f}-{max(r):.1f} "
              f"({v[0][1]} tokens)")
    t0 = time.perf_counter()
    statelm.Grammar.from_json_schema(SCHEMA)
    print(f"schema compile {(time.perf_counter() - t0) * 1e3:.2f} ms")
    t0 = time.perf_counter()
    m.create_embedding(["The quick brown fox jumps over the lazy dog."] * 8)
    print(f"create_embedding of 8 texts {(time.perf_counter() - t0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
