/* engine.c — the scheduler of `statelm serve` (tools/serve/serve.h lists the other parts).
 * Constrained output (response_format, grammar, json_schema): a job owns its compiled grammar, each
 * stream a constraint over the model's one grammar vocabulary, attached to the stream's sampler.
 *
 * Threads: the HTTP connection threads parse requests into jobs and wait on them; one scheduler
 * thread owns every session and runs, in turn, one step per active stream (one sampled and decoded
 * token, or one prefill chunk of CHUNK tokens), so concurrent streams interleave and new requests
 * join between steps. decode_all() is the one place the decode steps of all streams happen: one
 * slm_session_decode_batch call per step for every stream that batches.
 *
 * State reuse: a job goes to the idle slot whose session history shares the longest token prefix
 * with its prompt; a cached snapshot (kept under --cache-mib, LRU) or a state file spilled into
 * --state-dir is restored first when it shares more. The session then continues with
 * slm_session_sync, which computes only what differs. File names are a hash of the token history,
 * never request data. One mutex (srv.mu) guards jobs, the queue and the counters; sessions,
 * samplers and the cache are touched by the scheduler thread only.
 *
 * Speculation (--lookup, --draft-model): a stream past its prompt (a fork: past its first token)
 * without logprobs generates by slm_spec_step, several tokens per weight pass, outside
 * decode_all(); each stream has its own driver (and draft session), greedy at temperature 0. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* FNV-1a of the token ids, seeded with the model's fingerprint and the context size (srv.hash_seed):
 * the name of a state file, so servers of other models or contexts never share one. */
static uint64_t hash_ids(const int32_t *v, size_t n) {
    uint64_t h = srv.hash_seed;
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
    free(j->prompt);
    free(j->sse.v);
    pthread_cond_destroy(&j->cv);
    free(j);
}


static void job_fail_code_locked(job *j, int status, const char *code, const char *msg) {
    if (j->done) return;
    j->err_status = status;
    j->err_code = code;
    snprintf(j->err_msg, sizeof j->err_msg, "%s", msg);
    j->done = true;
    srv.m_errors++;
    if (j->stream) sse_finish(j);
    pthread_cond_broadcast(&j->cv);
}

static void job_fail_locked(job *j, int status, const char *msg) { job_fail_code_locked(j, status, NULL, msg); }

/* ---- stop strings ---------------------------------------------------------------------------- */

