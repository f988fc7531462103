/* test_engine.c — the serving engine (statelm_engine.h) on the tiny llama, qwen35 (hybrid) and lfm2
 * models, without sockets:
 *   (a) batching: 4 requests on 4 slots, stepped by hand, decode in batched steps of 4 (the stats
 *       count them exactly); 16 requests on 4 slots all finish, in batched steps;
 *   (b) every request's ids equal a plain session's greedy decode of the same prompt (argmax over
 *       slm_session_prefill / slm_session_decode logits, lowest id on ties), choices of n = 3 too;
 *   (c) cancel: a running and a queued request end CANCELLED, the others are unaffected;
 *   (d) prefix reuse: turn 2 (turn 1's prompt + answer + more) reuses what the slot holds, and after
 *       another prompt took the slot, the kept snapshot;
 *   (e) refused submits (each bad field, a full queue, a stopping engine) change nothing: the stats
 *       stay, and the next request gives the reference ids;
 *   (f) stop strings cut the text and end the choice;
 *   (g) threaded: the engine's thread with requests submitted and cancelled from 4 threads at once
 *       (run under TSan by scripts/test.sh), every request gets exactly one DONE and the ids of a
 *       plain session; stopping with requests running ends them SHUTDOWN;
 *   (h) params are read by their size (a zeroed struct is every default);
 *   (i) slot save / erase / restore (slm_engine_slot): a restored slot, in this engine or another,
 *       continues with the ids the saving slot gave; busy slots, bad slots, foreign files refused.
 * References come from plain session calls, never from the engine. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statelm.h"
#include "statelm_engine.h"

enum { N_CTX = 96, MAX_GEN = 16, MAX_REQ = 32 };

static const char *const archs[] = {"llama", "qwen35", "lfm2"};
#define N_ARCH (int)(sizeof archs / sizeof archs[0])

static slm_model *load(const char *arch) {
    char rel[128];
    snprintf(rel, sizeof rel, "tiny/%s/%s-f32.gguf", arch, arch);
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path(rel), NULL, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", rel, err);
    return m;
}

/* What the events of one request said. Written on the stepping thread; read after DONE. */
typedef struct outcome {
    uint64_t id;
    int n_done, n_after_done, n_choice_events;
    slm_engine_outcome how;
    size_t n_cached, n_prompt;
    int32_t ids[SLM_ENGINE_MAX_N][MAX_GEN + 8];
    size_t n_ids[SLM_ENGINE_MAX_N];
    char text[SLM_ENGINE_MAX_N][256];
    slm_engine_finish finish[SLM_ENGINE_MAX_N];
    pthread_mutex_t *mu; /* threaded test: guards n_done for the waiting thread */
    pthread_cond_t *cv;
} outcome;

static void on_event(void *user, const slm_engine_event *ev) {
    outcome *o = user;
    if (o->n_done) {
        o->n_after_done++;
        return;
    }
    if (ev->kind == SLM_ENGINE_EVENT_CHOICE) {
        o->n_choice_events++;
        int32_t c = ev->choice;
        size_t n = ev->n_ids < MAX_GEN + 8 ? ev->n_ids : MAX_GEN + 8;
        memcpy(o->ids[c], ev->ids, n * sizeof *ev->ids);
        o->n_ids[c] = n;
        size_t nt = ev->n_text < sizeof o->text[c] - 1 ? ev->n_text : sizeof o->text[c] - 1;
        memcpy(o->text[c], ev->text, nt);
        o->text[c][nt] = '\0';
        o->finish[c] = ev->finish;
        return;
    }
    o->how = ev->outcome;
    o->n_cached = ev->n_cached;
    o->n_prompt = ev->n_prompt;
    if (o->mu) pthread_mutex_lock(o->mu);
    o->n_done++;
    if (o->cv) pthread_cond_broadcast(o->cv);
    if (o->mu) pthread_mutex_unlock(o->mu);
}

static void prompt_of(int32_t i, int32_t len, int32_t n_vocab, int32_t *out) {
    for (int32_t t = 0; t < len; t++)
        out[t] = (int32_t)((7919u * (uint32_t)(i + 1) + 104729u * (uint32_t)t) % (uint32_t)n_vocab);
}

static slm_engine_request greedy_request(const int32_t *ids, size_t n, int32_t max_tokens, outcome *o) {
    slm_engine_request q = slm_engine_request_default();
    q.ids = ids;
    q.n_ids = n;
    q.sampler.temperature = 0.0f;
    q.sampler.repeat_penalty = 1.0f;
    q.sampler.presence_penalty = 0.0f;
    q.sampler.frequency_penalty = 0.0f;
    q.max_tokens = max_tokens;
    q.ignore_eos = true;
    q.on_event = on_event;
    q.user = o;
    return q;
}

