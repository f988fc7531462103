#!/usr/bin/env python3
"""What switching models costs in `statelm serve -m A -m B` (docs/serve.md "Several models"):
greedy 8-token chat requests alternating A, A, B, B, ... on one server; "after a switch" is the
first request to a model after the other one's (with --models-max 1 it includes loading the model
and unloading the other), "same model again" the second. Prints medians and ranges.
Usage: serve_model_switch.py STATELM MODELS_MAX [A.gguf B.gguf] (default: SmolLM2 and Gemma 3 from
the cache)."""
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

cache = os.path.join(os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm")), "models")
statelm, models_max = sys.argv[1], sys.argv[2]
a, b = sys.argv[3:5] if len(sys.argv) >= 5 else (os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf"),
                                                 os.path.join(cache, "gemma-3-270m.Q4_K_M.gguf"))
p = subprocess.Popen([statelm, "serve", "-m", a, "-m", b, "--models-max", models_max, "--port", "0", "-t", "2", "-c", "512",
                      "--parallel", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
port = int(re.search(r":(\d+) ", p.stdout.readline()).group(1))


def ask(model):
    body = json.dumps({"model": os.path.basename(model), "messages": [{"role": "user", "content": "Name a color."}],
                       "max_tokens": 8, "temperature": 0}).encode()
    t = time.monotonic()
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                                  {"Content-Type": "application/json"})).read()
    return time.monotonic() - t


try:
    ask(a)
    ask(b)
    switch, warm = [], []
    for _ in range(5):
        for m in (a, b):
            switch.append(ask(m))
            warm.append(ask(m))
finally:
    p.terminate()
    p.wait()
ms = lambda v: f"median {statistics.median(v) * 1e3:.0f} ms [{min(v) * 1e3:.0f}, {max(v) * 1e3:.0f}]"  # noqa: E731
print(f"--models-max {models_max}: after a switch {ms(switch)}, same model again {ms(warm)} (n={len(switch)})")
