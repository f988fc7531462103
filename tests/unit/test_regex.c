/* test_regex.c — the regex -> GBNF compiler (src/grammar/regex.c) against Python's `re`: for every
 * pattern of tests/data/grammar/regex/vectors.json (real JSONSchemaBench patterns, random and edge
 * patterns; written by scripts/gen-regex-vectors.py, which decides each string with re.search under
 * JSON Schema's and ECMAScript's rules) the compiled grammar, run through the engine's matcher,
 * accepts every JSON-escaped string the pattern matches and none of the others; patterns using
 * what the compiler refuses are refused with SLM_ERR_UNSUPPORTED. Also: refusals name the construct
 * and the offset; the output buffer is untouched on failure; allocation failures leak nothing; every
 * format name has a regex that compiles.
 * With SLM_REGEX_SAMPLES=FILE the program instead writes random strings of each grammar (patterns and
 * formats) to FILE for scripts/check-regex-samples.py, which checks them with Python; with
 * SLM_REGEX_CORPUS=FILE it reports how each pattern of FILE compiles (scripts/regex-corpus.py). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/buf.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

/* Compiles pattern as rule "root"; NULL (and the message printed) on refusal. */
static gr_grammar *compile(const char *pattern, slm_status *st, slm_err *e) {
    buf b = buf_make(NULL);
    err_clear(e);
    *st = gr_regex_to_gbnf(pattern, strlen(pattern), "root", &b, e);
    gr_grammar *g = NULL;
    if (*st == SLM_OK) {
        *st = gr_parse(b.p, b.n, "root", NULL, &g, e);
        if (*st) fprintf(stderr, "pattern /%s/: GBNF refused: %s\n%s", pattern, e->msg, b.p);
    }
    buf_free(&b);
    return g;
}

/* True when the grammar derives exactly the bytes s[0, n). */
static bool accepts(const gr_grammar *g, const char *s, size_t n) {
    gm m;
    gm_init(&m, g, NULL);
    int32_t d = gm_start(&m);
    for (size_t i = 0; i < n && d >= 0; i++) d = gm_step(&m, d, (uint8_t)s[i]);
    bool ok = d >= 0 && gm_can_end(&m, d);
    gm_deinit(&m);
    return ok;
}

static void python_re_vectors(void **unused) {
    (void)unused;
    size_t n = 0;
    char *text = (char *)tu_read_file(tu_data_path("grammar/regex/vectors.json"), &n);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, n);
    assert_non_null(doc);
    int n_pat = 0, n_str = 0, n_bad = 0, n_refused = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, doc) {
        const char *p = cJSON_GetObjectItem(v, "p")->valuestring;
        bool expect_ok = !strcmp(cJSON_GetObjectItem(v, "expect")->valuestring, "ok");
        slm_status st;
        slm_err e;
        gr_grammar *g = compile(p, &st, &e);
        n_pat++;
        if (!expect_ok) {
            if (st != SLM_ERR_UNSUPPORTED) {
                fprintf(stderr, "pattern /%s/: expected SLM_ERR_UNSUPPORTED, got %d (%s)\n", p, st, e.msg);
                n_bad++;
            }
            gr_free(g);
            continue;
        }
        if (!g && st == SLM_ERR_UNSUPPORTED && strstr(e.msg, "matches no string") &&
            !cJSON_GetArraySize(cJSON_GetObjectItem(v, "match")))
            continue; /* e.g. [^\S\W_] : Python found no matching string either */
        if (!g) {
            fprintf(stderr, "pattern /%s/: refused: %s\n", p, e.msg);
            n_refused++;
            continue;
        }
        for (int want = 1; want >= 0; want--) {
            const cJSON *s;
            cJSON_ArrayForEach(s, cJSON_GetObjectItem(v, want ? "match" : "nomatch")) {
                n_str++;
                if (accepts(g, s->valuestring, strlen(s->valuestring)) != (bool)want) {
                    fprintf(stderr, "pattern /%s/: grammar %s \"%s\"\n", p, want ? "refuses" : "accepts", s->valuestring);
                    n_bad++;
                }
            }
        }
        gr_free(g);
    }
    fprintf(stderr, "%d patterns, %d strings: %d wrong, %d supported patterns refused\n", n_pat, n_str, n_bad, n_refused);
    cJSON_Delete(doc);
    free(text);
    assert_true(n_pat > 300 && n_str > 5000);
    assert_int_equal(n_bad, 0);
    assert_int_equal(n_refused, 0);
}

