/* test_engine_think.c — the engine's thinking budget and pinned slots (statelm_engine.h) on the
 * tiny qwen35 model (whose vocabulary has "<think>" and "</think>" as tokens), without sockets:
 *   (a) a prompt that ends inside a think block, budget B: the first B ids are a plain session's
 *       greedy continuation (none of them the close tag), id B is the close tag, the rest are the
 *       plain session's greedy continuation of prompt + those B ids + the close tag; the events say
 *       B thinking tokens and a forced close; budget 0 closes at once; no budget: the plain
 *       session's ids, thinking tokens counted up to the max;
 *   (b) a block the answer opens itself (a logit bias makes every sampled token "<think>"): the
 *       opening token is not counted, B more are, then the close tag is written;
 *   (c) slots: a request pinned to a slot runs there (slm_engine_slots reports it busy with that
 *       request), a second one pinned to the busy slot waits while an unpinned one behind it takes
 *       the idle slot, then runs there; a slot out of range is refused;
 *   (d) refused submits: close ids without a close text, a close id outside the vocabulary, a
 *       negative budget.
 * References come from plain session calls, never from the engine. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "statelm.h"
#include "statelm_engine.h"

enum { N_CTX = 96, MAX_GEN = 24 };

typedef struct outcome {
    int n_done;
    int32_t ids[MAX_GEN + 8];
    size_t n_ids, n_think;
    bool forced;
    char text[512];
} outcome;

static void on_event(void *user, const slm_engine_event *ev) {
    outcome *o = user;
    if (ev->kind == SLM_ENGINE_EVENT_DONE) {
        o->n_done++;
        return;
    }
    o->n_ids = ev->n_ids < MAX_GEN + 8 ? ev->n_ids : MAX_GEN + 8;
    memcpy(o->ids, ev->ids, o->n_ids * sizeof *o->ids);
    size_t nt = ev->n_text < sizeof o->text - 1 ? ev->n_text : sizeof o->text - 1;
    memcpy(o->text, ev->text, nt);
    o->text[nt] = '\0';
    o->n_think = ev->n_think_tokens;
    o->forced = ev->think_forced;
}

static slm_model *load(void) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path("tiny/qwen35/qwen35-f32.gguf"), NULL, &m, err, sizeof err) != SLM_OK)
        fail_msg("load: %s", err);
    return m;
}

static int32_t token_of(const slm_model *m, const char *text) {
    int32_t ids[4];
    size_t n = 0;
    assert_int_equal(slm_tokenizer_encode(slm_model_tokenizer(m), text, strlen(text), SLM_TOKENIZE_PARSE_SPECIAL, ids, 4, &n),
                     SLM_OK);
    assert_int_equal(n, 1);
    return ids[0];
}

/* A plain session's greedy continuation of prompt: n_gen ids. */
static void reference(const slm_model *m, const int32_t *prompt, size_t n, int32_t n_gen, int32_t *out) {
    tu_greedy(m, N_CTX, prompt, n, n_gen, out);
}

static slm_engine *new_engine(const slm_model *m, int32_t n_slots) {
    slm_engine_params p = slm_engine_params_default();
    p.n_slots = n_slots;
    p.session.n_ctx = N_CTX;
    p.session.n_threads = 1;
    slm_engine *e = NULL;
    char err[256];
    if (slm_engine_create(m, &p, &e, err, sizeof err) != SLM_OK) fail_msg("engine: %s", err);
    return e;
}

static slm_engine_request greedy(const int32_t *ids, size_t n, int32_t max_tokens, outcome *o) {
    slm_engine_request q = slm_engine_request_default();
    q.ids = ids;
    q.n_ids = n;
    q.sampler.temperature = 0.0f;
    q.sampler.repeat_penalty = 1.0f;
    q.max_tokens = max_tokens;
    q.ignore_eos = true;
    q.on_event = on_event;
    q.user = o;
    return q;
}

