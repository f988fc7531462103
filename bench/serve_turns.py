#!/usr/bin/env python3
"""serve_turns.py — multi-turn chat through `statelm serve` (benchmark, not a test): the latency of
turn 2 of a conversation on a server that reuses the state of turn 1 (prefix reuse) and on one
started with --no-prefix-reuse, which prefills the whole conversation again. Each conversation
opens with its own long system message (about --words words), turn 1 is answered (greedy,
--max-tokens), then turn 2 (the answer and a short question appended) is streamed: its time to
first token is the cost of bringing the state up to date. Reports the median over --convs
conversations for each server, the cached tokens the server reported, and the ratio.

Usage: serve_turns.py STATELM MODEL [--convs 6] [--words 400] [--max-tokens 16] [-t THREADS] [-c CTX]"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import time

from serve_util import stop_server

ap = argparse.ArgumentParser()
ap.add_argument("statelm")
ap.add_argument("model")
ap.add_argument("--convs", type=int, default=6)
ap.add_argument("--words", type=int, default=400)
ap.add_argument("--max-tokens", type=int, default=16)
ap.add_argument("-t", "--threads", type=int, default=0)
ap.add_argument("-c", "--ctx", type=int, default=2048)
a = ap.parse_args()

WORDS = ("the river runs past an old mill where a miller keeps his accounts in a green book and counts "
         "every sack of grain twice before the carts leave for the market in town").split()


def system_text(i):
    return f"Conversation {i}. " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(a.words))


def post(port, body):
    """(time to first content event, total seconds, final usage) of a streamed chat request."""
    body = dict(body, stream=True, stream_options={"include_usage": True}, temperature=0, max_tokens=a.max_tokens)
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()[:300]
    ttft, text, usage = None, "", None
    for raw in r:
        raw = raw.strip()
        if not raw.startswith(b"data: ") or raw == b"data: [DONE]":
            continue
        ev = json.loads(raw[6:])
        usage = ev.get("usage") or usage
        if ev.get("choices") and ev["choices"][0]["delta"].get("content"):
            text += ev["choices"][0]["delta"]["content"]
            if ttft is None:
                ttft = time.monotonic() - t0
    c.close()
    return ttft if ttft is not None else time.monotonic() - t0, time.monotonic() - t0, usage or {}, text


def run(extra):
    cmd = [a.statelm, "serve", "-m", a.model, "--port", "0", "--parallel", "1", "-c", str(a.ctx), *extra]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = []
    try:
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)", srv.stdout.readline().decode()).group(1))
        for i in range(a.convs):
            msgs = [{"role": "system", "content": system_text(i)}, {"role": "user", "content": f"Summarise part {i}."}]
            _, _, _, answer = post(port, {"messages": msgs})
            msgs += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
            ttft, total, usage, _ = post(port, {"messages": msgs})
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            out.append((ttft, total, usage.get("prompt_tokens", 0), cached))
    finally:
        stop_server(srv)
    return out


res = {"prefix reuse": run([]), "--no-prefix-reuse": run(["--no-prefix-reuse"])}
print(f"model {a.model}, {a.convs} conversations, system message {a.words} words, {a.max_tokens} tokens per turn")
print(f"{'server':<20}{'turn-2 TTFT p50 ms':>20}{'turn-2 total p50 ms':>21}{'prompt tok':>12}{'cached tok':>12}")
for name, v in res.items():
    print(f"{name:<20}{statistics.median(x[0] for x in v) * 1e3:>20.1f}{statistics.median(x[1] for x in v) * 1e3:>21.1f}"
          f"{statistics.median(x[2] for x in v):>12.0f}{statistics.median(x[3] for x in v):>12.0f}")
r = statistics.median(x[0] for x in res["prefix reuse"]) / statistics.median(x[0] for x in res["--no-prefix-reuse"])
print(f"turn-2 time to first token with reuse / without: {100 * r:.1f}%")
