/* jobs.c — a request's job on the HTTP side of `statelm serve`: the engine's events (on the engine's
 * thread) turned into the job's results and, for a streamed job, its server-sent events; and the
 * generated-ids memory, by which a chat turn continues from the ids a returned completion was
 * generated as (re-tokenising the text may give other ids, which would end the reusable prefix). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A job with one reference (the HTTP side's), or NULL when out of memory. */
job *job_create(serve_ctx *s, serve_model *sm) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = s;
    j->mdl = sm;
    j->refs = 1;
    j->sse = buf_make(NULL);
    for (int32_t i = 0; i < MAX_N; i++) j->choices[i].text = buf_make(NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

void job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    for (int32_t i = 0; i < MAX_N; i++) {
        buf_free(&j->choices[i].text);
        free(j->choices[i].lps);
        free(j->choices[i].ids);
    }
    sreq_free(&j->r);
    sprompt_free(&j->p);
    buf_free(&j->sse);
    pthread_cond_destroy(&j->cv);
    serve_model_release_locked(j->mdl);
    free(j);
}

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

void gen_forget_locked(serve_model *sm, size_t i) {
    sm->gens_bytes -= sm->gens[i].n_text + sm->gens[i].n_ids * sizeof(int32_t);
    free(sm->gens[i].text);
    free(sm->gens[i].ids);
    sm->gens[i] = sm->gens[--sm->n_gens];
}

/* Index of the remembered completion whose text is t[0, n), or -1. */
static long gen_find_locked(const serve_model *sm, const char *t, size_t n) {
    uint64_t h = hash_text(t, n);
    for (size_t i = 0; i < sm->n_gens; i++)
        if (sm->gens[i].hash == h && sm->gens[i].n_text == n && memcmp(sm->gens[i].text, t, n) == 0) return (long)i;
    return -1;
}

/* sreq_ids_lookup_fn over the generated-ids memory of the serve_model `model`. */
bool gen_lookup(void *model, const char *text, size_t n, int32_t **ids, size_t *n_ids) {
    serve_model *sm = model;
    bool found = false;
    pthread_mutex_lock(&sm->srv->mu);
    long g = gen_find_locked(sm, text, n);
    int32_t *copy = g >= 0 ? malloc(sm->gens[g].n_ids * sizeof *copy) : NULL;
    if (copy) {
        memcpy(copy, sm->gens[g].ids, sm->gens[g].n_ids * sizeof *copy);
        *ids = copy;
        *n_ids = sm->gens[g].n_ids;
        sm->gens[g].last_used = ++sm->gen_tick;
        found = true;
    }
    pthread_mutex_unlock(&sm->srv->mu);
    return found;
}

/* Remembers the ids of a finished chat choice under its text (evicting the least recently used). */
static void gen_remember_locked(serve_model *sm, const choice *c) {
    if (!sm->gens || c->ids_cut || c->n_ids == 0 || c->text.n == 0) return;
    size_t bytes = c->text.n + c->n_ids * sizeof(int32_t);
    if (bytes > GEN_MEMORY_BYTES / 4) return;
    long old = gen_find_locked(sm, c->text.p, c->text.n);
    if (old >= 0) gen_forget_locked(sm, (size_t)old);
    while (sm->n_gens > 0 && (sm->n_gens == GEN_MEMORY_N || sm->gens_bytes + bytes > GEN_MEMORY_BYTES)) {
        size_t lru = 0;
        for (size_t i = 1; i < sm->n_gens; i++)
            if (sm->gens[i].last_used < sm->gens[lru].last_used) lru = i;
        gen_forget_locked(sm, lru);
    }
    gen_memory g = {hash_text(c->text.p, c->text.n), ++sm->gen_tick, malloc(c->text.n), c->text.n,
                    malloc(c->n_ids * sizeof(int32_t)), c->n_ids};
    if (!g.text || !g.ids) {
        free(g.text);
        free(g.ids);
        return;
    }
    memcpy(g.text, c->text.p, c->text.n);
    memcpy(g.ids, c->ids, c->n_ids * sizeof(int32_t));
    sm->gens[sm->n_gens++] = g;
    sm->gens_bytes += bytes;
}

/* Copies the engine's view of a choice into the job's: text (the engine's only grows, or is cut at
 * a stop string), new log-probabilities and, once finished, the ids. Under srv->mu. */
