#!/usr/bin/env python3
"""`statelm tokenize` on llama.cpp's own tokenizer test vectors: the vocab-only GGUFs of real models
(models/ggml-vocab-*.gguf in llama.cpp: qwen35, qwen2, llama-bpe, llama-spm, gemma-4, gpt-2,
phi-3, deepseek, starcoder, falcon, command-r, mpt, refact, bert, ...) with their inputs (.inp) and
the ids Hugging Face's tokenizer gives them (.out, written by llama.cpp's
convert_hf_to_gguf_update.py and checked by its tests/test-tokenizer-0). The files come from the
llama-cpp-python sdist into $STATELM_CACHE/llamacpp-ref/vocab (scripts/fetch-models.sh); they are
never committed. Skipped (exit 77, saying why) when they are absent.

As test-tokenizer-0 reads them: the inputs are separated by "\\n__ggml_vocab_test__\\n" (a file
ending with the marker has no empty last input), each .out line holds one input's ids, and the
text is tokenised without BOS/EOS and without parsing control-token text (add_special = false,
parse_special = false: `statelm tokenize --no-special`, one call per file with --split).

Checks, per file (a table of inputs passed / total is printed):
1. the seven files the project names pass on every input: qwen35, qwen2, llama-bpe, llama-spm,
   gemma-4, gpt-2, phi-3;
2. at least 80% of the files with vectors pass on every input;
3. a file statelm does not load is refused with exit status 1 and a message naming the tokenizer
   or pre-tokenizer ("tokenizer 'X' is not supported" / "pre-tokenizer 'X' is not supported"),
   never a crash; the same holds for the vocab files without vectors (tokenising a short text);
4. a truncated vocab file (the first quarter and three quarters of each required file) is
   refused with exit status 1 and a message.
Usage: test_llamacpp_vocab.py STATELM TESTS_DATA_DIR."""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SEP = b"\n__ggml_vocab_test__\n"
REQUIRED = ["qwen35", "qwen2", "llama-bpe", "llama-spm", "gemma-4", "gpt-2", "phi-3"]
MIN_FULL_FRACTION = 0.80
REFUSED = re.compile(r"(tokenizer|pre-tokenizer) '[^']+' is not supported")

statelm = sys.argv[1]
vocab_dir = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm")) / "llamacpp-ref" / "vocab"
files = sorted(vocab_dir.glob("ggml-vocab-*.gguf"))
with_vectors = [f for f in files if Path(f"{f}.inp").exists() and Path(f"{f}.out").exists()]
if not with_vectors:
    print(f"SKIPPED: no ggml-vocab-*.gguf with .inp/.out in {vocab_dir} (bash scripts/fetch-models.sh fetches them)")
    sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def name_of(f):
    return f.name[len("ggml-vocab-"):-len(".gguf")]


def split_inputs(raw):
    """test-tokenizer-0's reading of a .inp file."""
    parts, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            parts.append(raw[pos:])
            break
        parts.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    return parts


def run(args, **kw):
    return subprocess.run([statelm, "tokenize", *args], capture_output=True, timeout=600, **kw)


def refused_by_name(r, what):
    err = r.stderr.decode(errors="replace").strip()
    check(r.returncode == 1, f"{what}: exit status {r.returncode} (1 expected for a refusal): {err[-300:]}")
    check(REFUSED.search(err) is not None and "SLM_ERR_UNSUPPORTED" in err,
          f"{what}: refusal does not name the tokenizer: {err[-300:]}")
    m = REFUSED.search(err)
    return m.group(0) if m else err[-120:]


results = {}  # name -> (passed, total, note)
for f in with_vectors:
    name = name_of(f)
    inputs = split_inputs(Path(f"{f}.inp").read_bytes())
    expected = [[int(x) for x in line.split()] for line in Path(f"{f}.out").read_text().splitlines()]
    check(len(inputs) == len(expected), f"{name}: {len(inputs)} inputs but {len(expected)} output lines")
    r = run(["-m", str(f), "--no-special", "-f", f"{f}.inp", "--split", SEP.decode()])
    if r.returncode != 0:
        err = refused_by_name(r, name)
        results[name] = (0, len(inputs), "refused: " + err)
        continue
    got = [[int(x) for x in line.split()] for line in r.stdout.decode().split("\n")[:-1]]
    check(len(got) == len(inputs), f"{name}: {len(got)} lines of ids for {len(inputs)} inputs")
    passed = 0
    for i, (inp, want) in enumerate(zip(inputs, expected)):
        ids = got[i] if i < len(got) else None
        if ids == want:
            passed += 1
        elif passed + 3 > i:  # the first few mismatches of a file, in detail
            print(f"  {name} input {i} {inp[:60]!r}:\n    llama.cpp {want[:24]}\n    statelm   {(ids or [])[:24]}")
    results[name] = (passed, len(inputs), "")

# Vocab files without vectors: they load and tokenise, or are refused by name.
for f in files:
    if f in with_vectors:
        continue
    r = run(["-m", str(f), "--no-special", "-p", "Hello world, 3.14 \u00e9t\u00e9 \U0001F600"])
    if r.returncode == 0:
        results[name_of(f)] = (None, None, "loads (no vectors)")
    else:
        results[name_of(f)] = (None, None, "refused: " + refused_by_name(r, name_of(f)))

print(f"{'file':18s} {'passed':>9s}  note")
for name, (passed, total, note) in results.items():
    cell = f"{passed}/{total}" if total is not None else "-"
    print(f"{name:18s} {cell:>9s}  {note}")
full = [n for n, (p, t, _) in results.items() if t is not None and p == t]
print(f"files passing every input: {len(full)} of {len(with_vectors)}")
for name in REQUIRED:
    p, t, _ = results.get(name, (0, None, ""))
    check(t is not None and p == t, f"{name}: {p}/{t} inputs pass (all required)")
check(len(full) >= MIN_FULL_FRACTION * len(with_vectors),
      f"only {len(full)} of {len(with_vectors)} files pass every input (at least {MIN_FULL_FRACTION:.0%} required)")

# Truncated vocab files: cut a quarter and three quarters of the way in (inside the arrays).
with tempfile.TemporaryDirectory() as tmp:
    for name in REQUIRED:
        src = vocab_dir / f"ggml-vocab-{name}.gguf"
        if not src.exists():
            continue
        data = src.read_bytes()
        for cut in (len(data) // 4, 3 * len(data) // 4):
            bad = Path(tmp) / f"{name}-{cut}.gguf"
            bad.write_bytes(data[:cut])
            r = run(["-m", str(bad), "-p", "hello"])
            err = r.stderr.decode(errors="replace").strip()
            check(r.returncode == 1 and len(err) > len(str(bad)) + 2,
                  f"{name} cut at {cut} bytes: exit status {r.returncode}, message {err[-200:]!r}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
