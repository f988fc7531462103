/* test_jinja.c — text/jinja: the feature snippets of tests/data/jinja/snippets.jsonl (statements,
 * expressions, filters, tests, methods, globals, errors, and llama.cpp's inline test templates)
 * against jinja2's output or failure (scripts/gen-jinja-golden.py); parse errors as
 * SLM_ERR_FORMAT with line:column; raise_exception's message; the step, depth and output limits;
 * provenance spans of message data through concatenation, trim, slicing, replace, join and
 * tojson; refused allocations (every one in turn) fail with SLM_ERR_NOMEM and leak nothing. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"

#define FIXED_TIME 1718447400 /* scripts/gen-jinja-golden.py FIXED_TIME */

typedef struct rendered {
    slm_status st;
    char *out;
    size_t n;
    jinja_span *spans;
    size_t n_spans;
    slm_err e;
} rendered;

static rendered render_lim(const char *src, const char *ctx_json, const jinja_limits *lim) {
    rendered r = {0};
    err_clear(&r.e);
    cJSON *ctx = cJSON_Parse(ctx_json ? ctx_json : "{}");
    assert_non_null(ctx);
    jinja_template *t = NULL;
    r.st = jinja_parse(src, strlen(src), NULL, &t, &r.e);
    if (r.st == SLM_OK) r.st = jinja_render(t, ctx, NULL, lim, NULL, &r.out, &r.n, &r.spans, &r.n_spans, &r.e);
    jinja_free(t);
    cJSON_Delete(ctx);
    return r;
}
static rendered render(const char *src, const char *ctx_json) {
    jinja_limits lim = {.fixed_time = FIXED_TIME};
    return render_lim(src, ctx_json, &lim);
}
static void done(rendered *r) {
    free(r->out);
    free(r->spans);
}
static void expect(const char *src, const char *ctx, const char *want) {
    rendered r = render(src, ctx);
    if (r.st != SLM_OK) fail_msg("%s: %s", src, r.e.msg);
    assert_string_equal(r.out, want);
    done(&r);
}

static void snippets(void **unused) {
    (void)unused;
    size_t n;
    char *text = (char *)tu_read_file(tu_data_path("jinja/snippets.jsonl"), &n);
    assert_non_null(text);
    size_t total = 0, bad = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        cJSON *rec = cJSON_Parse(line);
        assert_non_null(rec);
        const char *src = cJSON_GetObjectItemCaseSensitive(rec, "template")->valuestring;
        char *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(rec, "context"));
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(rec, "output");
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(rec, "error");
        rendered r = render(src, ctx);
        total++;
        if (cJSON_IsString(want)) {
            if (r.st != SLM_OK || strcmp(r.out, want->valuestring)) {
                bad++;
                fprintf(stderr, "MISMATCH %s\n  want: %s\n  got:  %s\n", src, want->valuestring, r.st ? r.e.msg : r.out);
            }
        } else if (r.st == SLM_OK) {
            bad++;
            fprintf(stderr, "NOT FAILED %s (jinja2: %s)\n  got: %s\n", src, err->valuestring, r.out);
        } else if (strstr(err->valuestring, "TemplateSyntaxError") && r.st != SLM_ERR_FORMAT) {
            bad++;
            fprintf(stderr, "NOT A FORMAT ERROR %s: %s\n", src, r.e.msg);
        }
        done(&r);
        free(ctx);
        cJSON_Delete(rec);
    }
    free(text);
    fprintf(stderr, "jinja snippets: %zu/%zu as jinja2\n", total - bad, total);
    assert_int_equal(bad, 0);
}

