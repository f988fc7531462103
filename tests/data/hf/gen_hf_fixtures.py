#!/usr/bin/env python3
"""Writes the Hugging Face folder fixtures for tests/unit/test_safetensors.c and test_hfconfig.c,
and the seed corpora for tests/fuzz/fuzz_safetensors.c and fuzz_json.c.

The safetensors files are written by the `safetensors` package (the reference writer, no torch);
tensor values follow simple formulas chosen to be exact in their dtype, so the C tests know them
by construction. BF16 data is produced with numpy by taking the top 16 bits of exactly representable
float32 values. Config JSON mirrors the public config.json files of SmolLM2-135M (llama), Qwen3-0.6B,
LFM2-350M and Qwen3.5-0.8B (nested text_config), as summarised in docs/spec/.

Run from anywhere:  ~/.cache/statelm/venv/bin/python tests/data/hf/gen_hf_fixtures.py
"""
import json
import os
import struct

import numpy as np
from safetensors import TensorSpec, serialize, serialize_file

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
CORPUS_ST = os.path.join(DATA, "corpus", "safetensors")
CORPUS_JSON = os.path.join(DATA, "corpus", "json")


def bf16(values):
    """uint16 array of bfloat16 bits for float32-exact values that bf16 also holds exactly."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    assert np.all((bits & 0xFFFF) == 0), "value not exact in bf16"
    return (bits >> 16).astype(np.uint16)


def spec(arr, dtype, shape):
    arr = np.ascontiguousarray(arr)
    return TensorSpec(dtype=dtype, shape=list(shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes), arr


def write_st(path, tensors, metadata=None):
    """tensors: {name: (numpy array of the stored bits, safetensors dtype name, shape)}."""
    keep, specs = [], {}
    for name, (arr, dtype, shape) in tensors.items():
        s, a = spec(arr, dtype, shape)
        keep.append(a)
        specs[name] = s
    serialize_file(specs, path, metadata=metadata)


def st_bytes(tensors, metadata=None):
    keep, specs = [], {}
    for name, (arr, dtype, shape) in tensors.items():
        s, a = spec(arr, dtype, shape)
        keep.append(a)
        specs[name] = s
    return serialize(specs, metadata=metadata)


def write_json(path, obj, indent=2):
    with open(path, "w") as f:
        json.dump(obj, f, indent=indent)
        f.write("\n")


# ---- tensors (formulas repeated in tests/unit/test_safetensors.c) ----

def single_tensors():
    return {
        # F32 (4, 3): v[i] = (i - 5) * 0.25
        "model.embed_tokens.weight": ((np.arange(12, dtype=np.float32) - 5) * 0.25, "float32", (4, 3)),
        # F16 (5,): IEEE 754 half bits 0x3C00 0xC100 0x3800 0x7BFF 0x0001
        "model.norm.weight": (np.array([1.0, -2.5, 0.5, 65504.0, 2.0 ** -24], dtype=np.float16), "float16", (5,)),
        # BF16 (2, 3, 2): v[i] = (i + 1) * 0.5 * (-1)^i
        "model.layers.0.mlp.up_proj.weight": (
            bf16([(i + 1) * 0.5 * (-1) ** i for i in range(12)]), "bfloat16", (2, 3, 2)),
        # F32 scalar 3.5
        "scalar": (np.array(3.5, dtype=np.float32), "float32", ()),
        # I64 (3,): -1, 0, 2^40
        "model.layers.0.positions": (np.array([-1, 0, 1 << 40], dtype=np.int64), "int64", (3,)),
        # F32 (0, 4): empty
        "empty": (np.zeros((0, 4), dtype=np.float32), "float32", (0, 4)),
    }


SHARD1 = {
    # F32 (2, 2): 1 2 3 4
    "model.embed_tokens.weight": (np.array([1, 2, 3, 4], dtype=np.float32), "float32", (2, 2)),
    # BF16 (4,): 1 -1 0.5 256
    "model.layers.0.input_layernorm.weight": (bf16([1.0, -1.0, 0.5, 256.0]), "bfloat16", (4,)),
}
SHARD2 = {
    # F16 (2, 2): 0.25 -0.25 1024 -65504
    "lm_head.weight": (np.array([0.25, -0.25, 1024.0, -65504.0], dtype=np.float16), "float16", (2, 2)),
    # F32 (2,): 0.5 1.5
    "model.norm.weight": (np.array([0.5, 1.5], dtype=np.float32), "float32", (2,)),
}

# ---- configs ----

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
    "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": True,
    "max_position_embeddings": 8192, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 9,
    "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_interleaved": False, "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.42.3", "use_cache": True, "vocab_size": 49152,
}
LLAMA_GEN = {"_from_model_config": True, "bos_token_id": 0, "eos_token_id": 0, "transformers_version": "4.42.3"}

QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

LFM2 = {
    "architectures": ["Lfm2ForCausalLM"], "block_auto_adjust_ff_dim": True, "block_dim": 1024,
    "block_ff_dim": 6656, "block_ffn_dim_multiplier": 1.0, "block_mlp_init_scale": 1.0, "block_multiple_of": 256,
    "block_norm_eps": 1e-05, "block_out_init_scale": 1.0, "block_use_swiglu": True, "block_use_xavier_init": True,
    "bos_token_id": 1, "conv_L_cache": 3, "conv_bias": False, "conv_dim": 1024, "conv_dim_out": 1024,
    "conv_use_xavier_init": True, "eos_token_id": 7, "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 6656,
    "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv", "conv",
                    "full_attention", "conv", "full_attention", "conv", "full_attention", "conv", "full_attention",
                    "conv"],
    "max_position_embeddings": 128000, "model_type": "lfm2", "norm_eps": 1e-05, "num_attention_heads": 16,
    "num_heads": 16, "num_hidden_layers": 16, "num_key_value_heads": 8, "pad_token_id": 0, "rope_theta": 1000000.0,
    "theta": 1000000.0, "tie_embedding": True, "torch_dtype": "bfloat16", "transformers_version": "4.54.0.dev0",
    "use_cache": True, "use_pos_enc": True, "vocab_size": 65536,
}

QWEN35_LAYERS = (["linear_attention"] * 3 + ["full_attention"]) * 6
QWEN35 = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "image_token_id": 248056,
    "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "bos_token_id": None,
        "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256,
        "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3584,
        "layer_types": QWEN35_LAYERS, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1, "num_attention_heads": 8, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                            "rope_theta": 10000000, "rope_type": "default"},
        "tie_word_embeddings": True, "use_cache": True, "vocab_size": 248320,
    },
    "tie_word_embeddings": True,
    "transformers_version": "4.57.0.dev0",
    "video_token_id": 248057,
    "vision_config": {"deepstack_visual_indexes": [], "depth": 12, "hidden_act": "gelu_pytorch_tanh",
                      "hidden_size": 768, "in_channels": 3, "intermediate_size": 3072, "model_type": "qwen3_5",
                      "num_heads": 12, "num_position_embeddings": 2304, "out_hidden_size": 1024, "patch_size": 16,
                      "spatial_merge_size": 2, "temporal_patch_size": 2},
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053,
}
QWEN35_GEN = {"bos_token_id": 248044, "do_sample": True, "eos_token_id": [248046, 248044], "pad_token_id": 248044,
              "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.57.0.dev0"}
QWEN35_TOK = {
    "add_bos_token": False, "add_prefix_space": False,
    "added_tokens_decoder": {
        "248044": {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False,
                   "single_word": False, "special": True},
        "248045": {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False,
                   "single_word": False, "special": True},
        "248046": {"content": "<|im_end|>", "lstrip": False, "normalized": False, "rstrip": False,
                   "single_word": False, "special": True},
    },
    "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
    "model_max_length": 262144, "pad_token": "<|endoftext|>", "split_special_tokens": False,
    "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
}
TINY_TOKENIZER = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
                  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}


def raw_st(header, data=b"", hlen=None):
    """Hand-built safetensors bytes for invalid seeds: header is a str, hlen overrides its length."""
    h = header.encode()
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + data


def main():
    single = os.path.join(HERE, "single")
    sharded = os.path.join(HERE, "sharded")
    os.makedirs(single, exist_ok=True)
    os.makedirs(sharded, exist_ok=True)
    os.makedirs(CORPUS_ST, exist_ok=True)
    os.makedirs(CORPUS_JSON, exist_ok=True)

    write_st(os.path.join(single, "model.safetensors"), single_tensors(), metadata={"format": "pt"})
    write_json(os.path.join(single, "config.json"), LLAMA)
    write_json(os.path.join(single, "generation_config.json"), LLAMA_GEN)

    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map, total = {}, 0
    for name, tensors in zip(names, [SHARD1, SHARD2]):
        write_st(os.path.join(sharded, name), tensors, metadata={"format": "pt"})
        for k, (arr, _, _) in tensors.items():
            weight_map[k] = name
            total += np.ascontiguousarray(arr).nbytes
    write_json(os.path.join(sharded, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    write_json(os.path.join(sharded, "config.json"), QWEN35)
    write_json(os.path.join(sharded, "generation_config.json"), QWEN35_GEN)
    write_json(os.path.join(sharded, "tokenizer_config.json"), QWEN35_TOK)
    write_json(os.path.join(sharded, "tokenizer.json"), TINY_TOKENIZER)

    # ---- safetensors seeds ----
    seeds = {
        "single.safetensors": open(os.path.join(single, "model.safetensors"), "rb").read(),
        "shard1.safetensors": open(os.path.join(sharded, names[0]), "rb").read(),
        "shard2.safetensors": open(os.path.join(sharded, names[1]), "rb").read(),
        "all_dtypes.safetensors": st_bytes({
            "f64": (np.array([1.5, -2.0], dtype=np.float64), "float64", (2,)),
            "i8": (np.array([-1, 2, 3], dtype=np.int8), "int8", (3,)),
            "i16": (np.array([[1, 2], [3, 4]], dtype=np.int16), "int16", (2, 2)),
            "i32": (np.arange(24, dtype=np.int32), "int32", (2, 3, 2, 2)),
        }, metadata={"format": "np"}),
        "bool.safetensors": st_bytes({"mask": (np.array([1, 0], dtype=np.uint8), "bool", (2,))}),
        "f8.safetensors": st_bytes({"w": (np.array([1, 2], dtype=np.uint8), "float8_e4m3fn", (2,))}),
        "short.bin": b"\x10\x00\x00",
        "hlen_huge.bin": struct.pack("<Q", 1 << 63) + b"{}",
        "hlen_past.bin": raw_st("{}", hlen=100),
        "not_json.bin": raw_st("{not json"),
        "array.bin": raw_st("[1, 2]"),
        "entry_not_object.bin": raw_st('{"t": 5}'),
        "unknown_dtype.bin": raw_st('{"t":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
        "five_dims.bin": raw_st('{"t":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}}', b"\0" * 4),
        "overflow.bin": raw_st('{"t":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,4]}}'),
        "reversed.bin": raw_st('{"t":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}', b"\0" * 4),
        "overlap.bin": raw_st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                              '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8),
        "dup.bin": raw_st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                          '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8),
        "metadata_bad.bin": raw_st('{"__metadata__":{"k":1}}'),
        "negative_dim.bin": raw_st('{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\0" * 4),
        "float_offsets.bin": raw_st('{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}}', b"\0" * 8),
    }
    for name, data in seeds.items():
        with open(os.path.join(CORPUS_ST, name), "wb") as f:
            f.write(data)

    # ---- JSON seeds ----
    for name, obj in [("llama.json", LLAMA), ("qwen3.json", QWEN3), ("lfm2.json", LFM2), ("qwen3_5.json", QWEN35),
                      ("generation_config.json", QWEN35_GEN), ("tokenizer_config.json", QWEN35_TOK),
                      ("index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})]:
        write_json(os.path.join(CORPUS_JSON, name), obj)
    q = json.dumps(QWEN35)
    bad = {
        "truncated.json": q[: len(q) // 2].encode(),
        "array.json": b"[1, 2, {\"a\": 3}]",
        "trailing.json": b"{\"a\": 1} {\"b\": 2}",
        "dupkey.json": b"{\"text_config\": {\"hidden_size\": 1, \"hidden_size\": 2}}",
        "nul.json": b"{\"a\": \"x\x00y\"}",
        "bad_utf8.json": b"{\"a\": \"\xc3\x28\"}",
        "deep.json": b"[" * 1500 + b"]" * 1500,
        "numbers.json": b"{\"hidden_size\": 1e999, \"vocab_size\": 9223372036854775807, \"rms_norm_eps\": -0,"
                        b" \"num_hidden_layers\": 1.5, \"rope_theta\": -9223372036854775808}",
        "text_config_array.json": b"{\"text_config\": [1], \"model_type\": 3}",
        "wrong_types.json": b"{\"hidden_size\": \"1024\", \"tie_word_embeddings\": 1, \"model_type\": null,"
                            b" \"layer_types\": {}, \"rope_parameters\": []}",
        "empty.json": b"",
    }
    for name, data in bad.items():
        with open(os.path.join(CORPUS_JSON, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
