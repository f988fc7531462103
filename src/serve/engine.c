/* engine.c — the serving engine's requests and stepping (include/statelm_engine.h; the insides
 * are described in src/serve/engine.h): submit and cancel from any thread, a request's events and
 * its one DONE, one step over every stream, the engine's own thread, create and free. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/params.h"
#include "model/model.h"
#include "serve/engine.h"

/* ---- requests -------------------------------------------------------------------------------- */

static void request_free(request *r) {
    const slm_allocator *a = r->a;
    for (int32_t i = 0; i < SLM_ENGINE_MAX_N; i++) {
        buf_free(&r->choices[i].text);
        al_free(a, r->choices[i].lps);
        al_free(a, r->choices[i].ids);
    }
    for (int32_t i = 0; i < r->n_stops; i++) al_free(a, r->stops[i]);
    al_free(a, (void *)(uintptr_t)r->sp.logit_bias);
    al_free(a, r->prompt);
    al_free(a, r);
}

void eng_request_unref(request *r) {
    if (--r->refs == 0) request_free(r);
}

/* Sends r's DONE (once), with outcome and message; stepping thread, mu not held. */
void eng_request_finish(slm_engine *e, request *r, slm_engine_outcome outcome, slm_status status,
                           const char *msg) {
    if (r->done) return;
    r->done = true;
    r->outcome = outcome;
    r->status = status;
    snprintf(r->message, sizeof r->message, "%s", msg ? msg : "");
    pthread_mutex_lock(&e->mu);
    if (r->live_prev) r->live_prev->live_next = r->live_next;
    else e->live = r->live_next;
    if (r->live_next) r->live_next->live_prev = r->live_prev;
    if (outcome == SLM_ENGINE_DONE_OK) e->st.n_completed++;
    else if (outcome == SLM_ENGINE_DONE_CANCELLED) e->st.n_cancelled++;
    else e->st.n_failed++;
    pthread_mutex_unlock(&e->mu);
    slm_engine_event ev = {0};
    ev.kind = SLM_ENGINE_EVENT_DONE;
    ev.request = r->id;
    ev.outcome = outcome;
    ev.status = status;
    ev.message = r->message;
    ev.n_prompt = r->n_prompt;
    ev.n_cached = r->cached_tokens;
    r->on_event(r->user, &ev);
    eng_request_unref(r); /* the reference held until DONE */
}

void eng_request_fail(slm_engine *e, request *r, slm_status status, const char *msg) {
    eng_request_finish(e, r, SLM_ENGINE_DONE_FAILED, status, msg);
}

/* The CHOICE event of choice ci; nothing once DONE was sent. */
void eng_send_choice(request *r, int32_t ci, size_t n_stable) {
    if (r->done) return;
    const choice *c = &r->choices[ci];
    slm_engine_event ev = {0};
    ev.kind = SLM_ENGINE_EVENT_CHOICE;
    ev.request = r->id;
    ev.choice = ci;
    ev.text = c->text.p ? c->text.p : "";
    ev.n_text = c->text.n;
    ev.n_stable = n_stable;
    ev.ids = c->ids;
    ev.n_ids = c->n_ids;
    ev.ids_cut = c->ids_cut;
    ev.logprobs = c->lps;
    ev.n_tokens = c->n_tokens;
    ev.n_logprobs = r->logprobs ? c->n_tokens : 0;
    ev.finish = c->finish;
    r->on_event(r->user, &ev);
}

/* ---- stepping -------------------------------------------------------------------------------- */

