/* schema.c — JSON Schema -> GBNF text (gr_schema_to_gbnf), read with cJSON: the driver, scalars
 * (strings, numbers, enum/const), unions (type lists, anyOf, oneOf) and $ref. Objects and arrays
 * are schema_obj.c, allOf merging schema_merge.c, number ranges schema_num.c. The subset and what
 * each keyword becomes are in docs/grammar.md §JSON Schema. Every keyword either constrains the
 * grammar, is an annotation (a keyword outside the vocabulary, as the specification says for
 * drafts 4 to 2020-12; refused too under GR_SCHEMA_STRICT), or is refused with its name and JSON
 * pointer: nothing that constrains is silently dropped. Generated values may be followed by a
 * little whitespace (rule ws); every string the grammar derives is JSON that validates against
 * the schema (the grammar may derive fewer values than validate: docs/grammar.md says where). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/regex.h"
#include "grammar/schema_int.h"
#include "grammar/schema_num.h"

bool sc_fail(conv *c, slm_status st, const char *fmt, ...) {
    if (st == SLM_ERR_NOMEM) c->oom = true;
    if (c->failed) return false;
    c->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(c->e, st, "json schema: %s", msg);
    return false;
}

const char *sc_ptr(const char *path) { return *path ? path : "/"; }

static void ptr_tok(char *o, size_t cap, size_t *n, const char *t) {
    for (; *t && *n + 3 < cap; t++) {
        if (*t == '~') o[(*n)++] = '~', o[(*n)++] = '0';
        else if (*t == '/') o[(*n)++] = '~', o[(*n)++] = '1';
        else o[(*n)++] = *t;
    }
    o[*n] = 0;
}

void sc_sub(char *out, const char *path, const char *a, const char *b) {
    size_t n = (size_t)snprintf(out, SC_PATH, "%s/", path);
    if (n >= SC_PATH) n = SC_PATH - 1;
    ptr_tok(out, SC_PATH, &n, a);
    if (b && n + 2 < SC_PATH) out[n++] = '/', out[n] = 0, ptr_tok(out, SC_PATH, &n, b);
}

void sc_new_name(conv *c, char *name, const char *hint) { snprintf(name, SC_NAME, "%s-%d", hint, c->n_rules++); }

bool sc_emit(conv *c, const char *name, const buf *body) {
    if (body->oom) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    if (c->n_rules > SC_MAX_RULES) return sc_fail(c, SLM_ERR_RANGE, "schema needs more than %d rules", SC_MAX_RULES);
    buf_printf(&c->out, "%s ::= %s\n", name, body->p ? body->p : "");
    if (c->out.n > GR_MAX_TEXT)
        return sc_fail(c, SLM_ERR_RANGE, "the grammar grows past %zu bytes of GBNF", GR_MAX_TEXT);
    return true;
}

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

bool sc_emit_new(conv *c, char *name, const char *hint, const buf *body) {
    if (body->oom || !body->p) return sc_emit(c, name, body);
    if (2 * (c->n_shared + 1) > c->cap_shared) { /* grow (rehash) */
        int cap = c->cap_shared ? 2 * c->cap_shared : 256;
        sc_shared *t = al_calloc(c->a, (size_t)cap, sizeof *t);
        if (!t) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        for (int i = 0; i < c->cap_shared; i++) {
            if (!c->shared[i].body) continue;
            size_t j = c->shared[i].hash & (size_t)(cap - 1);
            while (t[j].body) j = (j + 1) & (size_t)(cap - 1);
            t[j] = c->shared[i];
        }
        al_free(c->a, c->shared);
        c->shared = t;
        c->cap_shared = cap;
    }
    uint64_t h = fnv(body->p, body->n);
    size_t j = h & (size_t)(c->cap_shared - 1);
    for (; c->shared[j].body; j = (j + 1) & (size_t)(c->cap_shared - 1))
        if (c->shared[j].hash == h && !strcmp(c->shared[j].body, body->p)) {
            memcpy(name, c->shared[j].name, SC_NAME);
            return true;
        }
    sc_new_name(c, name, hint);
    if (!sc_emit(c, name, body)) return false;
    char *copy = al_strndup(c->a, body->p, body->n);
    if (!copy) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    c->shared[j].hash = h;
    c->shared[j].body = copy;
    memcpy(c->shared[j].name, name, SC_NAME);
    c->n_shared++;
    return true;
}

void sc_lit_body(buf *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') buf_printf(b, "\\%c", *p);
        else if (*p == '\n') buf_puts(b, "\\n");
        else if (*p == '\r') buf_puts(b, "\\r");
        else if (*p == '\t') buf_puts(b, "\\t");
        else if (*p < 0x20 || *p == 0x7F) buf_printf(b, "\\x%02X", *p);
        else buf_putc(b, (char)*p);
    }
}

bool sc_json_lit(conv *c, buf *b, const cJSON *v) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    buf_putc(b, '"');
    sc_lit_body(b, t);
    buf_putc(b, '"');
    cJSON_free(t);
    return true;
}

const cJSON *sc_get(const cJSON *s, const char *key) {
    return cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, key) : NULL;
}

cJSON *sc_own(conv *c, cJSON *v) {
    if (!v) {
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cJSON_AddItemToArray(c->owned, v);
    return v;
}

bool sc_count(conv *c, const cJSON *s, const char *key, const char *path, long *out) {
    const cJSON *v = sc_get(s, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
        return sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s must be a non-negative integer", key, sc_ptr(path));
    if (v->valuedouble > GR_MAX_REPEAT && !strncmp(key, "max", 3)) { /* fewer than allowed: a subset */
        *out = GR_MAX_REPEAT;
        return true;
    }
    if (v->valuedouble > GR_MAX_REPEAT)
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "'%s' at %s is above %d", key, sc_ptr(path), GR_MAX_REPEAT);
    *out = (long)v->valuedouble;
    return true;
}

/* ---- the vocabulary ------------------------------------------------------------------------------ */

/* Keywords of drafts 4 to 2020-12 that never constrain (annotations and containers). */
static const char *const annotations[] = {
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "id", "$defs", "definitions",
    "deprecated", "readOnly", "writeOnly", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary",
    "contentMediaType", "contentEncoding", "contentSchema", "then", "else", NULL};
/* Keywords that constrain; each is enforced or refused by name. */
static const char *const constraining[] = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "items", "additionalItems", "prefixItems", "maxItems",
    "minItems", "uniqueItems", "contains", "minContains", "maxContains", "maxProperties", "minProperties",
    "required", "properties", "patternProperties", "additionalProperties", "dependencies", "dependentRequired",
    "dependentSchemas", "propertyNames", "if", "allOf", "anyOf", "oneOf", "not", "$ref", "$dynamicRef",
    "$recursiveRef", "unevaluatedItems", "unevaluatedProperties", NULL};
