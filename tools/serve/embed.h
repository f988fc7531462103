/* embed.h — POST /v1/embeddings of `statelm serve --embeddings` (embed.c): the OpenAI
 * embeddings request parsed, every input embedded from position 0 on the embedder's own session
 * (created with slm_session_params.embeddings; never a chat slot, so the slots' cached states are
 * untouched), and the response built. No HTTP here: http.c sends what this returns.
 * Thread-safe: requests are answered one at a time (a mutex around the session). */
#ifndef SLM_TOOLS_SERVE_EMBED_H
#define SLM_TOOLS_SERVE_EMBED_H

#include <cjson/cJSON.h>

#include "statelm.h"

#define SERVE_EMBED_MAX_INPUTS 2048 /* inputs per request, as the OpenAI API */

typedef struct serve_embedder serve_embedder;

/* Parses --pooling's value (none | mean | cls | last); false for anything else. */
bool serve_embed_parse_pooling(const char *text, slm_pooling *out);

/* An embedder for m with pooling (SLM_POOLING_MODEL: the model's <arch>.pooling_type, last when it
 * has none; a model whose pooling_type is rank or unknown needs an explicit one), sessions of
 * n_ctx tokens, n_threads threads, the kernels cli_apply_env selects. On failure err says why. */
slm_status serve_embedder_create(const slm_model *m, slm_pooling pooling, int32_t n_ctx, int32_t n_threads,
                                 serve_embedder **out, char *err, size_t err_cap);
void serve_embedder_destroy(serve_embedder *e);
/* The pooling requests get (never SLM_POOLING_MODEL). */
slm_pooling serve_embedder_pooling(const serve_embedder *e);

/* Answers one request body: returns the HTTP status; on 200 *response is the JSON body (caller
 * deletes), otherwise *response is NULL, *code the OpenAI error code and msg the message. */
unsigned serve_embedder_answer(serve_embedder *e, const char *body, size_t n_body, const char *model_id,
                               cJSON **response, const char **code, char *msg, size_t cap);

#endif
