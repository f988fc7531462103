/* test_alloc_failures.c — allocation-failure sweeps through the public API (STYLE: fail allocation
 * N = 0, 1, 2, ... until the run succeeds). For the tiny models (GGUF files and a Hugging Face
 * folder): model load, session creation on a loaded model, and a prefill, decode, rollback and
 * snapshot on a session. Every failing run must return SLM_ERR_NOMEM with a message, leak nothing,
 * and leave the handle usable: the run after it succeeds, and a session that saw a failed call
 * continues to the same logits, bit for bit, as one that never did. The allocator is
 * tests/support's tu_failing, passed in slm_model_params (sessions allocate through their model's
 * allocator). A refused checkpoint allocation is not a failure (checkpoints are best effort), so a
 * call may succeed without it; the sweep then rolls it back and goes on.
 * Leaks: a failed load leaves 0 live blocks; a failed session creation leaves the model's (the
 * model memoises a weight cache when its first session is created, so the sweep starts after one
 * session has run); a failed call may leave buffers the session keeps (arena, undo record), so it
 * must not hold more than the successful call does, and destroying the session and the model
 * brings the count back to 0. Sessions run 2 threads, so the thread pool's allocations are swept
 * too.
 * The serving engine (statelm_engine.h) allocates through its model's allocator, as sessions do:
 * engine_sweep refuses each allocation of an engine's whole life in turn (create, three submits,
 * stepping to idle with forks, log-probabilities, a stop string, a slot reused through the snapshot
 * cache, free). A refused create or submit returns SLM_ERR_NOMEM with a message; a request that
 * meets one ends with one DONE, FAILED with SLM_ERR_NOMEM, and the others finish with the tokens,
 * text and log-probabilities of a run that saw no failure (a refused snapshot, checkpoint or
 * batched decode is best effort: the request still finishes, and must match; so is the ids memory,
 * whose event then has fewer ids than tokens, as statelm_engine.h says); the engine freed leaves
 * the model's blocks only.
 * The grammar engine (statelm.h "Constrained decoding"): grammar_sweep refuses each allocation of a
 * GBNF parse and a JSON Schema compile (through slm_grammar_params' hooks), the grammar vocabulary
 * of a tokenizer (its tokenizer's allocator) and a constrained decode of a valid text on each
 * grammar (the constraint allocates through its vocabulary's allocator): masks and accepts over
 * the text's tokens. A refused constructor returns SLM_ERR_NOMEM with a message and *out NULL; a
 * refused mask returns SLM_ERR_NOMEM with a message and resets the constraint to the start (the
 * decode replays from there); a refused accept returns SLM_ERR_NOMEM and leaves the constraint
 * where it was (the accept is retried). Every mask a run sees equals that of a run without
 * failures, the text ends where the grammar may end, and the objects destroyed leave the
 * tokenizer's blocks only. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statelm.h"
#include "statelm_engine.h"

static const char *const models[] = {
    "tiny/llama/llama-q8_0.gguf", "tiny/lfm2/lfm2-f32.gguf", "tiny/qwen35/qwen35-f32.gguf", "tiny/qwen3/hf",
};
#define N_MODELS (sizeof models / sizeof models[0])
#define SWEEP_CAP 100000 /* a sweep that never succeeds is a failure, not a hang */

static const int32_t seq[] = {1, 70, 81, 90, 100, 120, 7, 33, 250, 251, 12, 44};
#define N_SEQ ((size_t)(sizeof seq / sizeof seq[0]))
#define N_CTX 32

static slm_model_params model_params(tu_failing *f) {
    slm_model_params mp = slm_model_params_default();
    mp.alloc_fn = tu_fail_alloc;
    mp.free_fn = tu_fail_free;
    mp.alloc_user_data = f;
    mp.n_threads = 1;
    return mp;
}

/* Loads model `name` with every allocation counted by f (never failing); the load must succeed. */
static slm_model *load_counted(const char *name, tu_failing *f) {
    slm_model_params mp = model_params(f);
    slm_model *m = NULL;
    char err[512] = "";
    if (slm_model_load(tu_data_path(name), &mp, &m, err, sizeof err) != SLM_OK) fail_msg("%s: %s", name, err);
    return m;
}

