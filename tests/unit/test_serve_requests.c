/* test_serve_requests.c — the request mappings of `statelm serve` (tools/serve/request.h) without
 * sockets: each API's JSON body -> sreq (fields read, defaults kept, bad input refused with a
 * message naming the field), validation against the limits, and rendering on the tiny qwen3
 * model (chatml): a trailing assistant message is continued (the ids are those of the messages
 * before it with the generation prompt, then its text), a context overflow names both sizes.
 * Expected values are written out by hand from the APIs' documentation. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "resp_store.h"

static slm_sampler_params defaults(void) {
    slm_sampler_params sp = slm_sampler_params_default();
    sp.temperature = 0.5f;
    sp.top_k = 7;
    return sp;
}

/* Maps body with fn; returns whether it succeeded; *e has the error. */
static bool map(bool (*fn)(const cJSON *, const slm_sampler_params *, sreq *, sreq_err *), const char *body, sreq *r,
                sreq_err *e) {
    memset(e, 0, sizeof *e);
    cJSON *root = sreq_parse_json(body, strlen(body), e);
    if (!root) {
        memset(r, 0, sizeof *r);
        return false;
    }
    slm_sampler_params sp = defaults();
    bool ok = fn(root, &sp, r, e);
    cJSON_Delete(root);
    return ok;
}

/* The body fails mapping with status 400 and a message containing want. */
static void refused(bool (*fn)(const cJSON *, const slm_sampler_params *, sreq *, sreq_err *), const char *body,
                    const char *want) {
    sreq r;
    sreq_err e;
    bool ok = map(fn, body, &r, &e);
    if (ok) fail_msg("accepted: %s", body);
    if (e.status != 400 || !strstr(e.msg, want)) fail_msg("%s: status %u, message '%s', wanted '%s'", body, e.status, e.msg, want);
    sreq_free(&r);
}

static void test_chat_fields(void **state) {
    (void)state;
    sreq r;
    sreq_err e;
    const char *body = "{\"model\":\"x\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
                       "\"temperature\":0.2,\"max_completion_tokens\":9,\"stop\":[\"x\",\"\",\"yz\"],\"n\":2,"
                       "\"seed\":42,\"logit_bias\":{\"5\":-100,\"6\":3},\"logprobs\":true,\"top_logprobs\":3,"
                       "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    assert_true(map(sreq_from_chat, body, &r, &e));
    assert_int_equal(r.api, SAPI_CHAT);
    assert_int_equal(r.n_msgs, 2);
    assert_string_equal(r.msgs[0].role, "system");
    assert_string_equal(r.msgs[0].content, "be brief");
    assert_string_equal(r.msgs[1].content, "a\nb"); /* text parts joined with a newline */
    assert_float_equal(r.sp.temperature, 0.2, 1e-6);
    assert_int_equal(r.sp.top_k, 7); /* the server's default where the body is silent */
    assert_int_equal(r.max_tokens, 9);
    assert_int_equal(r.n_stops, 2);
    assert_string_equal(r.stops[0], "x");
    assert_string_equal(r.stops[1], "yz");
    assert_int_equal(r.n, 2);
    assert_true(r.seed_given);
    assert_int_equal(r.sp.seed, 42);
    assert_int_equal(r.sp.n_logit_bias, 2);
    assert_true(r.sp.logit_bias[0].bias < -1e30f);
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 3);
    assert_true(r.stream && r.include_usage);
    assert_false(sreq_prefill(&r));
    sreq_free(&r);
    /* a message's name and reasoning_content go to the template; a tool message's tool_call_id */
    body = "{\"messages\":[{\"role\":\"user\",\"name\":\"ann\",\"content\":\"q\"},"
           "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"plan\",\"tool_call_id\":\"no\","
           "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
           "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"name\":\"f\",\"content\":\"r\"}]}";
    assert_true(map(sreq_from_chat, body, &r, &e));
    assert_string_equal(r.msgs[0].fields, "{\"name\":\"ann\"}");
    assert_null(r.msgs[0].tool_call_id);
    assert_string_equal(r.msgs[1].fields, "{\"reasoning_content\":\"plan\"}");
    assert_string_equal(r.msgs[1].content, ""); /* null reads "", as llama-server passes it */
    assert_null(r.msgs[1].tool_call_id); /* only a tool message answers a call */
    assert_string_equal(r.msgs[2].fields, "{\"name\":\"f\"}");
    assert_string_equal(r.msgs[2].tool_call_id, "c");
    sreq_free(&r);
}

