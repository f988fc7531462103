/* schema_str.c — strings for the JSON Schema converter (schema_int.h): minLength/maxLength,
 * format and pattern. A pattern compiles through the regex compiler (regex.h) to rules over the
 * JSON string's contents, once per distinct pattern (formats other than date, time, date-time and
 * uuid, which have fixed rules, are regexes too: gr_format_regex); the same rules, parsed as a grammar of their
 * own and run through the matcher, decide whether a property name matches a pattern
 * (patternProperties). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/schema_int.h"

/* Formats written with fixed rules. */
static const struct { const char *f; unsigned p; const char *rule; } fixed_formats[] = {
    {"date", P_DATE, "json-date"}, {"time", P_TIME, "json-time"},
    {"date-time", P_DATETIME, "json-date-time"}, {"uuid", P_UUID, "json-uuid"}};
/* Formats the specification defines: written through their regex (gr_format_regex) when the regex
 * compiler has one, else refused rather than treated as annotations, so no output can fail a
 * validator that checks formats. */
static const char *const spec_formats[] = {"email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6", "uri",
                                           "uri-reference", "iri", "iri-reference", "uri-template", "json-pointer",
                                           "relative-json-pointer", "regex", "duration", NULL};

bool sc_format_known(const char *f) {
    for (size_t i = 0; i < sizeof fixed_formats / sizeof fixed_formats[0]; i++)
        if (!strcmp(f, fixed_formats[i].f)) return true;
    for (int i = 0; spec_formats[i]; i++)
        if (!strcmp(f, spec_formats[i])) return true;
    return false;
}

