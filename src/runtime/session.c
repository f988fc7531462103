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
#include "base/params.h"
#include "model/build.h"

SLM_API slm_session_params slm_session_params_default(void) {
    slm_session_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    return p;
}

/* Bytes of a state (rows of alloc_ne[0] elements: whole blocks for Q8_0/Q4_0 KV states). */
static size_t state_bytes(const g_state *st) {
    uint64_t row = 0;
    dtype_row_bytes(st->dtype, (uint64_t)st->alloc_ne[0], &row);
    size_t n = (size_t)row;
    for (int d = 1; d < 4; d++) n *= (size_t)st->alloc_ne[d];
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

slm_status sess_backend(const slm_model *model, const tgt_profile *t, int32_t n_threads, const char *kernels,
                        bool no_repack, backend **out, slm_err *e) {
    *out = NULL;
    int32_t kind = t->executable ? backend_kind_find(t->backend) : -1;
    if (kind < 0) return err_set(e, SLM_ERR_UNSUPPORTED, "target %s is not executable here: %s", t->name, t->executable_why);
    backend_params bp = {.kind = (backend_kind)kind,
                         .n_threads = n_threads > 0 ? n_threads : model ? model->n_threads : 1,
                         .kernels = kernels,
                         .no_repack = no_repack};
    slm_status st = backend_create(model ? &model->alloc : &al_default, &bp, out, e);
    if (st == SLM_OK && model && (st = share_model_cache(model, *out, e))) {
        (*out)->vt->destroy(*out);
        *out = NULL;
    }
    return st;
}

slm_status sess_create_plan(const slm_model *model, slm_plan *pl, backend *be, int32_t n_threads, slm_session **out,
                            slm_err *e) {
    *out = NULL;
    slm_status st;
    const slm_allocator *a = model ? &model->alloc : &al_default;
    slm_session *s = al_calloc(a, 1, sizeof *s);
    if (!s) {
        slm_plan_destroy(pl);
        be->vt->destroy(be);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    g_program *prog = pl->legal;
    s->model = model;
    s->alloc = *a;
    s->plan = pl;
    s->prog = prog;
    s->be = be;
    s->n_ctx = pl->n_ctx;
    s->kv_dtype = pl->kv_dtype;
    s->kv_dtype_v = pl->kv_dtype_v;
    s->n_threads = n_threads > 0 ? n_threads : model ? model->n_threads : 1;
    s->fn_decode = graph_find_function(prog, "decode");
    s->fn_prefill = graph_find_function(prog, "prefill");
    s->fn_verify = graph_find_function(prog, "verify");
    s->fn_embed = graph_find_function(prog, "embed");
    if (s->fn_decode < 0) {
        st = err_set(e, SLM_ERR_INVALID_ARG, "the program has no decode function");
        goto fail;
    }
    if (!pl->lowered || strcmp(pl->kernels, be->vt->kernels(be)) != 0) {
        st = err_set(e, SLM_ERR_INVALID_ARG, "the plan was compiled for the %s kernels, the session runs %s",
                     pl->kernels[0] ? pl->kernels : "(no backend)", be->vt->kernels(be));
        goto fail;
    }
    if (s->fn_prefill < 0) s->fn_prefill = s->fn_decode;
    s->n_vocab = (int32_t)g_ne(&prog->tensors[prog->functions[s->fn_decode].logits], 0, 1);
    s->n_token_ids = pl->n_token_ids;
    s->states = al_calloc(&s->alloc, (size_t)prog->n_states + 1, sizeof(sess_state));
    s->tensor_ptr = al_calloc(&s->alloc, (size_t)prog->n_tensors, sizeof(void *));
    s->history = al_calloc(&s->alloc, (size_t)s->n_ctx, sizeof(int32_t));
    s->logits = al_calloc(&s->alloc, (size_t)s->n_vocab, sizeof(float));
    if (!s->states || !s->tensor_ptr || !s->history || !s->logits) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t state_block_bytes = 0;
    for (int32_t i = 0; i < prog->n_states; i++) {
        const g_state *gs = &prog->states[i];
        sess_state *ss = &s->states[i];
        ss->ring = pl->state_ring[i];
        ss->bytes = state_bytes(gs);
        ss->double_buffered = plan_state_double_buffered(gs);
        if (sess_state_checkpointed(ss)) {
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
    if ((st = sess_ckpt_init(s, 0, 0, NULL, e))) goto fail;
    *out = s;
    return SLM_OK;
fail:
    slm_session_destroy(s);
    return st;
}

/* Compiles prog for the CPU target on a new backend and makes a session of it. */
static slm_status create_compiled(const slm_model *model, g_program *prog, int32_t n_threads, int32_t n_ctx,
                                  slm_dtype kv_dtype, const char *kernels, bool no_repack, slm_session **out,
                                  slm_err *e) {
    *out = NULL;
    const tgt_profile *t = tgt_find("cpu");
    backend *be = NULL;
    slm_plan *pl = NULL;
    slm_status st = sess_backend(model, t, n_threads, kernels, no_repack, &be, e);
    if (st) {
        graph_destroy(prog);
        return st;
    }
    if ((st = plan_create_program(model, prog, t, n_ctx, kv_dtype, 0, be, &pl, e))) {
        be->vt->destroy(be);
        return st;
    }
    return sess_create_plan(model, pl, be, n_threads, out, e);
}

slm_status sess_create_program(const slm_model *model, g_program *prog, int32_t n_threads, int32_t n_ctx,
                               slm_dtype kv_dtype, const char *kernels, slm_session **out, slm_err *e) {
    return create_compiled(model, prog, n_threads, n_ctx, kv_dtype, kernels, false, out, e);
}

/* Checkpoints and the abort callback from the public params. */
static slm_status apply_params(slm_session *s, const slm_session_params *p, slm_err *e) {
    s->abort_fn = p->abort_fn;
    s->abort_user_data = p->abort_user_data;
    return sess_ckpt_init(s, p->checkpoint_interval, p->checkpoint_budget_mib, p->checkpoint_dir, e);
}

static slm_session_params params_or_default(const slm_session_params *params) {
    slm_session_params p = slm_session_params_default();
    params_read(&p, sizeof p, params);
    return p;
}

SLM_API slm_status slm_session_create(const slm_model *model, const slm_session_params *params, slm_session **out,
                                      char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (out) *out = NULL;
    if (err && err_cap) err[0] = '\0';
    slm_status st = SLM_OK;
    slm_session_params p = params_or_default(params);
    int32_t n_ctx = model && p.n_ctx == 0 ? slm_model_n_ctx_default(model) : p.n_ctx;
    slm_dtype kv = SLM_DTYPE_F16, kv_v = SLM_DTYPE_F16;
    int bad_val = 0;
    const char *bad_kv = params_kv_dtypes(p.kv_type, p.kv_type_k, p.kv_type_v, &kv, &kv_v, &bad_val);
    g_program *prog = NULL;
    if (!model || !out) st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_session_create: model and out are required");
    else if (bad_kv)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "%s %d is none of " PARAMS_KV_NAMES, bad_kv, bad_val);
    else if (n_ctx < 1 || n_ctx > (1 << 24))
        st = err_set(&e, SLM_ERR_INVALID_ARG, "n_ctx %d is out of range [1, %d]", n_ctx, 1 << 24);
    else if (p.mtp && model->hp.n_nextn < 1)
        st = err_set(&e, SLM_ERR_UNSUPPORTED, "the model has no multi-token-prediction block (mtp needs a Qwen3.5 "
                     "model converted with it: qwen35.nextn_predict_layers)");
    else if ((st = mdl_build_program_ex(model, n_ctx, kv, kv_v, p.embeddings, p.mtp, &prog, &e)) == SLM_OK)
        st = create_compiled(model, prog, p.n_threads, n_ctx, kv, p.kernels, p.no_repack, out, &e);
    if (st == SLM_OK && p.mtp) {
        (*out)->mtp_embd = model->hp.n_embd;
        (*out)->mtp_hist = al_malloc_aligned(&(*out)->alloc, (size_t)n_ctx * (size_t)model->hp.n_embd * sizeof(float));
        if (!(*out)->mtp_hist) {
            st = err_set(&e, SLM_ERR_NOMEM, "out of memory for the MTP hidden states");
            slm_session_destroy(*out);
            *out = NULL;
        }
    }
    if (st == SLM_OK && (st = apply_params(*out, &p, &e))) {
        slm_session_destroy(*out);
        *out = NULL;
    }
    err_copy_out(&e, err, err_cap);
    return st;
}

SLM_API slm_status slm_session_create_from_plan(const slm_model *model, const slm_plan *plan,
                                                const slm_session_params *params, slm_session **out, char *err,
                                                size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (out) *out = NULL;
    if (err && err_cap) err[0] = '\0';
    slm_session_params p = params_or_default(params);
    slm_status st = SLM_OK;
    slm_dtype kv = SLM_DTYPE_F16, kv_v = SLM_DTYPE_F16;
    int bad_val = 0;
    const char *bad_kv = params_kv_dtypes(p.kv_type, p.kv_type_k, p.kv_type_v, &kv, &kv_v, &bad_val);
    bool kv_given = p.kv_type != SLM_KV_DEFAULT || p.kv_type_k != SLM_KV_DEFAULT || p.kv_type_v != SLM_KV_DEFAULT;
    uint8_t fm[16] = {0}, fp[16] = {0};
    if (model) slm_model_fingerprint(model, fm);
    if (plan && plan->model) slm_model_fingerprint(plan->model, fp);
    const char *kernels = p.kernels && *p.kernels && strcmp(p.kernels, "auto") ? p.kernels : NULL;
    if (!model || !plan || !out)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_session_create_from_plan: model, plan and out are required");
    else if (!plan->model || memcmp(fm, fp, sizeof fm) != 0)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "the plan was compiled for another model (fingerprints differ)");
    else if (!plan->target->executable)
        st = err_set(&e, SLM_ERR_UNSUPPORTED, "a plan for target %s cannot run here: %s", plan->target->name,
                     plan->target->executable_why);
    else if (p.n_ctx != 0 && p.n_ctx != plan->n_ctx)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "the plan was compiled for a %d-token context, not %d", plan->n_ctx, p.n_ctx);
    else if (bad_kv)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "%s %d is none of " PARAMS_KV_NAMES, bad_kv, bad_val);
    else if (kv_given && (kv != plan->kv_dtype || kv_v != plan->kv_dtype_v))
        st = err_set(&e, SLM_ERR_INVALID_ARG, "the plan was compiled for KV states of %s K and %s V, not %s K and %s V",
                     slm_dtype_name(plan->kv_dtype), slm_dtype_name(plan->kv_dtype_v), slm_dtype_name(kv),
                     slm_dtype_name(kv_v));
    else if (kernels && strcmp(kernels, plan->kernels) != 0)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "the plan was compiled for the %s kernels, not %s", plan->kernels, kernels);
    if (st == SLM_OK) {
        backend *be = NULL;
        slm_plan *copy = NULL;
        if ((st = sess_backend(model, plan->target, p.n_threads, plan->kernels, p.no_repack, &be, &e)) == SLM_OK) {
            if (!(copy = plan_clone_exec(plan))) {
                be->vt->destroy(be);
                st = err_set(&e, SLM_ERR_NOMEM, "out of memory copying the plan");
            } else {
                copy->model = model;
                st = sess_create_plan(model, copy, be, p.n_threads, out, &e);
            }
        }
    }
    if (st == SLM_OK && (st = apply_params(*out, &p, &e))) {
        slm_session_destroy(*out);
        *out = NULL;
    }
    err_copy_out(&e, err, err_cap);
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

