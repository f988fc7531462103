/* schema_merge.c — allOf for the JSON Schema converter (schema_int.h): the branches are merged
 * keyword by keyword into one schema that validates exactly what all of them validate, or the merge
 * is refused naming the keyword. anyOf/oneOf inside a branch distribute (A and (B or C) = (A and
 * B) or (A and C); for oneOf likewise, since exactly one of B, C holds iff exactly one of A and B,
 * A and C does). Nested schemas that both sides constrain become {"allOf": [x, y]}, merged when
 * generated. Merged schemas refer to the document's nodes (cJSON references) and are owned by the
 * conversion. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grammar/schema_int.h"

#define MERGE_MAX 20000 /* merges in one conversion */

bool sc_add_ref(cJSON *o, const char *k, const cJSON *v) {
    /* cJSON_AddItemReferenceToObject leaks its reference when the key's copy fails */
    cJSON *r = cJSON_IsObject(v)   ? cJSON_CreateObjectReference(v->child)
               : cJSON_IsArray(v)  ? cJSON_CreateArrayReference(v->child)
               : cJSON_IsString(v) ? cJSON_CreateStringReference(v->valuestring)
                                   : cJSON_Duplicate(v, false);
    if (r && cJSON_AddItemToObject(o, k, r)) return true;
    cJSON_Delete(r);
    return false;
}

cJSON *sc_copy_without(conv *c, const cJSON *s, const char *const *drop) {
    cJSON *o = sc_own(c, cJSON_CreateObject());
    if (!o) return NULL;
    for (const cJSON *x = s->child; x; x = x->next) {
        bool skip = false;
        for (int i = 0; drop && drop[i] && !skip; i++) skip = !strcmp(drop[i], x->string);
        if (!skip && !sc_add_ref(o, x->string, x)) {
            sc_fail(c, SLM_ERR_NOMEM, "out of memory");
            return NULL;
        }
    }
    return o;
}

/* Appends item (NULL: out of memory) or a reference to v to arr; false (and a failure) when out
 * of memory: a list missing an entry could say less than the schema. */
static bool push(conv *c, cJSON *arr, cJSON *item) {
    if (arr && item && cJSON_AddItemToArray(arr, item)) return true;
    cJSON_Delete(item);
    return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
}
static bool push_ref(conv *c, cJSON *arr, const cJSON *v) {
    return (arr && cJSON_AddItemReferenceToArray(arr, (cJSON *)v)) || sc_fail(c, SLM_ERR_NOMEM, "out of memory");
}

static cJSON *all_of2(const cJSON *x, const cJSON *y) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "allOf") : NULL;
    if (!arr || !cJSON_AddItemReferenceToArray(arr, (cJSON *)x) || !cJSON_AddItemReferenceToArray(arr, (cJSON *)y)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool add(conv *c, cJSON *o, const char *k, cJSON *v) {
    if (!v || !cJSON_AddItemToObject(o, k, v)) {
        cJSON_Delete(v);
        return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    }
    return true;
}

static bool add_ref(conv *c, cJSON *o, const char *k, const cJSON *v) {
    return sc_add_ref(o, k, v) || sc_fail(c, SLM_ERR_NOMEM, "out of memory");
}

static bool has_constraints_besides(const cJSON *s, const char *kw) {
    for (const cJSON *k = s->child; k; k = k->next)
        if (sc_constraining(k->string) && strcmp(k->string, kw)) return true;
    return false;
}

/* a with $ref (alone), allOf, if, or $ref beside other keywords resolved; NULL after a failure. */
static const cJSON *plain(conv *c, const cJSON *a, const char *path, int depth) {
    for (int k = 0; k < 32 && cJSON_IsObject(a); k++) {
        if (sc_get(a, "if") && (sc_get(a, "then") || sc_get(a, "else"))) {
            a = sc_apply_if(c, a, path, depth + 1);
            continue;
        }
        if (!(sc_get(a, "$ref") && c->ref_alone) &&
            (sc_get(a, "allOf") || (sc_get(a, "$ref") && has_constraints_besides(a, "$ref"))))
            return sc_flatten(c, a, path, depth + 1);
        const cJSON *r = sc_get(a, "$ref");
        if (!r) return a;
        if (!cJSON_IsString(r)) {
            sc_fail(c, SLM_ERR_FORMAT, "'$ref' at %s must be a string", sc_ptr(path));
            return NULL;
        }
        a = sc_resolve(c, r->valuestring, path);
    }
    if (cJSON_IsObject(a) || cJSON_IsBool(a)) return a;
    if (a) sc_fail(c, SLM_ERR_UNSUPPORTED, "$ref chain at %s is too long or not a schema", sc_ptr(path));
    return NULL;
}

/* The schema a property key gets from the other branch o when o does not declare it. */
static bool cross(conv *c, cJSON *props, const char *key, const cJSON *mine, const cJSON *o, const char *path) {
    const cJSON *pp = sc_get(o, "patternProperties"), *addl = sc_get(o, "additionalProperties");
    if (cJSON_IsObject(pp) && pp->child)
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s: property '%s' meets the other branch's "
                       "patternProperties", sc_ptr(path), key);
    if (cJSON_IsFalse(addl)) return true; /* the key cannot appear */
    if (cJSON_IsObject(addl)) return add(c, props, key, all_of2(mine, addl));
    return add_ref(c, props, key, mine);
}

