#!/usr/bin/env python3
"""Golden logits and tokenizer vectors for statelm's tiny models, from Hugging Face transformers.

For each arch in tests/data/tiny/<arch>/ (made by gen_tiny_models.py), writes golden/:
  logits.f32     float32 little-endian, row-major [43, vocab]: row i = logits after ids[0..i],
                 from ONE full forward pass (float32, CPU, eager attention) over the 43 ids
  ids.i32        the 43 ids, int32 little-endian (N_PROMPT prompt ids + N_DECODE decode ids)
  manifest.json  ids, shapes, versions, checksums of the model files, and the check below
and tests/data/tiny/tokenizer_vectors.json (HF tokenizers ids of fixed strings, chat renderings).

The script also runs HF's own incremental path (prefill the 11 prompt ids, then one id at a time
with the model's cache) and records max|a-b|/max|b| against the full pass, per step; it fails if
that exceeds 1e-4. For models with a sliding window (gemma3) it also records how the logits move
when the window is one shorter, one longer or absent (`window_sensitivity`), and fails unless
rows q < W - 1 are unchanged and every variant changes the rows past the window. Run with
~/.cache/statelm/venv.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinylm import jsonfmt, spec  # noqa: E402

TOKENIZER_STRINGS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "I'm fine, you're welcome, they'll see, it's OK. DON'T SHOUT",
    "Numbers: 7 42 2024 3.14159 1,000,000 12345678",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand\r\nCRLF",
    "Caf\u00e9 na\u00efve Z\u00fcrich \u00e0 la carte 1\u20ac \u201cquotes\u201d \u2014 dash",
    "e\u0301 combining, \u4f60\u597d\u4e16\u754c, \u041f\u0440\u0438\u0432\u0435\u0442, emoji \U0001f680\U0001f999!",
    "def f(x):\n    return x * 2  # code",
    "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello",
    "text<|endoftext|>more<|startoftext|><|pad|>",
    "<|im_start|notspecial <think>reasoning</think> done",
]
CHAT = [
    {"role": "system", "content": "You are a tiny test model."},
    {"role": "user", "content": "What is the state of the fox?"},
    {"role": "assistant", "content": "The fox runs."},
    {"role": "user", "content": "And the dog?"},
]
CHAT_NO_SYSTEM = [{"role": "user", "content": "Hi there!"}]
MAX_INCREMENTAL_REL_ERR = 1e-4
CHECK_REL_TOL = 1e-5  # --check: fresh HF logits vs committed (other CPUs/torch builds round differently)
N_GREEDY = 16


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def versions() -> dict:
    import tokenizers
    import torch
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "numpy": np.__version__}


def golden_ids(arch: str, tok) -> list[int]:
    """N_PROMPT prompt ids: the first N_PROMPT ids of the family's chat rendering of a short
    user turn (ChatML-ish: BOS where the family has one, <|im_start|>, role, ...), then N_DECODE
    fixed random ids (ids of ordinary tokens, same for every arch)."""
    text = tok.apply_chat_template(CHAT_NO_SYSTEM, tokenize=False, add_generation_prompt=True)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    if len(prompt) < spec.N_PROMPT:
        raise RuntimeError(f"{arch}: chat prompt too short ({len(prompt)})")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.SEED, 43])))
    n_added = len(spec.ADDED_TOKENS)
    decode = (n_added + (rng.random(spec.N_DECODE) * (spec.VOCAB - n_added)).astype(np.int64)).tolist()
    return prompt[: spec.N_PROMPT] + decode


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def first_differing_row(a: np.ndarray, b: np.ndarray) -> int:
    rows = np.nonzero(np.any(a != b, axis=1))[0]
    return int(rows[0]) if len(rows) else -1


def window_sensitivity(hf: Path, x, full: np.ndarray, window: int) -> dict:
    """The goldens recomputed with sliding_window W-1, W+1 and 'none' (a window longer than the
    sequence, local rope base kept): the first row that changes and the largest change. With the
    mask q - W < k <= q, W-1 first differs at row W-1, W+1 and 'none' at row W."""
    import torch
    from transformers import AutoModelForCausalLM

    out = {"window": window, "mask": "query q sees keys k with q - W < k <= q (local layers only)",
           "metric": "max|a-b|/max|b| per row, max over rows (b = golden)"}
    n = full.shape[0]
    for name, w in (("w_minus_1", window - 1), ("w_plus_1", window + 1), ("none", 1 << 20)):
        m = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager",
                                                 sliding_window=w).eval()
        with torch.no_grad():
            lg = m(input_ids=x, use_cache=False).logits[0].float().numpy()
        first = first_differing_row(lg, full)
        want_first = window - 1 if w == window - 1 else window
        if first != want_first:
            raise RuntimeError(f"sliding_window {w}: first changed row {first}, want {want_first}")
        out[name] = {"sliding_window": w if w < n else None, "first_changed_row": first,
                     "max_rel_err": max(rel_err(lg[i], full[i]) for i in range(n))}
    return out


def run_arch(arch: str, root: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adir = root / arch
    hf = adir / "hf"
    tok = AutoTokenizer.from_pretrained(hf)
    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager").eval()
    ids = golden_ids(arch, tok)
    x = torch.tensor([ids], dtype=torch.long)

    with torch.no_grad():
        full = model(input_ids=x, use_cache=False).logits[0].float().numpy()          # (43, V)

        # HF incremental: prefill N_PROMPT, then one token at a time with the cache.
        out = model(input_ids=x[:, : spec.N_PROMPT], use_cache=True)
        inc = [out.logits[0].float().numpy()]
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        for i in range(spec.N_PROMPT, len(ids)):
            out = model(input_ids=x[:, i: i + 1], cache=cache, use_cache=True)
            cache = out.cache if hasattr(out, "cache") else out.past_key_values
            inc.append(out.logits[0].float().numpy())
        inc = np.concatenate(inc, axis=0)
        per_step = [rel_err(inc[i], full[i]) for i in range(len(ids))]

        # greedy continuation of the prompt (full forward each step), with the top1-top2 margins
        seq = ids[: spec.N_PROMPT]
        greedy, margins = [], []
        for _ in range(N_GREEDY):
            lg = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float().numpy()
            top = np.argsort(lg)[::-1]
            greedy.append(int(top[0]))
            margins.append(float(lg[top[0]] - lg[top[1]]))
            seq = seq + [int(top[0])]

    max_inc = max(per_step)
    if max_inc > MAX_INCREMENTAL_REL_ERR:
        raise RuntimeError(f"{arch}: HF incremental vs full max rel err {max_inc:.3g} > {MAX_INCREMENTAL_REL_ERR}")

    window = None
    if getattr(model.config, "sliding_window", None) and "sliding_attention" in (model.config.layer_types or []):
        window = int(model.config.sliding_window)

    srt = np.sort(full, axis=1)
    manifest = {
        "arch": arch,
        "hf_class": spec.HF_CLASS[arch][1],
        "ids": ids,
        "n_prompt": spec.N_PROMPT,
        "n_decode": spec.N_DECODE,
        "vocab": int(full.shape[1]),
        "ids_file": {"file": "ids.i32", "dtype": "int32", "byte_order": "little", "shape": [len(ids)]},
        "logits_file": {"file": "logits.f32", "dtype": "float32", "byte_order": "little",
                        "shape": [len(ids), int(full.shape[1])],
                        "layout": "row-major; row i = next-token logits after ids[0..i] (positions 0..i)"},
        "reference": "transformers AutoModelForCausalLM on hf/, float32, CPU, attn_implementation=eager, "
                     "one forward pass over all ids (use_cache=False)",
        "argmax": [int(v) for v in np.argmax(full, axis=1)],
        "min_top2_margin": float(np.min(srt[:, -1] - srt[:, -2])),
        "hf_incremental": {
            "method": f"prefill ids[0:{spec.N_PROMPT}] in one call, then ids[{spec.N_PROMPT}:] one per call "
                      "with the model's cache; compared with the full pass",
            "metric": "max|a-b|/max|b| per row (b = full pass)",
            "max_rel_err": max_inc,
            "per_row_rel_err": per_step,
        },
        "hf_greedy": {
            "method": f"argmax continuation of ids[0:{spec.N_PROMPT}], full forward per step",
            "tokens": greedy,
            "top2_margins": margins,
        },
        **({"window_sensitivity": window_sensitivity(hf, x, full, window)} if window else {}),
        "model_sha256": {p.relative_to(adir).as_posix(): sha256(p)
                         for p in [hf / "model.safetensors", hf / "config.json",
                                   adir / f"{arch}-f32.gguf", adir / f"{arch}-q8_0.gguf"]},
        "versions": versions(),
    }
    print(f"{arch}: ids {ids[:spec.N_PROMPT]} + {spec.N_DECODE} decode ids; HF incremental max rel err "
          f"{max_inc:.3g}; greedy {greedy}; min margin {min(margins):.3g}")
    return full, manifest


def write_arch(arch: str, root: Path, full: np.ndarray, manifest: dict) -> None:
    gdir = root / arch / "golden"
    gdir.mkdir(exist_ok=True)
    full.astype("<f4").tofile(gdir / "logits.f32")
    np.asarray(manifest["ids"], dtype="<i4").tofile(gdir / "ids.i32")
    (gdir / "manifest.json").write_text(jsonfmt.dumps(manifest) + "\n")


def check_arch(arch: str, root: Path, full: np.ndarray, manifest: dict) -> int:
    """Compares a fresh computation with the committed golden files; returns the number of problems."""
    gdir = root / arch / "golden"
    old = json.loads((gdir / "manifest.json").read_text())
    bad = 0
    if old["ids"] != manifest["ids"] or np.fromfile(gdir / "ids.i32", dtype="<i4").tolist() != manifest["ids"]:
        print(f"{arch}: golden ids differ")
        bad += 1
    if old["model_sha256"] != manifest["model_sha256"]:
        print(f"{arch}: model files changed since the goldens were made (model_sha256)")
        bad += 1
    ref = np.fromfile(gdir / "logits.f32", dtype="<f4").reshape(old["logits_file"]["shape"])
    if ref.shape != full.shape:
        print(f"{arch}: logits shape {ref.shape} != {full.shape}")
        return bad + 1
    err = max(rel_err(full[i], ref[i]) for i in range(ref.shape[0]))
    ok = err <= CHECK_REL_TOL
    print(f"{arch}: fresh HF logits vs committed: max rel err {err:.3g} ({'ok' if ok else 'TOO LARGE'})")
    return bad + (0 if ok else 1)


def tokenizer_vectors(root: Path) -> dict:
    from transformers import AutoTokenizer
    out = {"strings": TOKENIZER_STRINGS,
           "note": "ids from HF tokenizers on <arch>/hf/tokenizer.json. 'plain': add_special_tokens=False "
                   "(special-token text is still matched); 'with_special': add_special_tokens=True (lfm2 adds "
                   "BOS). 'chat': tok.apply_chat_template(messages, add_generation_prompt=True) and its ids "
                   "(add_special_tokens=False; the template writes any BOS itself).",
           "chat_messages": CHAT, "versions": versions(), "archs": {}}
    for arch in spec.ARCHS:
        tok = AutoTokenizer.from_pretrained(root / arch / "hf")
        fam = spec.FAMILY_TOK[arch]
        chats = {}
        for name, msgs, kw in (("chat", CHAT, {}), ("chat_no_system", CHAT_NO_SYSTEM, {}),
                               ("chat_no_think", CHAT_NO_SYSTEM, {"enable_thinking": False})):
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **kw)
            chats[name] = {"text": text, "ids": tok(text, add_special_tokens=False)["input_ids"]}
        out["archs"][arch] = {
            "gguf_pre": fam["pre"],
            "plain": [tok(s, add_special_tokens=False)["input_ids"] for s in TOKENIZER_STRINGS],
            "with_special": [tok(s, add_special_tokens=True)["input_ids"] for s in TOKENIZER_STRINGS],
            "decoded": [tok.decode(tok(s, add_special_tokens=False)["input_ids"]) for s in TOKENIZER_STRINGS],
            **chats,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", choices=spec.ARCHS)
    ap.add_argument("--root", type=Path, default=spec.TINY_DIR)
    ap.add_argument("--check", action="store_true",
                    help="recompute and compare with the committed goldens instead of writing them")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(2)
    bad = 0
    for a in args.arch or spec.ARCHS:
        full, manifest = run_arch(a, args.root)
        if args.check:
            bad += check_arch(a, args.root, full, manifest)
        else:
            write_arch(a, args.root, full, manifest)
    vec = tokenizer_vectors(args.root)
    path = args.root / "tokenizer_vectors.json"
    if args.check:
        old = json.loads(path.read_text(encoding="utf-8"))
        same = old["strings"] == vec["strings"] and old["archs"] == vec["archs"]
        print("tokenizer_vectors.json:", "ok" if same else "DIFFERS")
        bad += 0 if same else 1
        print("check:", "OK" if not bad else f"{bad} problem(s)")
    else:
        path.write_text(jsonfmt.dumps(vec) + "\n", encoding="utf-8")
        print("wrote", path)
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
