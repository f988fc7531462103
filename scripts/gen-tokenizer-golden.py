#!/usr/bin/env python3
"""gen-tokenizer-golden.py — golden token ids for tests/golden/test_tokenizer_golden.c, produced by
independent implementations (never by statelm):
  * Hugging Face `tokenizers` for the byte-level BPE tokenizers (tokenizer.json files made by
    scripts/make-tokenizers.py under ~/.cache/statelm/tokenizers, and the committed tiny BPE
    tokenizer tests/data/tokenizer/tiny_bpe.json, trained here with `tokenizers`' BpeTrainer);
  * the `sentencepiece` package for the SentencePiece BPE vocabulary tests/data/tokenizer/spm_tiny.*
    (trained here on the corpus with byte fallback).

The corpus is cut into chunks of CHUNK_LINES lines ('\\n'-terminated; '\\r' stays inside lines).
Golden file format (little-endian): "SLMG" u32 version=1 u32 n_chunks, then per chunk
u32 byte_len, u32 n_ids, n_ids x i32. Chunks are consecutive slices of corpus.txt.

Run with the statelm venv: ~/.cache/statelm/venv/bin/python scripts/gen-tokenizer-golden.py
"""
import json
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
CACHE = os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm"))
CHUNK_LINES = 6


def chunks(text):
    lines = text.split("\n")
    out = []
    for i in range(0, len(lines), CHUNK_LINES):
        block = "\n".join(lines[i:i + CHUNK_LINES])
        if i + CHUNK_LINES < len(lines):
            block += "\n"
        if block:
            out.append(block)
    assert "".join(out) == text
    return out


def write_golden(path, pieces, encode):
    with open(path, "wb") as f:
        f.write(b"SLMG" + struct.pack("<II", 1, len(pieces)))
        for p in pieces:
            ids = encode(p)
            f.write(struct.pack("<II", len(p.encode("utf-8")), len(ids)))
            f.write(struct.pack("<%di" % len(ids), *ids))


def train_tiny_bpe(text):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers, Regex
    pat = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pat), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator(chunks(text), trainer)
    tok.add_tokens(["<think>", "</think>"])
    path = os.path.join(DATA, "tiny_bpe.json")
    tok.save(path)
    # Re-serialise compactly (one line per vocab entry would be larger).
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
    return Tokenizer.from_file(path)


def train_tiny_spm(text):
    import sentencepiece as spm
    prefix = os.path.join(DATA, "spm_tiny")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([c for c in chunks(text)]), model_prefix=prefix, model_type="bpe",
        vocab_size=1200, byte_fallback=True, character_coverage=0.98, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True, num_threads=1,
        max_sentence_length=1 << 16, bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = {"model": "llama", "add_space_prefix": True, "bos_token_id": 1, "eos_token_id": 2,
             "unknown_token_id": 0, "tokens": [], "scores": [], "token_type": []}
    for i in range(sp.get_piece_size()):
        vocab["tokens"].append(sp.id_to_piece(i))
        vocab["scores"].append(sp.get_score(i))
        t = 1
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_unused(i):
            t = 5
        elif sp.is_byte(i):
            t = 6
        vocab["token_type"].append(t)
    with open(prefix + ".json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, separators=(",", ":"))
    os.remove(prefix + ".model")
    os.remove(prefix + ".vocab")
    return sp


def main():
    from tokenizers import Tokenizer
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        text = f.read()
    pieces = chunks(text)
    tiny = train_tiny_bpe(text)
    write_golden(os.path.join(DATA, "golden_tiny_bpe.bin"), pieces,
                 lambda s: tiny.encode(s, add_special_tokens=False).ids)
    sp = train_tiny_spm(text)
    write_golden(os.path.join(DATA, "golden_spm_tiny.bin"), pieces, lambda s: sp.encode(s))
    for name in ["smollm2", "qwen3", "qwen35", "lfm2"]:
        path = os.path.join(CACHE, "tokenizers", name, "tokenizer.json")
        if not os.path.exists(path):
            print("gen-tokenizer-golden: missing", path, "(run scripts/fetch-models.sh)", file=sys.stderr)
            continue
        tok = Tokenizer.from_file(path)
        write_golden(os.path.join(DATA, "golden_%s.bin" % name), pieces,
                     lambda s: tok.encode(s, add_special_tokens=False).ids)


if __name__ == "__main__":
    main()
