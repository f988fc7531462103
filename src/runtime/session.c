/* session.c — sessions of the public API and the executor: binds every tensor of a function to
 * memory (weights mapped, activations in a planned arena, state views in the session's state
 * buffers), runs the nodes in order on the backend, and commits states only when the whole call
 * succeeded. */
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/dtype.h"
#include "model/build.h"

SLM_API slm_session_params slm_session_params_default(void) {
    slm_session_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.kv_dtype = SLM_DTYPE_F16;
    return p;
}

static size_t state_bytes(const g_state *st) {
    size_t el = st->dtype == SLM_DTYPE_F16 ? 2 : 4, n = el;
    for (int d = 0; d < 4; d++) n *= (size_t)st->alloc_ne[d];
    return n;
}

static void model_cache_free(void *c) { backend_cache_destroy(c); }

/* Points the backend at the model's per-model backend cache (repacked weights), creating it on
 * first use. The model keeps one cache, of the kind that asked first; a backend of another kind,
 * or one that keeps nothing per model, is left with its own. */
static slm_status share_model_cache(const slm_model *model, backend *be, slm_err *e) {
    if (!be->vt->cache_create) return SLM_OK;
    slm_model *m = (slm_model *)model; /* the memoised cache is the model's only mutable part */
    slm_status st = SLM_OK;
    pthread_mutex_lock(&m->rt_mu);
    if (!m->rt_cache) {
        be_model_cache *c = NULL;
        if ((st = be->vt->cache_create(&m->alloc, &c, e)) == SLM_OK) {
            if (m->format == SLM_FORMAT_GGUF && m->gguf.owns_map)
                c->vt->cache_set_file_map(c, m->gguf.map.data, m->gguf.map.size);
            m->rt_cache = c;
            m->rt_cache_free = model_cache_free;
        }
    }
    pthread_mutex_unlock(&m->rt_mu);
    be_model_cache *c = m->rt_cache;
    if (st == SLM_OK && c->vt == be->vt) be->vt->use_cache(be, c);
    return st;
}

/* Values whose only use is a static write of a whole double-buffered f32 state are computed
 * straight into the state's back buffer, so the write copies nothing (the DeltaNet state: 18 MiB
 * a token on Qwen3.5-0.8B). Only for states written once per function; the back buffer becomes
 * current only when the write itself runs, so reads in between still see the old state. */
static void find_direct_writes(slm_session *s) {
    const g_program *p = s->prog;
    for (int32_t t = 0; t < p->n_tensors; t++) s->direct_state[t] = -1;
    for (int32_t f = 0; f < p->n_functions; f++) {
        const g_function *fn = &p->functions[f];
        for (int32_t i = 0; i < fn->n_nodes; i++) {
            const g_node *w = &p->nodes[fn->nodes[i]];
            if (w->op != G_OP_STATE_WRITE) continue;
            int32_t si = w->p.write.state, t = w->in[0], writes = 0, uses = 0;
            const g_state *st = &p->states[si];
            const g_tensor *v = &p->tensors[t];
            if (!s->states[si].double_buffered || st->dtype != SLM_DTYPE_F32 || v->storage != G_ACTIVATION || v->n_mask)
                continue;
            bool whole = true;
            for (int d = 0; d < 4; d++) {
                const g_affine *b = &w->p.write.begin[d];
                whole &= b->base == 0 && !b->has_n && !b->has_pos && v->ne[d] == st->ne[d];
                whole &= d == st->n_dims - 1 || st->alloc_ne[d] == st->ne[d]; /* logical = prefix */
            }
            for (int32_t j = 0; j < fn->n_nodes; j++) {
                const g_node *nd = &p->nodes[fn->nodes[j]];
                writes += nd->op == G_OP_STATE_WRITE && nd->p.write.state == si;
                for (int k = 0; k < nd->n_in; k++) uses += nd->in[k] == t;
            }
            if (whole && writes == 1 && uses == 1 && t != fn->logits) s->direct_state[t] = si;
        }
    }
}

