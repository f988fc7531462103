/* batch.c — slm_session_decode_batch: one decode step for several sessions of one model in one
 * pass over the weights. It runs the plan of the function with logits for every column
 * ("verify", symbolic n) with n = B, one column per session:
 *  - a batched step (plan_step.batched: column-local, no state, no position) runs once over all B
 *    columns, on the arena of the leading session (sessions[0]: batch_plan, the memory plan of
 *    the function at n = B);
 *  - every other step runs B times, once per session at n = 1 on that session's own arena (its
 *    memory plan at n = 1), states and position.
 * Both memory plans come from the same steps, so a tensor may live in either arena anywhere in its
 * lifetime: before a per-session step, the columns of its inputs made by batched steps are copied
 * into each session's arena; after it, the outputs that batched steps read are copied back into
 * their columns. Which tensors cross, and the layer of every step, the plan records when it is
 * lowered (plan_step.cross, .layer; compile/lower.c): nothing here reads the IR's nodes. Column j of a batched step depends on column j of its inputs alone and the
 * kernels give every column the same bits whatever the count (batch invariance), so each session
 * gets the bits slm_session_decode gives it.
 * With B >= 2 sessions and at least as many as the lead's threads, a per-session step runs as one
 * job of the lead's backend whose tasks are the sessions: each task runs its session's step alone
 * on a one-thread backend of its thread (batch_serial: same kernels, so the same bits), touching
 * that session's arena, states and err only; a task runs a whole run of consecutive per-session
 * steps of one layer (their inputs from batched steps are all made before the run, their outputs
 * read by batched steps all read after it). Fewer sessions run one after another on the lead's
 * backend, each step spread over its threads. */
#include <pthread.h>
#include <string.h>

#include "runtime/session.h"

/* The lead's one-thread backends, one per thread of its backend. They allocate through locked, the
 * session's allocator behind a mutex: their scratch grows inside concurrent tasks, and the user's
 * allocator need not be thread-safe. */
struct batch_serial {
    slm_allocator inner;
    slm_allocator locked;
    pthread_mutex_t mu;
    int32_t n;
    backend **be; /* (n) */
};

static void *locked_alloc(void *user, size_t size) {
    struct batch_serial *bs = user;
    pthread_mutex_lock(&bs->mu);
    void *p = al_malloc(&bs->inner, size);
    pthread_mutex_unlock(&bs->mu);
    return p;
}

static void locked_free(void *user, void *ptr) {
    struct batch_serial *bs = user;
    pthread_mutex_lock(&bs->mu);
    al_free(&bs->inner, ptr);
    pthread_mutex_unlock(&bs->mu);
}

void sess_batch_serial_free(slm_session *s) {
    struct batch_serial *bs = s->batch_serial;
    if (!bs) return;
    for (int32_t t = 0; bs->be && t < bs->n; t++)
        if (bs->be[t]) bs->be[t]->vt->destroy(bs->be[t]);
    al_free(&bs->inner, bs->be);
    pthread_mutex_destroy(&bs->mu);
    al_free(&s->alloc, bs);
    s->batch_serial = NULL;
}

/* Makes the lead's one-thread backends (once). */
static slm_status bind_serial(slm_session *lead) {
    if (lead->batch_serial) return SLM_OK;
    struct batch_serial *bs = al_calloc(&lead->alloc, 1, sizeof *bs);
    if (!bs) return err_set(&lead->err, SLM_ERR_NOMEM, "out of memory");
    bs->inner = lead->alloc;
    bs->locked = (slm_allocator){locked_alloc, locked_free, bs};
    pthread_mutex_init(&bs->mu, NULL);
    lead->batch_serial = bs;
    int32_t n = lead->n_threads > 1 ? lead->n_threads : 1;
    if (!(bs->be = al_calloc(&bs->inner, (size_t)n, sizeof(backend *)))) {
        sess_batch_serial_free(lead);
        return err_set(&lead->err, SLM_ERR_NOMEM, "out of memory");
    }
    bs->n = n;
    for (int32_t t = 0; t < n; t++) {
        slm_status st = lead->be->vt->create_serial(lead->be, &bs->locked, &bs->be[t], &lead->err);
        if (st) {
            sess_batch_serial_free(lead);
            return st;
        }
    }
    return SLM_OK;
}