static slm_session *new_session(const slm_model *m, char *err, size_t err_cap, slm_status *st) {
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = N_CTX;
    sp.n_threads = 2;
    sp.kv_type = SLM_KV_F32;
    sp.checkpoint_interval = 4; /* hybrid models take checkpoints inside the sweeps */
    slm_session *s = NULL;
    *st = slm_session_create(m, &sp, &s, err, err_cap);
    return s;
}

/* Arms f to refuse the k-th allocation from now on. */
static void arm(tu_failing *f, long k) {
    f->fail_at = f->n_alloc + k;
    f->n_refused = 0;
}

static void model_load_sweep(void **unused) {
    (void)unused;
    for (size_t i = 0; i < N_MODELS; i++) {
        const char *path = tu_data_path(models[i]);
        long k = 0;
        for (; k < SWEEP_CAP; k++) {
            tu_failing f = tu_failing_at(k);
            slm_model_params mp = model_params(&f);
            slm_model *m = (slm_model *)&f; /* must be reset to NULL on failure */
            char err[512] = "";
            slm_status st = slm_model_load(path, &mp, &m, err, sizeof err);
            if (st == SLM_OK) {
                if (f.n_refused != 0) fail_msg("%s: loaded although allocation %ld was refused", models[i], k);
                slm_model_destroy(m);
                assert_int_equal(f.n_live, 0);
                break;
            }
            if (st != SLM_ERR_NOMEM)
                fail_msg("%s: refusing allocation %ld gave %s: %s", models[i], k, slm_status_name(st), err);
            assert_int_equal(f.n_refused, 1);
            assert_null(m);
            assert_true(err[0] != '\0');
            if (f.n_live != 0 || f.live_bytes != 0)
                fail_msg("%s: refusing allocation %ld leaked %ld blocks (%zu bytes)", models[i], k, f.n_live,
                         f.live_bytes);
        }
        assert_true(k > 3 && k < SWEEP_CAP);
    }
}

/* The same sweep with the weights quantised on load (slm_model_params.quantize): every refused
 * allocation of the quantiser's plan, buffers and per-thread rows is NOMEM with nothing leaked. */
static void quantize_on_load_sweep(void **unused) {
    (void)unused;
    const char *path = tu_data_path(models[1]); /* an f32 source (lfm2) */
    long k = 0;
    for (; k < SWEEP_CAP; k++) {
        tu_failing f = tu_failing_at(k);
        slm_model_params mp = model_params(&f);
        mp.quantize = "q4_k_m";
        slm_model *m = (slm_model *)&f;
        char err[512] = "";
        slm_status st = slm_model_load(path, &mp, &m, err, sizeof err);
        if (st == SLM_OK) {
            if (f.n_refused != 0) fail_msg("loaded although allocation %ld was refused", k);
            slm_model_destroy(m);
            assert_int_equal(f.n_live, 0);
            break;
        }
        if (st != SLM_ERR_NOMEM) fail_msg("refusing allocation %ld gave %s: %s", k, slm_status_name(st), err);
        assert_null(m);
        if (f.n_live != 0 || f.live_bytes != 0)
            fail_msg("refusing allocation %ld leaked %ld blocks (%zu bytes)", k, f.n_live, f.live_bytes);
    }
    assert_true(k > 3 && k < SWEEP_CAP);
}

/* Logits after seq[0, split) as one prefill and the rest one decode step at a time, on a session
 * that never sees a failure. (n_vocab) floats, caller frees. */
static float *reference_logits(const slm_model *m, size_t split) {
    slm_status st;
    char err[512];
    slm_session *s = new_session(m, err, sizeof err, &st);
    assert_int_equal(st, SLM_OK);
    const float *l = NULL;
    assert_int_equal(slm_session_prefill(s, seq, split, &l), SLM_OK);
    for (size_t i = split; i < N_SEQ; i++) assert_int_equal(slm_session_decode(s, seq[i], &l), SLM_OK);
    size_t n_vocab = (size_t)slm_model_n_vocab(m);
    float *out = malloc(n_vocab * sizeof(float));
    memcpy(out, l, n_vocab * sizeof(float));
    slm_session_destroy(s);
    return out;
}