/* Constraining keywords the converter cannot enforce anywhere. ("then"/"else" only act with "if".) */
static const char *const refused[] = {"$dynamicRef", "$recursiveRef", "unevaluatedItems",
                                      "unevaluatedProperties", "contains", "minContains", "maxContains", NULL};

static bool in_list(const char *const *l, const char *k) {
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], k)) return true;
    return false;
}

bool sc_constraining(const char *k) { return in_list(constraining, k); }

static unsigned type_bit(const char *t) {
    static const struct { const char *n; unsigned b; } ts[] = {
        {"null", T_NULL}, {"boolean", T_BOOL}, {"object", T_OBJ}, {"array", T_ARR},
        {"string", T_STR}, {"integer", T_INT}, {"number", T_NUM | T_INT}};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (!strcmp(t, ts[i].n)) return ts[i].b;
    return 0;
}

unsigned sc_types(const cJSON *s) {
    if (!cJSON_IsObject(s)) return T_ALL;
    const cJSON *type = sc_get(s, "type");
    if (cJSON_IsString(type)) return type_bit(type->valuestring);
    if (cJSON_IsArray(type)) {
        unsigned b = 0;
        for (const cJSON *t = type->child; t; t = t->next)
            if (cJSON_IsString(t)) b |= type_bit(t->valuestring);
        return b;
    }
    static const struct { const char *k; unsigned b; } infer[] = {
        {"properties", T_OBJ}, {"required", T_OBJ}, {"additionalProperties", T_OBJ}, {"patternProperties", T_OBJ},
        {"minProperties", T_OBJ}, {"maxProperties", T_OBJ}, {"propertyNames", T_OBJ}, {"dependencies", T_OBJ},
        {"dependentRequired", T_OBJ}, {"items", T_ARR}, {"prefixItems", T_ARR}, {"additionalItems", T_ARR},
        {"minItems", T_ARR}, {"maxItems", T_ARR}, {"uniqueItems", T_ARR}, {"minLength", T_STR},
        {"maxLength", T_STR}, {"pattern", T_STR}, {"format", T_STR}, {"minimum", T_NUM | T_INT},
        {"maximum", T_NUM | T_INT}, {"exclusiveMinimum", T_NUM | T_INT}, {"exclusiveMaximum", T_NUM | T_INT},
        {"multipleOf", T_NUM | T_INT}};
    unsigned b = 0;
    for (size_t i = 0; i < sizeof infer / sizeof infer[0]; i++)
        if (sc_get(s, infer[i].k)) b |= infer[i].b;
    return b ? b : T_ALL;
}

/* ---- numbers ------------------------------------------------------------------------------------- */

typedef struct bounds {
    bool has_lo, has_hi, lx, hx; /* lx/hx: strict */
    double lo, hi;
    double mult; /* 0: none */
} bounds;

/* Reads minimum/maximum/exclusive* (draft 4's boolean and later numeric forms) and multipleOf. */
static bool read_bounds(conv *c, const cJSON *s, const char *path, bounds *b) {
    *b = (bounds){0};
    static const char *const keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
    const cJSON *v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = sc_get(s, keys[i]);
        if (v[i] && !cJSON_IsNumber(v[i]) && !(i >= 2 && i <= 3 && cJSON_IsBool(v[i])))
            return sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s must be a number", keys[i], sc_ptr(path));
        if (v[i] && cJSON_IsNumber(v[i]) && !isfinite(v[i]->valuedouble))
            return sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s is not finite", keys[i], sc_ptr(path));
    }
    for (int side = 0; side < 2; side++) {
        const cJSON *inc = v[side], *exc = v[2 + side];
        bool has = false, strict = false;
        double x = 0;
        if (inc) has = true, x = inc->valuedouble;
        if (cJSON_IsTrue(exc) && inc) strict = true;
        if (cJSON_IsNumber(exc)) {
            double y = exc->valuedouble;
            if (!has || (side == 0 ? y >= x : y <= x)) x = y, strict = true;
            has = true;
        }
        if (side == 0) b->has_lo = has, b->lo = x, b->lx = strict;
        else b->has_hi = has, b->hi = x, b->hx = strict;
    }
    if (v[4]) {
        b->mult = v[4]->valuedouble;
        if (!(b->mult > 0)) return sc_fail(c, SLM_ERR_FORMAT, "'multipleOf' at %s must be above 0", sc_ptr(path));
    }
    return true;
}

static bool bounds_ok(const bounds *b, double x) {
    if (b->has_lo && (b->lx ? !(x > b->lo) : !(x >= b->lo))) return false;
    if (b->has_hi && (b->hx ? !(x < b->hi) : !(x <= b->hi))) return false;
    if (b->mult > 0 && fmod(x, b->mult) != 0) return false;
    return true;
}

#define MULT_ENUM_MAX 256 /* multiples listed one by one */

/* Integers within b (as integers are: ceil/floor of the bounds), clamped to 16 digits. */
static bool gen_integer(conv *c, const bounds *b, const char *path, char *name) {
    if (!b->has_lo && !b->has_hi && (b->mult == 0 || b->mult == 1)) {
        c->prims |= P_INT;
        snprintf(name, SC_NAME, "json-integer");
        return true;
    }
    double lo = -(double)SN_INT_MAX, hi = (double)SN_INT_MAX;
    if (b->has_lo) lo = fmax(lo, b->lx ? floor(b->lo) + 1 : ceil(b->lo));
    if (b->has_hi) hi = fmin(hi, b->hx ? ceil(b->hi) - 1 : floor(b->hi));
    if (lo > hi) return sc_fail(c, SLM_ERR_UNSUPPORTED, "the bounds at %s allow no integer of at most 16 digits", sc_ptr(path));
    long long ilo = (long long)lo, ihi = (long long)hi;
    buf body = buf_make(c->a);
    if (b->mult > 0 && b->mult != 1) {
        if (b->mult != floor(b->mult) || b->mult > (double)SN_INT_MAX) {
            buf_free(&body);
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "'multipleOf' %g at %s: only integer multiples are supported",
                           b->mult, sc_ptr(path));
        }
        long long m = (long long)b->mult;
        long long first = ilo >= 0 ? (ilo + m - 1) / m * m : -((-ilo) / m * m);
        if (first > ihi) {
            buf_free(&body);
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "no multiple of %lld within the bounds at %s", m, sc_ptr(path));
        }
        if ((ihi - first) / m >= MULT_ENUM_MAX) {
            buf_free(&body);
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "'multipleOf' at %s: more than %d multiples within the bounds "
                           "(bound the range to list them)", sc_ptr(path), MULT_ENUM_MAX);
        }
        buf_puts(&body, "( ");
        for (long long x = first; x <= ihi; x += m) buf_printf(&body, "%s\"%lld\"", x == first ? "" : " | ", x);
        buf_puts(&body, " ) ws");
    } else {
        sn_int_range(&body, ilo, ihi);
        buf_puts(&body, " ws");
    }
    c->prims |= P_WS;
    bool ok = sc_emit_new(c, name, "int", &body);
    buf_free(&body);
    return ok;
}

