#!/usr/bin/env python3
"""Exported Core ML programs executed by an independent NumPy interpreter (milinterp.py) against
statelm's CPU logits.

For the tiny llama, qwen3, lfm2, qwen35 and gemma3 models (f16 weights; and llama q8_0 as int8
blocks): `statelm export --target coreml --ctx 64 --prefill-len 8`, then the interpreter runs the
package's prefill over 8 fixed ids and 16 greedy decode steps, states carried between calls (gemma3's
16-row rings wrap). `statelm score` on the reference kernels (SLM_KERNELS=ref, the scalar oracle the
simulation runs on too; the fast kernels quantise activations to 8 bits on q8_0 weights, a CPU-side
error of 0.04 here that is no part of the device), teacher-forced on the same ids, gives the
reference log-probabilities; `plan --target ane --simulate` runs over the same 8 ids and 17 greedy
calls. Every step must pick the same greedy token and every log-probability
must agree within 2 x the max logit difference that `plan --target ane --simulate` reports for the
legalised program at the device's precision (simulation.device_precision: activations rounded to f16
after every IR node, weights rounded to f16, as the export writes them). The factor 2 is the bound
from logits to log-probabilities (|d log_softmax| <= |d logit| + |d logsumexp| <= 2 max |d logit|),
not slack for the rounding points. Prints the figures.
Usage: test_export_coreml_interp.py STATELM TESTS_DATA_DIR. Exit 77 = skipped."""
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

logging.disable(logging.WARNING)
try:
    import numpy as np
    import coremltools  # noqa: F401 - milinterp reads packages through it
    import milinterp
except ImportError as exc:
    print(f"SKIPPED: {exc.name} is not installed (scripts/test.sh installs coremltools and numpy)")
    sys.exit(77)

statelm, data = sys.argv[1], Path(sys.argv[2])
N_CTX, P, STEPS = 64, 8, 16
failures = []


def run(*args, env=None):
    return subprocess.run([statelm, *map(str, args)], capture_output=True, text=True, env=env)


def log_softmax(v):
    v = v.astype(np.float64) - v.max()
    return v - np.log(np.exp(v).sum())


probe = run("export", "-m", data / "tiny/llama/llama-f32.gguf", "--target", "coreml", "--check-only")
if "no Core ML export" in probe.stdout + probe.stderr:
    print("FAIL: coremltools is importable but this statelm was built without the Core ML exporter")
    sys.exit(1)

cases = [(a, f"{a}-f32.gguf", "f16") for a in ("llama", "qwen3", "lfm2", "qwen35", "gemma3")]
cases.append(("llama", "llama-q8_0.gguf", "int8"))
with tempfile.TemporaryDirectory() as tmp:
    for arch, file, weights in cases:
        model = data / "tiny" / arch / file
        label = f"{file} --weights {weights}"
        pkg = Path(tmp) / f"{file}-{weights}.mlpackage"
        p = run("export", "-m", model, "--target", "coreml", "-o", pkg, "--ctx", N_CTX, "--prefill-len", P,
                "--weights", weights)
        if p.returncode != 0:
            failures.append(f"{label}: export failed: {p.stderr.strip()}")
            continue
        m = milinterp.Package(pkg)
        n_vocab = m.spec.description.functions[0].output[0].type.multiArrayType.shape[1]
        ids = [int(i) for i in np.random.default_rng(7).integers(1, n_vocab, P)]
        try:
            logits = [m.run("prefill", ids, 0)[0]]
            for _ in range(STEPS):
                ids.append(int(np.argmax(logits[-1])))
                logits.append(m.run("decode", [ids[-1]], len(ids) - 1)[0])
        except Exception as exc:  # noqa: BLE001 - an op the interpreter cannot run is the finding
            failures.append(f"{label}: interpreter: {type(exc).__name__}: {exc}")
            continue
        # the simulation over the same prompt; fed its original's greedy tokens, which are the
        # interpreter's when the greedy check below passes
        sim = json.loads(run("plan", "-m", model, "--target", "ane", "-c", N_CTX, "--simulate", "-n", STEPS + 1,
                             "--prompt-ids", ",".join(map(str, ids[:P])), "--json").stdout)["simulation"]
        if "device_precision" not in sim:
            failures.append(f"{label}: plan --target ane --simulate reports no device-precision figure")
            continue
        device_diff = sim["device_precision"]["max_abs_logit_diff"]
        tol = 2 * device_diff
        out = run("score", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "--top", n_vocab, "-c", N_CTX,
                  env={**os.environ, "SLM_KERNELS": "ref"})
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        if out.returncode != 0 or len(rows) != len(ids):
            failures.append(f"{label}: statelm score failed: {out.stderr.strip()}")
            continue
        worst, diverged = 0.0, []
        for step, lg in enumerate(logits):
            ref = np.full(n_vocab, -np.inf)
            for tid, lp in rows[P - 1 + step]["top"]:
                ref[tid] = lp
            got = log_softmax(lg)
            worst = max(worst, float(np.abs(got - ref).max()))
            if int(np.argmax(got)) != int(np.argmax(ref)):
                diverged.append(step)
        print(f"{label}: max |d log-prob| {worst:.4f} over {len(logits)} calls (tolerance {tol:.4f}; "
              f"simulate at f16: max logit diff {device_diff:.4f}); greedy tokens "
              f"{'identical' if not diverged else 'differ at ' + str(diverged)}")
        if worst > tol:
            failures.append(f"{label}: max |d log-prob| {worst} > {tol}")
        if diverged:
            failures.append(f"{label}: greedy token differs at steps {diverged}")

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