static void session_create_sweep(void **unused) {
    (void)unused;
    for (size_t i = 0; i < N_MODELS; i++) {
        tu_failing f = tu_failing_at(-1);
        slm_model *m = load_counted(models[i], &f);
        char err[512] = "";
        free(reference_logits(m, N_SEQ)); /* the model's weight cache, filled */
        long live_model = f.n_live;
        long k = 0;
        for (; k < SWEEP_CAP; k++) {
            arm(&f, k);
            slm_status st;
            err[0] = '\0';
            slm_session *s = new_session(m, err, sizeof err, &st);
            if (st == SLM_OK) {
                assert_int_equal(f.n_refused, 0);
                slm_session_destroy(s);
                assert_int_equal(f.n_live, live_model);
                break;
            }
            if (st != SLM_ERR_NOMEM)
                fail_msg("%s: refusing session allocation %ld gave %s: %s", models[i], k, slm_status_name(st), err);
            assert_null(s);
            assert_true(err[0] != '\0');
            if (f.n_live != live_model)
                fail_msg("%s: refusing session allocation %ld leaked %ld blocks", models[i], k, f.n_live - live_model);
        }
        assert_true(k > 3 && k < SWEEP_CAP);
        f.fail_at = -1;
        slm_model_destroy(m);
        assert_int_equal(f.n_live, 0);
    }
}

/* Runs step under a sweep on s: each refused allocation must give NOMEM with a message and keep
 * the position; no failed run holds more blocks than the successful one. Returns the number of
 * failed runs. */
typedef slm_status (*step_fn)(slm_session *s, size_t i);
static const float *last_logits; /* of the last successful step */

static slm_status step_prefill(slm_session *s, size_t split) {
    return slm_session_prefill(s, seq, split, &last_logits);
}

static slm_status step_decode(slm_session *s, size_t i) {
    return slm_session_decode(s, seq[i], &last_logits);
}

static long sweep_step(const char *what, slm_session *s, tu_failing *f, step_fn fn, size_t arg) {
    int32_t pos = slm_session_pos(s);
    long live_failed = 0;
    for (long k = 0; k < SWEEP_CAP; k++) {
        arm(f, k);
        slm_status st = fn(s, arg);
        if (st == SLM_OK && f->n_refused) {
            /* checkpoints are best effort (a missing one only lengthens a later replay): the call
             * succeeded without it; undo it and go on to the next allocation */
            f->fail_at = -1;
            assert_int_equal(slm_session_rollback(s, pos), SLM_OK);
            continue;
        }
        if (st == SLM_OK) {
            f->fail_at = -1;
            if (live_failed > f->n_live)
                fail_msg("%s: a failed run left %ld blocks, the successful one %ld", what, live_failed, f->n_live);
            return k;
        }
        if (st != SLM_ERR_NOMEM) fail_msg("%s: refusing allocation %ld gave %s: %s", what, k, slm_status_name(st),
                                          slm_session_errmsg(s));
        assert_int_equal(f->n_refused, 1);
        assert_true(slm_session_errmsg(s)[0] != '\0');
        assert_int_equal(slm_session_pos(s), pos);
        if (f->n_live > live_failed) live_failed = f->n_live;
    }
    fail_msg("%s: no success in %d runs", what, SWEEP_CAP);
    return -1;
}

