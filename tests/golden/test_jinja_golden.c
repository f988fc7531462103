/* test_jinja_golden.c — text/jinja against jinja2: every real chat template of llama.cpp's
 * models/templates (from the cache, $STATELM_CACHE/llamacpp-ref/templates, fetched by
 * scripts/fetch-models.sh; SKIPPED when absent), and the tokenizer.chat_template of the test models in
 * $STATELM_CACHE/models (those absent are skipped and counted), rendered on the conversations of
 * tests/data/jinja/conversations.json must give tests/data/jinja/golden.jsonl's output byte for
 * byte, which jinja2 wrote with transformers' settings (scripts/gen-jinja-golden.py). Where jinja2
 * raised, the interpreter must fail too. Asserts: >= 95% of jinja2's successful renderings
 * identical overall, all of them for the families the project serves (LFM2, Qwen, SmolLM3,
 * Llama 3.x, Gemma, Granite, Phi, gpt-oss). Prints the rate and every mismatch. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "testutil.h"
#include "text/jinja.h"
#include "text/tokenizer.h"

#define FIXED_TIME 1718447400 /* scripts/gen-jinja-golden.py FIXED_TIME */

static const char *const k_must[] = {"LFM2", "lfm2", "Qwen", "qwen35", "SmolLM", "meta-llama-Llama-3", "gemma",
                                     "granite", "Phi-3", "gpt-oss", NULL};

static bool must_match(const char *name) {
    for (size_t i = 0; k_must[i]; i++)
        if (strstr(name, k_must[i])) return true;
    return false;
}

static const cJSON *find_conv(const cJSON *convs, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, convs) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return c;
    }
    return NULL;
}

/* The template of a golden record: a .jinja file of dir, or a test model's tokenizer.chat_template. */
static char *load_template(const char *cache, const char *dir, const char *name, size_t *n) {
    char path[4600];
    if (!strstr(name, ".gguf")) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        return (char *)tu_read_file(path, n);
    }
    snprintf(path, sizeof path, "%s/models/%s", cache, name);
    if (!tu_file_exists(path)) return NULL;
    gguf_file g;
    slm_err e;
    gguf_str s;
    char *out = NULL;
    if (gguf_open(&g, path, NULL, &e) != SLM_OK) return NULL;
    if (gguf_get_str(&g, "tokenizer.chat_template", &s, &e) == SLM_OK && (out = malloc((size_t)s.len + 1))) {
        memcpy(out, s.ptr, (size_t)s.len);
        out[s.len] = '\0';
        *n = (size_t)s.len;
    }
    gguf_close(&g);
    return out;
}

/* conv rendered by t through the chat render context (chat_jinja.c), as the C API and the server
 * build it: each message's role and content, tool_calls, tool_call_id and the further members name
 * and reasoning_content (chat_tools.fields); bos/eos texts and conv's extra variables as kwargs.
 * false (*out NULL) when conv holds a message that context cannot carry (content not a string,
 * another member) or gives call arguments as strings (which the context parses into dicts, as
 * llama-server does); else the status, *out the text. */
static bool render_through_context(const jinja_template *t, const cJSON *conv, const cJSON *rec, slm_status *st,
                                   char **out, slm_err *e) {
    *out = NULL;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(conv, "messages"), *x;
    slm_chat_message m[16];
    const cJSON *calls[16] = {0};
    const char *ids[16] = {0};
    cJSON *fields[16] = {0};
    size_t nm = 0;
    if (cJSON_GetArraySize(msgs) > 16) return false;
    bool ok = true;
    cJSON_ArrayForEach(x, msgs) {
        const cJSON *k;
        cJSON_ArrayForEach(k, x) {
            if (!strcmp(k->string, "role") || !strcmp(k->string, "content")) ok &= cJSON_IsString(k);
            else if (!strcmp(k->string, "tool_calls")) {
                calls[nm] = k;
                const cJSON *c;
                cJSON_ArrayForEach(c, k) /* OpenAI's argument strings: the context parses them into dicts */
                    ok &= !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "function"), "arguments"));
            }
            else if (!strcmp(k->string, "tool_call_id") && cJSON_IsString(k)) ids[nm] = k->valuestring;
            else if (!strcmp(k->string, "name") || !strcmp(k->string, "reasoning_content")) {
                if (!fields[nm]) fields[nm] = cJSON_CreateObject();
                cJSON_AddItemToObject(fields[nm], k->string, cJSON_Duplicate(k, true));
            } else ok = false;
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role"), *content = cJSON_GetObjectItemCaseSensitive(x, "content");
        if (ok && cJSON_IsString(role) && cJSON_IsString(content)) m[nm] = (slm_chat_message){role->valuestring, content->valuestring};
        else ok = false;
        nm++;
    }
    if (ok) {
        cJSON *kw = cJSON_CreateObject();
        cJSON_AddStringToObject(kw, "bos_token", cJSON_GetObjectItemCaseSensitive(rec, "bos_token")->valuestring);
        cJSON_AddStringToObject(kw, "eos_token", cJSON_GetObjectItemCaseSensitive(rec, "eos_token")->valuestring);
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(conv, "extra")) cJSON_AddItemToObject(kw, x->string, cJSON_Duplicate(x, true));
        chat_tools tools = {cJSON_GetObjectItemCaseSensitive(conv, "tools"), calls, ids, (const cJSON *const *)fields};
        bool gen = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "agp"));
        *st = chat_render_jinja("", t, kw, false, NULL, m, nm, &tools, gen, NULL, out, NULL, NULL, e);
        cJSON_Delete(kw);
    }
    for (size_t i = 0; i < 16; i++) cJSON_Delete(fields[i]);
    return ok;
}

