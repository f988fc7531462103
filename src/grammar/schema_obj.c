/* schema_obj.c — objects and arrays for the JSON Schema converter (schema_int.h).
 *
 * Objects: the declared properties in the schema's order (required ones always, optional ones may
 * be left out), then — when additionalProperties is a schema, or there are no declared properties
 * — extra keys: with declared properties, keys of plain characters that differ from every declared
 * one (a trie complement), else any key (or propertyNames' strings). Counts (minProperties,
 * maxProperties) are tracked by the sequence rules S(i, cnt): i elements considered, cnt written.
 * Extra keys never count toward a minimum (two extras could repeat a key, which a validator counts
 * once). Arrays: prefixItems / tuple items in order, then the rest schema, the total count in
 * [minItems, maxItems]; uniqueItems for items from a small set of values (each at most once, in the
 * listed order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/schema_int.h"

#define SEQ_MAX_STATES 20000 /* (elements + 1) x (counts tracked) */

/* ---- sequences ----------------------------------------------------------------------------------- */

typedef struct seq {
    const bool *req;
    int n;
    long lo, hi, top; /* counts 0..top are states; when saturating, top stands for "top or more" */
    bool saturate, extra, counting; /* extra: extra elements follow, and one of them counts toward lo */
    int *req_after;   /* required elements in [i, n) */
} seq;

static bool feasible(const seq *q, int i, long cnt) {
    if (!q->counting) return true; /* lo <= required ones, hi never binds */
    if (!q->saturate && cnt + q->req_after[i] > q->hi) return false;
    return cnt + (q->n - i) + q->extra >= q->lo || (q->saturate && cnt >= q->top && q->top >= q->lo);
}

static long sat(const seq *q, long cnt) { return q->saturate && cnt > q->top ? q->top : cnt; }

bool sc_gen_seq(conv *c, const char *const *elem, const bool *req, int n, const char *extra, long lo, long hi,
                const char *path, char *name) {
    seq q = {req, n, lo, hi, 1, true, extra != NULL, false, NULL};
    int nreq = 0;
    for (int i = 0; i < n; i++) nreq += req[i];
    bool counting = lo > nreq || (hi >= 0 && (extra || hi < n));
    q.counting = counting;
    if (counting) {
        q.saturate = hi < 0;
        q.top = hi >= 0 ? (hi < n + 1 || extra ? hi : n + 1) : lo > 1 ? lo : 1;
    }
    if ((double)(n + 1) * (double)(q.top + 1) > SEQ_MAX_STATES)
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "counting %d properties or items against min/max at %s needs more "
                       "than %d rules", n, sc_ptr(path), SEQ_MAX_STATES);
    q.req_after = al_calloc(c->a, (size_t)n + 1, sizeof *q.req_after);
    if (!q.req_after) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    for (int i = n - 1; i >= 0; i--) q.req_after[i] = q.req_after[i + 1] + req[i];
    if (!feasible(&q, 0, 0)) {
        al_free(c->a, q.req_after);
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "no number of properties or items at %s fits the count bounds "
                       "(min %ld, max %ld)", sc_ptr(path), lo, hi);
    }
    char base[SC_NAME];
    sc_new_name(c, base, "seq");
    buf body = buf_make(c->a);
    for (int i = n; i >= 0 && !c->failed; i--)
        for (long cnt = 0; cnt <= q.top && !c->failed; cnt++) {
            if (!feasible(&q, i, cnt)) continue;
            buf_truncate(&body, 0);
            const char *sep = cnt > 0 ? "\",\" ws " : "";
            if (i == n) {
                long room = q.saturate ? -1 : q.hi - cnt; /* extras allowed */
                bool need = extra && q.counting && (!q.saturate || cnt < q.top) && cnt < q.lo; /* one extra must come */
                if (need) {
                    if (cnt == 0) buf_printf(&body, "%s ( \",\" ws %s )", extra, extra);
                    else buf_printf(&body, "\",\" ws %s ( \",\" ws %s )", extra, extra);
                    if (room < 0) buf_puts(&body, "*");
                    else buf_printf(&body, "{0,%ld}", room - 1);
                } else if (extra && room != 0) {
                    if (cnt == 0) {
                        if (room < 0) buf_printf(&body, "( %s ( \",\" ws %s )* )?", extra, extra);
                        else buf_printf(&body, "( %s ( \",\" ws %s ){0,%ld} )?", extra, extra, room - 1);
                    } else {
                        if (room < 0) buf_printf(&body, "( \",\" ws %s )*", extra);
                        else buf_printf(&body, "( \",\" ws %s ){0,%ld}", extra, room);
                    }
                } else {
                    buf_puts(&body, "\"\"");
                }
            } else {
                int k = 0;
                long next = sat(&q, cnt + 1);
                if ((q.saturate || cnt + 1 <= q.hi) && feasible(&q, i + 1, next))
                    buf_printf(&body, "%s%s %s-%d-%ld", sep, elem[i], base, i + 1, next), k++;
                if (!req[i] && feasible(&q, i + 1, cnt))
                    buf_printf(&body, "%s%s-%d-%ld", k++ ? " | " : "", base, i + 1, cnt);
                if (!k) continue;
            }
            char rn[SC_NAME + 48];
            snprintf(rn, sizeof rn, "%s-%d-%ld", base, i, cnt);
            sc_emit(c, rn, &body);
        }
    buf_free(&body);
    al_free(c->a, q.req_after);
    snprintf(name, SC_NAME, "%.40s-0-0", base);
    return !c->failed;
}

