/* value.c — Jinja values (jinja_int.h, "values"): constructors, lists and ordered dicts, Python
 * truthiness, equality and ordering, the string builder that carries provenance segments, and
 * the text forms jinja2 gives a value: str() for output, repr inside containers (Python's quoting
 * and float repr), json.dumps for tojson. A context JSON tree becomes values here, its data
 * members' strings marked with their message. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"

jval jv_undef(const char *name) { return (jval){.t = JV_UNDEF, .name = name}; }
jval jv_none(void) { return (jval){.t = JV_NONE}; }
jval jv_bool(bool b) { return (jval){.t = JV_BOOL, .u.b = b}; }
jval jv_int(int64_t i) { return (jval){.t = JV_INT, .u.i = i}; }
jval jv_float(double f) { return (jval){.t = JV_FLOAT, .u.f = f}; }
jval jv_str(const char *p, size_t n) { return (jval){.t = JV_STR, .u.s = {.p = p, .n = n}}; }
jval jv_strz(const char *p) { return jv_str(p, strlen(p)); }

jlist *jl_new(jarena *ar, size_t cap) {
    jlist *l = ja_alloc(ar, sizeof *l);
    if (cap) l->v = ja_alloc(ar, cap * sizeof *l->v);
    l->cap = cap;
    return l;
}
void jl_push(jarena *ar, jlist *l, jval v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        l->v = ja_grow(ar, l->v, l->n * sizeof *l->v, cap * sizeof *l->v);
        l->cap = cap;
    }
    l->v[l->n++] = v;
}
jdict *jd_new(jarena *ar, size_t cap) {
    jdict *d = ja_alloc(ar, sizeof *d);
    if (cap) {
        d->k = ja_alloc(ar, cap * sizeof *d->k);
        d->v = ja_alloc(ar, cap * sizeof *d->v);
    }
    d->cap = cap;
    return d;
}
jval *jd_get(const jdict *d, jval k) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}
jval *jd_gets(const jdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, k, n)) return &d->v[i];
    return NULL;
}
void jd_set(jarena *ar, jdict *d, jval k, jval v) {
    jval *old = jd_get(d, k);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        d->k = ja_grow(ar, d->k, d->n * sizeof *d->k, cap * sizeof *d->k);
        d->v = ja_grow(ar, d->v, d->n * sizeof *d->v, cap * sizeof *d->v);
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

bool jv_truthy(jval v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s.n > 0;
    case JV_LIST: return v.u.l->n > 0 || v.u.l->iter;
    case JV_DICT: return v.u.d->n > 0;
    default: return true;
    }
}
bool jv_is_num(jval v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
double jv_num(jval v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t as_i(jval v) { return v.t == JV_INT ? v.u.i : (int64_t)v.u.b; }

#define MAX_COMPARE_DEPTH 1000

static bool eq_rec(jval a, jval b, int depth) {
    if (depth > MAX_COMPARE_DEPTH) return false; /* deeper containers compare unequal */
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return as_i(a) == as_i(b);
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JV_LIST:
        if (a.u.l->iter || b.u.l->iter) return a.u.l == b.u.l;
        if (a.u.l->tuple != b.u.l->tuple || a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!eq_rec(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jval *o = jd_get(b.u.d, a.u.d->k[i]);
            if (!o || !eq_rec(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_NS: return a.u.d == b.u.d;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

bool jv_eq(jval a, jval b) { return eq_rec(a, b, 0); }

const char *jv_typename(jval v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.u.l->iter ? "generator" : v.u.l->tuple ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "function";
    default: return "LoopContext";
    }
}

static int cmp_rec(jrender *r, uint32_t pos, jval a, jval b, int depth) {
    if (depth > MAX_COMPARE_DEPTH)
        jr_fail(r, pos, SLM_ERR_RANGE, "jinja: nesting limit (containers deeper than %d) in a comparison", MAX_COMPARE_DEPTH);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (as_i(a) > as_i(b)) - (as_i(a) < as_i(b));
        double x = jv_num(a), y = jv_num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = m ? memcmp(a.u.s.p, b.u.s.p, m) : 0;
        if (c) return c < 0 ? -1 : 1;
        return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple && !a.u.l->iter && !b.u.l->iter) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return cmp_rec(r, pos, a.u.l->v[i], b.u.l->v[i], depth + 1);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'<' not supported between instances of '%s' and '%s'", jv_typename(a),
            jv_typename(b));
}

int jv_cmp(jrender *r, uint32_t pos, jval a, jval b) { return cmp_rec(r, pos, a, b, 0); }

/* ---- string builder ---- */

void sb_init(jsb *b) { *b = (jsb){0}; }

static void sb_room(jrender *r, jsb *b, size_t extra) {
    if (b->n + extra > r->max_output)
        jr_fail(r, 0, SLM_ERR_RANGE, "jinja: output limit (max_output %zu bytes) exceeded", r->max_output);
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    b->p = ja_grow(&r->ar, b->p, b->n, cap);
    b->cap = cap;
}
static void seg_push(jrender *r, jsb *b, jseg s) {
    if (s.len == 0) return;
    if (b->nseg) {
        jseg *l = &b->segs[b->nseg - 1];
        if (l->off + l->len == s.off && l->msg == s.msg && !l->whole && !s.whole) {
            l->len += s.len;
            return;
        }
    }
    if (b->nseg == b->segcap) {
        size_t cap = b->segcap ? b->segcap * 2 : 4;
        b->segs = ja_grow(&r->ar, b->segs, b->nseg * sizeof *b->segs, cap * sizeof *b->segs);
        b->segcap = cap;
    }
    b->segs[b->nseg++] = s;
}
void sb_put(jrender *r, jsb *b, const char *s, size_t n) {
    if (!n) return;
    sb_room(r, b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
void sb_puts(jrender *r, jsb *b, const char *s) { sb_put(r, b, s, strlen(s)); }
void sb_put_sub(jrender *r, jsb *b, jstr s, size_t off, size_t n) {
    size_t base = b->n;
    sb_put(r, b, s.p + off, n);
    for (size_t i = 0; i < s.nseg; i++) {
        const jseg *g = &s.segs[i];
        size_t lo = g->off > off ? g->off : off, hi = g->off + g->len < off + n ? g->off + g->len : off + n;
        if (lo >= hi) continue;
        seg_push(r, b, (jseg){base + lo - off, hi - lo, g->msg, g->whole && lo == g->off && hi == g->off + g->len});
    }
}
void sb_put_str(jrender *r, jsb *b, jstr s) { sb_put_sub(r, b, s, 0, s.n); }
void sb_mark(jrender *r, jsb *b, size_t from, int64_t msg) {
    while (b->nseg && b->segs[b->nseg - 1].off >= from) b->nseg--;
    if (b->nseg) {
        jseg *l = &b->segs[b->nseg - 1];
        if (l->off + l->len > from) {
            l->len = from - l->off;
            l->whole = false;
        }
    }
    seg_push(r, b, (jseg){from, b->n - from, msg, false});
}
jstr sb_str(jrender *r, jsb *b) {
    if (!b->p) return (jstr){.p = "", .n = 0};
    jbacking *k = ja_alloc(&r->ar, sizeof *k);
    *k = (jbacking){b->p, b->n, b->cap, b->segs, b->nseg, b->segcap};
    return (jstr){.p = b->p, .n = b->n, .segs = b->segs, .nseg = b->nseg, .bk = k};
}

jstr js_concat(jrender *r, jstr a, jstr b) {
    if (!b.n) return a;
    if (!a.n) return b;
    if (a.n + b.n > r->max_output)
        jr_fail(r, 0, SLM_ERR_RANGE, "jinja: output limit (max_output %zu bytes) exceeded", r->max_output);
    jbacking *k = a.bk;
    bool tail = k && a.p + a.n == k->p + k->used && (a.nseg == 0 || a.segs + a.nseg == k->segs + k->nseg) &&
                k->cap - k->used > b.n && k->segcap - k->nseg >= b.nseg;
    if (!tail) { /* a new backing with room to grow */
        size_t cap = 2 * (a.n + b.n) + 16, segcap = 2 * (a.nseg + b.nseg) + 4;
        k = ja_alloc(&r->ar, sizeof *k);
        *k = (jbacking){.p = ja_alloc(&r->ar, cap), .cap = cap, .segs = ja_alloc(&r->ar, segcap * sizeof(jseg)), .segcap = segcap};
        memcpy(k->p, a.p, a.n);
        k->used = a.n;
        if (a.nseg) memcpy(k->segs, a.segs, a.nseg * sizeof *a.segs);
        k->nseg = a.nseg;
        a = (jstr){.p = k->p, .n = a.n, .segs = k->segs, .nseg = a.nseg, .bk = k};
    }
    memcpy(k->p + k->used, b.p, b.n);
    k->used += b.n;
    k->p[k->used] = '\0';
    jseg *segs = a.nseg ? (jseg *)a.segs : b.nseg ? k->segs + k->nseg : NULL;
    for (size_t i = 0; i < b.nseg; i++) {
        jseg g = b.segs[i];
        g.off += a.n;
        k->segs[k->nseg++] = g;
    }
    return (jstr){.p = a.p, .n = a.n + b.n, .segs = segs, .nseg = a.nseg + b.nseg, .bk = k};
}
int64_t js_msg(jstr s) { return s.nseg ? s.segs[0].msg : INT64_MIN; }
jstr js_sub(jrender *r, jstr s, size_t off, size_t n) {
    if (!s.nseg) return (jstr){.p = s.p + off, .n = n};
    jsb b;
    sb_init(&b);
    size_t nseg = 0;
    for (size_t i = 0; i < s.nseg; i++)
        if (s.segs[i].off < off + n && s.segs[i].off + s.segs[i].len > off) nseg++;
    if (!nseg) return (jstr){.p = s.p + off, .n = n};
    sb_put_sub(r, &b, s, off, n);
    return sb_str(r, &b);
}

/* ---- text forms ---- */

void jv_fmt_float(double f, char *out, size_t cap) {
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char tmp[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *q = tmp;
    bool neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int ex = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char o[64];
    size_t k = 0;
    if (neg) o[k++] = '-';
    if (ex >= 16 || ex < -4) {
        o[k++] = digits[0];
        if (nd > 1) {
            o[k++] = '.';
            for (size_t i = 1; i < nd; i++) o[k++] = digits[i];
        }
        snprintf(o + k, sizeof o - k, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    } else if (ex >= 0) {
        for (int i = 0; i <= ex; i++) o[k++] = (size_t)i < nd ? digits[i] : '0';
        o[k++] = '.';
        if ((size_t)ex + 1 < nd) {
            for (size_t i = (size_t)ex + 1; i < nd; i++) o[k++] = digits[i];
        } else {
            o[k++] = '0';
        }
        o[k] = '\0';
    } else {
        o[k++] = '0';
        o[k++] = '.';
        for (int i = 0; i < -ex - 1; i++) o[k++] = '0';
        for (size_t i = 0; i < nd; i++) o[k++] = digits[i];
        o[k] = '\0';
    }
    snprintf(out, cap, "%s", o);
}

static bool printable(uint32_t c) {
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
    if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E || c == 0x1680) return false;
    if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F)) return false;
    if (c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE000 && c <= 0xF8FF)) return false;
    if (c >= 0xF0000 || (c >= 0xE0000 && c <= 0xE0FFF)) return false;
    return true;
}

static void repr_str(jrender *r, jsb *b, jstr s) {
    size_t from = b->n;
    bool sq = memchr(s.p, '\'', s.n) != NULL, dq = memchr(s.p, '"', s.n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    sb_put(r, b, &q, 1);
    for (size_t i = 0; i < s.n;) {
        unsigned char c = (unsigned char)s.p[i];
        uint32_t cp;
        size_t l = utf8_decode((const uint8_t *)s.p + i, s.n - i, &cp);
        char esc[16];
        if (l == 0) { /* not UTF-8: the byte as is */
            sb_put(r, b, s.p + i, 1);
            i++;
            continue;
        }
        if (c == '\\' || c == (unsigned char)q) {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(r, b, esc, 2);
        } else if (c == '\n') sb_put(r, b, "\\n", 2);
        else if (c == '\r') sb_put(r, b, "\\r", 2);
        else if (c == '\t') sb_put(r, b, "\\t", 2);
        else if (!printable(cp)) {
            int m = cp < 0x100 ? snprintf(esc, sizeof esc, "\\x%02x", cp)
                    : cp < 0x10000 ? snprintf(esc, sizeof esc, "\\u%04x", cp) : snprintf(esc, sizeof esc, "\\U%08x", cp);
            sb_put(r, b, esc, (size_t)m);
        } else {
            sb_put(r, b, s.p + i, l);
        }
        i += l;
    }
    sb_put(r, b, &q, 1);
    if (s.nseg) sb_mark(r, b, from, js_msg(s));
}

static void check_depth(jrender *r, uint32_t depth) {
    if (depth > r->max_depth) jr_fail(r, 0, SLM_ERR_RANGE, "jinja: nesting limit (max_depth %u) exceeded", r->max_depth);
}

void jv_repr(jrender *r, jsb *b, jval v, uint32_t depth) {
    check_depth(r, depth);
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: sb_puts(r, b, "Undefined"); return;
    case JV_STR: repr_str(r, b, v.u.s); return;
    case JV_LIST: {
        jlist *l = v.u.l;
        if (l->iter) {
            sb_puts(r, b, "<generator object>");
            return;
        }
        sb_put(r, b, l->tuple ? "(" : "[", 1);
        for (size_t i = 0; i < l->n; i++) {
            if (i) sb_put(r, b, ", ", 2);
            jv_repr(r, b, l->v[i], depth + 1);
        }
        if (l->tuple && l->n == 1) sb_put(r, b, ",", 1);
        sb_put(r, b, l->tuple ? ")" : "]", 1);
        return;
    }
    case JV_DICT: case JV_NS: {
        jdict *d = v.u.d;
        if (v.t == JV_NS) sb_puts(r, b, "<Namespace ");
        sb_put(r, b, "{", 1);
        for (size_t i = 0; i < d->n; i++) {
            if (i) sb_put(r, b, ", ", 2);
            jv_repr(r, b, d->k[i], depth + 1);
            sb_put(r, b, ": ", 2);
            jv_repr(r, b, d->v[i], depth + 1);
        }
        sb_put(r, b, "}", 1);
        if (v.t == JV_NS) sb_put(r, b, ">", 1);
        return;
    }
    case JV_FUNC: snprintf(tmp, sizeof tmp, "<function %s>", v.u.fn->name ? v.u.fn->name : "?"); sb_puts(r, b, tmp); return;
    case JV_LOOP:
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v.u.loop->i + 1, v.u.loop->items->n);
        sb_puts(r, b, tmp);
        return;
    default: jv_print(r, b, v); return;
    }
}