static void session_call_sweep(void **unused) {
    (void)unused;
    const size_t split = 7;
    for (size_t i = 0; i < N_MODELS; i++) {
        tu_failing f = tu_failing_at(-1);
        slm_model *m = load_counted(models[i], &f);
        char err[512] = "";
        float *want = reference_logits(m, split);
        slm_status st;
        slm_session *s = new_session(m, err, sizeof err, &st);
        assert_int_equal(st, SLM_OK);
        sweep_step(models[i], s, &f, step_prefill, split);
        for (size_t t = split; t < N_SEQ; t++) sweep_step(models[i], s, &f, step_decode, t);
        size_t n_vocab = (size_t)slm_model_n_vocab(m);
        assert_memory_equal(last_logits, want, n_vocab * sizeof(float));
        const float *l = NULL;
        /* rollback (a replay from a checkpoint on hybrid models) and snapshot under the sweep */
        for (long k = 0; k < SWEEP_CAP; k++) {
            arm(&f, k);
            st = slm_session_rollback(s, 5);
            if (st == SLM_OK) break;
            assert_int_equal(st, SLM_ERR_NOMEM);
            assert_int_equal(slm_session_pos(s), (int32_t)N_SEQ);
        }
        f.fail_at = -1;
        assert_int_equal(slm_session_pos(s), 5);
        slm_snapshot *snap = NULL;
        for (long k = 0; k < SWEEP_CAP; k++) {
            arm(&f, k);
            st = slm_session_snapshot(s, &snap);
            if (st == SLM_OK) break;
            assert_int_equal(st, SLM_ERR_NOMEM);
            assert_null(snap);
        }
        f.fail_at = -1;
        slm_snapshot_destroy(snap);
        /* verify and a partial accept (a state rebuild on hybrid models) under the sweep: a
         * refused verify leaves the position, a refused accept leaves the verify standing */
        const float *rows = NULL;
        for (long k = 0; k < SWEEP_CAP; k++) {
            arm(&f, k);
            st = slm_session_verify(s, seq + 5, N_SEQ - 5, &rows);
            if (st == SLM_OK) break;
            assert_int_equal(st, SLM_ERR_NOMEM);
            assert_null(rows);
            assert_int_equal(slm_session_pos(s), 5);
        }
        f.fail_at = -1;
        assert_int_equal(st, SLM_OK);
        for (long k = 0; k < SWEEP_CAP; k++) {
            arm(&f, k);
            st = slm_session_accept(s, 2, &l);
            if (st == SLM_OK) break;
            assert_int_equal(st, SLM_ERR_NOMEM);
            assert_int_equal(slm_session_pos(s), (int32_t)N_SEQ);
        }
        f.fail_at = -1;
        assert_int_equal(st, SLM_OK);
        assert_int_equal(slm_session_pos(s), 7);
        assert_int_equal(slm_session_rollback(s, 5), SLM_OK);
        /* the tail again as one prefill: batch invariance makes it equal the decode steps bit for bit */
        assert_int_equal(slm_session_prefill(s, seq + 5, N_SEQ - 5, &l), SLM_OK);
        assert_memory_equal(l, want, n_vocab * sizeof(float));
        free(want);
        long live_session = f.n_live;
        slm_session_destroy(s);
        assert_true(f.n_live < live_session);
        slm_model_destroy(m);
        assert_int_equal(f.n_live, 0);
        assert_int_equal(f.live_bytes, 0);
    }
}

/* ---- the serving engine ---------------------------------------------------------------------- */

#define ENG_REQS 4 /* the last one is cancelled before the first step */
#define ENG_GEN 4

/* What one request of the engine run produced: its choices' ids and text, and its DONE. */
typedef struct eng_result {
    pthread_mutex_t *mu; /* the threaded run: n_done is read by the waiting thread */
    pthread_cond_t *cv;
    int n_done;
    slm_engine_outcome outcome;
    slm_status status;
    char message[256];
    int32_t ids[2][ENG_GEN + 1];
    size_t n_ids[2], n_tokens[2];
    char text[2][256];
    size_t n_text[2];
    float lp[2][ENG_GEN];
} eng_result;

