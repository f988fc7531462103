/* stream.c — one generation on one session (src/serve/engine.h): prefill in chunks, forks for
 * n > 1, a token sampled under the sampler and the request's constraint, stop strings, the choice's
 * event; speculation; and the one place decode steps happen, batched. Stepping thread only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/engine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- stop strings ---------------------------------------------------------------------------- */

/* Position of the first stop string in text that ends at or after `from`, or -1. */
static long find_stop(const request *r, const buf *t, size_t from) {
    long best = -1;
    for (int32_t i = 0; i < r->n_stops; i++) {
        size_t ls = strlen(r->stops[i]);
        size_t start = from >= ls ? from - ls + 1 : 0;
        for (size_t p = start; p + ls <= t->n; p++)
            if (!memcmp(t->p + p, r->stops[i], ls)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* Bytes at the end of text that could begin a stop string. */
static size_t stop_holdback(const request *r, const buf *t) {
    size_t hold = 0;
    for (int32_t i = 0; i < r->n_stops; i++) {
        size_t ls = strlen(r->stops[i]);
        for (size_t k = ls - 1; k > hold; k--)
            if (k <= t->n && !memcmp(t->p + t->n - k, r->stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* ---- thinking -------------------------------------------------------------------------------- */

/* Position of tag in text at or after `from` (a match may begin before from by up to the tag's
 * length - 1: it ends in the new text), or -1. */
static long find_tag(const buf *t, const char *tag, size_t from) {
    size_t lt = strlen(tag);
    for (size_t p = from >= lt ? from - lt + 1 : 0; p + lt <= t->n; p++)
        if (!memcmp(t->p + p, tag, lt)) return (long)p;
    return -1;
}

/* The think block of choice c after a token added text from `old` on (forced: written by the
 * budget, not counted). */
static void think_track(const request *r, choice *c, size_t old, bool forced) {
    if (!r->think_close || c->think == 2) return;
    if (c->think == 0) {
        long at = r->think_open ? find_tag(&c->text, r->think_open, old) : -1;
        if (at >= 0) {
            c->think = 1;
            c->think_from = (size_t)at + strlen(r->think_open);
        }
        return;
    }
    if (!forced) c->n_think++;
    if (find_tag(&c->text, r->think_close, old > c->think_from ? old : c->think_from) >= 0) c->think = 2;
}

/* Whether choice c's next token is the thinking budget's (its close tag, being written). */
static bool think_forcing(const request *r, const choice *c) {
    return r->n_think_close && c->think == 1 && c->n_think >= (size_t)r->think_budget && c->n_forced < r->n_think_close;
}

/* ---- streams --------------------------------------------------------------------------------- */

/* Ends st's generation; when it was the request's last choice, the request is done. */
void eng_stream_end(slm_engine *e, stream *st) {
    slm_spec_stats ss = {0};
    if (st->spec) slm_spec_get_stats(st->spec, &ss);
    slm_spec_destroy(st->spec);
    st->spec = NULL;
    slm_sampler_destroy(st->smp);
    slm_constraint_destroy(st->con);
    slm_detokenizer_destroy(st->dt);
    al_free(e->a, st->own_logits);
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
    e->st.n_spec_steps += ss.n_steps;
    pthread_mutex_unlock(&e->mu);
    if (!r) return;
    if (++r->n_done == r->n) eng_request_finish(e, r, SLM_ENGINE_DONE_OK, SLM_OK, NULL);
    eng_request_unref(r);
}

/* Starts choice ci of r on st: its sampler (seed + ci), detokenizer and constraint; false when one
 * cannot be made (st holds r: end it with eng_stream_end). */
bool eng_stream_begin(slm_engine *e, stream *st, request *r, int32_t ci) {
    slm_sampler_params sp = r->sp;
    sp.seed += (uint64_t)ci;
    st->r = r;
    r->refs++;
    st->choice = ci;
    st->n_gen = 0;
    st->next_id = -1;
    st->forced = false;
    st->first_sync = true;
    choice *c = &r->choices[ci];
    c->think = r->think_in_prompt ? 1 : 0;
    c->n_think = 0;
    c->n_forced = 0;
    c->think_from = 0;
    if (slm_sampler_create(&sp, &st->smp) != SLM_OK || slm_detokenizer_create(e->tok, &st->dt) != SLM_OK) return false;
    return !r->grammar || (slm_constraint_create(r->grammar, e->gvocab, &st->con) == SLM_OK &&
                           slm_sampler_set_constraint(st->smp, st->con) == SLM_OK);
}

/* One prefill chunk: brings st->s to prompt[0, min(n_prompt, n_fed + CHUNK)) with slm_session_sync
 * (the first call reuses the common prefix); false when the request failed. */
bool eng_prefill_step(slm_engine *e, stream *st) {
    request *r = st->r;
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    if (st->first_sync) st->n_fed = eng_common_prefix(hist, n_hist, r->prompt, r->n_prompt);
    size_t target = st->n_fed + CHUNK < r->n_prompt ? st->n_fed + CHUNK : r->n_prompt;
    size_t reused = 0;
    slm_status s = slm_session_sync(st->s, r->prompt, target, &st->logits, &reused);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "prefill failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        eng_request_fail(e, r, s, msg);
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
void eng_fork_choices(slm_engine *e, stream *slot) {
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
        f->own_logits = al_array(e->a, (size_t)e->n_vocab, sizeof *f->own_logits);
        if (!eng_stream_begin(e, f, r, ci) || !f->own_logits) {
            eng_stream_end(e, f);
            ok = false;
            break;
        }
        memcpy(f->own_logits, slot->logits, (size_t)e->n_vocab * sizeof *f->own_logits);
        f->logits = f->own_logits;
        f->n_fed = r->n_prompt;
        f->first_sync = false;
    }
    slm_snapshot_destroy(snap);
    if (!ok) eng_request_fail(e, r, SLM_ERR_NOMEM, "cannot fork the session for n > 1");
}

/* The log-probability of id under logits and the k most probable tokens (softmax in double). */
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

/* Whether r keeps the text of control token id. */
static bool keeps(const request *r, int32_t id) {
    for (int32_t i = 0; i < r->n_keep; i++)
        if (r->keep[i] == id) return true;
    return false;
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
            slm_engine_logprob *v =
                al_realloc(e->a, c->lps, c->n_tokens * sizeof *v, (c->n_tokens + 1) * sizeof *v);
            if (v) {
                c->lps = v;
                top_logprobs(st->logits, e->n_vocab, id, r->top_logprobs, &v[c->n_tokens]);
            } else {
                ok = false;
            }
        }
        char kept[64];
        if (keeps(r, id) && slm_tokenizer_decode(e->tok, &id, 1, true, kept, sizeof kept, &n_piece) == SLM_OK &&
            n_piece <= sizeof kept)
            piece = kept; /* a kept control token: its text, which the detokenizer drops */
        else if (slm_detokenizer_push(st->dt, id, &piece, &n_piece) != SLM_OK)
            ok = false; /* out of memory */
        st->n_gen++;
        if (st->con && slm_constraint_done(st->con)) finish = SLM_ENGINE_FINISH_STOP; /* only the end may follow */
        else if (st->n_gen >= r->max_tokens || pos >= e->n_ctx) finish = SLM_ENGINE_FINISH_LENGTH;
        size_t old = c->text.n;
        if (ok) buf_put(&c->text, piece ? piece : "", n_piece);
        if (ok && finish) {
            if (slm_detokenizer_flush(st->dt, &tail, &n_tail) == SLM_OK) buf_put(&c->text, tail, n_tail);
            else ok = false;
        }
        if (ok && !c->text.oom) think_track(r, c, old, st->forced);
        ok = ok && !c->text.oom;
        c->n_tokens++;
        if (c->n_ids == c->cap_ids && !c->ids_cut) { /* once cut, the ids stay a prefix of the tokens */
            size_t cap = c->cap_ids ? 2 * c->cap_ids : 64;
            int32_t *v = al_realloc(e->a, c->ids, c->cap_ids * sizeof *v, cap * sizeof *v);
            if (v) {
                c->ids = v;
                c->cap_ids = cap;
            }
        }
        if (c->n_ids < c->cap_ids && !c->ids_cut) c->ids[c->n_ids++] = id;
        else c->ids_cut = true; /* out of memory: the ids no longer spell the text */
        long at = r->n_stops && c->text.p ? find_stop(r, &c->text, old) : -1;
        if (at >= 0) {
            buf_truncate(&c->text, (size_t)at);
            c->ids_cut = true;
            finish = SLM_ENGINE_FINISH_STOP;
        }
        pthread_mutex_lock(&e->mu);
        e->st.n_generated_tokens++;
        pthread_mutex_unlock(&e->mu);
    }
    if (!ok) {
        eng_request_fail(e, r, SLM_ERR_NOMEM, "out of memory");
        return false;
    }
    if (finish) c->finish = finish;
    eng_send_choice(r, st->choice, finish ? c->text.n : c->text.n - stop_holdback(r, &c->text));
    return !finish;
}

/* Samples the next token of a prefilled stream (or writes the thinking budget's close tag) and
 * publishes it; false when the stream ended. */
bool eng_sample_step(slm_engine *e, stream *st) {
    request *r = st->r;
    choice *c = &r->choices[st->choice];
    int32_t id = -1;
    st->forced = think_forcing(r, c);
    if (st->forced) {
        id = r->think_close_ids[c->n_forced++];
        if (c->n_forced == r->n_think_close) c->think = 2; /* written whole: the block ends, whatever the text says */
        if (st->con && slm_constraint_accept(st->con, id) != SLM_OK) {
            eng_request_fail(e, r, SLM_ERR_STATE, "the grammar does not allow the thinking budget's close tag");
            return false;
        }
    } else {
        size_t n_hist;
        const int32_t *hist = slm_session_history(st->s, &n_hist);
        slm_status ss = SLM_OK;
        bool finite = true;
        for (int32_t i = 0; i < e->n_vocab && finite; i++) finite = isfinite(st->logits[i]);
        if (!finite || (ss = slm_sampler_sample(st->smp, st->logits, e->n_vocab, hist, n_hist, &id)) != SLM_OK) {
            eng_request_fail(e, r, finite ? ss : SLM_ERR_BACKEND,
                             ss == SLM_ERR_STATE   ? "no token of the vocabulary continues the grammar here"
                             : ss == SLM_ERR_RANGE ? "logit_bias bans every token"
                                                   : "the model produced non-finite logits");
            return false;
        }
        if (st->con && slm_constraint_accept(st->con, id) != SLM_OK) { /* the mask allowed it: a bug */
            eng_request_fail(e, r, SLM_ERR_STATE, slm_constraint_errmsg(st->con));
            return false;
        }
    }
    bool more = publish_token(e, st, id, slm_session_pos(st->s));
    st->forced = false;
    if (!more) return false;
    st->next_id = id;
    return true;
}

static bool sampler_is_argmax(const slm_sampler_params *p) {
    return p->temperature == 0.0f && p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f && p->n_logit_bias == 0;
}

/* Whether st generates by speculation now: lookup, a draft model or MTP, no logprobs or grammar, no
 * thinking budget still to watch, room left in the context, and the session holds the logits of
 * its last token (a fork holds them after its first decode). */
bool eng_spec_wanted(const slm_engine *e, const stream *st) {
    return (e->p.lookup || e->p.draft_model || e->p.mtp) && !st->r->logprobs && !st->con &&
           slm_session_pos(st->s) < e->n_ctx && (!st->own_session || st->n_gen > 0) &&
           (!st->r->n_think_close || st->r->choices[st->choice].think == 2);
}

/* Starts the speculation driver of st: greedy at temperature 0 without penalties (the tokens plain
 * greedy decoding gives), else speculative sampling with the stream's sampler. False when the
 * request failed. */
bool eng_spec_begin(slm_engine *e, stream *st) {
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
        p.mtp = e->p.mtp;
        p.sampler = sampler_is_argmax(&st->r->sp) ? NULL : st->smp;
        s = slm_spec_create(st->s, &p, &st->spec, err, sizeof err);
    }
    if (s == SLM_OK) return true;
    char msg[256];
    snprintf(msg, sizeof msg, "cannot start speculative decoding: %s (%s)", err, slm_status_name(s));
    eng_request_fail(e, st->r, s, msg);
    return false;
}

/* One speculation step of st: the next token and the drafted ones the target kept, all decoded,
 * published in order; false when the stream ended. Tokens after the end stay in the session's
 * history (the next request's slm_session_sync drops them). */
bool eng_spec_step(slm_engine *e, stream *st) {
    request *r = st->r;
    int32_t ids[65];
    size_t n_max = (size_t)(r->max_tokens - st->n_gen), n = 0;
    if (n_max > 65) n_max = 65;
    int32_t pos0 = slm_session_pos(st->s);
    double t0 = now_s();
    slm_status s = slm_spec_step(st->spec, n_max, ids, &n);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "speculative decoding failed: %s (%s)", slm_spec_errmsg(st->spec),
                 slm_status_name(s));
        eng_request_fail(e, r, s, msg);
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
        eng_request_fail(e, st->r, s, msg);
    }
}

/* Decodes the sampled token of every stream in v[0, n), the one place decode steps happen: one
 * slm_session_decode_batch call for all of them (each weight read once; bit-identical to decoding
 * each alone). A refused batch changes no session and falls back to decoding each stream alone, so
 * a failure reaches only the request whose decode fails. */
void eng_decode_all(slm_engine *e, stream **v, int32_t n) {
    double t0 = now_s();
    bool batched = false;
    if (n > 1) {
        slm_session **sess = al_array(e->a, (size_t)n, sizeof *sess);
        const float **lg = al_array(e->a, (size_t)n, sizeof *lg);
        int32_t *tok = al_array(e->a, (size_t)n, sizeof *tok);
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
        al_free(e->a, sess);
        al_free(e->a, lg);
        al_free(e->a, tok);
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
