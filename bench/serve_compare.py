#!/usr/bin/env python3
"""serve_compare.py — the same streamed chat load (bench/serve_load.py) against `statelm serve
--parallel N` and llama.cpp's `llama-server --parallel N` on the same GGUF, one after the other,
with the same threads, per-slot context and sampling (temperature 0.7, seeded, ignore_eos so every
request generates --max-tokens tokens). Benchmark, not a test: the machine may be shared, run it
more than once. llama-server comes from bench/build-llama-bench.sh (the vendored llama.cpp source
of llama-bench, native build); its -c is the total context of all slots, so it gets CTX * N.
--batched-bench also runs `llama-batched-bench -npl 1,2,4,8` (raw batched decode, no HTTP).

Usage: serve_compare.py STATELM MODEL [--requests 48] [--concurrency 8] [--max-tokens 32]
                        [--parallel 8] [-t THREADS] [-c CTX] [--llama-dir DIR] [--batched-bench]"""
import argparse
import http.client
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from serve_util import stop_server

here = Path(__file__).resolve().parent
ap = argparse.ArgumentParser()
ap.add_argument("statelm")
ap.add_argument("model")
ap.add_argument("--requests", type=int, default=48)
ap.add_argument("--concurrency", type=int, default=8)
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--parallel", type=int, default=8)
ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
ap.add_argument("-c", "--ctx", type=int, default=1024)
ap.add_argument("--llama-dir", help="folder holding llama-server (default: bench/build-llama-bench.sh's)")
ap.add_argument("--batched-bench", action="store_true")
a = ap.parse_args()

llama_dir = Path(a.llama_dir) if a.llama_dir else Path(subprocess.run(
    ["bash", str(here / "build-llama-bench.sh"), "llama-server", "llama-batched-bench"], check=True,
    capture_output=True, text=True).stdout.split()[0]).parent
load = [sys.executable, str(here / "serve_load.py"), "--requests", str(a.requests), "--concurrency",
        str(a.concurrency), "--max-tokens", str(a.max_tokens), "--ignore-eos"]


def run_load(what, args):
    print(f"== {what}", flush=True)
    out = subprocess.run(load + args, check=True, capture_output=True, text=True).stdout
    print(out, end="", flush=True)
    tps = float(re.search(r"([\d.]+) tok/s aggregate", out).group(1))
    ttft = re.search(r"first token p50 ([\d.]+) ms, p95 ([\d.]+) ms", out).groups()
    lost = int(re.search(r"lost (\d+)", out).group(1))
    return tps, float(ttft[0]), float(ttft[1]), lost


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


results = {}
results["statelm serve"] = run_load("statelm serve", [a.statelm, a.model, "--parallel", str(a.parallel), "-t",
                                                      str(a.threads), "-c", str(a.ctx)])
port = free_port()
srv = subprocess.Popen([str(llama_dir / "llama-server"), "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
                        "--parallel", str(a.parallel), "-c", str(a.ctx * a.parallel), "-t", str(a.threads),
                        "--no-webui"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
try:
    end = time.monotonic() + 120
    while True:
        if srv.poll() is not None:
            sys.exit(f"llama-server exited with {srv.returncode}: {srv.stderr.read().decode()[-2000:]}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > end:
            sys.exit("llama-server did not become ready within 120 s")
        time.sleep(0.5)
    results["llama-server"] = run_load("llama-server", ["--url", f"http://127.0.0.1:{port}"])
finally:
    stop_server(srv)

print(f"\n{a.requests} requests, {a.concurrency} at a time, {a.parallel} slots, {a.max_tokens} tokens each, "
      f"{a.threads} threads, model {os.path.basename(a.model)}")
print(f"{'server':<16}{'tok/s':>10}{'TTFT p50 ms':>14}{'TTFT p95 ms':>14}{'lost':>6}")
for name, (tps, p50, p95, lost) in results.items():
    print(f"{name:<16}{tps:>10.1f}{p50:>14.1f}{p95:>14.1f}{lost:>6}")
if "llama-server" in results:
    print(f"statelm / llama-server tok/s: {results['statelm serve'][0] / results['llama-server'][0]:.2f}x")
if a.batched_bench:
    print("\n== llama-batched-bench -npp 128 -ntg 32 -npl 1,2,4,8", flush=True)
    subprocess.run([str(llama_dir / "llama-batched-bench"), "-m", a.model, "-c", "4096", "-npp", "128", "-ntg",
                    str(a.max_tokens), "-npl", "1,2,4,8", "-t", str(a.threads)], check=False)