/* ---- objects ------------------------------------------------------------------------------------- */

typedef struct prop {
    const char *key;
    const cJSON *schema; /* NULL: any value */
    bool required, dropped, undecl; /* undecl: not in properties (its schema comes from elsewhere) */
} prop;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool plain_key(const char *k) {
    for (const unsigned char *p = (const unsigned char *)k; *p; p++)
        if (*p < 0x20 || *p >= 0x7F || *p == '"' || *p == '\\') return false;
    return true;
}

/* Rule deriving the key characters (json-keychar) of strings not in keys[lo, hi), which share
 * their first d bytes; keys sorted, plain ASCII. */
static bool key_complement(conv *c, const char **keys, int lo, int hi, int d, char *name) {
    buf body = buf_make(c->a), excl = buf_make(c->a);
    int n = 0;
    if ((int)strlen(keys[lo]) != d) buf_puts(&body, "\"\""), n++; /* the prefix itself is no key */
    int i = lo;
    while (i < hi && (int)strlen(keys[i]) == d) i++;
    while (i < hi && !c->failed) {
        char ch = keys[i][d];
        int j = i;
        while (j < hi && keys[j][d] == ch) j++;
        char sub[SC_NAME];
        if (!key_complement(c, keys, i, j, d + 1, sub)) break;
        buf_printf(&body, "%s\"", n++ ? " | " : "");
        char lit[2] = {ch, 0};
        sc_lit_body(&body, lit);
        buf_printf(&body, "\" %s", sub);
        buf_printf(&excl, "\\x%02X", (unsigned char)ch);
        i = j;
    }
    if (!c->failed) {
        buf_printf(&body, "%s[^\"\\\\\\x7F\\x00-\\x1F%s] json-keychar*", n ? " | " : "", excl.p ? excl.p : "");
        c->prims |= P_KEYCHAR;
        sc_emit_new(c, name, "key", &body);
    }
    buf_free(&body);
    buf_free(&excl);
    return !c->failed;
}

/* {"allOf": [a, b]}, owned by the conversion. */
static const cJSON *all_of(conv *c, const cJSON *a, const cJSON *b) {
    cJSON *o = sc_own(c, cJSON_CreateObject());
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "allOf") : NULL;
    if (!arr || !cJSON_AddItemReferenceToArray(arr, (cJSON *)a) || !cJSON_AddItemReferenceToArray(arr, (cJSON *)b)) {
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return o;
}

/* propertyNames: a string schema of pattern, minLength, maxLength, enum, const (and annotations). */
static bool names_supported(conv *c, const cJSON *pn, const char *path) {
    if (cJSON_IsBool(pn)) return true;
    static const char *const ok[] = {"type", "pattern", "minLength", "maxLength", "enum", "const", "format", NULL};
    for (const cJSON *x = pn->child; x; x = x->next) {
        if (!sc_constraining(x->string)) continue;
        bool fine = false;
        for (int i = 0; ok[i]; i++) fine |= !strcmp(ok[i], x->string);
        if (!fine)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword '%s' in propertyNames at %s is not supported", x->string,
                           sc_ptr(path));
    }
    const cJSON *t = sc_get(pn, "type"), *f = sc_get(pn, "format");
    if (t && !(cJSON_IsString(t) && !strcmp(t->valuestring, "string")))
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "propertyNames at %s: only string schemas are supported", sc_ptr(path));
    if (cJSON_IsString(f) && sc_format_known(f->valuestring))
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "format in propertyNames at %s is not supported", sc_ptr(path));
    return true;
}

