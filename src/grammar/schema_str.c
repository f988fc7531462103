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

/* Python's re (which validators such as jsonschema run) and ECMAScript (which the regex compiler
 * follows) disagree on \s \S \D \W and, inside negated classes, \d \w: Python's are Unicode-wide.
 * Each is replaced by explicit ranges that both readings accept (outside classes and in a class)
 * or that cover both (in a negated class), so every string the grammar derives matches under
 * either reading: \s the white space both count, \S what neither counts as space, \D and \W their
 * ASCII part. */
#define WS_BOTH "\\t-\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
#define WS_EITHER WS_BOTH "\\x1c-\\x1f\\u0085\\ufeff"
#define NOT_WS_EITHER                                                                                       \
    "\\x00-\\x08\\x0e-\\x1b!-\\u0084\\u0086-\\u009f\\u00a1-\\u167f\\u1681-\\u1fff\\u200b-\\u2027\\u202a-\\u202e" \
    "\\u2030-\\u205e\\u2060-\\u2fff\\u3001-\\ufefe\\uff00-\\u{10ffff}"
#define NOT_WS_BOTH                                                                                          \
    "\\x00-\\x08\\x0e-\\x1f!-\\u009f\\u00a1-\\u167f\\u1681-\\u1fff\\u200b-\\u2027\\u202a-\\u202e\\u2030-\\u205e" \
    "\\u2060-\\u2fff\\u3001-\\u{10ffff}"
#define NON_ASCII "\\u0080-\\u{10ffff}"

static const char *class_text(char e, bool negated) {
    switch (e) {
    case 's': return negated ? WS_EITHER : WS_BOTH;
    case 'S': return negated ? NOT_WS_BOTH : NOT_WS_EITHER;
    case 'D': return negated ? "\\x00-/:-\\u{10ffff}" : "\\x00-/:-\\x7f";
    case 'W': return negated ? "\\x00-/:-@\\[-\\^`{-\\u{10ffff}" : "\\x00-/:-@\\[-\\^`{-\\x7f";
    case 'd': return negated ? "0-9" NON_ASCII : NULL;
    case 'w': return negated ? "A-Za-z0-9_" NON_ASCII : NULL;
    default: return NULL;
    }
}

/* p with those escapes replaced, appended to out. */
static void python_safe(const char *p, buf *out) {
    size_t n = strlen(p);
    int in_class = 0; /* 0: outside, 1: in a class, 2: in a negated class */
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        const char *rep = NULL;
        if (ch == '\\' && i + 1 < n) {
            rep = class_text(p[i + 1], in_class == 2);
            if (!rep) buf_put(out, p + i, 2);
            i++;
        } else {
            if (ch == '[' && !in_class) in_class = i + 1 < n && p[i + 1] == '^' ? 2 : 1;
            else if (ch == ']' && in_class) in_class = 0;
            buf_putc(out, ch);
        }
        if (rep) buf_printf(out, in_class ? "%s" : "[%s]", rep);
    }
}

/* The pattern's rules (python_safe first) under rule name into out. */
static slm_status compile_pattern(const char *pattern, const char *name, buf *out, slm_err *re) {
    buf safe = buf_make(out->a);
    python_safe(pattern, &safe);
    slm_status st = safe.oom ? err_set(re, SLM_ERR_NOMEM, "out of memory")
                             : gr_regex_to_gbnf(safe.p ? safe.p : "", safe.n, name, out, re);
    buf_free(&safe);
    return st;
}

static sc_regex *regex_entry(conv *c, const char *pattern) {
    for (int i = 0; i < c->n_regex; i++)
        if (!strcmp(c->regex[i].pattern, pattern)) return &c->regex[i];
    if (c->n_regex == c->cap_regex) {
        int cap = c->cap_regex ? 2 * c->cap_regex : 8;
        sc_regex *r = al_realloc(c->a, c->regex, (size_t)c->cap_regex * sizeof *r, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        c->regex = r;
        c->cap_regex = cap;
    }
    sc_regex *r = &c->regex[c->n_regex];
    *r = (sc_regex){al_strdup(c->a, pattern), "", NULL};
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
        slm_status st = compile_pattern(pattern, rn, &c->out, &re);
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
        buf b = buf_make(c->a);
        slm_err re;
        err_clear(&re);
        slm_status st = compile_pattern(pattern, "key", &b, &re);
        if (!st) st = gr_parse(b.p, b.n, "key", c->a, &r->g, &re);
        buf_free(&b);
        if (st) {
            regex_error(c, st, &re, path);
            return NULL;
        }
    }
    return r;
}

