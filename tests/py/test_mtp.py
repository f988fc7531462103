#!/usr/bin/env python3
"""Multi-token prediction (Qwen3.5's MTP block, docs/spec/qwen35.md §10) through `statelm run --mtp`,
on the tiny qwen35 model with an MTP block (tests/data/tiny/qwen35/hf-mtp, converted here):
1. greedy: the generated ids equal plain greedy decoding for several --draft-max (adaptive and
   --draft-fixed), from the converted GGUF and from the HF folder itself;
2. the drafts equal llama.cpp's: golden/mtp_drafts.json holds what llama-speculative-simple
   --spec-type draft-mtp drafted on the same GGUF from the same prompt (scripts/
   compare_mtp_llamacpp.py --golden); llama.cpp's step j + 1 has the context of statelm's step j
   (both: the history, then the target's next token), and the drafts must be equal;
3. sampling with --mtp runs (its distribution: tests/unit/test_spec.c, sampling_mtp);
4. refusals: --mtp on a model without an MTP block, with another drafter, with --logprobs; a
   folder whose MTP block lacks mtp.fc (one line naming it).
Usage: test_mtp.py STATELM TESTS_DATA_DIR."""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

statelm, data = sys.argv[1], Path(sys.argv[2])
d = data / "tiny" / "qwen35"
failures = []


def run(*args):
    return subprocess.run([statelm, *args], capture_output=True, text=True, timeout=300)


with tempfile.TemporaryDirectory() as tmp:
    gguf = Path(tmp) / "mtp.gguf"
    p = run("convert", "--quiet", "-m", str(d / "hf-mtp"), "-o", str(gguf), "--outtype", "f32")
    if p.returncode != 0:
        print(f"FAIL: convert: {p.stderr}")
        sys.exit(1)
    ids = "3,17,42,99,5,17,42,99,7,250,17,42"
    for model in (gguf, d / "hf-mtp"):
        base = ["run", "-m", str(model), "--prompt-ids", ids, "-n", "40", "--temp", "0", "--ignore-eos", "--ids",
                "-c", "128"]
        plain = run(*base)
        if plain.returncode != 0:
            failures.append(f"{model.name} plain: {plain.stderr}")
            continue
        for opt in (["--mtp"], ["--mtp", "--draft-max", "1"], ["--mtp", "--draft-max", "3", "--draft-fixed"],
                    ["--mtp", "--draft-max", "16", "--draft-fixed"]):
            q = run(*base, *opt)
            if q.returncode != 0 or q.stdout != plain.stdout:
                failures.append(f"{model.name} {opt}: exit {q.returncode}, {q.stdout.strip()!r} vs greedy "
                                f"{plain.stdout.strip()!r} {q.stderr}")
            elif not re.search(r"^statelm: speculation \(mtp, draft-max \d+\): 40 tokens in \d+ passes, \d+ drafted",
                               q.stderr, re.M):
                failures.append(f"{model.name} {opt}: no summary line: {q.stderr}")
    # 2: llama.cpp's drafts
    g = json.loads((d / "golden" / "mtp_drafts.json").read_text())
    q = run("run", "-m", str(gguf), "--prompt-ids", ",".join(map(str, g["prompt_ids"])), "-n", str(g["n_predict"]),
            "--temp", "0", "--ids", "--ignore-eos", "--mtp", "--draft-max", str(g["draft_max"]), "--draft-fixed",
            "--spec-trace")
    steps = [(int(m.group(1)), [int(x) for x in m.group(2).split()])
             for m in re.finditer(r"^statelm: spec step at \d+: next (\d+), draft \[([0-9 ]*)\]", q.stderr, re.M)]
    ll = g["llama_steps"]
    compared = 0
    for j, (nxt, draft) in enumerate(steps[:len(ll) - 1]):
        want = ll[j + 1]["draft"]
        m = min(len(want), len(draft))
        compared += m
        if nxt != ll[j]["target_next"] or draft[:m] != want[:m]:
            failures.append(f"step {j}: next {nxt}, draft {draft}; llama.cpp: next {ll[j]['target_next']}, draft {want}")
    if compared < 60:
        failures.append(f"only {compared} draft tokens compared with llama.cpp's: {q.stderr}")
    # 3: sampling
    q = run("run", "-m", str(gguf), "--prompt-ids", ids, "-n", "24", "--temp", "0.7", "--seed", "3", "--ignore-eos",
            "--ids", "--mtp")
    if q.returncode != 0 or len(q.stdout.split()) != 24:
        failures.append(f"sampling with --mtp: exit {q.returncode} {q.stdout!r} {q.stderr}")

    # 4: refusals
    def refuse(what, pattern, *args):
        q = run("run", "--prompt-ids", ids, "-n", "4", *args)
        if q.returncode == 0 or not re.search(pattern, q.stderr):
            failures.append(f"{what}: exit {q.returncode}, stderr {q.stderr!r}")

    refuse("no MTP block", "no multi-token-prediction block", "-m", str(d / "qwen35-f32.gguf"), "--mtp")
    refuse("two drafters", "give one of", "-m", str(gguf), "--mtp", "--lookup")
    refuse("logprobs", "logprobs", "-m", str(gguf), "--mtp", "--logprobs", "2")
    try:  # the safetensors reader of the test venv
        import shutil
        from safetensors.numpy import load_file, save_file
        broken = Path(tmp) / "no-fc"
        shutil.copytree(d / "hf-mtp", broken)
        sd = load_file(str(broken / "model.safetensors"))
        del sd["mtp.fc.weight"]
        save_file(sd, str(broken / "model.safetensors"))
        q = run("info", "-m", str(broken))
        if q.returncode == 0 or "mtp.fc.weight" not in q.stderr or len(q.stderr.strip().splitlines()) != 1:
            failures.append(f"MTP block without mtp.fc: exit {q.returncode}, stderr {q.stderr!r}")
    except ImportError:
        print("note: safetensors/numpy missing, the incomplete-block check is skipped")

for f in failures:
    print(f"FAIL: {f}")
print("test_mtp: " + ("FAILED" if failures else f"ok ({compared} draft tokens equal to llama.cpp's)"))
sys.exit(1 if failures else 0)
