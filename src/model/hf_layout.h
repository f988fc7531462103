/* hf_layout.h — Hugging Face checkpoint tensors brought to the layout llama.cpp's
 * convert_hf_to_gguf.py writes, so that an HF folder, its `statelm convert` output and anything
 * quantised from either hold the same bytes and run the same program (docs/convert.md):
 *   llama   attn_q / attn_k rows permuted per head, [G, 2, hd/2] -> [G, hd/2, 2] (rope NORM);
 *   qwen35  when Hk != Hv, the v-head-indexed rows/columns (V rows of attn_qkv and ssm_conv1d,
 *           attn_gate rows, ssm_alpha / ssm_beta rows, ssm_a, ssm_dt.bias, ssm_out columns) from
 *           grouped order [Hk, r, d] to tiled order [r, Hk, d]; every *norm.weight but ssm_norm
 *           gets +1; ssm_a = -exp(A_log);
 *   gemma3  every *norm.weight gets +1.
 * Permutations keep the source dtype (F32, F16 or BF16); the element-wise maps write F32,
 * computed as torch does in the converter (F16 sources in F16 arithmetic, BF16 widened first). */
#ifndef SLM_MODEL_HF_LAYOUT_H
#define SLM_MODEL_HF_LAYOUT_H

#include "model/model.h"

/* Rewrites every tensor of m (an HF-format model whose hyper-parameters are read) that the
 * converter changes into a buffer m owns, and switches m->hp to the GGUF conventions (rope NORM
 * for llama; norms stored with their +1, ssm_a as -exp(A_log), tiled v heads). */
slm_status hf_layout_model(slm_model *m, slm_err *e);

#endif
