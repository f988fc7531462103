/* build.h — entry point of the program builders (model/build.c). */
#ifndef SLM_MODEL_BUILD_H
#define SLM_MODEL_BUILD_H

#include "graph/graph.h"
#include "model/model.h"

/* Builds the Program of m for sessions of n_ctx tokens with KV states in kv_dtype (F16/F32):
 * states as model/states.c lists them, functions "prefill" (symbolic n), "decode" (n = 1), "verify"
 * (symbolic n, logits of every column) and, with embed, "embed" (symbolic n, output G_OUT_HIDDEN:
 * the final-norm hidden states (n_embd, n), no LM head).
 * Checks every weight's shape; SLM_ERR_FORMAT/SHAPE/UNSUPPORTED naming the tensor otherwise. */
slm_status mdl_build_program(const slm_model *m, int32_t n_ctx, slm_dtype kv_dtype, bool embed, g_program **out,
                             slm_err *e);

#endif