void jv_print(jrender *r, jsb *b, jval v) {
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: sb_put(r, b, "None", 4); return;
    case JV_BOOL: sb_puts(r, b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); sb_puts(r, b, tmp); return;
    case JV_FLOAT: jv_fmt_float(v.u.f, tmp, sizeof tmp); sb_puts(r, b, tmp); return;
    case JV_STR: sb_put_str(r, b, v.u.s); return;
    default: jv_repr(r, b, v, 0); return;
    }
}

jstr jv_tostr(jrender *r, jval v) {
    if (v.t == JV_STR) return v.u.s;
    if (v.t == JV_UNDEF) return (jstr){.p = "", .n = 0};
    jsb b;
    sb_init(&b);
    jv_print(r, &b, v);
    return sb_str(r, &b);
}

static void json_str(jrender *r, jsb *b, jstr s, bool ascii) {
    size_t from = b->n;
    sb_put(r, b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        char esc[16];
        if (c >= 0x80 && ascii) {
            uint32_t cp;
            size_t l = utf8_decode((const uint8_t *)s.p + i, s.n - i, &cp);
            if (!l) continue;
            sb_put(r, b, s.p + run, i - run);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                sb_put(r, b, esc, 12);
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
                sb_put(r, b, esc, 6);
            }
            i += l - 1;
            run = i + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_put(r, b, s.p + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': sb_put(r, b, "\\\"", 2); break;
        case '\\': sb_put(r, b, "\\\\", 2); break;
        case '\n': sb_put(r, b, "\\n", 2); break;
        case '\r': sb_put(r, b, "\\r", 2); break;
        case '\t': sb_put(r, b, "\\t", 2); break;
        case '\b': sb_put(r, b, "\\b", 2); break;
        case '\f': sb_put(r, b, "\\f", 2); break;
        default: snprintf(esc, sizeof esc, "\\u%04x", c); sb_put(r, b, esc, 6);
        }
    }
    sb_put(r, b, s.p + run, s.n - run);
    sb_put(r, b, "\"", 1);
    if (s.nseg) sb_mark(r, b, from, js_msg(s));
}