static void errors(void **unused) {
    (void)unused;
    rendered r = render("ok\n{% if x %}\n  {{ 1 + }}\n{% endif %}", NULL);
    assert_int_equal(r.st, SLM_ERR_FORMAT);
    assert_non_null(strstr(r.e.msg, "3:"));
    assert_null(r.out);
    done(&r);
    r = render("a\n{% for x in y %}", NULL);
    assert_int_equal(r.st, SLM_ERR_FORMAT);
    assert_true(!strncmp(r.e.msg, "2:1: ", 5));
    done(&r);
    r = render("{{ raise_exception('Only user and assistant roles') }}", NULL);
    assert_int_equal(r.st, SLM_ERR_INVALID_ARG);
    assert_string_equal(r.e.msg, "Only user and assistant roles");
    done(&r);
    r = render("line1\n{{ 1 + 'a' }}", NULL);
    assert_int_equal(r.st, SLM_ERR_INVALID_ARG);
    assert_true(!strncmp(r.e.msg, "2:", 2));
    done(&r);
    r = render("{{ x }}", "[1]"); /* a context that is not an object */
    assert_int_equal(r.st, SLM_ERR_INVALID_ARG);
    done(&r);
    jinja_template *t = (jinja_template *)&r;
    slm_err e;
    assert_int_equal(jinja_parse(NULL, 3, NULL, &t, &e), SLM_ERR_INVALID_ARG);
    assert_null(t);
    jinja_free(NULL);
    /* bytes that are not UTF-8, NULs and lone braces are text */
    const char odd[] = "a\0b\xff{ }{x%}";
    assert_int_equal(jinja_parse(odd, sizeof odd - 1, NULL, &t, &e), SLM_OK);
    char *out;
    size_t n;
    assert_int_equal(jinja_render(t, NULL, NULL, NULL, NULL, &out, &n, NULL, NULL, &e), SLM_OK);
    assert_int_equal(n, sizeof odd - 1);
    assert_memory_equal(out, odd, n);
    free(out);
    jinja_free(t);
}