/* Admits queued requests into idle slots (or, stopping, ends them all). */
static void admit_queued(slm_engine *e) {
    for (;;) {
        pthread_mutex_lock(&e->mu);
        bool stopping = e->stopping;
        request *r = e->queue_head;
        if (!r || (!stopping && e->st.n_busy >= e->p.n_slots)) {
            pthread_mutex_unlock(&e->mu);
            return;
        }
        e->queue_head = r->next;
        if (!e->queue_head) e->queue_tail = NULL;
        e->queue_len--;
        bool cancelled = r->cancelled;
        if (!stopping && !cancelled) e->st.n_busy++;
        pthread_mutex_unlock(&e->mu);
        r->refs--; /* the queue's */
        if (stopping) {
            eng_request_finish(e, r, SLM_ENGINE_DONE_SHUTDOWN, SLM_ERR_ABORTED, "the engine is stopping");
            continue;
        }
        if (cancelled) {
            eng_request_finish(e, r, SLM_ENGINE_DONE_CANCELLED, SLM_OK, NULL);
            continue;
        }
        stream *st = eng_admit(e, r);
        if (!st) { /* n_busy < n_slots: cannot happen */
            pthread_mutex_lock(&e->mu);
            e->st.n_busy--;
            pthread_mutex_unlock(&e->mu);
            eng_request_fail(e, r, SLM_ERR_STATE, "no idle slot");
            continue;
        }
        pthread_mutex_lock(&e->mu);
        st->busy = true;
        pthread_mutex_unlock(&e->mu);
        if (!eng_stream_begin(e, st, r, 0)) {
            eng_request_fail(e, r, SLM_ERR_NOMEM, "cannot start the generation");
            eng_stream_end(e, st);
        }
    }
}

/* Whether st's request ended or must end now (cancelled, failed, or the engine stopping). */
static bool stream_dead(slm_engine *e, stream *st) {
    pthread_mutex_lock(&e->mu);
    bool cancelled = st->r->cancelled, stopping = e->stopping;
    pthread_mutex_unlock(&e->mu);
    request *r = st->r;
    if (r->done) return true;
    if (cancelled) eng_request_finish(e, r, SLM_ENGINE_DONE_CANCELLED, SLM_OK, NULL);
    else if (stopping) eng_request_finish(e, r, SLM_ENGINE_DONE_SHUTDOWN, SLM_ERR_ABORTED, "the engine is stopping");
    return cancelled || stopping;
}

/* The pending slot operation, on the stepping thread; its outcome goes to e->op_*. */
static void run_slot_op(slm_engine *e) {
    pthread_mutex_lock(&e->mu);
    bool pending = e->op_pending;
    pthread_mutex_unlock(&e->mu);
    if (!pending) return;
    stream *st = &e->slots[e->op_slot];
    slm_status status = SLM_OK;
    size_t n = 0;
    char msg[256] = "";
    if (st->r) {
        status = SLM_ERR_STATE;
        snprintf(msg, sizeof msg, "slot %d is generating", e->op_slot);
    } else if (e->op_action == SLM_ENGINE_SLOT_ERASE) {
        slm_session_history(st->s, &n);
        slm_session_reset(st->s);
    } else {
        status = e->op_action == SLM_ENGINE_SLOT_SAVE ? slm_session_save(st->s, e->op_path)
                                                      : slm_session_load(st->s, e->op_path);
        if (status == SLM_OK) slm_session_history(st->s, &n);
        else snprintf(msg, sizeof msg, "%s", slm_session_errmsg(st->s));
    }
    pthread_mutex_lock(&e->mu);
    e->op_status = status;
    e->op_n = n;
    snprintf(e->op_msg, sizeof e->op_msg, "%s", msg);
    e->op_pending = false;
    pthread_cond_broadcast(&e->op_cv);
    pthread_mutex_unlock(&e->mu);
}

/* One step; returns the requests still queued or running. */
static int32_t step(slm_engine *e) {
    run_slot_op(e);
    admit_queued(e);
    int32_t n_all = e->p.n_slots + e->n_forks, n_dec = 0;
    for (int32_t i = 0; i < n_all; i++) {
        stream *st = e->all[i];
        if (!st->r) continue;
        if (stream_dead(e, st)) {
            eng_stream_end(e, st);
            continue;
        }
        if (st->n_fed < st->r->n_prompt) {
            if (!eng_prefill_step(e, st)) eng_stream_end(e, st);
            else if (st->n_fed == st->r->n_prompt && !st->own_session) eng_fork_choices(e, st);
            continue;
        }
        if (!st->spec && eng_spec_wanted(e, st) && !eng_spec_begin(e, st)) {
            eng_stream_end(e, st);
            continue;
        }
        if (st->spec && slm_session_pos(st->s) < e->n_ctx) {
            if (!eng_spec_step(e, st)) eng_stream_end(e, st);
            continue;
        }
        if (eng_sample_step(e, st)) e->dec[n_dec++] = st;
        else eng_stream_end(e, st);
    }
    if (n_dec) eng_decode_all(e, e->dec, n_dec);
    /* a decode that failed its request leaves the stream to end at the next step */
    int32_t n_active = 0;
    for (int32_t i = 0; i < n_all; i++) n_active += e->all[i]->r != NULL;
    size_t n_files = 0;
    for (size_t i = 0; i < e->n_cache; i++) n_files += e->cache[i].snap == NULL;
    pthread_mutex_lock(&e->mu);
    int32_t pending = e->queue_len + n_active;
    e->st.n_cached_states = e->n_cache - n_files;
    e->st.n_state_files = n_files;
    e->st.cached_state_bytes = e->cache_bytes;
    pthread_mutex_unlock(&e->mu);
    return pending;
}