static void test_chat_refusals(void **state) {
    (void)state;
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"name\":7,\"content\":\"x\"}]}", "'name' must be a string");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"assistant\",\"reasoning_content\":[],\"content\":\"x\"}]}",
            "'reasoning_content' must be a string");
    refused(sreq_from_chat, "{\"messages\":[]}", "'messages' must be a non-empty list");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "role 'wizard'");
    refused(sreq_from_chat,
            "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
            "'image_url' part");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "needs a string 'text'");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\"}]}]}", "type 'video'");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\"}]}", "needs a 'content'");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", "'temperature'");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":7}", "'stop' must be");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"maybe\"}", "'tool_choice'");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", "'stream' must be a boolean");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= \\\"a\\\"\","
                            "\"json_schema\":{}}", "give one of");
    refused(sreq_from_chat, "[1]", "not a JSON object");
    char deep[200] = "{\"a\":";
    for (int i = 0; i < 40; i++) strcat(deep, "[");
    refused(sreq_from_chat, deep, "nested deeper");
}

static void test_constraint_and_tools(void **state) {
    (void)state;
    sreq r;
    sreq_err e;
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
                                    "\"json_object\"}}", &r, &e));
    assert_string_equal(r.schema, "{\"type\":\"object\"}");
    sreq_free(&r);
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
                                    "\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"integer\"}}}}", &r, &e));
    assert_string_equal(r.schema, "{\"type\":\"integer\"}");
    sreq_free(&r);
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
                                    "\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":"
                                    "{\"name\":\"f\"}}}", &r, &e));
    assert_int_equal(r.tool_mode, STOOL_NAMED);
    assert_string_equal(r.tool_name, "f");
    assert_non_null(r.tools);
    sreq_free(&r);
}