/* Per-session steps [first, end) of every session as tasks of one job, a task per session. */
typedef struct steps_job {
    slm_session *const *sessions;
    backend **serial; /* (threads of the lead's backend) */
    int32_t fn, first, end;
    slm_status *status; /* (B) */
} steps_job;

static void run_session_steps(void *ctx, int64_t task, int32_t thread) {
    const steps_job *j = ctx;
    slm_session *s = j->sessions[task];
    backend *own = s->be;
    s->be = j->serial[thread];
    slm_status st = SLM_OK;
    for (int32_t i = j->first; i < j->end && !st; i++) st = sess_run_step(s, j->fn, i, 1, s->pos);
    j->status[task] = st;
    s->be = own;
}

/* Binds the leading session's batch arena for a call over n columns. */
static slm_status bind_batch(slm_session *s, int32_t fn, int32_t n) {
    g_program *p = s->prog;
    memplan *mp = &s->batch_plan;
    slm_status st;
    if (mp->offset == NULL || mp->n != n) {
        if ((st = plan_memplan(s->plan, fn, n, mp, &s->err))) return st;
    }
    if (!s->batch_ptr && !(s->batch_ptr = al_calloc(&s->alloc, (size_t)p->n_tensors + 1, sizeof(void *))))
        return err_set(&s->err, SLM_ERR_NOMEM, "out of memory");
    if (mp->arena_bytes > s->batch_arena_bytes) {
        uint8_t *a = al_malloc_aligned(&s->alloc, mp->arena_bytes);
        if (!a) return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for %zu bytes of activations", mp->arena_bytes);
        al_free_aligned(&s->alloc, s->batch_arena);
        s->batch_arena = a;
        s->batch_arena_bytes = mp->arena_bytes;
    }
    for (int32_t t = 0; t < p->n_tensors; t++)
        s->batch_ptr[t] = mp->offset[t] != MEMPLAN_NONE ? s->batch_arena + mp->offset[t] : NULL;
    return SLM_OK;
}

/* Copies column i of the arena crossings of step ps (plan_step.cross: its inputs from the batch
 * arena of lead into the arena of s, or its outputs back). Tensors without bytes in both arenas
 * (direct_write values, values inside fused steps) are skipped. */
static void copy_columns(slm_session *lead, slm_session *s, int32_t fn, const plan_step *ps, bool inputs, int32_t i) {
    const g_program *p = s->prog;
    const int32_t *cross = s->plan->exec[fn].cross + ps->cross + (inputs ? 0 : ps->n_cross_in);
    for (int32_t k = 0; k < (inputs ? ps->n_cross_in : ps->n_cross_out); k++) {
        int32_t t = cross[k];
        if (lead->batch_plan.offset[t] == MEMPLAN_NONE || s->plans[fn].offset[t] == MEMPLAN_NONE) continue;
        size_t col = memplan_tensor_bytes(&p->tensors[t], 1);
        uint8_t *b = (uint8_t *)lead->batch_ptr[t] + (size_t)i * col, *own = s->tensor_ptr[t];
        if (inputs) memcpy(own, b, col);
        else memcpy(b, own, col);
    }
}

static bool any_abort(slm_session *const *sessions, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (sessions[i]->abort_fn && sessions[i]->abort_fn(sessions[i]->abort_user_data)) return true;
    return false;
}