/* Whether key passes propertyNames pn (names_supported). */
static bool name_accepted(conv *c, const cJSON *pn, const char *key, const char *path, bool *ok) {
    *ok = !cJSON_IsFalse(pn);
    if (!cJSON_IsObject(pn)) return true;
    long lo = 0, hi = -1, n = 0;
    if (!sc_count(c, pn, "minLength", path, &lo) || !sc_count(c, pn, "maxLength", path, &hi)) return false;
    for (const unsigned char *q = (const unsigned char *)key; *q; q++) n += (*q & 0xC0) != 0x80;
    *ok = n >= lo && (hi < 0 || n <= hi);
    const cJSON *en = sc_get(pn, "enum"), *cn = sc_get(pn, "const"), *pat = sc_get(pn, "pattern");
    if (*ok && cJSON_IsArray(en)) {
        bool in = false;
        for (const cJSON *v = en->child; v && !in; v = v->next) in = cJSON_IsString(v) && !strcmp(v->valuestring, key);
        *ok = in;
    }
    if (*ok && cn) *ok = cJSON_IsString(cn) && !strcmp(cn->valuestring, key);
    if (*ok && cJSON_IsString(pat)) {
        char sub[SC_PATH];
        sc_sub(sub, path, "propertyNames", NULL);
        return sc_pattern_matches(c, pat->valuestring, key, sub, ok);
    }
    return true;
}

/* The key rule (into key) and value rule (into val) of extra keys under patternProperties: keys
 * matching any pattern, values valid for all the patterns' schemas (a key may match several).
 * Leaves key empty when the schemas cannot be merged. */
static bool extra_pattern_key(conv *c, const cJSON *pp, const char *path, int depth, char *key, char *val) {
    buf alts = buf_make(c->a);
    const cJSON *vs = NULL;
    int n = 0;
    for (const cJSON *p = pp->child; p && !c->failed; p = p->next, n++) {
        char sub[SC_PATH], re[SC_NAME];
        sc_sub(sub, path, "patternProperties", p->string);
        if (!sc_pattern_rule(c, p->string, sub, re)) break;
        buf_printf(&alts, "%s%s", n ? " | " : "", re);
        if (!vs) {
            vs = p;
        } else {
            sc_quiet q = sc_quiet_begin(c);
            vs = sc_merge(c, vs, p, sub, depth + 1);
            bool bad = c->failed;
            sc_quiet_end(c, q);
            if (bad) vs = NULL;
            if (!vs) break;
        }
    }
    if (!c->failed && vs) {
        char sub[SC_PATH];
        sc_sub(sub, path, "patternProperties", NULL);
        if (sc_gen(c, vs, sub, depth + 1, val)) {
            buf body = buf_make(c->a);
            buf_printf(&body, "\"\\\"\" ( %s ) \"\\\"\" ws", alts.p ? alts.p : "");
            c->prims |= P_WS;
            sc_emit_new(c, key, "pkey", &body);
            buf_free(&body);
        }
    }
    buf_free(&alts);
    return !c->failed;
}

/* The value schema of an undeclared property (NULL: any value; *none: not allowed). */
static const cJSON *undeclared(const cJSON *add, bool *none) {
    *none = cJSON_IsFalse(add);
    return cJSON_IsObject(add) ? add : NULL;
}

