/* schema.c — JSON Schema -> GBNF text (gr_schema_to_gbnf), read with cJSON. The subset and what
 * each keyword becomes are in docs/grammar.md §JSON Schema. Every keyword either constrains the
 * grammar, is an annotation (title, description, ...), or is refused with its name and JSON pointer:
 * nothing is silently ignored. Generated values may be followed by a little whitespace (rule ws);
 * every string the grammar derives is JSON that validates against the schema (for oneOf: against at
 * least one branch, see the docs). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar/grammar.h"

#define SCHEMA_MAX_DEPTH 64
#define SCHEMA_MAX_RULES 100000

enum {
    P_WS = 1, P_CHAR = 2, P_STRING = 4, P_INT = 8, P_NUMBER = 16, P_BOOL = 32, P_NULL = 64, P_VALUE = 128,
    P_OBJECT = 256, P_ARRAY = 512, P_DATE = 1024, P_TIME = 2048, P_DATETIME = 4096, P_UUID = 8192
};

typedef struct sb {
    char *p;
    size_t n, cap;
    bool oom;
} sb;

__attribute__((format(printf, 2, 3))) static void sb_printf(sb *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

typedef struct ref_rule {
    char *pointer;
    char name[32];
} ref_rule;

typedef struct conv {
    const cJSON *doc;
    sb out;
    int n_rules;
    unsigned prims;
    ref_rule *refs;
    int n_refs, cap_refs;
    slm_err *e;
    bool failed;
} conv;

__attribute__((format(printf, 3, 4))) static bool fail(conv *c, slm_status st, const char *fmt, ...) {
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

/* Appends s as the body of a GBNF string literal (no quotes). */
static void lit_body(sb *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') sb_printf(b, "\\%c", *p);
        else if (*p == '\n') sb_printf(b, "\\n");
        else if (*p == '\r') sb_printf(b, "\\r");
        else if (*p == '\t') sb_printf(b, "\\t");
        else if (*p < 0x20 || *p == 0x7F) sb_printf(b, "\\x%02X", *p);
        else sb_printf(b, "%c", *p);
    }
}

/* A GBNF literal for the compact JSON text of v. */
static bool json_lit(conv *c, sb *b, const cJSON *v) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return fail(c, SLM_ERR_NOMEM, "out of memory");
    sb_printf(b, "\"");
    lit_body(b, t);
    sb_printf(b, "\"");
    free(t);
    return true;
}

static void new_name(conv *c, char *name, const char *hint) {
    snprintf(name, 32, "%s-%d", hint, c->n_rules++);
}

static bool emit_rule(conv *c, const char *name, const sb *body) {
    if (body->oom) return fail(c, SLM_ERR_NOMEM, "out of memory");
    if (c->n_rules > SCHEMA_MAX_RULES) return fail(c, SLM_ERR_RANGE, "schema needs more than %d rules", SCHEMA_MAX_RULES);
    sb_printf(&c->out, "%s ::= %.*s\n", name, (int)body->n, body->p ? body->p : "");
    return true;
}

/* A JSON pointer for messages: "/" for the root. */
static const char *ptr(const char *path) { return *path ? path : "/"; }

static bool is_annotation(const char *k) {
    static const char *const names[] = {"title", "description", "$schema", "$id", "$comment", "default", "examples",
                                        "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(k, names[i])) return true;
    return false;
}

static bool gen(conv *c, const cJSON *s, const char *path, int depth, char *name);

/* Refuses any key of s not in allowed (and not an annotation). */
static bool only_keys(conv *c, const cJSON *s, const char *path, const char *const *allowed, const char *what) {
    for (const cJSON *k = s->child; k; k = k->next) {
        if (is_annotation(k->string)) continue;
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(k->string, allowed[i]);
        if (!ok) return fail(c, SLM_ERR_UNSUPPORTED, "keyword '%s' at %s is not supported%s%s", k->string,
                             ptr(path), what ? " " : "", what ? what : "");
    }
    return true;
}

static bool get_count(conv *c, const cJSON *s, const char *key, const char *path, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(long)v->valuedouble)
        return fail(c, SLM_ERR_FORMAT, "'%s' at %s must be a non-negative integer", key, ptr(path));
    if (v->valuedouble > GR_MAX_REPEAT)
        return fail(c, SLM_ERR_UNSUPPORTED, "'%s' at %s is above %d", key, ptr(path), GR_MAX_REPEAT);
    *out = (long)v->valuedouble;
    return true;
}

