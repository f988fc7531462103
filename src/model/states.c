/* states.c — the states a session of a model holds, derived from the hyper-parameters
 * (docs/spec/llama.md, docs/spec/lfm2.md §4.3, docs/spec/qwen35.md §4.4). The program builders declare exactly
 * these, so `statelm info` and a running session agree by construction. */
#include <stdio.h>
#include <string.h>

#include "base/dtype.h"
#include "model/model.h"

int32_t mdl_n_states(const slm_model *m) { return m->n_states; }

const char *mdl_kv_dtype_why(const slm_model *m, slm_dtype kv, bool key) {
    if (kv != SLM_DTYPE_Q8_0 && kv != SLM_DTYPE_Q4_0) return NULL;
    int32_t hd = key ? m->hp.head_dim : m->hp.head_dim_v;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        slm_layer_kind k = m->hp.layer_kind[il];
        if ((k == SLM_LAYER_ATTENTION || k == SLM_LAYER_SLIDING_ATTENTION) && hd % 32 != 0)
            return key ? "a quantised K cache needs a head dimension that is a multiple of 32"
                       : "a quantised V cache needs a head dimension that is a multiple of 32";
    }
    return NULL;
}

int32_t mdl_swa_rows(const mdl_hparams *hp, int32_t n_ctx, int32_t *ring) {
    int64_t R = ((2 * (int64_t)hp->swa_window) + 15) / 16 * 16;
    *ring = R < n_ctx ? (int32_t)R : 0;
    return *ring ? *ring : n_ctx;
}

int32_t mdl_swa_call_tokens(const mdl_hparams *hp, int32_t n_ctx) {
    for (int32_t il = 0; il < hp->n_layer; il++) {
        int32_t ring = 0;
        if (hp->layer_kind[il] == SLM_LAYER_SLIDING_ATTENTION && (mdl_swa_rows(hp, n_ctx, &ring), ring))
            return ring - hp->swa_window; /* >= W: no row of a query's window is overwritten */
    }
    return 0;
}

slm_status mdl_states_init(slm_model *m, slm_err *e) {
    int32_t n = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) n += 2; /* every kind holds two, except conv */
    for (int32_t il = 0; il < m->hp.n_layer; il++)
        if (m->hp.layer_kind[il] == SLM_LAYER_CONV) n--;
    m->state_names = al_calloc(&m->alloc, (size_t)n, sizeof(char *));
    m->state_layer = al_calloc(&m->alloc, (size_t)n, sizeof(int32_t));
    m->state_role = al_calloc(&m->alloc, (size_t)n, sizeof(slm_state_role));
    if (!m->state_names || !m->state_layer || !m->state_role) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    m->n_states = n;
    int32_t i = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        static const struct {
            const char *suffix;
            slm_state_role role;
        } kinds[4][2] = {
            {{"kv_k", SLM_STATE_KV_KEY}, {"kv_v", SLM_STATE_KV_VALUE}},
            {{"conv", SLM_STATE_CONV}, {NULL, SLM_STATE_CONV}},
            {{"ssm_conv", SLM_STATE_CONV}, {"ssm_state", SLM_STATE_RECURRENT}},
            {{"kv_k", SLM_STATE_KV_KEY}, {"kv_v", SLM_STATE_KV_VALUE}},
        };
        int k = (int)m->hp.layer_kind[il];
        for (int j = 0; j < 2 && kinds[k][j].suffix; j++, i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", il, kinds[k][j].suffix);
            m->state_names[i] = al_strdup(&m->alloc, name);
            if (!m->state_names[i]) return err_set(e, SLM_ERR_NOMEM, "out of memory");
            m->state_layer[i] = il;
            m->state_role[i] = kinds[k][j].role;
        }
    }
    return SLM_OK;
}

void mdl_state_spec_at(const slm_model *m, int32_t n_ctx, slm_dtype kv_k, slm_dtype kv_v, int32_t i,
                       mdl_state_spec *spec) {
    const mdl_hparams *hp = &m->hp;
    memset(spec, 0, sizeof *spec);
    spec->name = m->state_names[i];
    spec->role = m->state_role[i];
    spec->layer = m->state_layer[i];
    spec->ne[2] = spec->ne[3] = 1;
    spec->n_dims = 2;
    spec->pos_axis = 1;
    spec->dtype = SLM_DTYPE_F32;
    slm_layer_kind kind = hp->layer_kind[spec->layer];
    switch (spec->role) {
    case SLM_STATE_KV_KEY:
    case SLM_STATE_KV_VALUE:
        spec->dtype = spec->role == SLM_STATE_KV_KEY ? kv_k : kv_v;
        spec->ne[0] = (int64_t)(spec->role == SLM_STATE_KV_KEY ? hp->head_dim : hp->head_dim_v) * hp->n_head_kv;
        spec->ne[1] = n_ctx;
        if (kind == SLM_LAYER_SLIDING_ATTENTION) {
            int32_t ring = 0;
            spec->ne[1] = mdl_swa_rows(hp, n_ctx, &ring);
        }
        break;
    case SLM_STATE_CONV:
        if (kind == SLM_LAYER_CONV) {
            spec->ne[0] = hp->n_embd;
            spec->ne[1] = hp->conv_kernel - 1;
        } else {
            spec->ne[0] = 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_head_k_dim + (int64_t)hp->ssm_n_v_heads * hp->ssm_head_v_dim;
            spec->ne[1] = hp->ssm_conv_kernel - 1;
        }
        break;
    case SLM_STATE_RECURRENT:
        spec->n_dims = 3;
        spec->pos_axis = -1;
        spec->ne[0] = hp->ssm_head_v_dim;
        spec->ne[1] = hp->ssm_head_k_dim;
        spec->ne[2] = hp->ssm_n_v_heads;
        break;
    }
}
