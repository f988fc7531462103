/* test_api_null.c — the NULL policy of the public headers (statelm.h, statelm_engine.h): every
 * public function called with NULL handles (and NULL out-params where they are required) returns
 * the documented value instead of crashing, and clears the out-params it was given. To keep it
 * complete, `every_function_is_covered` reads both headers and this file and fails when a function
 * declared SLM_API is never called here: a new public function needs its NULL case below. */
#include "testutil.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statelm.h"
#include "statelm_engine.h"

#define NULL_MSG "invalid argument: NULL handle"

static void enums_and_names(void **unused) {
    (void)unused;
    /* No handles: total over their inputs, static strings. */
    assert_string_equal(slm_status_name((slm_status)-99), "SLM_UNKNOWN_STATUS");
    assert_non_null(slm_status_str((slm_status)-99));
    assert_string_equal(slm_dtype_name((slm_dtype)99), "unknown");
    assert_non_null(slm_layer_kind_name((slm_layer_kind)99));
    assert_null(slm_pooling_name((slm_pooling)99));
    assert_non_null(slm_state_role_name((slm_state_role)99));
    assert_non_null(slm_plan_effect_name((slm_plan_effect)99));
    assert_true(slm_n_targets() > 0);
    assert_null(slm_target_name(-1));
    assert_null(slm_target_name(slm_n_targets()));
    assert_int_equal(slm_model_params_default().size, sizeof(slm_model_params));
    assert_int_equal(slm_session_params_default().size, sizeof(slm_session_params));
    assert_int_equal(slm_sampler_params_default().size, sizeof(slm_sampler_params));
    assert_int_equal(slm_plan_params_default().size, sizeof(slm_plan_params));
    slm_free(NULL);
}