static const char *json_type_of(const cJSON *v) {
    if (cJSON_IsString(v)) return "string";
    if (cJSON_IsBool(v)) return "boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsObject(v)) return "object";
    if (cJSON_IsArray(v)) return "array";
    return v->valuedouble == (double)(long long)v->valuedouble ? "integer" : "number";
}

static bool type_allows(const cJSON *type, const cJSON *v) {
    if (!type) return true;
    const char *t = json_type_of(v);
    const cJSON *one = type;
    if (cJSON_IsArray(type)) one = type->child;
    for (; one; one = cJSON_IsArray(type) ? one->next : NULL) {
        if (!cJSON_IsString(one)) continue;
        if (!strcmp(one->valuestring, t) || (!strcmp(one->valuestring, "number") && !strcmp(t, "integer"))) return true;
    }
    return false;
}

/* enum / const: the listed values (filtered by type when given). */
static bool gen_enum(conv *c, const cJSON *s, const char *path, char *name) {
    static const char *const allowed[] = {"enum", "const", "type", NULL};
    if (!only_keys(c, s, path, allowed, "together with enum/const")) return false;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (en && !cJSON_IsArray(en)) return fail(c, SLM_ERR_FORMAT, "'enum' at %s must be an array", ptr(path));
    sb body = {0};
    int n = 0;
    if (en)
        for (const cJSON *v = en->child; v; v = v->next) {
            if (!type_allows(type, v) || (cn && !cJSON_Compare(v, cn, true))) continue;
            if (n++) sb_printf(&body, " | ");
            if (!json_lit(c, &body, v)) goto done;
        }
    else if (type_allows(type, cn)) {
        n++;
        if (!json_lit(c, &body, cn)) goto done;
    }
    if (!n) {
        fail(c, SLM_ERR_UNSUPPORTED, "enum/const at %s allows no value (nothing could be generated)", ptr(path));
        goto done;
    }
    sb full = {0};
    sb_printf(&full, "( %.*s ) ws", (int)body.n, body.p);
    c->prims |= P_WS;
    new_name(c, name, "enum");
    emit_rule(c, name, &full);
    free(full.p);
done:
    free(body.p);
    return !c->failed;
}

static bool gen_string(conv *c, const cJSON *s, const char *path, char *name) {
    static const char *const allowed[] = {"type", "minLength", "maxLength", "format", NULL};
    if (!only_keys(c, s, path, allowed, "for strings")) return false;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long lo = 0, hi = -1;
    if (!get_count(c, s, "minLength", path, &lo) || !get_count(c, s, "maxLength", path, &hi)) return false;
    if (fmt) {
        if (!cJSON_IsString(fmt)) return fail(c, SLM_ERR_FORMAT, "'format' at %s must be a string", ptr(path));
        if (cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength"))
            return fail(c, SLM_ERR_UNSUPPORTED, "minLength/maxLength together with format at %s", ptr(path));
        static const struct { const char *f; unsigned p; const char *rule; } fmts[] = {
            {"date", P_DATE, "json-date"}, {"time", P_TIME, "json-time"},
            {"date-time", P_DATETIME, "json-date-time"}, {"uuid", P_UUID, "json-uuid"}};
        for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
            if (!strcmp(fmt->valuestring, fmts[i].f)) {
                c->prims |= fmts[i].p;
                snprintf(name, 32, "%s", fmts[i].rule);
                return true;
            }
        return fail(c, SLM_ERR_UNSUPPORTED, "format '%s' at %s is not supported (date, time, date-time, uuid are)",
                    fmt->valuestring, ptr(path));
    }
    if (hi >= 0 && hi < lo) return fail(c, SLM_ERR_FORMAT, "maxLength below minLength at %s", ptr(path));
    if (lo == 0 && hi < 0) {
        c->prims |= P_STRING;
        snprintf(name, 32, "json-string");
        return true;
    }
    sb body = {0};
    if (hi < 0) sb_printf(&body, "\"\\\"\" json-char{%ld,} \"\\\"\" ws", lo);
    else sb_printf(&body, "\"\\\"\" json-char{%ld,%ld} \"\\\"\" ws", lo, hi);
    c->prims |= P_CHAR | P_WS;
    new_name(c, name, "string");
    emit_rule(c, name, &body);
    free(body.p);
    return !c->failed;
}

static bool gen_array(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    static const char *const allowed[] = {"type", "items", "minItems", "maxItems", NULL};
    if (!only_keys(c, s, path, allowed, "for arrays")) return false;
    long lo = 0, hi = -1;
    if (!get_count(c, s, "minItems", path, &lo) || !get_count(c, s, "maxItems", path, &hi)) return false;
    if (hi >= 0 && hi < lo) return fail(c, SLM_ERR_FORMAT, "maxItems below minItems at %s", ptr(path));
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    char item[32] = "json-value";
    if (items) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/items", path);
        if (!gen(c, items, sub, depth + 1, item)) return false;
    } else {
        c->prims |= P_VALUE;
    }
    c->prims |= P_WS;
    sb body = {0};
    sb_printf(&body, "\"[\" ws ");
    if (hi == 0) sb_printf(&body, "\"]\" ws");
    else {
        if (lo == 0) sb_printf(&body, "( ");
        sb_printf(&body, "%s ( \",\" ws %s )", item, item);
        long rlo = lo > 0 ? lo - 1 : 0, rhi = hi > 0 ? hi - 1 : -1;
        if (rhi < 0) sb_printf(&body, "{%ld,}", rlo);
        else sb_printf(&body, "{%ld,%ld}", rlo, rhi);
        if (lo == 0) sb_printf(&body, " )?");
        sb_printf(&body, " \"]\" ws");
    }
    new_name(c, name, "array");
    emit_rule(c, name, &body);
    free(body.p);
    return !c->failed;
}

