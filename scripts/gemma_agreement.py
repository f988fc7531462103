#!/usr/bin/env python3
"""Teacher-forced top-1 agreement of statelm with llama.cpp on the real Gemma 3 270M (Q4_K_M), on a
larger sample than tests/py/test_real_gemma3.py (issue 18): 16 varied plain-text prompts (base model,
no template) plus N_GEN llama.cpp greedy tokens each, every position counted.

llama.cpp is driven as in scripts/gen_gemma_real_golden.py (scripts/llama_logits.cpp, built by
scripts/build-llama-logits.sh): per prompt, its default context (flash attention auto, f16 KV)
generates the sequence and scores it teacher-forced; the same sequence is rescored with flash
attention off and forced on. statelm scores it with `statelm score` (f16 KV), default kernels and,
with --ref, also SLM_KERNELS=ref. Printed per pair: agreements / positions, the disagreement rate
with a 95% Wilson interval, and paired (McNemar, exact two-sided sign test on the discordant
positions) comparisons of statelm's disagreement with llama.cpp's own flash attention on/off
disagreement. Positions of one sequence are not independent (a sequence shares its context), so the
intervals and p-values are indicative, somewhat narrower than the truth.

Usage: ~/.cache/statelm/venv-test/bin/python scripts/gemma_agreement.py [--statelm build/statelm]
           [--model PATH] [--gen 64] [--ref] [--json OUT.json]"""
import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [
    "The history of the printing press begins",
    "The capital of France is Paris. The capital of Germany is",
    "Photosynthesis is the process by which plants",
    "Once upon a time, in a small village at the edge of the forest,",
    "La Révolution française a commencé en 1789, lorsque",
    "Die Berliner Mauer wurde im Jahr 1961 gebaut, um",
    "El río Amazonas es el más caudaloso del mundo y",
    "Il était une fois une petite fille qui vivait",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "#include <stdio.h>\n\nint main(void) {\n    int sum = 0;\n    for (int i = 0; i <",
    "SELECT name, COUNT(*) FROM orders\nJOIN customers ON",
    "Shopping list:\n- eggs\n- milk\n-",
    "Steps to change a flat tyre:\n1. Loosen the wheel nuts.\n2.",
    "Alice: Did you finish the report?\nBob: Almost, I just need to\nAlice:",
    "Q: What is the boiling point of water at sea level?\nA:",
    "In 1969, Neil Armstrong and Buzz Aldrin",
]


def llama_bin():
    return subprocess.run(["bash", str(ROOT / "scripts/build-llama-logits.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()


def llama(exe, model, *args):
    p = subprocess.run([exe, "-m", str(model), "-t", "2", "-c", "512", *args], check=True, capture_output=True,
                       text=True)
    return json.loads(p.stdout)


def statelm_argmax(exe, model, ids, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    p = subprocess.run([exe, "score", "-m", str(model), "-c", "512", "-t", "2", "--top", "1",
                        "--prompt-ids", ",".join(map(str, ids))], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"statelm score: exit {p.returncode}: {p.stderr.strip()}")
    rows = [json.loads(line)["top"][0][0] for line in p.stdout.splitlines()]
    if len(rows) != len(ids):
        sys.exit(f"statelm score gave {len(rows)} rows for {len(ids)} ids")
    return rows


def wilson(k, n, z=1.959964):
    """95% Wilson score interval for a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def sign_test(b, c):
    """Exact two-sided binomial (McNemar) p-value for b vs c discordant pairs under p = 1/2."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--statelm", default=str(ROOT / "build/statelm"))
    ap.add_argument("--model", default=str(Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm"))
                                           / "models/gemma-3-270m.Q4_K_M.gguf"))
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--ref", action="store_true", help="also score with SLM_KERNELS=ref (slow: ~0.45 s CPU/position)")
    ap.add_argument("--json", help="write the per-position argmaxes here")
    a = ap.parse_args()
    exe = llama_bin()

    # runs[name] is the concatenation over prompts of per-position argmaxes.
    runs = {"statelm": [], "llama_default": [], "llama_fa_off": [], "llama_fa_on": []}
    if a.ref:
        runs["statelm_ref"] = []
    cases = []
    for text in PROMPTS:
        gen = llama(exe, a.model, "--text", text, "--gen", str(a.gen))
        ids = gen["ids"]
        seq = ",".join(map(str, ids))
        case = {"text": text, "n_prompt": gen["n_prompt"], "ids": ids,
                "llama_default": [p["argmax"] for p in gen["positions"]],
                "llama_fa_off": [p["argmax"] for p in llama(exe, a.model, "--ids", seq, "--fa", "off")["positions"]],
                "llama_fa_on": [p["argmax"] for p in llama(exe, a.model, "--ids", seq, "--fa", "on")["positions"]],
                "statelm": statelm_argmax(a.statelm, a.model, ids)}
        if a.ref:
            case["statelm_ref"] = statelm_argmax(a.statelm, a.model, ids, {"SLM_KERNELS": "ref"})
        for name in runs:
            runs[name] += case[name]
        cases.append(case)
        agree = sum(x == y for x, y in zip(case["statelm"], case["llama_default"]))
        print(f"{text[:40]!r}: {len(ids)} positions, statelm = llama.cpp default at {agree}", file=sys.stderr)

    n = len(runs["statelm"])
    pairs = [("statelm", "llama_default"), ("statelm", "llama_fa_off"), ("statelm", "llama_fa_on"),
             ("llama_default", "llama_fa_off"), ("llama_fa_on", "llama_fa_off"), ("llama_default", "llama_fa_on")]
    if a.ref:
        pairs += [("statelm_ref", "llama_fa_off"), ("statelm_ref", "llama_default"), ("statelm_ref", "statelm")]
    agree = {p: [x == y for x, y in zip(runs[p[0]], runs[p[1]])] for p in pairs}

    print(f"Gemma 3 270M Q4_K_M, {len(PROMPTS)} prompts + {a.gen} llama.cpp greedy tokens, {n} teacher-forced "
          f"positions")
    print(f"{'pair':<34} {'agree':>10} {'disagree':>8} {'rate':>7}  95% interval")
    for p in pairs:
        k = n - sum(agree[p])
        lo, hi = wilson(k, n)
        print(f"{p[0] + ' vs ' + p[1]:<34} {sum(agree[p]):>5}/{n:<4} {k:>8} {k / n:>7.2%}  [{lo:.2%}, {hi:.2%}]")

    print("\npaired: b = positions where the first pair disagrees and the second agrees, c = the reverse")
    tests = [(("statelm", "llama_default"), ("llama_default", "llama_fa_off")),
             (("statelm", "llama_fa_off"), ("llama_default", "llama_fa_off")),
             (("statelm", "llama_default"), ("statelm", "llama_fa_off"))]
    if a.ref:
        tests.append((("statelm_ref", "llama_fa_off"), ("llama_default", "llama_fa_off")))
    for p, q in tests:
        b = sum((not x) and y for x, y in zip(agree[p], agree[q]))
        c = sum(x and (not y) for x, y in zip(agree[p], agree[q]))
        print(f"{p[0]}~{p[1]} vs {q[0]}~{q[1]}: b={b} c={c} exact two-sided p={sign_test(b, c):.3f}")

    if a.json:
        Path(a.json).write_text(json.dumps({"model": Path(a.model).name, "n_gen": a.gen, "cases": cases}) + "\n")


if __name__ == "__main__":
    main()