/* Position of the first stop string in text that ends at or after `from`, or -1. */
static long find_stop(const job *j, const sbuf *t, size_t from) {
    long best = -1;
    for (int32_t i = 0; i < j->n_stops; i++) {
        size_t ls = strlen(j->stops[i]);
        size_t start = from >= ls ? from - ls + 1 : 0;
        for (size_t p = start; p + ls <= t->n; p++)
            if (!memcmp(t->v + p, j->stops[i], ls)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* Bytes at the end of text that could begin a stop string (held back from the stream). */
static size_t stop_holdback(const job *j, const sbuf *t) {
    size_t hold = 0;
    for (int32_t i = 0; i < j->n_stops; i++) {
        size_t ls = strlen(j->stops[i]);
        for (size_t k = ls - 1; k > hold; k--)
            if (k <= t->n && !memcmp(t->v + t->n - k, j->stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* ---- state cache ------------------------------------------------------------------------------ */

static void state_path(uint64_t hash, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%016llx.slmstate", srv.o.state_dir, (unsigned long long)hash);
}

/* Drops entry i; its state file too unless keep_file (files outlive the server). */
void cache_remove(size_t i, bool keep_file) {
    cached_state *c = &srv.cache[i];
    if (c->snap) {
        slm_snapshot_destroy(c->snap);
        srv.cache_bytes -= c->bytes;
    } else if (!keep_file) {
        char path[4096];
        state_path(c->hash, path, sizeof path);
        unlink(path);
    }
    free(c->hist);
    srv.cache[i] = srv.cache[--srv.n_cache];
}

/* Writes the snapshot of entry i to --state-dir and keeps only the file; without --state-dir or
 * when it cannot be written, drops the entry. */
static void cache_spill(size_t i) {
    cached_state *c = &srv.cache[i];
    if (!srv.o.state_dir) {
        cache_remove(i, false);
        return;
    }
    size_t n_files = 0, lru = SIZE_MAX;
    for (size_t k = 0; k < srv.n_cache; k++)
        if (!srv.cache[k].snap) {
            n_files++;
            if (lru == SIZE_MAX || srv.cache[k].last_used < srv.cache[lru].last_used) lru = k;
        }
    if (n_files >= MAX_STATE_FILES) {
        cache_remove(lru, false); /* moves the last entry into lru */
        if (i == srv.n_cache) i = lru;
        c = &srv.cache[i];
    }
    slm_session *tmp = NULL;
    char path[4096];
    state_path(c->hash, path, sizeof path);
    slm_session_params sp = slm_session_params_default();
    sp.n_threads = 1;
    if (slm_session_fork(c->snap, &sp, &tmp, NULL, 0) != SLM_OK || slm_session_save(tmp, path) != SLM_OK) {
        slm_session_destroy(tmp);
        cache_remove(i, false);
        return;
    }
    slm_session_destroy(tmp);
    slm_snapshot_destroy(c->snap);
    c->snap = NULL;
    srv.cache_bytes -= c->bytes;
}

/* Room for one more entry in srv.cache; false when out of memory. */
static bool cache_reserve(void) {
    if (srv.n_cache < srv.cap_cache) return true;
    size_t cap = srv.cap_cache ? srv.cap_cache * 2 : 16;
    cached_state *v = realloc(srv.cache, cap * sizeof *v);
    if (!v) return false;
    srv.cache = v;
    srv.cap_cache = cap;
    return true;
}

/* Keeps the session's state (its history is not a prefix of a kept one) before the slot is
 * reused; evicts the least recently used snapshots beyond --cache-mib. */
static void cache_keep(slm_session *s) {
    size_t n_hist;
    const int32_t *hist = slm_session_history(s, &n_hist);
    if (srv.o.cache_mib <= 0 || n_hist == 0) return;
    uint64_t h = hash_ids(hist, n_hist);
    for (size_t i = 0; i < srv.n_cache; i++)
        if (srv.cache[i].hash == h && srv.cache[i].n_hist == n_hist) {
            srv.cache[i].last_used = ++srv.tick;
            return;
        }
    if (!cache_reserve()) return;
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
    c.last_used = ++srv.tick;
    srv.cache[srv.n_cache++] = c;
    srv.cache_bytes += c.bytes;
    uint64_t budget = (uint64_t)srv.o.cache_mib << 20;
    while (srv.cache_bytes > budget) {
        size_t lru = SIZE_MAX;
        for (size_t i = 0; i < srv.n_cache; i++)
            if (srv.cache[i].snap && (lru == SIZE_MAX || srv.cache[i].last_used < srv.cache[lru].last_used)) lru = i;
        if (lru == SIZE_MAX) break;
        cache_spill(lru);
    }
}

/* Indexes the state files an earlier server left in --state-dir (names as state_path writes them,
 * loadable into a session of this model and context, history hashing to the name), least recently
 * used first; s is reset afterwards. Other files are left alone. */
void index_state_dir(slm_session *s) {
    DIR *dir = srv.o.state_dir ? opendir(srv.o.state_dir) : NULL;
    if (!dir) return;
    struct dirent *e;
    size_t n_files = 0;
    while ((e = readdir(dir)) != NULL && n_files < MAX_STATE_FILES) {
        unsigned long long h;
        char tail[16];
        if (strlen(e->d_name) != 25 || sscanf(e->d_name, "%16llx%15s", &h, tail) != 2 || strcmp(tail, ".slmstate") != 0)
            continue;
        char path[4096];
        state_path(h, path, sizeof path);
        size_t n_hist;
        const int32_t *hist;
        if (slm_session_load(s, path) != SLM_OK || !(hist = slm_session_history(s, &n_hist)) ||
            hash_ids(hist, n_hist) != h)
            continue;
        if (!cache_reserve()) break;
        cached_state c = {0};
        if (!(c.hist = malloc(n_hist * sizeof *c.hist))) break;
        memcpy(c.hist, hist, n_hist * sizeof *c.hist);
        c.n_hist = n_hist;
        c.hash = h;
        srv.cache[srv.n_cache++] = c;
        n_files++;
    }
    closedir(dir);
    slm_session_reset(s);
}

/* ---- scheduler -------------------------------------------------------------------------------- */

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ srv.hash_seed;
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

static void stream_end(stream *st) {
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
    st->last_used = ++srv.tick;
    pthread_mutex_lock(&srv.mu);
    job *j = st->j;
    st->j = NULL;
    if (!st->own_session) srv.m_busy--;
    srv.m_drafted += ss.n_drafted;
    srv.m_accepted += ss.n_accepted;
    srv.m_replays += ss.n_replays;
    if (j) {
        if (++j->n_done == j->n || j->err_status || j->cancelled) {
            if (!j->done) {
                j->done = true;
                if (j->chat && !j->err_status && !j->cancelled)
                    for (int32_t i = 0; i < j->n; i++) gen_remember_locked(&j->choices[i]);
                if (j->stream) sse_finish(j);
                pthread_cond_broadcast(&j->cv);
            }
        }
        job_unref_locked(j);
    }
    pthread_mutex_unlock(&srv.mu);
}

static bool stream_begin(stream *st, job *j, int32_t ci) {
    slm_sampler_params sp = j->sp;
    sp.seed += (uint64_t)ci;
    st->j = j;
    st->choice = ci;
    st->n_gen = 0;
    st->next_id = -1;
    st->first_sync = true;
    if (slm_sampler_create(&sp, &st->smp) != SLM_OK || slm_detokenizer_create(srv.tok, &st->dt) != SLM_OK) return false;
    return !j->grammar || (slm_constraint_create(j->grammar, srv.gvocab, &st->con) == SLM_OK &&
                           slm_sampler_set_constraint(st->smp, st->con) == SLM_OK);
}

/* Picks the idle slot for j and brings it to the best kept state; NULL when none is idle. */
static stream *admit(job *j) {
    stream *best = NULL;
    size_t best_lcp = 0;
    for (int32_t i = 0; i < srv.o.parallel; i++) {
        stream *st = &srv.slots[i];
        if (st->j) continue;
        size_t n_hist;
        const int32_t *hist = slm_session_history(st->s, &n_hist);
        size_t lcp = common_prefix(hist, n_hist, j->prompt, j->n_prompt);
        if (!best || lcp > best_lcp || (lcp == best_lcp && st->last_used < best->last_used)) {
            best = st;
            best_lcp = lcp;
        }
    }
    if (!best) return NULL;
    if (srv.o.no_prefix_reuse) {
        slm_session_reset(best->s);
        best->n_fed = 0;
        return best;
    }
    size_t n_hist;
    slm_session_history(best->s, &n_hist);
    size_t best_cache = SIZE_MAX, cache_lcp = best_lcp;
    for (size_t i = 0; i < srv.n_cache; i++) {
        size_t lcp = common_prefix(srv.cache[i].hist, srv.cache[i].n_hist, j->prompt, j->n_prompt);
        bool better = lcp > cache_lcp ||
                      (best_cache != SIZE_MAX && lcp == cache_lcp && srv.cache[i].snap && !srv.cache[best_cache].snap);
        if (better) {
            best_cache = i;
            cache_lcp = lcp;
        }
    }
    if (best_lcp < n_hist) cache_keep(best->s); /* the slot's state is about to be lost */
    if (best_cache != SIZE_MAX) {
        /* cache_keep may have reordered the cache: find the entry again by its history */
        for (size_t i = 0; i < srv.n_cache; i++)
            if (common_prefix(srv.cache[i].hist, srv.cache[i].n_hist, j->prompt, j->n_prompt) == cache_lcp) {
                cached_state *c = &srv.cache[i];
                c->last_used = ++srv.tick;
                if (c->snap) {
                    slm_session_restore(best->s, c->snap);
                } else {
                    char path[4096];
                    state_path(c->hash, path, sizeof path);
                    if (slm_session_load(best->s, path) != SLM_OK) cache_remove(i, false);
                }
                break;
            }
    }
    best->n_fed = 0;
    return best;
}

/* One prefill chunk: brings st->s to prompt[0, min(n_prompt, n_fed + CHUNK)) with
 * slm_session_sync (the first call reuses the common prefix); false when the job failed. */
static bool prefill_step(stream *st) {
    job *j = st->j;
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    if (st->first_sync) st->n_fed = common_prefix(hist, n_hist, j->prompt, j->n_prompt);
    size_t target = st->n_fed + CHUNK < j->n_prompt ? st->n_fed + CHUNK : j->n_prompt;
    size_t reused = 0;
    slm_status s = slm_session_sync(st->s, j->prompt, target, &st->logits, &reused);
    pthread_mutex_lock(&srv.mu);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "prefill failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        job_fail_locked(j, 500, msg);
        pthread_mutex_unlock(&srv.mu);
        return false;
    }
    if (st->first_sync) {
        j->cached_tokens = reused;
        srv.m_reused_tokens += reused;
        st->first_sync = false;
    }
    pthread_mutex_unlock(&srv.mu);
    st->n_fed = target;
    return true;
}

/* Forks the slot's prefilled session for choices 1..n-1 (each starts from a copy of the prompt's
 * logits). A failed fork fails the job. */
static void fork_choices(stream *slot) {
    job *j = slot->j;
    if (j->n <= 1) return;
    slm_snapshot *snap = NULL;
    bool ok = slm_session_snapshot(slot->s, &snap) == SLM_OK;
    for (int32_t ci = 1; ok && ci < j->n; ci++) {
        stream *f = NULL;
        for (int32_t k = 0; k < srv.n_forks_cap && !f; k++)
            if (!srv.forks[k].j) f = &srv.forks[k];
        slm_session_params sp = slm_session_params_default();
        sp.n_threads = srv.o.n_threads;
        cli_apply_env(&sp, NULL);
        if (!f || slm_session_fork(snap, &sp, &f->s, NULL, 0) != SLM_OK) {
            ok = false;
            break;
        }
        f->own_session = true;
        f->own_logits = malloc((size_t)srv.n_vocab * sizeof *f->own_logits);
        pthread_mutex_lock(&srv.mu);
        j->refs++;
        pthread_mutex_unlock(&srv.mu);
        if (!stream_begin(f, j, ci) || !f->own_logits) {
            stream_end(f);
            ok = false;
            break;
        }
        memcpy(f->own_logits, slot->logits, (size_t)srv.n_vocab * sizeof *f->own_logits);
        f->logits = f->own_logits;
        f->n_fed = j->n_prompt;
        f->first_sync = false;
    }
    slm_snapshot_destroy(snap);
    if (!ok) {
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(j, 500, "cannot fork the session for n > 1");
        pthread_mutex_unlock(&srv.mu);
    }
}

static void top_logprobs(const float *logits, int32_t n_vocab, int32_t id, int32_t k, tok_lp *out) {
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

/* Publishes token id, generated at session position pos (st->logits are its logits when logprobs
 * were asked for); false when the stream ended. */
static bool publish_token(stream *st, int32_t id, int32_t pos) {
    job *j = st->j;
    choice *c = &j->choices[st->choice];
    tok_lp lp = {0};
    const char *piece = NULL, *tail = NULL;
    size_t n_piece = 0, n_tail = 0;
    const char *finish = NULL;
    bool eog = !j->ignore_eos && slm_tokenizer_is_eog(srv.tok, id);
    if (eog) {
        finish = "stop";
    } else {
        if (j->logprobs) top_logprobs(st->logits, srv.n_vocab, id, j->top_logprobs, &lp);
        if (slm_detokenizer_push(st->dt, id, &piece, &n_piece) != SLM_OK) n_piece = 0;
        st->n_gen++;
        if (st->con && slm_constraint_done(st->con)) finish = "stop"; /* only the end may follow */
        else if (st->n_gen >= j->max_tokens || pos >= srv.n_ctx) finish = "length";
    }
    pthread_mutex_lock(&srv.mu);
    bool ok = true;
    if (!eog) {
        size_t old = c->text.n;
        sb_add(&c->text, piece ? piece : "", n_piece);
        if (finish && slm_detokenizer_flush(st->dt, &tail, &n_tail) == SLM_OK) sb_add(&c->text, tail, n_tail);
        if (j->logprobs) {
            tok_lp *v = realloc(c->lps, (c->n_tokens + 1) * sizeof *v);
            if (v) {
                c->lps = v;
                v[c->n_tokens] = lp;
            } else {
                ok = false;
            }
        }
        c->n_tokens++;
        srv.m_gen_tokens++;
        if (c->n_ids == c->cap_ids) {
            size_t cap = c->cap_ids ? 2 * c->cap_ids : 64;
            int32_t *v = realloc(c->ids, cap * sizeof *v);
            if (v) {
                c->ids = v;
                c->cap_ids = cap;
            }
        }
        if (c->n_ids < c->cap_ids) c->ids[c->n_ids++] = id;
        else c->ids_cut = true; /* out of memory: not remembered */
        long at = j->n_stops ? find_stop(j, &c->text, old) : -1;
        if (at >= 0) {
            c->text.n = (size_t)at;
            c->text.v[at] = '\0';
            c->ids_cut = true;
            finish = "stop";
        }
    }
    if (finish) c->finish = finish;
    if (!ok) {
        job_fail_locked(j, 500, "out of memory");
    } else if (j->stream && !j->cancelled) {
        size_t upto = finish ? c->text.n : c->text.n - stop_holdback(j, &c->text);
        if (upto < c->n_sent) upto = c->n_sent;
        sse_choice(j, st->choice, upto);
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&srv.mu);
    return !finish && ok;
}

/* Samples the next token of a prefilled stream and publishes it; false when the stream ended. */
static bool sample_step(stream *st) {
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    int32_t id = -1;
    slm_status ss = SLM_OK;
    if (cli_first_nonfinite(st->logits, srv.n_vocab) >= 0 ||
        (ss = slm_sampler_sample(st->smp, st->logits, srv.n_vocab, hist, n_hist, &id)) != SLM_OK) {
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(st->j, 500, ss == SLM_ERR_STATE   ? "no token of the vocabulary continues the grammar here"
                                    : ss == SLM_ERR_RANGE ? "logit_bias bans every token"
                                                          : "the model produced non-finite logits");
        pthread_mutex_unlock(&srv.mu);
        return false;
    }
    if (st->con && slm_constraint_accept(st->con, id) != SLM_OK) { /* the mask allowed it: a bug */
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(st->j, 500, slm_constraint_errmsg(st->con));
        pthread_mutex_unlock(&srv.mu);
        return false;
    }
    if (!publish_token(st, id, slm_session_pos(st->s))) return false;
    st->next_id = id;
    return true;
}

/* Whether st generates by speculation now: --lookup or --draft-model, no logprobs asked for, room
 * left in the context, and the session holds the logits of its last token (a fork holds them after
 * its first decode). */
static bool spec_wanted(const stream *st) {
    return (srv.o.lookup || srv.draft_model) && !st->j->logprobs && !st->con && slm_session_pos(st->s) < srv.n_ctx &&
           (!st->own_session || st->n_gen > 0);
}

/* Starts the speculation driver of st for its job: greedy at temperature 0 without a repetition
 * penalty (the tokens plain greedy decoding gives), else speculative sampling with the stream's
 * sampler. False when the job failed. */
static bool spec_begin(stream *st) {
    char err[200] = "";
    slm_status s = SLM_OK;
    if (srv.draft_model && !st->draft) {
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = srv.n_ctx;
        sp.n_threads = srv.o.n_threads;
        cli_apply_env(&sp, NULL);
        s = slm_session_create(srv.draft_model, &sp, &st->draft, err, sizeof err);
    }
    if (s == SLM_OK) {
        slm_spec_params p = slm_spec_params_default();
        if (srv.o.draft_max) p.draft_max = srv.o.draft_max;
        p.draft = srv.draft_model ? st->draft : NULL;
        p.sampler = cli_sampler_is_argmax(&st->j->sp) ? NULL : st->smp;
        s = slm_spec_create(st->s, &p, &st->spec, err, sizeof err);
    }
    if (s == SLM_OK) return true;
    char msg[256];
    snprintf(msg, sizeof msg, "cannot start speculative decoding: %s (%s)", err, slm_status_name(s));
    pthread_mutex_lock(&srv.mu);
    job_fail_locked(st->j, 500, msg);
    pthread_mutex_unlock(&srv.mu);
    return false;
}

/* One speculation step of st: the next token and the drafted ones the target kept, all decoded,
 * published in order; false when the stream ended. Tokens after the end stay in the session's
 * history (the next request's slm_session_sync drops them). */
static bool spec_step(stream *st) {
    job *j = st->j;
    int32_t ids[65];
    size_t n_max = (size_t)(j->max_tokens - st->n_gen), n = 0;
    if (n_max > 65) n_max = 65;
    int32_t pos0 = slm_session_pos(st->s);
    double t0 = now_s();
    slm_status s = slm_spec_step(st->spec, n_max, ids, &n);
    pthread_mutex_lock(&srv.mu);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "speculative decoding failed: %s (%s)", slm_spec_errmsg(st->spec),
                 slm_status_name(s));
        job_fail_locked(j, 500, msg);
    } else {
        srv.m_decode_s += now_s() - t0;
        srv.m_decode_tokens += n;
    }
    pthread_mutex_unlock(&srv.mu);
    if (s != SLM_OK) return false;
    /* st->logits (the session's logits buffer) now holds the logits after ids[n - 1] */
    for (size_t i = 0; i < n; i++)
        if (!publish_token(st, ids[i], pos0 + (int32_t)i)) return false;
    return true;
}

/* Whether a stream's decode step may join the scheduler step's batch (every stream that reaches
 * decode_all today: speculating streams step through spec_step instead); one that returns false is
 * decoded alone. */
static bool stream_batches(const stream *st) {
    (void)st;
    return true;
}

/* One decode step alone; a failure fails that stream's request only. */
static void decode_one(stream *st) {
    slm_status s = slm_session_decode(st->s, st->next_id, &st->logits);
    st->next_id = -1;
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "decode failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(st->j, 500, msg);
        pthread_mutex_unlock(&srv.mu);
    }
}

/* Decodes the sampled token of every stream in v[0, n), the one place decode steps happen: the
 * streams that batch go through one slm_session_decode_batch call (each weight read once for all
 * of them; bit-identical to decoding each alone), the others one by one. A refused batch changes
 * no session and falls back to decoding each stream alone, so a failure reaches only the request
 * whose decode fails. */
static void decode_all(stream **v, int32_t n) {
    double t0 = now_s();
    size_t cap = (size_t)n;
    stream **in_batch = malloc(cap * sizeof *in_batch);
    slm_session **sess = malloc(cap * sizeof *sess);
    const float **lg = malloc(cap * sizeof *lg);
    int32_t *tok = malloc(cap * sizeof *tok);
    bool scratch = in_batch && sess && lg && tok; /* without it, every stream decodes alone */
    int32_t n_batch = 0;
    for (int32_t i = 0; i < n; i++)
        if (scratch && stream_batches(v[i])) in_batch[n_batch++] = v[i];
        else decode_one(v[i]);
    bool batched = false;
    if (n_batch > 1) {
        for (int32_t i = 0; i < n_batch; i++) {
            sess[i] = in_batch[i]->s;
            tok[i] = in_batch[i]->next_id;
        }
        batched = slm_session_decode_batch(sess, tok, (size_t)n_batch, lg, NULL, 0) == SLM_OK;
        if (batched)
            for (int32_t i = 0; i < n_batch; i++) {
                in_batch[i]->logits = lg[i];
                in_batch[i]->next_id = -1;
            }
    }
    if (!batched)
        for (int32_t i = 0; i < n_batch; i++) decode_one(in_batch[i]);
    free(in_batch);
    free(sess);
    free(lg);
    free(tok);
    pthread_mutex_lock(&srv.mu);
    srv.m_decode_s += now_s() - t0;
    srv.m_decode_tokens += (uint64_t)n;
    if (batched) {
        srv.m_batch_steps++;
        srv.m_batch_slots += (uint64_t)n_batch;
        if (n_batch > srv.m_batch_max) srv.m_batch_max = n_batch;
    } else if (n_batch > 1) {
        srv.m_batch_fallbacks++;
    }
    pthread_mutex_unlock(&srv.mu);
}

static bool stream_dead(const stream *st) {
    pthread_mutex_lock(&srv.mu);
    bool dead = st->j->cancelled || st->j->err_status != 0 || srv.stopping;
    pthread_mutex_unlock(&srv.mu);
    return dead;
}

void *scheduler(void *arg) {
    (void)arg;
    int32_t n_all = srv.o.parallel + srv.n_forks_cap;
    stream **all = malloc((size_t)n_all * sizeof *all), **dec = malloc((size_t)n_all * sizeof *dec);
    for (int32_t i = 0; i < srv.o.parallel; i++) all[i] = &srv.slots[i];
    for (int32_t i = 0; i < srv.n_forks_cap; i++) all[srv.o.parallel + i] = &srv.forks[i];
    for (;;) {
        /* admit queued jobs into idle slots */
        pthread_mutex_lock(&srv.mu);
        for (;;) {
            bool any_active = srv.m_busy > 0;
            for (int32_t i = 0; i < srv.n_forks_cap && !any_active; i++) any_active = srv.forks[i].j != NULL;
            if (srv.stopping || srv.queue_head || any_active) break;
            pthread_cond_wait(&srv.wake, &srv.mu);
        }
        bool stopping = srv.stopping;
        while (!stopping && srv.queue_head && srv.m_busy < srv.o.parallel) {
            job *j = srv.queue_head;
            srv.queue_head = j->next;
            if (!srv.queue_head) srv.queue_tail = NULL;
            srv.queue_len--;
            if (j->cancelled) {
                job_unref_locked(j);
                continue;
            }
            srv.m_busy++;
            pthread_mutex_unlock(&srv.mu);
            stream *st = admit(j);
            bool ok = st && stream_begin(st, j, 0);
            pthread_mutex_lock(&srv.mu);
            if (!ok) {
                job_fail_locked(j, 500, "cannot start the generation");
                if (st) {
                    pthread_mutex_unlock(&srv.mu);
                    stream_end(st);
                    pthread_mutex_lock(&srv.mu);
                } else {
                    srv.m_busy--;
                    job_unref_locked(j);
                }
            }
        }
        if (stopping) {
            while (srv.queue_head) {
                job *j = srv.queue_head;
                srv.queue_head = j->next;
                srv.queue_len--;
                job_fail_code_locked(j, 503, "server_shutting_down", "the server is shutting down");
                job_unref_locked(j);
            }
            srv.queue_tail = NULL;
        }
        pthread_mutex_unlock(&srv.mu);
        /* one step per active stream */
        int32_t n_dec = 0;
        bool any = false;
        for (int32_t i = 0; i < n_all; i++) {
            stream *st = all[i];
            if (!st->j) continue;
            any = true;
            if (stream_dead(st)) {
                pthread_mutex_lock(&srv.mu);
                if (st->j->cancelled && !st->j->done) srv.m_cancelled++;
                if (srv.stopping && !st->j->choices[st->choice].finish) /* cut short: an error, not "stop" */
                    job_fail_code_locked(st->j, 503, "server_shutting_down", "the server is shutting down");
                pthread_mutex_unlock(&srv.mu);
                stream_end(st);
                continue;
            }
            if (st->n_fed < st->j->n_prompt) {
                if (!prefill_step(st)) stream_end(st);
                else if (st->n_fed == st->j->n_prompt && !st->own_session) fork_choices(st);
                continue;
            }
            if (!st->spec && spec_wanted(st) && !spec_begin(st)) {
                stream_end(st);
                continue;
            }
            if (st->spec && slm_session_pos(st->s) < srv.n_ctx) {
                if (!spec_step(st)) stream_end(st);
                continue;
            }
            if (sample_step(st)) dec[n_dec++] = st;
            else stream_end(st);
        }
        if (n_dec) decode_all(dec, n_dec);
        if (stopping && !any) break;
    }
    free(all);
    free(dec);
    return NULL;
}