typedef struct prop {
    const char *key;
    const cJSON *schema; /* NULL: any value (required but not in properties) */
    bool required;
    char rule[32];
} prop;

static bool gen_object(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    static const char *const allowed[] = {"type", "properties", "required", "additionalProperties", NULL};
    if (!only_keys(c, s, path, allowed, "for objects")) return false;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, SLM_ERR_FORMAT, "'properties' at %s must be an object", ptr(path));
    if (req && !cJSON_IsArray(req)) return fail(c, SLM_ERR_FORMAT, "'required' at %s must be an array", ptr(path));
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
        return fail(c, SLM_ERR_FORMAT, "'additionalProperties' at %s must be a boolean or a schema", ptr(path));
    int n = cJSON_GetArraySize(props) + cJSON_GetArraySize(req);
    prop *ps = calloc((size_t)n + 1, sizeof *ps);
    if (!ps) return fail(c, SLM_ERR_NOMEM, "out of memory");
    int k = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) ps[k++] = (prop){p->string, p, false, ""};
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) {
            free(ps);
            return fail(c, SLM_ERR_FORMAT, "'required' at %s must list strings", ptr(path));
        }
        int i = 0;
        while (i < k && strcmp(ps[i].key, r->valuestring)) i++;
        if (i == k && add && cJSON_IsFalse(add)) {
            free(ps);
            return fail(c, SLM_ERR_UNSUPPORTED, "required property '%s' at %s is not in 'properties' and "
                        "additionalProperties is false: nothing validates", r->valuestring, ptr(path));
        }
        if (i == k) ps[k++] = (prop){r->valuestring, NULL, true, ""};
        ps[i].required = true;
    }
    c->prims |= P_WS;
    sb body = {0};
    if (k == 0) { /* free-form: any keys, values as additionalProperties says */
        char val[32] = "json-value";
        if (add && cJSON_IsObject(add)) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s/additionalProperties", path);
            if (!gen(c, add, sub, depth + 1, val)) goto done;
        } else {
            c->prims |= P_VALUE;
        }
        if (add && cJSON_IsFalse(add)) sb_printf(&body, "\"{\" ws \"}\" ws");
        else {
            c->prims |= P_STRING;
            sb_printf(&body, "\"{\" ws ( json-string \":\" ws %s ( \",\" ws json-string \":\" ws %s )* )? \"}\" ws", val, val);
        }
        new_name(c, name, "object");
        emit_rule(c, name, &body);
        goto done;
    }
    /* declared properties, in order; optional ones may be left out. F_i: none written yet;
     * R_i: one written, so each further one opens with a comma. */
    for (int i = 0; i < k; i++) {
        char sub[512], val[32] = "json-value";
        snprintf(sub, sizeof sub, "%s/properties/%s", path, ps[i].key);
        if (ps[i].schema) {
            if (!gen(c, ps[i].schema, sub, depth + 1, val)) goto done;
        } else {
            c->prims |= P_VALUE;
        }
        sb kv = {0};
        cJSON *key = cJSON_CreateString(ps[i].key);
        if (!key) {
            fail(c, SLM_ERR_NOMEM, "out of memory");
            goto done;
        }
        json_lit(c, &kv, key);
        cJSON_Delete(key);
        sb_printf(&kv, " ws \":\" ws %s", val);
        new_name(c, ps[i].rule, "kv");
        emit_rule(c, ps[i].rule, &kv);
        free(kv.p);
        if (c->failed) goto done;
    }
    char base[32];
    new_name(c, base, "props");
    for (int i = k - 1; i >= 0; i--) {
        sb f = {0}, r = {0};
        char fn[48], rn[48], fnext[48], rnext[48];
        snprintf(fn, sizeof fn, "%s-f%d", base, i);
        snprintf(rn, sizeof rn, "%s-r%d", base, i);
        if (i + 1 < k) {
            snprintf(fnext, sizeof fnext, "%s-f%d", base, i + 1);
            snprintf(rnext, sizeof rnext, "%s-r%d", base, i + 1);
        } else { /* past the last property: nothing */
            snprintf(fnext, sizeof fnext, "\"\"");
            rnext[0] = 0;
        }
        if (ps[i].required) {
            sb_printf(&f, "%s %s", ps[i].rule, rnext);
            sb_printf(&r, "\",\" ws %s %s", ps[i].rule, rnext);
        } else {
            sb_printf(&f, "%s %s | %s", ps[i].rule, rnext, fnext);
            sb_printf(&r, "( \",\" ws %s )? %s", ps[i].rule, rnext);
        }
        emit_rule(c, fn, &f);
        emit_rule(c, rn, &r);
        free(f.p);
        free(r.p);
        if (c->failed) goto done;
    }
    sb_printf(&body, "\"{\" ws %s-f0 \"}\" ws", base);
    new_name(c, name, "object");
    emit_rule(c, name, &body);