SLM_API void slm_session_destroy(slm_session *s) {
    if (!s) return;
    slm_allocator a = s->alloc;
    sess_profile_free(s);
    al_free_aligned(&a, s->state_block);
    for (int f = 0; s->prog && f < G_MAX_FUNCTIONS; f++) memplan_free(s->prog, &s->plans[f]);
    sess_ckpt_free(s);
    al_free(&a, s->undo);
    al_free(&a, s->undo_kv);
    al_free(&a, s->states);
    al_free(&a, s->tensor_ptr);
    al_free(&a, s->history);
    al_free(&a, s->logits);
    al_free_aligned(&a, s->mtp_hist);
    al_free(&a, s->verify_state);
    al_free(&a, s->verify_front);
    al_free(&a, s->verify_logits);
    al_free_aligned(&a, s->arena);
    if (s->prog) memplan_free(s->prog, &s->batch_plan);
    al_free_aligned(&a, s->batch_arena);
    al_free(&a, s->batch_ptr);
    sess_batch_serial_free(s);
    if (s->be) s->be->vt->destroy(s->be);
    slm_plan_destroy(s->plan);
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
    s->verify_k = 0;
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

static bool write_is_full(const g_program *p, const g_node *nd, int64_t n, int64_t pos) {
    const g_state *st = &p->states[nd->p.write.state];
    const g_tensor *v = &p->tensors[nd->in[0]];
    for (int d = 0; d < 4; d++)
        if (g_affine_eval(nd->p.write.begin[d], n, pos) != 0 || g_ne(v, d, n) != st->ne[d]) return false;
    return true;
}

static const g_node *step_node(const slm_session *s, const g_function *f, const plan_step *ps, int32_t k) {
    return &s->prog->nodes[f->nodes[ps->nodes[k]]];
}

/* A fused step the backend refused at run time although it took it at compile time. */
static slm_status refused(slm_err *e, slm_status st, const char *what) {
    if (st != SLM_ERR_UNSUPPORTED) return st;
    return err_set(e, SLM_ERR_BACKEND, "the backend refused the planned %s", what);
}

/* PLAN_STEP_MATMUL_GROUP: the MATMULs of ps as one backend job. */
static slm_status run_matmul_group(slm_session *s, const g_function *f, const plan_step *ps, int64_t n, slm_err *e) {
    be_view out[PLAN_STEP_MAX_NODES], in[2 * PLAN_STEP_MAX_NODES];
    size_t scratch = 0;
    for (int32_t j = 0; j < ps->n_nodes; j++) {
        const g_node *nd = step_node(s, f, ps, j);
        bind_view(s, nd->in[0], n, &in[2 * j]);
        bind_view(s, nd->in[1], n, &in[2 * j + 1]);
        bind_view(s, nd->out[0], n, &out[j]);
        size_t need = s->be->vt->scratch_bytes(s->be, nd, &out[j], &in[2 * j]);
        if (need > scratch) scratch = need;
    }
    for (int32_t j = 0; j < ps->n_nodes; j++) { /* memplan's step lifetimes rule this out */
        bool overlap = views_overlap(&out[j], &in[1]);
        for (int32_t k = 0; k < j; k++) overlap |= views_overlap(&out[j], &out[k]);
        if (overlap) return err_set(e, SLM_ERR_BACKEND, "matmul group output %d overlaps its operands", j);
    }
    slm_status st;
    if (scratch && (st = s->be->vt->reserve_scratch(s->be, scratch, e))) return st;
    return refused(e, s->be->vt->exec_matmul_group(s->be, ps->n_nodes, out, in, e), "matmul group");
}

/* PLAN_STEP_CONV_STEP: CONCAT, SLICE (into the state's back buffer), COMMIT, CONV1D [, SILU], its
 * operands by role. */
static slm_status run_conv_step(slm_session *s, const plan_step *ps, int64_t n, slm_err *e) {
    be_view in[3], out[2];
    bind_view(s, ps->operand[PLAN_ROLE_STATE], n, &in[0]);
    bind_view(s, ps->operand[PLAN_ROLE_X], n, &in[1]);
    bind_view(s, ps->operand[PLAN_ROLE_WEIGHT], n, &in[2]);
    bind_view(s, ps->operand[PLAN_ROLE_OUT], n, &out[0]);
    bind_view(s, ps->operand[PLAN_ROLE_NEXT], n, &out[1]); /* the state's back buffer (direct_write) */
    if (out[0].data != in[1].data && views_overlap(&out[0], &in[1]))
        return err_set(e, SLM_ERR_BACKEND, "conv step output overlaps its input");
    slm_status st = refused(e, s->be->vt->exec_conv_step(s->be, out, in, ps->silu, e), "conv step");
    if (st == SLM_OK) (void)state_for_write(s, ps->state, true);
    return st;
}

/* PLAN_STEP_NODE: one node on the backend, with the plan's kernel; a step that writes a state
 * (ps->state) gets the state's storage as its output. */
static slm_status run_node(slm_session *s, const plan_step *ps, const g_node *nd, const be_call *call, slm_err *e) {
    be_view in[G_MAX_IN], out[G_MAX_OUT];
    for (int k = 0; k < nd->n_in; k++) bind_view(s, nd->in[k], call->n, &in[k]);
    if (ps->state >= 0) {
        const g_state *gs = &s->prog->states[ps->state];
        out[0].dtype = gs->dtype;
        out[0].n_dims = gs->n_dims;
        for (int d = 0; d < 4; d++) out[0].ne[d] = gs->alloc_ne[d];
        out[0].data = state_for_write(s, ps->state, write_is_full(s->prog, nd, call->n, call->pos));
    } else {
        for (int k = 0; k < nd->n_out; k++) bind_view(s, nd->out[k], call->n, &out[k]);
    }
    size_t scratch = s->be->vt->scratch_bytes(s->be, nd, out, in);
    slm_status st;
    if (scratch && (st = s->be->vt->reserve_scratch(s->be, scratch, e))) return st;
    return s->be->vt->exec(s->be, nd, out, in, call, e);
}

/* Runs step ps of function f. */
static slm_status run_step(slm_session *s, const g_function *f, const plan_step *ps, be_call *call, slm_err *e) {
    switch (ps->kind) {
    case PLAN_STEP_VIEW: /* a RESHAPE's view needs no binding; a state's view is the state as of now */
        if (ps->state >= 0) s->tensor_ptr[ps->operand[PLAN_ROLE_STATE]] = state_current(s, ps->state);
        return SLM_OK;
    case PLAN_STEP_COMMIT: (void)state_for_write(s, ps->state, true); return SLM_OK;
    case PLAN_STEP_MATMUL_GROUP: return run_matmul_group(s, f, ps, call->n, e);
    case PLAN_STEP_CONV_STEP: return run_conv_step(s, ps, call->n, e);
    case PLAN_STEP_NODE: call->kernel = ps->kernel; return run_node(s, ps, step_node(s, f, ps, 0), call, e);
    }
    return err_set(e, SLM_ERR_BACKEND, "unknown plan step kind %d", (int)ps->kind);
}

slm_status sess_bind(slm_session *s, int32_t fn, int32_t n) {
    g_program *p = s->prog;
    memplan *mp = &s->plans[fn];
    slm_status st;
    if (mp->offset == NULL || mp->n != n) {
        if ((st = plan_memplan(s->plan, fn, n, mp, &s->err))) return st;
    }
    if (mp->arena_bytes > s->arena_bytes) {
        uint8_t *a = al_malloc_aligned(&s->alloc, mp->arena_bytes);
        if (!a) return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for %zu bytes of activations", mp->arena_bytes);
        al_free_aligned(&s->alloc, s->arena);
        s->arena = a;
        s->arena_bytes = mp->arena_bytes;
    }
    const int32_t *tensor_state = s->plan->tensor_state;
    for (int32_t t = 0; t < p->n_tensors; t++) {
        s->tensor_ptr[t] = mp->offset[t] != MEMPLAN_NONE ? s->arena + mp->offset[t] : NULL;
        int32_t si = tensor_state[t];
        if (si >= 0 && p->tensors[t].fn == fn) s->tensor_ptr[t] = s->states[si].buf[1 - s->states[si].front];
    }
    for (int32_t i = 0; i < p->n_states; i++) s->states[i].written = false;
    return SLM_OK;
}

slm_status sess_run_step(slm_session *s, int32_t fn, int32_t i, int64_t n, int32_t pos) {
    be_call call = {n, pos, 0};
    return run_step(s, &s->prog->functions[fn], &s->plan->exec[fn].steps[i], &call, &s->err);
}

void sess_states_finish(slm_session *s, bool commit) {
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        sess_state *ss = &s->states[i];
        if (commit && ss->written) ss->front = 1 - ss->front;
        ss->written = false;
    }
}

