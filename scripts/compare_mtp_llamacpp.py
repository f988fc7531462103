#!/usr/bin/env python3
"""Draft tokens of statelm's multi-token-prediction drafter against llama.cpp's (--spec-type
draft-mtp) on the same Qwen3.5 GGUF with an MTP block, the same prompt, greedy.

llama.cpp: llama-speculative-simple -m MODEL --spec-type draft-mtp --spec-draft-n-max K --temp 0
-lv 5, whose debug log names each draft step's tokens (common/speculative.cpp: "draft candidate 0,
pos i: ID") and the target's token after each verify ("the last target token is: (ID)").
statelm: statelm run --mtp --draft-max K --draft-fixed --spec-trace, one line per step: the
target's next token and the draft made after it.

llama.cpp drafts once before the first verify from the prompt's last token (statelm's run starts
from the target's first token instead), so llama.cpp's step j + 1 has the context of statelm's step
j: the same history followed by the same next token. Each such step's drafts must be equal (the
shorter of the two at the end, where both cut the draft to what -n leaves).

Usage: compare_mtp_llamacpp.py STATELM LLAMA_BIN_DIR MODEL.gguf [--prompt TEXT] [-n N] [-k K]
       [--golden OUT.json]   also write the llama.cpp drafts as golden data (tests/cli/test_mtp.sh)
Exit 1 on any difference. Not run by CI (needs llama.cpp's binaries)."""
import argparse
import json
import re
import subprocess
import sys


def llama_steps(bin_dir, model, prompt, n, k):
    p = subprocess.run([f"{bin_dir}/llama-speculative-simple", "-m", model, "--spec-type", "draft-mtp",
                        "--spec-draft-n-max", str(k), "-p", prompt, "-n", str(n), "--temp", "0", "-t", "1",
                        "-c", "512", "-lv", "5"], capture_output=True, timeout=600)
    log = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        sys.exit(f"llama-speculative-simple failed:\n{log[-3000:]}")
    steps, cur = [], []
    for line in log.splitlines():
        m = re.search(r"draft candidate\s+0, pos\s+(\d+):\s+(\d+) ", line)
        if m:
            cur.append(int(m.group(2)))
            continue
        m = re.search(r"the last target token is: \((\d+)\)", line)
        if m:
            steps.append({"draft": cur, "target_next": int(m.group(1))})
            cur = []
    return steps


def statelm_steps(statelm, model, ids, n, k):
    p = subprocess.run([statelm, "run", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-n", str(n),
                        "--temp", "0", "--ids", "--ignore-eos", "--mtp", "--draft-max", str(k), "--draft-fixed",
                        "--spec-trace"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"statelm run failed: {p.stderr}")
    steps = []
    for line in p.stderr.splitlines():
        m = re.match(r"statelm: spec step at (\d+): next (\d+), draft \[([0-9 ]*)\], kept (\d+)", line)
        if m:
            steps.append({"pos": int(m.group(1)), "next": int(m.group(2)),
                          "draft": [int(x) for x in m.group(3).split()]})
    return steps, [int(x) for x in p.stdout.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("statelm")
    ap.add_argument("llama_bin")
    ap.add_argument("model")
    ap.add_argument("--prompt", default="hello world, this is a test")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--golden")
    a = ap.parse_args()
    tok = subprocess.run([a.statelm, "tokenize", "-m", a.model, "-p", a.prompt], capture_output=True, text=True,
                         check=True)
    ids = [int(x) for x in tok.stdout.split()]
    ll = llama_steps(a.llama_bin, a.model, a.prompt, a.n, a.k)
    st, out = statelm_steps(a.statelm, a.model, ids, a.n, a.k)
    bad = compared = 0
    # llama.cpp's step j + 1 follows the target token of its step j: statelm's step j's next token
    for j, s in enumerate(st):
        if j + 1 >= len(ll):
            break
        want, nxt = ll[j + 1]["draft"], ll[j]["target_next"]
        m = min(len(want), len(s["draft"]))
        ok = nxt == s["next"] and want[:m] == s["draft"][:m]
        compared += m
        bad += not ok
        print(f"step {j}: pos {s['pos']} next {s['next']} (llama.cpp {nxt}): statelm {s['draft']} llama.cpp {want}"
              f"{'' if ok else '  DIFFERS'}")
    print(f"{compared} draft tokens compared over {min(len(st), len(ll) - 1)} steps: "
          f"{'all equal' if not bad else f'{bad} steps differ'}")
    if a.golden:
        json.dump({"reference": "llama.cpp llama-speculative-simple --spec-type draft-mtp (llama-cpp-python 0.3.36 "
                   "vendored tree), greedy, scripts/compare_mtp_llamacpp.py", "prompt": a.prompt, "prompt_ids": ids,
                   "n_predict": a.n, "draft_max": a.k, "llama_steps": ll, "statelm_tokens": out},
                  open(a.golden, "w"), indent=1)
    return 1 if bad or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