static const char *type_names[] = {"null", "boolean", "object", "array", "string", "integer", "number"};

static bool merge_type(conv *c, cJSON *o, const cJSON *a, const cJSON *b, const char *path) {
    unsigned t = sc_types(a) & sc_types(b);
    if (!t) return sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s: the types conflict (no value has both)", sc_ptr(path));
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    unsigned bits[] = {T_NULL, T_BOOL, T_OBJ, T_ARR, T_STR, T_INT, T_NUM};
    for (int i = 0; i < 7; i++) {
        if (!(t & bits[i]) || (bits[i] == T_INT && (t & T_NUM))) continue;
        if (!push(c, arr, cJSON_CreateString(type_names[i]))) {
            cJSON_Delete(arr);
            return false;
        }
    }
    return add(c, o, "type", arr);
}

/* The values of a's enum/const list that are also in b's (either may have none: no list). */
static bool merge_values(conv *c, cJSON *o, const cJSON *a, const cJSON *b) {
    const cJSON *la = sc_get(a, "enum"), *ca = sc_get(a, "const"), *lb = sc_get(b, "enum"), *cb = sc_get(b, "const");
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    for (const cJSON *v = cJSON_IsArray(la) ? la->child : ca; v; v = cJSON_IsArray(la) ? v->next : NULL) {
        bool in = true;
        if (ca && !cJSON_Compare(v, ca, true)) in = false;
        if (cJSON_IsArray(lb)) {
            bool f = false;
            for (const cJSON *y = lb->child; y && !f; y = y->next) f = cJSON_Compare(v, y, true);
            in &= f;
        }
        if (cb && !cJSON_Compare(v, cb, true)) in = false;
        if (in && !push_ref(c, arr, v)) {
            cJSON_Delete(arr);
            return false;
        }
    }
    return add(c, o, "enum", arr);
}

static bool merge_bounds(conv *c, cJSON *o, const cJSON *a, const cJSON *b) {
    for (int side = 0; side < 2; side++) {
        double va = 0, vb = 0;
        bool sa, sb;
        bool ha = sc_num_bound(a, side, &va, &sa), hb = sc_num_bound(b, side, &vb, &sb);
        if (!ha && !hb) continue;
        double v = ha ? va : vb;
        bool strict = ha ? sa : sb;
        if (ha && hb && (side ? vb < va || (vb == va && sb) : vb > va || (vb == va && sb))) v = vb, strict = sb;
        if (!add(c, o, strict ? (side ? "exclusiveMaximum" : "exclusiveMinimum") : (side ? "maximum" : "minimum"),
                 cJSON_CreateNumber(v)))
            return false;
    }
    return true;
}