void *sess_tensor_data(slm_session *s, int32_t t) { return tensor_data(s, t); }

slm_status sess_run(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n) {
    g_program *p = s->prog;
    const g_function *f = &p->functions[fn];
    const plan_fn_exec *x = &s->plan->exec[fn];
    slm_err *e = &s->err;
    slm_status st;
    s->verify_k = 0; /* any call ends what slm_session_accept could accept */
    if ((st = sess_bind(s, fn, n))) return st;
    memcpy(s->tensor_ptr[f->tokens], tokens, (size_t)n * sizeof(int32_t));
    be_call call = {n, s->pos, 0};
    sess_profile *pf = s->profile && s->profile->recording && s->profile->n_calls[fn] < s->profile->cap_calls
                           ? s->profile
                           : NULL;
    double *times = pf ? pf->step_s[fn] + (size_t)pf->n_calls[fn] * (size_t)x->n_steps : NULL;
    double call_t0 = pf ? now_s() : 0;
    int32_t last_layer = -2;
    st = SLM_OK;
    for (int32_t i = 0; i < x->n_steps && !st; i++) {
        const plan_step *ps = &x->steps[i];
        int32_t layer = step_node(s, f, ps, 0)->layer;
        if (layer != last_layer) {
            last_layer = layer;
            if (s->abort_fn && s->abort_fn(s->abort_user_data)) {
                st = err_set(e, SLM_ERR_ABORTED, "aborted by the abort callback");
                break;
            }
        }
        if (s->trace) s->trace(s->trace_user, fn, i, ps->nodes, ps->n_nodes);
        double t0 = pf ? now_s() : 0;
        st = run_step(s, f, ps, &call, e);
        if (pf) times[i] = now_s() - t0;
    }
    sess_states_finish(s, st == SLM_OK);
    if (st) return st;
    if (pf) pf->call_s[fn][pf->n_calls[fn]++] = now_s() - call_t0;
    if (s->mtp_hist && f->aux >= 0)
        memcpy(s->mtp_hist + (size_t)s->pos * (size_t)s->mtp_embd, tensor_data(s, f->aux),
               (size_t)n * (size_t)s->mtp_embd * sizeof(float));
    if (f->output == G_OUT_LOGITS) {
        int64_t n_rows = g_ne(&p->tensors[f->logits], 1, n); /* 1, or n for "verify" */
        memcpy(s->logits, (const float *)tensor_data(s, f->logits) + (size_t)(n_rows - 1) * (size_t)s->n_vocab,
               (size_t)s->n_vocab * sizeof(float));
    }
    memmove(s->history + s->pos, tokens, (size_t)n * sizeof(int32_t)); /* replays pass history itself */
    s->pos += n;
    s->logits_valid = f->output == G_OUT_LOGITS;
    return SLM_OK;
}

