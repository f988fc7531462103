#!/usr/bin/env python3
"""Command-line limits and messages (issue 13, items 6, 7, 10), on the tiny llama model:

- `-t N` beyond the online CPUs warns and is capped (a run finishes quickly); --force-threads keeps N;
- models whose first Q8_0 scale of token_embd.weight (tied output) is +inf or NaN (made here with the
  gguf package):
  run, run --logprobs and score fail (exit 1) naming the position of the non-finite logits, and
  every line they print is strict JSON (json.loads rejecting NaN/Infinity);
- `-c` beyond the training context warns (not at the training context itself);
- `info --json` on a model whose general.name is invalid UTF-8 prints valid UTF-8 JSON with U+FFFD;
- `chat --help` is chat's usage, `run --help` lists every chat template the library renders
  (qwen3-nothink included), `statelm --version` prints the version.
Usage: test_cli_limits.py STATELM TESTS_DATA_DIR."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

statelm, data = sys.argv[1], Path(sys.argv[2])
tiny = data / "tiny" / "llama"
model = str(tiny / "llama-f32.gguf")
failures = []


def run(*args, timeout=120):
    return subprocess.run([statelm, *args], capture_output=True, timeout=timeout)


def strict_json(line):
    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")
    return json.loads(line, parse_constant=refuse)


def one_error_line(p, what, pattern):
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    if p.returncode == 0 or p.returncode >= 128 or p.returncode < 0:
        failures.append(f"{what}: exit {p.returncode}, want an error exit")
    elif len(err) != 1 or not re.search(pattern, err[0]):
        failures.append(f"{what}: want one stderr line matching /{pattern}/, got {err}")


# ---- 6: -t beyond the CPU count
n_cpu = os.cpu_count() or 1
too_many = max(1024, n_cpu + 1)
t0 = time.monotonic()
p = run("run", "-m", model, "--prompt-ids", "1,2", "-n", "4", "--ids", "--temp", "0", "-t", str(too_many), timeout=60)
dt = time.monotonic() - t0
err = p.stderr.decode()
if p.returncode != 0 or not re.search(rf"-t {too_many} is more than the \d+ online CPUs: using \d+", err):
    failures.append(f"-t {too_many}: exit {p.returncode}, want a warning about the CPU count: {err!r}")
plain = run("run", "-m", model, "--prompt-ids", "1,2", "-n", "4", "--ids", "--temp", "0")
if p.stdout != plain.stdout:
    failures.append(f"-t {too_many}: tokens {p.stdout!r} differ from the default run {plain.stdout!r}")
forced = run("run", "-m", model, "--prompt-ids", "1,2", "-n", "4", "--ids", "--temp", "0", "-t", str(n_cpu + 1),
             "--force-threads")
if forced.returncode != 0 or b"warning" in forced.stderr or forced.stdout != plain.stdout:
    failures.append(f"--force-threads: exit {forced.returncode}, stderr {forced.stderr!r}, stdout {forced.stdout!r}")
print(f"-t {too_many}: {dt:.2f} s")

# ---- 7: non-finite logits
with tempfile.TemporaryDirectory() as tmp:
    import numpy as np
    from gguf import GGUFReader

    for value in (np.inf, np.nan):
        bad = os.path.join(tmp, f"{value}-scale.gguf")
        shutil.copy(tiny / "llama-q8_0.gguf", bad)
        r = GGUFReader(bad, "r+")
        t = next(t for t in r.tensors if t.name == "token_embd.weight")  # also the output matrix (tied)
        if t.tensor_type.name != "Q8_0":
            failures.append(f"token_embd.weight is {t.tensor_type.name}, the test expects Q8_0")
        raw = t.data.reshape(-1).view(np.uint8)
        raw[0:2] = np.frombuffer(np.array([value], dtype="<f2").tobytes(), dtype=np.uint8)  # scale of row 0's block 0
        r.data.flush()
        del r, t, raw

        p = run("run", "-m", bad, "--prompt-ids", "1,2,3", "-n", "4", "--temp", "0")
        one_error_line(p, f"run, {value} scale", r"non-finite logit .* at position 2\b")
        for args, what in ((["run", "-m", bad, "--prompt-ids", "1,2,3", "-n", "4", "--temp", "0", "--logprobs", "3"],
                            "run --logprobs"), (["score", "-m", bad, "--prompt-ids", "1,2,3", "--top", "3"], "score")):
            p = run(*args)
            one_error_line(p, f"{what}, {value} scale", r"non-finite logit .* at position \d+")
            for line in p.stdout.decode().splitlines():
                try:
                    strict_json(line)
                except ValueError as e:
                    failures.append(f"{what}, {value} scale: invalid JSON line {line!r}: {e}")

    # ---- 10: invalid UTF-8 in general.name (same length, so offsets are unchanged)
    name_bad = os.path.join(tmp, "bad-name.gguf")
    blob = bytearray((tiny / "llama-f32.gguf").read_bytes())
    key = b"general.name\x08\x00\x00\x00"
    at = blob.find(key) + len(key) + 8
    if blob[at:at + 7] != b"statelm":
        failures.append("general.name not found where expected in the tiny GGUF")
    blob[at:at + 7] = b"\xffst\xc3(\xed\xa0"  # a stray byte, a bad continuation, a surrogate start
    Path(name_bad).write_bytes(bytes(blob))
    p = run("info", "-m", name_bad, "--json")
    try:
        info = strict_json(p.stdout.decode("utf-8"))
        if p.returncode != 0 or not info["name"].startswith("\ufffdst\ufffd(") or not info["name"].endswith(
                " tiny llama"):
            failures.append(f"info --json: exit {p.returncode}, name {info['name']!r}")
    except (UnicodeDecodeError, ValueError) as e:
        failures.append(f"info --json with invalid UTF-8 in general.name: not valid UTF-8 JSON: {e}")

# ---- 10: -c beyond the training context
p = run("run", "-m", model, "--prompt-ids", "1", "-n", "1", "-c", "2049", "--ids")
if p.returncode != 0 or not re.search(r"-c 2049 exceeds the model's training context \(2048\)", p.stderr.decode()):
    failures.append(f"-c 2049: exit {p.returncode}, want a training-context warning: {p.stderr!r}")
p = run("run", "-m", model, "--prompt-ids", "1", "-n", "1", "-c", "2048", "--ids")
if p.returncode != 0 or p.stderr:
    failures.append(f"-c 2048 (the training context): exit {p.returncode}, stderr {p.stderr!r}")

# ---- 10: help and version
p = run("chat", "--help")
if p.returncode != 0 or not p.stdout.decode().startswith("usage: statelm chat"):
    failures.append(f"chat --help: {p.stdout[:80]!r}")
p = run("run", "--help")
m = re.search(r"--chat-template NAME\s+(.*)", p.stdout.decode())
names = [n.strip() for n in m.group(1).split("|")] if m else []
if "qwen3-nothink" not in names:
    failures.append(f"run --help lists templates {names}, without qwen3-nothink")
for n in names:
    q = run("run", "-m", model, "-p", "hi", "-n", "1", "--chat-template", n, "--ids")
    if q.returncode != 0:
        failures.append(f"template {n} listed by run --help does not render: {q.stderr!r}")
for flag in ("--version", "-V"):
    p = run(flag)
    if p.returncode != 0 or not re.fullmatch(rb"statelm \d+\.\d+\.\d+\n", p.stdout):
        failures.append(f"statelm {flag}: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failure(s)" if failures else "all limit and message checks passed")
sys.exit(1 if failures else 0)
