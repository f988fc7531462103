#!/usr/bin/env python3
"""Real Gemma 3 270M (Q4_K_M: Q5_0, Q4_K, Q6_K, Q8_0 and F32 tensors) against llama.cpp goldens in
tests/data/real/gemma-3-270m-q4_k_m.json (made by scripts/gen_gemma_real_golden.py through
llama.cpp's C API). Each case is a plain-text prompt plus llama.cpp's 48 greedy tokens, scored
teacher-forced (statelm score: the argmax after every prefix):

1. tokenisation of each prompt text equals llama.cpp's (after its BOS);
2. statelm's scalar reference kernels (SLM_KERNELS=ref, f32 KV) against llama.cpp run on the same
   weights dequantised to F32 (f32 KV): the argmax equals llama.cpp's at every prompt position and
   the first REF_GEN generated ones where llama.cpp's top-2 margin exceeds REF_MARGIN, and the top-5
   log-probabilities at the prompt end are within TOP5_TOL. (Not exact: llama.cpp's GELU reads an fp16 table, which
   alone moves the tiny gemma3's f32 logits by 8e-4 relative; see the constants for the measured
   spread on this model.)
3. statelm's default kernels on the Q4_K_M file against llama.cpp on it with f16 KV: top-1
   agreement over all positions with llama.cpp's flash-attention-off path at least llama.cpp's own
   agreement between its default (flash attention auto, which is on for the CPU) and
   flash-attention-off runs (recorded in the golden: 240/247); statelm reaches 241/247 (AVX2, AMD
   EPYC Zen 3; 244 was measured on an earlier host). Against llama.cpp's default path itself statelm
   agrees at 236/247 there, and is required to stay within
   DEFAULT_SLACK of that bar: llama.cpp's CPU flash attention accumulates softmax(QK)V in an fp16
   accumulator (VKQ16 in ggml-cpu/ops.cpp), a rounding statelm's f32 accumulation does not share.
   On a larger sample (scripts/gemma_agreement.py: 16 prompts, 1274 positions) statelm agrees with
   the flash-attention-off path at 1236, exactly llama.cpp's own default vs off figure, and with the
   default path at 1227 (paired sign test against llama.cpp's own: p = 0.16).
4. a greedy plain-text continuation (default kernels) names Berlin after "The capital of France is
   Paris. The capital of Germany is". (A base model: the bare "The capital of France is" runs on, in
   llama.cpp too, to "the capital of the Republic of France" without naming Paris.)
In a sanitizer build (ASan/TSan: ~10x slower) only the first case's prompt and a few tokens are
run, through both kernel tiers (1 and 2); 3 and 4 are left to the release build.
Skipped (exit 77, saying why) when the model file is absent or differs from the golden's.
Usage: test_real_gemma3.py STATELM TESTS_DATA_DIR."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

# The reference pass costs ~0.45 s of CPU per position on this 262k-vocabulary model: it covers each
# prompt and the first REF_GEN golden tokens (119 of the 247 positions, ~55 s CPU, ~30 s on 2 cores).
REF_GEN = 16
# Measured against llama.cpp f32 (all 247 positions): argmaxes equal everywhere (smallest llama.cpp
# margin 0.018); top-2 margins differ by at most 0.012 (median 0.001); top-5 log-probabilities at
# the prompt ends by at most 3.8e-3. The bounds leave ~4x and ~2.6x room.
REF_MARGIN = 0.05
TOP5_TOL = 1e-2
# Positions by which agreement with llama.cpp's flash-attention path may fall short of llama.cpp's
# own flash attention on/off agreement (measured: 4 on AVX2, AMD EPYC Zen 3).
DEFAULT_SLACK = 5

statelm, data = sys.argv[1], Path(sys.argv[2])
golden = json.loads((data / "real/gemma-3-270m-q4_k_m.json").read_text())
model = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache/statelm")) / "models" / golden["model"]
if not model.exists():
    print(f"SKIPPED: {model} is absent (bash scripts/fetch-models.sh fetches it)")
    sys.exit(77)
sha = hashlib.sha256()
with open(model, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        sha.update(block)
if sha.hexdigest() != golden["sha256"]:
    print(f"SKIPPED: {model} is not the file the goldens were made from")
    sys.exit(77)

# A sanitizer build runs each position ~10x slower: the full check would take ~20 CPU minutes.
sanitized = any(tag in Path(statelm).read_bytes() for tag in (b"__asan_init", b"__tsan_init"))
cases = golden["cases"][:1] if sanitized else golden["cases"]
if sanitized:
    REF_GEN = 2
failures = []


def run(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    p = subprocess.run([statelm, *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        failures.append(f"{' '.join(args[:3])}...: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def score(ids, top, env_extra=None, kv_f32=False):
    out = run(["score", "-m", str(model), "-c", "512", "-t", "2", "--top", str(top),
               "--prompt-ids", ",".join(map(str, ids)), *(["--kv-f32"] if kv_f32 else [])], env_extra)
    return [json.loads(line)["top"] for line in out.splitlines()]


n_agree = n_agree_fa_off = n_positions = worst_top5 = 0
for k, case in enumerate(cases):
    ids, n_prompt = case["ids"], case["n_prompt"]
    got = [int(x) for x in run(["tokenize", "-m", str(model), "-p", case["text"]]).split()]
    if got != ids[1:n_prompt]:
        failures.append(f"case {k}: tokenize gives {got[:12]}..., llama.cpp {ids[1:n_prompt][:12]}...")

    ref = score(ids[:n_prompt + REF_GEN], 5, {"SLM_KERNELS": "ref"}, kv_f32=True)
    want = case["f32"]
    for t, row in enumerate(ref):
        if row[0][0] != want["argmax"][t] and want["margin"][t] > REF_MARGIN:
            failures.append(f"case {k}: reference argmax {row[0][0]} != llama.cpp f32 {want['argmax'][t]} at "
                            f"position {t}, where llama.cpp's top-2 margin is {want['margin'][t]}")
    if len(ref) >= n_prompt:
        top = ref[n_prompt - 1]
        for (tid, lp), (wid, wlp) in zip(top, case["top5_f32"]):
            worst_top5 = max(worst_top5, abs(lp - wlp))
            if tid != wid or abs(lp - wlp) > TOP5_TOL:
                failures.append(f"case {k}: reference top-5 {top} vs llama.cpp f32 {case['top5_f32']}")
                break

    rows = score(ids[:n_prompt + REF_GEN] if sanitized else ids, 1)
    if sanitized:
        continue
    for t, (want_id, want_fa_off) in enumerate(zip(case["default"]["argmax"], case["fa_off"]["argmax"])):
        n_positions += 1
        n_agree += t < len(rows) and rows[t][0][0] == want_id
        n_agree_fa_off += t < len(rows) and rows[t][0][0] == want_fa_off
    print(f"case {k}: checked")

if sanitized:
    print("sanitizer build: first case, prompt and two tokens only, no agreement statistics")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    sys.exit(0)
fa_agree, fa_total = golden["fa_agreement"]
print(f"teacher-forced top-1 agreement, statelm default kernels: with llama.cpp default {n_agree}/{n_positions}, "
      f"with llama.cpp flash attention off {n_agree_fa_off}/{n_positions}; llama.cpp default with its flash "
      f"attention off {fa_agree}/{fa_total}; reference kernels' worst top-5 |dlogprob| {worst_top5:.2e}")
if n_agree_fa_off * fa_total < fa_agree * n_positions:
    failures.append(f"default kernels agree with llama.cpp (flash attention off) at {n_agree_fa_off}/{n_positions} "
                    f"positions, below llama.cpp's own flash attention on/off agreement {fa_agree}/{fa_total}")
if (n_agree + DEFAULT_SLACK) * fa_total < fa_agree * n_positions:
    failures.append(f"default kernels agree with llama.cpp's default path at {n_agree}/{n_positions} positions, "
                    f"more than {DEFAULT_SLACK} below llama.cpp's own flash attention on/off agreement "
                    f"{fa_agree}/{fa_total}")

answer = run(["run", "-m", str(model), "-c", "512", "-t", "2", "--no-chat", "-p",
              "The capital of France is Paris. The capital of Germany is", "--temp", "0", "-n", "16"])
print(f"continuation: {answer.strip()!r}")
if "Berlin" not in answer:
    failures.append(f"continuation does not name Berlin: {answer!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("Gemma 3 270M Q4_K_M agrees with llama.cpp")