const float *sess_call_logits(slm_session *s, int32_t fn) { return tensor_data(s, s->prog->functions[fn].logits); }

/* Offset of checkpointed state i in a checkpoint image (runtime/state.c's layout). */
static size_t ckpt_offset(const slm_session *s, int32_t i) {
    size_t off = 0;
    for (int32_t j = 0; j < i; j++)
        if (sess_state_checkpointed(&s->states[j])) off += s->states[j].bytes;
    return off;
}

/* The state r->state as the verify call found it: in before (checkpoint layout), or with before
 * NULL its back buffer when the call wrote it (flipped its front), else its front. */
static const uint8_t *state_before(const slm_session *s, const plan_rebuild *r, const uint8_t *before) {
    const sess_state *ss = &s->states[r->state];
    if (before) return before + ckpt_offset(s, r->state);
    return ss->buf[ss->front != s->verify_front[r->state] ? 1 - ss->front : ss->front];
}

/* CONV_WINDOW: state r->state after the first n_keep columns of the call: the last K - 1 columns of
 * (state before ++ x[:, :n_keep]) into its back buffer. Column j comes from column n_keep + j >= j
 * of the state before, so the copy runs in place when that is the back buffer. */
static void rebuild_conv_window(slm_session *s, const plan_rebuild *r, const uint8_t *before, int32_t n_keep) {
    const g_state *gs = &s->prog->states[r->state];
    sess_state *ss = &s->states[r->state];
    size_t col = ss->bytes / (size_t)gs->ne[1];
    int64_t km1 = gs->ne[1];
    const uint8_t *old = state_before(s, r, before), *x = tensor_data(s, r->operand[PLAN_ROLE_X]);
    uint8_t *dst = ss->buf[1 - ss->front];
    for (int64_t j = 0; j < km1; j++) {
        int64_t c = n_keep + j;
        memmove(dst + (size_t)j * col, c < km1 ? old + (size_t)c * col : x + (size_t)(c - km1) * col, col);
    }
}