#define LEN_INF (1L << 40)

/* Lengths (code points) of the strings a regex matches, read from its text: min and max over an
 * alternation, sums over a sequence, an atom (character, class, escape, .) is 1, a quantifier
 * multiplies. Used for whole-string matches (pattern anchored by ^ and $). bad: a construct this
 * reader does not follow (the regex compiler may still accept it). */
typedef struct rlen {
    const char *p;
    size_t i, n;
    bool bad;
} rlen;

static long add_len(long a, long b) { return a >= LEN_INF || b >= LEN_INF ? LEN_INF : a + b; }
static long mul_len(long a, long k) { return a == 0 || k == 0 ? 0 : a >= LEN_INF || k >= LEN_INF ? LEN_INF : a * k < LEN_INF ? a * k : LEN_INF; }

static void rl_alt(rlen *r, long *mn, long *mx);

/* A quantifier at r->i (or none): its bounds. */
static void rl_quant(rlen *r, long *qlo, long *qhi) {
    *qlo = *qhi = 1;
    if (r->i >= r->n) return;
    char q = r->p[r->i];
    if (q == '*' || q == '+' || q == '?') {
        *qlo = q == '+';
        *qhi = q == '?' ? 1 : LEN_INF;
        r->i++;
    } else if (q == '{') {
        size_t j = r->i + 1;
        long a = 0, b;
        bool digits = false;
        while (j < r->n && r->p[j] >= '0' && r->p[j] <= '9') a = a * 10 + (r->p[j++] - '0'), digits = true;
        if (!digits || a > 100000) return; /* a literal { */
        b = a;
        if (j < r->n && r->p[j] == ',') {
            j++;
            if (j < r->n && r->p[j] >= '0' && r->p[j] <= '9') {
                b = 0;
                while (j < r->n && r->p[j] >= '0' && r->p[j] <= '9' && b <= 100000) b = b * 10 + (r->p[j++] - '0');
            } else {
                b = LEN_INF;
            }
        }
        if (j >= r->n || r->p[j] != '}') return;
        r->i = j + 1;
        *qlo = a, *qhi = b;
    } else {
        return;
    }
    if (r->i < r->n && r->p[r->i] == '?') r->i++; /* lazy: the same strings */
}