static bool merge_props(conv *c, cJSON *o, const cJSON *a, const cJSON *b, const char *path) {
    const cJSON *pa = sc_get(a, "properties"), *pb = sc_get(b, "properties");
    cJSON *props = cJSON_CreateObject();
    if (!props) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    if (!add(c, o, "properties", props)) return false;
    for (const cJSON *x = cJSON_IsObject(pa) ? pa->child : NULL; x; x = x->next) {
        const cJSON *y = sc_get(pb, x->string);
        if (y ? !add(c, props, x->string, all_of2(x, y)) : !cross(c, props, x->string, x, b, path)) return false;
    }
    for (const cJSON *y = cJSON_IsObject(pb) ? pb->child : NULL; y; y = y->next)
        if (!sc_get(pa, y->string) && !cross(c, props, y->string, y, a, path)) return false;
    return true;
}

static long long gcd(long long x, long long y) { return y ? gcd(y, x % y) : x; }

/* One keyword k present in both plain schemas a and b (x, y their values). */
static bool merge_key(conv *c, cJSON *o, const char *k, const cJSON *x, const cJSON *y, const cJSON *a,
                      const cJSON *b, const char *path) {
    if (!sc_constraining(k) || cJSON_Compare(x, y, true)) return add_ref(c, o, k, x);
    static const char *const mins[] = {"minLength", "minItems", "minProperties", NULL};
    static const char *const maxs[] = {"maxLength", "maxItems", "maxProperties", NULL};
    for (int i = 0; mins[i]; i++)
        if (!strcmp(k, mins[i]) || !strcmp(k, maxs[i])) {
            if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y)) break;
            bool lower = !strcmp(k, mins[i]);
            return add_ref(c, o, k, (lower ? x->valuedouble >= y->valuedouble : x->valuedouble <= y->valuedouble) ? x : y);
        }
    if (!strcmp(k, "required")) {
        cJSON *arr = cJSON_CreateArray();
        if (!arr) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        bool ok = true;
        for (const cJSON *v = cJSON_IsArray(x) ? x->child : NULL; v && ok; v = v->next) ok = push_ref(c, arr, v);
        for (const cJSON *v = cJSON_IsArray(y) ? y->child : NULL; v && ok; v = v->next) ok = push_ref(c, arr, v);
        if (!ok) cJSON_Delete(arr);
        return ok && add(c, o, k, arr);
    }
    if (!strcmp(k, "uniqueItems")) return add_ref(c, o, k, cJSON_IsTrue(x) ? x : y);
    if (!strcmp(k, "multipleOf") && cJSON_IsNumber(x) && cJSON_IsNumber(y) && x->valuedouble == floor(x->valuedouble) &&
        y->valuedouble == floor(y->valuedouble) && x->valuedouble > 0 && y->valuedouble > 0 && x->valuedouble < 1e9 &&
        y->valuedouble < 1e9) {
        long long p = (long long)x->valuedouble, q = (long long)y->valuedouble;
        return add(c, o, k, cJSON_CreateNumber((double)(p / gcd(p, q) * q)));
    }
    static const char *const schemas[] = {"additionalItems", "propertyNames", NULL};
    for (int i = 0; schemas[i]; i++)
        if (!strcmp(k, schemas[i])) return add(c, o, k, all_of2(x, y));
    if ((!strcmp(k, "items") || !strcmp(k, "additionalProperties")) && !cJSON_IsArray(x) && !cJSON_IsArray(y)) {
        if (cJSON_IsFalse(x) || cJSON_IsTrue(y)) return add_ref(c, o, k, x);
        if (cJSON_IsFalse(y) || cJSON_IsTrue(x)) return add_ref(c, o, k, y);
        return add(c, o, k, all_of2(x, y));
    }
    if (!strcmp(k, "dependencies") || !strcmp(k, "dependentRequired") || !strcmp(k, "dependentSchemas")) {
        cJSON *d = cJSON_CreateObject();
        if (!d || !add(c, o, k, d)) return false;
        for (const cJSON *u = x->child; u; u = u->next) {
            const cJSON *v = sc_get(y, u->string);
            if (!v) {
                if (!add_ref(c, d, u->string, u)) return false;
            } else if (cJSON_IsArray(u) && cJSON_IsArray(v)) {
                cJSON *arr = cJSON_CreateArray();
                bool ok = arr != NULL || sc_fail(c, SLM_ERR_NOMEM, "out of memory");
                for (const cJSON *w = u->child; ok && w; w = w->next) ok = push_ref(c, arr, w);
                for (const cJSON *w = v->child; ok && w; w = w->next) ok = push_ref(c, arr, w);
                if (!ok) cJSON_Delete(arr);
                if (!ok || !add(c, d, u->string, arr)) return false;
            } else if (!cJSON_IsArray(u) && !cJSON_IsArray(v)) {
                if (!add(c, d, u->string, all_of2(u, v))) return false;
            } else {
                return sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s: '%s' of '%s' as a list and as a schema",
                               sc_ptr(path), k, u->string);
            }
        }
        for (const cJSON *v = y->child; v; v = v->next)
            if (!sc_get(x, v->string) && !add_ref(c, d, v->string, v)) return false;
        return true;
    }
    (void)a, (void)b;
    return sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s: two different '%s' cannot be merged", sc_ptr(path), k);
}

