#!/usr/bin/env python3
"""Golden data for `statelm convert`: llama.cpp's own converter (convert_hf_to_gguf.py of the
llama.cpp tree vendored in llama-cpp-python) run on each tiny HF folder tests/data/tiny/<arch>/hf,
recorded as a compact manifest (scripts/gguf_manifest.py) in tests/data/tiny/<arch>/golden/convert.json:
every metadata key with its type and value (arrays: length + sha256, values when short), every
tensor's name, ggml type, shape and sha256 of its bytes, for outtypes f32 and f16.

The converter identifies a BPE pre-tokenizer by hashing the tokenisation of a check text against
the hashes of models it knows (get_vocab_base_pre); the tiny tokenizers are synthetic, so no hash
matches and it refuses them. This script replaces that one lookup by the family's name (the
pre-tokenizer each tiny tokenizer.json copies: smollm, qwen2, lfm2, qwen35, gpt-2; see
tests/data/tiny/README.md) and records it in the manifest as "pre_tokenizer_override"; everything
else runs unchanged.

Needs torch, transformers, sentencepiece, safetensors, numpy (not in the test venv), e.g.
  python3 -m venv ~/.cache/statelm/venv-torch
  ~/.cache/statelm/venv-torch/bin/pip install torch transformers sentencepiece safetensors numpy
Usage: gen_convert_golden.py [--llama-cpp DIR] [ARCH ...]
  DIR defaults to ~/.cache/statelm/src/llama_cpp_python-0.3.36/vendor/llama.cpp."""
import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny"
ARCHS = ("llama", "qwen3", "lfm2", "qwen35", "gemma3", "qwen35-mtp")
PRE = {"llama": "smollm", "qwen3": "qwen2", "lfm2": "lfm2", "qwen35": "qwen35", "gemma3": "gpt-2",
       "qwen35-mtp": "qwen35"}
OUTTYPES = ("f32", "f16")
# qwen35: this converter assumes a Qwen3.5 checkpoint carries its multi-token-prediction head
# (mtp.*, counted into block_count) unless told --no-mtp; the tiny one (hf/) has none, so its
# reference is the converter's --no-mtp output. qwen35-mtp is the same model with an MTP block
# (hf-mtp/, scripts/gen_mtp_models.py tiny), converted with the block kept (the default).
EXTRA = {"qwen35": ["--no-mtp"]}
# (folder under tests/data/tiny, HF subfolder, golden file name)
WHERE = {"qwen35-mtp": ("qwen35", "hf-mtp", "convert-mtp.json")}
DEFAULT_LLAMA = Path.home() / ".cache/statelm/src/llama_cpp_python-0.3.36/vendor/llama.cpp"

# Run in a child process per conversion: imports the converter with the pre-tokenizer lookup
# replaced, then calls its main() with the usual command line.
CHILD = r"""
import sys
from pathlib import Path
llama, pre = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(llama))
sys.path.insert(1, str(llama / "gguf-py"))
import convert_hf_to_gguf
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = ["convert_hf_to_gguf.py", *sys.argv[3:]]
convert_hf_to_gguf.main()
"""


def versions() -> dict:
    out = {"python": platform.python_version()}
    for d in ("torch", "transformers", "numpy", "safetensors", "sentencepiece"):
        try:
            out[d] = importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            out[d] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", type=Path, default=DEFAULT_LLAMA)
    ap.add_argument("archs", nargs="*", default=list(ARCHS))
    args = ap.parse_args()
    llama = args.llama_cpp.resolve()
    sys.path.insert(0, str(llama / "gguf-py"))
    sys.path.insert(0, str(ROOT / "scripts"))
    import gguf_manifest  # the gguf-py next to the converter, as the converter writes with it
    commit = subprocess.run(["git", "-C", str(llama), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    for arch in args.archs:
        folder, sub, golden = WHERE.get(arch, (arch, "hf", "convert.json"))
        hf = TINY / folder / sub
        manifest = {
            "arch": arch,
            "reference": {
                "tool": "llama.cpp convert_hf_to_gguf.py",
                "source": str(llama.relative_to(Path.home())) if llama.is_relative_to(Path.home()) else str(llama),
                "llama_cpp_commit": commit or None,
                "pre_tokenizer_override": PRE[arch],
                "command": " ".join(["convert_hf_to_gguf.py", f"tests/data/tiny/{folder}/{sub}", "--outfile", "OUT",
                                     "--outtype", "T", *EXTRA.get(arch, [])]),
                "versions": versions(),
            },
            "outtypes": {},
        }
        with tempfile.TemporaryDirectory() as tmp:
            for outtype in OUTTYPES:
                out = Path(tmp) / f"{arch}-{outtype}.gguf"
                p = subprocess.run([sys.executable, "-c", CHILD, str(llama), PRE[arch], str(hf), "--outfile", str(out),
                                    "--outtype", outtype, *EXTRA.get(arch, [])], capture_output=True, text=True,
                                   env={**os.environ, "NO_LOCAL_GGUF": "1"})
                if p.returncode != 0:
                    sys.exit(f"{arch} {outtype}: the converter failed:\n{p.stderr[-4000:]}")
                manifest["outtypes"][outtype] = gguf_manifest.describe(out)
        dst = TINY / folder / "golden" / golden
        dst.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{arch}: {dst.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