bool sc_gen_object(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    const cJSON *props = sc_get(s, "properties"), *req = sc_get(s, "required"), *add = sc_get(s, "additionalProperties");
    const cJSON *pp = sc_get(s, "patternProperties"), *pn = sc_get(s, "propertyNames");
    if (props && !cJSON_IsObject(props)) return sc_fail(c, SLM_ERR_FORMAT, "'properties' at %s must be an object", sc_ptr(path));
    if (req && !cJSON_IsArray(req)) return sc_fail(c, SLM_ERR_FORMAT, "'required' at %s must be an array", sc_ptr(path));
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
        return sc_fail(c, SLM_ERR_FORMAT, "'additionalProperties' at %s must be a boolean or a schema", sc_ptr(path));
    if (pp && !cJSON_IsObject(pp))
        return sc_fail(c, SLM_ERR_FORMAT, "'patternProperties' at %s must be an object", sc_ptr(path));
    if (pp && !pp->child) pp = NULL;
    if (cJSON_IsTrue(pn)) pn = NULL;
    if (pn && !names_supported(c, pn, path)) return false;
    long lo = 0, hi = -1;
    if (!sc_count(c, s, "minProperties", path, &lo) || !sc_count(c, s, "maxProperties", path, &hi)) return false;
    int n = cJSON_GetArraySize(props) + cJSON_GetArraySize(req);
    static const char *const dep_kw[] = {"dependencies", "dependentRequired", "dependentSchemas"};
    for (int d = 0; d < 3; d++)
        for (const cJSON *dep = cJSON_IsObject(sc_get(s, dep_kw[d])) ? sc_get(s, dep_kw[d])->child : NULL; dep; dep = dep->next)
            n += 1 + cJSON_GetArraySize(dep);
    prop *ps = al_calloc(c->a, (size_t)n + 1, sizeof *ps);
    const char **elem = al_calloc(c->a, (size_t)n + 1, sizeof *elem);
    char (*rules)[SC_NAME] = al_calloc(c->a, (size_t)n + 1, SC_NAME);
    bool *rq = al_calloc(c->a, (size_t)n + 1, sizeof *rq);
    const char **keys = al_calloc(c->a, (size_t)n + 1, sizeof *keys);
    buf body = buf_make(c->a);
    int k = 0;
    if (!ps || !elem || !rules || !rq || !keys) {
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) ps[k++] = (prop){p->string, p, false, false, false};
    bool none;
    const cJSON *add_schema = undeclared(add, &none);
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) {
            sc_fail(c, SLM_ERR_FORMAT, "'required' at %s must list strings", sc_ptr(path));
            goto done;
        }
        int i = 0;
        while (i < k && strcmp(ps[i].key, r->valuestring)) i++;
        if (i == k) ps[k++] = (prop){r->valuestring, add_schema, true, false, true};
        ps[i].required = true;
    }
    /* dependencies: a present trigger needs its dependents. A required trigger makes them required
     * (to a fixed point); an optional one is left out. A schema dependency of a required trigger is
     * merged into the object; of an optional one, the trigger is left out. */
    for (bool grew = true; grew && !c->failed;) {
        grew = false;
        for (int d = 0; d < 3; d++) {
            const cJSON *deps = sc_get(s, dep_kw[d]);
            if (deps && !cJSON_IsObject(deps)) {
                sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s must be an object", dep_kw[d], sc_ptr(path));
                goto done;
            }
            for (const cJSON *dep = deps ? deps->child : NULL; dep; dep = dep->next) {
                int t = 0;
                while (t < k && strcmp(ps[t].key, dep->string)) t++;
                if (t == k) ps[k++] = (prop){dep->string, NULL, false, true, true}; /* kept out of extra keys */
                if (ps[t].dropped) continue;
                if (!ps[t].required) {
                    ps[t].dropped = true;
                    continue;
                }
                if (!cJSON_IsArray(dep)) { /* a schema: merged into the object */
                    static const char *const drop[] = {"dependencies", "dependentSchemas", NULL};
                    cJSON *rest = sc_copy_without(c, s, drop);
                    if (!rest) goto done;
                    for (int dd = 0; dd < 3; dd += 2) { /* the other dependencies stay */
                        const cJSON *o = sc_get(s, dep_kw[dd]);
                        if (!o) continue;
                        cJSON *keep = sc_own(c, cJSON_CreateObject());
                        if (!keep) goto done;
                        for (const cJSON *x = o->child; x; x = x->next)
                            if (x != dep && !sc_add_ref(keep, x->string, x)) {
                                sc_fail(c, SLM_ERR_NOMEM, "out of memory");
                                goto done;
                            }
                        if (!sc_add_ref(rest, dep_kw[dd], keep)) {
                            sc_fail(c, SLM_ERR_NOMEM, "out of memory");
                            goto done;
                        }
                    }
                    char sub[SC_PATH];
                    sc_sub(sub, path, dep_kw[d], dep->string);
                    const cJSON *m = sc_merge(c, rest, dep, sub, depth + 1);
                    bool ok = m && sc_gen(c, m, path, depth + 1, name);
                    al_free(c->a, ps), al_free(c->a, elem), al_free(c->a, rules), al_free(c->a, rq), al_free(c->a, keys);
                    return ok;
                }
                for (const cJSON *x = dep->child; x; x = x->next) {
                    if (!cJSON_IsString(x)) {
                        sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s must list strings", dep_kw[d], sc_ptr(path));
                        goto done;
                    }
                    int i = 0;
                    while (i < k && strcmp(ps[i].key, x->valuestring)) i++;
                    if (i < k && ps[i].dropped) {
                        sc_fail(c, SLM_ERR_UNSUPPORTED, "required property '%s' at %s depends on '%s', which "
                                "cannot be written", dep->string, sc_ptr(path), x->valuestring);
                        goto done;
                    }
                    if (i == k) ps[k++] = (prop){x->valuestring, add_schema, true, false, true}, grew = true;
                    else if (!ps[i].required) ps[i].required = true, grew = true;
                }
            }
        }
    }
    if (c->failed) goto done;
    /* patternProperties: a key matching patterns also takes their schemas (and additionalProperties
     * no longer applies to it); propertyNames: a key it refuses cannot be written */
    for (int i = 0; i < k; i++) {
        if (ps[i].dropped) continue;
        bool matched = false, name_ok = true;
        for (const cJSON *p = pp ? pp->child : NULL; p; p = p->next) {
            bool m;
            char sub[SC_PATH];
            sc_sub(sub, path, "patternProperties", p->string);
            if (!sc_pattern_matches(c, p->string, ps[i].key, sub, &m)) goto done;
            if (!m) continue;
            const cJSON *base = ps[i].undecl && !matched ? NULL : ps[i].schema;
            ps[i].schema = base ? all_of(c, base, p) : p;
            if (!ps[i].schema) goto done;
            matched = true;
        }
        if (pn && !name_accepted(c, pn, ps[i].key, path, &name_ok)) goto done;
        if (ps[i].undecl && !matched && none) {
            if (ps[i].required) {
                sc_fail(c, SLM_ERR_UNSUPPORTED, "required property '%s' at %s is not in 'properties' and "
                        "additionalProperties is false: nothing validates", ps[i].key, sc_ptr(path));
                goto done;
            }
            ps[i].dropped = true;
        }
        if (!name_ok) {
            if (ps[i].required) {
                sc_fail(c, SLM_ERR_UNSUPPORTED, "required property '%s' at %s is refused by propertyNames",
                        ps[i].key, sc_ptr(path));
                goto done;
            }
            ps[i].dropped = true;
        }
    }
    for (int i = 0; i < k; i++) /* properties: {"k": false} forbids k */
        if (ps[i].schema && sc_is_false(ps[i].schema)) {
            if (ps[i].required) {
                sc_fail(c, SLM_ERR_UNSUPPORTED, "required property '%s' at %s has a schema nothing validates",
                        ps[i].key, sc_ptr(path));
                goto done;
            }
            ps[i].dropped = true;
        }
    c->prims |= P_WS;
    int m = 0, nk = 0;
    for (int i = 0; i < k; i++) {
        keys[nk++] = ps[i].key;
        if (ps[i].dropped) continue;
        char sub[SC_PATH], val[SC_NAME] = "json-value";
        sc_sub(sub, path, "properties", ps[i].key);
        if (ps[i].schema) {
            if (!sc_gen(c, ps[i].schema, sub, depth + 1, val)) goto done;
        } else {
            c->prims |= P_VALUE;
        }
        buf_truncate(&body, 0);
        cJSON *key = cJSON_CreateString(ps[i].key);
        if (!key) {
            sc_fail(c, SLM_ERR_NOMEM, "out of memory");
            goto done;
        }
        sc_json_lit(c, &body, key);
        cJSON_Delete(key);
        buf_printf(&body, " ws \":\" ws %s", val);
        if (!sc_emit_new(c, rules[m], "kv", &body)) goto done;
        elem[m] = rules[m];
        rq[m++] = ps[i].required;
    }
    /* extra keys: with patternProperties, keys matching a pattern (only when no key is declared:
     * a pattern key could repeat a declared one) with values valid for every pattern's schema;
     * else, when additionalProperties allows them, keys of plain characters other than the
     * declared ones (a trie complement), or any key (or propertyNames' strings) when none is
     * declared */
    char extra[SC_NAME] = "", val[SC_NAME] = "json-value", key[SC_NAME + 64] = "";
    if (pp) {
        if (nk == 0 && !pn && !extra_pattern_key(c, pp, path, depth, key, val)) goto done;
    } else if (!none && (nk == 0 || add_schema)) {
        if (add_schema) {
            char sub[SC_PATH];
            sc_sub(sub, path, "additionalProperties", NULL);
            if (!sc_gen(c, add_schema, sub, depth + 1, val)) goto done;
        } else {
            c->prims |= P_VALUE;
        }
        bool plain = true;
        for (int i = 0; i < nk; i++) plain &= plain_key(keys[i]);
        if (pn) {
            char sub[SC_PATH];
            sc_sub(sub, path, "propertyNames", NULL);
            cJSON *str = sc_own(c, cJSON_CreateObject());
            const cJSON *ks = str && cJSON_AddStringToObject(str, "type", "string") ? all_of(c, pn, str) : NULL;
            if (!ks) goto done;
            if (!nk && !cJSON_IsFalse(pn) && !sc_gen(c, ks, sub, depth + 1, key)) goto done;
        } else if (nk && plain) {
            qsort(keys, (size_t)nk, sizeof *keys, cmp_str);
            char kc[SC_NAME];
            if (!key_complement(c, keys, 0, nk, 0, kc)) goto done;
            snprintf(key, sizeof key, "\"\\\"\" %s \"\\\"\" ws", kc);
        } else if (!nk) {
            c->prims |= P_STRING;
            snprintf(key, sizeof key, "json-string");
        }
    }
    if (key[0]) {
        buf_truncate(&body, 0);
        buf_printf(&body, "%s \":\" ws %s", key, val);
        if (!sc_emit_new(c, extra, "extra", &body)) goto done;
    }
    char seqr[SC_NAME];
    if (!sc_gen_seq(c, elem, rq, m, extra[0] ? extra : NULL, lo, hi, path, seqr)) goto done;
    buf_truncate(&body, 0);
    buf_printf(&body, "\"{\" ws %s \"}\" ws", seqr);
    sc_emit_new(c, name, "object", &body);