static void refusals(void **unused) {
    (void)unused;
    static const struct {
        const char *p;
        slm_status st;
        const char *msg; /* a substring of the message */
    } cases[] = {
        {"ab(?=c)", SLM_ERR_UNSUPPORTED, "offset 2: lookahead"},
        {"(?!c)", SLM_ERR_UNSUPPORTED, "offset 0: lookahead"},
        {"x(?<=c)", SLM_ERR_UNSUPPORTED, "offset 1: lookbehind"},
        {"(?<!c)", SLM_ERR_UNSUPPORTED, "lookbehind"},
        {"(a)\\1", SLM_ERR_UNSUPPORTED, "offset 3: backreference"},
        {"(?<n>a)\\k<n>", SLM_ERR_UNSUPPORTED, "named backreference"},
        {"\\bword", SLM_ERR_UNSUPPORTED, "offset 0: word boundary"},
        {"a\\B", SLM_ERR_UNSUPPORTED, "offset 1: non-word boundary"},
        {"a^b", SLM_ERR_UNSUPPORTED, "offset 0: the pattern matches no string"},
        {"\\p{L}", SLM_ERR_UNSUPPORTED, "Unicode property"},
        {"a\\Z", SLM_ERR_UNSUPPORTED, "offset 1: escape \\Z"},
        {"^[]$", SLM_ERR_UNSUPPORTED, "matches no string"},
        {"\\01", SLM_ERR_UNSUPPORTED, "octal"},
        {"a{10001}", SLM_ERR_RANGE, "offset 1: repetition count above 10000"},
        {"^x{0,9000}y{0,9000}z{0,9000}w{0,9000}$", SLM_ERR_RANGE, "pattern too large"},
        {"((((((((((((((((((((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))))))))))))))))))))",
         SLM_ERR_RANGE, "nested deeper"},
        {"(ab", SLM_ERR_INVALID_ARG, "offset 0: unclosed '('"},
        {"ab)", SLM_ERR_INVALID_ARG, "offset 2: unmatched ')'"},
        {"[ab", SLM_ERR_INVALID_ARG, "offset 0: unterminated character class"},
        {"[z-a]", SLM_ERR_INVALID_ARG, "offset 2: class range out of order"},
        {"*a", SLM_ERR_INVALID_ARG, "offset 0: '*' has nothing to repeat"},
        {"a**", SLM_ERR_INVALID_ARG, "offset 2: quantifier has nothing to repeat"},
        {"a{3,2}", SLM_ERR_INVALID_ARG, "offset 1: quantifier {3,2} out of order"},
        {"{2}", SLM_ERR_INVALID_ARG, "offset 0: quantifier has nothing to repeat"},
        {"^*", SLM_ERR_INVALID_ARG, "quantifier on an anchor"},
        {"a\\", SLM_ERR_INVALID_ARG, "offset 1: \\ at the end"},
        {"\\x4", SLM_ERR_INVALID_ARG, "offset 0: \\x needs two hex digits"},
        {"\\u12", SLM_ERR_INVALID_ARG, "\\u needs four hex digits"},
        {"\\u{110000}", SLM_ERR_INVALID_ARG, "above U+10FFFF"},
        {"(?i)a", SLM_ERR_INVALID_ARG, "offset 0: unknown group syntax"},
        {"(?P<n>a)", SLM_ERR_INVALID_ARG, "unknown group syntax"},
        {"(?<1>a)", SLM_ERR_INVALID_ARG, "bad character in a group name"},
        {"a\xff", SLM_ERR_INVALID_ARG, "offset 1: invalid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf b = buf_make(NULL);
        buf_puts(&b, "kept ::= \"x\"\n");
        slm_err e;
        err_clear(&e);
        slm_status st = gr_regex_to_gbnf(cases[i].p, strlen(cases[i].p), "r", &b, &e);
        if (st != cases[i].st || !strstr(e.msg, cases[i].msg))
            fprintf(stderr, "/%s/: status %d, message \"%s\"; expected %d with \"%s\"\n", cases[i].p, st, e.msg,
                    cases[i].st, cases[i].msg);
        assert_int_equal(st, cases[i].st);
        assert_non_null(strstr(e.msg, cases[i].msg));
        assert_string_equal(b.p, "kept ::= \"x\"\n"); /* untouched on failure */
        buf_free(&b);
    }
    buf b = buf_make(NULL);
    slm_err e;
    assert_int_equal(gr_regex_to_gbnf("a", 1, "bad name", &b, &e), SLM_ERR_INVALID_ARG);
    buf_free(&b);
}

/* The rules compose: two patterns under distinct names inside a JSON string rule, and a pattern
 * whose rules follow other text in the buffer. */
static void composes(void **unused) {
    (void)unused;
    buf b = buf_make(NULL);
    slm_err e;
    buf_puts(&b, "root ::= \"\\\"\" p-1 \"\\\"\" \",\" \"\\\"\" p-2 \"\\\"\"\n");
    assert_int_equal(gr_regex_to_gbnf("^[a-z]+$", 8, "p-1", &b, &e), SLM_OK);
    assert_int_equal(gr_regex_to_gbnf("\\d", 2, "p-2", &b, &e), SLM_OK);
    gr_grammar *g = NULL;
    assert_int_equal(gr_parse(b.p, b.n, "root", NULL, &g, &e), SLM_OK);
    static const char ok[] = "\"abc\",\"x1y\"", bad1[] = "\"ab1\",\"x1y\"", bad2[] = "\"abc\",\"xy\"";
    assert_true(accepts(g, ok, sizeof ok - 1));
    assert_false(accepts(g, bad1, sizeof bad1 - 1));
    assert_false(accepts(g, bad2, sizeof bad2 - 1));
    gr_free(g);
    buf_free(&b);
}

/* Every allocation failure gives SLM_ERR_NOMEM and leaks nothing. */
static void allocation_failures(void **unused) {
    (void)unused;
    static const char p[] = "^(?:[a-z]+|\\d{2,4})(-[^\"\\\\]*)?x|y$";
    for (long k = 0;; k++) {
        tu_failing f = tu_failing_at(k);
        slm_allocator al = tu_failing_allocator(&f);
        buf b = buf_make(&al);
        slm_err e;
        slm_status st = gr_regex_to_gbnf(p, sizeof p - 1, "r", &b, &e);
        buf_free(&b);
        assert_int_equal(f.n_live, 0);
        if (st == SLM_OK) break;
        assert_int_equal(st, SLM_ERR_NOMEM);
        assert_true(k < 1000);
    }
}

/* ---- sampling (scripts/check-regex-samples.py): SLM_REGEX_SAMPLES=FILE test_regex ------------------ */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random string of the grammar's language, walked byte by byte through the matcher (written as
 * a JSON string literal: the contents between quotes); false when the walk ran past the length cap. */
