/* build.h — entry point of the program builders (model/build.c). */
#ifndef SLM_MODEL_BUILD_H
#define SLM_MODEL_BUILD_H

#include "graph/graph.h"
#include "model/model.h"

/* Builds the Program of m for sessions of n_ctx tokens with K states in kv_k and V states in kv_v
 * (F16, F32, Q8_0, Q4_0; a quantised type needs a head dimension that is a multiple of 32, else
 * SLM_ERR_UNSUPPORTED saying so):
 * states as model/states.c lists them, functions "prefill" (symbolic n), "decode" (n = 1), "verify"
 * (symbolic n, logits of every column) and, with embed, "embed" (symbolic n, output G_OUT_HIDDEN:
 * the final-norm hidden states (n_embd, n), no LM head).
 * Checks every weight's shape; SLM_ERR_FORMAT/SHAPE/UNSUPPORTED naming the tensor otherwise. */
slm_status mdl_build_program(const slm_model *m, int32_t n_ctx, slm_dtype kv_k, slm_dtype kv_v, bool embed,
                             g_program **out, slm_err *e);
/* As mdl_build_program; with mtp_hidden every function also keeps the final-norm hidden states
 * of all its columns as its aux result (g_function.aux, "mtp_h"): what an MTP drafter reads. The
 * logits are those of the plain program. */
slm_status mdl_build_program_ex(const slm_model *m, int32_t n_ctx, slm_dtype kv_k, slm_dtype kv_v, bool embed,
                                bool mtp_hidden, g_program **out, slm_err *e);

/* The program of a qwen35 model's multi-token-prediction block (docs/spec/qwen35.md §10), for
 * sessions of n_ctx positions: states blk.N.kv_k / kv_v (N = n_layer; its attention's KV cache)
 * and MDL_MTP_H_STATE (n_embd, MDL_MTP_MAX_CALL) f32, whose columns [0, n) the caller fills with
 * the hidden state paired with each token before a call (never written by the program);
 * functions "prefill" (symbolic n <= MDL_MTP_MAX_CALL: output the MTP's final-norm hidden states
 * (n_embd, n)) and "decode" (n = 1: logits (n_vocab, 1), the hidden state kept as aux).
 * SLM_ERR_UNSUPPORTED when the model has no MTP block. */
#define MDL_MTP_MAX_CALL 64
#define MDL_MTP_H_STATE "mtp.h_in"
slm_status mdl_build_mtp_program(const slm_model *m, int32_t n_ctx, slm_dtype kv_dtype, g_program **out, slm_err *e);

#endif
