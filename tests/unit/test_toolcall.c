/* test_toolcall.c — text/toolcall.c and grammar/tools.c: the call parsers of each family format
 * (well-formed calls, content around them, malformed calls kept as content), the streaming bound
 * (what tc_content_ready lets out is always a prefix of the final content), the tools check, the
 * public JSON wrapper, and the forced-call grammar of the Hermes, Llama 3 and LFM2 formats: random
 * walks through it on a byte vocabulary always end in a call that parses, names a tool and has
 * arguments with the required keys and values of their types.
 * Renderings of tools are checked against jinja2 in test_chat.c. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "text/toolcall.h"

static void parse_one(tc_format f, const char *text, size_t want_calls, const char *name0, const char *args0,
                      const char *content) {
    tc_result r;
    assert_int_equal(tc_parse(f, text, strlen(text), &r), SLM_OK);
    if (r.n_calls != want_calls) fprintf(stderr, "text: %s\n", text);
    assert_int_equal(r.n_calls, want_calls);
    if (want_calls) {
        assert_string_equal(r.calls[0].name, name0);
        assert_string_equal(r.calls[0].arguments, args0);
    }
    assert_string_equal(r.content, content);
    tc_result_free(&r);
}

static void hermes(void **unused) {
    (void)unused;
    parse_one(TC_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", 1, "f", "{\"a\": 1}",
              "");
    parse_one(TC_HERMES, "Sure.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n"
                         "<tool_call>{\"name\":\"g\",\"arguments\":\"{\\\"x\\\": [1, 2]}\"}</tool_call>  after",
              2, "f", "{}", "Sure.after");
    parse_one(TC_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"b}\\\"\"}}", 1, "f", "{\"a\": \"b}\\\"\"}", "");
    parse_one(TC_HERMES, "<tool_call>{\"name\": \"f\"}</tool_call>", 1, "f", "{}", "");
    /* malformed: the whole text is content */
    parse_one(TC_HERMES, "x <tool_call>{\"name\": 3}</tool_call>", 0, NULL, NULL, "x <tool_call>{\"name\": 3}</tool_call>");
    parse_one(TC_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", 0, NULL, NULL,
              "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>");
    parse_one(TC_HERMES, "<tool_call>{\"name\": \"f\"} trailing", 0, NULL, NULL, "<tool_call>{\"name\": \"f\"} trailing");
    parse_one(TC_HERMES, "plain answer", 0, NULL, NULL, "plain answer");
    parse_one(TC_NONE, "<tool_call>{\"name\": \"f\"}</tool_call>", 0, NULL, NULL, "<tool_call>{\"name\": \"f\"}</tool_call>");
}

static void lfm2(void **unused) {
    (void)unused;
    parse_one(TC_LFM2, "<|tool_call_start|>[get_weather(city=\"Paris\", unit='c')]<|tool_call_end|>It is...", 1,
              "get_weather", "{\"city\":\"Paris\",\"unit\":\"c\"}", "It is...");
    parse_one(TC_LFM2, "[f(a=1, b=-2.5e3, c=True, d=None, e=[1, 'x'], g={'k': false}), h()] then",
              2, "f", "{\"a\":1,\"b\":-2500,\"c\":true,\"d\":null,\"e\":[1,\"x\"],\"g\":{\"k\":false}}", "then");
    parse_one(TC_LFM2, "[f(s=\"a\\\"b\\n\\u00e9\\x41\")]", 1, "f", "{\"s\":\"a\\\"b\\n\u00e9A\"}", "");
    parse_one(TC_LFM2, "[not a call]", 0, NULL, NULL, "[not a call]");
    parse_one(TC_LFM2, "[f(a=1]", 0, NULL, NULL, "[f(a=1]");
    parse_one(TC_LFM2, "[f(a=\"\\ud800\")]", 0, NULL, NULL, "[f(a=\"\\ud800\")]");
}