static void eng_on_event(void *user, const slm_engine_event *ev) {
    eng_result *r = user;
    if (ev->kind == SLM_ENGINE_EVENT_DONE) {
        r->outcome = ev->outcome;
        r->status = ev->status;
        snprintf(r->message, sizeof r->message, "%s", ev->message);
        pthread_mutex_lock(r->mu);
        r->n_done++;
        pthread_cond_broadcast(r->cv);
        pthread_mutex_unlock(r->mu);
        return;
    }
    int c = ev->choice;
    assert_true(c >= 0 && c < 2 && ev->n_ids <= ENG_GEN && ev->n_text < sizeof r->text[c]);
    if (ev->n_ids) memcpy(r->ids[c], ev->ids, ev->n_ids * sizeof *ev->ids);
    r->n_ids[c] = ev->n_ids;
    r->n_tokens[c] = ev->n_tokens;
    if (ev->n_text) memcpy(r->text[c], ev->text, ev->n_text);
    r->n_text[c] = ev->n_text;
    for (size_t i = 0; i < ev->n_logprobs && i < ENG_GEN; i++) r->lp[c][i] = ev->logprobs[i].logprob;
}

/* One engine's life on m: 2 slots, requests 0 (n = 2, log-probabilities, a stop string), 1, 2 (it
 * queues until a slot is free and reuses it after keeping its snapshot) and 3 (cancelled before
 * the first step), stepped on this thread or, when threaded, by the engine's own thread (started
 * after the submits; this one waits for every DONE, then stops it). Returns the create status;
 * *n_submitted how many submits succeeded (each of them must get its DONE). */
static slm_status engine_run(const slm_model *m, bool threaded, eng_result *res, int *n_submitted, char *err,
                             size_t err_cap) {
    static const int32_t prompts[ENG_REQS][6] = {{1, 70, 81, 90, 100, 120}, {7, 33, 250, 251, 12, 44},
                                                 {1, 70, 81, 7, 33, 12}, {5, 6, 7, 8, 9, 10}};
    static const char *const stops[] = {"\x01never"};
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    memset(res, 0, ENG_REQS * sizeof *res);
    *n_submitted = 0;
    slm_engine_params p = slm_engine_params_default();
    p.n_slots = 2;
    p.session.n_ctx = N_CTX;
    p.session.n_threads = 2;
    p.session.kv_type = SLM_KV_F32;
    p.session.checkpoint_interval = 4;
    slm_engine *e = NULL;
    slm_status st = slm_engine_create(m, &p, &e, err, err_cap);
    if (st != SLM_OK) {
        assert_null(e);
        return st;
    }
    assert_int_equal(slm_engine_n_ctx(e), N_CTX);
    for (int i = 0; i < ENG_REQS; i++) {
        res[i].mu = &mu;
        res[i].cv = &cv;
        slm_engine_request q = slm_engine_request_default();
        q.ids = prompts[i];
        q.n_ids = 6;
        q.sampler.temperature = 0.0f;
        q.max_tokens = ENG_GEN;
        q.ignore_eos = true;
        q.on_event = eng_on_event;
        q.user = &res[i];
        if (i == 0) {
            q.n = 2;
            q.logprobs = true;
            q.top_logprobs = 2;
            q.stops = stops;
            q.n_stops = 1;
        }
        uint64_t id;
        slm_status s = slm_engine_submit(e, &q, &id, err, err_cap);
        if (s != SLM_OK) {
            if (s != SLM_ERR_NOMEM) fail_msg("submit %d: %s: %s", i, slm_status_name(s), err);
            assert_true(err[0] != '\0');
            break;
        }
        (*n_submitted)++;
        if (i == ENG_REQS - 1) assert_int_equal(slm_engine_cancel(e, id), SLM_OK);
    }
    if (threaded) {
        assert_int_equal(slm_engine_start(e), SLM_OK);
        pthread_mutex_lock(&mu);
        for (int i = 0; i < *n_submitted; i++)
            while (res[i].n_done == 0) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        slm_engine_stop(e);
    } else {
        int32_t pending = 1;
        for (int guard = 0; pending > 0; guard++) {
            assert_true(guard < 1000);
            assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
        }
    }
    slm_engine_stats stats;
    slm_engine_get_stats(e, &stats);
    assert_int_equal(stats.n_submitted, (uint64_t)*n_submitted);
    assert_int_equal(stats.n_completed + stats.n_failed + stats.n_cancelled, (uint64_t)*n_submitted);
    slm_engine_free(e);
    return SLM_OK;
}