static void json_nl(jrender *r, jsb *b, const char *indent, size_t indent_n, uint32_t level) {
    sb_put(r, b, "\n", 1);
    for (uint32_t i = 0; i < level; i++) sb_put(r, b, indent, indent_n);
}

static void json_key(jrender *r, uint32_t pos, jsb *b, jval k, bool ascii) {
    char tmp[64];
    switch (k.t) {
    case JV_STR: json_str(r, b, k.u.s, ascii); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i); break;
    case JV_FLOAT:
        if (isnan(k.u.f)) snprintf(tmp, sizeof tmp, "\"NaN\"");
        else if (isinf(k.u.f)) snprintf(tmp, sizeof tmp, k.u.f < 0 ? "\"-Infinity\"" : "\"Infinity\"");
        else {
            tmp[0] = '"';
            jv_fmt_float(k.u.f, tmp + 1, sizeof tmp - 2);
            strcat(tmp, "\"");
        }
        break;
    case JV_BOOL: snprintf(tmp, sizeof tmp, k.u.b ? "\"true\"" : "\"false\""); break;
    case JV_NONE: snprintf(tmp, sizeof tmp, "\"null\""); break;
    default: jr_fail(r, pos, SLM_ERR_INVALID_ARG, "keys must be str, int, float, bool or None, not %s", jv_typename(k));
    }
    sb_puts(r, b, tmp);
}

