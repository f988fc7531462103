#!/usr/bin/env python3
"""`statelm run` and `statelm chat` output contracts on the tiny models, against Hugging Face data
committed in tests/data/tiny/*/golden (manifest.json: HF greedy continuation; logits.f32: HF logits):

- `--prompt-ids P --temp 0 --ids -n 16 --ignore-eos` prints exactly HF's greedy tokens on one line;
- `--logprobs 3` prints one JSON object per token whose top entries are HF's log-softmax top 3
  (within 1e-4) and whose token is the top-1;
- sampling with a seed is reproducible and another seed differs; -p TEXT runs through the chat
  template; chat answers two turns read from stdin;
- --prompt-cache FILE: a later run with a longer prompt reuses all but the last saved token and
  prints the same tokens as a run without the cache; a damaged cache file is refused and left alone
  (tests/py/test_prompt_cache.py has the other refusals and unwritable caches);
- -p TEXT spelling "<|im_end|>" gets the ids of those characters (several prompt tokens, counted
  by --prompt-cache), not the control token.
Standard library only. Usage: test_run_cli.py STATELM TESTS_DATA_DIR."""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

statelm, data = sys.argv[1], Path(sys.argv[2])
failures = []


def run(*args, stdin=None):
    p = subprocess.run([statelm, *args], capture_output=True, text=True, input=stdin)
    if p.returncode != 0:
        failures.append(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


for arch in ("llama", "qwen3", "lfm2", "qwen35"):
    g = data / "tiny" / arch / "golden"
    man = json.loads((g / "manifest.json").read_text())
    n_prompt, vocab = man["n_prompt"], man["vocab"]
    prompt = ",".join(map(str, man["ids"][:n_prompt]))
    model = str(data / "tiny" / arch / f"{arch}-f32.gguf")
    want = man["hf_greedy"]["tokens"]
    out = run("run", "-m", model, "--prompt-ids", prompt, "--temp", "0", "--ids", "-n", str(len(want)),
              "--ignore-eos", "--kv-f32", "-t", "2")
    lines = out.splitlines()
    if len(lines) != 1 or [int(x) for x in lines[0].split()] != want:
        failures.append(f"{arch}: --ids printed {out!r}, HF greedy is {want}")
    # log-probabilities of the first generated token against HF's logits at the prompt end
    raw = (g / "logits.f32").read_bytes()
    row = struct.unpack_from(f"<{vocab}f", raw, (n_prompt - 1) * vocab * 4)
    mx = max(row)
    lse = mx + math.log(sum(math.exp(x - mx) for x in row))
    top = sorted(range(vocab), key=lambda i: (-row[i], i))[:3]
    out = run("run", "-m", model, "--prompt-ids", prompt, "--temp", "0", "--logprobs", "3", "-n", "2",
              "--ignore-eos", "--kv-f32")
    objs = [json.loads(x) for x in out.splitlines()]
    if len(objs) != 2:
        failures.append(f"{arch}: --logprobs printed {len(objs)} objects, want 2")
    else:
        first = objs[0]
        if first["pos"] != n_prompt or first["token"] != top[0] or [t for t, _ in first["top"]] != top:
            failures.append(f"{arch}: --logprobs {first} vs HF top {top} at pos {n_prompt}")
        for (t, lp), i in zip(first["top"], top):
            if abs(lp - (row[i] - lse)) > 1e-4:
                failures.append(f"{arch}: logprob of {t} is {lp}, HF {row[i] - lse}")
        if objs[1]["token"] != objs[1]["top"][0][0] or objs[1]["pos"] != n_prompt + 1:
            failures.append(f"{arch}: second --logprobs object inconsistent: {objs[1]}")
    # seeded sampling
    a = run("run", "-m", model, "--prompt-ids", prompt, "--temp", "1.5", "--top-k", "0", "--top-p", "1",
            "--min-p", "0", "--seed", "5", "--ids", "-n", "24", "--ignore-eos")
    b = run("run", "-m", model, "--prompt-ids", prompt, "--temp", "1.5", "--top-k", "0", "--top-p", "1",
            "--min-p", "0", "--seed", "5", "--ids", "-n", "24", "--ignore-eos")
    c = run("run", "-m", model, "--prompt-ids", prompt, "--temp", "1.5", "--top-k", "0", "--top-p", "1",
            "--min-p", "0", "--seed", "6", "--ids", "-n", "24", "--ignore-eos")
    if a != b or a == c:
        failures.append(f"{arch}: seeded sampling not reproducible or seed-independent: {a!r} {b!r} {c!r}")
    # --prompt-cache: a second run with a longer prompt reuses the saved prefix and gives the same
    # tokens as a run without the cache; a damaged cache is refused and left alone
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "prompt.slmstate")
        longer = prompt + "," + ",".join(map(str, man["ids"][n_prompt:n_prompt + 5]))
        plain = run("run", "-m", model, "--prompt-ids", longer, "--temp", "0", "--ids", "-n", "8", "--ignore-eos")
        subprocess.run([statelm, "run", "-m", model, "--prompt-ids", prompt, "--prompt-cache", cache, "-n", "1"],
                       capture_output=True)
        p = subprocess.run([statelm, "run", "-m", model, "--prompt-ids", longer, "--prompt-cache", cache, "--temp",
                            "0", "--ids", "-n", "8", "--ignore-eos"], capture_output=True, text=True)
        if p.stdout != plain or f"{n_prompt - 1} of {n_prompt + 5} prompt tokens reused" not in p.stderr:
            failures.append(f"{arch}: --prompt-cache gave {p.stdout!r} / {p.stderr.strip()!r}, plain {plain!r}")
        with open(cache, "r+b") as f:
            f.seek(100)
            f.write(b"\xff\xfe")
        damaged = Path(cache).read_bytes()
        p = subprocess.run([statelm, "run", "-m", model, "--prompt-ids", longer, "--prompt-cache", cache, "--temp",
                            "0", "--ids", "-n", "8", "--ignore-eos"], capture_output=True, text=True)
        if "prompt cache refused" not in p.stderr or p.returncode == 0 or Path(cache).read_bytes() != damaged:
            failures.append(f"{arch}: damaged prompt cache: {p.stdout!r} / {p.stderr.strip()!r}")
    # text prompt through the chat template, and a two-turn chat
    run("run", "-m", model, "-p", "hello world", "-n", "8", "--seed", "1")
    run("chat", "-m", model, "-n", "6", "--seed", "1", stdin="hi there\nand again\n")
    def n_prompt_tokens(text):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([statelm, "run", "-m", model, "-p", text, "-n", "1", "--temp", "0", "--prompt-cache",
                                os.path.join(d, "c")], capture_output=True, text=True)
        m = re.search(r"of (\d+) prompt tokens", p.stderr)
        return int(m.group(1)) if m else -1
    extra = n_prompt_tokens("Hi<|im_end|>") - n_prompt_tokens("Hi")
    if extra < 3:
        failures.append(f"{arch}: '<|im_end|>' in -p TEXT is {extra} prompt token(s), not text")
    print(f"{arch}: ok")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("run/chat contracts hold")