static void engine_sweep(void **unused) {
    (void)unused;
    static const char *const engine_models[] = {"tiny/llama/llama-f32.gguf", "tiny/lfm2/lfm2-f32.gguf"};
    for (size_t run = 0; run < 4; run++) {
        const size_t mi = run % 2;
        const bool threaded = run >= 2;
        tu_failing f = tu_failing_at(-1);
        slm_model *m = load_counted(engine_models[mi], &f);
        char err[512] = "";
        eng_result ref[ENG_REQS], got[ENG_REQS];
        int n_sub = 0;
        assert_int_equal(engine_run(m, threaded, ref, &n_sub, err, sizeof err), SLM_OK); /* fills the weight cache too */
        assert_int_equal(n_sub, ENG_REQS);
        for (int i = 0; i < ENG_REQS; i++) {
            assert_int_equal(ref[i].n_done, 1);
            assert_int_equal(ref[i].outcome, i == ENG_REQS - 1 ? SLM_ENGINE_DONE_CANCELLED : SLM_ENGINE_DONE_OK);
            assert_int_equal(ref[i].n_ids[0], i == ENG_REQS - 1 ? 0 : ENG_GEN);
        }
        const long live_model = f.n_live;
        long k = 0, n_failed_requests = 0;
        for (; k < SWEEP_CAP; k++) {
            arm(&f, k);
            err[0] = '\0';
            slm_status st = engine_run(m, threaded, got, &n_sub, err, sizeof err);
            const long refused = f.n_refused;
            f.fail_at = -1;
            if (st != SLM_OK) {
                if (st != SLM_ERR_NOMEM)
                    fail_msg("%s: refusing engine allocation %ld gave %s: %s", engine_models[mi], k, slm_status_name(st),
                             err);
                assert_true(err[0] != '\0');
            }
            for (int i = 0; i < n_sub; i++) {
                if (got[i].n_done != 1) fail_msg("%s, allocation %ld: request %d had %d DONE events", engine_models[mi], k, i,
                                                 got[i].n_done);
                if (got[i].outcome != ref[i].outcome) {
                    if (got[i].outcome != SLM_ENGINE_DONE_FAILED || got[i].status != SLM_ERR_NOMEM)
                        fail_msg("%s, allocation %ld: request %d ended %d with %s: %s", engine_models[mi], k, i,
                                 (int)got[i].outcome, slm_status_name(got[i].status), got[i].message);
                    assert_true(got[i].message[0] != '\0');
                    n_failed_requests++;
                    continue;
                }
                for (int c = 0; c < (i == 0 ? 2 : 1); c++) {
                    if (got[i].n_tokens[c] != ref[i].n_tokens[c] || got[i].n_text[c] != ref[i].n_text[c])
                        fail_msg("%s, allocation %ld: request %d choice %d finished with %zu tokens and %zu bytes of "
                                 "text, not %zu and %zu", engine_models[mi], k, i, c, got[i].n_tokens[c],
                                 got[i].n_text[c], ref[i].n_tokens[c], ref[i].n_text[c]);
                    /* fewer ids than tokens only when the ids could not grow */
                    assert_true(got[i].n_ids[c] == ref[i].n_ids[c] || got[i].n_ids[c] < got[i].n_tokens[c]);
                    assert_memory_equal(got[i].ids[c], ref[i].ids[c], got[i].n_ids[c] * sizeof(int32_t));
                    assert_memory_equal(got[i].text[c], ref[i].text[c], ref[i].n_text[c]);
                    if (i == 0) assert_memory_equal(got[i].lp[c], ref[i].lp[c], sizeof ref[i].lp[c]);
                }
            }
            if (f.n_live != live_model)
                fail_msg("%s: refusing engine allocation %ld left %ld blocks beyond the model's", engine_models[mi], k,
                         f.n_live - live_model);
            if (refused == 0) break; /* the run asked for fewer than k + 1 allocations: all swept */
        }
        assert_true(k > 10 && k < SWEEP_CAP);
        assert_true(n_failed_requests > 0);
        slm_model_destroy(m);
        assert_int_equal(f.n_live, 0);
    }
}