/* Marks the causal-conv steps the backend may run as one job (backend_vtable.exec_conv_step): at
 * position i of a function,
 *   i      xc = CONCAT(state_read(s), x) along axis 1        (C, K - 1 + n)
 *   i + 1  SLICE(xc, axis 1, [n, n + K - 1)), computed into s's back buffer (direct_state)
 *   i + 2  STATE_WRITE(s) of that slice, its only write of s
 *   i + 3  y = CONV1D(xc, w)                                   (C, n)
 *   i + 4  SILU(y), taken in when y has no other use
 * with xc read by the SLICE and the CONV1D only. conv_step[node of i] = the number of nodes. */
static slm_status find_conv_steps(slm_session *s, slm_err *e) {
    const g_program *p = s->prog;
    int32_t *uses = al_calloc(&s->alloc, (size_t)p->n_tensors, sizeof(int32_t));
    if (!uses) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    for (int32_t f = 0; f < p->n_functions; f++) {
        const g_function *fn = &p->functions[f];
        memset(uses, 0, (size_t)p->n_tensors * sizeof(int32_t));
        for (int32_t i = 0; i < fn->n_nodes; i++) {
            const g_node *nd = &p->nodes[fn->nodes[i]];
            for (int k = 0; k < nd->n_in; k++) uses[nd->in[k]]++;
        }
        for (int32_t i = 0; i + 3 < fn->n_nodes; i++) {
            const g_node *cat = &p->nodes[fn->nodes[i]], *sl = &p->nodes[fn->nodes[i + 1]],
                         *wr = &p->nodes[fn->nodes[i + 2]], *cv = &p->nodes[fn->nodes[i + 3]];
            if (cat->op != G_OP_CONCAT || cat->p.concat.axis != 1) continue;
            const g_tensor *st = &p->tensors[cat->in[0]];
            int32_t xc = cat->out[0], si = st->src;
            if (st->storage != G_STATE_VIEW || st->n_dims != 2 || uses[xc] != 2 || xc == fn->logits) continue;
            const g_affine *begin = &sl->p.slice.begin;
            if (sl->op != G_OP_SLICE || sl->in[0] != xc || sl->p.slice.axis != 1 || begin->base != 0 ||
                !begin->has_n || begin->has_pos || s->direct_state[sl->out[0]] != si)
                continue;
            if (wr->op != G_OP_STATE_WRITE || wr->in[0] != sl->out[0] || wr->p.write.state != si) continue;
            if (cv->op != G_OP_CONV1D || cv->in[0] != xc || p->tensors[cv->in[1]].ne[0] != st->ne[1] + 1) continue;
            uint8_t span = 4;
            if (i + 4 < fn->n_nodes) {
                const g_node *act = &p->nodes[fn->nodes[i + 4]];
                if (act->op == G_OP_SILU && act->in[0] == cv->out[0] && uses[cv->out[0]] == 1 &&
                    cv->out[0] != fn->logits)
                    span = 5;
            }
            s->conv_step[fn->nodes[i]] = span;
        }
    }
    al_free(&s->alloc, uses);
    return SLM_OK;
}

/* Range of valid token ids: rows of the table the EMBED of the decode function's token input reads. */
static int32_t token_id_limit(const g_program *p, int32_t fn) {
    const g_function *f = &p->functions[fn];
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        if (nd->op == G_OP_EMBED && nd->in[1] == f->tokens) return (int32_t)p->tensors[nd->in[0]].ne[1];
    }
    return 0;
}