static void *engine_thread(void *arg) {
    slm_engine *e = arg;
    int32_t pending = 0;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->queue_head && pending == 0 && !e->op_pending) pthread_cond_wait(&e->wake, &e->mu);
        bool stopping = e->stopping;
        pthread_mutex_unlock(&e->mu);
        pending = step(e);
        if (stopping && pending == 0) break;
    }
    return NULL;
}

SLM_API slm_status slm_engine_step(slm_engine *e, int32_t *n_pending) {
    if (!e) return SLM_ERR_INVALID_ARG;
    if (e->started) return SLM_ERR_STATE;
    int32_t pending = step(e);
    if (n_pending) *n_pending = pending;
    return SLM_OK;
}

SLM_API slm_status slm_engine_start(slm_engine *e) {
    if (!e) return SLM_ERR_INVALID_ARG;
    pthread_mutex_lock(&e->mu);
    bool refused = e->started || e->stopping;
    pthread_mutex_unlock(&e->mu);
    if (refused) return SLM_ERR_STATE;
    if (pthread_create(&e->thread, NULL, engine_thread, e) != 0) return SLM_ERR_BACKEND;
    e->started = true;
    return SLM_OK;
}

SLM_API void slm_engine_stop(slm_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->mu);
    if (e->started) {
        pthread_join(e->thread, NULL);
        e->started = false;
    } else {
        while (step(e) > 0) {
        }
    }
}

SLM_API slm_status slm_engine_slot(slm_engine *e, int32_t slot, slm_engine_slot_action action, const char *path,
                                   size_t *n_tokens, char *err, size_t err_cap) {
    if (n_tokens) *n_tokens = 0;
    if (!e || (action != SLM_ENGINE_SLOT_ERASE && !path) || action < SLM_ENGINE_SLOT_SAVE || action > SLM_ENGINE_SLOT_ERASE)
        return SLM_ERR_INVALID_ARG;
    if (slot < 0 || slot >= e->p.n_slots) {
        if (err && err_cap) snprintf(err, err_cap, "slot %d: the engine has slots 0..%d", slot, e->p.n_slots - 1);
        return SLM_ERR_RANGE;
    }
    pthread_mutex_lock(&e->op_mu);
    pthread_mutex_lock(&e->mu);
    bool refused = e->stopping;
    if (!refused) {
        e->op_pending = true;
        e->op_slot = slot;
        e->op_action = action;
        e->op_path = path;
        pthread_cond_broadcast(&e->wake);
    }
    bool threaded = e->started;
    pthread_mutex_unlock(&e->mu);
    if (refused) {
        pthread_mutex_unlock(&e->op_mu);
        if (err && err_cap) snprintf(err, err_cap, "the engine is stopping");
        return SLM_ERR_ABORTED;
    }
    if (!threaded) run_slot_op(e);
    pthread_mutex_lock(&e->mu);
    while (e->op_pending) pthread_cond_wait(&e->op_cv, &e->mu);
    slm_status st = e->op_status;
    if (n_tokens) *n_tokens = e->op_n;
    if (err && err_cap) snprintf(err, err_cap, "%s", e->op_msg);
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&e->op_mu);
    return st;
}

/* ---- requests in ----------------------------------------------------------------------------- */

