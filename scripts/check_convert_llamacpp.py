#!/usr/bin/env python3
"""llama.cpp runs what `statelm convert` writes: each tiny HF folder (tests/data/tiny/<arch>/hf) is
converted at f32 by the statelm binary given, loaded with llama.cpp (llama-cpp-python, f32 KV
cache, as scripts/check_tiny_gguf_llamacpp.py loads files), and
  * the 43 golden ids (golden/ids.i32) evaluated in one batch, every row compared with the HF
    golden logits (golden/logits.f32): max|a-b|/max|b|, must stay under check_tiny_gguf_llamacpp's
    F32_TOL (gemma3: GEMMA3_TOL, llama.cpp's CPU GeGLU rounds through fp16, tests/data/tiny/README.md);
  * 16 greedy tokens after the 11 prompt ids, which must equal statelm's own greedy tokens on the
    same file (`statelm run --prompt-ids ... --temp 0 --ids -n 16`).
Prints one line per arch; exit 1 on any mismatch. Not run by CI (needs llama-cpp-python).
Usage: ~/.cache/statelm/venv-llamacpp/bin/python scripts/check_convert_llamacpp.py build/statelm"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np  # not-in-ci: run by hand in the llama-cpp-python venv

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_tiny_gguf_llamacpp as ref  # not-in-ci: imports llama_cpp

ARCHS = ("llama", "qwen3", "lfm2", "qwen35", "gemma3")
GEMMA3_TOL = 2e-3
N_PROMPT = 11


def main() -> int:
    statelm = sys.argv[1]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ARCHS:
            d = ref.ROOT / arch
            out = Path(tmp) / f"{arch}.gguf"
            subprocess.run([statelm, "convert", "--quiet", "-m", str(d / "hf"), "-o", str(out), "--outtype", "f32"],
                           check=True)
            ids = np.fromfile(d / "golden" / "ids.i32", dtype="<i4").tolist()
            want = np.fromfile(d / "golden" / "logits.f32", dtype="<f4").reshape(len(ids), -1)
            m = ref.load(out)
            err = max(ref.rel_rows(ref.eval_batch(m, ids), want))
            greedy = ref.greedy(m, ids[:N_PROMPT], ref.N_GREEDY)
            p = subprocess.run([statelm, "run", "-m", str(out), "--prompt-ids", ",".join(map(str, ids[:N_PROMPT])),
                                "--temp", "0", "--ids", "-n", str(ref.N_GREEDY)], capture_output=True, text=True,
                               check=True)
            mine = [int(x) for x in p.stdout.split()]
            tol = GEMMA3_TOL if arch == "gemma3" else ref.F32_TOL
            ok = err < tol and greedy == mine
            bad += not ok
            print(f"{arch:7s} llama.cpp vs HF max rel err {err:.1e} (tol {tol:g}); greedy llama.cpp = statelm: "
                  f"{greedy == mine} ({sum(a == b for a, b in zip(greedy, mine))}/{ref.N_GREEDY})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
