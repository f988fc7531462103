/* prefix.c — where a request starts (src/serve/engine.h): the idle slot whose history shares the
 * longest prefix with the prompt, or first a kept state that shares more. Slots about to lose their
 * state keep it as a snapshot (memory, LRU under cache_mib); snapshots beyond the budget spill to
 * state files in state_dir (at most MAX_STATE_FILES), named by a hash of the history seeded with
 * the model's fingerprint and the context, and outlive the engine. Stepping thread only. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/engine.h"

/* FNV-1a of the token ids, seeded with the model's fingerprint and the context size (e->hash_seed):
 * the name of a state file, so engines of other models or contexts never share one. */
uint64_t eng_hash_ids(const slm_engine *e, const int32_t *v, size_t n) {
    uint64_t h = e->hash_seed;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) {
            h ^= (uint8_t)((uint32_t)v[i] >> (8 * b));
            h *= 1099511628211ull;
        }
    return h;
}

size_t eng_common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* ---- state cache ----------------------------------------------------------------------------- */

static void state_path(const slm_engine *e, uint64_t hash, char *out, size_t cap) {
    snprintf(out, cap, "%s/%016llx.slmstate", e->state_dir, (unsigned long long)hash);
}

/* Drops entry i; its state file too unless keep_file (files outlive the engine). */
void eng_cache_remove(slm_engine *e, size_t i, bool keep_file) {
    cached_state *c = &e->cache[i];
    if (c->snap) {
        slm_snapshot_destroy(c->snap);
        e->cache_bytes -= c->bytes;
    } else if (!keep_file) {
        char path[4096];
        state_path(e, c->hash, path, sizeof path);
        unlink(path);
    }
    al_free(e->a, c->hist);
    e->cache[i] = e->cache[--e->n_cache];
}

/* Writes the snapshot of entry i to state_dir and keeps only the file; without state_dir or when it
 * cannot be written, drops the entry. */
static void cache_spill(slm_engine *e, size_t i) {
    cached_state *c = &e->cache[i];
    if (!e->state_dir) {
        eng_cache_remove(e, i, false);
        return;
    }
    size_t n_files = 0, lru = SIZE_MAX;
    for (size_t k = 0; k < e->n_cache; k++)
        if (!e->cache[k].snap) {
            n_files++;
            if (lru == SIZE_MAX || e->cache[k].last_used < e->cache[lru].last_used) lru = k;
        }
    if (n_files >= MAX_STATE_FILES) {
        eng_cache_remove(e, lru, false); /* moves the last entry into lru */
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
        eng_cache_remove(e, i, false);
        return;
    }
    slm_session_destroy(tmp);
    slm_snapshot_destroy(c->snap);
    c->snap = NULL;
    e->cache_bytes -= c->bytes;
}

/* Room for one more entry in e->cache; false when out of memory. */
static bool cache_reserve(slm_engine *e) {
    if (e->n_cache < e->cap_cache) return true;
    size_t cap = e->cap_cache ? e->cap_cache * 2 : 16;
    size_t new_bytes;
    if (!size_mul_ok(cap, sizeof(cached_state), &new_bytes)) return false;
    cached_state *v = al_realloc(e->a, e->cache, e->cap_cache * sizeof(cached_state), new_bytes);
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
    uint64_t h = eng_hash_ids(e, hist, n_hist);
    for (size_t i = 0; i < e->n_cache; i++)
        if (e->cache[i].hash == h && e->cache[i].n_hist == n_hist) {
            e->cache[i].last_used = ++e->tick;
            return;
        }
    if (!cache_reserve(e)) return;
    cached_state c = {0};
    c.hist = al_array(e->a, n_hist, sizeof *c.hist);
    if (!c.hist || slm_session_snapshot(s, &c.snap) != SLM_OK) {
        al_free(e->a, c.hist);
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
void eng_index_state_dir(slm_engine *e, slm_session *s) {
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
            eng_hash_ids(e, hist, n_hist) != h)
            continue;
        if (!cache_reserve(e)) break;
        cached_state c = {0};
        if (!(c.hist = al_array(e->a, n_hist, sizeof *c.hist))) break;
        memcpy(c.hist, hist, n_hist * sizeof *c.hist);
        c.n_hist = n_hist;
        c.hash = h;
        e->cache[e->n_cache++] = c;
        n_files++;
    }
    closedir(dir);
    slm_session_reset(s);
}

/* Picks the idle slot for r and brings it to the best kept state; NULL when none is idle. */
stream *eng_admit(slm_engine *e, const request *r) {
    stream *best = NULL;
    size_t best_lcp = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        stream *st = &e->slots[i];
        if (st->r || (r->slot >= 0 && r->slot != i)) continue;
        size_t n_hist;
        const int32_t *hist = slm_session_history(st->s, &n_hist);
        size_t lcp = eng_common_prefix(hist, n_hist, r->prompt, r->n_prompt);
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
        size_t lcp = eng_common_prefix(e->cache[i].hist, e->cache[i].n_hist, r->prompt, r->n_prompt);
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
            if (eng_common_prefix(e->cache[i].hist, e->cache[i].n_hist, r->prompt, r->n_prompt) == cache_lcp) {
                cached_state *c = &e->cache[i];
                c->last_used = ++e->tick;
                if (c->snap) {
                    slm_session_restore(best->s, c->snap);
                } else {
                    char path[4096];
                    state_path(e, c->hash, path, sizeof path);
                    if (slm_session_load(best->s, path) != SLM_OK) eng_cache_remove(e, i, false);
                }
                break;
            }
    }
    return best;
}