/* A plain session's greedy continuation of prompt: n_gen ids. */
static void reference(const slm_model *m, const int32_t *prompt, size_t n, int32_t n_gen, int32_t *out) {
    tu_greedy(m, N_CTX, prompt, n, n_gen, out);
}

static slm_engine *new_engine(const slm_model *m, int32_t n_slots, int32_t queue_max) {
    slm_engine_params p = slm_engine_params_default();
    p.n_slots = n_slots;
    p.queue_max = queue_max;
    p.session.n_ctx = N_CTX;
    p.session.n_threads = 1;
    slm_engine *e = NULL;
    char err[256];
    if (slm_engine_create(m, &p, &e, err, sizeof err) != SLM_OK) fail_msg("engine: %s", err);
    return e;
}

static void run_to_idle(slm_engine *e) {
    int32_t pending = 1;
    for (int guard = 0; pending > 0; guard++) {
        assert_true(guard < 10000);
        assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
    }
}

static void assert_reference(const slm_model *m, const int32_t *prompt, size_t n, const outcome *o, int32_t choice,
                             int32_t n_gen) {
    int32_t ref[MAX_GEN];
    reference(m, prompt, n, n_gen, ref);
    assert_int_equal(o->n_ids[choice], (size_t)n_gen);
    assert_memory_equal(o->ids[choice], ref, (size_t)n_gen * sizeof *ref);
}

/* (a) + (b): 4 requests on 4 slots decode together; 16 on 4 queue and still batch. */
static void batching(void **u) {
    (void)u;
    for (int a = 0; a < N_ARCH; a++) {
        slm_model *m = load(archs[a]);
        int32_t n_vocab = slm_model_n_vocab(m);
        slm_engine *e = new_engine(m, 4, 64);
        static int32_t prompts[16][24];
        static outcome out[16];
        memset(out, 0, sizeof out);
        enum { GEN = 8 };
        for (int32_t i = 0; i < 4; i++) {
            prompt_of(i, 10 + i, n_vocab, prompts[i]);
            slm_engine_request q = greedy_request(prompts[i], (size_t)(10 + i), GEN, &out[i]);
            assert_int_equal(slm_engine_submit(e, &q, &out[i].id, NULL, 0), SLM_OK);
        }
        run_to_idle(e);
        slm_engine_stats st;
        slm_engine_get_stats(e, &st);
        /* step 1 prefills all four (each prompt < one chunk); each later step samples one token per
         * request and decodes the four together, except after the last token (nothing to decode) */
        assert_int_equal(st.n_batch_steps, GEN - 1);
        assert_int_equal(st.n_batch_slots, 4 * (GEN - 1));
        assert_int_equal(st.batch_max, 4);
        assert_int_equal(st.n_batch_fallbacks, 0);
        assert_int_equal(st.n_completed, 4);
        assert_int_equal(st.n_generated_tokens, 4 * GEN);
        for (int32_t i = 0; i < 4; i++) {
            assert_int_equal(out[i].n_done, 1);
            assert_int_equal(out[i].n_after_done, 0);
            assert_int_equal(out[i].how, SLM_ENGINE_DONE_OK);
            assert_int_equal(out[i].finish[0], SLM_ENGINE_FINISH_LENGTH);
            assert_int_equal(out[i].n_prompt, (size_t)(10 + i));
            assert_reference(m, prompts[i], (size_t)(10 + i), &out[i], 0, GEN);
        }
        /* 16 concurrent requests on 4 slots: queued, admitted as slots free, all batched */
        memset(out, 0, sizeof out);
        for (int32_t i = 0; i < 16; i++) {
            prompt_of(100 + i, 8 + i % 5, n_vocab, prompts[i]);
            slm_engine_request q = greedy_request(prompts[i], (size_t)(8 + i % 5), GEN, &out[i]);
            assert_int_equal(slm_engine_submit(e, &q, &out[i].id, NULL, 0), SLM_OK);
        }
        slm_engine_get_stats(e, &st);
        assert_int_equal(st.n_queued, 16);
        run_to_idle(e);
        slm_engine_stats st2;
        slm_engine_get_stats(e, &st2);
        assert_int_equal(st2.n_batch_steps - st.n_batch_steps, 4 * (GEN - 1));
        assert_int_equal(st2.n_batch_slots - st.n_batch_slots, 16 * (GEN - 1));
        assert_int_equal(st2.n_completed, 20);
        assert_int_equal(st2.n_busy, 0);
        assert_int_equal(st2.n_queued, 0);
        for (int32_t i = 0; i < 16; i++) {
            assert_int_equal(out[i].n_done, 1);
            assert_int_equal(out[i].how, SLM_ENGINE_DONE_OK);
            assert_reference(m, prompts[i], (size_t)(8 + i % 5), &out[i], 0, GEN);
        }
        /* n = 3 at temperature 0: every choice (slot and two forks) is the greedy continuation */
        memset(out, 0, sizeof out);
        slm_engine_request q = greedy_request(prompts[0], 9, GEN, &out[0]);
        q.n = 3;
        assert_int_equal(slm_engine_submit(e, &q, &out[0].id, NULL, 0), SLM_OK);
        run_to_idle(e);
        assert_int_equal(out[0].how, SLM_ENGINE_DONE_OK);
        for (int32_t c = 0; c < 3; c++) assert_reference(m, prompts[0], 9, &out[0], c, GEN);
        slm_engine_free(e);
        slm_model_destroy(m);
    }
}

