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

#endif
