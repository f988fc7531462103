"""Deterministic random weights for the tiny and full-size models (numpy only).

Each tensor gets its own stream: PCG64 seeded from (SEED, crc32(arch), crc32(name)), so adding or
reordering tensors never changes the others. Normals come from Box-Muller over Generator.random()
(53-bit uniform doubles), whose stream numpy keeps stable, rather than from numpy's ziggurat.

What every parameter kind gets (chosen so that no parameter sits at an identity-like init value
that would hide a bug, e.g. a missing or extra +1 on a norm):
  matrices, embeddings        N(0, 0.1^2)
  plain RMSNorm weights        1 + N(0, 0.1^2)       (llama, qwen3, lfm2, qwen35 linear_attn.norm)
  zero-centred norms           N(0, 0.1^2)           (qwen35 and every gemma3 norm: HF applies
                                                      1 + w; GGUF stores 1 + w)
  conv kernels                 N(0, 0.3^2)
  qwen35 A_log                 log U(0.1, 4)         (decay rate A = exp(A_log))
  qwen35 dt_bias               U(-3, 0)              (decays exp(g) mostly in 0.6..0.99)
"""
from __future__ import annotations

import zlib

import numpy as np

from . import spec


def _rng(arch: str, name: str, seed: int = spec.SEED) -> np.random.Generator:
    ss = np.random.SeedSequence([seed, zlib.crc32(arch.encode()), zlib.crc32(name.encode())])
    return np.random.Generator(np.random.PCG64(ss))


def normal(rng: np.random.Generator, shape, std: float, mean: float = 0.0) -> np.ndarray:
    n = int(np.prod(shape))
    m = (n + 1) // 2
    u1 = 1.0 - rng.random(m)          # (0, 1]
    u2 = rng.random(m)
    r = np.sqrt(-2.0 * np.log(u1))
    z = np.concatenate([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)])[:n]
    return (mean + std * z).reshape(shape).astype(np.float32)


def uniform(rng: np.random.Generator, shape, lo: float, hi: float) -> np.ndarray:
    return (lo + (hi - lo) * rng.random(int(np.prod(shape)))).reshape(shape).astype(np.float32)


def is_zero_centred_norm(arch: str, name: str) -> bool:
    if arch == "gemma3":
        return name.endswith("norm.weight")
    return arch == "qwen35" and name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight")


def tensor(arch: str, name: str, shape, fast: bool = False) -> np.ndarray:
    """Random value of the HF parameter `name` (HF naming, HF shape) of model family `arch`.
    fast=True (full-size models) uses numpy's own float32 normals: much quicker, not stable
    across numpy versions (fine, those files are not committed)."""
    rng = _rng(arch, name)

    def nrm(std, mean=0.0):
        if fast:
            return (mean + std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        return normal(rng, shape, std, mean)

    if name.endswith(".A_log"):
        return np.log(uniform(rng, shape, 0.1, 4.0)).astype(np.float32)
    if name.endswith(".dt_bias"):
        return uniform(rng, shape, -3.0, 0.0)
    if ("conv.conv.weight" in name) or name.endswith("conv1d.weight"):
        return nrm(0.3)
    if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
        return nrm(0.1) if is_zero_centred_norm(arch, name) else nrm(0.1, 1.0)
    if len(shape) == 1:
        raise ValueError(f"no init rule for 1-D parameter {name}")
    return nrm(0.1)
