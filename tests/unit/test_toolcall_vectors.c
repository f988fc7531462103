/* test_toolcall_vectors.c — text/toolcall*.c against llama.cpp's reference parsers: every vector
 * of tests/data/toolcall/llamacpp-vectors.json (scripts/gen-toolcall-vectors.py extracts them from
 * llama.cpp's tests/test-chat.cpp: real templates' model outputs and the messages llama.cpp parses
 * them into) is parsed in its format with its tools and reasoning options, and must give the same
 * calls (names, arguments as JSON values, ids), reasoning and content (white space at the content's
 * ends aside: statelm trims around calls). Vectors marked "skip" say why statelm differs.
 * Detection: each template's format, read by hand in the generator, is what tc_format_detect finds
 * in the real template text (from the cache that scripts/fetch-models.sh fills; skipped without).
 * Round trip: each real template of a call format renders a past assistant call (through the Jinja
 * interpreter, as transformers would), and the parser of the detected format reads that rendering
 * back into the same call: the template's own writing of a call is what the parser takes. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/toolcall.h"

static cJSON *load_vectors(void) {
    size_t n = 0;
    uint8_t *text = tu_read_file(tu_data_path("toolcall/llamacpp-vectors.json"), &n);
    assert_non_null(text);
    cJSON *root = cJSON_ParseWithLength((const char *)text, n);
    free(text);
    assert_non_null(root);
    return root;
}

/* s without white space at either end, in a static buffer. */
static const char *trimmed(const char *s, char *buf, size_t cap) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    assert_true(n < cap);
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static bool same_json_text(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    bool same = x && y && cJSON_Compare(x, y, true);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

static void vectors(void **unused) {
    (void)unused;
    cJSON *root = load_vectors();
    const cJSON *v;
    int n_run = 0, n_skip = 0, n_fail = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(root, "vectors")) {
        const char *src = cJSON_GetObjectItem(v, "source")->valuestring;
        const cJSON *skip = cJSON_GetObjectItem(v, "skip");
        if (cJSON_IsString(skip)) {
            n_skip++;
            continue;
        }
        tc_format f = tc_format_of(cJSON_GetObjectItem(v, "format")->valuestring);
        assert_true(f != TC_NONE);
        const char *in = cJSON_GetObjectItem(v, "input")->valuestring;
        tc_opts o = {cJSON_GetObjectItem(v, "tools"), cJSON_IsTrue(cJSON_GetObjectItem(v, "reasoning")),
                     cJSON_IsTrue(cJSON_GetObjectItem(v, "think_open"))};
        tc_result r;
        assert_int_equal(tc_parse_opts(f, &o, in, strlen(in), &r), SLM_OK);
        const cJSON *ex = cJSON_GetObjectItem(v, "expect"), *calls = cJSON_GetObjectItem(ex, "tool_calls"), *c;
        char b1[4096], b2[4096];
        bool ok = !strcmp(trimmed(r.content, b1, sizeof b1),
                          trimmed(cJSON_GetObjectItem(ex, "content")->valuestring, b2, sizeof b2));
        ok = ok && !strcmp(r.reasoning ? r.reasoning : "", cJSON_GetObjectItem(ex, "reasoning_content")->valuestring);
        ok = ok && r.n_calls == (size_t)cJSON_GetArraySize(calls);
        size_t i = 0;
        cJSON_ArrayForEach(c, calls) {
            if (!ok) break;
            const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
            ok = !strcmp(r.calls[i].name, cJSON_GetObjectItem(c, "name")->valuestring) &&
                 same_json_text(r.calls[i].arguments, cJSON_GetObjectItem(c, "arguments")->valuestring) &&
                 !strcmp(r.calls[i].id ? r.calls[i].id : "", id);
            i++;
        }
        if (!ok) {
            n_fail++;
            fprintf(stderr, "%s (%s): input %s\n  got content '%s' reasoning '%s', %zu calls", src,
                    cJSON_GetObjectItem(v, "template")->valuestring, in, r.content, r.reasoning ? r.reasoning : "",
                    r.n_calls);
            for (size_t k = 0; k < r.n_calls; k++) fprintf(stderr, " %s%s", r.calls[k].name, r.calls[k].arguments);
            fprintf(stderr, "\n");
        }
        tc_result_free(&r);
        n_run++;
    }
    fprintf(stderr, "%d vectors agree with llama.cpp, %d skipped (reasons in the file), %d differ\n", n_run - n_fail,
            n_skip, n_fail);
    assert_int_equal(n_fail, 0);
    assert_true(n_run >= 100);
    cJSON_Delete(root);
}

static void detection(void **unused) {
    (void)unused;
    const char *cache = getenv("STATELM_CACHE");
    char dir[1024];
    if (cache) snprintf(dir, sizeof dir, "%s/llamacpp-ref/templates", cache);
    else snprintf(dir, sizeof dir, "%s/.cache/statelm/llamacpp-ref/templates", getenv("HOME") ? getenv("HOME") : ".");
    cJSON *root = load_vectors();
    const cJSON *v;
    int n = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(root, "vectors")) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, cJSON_GetObjectItem(v, "template")->valuestring);
        size_t len = 0;
        uint8_t *text = tu_read_file(path, &len);
        if (!text) continue;
        char *src = malloc(len + 1);
        memcpy(src, text, len);
        src[len] = '\0';
        free(text);
        const char *want = cJSON_GetObjectItem(v, "format")->valuestring, *got = tc_format_name(tc_format_detect(src));
        if (!got || strcmp(got, want)) fprintf(stderr, "%s: detected %s, not %s\n", path, got ? got : "none", want);
        assert_string_equal(got ? got : "none", want);
        free(src);
        n++;
    }
    cJSON_Delete(root);
    if (n == 0) skip(); /* the cache has no templates: scripts/fetch-models.sh */
    /* templates without calls */
    assert_int_equal(tc_format_detect("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"), TC_NONE);
    assert_int_equal(tc_format_detect(NULL), TC_NONE);
}