/* Binds the node of RECURRENCE step r over the first n_keep columns of its inputs: the state input
 * to the state before (backends take a DELTANET whose state input is its next-state output), the
 * next state to the back buffer, the other output to o_buf; operands by role. */
static const g_node *bind_recurrence(slm_session *s, const plan_rebuild *r, const uint8_t *before, int32_t n_keep,
                                     uint8_t *o_buf, be_view *in, be_view *out) {
    const g_node *nd = &s->prog->nodes[s->prog->functions[s->plan->accept.fn].nodes[r->node]];
    sess_state *ss = &s->states[r->state];
    for (int k = 0; k < nd->n_in; k++) {
        bind_view(s, nd->in[k], n_keep, &in[k]);
        if (nd->in[k] == r->operand[PLAN_ROLE_STATE]) in[k].data = (void *)state_before(s, r, before);
    }
    for (int k = 0; k < nd->n_out; k++) {
        bind_view(s, nd->out[k], n_keep, &out[k]);
        if (nd->out[k] == r->operand[PLAN_ROLE_OUT]) out[k].data = o_buf;
        if (nd->out[k] == r->operand[PLAN_ROLE_NEXT]) out[k].data = ss->buf[1 - ss->front];
    }
    return nd;
}

slm_status sess_run_accept(slm_session *s, const uint8_t *before, int32_t pos, int32_t n_keep) {
    const plan_accept *a = &s->plan->accept;
    const g_program *p = s->prog;
    slm_err *e = &s->err;
    if (a->replay || a->fn < 0) return err_set(e, SLM_ERR_STATE, "the accept plan replays: nothing to rebuild");
    be_view in[G_MAX_IN], out[G_MAX_OUT];
    size_t o_bytes = 0, scratch = 0;
    for (int32_t i = 0; i < a->n_steps; i++) {
        const plan_rebuild *r = &a->steps[i];
        if (r->kind != PLAN_REBUILD_RECURRENCE) continue;
        size_t ob = (size_t)g_nelements(&p->tensors[r->operand[PLAN_ROLE_OUT]], n_keep) * sizeof(float);
        if (ob > o_bytes) o_bytes = ob;
        const g_node *nd = bind_recurrence(s, r, before, n_keep, NULL, in, out);
        size_t need = s->be->vt->scratch_bytes(s->be, nd, out, in);
        if (need > scratch) scratch = need;
    }
    /* everything that can run out of memory first: no state is touched before */
    uint8_t *o_buf = NULL;
    slm_status st = SLM_OK;
    if (o_bytes && !(o_buf = al_malloc_aligned(&s->alloc, o_bytes))) st = err_set(e, SLM_ERR_NOMEM, "out of memory");
    if (!st && scratch) st = s->be->vt->reserve_scratch(s->be, scratch, e);
    bool touched = false;
    /* into the back buffers; the fronts flip only when every state is rebuilt */
    for (int32_t i = 0; i < a->n_steps && !st; i++) {
        const plan_rebuild *r = &a->steps[i];
        if (s->trace) s->trace(s->trace_user, PLAN_FN_ACCEPT, i, &r->node, 1);
        touched = true;
        if (r->kind == PLAN_REBUILD_CONV_WINDOW) {
            rebuild_conv_window(s, r, before, n_keep);
            continue;
        }
        const g_node *nd = bind_recurrence(s, r, before, n_keep, o_buf, in, out);
        be_call call = {n_keep, pos, r->kernel};
        st = s->be->vt->exec(s->be, nd, out, in, &call, e);
    }
    if (!st)
        for (int32_t i = 0; i < a->n_steps; i++) {
            sess_state *ss = &s->states[a->steps[i].state];
            ss->front = 1 - ss->front;
        }
    else if (touched && !before)
        s->verify_k = 0;
    al_free_aligned(&s->alloc, o_buf);
    return st;
}