void jv_tojson(jrender *r, uint32_t pos, jsb *b, jval v, const char *indent, size_t indent_n, const char *item_sep,
               const char *key_sep, bool sort_keys, bool ascii, uint32_t depth) {
    check_depth(r, depth);
    char tmp[64];
    switch (v.t) {
    case JV_NONE: sb_put(r, b, "null", 4); return;
    case JV_BOOL: sb_puts(r, b, v.u.b ? "true" : "false"); return;
    case JV_INT: jv_print(r, b, v); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) sb_puts(r, b, "NaN");
        else if (isinf(v.u.f)) sb_puts(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            jv_fmt_float(v.u.f, tmp, sizeof tmp);
            sb_puts(r, b, tmp);
        }
        return;
    case JV_STR: json_str(r, b, v.u.s, ascii); return;
    case JV_LIST: {
        jlist *l = v.u.l;
        if (l->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "Object of type generator is not JSON serializable");
        if (!l->n) {
            sb_put(r, b, "[]", 2);
            return;
        }
        sb_put(r, b, "[", 1);
        for (size_t i = 0; i < l->n; i++) {
            if (i) sb_puts(r, b, item_sep);
            if (indent) json_nl(r, b, indent, indent_n, depth + 1);
            jv_tojson(r, pos, b, l->v[i], indent, indent_n, item_sep, key_sep, sort_keys, ascii, depth + 1);
        }
        if (indent) json_nl(r, b, indent, indent_n, depth);
        sb_put(r, b, "]", 1);
        return;
    }
    case JV_DICT: {
        jdict *d = v.u.d;
        if (!d->n) {
            sb_put(r, b, "{}", 2);
            return;
        }
        size_t *ord = ja_alloc(&r->ar, d->n * sizeof *ord);
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (sort_keys) /* insertion sort: stable, dicts are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && jv_cmp(r, pos, d->k[ord[j - 1]], d->k[ord[j]]) > 0; j--) {
                    size_t t = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = t;
                }
        sb_put(r, b, "{", 1);
        for (size_t i = 0; i < d->n; i++) {
            if (i) sb_puts(r, b, item_sep);
            if (indent) json_nl(r, b, indent, indent_n, depth + 1);
            json_key(r, pos, b, d->k[ord[i]], ascii);
            sb_puts(r, b, key_sep);
            jv_tojson(r, pos, b, d->v[ord[i]], indent, indent_n, item_sep, key_sep, sort_keys, ascii, depth + 1);
        }
        if (indent) json_nl(r, b, indent, indent_n, depth);
        sb_put(r, b, "}", 1);
        return;
    }
    default:
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "Object of type %s is not JSON serializable", jv_typename(v));
    }
}

jval jv_from_json(jrender *r, const cJSON *j, bool data, int64_t msg, bool content) {
    if (cJSON_IsNull(j) || cJSON_IsInvalid(j)) return jv_none();
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j) || cJSON_IsRaw(j)) {
        const char *s = j->valuestring ? j->valuestring : "";
        jval v = jv_strz(s);
        if (data && v.u.s.n) {
            jseg *g = ja_alloc(&r->ar, sizeof *g);
            *g = (jseg){0, v.u.s.n, msg, content};
            v.u.s.segs = g;
            v.u.s.nseg = 1;
        }
        return v;
    }
    if (cJSON_IsArray(j)) {
        jlist *l = jl_new(&r->ar, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next) jl_push(&r->ar, l, jv_from_json(r, c, data, msg, false));
        return (jval){.t = JV_LIST, .u.l = l};
    }
    jdict *d = jd_new(&r->ar, (size_t)cJSON_GetArraySize(j));
    for (const cJSON *c = j->child; c; c = c->next) {
        jval k = jv_from_json(r, &(cJSON){.type = cJSON_String, .valuestring = c->string}, data, msg, false);
        jd_set(&r->ar, d, k, jv_from_json(r, c, data, msg, content && cJSON_IsString(c) && c->string && !strcmp(c->string, "content")));
    }
    return (jval){.t = JV_DICT, .u.d = d};
}
