/* embed.c — slm_session_embed: feeds tokens through the Program's "embed" function (output
 * G_OUT_HIDDEN: the final-norm hidden states (n_embd, n) of every token, model/build.c) in the calls
 * sess_feed_fn splits them into, and pools the columns as they come: NONE copies every column,
 * MEAN sums them (in double) and divides, CLS keeps column 0 of the first call, LAST the last
 * column of the last call. Then optional L2 normalisation per output vector. */
#include <math.h>
#include <string.h>

#include "runtime/session.h"

SLM_API const char *slm_pooling_name(slm_pooling pooling) {
    switch (pooling) {
    case SLM_POOLING_NONE: return "none";
    case SLM_POOLING_MEAN: return "mean";
    case SLM_POOLING_CLS: return "cls";
    case SLM_POOLING_LAST: return "last";
    case SLM_POOLING_RANK: return "rank";
    default: return NULL;
    }
}

typedef struct pool_ctx {
    slm_pooling pooling;
    int32_t d;
    float *out;   /* NONE: (n, d) token-major; CLS, LAST: (d) */
    double *sum;  /* MEAN: (d) */
} pool_ctx;

static void pool_call(void *user, slm_session *s, int32_t fn, int32_t first, int32_t len) {
    pool_ctx *c = user;
    const float *h = sess_tensor_data(s, s->prog->functions[fn].logits); /* (d, len), column t = token first + t */
    size_t d = (size_t)c->d;
    switch (c->pooling) {
    case SLM_POOLING_NONE: memcpy(c->out + (size_t)first * d, h, (size_t)len * d * sizeof(float)); break;
    case SLM_POOLING_CLS:
        if (first == 0) memcpy(c->out, h, d * sizeof(float));
        break;
    case SLM_POOLING_LAST: memcpy(c->out, h + (size_t)(len - 1) * d, d * sizeof(float)); break;
    default:
        for (int32_t t = 0; t < len; t++)
            for (size_t i = 0; i < d; i++) c->sum[i] += h[(size_t)t * d + i];
        break;
    }
}

static void l2_normalize(float *v, size_t d) {
    double ss = 0;
    for (size_t i = 0; i < d; i++) ss += (double)v[i] * v[i];
    if (ss <= 0) return;
    double inv = 1.0 / sqrt(ss);
    for (size_t i = 0; i < d; i++) v[i] = (float)(v[i] * inv);
}

SLM_API slm_status slm_session_embed(slm_session *s, const int32_t *tokens, size_t n, slm_pooling pooling,
                                     bool normalize, float *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    if (s->fn_embed < 0)
        return err_set(&s->err, SLM_ERR_UNSUPPORTED,
                       "the session has no embed function: create it with slm_session_params.embeddings");
    if (!tokens && n) return err_set(&s->err, SLM_ERR_INVALID_ARG, "tokens is NULL");
    slm_pooling p = pooling;
    if (p == SLM_POOLING_MODEL) {
        int32_t mp = s->model ? s->model->hp.pooling : SLM_POOLING_MODEL;
        p = mp == SLM_POOLING_MODEL ? SLM_POOLING_LAST : (slm_pooling)mp;
        if (p == SLM_POOLING_RANK)
            return err_set(&s->err, SLM_ERR_UNSUPPORTED,
                           "the model's pooling_type is 4 (rank, a reranker head), which statelm does not run; "
                           "ask for none, mean, cls or last");
        if (!slm_pooling_name(p))
            return err_set(&s->err, SLM_ERR_UNSUPPORTED, "the model's pooling_type %d is none of 0-3 (none, mean, "
                           "cls, last)", (int)mp);
    } else if (p == SLM_POOLING_RANK) {
        return err_set(&s->err, SLM_ERR_UNSUPPORTED, "pooling rank (a reranker head) is not supported");
    } else if (!slm_pooling_name(p)) {
        return err_set(&s->err, SLM_ERR_INVALID_ARG, "pooling %d is none of -1 (model), 0 (none), 1 (mean), 2 (cls), "
                       "3 (last)", (int)pooling);
    }
    slm_status st = sess_check_tokens(s, tokens, n);
    if (st) return st;
    const g_tensor *ht = &s->prog->tensors[s->prog->functions[s->fn_embed].logits];
    size_t d = (size_t)ht->ne[0], need = p == SLM_POOLING_NONE ? n * d : d;
    if (!out || cap < need)
        return err_set(&s->err, SLM_ERR_INVALID_ARG, "out holds %zu floats, pooling %s of %zu tokens needs %zu",
                       out ? cap : 0, slm_pooling_name(p), n, need);
    pool_ctx c = {p, (int32_t)d, out, NULL};
    if (p == SLM_POOLING_MEAN && !(c.sum = al_calloc(&s->alloc, d, sizeof(double))))
        return err_set(&s->err, SLM_ERR_NOMEM, "out of memory");
    st = sess_feed_fn(s, s->fn_embed, tokens, (int32_t)n, true, pool_call, &c);
    if (st == SLM_OK) {
        if (p == SLM_POOLING_MEAN)
            for (size_t i = 0; i < d; i++) out[i] = (float)(c.sum[i] / (double)n);
        if (normalize)
            for (size_t r = 0; r < need / d; r++) l2_normalize(out + r * d, d);
        if (n_out) *n_out = need;
    }
    al_free(&s->alloc, c.sum);
    return st;
}
