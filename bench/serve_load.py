#!/usr/bin/env python3
"""serve_load.py — a bounded load test of `statelm serve` (benchmark, not a test): starts the
server on a free loopback port, sends REQUESTS streamed chat completions CONCURRENCY at a time
(standard library only), and reports lost requests, time to first token (p50/p95), request
latency (p50/p95), aggregate generated tok/s, and the server's /metrics after the run. The server
is stopped with SIGTERM at the end; its exit status is reported. With --url it loads a server that
is already running instead (llama.cpp's llama-server, for bench/serve_compare.py): no server is
started or stopped, and the figures come from the responses alone. Generated tokens are counted
from each stream's usage (stream_options.include_usage), else one per content event.
--ignore-eos makes every request generate max_tokens tokens (both servers honour ignore_eos).

Usage: serve_load.py STATELM MODEL [--requests 200] [--concurrency 8] [--max-tokens 32]
                     [--parallel 8] [-t THREADS] [-c CTX] [--ignore-eos] [--extra-args="..."]
       serve_load.py --url http://127.0.0.1:PORT [--requests ...] [--concurrency ...] [--max-tokens ...]"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from serve_util import stop_server

ap = argparse.ArgumentParser()
ap.add_argument("statelm", nargs="?")
ap.add_argument("model", nargs="?")
ap.add_argument("--url", help="a running server to load (none is started)")
ap.add_argument("--ignore-eos", action="store_true")
ap.add_argument("--extra-args", default="", help="more statelm serve options, e.g. --extra-args=--lookup")
ap.add_argument("--requests", type=int, default=200)
ap.add_argument("--concurrency", type=int, default=8)
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--parallel", type=int, default=8)
ap.add_argument("-t", "--threads", type=int, default=0)
ap.add_argument("-c", "--ctx", type=int, default=1024)
a = ap.parse_args()
if not a.url and not (a.statelm and a.model):
    ap.error("STATELM MODEL or --url is required")

srv = None
if a.url:
    port = int(re.search(r":(\d+)", a.url.split("//")[-1]).group(1))
else:
    cmd = [a.statelm, "serve", "-m", a.model, "--port", "0", "--parallel", str(a.parallel), "-c", str(a.ctx)]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    cmd += a.extra_args.split()
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
try:
    if srv:
        line = srv.stdout.readline().decode()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)", line).group(1))
    topics = ["the sea", "a cat", "mountains", "a city at night", "an old clock", "rain", "a robot", "the moon"]

    def one(i):
        req = {"messages": [{"role": "user", "content": f"Write about {topics[i % len(topics)]}. ({i})"}],
               "max_tokens": a.max_tokens, "temperature": 0.7, "seed": i, "stream": True,
               "stream_options": {"include_usage": True}}
        if a.ignore_eos:
            req["ignore_eos"] = True
        body = json.dumps(req)
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        c.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        ttft, n_events, done, n_usage = None, 0, False, None
        for raw in r:
            raw = raw.strip()
            if not raw.startswith(b"data: "):
                continue
            if raw == b"data: [DONE]":
                done = True
                break
            ev = json.loads(raw[6:])
            if ev.get("usage"):
                n_usage = ev["usage"].get("completion_tokens")
            if ev.get("choices") and ev["choices"][0]["delta"].get("content"):
                n_events += 1
                if ttft is None:
                    ttft = time.monotonic() - t0
        c.close()
        return r.status == 200 and done, ttft or 0.0, time.monotonic() - t0, n_usage if n_usage is not None else n_events

    t_start = time.monotonic()
    with ThreadPoolExecutor(a.concurrency) as ex:
        results = list(ex.map(one, range(a.requests)))
    wall = time.monotonic() - t_start
    metrics = {}
    if srv:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/metrics")
        metrics = dict(re.findall(r"^(statelm_\w+) (\S+)$", c.getresponse().read().decode(), re.M))
        c.close()
finally:
    if srv:
        stop_server(srv)

ok = [r for r in results if r[0]]
ttft = sorted(r[1] for r in ok)
lat = sorted(r[2] for r in ok)
q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
gen = float(sum(r[3] for r in ok))
print(f"requests {a.requests}, concurrency {a.concurrency}, slots {a.parallel}, max_tokens {a.max_tokens}")
print(f"completed {len(ok)}, lost {a.requests - len(ok)}, wall {wall:.2f} s, server exit status "
      f"{srv.returncode if srv else 'n/a (--url)'}")
print(f"time to first token p50 {q(ttft, 0.5) * 1e3:.1f} ms, p95 {q(ttft, 0.95) * 1e3:.1f} ms")
print(f"latency p50 {q(lat, 0.5) * 1e3:.1f} ms, p95 {q(lat, 0.95) * 1e3:.1f} ms, mean {statistics.mean(lat) * 1e3 if lat else 0:.1f} ms")
print(f"generated {gen:.0f} tokens: {gen / wall:.1f} tok/s aggregate")
if metrics:
    print(f"server decode tok/s (per step) {float(metrics.get('statelm_decode_tokens_per_second', 0)):.1f}; "
          f"generated (server) {metrics.get('statelm_generated_tokens_total')}; prefix reuse "
          f"{metrics.get('statelm_prefix_reuse_tokens_total')} of {metrics.get('statelm_prompt_tokens_total')} prompt "
          f"tokens; drafted {metrics.get('statelm_spec_drafted_tokens_total')}, accepted "
          f"{metrics.get('statelm_spec_accepted_tokens_total')}")