static char *cached_template(const char *file) {
    const char *cache = getenv("STATELM_CACHE"), *home = getenv("HOME");
    char path[1200];
    if (cache) snprintf(path, sizeof path, "%s/llamacpp-ref/templates/%s", cache, file);
    else snprintf(path, sizeof path, "%s/.cache/statelm/llamacpp-ref/templates/%s", home ? home : ".", file);
    return (char *)tu_read_file(path, NULL);
}

static void round_trip(void **unused) {
    (void)unused;
    static const char *const files[] = {
        "Qwen3.5-4B.jinja", "Qwen3-Coder.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "ibm-granite-granite-4.0.jinja", "LFM2.5-8B-A1B.jinja",
        "meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
        "unsloth-mistral-Devstral-Small-2507.jinja", "openai-gpt-oss-120b.jinja",
    };
    static const char *const ends[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|end_of_text|>",
                                       "<|return|>", "<|end|>"};
    cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                               "\"Weather of a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
                               "{\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}]");
    cJSON *calls = cJSON_Parse("[{\"id\": \"abcDEF123\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                               "\"arguments\": \"{\\\"city\\\": \\\"S\u00e3o Paulo\\\", \\\"days\\\": 3}\"}}]");
    assert_non_null(tools);
    assert_non_null(calls);
    int n = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char *src = cached_template(files[k]);
        if (!src) continue;
        tc_format f = tc_format_detect(src);
        assert_true(f != TC_NONE);
        const slm_chat_message m[] = {{"system", "Be brief."}, {"user", "Weather in S\u00e3o Paulo?"}, {"assistant", ""},
                                      {"tool", "{\"temperature\": 21}"}};
        const cJSON *per_msg[4] = {NULL, NULL, calls, NULL};
        const char *ids[4] = {NULL, NULL, NULL, "abcDEF123"};
        chat_tools ct = {tools, per_msg, ids, NULL};
        char *prefix = NULL, *full = NULL;
        slm_err e;
        err_clear(&e);
        slm_status st = chat_render_jinja(src, NULL, NULL, false, NULL, m, 2, &ct, true, NULL, &prefix, NULL, NULL, &e);
        if (st == SLM_OK) st = chat_render_jinja(src, NULL, NULL, false, NULL, m, 3, &ct, false, NULL, &full, NULL, NULL, &e);
        char *with_result = NULL; /* the tool's result goes back into the next prompt */
        if (st == SLM_OK) st = chat_render_jinja(src, NULL, NULL, false, NULL, m, 4, &ct, true, NULL, &with_result, NULL, NULL, &e);
        if (st != SLM_OK) fprintf(stderr, "%s: %s\n", files[k], e.msg);
        assert_int_equal(st, SLM_OK);
        assert_non_null(strstr(with_result, "21"));
        al_free(NULL, with_result);
        /* the assistant turn: what the full rendering adds after the prompt (less a shared header) */
        size_t i = 0, nf = strlen(full);
        while (prefix[i] && prefix[i] == full[i]) i++;
        size_t end = nf;
        for (size_t q = 0; q < sizeof ends / sizeof ends[0]; q++) {
            const char *at = strstr(full + i, ends[q]);
            if (at && (size_t)(at - full) < end && (f != TC_HARMONY || strcmp(ends[q], "<|end|>"))) end = (size_t)(at - full);
        }
        tc_opts o = {tools, true, false};
        tc_result r;
        assert_int_equal(tc_parse_opts(f, &o, full + i, end - i, &r), SLM_OK);
        bool ok = r.n_calls == 1 && !strcmp(r.calls[0].name, "get_weather");
        cJSON *args = ok ? cJSON_Parse(r.calls[0].arguments) : NULL, *want = cJSON_Parse("{\"city\": \"S\u00e3o Paulo\", \"days\": 3}");
        ok = ok && cJSON_Compare(args, want, true);
        if (!ok || getenv("SLM_SHOW")) /* SLM_SHOW=1: print every template's rendering of the call */
            fprintf(stderr, "%s (%s): %s\n%.*s\n", files[k], tc_format_name(f),
                    ok ? "renders the call as" : "the rendered call does not parse back:", (int)(end - i), full + i);
        assert_true(ok);
        cJSON_Delete(args);
        cJSON_Delete(want);
        tc_result_free(&r);
        al_free(NULL, prefix);
        al_free(NULL, full);
        free(src);
        n++;
    }
    cJSON_Delete(tools);
    cJSON_Delete(calls);
    fprintf(stderr, "%d templates: their rendered calls parse back\n", n);
    if (n == 0) skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(vectors), cmocka_unit_test(detection), cmocka_unit_test(round_trip)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