done:
    free(body.p);
    free(ps);
    return !c->failed;
}

/* Removes from s the keywords that apply only to types other than t (for one branch of a type
 * list: {"type": ["string", "null"], "maxLength": 8} gives a string branch with maxLength and a
 * null branch without). */
static void strip_other_types(cJSON *s, const char *t) {
    static const struct { const char *type, *key; } own[] = {
        {"string", "minLength"}, {"string", "maxLength"}, {"string", "format"}, {"array", "items"},
        {"array", "minItems"}, {"array", "maxItems"}, {"object", "properties"}, {"object", "required"},
        {"object", "additionalProperties"}};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strcmp(own[i].type, t)) cJSON_DeleteItemFromObjectCaseSensitive(s, own[i].key);
}

/* Alternatives: anyOf / oneOf lists, or a list of type names. */
static bool gen_union(conv *c, const cJSON *list, const char *path, const char *kw, int depth, char *name,
                      const cJSON *base) {
    sb body = {0};
    int i = 0;
    for (const cJSON *v = list->child; v; v = v->next, i++) {
        char sub[512], alt[32];
        snprintf(sub, sizeof sub, "%s/%s/%d", path, kw, i);
        if (base) { /* one type out of a type list: a copy of the schema with that type */
            cJSON *one = cJSON_Duplicate(base, true);
            if (!one) {
                fail(c, SLM_ERR_NOMEM, "out of memory");
                break;
            }
            cJSON_ReplaceItemInObjectCaseSensitive(one, "type", cJSON_CreateString(v->valuestring));
            strip_other_types(one, v->valuestring);
            bool ok = gen(c, one, path, depth + 1, alt);
            cJSON_Delete(one);
            if (!ok) break;
        } else if (!gen(c, v, sub, depth + 1, alt)) {
            break;
        }
        sb_printf(&body, "%s%s", i ? " | " : "", alt);
    }
    if (!c->failed) {
        if (!i) fail(c, SLM_ERR_FORMAT, "'%s' at %s is empty", kw, ptr(path));
        else {
            new_name(c, name, "alt");
            emit_rule(c, name, &body);
        }
    }
    free(body.p);
    return !c->failed;
}