/* A decimal bound for sn_dec_range; *none: it lies beyond what the grammar writes anyway. */
static bool dec_bound(conv *c, double v, bool upper, sn_dec *d, bool *none, const char *path) {
    *none = false;
    if (sn_dec_of(v, d)) return true;
    if (fabs(v) >= 1e20 && (upper ? v > 0 : v < 0)) {
        *none = true;
        return true;
    }
    return sc_fail(c, SLM_ERR_UNSUPPORTED, "the bound %g at %s has more than 20 digits", v, sc_ptr(path));
}

static bool gen_number(conv *c, const bounds *b, const char *path, char *name) {
    if (b->mult > 0 && b->mult != 1 && b->mult != floor(b->mult))
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "'multipleOf' %g at %s: only integer multiples are supported",
                       b->mult, sc_ptr(path));
    if (b->mult > 0) return gen_integer(c, b, path, name); /* multiples of an integer: integers */
    if (!b->has_lo && !b->has_hi) {
        c->prims |= P_NUMBER;
        snprintf(name, SC_NAME, "json-number");
        return true;
    }
    sn_dec lo, hi;
    bool no_lo = !b->has_lo, no_hi = !b->has_hi, none;
    if (b->has_lo) {
        if (!dec_bound(c, b->lo, false, &lo, &none, path)) return false;
        no_lo |= none;
    }
    if (b->has_hi) {
        if (!dec_bound(c, b->hi, true, &hi, &none, path)) return false;
        no_hi |= none;
    }
    /* digits: a strict bound stays strict after the validator reads both sides as doubles when the
     * generated decimals have at most 15 significant digits (distinct such decimals are distinct
     * doubles) */
    int need_i = 0, need_f = 0;
    const sn_dec *ds[2] = {no_lo ? NULL : &lo, no_hi ? NULL : &hi};
    for (int i = 0; i < 2; i++)
        if (ds[i]) {
            int ni = strcmp(ds[i]->ip, "0") ? (int)strlen(ds[i]->ip) : 0, nf = (int)strlen(ds[i]->fp);
            need_i = ni > need_i ? ni : need_i;
            need_f = nf > need_f ? nf : need_f;
        }
    bool strict = (!no_lo && b->lx) || (!no_hi && b->hx);
    int imax = 15, fmax = need_f > 15 ? need_f : 15;
    if (strict) {
        imax = need_i > 9 ? need_i : 9;
        fmax = 15 - imax > need_f ? 15 - imax : need_f;
        if (imax + fmax > 15)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "an exclusive bound at %s with more than 15 significant digits",
                           sc_ptr(path));
    }
    if (need_i > 16) imax = 16;
    buf body = buf_make(c->a);
    if (!sn_dec_range(&body, no_lo ? NULL : &lo, b->lx, no_hi ? NULL : &hi, b->hx, imax, fmax)) {
        buf_free(&body);
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "the bounds at %s allow no number", sc_ptr(path));
    }
    buf_puts(&body, " ws");
    c->prims |= P_WS;
    bool ok = sc_emit_new(c, name, "num", &body);
    buf_free(&body);
    return ok;
}

/* ---- enum / const -------------------------------------------------------------------------------- */

static unsigned value_type(const cJSON *v) {
    if (cJSON_IsString(v)) return T_STR;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsNull(v)) return T_NULL;
    if (cJSON_IsObject(v)) return T_OBJ;
    if (cJSON_IsArray(v)) return T_ARR;
    return v->valuedouble == floor(v->valuedouble) ? T_INT : T_NUM;
}

/* Whether v satisfies the keywords of s beside enum/const. The converter checks types, lengths,
 * counts, numeric bounds and required; any other constraining keyword next to enum is refused. */
static bool enum_value_ok(conv *c, const cJSON *s, const cJSON *v, const char *path, bool *ok) {
    static const char *const checked[] = {"type", "enum", "const", "minLength", "maxLength", "minimum", "maximum",
                                          "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
                                          "maxItems", "minProperties", "maxProperties", "required", "format", "pattern",
                                          NULL};
    for (const cJSON *k = s->child; k; k = k->next)
        if (sc_constraining(k->string) && !in_list(checked, k->string))
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword '%s' at %s is not supported together with enum/const",
                           k->string, sc_ptr(path));
    const cJSON *fmt = sc_get(s, "format");
    if (cJSON_IsString(fmt) && cJSON_IsString(v)) {
        const char *re = gr_format_regex(fmt->valuestring);
        if (re && !sc_pattern_matches(c, re, v->valuestring, path, ok)) return false;
        if (re && !*ok) return true;
        if (!re && sc_format_known(fmt->valuestring))
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "format '%s' together with enum/const at %s", fmt->valuestring,
                           sc_ptr(path));
    }
    unsigned t = value_type(v);
    *ok = (sc_types(s) & (t == T_INT ? T_INT : t)) != 0 || (t == T_INT && (sc_types(s) & T_NUM));
    if (!*ok) return true;
    long lo = 0, hi = -1;
    if (t == T_STR) {
        if (!sc_count(c, s, "minLength", path, &lo) || !sc_count(c, s, "maxLength", path, &hi)) return false;
        long n = 0; /* code points */
        for (const unsigned char *q = (const unsigned char *)v->valuestring; *q; q++) n += (*q & 0xC0) != 0x80;
        *ok = n >= lo && (hi < 0 || n <= hi);
        const cJSON *pat = sc_get(s, "pattern");
        if (*ok && cJSON_IsString(pat)) return sc_pattern_matches(c, pat->valuestring, v->valuestring, path, ok);
    } else if (t == T_INT || t == T_NUM) {
        bounds b;
        if (!read_bounds(c, s, path, &b)) return false;
        *ok = bounds_ok(&b, v->valuedouble);
    } else if (t == T_ARR) {
        if (!sc_count(c, s, "minItems", path, &lo) || !sc_count(c, s, "maxItems", path, &hi)) return false;
        long n = cJSON_GetArraySize(v);
        *ok = n >= lo && (hi < 0 || n <= hi);
    } else if (t == T_OBJ) {
        if (!sc_count(c, s, "minProperties", path, &lo) || !sc_count(c, s, "maxProperties", path, &hi)) return false;
        long n = cJSON_GetArraySize(v);
        *ok = n >= lo && (hi < 0 || n <= hi);
        const cJSON *req = sc_get(s, "required");
        for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r && *ok; r = r->next)
            *ok = cJSON_IsString(r) && cJSON_GetObjectItemCaseSensitive(v, r->valuestring);
    }
    return true;
}