static bool choice_update(choice *c, const slm_engine_event *ev) {
    if (ev->n_text < c->text.n) {
        buf_truncate(&c->text, ev->n_text);
    } else if (ev->n_text > c->text.n) {
        buf_put(&c->text, ev->text + c->text.n, ev->n_text - c->text.n);
        if (c->text.oom) return false;
    }
    if (ev->n_logprobs > c->n_tokens) {
        tok_lp *v = realloc(c->lps, ev->n_logprobs * sizeof *v);
        if (!v) return false;
        memcpy(v + c->n_tokens, ev->logprobs + c->n_tokens, (ev->n_logprobs - c->n_tokens) * sizeof *v);
        c->lps = v;
    }
    c->n_tokens = ev->n_tokens;
    c->n_think = ev->n_think_tokens;
    c->think_forced = ev->think_forced;
    if (ev->finish) {
        c->finish = ev->finish == SLM_ENGINE_FINISH_LENGTH ? "length" : "stop";
        c->ids_cut = ev->ids_cut || ev->n_ids < ev->n_tokens;
        if (ev->n_ids && (c->ids = malloc(ev->n_ids * sizeof *c->ids)) != NULL) {
            memcpy(c->ids, ev->ids, ev->n_ids * sizeof *c->ids);
            c->n_ids = ev->n_ids;
        } else {
            c->ids_cut = true; /* not remembered */
        }
    }
    return true;
}

/* The engine's event for job `user` (slm_engine_event_fn). A job whose HTTP side is gone
 * (cancelled) takes no results; DONE drops the engine's reference. */
void on_engine_event(void *user, const slm_engine_event *ev) {
    job *j = user;
    serve_ctx *s = j->srv;
    pthread_mutex_lock(&s->mu);
    if (ev->kind == SLM_ENGINE_EVENT_CHOICE) {
        if (!j->cancelled && !j->done) {
            choice *c = &j->choices[ev->choice];
            if (ev->n_tokens > 0 && j->t_first == 0) j->t_first = now_s();
            if (!choice_update(c, ev)) {
                j->err_status = 500;
                snprintf(j->err_msg, sizeof j->err_msg, "out of memory");
            } else if (j->r.stream) {
                if (j->r.api == SAPI_COMPLETION) native_sse_choice(j, ev->n_stable);
                else if (j->r.api == SAPI_MESSAGES) anthropic_sse_progress(j, ev->n_stable);
                else if (j->r.api == SAPI_RESPONSES) responses_sse_progress(j, ev->n_stable);
                else sse_choice(j, ev->choice, ev->n_stable);
                pthread_cond_broadcast(&j->cv);
            }
        }
        pthread_mutex_unlock(&s->mu);
        return;
    }
    j->cached_tokens = ev->n_cached;
    j->t_end = now_s();
    if (ev->outcome == SLM_ENGINE_DONE_SHUTDOWN) {
        j->err_status = 503;
        j->err_code = "server_shutting_down";
        snprintf(j->err_msg, sizeof j->err_msg, "the server is shutting down");
    } else if (ev->outcome == SLM_ENGINE_DONE_FAILED) {
        j->err_status = 500;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", ev->message);
    }
    /* a stored response is kept (its file written) before the client can see the answer */
    char *record = j->r.api == SAPI_RESPONSES && j->r.store && !j->err_status && !j->cancelled && !j->done
                       ? responses_record(j)
                       : NULL;
    if (record) {
        pthread_mutex_unlock(&s->mu);
        bool kept = resp_store_put(s->responses, j->id, record, strlen(record));
        free(record);
        pthread_mutex_lock(&s->mu);
        if (!kept && !j->err_status) {
            j->err_status = 500;
            snprintf(j->err_msg, sizeof j->err_msg, "the response could not be stored (memory or --state-dir)");
        }
    }
    if (!j->done) {
        j->done = true;
        util_metrics_count(s, j);
        if (serve_api_is_chat(j->r.api) && !j->p.prefill && !j->err_status && !j->cancelled)
            for (int32_t i = 0; i < j->r.n; i++) gen_remember_locked(j->mdl, &j->choices[i]);
        if (j->r.stream && !j->cancelled) {
            if (j->r.api == SAPI_COMPLETION) native_sse_finish(j);
            else if (j->r.api == SAPI_MESSAGES) anthropic_sse_finish(j);
            else if (j->r.api == SAPI_RESPONSES) responses_sse_finish(j);
            else sse_finish(j);
        }
        pthread_cond_broadcast(&j->cv);
    }
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}

/* The HTTP side is done with j (its response is gone, or its client): j takes no more results, the
 * engine ends the request at its next step, and this side's reference goes. */
void job_cancel(job *j) {
    serve_ctx *s = j->srv;
    pthread_mutex_lock(&s->mu);
    j->cancelled = true;
    bool running = !j->done;
    uint64_t id = j->engine_id;
    slm_engine *engine = j->mdl->engine; /* held while the engine holds j */
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
    if (running) slm_engine_cancel(engine, id);
}
