"""Configs of statelm's tiny test models and of the full-size random benchmark models.

Every number that defines a committed file lives here, so the generator, the golden script, the
llama.cpp check and the reproducibility check all agree. The HF config dicts are passed as keyword
arguments to the transformers config classes (LlamaConfig, Qwen3Config, Lfm2Config,
Qwen3_5TextConfig, Gemma3TextConfig); the GGUF keys are derived from the saved config.json by convert.py, the way
llama.cpp's convert_hf_to_gguf.py derives them.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY_DIR = REPO / "tests" / "data" / "tiny"
ARCHS = ("llama", "qwen3", "lfm2", "qwen35", "gemma3")

# Base seed of everything random in the tiny models (weights, golden decode ids).
SEED = 20250601

VOCAB = 320
D_MODEL = 64

# Shared vocabulary layout: these added tokens come first (ids 0..6), then the 256 byte tokens,
# then the learned merges up to VOCAB. (text, special): special=False tokens are "user-defined"
# added tokens (llama.cpp token_type 4); they are matched in raw text like the specials but are
# not CONTROL tokens.
ADDED_TOKENS = (
    ("<|endoftext|>", True),    # 0
    ("<|im_start|>", True),     # 1
    ("<|im_end|>", True),       # 2
    ("<|startoftext|>", True),  # 3
    ("<|pad|>", True),          # 4
    ("<think>", False),         # 5
    ("</think>", False),        # 6
)
TOK = {t: i for i, (t, _) in enumerate(ADDED_TOKENS)}

# Split regexes of llama.cpp's pre-tokenizers (src/llama-vocab.cpp), written in the HF
# tokenizer.json form (the llama.cpp form spells (?i:'s|...) as '[sS]|...; same language).
RE_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
             r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Chat templates (ChatML family variants).
TEMPLATE_SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TEMPLATE_QWEN3 = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}"
    "{%- endif %}"
)
TEMPLATE_QWEN35 = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}"
    "{%- else %}{{- '<think>\n' }}{%- endif %}"
    "{%- endif %}"
)
TEMPLATE_LFM2 = (
    "{{- bos_token -}}"
    "{%- set ns = namespace(system_prompt='') -%}"
    "{%- if messages[0]['role'] == 'system' -%}{%- set ns.system_prompt = messages[0]['content'] -%}"
    "{%- set messages = messages[1:] -%}{%- endif -%}"
    "{%- if ns.system_prompt -%}{{- '<|im_start|>system\n' + ns.system_prompt + '<|im_end|>\n' -}}{%- endif -%}"
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)
# Gemma 3's template (role "model" for the assistant, the system turn folded into the first user
# turn, contents trimmed) with the shared vocabulary's tokens standing in for Gemma's:
# <|startoftext|> for <bos>, <|im_start|> for <start_of_turn>, <|im_end|> for <end_of_turn>.
TEMPLATE_GEMMA3 = (
    "{{- bos_token -}}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{- '<|im_start|>' + role + '\n' + (first_user_prefix if loop.first else '') + (message['content'] | trim)"
    " + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>model\n' -}}{%- endif -%}"
)

# Tokenizer side of each family: GGUF pre-tokenizer name, HF pre-tokenizer, special tokens.
# bos/eos/pad/unk are token texts (None = absent). eos is the end-of-turn token of the chat
# template; config_eos is what config.json says (Qwen3.5 really differs).
FAMILY_TOK = {
    "llama": dict(pre="smollm", hf_pre="smollm", ignore_merges=False, bos="<|im_start|>",
                  eos="<|im_end|>", pad="<|im_end|>", unk="<|endoftext|>", add_bos=False,
                  template=TEMPLATE_SMOLLM2),
    "qwen3": dict(pre="qwen2", hf_pre=RE_QWEN2, ignore_merges=False, bos=None,
                  eos="<|im_end|>", pad="<|endoftext|>", unk=None, add_bos=False,
                  template=TEMPLATE_QWEN3),
    "lfm2": dict(pre="lfm2", hf_pre=RE_LLAMA3, ignore_merges=True, bos="<|startoftext|>",
                 eos="<|im_end|>", pad="<|pad|>", unk=None, add_bos=True,
                 template=TEMPLATE_LFM2),
    "qwen35": dict(pre="qwen35", hf_pre=RE_QWEN35, ignore_merges=False, bos=None,
                   eos="<|im_end|>", pad="<|endoftext|>", unk=None, add_bos=False,
                   template=TEMPLATE_QWEN35),
    # Real Gemma 3 GGUFs carry a SentencePiece vocabulary (tokenizer.ggml.model "llama", pre
    # "default"); the tiny model keeps the shared byte-level BPE with GPT-2's split ("gpt-2").
    "gemma3": dict(pre="gpt-2", hf_pre="gpt2", ignore_merges=False, bos="<|startoftext|>",
                   eos="<|im_end|>", pad="<|pad|>", unk=None, add_bos=True,
                   template=TEMPLATE_GEMMA3),
}

# HF model class and config of each tiny model (kwargs of the transformers config class).
HF_CLASS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM"),
    "qwen35": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
}

HF_CONFIG = {
    "llama": dict(
        vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_act="silu",
        max_position_embeddings=2048, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        bos_token_id=TOK["<|im_start|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|im_end|>"],
    ),
    "qwen3": dict(
        vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
        max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False, attention_bias=False, use_sliding_window=False,
        bos_token_id=TOK["<|endoftext|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|endoftext|>"],
    ),
    "lfm2": dict(
        # intermediate_size is LFM2's block_ff_dim: int(2*90/3) = 60, rounded up to a multiple
        # of 32 -> effective n_ff 64 (exercises the round-up).
        vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=90, block_multiple_of=32,
        block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2,
        layer_types=["conv", "conv", "full_attention", "conv"], conv_L_cache=3, conv_bias=False,
        max_position_embeddings=8192, norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True,
        bos_token_id=TOK["<|startoftext|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|pad|>"],
    ),
    "qwen35": dict(
        vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_conv_kernel_dim=4,
        max_position_embeddings=8192, rms_norm_eps=1e-6,
        # Text-only: all three M-RoPE position components equal the token index, so this is
        # plain partial NeoX rope over head_dim*0.25 = 8 dims (4 frequencies). The sections must
        # cover the 4 frequencies in llama.cpp's interleaved layout (sector s uses t/h/w for
        # s%3 = 0/1/2 while s < 3*section), else llama.cpp feeds position 0 to a frequency.
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        tie_word_embeddings=True, attention_bias=False,
        bos_token_id=None, eos_token_id=TOK["<|endoftext|>"], pad_token_id=None,
    ),
    "gemma3": dict(
        # Gemma 3 270M in miniature: 5 sliding-window layers, 1 global, then one more local
        # (layer_types = the 5:1 pattern llama.cpp derives when the GGUF has no pattern key);
        # H*hd = 128 != d; query_pre_attn_scalar = head_dim (llama.cpp's 1/sqrt(hd) agrees).
        # sliding_window 8 < the 43 golden ids, so the goldens cover positions past the window.
        vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=128, num_hidden_layers=7,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_activation="gelu_pytorch_tanh",
        layer_types=["sliding_attention"] * 5 + ["full_attention", "sliding_attention"],
        sliding_window=8, query_pre_attn_scalar=32,
        max_position_embeddings=2048, rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        final_logit_softcapping=None, attn_logit_softcapping=None, use_bidirectional_attention=False,
        tie_word_embeddings=True, attention_bias=False,
        bos_token_id=TOK["<|startoftext|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|pad|>"],
    ),
}

# generation_config.json: eos may list several stop ids.
GEN_CONFIG = {
    "llama": dict(bos_token_id=TOK["<|im_start|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|im_end|>"]),
    "qwen3": dict(bos_token_id=TOK["<|endoftext|>"], eos_token_id=[TOK["<|im_end|>"], TOK["<|endoftext|>"]],
                  pad_token_id=TOK["<|endoftext|>"]),
    "lfm2": dict(bos_token_id=TOK["<|startoftext|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|pad|>"]),
    "qwen35": dict(eos_token_id=[TOK["<|im_end|>"], TOK["<|endoftext|>"]], pad_token_id=TOK["<|endoftext|>"]),
    "gemma3": dict(bos_token_id=TOK["<|startoftext|>"], eos_token_id=[TOK["<|im_end|>"], TOK["<|endoftext|>"]],
                   pad_token_id=TOK["<|pad|>"]),
}

GGUF_ARCH = {"llama": "llama", "qwen3": "qwen3", "lfm2": "lfm2", "qwen35": "qwen35", "gemma3": "gemma3"}

# Golden sequence: N_PROMPT prompt ids (a ChatML-ish start, see golden_ids) + N_DECODE fixed
# random "decode" ids.
N_PROMPT = 11
N_DECODE = 32

# Full-size random models (--full): HF-style config dicts with the real shapes. Weights are random;
# the tokenizer is the tiny one padded with filler tokens up to vocab_size.
FULL_CONFIG = {
    "lfm2-350m": ("lfm2", dict(
        vocab_size=65536, hidden_size=1024, intermediate_size=6656, block_multiple_of=256,
        block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True, num_hidden_layers=16,
        num_attention_heads=16, num_key_value_heads=8,
        layer_types=["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)],
        conv_L_cache=3, conv_bias=False, max_position_embeddings=128000, norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True,
        bos_token_id=TOK["<|startoftext|>"], eos_token_id=TOK["<|im_end|>"], pad_token_id=TOK["<|pad|>"],
    )),
    "qwen35-0.8b": ("qwen35", dict(
        vocab_size=248320, hidden_size=1024, intermediate_size=3584, num_hidden_layers=24,
        num_attention_heads=8, num_key_value_heads=2, head_dim=256,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(24)],
        linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4, max_position_embeddings=262144,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=TOK["<|endoftext|>"], pad_token_id=None,
    )),
}
# The shapes of the two real models the tests fetch from PyPI (SmolLM2-135M-Instruct, Gemma 3 270M),
# for benchmarks on machines that cannot carry the real files: decode speed depends on the shapes
# and tensor types alone.
FULL_CONFIG["smollm2-135m"] = ("llama", dict(
    HF_CONFIG["llama"], vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
    num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
    rope_parameters={"rope_type": "default", "rope_theta": 100000.0}))
FULL_CONFIG["gemma3-270m"] = ("gemma3", dict(
    HF_CONFIG["gemma3"], vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
    num_attention_heads=4, num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256,
    layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
    sliding_window=512, max_position_embeddings=32768))
# Small draft models for speculative decoding on the full-size shapes: the same tokenizer and
# vocabulary as their targets (so a draft-model run is allowed), a few narrow layers of each kind.
FULL_CONFIG["lfm2-350m-draft"] = ("lfm2", dict(
    FULL_CONFIG["lfm2-350m"][1], hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2,
    layer_types=["full_attention" if i == 2 else "conv" for i in range(4)]))
FULL_CONFIG["qwen35-0.8b-draft"] = ("qwen35", dict(
    FULL_CONFIG["qwen35-0.8b"][1], hidden_size=256, intermediate_size=512, num_hidden_layers=4,
    num_attention_heads=2, num_key_value_heads=1, linear_num_key_heads=4, linear_num_value_heads=4,
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(4)]))

DEFAULT_FULL_OUT = Path(os.environ.get("STATELM_CACHE", Path.home() / ".cache" / "statelm")) / "models"