/* ---- the grammar engine -------------------------------------------------------------------- */

static const char sweep_gbnf[] = "root ::= \"{\" ws pair ( \",\" ws pair )* ws \"}\"\n"
                                 "pair ::= key ws \":\" ws value\n"
                                 "key ::= \"\\\"\" [^\"\\\\]+ \"\\\"\"\n"
                                 "value ::= \"-\"? [0-9]{1,3} | \"[\" ws ( value ( \",\" ws value )* )? ws \"]\" | key\n"
                                 "ws ::= [ \\t\\n]{0,2}\n";
static const char sweep_gbnf_text[] = "{\"ab\": [1, 22, \"xyz\xc3\xa9\"], \"c\":-7}";
static const char sweep_schema[] = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 8}, "
                                   "\"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"red\", \"blue\"]}}, "
                                   "\"n\": {\"type\": \"integer\", \"minimum\": -5}}, \"required\": [\"name\", \"tags\"]}";
static const char sweep_schema_text[] = "{\"name\":\"ab\",\"tags\":[\"red\",\"blue\"],\"n\":12}";
#define GR_MAX_IDS 64

typedef struct gr_decode {
    int32_t ids[GR_MAX_IDS];
    size_t n_ids;
    uint32_t *masks; /* (n_ids + 1) * words: the mask before each token and at the end */
} gr_decode;

/* Decodes d's tokens on c, comparing every mask with ref's (NULL: records them in d). Refused
 * allocations are handled as the header says; their number goes to *n_failed. */
static void gr_decode_run(slm_constraint *c, int32_t n_vocab, gr_decode *d, const gr_decode *ref, long *n_failed) {
    const size_t words = ((size_t)n_vocab + 31) / 32;
    uint32_t *mask = malloc(words * sizeof *mask);
    assert_non_null(mask);
    for (size_t i = 0; i <= d->n_ids; i++) {
        slm_status st = slm_constraint_mask(c, mask, n_vocab);
        if (st != SLM_OK) {
            if (st != SLM_ERR_NOMEM) fail_msg("mask before token %zu gave %s", i, slm_status_name(st));
            assert_true(slm_constraint_errmsg(c)[0] != '\0');
            (*n_failed)++;
            i = (size_t)-1; /* reset to the start: replay */
            continue;
        }
        if (ref) {
            if (memcmp(mask, ref->masks + i * words, words * sizeof *mask))
                fail_msg("the mask before token %zu differs from a run without failures", i);
        } else {
            memcpy(d->masks + i * words, mask, words * sizeof *mask);
        }
        if (i == d->n_ids) break;
        const int32_t id = d->ids[i];
        assert_true(mask[id / 32] >> (id % 32) & 1);
        st = slm_constraint_accept(c, id);
        if (st == SLM_ERR_NOMEM) {
            assert_true(slm_constraint_errmsg(c)[0] != '\0');
            (*n_failed)++;
            st = slm_constraint_accept(c, id); /* the constraint is where it was */
        }
        if (st != SLM_OK) fail_msg("token %zu (%d) refused: %s", i, id, slm_constraint_errmsg(c));
    }
    assert_true(slm_constraint_can_end(c));
    free(mask);
}

/* One life of the grammar engine: both grammars, the vocabulary of tok, a decode on each. Returns
 * SLM_OK or the status of the constructor that failed (its message in err). */