/* Refuses a batch the call cannot run; names the session at fault. */
static slm_status check_batch(slm_session *const *sessions, const int32_t *tokens, size_t n, slm_err *e) {
    if (!sessions || !tokens || n == 0)
        return err_set(e, SLM_ERR_INVALID_ARG, "slm_session_decode_batch: sessions, tokens and n >= 1 are required");
    if (n > INT32_MAX) return err_set(e, SLM_ERR_INVALID_ARG, "%zu sessions are too many", n);
    for (size_t i = 0; i < n; i++)
        if (!sessions[i]) return err_set(e, SLM_ERR_INVALID_ARG, "session %zu is NULL", i);
    const slm_session *s0 = sessions[0];
    for (size_t i = 0; i < n; i++) {
        const slm_session *s = sessions[i];
        for (size_t j = 0; j < i; j++)
            if (sessions[j] == s) return err_set(e, SLM_ERR_INVALID_ARG, "session %zu is also session %zu", i, j);
        if (s->model != s0->model)
            return err_set(e, SLM_ERR_INVALID_ARG, "session %zu runs another model than session 0", i);
        if (s->n_ctx != s0->n_ctx)
            return err_set(e, SLM_ERR_INVALID_ARG, "session %zu has a %d-token context, session 0 %d", i, s->n_ctx,
                           s0->n_ctx);
        if (s->kv_dtype != s0->kv_dtype || s->kv_dtype_v != s0->kv_dtype_v)
            return err_set(e, SLM_ERR_INVALID_ARG, "session %zu holds %s K and %s V states, session 0 %s and %s", i,
                           slm_dtype_name(s->kv_dtype), slm_dtype_name(s->kv_dtype_v), slm_dtype_name(s0->kv_dtype),
                           slm_dtype_name(s0->kv_dtype_v));
        if (strcmp(s->be->vt->kernels(s->be), s0->be->vt->kernels(s0->be)) != 0)
            return err_set(e, SLM_ERR_INVALID_ARG, "session %zu runs the %s kernels, session 0 %s", i,
                           s->be->vt->kernels(s->be), s0->be->vt->kernels(s0->be));
        if (s->fn_verify < 0 || s->fn_verify != s0->fn_verify || s->prog->n_tensors != s0->prog->n_tensors ||
            s->plan->exec[s->fn_verify].n_steps != s0->plan->exec[s0->fn_verify].n_steps)
            return err_set(e, SLM_ERR_UNSUPPORTED, "session %zu has no plan for batched decoding like session 0's", i);
    }
    for (size_t i = 0; i < n; i++) {
        slm_session *s = sessions[i];
        slm_status st = sess_check_tokens(s, &tokens[i], 1);
        if (st) return err_set(e, st, "session %zu: %s", i, s->err.msg);
    }
    return SLM_OK;
}

