#!/usr/bin/env python3
"""Constrained against unconstrained decoding speed, statelm next to llama-server (bench/README.md,
"Constrained decoding"): for each model, a nested JSON Schema (default
tests/data/grammar/schemas/15-nested.json), the same raw prompt, temperature 1 with no top-k, top-p
or min-p cut, generations of at most 64 tokens, N tokens per side and round, R alternating rounds.

- statelm: build/bench_grammar_mask MODEL SCHEMA --decode N --rounds R (its µs per mask on random
  walks, its tok/s with and without the constraint per round, and the ratio's median and range);
- llama-server (built by bench/build-llama-bench.sh llama-server, outside the repository): /completion
  with and without `json_schema`, tok/s from the server's own `timings` (predicted tokens over
  predicted ms: decode and sampling, no prompt), the ratio per round, its median and range.

A benchmark, never a test: on a shared machine the figures are noisy (say so when quoting them).
Usage: grammar_compare.py [--build DIR] [--models A.gguf,B.gguf] [--schema FILE] [--tokens N]
                          [--rounds R] [-t THREADS] [--no-llama | --no-statelm]"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm"))
PROMPT = "Reply with one JSON value and nothing else."
GEN_LEN = 64


def summary(ratios):
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def run_statelm(bench, model, schema, tokens, rounds, threads):
    cmd = [str(bench), str(model), str(schema), "--decode", str(tokens), "--rounds", str(rounds), "-t", str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    sys.stdout.write(out)
    uncon = [float(x) for x in re.findall(r"decode unconstrained: .*?, ([\d.]+) tok/s", out)]
    con = [float(x) for x in re.findall(r"decode constrained  : .*?, ([\d.]+) tok/s", out)]
    ratios = [float(x) for x in re.findall(r"round \d+: constrained / unconstrained ([\d.]+)", out)]
    masks = re.search(r"all masks: mean ([\d.]+) us, p50 ([\d.]+) us, p99 ([\d.]+) us", out)
    return {"uncon": uncon, "con": con, "ratios": ratios, "mask_us": masks.groups() if masks else None}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def run_llama_server(server, model, schema, tokens, rounds, threads):
    port = free_port()
    proc = subprocess.Popen([server, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
                             "-c", "1024", "-np", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("llama-server did not become healthy")
        schema_obj = json.loads(Path(schema).read_text())
        uncon, con, ratios = [], [], []
        for r in range(rounds):
            tps = []
            for constrained in (False, True):
                n_tok, ms, k = 0, 0.0, 0
                while n_tok < tokens:
                    body = {"prompt": PROMPT, "n_predict": GEN_LEN, "temperature": 1.0, "top_k": 0, "top_p": 1.0,
                            "min_p": 0.0, "seed": 1000 * r + k, "cache_prompt": True}
                    if constrained:
                        body["json_schema"] = schema_obj
                    t = post(port, body)["timings"]
                    n_tok += t["predicted_n"]
                    ms += t["predicted_ms"]
                    k += 1
                tps.append(1000.0 * n_tok / ms)
            uncon.append(tps[0])
            con.append(tps[1])
            ratios.append(tps[1] / tps[0])
            print(f"llama-server round {r + 1}: unconstrained {tps[0]:.1f} tok/s, json_schema {tps[1]:.1f} tok/s, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
        return {"uncon": uncon, "con": con, "ratios": ratios}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--models", default="SmolLM2-135M-Instruct.Q4_1.gguf,gemma-3-270m.Q4_K_M.gguf")
    ap.add_argument("--schema", default=str(ROOT / "tests/data/grammar/schemas/15-nested.json"))
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--no-llama", action="store_true", help="statelm only")
    ap.add_argument("--no-statelm", action="store_true", help="llama-server only")
    a = ap.parse_args()
    bench = Path(a.build) / "bench_grammar_mask"
    if not a.no_statelm and not bench.exists():
        sys.exit(f"{bench} is missing: cmake --build {a.build} --target bench_grammar_mask")
    server = None
    if not a.no_llama:
        server = subprocess.run(["bash", str(ROOT / "bench/build-llama-bench.sh"), "llama-server"], check=True,
                                capture_output=True, text=True).stdout.strip().splitlines()[-1]
    rows = []
    for name in a.models.split(","):
        model = CACHE / "models" / name
        if not model.exists():
            print(f"SKIPPED: {model} is absent")
            continue
        print(f"== {name}", flush=True)
        s = None if a.no_statelm else run_statelm(bench, model, a.schema, a.tokens, a.rounds, a.threads)
        ll = run_llama_server(server, model, a.schema, a.tokens, a.rounds, a.threads) if server else None
        rows.append((name, s, ll))
    print(f"\n{Path(a.schema).name}, {a.tokens} tokens per side and round, {a.rounds} rounds, -t {a.threads}; "
          "tok/s medians, ratio median (range)")
    print("| model | statelm µs/mask mean / p50 / p99 | statelm unconstrained | constrained | ratio "
          "| llama-server unconstrained | json_schema | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, s, ll in rows:
        if s:
            mu = " / ".join(s["mask_us"]) if s["mask_us"] else "-"
            cells = [name, mu, f"{statistics.median(s['uncon']):.1f}", f"{statistics.median(s['con']):.1f}",
                     summary(s["ratios"])]
        else:
            cells = [name, "-", "-", "-", "-"]
        if ll:
            cells += [f"{statistics.median(ll['uncon']):.1f}", f"{statistics.median(ll['con']):.1f}",
                      summary(ll["ratios"])]
        else:
            cells += ["-", "-", "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