/* Writes the message of a refusal into err (when given); returns s. */
static slm_status refuse(char *err, size_t cap, slm_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static slm_status refuse(char *err, size_t cap, slm_status s, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* The grammar vocabulary of the model, made once (at the first constrained request). */
static bool grammar_vocab(slm_engine *e) {
    pthread_mutex_lock(&e->gvocab_mu);
    if (!e->gvocab && slm_grammar_vocab_create(e->tok, &e->gvocab) != SLM_OK) e->gvocab = NULL;
    bool ok = e->gvocab != NULL;
    pthread_mutex_unlock(&e->gvocab_mu);
    return ok;
}

SLM_API slm_engine_request slm_engine_request_default(void) {
    slm_engine_request q = {0};
    q.size = sizeof q;
    q.n = 1;
    q.sampler = slm_sampler_params_default();
    return q;
}

SLM_API slm_status slm_engine_submit(slm_engine *e, const slm_engine_request *req, uint64_t *id, char *err,
                                     size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!e || !req || !id) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "NULL engine, request or id");
    slm_engine_request given = slm_engine_request_default();
    params_read(&given, sizeof given, req);
    if (given.n == 0) given.n = 1;
    const slm_engine_request *q = &given;
    if (!q->on_event) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "the request has no on_event callback");
    if (!q->ids || q->n_ids == 0) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "the prompt is empty");
    if (q->n_ids >= (size_t)e->n_ctx)
        return refuse(err, err_cap, SLM_ERR_CONTEXT_FULL,
                      "the prompt has %zu tokens; the context is %d tokens (prompt plus at least one generated token)",
                      q->n_ids, e->n_ctx);
    for (size_t i = 0; i < q->n_ids; i++)
        if (q->ids[i] < 0 || q->ids[i] >= e->n_vocab)
            return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "prompt[%zu] = %d is not a token id in [0, %d)", i,
                          q->ids[i], e->n_vocab);
    if (q->max_tokens < 1) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "max_tokens %d is not >= 1", q->max_tokens);
    if (q->n < 1 || q->n > SLM_ENGINE_MAX_N)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "n %d is not in [1, %d]", q->n, SLM_ENGINE_MAX_N);
    if (q->n_stops < 0 || q->n_stops > SLM_ENGINE_MAX_STOPS || (q->n_stops && !q->stops))
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "n_stops %d is not in [0, %d]", q->n_stops,
                      SLM_ENGINE_MAX_STOPS);
    if (q->top_logprobs < 0 || q->top_logprobs > SLM_ENGINE_MAX_TOP_LOGPROBS)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "top_logprobs %d is not in [0, %d]", q->top_logprobs,
                      SLM_ENGINE_MAX_TOP_LOGPROBS);
    if (q->sampler.n_logit_bias < 0 || (q->sampler.n_logit_bias && !q->sampler.logit_bias))
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "n_logit_bias %d without its array", q->sampler.n_logit_bias);
    for (int32_t i = 0; i < q->sampler.n_logit_bias; i++)
        if (q->sampler.logit_bias[i].token < 0 || q->sampler.logit_bias[i].token >= e->n_vocab)
            return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "logit_bias[%d] names token %d, not in [0, %d)", i,
                          q->sampler.logit_bias[i].token, e->n_vocab);
    if (q->grammar && q->ignore_eos)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "ignore_eos cannot be combined with a grammar");
    if (q->grammar && !grammar_vocab(e))
        return refuse(err, err_cap, SLM_ERR_NOMEM, "cannot build the vocabulary's trie for the grammar");
    request *r = al_calloc(e->a, 1, sizeof *r);
    if (!r) return refuse(err, err_cap, SLM_ERR_NOMEM, "out of memory");
    r->a = e->a;
    for (int32_t i = 0; i < SLM_ENGINE_MAX_N; i++) r->choices[i].text = buf_make(e->a);
    r->sp = q->sampler;
    r->sp.logit_bias = NULL;
    bool ok = (r->prompt = al_array(e->a, q->n_ids, sizeof *r->prompt)) != NULL;
    if (ok && q->sampler.n_logit_bias) {
        slm_logit_bias *lb = al_array(e->a, (size_t)q->sampler.n_logit_bias, sizeof *lb);
        if ((ok = lb != NULL)) memcpy(lb, q->sampler.logit_bias, (size_t)q->sampler.n_logit_bias * sizeof *lb);
        r->sp.logit_bias = lb;
    }
    for (int32_t i = 0; ok && i < q->n_stops; i++)
        if (q->stops[i] && q->stops[i][0]) ok = (r->stops[r->n_stops++] = al_strdup(e->a, q->stops[i])) != NULL;
    if (!ok) {
        request_free(r);
        return refuse(err, err_cap, SLM_ERR_NOMEM, "out of memory");
    }
    memcpy(r->prompt, q->ids, q->n_ids * sizeof *r->prompt);
    r->n_prompt = q->n_ids;
    r->grammar = q->grammar;
    r->max_tokens = q->max_tokens;
    r->n = q->n;
    r->logprobs = q->logprobs;
    r->top_logprobs = q->top_logprobs;
    r->ignore_eos = q->ignore_eos;
    r->on_event = q->on_event;
    r->user = q->user;
    r->refs = 2; /* the queue, and until DONE */
    pthread_mutex_lock(&e->mu);
    slm_status s = SLM_OK;
    if (e->stopping) s = refuse(err, err_cap, SLM_ERR_ABORTED, "the engine is stopping");
    else if (e->queue_len + e->st.n_busy >= e->p.n_slots + e->p.queue_max)
        s = refuse(err, err_cap, SLM_ERR_RANGE, "busy: %d slots, %d requests queued", e->p.n_slots, e->p.queue_max);
    if (s == SLM_OK) {
        r->id = *id = ++e->next_id;
        if (e->queue_tail) e->queue_tail->next = r;
        else e->queue_head = r;
        e->queue_tail = r;
        e->queue_len++;
        r->live_next = e->live;
        if (e->live) e->live->live_prev = r;
        e->live = r;
        e->st.n_submitted++;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->mu);
    if (s != SLM_OK) request_free(r);
    return s;
}

