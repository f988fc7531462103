#!/usr/bin/env python3
"""Golden embeddings for statelm's tiny models, from Hugging Face transformers.

For each arch in tests/data/tiny/<arch>/ writes golden/:
  hidden.f32  float32 little-endian, row-major [43, d_model]: row i = the hidden state of ids[i]
              (golden/ids.i32, positions 0..42) after the final norm, i.e. what the LM head reads:
              `model.model(ids).last_hidden_state` of AutoModelForCausalLM, float32, CPU, eager
              attention, one forward pass (use_cache=False)
  embed.json  what hidden.f32 is; the same for a fixed text tokenized by the HF tokenizer
              (add_special_tokens=True, i.e. BOS where the family adds one), its rows inline; the
              pooled vectors of both inputs per pooling (mean, cls = first row, last = last row)
              as computed here in float64, raw and L2-normalised; and a check that the LM head
              applied to hidden.f32 reproduces golden/logits.f32 (so the rows are exactly what
              the head reads, not some other layer's output).

Run with a venv that has torch, transformers and numpy (see tests/data/tiny/README.md);
`--check` recomputes and compares with the committed files (1e-5 relative).
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinylm import spec  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog."
POOLINGS = ("mean", "cls", "last")
HEAD_TOL = 1e-5   # LM head on hidden.f32 vs logits.f32 (same pass, same float32 math)
CHECK_TOL = 1e-5  # --check: fresh vs committed


def f8(v) -> float:
    return float(f"{float(v):.8g}")  # 8 significant digits: below float32's resolution of the rows


def dump(manifest: dict) -> str:
    """JSON with one line per number list."""
    text = json.dumps(manifest, indent=1)
    return re.sub(r"\[\s*([-0-9.e,\s]+?)\s*\]", lambda m: "[" + re.sub(r"\s+", "", m.group(1)).replace(",", ", ") + "]",
                  text) + "\n"


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def pooled(rows: np.ndarray) -> dict:
    r = rows.astype(np.float64)
    raw = {"mean": r.mean(axis=0), "cls": r[0], "last": r[-1]}
    out = {"raw": {}, "l2": {}}
    for k in POOLINGS:
        out["raw"][k] = [f8(v) for v in raw[k]]
        out["l2"][k] = [f8(v) for v in raw[k] / np.linalg.norm(raw[k])]
    return out


def run_arch(arch: str, root: Path):
    import torch  # not-in-ci: goldens are made by developers; CI reads the committed files
    import transformers  # not-in-ci: as above
    from transformers import AutoModelForCausalLM, AutoTokenizer  # not-in-ci: as above

    adir = root / arch
    hf = adir / "hf"
    ids = np.fromfile(adir / "golden" / "ids.i32", dtype="<i4").tolist()
    golden_logits = np.fromfile(adir / "golden" / "logits.f32", dtype="<f4").reshape(len(ids), -1)
    tok = AutoTokenizer.from_pretrained(hf)
    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager").eval()
    text_ids = tok(TEXT, add_special_tokens=True)["input_ids"]
    with torch.no_grad():
        h = model.model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0]
        head = model.lm_head(h).float().numpy()
        ht = model.model(input_ids=torch.tensor([text_ids]), use_cache=False).last_hidden_state[0].float().numpy()
    h = h.float().numpy()
    head_err = max(rel_err(head[i], golden_logits[i]) for i in range(len(ids)))
    if head_err > HEAD_TOL:
        raise RuntimeError(f"{arch}: lm_head(hidden) vs logits.f32 max rel err {head_err:.3g} > {HEAD_TOL}")
    manifest = {
        "arch": arch,
        "d_model": int(h.shape[1]),
        "ids_file": "ids.i32",
        "hidden_file": {"file": "hidden.f32", "dtype": "float32", "byte_order": "little",
                        "shape": [len(ids), int(h.shape[1])],
                        "layout": "row-major; row i = final-norm hidden state of ids[i] at position i"},
        "reference": "transformers AutoModelForCausalLM(...).model(ids).last_hidden_state on hf/, float32, CPU, "
                     "attn_implementation=eager, one forward pass from position 0 (use_cache=False)",
        "pooled": pooled(h),
        "text": TEXT,
        "text_ids": text_ids,
        "text_tokenization": "AutoTokenizer(hf/)(text, add_special_tokens=True)",
        "text_hidden": [[f8(v) for v in row] for row in ht],
        "text_pooled": pooled(ht),
        "pooling": {"mean": "mean of the rows", "cls": "row 0", "last": "last row",
                    "l2": "v / ||v||_2", "precision": "float64 from the float32 rows"},
        "check": {"lm_head_vs_logits_f32_max_rel_err": head_err,
                  "metric": "per row max|a-b|/max|b| (b = logits.f32), max over the rows"},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__},
    }
    print(f"{arch}: hidden {h.shape}, text {len(text_ids)} ids, lm_head vs logits.f32 {head_err:.2g}")
    return h, manifest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--root", type=Path, default=spec.TINY_DIR)
    ap.add_argument("--check", action="store_true", help="recompute and compare with the committed files")
    ap.add_argument("archs", nargs="*", default=list(spec.ARCHS))
    args = ap.parse_args()
    bad = 0
    for arch in args.archs:
        h, manifest = run_arch(arch, args.root)
        gdir = args.root / arch / "golden"
        if args.check:
            old = np.fromfile(gdir / "hidden.f32", dtype="<f4").reshape(h.shape)
            old_text = np.array(json.loads((gdir / "embed.json").read_text())["text_hidden"])
            errs = (rel_err(h, old), rel_err(np.array(manifest["text_hidden"]), old_text))
            ok = max(errs) <= CHECK_TOL
            bad += not ok
            print(f"{arch}: --check hidden {errs[0]:.2g}, text {errs[1]:.2g} {'ok' if ok else 'MISMATCH'}")
            continue
        h.astype("<f4").tofile(gdir / "hidden.f32")
        (gdir / "embed.json").write_text(dump(manifest))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