static void test_completions(void **state) {
    (void)state;
    sreq r;
    sreq_err e;
    assert_true(map(sreq_from_completions, "{\"prompt\":[\"hi\"],\"logprobs\":2,\"max_tokens\":4}", &r, &e));
    assert_string_equal(r.prompt_text, "hi");
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 2);
    assert_int_equal(r.max_tokens, 4);
    sreq_free(&r);
    assert_true(map(sreq_from_completions, "{\"prompt\":[1,2,3]}", &r, &e));
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 3);
    sreq_free(&r);
    refused(sreq_from_completions, "{\"prompt\":[1,-2]}", "prompt[1]");
    refused(sreq_from_completions, "{\"prompt\":7}", "'prompt' must be");
    refused(sreq_from_completions, "{\"prompt\":{}}", "'prompt_string'");
    refused(sreq_from_completion, "{\"prompt\":{\"prompt_string\":\"x\",\"multimodal_data\":[\"AA==\"]}}", "'multimodal_data'");
    assert_true(map(sreq_from_completion, "{\"prompt\":{\"prompt_string\":\"hi\"},\"response_fields\":[\"content\"]}", &r, &e));
    assert_string_equal(r.prompt_text, "hi");
    assert_string_equal(r.response_fields, "[\"content\"]");
    sreq_free(&r);
    /* llama-server's logit_bias forms: [[id or text, bias]], and text keys of the object form */
    assert_true(map(sreq_from_completion, "{\"prompt\":\"x\",\"logit_bias\":[[5,-1],[\" the \",false],[\"7\",2]]}", &r, &e));
    assert_int_equal(r.sp.n_logit_bias, 2);
    assert_int_equal(r.sp.logit_bias[0].token, 5);
    assert_int_equal(r.sp.logit_bias[1].token, 7);
    assert_int_equal(r.n_bias_text, 1);
    assert_string_equal(r.bias_text[0].text, " the ");
    assert_true(r.bias_text[0].bias < -1e30f);
    sreq_free(&r);
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"hello\":-100,\"3\":1}}",
                    &r, &e));
    assert_int_equal(r.sp.n_logit_bias, 1);
    assert_int_equal(r.n_bias_text, 1);
    sreq_free(&r);
    refused(sreq_from_completion, "{\"prompt\":\"x\",\"logit_bias\":[[1]]}", "[token id or text, bias]");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"-1\":5}}", "not a token id");
    refused(sreq_from_completion, "{\"prompt\":\"x\",\"logit_bias\":[[1.5,1]]}", "not a token id");
    /* llama.cpp's /completion: n_predict -1 is the limit, n_probs are the top alternatives */
    assert_true(map(sreq_from_completion, "{\"prompt\":\"hi\",\"n_predict\":-1,\"n_probs\":3,\"cache_prompt\":false,"
                                          "\"return_tokens\":true,\"seed\":-1}", &r, &e));
    assert_int_equal(r.api, SAPI_COMPLETION);
    assert_int_equal(r.max_tokens, 0);
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 3);
    assert_false(r.cache_prompt);
    assert_true(r.return_tokens);
    assert_false(r.seed_given);
    sreq_free(&r);
    assert_true(map(sreq_from_completion, "{\"prompt\":\"hi\",\"n_predict\":5}", &r, &e));
    assert_int_equal(r.max_tokens, 5);
    sreq_free(&r);
    refused(sreq_from_completion, "{\"prompt\":\"hi\",\"n_predict\":0}", "'n_predict'");
}

static void test_validate(void **state) {
    (void)state;
    const sreq_limits lim = {100, 50};
    static const struct {
        const char *body, *want;
    } bad[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":101}", "beyond this server's limit of 100"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "needs 'logprobs'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"50\":1}}", "not a token id in [0, 50)"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "needs a non-empty 'tools'"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= \\\"a\\\"\",\"ignore_eos\":true}",
         "'ignore_eos' cannot"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"a\"},"
         "{\"role\":\"assistant\",\"content\":\"b\"}]}", "two assistant messages"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sreq r;
        sreq_err e;
        assert_true(map(sreq_from_chat, bad[i].body, &r, &e));
        memset(&e, 0, sizeof e);
        if (sreq_validate(&r, &lim, &e)) fail_msg("validated: %s", bad[i].body);
        if (e.status != 400 || !strstr(e.msg, bad[i].want)) fail_msg("%s: '%s', wanted '%s'", bad[i].body, e.msg, bad[i].want);
        sreq_free(&r);
    }
    sreq r;
    sreq_err e;
    assert_true(map(sreq_from_completions, "{\"prompt\":[1,50]}", &r, &e));
    assert_false(sreq_validate(&r, &lim, &e));
    assert_non_null(strstr(e.msg, "prompt[1]"));
    sreq_free(&r);
}

