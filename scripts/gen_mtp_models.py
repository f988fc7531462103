#!/usr/bin/env python3
"""Random-weight Qwen3.5 checkpoints that carry a multi-token-prediction (MTP) block, as the real
Qwen3.5 checkpoints do (mtp.fc, mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.norm and one
full-attention decoder layer mtp.layers.0.*; transformers' Qwen3_5ForCausalLM does not model them,
so they are added to the saved folder here).

  gen_mtp_models.py tiny     tests/data/tiny/qwen35/hf-mtp: the tiny qwen35 folder (tests/data/tiny/
                             qwen35/hf, its weights unchanged) plus an MTP block
  gen_mtp_models.py small DIR  an HF folder at Qwen3.5-0.8B's head shapes (d 1024, 8 q heads of
                             256, 2 kv heads, DeltaNet 16 heads of 128), 4 layers, vocab 2048,
                             plus an MTP block (not committed; for the llama.cpp comparison)
  gen_mtp_models.py full DIR   the same at Qwen3.5-0.8B's size: 24 layers, vocab 248320, tied
                             embeddings (3.4 GB of f32; for the cost measurements of bench/README.md)

Weights: scripts/tinylm/weights.py's per-tensor seeded streams (HF names, HF shapes; the MTP norms
are zero-centred like every qwen35 norm). numpy + safetensors only."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinylm import weights  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny" / "qwen35"


def mtp_shapes(cfg: dict) -> dict:
    d, ff = cfg["hidden_size"], cfg["intermediate_size"]
    hd, h, hkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    L = "mtp.layers.0."
    return {
        "mtp.fc.weight": (d, 2 * d),
        "mtp.pre_fc_norm_embedding.weight": (d,),
        "mtp.pre_fc_norm_hidden.weight": (d,),
        "mtp.norm.weight": (d,),
        L + "input_layernorm.weight": (d,),
        L + "post_attention_layernorm.weight": (d,),
        L + "self_attn.q_proj.weight": (2 * h * hd, d),
        L + "self_attn.k_proj.weight": (hkv * hd, d),
        L + "self_attn.v_proj.weight": (hkv * hd, d),
        L + "self_attn.o_proj.weight": (d, h * hd),
        L + "self_attn.q_norm.weight": (hd,),
        L + "self_attn.k_norm.weight": (hd,),
        L + "mlp.gate_proj.weight": (ff, d),
        L + "mlp.up_proj.weight": (ff, d),
        L + "mlp.down_proj.weight": (d, ff),
    }


def add_mtp(folder: Path, fast: bool = False) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    st = folder / "model.safetensors"
    sd = load_file(str(st))
    for name, shape in mtp_shapes(cfg).items():
        if name.startswith("mtp.pre_fc_norm_"):  # zero-centred norms whose names do not end in norm.weight
            sd[name] = weights.normal(weights._rng("qwen35", name), shape, 0.1)
        else:
            sd[name] = weights.tensor("qwen35", name, shape, fast=fast)
    save_file(sd, str(st), metadata={"format": "pt"})
    cfg["mtp_num_hidden_layers"] = 1
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def tiny() -> None:
    dst = TINY / "hf-mtp"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(TINY / "hf", dst)
    add_mtp(dst)
    print(dst.relative_to(ROOT))


def small(out: Path, n_layer: int = 4, vocab: int = 2048) -> None:
    """Qwen3.5-0.8B's head shapes at n_layer layers and a vocab-token vocabulary (the tiny
    tokenizer's 320 tokens, padded), every tensor written here."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(TINY / "hf", out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update({"hidden_size": 1024, "intermediate_size": 3584, "head_dim": 256, "num_attention_heads": 8,
                "num_key_value_heads": 2, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                "linear_num_key_heads": 16, "linear_num_value_heads": 16, "vocab_size": vocab,
                "num_hidden_layers": n_layer,
                "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n_layer)],
                "rope_parameters": {**cfg["rope_parameters"], "mrope_section": [11, 11, 10]}})
    d, ff, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, h, hkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dk, dv, Hk, Hv = 128, 128, 16, 16
    K = cfg["linear_conv_kernel_dim"]
    shapes = {"model.embed_tokens.weight": (V, d), "model.norm.weight": (d,)}
    for il, kind in enumerate(cfg["layer_types"]):
        p = f"model.layers.{il}."
        shapes.update({p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
                       p + "mlp.gate_proj.weight": (ff, d), p + "mlp.up_proj.weight": (ff, d),
                       p + "mlp.down_proj.weight": (d, ff)})
        if kind == "full_attention":
            shapes.update({p + "self_attn.q_proj.weight": (2 * h * hd, d), p + "self_attn.k_proj.weight": (hkv * hd, d),
                           p + "self_attn.v_proj.weight": (hkv * hd, d), p + "self_attn.o_proj.weight": (d, h * hd),
                           p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        else:
            conv = 2 * Hk * dk + Hv * dv
            shapes.update({p + "linear_attn.in_proj_qkv.weight": (conv, d),
                           p + "linear_attn.in_proj_z.weight": (Hv * dv, d),
                           p + "linear_attn.in_proj_b.weight": (Hv, d), p + "linear_attn.in_proj_a.weight": (Hv, d),
                           p + "linear_attn.conv1d.weight": (conv, 1, K), p + "linear_attn.dt_bias": (Hv,),
                           p + "linear_attn.A_log": (Hv,), p + "linear_attn.norm.weight": (dv,),
                           p + "linear_attn.out_proj.weight": (d, Hv * dv)})
    sd = {n: weights.tensor("qwen35", n, s, fast=True) for n, s in shapes.items()}
    save_file(sd, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    add_mtp(out, fast=True)
    print(out)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "tiny":
        tiny()
    elif len(sys.argv) == 3 and sys.argv[1] == "small":
        small(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "full":
        small(Path(sys.argv[2]), 24, 248320)
    else:
        sys.exit(__doc__)
