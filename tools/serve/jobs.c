/* jobs.c — a request's job on the HTTP side of `statelm serve`: the engine's events (on the engine's
 * thread) turned into the job's results and, for a streamed job, its server-sent events; and the
 * generated-ids memory, by which a chat turn continues from the ids a returned completion was
 * generated as (re-tokenising the text may give other ids, which would end the reusable prefix). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

bool sb_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return false;
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = '\0';
    return true;
}

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    for (int32_t i = 0; i < MAX_N; i++) {
        free(j->choices[i].text.v);
        free(j->choices[i].lps);
        free(j->choices[i].ids);
    }
    for (int32_t i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free((void *)(uintptr_t)j->sp.logit_bias);
    slm_grammar_destroy(j->grammar);
    tools_req_free(&j->tools);
    free(j->prompt);
    free(j->sse.v);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

void gen_forget_locked(size_t i) {
    srv.gens_bytes -= srv.gens[i].n_text + srv.gens[i].n_ids * sizeof(int32_t);
    free(srv.gens[i].text);
    free(srv.gens[i].ids);
    srv.gens[i] = srv.gens[--srv.n_gens];
}

/* Index of the remembered completion whose text is s[0, n), or -1. */
long gen_find_locked(const char *s, size_t n) {
    uint64_t h = hash_text(s, n);
    for (size_t i = 0; i < srv.n_gens; i++)
        if (srv.gens[i].hash == h && srv.gens[i].n_text == n && memcmp(srv.gens[i].text, s, n) == 0) return (long)i;
    return -1;
}

/* Remembers the ids of a finished chat choice under its text (evicting the least recently used). */
static void gen_remember_locked(const choice *c) {
    if (!srv.gens || c->ids_cut || c->n_ids == 0 || c->text.n == 0) return;
    size_t bytes = c->text.n + c->n_ids * sizeof(int32_t);
    if (bytes > GEN_MEMORY_BYTES / 4) return;
    long old = gen_find_locked(c->text.v, c->text.n);
    if (old >= 0) gen_forget_locked((size_t)old);
    while (srv.n_gens > 0 && (srv.n_gens == GEN_MEMORY_N || srv.gens_bytes + bytes > GEN_MEMORY_BYTES)) {
        size_t lru = 0;
        for (size_t i = 1; i < srv.n_gens; i++)
            if (srv.gens[i].last_used < srv.gens[lru].last_used) lru = i;
        gen_forget_locked(lru);
    }
    gen_memory g = {hash_text(c->text.v, c->text.n), ++srv.gen_tick, malloc(c->text.n), c->text.n,
                    malloc(c->n_ids * sizeof(int32_t)), c->n_ids};
    if (!g.text || !g.ids) {
        free(g.text);
        free(g.ids);
        return;
    }
    memcpy(g.text, c->text.v, c->text.n);
    memcpy(g.ids, c->ids, c->n_ids * sizeof(int32_t));
    srv.gens[srv.n_gens++] = g;
    srv.gens_bytes += bytes;
}

/* Copies the engine's view of a choice into the job's: text (the engine's only grows, or is cut at
 * a stop string), new log-probabilities and, once finished, the ids. Under srv.mu. */
static bool choice_update(choice *c, const slm_engine_event *ev) {
    if (ev->n_text < c->text.n) {
        c->text.n = ev->n_text;
        c->text.v[c->text.n] = '\0';
    } else if (ev->n_text > c->text.n && !sb_add(&c->text, ev->text + c->text.n, ev->n_text - c->text.n)) {
        return false;
    }
    if (ev->n_logprobs > c->n_tokens) {
        tok_lp *v = realloc(c->lps, ev->n_logprobs * sizeof *v);
        if (!v) return false;
        memcpy(v + c->n_tokens, ev->logprobs + c->n_tokens, (ev->n_logprobs - c->n_tokens) * sizeof *v);
        c->lps = v;
    }
    c->n_tokens = ev->n_tokens;
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
    pthread_mutex_lock(&srv.mu);
    if (ev->kind == SLM_ENGINE_EVENT_CHOICE) {
        if (!j->cancelled && !j->done) {
            choice *c = &j->choices[ev->choice];
            if (!choice_update(c, ev)) {
                j->err_status = 500;
                snprintf(j->err_msg, sizeof j->err_msg, "out of memory");
            } else if (j->stream) {
                sse_choice(j, ev->choice, ev->n_stable);
                pthread_cond_broadcast(&j->cv);
            }
        }
        pthread_mutex_unlock(&srv.mu);
        return;
    }
    j->cached_tokens = ev->n_cached;
    if (ev->outcome == SLM_ENGINE_DONE_SHUTDOWN) {
        j->err_status = 503;
        j->err_code = "server_shutting_down";
        snprintf(j->err_msg, sizeof j->err_msg, "the server is shutting down");
    } else if (ev->outcome == SLM_ENGINE_DONE_FAILED) {
        j->err_status = 500;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", ev->message);
    }
    if (!j->done) {
        j->done = true;
        if (j->chat && !j->err_status && !j->cancelled)
            for (int32_t i = 0; i < j->n; i++) gen_remember_locked(&j->choices[i]);
        if (j->stream && !j->cancelled) sse_finish(j);
        pthread_cond_broadcast(&j->cv);
    }
    job_unref_locked(j);
    pthread_mutex_unlock(&srv.mu);
}

/* The HTTP side is done with j (its response is gone, or its client): j takes no more results, the
 * engine ends the request at its next step, and this side's reference goes. */
void job_cancel(job *j) {
    pthread_mutex_lock(&srv.mu);
    j->cancelled = true;
    bool running = !j->done;
    uint64_t id = j->engine_id;
    job_unref_locked(j);
    pthread_mutex_unlock(&srv.mu);
    if (running) slm_engine_cancel(srv.engine, id);
}