static sc_regex *regex_entry(conv *c, const char *pattern) {
    for (int i = 0; i < c->n_regex; i++)
        if (!strcmp(c->regex[i].pattern, pattern)) return &c->regex[i];
    if (c->n_regex == c->cap_regex) {
        int cap = c->cap_regex ? 2 * c->cap_regex : 8;
        sc_regex *r = al_realloc(NULL, c->regex, (size_t)c->cap_regex * sizeof *r, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        c->regex = r;
        c->cap_regex = cap;
    }
    sc_regex *r = &c->regex[c->n_regex];
    *r = (sc_regex){al_strdup(NULL, pattern), "", NULL};
    if (!r->pattern) return NULL;
    c->n_regex++;
    return r;
}

static bool regex_error(conv *c, slm_status st, const slm_err *re, const char *path) {
    return sc_fail(c, st == SLM_ERR_NOMEM ? st : st == SLM_ERR_UNSUPPORTED ? st : SLM_ERR_FORMAT,
                   "'pattern' at %s: %s", sc_ptr(path), re->msg);
}

bool sc_pattern_rule(conv *c, const char *pattern, const char *path, char *name) {
    sc_regex *r = regex_entry(c, pattern);
    if (!r) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    if (!r->rule[0]) {
        char rn[SC_NAME];
        sc_new_name(c, rn, "re");
        slm_err re;
        err_clear(&re);
        slm_status st = gr_regex_to_gbnf(pattern, strlen(pattern), rn, &c->out, &re);
        if (st) return regex_error(c, st, &re, path);
        memcpy(r->rule, rn, SC_NAME);
    }
    memcpy(name, r->rule, SC_NAME);
    return true;
}

/* The pattern's grammar on its own (rule "key"), parsed once. */
static sc_regex *pattern_grammar(conv *c, const char *pattern, const char *path) {
    sc_regex *r = regex_entry(c, pattern);
    if (!r) {
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (!r->g) {
        buf b = buf_make(NULL);
        slm_err re;
        err_clear(&re);
        slm_status st = gr_regex_to_gbnf(pattern, strlen(pattern), "key", &b, &re);
        if (!st) st = gr_parse(b.p, b.n, "key", &r->g, &re);
        buf_free(&b);
        if (st) {
            regex_error(c, st, &re, path);
            return NULL;
        }
    }
    return r;
}

#define LEN_INF (1L << 40)

/* The most characters any derivation of rule k writes (LEN_INF when unbounded). */
static long max_len(const gr_grammar *g, int32_t k, long *memo, uint8_t *state) {
    if (state[k] == 2) return memo[k];
    if (state[k] == 1) return LEN_INF; /* a cycle */
    state[k] = 1;
    long best = 0;
    for (int32_t a = 0; a < g->rules[k].n_alt && best < LEN_INF; a++) {
        long n = 0;
        for (int32_t e = g->alts[g->rules[k].alt_off + a]; g->elems[e].type != GR_END && n < LEN_INF; e++)
            n += g->elems[e].type == GR_CLS ? 1 : max_len(g, g->elems[e].val, memo, state);
        if (n > best) best = n;
    }
    state[k] = 2;
    return memo[k] = best < LEN_INF ? best : LEN_INF;
}

/* Whether every string the pattern's rules write satisfies [lo, hi] (hi < 0: none) as a decoded
 * length: lo <= 1 when the pattern does not match the empty string, and hi when no derivation of
 * the JSON-escaped contents is longer (an escape only lengthens the spelling). */
static bool lengths_implied(conv *c, const char *pattern, long lo, long hi, const char *path, bool *implied) {
    *implied = false;
    bool empty = true;
    if (lo > 1 || (lo == 1 && (!sc_pattern_matches(c, pattern, "", path, &empty) || empty))) return !c->failed;
    if (hi < 0) return *implied = true;
    sc_regex *r = pattern_grammar(c, pattern, path);
    if (!r) return false;
    long *memo = al_calloc(NULL, (size_t)r->g->n_rules, sizeof *memo);
    uint8_t *state = al_calloc(NULL, (size_t)r->g->n_rules, 1);
    if (memo && state) *implied = max_len(r->g, r->g->root, memo, state) <= hi;
    al_free(NULL, memo);
    al_free(NULL, state);
    return memo && state ? true : sc_fail(c, SLM_ERR_NOMEM, "out of memory");
}

bool sc_pattern_matches(conv *c, const char *pattern, const char *key, const char *path, bool *match) {
    sc_regex *r = pattern_grammar(c, pattern, path);
    if (!r) return false;
    cJSON *k = cJSON_CreateString(key);
    char *text = k ? cJSON_PrintUnformatted(k) : NULL;
    cJSON_Delete(k);
    if (!text) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    gm m;
    gm_init(&m, r->g);
    int32_t d = gm_start(&m);
    size_t n = strlen(text);
    for (size_t i = 1; i + 1 < n && d >= 0; i++) d = gm_step(&m, d, (uint8_t)text[i]); /* between the quotes */
    bool nomem = d == GM_NOMEM;
    *match = d >= 0 && gm_can_end(&m, d);
    gm_deinit(&m);
    cJSON_free(text);
    return nomem ? sc_fail(c, SLM_ERR_NOMEM, "out of memory") : true;
}

/* For a pattern that is one atom (a class, ., or a one-letter escape) repeated between ^ and $,
 * the same pattern with the repetition narrowed to the length bounds [lo, hi] (hi < 0: none): the
 * strings that match and have a length within bounds (an atom matches one code point). *out is
 * empty when the pattern has another shape; false after a failure (no length fits). */
static bool narrow_pattern(conv *c, const char *p, long lo, long hi, char *out, size_t cap, const char *path) {
    out[0] = 0;
    size_t n = strlen(p), i = 1;
    if (n < 3 || p[0] != '^' || p[n - 1] != '$' || p[n - 2] == '\\') return true;
    if (p[i] == '[') {
        for (i++; i < n - 1 && p[i] != ']'; i++)
            if (p[i] == '\\') i++;
        if (i >= n - 1) return true;
        i++;
    } else if (p[i] == '\\') {
        if (!p[i + 1] || strchr("xucpPk0123456789bB", p[i + 1])) return true;
        i += 2;
    } else if (p[i] == '.') {
        i++;
    } else {
        return true;
    }
    size_t atom_end = i;
    long qlo = 1, qhi = 1;
    if (p[i] == '+') qlo = 1, qhi = -1, i++;
    else if (p[i] == '*') qlo = 0, qhi = -1, i++;
    else if (p[i] == '?') qlo = 0, qhi = 1, i++;
    else if (p[i] == '{') {
        char *e;
        qlo = strtol(p + i + 1, &e, 10);
        if (e == p + i + 1) return true;
        qhi = qlo;
        if (*e == ',') {
            char *e2;
            qhi = strtol(e + 1, &e2, 10);
            if (e2 == e + 1) qhi = -1;
            e = e2;
        }
        if (*e != '}') return true;
        i = (size_t)(e - p) + 1;
    }
    if (i != n - 1) return true;
    long a = qlo > lo ? qlo : lo, b = qhi < 0 ? hi : hi < 0 ? qhi : qhi < hi ? qhi : hi;
    if (b >= 0 && a > b)
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "pattern and minLength/maxLength at %s allow no string", sc_ptr(path));
    if (b > GR_MAX_REPEAT) b = GR_MAX_REPEAT;
    if (b < 0) snprintf(out, cap, "^%.*s{%ld,}$", (int)(atom_end - 1), p + 1, a);
    else snprintf(out, cap, "^%.*s{%ld,%ld}$", (int)(atom_end - 1), p + 1, a, b);
    return true;
}

bool sc_gen_string(conv *c, const cJSON *s, const char *path, char *name) {
    const cJSON *fmt = sc_get(s, "format"), *pat = sc_get(s, "pattern");
    long lo = 0, hi = -1;
    if (!sc_count(c, s, "minLength", path, &lo) || !sc_count(c, s, "maxLength", path, &hi)) return false;
    if (hi >= 0 && hi < lo) return sc_fail(c, SLM_ERR_FORMAT, "maxLength below minLength at %s", sc_ptr(path));
    bool has_len = lo > 0 || hi >= 0;
    if (fmt && !cJSON_IsString(fmt)) return sc_fail(c, SLM_ERR_FORMAT, "'format' at %s must be a string", sc_ptr(path));
    if (fmt && !sc_format_known(fmt->valuestring)) fmt = NULL; /* other formats: annotations */
    if (pat) {
        if (!cJSON_IsString(pat)) return sc_fail(c, SLM_ERR_FORMAT, "'pattern' at %s must be a string", sc_ptr(path));
        char narrowed[1100];
        const char *pattern = pat->valuestring;
        if (has_len && strlen(pattern) < 1000) {
            if (!narrow_pattern(c, pattern, lo, hi, narrowed, sizeof narrowed, path)) return false;
            if (narrowed[0]) pattern = narrowed, has_len = false;
        }
        bool implied = false;
        if (has_len && !lengths_implied(c, pattern, lo, hi, path, &implied)) return false;
        if (implied) has_len = false;
        if (has_len)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "pattern together with minLength/maxLength at %s is not supported",
                           sc_ptr(path));
        if (fmt)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "pattern together with format at %s is not supported", sc_ptr(path));
        char re[SC_NAME];
        if (!sc_pattern_rule(c, pattern, path, re)) return false;
        buf body = buf_make(NULL);
        buf_printf(&body, "\"\\\"\" %s \"\\\"\" ws", re);
        c->prims |= P_WS;
        bool ok = sc_emit_new(c, name, "pattern", &body);
        buf_free(&body);
        return ok;
    }
    if (fmt) {
        for (size_t i = 0; i < sizeof fixed_formats / sizeof fixed_formats[0]; i++)
            if (!strcmp(fmt->valuestring, fixed_formats[i].f)) {
                if (has_len)
                    return sc_fail(c, SLM_ERR_UNSUPPORTED, "minLength/maxLength together with format at %s", sc_ptr(path));
                c->prims |= fixed_formats[i].p;
                snprintf(name, SC_NAME, "%s", fixed_formats[i].rule);
                return true;
            }
        const char *re = gr_format_regex(fmt->valuestring);
        if (!re) return sc_fail(c, SLM_ERR_UNSUPPORTED, "format '%s' at %s is not supported", fmt->valuestring, sc_ptr(path));
        if (has_len)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "minLength/maxLength together with format at %s", sc_ptr(path));
        char rule[SC_NAME];
        if (!sc_pattern_rule(c, re, path, rule)) return false;
        buf body = buf_make(NULL);
        buf_printf(&body, "\"\\\"\" %s \"\\\"\" ws", rule);
        c->prims |= P_WS;
        bool ok = sc_emit_new(c, name, "format", &body);
        buf_free(&body);
        return ok;
    }
    if (lo == 0 && hi < 0) {
        c->prims |= P_STRING;
        snprintf(name, SC_NAME, "json-string");
        return true;
    }
    buf body = buf_make(NULL);
    if (hi < 0) buf_printf(&body, "\"\\\"\" json-char{%ld,} \"\\\"\" ws", lo);
    else buf_printf(&body, "\"\\\"\" json-char{%ld,%ld} \"\\\"\" ws", lo, hi);
    c->prims |= P_CHAR | P_WS;
    bool ok = sc_emit_new(c, name, "string", &body);
    buf_free(&body);
    return ok;
}