slm_status sess_create_program(const slm_model *model, g_program *prog, int32_t n_threads, int32_t n_ctx,
                               slm_dtype kv_dtype, const slm_session_params *opts, slm_session **out, slm_err *e) {
    *out = NULL;
    slm_status st;
    const slm_allocator *a = model ? &model->alloc : &al_default;
    slm_session *s = al_calloc(a, 1, sizeof *s);
    if (!s) {
        graph_destroy(prog);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    s->model = model;
    s->alloc = *a;
    s->prog = prog;
    s->n_ctx = n_ctx;
    s->kv_dtype = kv_dtype;
    s->n_threads = n_threads > 0 ? n_threads : model ? model->n_threads : 1;
    s->fn_decode = graph_find_function(prog, "decode");
    s->fn_prefill = graph_find_function(prog, "prefill");
    if (s->fn_decode < 0) {
        st = err_set(e, SLM_ERR_INVALID_ARG, "the program has no decode function");
        goto fail;
    }
    if (s->fn_prefill < 0) s->fn_prefill = s->fn_decode;
    s->n_vocab = (int32_t)g_ne(&prog->tensors[prog->functions[s->fn_decode].logits], 0, 1);
    s->n_token_ids = token_id_limit(prog, s->fn_decode);
    backend_params bp = {.kind = BACKEND_CPU, .n_threads = s->n_threads, .kernels = opts ? opts->kernels : NULL,
                         .no_repack = opts && opts->no_repack};
    if ((st = backend_create(&s->alloc, &bp, &s->be, e))) goto fail;
    if (model && (st = share_model_cache(model, s->be, e))) goto fail;
    s->states = al_calloc(&s->alloc, (size_t)prog->n_states + 1, sizeof(sess_state));
    s->tensor_ptr = al_calloc(&s->alloc, (size_t)prog->n_tensors, sizeof(void *));
    s->direct_state = al_calloc(&s->alloc, (size_t)prog->n_tensors, sizeof(int32_t));
    s->conv_step = al_calloc(&s->alloc, (size_t)prog->n_nodes + 1, 1);
    s->history = al_calloc(&s->alloc, (size_t)n_ctx, sizeof(int32_t));
    s->logits = al_calloc(&s->alloc, (size_t)s->n_vocab, sizeof(float));
    if (opts && opts->profile && !(s->profile = al_calloc(&s->alloc, 1, sizeof *s->profile))) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (!s->states || !s->tensor_ptr || !s->direct_state || !s->conv_step || !s->history || !s->logits) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t state_block_bytes = 0;
    for (int32_t i = 0; i < prog->n_states; i++) {
        const g_state *gs = &prog->states[i];
        sess_state *ss = &s->states[i];
        ss->bytes = state_bytes(gs);
        ss->double_buffered = gs->role == SLM_STATE_CONV || gs->role == SLM_STATE_RECURRENT;
        if (ss->double_buffered) {
            s->has_recurrent = true;
            s->ckpt_bytes += ss->bytes;
        }
        size_t slot = (ss->bytes + AL_ALIGN - 1) & ~(size_t)(AL_ALIGN - 1);
        if (!size_add_ok(state_block_bytes, (ss->double_buffered ? 2 : 1) * slot, &state_block_bytes)) {
            st = err_set(e, SLM_ERR_NOMEM, "state %s (%zu bytes) overflows the state block", gs->name, ss->bytes);
            goto fail;
        }
    }
    /* every state buffer in one zeroed block (on huge pages when large: decode streams them) */
    if (!(s->state_block = al_malloc_large(&s->alloc, state_block_bytes))) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory for the states (%zu bytes)", state_block_bytes);
        goto fail;
    }
    memset(s->state_block, 0, state_block_bytes);
    size_t off = 0;
    for (int32_t i = 0; i < prog->n_states; i++) {
        sess_state *ss = &s->states[i];
        for (int b = 0; b < (ss->double_buffered ? 2 : 1); b++) {
            ss->buf[b] = s->state_block + off;
            off += (ss->bytes + AL_ALIGN - 1) & ~(size_t)(AL_ALIGN - 1);
        }
    }
    find_direct_writes(s);
    if ((st = find_conv_steps(s, e))) goto fail;
    if ((st = sess_ckpt_init(s, 0, 0, NULL, e))) goto fail;
    *out = s;
    return SLM_OK;
fail:
    slm_session_destroy(s);
    return st;
}