done:
    buf_free(&body);
    al_free(c->a, ps);
    al_free(c->a, elem);
    al_free(c->a, rules);
    al_free(c->a, rq);
    al_free(c->a, keys);
    return !c->failed;
}

/* ---- arrays -------------------------------------------------------------------------------------- */

/* The values of an item schema drawn from a small set (enum/const, boolean), or NULL. */
static const cJSON *finite_values(conv *c, const cJSON *s, bool *is_bool) {
    *is_bool = false;
    for (int k = 0; k < 16 && cJSON_IsObject(s) && sc_get(s, "$ref"); k++) {
        for (const cJSON *x = s->child; x; x = x->next)
            if (sc_constraining(x->string) && strcmp(x->string, "$ref")) return NULL;
        const cJSON *r = sc_get(s, "$ref");
        if (!cJSON_IsString(r) || !(s = sc_resolve(c, r->valuestring, ""))) return NULL;
    }
    if (!cJSON_IsObject(s)) return NULL;
    static const char *const ok[] = {"enum", "const", "type", NULL};
    for (const cJSON *x = s->child; x; x = x->next) {
        if (!sc_constraining(x->string)) continue;
        bool fine = false;
        for (int i = 0; ok[i]; i++) fine |= !strcmp(x->string, ok[i]);
        if (!fine) return NULL;
    }
    const cJSON *en = sc_get(s, "enum"), *cn = sc_get(s, "const");
    if (cJSON_IsArray(en)) return en;
    if (cn) return NULL;
    const cJSON *t = sc_get(s, "type");
    *is_bool = cJSON_IsString(t) && !strcmp(t->valuestring, "boolean");
    return NULL;
}