static const cJSON *merge_plain(conv *c, const cJSON *a, const cJSON *b, const char *path) {
    cJSON *o = sc_own(c, cJSON_CreateObject());
    if (!o) return NULL;
    static const char *const special[] = {"type", "enum", "const", "properties", "minimum", "maximum",
                                          "exclusiveMinimum", "exclusiveMaximum", "patternProperties", NULL};
    for (int side = 0; side < 2; side++) {
        const cJSON *s = side ? b : a, *t = side ? a : b;
        for (const cJSON *x = s->child; x; x = x->next) {
            bool sp = false;
            for (int i = 0; special[i] && !sp; i++) sp = !strcmp(special[i], x->string);
            if (sp) continue;
            const cJSON *y = sc_get(t, x->string);
            if (!y) {
                if (!add_ref(c, o, x->string, x)) return NULL;
            } else if (!side && !merge_key(c, o, x->string, x, y, a, b, path)) {
                return NULL;
            }
        }
    }
    if (sc_get(a, "type") && sc_get(b, "type") ? !merge_type(c, o, a, b, path)
                                               : (sc_get(a, "type") || sc_get(b, "type")) &&
                                                     !add_ref(c, o, "type", sc_get(a, "type") ? sc_get(a, "type") : sc_get(b, "type")))
        return NULL;
    bool va = sc_get(a, "enum") || sc_get(a, "const"), vb = sc_get(b, "enum") || sc_get(b, "const");
    if (va && vb ? !merge_values(c, o, a, b) : (va || vb) && !merge_values(c, o, va ? a : b, va ? a : b)) return NULL;
    if (!merge_bounds(c, o, a, b)) return NULL;
    const cJSON *ppa = sc_get(a, "patternProperties"), *ppb = sc_get(b, "patternProperties");
    bool ha = cJSON_IsObject(ppa) && ppa->child, hb = cJSON_IsObject(ppb) && ppb->child;
    if (ha && hb) {
        sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s: patternProperties in two branches cannot be merged", sc_ptr(path));
        return NULL;
    }
    if (ha || hb) {
        const cJSON *other = ha ? b : a;
        const cJSON *oadd = sc_get(other, "additionalProperties");
        if (oadd && !cJSON_IsTrue(oadd)) {
            sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s: patternProperties beside the other branch's "
                    "additionalProperties cannot be merged", sc_ptr(path));
            return NULL;
        }
        if (!add_ref(c, o, "patternProperties", ha ? ppa : ppb)) return NULL;
    }
    if ((sc_get(a, "properties") || sc_get(b, "properties")) && !merge_props(c, o, a, b, path)) return NULL;
    return o;
}