SLM_API slm_status slm_session_create(const slm_model *model, const slm_session_params *params, slm_session **out,
                                      char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (out) *out = NULL;
    if (err && err_cap) err[0] = '\0';
    slm_status st = SLM_OK;
    slm_session_params p = slm_session_params_default();
    if (params) memcpy(&p, params, params->size && params->size < sizeof p ? params->size : sizeof p);
    int32_t n_ctx = model && p.n_ctx == 0 ? slm_model_n_ctx_default(model) : p.n_ctx;
    g_program *prog = NULL;
    if (!model || !out) st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_session_create: model and out are required");
    else if (p.kv_dtype != SLM_DTYPE_F16 && p.kv_dtype != SLM_DTYPE_F32)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "kv_dtype must be f16 or f32, not %s", slm_dtype_name(p.kv_dtype));
    else if (n_ctx < 1 || n_ctx > (1 << 24))
        st = err_set(&e, SLM_ERR_INVALID_ARG, "n_ctx %d is out of range [1, %d]", n_ctx, 1 << 24);
    else if ((st = mdl_build_program(model, n_ctx, p.kv_dtype, &prog, &e)) == SLM_OK)
        st = sess_create_program(model, prog, p.n_threads, n_ctx, p.kv_dtype, &p, out, &e);
    if (st == SLM_OK) {
        (*out)->abort_fn = p.abort_fn;
        (*out)->abort_user_data = p.abort_user_data;
        st = sess_ckpt_init(*out, p.checkpoint_interval, p.checkpoint_budget_mib, p.checkpoint_dir, &e);
        if (st) {
            slm_session_destroy(*out);
            *out = NULL;
        }
    }
    err_copy_out(&e, err, err_cap);
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void profile_print(const sess_profile *pf) {
    double total = 0;
    for (int op = 0; op < G_OP_COUNT; op++) total += pf->seconds[op];
    if (total <= 0) return;
    double per_token = 1e3 / (double)(pf->tokens ? pf->tokens : 1);
    fprintf(stderr, "SLM_PROFILE: %lld tokens, %.3f ms of kernels and %.3f ms of calls per token\n",
            (long long)pf->tokens, total * per_token, pf->call_seconds * per_token);
    fprintf(stderr, "%-14s %10s %12s %12s %7s\n", "op", "calls", "ms", "us/call", "share");
    for (int op = 0; op < G_OP_COUNT; op++) {
        if (!pf->calls[op]) continue;
        fprintf(stderr, "%-14s %10lld %12.3f %12.3f %6.1f%%\n", g_op_name((g_op)op), (long long)pf->calls[op],
                1e3 * pf->seconds[op], 1e6 * pf->seconds[op] / (double)pf->calls[op], 100.0 * pf->seconds[op] / total);
    }
}

SLM_API void slm_session_destroy(slm_session *s) {
    if (!s) return;
    slm_allocator a = s->alloc;
    if (s->profile) profile_print(s->profile);
    al_free(&a, s->profile);
    al_free_aligned(&a, s->state_block);
    for (int f = 0; s->prog && f < G_MAX_FUNCTIONS; f++) memplan_free(s->prog, &s->plans[f]);
    sess_ckpt_free(s);
    al_free(&a, s->undo);
    al_free(&a, s->undo_kv);
    al_free(&a, s->states);
    al_free(&a, s->tensor_ptr);
    al_free(&a, s->direct_state);
    al_free(&a, s->conv_step);
    al_free(&a, s->history);
    al_free(&a, s->logits);
    al_free_aligned(&a, s->arena);
    if (s->be) s->be->vt->destroy(s->be);
    graph_destroy(s->prog);
    al_free(&a, s);
}

SLM_API const char *slm_session_errmsg(const slm_session *s) { return s ? s->err.msg : SLM_NULL_HANDLE_MSG; }
SLM_API int32_t slm_session_pos(const slm_session *s) { return s ? s->pos : 0; }
SLM_API int32_t slm_session_n_ctx(const slm_session *s) { return s ? s->n_ctx : 0; }
SLM_API const slm_model *slm_session_model(const slm_session *s) { return s ? s->model : NULL; }
SLM_API const char *slm_session_kernels(const slm_session *s) { return s ? s->be->vt->kernels(s->be) : NULL; }
SLM_API const int32_t *slm_session_history(const slm_session *s, size_t *n) {
    if (n) *n = s ? (size_t)s->pos : 0;
    return s ? s->history : NULL;
}

SLM_API void slm_session_reset(slm_session *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        sess_state *ss = &s->states[i];
        memset(ss->buf[ss->front], 0, ss->bytes);
    }
    s->pos = 0;
    s->logits_valid = false;
    sess_ckpt_drop_after(s, 0);
    err_clear(&s->err);
}