static void other_formats(void **unused) {
    (void)unused;
    parse_one(TC_GRANITE, "<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\"}]", 2, "f",
              "{\"a\": 1}", "");
    parse_one(TC_GRANITE, "[{\"name\": \"f\", \"arguments\": {}}]", 1, "f", "{}", ""); /* the marker was a control token */
    parse_one(TC_GRANITE, "[1, 2]", 0, NULL, NULL, "[1, 2]");
    parse_one(TC_MISTRAL, "[{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 2}\"}]", 1, "f", "{\"a\":2}", "");
    parse_one(TC_MISTRAL_ARGS, "get_weather{\"city\": \"Paris\"}", 1, "get_weather", "{\"city\": \"Paris\"}", "");
    parse_one(TC_MISTRAL_ARGS, "get_weather{\"city\": \"Paris\"} is how", 0, NULL, NULL, "get_weather{\"city\": \"Paris\"} is how");
    parse_one(TC_MISTRAL_ARGS, "[TOOL_CALLS]f[ARGS][1]", 0, NULL, NULL, "[TOOL_CALLS]f[ARGS][1]");
    parse_one(TC_QWEN_XML, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n", 0, NULL, NULL,
              "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n");
    parse_one(TC_QWEN_XML, "<tool_call><function=f><parameter=s>x</parameter><parameter=s>[1]</parameter></function></tool_call>",
              1, "f", "{\"s\":[1]}", "");
    /* harmony: a built-in tool's message is dropped; a call with bad arguments leaves no calls */
    parse_one(TC_HARMONY, "<|channel|>commentary to=python <|constrain|>code<|message|>print(1)<|call|>", 0, NULL, NULL, "");
    parse_one(TC_HARMONY, "<|channel|>commentary to=functions.f<|message|>{\"a\": <|call|>", 0, NULL, NULL, "");
    parse_one(TC_HARMONY, "plain words", 0, NULL, NULL, "plain words");
    /* ids, typed XML values, reasoning */
    tc_result r;
    const char *t = "[TOOL_CALLS]f[CALL_ID]abc[ARGS]{}[TOOL_CALLS]g[ARGS]{}";
    assert_int_equal(tc_parse(TC_MISTRAL_ARGS, t, strlen(t), &r), SLM_OK);
    assert_int_equal(r.n_calls, 2);
    assert_string_equal(r.calls[0].id, "abc");
    assert_null(r.calls[1].id);
    tc_result_free(&r);
    cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                               "\"object\", \"properties\": {\"s\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}}}}]");
    tc_opts o = {tools, true, true};
    t = "Thinking.\n<tool_call>\n<function=f>\n<parameter=s>\n12\n</parameter>\n<parameter=n>\n12\n</parameter>\n"
        "</function>\n</tool_call>";
    assert_int_equal(tc_parse_opts(TC_QWEN_XML, &o, t, strlen(t), &r), SLM_OK);
    assert_string_equal(r.reasoning, "Thinking.");
    assert_int_equal(r.n_calls, 1);
    assert_string_equal(r.calls[0].arguments, "{\"s\":\"12\",\"n\":12}");
    tc_result_free(&r);
    cJSON_Delete(tools);
    o = (tc_opts){NULL, true, false};
    t = "[THINK]hm[/THINK]Answer";
    assert_int_equal(tc_parse_opts(TC_MISTRAL_ARGS, &o, t, strlen(t), &r), SLM_OK);
    assert_string_equal(r.reasoning, "hm");
    assert_string_equal(r.content, "Answer");
    tc_result_free(&r);
    assert_true(tc_prompt_thinks(TC_QWEN_XML, "<|im_start|>assistant\n<think>\n", 32));
    assert_false(tc_prompt_thinks(TC_QWEN_XML, "<|im_start|>assistant\n<think>\n\n</think>\n\n", 44));
}

static void llama3(void **unused) {
    (void)unused;
    parse_one(TC_LLAMA3, " {\"name\": \"f\", \"parameters\": {\"a\": [true]}} \n", 1, "f", "{\"a\": [true]}", "");
    parse_one(TC_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"arguments\": {}}", 1, "f", "{}", "");
    parse_one(TC_LLAMA3, "{\"name\": \"f\", \"parameters\": {}} and more", 0, NULL, NULL,
              "{\"name\": \"f\", \"parameters\": {}} and more");
    parse_one(TC_LLAMA3, "The answer is {\"name\": \"f\"}", 0, NULL, NULL, "The answer is {\"name\": \"f\"}");
}

