#!/usr/bin/env python3
"""Independent check of the tiny GGUFs with llama.cpp (through llama-cpp-python).

For each arch in tests/data/tiny/<arch>/:
  * loads <arch>-f32.gguf and <arch>-q8_0.gguf, evaluates the 43 golden ids (golden/ids.i32)
    both as one batch and as prefill(11) + single-token steps, and compares every row of logits
    with the HF golden (golden/logits.f32): max|a-b|/max|b| per row. The f32 file must agree to
    F32_TOL, otherwise the conversion (or a config) is wrong and the script fails;
  * records llama.cpp's greedy continuation of the 11 prompt ids on both files;
  * tokenizes the strings and chat renderings of tokenizer_vectors.json with the GGUF's tokenizer
    and compares with HF tokenizers (and detokenization with HF decode).
Writes golden/llamacpp.json per arch and prints a summary table (copied into the README).

Run with ~/.cache/statelm/venv-llama/bin/python (numpy + llama_cpp only; no gguf/torch needed).
llama-cpp-python 0.3.36 crashes (SIGSEGV) on Q8_0 files this small when the CPU "extra buffer
types" (weight repacking) are on, so they are turned off here; the math is the same.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import llama_cpp
from llama_cpp import Llama

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinylm import jsonfmt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "tests" / "data" / "tiny"
ARCHS = ("llama", "qwen3", "lfm2", "qwen35")
F32_TOL = 1e-3
N_GREEDY = 16
KV_F32 = 0  # GGML_TYPE_F32

_default_model_params = llama_cpp.llama_model_default_params


def _model_params_no_repack():
    p = _default_model_params()
    p.use_extra_bufts = False
    return p


llama_cpp.llama_model_default_params = _model_params_no_repack
llama_cpp.llama.llama_cpp.llama_model_default_params = _model_params_no_repack


def rel_rows(a: np.ndarray, b: np.ndarray) -> list[float]:
    return [float(np.max(np.abs(a[i] - b[i])) / np.max(np.abs(b[i]))) for i in range(b.shape[0])]


def rms_rel_max(a: np.ndarray, b: np.ndarray) -> float:
    return max(float(np.linalg.norm(a[i] - b[i]) / np.linalg.norm(b[i])) for i in range(b.shape[0]))


def load(path: Path, n_ctx: int = 128) -> Llama:
    # KV cache in f32 (llama.cpp's default is f16, which alone costs ~1e-3 relative)
    return Llama(str(path), n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_threads=2, n_threads_batch=2,
                 logits_all=True, type_k=KV_F32, type_v=KV_F32, verbose=False)


def eval_batch(m: Llama, ids: list[int]) -> np.ndarray:
    m.reset()
    m.eval(ids)
    return np.array(m.scores[: len(ids)], dtype=np.float32)


def eval_incremental(m: Llama, ids: list[int], n_prompt: int) -> np.ndarray:
    m.reset()
    m.eval(ids[:n_prompt])
    for t in ids[n_prompt:]:
        m.eval([t])
    return np.array(m.scores[: len(ids)], dtype=np.float32)


def greedy(m: Llama, prompt: list[int], n: int) -> list[int]:
    m.reset()
    m.eval(prompt)
    out = []
    for _ in range(n):
        t = int(np.argmax(m.scores[m.n_tokens - 1]))
        out.append(t)
        m.eval([t])
    return out


def check_arch(arch: str, root: Path, vectors: dict) -> dict:
    adir = root / arch
    man = json.loads((adir / "golden" / "manifest.json").read_text())
    ids = np.fromfile(adir / "golden" / "ids.i32", dtype="<i4").tolist()
    assert ids == man["ids"]
    n_p = man["n_prompt"]
    ref = np.fromfile(adir / "golden" / "logits.f32", dtype="<f4").reshape(man["logits_file"]["shape"])
    res: dict = {"arch": arch, "llama_cpp_python": llama_cpp.__version__,
                 "metric": "max|a-b|/max|b| per row, b = HF golden logits (rms_rel: ||a-b||/||b|| per row)",
                 "note": "model params use_extra_bufts=false (see scripts/check_tiny_gguf_llamacpp.py)"}
    for ft in ("f32", "q8_0"):
        m = load(adir / f"{arch}-{ft}.gguf")
        if m.n_vocab() != ref.shape[1]:
            raise RuntimeError(f"{arch}-{ft}: n_vocab {m.n_vocab()} != {ref.shape[1]}")
        lb, li = eval_batch(m, ids), eval_incremental(m, ids, n_p)
        rb, ri = rel_rows(lb, ref), rel_rows(li, ref)
        g = greedy(m, ids[:n_p], N_GREEDY)
        res[ft] = {"batch_max_rel_err": max(rb), "incremental_max_rel_err": max(ri),
                   "batch_max_rms_rel_err": rms_rel_max(lb, ref),
                   "batch_per_row": rb, "incremental_per_row": ri, "greedy": g,
                   "greedy_matches_hf_prefix": next((i for i, (a, b) in enumerate(zip(g, man["hf_greedy"]["tokens"]))
                                                     if a != b), len(g))}
        if ft == "f32":
            res["tokenizer"] = check_tokenizer(m, arch, vectors)
        del m
    if max(res["f32"]["batch_max_rel_err"], res["f32"]["incremental_max_rel_err"]) > F32_TOL:
        raise RuntimeError(f"{arch}: llama.cpp f32 vs HF max rel err "
                           f"{max(res['f32']['batch_max_rel_err'], res['f32']['incremental_max_rel_err']):.3g} > {F32_TOL}")
    (adir / "golden" / "llamacpp.json").write_text(jsonfmt.dumps(res) + "\n")
    return res


def check_tokenizer(m: Llama, arch: str, vectors: dict) -> dict:
    v = vectors["archs"][arch]
    mism = []
    n = 0
    for i, s in enumerate(vectors["strings"]):
        for kind, add in (("plain", False), ("with_special", True)):
            n += 1
            got = m.tokenize(s.encode("utf-8"), add_bos=add, special=True)
            if got != v[kind][i]:
                mism.append({"string": s, "kind": kind, "llama_cpp": got, "hf": v[kind][i]})
        n += 1
        dec = m.detokenize(v["plain"][i], special=True).decode("utf-8", errors="replace")
        if dec != v["decoded"][i]:
            mism.append({"string": s, "kind": "detokenize", "llama_cpp": dec, "hf": v["decoded"][i]})
    for name in ("chat", "chat_no_system", "chat_no_think"):
        n += 1
        got = m.tokenize(v[name]["text"].encode("utf-8"), add_bos=False, special=True)
        if got != v[name]["ids"]:
            mism.append({"string": v[name]["text"], "kind": name, "llama_cpp": got, "hf": v[name]["ids"]})
    return {"compared": n, "mismatches": mism}


def check_full(path: Path, n: int = 8) -> None:
    """Loads a full-size random GGUF (gen_tiny_models.py --full) and greedy-generates n tokens."""
    import time
    t0 = time.time()
    m = Llama(str(path), n_ctx=256, n_batch=256, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    t1 = time.time()
    prompt = m.tokenize(b"<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n", add_bos=True, special=True)
    m.eval(prompt)
    t2 = time.time()
    out = []
    for _ in range(n):
        row = np.asarray(m.scores[m.n_tokens - 1], dtype=np.float32)
        if not np.all(np.isfinite(row)):
            raise RuntimeError(f"{path.name}: non-finite logits")
        out.append(int(np.argmax(row)))
        m.eval([out[-1]])
    t3 = time.time()
    print(f"{path.name}: n_vocab {m.n_vocab()}, load {t1 - t0:.1f} s, prompt {len(prompt)} tok {t2 - t1:.1f} s, "
          f"greedy {out} ({n / (t3 - t2):.1f} tok/s, 2 threads)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", choices=ARCHS)
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--full", type=Path, nargs="+", help="instead: load these full-size GGUFs and generate a few tokens")
    args = ap.parse_args()
    if args.full:
        for p in args.full:
            check_full(p)
        return 0
    vectors = json.loads((args.root / "tokenizer_vectors.json").read_text(encoding="utf-8"))
    rows = []
    bad = 0
    for a in args.arch or ARCHS:
        r = check_arch(a, args.root, vectors)
        tk = r["tokenizer"]
        bad += len(tk["mismatches"])
        for mm in tk["mismatches"]:
            print(f"{a}: tokenizer mismatch ({mm['kind']}): {mm['string']!r}\n  llama.cpp {mm['llama_cpp']}\n  hf        {mm['hf']}")
        rows.append(f"| {a} | {r['f32']['batch_max_rel_err']:.2e} | {r['f32']['incremental_max_rel_err']:.2e} "
                    f"| {r['q8_0']['batch_max_rel_err']:.2e} | {r['q8_0']['incremental_max_rel_err']:.2e} "
                    f"| {r['f32']['greedy_matches_hf_prefix']}/{N_GREEDY} | {r['q8_0']['greedy_matches_hf_prefix']}/{N_GREEDY} "
                    f"| {tk['compared'] - len(tk['mismatches'])}/{tk['compared']} |")
    print("| arch | f32 batch | f32 incr. | q8_0 batch | q8_0 incr. | f32 greedy = HF | q8_0 greedy = HF | tokenizer |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
