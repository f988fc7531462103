#!/usr/bin/env python3
"""responses_turns.py — a 4-turn OpenAI Responses conversation (benchmark, not a test): what turns
2..N cost to bring the model's state up to date when the client chains them with
previous_response_id (statelm continues from the stored response) against a client re-sending the
whole transcript as input items, on
  statelm    --previous-response-id chain, one server (prefix reuse on, as by default);
  resend     statelm started with --no-prefix-reuse, the whole transcript every turn: it prefills it all;
  llama      llama-server (optional), the whole transcript every turn (it refuses previous_response_id):
             its prompt cache reuses the prefix it still holds.
Each conversation opens with its own long instructions (about --words words); turns are answered
greedily (--max-tokens) and streamed. Per turn: the prompt's tokens (usage.input_tokens), those
prefilled (input_tokens - input_tokens_details.cached_tokens) and the time to the first output text
delta. The servers run side by side and every conversation goes to each in turn (interleaved), so
load on the machine falls on all of them alike. Reports per turn the medians over --convs
conversations and, for turns 2..N, the prefilled tokens and the time to first token of each server
as a share of `resend` (the cost of re-sending the transcript).

Usage: responses_turns.py STATELM MODEL [--llama-server BIN] [--convs 3] [--turns 4] [--words 400]
                          [--max-tokens 16] [-t THREADS] [-c CTX]"""
import argparse
import http.client
import json
import re
import socket
import statistics
import subprocess
import sys
import time

from serve_util import stop_server

ap = argparse.ArgumentParser()
ap.add_argument("statelm")
ap.add_argument("model")
ap.add_argument("--llama-server")
ap.add_argument("--convs", type=int, default=3)
ap.add_argument("--turns", type=int, default=4)
ap.add_argument("--words", type=int, default=400)
ap.add_argument("--max-tokens", type=int, default=16)
ap.add_argument("-t", "--threads", type=int, default=0)
ap.add_argument("-c", "--ctx", type=int, default=4096)
a = ap.parse_args()

WORDS = ("the river runs past an old mill where a miller keeps his accounts in a green book and counts "
         "every sack of grain twice before the carts leave for the market in town").split()
QUESTIONS = ["Summarise the text in one sentence.", "Who keeps the accounts?", "What is counted twice?",
             "Where do the carts go?", "What colour is the book?", "What runs past the mill?"]


def instructions(i):
    return f"Conversation {i}. " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(a.words))


def post(port, body):
    """(time to first output text delta, the final response) of a streamed Responses request."""
    body = dict(body, stream=True, temperature=0, max_output_tokens=a.max_tokens)
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/responses", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()[:300]
    ttft, done = None, None
    for raw in r:
        raw = raw.strip()
        if not raw.startswith(b"data: "):
            continue
        ev = json.loads(raw[6:])
        if ev.get("type") == "response.output_text.delta" and ttft is None:
            ttft = time.monotonic() - t0
        if ev.get("type") in ("response.completed", "response.incomplete"):
            done = ev["response"]
    c.close()
    assert done is not None, "no response.completed or response.incomplete event"
    return ttft if ttft is not None else time.monotonic() - t0, done


def answer_text(resp):
    return "".join(p.get("text", "") for o in resp.get("output", []) if o.get("type") == "message"
                   for p in o.get("content", []))


def conversation(port, i, chain):
    """[(input tokens, prefilled tokens, ttft s)] per turn."""
    out, prev, transcript = [], None, []
    for t in range(a.turns):
        q = {"role": "user", "content": QUESTIONS[t % len(QUESTIONS)]}
        if chain:
            body = {"instructions": instructions(i), "input": [q]}
            if prev:
                body["previous_response_id"] = prev
        else:
            transcript.append(q)
            body = {"instructions": instructions(i), "input": transcript}
        ttft, resp = post(port, body)
        prev = resp["id"]
        if not chain:
            transcript.append({"type": "message", "role": "assistant", "content": answer_text(resp)})
        u = resp.get("usage") or {}
        n_in = u.get("input_tokens", 0)
        cached = (u.get("input_tokens_details") or {}).get("cached_tokens", 0)
        out.append((n_in, n_in - cached, ttft))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_statelm(extra):
    cmd = [a.statelm, "serve", "-m", a.model, "--port", "0", "--parallel", "1", "-c", str(a.ctx), *extra]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)", srv.stdout.readline().decode()).group(1))
    return srv, port


def start_llama():
    port = free_port()
    cmd = [a.llama_server, "-m", a.model, "--port", str(port), "--parallel", "1", "-c", str(a.ctx), "--jinja"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return srv, port
        except OSError:
            pass
        time.sleep(0.2)
    stop_server(srv)
    raise SystemExit("llama-server did not start")


servers = {}
try:
    servers["statelm"] = start_statelm([]) + (True,)
    servers["resend"] = start_statelm(["--no-prefix-reuse"]) + (False,)
    if a.llama_server:
        servers["llama"] = start_llama() + (False,)
    res = {name: [] for name in servers}
    for i in range(a.convs):
        for name, (_, port, chain) in servers.items():
            res[name].append(conversation(port, i, chain))
            print(f"conversation {i} {name}: (input, prefilled, ttft s) per turn {res[name][-1]}", file=sys.stderr,
                  flush=True)
finally:
    for srv, _, _ in servers.values():
        stop_server(srv)

print(f"model {a.model}, {a.convs} conversations of {a.turns} turns, instructions {a.words} words, "
      f"{a.max_tokens} tokens per answer; medians over conversations")
print(f"{'server':<9}{'turn':>5}{'input tok':>11}{'prefilled tok':>15}{'TTFT ms':>10}")
for name, convs in res.items():
    for t in range(a.turns):
        col = [c[t] for c in convs]
        print(f"{name:<9}{t + 1:>5}{statistics.median(x[0] for x in col):>11.0f}"
              f"{statistics.median(x[1] for x in col):>15.0f}{statistics.median(x[2] for x in col) * 1e3:>10.1f}")
base = res["resend"]
print(f"turns 2..{a.turns}, share of re-sending the transcript (resend); prefilled tokens, then time to first token:")
for name, convs in res.items():
    if name == "resend":
        continue
    for t in range(1, a.turns):
        p = [c[t][1] / b[t][1] for c, b in zip(convs, base)]
        f = [c[t][2] / b[t][2] for c, b in zip(convs, base)]
        print(f"  {name:<8} turn {t + 1}: prefilled {100 * statistics.median(p):5.1f}% "
              f"(range {100 * min(p):.1f}-{100 * max(p):.1f}%), TTFT {100 * statistics.median(f):5.1f}% "
              f"(range {100 * min(f):.1f}-{100 * max(f):.1f}%)")