static bool sample(const gr_grammar *g, uint64_t *rs, buf *out) {
    gm m;
    gm_init(&m, g, NULL);
    int32_t d = gm_start(&m);
    size_t start = out->n;
    buf_putc(out, '"');
    bool done = false;
    for (int len = 0; d >= 0 && len < 400 && !done; len++) {
        uint64_t r = rng_next(rs);
        if (gm_can_end(&m, d) && (gm_only_end(&m, d) || r % 100 < (uint64_t)(len < 40 ? 8 : 40))) {
            done = true;
            break;
        }
        int32_t next[256], n = 0;
        uint8_t bytes[256];
        for (int b = 0; b < 256; b++) {
            int32_t t = gm_step(&m, d, (uint8_t)b);
            if (t >= 0) {
                bytes[n] = (uint8_t)b;
                next[n++] = t;
            }
        }
        if (!n) break;
        int k = (int)(rng_next(rs) % (uint64_t)n);
        buf_putc(out, (char)bytes[k]);
        d = next[k];
    }
    gm_deinit(&m);
    if (!done) {
        buf_truncate(out, start);
        return false;
    }
    buf_putc(out, '"');
    return true;
}

static void sample_one(FILE *f, const char *key, const char *val, const char *pattern, uint64_t *rs) {
    slm_status st;
    slm_err e;
    gr_grammar *g = compile(pattern, &st, &e);
    if (!g) return;
    cJSON *k = cJSON_CreateString(val);
    char *kj = cJSON_PrintUnformatted(k);
    buf b = buf_make(NULL);
    buf_printf(&b, "{\"%s\": %s, \"s\": [", key, kj);
    for (int i = 0, n = 0; i < 60 && n < 30; i++) {
        size_t before = b.n;
        if (n) buf_puts(&b, ", ");
        if (sample(g, rs, &b)) n++;
        else buf_truncate(&b, before);
    }
    buf_puts(&b, "]}\n");
    fputs(b.p, f);
    buf_free(&b);
    free(kj);
    cJSON_Delete(k);
    gr_free(g);
}

