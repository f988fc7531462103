"""The shared tiny byte-level BPE tokenizer of statelm's test models.

One vocabulary + merge list, trained deterministically with the HF `tokenizers` library on the
built-in text below: ids 0..6 are the added tokens of spec.ADDED_TOKENS, then the 256 GPT-2
byte->unicode tokens, then merges up to spec.VOCAB. Each model family gets its own tokenizer.json
built from it that differs only in the pre-tokenizer (llama.cpp's pre-tokenizer of that family,
spec.FAMILY_TOK), `ignore_merges` (true for llama3-style lfm2) and the post-processor (BOS
insertion for lfm2). No normalizer (llama.cpp applies none).
"""
from __future__ import annotations

import json

from . import spec

CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox runs into
the forest. In the morning the birds sing; in the evening the wind is quiet.
Hello, world! How are you today? I'm fine, thanks. You're welcome. We'll see. They've gone.
It's a small model with a small vocabulary, but it has every byte of the input.
State is first-class: the attention cache, the convolution state and the recurrent state
are declared, owned and saved by the runtime. A session can snapshot, restore and fork.
def main(argc, argv):
    for i in range(10):
        print("value", i * 2 + 1)
    return 0
int main(void) { return printf("%d\\n", 42) < 0; }
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 2024 3.14159 1,000,000 and 12345678.
Tabs\tand\tnewlines\n\nmatter, as do    runs of    spaces.
user: what is the capital of France?
assistant: The capital of France is Paris.
system: You are a helpful assistant.
Caf\u00e9, na\u00efve, Z\u00fcrich, se\u00f1or, \u00e0 la carte, cr\u00e8me br\u00fbl\u00e9e, 1\u20ac, \u201cquotes\u201d \u2014 dashes.
e\u0301 (e + combining acute), \u4f60\u597d\u4e16\u754c, \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440.
the the the and and and of of of to to to in in in is is is it it it that that that
token tokens tokenizer model models modeling layer layers head heads state states
"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable unicode character map (docs/spec/gguf.md section 7)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) \
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def train_base() -> dict:
    """Trains the shared BPE; returns its tokenizer.json as a dict (family-neutral pre-tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.VOCAB, min_frequency=2, show_progress=False,
        special_tokens=[t for t, _ in spec.ADDED_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS.splitlines(keepends=True), trainer=trainer)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    n_added = len(spec.ADDED_TOKENS)
    if len(vocab) != spec.VOCAB:
        raise RuntimeError(f"trained vocab has {len(vocab)} entries, want {spec.VOCAB}; extend CORPUS")
    for i, (t, _) in enumerate(spec.ADDED_TOKENS):
        if vocab.get(t) != i:
            raise RuntimeError(f"added token {t!r} is not id {i}")
    b2u = bytes_to_unicode()
    byte_ids = sorted(vocab[b2u[b]] for b in range(256))
    if byte_ids != list(range(n_added, n_added + 256)):
        raise RuntimeError("byte tokens are not ids 7..262")
    return j


def _split_pre(regex: str) -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    ]}


def family_tokenizer_json(base: dict, arch: str) -> str:
    """tokenizer.json text for one family, built from the trained base."""
    fam = spec.FAMILY_TOK[arch]
    j = json.loads(json.dumps(base))
    j["truncation"] = None
    j["padding"] = None
    j["normalizer"] = None
    special = dict(spec.ADDED_TOKENS)
    for at in j["added_tokens"]:
        at["special"] = special[at["content"]]
        at["normalized"] = False
        at["single_word"] = at["lstrip"] = at["rstrip"] = False
    if fam["hf_pre"] == "smollm":
        # SmolLM2: single digits, then GPT-2's ByteLevel regex (llama.cpp pre "smollm").
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ]}
    elif fam["hf_pre"] == "gpt2":
        # GPT-2's ByteLevel regex alone (llama.cpp pre "gpt-2").
        j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True}
    else:
        j["pre_tokenizer"] = _split_pre(fam["hf_pre"])
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    if fam["add_bos"]:
        bos = fam["bos"]
        bid = spec.TOK[bos]
        j["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bid], "tokens": [bos]}},
        }
    else:
        j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                               "use_regex": True}
    m = j["model"]
    m["dropout"] = None
    m["unk_token"] = None
    m["continuing_subword_prefix"] = None
    m["end_of_word_suffix"] = None
    m["fuse_unk"] = False
    m["byte_fallback"] = False
    m["ignore_merges"] = fam["ignore_merges"]
    return json.dumps(j, ensure_ascii=False, indent=2) + "\n"


def tokenizer_config(arch: str, model_max_length: int) -> str:
    fam = spec.FAMILY_TOK[arch]
    added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": s} for i, (t, s) in enumerate(spec.ADDED_TOKENS)}
    cfg = {
        "add_bos_token": fam["add_bos"],
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": fam["bos"],
        "chat_template": fam["template"],
        "clean_up_tokenization_spaces": False,
        "eos_token": fam["eos"],
        "model_max_length": model_max_length,
        "pad_token": fam["pad"],
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": fam["unk"],
    }
    return json.dumps(cfg, ensure_ascii=False, indent=2) + "\n"


def gguf_vocab(tokenizer_json: str) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token_types, merges) for the GGUF tokenizer keys, as convert_hf_to_gguf.py's
    _set_vocab_gpt2 writes them: special added tokens CONTROL (3), other added tokens
    USER_DEFINED (4), everything else NORMAL (1); merges as "left right"."""
    j = json.loads(tokenizer_json)
    vocab = j["model"]["vocab"]
    rev = {i: t for t, i in vocab.items()}
    tokens = [rev[i] for i in range(len(rev))]
    added = {a["content"]: a["special"] for a in j["added_tokens"]}
    types = []
    for t in tokens:
        if t in added:
            types.append(3 if added[t] or (t.startswith("<|") and t.endswith("|>")) else 4)
        else:
            types.append(1)
    merges = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    return tokens, types, merges