static bool gen_enum(conv *c, const cJSON *s, const char *path, char *name) {
    const cJSON *en = sc_get(s, "enum"), *cn = sc_get(s, "const");
    if (en && !cJSON_IsArray(en)) return sc_fail(c, SLM_ERR_FORMAT, "'enum' at %s must be an array", sc_ptr(path));
    buf body = buf_make(c->a);
    int n = 0;
    for (const cJSON *v = en ? en->child : cn; v; v = en ? v->next : NULL) {
        bool ok = false;
        if (cn && !cJSON_Compare(v, cn, true)) continue;
        if (!enum_value_ok(c, s, v, path, &ok)) break;
        if (!ok) continue;
        buf_puts(&body, n++ ? " | " : "( ");
        if (!sc_json_lit(c, &body, v)) break;
    }
    if (!c->failed && !n)
        sc_fail(c, SLM_ERR_UNSUPPORTED, "enum/const at %s allows no value (nothing could be generated)", sc_ptr(path));
    if (!c->failed) {
        buf_puts(&body, " ) ws");
        c->prims |= P_WS;
        sc_emit_new(c, name, "enum", &body);
    }
    buf_free(&body);
    return !c->failed;
}

/* ---- unions -------------------------------------------------------------------------------------- */

static bool emit_union(conv *c, const char (*alts)[SC_NAME], int n, char *name) {
    if (n == 1) {
        memmove(name, alts[0], SC_NAME);
        return true;
    }
    buf body = buf_make(c->a);
    for (int i = 0; i < n; i++) buf_printf(&body, "%s%s", i ? " | " : "", alts[i]);
    bool ok = sc_emit_new(c, name, "alt", &body);
    buf_free(&body);
    return ok;
}

sc_quiet sc_quiet_begin(conv *c) {
    sc_quiet q = {c->e, c->failed};
    c->e = NULL;
    return q;
}
void sc_quiet_end(conv *c, sc_quiet q) {
    c->e = q.e, c->failed = q.failed;
    if (c->oom) sc_fail(c, SLM_ERR_NOMEM, "out of memory"); /* never quiet */
}

/* s with $ref and allOf resolved, or NULL (quietly). */
static const cJSON *plain_of(conv *c, const cJSON *s) {
    sc_quiet q = sc_quiet_begin(c);
    for (int k = 0; k < 16 && s && cJSON_IsObject(s); k++) {
        if (sc_get(s, "allOf") || (sc_get(s, "$ref") && !c->ref_alone && s->child && s->child->next)) {
            s = sc_flatten(c, s, "", SC_MAX_DEPTH - 8);
            continue;
        }
        const cJSON *r = sc_get(s, "$ref");
        if (!r) break;
        s = cJSON_IsString(r) ? sc_resolve(c, r->valuestring, "") : NULL;
    }
    bool bad = c->failed;
    sc_quiet_end(c, q);
    return bad ? NULL : s;
}

bool sc_is_false(const cJSON *s) {
    if (cJSON_IsFalse(s)) return true;
    const cJSON *n = sc_get(s, "not");
    if (cJSON_IsTrue(n)) return true;
    if (cJSON_IsObject(n)) {
        bool any = false;
        for (const cJSON *k = n->child; k && !any; k = k->next) any = sc_constraining(k->string);
        if (!any) return true;
    }
    const cJSON *all = sc_get(s, "allOf");
    for (const cJSON *x = cJSON_IsArray(all) ? all->child : NULL; x; x = x->next)
        if (sc_is_false(x)) return true;
    return false;
}

static bool requires(const cJSON *s, const char *k) {
    const cJSON *r = sc_get(s, "required");
    for (const cJSON *q = cJSON_IsArray(r) ? r->child : NULL; q; q = q->next)
        if (cJSON_IsString(q) && !strcmp(q->valuestring, k)) return true;
    return false;
}

bool sc_num_bound(const cJSON *s, int side, double *v, bool *strict) {
    const cJSON *inc = sc_get(s, side ? "maximum" : "minimum"), *exc = sc_get(s, side ? "exclusiveMaximum" : "exclusiveMinimum");
    bool has = false;
    *strict = false;
    if (cJSON_IsNumber(inc)) has = true, *v = inc->valuedouble, *strict = cJSON_IsTrue(exc);
    if (cJSON_IsNumber(exc) && (!has || (side ? exc->valuedouble <= *v : exc->valuedouble >= *v)))
        has = true, *v = exc->valuedouble, *strict = true;
    return has;
}

/* Types of the values of an enum/const list, or 0 when there is none. */
static unsigned list_types(const cJSON *s) {
    const cJSON *en = sc_get(s, "enum"), *cn = sc_get(s, "const");
    if (!cJSON_IsArray(en) && !cn) return 0;
    unsigned t = 0;
    for (const cJSON *v = cJSON_IsArray(en) ? en->child : cn; v; v = cJSON_IsArray(en) ? v->next : NULL) {
        unsigned vt = value_type(v);
        t |= vt == T_INT ? T_INT | T_NUM : vt;
    }
    return t;
}

/* Whether no value the converter generates from a validates against b, as far as cheap checks
 * tell (false: maybe). a's types are those generated (the type keyword, or inferred from the
 * keywords: sc_types); b's those it accepts (its type keyword, else all). */