SLM_API slm_status slm_engine_cancel(slm_engine *e, uint64_t id) {
    if (!e) return SLM_ERR_INVALID_ARG;
    pthread_mutex_lock(&e->mu);
    request *r = e->live;
    while (r && r->id != id) r = r->live_next;
    if (r) {
        r->cancelled = true;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->mu);
    return r ? SLM_OK : SLM_ERR_NOT_FOUND;
}

SLM_API void slm_engine_get_stats(slm_engine *e, slm_engine_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    *out = e->st;
    out->n_queued = e->queue_len;
    out->n_slots = e->p.n_slots;
    pthread_mutex_unlock(&e->mu);
}

int32_t slm_engine_slots_busy(slm_engine *e, bool *busy, int32_t n) {
    if (n > e->p.n_slots) n = e->p.n_slots;
    pthread_mutex_lock(&e->mu);
    for (int32_t i = 0; i < n; i++) busy[i] = e->slots[i].busy;
    pthread_mutex_unlock(&e->mu);
    return n < 0 ? 0 : n;
}

/* ---- lifetime -------------------------------------------------------------------------------- */

SLM_API slm_engine_params slm_engine_params_default(void) {
    slm_engine_params p = {0};
    p.size = sizeof p;
    p.n_slots = 4;
    p.queue_max = 64;
    p.session = slm_session_params_default();
    p.cache_mib = 256;
    return p;
}

SLM_API int32_t slm_engine_n_ctx(const slm_engine *e) { return e ? e->n_ctx : 0; }