static void rl_seq(rlen *r, long *mn, long *mx) {
    *mn = *mx = 0;
    while (r->i < r->n && !r->bad && r->p[r->i] != '|' && r->p[r->i] != ')') {
        long amn = 1, amx = 1;
        char ch = r->p[r->i];
        if (ch == '^' || ch == '$') {
            r->i++;
            amn = amx = 0;
        } else if (ch == '(') {
            r->i++;
            if (r->i < r->n && r->p[r->i] == '?') {
                if (r->i + 1 < r->n && r->p[r->i + 1] == ':') r->i += 2;
                else if (r->i + 2 < r->n && r->p[r->i + 1] == '<' && r->p[r->i + 2] != '=' && r->p[r->i + 2] != '!') {
                    while (r->i < r->n && r->p[r->i] != '>') r->i++;
                    r->i++;
                } else {
                    r->bad = true; /* lookaround */
                    return;
                }
            }
            rl_alt(r, &amn, &amx);
            if (r->i >= r->n || r->p[r->i] != ')') {
                r->bad = true;
                return;
            }
            r->i++;
        } else if (ch == '[') {
            for (r->i++; r->i < r->n && r->p[r->i] != ']'; r->i++)
                if (r->p[r->i] == '\\') r->i++;
            if (r->i >= r->n) {
                r->bad = true;
                return;
            }
            r->i++;
        } else if (ch == '\\') {
            char e = r->i + 1 < r->n ? r->p[r->i + 1] : 0;
            if ((e >= '1' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || !e) {
                r->bad = true; /* backreferences, word boundaries */
                return;
            }
            r->i += 2;
            if (e == 'u' && r->i < r->n && r->p[r->i] == '{') {
                while (r->i < r->n && r->p[r->i] != '}') r->i++;
                r->i++;
            } else if (e == 'u' || e == 'x' || e == 'c' || e == 'p' || e == 'P') {
                size_t k = e == 'u' ? 4 : e == 'x' ? 2 : 1;
                if ((e == 'p' || e == 'P') && r->i < r->n && r->p[r->i] == '{')
                    while (r->i < r->n && r->p[r->i] != '}') r->i++;
                r->i += k;
            }
        } else {
            r->i++;
            while (r->i < r->n && ((unsigned char)r->p[r->i] & 0xC0) == 0x80) r->i++; /* one code point */
        }
        long qlo, qhi;
        rl_quant(r, &qlo, &qhi);
        *mn = add_len(*mn, mul_len(amn, qlo));
        *mx = add_len(*mx, mul_len(amx, qhi));
    }
}

static void rl_alt(rlen *r, long *mn, long *mx) {
    rl_seq(r, mn, mx);
    while (!r->bad && r->i < r->n && r->p[r->i] == '|') {
        long a, b;
        r->i++;
        rl_seq(r, &a, &b);
        if (a < *mn) *mn = a;
        if (b > *mx) *mx = b;
    }
}

/* Whether every top-level branch of p is anchored at both ends (the match is the whole string). */
static bool anchored(const char *p) {
    size_t n = strlen(p);
    int depth = 0;
    bool start = true, ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        char ch = p[i];
        if (start) ok = ch == '^', start = false;
        if (ch == '\\') {
            i++;
            continue;
        }
        if (ch == '[') {
            for (i++; i < n && p[i] != ']'; i++)
                if (p[i] == '\\') i++;
            continue;
        }
        if (ch == '(') depth++;
        if (ch == ')') depth--;
        if (ch == '|' && depth == 0) ok = i > 0 && p[i - 1] == '$', start = true;
    }
    return ok && !start && n >= 2 && p[n - 1] == '$' && p[n - 2] != '\\';
}

/* The lengths of whole strings p matches: [*mn, *mx] (*mx LEN_INF when unanchored or unbounded). */
static bool pattern_lengths(const char *p, long *mn, long *mx) {
    rlen r = {p, 0, strlen(p), false};
    rl_alt(&r, mn, mx);
    if (r.bad || r.i != r.n) return false;
    if (!anchored(p)) *mx = LEN_INF;
    return true;
}

/* p with every unbounded quantifier (* + {m,}) given the upper bound b (at least its lower one):
 * a sub-language. Into out (cap bytes); false when it does not fit. */
static bool cap_quantifiers(const char *p, long b, char *out, size_t cap) {
    size_t n = strlen(p), o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        char rep[48] = "";
        if (ch == '\\' && i + 1 < n) {
            if (o + 2 >= cap) return false;
            out[o++] = ch, out[o++] = p[++i];
            continue;
        }
        if (ch == '[') {
            size_t j = i + 1;
            while (j < n && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
            if (j >= n || o + (j - i + 1) >= cap) return false;
            memcpy(out + o, p + i, j - i + 1), o += j - i + 1, i = j;
            continue;
        }
        if ((ch == '*' || ch == '+') && i > 0 && p[i - 1] != '(') {
            snprintf(rep, sizeof rep, "{%d,%ld}", ch == '+', b > 0 || ch == '*' ? (b > 1 || ch == '*' ? b : 1) : 1);
        } else if (ch == '{') {
            size_t j = i + 1;
            long a = 0;
            while (j < n && p[j] >= '0' && p[j] <= '9') a = a * 10 + (p[j++] - '0');
            if (j > i + 1 && j + 1 < n && p[j] == ',' && p[j + 1] == '}') {
                snprintf(rep, sizeof rep, "{%ld,%ld}", a, b > a ? b : a);
                i = j + 1;
            }
        }
        size_t k = rep[0] ? strlen(rep) : 1;
        if (o + k >= cap) return false;
        if (rep[0]) memcpy(out + o, rep, k);
        else out[o] = ch;
        o += k;
    }
    out[o] = 0;
    return true;
}