static bool disjoint(conv *c, const cJSON *a, const cJSON *b, int depth) {
    a = plain_of(c, a), b = plain_of(c, b);
    if (!a || !b || depth > 6) return false;
    if (cJSON_IsFalse(b)) return true;
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) return false;
    if (sc_get(b, "anyOf") || sc_get(b, "oneOf")) { /* a must miss every branch of b's anyOf */
        const cJSON *l = sc_get(b, sc_get(b, "anyOf") ? "anyOf" : "oneOf");
        static const char *const drop_any[] = {"anyOf", NULL}, *const drop_one[] = {"oneOf", NULL};
        sc_quiet q = sc_quiet_begin(c);
        const cJSON *rest = sc_copy_without(c, b, sc_get(b, "anyOf") ? drop_any : drop_one);
        sc_quiet_end(c, q);
        if (rest && disjoint(c, a, rest, depth + 1)) return true;
        for (const cJSON *x = cJSON_IsArray(l) ? l->child : NULL; x; x = x->next)
            if (!disjoint(c, a, x, depth + 1)) return false;
        return cJSON_IsArray(l);
    }
    if (sc_get(a, "anyOf") || sc_get(a, "oneOf")) { /* every branch of a must miss b */
        const cJSON *l = sc_get(a, sc_get(a, "anyOf") ? "anyOf" : "oneOf");
        for (const cJSON *x = cJSON_IsArray(l) ? l->child : NULL; x; x = x->next)
            if (!disjoint(c, x, b, depth + 1)) return false;
        return cJSON_IsArray(l);
    }
    unsigned ta = sc_types(a), tb = sc_get(b, "type") ? sc_types(b) : T_ALL;
    if (list_types(a)) ta &= list_types(a);
    if (list_types(b)) tb &= list_types(b);
    if (ta & T_INT && !(ta & T_NUM)) ta &= ~T_NUM;
    if (!(ta & tb)) return true;
    const cJSON *ea = sc_get(a, "enum"), *ca = sc_get(a, "const"), *eb = sc_get(b, "enum"), *cb = sc_get(b, "const");
    if ((ea || ca) && (eb || cb)) { /* value lists that share nothing */
        for (const cJSON *x = cJSON_IsArray(ea) ? ea->child : ca; x; x = cJSON_IsArray(ea) ? x->next : NULL)
            for (const cJSON *y = cJSON_IsArray(eb) ? eb->child : cb; y; y = cJSON_IsArray(eb) ? y->next : NULL)
                if (cJSON_Compare(x, y, true)) return false;
        return true;
    }
    if (!((ta & tb) & ~(T_INT | T_NUM))) { /* numbers: intervals that do not meet */
        double la, ha, lb, hb;
        bool sla, sha, slb, shb, hla = sc_num_bound(a, 0, &la, &sla), hha = sc_num_bound(a, 1, &ha, &sha);
        bool hlb = sc_num_bound(b, 0, &lb, &slb), hhb = sc_num_bound(b, 1, &hb, &shb);
        if (hha && hlb && (ha < lb || (ha == lb && (sha || slb)))) return true;
        if (hla && hhb && (hb < la || (hb == la && (shb || sla)))) return true;
        return false;
    }
    if ((ta & tb) == T_STR) { /* strings: length ranges that do not meet */
        const cJSON *mina = sc_get(a, "minLength"), *maxa = sc_get(a, "maxLength");
        const cJSON *minb = sc_get(b, "minLength"), *maxb = sc_get(b, "maxLength");
        if (cJSON_IsNumber(maxa) && cJSON_IsNumber(minb) && maxa->valuedouble < minb->valuedouble) return true;
        if (cJSON_IsNumber(maxb) && cJSON_IsNumber(mina) && maxb->valuedouble < mina->valuedouble) return true;
        return false;
    }
    if ((ta & tb) != T_OBJ) return false;
    /* objects: a key a always writes that b forbids, or whose value b refuses */
    const cJSON *ra = sc_get(a, "required"), *pa = sc_get(a, "properties"), *pb = sc_get(b, "properties");
    const cJSON *addb = sc_get(b, "additionalProperties"), *ppb = sc_get(b, "patternProperties");
    for (const cJSON *k = cJSON_IsArray(ra) ? ra->child : NULL; k; k = k->next) {
        if (!cJSON_IsString(k)) continue;
        const cJSON *sb = sc_get(pb, k->valuestring), *sa = sc_get(pa, k->valuestring);
        if (sb ? sc_is_false(sb) : cJSON_IsFalse(addb) && !(cJSON_IsObject(ppb) && ppb->child)) return true;
        if (sa && sb && disjoint(c, sa, sb, depth + 1)) return true;
    }
    /* a key b requires that a never writes */
    const cJSON *rb = sc_get(b, "required"), *adda = sc_get(a, "additionalProperties");
    for (const cJSON *k = cJSON_IsArray(rb) ? rb->child : NULL; k; k = k->next) {
        if (!cJSON_IsString(k)) continue;
        const cJSON *sa = sc_get(pa, k->valuestring);
        if (sa ? sc_is_false(sa) : cJSON_IsFalse(adda) && !sc_get(a, "patternProperties")) return true;
    }
    return false;
}

/* {"required": [name]} (NULL after a failure). */
static cJSON *required_one(conv *c, const char *name) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "required"), *str = cJSON_CreateString(name);
    if (!arr || !str || !cJSON_AddItemToArray(arr, str)) {
        cJSON_Delete(str), cJSON_Delete(o);
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return o;
}

/* A narrowing of branch a (objects) that misses b: a property both declare with disjoint schemas
 * made required, or a key b requires forbidden. NULL when none is found. */
