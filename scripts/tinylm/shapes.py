"""HF parameter names and shapes of each family, computed from an HF config dict (no torch).

Used by the full-size generator (which never builds a torch model) and cross-checked against the
transformers state dict when the tiny models are generated.
"""
from __future__ import annotations

from .convert import lfm2_effective_ff


def hf_shapes(arch: str, hp: dict) -> dict[str, tuple[int, ...]]:
    d, V, L = hp["hidden_size"], hp["vocab_size"], hp["num_hidden_layers"]
    H, Hkv = hp["num_attention_heads"], hp["num_key_value_heads"]
    hd = hp.get("head_dim") or d // H
    s: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (V, d)}
    if not hp.get("tie_word_embeddings", True):
        s["lm_head.weight"] = (V, d)
    if arch in ("llama", "qwen3"):
        ff = hp["intermediate_size"]
        s["model.norm.weight"] = (d,)
        for i in range(L):
            p = f"model.layers.{i}."
            s[p + "input_layernorm.weight"] = (d,)
            s[p + "post_attention_layernorm.weight"] = (d,)
            s[p + "self_attn.q_proj.weight"] = (H * hd, d)
            s[p + "self_attn.k_proj.weight"] = (Hkv * hd, d)
            s[p + "self_attn.v_proj.weight"] = (Hkv * hd, d)
            s[p + "self_attn.o_proj.weight"] = (d, H * hd)
            if arch == "qwen3":
                s[p + "self_attn.q_norm.weight"] = (hd,)
                s[p + "self_attn.k_norm.weight"] = (hd,)
            s[p + "mlp.gate_proj.weight"] = (ff, d)
            s[p + "mlp.up_proj.weight"] = (ff, d)
            s[p + "mlp.down_proj.weight"] = (d, ff)
    elif arch == "lfm2":
        ff = lfm2_effective_ff(hp)
        K = hp["conv_L_cache"]
        s["model.embedding_norm.weight"] = (d,)
        for i, t in enumerate(hp["layer_types"]):
            p = f"model.layers.{i}."
            s[p + "operator_norm.weight"] = (d,)
            s[p + "ffn_norm.weight"] = (d,)
            s[p + "feed_forward.w1.weight"] = (ff, d)
            s[p + "feed_forward.w3.weight"] = (ff, d)
            s[p + "feed_forward.w2.weight"] = (d, ff)
            if t == "conv":
                s[p + "conv.in_proj.weight"] = (3 * d, d)
                s[p + "conv.conv.weight"] = (d, 1, K)
                s[p + "conv.out_proj.weight"] = (d, d)
            else:
                s[p + "self_attn.q_proj.weight"] = (H * hd, d)
                s[p + "self_attn.k_proj.weight"] = (Hkv * hd, d)
                s[p + "self_attn.v_proj.weight"] = (Hkv * hd, d)
                s[p + "self_attn.out_proj.weight"] = (d, H * hd)
                s[p + "self_attn.q_layernorm.weight"] = (hd,)
                s[p + "self_attn.k_layernorm.weight"] = (hd,)
    elif arch == "qwen35":
        ff = hp["intermediate_size"]
        Hk, Hv = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
        dk, dv, K = hp["linear_key_head_dim"], hp["linear_value_head_dim"], hp["linear_conv_kernel_dim"]
        conv_dim = 2 * Hk * dk + Hv * dv
        s["model.norm.weight"] = (d,)
        for i, t in enumerate(hp["layer_types"]):
            p = f"model.layers.{i}."
            s[p + "input_layernorm.weight"] = (d,)
            s[p + "post_attention_layernorm.weight"] = (d,)
            s[p + "mlp.gate_proj.weight"] = (ff, d)
            s[p + "mlp.up_proj.weight"] = (ff, d)
            s[p + "mlp.down_proj.weight"] = (d, ff)
            if t == "linear_attention":
                q = p + "linear_attn."
                s[q + "in_proj_qkv.weight"] = (conv_dim, d)
                s[q + "in_proj_z.weight"] = (Hv * dv, d)
                s[q + "in_proj_b.weight"] = (Hv, d)
                s[q + "in_proj_a.weight"] = (Hv, d)
                s[q + "conv1d.weight"] = (conv_dim, 1, K)
                s[q + "A_log"] = (Hv,)
                s[q + "dt_bias"] = (Hv,)
                s[q + "norm.weight"] = (dv,)
                s[q + "out_proj.weight"] = (d, Hv * dv)
            else:
                s[p + "self_attn.q_proj.weight"] = (2 * H * hd, d)
                s[p + "self_attn.k_proj.weight"] = (Hkv * hd, d)
                s[p + "self_attn.v_proj.weight"] = (Hkv * hd, d)
                s[p + "self_attn.o_proj.weight"] = (d, H * hd)
                s[p + "self_attn.q_norm.weight"] = (hd,)
                s[p + "self_attn.k_norm.weight"] = (hd,)
    elif arch == "gemma3":
        ff = hp["intermediate_size"]
        s["model.norm.weight"] = (d,)
        for i in range(L):
            p = f"model.layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm"):
                s[p + n + ".weight"] = (d,)
            s[p + "self_attn.q_proj.weight"] = (H * hd, d)
            s[p + "self_attn.k_proj.weight"] = (Hkv * hd, d)
            s[p + "self_attn.v_proj.weight"] = (Hkv * hd, d)
            s[p + "self_attn.o_proj.weight"] = (d, H * hd)
            s[p + "self_attn.q_norm.weight"] = (hd,)
            s[p + "self_attn.k_norm.weight"] = (hd,)
            s[p + "mlp.gate_proj.weight"] = (ff, d)
            s[p + "mlp.up_proj.weight"] = (ff, d)
            s[p + "mlp.down_proj.weight"] = (d, ff)
    else:
        raise ValueError(arch)
    return s
