"""HF checkpoint -> GGUF, written the way llama.cpp's convert_hf_to_gguf.py writes it (numpy only).

Mirrors, per architecture (classes LlamaModel, Qwen3Model, LFM2Model, Qwen3_5TextModel, Gemma3Model
and their bases TextModel / Qwen3NextModel / _LinearAttentionVReorderBase / _Qwen35MRopeMixin):
  * tensor names through gguf-py's TensorNameMap (the converter's map_tensor_name);
  * llama: q_proj/k_proj rows permuted per head ([n_head, 2, hd/2] -> [n_head, hd/2, 2]) so the
    GGUF uses NORM (adjacent-pair) rope;
  * lfm2: conv.conv [d,1,L] squeezed to [d,L]; head_count_kv as a per-layer array (0 = conv
    layer); feed_forward_length = effective n_ff after block_auto_adjust_ff_dim;
  * qwen35: every `*norm.weight` except linear_attn.norm gets +1 (zero-centred HF norms);
    A_log -> ssm_a = -exp(A_log); dt_bias -> ssm_dt.bias; conv1d [C,1,K] squeezed; when
    linear_num_key_heads != linear_num_value_heads the v-head-indexed tensors are reordered from
    grouped (v-head j uses k-head j // r) to tiled order (v-head j uses k-head j % Hk);
  * gemma3 (conversion/gemma.py Gemma3Model): every `*norm.weight` gets +1 (q_norm and k_norm
    included); rope.freq_base from rope_parameters.full_attention, rope.freq_base_swa from
    .sliding_attention (TextModel); attention.sliding_window unless sliding_window_pattern == 1;
    final_logit_softcapping only when set; no sliding_window_pattern key (llama.cpp derives 5:1);
    token_embd cut to len(tokenizer.json vocab) + len(added_tokens) rows (a no-op here);
  * tensor types for a quantised file: 1-D tensors, `*_norm.weight`, ssm_conv1d, shortconv.conv
    and names not ending in ".weight" (ssm_a, ssm_dt.bias) stay F32; everything else, including
    token_embd, gets the requested type (F16 fallback if a row is not a whole number of blocks);
  * tokenizer keys through gguf-py's SpecialVocab on the HF folder (what the converter uses).
Tensors are streamed: a writer pass over shapes, then one over data, so the full-size models
never hold more than one f32 tensor in memory.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

import gguf

from . import spec
from .tokenizer import gguf_vocab

FTYPES = {
    "f32": (gguf.LlamaFileType.ALL_F32, gguf.GGMLQuantizationType.F32),
    "f16": (gguf.LlamaFileType.MOSTLY_F16, gguf.GGMLQuantizationType.F16),
    "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, gguf.GGMLQuantizationType.Q8_0),
    "q4_0": (gguf.LlamaFileType.MOSTLY_Q4_0, gguf.GGMLQuantizationType.Q4_0),
}

_MODEL_ARCH = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen3": gguf.MODEL_ARCH.QWEN3,
               "lfm2": gguf.MODEL_ARCH.LFM2, "qwen35": gguf.MODEL_ARCH.QWEN35,
               "gemma3": gguf.MODEL_ARCH.GEMMA3}


def lfm2_effective_ff(hp: dict) -> int:
    ff = hp.get("block_ff_dim", hp["intermediate_size"])
    if hp["block_auto_adjust_ff_dim"]:
        ff = int(2 * ff / 3)
        if hp.get("block_ffn_dim_multiplier") is not None:
            ff = int(hp["block_ffn_dim_multiplier"] * ff)
        m = hp["block_multiple_of"]
        ff = m * ((ff + m - 1) // m)
    return ff


# --------------------------------------------------------------------------------------------
# metadata

def add_model_keys(w: gguf.GGUFWriter, arch: str, hp: dict, ftype: int) -> None:
    """Architecture keys (TextModel.set_gguf_parameters + the per-arch overrides)."""
    rp = hp.get("rope_parameters") or {}
    if arch == "gemma3":
        rp_swa = rp.get("sliding_attention") or {}
        rp = rp.get("full_attention", rp)
    w.add_block_count(hp["num_hidden_layers"])
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    if arch == "lfm2":
        w.add_feed_forward_length(lfm2_effective_ff(hp))
    else:
        w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    if arch == "lfm2":
        w.add_head_count_kv([hp["num_key_value_heads"] if t != "conv" else 0 for t in hp["layer_types"]])
    else:
        w.add_head_count_kv(hp["num_key_value_heads"])
    if "mrope_section" in rp:
        sec = list(rp["mrope_section"])
        sec += [0] * (4 - len(sec))
        w.add_rope_dimension_sections(sec[:4])
    w.add_rope_freq_base(rp["rope_theta"])
    if arch == "gemma3" and rp_swa.get("rope_theta") is not None:
        w.add_rope_freq_base_swa(rp_swa["rope_theta"])
    w.add_layer_norm_rms_eps(hp["norm_eps"] if arch == "lfm2" else hp["rms_norm_eps"])
    if hp.get("head_dim") is not None:
        w.add_key_length(hp["head_dim"])
        w.add_value_length(hp["head_dim"])
    w.add_file_type(int(ftype))
    if arch == "llama":
        w.add_vocab_size(hp["vocab_size"])
        w.add_rope_dimension_count(hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"])
    elif arch == "lfm2":
        w.add_vocab_size(hp["vocab_size"])
        w.add_shortconv_l_cache(hp["conv_L_cache"])
    elif arch == "qwen35":
        w.add_ssm_conv_kernel(hp["linear_conv_kernel_dim"])
        w.add_ssm_state_size(hp["linear_key_head_dim"])
        w.add_ssm_group_count(hp["linear_num_key_heads"])
        w.add_ssm_time_step_rank(hp["linear_num_value_heads"])
        w.add_ssm_inner_size(hp["linear_value_head_dim"] * hp["linear_num_value_heads"])
        w.add_full_attention_interval(hp.get("full_attention_interval", 4))
        hd = hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"]
        w.add_rope_dimension_count(int(hd * rp.get("partial_rotary_factor", hp.get("partial_rotary_factor", 0.25))))
    elif arch == "gemma3":
        if hp.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(hp["final_logit_softcapping"])
        if hp.get("sliding_window_pattern") != 1:
            w.add_sliding_window(hp["sliding_window"])


def add_tokenizer_keys(w: gguf.GGUFWriter, arch: str, hf_dir: Path, n_vocab: int) -> None:
    """tokenizer.* keys as _set_vocab_gpt2 writes them; pads to n_vocab with [PAD{i}] (UNUSED)."""
    tokens, types, _ = gguf_vocab((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    for i in range(len(tokens), n_vocab):
        tokens.append(f"[PAD{i}]")
        types.append(int(gguf.TokenType.UNUSED))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(spec.FAMILY_TOK[arch]["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    sv = gguf.SpecialVocab(hf_dir, load_merges=True, n_vocab=n_vocab)
    sv.add_to_gguf(w, quiet=True)


# --------------------------------------------------------------------------------------------
# tensors

def _permute_llama(w: np.ndarray, n_head: int) -> np.ndarray:
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def _reorder_v_heads(t: np.ndarray, dim: int, n_k: int, r: int, head_dim: int) -> np.ndarray:
    shape = list(t.shape)
    dim %= len(shape)
    new_shape = shape[:dim] + [n_k, r, head_dim] + shape[dim + 1:]
    t = t.reshape(new_shape)
    perm = list(range(len(new_shape)))
    perm[dim], perm[dim + 1] = perm[dim + 1], perm[dim]
    return np.ascontiguousarray(t.transpose(perm)).reshape(shape)


def _qwen35_vreorder(hp: dict, name: str, t: np.ndarray) -> np.ndarray:
    n_k, n_v = hp["linear_num_key_heads"], hp["linear_num_value_heads"]
    if n_k == n_v or "linear_attn." not in name:
        return t
    dk, dv, r = hp["linear_key_head_dim"], hp["linear_value_head_dim"], n_v // n_k
    if ".in_proj_qkv." in name:
        qk = 2 * dk * n_k
        return np.concatenate([t[:qk], _reorder_v_heads(t[qk:], 0, n_k, r, dv)], axis=0)
    if ".in_proj_z." in name:
        return _reorder_v_heads(t, 0, n_k, r, dv)
    if ".in_proj_b." in name or ".in_proj_a." in name:
        return _reorder_v_heads(t, 0, n_k, r, 1)
    if name.endswith(".A_log") or name.endswith(".dt_bias"):
        return _reorder_v_heads(t[:, None], 0, n_k, r, 1)[:, 0]
    if ".conv1d." in name:
        t = t.reshape(t.shape[0], -1)
        qk = 2 * dk * n_k
        return np.concatenate([t[:qk], _reorder_v_heads(t[qk:], 0, n_k, r, dv)], axis=0)
    if ".out_proj." in name:
        return _reorder_v_heads(t, 1, n_k, r, dv)
    return t


def hf_to_gguf_tensor(arch: str, hp: dict, name: str, t: np.ndarray, tmap) -> tuple[str, np.ndarray]:
    """One HF tensor (HF name and shape, float32) -> (GGUF name, array in numpy order)."""
    t = np.asarray(t, dtype=np.float32)
    if arch == "llama":
        if name.endswith("q_proj.weight"):
            t = _permute_llama(t, hp["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            t = _permute_llama(t, hp["num_key_value_heads"])
    elif arch == "lfm2":
        if "conv.conv" in name:
            t = t.reshape(t.shape[0], t.shape[2])
    elif arch == "qwen35":
        t = _qwen35_vreorder(hp, name, t)
        if name.endswith(".A_log"):
            t = -np.exp(t)
        elif name.endswith(".dt_bias"):
            name = name[: -len(".dt_bias")] + ".dt_proj.bias"
        elif "conv1d" in name:
            t = t.reshape(t.shape[0], -1)
        elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            t = t + np.float32(1.0)
    elif arch == "gemma3":
        if name.endswith("norm.weight"):
            t = t + np.float32(1.0)
    new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
    if new is None:
        raise ValueError(f"cannot map tensor {name!r}")
    return new, np.ascontiguousarray(t, dtype=np.float32)


def gguf_qtype(gname: str, shape: tuple[int, ...], ftype_name: str) -> gguf.GGMLQuantizationType:
    want = FTYPES[ftype_name][1]
    if want == gguf.GGMLQuantizationType.F32:
        return want
    if len(shape) <= 1 or gname.endswith("_norm.weight"):
        return gguf.GGMLQuantizationType.F32
    if re.search(r"\.(ssm_conv1d|shortconv\.conv)\.weight$", gname) or gname[-7:] != ".weight":
        return gguf.GGMLQuantizationType.F32
    block = gguf.GGML_QUANT_SIZES[want][0]
    if shape[-1] % block != 0:
        return gguf.GGMLQuantizationType.F16
    return want


def _nbytes(shape, qt) -> int:
    block, size = gguf.GGML_QUANT_SIZES[qt]
    n = int(np.prod(shape))
    return n // block * size


def _encode(t: np.ndarray, qt) -> np.ndarray:
    return gguf.quants.quantize(t, qt)


def tensor_order(names: Iterable[str]) -> list[str]:
    """Canonical order: embeddings, blocks by index (names sorted inside a block), the rest."""
    def key(n):
        m = re.search(r"\.layers\.(\d+)\.", n)
        if "embed_tokens" in n:
            return (0, 0, n)
        if m:
            return (1, int(m.group(1)), n)
        return (2, 0, n)
    return sorted(names, key=key)


def write_gguf(path: Path, arch: str, hp: dict, hf_dir: Path, ftype_name: str,
               shapes: dict[str, tuple[int, ...]], get: Callable[[str], np.ndarray],
               name: str | None = None) -> list[tuple[str, str, tuple[int, ...]]]:
    """Writes one GGUF. shapes: HF name -> HF shape; get(name) -> the HF tensor (float32).
    hf_dir holds config.json, tokenizer.json, tokenizer_config.json (for SpecialVocab).
    Returns [(gguf name, type name, ggml ne)]."""
    ftype, _ = FTYPES[ftype_name]
    n_blocks = hp["num_hidden_layers"]
    tmap = gguf.get_tensor_name_map(_MODEL_ARCH[arch], n_blocks)
    order = tensor_order(shapes)

    w = gguf.GGUFWriter(path, spec.GGUF_ARCH[arch])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name or f"statelm tiny {arch}")
    add_model_keys(w, arch, hp, ftype)
    add_tokenizer_keys(w, arch, hf_dir, hp["vocab_size"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    # pass 1: names, shapes and types only; pass 2 streams the data
    infos = []
    for hn in order:
        shp = tuple(shapes[hn])
        gname, out_shape = _planned(arch, hp, hn, shp, tmap)
        qt = gguf_qtype(gname, out_shape, ftype_name)
        dtype = np.float32 if qt == gguf.GGMLQuantizationType.F32 else (
            np.float16 if qt == gguf.GGMLQuantizationType.F16 else np.uint8)
        if dtype == np.uint8:
            raw_shape = gguf.quants.quant_shape_to_byte_shape(out_shape, qt)
        else:
            raw_shape = out_shape
        w.add_tensor_info(gname, raw_shape, np.dtype(dtype), _nbytes(out_shape, qt),
                          raw_dtype=qt if dtype == np.uint8 else None)
        infos.append((hn, gname, out_shape, qt))

    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    out = []
    for hn, gname, out_shape, qt in infos:
        g2, t = hf_to_gguf_tensor(arch, hp, hn, get(hn), tmap)
        assert g2 == gname and t.shape == tuple(out_shape), (hn, g2, t.shape, out_shape)
        w.write_tensor_data(_encode(t, qt))
        out.append((gname, qt.name, tuple(reversed(out_shape))))
    w.close()
    return out


def _planned(arch: str, hp: dict, hn: str, shp: tuple[int, ...], tmap) -> tuple[str, tuple[int, ...]]:
    """GGUF name and numpy-order shape of HF tensor hn without touching its data."""
    out = shp
    name = hn
    if (arch == "lfm2" and "conv.conv" in hn) or (arch == "qwen35" and "conv1d" in hn):
        out = (shp[0], shp[-1])
    if arch == "qwen35" and hn.endswith(".dt_bias"):
        name = hn[: -len(".dt_bias")] + ".dt_proj.bias"
    g = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
    if g is None:
        raise ValueError(f"cannot map tensor {hn!r}")
    return g, tuple(out)


def convert_hf_dir(hf_dir: Path, arch: str, out_path: Path, ftype_name: str, name: str | None = None):
    """Converts a tiny HF folder (config.json + model.safetensors + tokenizer files)."""
    from safetensors.numpy import load_file
    hp = json.loads((hf_dir / "config.json").read_text())
    tensors = load_file(str(hf_dir / "model.safetensors"))
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    return write_gguf(out_path, arch, hp, hf_dir, ftype_name, shapes, lambda k: tensors[k], name=name)