static int write_samples(const char *path) {
    size_t n = 0;
    char *text = (char *)tu_read_file(tu_data_path("grammar/regex/vectors.json"), &n);
    cJSON *doc = text ? cJSON_ParseWithLength(text, n) : NULL;
    FILE *f = fopen(path, "w");
    if (!doc || !f) {
        fprintf(stderr, "cannot read the vectors or write %s\n", path);
        return 1;
    }
    uint64_t rs = 0x9E3779B97F4A7C15u;
    const cJSON *v;
    cJSON_ArrayForEach(v, doc) {
        if (strcmp(cJSON_GetObjectItem(v, "expect")->valuestring, "ok")) continue;
        const char *p = cJSON_GetObjectItem(v, "p")->valuestring;
        sample_one(f, "p", p, p, &rs);
    }
    static const char *const names[] = {"date", "time", "date-time", "duration", "email", "hostname", "ipv4",
                                        "ipv6", "uri", "uri-reference", "uuid", "json-pointer"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "format_regex", names[i]);
        cJSON_AddStringToObject(o, "re", gr_format_regex(names[i]));
        char *line = cJSON_PrintUnformatted(o);
        fprintf(f, "%s\n", line);
        free(line);
        cJSON_Delete(o);
        for (int rep = 0; rep < 100; rep++) sample_one(f, "format", names[i], gr_format_regex(names[i]), &rs);
    }
    fclose(f);
    cJSON_Delete(doc);
    free(text);
    return 0;
}

/* SLM_REGEX_CORPUS=FILE (a JSON array of patterns): one JSON line per pattern on stdout with the
 * status and message of compiling it (scripts/regex-corpus.py). */
static int compile_corpus(const char *path) {
    size_t n = 0;
    char *text = (char *)tu_read_file(path, &n);
    cJSON *doc = text ? cJSON_ParseWithLength(text, n) : NULL;
    if (!doc) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    const cJSON *v;
    cJSON_ArrayForEach(v, doc) {
        slm_status st;
        slm_err e;
        gr_grammar *g = compile(v->valuestring, &st, &e);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "p", v->valuestring);
        cJSON_AddNumberToObject(o, "status", st);
        cJSON_AddStringToObject(o, "msg", g ? "" : e.msg);
        char *line = cJSON_PrintUnformatted(o);
        printf("%s\n", line);
        free(line);
        cJSON_Delete(o);
        gr_free(g);
    }
    cJSON_Delete(doc);
    free(text);
    return 0;
}

static void formats_compile(void **unused) {
    (void)unused;
    static const char *const names[] = {"date", "time", "date-time", "duration", "email", "hostname", "ipv4",
                                        "ipv6", "uri", "uri-reference", "uuid", "json-pointer"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *rx = gr_format_regex(names[i]);
        assert_non_null(rx);
        slm_status st;
        slm_err e;
        gr_grammar *g = compile(rx, &st, &e);
        if (!g) fprintf(stderr, "format %s: %s\n", names[i], e.msg);
        assert_non_null(g);
        gr_free(g);
    }
    assert_null(gr_format_regex("color"));
    assert_null(gr_format_regex(NULL));
}

int main(void) {
    const char *samples = getenv("SLM_REGEX_SAMPLES");
    if (samples) return write_samples(samples);
    const char *corpus = getenv("SLM_REGEX_CORPUS");
    if (corpus) return compile_corpus(corpus);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(python_re_vectors),
        cmocka_unit_test(refusals),
        cmocka_unit_test(composes),
        cmocka_unit_test(allocation_failures),
        cmocka_unit_test(formats_compile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