/* Anthropic Messages -> the OpenAI-shaped messages the chat render path takes. */
static void test_messages(void **state) {
    (void)state;
    sreq r;
    sreq_err e;
    const char *body =
        "{\"model\":\"m\",\"max_tokens\":50,\"system\":[{\"type\":\"text\",\"text\":\"sys\"}],\"stop_sequences\":[\"END\"],"
        "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"any\"},\"messages\":["
        "{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"\"},"
        "{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"redacted_thinking\",\"data\":\"z\"},"
        "{\"type\":\"thinking\",\"thinking\":\"2\"},{\"type\":\"tool_use\",\"id\":\"u1\",\"name\":\"f\",\"input\":{\"x\":1}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"u1\",\"content\":\"r1\"},"
        "{\"type\":\"text\",\"text\":\"more\"}]}]}";
    assert_true(map(sreq_from_messages, body, &r, &e));
    assert_int_equal(r.api, SAPI_MESSAGES);
    assert_int_equal(r.max_tokens, 50);
    assert_int_equal(r.n_stops, 1);
    assert_string_equal(r.stops[0], "END");
    assert_int_equal(r.tool_mode, STOOL_REQUIRED);
    assert_string_equal(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
                                 "{\"type\":\"object\"}}}]");
    static const char *const roles[] = {"system", "user", "assistant", "tool", "user"};
    static const char *const contents[] = {"sys", "q", "a", "r1", "more"};
    assert_int_equal(r.n_msgs, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(r.msgs[i].role, roles[i]);
        assert_string_equal(r.msgs[i].content, contents[i]);
    }
    assert_string_equal(r.msgs[2].tool_calls, "[{\"id\":\"u1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                                              "\"arguments\":\"{\\\"x\\\":1}\"}}]");
    /* the thinking blocks' texts joined, as llama-server joins them; redacted_thinking dropped */
    assert_string_equal(r.msgs[2].fields, "{\"reasoning_content\":\"t2\"}");
    assert_null(r.msgs[1].fields);
    assert_string_equal(r.msgs[3].tool_call_id, "u1"); /* a tool_result's tool_use_id: templates may read it */
    assert_false(sreq_prefill(&r));
    sreq_free(&r);
    /* max_tokens is required, except for count_tokens */
    refused(sreq_from_messages, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", "'max_tokens' is required");
    assert_true(map(sreq_from_messages_count, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", &r, &e));
    sreq_free(&r);
#define MSG(x) "{\"max_tokens\":5,\"messages\":[" x "]}"
    refused(sreq_from_messages, MSG("{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"zz\"}]}"),
            "answers no tool_use");
    refused(sreq_from_messages, MSG("{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"u\",\"name\":\"f\","
                                    "\"input\":{}}]},{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"user\",\"content\":"
                                    "[{\"type\":\"tool_result\",\"tool_use_id\":\"u\"}]}"),
            "answers no tool_use"); /* only the assistant message right before counts */
    refused(sreq_from_messages, MSG("{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}"), "'image' block");
    refused(sreq_from_messages, MSG("{\"role\":\"user\",\"content\":[{\"type\":\"audio\"}]}"), "block type 'audio'");
    refused(sreq_from_messages, MSG("{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"u\"}]}"),
            "a tool_use block needs");
    refused(sreq_from_messages, MSG("{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\"}]}"),
            "a thinking block needs a string 'thinking'");
    refused(sreq_from_messages, MSG("{\"role\":\"system\",\"content\":\"x\"}"), "role 'system'");
    refused(sreq_from_messages, "{\"max_tokens\":5,\"messages\":[]}", "non-empty list");
    refused(sreq_from_messages, "{\"max_tokens\":5,\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}],"
                                "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "tool type 'bash_20250124'");
    refused(sreq_from_messages, "{\"max_tokens\":5,\"tool_choice\":{\"type\":\"sometimes\"},"
                                "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "'tool_choice' type");
    refused(sreq_from_messages, "{\"max_tokens\":5,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":\"x\"},"
                                "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "budget_tokens must be");
    refused(sreq_from_messages, "{\"max_tokens\":5,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":-1},"
                                "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "budget_tokens must be");
#undef MSG
}

/* OpenAI Responses: items -> messages; a stored conversation put before the new input. */
static void test_responses(void **state) {
    (void)state;
    sreq r;
    sreq_err e;
    const char *body = "{\"instructions\":\"be kind\",\"max_output_tokens\":7,\"store\":false,\"previous_response_id\":\"resp_1\","
                       "\"input\":[{\"role\":\"developer\",\"content\":\"d\"},"
                       "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"q\"}]},"
                       "{\"type\":\"reasoning\",\"id\":\"rs\",\"summary\":[]},"
                       "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},"
                       "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"arguments\":\"{}\"},"
                       "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":\"out\"}],"
                       "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}],"
                       "\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\",\"schema\":{\"type\":\"integer\"}}}}";
    assert_true(map(sreq_from_responses, body, &r, &e));
    assert_int_equal(r.api, SAPI_RESPONSES);
    assert_false(r.store);
    assert_int_equal(r.max_tokens, 7);
    assert_string_equal(r.previous_id, "resp_1");
    assert_string_equal(r.schema, "{\"type\":\"integer\"}");
    assert_string_equal(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]");
    assert_true(r.has_instructions);
    static const char *const roles[] = {"system", "system", "user", "assistant", "tool"};
    assert_int_equal(r.n_msgs, 5);
    for (size_t i = 0; i < 5; i++) assert_string_equal(r.msgs[i].role, roles[i]);
    assert_string_equal(r.msgs[3].content, "");
    assert_string_equal(r.msgs[3].tool_calls, "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
                                              "\"{}\"}},{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\","
                                              "\"arguments\":\"{}\"}}]");
    assert_string_equal(r.msgs[4].tool_call_id, "c2");
    /* unknown previous id: 404 */
    assert_false(sreq_responses_resolve(&r, NULL, &e));
    assert_int_equal(e.status, 404);
    /* a stored conversation goes after the instructions, its ids kept */
    const char *rec = "{\"response\":{},\"conversation\":[{\"role\":\"user\",\"content\":\"u0\"},"
                      "{\"role\":\"assistant\",\"content\":\"a0\",\"ids\":[5,6,7]}]}";
    assert_true(sreq_responses_resolve(&r, rec, &e));
    assert_int_equal(r.n_msgs, 7);
    assert_string_equal(r.msgs[0].content, "be kind");
    assert_string_equal(r.msgs[1].content, "u0");
    assert_string_equal(r.msgs[2].content, "a0");
    assert_int_equal(r.msgs[2].n_ids, 3);
    assert_int_equal(r.msgs[2].ids[2], 7);
    assert_string_equal(r.msgs[3].content, "d");
    assert_int_equal(r.n_input_from, 3);
    sreq_free(&r);
    /* a function_call_output must answer a call of the assistant message before it */
    assert_true(map(sreq_from_responses, "{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"zz\",\"output\":\"o\"}]}",
                    &r, &e));
    assert_false(sreq_responses_resolve(&r, NULL, &e));
    assert_non_null(strstr(e.msg, "answers no function_call"));
    sreq_free(&r);
    refused(sreq_from_responses, "{\"input\":[{\"type\":\"web_search_call\"}]}", "item type 'web_search_call'");
    refused(sreq_from_responses, "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\"}]}]}", "'input_image'");
    refused(sreq_from_responses, "{\"input\":\"x\",\"tools\":[{\"type\":\"file_search\"}]}", "tool type 'file_search'");
    refused(sreq_from_responses, "{\"input\":\"x\",\"reasoning\":{\"effort\":\"extreme\"}}", "'reasoning'.effort must be");
    refused(sreq_from_responses, "{\"input\":\"x\",\"reasoning\":{\"effort\":3}}", "'reasoning'.effort must be");
    refused(sreq_from_responses, "{\"input\":[]}", "'input' must be");
    refused(sreq_from_responses, "{\"input\":\"x\",\"tool_choice\":{\"type\":\"mcp\"}}", "'tool_choice' object");
}

/* Two stores on one directory behave as two servers on a shared --state-dir. */
static void test_resp_store(void **state) {
    (void)state;
    char *dir = tu_temp_dir(), id[40], id2[40];
    resp_store *a = resp_store_create(dir, 2, 1 << 20), *b = resp_store_create(dir, 2, 1 << 20);
    assert_true(resp_store_new_id(id) && resp_store_new_id(id2));
    assert_string_not_equal(id, id2);
    assert_true(resp_store_valid_id(id));
    assert_false(resp_store_valid_id("resp_../../x"));
    assert_false(resp_store_put(a, "../evil", "{}", 2));
    assert_true(resp_store_put(a, id, "{\"a\":1}", 7));
    char *got = resp_store_get(b, id); /* the other server reads the file */
    assert_non_null(got);
    assert_string_equal(got, "{\"a\":1}");
    free(got);
    /* evicted from memory (max 2), still read back from its file */
    char more[2][40];
    for (int i = 0; i < 2; i++) {
        assert_true(resp_store_new_id(more[i]));
        assert_true(resp_store_put(a, more[i], "{}", 2));
    }
    got = resp_store_get(a, id);
    assert_non_null(got);
    free(got);
    assert_true(resp_store_delete(b, id)); /* deleted by the other server: gone here too */
    assert_null(resp_store_get(a, id));
    assert_false(resp_store_delete(a, id));
    assert_null(resp_store_get(a, id2));
    resp_store_destroy(a);
    resp_store_destroy(b);
    for (int i = 0; i < 2; i++) { /* the files outlive the stores */
        char path[4200];
        snprintf(path, sizeof path, "%s/resp-%s.json", dir, more[i]);
        assert_true(tu_file_exists(path));
    }
    tu_rm_dir(dir);
    /* memory only: LRU bounded by count */
    resp_store *m = resp_store_create(NULL, 2, 1 << 20);
    char ids[3][40];
    for (int i = 0; i < 3; i++) {
        assert_true(resp_store_new_id(ids[i]));
        assert_true(resp_store_put(m, ids[i], "{}", 2));
    }
    assert_null(resp_store_get(m, ids[0]));
    got = resp_store_get(m, ids[2]);
    assert_non_null(got);
    free(got);
    resp_store_destroy(m);
}

static slm_model *load_qwen3(void) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(tu_data_path("tiny/qwen3/qwen3-f32.gguf"), NULL, &m, err, sizeof err) != SLM_OK)
        fail_msg("load: %s", err);
    return m;
}

/* llama-server's request fields its own test suite sends: "model": null, "verbose", and
 * continue_final_message / add_generation_prompt as llama-server checks them
 * (tools/server/server-common.cpp of the llama.cpp llama-cpp-python 0.3.36 vendors). */
static void test_llama_server_fields(void **state) {
    (void)state;
    sreq r;
    sreq_err e;
    assert_true(map(sreq_from_chat, "{\"model\":null,\"verbose\":true,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                    &r, &e));
    assert_true(r.verbose);
    assert_false(r.no_gen_prompt);
    sreq_free(&r);
    assert_true(map(sreq_from_completions, "{\"model\":null,\"prompt\":\"x\"}", &r, &e));
    assert_false(r.verbose);
    sreq_free(&r);
    assert_true(map(sreq_from_messages, "{\"model\":null,\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                    &r, &e));
    sreq_free(&r);
    refused(sreq_from_chat, "{\"model\":3,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
            "'model' must be a string or null");
    refused(sreq_from_chat, "{\"verbose\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
            "'verbose' must be a boolean");
    /* continue_final_message: the trailing assistant message continued; add_generation_prompt must be false */
    const char *two = "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hel\"}]";
    char body[512];
    snprintf(body, sizeof body, "{\"add_generation_prompt\":false,\"continue_final_message\":true,%s}", two);
    assert_true(map(sreq_from_chat, body, &r, &e));
    assert_true(sreq_prefill(&r));
    assert_false(r.no_gen_prompt);
    sreq_free(&r);
    snprintf(body, sizeof body, "{\"continue_final_message\":true,%s}", two);
    refused(sreq_from_chat, body, "cannot both be true");
    snprintf(body, sizeof body, "{\"add_generation_prompt\":true,\"continue_final_message\":true,%s}", two);
    refused(sreq_from_chat, body, "cannot both be true");
    refused(sreq_from_chat, "{\"add_generation_prompt\":false,\"continue_final_message\":true,"
                            "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", "needs a final assistant message");
    refused(sreq_from_chat, "{\"add_generation_prompt\":false,\"continue_final_message\":true,\"messages\":["
                            "{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
                            "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
            "needs a final assistant message without tool calls");
    refused(sreq_from_chat, "{\"continue_final_message\":\"yes\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
            "'continue_final_message' must be a boolean");
    /* a continued assistant message's text parts are joined with "\n\n" (llama-server's render_content),
     * other messages' with "\n" */
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                                    "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
                                    "\"text\":\"Wh\"},{\"type\":\"text\",\"text\":\"ill\"}]}]}", &r, &e));
    assert_true(sreq_prefill(&r));
    assert_string_equal(r.msgs[0].content, "a\nb");
    assert_string_equal(r.msgs[1].content, "Wh\n\nill");
    sreq_free(&r);
    /* add_generation_prompt false after a user message: rendered without the generation prompt */
    assert_true(map(sreq_from_chat, "{\"add_generation_prompt\":false,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
                    &r, &e));
    assert_true(r.no_gen_prompt);
    sreq_free(&r);
}

static void test_render_prefill(void **state) {
    (void)state;
    slm_model *m = load_qwen3();
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    sreq_model mv = {m, tok, "chatml", NULL, NULL, 4096, slm_tokenizer_n_vocab(tok), NULL, NULL};
    sreq r;
    sreq_err e;
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"Name a colour.\"},"
                                    "{\"role\":\"assistant\",\"content\":\"The colour is\"}]}", &r, &e));
    assert_true(sreq_prefill(&r));
    sprompt p;
    assert_true(sreq_render(&r, &mv, &p, &e));
    assert_true(p.prefill);
    /* expected: the user turn with the generation prompt, then the assistant's text as plain text */
    const slm_chat_message um = {"user", "Name a colour."};
    int32_t *head = NULL;
    size_t n_head = 0;
    assert_int_equal(slm_chat_tokenize(m, "chatml", &um, 1, NULL, true, &head, &n_head), SLM_OK);
    int32_t tail[64];
    size_t n_tail = 0;
    assert_int_equal(slm_tokenizer_encode(tok, "The colour is", 13, 0, tail, 64, &n_tail), SLM_OK);
    assert_int_equal(p.n_ids, n_head + n_tail);
    assert_memory_equal(p.ids, head, n_head * sizeof *head);
    assert_memory_equal(p.ids + n_head, tail, n_tail * sizeof *tail);
    slm_free(head);
    sprompt_free(&p);
    sreq_free(&r);

    /* add_generation_prompt false: the messages as chatml renders them without the generation prompt */
    assert_true(map(sreq_from_chat, "{\"add_generation_prompt\":false,\"messages\":[{\"role\":\"user\","
                                    "\"content\":\"Name a colour.\"}]}", &r, &e));
    assert_true(sreq_render(&r, &mv, &p, &e));
    assert_int_equal(slm_chat_tokenize(m, "chatml", &um, 1, NULL, false, &head, &n_head), SLM_OK);
    assert_int_equal(p.n_ids, n_head);
    assert_memory_equal(p.ids, head, n_head * sizeof *head);
    char *text = NULL;
    assert_true(sreq_render_text(&r, &mv, &text, &e));
    assert_string_equal(text, "<|im_start|>user\nName a colour.<|im_end|>\n"); /* chatml as written in its spec */
    free(text);
    slm_free(head);
    sprompt_free(&p);
    sreq_free(&r);

    /* a context overflow: status 400, code context_length_exceeded, both sizes */
    mv.n_ctx = 8;
    assert_true(map(sreq_from_completions, "{\"prompt\":\"one two three four five six seven eight nine ten\"}", &r, &e));
    assert_false(sreq_render(&r, &mv, &p, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "context_length_exceeded");
    assert_int_equal(e.n_ctx, 8);
    assert_true(e.n_prompt_tokens >= 8);
    sreq_free(&r);
    /* a bad grammar is the request's error, not a crash */
    mv.n_ctx = 4096;
    assert_true(map(sreq_from_completions, "{\"prompt\":\"x\",\"grammar\":\"root ::= (\"}", &r, &e));
    assert_false(sreq_render(&r, &mv, &p, &e));
    assert_int_equal(e.status, 400);
    sreq_free(&r);
    slm_model_destroy(m);
}

/* Reasoning control: the budget fields of each API and their precedence, reasoning_effort's
 * mapping (docs/serve.md's table), id_slot; bad values refused, named. */
static void test_reasoning_control(void **state) {
    (void)state;
    static const struct {
        bool (*fn)(const cJSON *, const slm_sampler_params *, sreq *, sreq_err *);
        const char *body;
        bool has;
        int32_t budget;
    } cases[] = {
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", false, 0},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"thinking_budget_tokens\":7}", true, 7},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_budget_tokens\":0}", true, 0},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_budget\":-1}", false, 0},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"thinking_budget_tokens\":5,"
                         "\"reasoning_budget\":9}", true, 5},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"low\"}", true, 1024},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"minimal\"}", true, 128},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"medium\"}", true, 4096},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"high\"}", false, 0},
        {sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"none\","
                         "\"thinking_budget_tokens\":3}", true, 3},
        {sreq_from_completions, "{\"prompt\":\"a\",\"reasoning_effort\":\"none\"}", true, 0},
        {sreq_from_messages, "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                             "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048}}", true, 2048},
        {sreq_from_messages, "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                             "\"thinking\":{\"type\":\"disabled\"}}", true, 0},
        {sreq_from_messages, "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                             "\"thinking\":{\"type\":\"adaptive\"}}", false, 0},
        {sreq_from_responses, "{\"input\":\"a\",\"reasoning\":{\"effort\":\"none\"}}", true, 0},
        {sreq_from_responses, "{\"input\":\"a\",\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"}}", true, 4096},
        {sreq_from_responses, "{\"input\":\"a\",\"reasoning\":{}}", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sreq r;
        sreq_err e;
        if (!map(cases[i].fn, cases[i].body, &r, &e)) fail_msg("%s: %s", cases[i].body, e.msg);
        if (r.has_think_budget != cases[i].has || (cases[i].has && r.think_budget != cases[i].budget))
            fail_msg("%s: budget %d (%d), want %d (%d)", cases[i].body, r.think_budget, r.has_think_budget, cases[i].budget,
                     cases[i].has);
        sreq_free(&r);
    }
    sreq r;
    sreq_err e;
    assert_true(map(sreq_from_completion, "{\"prompt\":\"a\",\"id_slot\":3}", &r, &e));
    assert_true(r.has_id_slot && r.id_slot == 3);
    sreq_free(&r);
    assert_true(map(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"id_slot\":-1}", &r, &e));
    assert_false(r.has_id_slot);
    sreq_free(&r);
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"thinking_budget_tokens\":1.5}",
            "thinking_budget_tokens");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"max\"}",
            "'reasoning_effort' must be");
    refused(sreq_from_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"id_slot\":\"1\"}", "id_slot");
    refused(sreq_from_responses, "{\"input\":\"a\",\"reasoning\":{\"effort\":1}}", "'reasoning'.effort must be");
    refused(sreq_from_responses, "{\"input\":\"a\",\"reasoning\":{\"effort\":\"extreme\"}}", "'reasoning'.effort must be");
    refused(sreq_from_messages, "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                                "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":\"x\"}}",
            "budget_tokens must be");
    refused(sreq_from_messages, "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                                "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":-1}}",
            "budget_tokens must be");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_fields),   cmocka_unit_test(test_chat_refusals), cmocka_unit_test(test_constraint_and_tools),
        cmocka_unit_test(test_completions),   cmocka_unit_test(test_validate),      cmocka_unit_test(test_render_prefill),
        cmocka_unit_test(test_messages),      cmocka_unit_test(test_responses),     cmocka_unit_test(test_resp_store),
        cmocka_unit_test(test_reasoning_control),
        cmocka_unit_test(test_llama_server_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
