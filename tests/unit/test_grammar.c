/* test_grammar.c — the grammar layer (src/grammar/): llama.cpp's example grammars parse; bad
 * grammars and unsupported schema keywords are refused with the position or keyword named; and the
 * token masks equal brute force — for every token of small random vocabularies (tokens spanning
 * several terminals, split UTF-8 characters, invalid bytes), along random walks, the mask allows
 * the token exactly when a simple reference matcher (explicit stacks, code point by code point,
 * written here without the engine's automaton, hashing or trie) says the output stays a prefix
 * of the grammar's language; the end only where the grammar accepts. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "grammar/grammar.h"
#include "statelm.h"

/* ---- parsing ------------------------------------------------------------------------------------ */

static slm_grammar *parse_ok(const char *text) {
    slm_grammar *g = NULL;
    char err[512];
    slm_status st = slm_grammar_create(text, strlen(text), NULL, &g, err, sizeof err);
    if (st) fprintf(stderr, "unexpected refusal: %s\n--- grammar:\n%s\n", err, text);
    assert_int_equal(st, SLM_OK);
    return g;
}

static void llamacpp_grammars_parse(void **unused) {
    (void)unused;
    static const char *const files[] = {"json.gbnf", "json_arr.gbnf", "list.gbnf", "chess.gbnf", "japanese.gbnf",
                                        "english.gbnf", "arithmetic.gbnf", "c.gbnf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "grammar/llamacpp/%s", files[i]);
        size_t n = 0;
        uint8_t *text = tu_read_file(tu_data_path(rel), &n);
        assert_non_null(text);
        char *z = malloc(n + 1);
        memcpy(z, text, n);
        z[n] = 0;
        slm_grammar_destroy(parse_ok(z));
        free(z);
        free(text);
    }
}