static const cJSON *separate(conv *c, const cJSON *a, const cJSON *b, const char *path, int depth) {
    a = plain_of(c, a), b = plain_of(c, b);
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) return NULL;
    cJSON *extra = NULL;
    double v;
    bool strict;
    if (!(sc_types(a) & ~(T_INT | T_NUM)) && !sc_get(b, "anyOf") && !sc_get(b, "oneOf")) {
        /* numbers: a cut to its part above b's upper bound, or else below b's lower bound */
        double w;
        bool ws, hb = sc_num_bound(b, 1, &v, &strict), ha = sc_num_bound(a, 1, &w, &ws);
        const char *key = NULL;
        if (hb && (!ha || w > v || (w == v && strict && !ws))) {
            key = strict ? "minimum" : "exclusiveMinimum";
        } else if (sc_num_bound(b, 0, &v, &strict)) {
            bool la = sc_num_bound(a, 0, &w, &ws);
            if (!la || w < v || (w == v && strict && !ws)) key = strict ? "maximum" : "exclusiveMaximum";
        }
        if (key) {
            extra = cJSON_CreateObject();
            if (!cJSON_AddNumberToObject(extra, key, v)) {
                cJSON_Delete(extra);
                sc_fail(c, SLM_ERR_NOMEM, "out of memory");
                return NULL;
            }
        }
    }
    if (!extra && sc_types(a) != T_OBJ) return NULL;
    const cJSON *pa = sc_get(a, "properties"), *pb = sc_get(b, "properties"), *rb = sc_get(b, "required");
    const cJSON *addb = sc_get(b, "additionalProperties");
    for (const cJSON *p = cJSON_IsObject(pa) ? pa->child : NULL; p && !extra; p = p->next) {
        const cJSON *q = sc_get(pb, p->string); /* a key of a that b forbids, made required */
        if (requires(a, p->string) || sc_is_false(p)) continue;
        if (q ? sc_is_false(q) : cJSON_IsFalse(addb) && !sc_get(b, "patternProperties")) {
            extra = required_one(c, p->string);
            if (!extra) return NULL;
        }
    }
    for (const cJSON *p = cJSON_IsObject(pa) ? pa->child : NULL; p && !extra; p = p->next) {
        const cJSON *q = sc_get(pb, p->string);
        if (q && !requires(a, p->string) && !sc_is_false(p) && disjoint(c, p, q, depth + 1)) {
            extra = required_one(c, p->string);
            if (!extra) return NULL;
        }
    }
    for (const cJSON *k = cJSON_IsArray(rb) ? rb->child : NULL; k && !extra; k = k->next)
        if (cJSON_IsString(k) && !requires(a, k->valuestring)) {
            extra = cJSON_CreateObject();
            cJSON *props = cJSON_AddObjectToObject(extra, "properties");
            if (!props || !cJSON_AddFalseToObject(props, k->valuestring)) {
                cJSON_Delete(extra);
                sc_fail(c, SLM_ERR_NOMEM, "out of memory");
                return NULL;
            }
        }
    if (!extra) return NULL;
    sc_quiet q = sc_quiet_begin(c);
    const cJSON *m = sc_own(c, extra) ? sc_merge(c, a, extra, path, depth + 1) : NULL;
    bool bad = c->failed;
    sc_quiet_end(c, q);
    return bad ? NULL : m;
}

/* anyOf / oneOf: the alternatives (each merged with the keywords beside them). For oneOf each
 * branch is narrowed until it provably misses every other branch (separate); a branch that cannot
 * be is left out, so an output matches exactly one. */
static bool gen_choice(conv *c, const cJSON *s, const char *kw, const char *path, int depth, char *name) {
    const cJSON *list = sc_get(s, kw);
    if (!cJSON_IsArray(list) || !list->child)
        return sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s must be a non-empty array", kw, sc_ptr(path));
    bool rest = false;
    for (const cJSON *k = s->child; k; k = k->next)
        rest |= sc_constraining(k->string) && strcmp(k->string, kw);
    static const char *const drop_any[] = {"anyOf", NULL}, *const drop_one[] = {"oneOf", NULL};
    const cJSON *base = rest ? sc_copy_without(c, s, !strcmp(kw, "anyOf") ? drop_any : drop_one) : NULL;
    if (rest && !base) return false;
    int n = cJSON_GetArraySize(list), k = 0, i = 0;
    char (*alts)[SC_NAME] = al_calloc(c->a, (size_t)n, SC_NAME);
    const cJSON **br = al_calloc(c->a, (size_t)n, sizeof *br);
    if (!alts || !br) {
        al_free(c->a, alts), al_free(c->a, br);
        return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    }
    bool one = !strcmp(kw, "oneOf");
    for (const cJSON *v = list->child; v; v = v->next, i++) {
        char sub[SC_PATH], idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        sc_sub(sub, path, kw, idx);
        if (!(br[i] = base ? sc_merge(c, base, v, sub, depth + 1) : v)) break;
    }
    for (i = 0; i < n && !c->failed; i++) {
        char sub[SC_PATH], idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        sc_sub(sub, path, kw, idx);
        const cJSON *cur = br[i];
        int narrowed = 0;
        for (int j = 0; one && cur && j < n; j++) {
            if (j == i || disjoint(c, cur, br[j], 0)) continue;
            const cJSON *nar = separate(c, cur, br[j], sub, depth);
            cur = nar && disjoint(c, nar, br[j], 0) && narrowed++ < 2 * n ? nar : NULL;
            if (cur) j = -1; /* narrowed: check every branch again */
        }
        if (!cur) continue;
        if (!sc_gen(c, cur, sub, depth + 1, alts[k])) break;
        k++;
    }
    if (!c->failed && !k)
        sc_fail(c, SLM_ERR_UNSUPPORTED, "oneOf at %s: no branch is provably disjoint from the others (an output "
                "matching two would not validate)", sc_ptr(path));
    if (!c->failed) emit_union(c, (const char (*)[SC_NAME])alts, k, name);
    al_free(c->a, alts);
    al_free(c->a, br);
    return !c->failed;
}

/* ---- $ref ---------------------------------------------------------------------------------------- */

static const cJSON *find_anchor(const cJSON *s, const char *a, int depth) {
    if (depth > 64 || !s) return NULL;
    if (cJSON_IsObject(s)) {
        const cJSON *an = sc_get(s, "$anchor"), *id = sc_get(s, "$id");
        if (!id) id = sc_get(s, "id");
        if (cJSON_IsString(an) && !strcmp(an->valuestring, a)) return s;
        if (cJSON_IsString(id) && id->valuestring[0] == '#' && !strcmp(id->valuestring + 1, a)) return s;
    }
    if (cJSON_IsObject(s) || cJSON_IsArray(s))
        for (const cJSON *k = s->child; k; k = k->next) {
            const cJSON *r = find_anchor(k, a, depth + 1);
            if (r) return r;
        }
    return NULL;
}

static int hexv(char h) {
    return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
}