/* For every prefix of each text, what content_ready lets out is a prefix of the final content. */
static void streaming_bound(void **unused) {
    (void)unused;
    static const struct {
        tc_format f;
        const char *text;
    } cases[] = {
        {TC_HERMES, "Let me look.  \n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone"},
        {TC_HERMES, "a <tool_ca b <tool_call> c"},
        {TC_HERMES, "no call at all, just < and <tool"},
        {TC_LFM2, "Checking <|tool_call_start|>[f(a=1)]<|tool_call_end|> ok"},
        {TC_LFM2, "  [f(a=1)] ok"},
        {TC_LFM2, "[1, 2] is a list"},
        {TC_LLAMA3, "{\"name\": \"f\", \"parameters\": {}}"},
        {TC_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
        {TC_LLAMA3, "Plain text answer"},
        {TC_NONE, "<tool_call>{}</tool_call>"},
        {TC_QWEN_XML, "Let me call.\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"},
        {TC_QWEN_XML, "text <function=f>\n</function>\n</tool_call> <fun"},
        {TC_MISTRAL, "Sure [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"},
        {TC_MISTRAL, " [{\"name\": \"f\", \"arguments\": {}}]"},
        {TC_MISTRAL_ARGS, "f{\"a\": 1}"},
        {TC_MISTRAL_ARGS, "Hello there[TOOL_CALLS]f[ARGS]{}"},
        {TC_MISTRAL_ARGS, "ab cd [TOOL"},
        {TC_GRANITE, "ok <|tool_call|>[{\"name\": \"f\", \"arguments\": {}}]"},
        {TC_HARMONY, "<|channel|>final<|message|>Hi"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *t = cases[k].text;
        size_t n = strlen(t);
        tc_result full;
        assert_int_equal(tc_parse(cases[k].f, t, n, &full), SLM_OK);
        for (size_t m = 0; m <= n; m++) {
            size_t ready = tc_content_ready(cases[k].f, t, m);
            assert_true(ready <= m);
            assert_true(ready <= strlen(full.content));
            assert_memory_equal(full.content, t, ready);
        }
        tc_result_free(&full);
    }
}

/* Every prefix of a call: the name once whole, then arguments that grow as a prefix of the final
 * ones and are whole at the end. */
static void partial_calls(void **unused) {
    (void)unused;
    static const struct {
        tc_format f;
        const char *text, *name, *args;
    } cases[] = {
        {TC_HERMES, "<tool_call>\n{\"name\": \"get_w\", \"arguments\": {\"city\": \"S\u00e3o \\\"}\\\" P\", \"n\": [1, {\"x\": 2}]}}\n</tool_call>",
         "get_w", "{\"city\": \"S\u00e3o \\\"}\\\" P\", \"n\": [1, {\"x\": 2}]}"},
        {TC_HERMES, "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call>", "f", "{\"a\": 1}"},
        {TC_LLAMA3, "{\"name\": \"add\", \"parameters\": {\"a\": -1.5e3, \"b\": true}}", "add", "{\"a\": -1.5e3, \"b\": true}"},
        {TC_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abc123def\"}]", "f", "{\"a\": 1}"},
        {TC_MISTRAL_ARGS, "[TOOL_CALLS]f_2[CALL_ID]x1[ARGS]{\"a\": [1, 2]}", "f_2", "{\"a\": [1, 2]}"},
        {TC_GRANITE, "<|tool_call|>[{\"name\": \"g.h\", \"arguments\": {\"a\": \"]}\"}}]", "g.h", "{\"a\": \"]}\"}"},
        {TC_HARMONY, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": \"x<y\"}<|call|>", "f",
         "{\"a\": \"x<y\"}"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *t = cases[k].text;
        size_t n = strlen(t), last = 0;
        bool named = false;
        for (size_t m = 0; m <= n; m++) {
            tc_partial p;
            if (!tc_partial_call(cases[k].f, t, m, &p)) {
                assert_false(named);
                continue;
            }
            named = true;
            assert_int_equal(p.name_len, strlen(cases[k].name));
            assert_memory_equal(t + p.name_off, cases[k].name, p.name_len);
            assert_true(p.args_len >= last && p.args_len <= strlen(cases[k].args));
            assert_memory_equal(t + p.args_off, cases[k].args, p.args_len);
            assert_true(!p.args_done || p.args_len == strlen(cases[k].args));
            last = p.args_len;
        }
        assert_true(named);
        assert_int_equal(last, strlen(cases[k].args));
        parse_one(cases[k].f, t, 1, cases[k].name, cases[k].args, "");
    }
    tc_partial p;
    assert_false(tc_partial_call(TC_LFM2, "[f(a=1)]", 8, &p));
    assert_false(tc_partial_call(TC_HERMES, "text <tool_call>{\"name\": \"f\"}", 30, &p));
}

static void tools_check(void **unused) {
    (void)unused;
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{}", "must be a list"},
        {"[{\"type\": \"code\"}]", "tools[0] must be"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]", "tools[0].function.name"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"array\"}}}]",
         "'type' must be \"object\""},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"properties\": []}}}]",
         "'properties' must be an object"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"required\": [1]}}}]",
         "'required' must list"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", \"function\": {\"name\": "
         "\"f\"}}]",
         "both named 'f'"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": 3}}]", "description must be"},
        {"not json", "not valid JSON"},
    };
    char err[256];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(slm_tools_check(bad[k].json, err, sizeof err), SLM_ERR_INVALID_ARG);
        if (!strstr(err, bad[k].needle)) fprintf(stderr, "%s -> %s\n", bad[k].json, err);
        assert_non_null(strstr(err, bad[k].needle));
    }
    assert_int_equal(slm_tools_check("[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", err, sizeof err),
                     SLM_OK);
    assert_int_equal(slm_tools_check("[]", err, sizeof err), SLM_OK);
}