static void run(slm_engine *e, const slm_engine_request *q) {
    uint64_t id = 0;
    char err[256];
    if (slm_engine_submit(e, q, &id, err, sizeof err) != SLM_OK) fail_msg("submit: %s", err);
    int32_t pending = 1;
    while (pending > 0) assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
}

static void budget_in_prompt(void **state) {
    (void)state;
    slm_model *m = load();
    const int32_t open = token_of(m, "<think>"), close = token_of(m, "</think>");
    slm_engine *e = new_engine(m, 1);
    int32_t prompt[8] = {1, 40, 41, 42, 43, 44, 45, open};
    int32_t ref[MAX_GEN];
    reference(m, prompt, 8, MAX_GEN, ref);
    for (int32_t budget = 0; budget <= 6; budget += 3) {
        for (int32_t i = 0; i < budget; i++) assert_int_not_equal(ref[i], close); /* the model would not close it */
        outcome o = {0};
        slm_engine_request q = greedy(prompt, 8, 12, &o);
        q.think_open = "<think>";
        q.think_close = "</think>";
        q.think_in_prompt = true;
        q.think_close_ids = &close;
        q.n_think_close_ids = 1;
        q.think_budget = budget;
        run(e, &q);
        assert_int_equal(o.n_done, 1);
        assert_int_equal(o.n_ids, 12);
        assert_memory_equal(o.ids, ref, (size_t)budget * sizeof *ref);
        assert_int_equal(o.ids[budget], close);
        assert_int_equal(o.n_think, budget);
        assert_true(o.forced);
        assert_non_null(strstr(o.text, "</think>"));
        /* after the close tag: the plain session's greedy continuation of all that */
        int32_t full[8 + MAX_GEN], after[MAX_GEN];
        memcpy(full, prompt, sizeof prompt);
        memcpy(full + 8, o.ids, (size_t)(budget + 1) * sizeof *full);
        reference(m, full, (size_t)(8 + budget + 1), 12 - budget - 1, after);
        assert_memory_equal(o.ids + budget + 1, after, (size_t)(12 - budget - 1) * sizeof *after);
    }
    /* no budget: the plain session's ids, the thinking tokens counted */
    outcome o = {0};
    slm_engine_request q = greedy(prompt, 8, 12, &o);
    q.think_close = "</think>";
    q.think_in_prompt = true;
    run(e, &q);
    assert_memory_equal(o.ids, ref, 12 * sizeof *ref);
    assert_false(o.forced);
    size_t n_close = 0;
    while (n_close < 12 && ref[n_close] != close) n_close++;
    assert_int_equal(o.n_think, n_close < 12 ? n_close + 1 : 12);
    slm_engine_free(e);
    slm_model_destroy(m);
}

static void budget_opened_by_answer(void **state) {
    (void)state;
    slm_model *m = load();
    const int32_t open = token_of(m, "<think>"), close = token_of(m, "</think>");
    slm_engine *e = new_engine(m, 1);
    int32_t prompt[4] = {1, 50, 51, 52};
    slm_logit_bias bias = {open, 100.0f}; /* every sampled token is "<think>" */
    outcome o = {0};
    slm_engine_request q = greedy(prompt, 4, 10, &o);
    q.sampler.logit_bias = &bias;
    q.sampler.n_logit_bias = 1;
    q.think_open = "<think>";
    q.think_close = "</think>";
    q.think_close_ids = &close;
    q.n_think_close_ids = 1;
    q.think_budget = 4;
    run(e, &q);
    assert_int_equal(o.n_ids, 10);
    for (int32_t i = 0; i < 5; i++) assert_int_equal(o.ids[i], open); /* the opening tag, then 4 counted */
    assert_int_equal(o.ids[5], close);
    for (int32_t i = 6; i < 10; i++) assert_int_equal(o.ids[i], open); /* sampled again; the block is over */
    assert_int_equal(o.n_think, 4);
    assert_true(o.forced);
    slm_engine_free(e);
    slm_model_destroy(m);
}