SLM_API int32_t slm_session_n_states(const slm_session *s) { return s ? s->prog->n_states : 0; }

SLM_API slm_status slm_session_state(const slm_session *s, int32_t i, slm_state_info *info) {
    if (!s || !info) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= s->prog->n_states) return SLM_ERR_RANGE;
    const g_state *gs = &s->prog->states[i];
    info->name = gs->name;
    info->role = gs->role;
    info->layer = gs->layer;
    info->dtype = (slm_dtype)gs->dtype;
    info->n_dims = gs->n_dims;
    for (int d = 0; d < 4; d++) info->ne[d] = gs->alloc_ne[d];
    info->pos_axis = gs->pos_axis;
    info->size_bytes = s->states[i].bytes;
    return SLM_OK;
}

/* ---- executor ------------------------------------------------------------------------------- */

static void *tensor_data(slm_session *s, int32_t t) {
    const g_tensor *gt = &s->prog->tensors[t];
    switch (gt->storage) {
    case G_WEIGHT: return (void *)gt->data;
    case G_VIEW: return tensor_data(s, gt->src);
    case G_INPUT:
    case G_ACTIVATION: return s->tensor_ptr[t];
    case G_STATE_VIEW: return s->tensor_ptr[t];
    default: return NULL;
    }
}

static void bind_view(slm_session *s, int32_t t, int64_t n, be_view *v) {
    const g_tensor *gt = &s->prog->tensors[t];
    v->dtype = gt->dtype;
    v->n_dims = gt->n_dims;
    for (int d = 0; d < 4; d++) v->ne[d] = g_ne(gt, d, n);
    v->data = tensor_data(s, t);
}

/* Bytes a bound view spans (0 for a block type that does not divide its rows). */
static size_t view_bytes(const be_view *v) {
    uint64_t row = 0;
    if (!dtype_row_bytes(v->dtype, (uint64_t)v->ne[0], &row)) return 0;
    return (size_t)row * (size_t)(v->ne[1] * v->ne[2] * v->ne[3]);
}

static bool views_overlap(const be_view *a, const be_view *b) {
    const uint8_t *pa = a->data, *pb = b->data;
    return pa < pb + view_bytes(b) && pb < pa + view_bytes(a);
}

#define MATMUL_GROUP_MAX 8

/* A matmul group from f->nodes[i]: the MATMULs of one layer that read the same activation tensor,
 * with nothing between them but RESHAPEs (views, which run no kernel: LFM2 and Qwen3.5 reshape q
 * and k between their projections). Fills members[] with their positions in f->nodes and returns
 * their count; *span is the number of nodes from i through the last member. */
static int32_t matmul_group(const g_program *p, const g_function *f, int32_t i, int32_t members[MATMUL_GROUP_MAX],
                            int32_t *span) {
    const g_node *first = &p->nodes[f->nodes[i]];
    int32_t n = 0;
    members[n++] = i;
    *span = 1;
    for (int32_t j = i + 1; n < MATMUL_GROUP_MAX && j < f->n_nodes; j++) {
        const g_node *nd = &p->nodes[f->nodes[j]];
        if (nd->op == G_OP_RESHAPE) continue;
        if (nd->op != G_OP_MATMUL || nd->layer != first->layer || nd->in[1] != first->in[1]) break;
        members[n++] = j;
        *span = j - i + 1;
    }
    return n;
}

/* Runs the matmul group at positions members[0, len) of f->nodes as one backend job;
 * SLM_ERR_UNSUPPORTED (nothing run) when the backend does not take it or its outputs overlap its
 * inputs. */