static void parse_errors(void **unused) {
    (void)unused;
    static const struct {
        const char *text;
        slm_status st;
        const char *msg;
    } cases[] = {
        {"", SLM_ERR_FORMAT, "1:1: empty grammar"},
        {"# only a comment\n", SLM_ERR_FORMAT, "empty grammar"},
        {"root ::= foo\n", SLM_ERR_FORMAT, "1:10: undefined rule 'foo'"},
        {"root ::= \"abc\n", SLM_ERR_FORMAT, "1:10: unterminated string"},
        {"root ::= [a-z\n", SLM_ERR_FORMAT, "1:10: unterminated character class"},
        {"root ::= [z-a]\n", SLM_ERR_FORMAT, "1:13: range end U+0061 is below its start U+007A"},
        {"root ::= []\n", SLM_ERR_FORMAT, "empty character class"},
        {"root ::= \"a\"\nroot ::= \"b\"\n", SLM_ERR_FORMAT, "2:1: rule 'root' defined twice (first at 1:1)"},
        {"root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]+\n", SLM_ERR_FORMAT,
         "2:1: rule 'expr' is left-recursive"},
        {"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"\n", SLM_ERR_FORMAT, "'a' is left-recursive"},
        {"root ::= \"x\" root\n", SLM_ERR_FORMAT, "1:1: rule 'root' can never end"},
        {"root ::= * \"a\"\n", SLM_ERR_FORMAT, "1:10: '*' has nothing to repeat"},
        {"root ::= (\"a\" | \"b\"\n", SLM_ERR_FORMAT, "unclosed '('"},
        {"root ::= \"a\" )\n", SLM_ERR_FORMAT, "1:14: unmatched ')'"},
        {"root \"a\"\n", SLM_ERR_FORMAT, "1:6: expected '::=' after rule name 'root'"},
        {"root ::= \"\\q\"\n", SLM_ERR_FORMAT, "1:11: unknown escape \\q"},
        {"root ::= \"\\x4\"\n", SLM_ERR_FORMAT, "\\x needs 2 hex digits"},
        {"root ::= \"\\uD800\"\n", SLM_ERR_FORMAT, "not a Unicode scalar value"},
        {"root ::= \"a\"{3,2}\n", SLM_ERR_FORMAT, "max below min"},
        {"root ::= \"a\"{99999}\n", SLM_ERR_RANGE, "repetition count above"},
        {"root ::= <[42]>\n", SLM_ERR_FORMAT, "1:10: token ids (<[id]>) are not supported"},
        {"root ::= !<|a|>\n", SLM_ERR_FORMAT, "1:10: negated token references"},
        {"root ::= <abc\n", SLM_ERR_FORMAT, "1:10: unterminated token reference"},
        {"root ::= <>\n", SLM_ERR_FORMAT, "unterminated token reference"},
        {"start ::= \"a\"\n", SLM_ERR_FORMAT, "no rule named 'root'"},
        {"root ::= \"\xff\"\n", SLM_ERR_FORMAT, "invalid UTF-8"},
        {"root ::= \"a\"\n  x ::= \"b\" |\n | ( \n", SLM_ERR_FORMAT, "unclosed '('"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slm_grammar *g = (slm_grammar *)1;
        char err[512] = "";
        slm_status st = slm_grammar_create(cases[i].text, strlen(cases[i].text), NULL, &g, err, sizeof err);
        if (st != cases[i].st || !strstr(err, cases[i].msg))
            fprintf(stderr, "case %zu: status %d, message '%s', wanted %d '%s'\n", i, st, err, cases[i].st, cases[i].msg);
        assert_int_equal(st, cases[i].st);
        assert_non_null(strstr(err, cases[i].msg));
        assert_null(g);
    }
    /* another start rule by name; a grammar with an unreachable never-ending rule is fine */
    slm_grammar *g = NULL;
    const char *t = "start ::= \"a\"\nloop ::= \"x\" loop\n";
    assert_int_equal(slm_grammar_create(t, strlen(t), "start", &g, NULL, 0), SLM_OK);
    slm_grammar_destroy(g);
}

static void schema_refusals(void **unused) {
    (void)unused;
    static const struct {
        const char *schema;
        slm_status st;
        const char *msg;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"^(?=x)\"}", SLM_ERR_UNSUPPORTED, "'pattern' at /: regex at offset 1: lookahead"},
        {"{\"type\":\"string\",\"pattern\":\"^a\",\"maxLength\":3}", SLM_ERR_UNSUPPORTED,
         "pattern together with minLength/maxLength at /"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{\"minimum\":3}}}}", SLM_ERR_UNSUPPORTED,
         "keyword 'not' at /properties/a is not supported"},
        {"{\"required\":[\"a\"],\"properties\":{\"a\":{\"not\":{}}}}", SLM_ERR_UNSUPPORTED,
         "required property 'a' at / has a schema nothing validates"},
        {"{\"pattern\":\"^c\",\"if\":{\"pattern\":\"^a\"},\"then\":{\"pattern\":\"^b\"}}", SLM_ERR_UNSUPPORTED,
         "keyword 'if' at / is not supported"},
        {"{\"type\":\"string\",\"format\":\"iri\"}", SLM_ERR_UNSUPPORTED, "format 'iri' at / is not supported"},
        {"{\"type\":\"string\",\"format\":\"email\",\"maxLength\":9}", SLM_ERR_UNSUPPORTED,
         "minLength/maxLength together with format at /"},
        {"{\"type\":\"string\",\"format\":\"ipv4\",\"enum\":[\"1.2.3\",\"256.1.1.1\"]}", SLM_ERR_UNSUPPORTED,
         "allows no value"},
        {"{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", SLM_ERR_UNSUPPORTED, "the types conflict"},
        {"{\"allOf\":[{\"format\":\"date\"},{\"format\":\"uuid\"}]}", SLM_ERR_UNSUPPORTED,
         "two different 'format' cannot be merged"},
        {"{\"type\":\"integer\",\"minimum\":5,\"exclusiveMaximum\":5}", SLM_ERR_UNSUPPORTED, "allow no integer"},
        {"{\"type\":\"number\",\"multipleOf\":0.01}", SLM_ERR_UNSUPPORTED, "only integer multiples"},
        {"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"maxLength\":3}]}", SLM_ERR_UNSUPPORTED,
         "no branch is provably disjoint"},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":2}", SLM_ERR_UNSUPPORTED, "keyword 'uniqueItems'"},
        {"{\"not\":{\"minimum\":3}}", SLM_ERR_UNSUPPORTED, "keyword 'not' at / is not supported"},
        {"{\"type\":\"string\",\"not\":{}}", SLM_ERR_UNSUPPORTED, "allows nothing"},
        {"{\"allOf\":[{\"patternProperties\":{\"^a\":{}}},{\"patternProperties\":{\"^b\":{}}}]}", SLM_ERR_UNSUPPORTED,
         "patternProperties in two branches cannot be merged"},
        {"{\"properties\":{\"ab\":{\"type\":\"string\"}},\"required\":[\"ab\"],\"propertyNames\":{\"maxLength\":1}}",
         SLM_ERR_UNSUPPORTED, "required property 'ab' at / is refused by propertyNames"},
        {"{\"$ref\":\"http://x/y.json\"}", SLM_ERR_UNSUPPORTED, "only local references"},
        {"{\"$ref\":\"#/$defs/missing\"}", SLM_ERR_FORMAT, "does not resolve"},
        {"{\"type\":\"strin\"}", SLM_ERR_FORMAT, "unknown type 'strin'"},
        {"{\"type\":", SLM_ERR_FORMAT, "not valid JSON"},
        {"false", SLM_ERR_UNSUPPORTED, "allows nothing"},
        {"{\"enum\":[1,2],\"type\":\"string\"}", SLM_ERR_UNSUPPORTED, "allows no value"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", SLM_ERR_FORMAT, "maxItems below minItems"},
        {"{\"type\":\"string\",\"maxLength\":-1}", SLM_ERR_FORMAT, "non-negative integer"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", SLM_ERR_FORMAT, "left-recursive"},
        {"{\"type\":\"object\",\"required\":[\"x\"],\"additionalProperties\":false}", SLM_ERR_UNSUPPORTED,
         "required property 'x' at / is not in 'properties'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slm_grammar *g = (slm_grammar *)1;
        char err[512] = "";
        slm_status st = slm_grammar_from_json_schema(cases[i].schema, strlen(cases[i].schema), &g, err, sizeof err);
        if (st != cases[i].st || !strstr(err, cases[i].msg))
            fprintf(stderr, "case %zu: status %d, message '%s', wanted %d '%s'\n", i, st, err, cases[i].st, cases[i].msg);
        assert_int_equal(st, cases[i].st);
        assert_non_null(strstr(err, cases[i].msg));
        assert_null(g);
    }
    /* keywords outside the vocabulary are annotations, refused in strict mode */
    const char *ann = "{\"type\":\"string\",\"x-vendor\":1,\"readonly\":true,\"self\":{}}";
    slm_grammar *ga = NULL;
    char aerr[512];
    assert_int_equal(slm_grammar_from_json_schema(ann, strlen(ann), &ga, aerr, sizeof aerr), SLM_OK);
    slm_grammar_destroy(ga);
    assert_int_equal(slm_grammar_from_json_schema_ex(ann, strlen(ann), SLM_SCHEMA_STRICT, &ga, aerr, sizeof aerr),
                     SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(aerr, "keyword 'x-vendor' at / is not in the vocabulary"));
    /* the GBNF text: size query, then the text */
    const char *s = "{\"type\":\"object\"}";
    size_t n = 0;
    assert_int_equal(slm_json_schema_to_gbnf(s, strlen(s), NULL, 0, &n, NULL, 0), SLM_ERR_RANGE);
    assert_true(n > 0);
    char *buf = malloc(n + 1);
    assert_int_equal(slm_json_schema_to_gbnf(s, strlen(s), buf, n + 1, &n, NULL, 0), SLM_OK);
    assert_non_null(strstr(buf, "root ::= "));
    free(buf);
}

/* Allocation failures in the schema converter (issue 38's sweep): allocation N = 0, 1, ... fails,
 * the converter's own (through the allocator it is given) and cJSON's (through its hooks) alike,
 * until a run succeeds. A failing run returns SLM_ERR_NOMEM (SLM_ERR_FORMAT "not valid JSON" when
 * the parse itself ran out) and leaks nothing; a run may also succeed with a smaller grammar when a
 * failure hit a check tried quietly (a oneOf branch is then left out), and then leaks nothing
 * either. */
static tu_failing *g_cjson_fail;
static void *cjson_alloc(size_t n) { return tu_fail_alloc(g_cjson_fail, n); }
static void cjson_free(void *p) { tu_fail_free(g_cjson_fail, p); }

static void schema_alloc_failures(void **unused) {
    (void)unused;
    static const char *const files[] = {"37-allof.json", "39-pattern-properties.json", "41-dependencies.json",
                                        "44-prefix-items.json", "45-unique-enum.json", "48-formats.json",
                                        "50-oneof-narrowed.json", "51-pattern-classes.json"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/grammar/schemas/%s", SLM_TEST_DATA_DIR, files[f]);
        size_t len = 0;
        char *text = (char *)tu_read_file(path, &len);
        assert_non_null(text);
        long runs = 0;
        for (long at = 0;; at++) {
            tu_failing fl = tu_failing_at(at);
            slm_allocator a = tu_failing_allocator(&fl);
            g_cjson_fail = &fl;
            cJSON_Hooks hooks = {cjson_alloc, cjson_free};
            cJSON_InitHooks(&hooks);
            char *gbnf = NULL;
            slm_err e;
            err_clear(&e);
            slm_status st = gr_schema_to_gbnf(text, len, 0, &a, &gbnf, &e);
            if (st == SLM_OK) al_free(&a, gbnf);
            cJSON_InitHooks(NULL);
            if (st != SLM_OK && st != SLM_ERR_NOMEM && !(st == SLM_ERR_FORMAT && strstr(e.msg, "not valid JSON")))
                fail_msg("%s, allocation %ld failing: status %d (%s)", files[f], at, st, e.msg);
            if (fl.n_live) fail_msg("%s, allocation %ld failing: %ld blocks leaked", files[f], at, fl.n_live);
            runs++;
            if (st == SLM_OK && !fl.n_refused) break;
            assert_true(at < 200000);
        }
        assert_true(runs > 10);
        free(text);
    }
}

/* ---- the reference matcher ----------------------------------------------------------------------- */

#define RMAX 512
typedef struct rst {
    int32_t v[RMAX]; /* element positions, top last */
    int n;
} rst;
typedef struct rset {
    rst *s;
    int n, cap;
    bool accept;
} rset;

static void radd(rset *o, const rst *s) {
    for (int i = 0; i < o->n; i++)
        if (o->s[i].n == s->n && !memcmp(o->s[i].v, s->v, (size_t)s->n * sizeof s->v[0])) return;
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 8;
        o->s = realloc(o->s, (size_t)o->cap * sizeof *o->s);
    }
    o->s[o->n++] = *s;
}

/* Adds to o every stack reachable from s whose top is a class (or the acceptance of an empty stack). */
static void rexpand(const gr_grammar *g, const rst *s, rset *o) {
    if (s->n == 0) {
        o->accept = true;
        return;
    }
    int32_t pos = s->v[s->n - 1];
    gr_elem e = g->elems[pos];
    if (e.type == GR_CLS) {
        radd(o, s);
        return;
    }
    rst *t = malloc(sizeof *t);
    *t = *s;
    t->n--;
    if (e.type == GR_END) {
        rexpand(g, t, o);
    } else {
        t->v[t->n++] = pos + 1; /* where the caller continues */
        assert_true(t->n < RMAX);
        for (int32_t a = 0; a < g->rules[e.val].n_alt; a++) {
            rst *u = malloc(sizeof *u);
            *u = *t;
            u->v[u->n++] = g->alts[g->rules[e.val].alt_off + a];
            rexpand(g, u, o);
            free(u);
        }
    }
    free(t);
}

static void rinit(const gr_grammar *g, rset *o) {
    memset(o, 0, sizeof *o);
    for (int32_t a = 0; a < g->rules[g->root].n_alt; a++) {
        rst s = {.n = 1};
        s.v[0] = g->alts[g->rules[g->root].alt_off + a];
        rexpand(g, &s, o);
    }
}

static bool class_has(const gr_grammar *g, int32_t c, uint32_t cp) {
    for (int32_t i = 0; i < g->classes[c].n; i++)
        if (g->ranges[g->classes[c].off + 2 * i] <= cp && cp <= g->ranges[g->classes[c].off + 2 * i + 1]) return true;
    return false;
}

static void radvance(const gr_grammar *g, const rset *in, uint32_t cp, rset *o) {
    memset(o, 0, sizeof *o);
    for (int i = 0; i < in->n; i++) {
        const rst *s = &in->s[i];
        if (!class_has(g, g->elems[s->v[s->n - 1]].val, cp)) continue;
        rst *t = malloc(sizeof *t);
        *t = *s;
        t->v[t->n - 1]++;
        rexpand(g, t, o);
        free(t);
    }
}

/* A code point with this UTF-8 prefix (k of n bytes) that is a scalar value some stack top takes. */
static bool partial_ok(const gr_grammar *g, const rset *set, const uint8_t *b, size_t k, size_t n) {
    for (size_t i = 1; i < k; i++)
        if ((b[i] & 0xC0) != 0x80) return false;
    uint8_t lo_b[4], hi_b[4];
    for (size_t i = 0; i < n; i++) {
        lo_b[i] = i < k ? b[i] : 0x80;
        hi_b[i] = i < k ? b[i] : 0xBF;
    }
    uint32_t lead_bits = n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07;
    uint32_t lo = lo_b[0] & lead_bits, hi = hi_b[0] & lead_bits;
    for (size_t i = 1; i < n; i++) {
        lo = lo << 6 | (lo_b[i] & 0x3Fu);
        hi = hi << 6 | (hi_b[i] & 0x3Fu);
    }
    uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (lo < min) lo = min;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    for (int i = 0; i < set->n; i++) {
        const gr_class *c = &g->classes[g->elems[set->s[i].v[set->s[i].n - 1]].val];
        for (int32_t r = 0; r < c->n; r++) {
            uint32_t a = g->ranges[c->off + 2 * r], z = g->ranges[c->off + 2 * r + 1];
            if (a < lo) a = lo;
            if (z > hi) z = hi;
            for (uint32_t cp = a; cp <= z; cp++) /* skips the surrogates: at most 2048 steps */
                if (cp < 0xD800 || cp > 0xDFFF) return true;
        }
    }
    return false;
}

/* Whether bytes b[0, n) from set `start` keep the output a viable prefix; *can_end: the grammar may
 * end right after them. */
static bool rviable(const gr_grammar *g, const rset *start, const uint8_t *b, size_t n, bool *can_end) {
    rset cur = *start, next;
    bool own = false, ok = true;
    *can_end = false;
    size_t i = 0;
    while (i < n) {
        size_t len = b[i] < 0x80 ? 1 : (b[i] >= 0xC2 && b[i] <= 0xDF) ? 2 : (b[i] >= 0xE0 && b[i] <= 0xEF) ? 3
                   : (b[i] >= 0xF0 && b[i] <= 0xF4) ? 4 : 0;
        if (!len) {
            ok = false;
            break;
        }
        if (i + len > n) {
            ok = partial_ok(g, &cur, b + i, n - i, len);
            goto out;
        }
        uint32_t cp;
        if (utf8_decode(b + i, len, &cp) != len) {
            ok = false;
            break;
        }
        radvance(g, &cur, cp, &next);
        if (own) free(cur.s);
        cur = next;
        own = true;
        i += len;
        if (!cur.n && !cur.accept) {
            ok = false;
            break;
        }
    }
    if (ok) *can_end = cur.accept;
out:
    if (own) free(cur.s);
    return ok;
}

/* Advances *set over the whole characters at the start of b[0, n) (the output is known viable);
 * returns how many bytes they take (a partial character at the end stays). */
static size_t radvance_bytes(const gr_grammar *g, rset *set, const uint8_t *b, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = utf8_decode(b + i, n - i, &cp);
        if (!len) break;
        rset next;
        radvance(g, set, cp, &next);
        free(set->s);
        *set = next;
        i += len;
    }
    return i;
}

/* ---- brute force against the constraint --------------------------------------------------------- */

static uint64_t rng_state;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static const char *const pieces[] = {
    "a", "b", "ab", "ba", "{", "}", "\"", ":", ",", " ", "\n", "1", "23", "0", "-", "[", "]", "true", "fals", "e",
    "null", "x", "y", "+", "*", "(", ")", "=", "!", "T", "Z", "2024-", "01", "-3", "\\", "u", "\"a\":", "{\"",
    "\xe6\x97\xa5", "\xe6\x9c\xac", "\xe6", "\x97\xa5", "\xe6\x97", "\xa5", "\xf0\x9f\x98\x80", "\xf0\x9f", "\x98\x80",
    "\xc3\xa9", "\xc3", "\xa9", "\xc3\xbc", "\xff", "\xed\xa0", "\xe0\x80", "\xf4\x90", ".", "9", "é", "日本", "\t",
};

static uint64_t n_split_total, n_split_cached_total; /* over the brute-force runs: the split is exercised */

static void brute_force_one(const char *gbnf, uint64_t seed, int n_walks, int n_steps) {
    slm_grammar *g = parse_ok(gbnf);
    const gr_grammar *gg = gr_of(g);
    rng_state = seed;
    enum { N = 300 };
    gv_token toks[N];
    uint8_t store[N][16];
    for (int i = 0; i < N; i++) {
        size_t len = 0;
        int parts = 1 + (int)(rnd() % 3);
        for (int p = 0; p < parts; p++) {
            const char *s = pieces[rnd() % (sizeof pieces / sizeof pieces[0])];
            size_t l = strlen(s);
            if (len + l > sizeof store[i]) break;
            memcpy(store[i] + len, s, l);
            len += l;
        }
        toks[i] = (gv_token){store[i], (uint32_t)len, GV_TEXT};
    }
    toks[7].kind = GV_EOG;
    toks[8].kind = GV_NONE;    /* never allowed */
    toks[9].kind = GV_CONTROL; /* a control token: never allowed by a grammar without token references */
    slm_grammar_vocab *v = NULL;
    assert_int_equal(gv_create(toks, N, NULL, &v), SLM_OK);
    slm_constraint *c = NULL;
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    rset start;
    rinit(gg, &start);
    uint32_t mask[(N + 31) / 32], again[(N + 31) / 32];
    uint8_t *out = malloc(4096);
    int n_checked = 0;
    for (int w = 0; w < n_walks; w++) {
        slm_constraint_reset(c);
        size_t n_out = 0, at = 0; /* cur: the reference state after out[0, at), whole characters */
        rset cur = start;
        cur.s = malloc((size_t)start.cap * sizeof *cur.s);
        memcpy(cur.s, start.s, (size_t)start.n * sizeof *cur.s);
        for (int step = 0; step < n_steps; step++) {
            assert_int_equal(slm_constraint_mask(c, mask, N), SLM_OK);
            int allowed[N], n_allowed = 0;
            for (int t = 0; t < N; t++) {
                bool want, can_end, viable;
                if (toks[t].kind == GV_NONE || toks[t].kind == GV_CONTROL) want = false;
                else if (toks[t].kind == GV_EOG) {
                    viable = rviable(gg, &cur, out + at, n_out - at, &can_end);
                    want = viable && can_end;
                } else {
                    memcpy(out + n_out, toks[t].bytes, toks[t].len);
                    want = rviable(gg, &cur, out + at, n_out - at + toks[t].len, &can_end);
                }
                bool got = mask[t / 32] >> (t % 32) & 1;
                if (got != want) {
                    fprintf(stderr, "walk %d step %d token %d ('%.*s'): mask %d, reference %d; output so far '%.*s'\n", w,
                            step, t, (int)toks[t].len, (const char *)toks[t].bytes, got, want, (int)n_out,
                            (const char *)out);
                    fail();
                }
                n_checked++;
                if (got) allowed[n_allowed++] = t;
            }
            if (!n_allowed) break;
            /* a refused token leaves the state as it was */
            for (int t = 0; t < N; t++)
                if (!(mask[t / 32] >> (t % 32) & 1) && toks[t].kind == GV_TEXT) {
                    assert_int_equal(slm_constraint_accept(c, t), SLM_ERR_INVALID_ARG);
                    assert_true(strlen(slm_constraint_errmsg(c)) > 0);
                    break;
                }
            assert_int_equal(slm_constraint_mask(c, again, N), SLM_OK);
            assert_memory_equal(mask, again, sizeof mask);
            int t = allowed[rnd() % (uint32_t)n_allowed];
            if (toks[t].kind == GV_EOG && n_allowed > 1 && rnd() % 4) t = allowed[(rnd() % (uint32_t)(n_allowed))];
            assert_int_equal(slm_constraint_accept(c, t), SLM_OK);
            if (toks[t].kind == GV_EOG) {
                assert_true(slm_constraint_can_end(c));
                break;
            }
            if (n_out + toks[t].len > 4000) break;
            memcpy(out + n_out, toks[t].bytes, toks[t].len);
            n_out += toks[t].len;
            at += radvance_bytes(gg, &cur, out + at, n_out - at);
        }
        free(cur.s);
    }
    assert_true(n_checked > N * n_walks);
    uint64_t n_split, n_split_cached;
    gc_split_stats(c, &n_split, &n_split_cached);
    n_split_total += n_split;
    n_split_cached_total += n_split_cached;
    free(out);
    free(start.s);
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
}

static void brute_force_masks(void **unused) {
    (void)unused;
    static const char *const grammars[] = {
        /* json.gbnf from llama.cpp */
        "root ::= object\nvalue ::= object | array | string | number | boolean\n"
        "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* )? \"}\"\n"
        "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\"\n"
        "string ::= \"\\\"\" ( [\\x20\\x21\\x23-\\x5b\\x5d-\\U0010FFFF] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* "
        "\"\\\"\"\nnumber ::= \"-\"? [0-9]+ ws\nboolean ::= (\"true\" | \"false\") ws\nws ::= ([ \\t\\n] ws)?\n",
        /* several terminals per token, multi-byte characters, bounded repetition */
        "root ::= ( \"ab\" | \"a\" [0-9]+ | \"日本\" [^a-z]{0,3} | \"ba\"? \"x\" )* \"!\"\n",
        "root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\n"
        "term ::= ident | num | \"(\" ws expr \")\" ws\nident ::= [a-z] [a-z0-9_]* ws\nnum ::= [0-9]+ ws\nws ::= [ \\t\\n]*\n",
        /* split characters: emoji and Latin-1 letters */
        "root ::= [\\U0001F600-\\U0001F64F] \" \" [é-ü]+ ( \" \" [\\U0001F600-\\U0001F64F] )?\n",
        /* nullable rules inside repetition, any character */
        "root ::= a* \"=\" .{1,3}\na ::= \"x\"? \"y\"? ( \"a\" | \"b\" )\n",
        /* the same string and object rules at many depths: cut sets shared across contexts, tokens
         * such as '"a":' and '{"' escaping a string into its context */
        "root ::= obj\nobj ::= \"{\" ( kv ( \",\" kv )* )? \"}\"\nkv ::= str \":\" val\n"
        "val ::= str | obj | \"[\" ( val ( \",\" val )* )? \"]\" | \"1\"\nstr ::= \"\\\"\" [^\"\\\\]{0,4} \"\\\"\"\n",
    };
    n_split_total = n_split_cached_total = 0;
    for (size_t i = 0; i < sizeof grammars / sizeof grammars[0]; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) brute_force_one(grammars[i], seed * 7919 + i, 6, 24);
    assert_true(n_split_total > 50 && n_split_cached_total > 10);
}

/* A schema's grammar under the same check. */
static void brute_force_schema(void **unused) {
    (void)unused;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[\"x\",1,null]},\"b\":{\"type\":\"array\","
                         "\"items\":{\"type\":\"integer\"},\"maxItems\":2},\"e\":{\"type\":\"string\",\"maxLength\":3}},"
                         "\"required\":[\"b\"],\"additionalProperties\":false}";
    size_t n = 0;
    slm_json_schema_to_gbnf(schema, strlen(schema), NULL, 0, &n, NULL, 0);
    char *gbnf = malloc(n + 1);
    assert_int_equal(slm_json_schema_to_gbnf(schema, strlen(schema), gbnf, n + 1, &n, NULL, 0), SLM_OK);
    for (uint64_t seed = 1; seed <= 4; seed++) brute_force_one(gbnf, seed, 8, 30);
    free(gbnf);
}

/* A sampler at `temperature` with no top-k, top-p or min-p cut. */
static slm_sampler *plain_sampler(float temperature, uint64_t seed) {
    slm_sampler_params p = slm_sampler_params_default();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    slm_sampler *s = NULL;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
    return s;
}

/* The sampler draws only what the constraint allows, and fails cleanly when nothing is. */
static void sampler_constraint(void **unused) {
    (void)unused;
    const char *text = "root ::= \"ab\" | \"b\"\n";
    slm_grammar *g = parse_ok(text);
    gv_token toks[4] = {{(const uint8_t *)"a", 1, GV_TEXT}, {(const uint8_t *)"b", 1, GV_TEXT},
                        {(const uint8_t *)"c", 1, GV_TEXT}, {NULL, 0, GV_EOG}};
    slm_grammar_vocab *v = NULL;
    assert_int_equal(gv_create(toks, 4, NULL, &v), SLM_OK);
    slm_constraint *c = NULL;
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    slm_sampler *s = plain_sampler(1.0f, 0);
    assert_int_equal(slm_sampler_set_constraint(s, c), SLM_OK);
    float logits[5] = {0.0f, 0.0f, 9.0f, 9.0f, 9.0f}; /* id 4 is past the vocabulary: never allowed */
    int seen[5] = {0};
    for (int i = 0; i < 200; i++) {
        int32_t t = -1;
        assert_int_equal(slm_sampler_sample(s, logits, 5, NULL, 0, &t), SLM_OK);
        seen[t]++;
    }
    assert_true(seen[0] > 0 && seen[1] > 0);
    assert_int_equal(seen[2] + seen[3] + seen[4], 0);
    float probs[5];
    assert_int_equal(slm_sampler_probs(s, logits, 5, NULL, 0, probs), SLM_OK);
    assert_true(probs[0] > 0.49f && probs[0] < 0.51f && probs[2] == 0.0f && probs[3] == 0.0f);
    assert_int_equal(slm_constraint_accept(c, 1), SLM_OK); /* "b": done, only the end may follow */
    assert_true(slm_constraint_done(c));
    int32_t t = -1;
    assert_int_equal(slm_sampler_sample(s, logits, 5, NULL, 0, &t), SLM_OK);
    assert_int_equal(t, 3);
    assert_int_equal(slm_constraint_accept(c, 3), SLM_OK);
    slm_constraint_reset(c);
    assert_int_equal(slm_constraint_accept(c, 3), SLM_ERR_INVALID_ARG); /* the end is not allowed at the start */
    assert_int_equal(slm_constraint_accept(c, 2), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_constraint_accept(c, 99), SLM_ERR_INVALID_ARG);
    /* greedy picks the best allowed token */
    slm_sampler *gs = plain_sampler(0.0f, 0);
    slm_sampler_set_constraint(gs, c);
    float l2[5] = {1.0f, 2.0f, 9.0f, 9.0f, 9.0f};
    assert_int_equal(slm_sampler_sample(gs, l2, 5, NULL, 0, &t), SLM_OK);
    assert_int_equal(t, 1);
    slm_sampler_set_constraint(gs, NULL);
    assert_int_equal(slm_sampler_sample(gs, l2, 5, NULL, 0, &t), SLM_OK);
    assert_int_equal(t, 2);
    slm_sampler_destroy(gs);
    slm_sampler_destroy(s);
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
    /* NULL handling */
    assert_int_equal(slm_constraint_create(NULL, NULL, &c), SLM_ERR_INVALID_ARG);
    assert_null(c);
    slm_constraint_destroy(NULL);
    slm_grammar_destroy(NULL);
    slm_grammar_vocab_destroy(NULL);
}

/* The bits of the mask of c over n tokens, as a bit string per id ("1" allowed). */
static void mask_bits(slm_constraint *c, int32_t n, char *out) {
    uint32_t mask[4] = {0};
    assert_true(n <= 128);
    assert_int_equal(slm_constraint_mask(c, mask, n), SLM_OK);
    for (int32_t t = 0; t < n; t++) out[t] = (char)('0' + (mask[t / 32] >> (t % 32) & 1));
    out[n] = '\0';
}

/* Token references (<text>, grammar.h): a control token is allowed exactly where a reference names
 * it; there its text is allowed as plain text too; no other class (., negations, ranges to
 * U+10FFFF) lets a control token through, nor a text token holding the mark byte 0xFF. */
static void token_references(void **unused) {
    (void)unused;
    enum { CTRL, TEXT, X, LT, REST, END, Z, OTHER, FF, N };
    gv_token toks[N] = {
        [CTRL] = {(const uint8_t *)"<|a|>", 5, GV_CONTROL}, [TEXT] = {(const uint8_t *)"<|a|>", 5, GV_TEXT},
        [X] = {(const uint8_t *)"x", 1, GV_TEXT},           [LT] = {(const uint8_t *)"<", 1, GV_TEXT},
        [REST] = {(const uint8_t *)"|a|>", 4, GV_TEXT},     [END] = {NULL, 0, GV_EOG},
        [Z] = {(const uint8_t *)"z", 1, GV_TEXT},           [OTHER] = {(const uint8_t *)"<|b|>", 5, GV_CONTROL},
        [FF] = {(const uint8_t *)"\xff<|a|>\xff", 7, GV_TEXT}, /* a byte-fallback run spelling the mark */
    };
    slm_grammar_vocab *v = NULL;
    assert_int_equal(gv_create(toks, N, NULL, &v), SLM_OK);
    char bits[N + 1];
    /*                                                    C T X < R E Z O F */
    struct {
        const char *gbnf, *start;
    } cases[] = {
        {"root ::= <|a|> \"x\"\n", "110100000"},           /* the token, its text, or its first piece */
        {"root ::= .+\n", "011110100"},                    /* any code point: never a control token */
        {"root ::= [^y]* \"x\"\n", "011110100"},
        {"root ::= [\\x00-\\U0010FFFF]+\n", "011110100"},
        {"root ::= (<|a|> | <|b|>)+ \"x\"?\n", "110100010"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slm_grammar *g = parse_ok(cases[i].gbnf);
        slm_constraint *c = NULL;
        assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
        mask_bits(c, N, bits);
        if (strcmp(bits, cases[i].start)) fprintf(stderr, "%s: mask %s, want %s\n", cases[i].gbnf, bits, cases[i].start);
        assert_string_equal(bits, cases[i].start);
        slm_constraint_destroy(c);
        slm_grammar_destroy(g);
    }
    /* after the control token only "x"; after the text's first piece, its rest */
    slm_grammar *g = parse_ok("root ::= <|a|> \"x\"\n");
    slm_constraint *c = NULL;
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    assert_int_equal(slm_constraint_accept(c, CTRL), SLM_OK);
    mask_bits(c, N, bits);
    assert_string_equal(bits, "001000000");
    assert_int_equal(slm_constraint_accept(c, X), SLM_OK);
    mask_bits(c, N, bits);
    assert_string_equal(bits, "000001000");
    slm_constraint_reset(c);
    assert_int_equal(slm_constraint_accept(c, LT), SLM_OK);
    mask_bits(c, N, bits);
    assert_string_equal(bits, "000010000");
    assert_int_equal(slm_constraint_accept(c, OTHER), SLM_ERR_INVALID_ARG);
    slm_constraint_destroy(c);
    slm_grammar_destroy(g);
    slm_grammar_vocab_destroy(v);
}

/* gpt-oss's forced call (tools.c): the harmony header's markers as the model's control tokens, the
 * arguments by the tool's schema. */
static void harmony_forced_call(void **unused) {
    (void)unused;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                        "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}]";
    slm_grammar *g = NULL;
    char err[256] = "";
    assert_int_equal(slm_tool_call_grammar("gpt-oss", tools, NULL, &g, err, sizeof err), SLM_OK);
    enum { CH, CONSTRAIN, MSG, HEAD, F, SP, JSON, ARGS, END, N };
    gv_token toks[N] = {
        [CH] = {(const uint8_t *)"<|channel|>", 11, GV_CONTROL},     [CONSTRAIN] = {(const uint8_t *)"<|constrain|>", 13, GV_CONTROL},
        [MSG] = {(const uint8_t *)"<|message|>", 11, GV_CONTROL},    [HEAD] = {(const uint8_t *)"commentary to=functions.", 24, GV_TEXT},
        [F] = {(const uint8_t *)"f", 1, GV_TEXT},                    [SP] = {(const uint8_t *)" ", 1, GV_TEXT},
        [JSON] = {(const uint8_t *)"json", 4, GV_TEXT},              [ARGS] = {(const uint8_t *)"{\"a\":1}", 7, GV_TEXT},
        [END] = {NULL, 0, GV_EOG},
    };
    slm_grammar_vocab *v = NULL;
    assert_int_equal(gv_create(toks, N, NULL, &v), SLM_OK);
    slm_constraint *c = NULL;
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    static const int32_t call[] = {CH, HEAD, F, SP, CONSTRAIN, JSON, MSG, ARGS};
    for (size_t i = 0; i < sizeof call / sizeof call[0]; i++) {
        assert_int_equal(slm_constraint_accept(c, END), SLM_ERR_INVALID_ARG);
        assert_int_equal(slm_constraint_accept(c, call[i]), SLM_OK);
    }
    assert_int_equal(slm_constraint_accept(c, END), SLM_OK); /* the model's <|call|>, an end of generation */
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
}

/* Lazy masks (sampler.c, sample_lazily): at temperature 1 without cuts, where the state's mask is
 * not cached, the sampler draws first and builds the mask only when the token is refused; the
 * draws must follow the filtered distribution (slm_sampler_probs, which always builds the mask), an
 * allowed first draw builds no mask, and greedy keeps the allowed argmax. Each lazy draw below uses
 * a fresh constraint (no mask cached yet). */
static void sampler_lazy_exact(void **unused) {
    (void)unused;
    slm_grammar *g = parse_ok("root ::= [ab] [abc]\n");
    gv_token toks[4] = {{(const uint8_t *)"a", 1, GV_TEXT}, {(const uint8_t *)"b", 1, GV_TEXT},
                        {(const uint8_t *)"c", 1, GV_TEXT}, {(const uint8_t *)"ac", 2, GV_TEXT}};
    slm_grammar_vocab *v = NULL;
    assert_int_equal(gv_create(toks, 4, NULL, &v), SLM_OK);
    slm_constraint *c = NULL;
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    slm_sampler *s = plain_sampler(1.0f, 11);
    slm_sampler_set_constraint(s, c);
    /* at the start "c" (the likeliest) is refused: unfiltered 0.08/0.22/0.61/0.08, filtered 0.21/0.58/0/0.21 */
    float logits[4] = {0.0f, 1.0f, 2.0f, 0.0f};
    float want[4];
    assert_int_equal(slm_sampler_probs(s, logits, 4, NULL, 0, want), SLM_OK);
    assert_true(want[2] == 0.0f && want[0] > 0.2f && want[3] > 0.2f);
    slm_constraint_destroy(c);
    enum { DRAWS = 20000 };
    int seen[4] = {0};
    uint64_t n_masks = 0;
    for (int i = 0; i < DRAWS; i++) {
        assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
        slm_sampler_set_constraint(s, c);
        int32_t t = -1;
        assert_int_equal(slm_sampler_sample(s, logits, 4, NULL, 0, &t), SLM_OK);
        seen[t]++;
        uint64_t walked, cached;
        slm_constraint_stats(c, &walked, &cached);
        n_masks += walked + cached;
        slm_constraint_destroy(c);
    }
    double chi2 = 0;
    for (int t = 0; t < 4; t++) {
        if (want[t] == 0.0f) {
            assert_int_equal(seen[t], 0);
            continue;
        }
        double e = want[t] * (double)DRAWS;
        chi2 += (seen[t] - e) * (seen[t] - e) / e;
    }
    assert_true(chi2 < 16.3); /* chi-square, 2 degrees of freedom: p = 0.0003 */
    /* masks were built only for refused first draws (unfiltered p("c") = 0.61) */
    assert_true(n_masks > DRAWS / 2 && n_masks < DRAWS * 3 / 4);
    /* greedy: the argmax when allowed (no mask built), else the best allowed */
    assert_int_equal(slm_constraint_create(g, v, &c), SLM_OK);
    slm_sampler *gs = plain_sampler(0.0f, 0);
    slm_sampler_set_constraint(gs, c);
    int32_t t = -1;
    float l2[4] = {1.0f, 1.0f, 0.0f, 0.5f};
    assert_int_equal(slm_sampler_sample(gs, l2, 4, NULL, 0, &t), SLM_OK);
    assert_int_equal(t, 0);
    uint64_t walked, cached;
    slm_constraint_stats(c, &walked, &cached);
    assert_int_equal(walked + cached, 0);
    assert_int_equal(slm_sampler_sample(gs, logits, 4, NULL, 0, &t), SLM_OK);
    assert_int_equal(t, 1);
    /* after "a" one character of [abc] is allowed, "ac" no longer is */
    assert_int_equal(slm_constraint_accept(c, 0), SLM_OK);
    float l3[4] = {0.0f, 0.0f, 0.0f, 9.0f};
    assert_int_equal(slm_sampler_sample(gs, l3, 4, NULL, 0, &t), SLM_OK);
    assert_true(t == 0);
    slm_sampler_destroy(gs);
    slm_sampler_destroy(s);
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llamacpp_grammars_parse), cmocka_unit_test(parse_errors),
        cmocka_unit_test(schema_refusals),         cmocka_unit_test(schema_alloc_failures),         cmocka_unit_test(brute_force_masks),
        cmocka_unit_test(brute_force_schema),      cmocka_unit_test(sampler_constraint),
        cmocka_unit_test(sampler_lazy_exact),      cmocka_unit_test(token_references),
        cmocka_unit_test(harmony_forced_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