/* A pattern (p itself, or p with its unbounded repetitions capped) whose whole-string matches all
 * have lengths in [lo, hi] (hi < 0: none), into out; false (out empty) when none is found. */
static bool fit_lengths(const char *p, long lo, long hi, char *out, size_t cap) {
    long mn, mx;
    out[0] = 0;
    if (!pattern_lengths(p, &mn, &mx) || mn < lo) return false;
    if (hi < 0 || mx <= hi) return snprintf(out, cap, "%s", p) < (int)cap;
    if (!anchored(p)) return false;
    for (long b = hi; b >= 1; b /= 2) {
        if (!cap_quantifiers(p, b, out, cap) || !pattern_lengths(out, &mn, &mx)) break;
        if (mn >= lo && mx <= hi) return true;
    }
    out[0] = 0;
    return false;
}

bool sc_pattern_matches(conv *c, const char *pattern, const char *key, const char *path, bool *match) {
    sc_regex *r = pattern_grammar(c, pattern, path);
    if (!r) return false;
    cJSON *k = cJSON_CreateString(key);
    char *text = k ? cJSON_PrintUnformatted(k) : NULL;
    cJSON_Delete(k);
    if (!text) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    gm m;
    gm_init(&m, r->g, c->a);
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
        char fitted[2100];
        if (has_len && strlen(pattern) < 1000 && fit_lengths(pattern, lo, hi, fitted, sizeof fitted))
            pattern = fitted, has_len = false;
        if (has_len)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "pattern together with minLength/maxLength at %s is not supported",
                           sc_ptr(path));
        if (fmt)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "pattern together with format at %s is not supported", sc_ptr(path));
        char re[SC_NAME];
        if (!sc_pattern_rule(c, pattern, path, re)) return false;
        buf body = buf_make(c->a);
        buf_printf(&body, "\"\\\"\" %s \"\\\"\" ws", re);
        c->prims |= P_WS;
        bool ok = sc_emit_new(c, name, "pattern", &body);
        buf_free(&body);
        return ok;
    }
    if (fmt) {
        for (size_t i = 0; i < sizeof fixed_formats / sizeof fixed_formats[0] && !has_len; i++)
            if (!strcmp(fmt->valuestring, fixed_formats[i].f)) {
                c->prims |= fixed_formats[i].p;
                snprintf(name, SC_NAME, "%s", fixed_formats[i].rule);
                return true;
            }
        const char *re = gr_format_regex(fmt->valuestring);
        if (!re) return sc_fail(c, SLM_ERR_UNSUPPORTED, "format '%s' at %s is not supported", fmt->valuestring, sc_ptr(path));
        char fitted[8192]; /* lengths: the format's regex fitted to them, as for a pattern */
        if (has_len && (strlen(re) >= 2000 || !fit_lengths(re, lo, hi, fitted, sizeof fitted)))
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "minLength/maxLength together with format at %s", sc_ptr(path));
        if (has_len) re = fitted;
        char rule[SC_NAME];
        if (!sc_pattern_rule(c, re, path, rule)) return false;
        buf body = buf_make(c->a);
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
    buf body = buf_make(c->a);
    if (hi < 0) buf_printf(&body, "\"\\\"\" json-char{%ld,} \"\\\"\" ws", lo);
    else buf_printf(&body, "\"\\\"\" json-char{%ld,%ld} \"\\\"\" ws", lo, hi);
    c->prims |= P_CHAR | P_WS;
    bool ok = sc_emit_new(c, name, "string", &body);
    buf_free(&body);
    return ok;
}
