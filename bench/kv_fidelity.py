#!/usr/bin/env python3
"""bench/kv_fidelity.py — teacher-forced fidelity of quantised KV caches against the f16 cache, for
statelm and (with --llama-perplexity) llama.cpp, with llama-perplexity's protocol on both sides.

The text is tokenised (BOS when the model asks for it), cut into --chunks chunks of --ctx tokens,
each evaluated from an empty cache (its first token BOS when the model adds one, as
llama-perplexity does); the logits of the second half of each chunk (positions ctx/2 .. ctx-2,
predicting the next token) are compared with the f16 cache's: mean and maximum KL(f16 || type)
and the share of positions whose top-1 token agrees. llama.cpp's figures come from
`llama-perplexity --kl-divergence-base` (f16 cache) then `--kl-divergence` per type, with flash
attention on (llama.cpp needs it for a quantised V cache) and the same context and chunks.

    python bench/kv_fidelity.py -m MODEL.gguf -f TEXT [--ctx 512] [--chunks 6] [-t 2]
        [--types q8_0/q8_0,q4_0/q4_0,q8_0/q4_0] [--llama-perplexity PATH]

Needs the statelm package (a build's python/ on PYTHONPATH) and numpy.
"""
import argparse
import math
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import statelm


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def chunks_of(model, text, ctx, n_chunks):
    tok = model.info["tokenizer"]
    ids = model.tokenize(text, add_bos=True)
    n = min(n_chunks, len(ids) // ctx)
    if n < 1:
        raise SystemExit(f"the text has {len(ids)} tokens, fewer than one chunk of {ctx}")
    out = []
    for c in range(n):
        ch = list(ids[c * ctx:(c + 1) * ctx])
        if tok["add_bos"]:
            ch[0] = tok["bos"]
        out.append(ch)
    return out


def statelm_logits(model, chunks, ctx, k, v, threads):
    """Logits (n_chunks, ctx/2 - 1, n_vocab) of positions ctx/2 .. ctx-2 of every chunk, and the
    decode seconds; one session per chunk, stepped together (Session.decode_batch)."""
    sess = [statelm.Session(model, n_ctx=ctx, n_threads=threads, kv_dtype_k=k, kv_dtype_v=v) for _ in chunks]
    first = ctx // 2
    out = np.empty((len(chunks), ctx - 1 - first, model.n_vocab), dtype=np.float32)
    t0 = time.perf_counter()
    try:
        for j in range(ctx - 1):
            logits = statelm.Session.decode_batch(sess, [ch[j] for ch in chunks])
            if j >= first:
                for c, lg in enumerate(logits):
                    out[c, j - first] = np.asarray(lg)
    finally:
        for s in sess:
            s.close()
    return out, time.perf_counter() - t0


def compare(base, new):
    lb, ln = log_softmax(base), log_softmax(new)
    kld = (np.exp(lb) * (lb - ln)).sum(axis=-1).ravel()
    same = (base.argmax(axis=-1) == new.argmax(axis=-1)).ravel()
    return {"mean_kld": float(kld.mean()), "max_kld": float(kld.max()), "same_top": float(same.mean()),
            "n": int(kld.size), "max_abs_logit_diff": float(np.abs(base - new).max())}


def llama_cpp(binary, model, text_path, ctx, n_chunks, types, threads):
    """llama-perplexity's KL divergence of each K/V type against its f16 cache."""
    res = {}
    with tempfile.TemporaryDirectory() as d:
        base = os.path.join(d, "base.kld")
        common = [binary, "-m", model, "-f", text_path, "-c", str(ctx), "--chunks", str(n_chunks), "-t", str(threads),
                  "-fa", "on", "-b", str(ctx)]
        subprocess.run(common + ["--kl-divergence-base", base, "-ctk", "f16", "-ctv", "f16"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for k, v in types:
            p = subprocess.run(common + ["--kl-divergence-base", base, "--kl-divergence", "-ctk", k, "-ctv", v],
                               check=True, capture_output=True, text=True)
            out = p.stdout + p.stderr
            mean = re.search(r"Mean\s+KLD:\s+([-\d.e]+)", out)
            mx = re.search(r"Maximum KLD:\s+([-\d.e]+)", out)
            same = re.search(r"Same top p:\s+([\d.]+)", out)
            res[(k, v)] = {"mean_kld": float(mean.group(1)) if mean else math.nan,
                           "max_kld": float(mx.group(1)) if mx else math.nan,
                           "same_top": float(same.group(1)) / 100 if same else math.nan}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-f", "--file", required=True, help="the text")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--types", default="q8_0/q8_0,q4_0/q4_0,q8_0/q4_0")
    ap.add_argument("--llama-perplexity", help="llama.cpp's llama-perplexity binary")
    a = ap.parse_args()
    types = [tuple(t.split("/")) for t in a.types.split(",")]
    model = statelm.Model(a.model, n_threads=a.threads)
    with open(a.file, encoding="utf-8") as f:
        text = f.read()
    chunks = chunks_of(model, text, a.ctx, a.chunks)
    base, secs = statelm_logits(model, chunks, a.ctx, "f16", "f16", a.threads)
    print(f"{os.path.basename(a.model)}: {len(chunks)} chunks of {a.ctx}, {base.shape[1] * len(chunks)} scored "
          f"positions; statelm f16 decode {secs:.1f} s")
    ref = llama_cpp(a.llama_perplexity, a.model, a.file, a.ctx, len(chunks), types, a.threads) if a.llama_perplexity else {}
    print("| K / V | statelm mean KLD | max KLD | same top-1 | max abs logit diff | llama.cpp mean KLD | max KLD | same top-1 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k, v in types:
        new, _ = statelm_logits(model, chunks, a.ctx, k, v, a.threads)
        r = compare(base, new)
        l = ref.get((k, v))
        lc = f"{l['mean_kld']:.6f} | {l['max_kld']:.4f} | {100 * l['same_top']:.2f}%" if l else "- | - | -"
        print(f"| {k} / {v} | {r['mean_kld']:.6f} | {r['max_kld']:.4f} | {100 * r['same_top']:.2f}% | "
              f"{r['max_abs_logit_diff']:.3f} | {lc} |", flush=True)


if __name__ == "__main__":
    main()
