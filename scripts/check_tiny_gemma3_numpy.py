#!/usr/bin/env python3
"""Independent check of the tiny gemma3 GGUF: a float64 numpy forward pass written from
docs/spec/gemma3.md (GGUF terms only: stored 1 + w norms, 5:1 local/global pattern derived when
the file has no pattern key, window q - W < k <= q, NeoX rope with freq_base_swa / freq_base,
GeGLU with tanh GELU, 1/sqrt(head_dim) scale) over tests/data/tiny/gemma3/gemma3-f32.gguf,
compared with the Hugging Face goldens in golden/logits.f32.

  check_tiny_gemma3_numpy.py [--root tests/data/tiny] [--tol 1e-4]

Needs numpy and gguf only (e.g. ~/.cache/statelm/venv-test). Exit 0 when every row's
max|a-b|/max|b| is within --tol.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import gguf


def field(r: gguf.GGUFReader, key: str, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_neox(x: np.ndarray, pos: np.ndarray, base: float) -> np.ndarray:
    """x: (T, n_head, hd); rotates (x_i, x_{i+hd/2}) by pos * base^(-2i/hd)."""
    hd = x.shape[-1]
    half = hd // 2
    theta = pos[:, None] * base ** (-np.arange(half, dtype=np.float64) * 2.0 / hd)  # (T, hd/2)
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(path: Path, ids: list[int]) -> np.ndarray:
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    assert arch == "gemma3", arch
    a = lambda k, d=None: field(r, f"{arch}.{k}", d)  # noqa: E731
    t = {x.name: np.asarray(x.data, dtype=np.float64) for x in r.tensors}  # numpy order = reversed ne
    d, n_layer = a("embedding_length"), a("block_count")
    n_head = a("attention.head_count")
    n_kv = a("attention.head_count_kv", n_head)
    hd = a("attention.key_length", d // n_head)
    eps = a("attention.layer_norm_rms_epsilon")
    base, base_swa = a("rope.freq_base", 10000.0), a("rope.freq_base_swa", 10000.0)
    window = a("attention.sliding_window", 0)
    pattern = a("attention.sliding_window_pattern", 6)
    softcap = a("final_logit_softcapping", 0.0)
    is_swa = [window > 0 and (pattern == 0 or il % pattern < pattern - 1) for il in range(n_layer)]

    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    emb = t["token_embd.weight"]                                     # (V, d)
    x = emb[ids] * np.sqrt(np.float64(d))                            # (T, d)
    qk, kk = np.arange(T)[:, None], np.arange(T)[None, :]
    for il in range(n_layer):
        p = f"blk.{il}."
        h = rms_norm(x, t[p + "attn_norm.weight"], eps)
        q = (h @ t[p + "attn_q.weight"].T).reshape(T, n_head, hd)
        k = (h @ t[p + "attn_k.weight"].T).reshape(T, n_kv, hd)
        v = (h @ t[p + "attn_v.weight"].T).reshape(T, n_kv, hd)
        q = rms_norm(q, t[p + "attn_q_norm.weight"], eps)
        k = rms_norm(k, t[p + "attn_k_norm.weight"], eps)
        b = base_swa if is_swa[il] else base
        q, k = rope_neox(q, pos, b), rope_neox(k, pos, b)
        visible = kk <= qk
        if is_swa[il]:
            visible &= qk - kk < window
        out = np.empty((T, n_head, hd))
        for hh in range(n_head):
            kv = hh // (n_head // n_kv)
            s = (q[:, hh, :] @ k[:, kv, :].T) / np.sqrt(hd)
            s = np.where(visible, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        o = out.reshape(T, n_head * hd) @ t[p + "attn_output.weight"].T
        x = x + rms_norm(o, t[p + "post_attention_norm.weight"], eps)
        h = rms_norm(x, t[p + "ffn_norm.weight"], eps)
        f = (gelu_tanh(h @ t[p + "ffn_gate.weight"].T) * (h @ t[p + "ffn_up.weight"].T)) @ t[p + "ffn_down.weight"].T
        x = x + rms_norm(f, t[p + "post_ffw_norm.weight"], eps)
    logits = rms_norm(x, t["output_norm.weight"], eps) @ t.get("output.weight", emb).T
    if softcap:
        logits = softcap * np.tanh(logits / softcap)
    return logits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1] / "tests" / "data" / "tiny")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    adir = args.root / "gemma3"
    man = json.loads((adir / "golden" / "manifest.json").read_text())
    ref = np.fromfile(adir / "golden" / "logits.f32", dtype="<f4").reshape(man["logits_file"]["shape"])
    got = forward(adir / "gemma3-f32.gguf", man["ids"])
    err = [float(np.max(np.abs(got[i] - ref[i])) / np.max(np.abs(ref[i]))) for i in range(len(ref))]
    worst = int(np.argmax(err))
    print(f"gemma3-f32.gguf numpy vs HF goldens: max rel err {err[worst]:.3g} (row {worst}), "
          f"argmax equal on {int(np.sum(np.argmax(got, 1) == np.argmax(ref, 1)))}/{len(ref)} rows")
    return 0 if err[worst] <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