static void pinned_slots(void **state) {
    (void)state;
    slm_model *m = load();
    slm_engine *e = new_engine(m, 2);
    int32_t pa[4] = {1, 60, 61, 62}, pb[4] = {1, 70, 71, 72}, pc[4] = {1, 80, 81, 82};
    outcome oa = {0}, ob = {0}, oc = {0};
    slm_engine_request qa = greedy(pa, 4, 8, &oa), qb = greedy(pb, 4, 4, &ob), qc = greedy(pc, 4, 2, &oc);
    qa.pin_slot = qb.pin_slot = true;
    qa.slot = qb.slot = 1;
    uint64_t ida, idb, idc;
    assert_int_equal(slm_engine_submit(e, &qa, &ida, NULL, 0), SLM_OK);
    assert_int_equal(slm_engine_submit(e, &qb, &idb, NULL, 0), SLM_OK);
    assert_int_equal(slm_engine_submit(e, &qc, &idc, NULL, 0), SLM_OK);
    int32_t pending = 0;
    assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
    slm_engine_slot_info info[2];
    int32_t n = 0;
    assert_int_equal(slm_engine_slots(e, info, 2, &n), SLM_OK);
    assert_int_equal(n, 2);
    assert_true(info[1].busy && info[1].request == ida && info[1].n_prompt == 4);
    assert_true(info[0].busy && info[0].request == idc); /* c went past b, which waits for slot 1 */
    uint64_t seen_b_on = 99;
    while (pending > 0) {
        assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
        assert_int_equal(slm_engine_slots(e, info, 2, &n), SLM_OK);
        for (int32_t i = 0; i < 2; i++)
            if (info[i].request == idb) seen_b_on = (uint64_t)i;
    }
    assert_int_equal(seen_b_on, 1);
    assert_int_equal(oa.n_done + ob.n_done + oc.n_done, 3);
    assert_int_equal(ob.n_ids, 4);
    assert_int_equal(slm_engine_slots(e, info, 2, &n), SLM_OK);
    assert_false(info[0].busy || info[1].busy);
    assert_int_equal(info[1].n_history, 4 + 4 - 1); /* b's prompt and its answer but the last token (not decoded) */
    outcome ox = {0};
    slm_engine_request qx = greedy(pa, 4, 2, &ox);
    qx.pin_slot = true;
    qx.slot = 2;
    char err[128];
    assert_int_equal(slm_engine_submit(e, &qx, &ida, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "slot 2"));
    slm_engine_free(e);
    slm_model_destroy(m);
}

static void refused(void **state) {
    (void)state;
    slm_model *m = load();
    slm_engine *e = new_engine(m, 1);
    int32_t prompt[3] = {1, 2, 3}, bad = 100000, close = token_of(m, "</think>");
    outcome o = {0};
    uint64_t id;
    slm_engine_request q = greedy(prompt, 3, 2, &o);
    q.think_close_ids = &close;
    q.n_think_close_ids = 1;
    assert_int_equal(slm_engine_submit(e, &q, &id, NULL, 0), SLM_ERR_INVALID_ARG); /* no close text */
    q.think_close = "</think>";
    q.think_close_ids = &bad;
    assert_int_equal(slm_engine_submit(e, &q, &id, NULL, 0), SLM_ERR_INVALID_ARG);
    q.think_close_ids = &close;
    q.think_budget = -1;
    assert_int_equal(slm_engine_submit(e, &q, &id, NULL, 0), SLM_ERR_INVALID_ARG);
    q.think_budget = 0;
    assert_int_equal(slm_engine_submit(e, &q, &id, NULL, 0), SLM_OK);
    int32_t pending = 1;
    while (pending > 0) assert_int_equal(slm_engine_step(e, &pending), SLM_OK);
    assert_int_equal(o.n_done, 1);
    slm_engine_free(e);
    slm_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(budget_in_prompt),
        cmocka_unit_test(budget_opened_by_answer),
        cmocka_unit_test(pinned_slots),
        cmocka_unit_test(refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