static slm_status run_matmul_group(slm_session *s, const g_function *f, const int32_t *members, int32_t len, int64_t n,
                                   slm_err *e) {
    const g_program *p = s->prog;
    be_view out[MATMUL_GROUP_MAX], in[2 * MATMUL_GROUP_MAX];
    size_t scratch = 0;
    for (int32_t j = 0; j < len; j++) {
        const g_node *nd = &p->nodes[f->nodes[members[j]]];
        bind_view(s, nd->in[0], n, &in[2 * j]);
        bind_view(s, nd->in[1], n, &in[2 * j + 1]);
        bind_view(s, nd->out[0], n, &out[j]);
        size_t need = s->be->vt->scratch_bytes(s->be, nd, &out[j], &in[2 * j]);
        if (need > scratch) scratch = need;
    }
    for (int32_t j = 0; j < len; j++) {
        if (views_overlap(&out[j], &in[1])) return SLM_ERR_UNSUPPORTED;
        for (int32_t k = 0; k < j; k++)
            if (views_overlap(&out[j], &out[k])) return SLM_ERR_UNSUPPORTED;
    }
    slm_status st;
    if (scratch && (st = s->be->vt->reserve_scratch(s->be, scratch, e))) return st;
    return s->be->vt->exec_matmul_group(s->be, len, out, in, e);
}

/* Current storage of state i for this call (the back buffer once written). */
static uint8_t *state_current(slm_session *s, int32_t i) {
    sess_state *ss = &s->states[i];
    return ss->written ? ss->buf[1 - ss->front] : ss->buf[ss->front];
}

/* Prepares state i for a write covering `full` (whole logical extent or not). */
static uint8_t *state_for_write(slm_session *s, int32_t i, bool full) {
    sess_state *ss = &s->states[i];
    if (!ss->double_buffered) return ss->buf[ss->front];
    if (!ss->written) {
        if (!full) memcpy(ss->buf[1 - ss->front], ss->buf[ss->front], ss->bytes);
        ss->written = true;
    }
    return ss->buf[1 - ss->front];
}

/* Runs the causal-conv step of find_conv_steps at position i of f (span nodes) as one backend job;
 * SLM_ERR_UNSUPPORTED (nothing run) when the backend does not take it or its output partly
 * overlaps its input. */
static slm_status run_conv_step(slm_session *s, const g_function *f, int32_t i, int32_t span, int64_t n, slm_err *e) {
    const g_program *p = s->prog;
    const g_node *cat = &p->nodes[f->nodes[i]], *sl = &p->nodes[f->nodes[i + 1]], *cv = &p->nodes[f->nodes[i + 3]];
    const g_node *last = &p->nodes[f->nodes[i + span - 1]];
    be_view in[3], out[2];
    bind_view(s, cat->in[0], n, &in[0]);
    bind_view(s, cat->in[1], n, &in[1]);
    bind_view(s, cv->in[1], n, &in[2]);
    bind_view(s, last->out[0], n, &out[0]);
    bind_view(s, sl->out[0], n, &out[1]); /* the state's back buffer (direct_state) */
    if (out[0].data != in[1].data && views_overlap(&out[0], &in[1])) return SLM_ERR_UNSUPPORTED;
    if (!s->be->vt->exec_conv_step) return SLM_ERR_UNSUPPORTED;
    slm_status st = s->be->vt->exec_conv_step(s->be, out, in, span == 5, e);
    if (st == SLM_OK) (void)state_for_write(s, p->nodes[f->nodes[i + 2]].p.write.state, true);
    return st;
}

static bool write_is_full(const g_program *p, const g_node *nd, int64_t n, int64_t pos) {
    const g_state *st = &p->states[nd->p.write.state];
    const g_tensor *v = &p->tensors[nd->in[0]];
    for (int d = 0; d < 4; d++)
        if (g_affine_eval(nd->p.write.begin[d], n, pos) != 0 || g_ne(v, d, n) != st->ne[d]) return false;
    return true;
}