SLM_API slm_status slm_engine_create(const slm_model *model, const slm_engine_params *params, slm_engine **out,
                                     char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!out) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "NULL out");
    *out = NULL;
    if (!model) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "NULL model");
    slm_engine_params p = slm_engine_params_default();
    params_read(&p, sizeof p, params);
    if (p.n_slots == 0) p.n_slots = 4;
    if (p.n_slots < 1 || p.n_slots > 4096 || p.queue_max < 0 || p.cache_mib < 0 || p.draft_max < 0)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "n_slots, queue_max, cache_mib or draft_max out of range");
    if (p.lookup && p.draft_model)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "lookup and draft_model exclude each other");
    const slm_tokenizer *tok = slm_model_tokenizer(model);
    if (!tok) return refuse(err, err_cap, SLM_ERR_UNSUPPORTED, "the model has no tokenizer");
    const slm_allocator *a = &model->alloc;
    slm_engine *e = al_calloc(a, 1, sizeof *e);
    if (!e) return refuse(err, err_cap, SLM_ERR_NOMEM, "out of memory");
    e->a = a;
    e->p = p;
    e->m = model;
    e->tok = tok;
    e->n_vocab = slm_model_n_vocab(model);
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->gvocab_mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_mutex_init(&e->op_mu, NULL);
    pthread_cond_init(&e->op_cv, NULL);
    e->n_forks = p.n_slots * (SLM_ENGINE_MAX_N - 1);
    int32_t n_all = p.n_slots + e->n_forks;
    e->slots = al_calloc(a, (size_t)p.n_slots, sizeof *e->slots);
    e->forks = al_calloc(a, (size_t)e->n_forks, sizeof *e->forks);
    e->all = al_array(a, (size_t)n_all, sizeof *e->all);
    e->dec = al_array(a, (size_t)n_all, sizeof *e->dec);
    if (p.state_dir) e->state_dir = al_strdup(a, p.state_dir);
    e->p.state_dir = e->state_dir;
    slm_status s = SLM_OK;
    if (!e->slots || !e->forks || !e->all || !e->dec || (p.state_dir && !e->state_dir))
        s = refuse(err, err_cap, SLM_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; s == SLM_OK && i < p.n_slots; i++)
        s = slm_session_create(model, &p.session, &e->slots[i].s, err, err_cap);
    if (s == SLM_OK) {
        for (int32_t i = 0; i < p.n_slots; i++) e->all[i] = &e->slots[i];
        for (int32_t i = 0; i < e->n_forks; i++) e->all[p.n_slots + i] = &e->forks[i];
        e->n_ctx = slm_session_n_ctx(e->slots[0].s);
    }
    if (s == SLM_OK && p.draft_model) { /* a draft model with another tokenizer is refused here, not per request */
        slm_session_params sp = p.session;
        sp.n_ctx = e->n_ctx;
        slm_spec_params sparams = slm_spec_params_default();
        slm_spec *probe = NULL;
        if ((s = slm_session_create(p.draft_model, &sp, &e->slots[0].draft, err, err_cap)) == SLM_OK) {
            sparams.draft = e->slots[0].draft;
            s = slm_spec_create(e->slots[0].s, &sparams, &probe, err, err_cap);
        }
        slm_spec_destroy(probe);
        if (s != SLM_OK && err && err_cap) {
            char msg[512];
            snprintf(msg, sizeof msg, "draft model: %s", err);
            snprintf(err, err_cap, "%s", msg);
        }
    }
    if (s != SLM_OK) {
        slm_engine_free(e);
        return s;
    }
    uint8_t fp[16];
    slm_model_fingerprint(model, fp);
    e->hash_seed = 1469598103934665603ull ^ (uint64_t)e->n_ctx;
    for (int k = 0; k < 16; k++) e->hash_seed = (e->hash_seed ^ fp[k]) * 1099511628211ull;
    eng_index_state_dir(e, e->slots[0].s);
    e->st.n_state_files = e->n_cache;
    *out = e;
    return SLM_OK;
}

SLM_API void slm_engine_free(slm_engine *e) {
    if (!e) return;
    if (e->n_ctx) slm_engine_stop(e); /* created whole: e->all is filled */
    while (e->n_cache) eng_cache_remove(e, e->n_cache - 1, true);
    al_free(e->a, e->cache);
    for (int32_t i = 0; e->slots && i < e->p.n_slots; i++) {
        slm_session_destroy(e->slots[i].s);
        slm_session_destroy(e->slots[i].draft);
    }
    for (int32_t i = 0; e->forks && i < e->n_forks; i++) slm_session_destroy(e->forks[i].draft);
    al_free(e->a, e->slots);
    al_free(e->a, e->forks);
    al_free(e->a, e->all);
    al_free(e->a, e->dec);
    al_free(e->a, e->state_dir);
    slm_grammar_vocab_destroy(e->gvocab);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->op_cv);
    pthread_mutex_destroy(&e->op_mu);
    pthread_mutex_destroy(&e->gvocab_mu);
    pthread_mutex_destroy(&e->mu);
    al_free(e->a, e);
}