/* (c) cancel a running and a queued request. */
static void cancel(void **u) {
    (void)u;
    slm_model *m = load("llama");
    int32_t n_vocab = slm_model_n_vocab(m);
    slm_engine *e = new_engine(m, 2, 8);
    int32_t prompts[4][12];
    outcome out[4];
    memset(out, 0, sizeof out);
    for (int32_t i = 0; i < 4; i++) {
        prompt_of(i, 12, n_vocab, prompts[i]);
        slm_engine_request q = greedy_request(prompts[i], 12, MAX_GEN, &out[i]);
        assert_int_equal(slm_engine_submit(e, &q, &out[i].id, NULL, 0), SLM_OK);
    }
    int32_t pending;
    for (int k = 0; k < 3; k++) assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
    assert_int_equal(pending, 4);
    assert_true(out[0].n_choice_events > 0);
    assert_int_equal(slm_engine_cancel(e, out[0].id), SLM_OK); /* running */
    assert_int_equal(slm_engine_cancel(e, out[3].id), SLM_OK); /* queued */
    assert_int_equal(slm_engine_cancel(e, 999999), SLM_ERR_NOT_FOUND);
    run_to_idle(e);
    assert_int_equal(out[0].how, SLM_ENGINE_DONE_CANCELLED);
    assert_true(out[0].n_ids[0] < MAX_GEN);
    assert_int_equal(out[3].how, SLM_ENGINE_DONE_CANCELLED);
    assert_int_equal(out[3].n_choice_events, 0);
    for (int32_t i = 0; i < 4; i++) {
        assert_int_equal(out[i].n_done, 1);
        assert_int_equal(out[i].n_after_done, 0);
    }
    for (int32_t i = 1; i < 3; i++) {
        assert_int_equal(out[i].how, SLM_ENGINE_DONE_OK);
        assert_reference(m, prompts[i], 12, &out[i], 0, MAX_GEN);
    }
    assert_int_equal(slm_engine_cancel(e, out[1].id), SLM_ERR_NOT_FOUND); /* finished */
    slm_engine_stats st;
    slm_engine_get_stats(e, &st);
    assert_int_equal(st.n_cancelled, 2);
    assert_int_equal(st.n_completed, 2);
    assert_int_equal(st.n_busy, 0);
    slm_engine_free(e);
    slm_model_destroy(m);
}