static void model_null(void **unused) {
    (void)unused;
    char err[128] = "x";
    slm_model *m = (slm_model *)1;
    assert_int_equal(slm_model_load(NULL, NULL, &m, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(m);
    assert_true(err[0] != '\0');
    assert_int_equal(slm_model_load("x.gguf", NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    slm_model_destroy(NULL);
    assert_int_equal(slm_model_get_format(NULL), SLM_FORMAT_GGUF);
    assert_null(slm_model_arch(NULL));
    assert_null(slm_model_name(NULL));
    assert_int_equal(slm_model_n_layer(NULL), 0);
    assert_int_equal(slm_model_layer_kind(NULL, 0), SLM_LAYER_ATTENTION);
    assert_int_equal(slm_model_n_vocab(NULL), 0);
    assert_int_equal(slm_model_n_embd(NULL), 0);
    assert_int_equal(slm_model_pooling(NULL), SLM_POOLING_MODEL);
    assert_int_equal(slm_model_n_ctx_train(NULL), 0);
    assert_int_equal(slm_model_n_ctx_default(NULL), 0);
    assert_int_equal(slm_model_n_hparams(NULL), 0);
    const char *name = "x";
    double value = 1;
    assert_int_equal(slm_model_hparam(NULL, 0, &name, &value), SLM_ERR_INVALID_ARG);
    assert_null(name);
    assert_true(value == 0);
    assert_int_equal(slm_model_hparam(NULL, 0, NULL, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_model_n_tensors(NULL), 0);
    slm_tensor_info ti;
    assert_int_equal(slm_model_tensor(NULL, 0, &ti), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_model_tensor(NULL, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_model_weight_bytes(NULL), 0);
    assert_null(slm_model_chat_template(NULL));
    assert_int_equal(slm_model_n_states(NULL), 0);
    slm_state_info si;
    assert_int_equal(slm_model_state(NULL, 0, SLM_DTYPE_F16, 0, &si), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_model_state(NULL, 0, SLM_DTYPE_F16, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_null(slm_model_tokenizer(NULL));
    uint8_t fp[16];
    memset(fp, 0xAB, sizeof fp);
    slm_model_fingerprint(NULL, fp);
    for (int i = 0; i < 16; i++) assert_int_equal(fp[i], 0);
    slm_model_fingerprint(NULL, NULL);
    assert_null(slm_chat_template_detect(NULL));
    char *out = (char *)1;
    slm_chat_message msg = {"user", "hi"};
    assert_int_equal(slm_chat_render(NULL, "chatml", &msg, 1, true, &out), SLM_ERR_INVALID_ARG);
    assert_null(out);
    assert_int_equal(slm_chat_render(NULL, "chatml", &msg, 1, true, NULL), SLM_ERR_INVALID_ARG);
    int32_t *ids = (int32_t *)1;
    size_t n_ids = 7;
    assert_int_equal(slm_chat_tokenize(NULL, "chatml", &msg, 1, NULL, true, &ids, &n_ids), SLM_ERR_INVALID_ARG);
    assert_null(ids);
    assert_int_equal(n_ids, 0);
    assert_int_equal(slm_chat_tokenize(NULL, "chatml", &msg, 1, NULL, true, NULL, &n_ids), SLM_ERR_INVALID_ARG);
    strcpy(err, "x");
    out = (char *)1;
    assert_int_equal(slm_chat_render_tools(NULL, "chatml", &msg, 1, NULL, true, &out, err, sizeof err),
                     SLM_ERR_INVALID_ARG);
    assert_null(out);
    assert_string_equal(err, "");
    ids = (int32_t *)1;
    n_ids = 7;
    assert_int_equal(slm_chat_tokenize_tools(NULL, "chatml", &msg, 1, NULL, NULL, true, &ids, &n_ids, NULL, 0),
                     SLM_ERR_INVALID_ARG);
    assert_null(ids);
    assert_int_equal(n_ids, 0);
    slm_chat_template tmpl = {NULL, "{{ messages[0].content }}", NULL, false};
    out = (char *)1;
    assert_int_equal(slm_chat_render_with(NULL, &tmpl, &msg, 1, NULL, true, &out, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(out);
    assert_int_equal(slm_chat_render_with(NULL, &tmpl, &msg, 1, NULL, true, NULL, err, sizeof err), SLM_ERR_INVALID_ARG);
    ids = (int32_t *)1;
    assert_int_equal(slm_chat_tokenize_with(NULL, &tmpl, &msg, 1, NULL, NULL, true, &ids, &n_ids, NULL, 0),
                     SLM_ERR_INVALID_ARG);
    assert_null(ids);
    assert_null(slm_chat_tool_format(NULL, NULL));
    assert_string_equal(slm_chat_tool_format(NULL, &(slm_chat_template){"qwen3", NULL, NULL, false}), "hermes");
    assert_int_equal(slm_tools_check(NULL, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_true(strlen(err) > 0);
    assert_int_equal(slm_tool_calls_parse(NULL, "x", 1, &out), SLM_ERR_INVALID_ARG);
    assert_null(out);
    assert_int_equal(slm_tool_calls_parse("qwen3", NULL, 1, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tool_calls_parse_opts(NULL, NULL, 0, "x", 1, &out), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tool_calls_parse_opts("hermes", "not json", 0, "x", 1, &out), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tool_calls_parse_opts("hermes", NULL, 0, NULL, 1, NULL), SLM_ERR_INVALID_ARG);
    assert_null(slm_tool_format_detect(NULL));
    assert_int_equal(slm_tool_call_start("hermes", NULL, 5), 0);
    assert_int_equal(slm_tool_call_start(NULL, "ab", 2), 2);
    assert_string_equal(slm_tool_format_markers(NULL)[0], "<think>"); /* any name: the reasoning tags */
    assert_string_equal(slm_tool_format_markers("mistral-args")[2], "[TOOL_CALLS]");
    assert_int_equal(slm_tool_calls_content_ready(NULL, NULL, 5), 0);
    size_t span[4];
    assert_false(slm_tool_call_partial(NULL, NULL, 5, span));
    assert_false(slm_tool_call_partial("qwen3", "<tool_call>{\"name\": \"f\"}", 26, NULL));
    slm_grammar *g = (slm_grammar *)1;
    assert_int_equal(slm_tool_call_grammar(NULL, "[]", NULL, &g, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_null(g);
}

static void tokenizer_null(void **unused) {
    (void)unused;
    slm_tokenizer *loaded = (slm_tokenizer *)1;
    char err[64];
    assert_int_equal(slm_tokenizer_load(NULL, NULL, &loaded, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(loaded);
    assert_int_equal(slm_tokenizer_load("x.gguf", NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    slm_tokenizer_free(NULL);
    assert_int_equal(slm_tokenizer_get_kind(NULL), SLM_TOKENIZER_BPE);
    assert_null(slm_tokenizer_pre_name(NULL));
    assert_int_equal(slm_tokenizer_n_vocab(NULL), 0);
    assert_int_equal(slm_tokenizer_bos(NULL), -1);
    assert_int_equal(slm_tokenizer_eos(NULL), -1);
    assert_int_equal(slm_tokenizer_eot(NULL), -1);
    assert_int_equal(slm_tokenizer_pad(NULL), -1);
    assert_false(slm_tokenizer_add_bos(NULL));
    assert_false(slm_tokenizer_is_eog(NULL, 0));
    assert_null(slm_tokenizer_token_text(NULL, 0));
    int32_t ids[4];
    size_t n = 7;
    assert_int_equal(slm_tokenizer_encode(NULL, "a", 1, 0, ids, 4, &n), SLM_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    assert_int_equal(slm_tokenizer_encode(NULL, "a", 1, 0, ids, 4, NULL), SLM_ERR_INVALID_ARG);
    char buf[8];
    n = 7;
    assert_int_equal(slm_tokenizer_token_bytes(NULL, 0, buf, sizeof buf, &n), SLM_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    n = 7;
    assert_int_equal(slm_tokenizer_decode(NULL, ids, 1, false, buf, sizeof buf, &n), SLM_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    slm_detokenizer *d = (slm_detokenizer *)1;
    assert_int_equal(slm_detokenizer_create(NULL, &d), SLM_ERR_INVALID_ARG);
    assert_null(d);
    assert_int_equal(slm_detokenizer_create(NULL, NULL), SLM_ERR_INVALID_ARG);
    slm_detokenizer_destroy(NULL);
    const char *text = NULL;
    size_t len = 7;
    assert_int_equal(slm_detokenizer_push(NULL, 0, &text, &len), SLM_ERR_INVALID_ARG);
    assert_int_equal(len, 0);
    len = 7;
    assert_int_equal(slm_detokenizer_flush(NULL, &text, &len), SLM_ERR_INVALID_ARG);
    assert_int_equal(len, 0);
}

static void session_null(void **unused) {
    (void)unused;
    char err[128] = "";
    slm_session *s = (slm_session *)1;
    assert_int_equal(slm_session_create(NULL, NULL, &s, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(s);
    assert_true(err[0] != '\0');
    slm_session_destroy(NULL);
    assert_string_equal(slm_session_errmsg(NULL), NULL_MSG);
    const float *logits = (const float *)1;
    int32_t tok = 1;
    assert_int_equal(slm_session_prefill(NULL, &tok, 1, &logits), SLM_ERR_INVALID_ARG);
    float vec[4];
    size_t n_vec = 7;
    assert_int_equal(slm_session_embed(NULL, &tok, 1, SLM_POOLING_LAST, true, vec, 4, &n_vec), SLM_ERR_INVALID_ARG);
    assert_int_equal(n_vec, 0);
    assert_null(logits);
    logits = (const float *)1;
    assert_int_equal(slm_session_decode(NULL, tok, &logits), SLM_ERR_INVALID_ARG);
    assert_null(logits);
    const float *batch_logits[2] = {(const float *)1, (const float *)1};
    slm_session *no_sessions[2] = {NULL, NULL};
    int32_t toks[2] = {0, 0};
    char batch_err[128] = "x";
    assert_int_equal(slm_session_decode_batch(NULL, toks, 2, batch_logits, batch_err, sizeof batch_err),
                     SLM_ERR_INVALID_ARG);
    assert_null(batch_logits[0]);
    assert_null(batch_logits[1]);
    assert_true(batch_err[0] != '\0');
    batch_logits[0] = (const float *)1;
    assert_int_equal(slm_session_decode_batch(no_sessions, toks, 2, batch_logits, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_null(batch_logits[0]);
    assert_int_equal(slm_session_pos(NULL), 0);
    assert_int_equal(slm_session_n_ctx(NULL), 0);
    assert_null(slm_session_model(NULL));
    assert_null(slm_session_kernels(NULL));
    size_t n = 7;
    assert_null(slm_session_history(NULL, &n));
    assert_int_equal(n, 0);
    assert_null(slm_session_history(NULL, NULL));
    slm_session_reset(NULL);
    assert_int_equal(slm_session_rollback(NULL, 0), SLM_ERR_INVALID_ARG);
    size_t reused = 7;
    logits = (const float *)1;
    assert_int_equal(slm_session_sync(NULL, &tok, 1, &logits, &reused), SLM_ERR_INVALID_ARG);
    assert_null(logits);
    assert_int_equal(reused, 0);
    logits = (const float *)1;
    assert_int_equal(slm_session_verify(NULL, &tok, 1, &logits), SLM_ERR_INVALID_ARG);
    assert_null(logits);
    logits = (const float *)1;
    assert_int_equal(slm_session_accept(NULL, 0, &logits), SLM_ERR_INVALID_ARG);
    assert_null(logits);
    assert_int_equal(slm_draft_lookup(NULL, 3, NULL, 4), 0);
    slm_spec_params spp = slm_spec_params_default();
    assert_int_equal(spp.draft_max, 8);
    slm_spec *spec = (slm_spec *)1;
    assert_int_equal(slm_spec_create(NULL, &spp, &spec, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_null(spec);
    slm_spec_destroy(NULL);
    size_t n_spec = 7;
    assert_int_equal(slm_spec_step(NULL, 4, &tok, &n_spec), SLM_ERR_INVALID_ARG);
    assert_int_equal(n_spec, 0);
    slm_spec_stats sps;
    memset(&sps, 0xAB, sizeof sps);
    slm_spec_get_stats(NULL, &sps);
    assert_int_equal(sps.n_steps, 0);
    slm_spec_get_stats(NULL, NULL);
    assert_non_null(slm_spec_errmsg(NULL));
    size_t n_kept = 1;
    assert_int_equal(slm_spec_last_draft(NULL, NULL, 0, &n_kept), 0);
    assert_int_equal(n_kept, 0);
    slm_checkpoint_stats st;
    memset(&st, 0xAB, sizeof st);
    slm_session_checkpoint_stats(NULL, &st);
    assert_int_equal(st.n_in_memory, 0);
    assert_int_equal(st.n_on_disk, 0);
    assert_int_equal(st.bytes_each, 0);
    slm_session_checkpoint_stats(NULL, NULL);
    n = 7;
    assert_null(slm_session_checkpoints(NULL, &n));
    assert_int_equal(n, 0);
    slm_snapshot *snap = (slm_snapshot *)1;
    assert_int_equal(slm_session_snapshot(NULL, &snap), SLM_ERR_INVALID_ARG);
    assert_null(snap);
    assert_int_equal(slm_session_snapshot(NULL, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_restore(NULL, NULL), SLM_ERR_INVALID_ARG);
    s = (slm_session *)1;
    assert_int_equal(slm_session_fork(NULL, NULL, &s, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(s);
    slm_snapshot_destroy(NULL);
    assert_int_equal(slm_snapshot_pos(NULL), 0);
    assert_int_equal(slm_snapshot_bytes(NULL), 0);
    assert_int_equal(slm_session_save(NULL, "x"), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_load(NULL, "x"), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_n_states(NULL), 0);
    slm_state_info si;
    assert_int_equal(slm_session_state(NULL, 0, &si), SLM_ERR_INVALID_ARG);
}

static void sampler_null(void **unused) {
    (void)unused;
    assert_int_equal(slm_sampler_create(NULL, NULL), SLM_ERR_INVALID_ARG);
    slm_sampler *smp = NULL;
    assert_int_equal(slm_sampler_create(NULL, &smp), SLM_OK); /* NULL params: the defaults */
    float logits[2] = {0, 1};
    int32_t tok = 5;
    assert_int_equal(slm_sampler_sample(NULL, logits, 2, NULL, 0, &tok), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_sampler_sample(smp, NULL, 2, NULL, 0, &tok), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_sampler_sample(smp, logits, 2, NULL, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_sampler_sample(smp, logits, 2, NULL, 0, &tok), SLM_OK);
    assert_true(tok == 0 || tok == 1);
    float probs[2] = {-1, -1};
    assert_int_equal(slm_sampler_probs(NULL, logits, 2, NULL, 0, probs), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_sampler_probs(smp, logits, 2, NULL, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_sampler_probs(smp, logits, 2, NULL, 0, probs), SLM_OK);
    assert_true(probs[0] >= 0 && probs[1] > probs[0] && fabsf(probs[0] + probs[1] - 1.0f) < 1e-6f);
    assert_true(slm_sampler_uniform(NULL) == 0.0);
    double u = slm_sampler_uniform(smp);
    assert_true(u >= 0.0 && u < 1.0);
    assert_int_equal(slm_sampler_draw(NULL, probs, 2, &tok), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_sampler_draw(smp, probs, 2, NULL), SLM_ERR_INVALID_ARG);
    const float zeros[2] = {0, 0}, negative[2] = {1, -1}, one_hot[3] = {0, 0, 2};
    assert_int_equal(slm_sampler_draw(smp, zeros, 2, &tok), SLM_ERR_RANGE);
    assert_int_equal(tok, -1);
    assert_int_equal(slm_sampler_draw(smp, negative, 2, &tok), SLM_ERR_RANGE);
    assert_int_equal(slm_sampler_draw(smp, one_hot, 3, &tok), SLM_OK);
    assert_int_equal(tok, 2);
    slm_sampler_destroy(smp);
    slm_sampler_destroy(NULL);
}

static void grammar_null(void **unused) {
    (void)unused;
    slm_grammar *g = (slm_grammar *)1;
    char err[128] = "";
    assert_int_equal(slm_grammar_create(NULL, 4, NULL, &g, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(g);
    assert_int_equal(slm_grammar_create("root ::= \"a\"", 12, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    g = (slm_grammar *)1;
    assert_int_equal(slm_grammar_from_json_schema(NULL, 2, &g, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_null(g);
    assert_int_equal(slm_grammar_from_json_schema("{}", 2, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_grammar_from_json_schema_ex(NULL, 2, SLM_SCHEMA_STRICT, &g, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_grammar_from_json_schema_ex("{}", 2, 0, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    slm_grammar_params gp = slm_grammar_params_default();
    assert_int_equal(gp.size, sizeof gp);
    g = (slm_grammar *)1;
    assert_int_equal(slm_grammar_create_with(NULL, 4, NULL, &gp, &g, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(g);
    assert_true(err[0] != '\0');
    assert_int_equal(slm_grammar_create_with("root ::= \"a\"", 12, NULL, &gp, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    g = (slm_grammar *)1;
    assert_int_equal(slm_grammar_from_json_schema_with(NULL, 2, &gp, &g, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_null(g);
    assert_int_equal(slm_grammar_from_json_schema_with("{}", 2, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    /* NULL params: the defaults (malloc/free, no schema flags) */
    assert_int_equal(slm_grammar_create_with("root ::= \"a\"", 12, NULL, NULL, &g, NULL, 0), SLM_OK);
    slm_grammar_destroy(g);
    assert_int_equal(slm_grammar_from_json_schema_with("{}", 2, NULL, &g, NULL, 0), SLM_OK);
    slm_grammar_destroy(g);
    size_t n = 7;
    assert_int_equal(slm_json_schema_to_gbnf(NULL, 2, NULL, 0, &n, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(n, 0);
    assert_int_equal(slm_json_schema_to_gbnf("{}", 2, NULL, 0, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    slm_grammar_vocab *v = (slm_grammar_vocab *)1;
    assert_int_equal(slm_grammar_vocab_create(NULL, &v), SLM_ERR_INVALID_ARG);
    assert_null(v);
    slm_constraint *c = (slm_constraint *)1;
    assert_int_equal(slm_constraint_create(NULL, NULL, &c), SLM_ERR_INVALID_ARG);
    assert_null(c);
    uint32_t mask[1];
    assert_int_equal(slm_constraint_mask(NULL, mask, 1), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_constraint_accept(NULL, 0), SLM_ERR_INVALID_ARG);
    assert_false(slm_constraint_can_end(NULL));
    assert_false(slm_constraint_done(NULL));
    slm_constraint_reset(NULL);
    assert_string_equal(slm_constraint_errmsg(NULL), "invalid argument: NULL handle");
    uint64_t walked = 5, cached = 5;
    slm_constraint_stats(NULL, &walked, &cached);
    assert_true(walked == 0 && cached == 0);
    assert_int_equal(slm_sampler_set_constraint(NULL, NULL), SLM_ERR_INVALID_ARG);
    slm_constraint_destroy(NULL);
    slm_grammar_vocab_destroy(NULL);
    slm_grammar_destroy(NULL);
}

static void plan_null(void **unused) {
    (void)unused;
    char err[128] = "";
    slm_plan *pl = (slm_plan *)1;
    assert_int_equal(slm_plan_create(NULL, NULL, &pl, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(pl);
    slm_plan_destroy(NULL);
    assert_string_equal(slm_plan_errmsg(NULL), NULL_MSG);
    assert_null(slm_plan_target(NULL));
    assert_null(slm_plan_device(NULL));
    assert_null(slm_plan_fallback_device(NULL));
    assert_false(slm_plan_executable(NULL));
    assert_int_equal(slm_plan_n_ctx(NULL), 0);
    assert_int_equal(slm_plan_n_findings(NULL), 0);
    assert_int_equal(slm_plan_n_residual(NULL), 0);
    assert_int_equal(slm_plan_n_rewrites(NULL), 0);
    assert_int_equal(slm_plan_n_functions(NULL), 0);
    assert_int_equal(slm_plan_n_states(NULL), 0);
    assert_null(slm_plan_function_name(NULL, 0));
    assert_int_equal(slm_plan_function_tokens(NULL, 0), 0);
    assert_int_equal(slm_plan_function_arena_bytes(NULL, 0), 0);
    assert_null(slm_plan_kernels(NULL));
    assert_true(slm_plan_function_measured_us(NULL, 0) < 0);
    assert_int_equal(slm_plan_n_nodes(NULL, 0), 0);
    assert_int_equal(slm_plan_n_devices(NULL, 0), 0);
    slm_plan_finding f;
    slm_plan_rewrite r;
    slm_plan_node nd;
    slm_plan_device_total dt;
    slm_plan_state ps;
    slm_plan_write w;
    assert_int_equal(slm_plan_finding_at(NULL, 0, &f), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_residual_at(NULL, 0, &f), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_rewrite_at(NULL, 0, &r), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_node_at(NULL, 0, 0, &nd), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_device_total_at(NULL, 0, 0, &dt), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_state_at(NULL, 0, &ps), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_state_write_at(NULL, 0, 0, &w), SLM_ERR_INVALID_ARG);
    slm_plan_accept_step as;
    assert_int_equal(slm_plan_n_accept_steps(NULL), 0);
    assert_int_equal(slm_plan_accept_step_at(NULL, 0, &as), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_max_call_tokens(NULL), 0);
    bool identical = true;
    int32_t first_diff = 3, tok = 1;
    assert_int_equal(slm_plan_simulate(NULL, &tok, 1, 1, 0, &identical, &first_diff), SLM_ERR_INVALID_ARG);
    assert_false(identical);
    assert_int_equal(first_diff, -1);
    slm_dtype compute = SLM_DTYPE_F16;
    double device_diff = 1.0;
    int32_t n_agree = 5, n_steps = 5;
    assert_int_equal(slm_plan_simulation_device(NULL, &compute, &device_diff, &n_agree, &n_steps), SLM_ERR_INVALID_ARG);
    assert_int_equal(compute, SLM_DTYPE_F32);
    assert_true(device_diff == 0.0);
    assert_int_equal(n_agree, 0);
    assert_int_equal(n_steps, 0);
    assert_int_equal(slm_plan_simulation_device(NULL, NULL, NULL, NULL, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_profile(NULL, &tok, 1, 1, 1, 0), SLM_ERR_INVALID_ARG);
    slm_session *from = (slm_session *)1;
    char err2[128] = "";
    assert_int_equal(slm_session_create_from_plan(NULL, NULL, NULL, &from, err2, sizeof err2), SLM_ERR_INVALID_ARG);
    assert_null(from);
    assert_true(err2[0] != '\0');
    char *json = (char *)1;
    assert_int_equal(slm_plan_json(NULL, false, &json), SLM_ERR_INVALID_ARG);
    assert_null(json);
    slm_export_params ep = slm_export_params_default();
    assert_int_equal(ep.size, sizeof ep);
    assert_int_equal(ep.weights, SLM_DTYPE_F16);
    assert_int_equal(slm_plan_export(NULL, "x.mlpackage", &ep), SLM_ERR_INVALID_ARG);
    const char *why = NULL;
    assert_false(slm_export_available("onnx", &why));
    assert_true(why && why[0]);
    (void)slm_export_available(NULL, NULL); /* this build's answer; never crashes */
    slm_quantize_params qp = slm_quantize_params_default();
    assert_int_equal(qp.size, sizeof qp);
    char qerr[128] = "";
    assert_int_equal(slm_quantize(NULL, "out.gguf", "q4_0", &qp, qerr, sizeof qerr), SLM_ERR_INVALID_ARG);
    assert_true(qerr[0] != '\0');
    assert_int_equal(slm_quantize("in.gguf", NULL, "q4_0", NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_quantize("in.gguf", "out.gguf", NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    qerr[0] = '\0';
    assert_int_equal(slm_convert(NULL, "out.gguf", "f16", &qp, qerr, sizeof qerr), SLM_ERR_INVALID_ARG);
    assert_true(qerr[0] != '\0');
    assert_int_equal(slm_convert("hf_dir", NULL, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
}

static void engine_null(void **unused) {
    (void)unused;
    assert_int_equal(slm_engine_params_default().size, sizeof(slm_engine_params));
    assert_int_equal(slm_engine_request_default().size, sizeof(slm_engine_request));
    char err[128] = "";
    slm_engine *e = (slm_engine *)1;
    assert_int_equal(slm_engine_create(NULL, NULL, &e, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(e);
    assert_true(err[0] != '\0');
    assert_int_equal(slm_engine_create(NULL, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    slm_engine_free(NULL);
    assert_int_equal(slm_engine_n_ctx(NULL), 0);
    slm_engine_request q = slm_engine_request_default();
    uint64_t id = 7;
    err[0] = '\0';
    assert_int_equal(slm_engine_submit(NULL, &q, &id, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_true(err[0] != '\0');
    assert_int_equal(slm_engine_submit(NULL, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_engine_cancel(NULL, 1), SLM_ERR_INVALID_ARG);
    int32_t pending = 5;
    assert_int_equal(slm_engine_step(NULL, &pending), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_engine_step(NULL, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_engine_start(NULL), SLM_ERR_INVALID_ARG);
    slm_engine_stop(NULL);
    slm_engine_stats st;
    memset(&st, 0xAB, sizeof st);
    slm_engine_get_stats(NULL, &st);
    assert_true(st.n_submitted == 0 && st.n_slots == 0 && st.decode_seconds == 0.0);
    slm_engine_get_stats(NULL, NULL);
    size_t n_tokens = 7;
    assert_int_equal(slm_engine_slot(NULL, 0, SLM_ENGINE_SLOT_SAVE, "x", &n_tokens, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(n_tokens, 0);
    assert_int_equal(slm_engine_slot(NULL, 0, SLM_ENGINE_SLOT_ERASE, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    int32_t n_slots = -1;
    assert_int_equal(slm_engine_slots(NULL, NULL, 0, &n_slots), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_engine_slots(NULL, NULL, 0, NULL), SLM_ERR_INVALID_ARG);
}

/* With real handles, the required out-params of the status calls are checked too. */
static void null_out_params(void **unused) {
    (void)unused;
    slm_model *m = NULL;
    char err[256];
    assert_int_equal(slm_model_load(tu_data_path("tiny/llama/llama-f32.gguf"), NULL, &m, err, sizeof err), SLM_OK);
    assert_int_equal(slm_model_tensor(m, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_model_state(m, 0, SLM_DTYPE_F16, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_model_tensor(m, -1, &(slm_tensor_info){0}), SLM_ERR_RANGE);
    assert_int_equal(slm_session_create(m, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    slm_session *s = NULL;
    assert_int_equal(slm_session_create(m, NULL, &s, err, sizeof err), SLM_OK);
    assert_int_equal(slm_session_state(s, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_prefill(s, NULL, 1, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_sync(s, NULL, 1, NULL, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_save(s, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_load(s, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_restore(s, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_snapshot(s, NULL), SLM_ERR_INVALID_ARG);
    slm_session_checkpoint_stats(s, NULL);
    assert_int_equal(slm_session_pos(s), 0); /* the session is as it was */
    slm_plan *pl = NULL;
    assert_int_equal(slm_plan_create(m, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_create(m, NULL, &pl, err, sizeof err), SLM_OK);
    assert_int_equal(slm_plan_finding_at(pl, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_node_at(pl, 0, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_state_at(pl, 0, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_json(pl, false, NULL), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_plan_profile(pl, NULL, 4, 1, 1, 0), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_session_create_from_plan(m, pl, NULL, NULL, NULL, 0), SLM_ERR_INVALID_ARG);
    /* a NULL path, or a plan for a target other than ane, is refused with a message */
    assert_int_not_equal(slm_plan_export(pl, NULL, NULL), SLM_OK);
    assert_int_not_equal(slm_plan_export(pl, "never-written.mlpackage", NULL), SLM_OK);
    assert_true(slm_plan_errmsg(pl)[0] != '\0');
    /* the engine: a model, but NULL out, request or id */
    assert_int_equal(slm_engine_create(m, NULL, NULL, err, sizeof err), SLM_ERR_INVALID_ARG);
    slm_engine_params ep = slm_engine_params_default();
    ep.n_slots = 1;
    ep.session.n_ctx = 32;
    slm_engine *e = NULL;
    assert_int_equal(slm_engine_create(m, &ep, &e, err, sizeof err), SLM_OK);
    uint64_t id = 7;
    slm_engine_request q = slm_engine_request_default();
    assert_int_equal(slm_engine_submit(e, NULL, &id, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_engine_submit(e, &q, NULL, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_engine_submit(e, &q, &id, err, sizeof err), SLM_ERR_INVALID_ARG); /* no ids, no callback */
    slm_engine_get_stats(e, NULL);
    slm_engine_stats st;
    slm_engine_get_stats(e, &st);
    assert_true(st.n_submitted == 0 && st.n_slots == 1);
    slm_engine_free(e);
    slm_plan_destroy(pl);
    slm_session_destroy(s);
    slm_model_destroy(m);
}

/* Every name declared SLM_API in a public header is called somewhere in this file. */
static void every_function_is_covered(void **unused) {
    (void)unused;
    static const char *const headers[] = {"statelm.h", "statelm_engine.h"};
    size_t sn = 0;
    char *self = (char *)tu_read_file(__FILE__, &sn);
    if (!self) fail_msg("cannot read %s", __FILE__);
    int n_funcs[2] = {0, 0}, missing = 0;
    for (int h = 0; h < 2; h++) {
        char hdr_path[1024];
        snprintf(hdr_path, sizeof hdr_path, "%s/../../include/%s", SLM_TEST_DATA_DIR, headers[h]);
        size_t hn = 0;
        char *hdr = (char *)tu_read_file(hdr_path, &hn);
        if (!hdr) fail_msg("cannot read %s", hdr_path);
        for (char *p = strstr(hdr, "\nSLM_API "); p; p = strstr(p + 1, "\nSLM_API ")) { /* declarations start lines */
            char *paren = strchr(p, '(');
            if (!paren) break;
            char *end = paren;
            char *start = end;
            while (start > p && (isalnum((unsigned char)start[-1]) || start[-1] == '_')) start--;
            char call[128];
            snprintf(call, sizeof call, "%.*s(", (int)(end - start), start);
            n_funcs[h]++;
            /* called: the name followed by '(' somewhere after this function's own text */
            if (!strstr(strstr(self, "static void enums_and_names"), call)) {
                fprintf(stderr, "no NULL test calls %s (%s)\n", call, headers[h]);
                missing++;
            }
        }
        free(hdr);
    }
    assert_true(n_funcs[0] > 100);
    assert_int_equal(n_funcs[1], 13); /* statelm_engine.h's slm_engine_* functions */
    assert_int_equal(missing, 0);
    free(self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(enums_and_names), cmocka_unit_test(model_null),      cmocka_unit_test(tokenizer_null),
        cmocka_unit_test(session_null),    cmocka_unit_test(sampler_null),    cmocka_unit_test(plan_null),
        cmocka_unit_test(null_out_params), cmocka_unit_test(grammar_null),    cmocka_unit_test(engine_null),
        cmocka_unit_test(every_function_is_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