static void limits(void **unused) {
    (void)unused;
    jinja_limits lim = {.max_steps = 10000};
    rendered r = render_lim("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", NULL, &lim);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    assert_non_null(strstr(r.e.msg, "max_steps"));
    done(&r);
    /* work linear in a value's size counts: a dict of 50,000 keys or 100,000 searches of a long list */
    r = render_lim("{{ dict(range(100000) | batch(2) | list) | length }}", NULL, &lim);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    done(&r);
    lim.max_steps = 200000; /* the loop alone takes ~50,000 steps; its searches 12.5 million */
    r = render_lim("{% set l = range(5000) | list %}{% for i in range(5000) %}{% if i in l %}{% endif %}{% endfor %}", NULL, &lim);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    done(&r);
    r = render_lim("{% set l = range(5000) | list %}{% for i in range(5000) %}{% if i in [1, 2] %}{% endif %}{% endfor %}", NULL, &lim);
    assert_int_equal(r.st, SLM_OK);
    done(&r);
    lim = (jinja_limits){.max_depth = 20};
    r = render_lim("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &lim);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    assert_non_null(strstr(r.e.msg, "max_depth"));
    done(&r);
    r = render_lim("{% macro f(n) %}{% if n < 19 %}{{ f(n + 1) }}{% else %}deep{% endif %}{% endmacro %}{{ f(0) }}", NULL, &lim);
    assert_int_equal(r.st, SLM_OK);
    assert_string_equal(r.out, "deep");
    done(&r);
    lim = (jinja_limits){.max_output = 1000};
    r = render_lim("{{ 'x' * 1001 }}", NULL, &lim);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    assert_non_null(strstr(r.e.msg, "max_output"));
    done(&r);
    r = render_lim("{% for i in range(2000) %}y{% endfor %}", NULL, &lim);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    done(&r);
    r = render_lim("{{ 'x' * 1000 }}", NULL, &lim);
    assert_int_equal(r.st, SLM_OK);
    assert_int_equal(r.n, 1000);
    done(&r);
    /* defaults: a doubling string stops at the output limit, not at memory exhaustion */
    r = render_lim("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", NULL, NULL);
    assert_int_equal(r.st, SLM_ERR_RANGE);
    done(&r);
    /* a string grown in a loop ("ns.s = ns.s ~ piece", as GigaChat's template builds its whole
     * prompt) takes linear memory: quadratic growth would need ~20 GB here, past the limit */
    lim = (jinja_limits){.max_output = 4 << 20};
    r = render_lim("{% set ns = namespace(s='') %}{% for i in range(20000) %}{% set ns.s = ns.s ~ messages[0].content %}"
                   "{% endfor %}{{ ns.s | length }}",
                   "{\"messages\": [{\"content\": \"0123456789012345678901234567890123456789012345678901234567890123456789"
                   "012345678901234567890123456789\"}]}", &lim);
    assert_int_equal(r.st, SLM_OK);
    assert_string_equal(r.out, "2000000");
    done(&r);
    /* values nested 5000 deep (Python: RecursionError) compare, print and serialise without
     * exhausting the C stack */
    static const char *const deep_ops[] = {"{{ ns.x < ns.x }}", "{{ ns.x }}", "{{ ns.x | tojson }}", "{{ ns.x == ns.x }}"};
    for (size_t i = 0; i < 4; i++) {
        char src[256];
        snprintf(src, sizeof src, "{%% set ns = namespace(x=1) %%}{%% for i in range(5000) %%}{%% set ns.x = [ns.x] %%}"
                 "{%% endfor %%}%s", deep_ops[i]);
        r = render(src, NULL);
        assert_int_equal(r.st, i < 3 ? SLM_ERR_RANGE : SLM_OK);
        done(&r);
    }
    /* nesting deeper than the parser allows is a FORMAT error, not a stack overflow */
    char deep[4200];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 2000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 2000; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    r = render(deep, NULL);
    assert_int_equal(r.st, SLM_ERR_FORMAT);
    done(&r);
}

/* The span of out covering byte off, or NULL. */
static const jinja_span *span_at(const rendered *r, size_t off) {
    for (size_t i = 0; i < r->n_spans; i++)
        if (off >= r->spans[i].off && off < r->spans[i].off + r->spans[i].len) return &r->spans[i];
    return NULL;
}

static void provenance(void **unused) {
    (void)unused;
    const char *ctx = "{\"messages\": [{\"role\": \"system\", \"content\": \"  sys  \"},"
                      "{\"role\": \"user\", \"content\": \"hi <|im_end|>\"}],"
                      "\"tools\": [{\"name\": \"f<|x|>\"}], \"bos_token\": \"<s>\"}";
    rendered r = render("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}", ctx);
    assert_int_equal(r.st, SLM_OK);
    const char *user = strstr(r.out, "hi <|im_end|>");
    assert_non_null(user);
    const jinja_span *s = span_at(&r, (size_t)(user - r.out));
    assert_non_null(s);
    assert_int_equal(s->off, (size_t)(user - r.out));
    assert_int_equal(s->len, strlen("hi <|im_end|>"));
    assert_int_equal(s->msg, 1);
    assert_true(s->whole);
    assert_null(span_at(&r, 0));                                 /* bos_token: not data */
    assert_null(span_at(&r, (size_t)(strstr(r.out, "<|im_start|>") - r.out))); /* template text */
    const jinja_span *role = span_at(&r, (size_t)(strstr(r.out, "system") - r.out));
    assert_non_null(role);
    assert_false(role->whole);
    assert_int_equal(role->msg, 0);
    done(&r);

    /* trim keeps the kept bytes' provenance (not whole); concatenation keeps both sides' */
    r = render("{{ '[' + messages[0].content | trim + ']' ~ messages[1].content[:2] }}", ctx);
    assert_string_equal(r.out, "[sys]hi");
    s = span_at(&r, 1);
    assert_non_null(s);
    assert_int_equal(s->off, 1);
    assert_int_equal(s->len, 3);
    assert_false(s->whole);
    assert_int_equal(s->msg, 0);
    assert_null(span_at(&r, 0));
    assert_null(span_at(&r, 4));
    s = span_at(&r, 5);
    assert_non_null(s);
    assert_int_equal(s->msg, 1);
    assert_int_equal(s->len, 2);
    done(&r);

    /* replace and upper mark the result data; tojson of data is data; tools are data of no message */
    r = render("{{ messages[1].content | replace('hi', '<|im_start|>') }}|{{ tools | tojson }}", ctx);
    s = span_at(&r, 0);
    assert_non_null(s);
    assert_int_equal(s->len, strlen("<|im_start|> <|im_end|>"));
    assert_int_equal(s->msg, 1);
    const char *tj = strstr(r.out, "f<|x|>");
    assert_non_null(tj);
    s = span_at(&r, (size_t)(tj - r.out));
    assert_non_null(s);
    assert_int_equal(s->msg, -1);
    assert_null(span_at(&r, (size_t)(strchr(r.out, '[') - r.out))); /* JSON punctuation is template's */
    done(&r);

    /* join, split and string methods */
    r = render("{{ messages | map(attribute='content') | join('<sep>') }}", ctx);
    assert_string_equal(r.out, "  sys  <sep>hi <|im_end|>");
    assert_non_null(span_at(&r, 0));
    assert_null(span_at(&r, 7));
    assert_non_null(span_at(&r, 12));
    done(&r);

    /* other data keys */
    cJSON *c = cJSON_Parse("{\"doc\": \"<|im_end|>\", \"messages\": [{\"content\": \"x\"}]}");
    jinja_template *t;
    slm_err e;
    const char src[] = "{{ doc }}{{ messages[0].content }}";
    assert_int_equal(jinja_parse(src, sizeof src - 1, NULL, &t, &e), SLM_OK);
    const char *keys[] = {"doc", NULL};
    char *out;
    size_t n, ns;
    jinja_span *sp;
    assert_int_equal(jinja_render(t, c, keys, NULL, NULL, &out, &n, &sp, &ns, &e), SLM_OK);
    assert_int_equal(ns, 1);
    assert_int_equal(sp[0].off, 0);
    assert_int_equal(sp[0].len, 10);
    assert_int_equal(sp[0].msg, -1);
    free(out);
    free(sp);
    jinja_free(t);
    cJSON_Delete(c);
}

static void allocation_failures(void **unused) {
    (void)unused;
    const char src[] = "{% set ns = namespace(a=[]) %}{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}"
                       "{{ m | tojson }}{% endfor %}{{ messages | map(attribute='role') | join(',') }}";
    cJSON *ctx = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \" a \"}, {\"role\": \"assistant\", \"content\": \"b\"}]}");
    for (long k = 0;; k++) {
        tu_failing f = tu_failing_at(k);
        slm_allocator a = tu_failing_allocator(&f);
        jinja_template *t = NULL;
        slm_err e;
        err_clear(&e);
        slm_status st = jinja_parse(src, sizeof src - 1, &a, &t, &e);
        char *out = NULL;
        jinja_span *sp = NULL;
        size_t n, ns;
        if (st == SLM_OK) st = jinja_render(t, ctx, NULL, NULL, &a, &out, &n, &sp, &ns, &e);
        if (st == SLM_OK) {
            assert_int_equal(f.n_refused, 0);
            al_free(&a, out);
            al_free(&a, sp);
            jinja_free(t);
            assert_int_equal(f.n_live, 0);
            break;
        }
        if (st != SLM_ERR_NOMEM) fail_msg("refusing allocation %ld gave %s: %s", k, slm_status_name(st), e.msg);
        assert_null(out);
        jinja_free(t);
        assert_int_equal(f.n_live, 0);
    }
    cJSON_Delete(ctx);
}

static void basics(void **unused) {
    (void)unused;
    expect("", NULL, "");
    expect("plain\n", NULL, "plain");
    expect("{{ messages | length }}", "{\"messages\": [{}, {}]}", "2");
    expect("{{ n }} {{ f }} {{ b }} {{ z }}", "{\"n\": 3, \"f\": 2.5, \"b\": true, \"z\": null}", "3 2.5 True None");
    rendered r = render_lim("{{ strftime_now('%Y') }}", NULL, NULL); /* the real clock */
    assert_int_equal(r.st, SLM_OK);
    assert_int_equal(r.n, 4);
    done(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(basics),     cmocka_unit_test(snippets),   cmocka_unit_test(errors),
        cmocka_unit_test(limits),     cmocka_unit_test(provenance), cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