static void public_parse(void **unused) {
    (void)unused;
    char *out = NULL;
    const char *t = "Hi <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
    assert_int_equal(slm_tool_calls_parse("qwen3", t, strlen(t), &out), SLM_OK);
    assert_string_equal(out, "{\"tool_calls\":[{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}],\"content\":\"Hi\"}");
    slm_free(out);
    assert_int_equal(slm_tool_calls_parse("gemma", t, strlen(t), &out), SLM_OK);
    cJSON *r = cJSON_Parse(out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "tool_calls")), 0);
    assert_string_equal(cJSON_GetObjectItem(r, "content")->valuestring, t);
    cJSON_Delete(r);
    slm_free(out);
    assert_int_equal(slm_tool_calls_parse(NULL, t, 1, &out), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tool_calls_content_ready("qwen3", t, strlen(t)), 2);
}

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, "
    "\"required\": [\"city\", \"unit\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"x\": {\"type\": \"null\"}, \"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"boolean\"}, \"y\": "
    "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 3}, \"maxItems\": 2}}, \"required\": [\"a\", "
    "\"b\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* Random walks through the forced-call grammar of template tmpl (only: the named tool or NULL) on a
 * vocabulary of the 256 bytes and an end token: each ends in one call that parses, of the tool. */
static void walk_calls(const char *tmpl, const char *only) {
    slm_grammar *g = NULL;
    char err[256];
    assert_int_equal(slm_tool_call_grammar(tmpl, TOOLS, only, &g, err, sizeof err), SLM_OK);
    enum { N = 257 };
    gv_token toks[N];
    uint8_t bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = (gv_token){&bytes[i], 1, GV_TEXT};
    }
    toks[256] = (gv_token){NULL, 0, GV_EOG};
    slm_grammar_vocab *v = NULL;
    assert_int_equal(gv_create(toks, N, NULL, &v), SLM_OK);
    slm_constraint *c = NULL;
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    cJSON *tools = cJSON_Parse(TOOLS);
    int seen[3] = {0}, n_optional = 0;
    for (int w = 0; w < 60; w++) {
        slm_constraint_reset(c);
        char out[2048];
        size_t n = 0;
        for (;;) {
            uint32_t mask[(N + 31) / 32];
            assert_int_equal(slm_constraint_mask(c, mask, N), SLM_OK);
            int allowed[N], na = 0;
            for (int t = 0; t < N; t++)
                if (mask[t / 32] >> (t % 32) & 1) allowed[na++] = t;
            assert_true(na > 0);
            /* prefer ending and short strings so walks finish */
            int t = n > 200 && (mask[256 / 32] >> (256 % 32) & 1) ? 256 : allowed[rnd() % (uint64_t)na];
            if (n > 400) { /* close quickly: the first allowed of the end, '"', '}', ']', ... */
                static const int closing[] = {256, '"', '}', ']', '\n', '<', '/', 't', 'c', 'a', '0', ' '};
                for (size_t k = 0; k < sizeof closing / sizeof closing[0]; k++)
                    if (mask[closing[k] / 32] >> (closing[k] % 32) & 1) {
                        t = closing[k];
                        break;
                    }
            }
            assert_int_equal(slm_constraint_accept(c, t), SLM_OK);
            if (t == 256) break;
            assert_true(n < sizeof out - 1);
            out[n++] = (char)t;
        }
        out[n] = '\0';
        tc_result r;
        tc_opts o = {tools, false, false};
        assert_int_equal(tc_parse_opts(tc_format_of(tmpl), &o, out, n, &r), SLM_OK);
        if (r.n_calls != 1) fprintf(stderr, "not one call: %s\n", out);
        assert_int_equal(r.n_calls, 1);
        assert_string_equal(r.content, "");
        if (only) assert_string_equal(r.calls[0].name, only);
        const cJSON *fn = tc_find_tool(tools, r.calls[0].name);
        assert_non_null(fn);
        cJSON *args = cJSON_Parse(r.calls[0].arguments);
        assert_true(cJSON_IsObject(args));
        const cJSON *req = cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "parameters"), "required"), *q;
        cJSON_ArrayForEach(q, req) assert_true(cJSON_HasObjectItem(args, q->valuestring));
        if (!strcmp(r.calls[0].name, "get_weather")) {
            const char *unit = cJSON_GetObjectItem(args, "unit")->valuestring;
            assert_true(!strcmp(unit, "c") || !strcmp(unit, "f"));
            seen[0]++;
        } else if (!strcmp(r.calls[0].name, "add")) {
            assert_true(cJSON_IsNumber(cJSON_GetObjectItem(args, "a")));
            assert_true(cJSON_IsBool(cJSON_GetObjectItem(args, "b")));
            const cJSON *x = cJSON_GetObjectItem(args, "x"), *y = cJSON_GetObjectItem(args, "y");
            assert_true(!x || cJSON_IsNull(x));
            assert_true(!y || (cJSON_IsArray(y) && cJSON_GetArraySize(y) <= 2));
            seen[1]++;
            n_optional += x != NULL || y != NULL;
        } else seen[2]++;
        cJSON_Delete(args);
        tc_result_free(&r);
    }
    if (!only) assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    if (seen[1] >= 10) assert_true(n_optional > 0); /* optional arguments are written sometimes */
    cJSON_Delete(tools);
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
}