/* (d) turn 2 continues from the slot; after another prompt took the only slot, from the snapshot. */
static void prefix_reuse(void **u) {
    (void)u;
    for (int a = 0; a < N_ARCH; a++) {
        slm_model *m = load(archs[a]);
        int32_t n_vocab = slm_model_n_vocab(m);
        slm_engine *e = new_engine(m, 1, 8);
        enum { P = 20, GEN = 6 };
        int32_t turn1[P], other[P], turn2[P + GEN + 4];
        prompt_of(1, P, n_vocab, turn1);
        prompt_of(2, P, n_vocab, other);
        outcome o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0};
        slm_engine_request q = greedy_request(turn1, P, GEN, &o1);
        assert_int_equal(slm_engine_submit(e, &q, &o1.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        assert_int_equal(o1.n_cached, 0);
        /* turn 2: the prompt, the answer, 4 more tokens */
        memcpy(turn2, turn1, sizeof turn1);
        memcpy(turn2 + P, o1.ids[0], GEN * sizeof *turn2);
        prompt_of(3, 4, n_vocab, turn2 + P + GEN);
        q = greedy_request(turn2, P + GEN + 4, GEN, &o2);
        assert_int_equal(slm_engine_submit(e, &q, &o2.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        /* the slot holds turn1 and the answer but its last token (sampled, never decoded) */
        assert_int_equal(o2.n_cached, P + GEN - 1);
        assert_reference(m, turn2, P + GEN + 4, &o2, 0, GEN);
        /* another prompt takes the slot; turn 2 again comes back from the kept snapshot */
        q = greedy_request(other, P, GEN, &o3);
        assert_int_equal(slm_engine_submit(e, &q, &o3.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        assert_int_equal(o3.n_cached, 0);
        slm_engine_stats st;
        slm_engine_get_stats(e, &st);
        assert_int_equal(st.n_cached_states, 1);
        q = greedy_request(turn2, P + GEN + 4, GEN, &o4);
        assert_int_equal(slm_engine_submit(e, &q, &o4.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        /* the snapshot holds all of turn 2's prompt: rolled back to its last token, which gives the logits */
        assert_int_equal(o4.n_cached, P + GEN + 4 - 1);
        assert_memory_equal(o4.ids[0], o2.ids[0], GEN * sizeof(int32_t));
        slm_engine_get_stats(e, &st);
        assert_int_equal(st.n_reused_tokens, (P + GEN - 1) + (P + GEN + 4 - 1));
        slm_engine_free(e);
        slm_model_destroy(m);
    }
}

/* slm_engine_slot: a slot saved, erased and restored (into another engine too) continues as the
 * slot that saved it; a generating slot, a slot out of range and another model's file are refused. */
static void slot_save_restore(void **u) {
    (void)u;
    char *dir = tu_temp_dir(), path[4200];
    snprintf(path, sizeof path, "%s/slot.bin", dir);
    for (int a = 0; a < N_ARCH; a++) {
        slm_model *m = load(archs[a]);
        int32_t n_vocab = slm_model_n_vocab(m);
        slm_engine *e = new_engine(m, 2, 8);
        enum { P = 16, GEN = 5 };
        int32_t p1[P], p2[P + GEN + 3], other[P];
        prompt_of(1, P, n_vocab, p1);
        prompt_of(4, P, n_vocab, other);
        outcome o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0}, busy = {0};
        slm_engine_request q = greedy_request(p1, P, GEN, &o1);
        assert_int_equal(slm_engine_submit(e, &q, &o1.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        size_t n = 0, n_saved = 0;
        char err[256];
        /* the request ran in the slot with the longest prefix: the idle ones tie, slot 0 first */
        assert_int_equal(slm_engine_slot(e, 0, SLM_ENGINE_SLOT_SAVE, path, &n_saved, err, sizeof err), SLM_OK);
        assert_int_equal(n_saved, P + GEN - 1);
        memcpy(p2, p1, sizeof p1);
        memcpy(p2 + P, o1.ids[0], GEN * sizeof *p2);
        prompt_of(5, 3, n_vocab, p2 + P + GEN);
        q = greedy_request(p2, P + GEN + 3, GEN, &o2);
        assert_int_equal(slm_engine_submit(e, &q, &o2.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        assert_int_equal(slm_engine_slot(e, 0, SLM_ENGINE_SLOT_ERASE, NULL, &n, err, sizeof err), SLM_OK);
        assert_true(n > 0);
        assert_int_equal(slm_engine_slot(e, 0, SLM_ENGINE_SLOT_RESTORE, path, &n, err, sizeof err), SLM_OK);
        assert_int_equal(n, n_saved);
        q = greedy_request(p2, P + GEN + 3, GEN, &o3);
        assert_int_equal(slm_engine_submit(e, &q, &o3.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        assert_int_equal(o3.n_cached, n_saved);
        assert_memory_equal(o3.ids[0], o2.ids[0], GEN * sizeof(int32_t));
        /* refusals */
        assert_int_equal(slm_engine_slot(e, 2, SLM_ENGINE_SLOT_ERASE, NULL, &n, err, sizeof err), SLM_ERR_RANGE);
        q = greedy_request(other, P, GEN, &busy);
        assert_int_equal(slm_engine_submit(e, &q, &busy.id, NULL, 0), SLM_OK);
        int32_t pending = 0;
        assert_int_equal(slm_engine_step(e, &pending), SLM_OK); /* admitted: a slot generates */
        int32_t gen_slot = -1;
        for (int32_t k = 0; k < 2 && gen_slot < 0; k++)
            if (slm_engine_slot(e, k, SLM_ENGINE_SLOT_ERASE, NULL, &n, err, sizeof err) == SLM_ERR_STATE) gen_slot = k;
        assert_true(gen_slot >= 0);
        run_to_idle(e);
        slm_engine_free(e);
        /* another engine restores the file: the same continuation */
        e = new_engine(m, 1, 8);
        assert_int_equal(slm_engine_slot(e, 0, SLM_ENGINE_SLOT_RESTORE, path, &n, err, sizeof err), SLM_OK);
        q = greedy_request(p2, P + GEN + 3, GEN, &o4);
        assert_int_equal(slm_engine_submit(e, &q, &o4.id, NULL, 0), SLM_OK);
        run_to_idle(e);
        assert_int_equal(o4.n_cached, n_saved);
        assert_memory_equal(o4.ids[0], o2.ids[0], GEN * sizeof(int32_t));
        slm_engine_free(e);
        slm_model_destroy(m);
        if (a == 0) continue;
        /* the previous architecture's file is refused, the slot unchanged */
        slm_model *m2 = load(archs[a - 1]);
        e = new_engine(m2, 1, 8);
        assert_int_equal(slm_engine_slot(e, 0, SLM_ENGINE_SLOT_RESTORE, path, &n, err, sizeof err), SLM_ERR_STATE);
        assert_true(err[0] != '\0');
        slm_engine_free(e);
        slm_model_destroy(m2);
    }
    tu_rm_dir(dir);
}

static void assert_stats_equal(const slm_engine_stats *a, const slm_engine_stats *b) {
    assert_int_equal(a->n_submitted, b->n_submitted);
    assert_int_equal(a->n_queued, b->n_queued);
    assert_int_equal(a->n_busy, b->n_busy);
    assert_int_equal(a->n_completed, b->n_completed);
    assert_int_equal(a->n_failed, b->n_failed);
}

/* (e) every refused submit names the field and changes nothing. */
static void refused_submit(void **u) {
    (void)u;
    slm_model *m = load("llama");
    int32_t n_vocab = slm_model_n_vocab(m);
    slm_engine *e = new_engine(m, 1, 1);
    int32_t prompt[N_CTX + 1];
    prompt_of(5, N_CTX + 1, n_vocab, prompt);
    outcome o = {0};
    slm_engine_stats before, after;
    slm_engine_get_stats(e, &before);
    char err[256];
    uint64_t id = 0;
    slm_logit_bias bad_bias = {n_vocab, 1.0f};
    const char *stops[SLM_ENGINE_MAX_STOPS + 1] = {"a", "b", "c", "d", "e"};
    struct {
        const char *what, *needle;
        slm_status want;
    } cases[] = {
        {"n = -1", "n -1", SLM_ERR_INVALID_ARG},
        {"n too large", "n 9", SLM_ERR_INVALID_ARG},
        {"max_tokens 0", "max_tokens", SLM_ERR_INVALID_ARG},
        {"token id", "prompt[3]", SLM_ERR_INVALID_ARG},
        {"prompt fills the context", "context", SLM_ERR_CONTEXT_FULL},
        {"empty prompt", "empty", SLM_ERR_INVALID_ARG},
        {"no callback", "on_event", SLM_ERR_INVALID_ARG},
        {"top_logprobs", "top_logprobs", SLM_ERR_INVALID_ARG},
        {"stops", "n_stops", SLM_ERR_INVALID_ARG},
        {"logit_bias", "logit_bias", SLM_ERR_INVALID_ARG},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int32_t saved = prompt[3];
        slm_engine_request q = greedy_request(prompt, 10, 4, &o);
        switch (k) {
        case 0: q.n = -1; break;
        case 1: q.n = SLM_ENGINE_MAX_N + 1; break;
        case 2: q.max_tokens = 0; break;
        case 3: prompt[3] = n_vocab; break;
        case 4: q.n_ids = N_CTX; break;
        case 5: q.n_ids = 0; break;
        case 6: q.on_event = NULL; break;
        case 7: q.logprobs = true, q.top_logprobs = SLM_ENGINE_MAX_TOP_LOGPROBS + 1; break;
        case 8: q.stops = stops, q.n_stops = SLM_ENGINE_MAX_STOPS + 1; break;
        case 9: q.sampler.logit_bias = &bad_bias, q.sampler.n_logit_bias = 1; break;
        }
        err[0] = '\0';
        slm_status s = slm_engine_submit(e, &q, &id, err, sizeof err);
        prompt[3] = saved;
        if (s != cases[k].want || !strstr(err, cases[k].needle))
            fail_msg("%s: %s, '%s' (want %s naming '%s')", cases[k].what, slm_status_name(s), err,
                     slm_status_name(cases[k].want), cases[k].needle);
        slm_engine_get_stats(e, &after);
        assert_stats_equal(&before, &after);
    }
    /* a full queue: 1 slot + 1 waiting accepted, the third refused */
    outcome ok[3];
    memset(ok, 0, sizeof ok);
    for (int i = 0; i < 2; i++) {
        slm_engine_request q = greedy_request(prompt, 10, 4, &ok[i]);
        assert_int_equal(slm_engine_submit(e, &q, &ok[i].id, NULL, 0), SLM_OK);
    }
    run_to_idle(e);
    /* nothing steps now: one request may wait per slot plus queue_max, the third is refused */
    slm_engine_request q = greedy_request(prompt, 10, 4, &ok[2]);
    assert_int_equal(slm_engine_submit(e, &q, &ok[2].id, NULL, 0), SLM_OK);
    outcome extra[2];
    memset(extra, 0, sizeof extra);
    q = greedy_request(prompt, 10, 4, &extra[0]);
    assert_int_equal(slm_engine_submit(e, &q, &extra[0].id, NULL, 0), SLM_OK);
    slm_engine_get_stats(e, &before);
    q = greedy_request(prompt, 10, 4, &extra[1]);
    assert_int_equal(slm_engine_submit(e, &q, &id, err, sizeof err), SLM_ERR_RANGE);
    assert_non_null(strstr(err, "busy"));
    slm_engine_get_stats(e, &after);
    assert_stats_equal(&before, &after);
    run_to_idle(e);
    assert_int_equal(extra[1].n_choice_events + extra[1].n_done, 0);
    for (int i = 0; i < 3; i++) assert_reference(m, prompt, 10, &ok[i], 0, 4);
    assert_reference(m, prompt, 10, &extra[0], 0, 4);
    /* stopping: queued requests end SHUTDOWN; a submit after is refused */
    outcome late = {0};
    q = greedy_request(prompt, 10, 4, &late);
    assert_int_equal(slm_engine_submit(e, &q, &late.id, NULL, 0), SLM_OK);
    slm_engine_stop(e);
    assert_int_equal(late.n_done, 1);
    assert_int_equal(late.how, SLM_ENGINE_DONE_SHUTDOWN);
    q = greedy_request(prompt, 10, 4, &o);
    assert_int_equal(slm_engine_submit(e, &q, &id, err, sizeof err), SLM_ERR_ABORTED);
    slm_engine_free(e);
    slm_model_destroy(m);
}

/* (f) a stop string cuts the text before it and ends the choice. */
static void stop_string(void **u) {
    (void)u;
    slm_model *m = load("llama");
    int32_t n_vocab = slm_model_n_vocab(m);
    slm_engine *e = new_engine(m, 1, 4);
    int32_t prompt[12];
    prompt_of(7, 12, n_vocab, prompt);
    outcome full = {0}, cut = {0};
    slm_engine_request q = greedy_request(prompt, 12, MAX_GEN, &full);
    assert_int_equal(slm_engine_submit(e, &q, &full.id, NULL, 0), SLM_OK);
    run_to_idle(e);
    size_t n = strlen(full.text[0]);
    if (n < 4) {
        slm_engine_free(e);
        slm_model_destroy(m);
        TU_SKIP("the tiny model's greedy text is %zu bytes, too short for a stop string", n);
    }
    /* the stop string: 2 bytes from the middle of the full text */
    char stop[3] = {full.text[0][n / 2], full.text[0][n / 2 + 1], 0};
    const char *at = strstr(full.text[0], stop);
    const char *stops[1] = {stop};
    q = greedy_request(prompt, 12, MAX_GEN, &cut);
    q.stops = stops;
    q.n_stops = 1;
    assert_int_equal(slm_engine_submit(e, &q, &cut.id, NULL, 0), SLM_OK);
    run_to_idle(e);
    assert_int_equal(cut.how, SLM_ENGINE_DONE_OK);
    assert_int_equal(cut.finish[0], SLM_ENGINE_FINISH_STOP);
    assert_int_equal(strlen(cut.text[0]), (size_t)(at - full.text[0]));
    assert_memory_equal(cut.text[0], full.text[0], strlen(cut.text[0]));
    slm_engine_free(e);
    slm_model_destroy(m);
}

/* (f2) keep_ids: a control token's text is in the answer only when the request keeps it (the
 * token forced by a logit bias; the detokenizer drops control tokens otherwise). */
static void kept_control_tokens(void **u) {
    (void)u;
    slm_model *m = load("llama");
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    int32_t n_vocab = slm_model_n_vocab(m), ctl = -1;
    char text[64];
    size_t n_plain = 0, n_special = 0;
    for (int32_t id = 0; id < n_vocab && ctl < 0; id++)
        if (!slm_tokenizer_is_eog(tok, id) && slm_tokenizer_decode(tok, &id, 1, false, text, sizeof text, &n_plain) == SLM_OK &&
            n_plain == 0 && slm_tokenizer_decode(tok, &id, 1, true, text, sizeof text, &n_special) == SLM_OK &&
            n_special > 0 && n_special < sizeof text)
            ctl = id;
    if (ctl < 0) {
        slm_model_destroy(m);
        TU_SKIP("the tiny vocabulary has no control token that does not end generation");
    }
    text[n_special] = '\0';
    slm_engine *e = new_engine(m, 1, 4);
    int32_t prompt[8];
    prompt_of(3, 8, n_vocab, prompt);
    slm_logit_bias bias = {ctl, 1000.0f};
    outcome dropped = {0}, kept = {0};
    slm_engine_request q = greedy_request(prompt, 8, 3, &dropped);
    q.sampler.logit_bias = &bias;
    q.sampler.n_logit_bias = 1;
    assert_int_equal(slm_engine_submit(e, &q, &dropped.id, NULL, 0), SLM_OK);
    q.user = &kept;
    q.keep_ids = &ctl;
    q.n_keep_ids = 1;
    assert_int_equal(slm_engine_submit(e, &q, &kept.id, NULL, 0), SLM_OK);
    run_to_idle(e);
    assert_int_equal(dropped.n_ids[0], 3);
    assert_int_equal(kept.n_ids[0], 3);
    for (int i = 0; i < 3; i++) assert_int_equal(kept.ids[0][i], ctl);
    assert_string_equal(dropped.text[0], "");
    char want[3 * sizeof text];
    snprintf(want, sizeof want, "%s%s%s", text, text, text);
    assert_string_equal(kept.text[0], want);
    /* refused: an id outside the vocabulary, too many ids */
    char err[256];
    uint64_t id;
    int32_t bad = n_vocab;
    q.keep_ids = &bad;
    assert_int_equal(slm_engine_submit(e, &q, &id, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "keep_ids[0]"));
    q.keep_ids = &ctl;
    q.n_keep_ids = SLM_ENGINE_MAX_KEEP + 1;
    assert_int_equal(slm_engine_submit(e, &q, &id, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "n_keep_ids"));
    slm_engine_free(e);
    slm_model_destroy(m);
}

/* (g) the engine's thread, with submits and cancels from 4 threads at once. */
typedef struct client {
    slm_engine *e;
    const slm_model *m;
    int32_t index;
    int32_t prompts[4][16];
    outcome out[4];
    pthread_mutex_t mu;
    pthread_cond_t cv;
} client;

static void *client_main(void *arg) {
    client *c = arg;
    int32_t n_vocab = slm_model_n_vocab(c->m);
    for (int32_t i = 0; i < 4; i++) {
        prompt_of(c->index * 4 + i, 16, n_vocab, c->prompts[i]);
        c->out[i].mu = &c->mu;
        c->out[i].cv = &c->cv;
        slm_engine_request q = greedy_request(c->prompts[i], 16, MAX_GEN, &c->out[i]);
        slm_status s;
        while ((s = slm_engine_submit(c->e, &q, &c->out[i].id, NULL, 0)) == SLM_ERR_RANGE) {
        }
        if (s != SLM_OK) return (void *)1;
        if (i == 3) slm_engine_cancel(c->e, c->out[i].id); /* may finish first */
    }
    pthread_mutex_lock(&c->mu);
    for (int32_t i = 0; i < 4; i++)
        while (c->out[i].n_done == 0) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void threaded(void **u) {
    (void)u;
    slm_model *m = load("llama");
    slm_engine *e = new_engine(m, 3, 4);
    assert_int_equal(slm_engine_start(e), SLM_OK);
    assert_int_equal(slm_engine_step(e, NULL), SLM_ERR_STATE);
    static client cl[4];
    pthread_t th[4];
    for (int32_t k = 0; k < 4; k++) {
        memset(&cl[k], 0, sizeof cl[k]);
        cl[k].e = e;
        cl[k].m = m;
        cl[k].index = k;
        pthread_mutex_init(&cl[k].mu, NULL);
        pthread_cond_init(&cl[k].cv, NULL);
        assert_int_equal(pthread_create(&th[k], NULL, client_main, &cl[k]), 0);
    }
    for (int32_t k = 0; k < 4; k++) {
        void *rc = NULL;
        pthread_join(th[k], &rc);
        assert_null(rc);
    }
    slm_engine_stats st;
    slm_engine_get_stats(e, &st);
    slm_engine_stop(e);
    for (int32_t k = 0; k < 4; k++) {
        for (int32_t i = 0; i < 4; i++) {
            const outcome *o = &cl[k].out[i];
            assert_int_equal(o->n_done, 1);
            assert_int_equal(o->n_after_done, 0);
            if (i < 3) assert_int_equal(o->how, SLM_ENGINE_DONE_OK);
            else assert_true(o->how == SLM_ENGINE_DONE_OK || o->how == SLM_ENGINE_DONE_CANCELLED);
            if (o->how == SLM_ENGINE_DONE_OK) assert_reference(m, cl[k].prompts[i], 16, o, 0, MAX_GEN);
        }
        pthread_mutex_destroy(&cl[k].mu);
        pthread_cond_destroy(&cl[k].cv);
    }
    assert_int_equal(st.n_submitted, 16);
    assert_int_equal(st.n_completed + st.n_cancelled, 16);
    assert_int_equal(st.n_failed, 0);
    slm_engine_free(e);
    slm_model_destroy(m);
}

/* Stopping a started engine with requests running ends them SHUTDOWN; free after is clean. */
static void stop_running(void **u) {
    (void)u;
    slm_model *m = load("llama");
    int32_t n_vocab = slm_model_n_vocab(m);
    slm_engine *e = new_engine(m, 2, 8);
    int32_t prompt[12];
    prompt_of(9, 12, n_vocab, prompt);
    outcome out[4];
    memset(out, 0, sizeof out);
    for (int i = 0; i < 4; i++) {
        slm_engine_request q = greedy_request(prompt, 12, MAX_GEN, &out[i]);
        assert_int_equal(slm_engine_submit(e, &q, &out[i].id, NULL, 0), SLM_OK);
    }
    assert_int_equal(slm_engine_step(e, NULL), SLM_OK);
    assert_int_equal(slm_engine_step(e, NULL), SLM_OK);
    slm_engine_stop(e);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(out[i].n_done, 1);
        assert_int_equal(out[i].how, SLM_ENGINE_DONE_SHUTDOWN);
    }
    slm_engine_stats st;
    slm_engine_get_stats(e, &st);
    assert_int_equal(st.n_busy, 0);
    assert_int_equal(st.n_failed, 4);
    slm_engine_free(e);
    slm_model_destroy(m);
}

/* Params read by size: a zeroed struct (size 0) is every default; a given size reads that much. */
static void params_by_size(void **u) {
    (void)u;
    slm_model *m = load("llama");
    slm_engine_params p;
    memset(&p, 0, sizeof p);
    p.n_slots = 2; /* not read: size 0 */
    slm_engine *e = NULL;
    assert_int_equal(slm_engine_create(m, &p, &e, NULL, 0), SLM_OK);
    slm_engine_stats st;
    slm_engine_get_stats(e, &st);
    assert_int_equal(st.n_slots, 4);
    slm_engine_free(e);
    p = slm_engine_params_default();
    p.n_slots = 2;
    p.session.n_ctx = N_CTX;
    assert_int_equal(slm_engine_create(m, &p, &e, NULL, 0), SLM_OK);
    slm_engine_get_stats(e, &st);
    assert_int_equal(st.n_slots, 2);
    assert_int_equal(slm_engine_n_ctx(e), N_CTX);
    slm_engine_free(e);
    char err[128];
    p.lookup = true;
    p.draft_model = m;
    assert_int_equal(slm_engine_create(m, &p, &e, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(e);
    assert_non_null(strstr(err, "lookup"));
    slm_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batching),   cmocka_unit_test(cancel),   cmocka_unit_test(prefix_reuse),
        cmocka_unit_test(refused_submit), cmocka_unit_test(stop_string), cmocka_unit_test(kept_control_tokens), cmocka_unit_test(threaded),
        cmocka_unit_test(stop_running), cmocka_unit_test(params_by_size), cmocka_unit_test(slot_save_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