slm_status sess_run(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n) {
    g_program *p = s->prog;
    const g_function *f = &p->functions[fn];
    slm_err *e = &s->err;
    memplan *mp = &s->plans[fn];
    slm_status st;
    if (mp->offset == NULL || mp->n != n) {
        if ((st = memplan_build(p, fn, n, mp, e))) return st;
    }
    if (mp->arena_bytes > s->arena_bytes) {
        uint8_t *a = al_malloc_aligned(&s->alloc, mp->arena_bytes);
        if (!a) return err_set(e, SLM_ERR_NOMEM, "out of memory for %zu bytes of activations", mp->arena_bytes);
        al_free_aligned(&s->alloc, s->arena);
        s->arena = a;
        s->arena_bytes = mp->arena_bytes;
    }
    for (int32_t t = 0; t < p->n_tensors; t++) {
        s->tensor_ptr[t] = mp->offset[t] != MEMPLAN_NONE ? s->arena + mp->offset[t] : NULL;
        int32_t si = s->direct_state[t];
        if (si >= 0 && p->tensors[t].fn == fn) s->tensor_ptr[t] = s->states[si].buf[1 - s->states[si].front];
    }
    memcpy(s->tensor_ptr[f->tokens], tokens, (size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < p->n_states; i++) s->states[i].written = false;
    be_call call = {n, s->pos};
    be_view in[G_MAX_IN], out[G_MAX_OUT];
    double call_t0 = s->profile ? now_s() : 0;
    sess_profile before; /* restored after a function's first call */
    bool first_call = s->profile && !s->profile->seen[fn];
    if (first_call) before = *s->profile;
    int32_t last_layer = -2;
    st = SLM_OK;
    for (int32_t i = 0; i < f->n_nodes && !st; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        if (nd->layer != last_layer) {
            last_layer = nd->layer;
            if (s->abort_fn && s->abort_fn(s->abort_user_data)) {
                st = err_set(e, SLM_ERR_ABORTED, "aborted by the abort callback");
                break;
            }
        }
        if (nd->op == G_OP_STATE_READ) {
            s->tensor_ptr[nd->out[0]] = state_current(s, nd->p.read.state);
            continue;
        }
        if (nd->op == G_OP_RESHAPE) continue;
        if (s->conv_step[f->nodes[i]]) {
            int32_t span = s->conv_step[f->nodes[i]];
            double t0 = s->profile ? now_s() : 0;
            st = run_conv_step(s, f, i, span, n, e);
            if (st == SLM_OK) {
                if (s->profile) {
                    s->profile->seconds[G_OP_CONV1D] += now_s() - t0;
                    s->profile->calls[G_OP_CONV1D]++;
                }
                i += span - 1;
                continue;
            }
            if (st != SLM_ERR_UNSUPPORTED) break;
            st = SLM_OK; /* node by node */
        }
        int32_t members[MATMUL_GROUP_MAX], span = 1;
        int32_t group = nd->op == G_OP_MATMUL && s->be->vt->exec_matmul_group ? matmul_group(p, f, i, members, &span) : 1;
        if (group > 1) {
            double t0 = s->profile ? now_s() : 0;
            st = run_matmul_group(s, f, members, group, n, e);
            if (st == SLM_OK) {
                if (s->profile) {
                    s->profile->seconds[G_OP_MATMUL] += now_s() - t0;
                    s->profile->calls[G_OP_MATMUL] += group;
                }
                i += span - 1; /* the RESHAPEs inside the span are views: nothing to run */
                continue;
            }
            if (st != SLM_ERR_UNSUPPORTED) break;
            st = SLM_OK; /* one by one */
        }
        for (int k = 0; k < nd->n_in; k++) bind_view(s, nd->in[k], n, &in[k]);
        if (nd->op == G_OP_STATE_WRITE) {
            const g_state *gs = &p->states[nd->p.write.state];
            out[0].dtype = gs->dtype;
            out[0].n_dims = gs->n_dims;
            for (int d = 0; d < 4; d++) out[0].ne[d] = gs->alloc_ne[d];
            out[0].data = state_for_write(s, nd->p.write.state, write_is_full(p, nd, n, s->pos));
            if (out[0].data == in[0].data) continue; /* computed in place (find_direct_writes) */
        } else {
            for (int k = 0; k < nd->n_out; k++) bind_view(s, nd->out[k], n, &out[k]);
        }
        size_t scratch = s->be->vt->scratch_bytes(s->be, nd, out, in);
        if (scratch && (st = s->be->vt->reserve_scratch(s->be, scratch, e))) break;
        double t0 = s->profile ? now_s() : 0;
        st = s->be->vt->exec(s->be, nd, out, in, &call, e);
        if (s->profile) {
            s->profile->seconds[nd->op] += now_s() - t0;
            s->profile->calls[nd->op]++;
        }
    }
    if (st) {
        for (int32_t i = 0; i < p->n_states; i++) s->states[i].written = false;
        if (first_call) *s->profile = before;
        return st;
    }
    for (int32_t i = 0; i < p->n_states; i++) {
        sess_state *ss = &s->states[i];
        if (ss->written) ss->front = 1 - ss->front;
        ss->written = false;
    }
    if (s->profile) {
        s->profile->tokens += n;
        s->profile->call_seconds += now_s() - call_t0;
    }
    if (first_call) {
        *s->profile = before;
        s->profile->seen[fn] = true;
    }
    memcpy(s->logits, tensor_data(s, f->logits), (size_t)s->n_vocab * sizeof(float));
    memmove(s->history + s->pos, tokens, (size_t)n * sizeof(int32_t)); /* replays pass history itself */
    s->pos += n;
    s->logits_valid = true;
    return SLM_OK;
}

size_t sess_kv_row_bytes(const slm_session *s, int32_t i) {
    const g_state *gs = &s->prog->states[i];
    if (s->states[i].double_buffered || gs->pos_axis != gs->n_dims - 1) return 0;
    size_t row = gs->dtype == SLM_DTYPE_F16 ? 2 : 4;
    for (int d = 0; d < gs->n_dims - 1; d++) row *= (size_t)gs->alloc_ne[d];
    return row;
}

slm_status sess_feed(slm_session *s, const int32_t *tokens, int32_t n, bool atomic) {
    bool split = s->has_recurrent && s->ckpt_interval > 0;
    int32_t first = n;
    if (split && (s->pos % s->ckpt_interval) + n > s->ckpt_interval) first = s->ckpt_interval - s->pos % s->ckpt_interval;
    bool several = first < n;
    slm_status st = SLM_OK;
    if (atomic && several && (st = sess_undo_begin(s, s->pos))) return st;
    int32_t start = s->pos, done = 0;
    while (done < n) {
        int32_t len = n - done;
        if (split) {
            int32_t to_boundary = s->ckpt_interval - s->pos % s->ckpt_interval;
            if (len > to_boundary) len = to_boundary;
        }
        st = sess_run(s, len == 1 ? s->fn_decode : s->fn_prefill, tokens + done, len);
        if (st) break;
        done += len;
        if (split && s->pos % s->ckpt_interval == 0) sess_ckpt_take(s);
    }
    if (st) {
        if (atomic && several) {
            sess_undo_restore(s);
            sess_ckpt_drop_after(s, start);
        }
        return st;
    }
    if (s->has_recurrent && s->ckpt_at_prefill_end && n > 1) sess_ckpt_take(s);
    return SLM_OK;
}

slm_status sess_check_tokens(slm_session *s, const int32_t *tokens, size_t n) {
    if (n == 0) return err_set(&s->err, SLM_ERR_INVALID_ARG, "no tokens given");
    if (n > (size_t)(s->n_ctx - s->pos))
        return err_set(&s->err, SLM_ERR_CONTEXT_FULL, "%zu tokens do not fit: position %d of a %d-token context", n,
                       s->pos, s->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->n_token_ids)
            return err_set(&s->err, SLM_ERR_RANGE, "token id %d at index %zu is out of range [0, %d)", tokens[i], i,
                           s->n_token_ids);
    return SLM_OK;
}

SLM_API slm_status slm_session_prefill(slm_session *s, const int32_t *tokens, size_t n, const float **logits) {
    if (logits) *logits = NULL;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    if (!tokens && n) return err_set(&s->err, SLM_ERR_INVALID_ARG, "tokens is NULL");
    slm_status st = sess_check_tokens(s, tokens, n);
    if (st) return st;
    st = sess_feed(s, tokens, (int32_t)n, true);
    if (st == SLM_OK && logits) *logits = s->logits;
    return st;
}

SLM_API slm_status slm_session_decode(slm_session *s, int32_t token, const float **logits) {
    if (logits) *logits = NULL;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    slm_status st = sess_check_tokens(s, &token, 1);
    if (st) return st;
    st = sess_feed(s, &token, 1, true);
    if (st == SLM_OK && logits) *logits = s->logits;
    return st;
}