size_t sess_kv_row_bytes(const slm_session *s, int32_t i) {
    const g_state *gs = &s->prog->states[i];
    if (sess_state_checkpointed(&s->states[i]) || gs->pos_axis != gs->n_dims - 1) return 0;
    uint64_t row0 = 0;
    dtype_row_bytes(gs->dtype, (uint64_t)gs->alloc_ne[0], &row0);
    size_t row = (size_t)row0;
    for (int d = 1; d < gs->n_dims - 1; d++) row *= (size_t)gs->alloc_ne[d];
    return row;
}

slm_status sess_feed(slm_session *s, const int32_t *tokens, int32_t n, bool atomic) {
    return sess_feed_fn(s, -1, tokens, n, atomic, NULL, NULL);
}

slm_status sess_feed_fn(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n, bool atomic,
                        sess_after_call_fn after, void *user) {
    bool split = s->has_recurrent && s->ckpt_interval > 0;
    int32_t first = n, max_call = s->prog->max_call_tokens;
    if (split && (s->pos % s->ckpt_interval) + n > s->ckpt_interval) first = s->ckpt_interval - s->pos % s->ckpt_interval;
    if (max_call > 0 && first > max_call) first = max_call;
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
        if (max_call > 0 && len > max_call) len = max_call;
        int32_t call_fn = fn >= 0 ? fn : len == 1 ? s->fn_decode : s->fn_prefill;
        st = sess_run(s, call_fn, tokens + done, len);
        if (st) break;
        if (after) after(user, s, call_fn, done, len);
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