const cJSON *sc_merge(conv *c, const cJSON *a, const cJSON *b, const char *path, int depth) {
    if (c->failed) return NULL;
    if (depth > SC_MAX_DEPTH) {
        sc_fail(c, SLM_ERR_RANGE, "allOf/$ref nested deeper than %d at %s", SC_MAX_DEPTH, sc_ptr(path));
        return NULL;
    }
    if (++c->n_merges > MERGE_MAX) {
        sc_fail(c, SLM_ERR_RANGE, "allOf at %s needs more than %d merges", sc_ptr(path), MERGE_MAX);
        return NULL;
    }
    if (!(a = plain(c, a, path, depth)) || !(b = plain(c, b, path, depth))) return NULL;
    if (cJSON_IsTrue(a)) return b;
    if (cJSON_IsTrue(b)) return a;
    if (cJSON_IsFalse(a) || cJSON_IsFalse(b)) {
        sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s holds the schema 'false': nothing validates", sc_ptr(path));
        return NULL;
    }
    for (int side = 0; side < 2; side++) {
        const cJSON *s = side ? b : a, *t = side ? a : b;
        const char *kw = sc_get(s, "anyOf") ? "anyOf" : sc_get(s, "oneOf") ? "oneOf" : NULL;
        if (!kw) continue;
        const cJSON *list = sc_get(s, kw);
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) > SC_MAX_BRANCHES) {
            sc_fail(c, SLM_ERR_UNSUPPORTED, "allOf at %s over '%s' that is not a list of at most %d schemas",
                    sc_ptr(path), kw, SC_MAX_BRANCHES);
            return NULL;
        }
        const char *drop[] = {kw, NULL};
        const cJSON *rest = sc_copy_without(c, s, drop);
        cJSON *o = rest ? sc_own(c, cJSON_CreateObject()) : NULL;
        cJSON *arr = o ? cJSON_AddArrayToObject(o, kw) : NULL;
        if (!arr) {
            sc_fail(c, SLM_ERR_NOMEM, "out of memory");
            return NULL;
        }
        for (const cJSON *x = list->child; x; x = x->next) {
            const cJSON *m = sc_merge(c, rest, x, path, depth + 1);
            m = m ? sc_merge(c, m, t, path, depth + 1) : NULL;
            if (!m) return NULL;
            if (!push_ref(c, arr, m)) return NULL;
        }
        return o;
    }
    return merge_plain(c, a, b, path);
}

const cJSON *sc_flatten(conv *c, const cJSON *s, const char *path, int depth) {
    static const char *const drop[] = {"allOf", "$ref", NULL};
    const cJSON *all = sc_get(s, "allOf"), *ref = c->ref_alone ? NULL : sc_get(s, "$ref");
    if (all && (!cJSON_IsArray(all) || !all->child)) {
        sc_fail(c, SLM_ERR_FORMAT, "'allOf' at %s must be a non-empty array", sc_ptr(path));
        return NULL;
    }
    cJSON *base = sc_copy_without(c, s, drop);
    if (!base) return NULL;
    const cJSON *acc = base;
    if (sc_get(base, "anyOf") && sc_get(base, "oneOf")) { /* both: their conjunction */
        static const char *const drop_one[] = {"allOf", "$ref", "oneOf", NULL};
        cJSON *one = sc_own(c, cJSON_CreateObject());
        if (!one || !add_ref(c, one, "oneOf", sc_get(base, "oneOf"))) return NULL;
        acc = sc_copy_without(c, s, drop_one);
        acc = acc ? sc_merge(c, acc, one, path, depth + 1) : NULL;
    }
    int i = 0;
    for (const cJSON *x = all ? all->child : NULL; x && acc; x = x->next, i++) {
        char sub[SC_PATH], idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        sc_sub(sub, path, "allOf", idx);
        acc = sc_merge(c, acc, x, sub, depth + 1);
    }
    if (ref && acc) {
        cJSON *r = sc_own(c, cJSON_CreateObject());
        if (!r || !add_ref(c, r, "$ref", ref)) return NULL;
        acc = sc_merge(c, acc, r, path, depth + 1);
    }
    return acc;
}

/* The keys of a schema that holds only "required" (and annotations), or NULL. */
static const cJSON *only_required(const cJSON *s) {
    if (!cJSON_IsObject(s)) return NULL;
    for (const cJSON *k = s->child; k; k = k->next)
        if (sc_constraining(k->string) && strcmp(k->string, "required")) return NULL;
    const cJSON *r = sc_get(s, "required");
    return cJSON_IsArray(r) && cJSON_IsString(r->child) ? r : NULL;
}