static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t lo = i > 40 ? i - 40 : 0;
    fprintf(stderr, "    at byte %zu\n    want: %.100s\n    got:  %.100s\n", i, want + lo, got + lo);
}

static void golden(void **state) {
    (void)state;
    const char *env = getenv("STATELM_CACHE"), *home = getenv("HOME");
    char cache[4096], dir[4200], path[4600];
    if (env) snprintf(cache, sizeof cache, "%s", env);
    else snprintf(cache, sizeof cache, "%s/.cache/statelm", home ? home : "");
    snprintf(dir, sizeof dir, "%s/llamacpp-ref/templates", cache);
    snprintf(path, sizeof path, "%s/Qwen3.5-4B.jinja", dir);
    if (!tu_file_exists(path)) TU_SKIP("%s absent (run scripts/fetch-models.sh)", path);

    size_t n;
    char *convs_text = (char *)tu_read_file(tu_data_path("jinja/conversations.json"), &n);
    assert_non_null(convs_text);
    cJSON *convs = cJSON_Parse(convs_text);
    assert_non_null(convs);
    char *gold = (char *)tu_read_file(tu_data_path("jinja/golden.jsonl"), &n);
    assert_non_null(gold);

    bool verbose = getenv("JINJA_GOLDEN_VERBOSE") != NULL;
    size_t ok_total = 0, ok_same = 0, must_total = 0, must_same = 0, err_total = 0, err_same = 0, skipped = 0;
    jinja_usage most = {0};
    size_t ctx_total = 0, ctx_same = 0;
    bool uses_clock = false;
    char last_name[512] = "";
    jinja_template *t = NULL;
    slm_status parse_st = SLM_OK;
    char parse_msg[SLM_ERR_MSG_CAP] = "";
    for (char *line = gold, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        cJSON *rec = cJSON_Parse(line);
        assert_non_null(rec);
        const char *name = cJSON_GetObjectItemCaseSensitive(rec, "template")->valuestring;
        const cJSON *conv = find_conv(convs, cJSON_GetObjectItemCaseSensitive(rec, "conv")->valuestring);
        assert_non_null(conv);
        if (strcmp(name, last_name)) {
            jinja_free(t);
            t = NULL;
            snprintf(last_name, sizeof last_name, "%s", name);
            size_t tn = 0;
            char *src = load_template(cache, dir, name, &tn);
            slm_err e;
            err_clear(&e);
            parse_st = src ? jinja_parse(src, tn, NULL, &t, &e) : SLM_ERR_NOT_FOUND;
            uses_clock = src && strstr(src, "strftime_now"); /* the render context runs on the real clock */
            if (!src) fprintf(stderr, "skipped: %s is not in the cache\n", name);
            snprintf(parse_msg, sizeof parse_msg, "%s", src ? e.msg : "missing");
            free(src);
        }
        cJSON *ctx = cJSON_CreateObject();
        cJSON_AddItemToObject(ctx, "messages", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(conv, "messages"), 1));
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
        if (tools) cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools, 1));
        cJSON_AddItemToObject(ctx, "add_generation_prompt", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(rec, "agp"), 1));
        cJSON_AddStringToObject(ctx, "bos_token", cJSON_GetObjectItemCaseSensitive(rec, "bos_token")->valuestring);
        cJSON_AddStringToObject(ctx, "eos_token", cJSON_GetObjectItemCaseSensitive(rec, "eos_token")->valuestring);
        const cJSON *extra = cJSON_GetObjectItemCaseSensitive(conv, "extra"), *x;
        cJSON_ArrayForEach(x, extra) cJSON_AddItemToObject(ctx, x->string, cJSON_Duplicate(x, 1));

        const cJSON *want = cJSON_GetObjectItemCaseSensitive(rec, "output");
        if (parse_st == SLM_ERR_NOT_FOUND) {
            skipped++;
            cJSON_Delete(ctx);
            cJSON_Delete(rec);
            continue;
        }
        char *out = NULL;
        size_t no = 0;
        slm_err e;
        err_clear(&e);
        slm_status st = parse_st;
        if (t) {
            jinja_usage u = {0};
            jinja_limits lim = {.fixed_time = FIXED_TIME, .usage = &u};
            st = jinja_render(t, ctx, NULL, &lim, NULL, &out, &no, NULL, NULL, &e);
            if (st == SLM_OK) { /* the request limits' margin: each rendering uses at most a quarter */
                if (u.steps > most.steps) most.steps = u.steps;
                if (u.memory > most.memory) most.memory = u.memory;
                if (u.output > most.output) most.output = u.output;
            }
        } else {
            snprintf(e.msg, sizeof e.msg, "%s", parse_msg);
        }
        const char *cname = cJSON_GetObjectItemCaseSensitive(rec, "conv")->valuestring;
        bool agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "agp"));
        if (cJSON_IsString(want)) {
            bool same = st == SLM_OK && no == strlen(want->valuestring) && !memcmp(out, want->valuestring, no);
            ok_total++;
            ok_same += same;
            if (must_match(name)) {
                must_total++;
                must_same += same;
            }
            if (!same) {
                fprintf(stderr, "MISMATCH %s / %s agp=%d: %s\n", name, cname, agp, st ? e.msg : "output differs");
                if (verbose && st == SLM_OK) show_diff(want->valuestring, out);
            }
            char *cout = NULL;
            slm_status cst = SLM_OK;
            slm_err ce;
            err_clear(&ce);
            if (same && !uses_clock && render_through_context(t, conv, rec, &cst, &cout, &ce)) {
                bool csame = cst == SLM_OK && !strcmp(cout, want->valuestring);
                ctx_total++;
                ctx_same += csame;
                if (!csame) {
                    fprintf(stderr, "CONTEXT MISMATCH %s / %s agp=%d: %s\n", name, cname, agp, cst ? ce.msg : "output differs");
                    if (verbose && cst == SLM_OK) show_diff(want->valuestring, cout);
                }
            }
            al_free(NULL, cout);
        } else {
            err_total++;
            err_same += st != SLM_OK;
            if (st == SLM_OK) {
                const cJSON *je = cJSON_GetObjectItemCaseSensitive(rec, "error");
                fprintf(stderr, "NOT FAILED %s / %s agp=%d: jinja2 raised %.200s\n", name, cname, agp,
                        cJSON_IsString(je) ? je->valuestring : "?");
            }
        }
        free(out);
        cJSON_Delete(ctx);
        cJSON_Delete(rec);
    }
    jinja_free(t);
    fprintf(stderr, "jinja golden: the most any rendering used: %llu steps, %zu bytes of memory, %zu bytes of output "
            "(request limits: %u, %zu, %zu)\n", (unsigned long long)most.steps, most.memory, most.output,
            JINJA_REQUEST_MAX_STEPS, JINJA_REQUEST_MAX_MEMORY, JINJA_REQUEST_MAX_OUTPUT);
    fprintf(stderr, "jinja golden: %zu/%zu renderings also identical through the chat render context\n", ctx_same,
            ctx_total);
    assert_true(ctx_total > 0);
    assert_int_equal(ctx_same, ctx_total);
    assert_true(most.steps * 4 <= JINJA_REQUEST_MAX_STEPS);
    assert_true(most.memory * 4 <= JINJA_REQUEST_MAX_MEMORY);
    assert_true(most.output * 4 <= JINJA_REQUEST_MAX_OUTPUT);
    fprintf(stderr, "jinja golden: %zu/%zu of jinja2's renderings identical (%.1f%%); required families %zu/%zu; "
            "%zu/%zu of jinja2's errors also fail; %zu skipped (template not in the cache)\n",
            ok_same, ok_total, ok_total ? 100.0 * (double)ok_same / (double)ok_total : 0.0, must_same, must_total,
            err_same, err_total, skipped);
    free(gold);
    cJSON_Delete(convs);
    free(convs_text);
    assert_true(ok_total > 0);
    assert_true(ok_same * 100 >= ok_total * 95);
    assert_int_equal(must_same, must_total);
    assert_int_equal(err_same, err_total);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(golden)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