const cJSON *sc_resolve(conv *c, const char *p, const char *path) {
    size_t nb = strlen(c->base);
    if (nb && !strncmp(p, c->base, nb) && (p[nb] == '#' || !p[nb])) p += nb;
    if (!*p) return c->doc;
    if (*p != '#') {
        sc_fail(c, SLM_ERR_UNSUPPORTED, "$ref '%s' at %s: only local references (#...) are supported", p, sc_ptr(path));
        return NULL;
    }
    if (p[1] && p[1] != '/') {
        const cJSON *t = find_anchor(c->doc, p + 1, 0);
        if (!t) sc_fail(c, SLM_ERR_FORMAT, "$ref '%s' at %s does not resolve", p, sc_ptr(path));
        return t;
    }
    const cJSON *t = c->doc;
    const char *q = p + 1;
    while (*q == '/' && t) { /* RFC 6901 (~1 is '/', ~0 is '~') inside a URI fragment (%XX) */
        q++;
        char tok[256];
        size_t n = 0;
        while (*q && *q != '/' && n + 1 < sizeof tok) {
            char ch = *q++;
            if (ch == '%' && hexv(q[0]) >= 0 && hexv(q[1]) >= 0) ch = (char)(hexv(q[0]) * 16 + hexv(q[1])), q += 2;
            if (ch == '~' && (*q == '0' || *q == '1')) ch = *q++ == '1' ? '/' : '~';
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (cJSON_IsArray(t)) {
            char *end;
            long i = strtol(tok, &end, 10);
            t = *end || !*tok ? NULL : cJSON_GetArrayItem(t, (int)i);
        } else {
            t = sc_get(t, tok);
        }
    }
    if (!t || *q) sc_fail(c, SLM_ERR_FORMAT, "$ref '%s' at %s does not resolve", p, sc_ptr(path));
    return t && !*q ? t : NULL;
}

static bool gen_ref(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    const cJSON *ref = sc_get(s, "$ref");
    if (!cJSON_IsString(ref)) return sc_fail(c, SLM_ERR_FORMAT, "'$ref' at %s must be a string", sc_ptr(path));
    const char *p = ref->valuestring;
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].pointer, p)) {
            snprintf(name, SC_NAME, "%s", c->refs[i].name);
            return true;
        }
    const cJSON *t = sc_resolve(c, p, path);
    if (!t) return false;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        sc_ref *nr = al_realloc(c->a, c->refs, (size_t)c->cap_refs * sizeof *nr, (size_t)cap * sizeof *nr);
        if (!nr) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        c->refs = nr;
        c->cap_refs = cap;
    }
    sc_ref *r = &c->refs[c->n_refs];
    r->pointer = al_strdup(c->a, p);
    if (!r->pointer) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    sc_new_name(c, r->name, "ref");
    c->n_refs++;
    char rname[SC_NAME], target[SC_NAME], tpath[SC_PATH];
    snprintf(rname, sizeof rname, "%s", r->name);
    snprintf(name, SC_NAME, "%s", rname);
    snprintf(tpath, sizeof tpath, "%s", p[0] == '#' ? p + 1 : p);
    if (!sc_gen(c, t, tpath, depth + 1, target)) return false;
    buf body = buf_make(c->a);
    buf_puts(&body, target);
    bool ok = sc_emit(c, rname, &body);
    buf_free(&body);
    return ok;
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

bool sc_gen(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    if (c->failed) return false;
    if (depth > SC_MAX_DEPTH)
        return sc_fail(c, SLM_ERR_RANGE, "schema nested deeper than %d at %s", SC_MAX_DEPTH, sc_ptr(path));
    if (cJSON_IsTrue(s)) {
        c->prims |= P_VALUE;
        snprintf(name, SC_NAME, "json-value");
        return true;
    }
    if (cJSON_IsFalse(s)) return sc_fail(c, SLM_ERR_UNSUPPORTED, "the schema 'false' at %s allows nothing", sc_ptr(path));
    if (!cJSON_IsObject(s)) return sc_fail(c, SLM_ERR_FORMAT, "schema at %s is not an object or boolean", sc_ptr(path));
    bool rest = false; /* constraining keywords beside $ref */
    for (const cJSON *k = s->child; k; k = k->next) {
        if (in_list(refused, k->string))
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword '%s' at %s is not supported", k->string, sc_ptr(path));
        if ((c->flags & GR_SCHEMA_STRICT) && !in_list(constraining, k->string) && !in_list(annotations, k->string))
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword '%s' at %s is not in the vocabulary (strict mode)",
                           k->string, sc_ptr(path));
        rest |= sc_constraining(k->string) && strcmp(k->string, "$ref") && strcmp(k->string, "if");
    }
    if (sc_get(s, "if") && (sc_get(s, "then") || sc_get(s, "else")) && !(sc_get(s, "$ref") && c->ref_alone)) {
        const cJSON *m = sc_apply_if(c, s, path, depth);
        return m && sc_gen(c, m, path, depth + 1, name);
    }
    if (sc_get(s, "not")) { /* s without not, merged with what not leaves */
        static const char *const drop[] = {"not", NULL};
        char sub[SC_PATH];
        sc_sub(sub, path, "not", NULL);
        const cJSON *neg = sc_negate(c, sc_get(s, "not"), path), *others = neg ? sc_copy_without(c, s, drop) : NULL;
        if (neg && cJSON_IsFalse(neg))
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "the schema at %s allows nothing ('not' of everything)", sc_ptr(path));
        const cJSON *m = others ? sc_merge(c, others, neg, sub, depth + 1) : NULL;
        return m && sc_gen(c, m, path, depth + 1, name);
    }
    if (sc_get(s, "$ref") && c->ref_alone) return gen_ref(c, s, path, depth, name);
    if (sc_get(s, "allOf") || (sc_get(s, "$ref") && rest) || (sc_get(s, "anyOf") && sc_get(s, "oneOf"))) {
        const cJSON *m = sc_flatten(c, s, path, depth);
        return m && sc_gen(c, m, path, depth + 1, name);
    }
    if (sc_get(s, "$ref")) return gen_ref(c, s, path, depth, name);
    if (sc_get(s, "anyOf")) return gen_choice(c, s, "anyOf", path, depth, name);
    if (sc_get(s, "oneOf")) return gen_choice(c, s, "oneOf", path, depth, name);
    if (sc_get(s, "enum") || sc_get(s, "const")) return gen_enum(c, s, path, name);
    const cJSON *type = sc_get(s, "type");
    if (type && !cJSON_IsString(type) && !cJSON_IsArray(type))
        return sc_fail(c, SLM_ERR_FORMAT, "'type' at %s must be a string or an array", sc_ptr(path));
    for (const cJSON *t = cJSON_IsArray(type) ? type->child : type; t; t = cJSON_IsArray(type) ? t->next : NULL) {
        if (!cJSON_IsString(t)) return sc_fail(c, SLM_ERR_FORMAT, "'type' at %s must list strings", sc_ptr(path));
        if (!type_bit(t->valuestring))
            return sc_fail(c, SLM_ERR_FORMAT, "unknown type '%s' at %s", t->valuestring, sc_ptr(path));
    }
    unsigned types = sc_types(s);
    if (!types) return sc_fail(c, SLM_ERR_UNSUPPORTED, "'type' at %s allows no type", sc_ptr(path));
    if (types == T_ALL && !rest) {
        c->prims |= P_VALUE;
        snprintf(name, SC_NAME, "json-value");
        return true;
    }
    char alts[7][SC_NAME];
    int n = 0;
    bounds b;
    if (types & (T_INT | T_NUM) && !read_bounds(c, s, path, &b)) return false;
    if (types & T_OBJ && !sc_gen_object(c, s, path, depth, alts[n++])) return false;
    if (types & T_ARR && !sc_gen_array(c, s, path, depth, alts[n++])) return false;
    if (types & T_STR && !sc_gen_string(c, s, path, alts[n++])) return false;
    if (types & T_NUM) {
        if (!gen_number(c, &b, path, alts[n++])) return false;
    } else if (types & T_INT && !gen_integer(c, &b, path, alts[n++])) {
        return false;
    }
    if (types & T_BOOL) c->prims |= P_BOOL, snprintf(alts[n++], SC_NAME, "json-boolean");
    if (types & T_NULL) c->prims |= P_NULL, snprintf(alts[n++], SC_NAME, "json-null");
    return emit_union(c, (const char (*)[SC_NAME])alts, n, name);
}