static slm_status grammar_run(tu_failing *f, const slm_tokenizer *tok, gr_decode *dec, const gr_decode *ref,
                              long *n_failed, char *err, size_t err_cap) {
    slm_grammar_params gp = slm_grammar_params_default();
    gp.alloc_fn = tu_fail_alloc;
    gp.free_fn = tu_fail_free;
    gp.alloc_user_data = f;
    slm_grammar *g[2] = {(slm_grammar *)f, (slm_grammar *)f}; /* must be reset to NULL on failure */
    slm_grammar_vocab *v = NULL;
    slm_status st = slm_grammar_create_with(sweep_gbnf, strlen(sweep_gbnf), NULL, &gp, &g[0], err, err_cap);
    if (st != SLM_OK) assert_null(g[0]);
    if (st == SLM_OK) {
        st = slm_grammar_from_json_schema_with(sweep_schema, strlen(sweep_schema), &gp, &g[1], err, err_cap);
        if (st != SLM_OK) assert_null(g[1]);
    }
    if (st == SLM_OK) {
        v = (slm_grammar_vocab *)f;
        st = slm_grammar_vocab_create(tok, &v);
        if (st != SLM_OK) assert_null(v);
        if (st != SLM_OK) snprintf(err, err_cap, "slm_grammar_vocab_create failed");
    }
    for (int k = 0; k < 2 && st == SLM_OK; k++) {
        slm_constraint *c = (slm_constraint *)f;
        st = slm_constraint_create(g[k], v, &c);
        if (st != SLM_OK) {
            assert_null(c);
            snprintf(err, err_cap, "slm_constraint_create failed");
            break;
        }
        gr_decode_run(c, slm_tokenizer_n_vocab(tok), &dec[k], ref ? &ref[k] : NULL, n_failed);
        slm_constraint_destroy(c);
    }
    slm_grammar_vocab_destroy(v);
    for (int k = 0; k < 2; k++)
        if (g[k] != (slm_grammar *)f) slm_grammar_destroy(g[k]);
    return st;
}

static void grammar_sweep(void **unused) {
    (void)unused;
    tu_failing f = tu_failing_at(-1);
    slm_model_params mp = model_params(&f);
    slm_tokenizer *tok = NULL;
    char err[512] = "";
    if (slm_tokenizer_load(tu_data_path("tiny/llama/llama-f32.gguf"), &mp, &tok, err, sizeof err) != SLM_OK)
        fail_msg("tokenizer: %s", err);
    const int32_t n_vocab = slm_tokenizer_n_vocab(tok);
    const size_t words = ((size_t)n_vocab + 31) / 32;
    gr_decode ref[2], got[2];
    const char *const texts[2] = {sweep_gbnf_text, sweep_schema_text};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(slm_tokenizer_encode(tok, texts[k], strlen(texts[k]), 0, ref[k].ids, GR_MAX_IDS, &ref[k].n_ids),
                         SLM_OK);
        assert_true(ref[k].n_ids > 5);
        ref[k].masks = calloc((ref[k].n_ids + 1) * words, sizeof(uint32_t));
        got[k] = ref[k];
        assert_non_null(ref[k].masks);
    }
    const long live_tok = f.n_live;
    long n_failed = 0;
    assert_int_equal(grammar_run(&f, tok, ref, NULL, &n_failed, err, sizeof err), SLM_OK);
    assert_int_equal(n_failed, 0);
    assert_int_equal(f.n_live, live_tok);
    long k = 0, n_failed_ctor = 0;
    for (; k < SWEEP_CAP; k++) {
        arm(&f, k);
        err[0] = '\0';
        slm_status st = grammar_run(&f, tok, got, ref, &n_failed, err, sizeof err);
        const long refused = f.n_refused;
        f.fail_at = -1;
        if (st != SLM_OK) {
            if (st != SLM_ERR_NOMEM)
                fail_msg("refusing grammar allocation %ld gave %s: %s", k, slm_status_name(st), err);
            assert_true(err[0] != '\0');
            n_failed_ctor++;
        }
        if (f.n_live != live_tok)
            fail_msg("refusing grammar allocation %ld left %ld blocks beyond the tokenizer's", k, f.n_live - live_tok);
        if (refused == 0) break; /* the run asked for fewer than k + 1 allocations: all swept */
    }
    assert_true(k > 100 && k < SWEEP_CAP);
    assert_true(n_failed > 0 && n_failed_ctor > 0);
    for (int i = 0; i < 2; i++) free(ref[i].masks);
    slm_tokenizer_free(tok);
    assert_int_equal(f.n_live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(model_load_sweep),
        cmocka_unit_test(quantize_on_load_sweep),
        cmocka_unit_test(session_create_sweep),
        cmocka_unit_test(session_call_sweep),
        cmocka_unit_test(engine_sweep),
        cmocka_unit_test(grammar_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