static void forced_grammar(void **unused) {
    (void)unused;
    walk_calls("qwen3", NULL);
    walk_calls("chatml", "add");
    walk_calls("llama3", NULL);
    walk_calls("llama3", "get_weather");
    walk_calls("lfm2", NULL);
    walk_calls("lfm2", "add");
    walk_calls("qwen-xml", NULL);
    walk_calls("qwen-xml", "add");
    walk_calls("mistral", NULL);
    walk_calls("mistral-args", NULL);
    walk_calls("mistral-args", "get_weather");
    walk_calls("granite", "add");
    walk_calls("gpt-oss", NULL); /* its header's markers as text here (byte tokens; test_grammar: as control tokens) */
    walk_calls("gpt-oss", "get_weather");
    slm_grammar *g = NULL;
    char err[256];
    assert_int_equal(slm_tool_call_grammar("qwen3", TOOLS, "nope", &g, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "no tool is named 'nope'"));
    const char *dashed = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                         "\"object\", \"properties\": {\"a-b\": {\"type\": \"string\"}}}}}]";
    assert_int_equal(slm_tool_call_grammar("lfm2", dashed, NULL, &g, err, sizeof err), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "'a-b' is not a Python keyword-argument name"));
    assert_int_equal(slm_tool_call_grammar("gemma", TOOLS, NULL, &g, err, sizeof err), SLM_ERR_UNSUPPORTED);
    const char *xml_pattern = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                              "\"object\", \"properties\": {\"a\": {\"type\": \"string\", \"format\": \"date\"}}}}}]";
    assert_int_equal(slm_tool_call_grammar("qwen-xml", xml_pattern, NULL, &g, err, sizeof err), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "keyword 'format' on a string argument"));
    const char *pattern = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                          "\"object\", \"properties\": {\"a\": {\"type\": \"string\", \"not\": {\"const\": \"x\"}}}}}}]";
    assert_int_equal(slm_tool_call_grammar("qwen3", pattern, NULL, &g, err, sizeof err), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "tool 'f': parameters: json schema: keyword 'not'"));
    assert_null(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hermes),         cmocka_unit_test(lfm2),         cmocka_unit_test(llama3), cmocka_unit_test(other_formats),
        cmocka_unit_test(streaming_bound), cmocka_unit_test(partial_calls), cmocka_unit_test(tools_check), cmocka_unit_test(public_parse),
        cmocka_unit_test(forced_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
