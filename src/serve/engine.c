/* engine.c — the serving engine (include/statelm_engine.h): requests scheduled on slots, the
 * snapshot cache with spill to state files, batched decoding, speculation and constraints.
 *
 * Ownership and locking: e->mu guards the queue, the list of live requests, every request's
 * `cancelled` flag, e->stopping and the counters. Everything else — sessions, streams, samplers,
 * the cache, a request's choices and refs once it left the queue — belongs to the stepping thread
 * (slm_engine_step's caller or the engine's own thread) and is touched by it only. Events are sent
 * from the stepping thread with e->mu released.
 *
 * A request's refs count the queue (until popped) or the streams working on it, plus one while it
 * has not sent DONE; it is freed at 0. State reuse: a request goes to the idle slot whose history
 * shares the longest prefix with its prompt; a kept snapshot (memory under cache_mib, LRU) or state
 * file that shares more is restored first; slm_session_sync then computes only what differs. State
 * file names are a hash of the token history seeded with the model's fingerprint and the context,
 * never request data.
 *
 * Speculation (lookup, draft_model): a stream past its prompt (a fork: past its first token) without
 * logprobs or a grammar generates by slm_spec_step, several tokens per weight pass, outside
 * decode_all(); each stream has its own driver (and draft session). */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "statelm_engine.h"

#define CHUNK 64 /* prefill tokens per step */
#define MAX_STATE_FILES 256

typedef struct textbuf {
    char *v;
    size_t n, cap;
} textbuf;