SLM_API slm_status slm_session_decode_batch(slm_session *const *sessions, const int32_t *tokens, size_t n,
                                            const float **logits, char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (err && err_cap) err[0] = '\0';
    for (size_t i = 0; logits && i < n; i++) logits[i] = NULL;
    for (size_t i = 0; sessions && i < n; i++)
        if (sessions[i]) err_clear(&sessions[i]->err);
    slm_status *status = NULL; /* (n) per-session steps as tasks of one job; NULL: one after another */
    slm_status st = check_batch(sessions, tokens, n, &e);
    if (st) goto done;
    slm_session *lead = sessions[0];
    const g_program *p = lead->prog;
    const int32_t fn = lead->fn_verify, n_cols = (int32_t)n;
    const g_function *f = &p->functions[fn];
    const plan_fn_exec *x = &lead->plan->exec[fn];
    if ((st = bind_batch(lead, fn, n_cols))) {
        err_set(&e, st, "%s", lead->err.msg);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if ((st = sess_bind(sessions[i], fn, 1))) {
            err_set(&e, st, "session %zu: %s", i, sessions[i]->err.msg);
            goto done;
        }
        sessions[i]->verify_k = 0;
    }
    if (n >= 2 && n >= (size_t)lead->n_threads && lead->be->vt->run_tasks && lead->be->vt->create_serial) {
        if ((st = bind_serial(lead))) {
            err_set(&e, st, "%s", lead->err.msg);
            goto done;
        }
        if (!(status = al_calloc(&lead->alloc, n, sizeof *status))) {
            st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    memcpy(lead->batch_ptr[f->tokens], tokens, n * sizeof(int32_t));
    int32_t last_layer = -2;
    for (int32_t i = 0; i < x->n_steps && !st; i++) {
        const plan_step *ps = &x->steps[i];
        int32_t layer = ps->layer;
        if (layer != last_layer) {
            last_layer = layer;
            if (any_abort(sessions, n)) {
                st = err_set(&e, SLM_ERR_ABORTED, "aborted by the abort callback");
                break;
            }
        }
        if (ps->batched) {
            if (lead->trace) lead->trace(lead->trace_user, fn, i, ps->nodes, ps->n_nodes);
            void **own = lead->tensor_ptr; /* a batched step touches no state: the lead runs it on the batch arena */
            lead->tensor_ptr = lead->batch_ptr;
            st = sess_run_step(lead, fn, i, n_cols, 0);
            lead->tensor_ptr = own;
            if (st) err_set(&e, st, "%s", lead->err.msg);
            continue;
        }
        int32_t end = i + 1;
        while (status && end < x->n_steps && !x->steps[end].batched && x->steps[end].layer == layer) end++;
        for (int32_t k = i; k < end; k++)
            for (size_t b = 0; b < n; b++) copy_columns(lead, sessions[b], fn, &x->steps[k], true, (int32_t)b);
        if (status) {
            for (int32_t k = i; k < end; k++)
                for (size_t b = 0; b < n; b++)
                    if (sessions[b]->trace)
                        sessions[b]->trace(sessions[b]->trace_user, fn, k, x->steps[k].nodes, x->steps[k].n_nodes);
            steps_job job = {sessions, lead->batch_serial->be, fn, i, end, status};
            lead->be->vt->run_tasks(lead->be, (int64_t)n, run_session_steps, &job);
            for (size_t b = 0; b < n && !st; b++)
                if ((st = status[b])) err_set(&e, st, "session %zu: %s", b, sessions[b]->err.msg);
        }
        for (size_t b = 0; b < n && !st && !status; b++) {
            slm_session *s = sessions[b];
            if (s->trace) s->trace(s->trace_user, fn, i, ps->nodes, ps->n_nodes);
            /* on the lead's backend (same kernels, checked; a backend keeps nothing of a session
             * between nodes): one thread pool for the whole step, where each session's own pool
             * would keep its workers spinning on the same cores between its turns */
            backend *own = s->be;
            s->be = lead->be;
            if ((st = sess_run_step(s, fn, i, 1, s->pos))) err_set(&e, st, "session %zu: %s", b, s->err.msg);
            s->be = own;
        }
        for (int32_t k = i; k < end; k++)
            for (size_t b = 0; b < n && !st; b++)
                copy_columns(lead, sessions[b], fn, &x->steps[k], false, (int32_t)b);
        i = end - 1;
    }
    for (size_t b = 0; b < n; b++) sess_states_finish(sessions[b], st == SLM_OK);
    if (st) goto done;
    for (size_t b = 0; b < n; b++) {
        slm_session *s = sessions[b];
        const float *row = x->logits_batched ? (const float *)lead->batch_ptr[f->logits] + b * (size_t)s->n_vocab
                                           : (const float *)sess_tensor_data(s, f->logits);
        memcpy(s->logits, row, (size_t)s->n_vocab * sizeof(float));
        s->history[s->pos++] = tokens[b];
        s->logits_valid = true;
        if (s->has_recurrent && s->ckpt_interval > 0 && s->pos % s->ckpt_interval == 0) sess_ckpt_take(s);
        if (logits) logits[b] = s->logits;
    }
done:
    if (status) al_free(&sessions[0]->alloc, status);
    if (st) {
        for (size_t b = 0; sessions && b < n; b++)
            if (sessions[b]) err_set(&sessions[b]->err, st, "%s", e.msg);
        err_copy_out(&e, err, err_cap);
    }
    return st;
}