static bool gen_ref(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    static const char *const allowed[] = {"$ref", NULL};
    if (!only_keys(c, s, path, allowed, "next to $ref")) return false;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (!cJSON_IsString(ref)) return fail(c, SLM_ERR_FORMAT, "'$ref' at %s must be a string", ptr(path));
    const char *p = ref->valuestring;
    if (strncmp(p, "#/", 2) && strcmp(p, "#"))
        return fail(c, SLM_ERR_UNSUPPORTED, "$ref '%s' at %s: only local references (#/...) are supported", p, ptr(path));
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].pointer, p)) {
            snprintf(name, 32, "%s", c->refs[i].name);
            return true;
        }
    /* resolve the JSON pointer (RFC 6901: ~1 is '/', ~0 is '~') */
    const cJSON *t = c->doc;
    const char *q = p + 1;
    while (*q == '/' && t) {
        q++;
        char tok[256];
        size_t n = 0;
        while (*q && *q != '/' && n + 1 < sizeof tok) {
            if (q[0] == '~' && q[1] == '1') tok[n++] = '/', q += 2;
            else if (q[0] == '~' && q[1] == '0') tok[n++] = '~', q += 2;
            else tok[n++] = *q++;
        }
        tok[n] = 0;
        t = cJSON_IsArray(t) ? cJSON_GetArrayItem(t, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(t, tok);
    }
    if (!t || *q) return fail(c, SLM_ERR_FORMAT, "$ref '%s' at %s does not resolve", p, ptr(path));
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        ref_rule *nr = realloc(c->refs, (size_t)cap * sizeof *nr);
        if (!nr) return fail(c, SLM_ERR_NOMEM, "out of memory");
        c->refs = nr;
        c->cap_refs = cap;
    }
    ref_rule *r = &c->refs[c->n_refs];
    r->pointer = strdup(p);
    if (!r->pointer) return fail(c, SLM_ERR_NOMEM, "out of memory");
    new_name(c, r->name, "ref");
    c->n_refs++;
    snprintf(name, 32, "%s", r->name);
    char target[32], rname[32];
    snprintf(rname, sizeof rname, "%s", r->name);
    if (!gen(c, t, p + 1, depth + 1, target)) return false;
    sb body = {0};
    sb_printf(&body, "%s", target);
    emit_rule(c, rname, &body);
    free(body.p);
    return !c->failed;
}

