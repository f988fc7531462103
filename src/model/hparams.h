/* hparams.h — hyper-parameters of a loaded model exactly as the program builders see them, after
 * defaults, format-specific conventions (GGUF vs Hugging Face) and derivations (n_ff from tensor
 * shapes, layer kinds from head_count_kv / layer_types). Filled by model/arch_*.c; read by the
 * builders and by `statelm info`. Specs: docs/spec/llama.md, docs/spec/lfm2.md, docs/spec/qwen35.md. */
#ifndef SLM_MODEL_HPARAMS_H
#define SLM_MODEL_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "statelm.h"

#define MDL_MAX_LAYERS 256

typedef enum mdl_rope_style {
    MDL_ROPE_NORM = 0, /* adjacent pairs (x_2i, x_2i+1): arch llama in GGUF (q/k rows permuted) */
    MDL_ROPE_NEOX = 1  /* rotate-half pairs (x_i, x_i+n_rot/2) */
} mdl_rope_style;

typedef struct mdl_hparams {
    int32_t n_layer;      /* layers run (MTP blocks excluded) */
    int32_t n_nextn;      /* qwen35: MTP blocks stored after them, blk.{n_layer + i} (llama.cpp's nextn layout) */
    int32_t n_embd;       /* d */
    int32_t n_head;       /* H: query heads of attention layers */
    int32_t n_head_kv;    /* H_kv of attention layers */
    int32_t head_dim;     /* per-head key/query size */
    int32_t head_dim_v;   /* per-head value size */
    int32_t n_ff;         /* FFN inner size, from the ffn_gate tensor shape */
    int32_t n_vocab;      /* rows of token_embd */
    int32_t n_ctx_train;
    int32_t pooling;      /* GGUF {arch}.pooling_type as stored (slm_pooling values), SLM_POOLING_MODEL if absent */
    float rms_eps;
    float rope_base;
    int32_t n_rot;        /* rotary dims per head (partial rope when < head_dim) */
    mdl_rope_style rope_style;
    bool tied_embeddings; /* no output.weight: logits use token_embd */
    bool qk_norm;         /* per-head RMSNorm of q and k before rope (qwen3, lfm2, qwen35) */
    bool attn_output_gate;/* qwen35: q_proj carries a per-head sigmoid gate */
    bool norm_plus_one;   /* HF qwen35: RMSNorm weights are zero-centred, applied as (1 + w) */
    slm_layer_kind layer_kind[MDL_MAX_LAYERS];
    /* lfm2 short convolution */
    int32_t conv_kernel;  /* L_cache (3); state keeps conv_kernel - 1 columns */
    /* qwen35 gated DeltaNet */
    int32_t ssm_conv_kernel;  /* K (4) */
    int32_t ssm_n_k_heads;    /* Hk */
    int32_t ssm_n_v_heads;    /* Hv */
    int32_t ssm_head_k_dim;   /* dk */
    int32_t ssm_head_v_dim;   /* dv */
    bool ssm_a_is_log;        /* HF stores A_log; GGUF stores ssm_a = -exp(A_log) */
    bool ssm_v_heads_tiled;   /* GGUF: v-head j uses k-head j mod Hk; HF: j / (Hv/Hk) */
    /* gemma3 (docs/spec/gemma3.md) */
    bool embd_scale;          /* embeddings times sqrt(n_embd) */
    bool sandwich_norms;      /* norms after attention and after the FFN, before the residual adds */
    bool geglu;               /* FFN down(gelu_tanh(gate x) * up x) instead of SwiGLU */
    float attn_scale;         /* softmax scale; 0 = 1 / sqrt(head_dim) */
    float rope_freq_scale;    /* linear rope scaling of full-attention layers (1 = none) */
    int32_t swa_window;       /* W of SLM_LAYER_SLIDING_ATTENTION layers */
    float rope_base_swa;      /* rope base of sliding layers */
} mdl_hparams;

/* Named numeric view of the hyper-parameters for `statelm info` (arch-relevant ones only). */
typedef struct mdl_hparam_entry {
    const char *name;
    double value;
} mdl_hparam_entry;

#endif