static bool tb_add(textbuf *b, const char *s, size_t n) {
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

typedef struct choice {
    textbuf text;             /* generated text, cut at a stop string */
    slm_engine_logprob *lps;  /* (n_tokens) when logprobs were asked for */
    size_t n_tokens;
    int32_t *ids;             /* (n_ids) */
    size_t n_ids, cap_ids;
    bool ids_cut;
    slm_engine_finish finish;
} choice;

typedef struct request {
    uint64_t id;
    int refs;
    int32_t *prompt;
    size_t n_prompt;
    slm_sampler_params sp; /* sp.logit_bias: the request's own copy */
    const slm_grammar *grammar;
    int32_t max_tokens, n, top_logprobs;
    bool logprobs, ignore_eos;
    char *stops[SLM_ENGINE_MAX_STOPS];
    int32_t n_stops;
    slm_engine_event_fn on_event;
    void *user;
    choice choices[SLM_ENGINE_MAX_N];
    int32_t n_done;
    size_t cached_tokens;
    bool cancelled; /* under mu */
    bool done;      /* DONE sent */
    slm_engine_outcome outcome;
    slm_status status;
    char message[256];
    struct request *next;             /* queue */
    struct request *live_prev, *live_next; /* requests not yet DONE, under mu */
} request;

/* A generation in progress on one session: a slot's own session or a fork of it (n > 1). */
typedef struct stream {
    slm_session *s;
    bool own_session; /* a fork, destroyed when the stream ends */
    request *r;       /* NULL: idle */
    int32_t choice;
    slm_sampler *smp;
    slm_constraint *con; /* over the request's grammar, attached to smp, or NULL */
    slm_detokenizer *dt;
    size_t n_fed;        /* prompt tokens in the session; < n_prompt while prefilling */
    bool first_sync;
    const float *logits;
    float *own_logits;   /* a fork's copy of the logits it starts from */
    int32_t n_gen;
    int32_t next_id;     /* sampled, to be decoded; -1 none */
    uint64_t last_used;
    slm_spec *spec;      /* speculation driver over s for this generation, or NULL */
    slm_session *draft;  /* draft_model: this stream's draft session, kept across generations */
} stream;

/* An idle snapshot of a slot, kept in memory (snap) or spilled to a file (snap NULL). */
typedef struct cached_state {
    slm_snapshot *snap;
    int32_t *hist;
    size_t n_hist;
    uint64_t bytes, last_used, hash;
} cached_state;

struct slm_engine {
    slm_engine_params p;
    char *state_dir;
    const slm_model *m;
    const slm_tokenizer *tok;
    int32_t n_ctx, n_vocab;
    uint64_t hash_seed;
    slm_grammar_vocab *gvocab; /* made at the first constrained request */
    pthread_mutex_t gvocab_mu;
    stream *slots; /* (n_slots) */
    stream *forks; /* (n_forks) */
    int32_t n_forks;
    stream **all, **dec; /* (n_slots + n_forks) step scratch */
    cached_state *cache;
    size_t n_cache, cap_cache;
    uint64_t cache_bytes, tick;
    pthread_t thread;
    bool started;
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stopping;
    request *queue_head, *queue_tail, *live;
    int32_t queue_len;
    uint64_t next_id;
    slm_engine_stats st;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t hash_ids(const slm_engine *e, const int32_t *v, size_t n) {
    uint64_t h = e->hash_seed;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) {
            h ^= (uint8_t)((uint32_t)v[i] >> (8 * b));
            h *= 1099511628211ull;
        }
    return h;
}

static size_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* ---- requests -------------------------------------------------------------------------------- */

static void request_free(request *r) {
    for (int32_t i = 0; i < SLM_ENGINE_MAX_N; i++) {
        free(r->choices[i].text.v);
        free(r->choices[i].lps);
        free(r->choices[i].ids);
    }
    for (int32_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free((void *)(uintptr_t)r->sp.logit_bias);
    free(r->prompt);
    free(r);
}

static void request_unref(request *r) {
    if (--r->refs == 0) request_free(r);
}

/* Sends r's DONE (once), with outcome and message; stepping thread, mu not held. */
static void request_finish(slm_engine *e, request *r, slm_engine_outcome outcome, slm_status status,
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
    request_unref(r); /* the reference held until DONE */
}

static void request_fail(slm_engine *e, request *r, slm_status status, const char *msg) {
    request_finish(e, r, SLM_ENGINE_DONE_FAILED, status, msg);
}

/* The CHOICE event of choice ci; nothing once DONE was sent. */
static void send_choice(request *r, int32_t ci, size_t n_stable) {
    if (r->done) return;
    const choice *c = &r->choices[ci];
    slm_engine_event ev = {0};
    ev.kind = SLM_ENGINE_EVENT_CHOICE;
    ev.request = r->id;
    ev.choice = ci;
    ev.text = c->text.v ? c->text.v : "";
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

/* ---- stop strings ---------------------------------------------------------------------------- */

/* Position of the first stop string in text that ends at or after `from`, or -1. */
static long find_stop(const request *r, const textbuf *t, size_t from) {
    long best = -1;
    for (int32_t i = 0; i < r->n_stops; i++) {
        size_t ls = strlen(r->stops[i]);
        size_t start = from >= ls ? from - ls + 1 : 0;
        for (size_t p = start; p + ls <= t->n; p++)
            if (!memcmp(t->v + p, r->stops[i], ls)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* Bytes at the end of text that could begin a stop string. */
static size_t stop_holdback(const request *r, const textbuf *t) {
    size_t hold = 0;
    for (int32_t i = 0; i < r->n_stops; i++) {
        size_t ls = strlen(r->stops[i]);
        for (size_t k = ls - 1; k > hold; k--)
            if (k <= t->n && !memcmp(t->v + t->n - k, r->stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* ---- state cache ----------------------------------------------------------------------------- */

static void state_path(const slm_engine *e, uint64_t hash, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%016llx.slmstate", e->state_dir, (unsigned long long)hash);
}

/* Drops entry i; its state file too unless keep_file (files outlive the engine). */
static void cache_remove(slm_engine *e, size_t i, bool keep_file) {
    cached_state *c = &e->cache[i];
    if (c->snap) {
        slm_snapshot_destroy(c->snap);
        e->cache_bytes -= c->bytes;
    } else if (!keep_file) {
        char path[4096];
        state_path(e, c->hash, path, sizeof path);
        unlink(path);
    }
    free(c->hist);
    e->cache[i] = e->cache[--e->n_cache];
}

/* Writes the snapshot of entry i to state_dir and keeps only the file; without state_dir or when it
 * cannot be written, drops the entry. */
static void cache_spill(slm_engine *e, size_t i) {
    cached_state *c = &e->cache[i];
    if (!e->state_dir) {
        cache_remove(e, i, false);
        return;
    }
    size_t n_files = 0, lru = SIZE_MAX;
    for (size_t k = 0; k < e->n_cache; k++)
        if (!e->cache[k].snap) {
            n_files++;
            if (lru == SIZE_MAX || e->cache[k].last_used < e->cache[lru].last_used) lru = k;
        }
    if (n_files >= MAX_STATE_FILES) {
        cache_remove(e, lru, false); /* moves the last entry into lru */
        if (i == e->n_cache) i = lru;
        c = &e->cache[i];
    }
    slm_session *tmp = NULL;
    char path[4096];
    state_path(e, c->hash, path, sizeof path);
    slm_session_params sp = slm_session_params_default();
    sp.n_threads = 1;
    if (slm_session_fork(c->snap, &sp, &tmp, NULL, 0) != SLM_OK || slm_session_save(tmp, path) != SLM_OK) {
        slm_session_destroy(tmp);
        cache_remove(e, i, false);
        return;
    }
    slm_session_destroy(tmp);
    slm_snapshot_destroy(c->snap);
    c->snap = NULL;
    e->cache_bytes -= c->bytes;
}

static bool cache_reserve(slm_engine *e) {
    if (e->n_cache < e->cap_cache) return true;
    size_t cap = e->cap_cache ? e->cap_cache * 2 : 16;
    cached_state *v = realloc(e->cache, cap * sizeof *v);
    if (!v) return false;
    e->cache = v;
    e->cap_cache = cap;
    return true;
}

/* Keeps the session's state (its history is not a prefix of a kept one) before the slot is
 * reused; evicts the least recently used snapshots beyond cache_mib. */
static void cache_keep(slm_engine *e, slm_session *s) {
    size_t n_hist;
    const int32_t *hist = slm_session_history(s, &n_hist);
    if (e->p.cache_mib <= 0 || n_hist == 0) return;
    uint64_t h = hash_ids(e, hist, n_hist);
    for (size_t i = 0; i < e->n_cache; i++)
        if (e->cache[i].hash == h && e->cache[i].n_hist == n_hist) {
            e->cache[i].last_used = ++e->tick;
            return;
        }
    if (!cache_reserve(e)) return;
    cached_state c = {0};
    c.hist = malloc(n_hist * sizeof *c.hist);
    if (!c.hist || slm_session_snapshot(s, &c.snap) != SLM_OK) {
        free(c.hist);
        return;
    }
    memcpy(c.hist, hist, n_hist * sizeof *c.hist);
    c.n_hist = n_hist;
    c.bytes = slm_snapshot_bytes(c.snap);
    c.hash = h;
    c.last_used = ++e->tick;
    e->cache[e->n_cache++] = c;
    e->cache_bytes += c.bytes;
    uint64_t budget = (uint64_t)e->p.cache_mib << 20;
    while (e->cache_bytes > budget) {
        size_t lru = SIZE_MAX;
        for (size_t i = 0; i < e->n_cache; i++)
            if (e->cache[i].snap && (lru == SIZE_MAX || e->cache[i].last_used < e->cache[lru].last_used)) lru = i;
        if (lru == SIZE_MAX) break;
        cache_spill(e, lru);
    }
}

/* Indexes the state files an earlier engine left in state_dir (names as state_path writes them,
 * loadable into a session of this model and context, history hashing to the name); s is reset
 * afterwards. Other files are left alone. */
static void index_state_dir(slm_engine *e, slm_session *s) {
    DIR *dir = e->state_dir ? opendir(e->state_dir) : NULL;
    if (!dir) return;
    struct dirent *d;
    size_t n_files = 0;
    while ((d = readdir(dir)) != NULL && n_files < MAX_STATE_FILES) {
        unsigned long long h;
        char tail[16];
        if (strlen(d->d_name) != 25 || sscanf(d->d_name, "%16llx%15s", &h, tail) != 2 || strcmp(tail, ".slmstate") != 0)
            continue;
        char path[4096];
        state_path(e, h, path, sizeof path);
        size_t n_hist;
        const int32_t *hist;
        if (slm_session_load(s, path) != SLM_OK || !(hist = slm_session_history(s, &n_hist)) ||
            hash_ids(e, hist, n_hist) != h)
            continue;
        if (!cache_reserve(e)) break;
        cached_state c = {0};
        if (!(c.hist = malloc(n_hist * sizeof *c.hist))) break;
        memcpy(c.hist, hist, n_hist * sizeof *c.hist);
        c.n_hist = n_hist;
        c.hash = h;
        e->cache[e->n_cache++] = c;
        n_files++;
    }
    closedir(dir);
    slm_session_reset(s);
}

/* ---- streams --------------------------------------------------------------------------------- */

/* Ends st's generation; when it was the request's last choice, the request is done. */
static void stream_end(slm_engine *e, stream *st) {
    slm_spec_stats ss = {0};
    if (st->spec) slm_spec_get_stats(st->spec, &ss);
    slm_spec_destroy(st->spec);
    st->spec = NULL;
    slm_sampler_destroy(st->smp);
    slm_constraint_destroy(st->con);
    slm_detokenizer_destroy(st->dt);
    free(st->own_logits);
    if (st->own_session) slm_session_destroy(st->s);
    st->smp = NULL;
    st->con = NULL;
    st->dt = NULL;
    st->own_logits = NULL;
    if (st->own_session) st->s = NULL;
    st->last_used = ++e->tick;
    request *r = st->r;
    st->r = NULL;
    pthread_mutex_lock(&e->mu);
    if (!st->own_session) e->st.n_busy--;
    e->st.n_drafted += ss.n_drafted;
    e->st.n_accepted += ss.n_accepted;
    e->st.n_replays += ss.n_replays;
    pthread_mutex_unlock(&e->mu);
    if (!r) return;
    if (++r->n_done == r->n) request_finish(e, r, SLM_ENGINE_DONE_OK, SLM_OK, NULL);
    request_unref(r);
}

static bool stream_begin(slm_engine *e, stream *st, request *r, int32_t ci) {
    slm_sampler_params sp = r->sp;
    sp.seed += (uint64_t)ci;
    st->r = r;
    r->refs++;
    st->choice = ci;
    st->n_gen = 0;
    st->next_id = -1;
    st->first_sync = true;
    if (slm_sampler_create(&sp, &st->smp) != SLM_OK || slm_detokenizer_create(e->tok, &st->dt) != SLM_OK) return false;
    return !r->grammar || (slm_constraint_create(r->grammar, e->gvocab, &st->con) == SLM_OK &&
                           slm_sampler_set_constraint(st->smp, st->con) == SLM_OK);
}

/* Picks the idle slot for r and brings it to the best kept state; NULL when none is idle. */
static stream *admit(slm_engine *e, const request *r) {
    stream *best = NULL;
    size_t best_lcp = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        stream *st = &e->slots[i];
        if (st->r) continue;
        size_t n_hist;
        const int32_t *hist = slm_session_history(st->s, &n_hist);
        size_t lcp = common_prefix(hist, n_hist, r->prompt, r->n_prompt);
        if (!best || lcp > best_lcp || (lcp == best_lcp && st->last_used < best->last_used)) {
            best = st;
            best_lcp = lcp;
        }
    }
    if (!best) return NULL;
    best->n_fed = 0;
    if (e->p.no_prefix_reuse) {
        slm_session_reset(best->s);
        return best;
    }
    size_t n_hist;
    slm_session_history(best->s, &n_hist);
    size_t best_cache = SIZE_MAX, cache_lcp = best_lcp;
    for (size_t i = 0; i < e->n_cache; i++) {
        size_t lcp = common_prefix(e->cache[i].hist, e->cache[i].n_hist, r->prompt, r->n_prompt);
        bool better = lcp > cache_lcp ||
                      (best_cache != SIZE_MAX && lcp == cache_lcp && e->cache[i].snap && !e->cache[best_cache].snap);
        if (better) {
            best_cache = i;
            cache_lcp = lcp;
        }
    }
    if (best_lcp < n_hist) cache_keep(e, best->s); /* the slot's state is about to be lost */
    if (best_cache != SIZE_MAX) {
        /* cache_keep may have reordered the cache: find the entry again by its history */
        for (size_t i = 0; i < e->n_cache; i++)
            if (common_prefix(e->cache[i].hist, e->cache[i].n_hist, r->prompt, r->n_prompt) == cache_lcp) {
                cached_state *c = &e->cache[i];
                c->last_used = ++e->tick;
                if (c->snap) {
                    slm_session_restore(best->s, c->snap);
                } else {
                    char path[4096];
                    state_path(e, c->hash, path, sizeof path);
                    if (slm_session_load(best->s, path) != SLM_OK) cache_remove(e, i, false);
                }
                break;
            }
    }
    return best;
}

/* One prefill chunk: brings st->s to prompt[0, min(n_prompt, n_fed + CHUNK)) with slm_session_sync
 * (the first call reuses the common prefix); false when the request failed. */
static bool prefill_step(slm_engine *e, stream *st) {
    request *r = st->r;
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    if (st->first_sync) st->n_fed = common_prefix(hist, n_hist, r->prompt, r->n_prompt);
    size_t target = st->n_fed + CHUNK < r->n_prompt ? st->n_fed + CHUNK : r->n_prompt;
    size_t reused = 0;
    slm_status s = slm_session_sync(st->s, r->prompt, target, &st->logits, &reused);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "prefill failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        request_fail(e, r, s, msg);
        return false;
    }
    if (st->first_sync) {
        r->cached_tokens = reused;
        pthread_mutex_lock(&e->mu);
        e->st.n_reused_tokens += reused;
        pthread_mutex_unlock(&e->mu);
        st->first_sync = false;
    }
    st->n_fed = target;
    return true;
}

/* Forks the slot's prefilled session for choices 1..n-1 (each starts from a copy of the prompt's
 * logits). A failed fork fails the request. */
static void fork_choices(slm_engine *e, stream *slot) {
    request *r = slot->r;
    if (r->n <= 1) return;
    slm_snapshot *snap = NULL;
    bool ok = slm_session_snapshot(slot->s, &snap) == SLM_OK;
    for (int32_t ci = 1; ok && ci < r->n; ci++) {
        stream *f = NULL;
        for (int32_t k = 0; k < e->n_forks && !f; k++)
            if (!e->forks[k].r) f = &e->forks[k];
        slm_session_params sp = e->p.session;
        if (!f || slm_session_fork(snap, &sp, &f->s, NULL, 0) != SLM_OK) {
            ok = false;
            break;
        }
        f->own_session = true;
        f->own_logits = malloc((size_t)e->n_vocab * sizeof *f->own_logits);
        if (!stream_begin(e, f, r, ci) || !f->own_logits) {
            stream_end(e, f);
            ok = false;
            break;
        }
        memcpy(f->own_logits, slot->logits, (size_t)e->n_vocab * sizeof *f->own_logits);
        f->logits = f->own_logits;
        f->n_fed = r->n_prompt;
        f->first_sync = false;
    }
    slm_snapshot_destroy(snap);
    if (!ok) request_fail(e, r, SLM_ERR_NOMEM, "cannot fork the session for n > 1");
}

static void top_logprobs(const float *logits, int32_t n_vocab, int32_t id, int32_t k, slm_engine_logprob *out) {
    double mx = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    out->id = id;
    out->logprob = (float)((double)logits[id] - lse);
    out->n_top = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        /* insertion into the k largest, ties to the lower id */
        int32_t p = out->n_top < k ? out->n_top++ : k;
        if (p == k && (k == 0 || !(logits[i] > logits[out->top_id[k - 1]]))) continue;
        if (p == k) p = k - 1;
        while (p > 0 && logits[i] > logits[out->top_id[p - 1]]) {
            out->top_id[p] = out->top_id[p - 1];
            p--;
        }
        out->top_id[p] = i;
    }
    for (int32_t i = 0; i < out->n_top; i++) out->top_lp[i] = (float)((double)logits[out->top_id[i]] - lse);
}

/* Appends token id, generated at session position pos (st->logits are its logits when logprobs
 * were asked for), to the stream's choice and sends its event; false when the stream ended. */
static bool publish_token(slm_engine *e, stream *st, int32_t id, int32_t pos) {
    request *r = st->r;
    choice *c = &r->choices[st->choice];
    const char *piece = NULL, *tail = NULL;
    size_t n_piece = 0, n_tail = 0;
    slm_engine_finish finish = SLM_ENGINE_FINISH_NONE;
    bool eog = !r->ignore_eos && slm_tokenizer_is_eog(e->tok, id), ok = true;
    if (eog) {
        finish = SLM_ENGINE_FINISH_STOP;
    } else {
        if (r->logprobs) {
            slm_engine_logprob *v = realloc(c->lps, (c->n_tokens + 1) * sizeof *v);
            if (v) {
                c->lps = v;
                top_logprobs(st->logits, e->n_vocab, id, r->top_logprobs, &v[c->n_tokens]);
            } else {
                ok = false;
            }
        }
        if (slm_detokenizer_push(st->dt, id, &piece, &n_piece) != SLM_OK) n_piece = 0;
        st->n_gen++;
        if (st->con && slm_constraint_done(st->con)) finish = SLM_ENGINE_FINISH_STOP; /* only the end may follow */
        else if (st->n_gen >= r->max_tokens || pos >= e->n_ctx) finish = SLM_ENGINE_FINISH_LENGTH;
        size_t old = c->text.n;
        ok = ok && tb_add(&c->text, piece ? piece : "", n_piece);
        if (finish && slm_detokenizer_flush(st->dt, &tail, &n_tail) == SLM_OK) ok = ok && tb_add(&c->text, tail, n_tail);
        c->n_tokens++;
        if (c->n_ids == c->cap_ids) {
            size_t cap = c->cap_ids ? 2 * c->cap_ids : 64;
            int32_t *v = realloc(c->ids, cap * sizeof *v);
            if (v) {
                c->ids = v;
                c->cap_ids = cap;
            }
        }
        if (c->n_ids < c->cap_ids) c->ids[c->n_ids++] = id;
        else c->ids_cut = true; /* out of memory: the ids no longer spell the text */
        long at = r->n_stops && c->text.v ? find_stop(r, &c->text, old) : -1;
        if (at >= 0) {
            c->text.n = (size_t)at;
            c->text.v[at] = '\0';
            c->ids_cut = true;
            finish = SLM_ENGINE_FINISH_STOP;
        }
        pthread_mutex_lock(&e->mu);
        e->st.n_generated_tokens++;
        pthread_mutex_unlock(&e->mu);
    }
    if (!ok) {
        request_fail(e, r, SLM_ERR_NOMEM, "out of memory");
        return false;
    }
    if (finish) c->finish = finish;
    send_choice(r, st->choice, finish ? c->text.n : c->text.n - stop_holdback(r, &c->text));
    return !finish;
}

/* Samples the next token of a prefilled stream and publishes it; false when the stream ended. */
static bool sample_step(slm_engine *e, stream *st) {
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    int32_t id = -1;
    slm_status ss = SLM_OK;
    bool finite = true;
    for (int32_t i = 0; i < e->n_vocab && finite; i++) finite = isfinite(st->logits[i]);
    if (!finite || (ss = slm_sampler_sample(st->smp, st->logits, e->n_vocab, hist, n_hist, &id)) != SLM_OK) {
        request_fail(e, st->r, finite ? ss : SLM_ERR_BACKEND,
                     ss == SLM_ERR_STATE   ? "no token of the vocabulary continues the grammar here"
                     : ss == SLM_ERR_RANGE ? "logit_bias bans every token"
                                           : "the model produced non-finite logits");
        return false;
    }
    if (st->con && slm_constraint_accept(st->con, id) != SLM_OK) { /* the mask allowed it: a bug */
        request_fail(e, st->r, SLM_ERR_STATE, slm_constraint_errmsg(st->con));
        return false;
    }
    if (!publish_token(e, st, id, slm_session_pos(st->s))) return false;
    st->next_id = id;
    return true;
}

static bool sampler_is_argmax(const slm_sampler_params *p) {
    return p->temperature == 0.0f && p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f && p->n_logit_bias == 0;
}

/* Whether st generates by speculation now: lookup or a draft model, no logprobs or grammar, room
 * left in the context, and the session holds the logits of its last token (a fork holds them after
 * its first decode). */
static bool spec_wanted(const slm_engine *e, const stream *st) {
    return (e->p.lookup || e->p.draft_model) && !st->r->logprobs && !st->con && slm_session_pos(st->s) < e->n_ctx &&
           (!st->own_session || st->n_gen > 0);
}

/* Starts the speculation driver of st: greedy at temperature 0 without penalties (the tokens plain
 * greedy decoding gives), else speculative sampling with the stream's sampler. False when the
 * request failed. */
static bool spec_begin(slm_engine *e, stream *st) {
    char err[200] = "";
    slm_status s = SLM_OK;
    if (e->p.draft_model && !st->draft) {
        slm_session_params sp = e->p.session;
        sp.n_ctx = e->n_ctx;
        s = slm_session_create(e->p.draft_model, &sp, &st->draft, err, sizeof err);
    }
    if (s == SLM_OK) {
        slm_spec_params p = slm_spec_params_default();
        if (e->p.draft_max) p.draft_max = e->p.draft_max;
        p.draft = e->p.draft_model ? st->draft : NULL;
        p.sampler = sampler_is_argmax(&st->r->sp) ? NULL : st->smp;
        s = slm_spec_create(st->s, &p, &st->spec, err, sizeof err);
    }
    if (s == SLM_OK) return true;
    char msg[256];
    snprintf(msg, sizeof msg, "cannot start speculative decoding: %s (%s)", err, slm_status_name(s));
    request_fail(e, st->r, s, msg);
    return false;
}

/* One speculation step of st: the next token and the drafted ones the target kept, all decoded,
 * published in order; false when the stream ended. Tokens after the end stay in the session's
 * history (the next request's slm_session_sync drops them). */
static bool spec_step(slm_engine *e, stream *st) {
    request *r = st->r;
    int32_t ids[65];
    size_t n_max = (size_t)(r->max_tokens - st->n_gen), n = 0;
    if (n_max > 65) n_max = 65;
    int32_t pos0 = slm_session_pos(st->s);
    double t0 = now_s();
    slm_status s = slm_spec_step(st->spec, n_max, ids, &n);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "speculative decoding failed: %s (%s)", slm_spec_errmsg(st->spec), slm_status_name(s));
        request_fail(e, r, s, msg);
        return false;
    }
    pthread_mutex_lock(&e->mu);
    e->st.decode_seconds += now_s() - t0;
    e->st.n_decoded_tokens += n;
    pthread_mutex_unlock(&e->mu);
    /* st->logits (the session's logits buffer) now holds the logits after ids[n - 1] */
    for (size_t i = 0; i < n; i++)
        if (!publish_token(e, st, ids[i], pos0 + (int32_t)i)) return false;
    return true;
}

/* One decode step alone; a failure fails that stream's request only. */
static void decode_one(slm_engine *e, stream *st) {
    slm_status s = slm_session_decode(st->s, st->next_id, &st->logits);
    st->next_id = -1;
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "decode failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        request_fail(e, st->r, s, msg);
    }
}

/* Decodes the sampled token of every stream in v[0, n), the one place decode steps happen: one
 * slm_session_decode_batch call for all of them (each weight read once; bit-identical to decoding
 * each alone). A refused batch changes no session and falls back to decoding each stream alone, so
 * a failure reaches only the request whose decode fails. */
static void decode_all(slm_engine *e, stream **v, int32_t n) {
    double t0 = now_s();
    bool batched = false;
    if (n > 1) {
        slm_session **sess = malloc((size_t)n * sizeof *sess);
        const float **lg = malloc((size_t)n * sizeof *lg);
        int32_t *tok = malloc((size_t)n * sizeof *tok);
        if (sess && lg && tok) {
            for (int32_t i = 0; i < n; i++) {
                sess[i] = v[i]->s;
                tok[i] = v[i]->next_id;
            }
            batched = slm_session_decode_batch(sess, tok, (size_t)n, lg, NULL, 0) == SLM_OK;
            if (batched)
                for (int32_t i = 0; i < n; i++) {
                    v[i]->logits = lg[i];
                    v[i]->next_id = -1;
                }
        }
        free(sess);
        free(lg);
        free(tok);
    }
    if (!batched)
        for (int32_t i = 0; i < n; i++) decode_one(e, v[i]);
    pthread_mutex_lock(&e->mu);
    e->st.decode_seconds += now_s() - t0;
    e->st.n_decoded_tokens += (uint64_t)n;
    if (batched) {
        e->st.n_batch_steps++;
        e->st.n_batch_slots += (uint64_t)n;
        if (n > e->st.batch_max) e->st.batch_max = n;
    } else if (n > 1) {
        e->st.n_batch_fallbacks++;
    }
    pthread_mutex_unlock(&e->mu);
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
            request_finish(e, r, SLM_ENGINE_DONE_SHUTDOWN, SLM_ERR_ABORTED, "the engine is stopping");
            continue;
        }
        if (cancelled) {
            request_finish(e, r, SLM_ENGINE_DONE_CANCELLED, SLM_OK, NULL);
            continue;
        }
        stream *st = admit(e, r);
        if (!st) { /* n_busy < n_slots: cannot happen */
            pthread_mutex_lock(&e->mu);
            e->st.n_busy--;
            pthread_mutex_unlock(&e->mu);
            request_fail(e, r, SLM_ERR_STATE, "no idle slot");
            continue;
        }
        if (!stream_begin(e, st, r, 0)) {
            request_fail(e, r, SLM_ERR_NOMEM, "cannot start the generation");
            stream_end(e, st);
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
    if (cancelled) request_finish(e, r, SLM_ENGINE_DONE_CANCELLED, SLM_OK, NULL);
    else if (stopping) request_finish(e, r, SLM_ENGINE_DONE_SHUTDOWN, SLM_ERR_ABORTED, "the engine is stopping");
    return cancelled || stopping;
}

/* One step; returns the requests still queued or running. */
static int32_t step(slm_engine *e) {
    admit_queued(e);
    int32_t n_all = e->p.n_slots + e->n_forks, n_dec = 0;
    for (int32_t i = 0; i < n_all; i++) {
        stream *st = e->all[i];
        if (!st->r) continue;
        if (stream_dead(e, st)) {
            stream_end(e, st);
            continue;
        }
        if (st->n_fed < st->r->n_prompt) {
            if (!prefill_step(e, st)) stream_end(e, st);
            else if (st->n_fed == st->r->n_prompt && !st->own_session) fork_choices(e, st);
            continue;
        }
        if (!st->spec && spec_wanted(e, st) && !spec_begin(e, st)) {
            stream_end(e, st);
            continue;
        }
        if (st->spec && slm_session_pos(st->s) < e->n_ctx) {
            if (!spec_step(e, st)) stream_end(e, st);
            continue;
        }
        if (sample_step(e, st)) e->dec[n_dec++] = st;
        else stream_end(e, st);
    }
    if (n_dec) decode_all(e, e->dec, n_dec);
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
        while (!e->stopping && !e->queue_head && pending == 0) pthread_cond_wait(&e->wake, &e->mu);
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

/* ---- requests in ----------------------------------------------------------------------------- */

static slm_status refuse(char *err, size_t cap, slm_status s, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
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

SLM_API slm_status slm_engine_submit(slm_engine *e, const slm_engine_request *q, uint64_t *id, char *err,
                                     size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!e || !q || !id) return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "NULL engine, request or id");
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
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "n_stops %d is not in [0, %d]", q->n_stops, SLM_ENGINE_MAX_STOPS);
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
    request *r = calloc(1, sizeof *r);
    if (!r) return refuse(err, err_cap, SLM_ERR_NOMEM, "out of memory");
    r->sp = q->sampler;
    r->sp.logit_bias = NULL;
    bool ok = (r->prompt = malloc(q->n_ids * sizeof *r->prompt)) != NULL;
    if (ok && q->sampler.n_logit_bias) {
        slm_logit_bias *lb = malloc((size_t)q->sampler.n_logit_bias * sizeof *lb);
        if ((ok = lb != NULL)) memcpy(lb, q->sampler.logit_bias, (size_t)q->sampler.n_logit_bias * sizeof *lb);
        r->sp.logit_bias = lb;
    }
    for (int32_t i = 0; ok && i < q->n_stops; i++)
        if (q->stops[i] && q->stops[i][0]) ok = (r->stops[r->n_stops++] = strdup(q->stops[i])) != NULL;
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

/* ---- lifetime -------------------------------------------------------------------------------- */

SLM_API slm_engine_params slm_engine_params_default(void) {
    slm_engine_params p = {0};
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
    slm_engine_params p = params ? *params : slm_engine_params_default();
    if (p.n_slots < 1 || p.n_slots > 4096 || p.queue_max < 0 || p.cache_mib < 0 || p.draft_max < 0)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "n_slots, queue_max, cache_mib or draft_max out of range");
    if (p.lookup && p.draft_model)
        return refuse(err, err_cap, SLM_ERR_INVALID_ARG, "lookup and draft_model exclude each other");
    const slm_tokenizer *tok = slm_model_tokenizer(model);
    if (!tok) return refuse(err, err_cap, SLM_ERR_UNSUPPORTED, "the model has no tokenizer");
    slm_engine *e = calloc(1, sizeof *e);
    if (!e) return refuse(err, err_cap, SLM_ERR_NOMEM, "out of memory");
    e->p = p;
    e->m = model;
    e->tok = tok;
    e->n_vocab = slm_model_n_vocab(model);
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->gvocab_mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    e->n_forks = p.n_slots * (SLM_ENGINE_MAX_N - 1);
    int32_t n_all = p.n_slots + e->n_forks;
    e->slots = calloc((size_t)p.n_slots, sizeof *e->slots);
    e->forks = calloc((size_t)e->n_forks, sizeof *e->forks);
    e->all = malloc((size_t)n_all * sizeof *e->all);
    e->dec = malloc((size_t)n_all * sizeof *e->dec);
    if (p.state_dir) e->state_dir = strdup(p.state_dir);
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
    index_state_dir(e, e->slots[0].s);
    e->st.n_state_files = e->n_cache;
    *out = e;
    return SLM_OK;
}

SLM_API void slm_engine_free(slm_engine *e) {
    if (!e) return;
    if (e->n_ctx) slm_engine_stop(e); /* created whole: e->all is filled */
    while (e->n_cache) cache_remove(e, e->n_cache - 1, true);
    free(e->cache);
    for (int32_t i = 0; e->slots && i < e->p.n_slots; i++) {
        slm_session_destroy(e->slots[i].s);
        slm_session_destroy(e->slots[i].draft);
    }
    for (int32_t i = 0; e->forks && i < e->n_forks; i++) slm_session_destroy(e->forks[i].draft);
    free(e->slots);
    free(e->forks);
    free(e->all);
    free(e->dec);
    free(e->state_dir);
    slm_grammar_vocab_destroy(e->gvocab);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->gvocab_mu);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
