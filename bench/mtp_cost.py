#!/usr/bin/env python3
"""Cost of multi-token prediction on a Qwen3.5 GGUF with an MTP block (bench/README.md, "MTP").

Measured, interleaved, r rounds, medians (the statelm Python package over the library):
  decode     one slm_session_decode step of the trunk;
  verify(j)  a verify of j = k + 1 tokens then accept(1) (what a speculation step with k drafts
             costs the trunk when nothing is accepted);
  step(k)    one slm_spec_step with the MTP drafter, k drafts fixed (Spec(mtp=True, fixed=True)):
             the drafter's catch-up call, k MTP draft steps, the verify of k + 1 and the accept;
  draft(k) = step(k) - verify(k + 1): the drafter's share (k MTP steps with the head, one catch-up
             call without), and per draft step draft(k) / k.
Then the speed-up over plain decoding, tokens per step over the step's cost in decode steps:
measured (generate N tokens with mtp=True and without, wall time; random weights accept ~nothing)
and computed from the measured costs at per-token acceptance a = 0.5, 0.7, 0.9 (draft i kept
with probability a^i: E[tokens] = 1 + a + ... + a^k), for the best fixed k.
Usage: mtp_cost.py MODEL.gguf [-t THREADS] [-r ROUNDS] [--depth N] [--json OUT]"""
import argparse
import json
import statistics
import time

import statelm


def median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--depth", type=int, default=64)
    ap.add_argument("--kmax", type=int, default=6)
    ap.add_argument("--gen", type=int, default=48)
    ap.add_argument("--json")
    a = ap.parse_args()
    m = statelm.Model(a.model, n_threads=a.t)
    V = m.n_vocab
    prompt = [(7 * i + 3) % min(V, 300) + 10 for i in range(a.depth)]
    s = statelm.Session(m, n_ctx=a.depth + 256, n_threads=a.t, mtp=True)
    s.prefill(prompt[:-1])
    base = s.snapshot()

    def start():  # the base state, then the prompt's last token (logits; untimed)
        s.restore(base)
        return s.decode(prompt[-1])
    res = {"decode": [], "verify": {k: [] for k in range(1, a.kmax + 1)}, "step": {k: [] for k in range(1, a.kmax + 1)}}
    accepted = drafted = 0
    for rnd in range(a.r):
        # decode: 8 steps from the base state
        tok = start().argmax()
        t0 = time.perf_counter()
        for _ in range(8):
            tok = s.decode(tok).argmax()
        res["decode"].append((time.perf_counter() - t0) / 8)
        for k in range(1, a.kmax + 1):
            ids = [start().argmax()] + [(11 * j + 5) % 300 + 10 for j in range(k)]
            t0 = time.perf_counter()
            s.verify(ids)
            s.accept(1)
            res["verify"][k].append(time.perf_counter() - t0)
            start()
            spec = statelm.Spec(s, mtp=True, draft_max=k, fixed=True)
            spec.step(k + 1)  # the catch-up over the prompt, untimed
            t0 = time.perf_counter()
            for _ in range(4):
                spec.step(k + 1)
            res["step"][k].append((time.perf_counter() - t0) / 4)
            st = spec.stats
            accepted += st["n_accepted"]
            drafted += st["n_drafted"]
            spec.close()
    dec = statistics.median(res["decode"])
    out = {"model": a.model, "threads": a.t, "rounds": a.r, "depth": a.depth, "decode_s": dec,
           "decode_range_s": [min(res["decode"]), max(res["decode"])], "k": {}}
    print(f"decode step: {dec * 1e3:.1f} ms (median of {a.r}; {min(res['decode']) * 1e3:.1f}-"
          f"{max(res['decode']) * 1e3:.1f})")
    print("| k | verify(k+1) / decode | step(k) / decode | draft(k) / decode | draft(k) / k / decode |")
    print("|---:|---:|---:|---:|---:|")
    costs = {}
    for k in range(1, a.kmax + 1):
        v, stp = statistics.median(res["verify"][k]), statistics.median(res["step"][k])
        dr = stp - v
        costs[k] = stp / dec
        out["k"][k] = {"verify_s": v, "step_s": stp, "draft_s": dr, "per_draft_ratio": dr / k / dec}
        print(f"| {k} | {v / dec:.2f} | {stp / dec:.2f} | {dr / dec:.2f} | {dr / k / dec:.3f} |")
    print(f"acceptance measured in the timed steps: {accepted}/{drafted}")
    # measured end-to-end speed-up on N generated tokens
    def gen(mtp):
        s2 = statelm.Session(m, n_ctx=a.depth + a.gen + 16, n_threads=a.t, mtp=mtp)
        s2.prefill(prompt)
        t0 = time.perf_counter()
        if mtp:
            sp = statelm.Spec(s2, mtp=True, draft_max=4)
            n = 0
            while n < a.gen:
                n += len(sp.step(a.gen - n))
            st = sp.stats
            sp.close()
        else:
            tok = s2.logits.argmax()
            for _ in range(a.gen):
                tok = s2.decode(tok).argmax()
            st = None
        dt = time.perf_counter() - t0
        s2.close()
        return dt, st
    plain_t, mtp_t, last = [], [], None
    for _ in range(max(1, a.r // 2)):
        plain_t.append(gen(False)[0])
        dt, last = gen(True)
        mtp_t.append(dt)
    sp_meas = statistics.median(plain_t) / statistics.median(mtp_t)
    acc = last["n_accepted"] / last["n_drafted"] if last and last["n_drafted"] else 0.0
    out["measured"] = {"speedup": sp_meas, "acceptance": acc, "n_steps": last["n_steps"] if last else 0,
                       "n_drafted": last["n_drafted"] if last else 0}
    print(f"measured: {a.gen} tokens, mtp (adaptive, draft-max 4) vs plain: {sp_meas:.2f}x at acceptance "
          f"{acc:.2f} ({last['n_drafted']} drafted in {last['n_steps']} steps)")
    out["computed"] = {}
    print("computed from the measured costs (not measured):")
    for acc_rate in (0.5, 0.7, 0.9):
        best = max(range(1, a.kmax + 1), key=lambda k: sum(acc_rate ** i for i in range(k + 1)) / costs[k])
        toks = sum(acc_rate ** i for i in range(best + 1))
        out["computed"][str(acc_rate)] = {"k": best, "tokens_per_step": toks, "speedup": toks / costs[best]}
        print(f"  acceptance {acc_rate}: best k = {best}, {toks:.2f} tokens per step, {toks / costs[best]:.2f}x")
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
