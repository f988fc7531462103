#!/usr/bin/env python3
"""Seeds of tests/data/corpus/vocab (the fuzz_vocab target): small vocab-only GGUFs written with
gguf-py, one per tokenizer model statelm reads (byte-level BPE under a few of llama.cpp's
pre-tokenizers, SentencePiece, Gemma 4's raw BPE, WordPiece), plus damaged ones (an
unsupported model (t5) or pre-tokenizer, a merge naming an unknown token, arrays of the wrong length or
type, files cut short). Each is a few KB. Usage: gen-vocab-corpus.py OUT_DIR (needs `gguf`)."""
import sys
from pathlib import Path

import gguf

T = gguf.GGUFValueType


def byte_char(b):
    """GPT-2's byte-to-unicode mapping."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    if b in printable:
        return chr(b)
    return chr(256 + sorted(set(range(256)) - set(printable)).index(b))


def write(path, model, tokens, types=None, merges=None, scores=None, extra=(), arch="no-such-arch"):
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_key_value("tokenizer.ggml.model", model, T.STRING)
    w.add_key_value("tokenizer.ggml.tokens", tokens, T.ARRAY, sub_type=T.STRING)
    if types is not None:
        w.add_key_value("tokenizer.ggml.token_type", types, T.ARRAY, sub_type=T.INT32)
    if scores is not None:
        w.add_key_value("tokenizer.ggml.scores", scores, T.ARRAY, sub_type=T.FLOAT32)
    if merges is not None:
        w.add_key_value("tokenizer.ggml.merges", merges, T.ARRAY, sub_type=T.STRING)
    for key, value, vtype in extra:
        w.add_key_value(key, value, vtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def byte_level(pre):
    tokens = [byte_char(b) for b in range(256)]
    merges = []
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"),
                 ("l", "d"), ("Ġwor", "ld"), ("1", "2"), ("Ċ", "Ċ")]:
        tokens.append(a + b)
        merges.append(f"{a} {b}")
    tokens += ["<|endoftext|>", "<|im_start|>"]
    types = [1] * (len(tokens) - 2) + [3, 4]
    extra = [("tokenizer.ggml.eos_token_id", len(tokens) - 2, T.UINT32)]
    if pre is not None:
        extra.append(("tokenizer.ggml.pre", pre, T.STRING))
    return tokens, types, merges, extra


def spm_like():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    pieces = ["\u2581", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "hell", "hello", "\u2581hello", "\u2581w",
              "or", "\u2581wor", "\u2581world", "\n", "\n\n"]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, types, scores


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for pre in ["gpt-2", "llama-bpe", "qwen35", "deepseek-llm", None]:
        tokens, types, merges, extra = byte_level(pre)
        write(out / f"seed_bpe_{pre or 'nopre'}", "gpt2", tokens, types, merges, extra=extra)
    tokens, types, scores = spm_like()
    write(out / "seed_spm", "llama", tokens, types, scores=scores,
          extra=[("tokenizer.ggml.bos_token_id", 1, T.UINT32), ("tokenizer.ggml.unknown_token_id", 0, T.UINT32)])
    merges = ["h e", "l l", "he ll", "hell o", "\u2581 hello", "\u2581 w", "o r", "\u2581w or", "\u2581wor l"]
    g_tokens = tokens + ["\u2581worl"]
    write(out / "seed_gemma4", "gemma4", g_tokens, types + [1], merges, scores=scores + [-30.0])
    wp = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + ["\u2581" + w for w in ["hello", "world", "h", "w", ",", "!", "'", "s",
                                                                     "\u65e5", "1", "12"]] + ["ello", "orld", "##x", "s"]
    write(out / "seed_wpm", "bert", wp, [3, 3, 3, 3] + [1] * (len(wp) - 4),
          extra=[("tokenizer.ggml.unknown_token_id", 1, T.UINT32), ("tokenizer.ggml.cls_token_id", 2, T.UINT32),
                 ("tokenizer.ggml.pre", "bert-bge", T.STRING)])
    # Damaged: refused with a message.
    tokens, types, merges, extra = byte_level("gpt-2")
    write(out / "seed_bad_model_t5", "t5", tokens, types, merges, extra=extra)
    write(out / "seed_bad_pre", "gpt2", tokens, types, merges, extra=[("tokenizer.ggml.pre", "no-such-pre", T.STRING)])
    write(out / "seed_bad_merge", "gpt2", tokens, types, merges + ["zz qq"], extra=extra)
    write(out / "seed_bad_types_len", "gpt2", tokens, types[:-5], merges, extra=extra)
    write(out / "seed_bad_no_merges", "gpt2", tokens, types, None, extra=extra)
    write(out / "seed_bad_eos_range", "gpt2", tokens, types, merges,
          extra=[("tokenizer.ggml.eos_token_id", 100000, T.UINT32)])
    for name in ["seed_bpe_qwen35", "seed_spm", "seed_gemma4"]:
        data = (out / name).read_bytes()
        (out / f"{name}_cut").write_bytes(data[: len(data) // 2])


main()