const cJSON *sc_negate(conv *c, const cJSON *n, const char *path) {
    bool empty = cJSON_IsTrue(n) || (cJSON_IsObject(n) && !has_constraints_besides(n, ""));
    if (empty) return sc_own(c, cJSON_CreateFalse()); /* not {}: nothing validates */
    cJSON *o = sc_own(c, cJSON_CreateObject());
    if (!o) return NULL;
    const cJSON *keys[SC_MAX_BRANCHES];
    int nk = 0;
    const cJSON *r = only_required(n), *any = sc_get(n, "anyOf"), *all = sc_get(n, "allOf");
    if (r) { /* not all present: the first one absent (a subset) */
        keys[nk++] = r->child;
    } else if (cJSON_IsArray(all) && n->child && !n->child->next) { /* not (A and B): A false */
        for (const cJSON *x = all->child; x && !nk; x = x->next)
            if ((r = only_required(x))) keys[nk++] = r->child;
    } else if (cJSON_IsArray(any) && n->child && !n->child->next) { /* no branch: each one's first key absent */
        for (const cJSON *x = any->child; x; x = x->next) {
            if (!(r = only_required(x)) || nk == SC_MAX_BRANCHES) {
                nk = 0;
                break;
            }
            keys[nk++] = r->child;
        }
    } else if (cJSON_IsObject(n) && sc_get(n, "type") && !has_constraints_besides(n, "type")) {
        unsigned t = T_ALL & ~sc_types(n);
        if (!t) {
            sc_fail(c, SLM_ERR_UNSUPPORTED, "'not' at %s excludes every type", sc_ptr(path));
            return NULL;
        }
        cJSON *arr = cJSON_AddArrayToObject(o, "type");
        unsigned bits[] = {T_NULL, T_BOOL, T_OBJ, T_ARR, T_STR, T_INT, T_NUM};
        for (int i = 0; arr && i < 7; i++)
            if ((t & bits[i]) && !(bits[i] == T_INT && (t & T_NUM)) && !push(c, arr, cJSON_CreateString(type_names[i])))
                return NULL;
        if (!arr) sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        return arr ? o : NULL;
    }
    if (!nk) {
        sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword 'not' at %s is not supported (only not {}, not {type}, and not over "
                "required lists)", sc_ptr(path));
        return NULL;
    }
    /* required holds for every non-object, so the negation also says: an object */
    cJSON *props = cJSON_AddObjectToObject(o, "properties");
    if (!cJSON_AddStringToObject(o, "type", "object") || !props) {
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < nk; i++)
        if (!sc_get(props, keys[i]->valuestring) && !cJSON_AddFalseToObject(props, keys[i]->valuestring)) {
            sc_fail(c, SLM_ERR_NOMEM, "out of memory");
            return NULL;
        }
    return o;
}

const cJSON *sc_apply_if(conv *c, const cJSON *s, const char *path, int depth) {
    const cJSON *cond = sc_get(s, "if"), *then = sc_get(s, "then"), *els = sc_get(s, "else");
    if (!cond || (!then && !els)) return s;
    static const char *const drop[] = {"if", "then", "else", NULL};
    const cJSON *others = sc_copy_without(c, s, drop);
    if (!others) return NULL;
    char sub[SC_PATH];
    sc_sub(sub, path, "if", NULL);
    sc_quiet q = sc_quiet_begin(c);
    const cJSON *m = sc_merge(c, others, cond, sub, depth + 1); /* the "then" side: if and then hold */
    if (m && then) m = sc_merge(c, m, then, sub, depth + 1);
    bool bad = c->failed;
    sc_quiet_end(c, q);
    if (!bad && m) return m;
    q = sc_quiet_begin(c); /* the "else" side: if fails (when its negation is known) */
    const cJSON *neg = sc_negate(c, cond, sub);
    m = neg && !cJSON_IsFalse(neg) ? sc_merge(c, others, neg, sub, depth + 1) : NULL;
    if (m && els) m = sc_merge(c, m, els, sub, depth + 1);
    bad = c->failed;
    sc_quiet_end(c, q);
    if (!bad && m) return m;
    sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword 'if' at %s is not supported (neither the if/then side nor the else side "
            "could be merged)", sc_ptr(path));
    return NULL;
}
