#!/usr/bin/env python3
"""gen-gemma-tokenizer-golden.py — golden token ids of Gemma 3's tokenizer for
tests/golden/test_gemma_tokenizer.c, produced by llama.cpp's `llama-tokenize` (never by statelm) from
the real GGUF that scripts/fetch-models.sh writes ($STATELM_CACHE/models/gemma-3-270m.Q4_K_M.gguf).

Texts: tests/data/tokenizer/corpus.txt cut into chunks of 6 lines (as gen-tokenizer-golden.py does)
-> golden_gemma3.bin; tests/data/tokenizer/gemma_sample.txt (a multilingual sample with whitespace
runs and Gemma's special tokens written as text) cut into single lines -> golden_gemma3_sample.bin,
and the same with --no-parse-special -> golden_gemma3_sample_raw.bin (control tokens such as
<start_of_turn> stay text; user-defined ones such as "\n\n" or "<b>" are still matched). Every chunk
is tokenised as llama-tokenize does by default: the model's BOS first (the file sets
tokenizer.ggml.add_bos_token = true) and special tokens parsed in the text; files are read verbatim
(--no-escape). Same file format as gen-tokenizer-golden.py: "SLMG" u32 version=1 u32 n_chunks, then
per chunk u32 byte_len, u32 n_ids, n_ids x i32 (little-endian).

llama-tokenize loads the 262,144-token vocabulary in about 2 s, so the corpus chunks go through one
call: joined by a control token that appears in no chunk, whose id then splits the output. llama.cpp
tokenises the text between special tokens piece by piece, and Gemma's vocabulary has no space
prefix, so each piece's ids are those of the chunk alone; the sample chunks and a spread of corpus
chunks are also run one call each and must agree.

Build llama-tokenize once: cmake --build ~/.cache/statelm/llama-bench-0.3.36-native/build --target llama-tokenize
Usage: python3 scripts/gen-gemma-tokenizer-golden.py [LLAMA_TOKENIZE] (standard library only)
"""
import ast
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
CACHE = os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm"))
MODEL = os.path.join(CACHE, "models", "gemma-3-270m.Q4_K_M.gguf")
TOOL = os.path.join(CACHE, "llama-bench-0.3.36-native", "build", "bin", "llama-tokenize")
BOS = 2
SEPARATOR, SEPARATOR_ID = "<unused6241>", 262143


def chunks(text, n_lines):
    lines = text.split("\n")
    out = []
    for i in range(0, len(lines), n_lines):
        block = "\n".join(lines[i:i + n_lines])
        if i + n_lines < len(lines):
            block += "\n"
        if block:
            out.append(block)
    assert "".join(out) == text
    return out


def tokenize(tool, text, bos=True, special=True):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        args = [tool, "-m", MODEL, "-f", path, "--ids", "--no-escape", "--log-disable"]
        if not bos:
            args.append("--no-bos")
        if not special:
            args.append("--no-parse-special")
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return ast.literal_eval(out.strip().splitlines()[-1])


def corpus_ids(tool, pieces):
    assert not any(SEPARATOR in p for p in pieces)
    ids = tokenize(tool, SEPARATOR.join(pieces), bos=False)
    out, cur = [], [BOS]
    for i in ids:
        if i == SEPARATOR_ID:
            out.append(cur)
            cur = [BOS]
        else:
            cur.append(i)
    out.append(cur)
    assert len(out) == len(pieces), (len(out), len(pieces))
    return out


def write_golden(path, pieces, ids):
    with open(path, "wb") as f:
        f.write(b"SLMG" + struct.pack("<II", 1, len(pieces)))
        for p, v in zip(pieces, ids):
            f.write(struct.pack("<II", len(p.encode("utf-8")), len(v)))
            f.write(struct.pack("<%di" % len(v), *v))


def main():
    tool = sys.argv[1] if len(sys.argv) > 1 else TOOL
    for path in (tool, MODEL):
        if not os.path.exists(path):
            sys.exit("gen-gemma-tokenizer-golden: missing %s" % path)
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        corpus = chunks(f.read(), 6)
    ids = corpus_ids(tool, corpus)
    for k in range(0, len(corpus), max(1, len(corpus) // 8)):
        assert tokenize(tool, corpus[k]) == ids[k], "corpus chunk %d differs when tokenised alone" % k
    write_golden(os.path.join(DATA, "golden_gemma3.bin"), corpus, ids)
    with open(os.path.join(DATA, "gemma_sample.txt"), encoding="utf-8", newline="") as f:
        sample = chunks(f.read(), 1)
    sample_ids = [tokenize(tool, p) for p in sample]
    assert corpus_ids(tool, sample) == sample_ids
    write_golden(os.path.join(DATA, "golden_gemma3_sample.bin"), sample, sample_ids)
    raw_ids = [tokenize(tool, p, special=False) for p in sample]
    write_golden(os.path.join(DATA, "golden_gemma3_sample_raw.bin"), sample, raw_ids)
    print("gen-gemma-tokenizer-golden: %d corpus chunks (%d ids), %d sample chunks (%d ids)" %
          (len(corpus), sum(map(len, ids)), len(sample), sum(map(len, sample_ids))))


if __name__ == "__main__":
    main()