/* ---- the fixed rules ----------------------------------------------------------------------------- */

static const struct {
    unsigned flag, needs;
    const char *text;
} prim_rules[] = {
    {P_WS, 0, "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"},
    {P_CHAR, 0,
     "json-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" json-hex4 )\n"
     "json-hex4 ::= ( [0-9a-cA-CeEfF] [0-9a-fA-F] | [dD] [0-7] ) [0-9a-fA-F]{2}\n"},
    {P_KEYCHAR, 0, "json-keychar ::= [^\"\\\\\\x7F\\x00-\\x1F]\n"},
    {P_STRING, P_CHAR | P_WS, "json-string ::= \"\\\"\" json-char* \"\\\"\" ws\n"},
    {P_INT, P_WS, "json-integer ::= \"-\"? json-int-part ws\njson-int-part ::= [0] | [1-9] [0-9]{0,15}\n"},
    {P_NUMBER, P_WS,
     "json-number ::= \"-\"? json-num-int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? ws\n"
     "json-num-int ::= [0] | [1-9] [0-9]{0,15}\n"},
    {P_BOOL, P_WS, "json-boolean ::= ( \"true\" | \"false\" ) ws\n"},
    {P_NULL, P_WS, "json-null ::= \"null\" ws\n"},
    {P_VALUE, P_OBJECT | P_ARRAY | P_STRING | P_NUMBER | P_BOOL | P_NULL,
     "json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null\n"},
    {P_OBJECT, P_STRING | P_VALUE | P_WS,
     "json-object ::= \"{\" ws ( json-string \":\" ws json-value ( \",\" ws json-string \":\" ws json-value )* )? "
     "\"}\" ws\n"},
    {P_ARRAY, P_VALUE | P_WS, "json-array ::= \"[\" ws ( json-value ( \",\" ws json-value )* )? \"]\" ws\n"},
    {P_DATE, P_WS, "json-date ::= \"\\\"\" json-date-body \"\\\"\" ws\n"},
    {P_TIME, P_WS, "json-time ::= \"\\\"\" json-time-body \"\\\"\" ws\n"},
    {P_DATETIME, P_WS, "json-date-time ::= \"\\\"\" json-date-body \"T\" json-time-body \"\\\"\" ws\n"},
    {P_UUID, P_WS,
     "json-uuid ::= \"\\\"\" json-hex{8} \"-\" json-hex{4} \"-\" json-hex{4} \"-\" json-hex{4} \"-\" json-hex{12} "
     "\"\\\"\" ws\njson-hex ::= [0-9a-fA-F]\n"},
};

static const char date_body[] =
    "json-date-body ::= ( [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9] ) \"-\" "
    "( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) "
    "| ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) "
    "| \"02\" \"-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )\n";
static const char time_body[] =
    "json-time-body ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n";

slm_status gr_schema_to_gbnf(const char *json, size_t len, unsigned flags, const slm_allocator *a, char **gbnf,
                             slm_err *e) {
    *gbnf = NULL;
    if (len > GR_MAX_TEXT) return err_set(e, SLM_ERR_RANGE, "json schema: %zu bytes, above the cap of %zu", len, GR_MAX_TEXT);
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!doc) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return err_set(e, SLM_ERR_FORMAT, "json schema: not valid JSON (near byte %zu)", at);
    }
    conv c = {.a = a, .doc = doc, .out = buf_make(a), .flags = flags, .e = e, .owned = cJSON_CreateArray()};
    const cJSON *id = sc_get(doc, "$id");
    if (!cJSON_IsString(id)) id = sc_get(doc, "id");
    if (cJSON_IsString(id)) {
        snprintf(c.base, sizeof c.base, "%s", id->valuestring);
        char *hash = strchr(c.base, '#');
        if (hash) *hash = 0;
    }
    const cJSON *draft = sc_get(doc, "$schema");
    if (cJSON_IsString(draft))
        for (int d = 3; d <= 7; d++) {
            char tag[16];
            snprintf(tag, sizeof tag, "draft-0%d", d);
            c.ref_alone |= strstr(draft->valuestring, tag) != NULL;
        }
    char root[SC_NAME];
    if (!c.owned) sc_fail(&c, SLM_ERR_NOMEM, "out of memory");
    else if (sc_gen(&c, doc, "", 0, root)) {
        unsigned need = c.prims;
        for (bool grew = true; grew;) { /* close over dependencies */
            grew = false;
            for (size_t i = 0; i < sizeof prim_rules / sizeof prim_rules[0]; i++)
                if ((need & prim_rules[i].flag) && (need | prim_rules[i].needs) != need) {
                    need |= prim_rules[i].needs;
                    grew = true;
                }
        }
        buf_printf(&c.out, "root ::= %s\n", root);
        for (size_t i = 0; i < sizeof prim_rules / sizeof prim_rules[0]; i++)
            if (need & prim_rules[i].flag) buf_puts(&c.out, prim_rules[i].text);
        if (need & (P_DATE | P_DATETIME)) buf_puts(&c.out, date_body);
        if (need & (P_TIME | P_DATETIME)) buf_puts(&c.out, time_body);
        if (c.out.oom) sc_fail(&c, SLM_ERR_NOMEM, "out of memory");
    }
    cJSON_Delete(c.owned);
    cJSON_Delete(doc);
    for (int i = 0; i < c.n_refs; i++) al_free(a, c.refs[i].pointer);
    for (int i = 0; i < c.cap_shared; i++) al_free(a, c.shared[i].body);
    for (int i = 0; i < c.n_regex; i++) al_free(a, c.regex[i].pattern), gr_free(c.regex[i].g);
    al_free(a, c.regex);
    al_free(a, c.shared);
    al_free(a, c.refs);
    if (c.failed) {
        buf_free(&c.out);
        return e ? e->status : SLM_ERR_FORMAT;
    }
    *gbnf = buf_take(&c.out);
    return *gbnf ? SLM_OK : err_set(e, SLM_ERR_NOMEM, "json schema: out of memory");
}