#define UNIQUE_MAX 64 /* values of a uniqueItems domain */

static bool gen_unique(conv *c, const cJSON *s, const cJSON *items, long lo, long hi, const char *path, char *name) {
    bool is_bool;
    const cJSON *vals = finite_values(c, items, &is_bool);
    if (c->failed) return false;
    int n = vals ? cJSON_GetArraySize(vals) : is_bool ? 2 : 0;
    if (!n || n > UNIQUE_MAX)
        return sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword 'uniqueItems' at %s is supported only for items from a set of "
                       "at most %d values (enum or boolean)", sc_ptr(path), UNIQUE_MAX);
    const cJSON *type = sc_get(items, "type");
    (void)s;
    char (*rules)[SC_NAME] = al_calloc(c->a, (size_t)n, SC_NAME);
    const char **elem = al_calloc(c->a, (size_t)n, sizeof *elem);
    bool *rq = al_calloc(c->a, (size_t)n, sizeof *rq);
    buf body = buf_make(c->a);
    int m = 0;
    if (!rules || !elem || !rq) {
        sc_fail(c, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    c->prims |= P_WS;
    for (int i = 0; i < n && !c->failed; i++) {
        const cJSON *v = vals ? cJSON_GetArrayItem(vals, i) : NULL;
        buf_truncate(&body, 0);
        if (v) {
            bool dup = false, fits = !type || (cJSON_IsString(type) && (!strcmp(type->valuestring, "string") ?
                cJSON_IsString(v) : !strcmp(type->valuestring, "boolean") ? cJSON_IsBool(v) :
                !strcmp(type->valuestring, "null") ? cJSON_IsNull(v) : !strcmp(type->valuestring, "number") ?
                cJSON_IsNumber(v) : !strcmp(type->valuestring, "integer") ? cJSON_IsNumber(v) &&
                v->valuedouble == (double)(long long)v->valuedouble : false));
            for (int j = 0; j < i && !dup; j++) dup = cJSON_Compare(cJSON_GetArrayItem(vals, j), v, true);
            if (dup || !fits) continue;
            sc_json_lit(c, &body, v);
        } else {
            buf_puts(&body, i ? "\"false\"" : "\"true\"");
        }
        buf_puts(&body, " ws");
        sc_emit_new(c, rules[m], "uniq", &body);
        elem[m] = rules[m];
        m++;
    }
    char seqr[SC_NAME];
    if (c->failed || !sc_gen_seq(c, elem, rq, m, NULL, lo, hi, path, seqr)) goto done;
    buf_truncate(&body, 0);
    buf_printf(&body, "\"[\" ws %s \"]\" ws", seqr);
    sc_emit_new(c, name, "array", &body);
done:
    buf_free(&body);
    al_free(c->a, rules);
    al_free(c->a, elem);
    al_free(c->a, rq);
    return !c->failed;
}

bool sc_gen_array(conv *c, const cJSON *s, const char *path, int depth, char *name) {
    long lo = 0, hi = -1;
    if (!sc_count(c, s, "minItems", path, &lo) || !sc_count(c, s, "maxItems", path, &hi)) return false;
    if (hi >= 0 && hi < lo) return sc_fail(c, SLM_ERR_FORMAT, "maxItems below minItems at %s", sc_ptr(path));
    const cJSON *items = sc_get(s, "items"), *prefix = sc_get(s, "prefixItems"), *rest = NULL;
    const char *rest_kw = "items";
    if (cJSON_IsArray(items)) { /* tuple form (drafts 4 to 2019-09) */
        if (prefix) return sc_fail(c, SLM_ERR_FORMAT, "'items' at %s is an array next to prefixItems", sc_ptr(path));
        prefix = items;
        rest = sc_get(s, "additionalItems");
        rest_kw = "additionalItems";
    } else {
        if (prefix && !cJSON_IsArray(prefix))
            return sc_fail(c, SLM_ERR_FORMAT, "'prefixItems' at %s must be an array", sc_ptr(path));
        rest = items;
    }
    if (rest && !cJSON_IsBool(rest) && !cJSON_IsObject(rest))
        return sc_fail(c, SLM_ERR_FORMAT, "'%s' at %s must be a schema", rest_kw, sc_ptr(path));
    const cJSON *uniq = sc_get(s, "uniqueItems");
    if (uniq && !cJSON_IsBool(uniq)) return sc_fail(c, SLM_ERR_FORMAT, "'uniqueItems' at %s must be a boolean", sc_ptr(path));
    int k = cJSON_GetArraySize(prefix);
    if (cJSON_IsTrue(uniq) && !(hi >= 0 && hi <= 1)) {
        bool is_bool;
        const cJSON *vals = k ? NULL : finite_values(c, rest, &is_bool);
        if (c->failed) return false;
        if ((vals && cJSON_GetArraySize(vals) <= UNIQUE_MAX) || (!k && is_bool))
            return gen_unique(c, s, rest, lo, hi, path, name);
        if (lo > 1)
            return sc_fail(c, SLM_ERR_UNSUPPORTED, "keyword 'uniqueItems' at %s with minItems above 1 is supported "
                           "only for items from a set of at most %d values (enum or boolean)", sc_ptr(path), UNIQUE_MAX);
        hi = 1; /* at most one item: unique (a subset) */
    }
    bool no_rest = cJSON_IsFalse(rest);
    char (*pr)[SC_NAME] = al_calloc(c->a, (size_t)k + 1, SC_NAME);
    if (!pr) return sc_fail(c, SLM_ERR_NOMEM, "out of memory");
    char item[SC_NAME] = "json-value";
    buf body = buf_make(c->a);
    int i = 0;
    for (const cJSON *p = prefix ? prefix->child : NULL; p; p = p->next, i++) {
        char sub[SC_PATH], idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        sc_sub(sub, path, prefix == items ? "items" : "prefixItems", idx);
        if (lo <= i && hi >= 0 && i >= hi) break; /* never written */
        if (!sc_gen(c, p, sub, depth + 1, pr[i])) goto done;
    }
    if (!no_rest && (hi < 0 || hi > k)) {
        if (rest && !cJSON_IsTrue(rest)) {
            char sub[SC_PATH];
            sc_sub(sub, path, rest_kw, NULL);
            if (!sc_gen(c, rest, sub, depth + 1, item)) goto done;
        } else {
            c->prims |= P_VALUE;
        }
    }
    c->prims |= P_WS;
    if (no_rest && lo > k) {
        sc_fail(c, SLM_ERR_UNSUPPORTED, "minItems at %s is above the %d items allowed", sc_ptr(path), k);
        goto done;
    }
    /* A(i): i items written; A(k): the rest items */
    char base[SC_NAME];
    sc_new_name(c, base, "items");
    for (i = k; i >= 0 && !c->failed; i--) {
        if (hi >= 0 && i > hi) continue;
        buf_truncate(&body, 0);
        const char *sep = i ? "\",\" ws " : "";
        if (i == k) {
            long rlo = lo > k ? lo - k : 0, rhi = hi >= 0 ? hi - k : -1;
            if (no_rest || rhi == 0) {
                buf_puts(&body, "\"\"");
            } else if (k == 0) {
                if (rlo == 0) buf_puts(&body, "( ");
                buf_printf(&body, "%s ( \",\" ws %s )", item, item);
                long a = rlo > 0 ? rlo - 1 : 0, b = rhi > 0 ? rhi - 1 : -1;
                if (b < 0) buf_printf(&body, "{%ld,}", a);
                else buf_printf(&body, "{%ld,%ld}", a, b);
                if (rlo == 0) buf_puts(&body, " )?");
            } else {
                buf_printf(&body, "( \",\" ws %s )", item);
                if (rhi < 0) buf_printf(&body, "{%ld,}", rlo);
                else buf_printf(&body, "{%ld,%ld}", rlo, rhi);
            }
        } else {
            int n = 0;
            if (i >= lo) buf_puts(&body, "\"\""), n++;
            if (hi < 0 || i + 1 <= hi) buf_printf(&body, "%s%s%s %s-%d", n++ ? " | " : "", sep, pr[i], base, i + 1);
        }
        char rn[SC_NAME + 16];
        snprintf(rn, sizeof rn, "%s-%d", base, i);
        sc_emit(c, rn, &body);
    }
    if (!c->failed) {
        buf_truncate(&body, 0);
        buf_printf(&body, "\"[\" ws %s-0 \"]\" ws", base);
        sc_emit_new(c, name, "array", &body);
    }
done:
    buf_free(&body);
    al_free(c->a, pr);
    return !c->failed;
}