/* Writes the rules for schema s (at JSON pointer path) and puts the rule to call in name. */
static bool gen(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    if (c->failed) return false;
    if (depth > SCHEMA_MAX_DEPTH) return fail(c, SLM_ERR_RANGE, "schema nested deeper than %d at %s", SCHEMA_MAX_DEPTH, ptr(path));
    if (cJSON_IsTrue(s)) {
        c->prims |= P_VALUE;
        snprintf(name, 32, "json-value");
        return true;
    }
    if (cJSON_IsFalse(s)) return fail(c, SLM_ERR_UNSUPPORTED, "the schema 'false' at %s allows nothing", ptr(path));
    if (!cJSON_IsObject(s)) return fail(c, SLM_ERR_FORMAT, "schema at %s is not an object or boolean", ptr(path));
    if (cJSON_GetObjectItemCaseSensitive(s, "$ref")) return gen_ref(c, s, path, depth, name);
    if (cJSON_GetObjectItemCaseSensitive(s, "enum") || cJSON_GetObjectItemCaseSensitive(s, "const"))
        return gen_enum(c, s, path, name);
    const char *kw = cJSON_GetObjectItemCaseSensitive(s, "anyOf") ? "anyOf" : cJSON_GetObjectItemCaseSensitive(s, "oneOf") ? "oneOf" : NULL;
    if (kw) {
        static const char *const allowed[] = {"anyOf", "oneOf", NULL};
        if (!only_keys(c, s, path, allowed, "next to anyOf/oneOf")) return false;
        if (cJSON_GetObjectItemCaseSensitive(s, "anyOf") && cJSON_GetObjectItemCaseSensitive(s, "oneOf"))
            return fail(c, SLM_ERR_UNSUPPORTED, "anyOf together with oneOf at %s", ptr(path));
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(s, kw);
        if (!cJSON_IsArray(list)) return fail(c, SLM_ERR_FORMAT, "'%s' at %s must be an array", kw, ptr(path));
        return gen_union(c, list, path, kw, depth, name, NULL);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsArray(type)) {
        for (const cJSON *t = type->child; t; t = t->next)
            if (!cJSON_IsString(t)) return fail(c, SLM_ERR_FORMAT, "'type' at %s must list strings", ptr(path));
        return gen_union(c, type, path, "type", depth, name, s);
    }
    const char *t = NULL;
    if (type) {
        if (!cJSON_IsString(type)) return fail(c, SLM_ERR_FORMAT, "'type' at %s must be a string or an array", ptr(path));
        t = type->valuestring;
    } else if (cJSON_GetObjectItemCaseSensitive(s, "properties") || cJSON_GetObjectItemCaseSensitive(s, "required") ||
               cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")) {
        t = "object";
    } else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "minItems") ||
               cJSON_GetObjectItemCaseSensitive(s, "maxItems")) {
        t = "array";
    } else if (cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength") ||
               cJSON_GetObjectItemCaseSensitive(s, "format")) {
        t = "string";
    }
    if (!t) { /* no type: any value, when nothing else constrains it */
        static const char *const none[] = {NULL};
        if (!only_keys(c, s, path, none, NULL)) return false;
        c->prims |= P_VALUE;
        snprintf(name, 32, "json-value");
        return true;
    }
    if (!strcmp(t, "object")) return gen_object(c, s, path, depth, name);
    if (!strcmp(t, "array")) return gen_array(c, s, path, depth, name);
    if (!strcmp(t, "string")) return gen_string(c, s, path, name);
    static const struct { const char *t; unsigned p; const char *rule; } simple[] = {
        {"integer", P_INT, "json-integer"}, {"number", P_NUMBER, "json-number"},
        {"boolean", P_BOOL, "json-boolean"}, {"null", P_NULL, "json-null"}};
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
        if (!strcmp(t, simple[i].t)) {
            static const char *const allowed[] = {"type", NULL};
            if (!only_keys(c, s, path, allowed, NULL)) return false;
            c->prims |= simple[i].p;
            snprintf(name, 32, "%s", simple[i].rule);
            return true;
        }
    return fail(c, SLM_ERR_FORMAT, "unknown type '%s' at %s", t, ptr(path));
}

/* The fixed rules, each with the rules it calls. */
static const struct {
    unsigned flag, needs;
    const char *text;
} prim_rules[] = {
    {P_WS, 0, "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"},
    {P_CHAR, 0,
     "json-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" json-hex4 )\n"
     "json-hex4 ::= ( [0-9a-cA-CeEfF] [0-9a-fA-F] | [dD] [0-7] ) [0-9a-fA-F]{2}\n"},
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

slm_status gr_schema_to_gbnf(const char *json, size_t len, char **gbnf, slm_err *e) {
    *gbnf = NULL;
    if (len > GR_MAX_TEXT) return err_set(e, SLM_ERR_RANGE, "json schema: %zu bytes, above the cap of %zu", len, GR_MAX_TEXT);
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!doc) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return err_set(e, SLM_ERR_FORMAT, "json schema: not valid JSON (near byte %zu)", at);
    }
    conv c = {.doc = doc, .e = e};
    char root[32];
    if (gen(&c, doc, "", 0, root)) {
        unsigned need = c.prims;
        for (bool grew = true; grew;) { /* close over dependencies */
            grew = false;
            for (size_t i = 0; i < sizeof prim_rules / sizeof prim_rules[0]; i++)
                if ((need & prim_rules[i].flag) && (need | prim_rules[i].needs) != need) {
                    need |= prim_rules[i].needs;
                    grew = true;
                }
        }
        sb_printf(&c.out, "root ::= %s\n", root);
        for (size_t i = 0; i < sizeof prim_rules / sizeof prim_rules[0]; i++)
            if (need & prim_rules[i].flag) sb_printf(&c.out, "%s", prim_rules[i].text);
        if (need & (P_DATE | P_DATETIME)) sb_printf(&c.out, "%s", date_body);
        if (need & (P_TIME | P_DATETIME)) sb_printf(&c.out, "%s", time_body);
        if (c.out.oom) fail(&c, SLM_ERR_NOMEM, "out of memory");
    }
    cJSON_Delete(doc);
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].pointer);
    free(c.refs);
    if (c.failed) {
        free(c.out.p);
        return e ? e->status : SLM_ERR_FORMAT;
    }
    *gbnf = c.out.p;
    return SLM_OK;
}
