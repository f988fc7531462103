#!/usr/bin/env python3
"""Teacher-forced top-1 agreement of quantised files with the exact (f32) computation.

SRC (any GGUF statelm loads) is written as F32 with `statelm quantize SRC exact.gguf f32` (quantised
sources are dequantised exactly); that file is the reference. Each TYPE is quantised from it with
`statelm quantize`. Per prompt, the reference generates N_GEN greedy tokens after the prompt ids;
the whole sequence is then scored teacher-forced (`statelm score --top 1`) by the reference and by
every quantised file, and each position whose next token is known counts as agreeing when the two
argmaxes are equal. Printed per type: agreements / positions, the rate with a 95% Wilson interval,
the file size. Positions of one sequence are not independent, so the interval is indicative.
The prompts are the first --prompts (default 8) of scripts/gemma_agreement.py's.
With --llama-quantize PATH, each TYPE is also quantised from the same F32 file by llama.cpp's
llama-quantize (bench/build-llama-bench.sh llama-quantize builds it) and scored the same way, as
"llama:TYPE", with whether its bytes equal statelm's.

Usage: python3 scripts/quant_fidelity.py [--statelm build/statelm] [--types q4_k_m,q4_0,q8_0]
           [--gen 48] [--prompts 8] [--llama-quantize PATH] [--json OUT.json] SRC.gguf"""
import argparse
import filecmp
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from gemma_agreement import PROMPTS  # noqa: E402  (16 varied plain-text prompts)


def sh(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))}: {p.stderr.strip()}")
    return p.stdout


def argmaxes(statelm, model, seq):
    out = sh(statelm, "score", "-m", model, "--prompt-ids", ",".join(map(str, seq)), "--top", "1")
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [r["top"][0][0] for r in rows if "next" in r]


def wilson(k, n, z=1.96):
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("--statelm", default=str(ROOT / "build" / "statelm"))
    ap.add_argument("--types", default="q4_k_m,q4_0,q8_0")
    ap.add_argument("--gen", type=int, default=48)
    ap.add_argument("--prompts", type=int, default=8, help="the first N of scripts/gemma_agreement.py's prompts")
    ap.add_argument("--llama-quantize", help="also score llama-quantize's file of each type")
    ap.add_argument("--json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exact = os.path.join(tmp, "exact-f32.gguf")
        sh(a.statelm, "quantize", "--quiet", a.src, exact, "f32")
        files = {}
        for t in a.types.split(","):
            files[t] = os.path.join(tmp, f"{t}.gguf")
            sh(a.statelm, "quantize", "--quiet", exact, files[t], t)
            if a.llama_quantize:
                files["llama:" + t] = os.path.join(tmp, f"llama-{t}.gguf")
                sh(a.llama_quantize, exact, files["llama:" + t], t)
        seqs = []
        for text in PROMPTS[:a.prompts]:
            ids = sh(a.statelm, "tokenize", "-m", exact, "-p", text).split()
            gen = sh(a.statelm, "run", "-m", exact, "--prompt-ids", ",".join(ids), "--temp", "0", "--ids",
                     "-n", str(a.gen)).split()
            seqs.append([int(x) for x in ids + gen])
        ref = [argmaxes(a.statelm, exact, s) for s in seqs]
        result = {"src": os.path.basename(a.src), "prompts": a.prompts, "gen": a.gen, "types": {}}
        for t, path in files.items():
            k = n = 0
            for s, r in zip(seqs, ref):
                got = argmaxes(a.statelm, path, s)
                k += sum(x == y for x, y in zip(got, r))
                n += len(r)
            lo, hi = wilson(k, n)
            result["types"][t] = {"agree": k, "positions": n, "rate": k / n, "wilson95": [lo, hi],
                                  "bytes": os.path.getsize(path)}
            same = ""
            if t.startswith("llama:"):
                same = filecmp.cmp(path, files[t[6:]], shallow=False)
                result["types"][t]["same_bytes_as_statelm"] = same
                same = ", same bytes as statelm's" if same else ", bytes differ from statelm's"
            print(f"{t:14s} top-1 agreement {k}/{n} = {k / n:.4f} (95% {lo:.4f}-{hi:.4f}), "
                  f"{os.path.getsize(path) / 2**20:.1f} MiB{same}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
