#!/usr/bin/env python3
"""Generates statelm's tiny random-weight test models (tests/data/tiny/, see its README.md).

  gen_tiny_models.py                      write tests/data/tiny/<arch>/{hf/, <arch>-f32.gguf, <arch>-q8_0.gguf}
  gen_tiny_models.py --arch lfm2          only some architectures
  gen_tiny_models.py --check              regenerate into a temp dir and compare with the committed
                                          files byte for byte (needs torch + transformers)
  gen_tiny_models.py --check-gguf         torch-free: re-convert the committed HF folders and compare
                                          the GGUFs byte for byte (needs numpy, gguf, safetensors)
  gen_tiny_models.py --full SHAPE --type q4_0|q8_0|f16|f32 [--out DIR]
                                          full-size random GGUF for benchmarks (numpy only; not committed);
                                          SHAPE lfm2-350m, qwen35-0.8b (and their -draft models),
                                          smollm2-135m, gemma3-270m (the real test models' shapes:
                                          `statelm quantize` the f16 file to q4_1 / q4_k_m for their
                                          exact tensor types, where the real files cannot be had)

Deterministic: weights come from per-tensor seeded streams (tinylm/weights.py), the tokenizer from
a fixed text (tinylm/tokenizer.py). HF folders are made with the transformers config + model
classes and save_pretrained (float32 safetensors); GGUFs are converted from those folders the way
llama.cpp's convert_hf_to_gguf.py does (tinylm/convert.py). Run with ~/.cache/statelm/venv.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tinylm import convert, spec, tokenizer, weights  # noqa: E402
from tinylm.shapes import hf_shapes  # noqa: E402


def build_hf(arch: str, out_dir: Path, base_tok: dict) -> None:
    """Creates <out_dir> as an HF folder of the tiny `arch` model."""
    import torch  # not-in-ci: HF folders are made by developers; CI runs only --full
    import transformers  # not-in-ci: as above
    from transformers import GenerationConfig  # not-in-ci: as above

    cfg_cls = getattr(transformers, spec.HF_CLASS[arch][0])
    model_cls = getattr(transformers, spec.HF_CLASS[arch][1])
    cfg = cfg_cls(**spec.HF_CONFIG[arch])
    cfg.dtype = torch.float32
    torch.manual_seed(0)  # only the (overwritten) default init uses it
    model = model_cls(cfg).to(torch.float32).eval()

    sd = model.state_dict()
    want = hf_shapes(arch, cfg.to_dict())
    tied = cfg.tie_word_embeddings
    got = {k: tuple(v.shape) for k, v in sd.items() if not (tied and k == "lm_head.weight")}
    if got != want:
        raise RuntimeError(f"{arch}: HF parameters differ from shapes.py:\n"
                           f"only HF: {sorted(set(got) - set(want))}\nonly shapes.py: {sorted(set(want) - set(got))}\n"
                           f"shape diffs: {[(k, got[k], want[k]) for k in got if k in want and got[k] != want[k]]}")
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights.tensor(arch, name, tuple(p.shape))))
    if tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.generation_config = GenerationConfig(**spec.GEN_CONFIG[arch])

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    (out_dir / "tokenizer.json").write_text(tokenizer.family_tokenizer_json(base_tok, arch), encoding="utf-8")
    (out_dir / "tokenizer_config.json").write_text(
        tokenizer.tokenizer_config(arch, cfg.max_position_embeddings), encoding="utf-8")


def build_arch(arch: str, root: Path, base_tok: dict) -> None:
    adir = root / arch
    if adir.exists():
        for p in (adir / "hf",):
            shutil.rmtree(p, ignore_errors=True)
    build_hf(arch, adir / "hf", base_tok)
    for ft in ("f32", "q8_0"):
        convert.convert_hf_dir(adir / "hf", arch, adir / f"{arch}-{ft}.gguf", ft)


def generated_files(root: Path, archs) -> list[Path]:
    out = []
    for a in archs:
        out += [p.relative_to(root) for p in sorted((root / a / "hf").iterdir())]
        out += [Path(a) / f"{a}-{ft}.gguf" for ft in ("f32", "q8_0")]
    return out


def compare(committed: Path, fresh: Path, files) -> int:
    bad = 0
    for rel in files:
        a, b = committed / rel, fresh / rel
        if not a.exists():
            print(f"MISSING in tree: {rel}")
            bad += 1
        elif not b.exists():
            print(f"NOT REGENERATED: {rel}")
            bad += 1
        elif not filecmp.cmp(a, b, shallow=False):
            print(f"DIFFERS: {rel}")
            bad += 1
        else:
            print(f"ok       {rel}")
    return bad


def full_model(which: str, ftype: str, out: Path) -> Path:
    arch, hp = spec.FULL_CONFIG[which]
    hp = json.loads(json.dumps(hp))
    base_tok = tokenizer.train_base()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"random-{which}-{ftype}.gguf"
    shapes = hf_shapes(arch, hp)
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        (td / "config.json").write_text(json.dumps(hp))
        (td / "tokenizer.json").write_text(tokenizer.family_tokenizer_json(base_tok, arch), encoding="utf-8")
        (td / "tokenizer_config.json").write_text(
            tokenizer.tokenizer_config(arch, hp["max_position_embeddings"]), encoding="utf-8")
        t0 = time.time()
        convert.write_gguf(path, arch, hp, td, ftype, shapes,
                           lambda n: weights.tensor(arch, n, shapes[n], fast=True),
                           name=f"statelm random {which}")
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {time.time() - t0:.0f} s)")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", choices=spec.ARCHS, help="architecture(s) to build (default all)")
    ap.add_argument("--out", type=Path, help="output root (default tests/data/tiny; with --full ~/.cache/statelm/models)")
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare bytes")
    ap.add_argument("--check-gguf", action="store_true", help="re-convert committed HF folders, compare GGUF bytes")
    ap.add_argument("--full", choices=sorted(spec.FULL_CONFIG), help="write a full-size random GGUF")
    ap.add_argument("--type", default="q8_0", choices=sorted(convert.FTYPES), help="tensor type for --full")
    args = ap.parse_args()
    archs = args.arch or list(spec.ARCHS)

    if args.full:
        full_model(args.full, args.type, args.out or spec.DEFAULT_FULL_OUT)
        return 0

    if args.check_gguf:
        root = args.out or spec.TINY_DIR
        with tempfile.TemporaryDirectory() as td:
            td = Path(td)
            files = []
            for a in archs:
                for ft in ("f32", "q8_0"):
                    (td / a).mkdir(exist_ok=True)
                    convert.convert_hf_dir(root / a / "hf", a, td / a / f"{a}-{ft}.gguf", ft)
                    files.append(Path(a) / f"{a}-{ft}.gguf")
            bad = compare(root, td, files)
        print("check-gguf:", "OK" if not bad else f"{bad} file(s) differ")
        return 1 if bad else 0

    base_tok = tokenizer.train_base()
    if args.check:
        root = args.out or spec.TINY_DIR
        with tempfile.TemporaryDirectory() as td:
            td = Path(td)
            for a in archs:
                build_arch(a, td, base_tok)
            bad = compare(root, td, generated_files(td, archs))
            # committed files the generator no longer makes
            for a in archs:
                for p in sorted((root / a / "hf").iterdir()):
                    if not (td / a / "hf" / p.name).exists():
                        print(f"STALE in tree: {p.relative_to(root)}")
                        bad += 1
        print("check:", "OK" if not bad else f"{bad} file(s) differ")
        return 1 if bad else 0

    root = args.out or spec.TINY_DIR
    for a in archs:
        build_arch(a, root, base_tok)
        print(f"{a}: " + ", ".join(f"{p.name} {p.stat().st_size}" for p in sorted((root / a).rglob("*")) if p.is_file()))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
