/* filters.c — jinja2's filters that chat templates use (docs/jinja.md lists them), with jinja2's
 * semantics: generators from map/select/items/..., Markup from safe/escape, tojson as transformers'
 * override of json.dumps, and Python's printf-style "%" formatting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"
#include "text/jinja/strs.h"

/* ---- helpers for the filters ---- */

/* item.attr for a dotted attribute path, as jinja2's make_attrgetter (integer parts index; an
 * undefined step becomes dflt when given). */
static jval attr_path_d(jrender *r, uint32_t pos, jval item, jstr path, const jval *dflt) {
    size_t i = 0;
    while (i <= path.n) {
        size_t j = i;
        while (j < path.n && path.p[j] != '.') j++;
        bool digits = j > i;
        int64_t num = 0;
        for (size_t k = i; k < j; k++) {
            if (path.p[k] < '0' || path.p[k] > '9' || num > INT64_MAX / 10 - 10) digits = false;
            else num = num * 10 + (path.p[k] - '0');
        }
        item = fl_getitem(r, pos, item, digits ? jv_int(num) : jv_str(ja_strndup(&r->ar, path.p + i, j - i), j - i));
        if (dflt && item.t == JV_UNDEF) item = *dflt;
        if (j >= path.n) break;
        i = j + 1;
    }
    return item;
}
static jval attr_path(jrender *r, uint32_t pos, jval item, jstr path) { return attr_path_d(r, pos, item, path, NULL); }

static jval lower_key(jrender *r, jval v, bool case_sensitive) {
    if (case_sensitive || v.t != JV_STR) return v;
    return pys_map(r, v.u.s, PYS_LOWER);
}

typedef struct sort_ctx {
    jrender *r;
    uint32_t pos;
    bool reverse;
} sort_ctx;

/* Stable merge sort of items by keys. */
static void msort(sort_ctx *c, jval *keys, jval *items, jval *tk, jval *ti, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(c, keys, items, tk, ti, h);
    msort(c, keys + h, items + h, tk, ti, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        jr_step(c->r, c->pos);
        int cmp = jv_cmp(c->r, c->pos, keys[j], keys[i]);
        bool take_right = c->reverse ? cmp > 0 : cmp < 0;
        if (take_right) {
            tk[k] = keys[j];
            ti[k++] = items[j++];
        } else {
            tk[k] = keys[i];
            ti[k++] = items[i++];
        }
    }
    while (i < h) tk[k] = keys[i], ti[k++] = items[i++];
    while (j < n) tk[k] = keys[j], ti[k++] = items[j++];
    memcpy(keys, tk, n * sizeof *keys);
    memcpy(items, ti, n * sizeof *items);
}
static jlist *sort_by(jrender *r, uint32_t pos, jlist *items, jval *keys, bool reverse) {
    jlist *out = jl_new(&r->ar, items->n);
    for (size_t i = 0; i < items->n; i++) jl_push(&r->ar, out, items->v[i]);
    jval *tk = ja_alloc(&r->ar, (items->n + 1) * sizeof *tk), *ti = ja_alloc(&r->ar, (items->n + 1) * sizeof *ti);
    sort_ctx c = {r, pos, reverse};
    msort(&c, keys, out->v, tk, ti, out->n);
    return out;
}

static jval tojson(jrender *r, uint32_t pos, jval x, const jargs *a) {
    const jval *ind = fl_arg(a, 0, "indent"), *seps = fl_arg(a, 2, "separators");
    bool sort_keys = fl_arg_bool(a, 3, "sort_keys", false), ascii = fl_arg_bool(a, SIZE_MAX, "ensure_ascii", false);
    const char *indent = NULL;
    size_t indent_n = 0;
    if (ind && ind->t == JV_INT) {
        int64_t k = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : ind->u.i;
        char *s = ja_alloc(&r->ar, (size_t)k + 1);
        memset(s, ' ', (size_t)k);
        indent = s;
        indent_n = (size_t)k;
    } else if (ind && ind->t == JV_STR) {
        indent = ind->u.s.p;
        indent_n = ind->u.s.n;
    } else if (ind && ind->t != JV_NONE) {
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "tojson: indent must be an integer or a string");
    }
    const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
    if (seps && seps->t == JV_LIST && seps->u.l->n == 2 && seps->u.l->v[0].t == JV_STR && seps->u.l->v[1].t == JV_STR) {
        item_sep = ja_strndup(&r->ar, seps->u.l->v[0].u.s.p, seps->u.l->v[0].u.s.n);
        key_sep = ja_strndup(&r->ar, seps->u.l->v[1].u.s.p, seps->u.l->v[1].u.s.n);
    } else if (seps && seps->t != JV_NONE) {
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "tojson: separators must be a pair of strings");
    }
    jsb b;
    sb_init(&b);
    jv_tojson(r, pos, &b, x, indent, indent_n, item_sep, key_sep, sort_keys, ascii, 0);
    return jv_of_str(sb_str(r, &b));
}

jval fl_items_of(jrender *r, jdict *d) {
    jlist *l = jl_new(&r->ar, d->n);
    for (size_t i = 0; i < d->n; i++) {
        jlist *p = jl_new(&r->ar, 2);
        p->tuple = true;
        jl_push(&r->ar, p, d->k[i]);
        jl_push(&r->ar, p, d->v[i]);
        jl_push(&r->ar, l, jv_of_list(p));
    }
    return jv_of_list(l);
}

jval fl_join(jrender *r, uint32_t pos, jlist *items, jstr sep, const jstr *attr) {
    jsb b;
    sb_init(&b);
    for (size_t i = 0; i < items->n; i++) {
        if (i) sb_put_str(r, &b, sep);
        jval v = attr ? attr_path(r, pos, items->v[i], *attr) : items->v[i];
        jv_print(r, &b, v);
    }
    return jv_of_str(sb_str(r, &b));
}

static jlist *gen(jrender *r, size_t cap) {
    jlist *l = jl_new(&r->ar, cap);
    l->iter = true;
    return l;
}

static jval select_items(jrender *r, uint32_t pos, jval x, const jargs *a, bool by_attr, bool keep) {
    jlist *in = jv_truthy(x) ? fl_iter(r, pos, x) : jl_new(&r->ar, 0), *out = gen(r, 0);
    size_t first = 0;
    jstr attr = {0};
    if (by_attr) {
        attr = fl_arg_str(r, pos, a, 0, NULL);
        first = 1;
    }
    const jval *tn = fl_arg(a, first, NULL);
    const char *test = NULL;
    if (tn) {
        if (tn->t != JV_STR) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "a test name must be a string");
        test = ja_strndup(&r->ar, tn->u.s.p, tn->u.s.n);
        if (!fl_has_test(test)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no test named '%s'", test);
    }
    jargs ta = {a->n > first + 1 ? a->v + first + 1 : NULL, a->n > first + 1 ? a->n - first - 1 : 0, a->kwn, a->kwv, a->nkw};
    for (size_t i = 0; i < in->n; i++) {
        jr_step(r, pos);
        jval v = by_attr ? attr_path(r, pos, in->v[i], attr) : in->v[i];
        bool ok = test ? fl_test(r, pos, test, v, &ta) : jv_truthy(v);
        if (ok == keep) jl_push(&r->ar, out, in->v[i]);
    }
    return jv_of_list(out);
}

jval fl_percent(jrender *r, uint32_t pos, jstr fmt, jval args) {
    const jval *av = &args;
    size_t na = 1, k = 0;
    if (args.t == JV_LIST && args.u.l->tuple) {
        av = args.u.l->v;
        na = args.u.l->n;
    }
    jsb b;
    sb_init(&b);
    for (size_t i = 0; i < fmt.n; i++) {
        if (fmt.p[i] != '%') {
            size_t j = i;
            while (j < fmt.n && fmt.p[j] != '%') j++;
            sb_put_sub(r, &b, fmt, i, j - i);
            i = j - 1;
            continue;
        }
        char spec[32] = "%";
        size_t sl = 1;
        i++;
        while (i < fmt.n && strchr("-+ 0#", fmt.p[i]) && sl < 8) spec[sl++] = fmt.p[i++];
        size_t num = 0;
        while (i < fmt.n && ((fmt.p[i] >= '0' && fmt.p[i] <= '9') || fmt.p[i] == '.') && sl < 20) {
            num = fmt.p[i] == '.' ? 0 : num * 10 + (size_t)(fmt.p[i] - '0');
            if (num > 400) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "format width or precision above 400");
            spec[sl++] = fmt.p[i++];
        }
        if (i >= fmt.n) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "incomplete format");
        char c = fmt.p[i];
        if (c == '%') {
            sb_put(r, &b, "%", 1);
            continue;
        }
        if (k >= na) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "not enough arguments for format string");
        jval v = av[k++];
        char out[512];
        int m;
        if (c == 's' || c == 'r') {
            jsb t;
            sb_init(&t);
            if (c == 's') jv_print(r, &t, v);
            else jv_repr(r, &t, v, 0);
            spec[sl++] = 's';
            spec[sl] = '\0';
            if (sl == 2) {
                sb_put_str(r, &b, sb_str(r, &t));
                continue;
            }
            m = snprintf(out, sizeof out, spec, t.p ? t.p : "");
        } else if (c == 'c') {
            uint8_t u[4];
            size_t l = 0;
            if (v.t == JV_STR && pys_len(v.u.s) == 1) sb_put_str(r, &b, v.u.s);
            else if ((v.t == JV_INT || v.t == JV_BOOL) && (l = utf8_encode((uint32_t)(v.t == JV_INT ? v.u.i : v.u.b), u)) &&
                     (v.t == JV_BOOL || (v.u.i >= 0 && v.u.i <= 0x10FFFF)))
                sb_put(r, &b, (const char *)u, l);
            else jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%%c requires an int or a single character");
            continue;
        } else if (strchr("dixXo", c)) {
            if (!jv_is_num(v)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%%%c format: a number is required, not %s", c, jv_typename(v));
            spec[sl++] = 'l';
            spec[sl++] = 'l';
            spec[sl++] = c == 'i' ? 'd' : c;
            spec[sl] = '\0';
            long long iv = v.t == JV_FLOAT ? (long long)v.u.f : v.t == JV_INT ? (long long)v.u.i : (long long)v.u.b;
            m = snprintf(out, sizeof out, spec, iv);
        } else if (strchr("feEgG", c)) {
            if (!jv_is_num(v)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "must be real number, not %s", jv_typename(v));
            spec[sl++] = c;
            spec[sl] = '\0';
            m = snprintf(out, sizeof out, spec, jv_num(v));
        } else {
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "unsupported format character '%c'", c);
        }
        sb_put(r, &b, out, m < 0 ? 0 : (size_t)m < sizeof out ? (size_t)m : sizeof out - 1);
    }
    /* Python: leftover arguments are an error, unless the one argument is a mapping or a list */
    if (k < na && (av != &args || !(args.t == JV_DICT || args.t == JV_NS || args.t == JV_LIST)))
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "not all arguments converted during string formatting");
    return jv_of_str(sb_str(r, &b));
}

static jval to_int(jrender *r, jval x, const jargs *a, uint32_t pos) {
    int64_t dflt = fl_arg_int(r, pos, a, 0, "default", 0);
    if (x.t == JV_INT) return x;
    if (x.t == JV_BOOL) return jv_int(x.u.b);
    if (x.t == JV_FLOAT) return isfinite(x.u.f) && fabs(x.u.f) < 9.2e18 ? jv_int((int64_t)x.u.f) : jv_int(dflt);
    if (x.t == JV_STR) {
        char *s = ja_alloc(&r->ar, x.u.s.n + 1), *end;
        size_t k = 0;
        for (size_t i = 0; i < x.u.s.n; i++) /* Python allows "_" between digits */
            if (!(x.u.s.p[i] == '_' && k && s[k - 1] >= '0' && s[k - 1] <= '9' && i + 1 < x.u.s.n &&
                  x.u.s.p[i + 1] >= '0' && x.u.s.p[i + 1] <= '9'))
                s[k++] = x.u.s.p[i];
        long long v = strtoll(s, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end) return jv_int(v);
        double d = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end && isfinite(d) && fabs(d) < 9.2e18) return jv_int((int64_t)d);
    }
    return jv_int(dflt);
}

static jval to_float(jrender *r, jval x, const jargs *a) {
    const jval *d = fl_arg(a, 0, "default");
    double dflt = d && jv_is_num(*d) ? jv_num(*d) : 0.0;
    if (jv_is_num(x)) return jv_float(jv_num(x));
    if (x.t == JV_STR) {
        char *s = ja_strndup(&r->ar, x.u.s.p, x.u.s.n), *end;
        double v = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end) return jv_float(v);
    }
    return jv_float(dflt);
}

static jval indent(jrender *r, uint32_t pos, jval x, const jargs *a) {
    if (x.t != JV_STR) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' object has no attribute 'splitlines'", jv_typename(x));
    jstr s = x.u.s, ind;
    const jval *w = fl_arg(a, 0, "width");
    if (w && w->t == JV_STR) {
        ind = w->u.s;
    } else {
        int64_t k = fl_arg_int(r, pos, a, 0, "width", 4);
        if (k < 0) k = 0;
        if (k > 1024) k = 1024;
        char *sp = ja_alloc(&r->ar, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        ind = (jstr){.p = sp, .n = (size_t)k};
    }
    bool first = fl_arg_bool(a, 1, "first", false), blank = fl_arg_bool(a, 2, "blank", false);
    jsb b;
    sb_init(&b);
    if (first) sb_put_str(r, &b, ind);
    /* jinja2: (s + "\n").splitlines(), the first line as is, the others indented (empty ones only
     * with blank), joined with "\n" */
    size_t i = 0, line = 0;
    while (i <= s.n) {
        size_t j = i;
        while (j < s.n && s.p[j] != '\n' && s.p[j] != '\r' && s.p[j] != '\v' && s.p[j] != '\f') j++;
        if (line) {
            sb_put(r, &b, "\n", 1);
            if (blank || j > i) sb_put_str(r, &b, ind);
        }
        sb_put_sub(r, &b, s, i, j - i);
        line++;
        if (j < s.n && s.p[j] == '\r' && j + 1 < s.n && s.p[j + 1] == '\n') j++;
        i = j + 1;
    }
    return jv_of_str(sb_str(r, &b));
}

static jval fmt_round(jrender *r, uint32_t pos, jval x, const jargs *a) {
    if (!jv_is_num(x)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "round needs a number, got %s", jv_typename(x));
    int64_t prec = fl_arg_int(r, pos, a, 0, "precision", 0);
    const jval *m = fl_arg(a, 1, "method");
    bool common = !m || (m->t == JV_STR && m->u.s.n == 6 && !memcmp(m->u.s.p, "common", 6));
    if (common && x.t != JV_FLOAT) return jv_int(x.t == JV_INT ? x.u.i : x.u.b); /* Python's round(int, n) */
    double v = jv_num(x), p = pow(10.0, (double)prec), y = v * p;
    if (m && m->t == JV_STR && m->u.s.n == 4 && !memcmp(m->u.s.p, "ceil", 4)) y = ceil(y);
    else if (m && m->t == JV_STR && m->u.s.n == 5 && !memcmp(m->u.s.p, "floor", 5)) y = floor(y);
    else y = nearbyint(y);
    return jv_float(y / p);
}

static const char *const k_filters[] = {
    "tojson", "trim", "length", "count", "items", "join", "replace", "default", "d", "first", "last", "upper",
    "lower", "title", "capitalize", "selectattr", "rejectattr", "select", "reject", "map", "list", "string", "int",
    "float", "abs", "round", "unique", "sort", "reverse", "dictsort", "indent", "safe", "e", "escape", "center",
    "wordcount", "min", "max", "sum", "attr", "batch", "forceescape", "striptags", "format", NULL};

bool fl_has_filter(const char *name) { return fl_find_name(k_filters, name, strlen(name)) != NULL; }

static jval minmax(jrender *r, uint32_t pos, jval x, const jargs *a, bool want_max) {
    jlist *l = fl_iter(r, pos, x);
    bool cs = fl_arg_bool(a, 0, "case_sensitive", false);
    const jval *at = fl_arg(a, 1, "attribute");
    if (!l->n) return jv_undef(NULL);
    size_t best = 0;
    jval bk = {0};
    for (size_t i = 0; i < l->n; i++) {
        jval k = at && at->t == JV_STR ? attr_path(r, pos, l->v[i], at->u.s) : l->v[i];
        k = lower_key(r, k, cs);
        if (i == 0 || (want_max ? jv_cmp(r, pos, k, bk) > 0 : jv_cmp(r, pos, k, bk) < 0)) {
            best = i;
            bk = k;
        }
    }
    return l->v[best];
}

static jval filter(jrender *r, uint32_t pos, const char *f, jval x, const jargs *a);

/* The filters that are generators in jinja2: an error while making their items shows only when
 * the result is consumed. */
static const char *const k_lazy[] = {"map", "select", "reject", "selectattr", "rejectattr", "unique", "items", "batch", NULL};

/* Runs lazy filter f; a template error inside it (a limit or NOMEM still unwinds) gives a
 * generator that fails with that error when consumed. */
static jval lazy_filter(jrender *r, uint32_t pos, const char *f, jval x, const jargs *a) {
    jmp_buf saved;
    memcpy(saved, r->jb, sizeof saved);
    const uint32_t nest = r->nest, depth = r->depth;
    jsb *const out = r->out;
    if (setjmp(r->jb)) {
        memcpy(r->jb, saved, sizeof saved);
        r->nest = nest;
        r->depth = depth;
        r->out = out;
        slm_err *e = r->ar.e;
        if (e->status == SLM_ERR_RANGE || e->status == SLM_ERR_NOMEM) longjmp(r->jb, 1);
        char msg[SLM_ERR_MSG_CAP];
        memcpy(msg, e->msg, sizeof msg);
        err_clear(e);
        jlist *g = gen(r, 0);
        g->poison = ja_strndup(&r->ar, msg, strnlen(msg, sizeof msg - 1));
        return jv_of_list(g);
    }
    jval v = filter(r, pos, f, x, a);
    memcpy(r->jb, saved, sizeof saved);
    return v;
}

jval fl_filter(jrender *r, uint32_t pos, const char *f, jval x, const jargs *a) {
    if (fl_find_name(k_lazy, f, strlen(f))) return lazy_filter(r, pos, f, x, a);
    return filter(r, pos, f, x, a);
}

static jval filter(jrender *r, uint32_t pos, const char *f, jval x, const jargs *a) {
    if (fl_is(f, "tojson")) return tojson(r, pos, x, a);
    if (fl_is(f, "safe")) {
        jval s = jv_of_str(jv_tostr(r, x));
        s.u.s.safe = true;
        return s;
    }
    if (fl_is(f, "trim")) {
        const jval *c = fl_arg(a, 0, "chars");
        jstr chars = c && c->t == JV_STR ? c->u.s : (jstr){0};
        return pys_strip(r, jv_tostr(r, x), c && c->t == JV_STR ? &chars : NULL, true, true);
    }
    if (fl_is(f, "length") || fl_is(f, "count")) {
        switch (x.t) {
        case JV_STR: return jv_int((int64_t)pys_len(x.u.s));
        case JV_LIST:
            if (x.u.l->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "object of type 'generator' has no len()");
            return jv_int((int64_t)x.u.l->n);
        case JV_DICT: case JV_NS: return jv_int((int64_t)x.u.d->n);
        case JV_UNDEF: return jv_int(0);
        default: jr_fail(r, pos, SLM_ERR_INVALID_ARG, "object of type '%s' has no len()", jv_typename(x));
        }
    }
    if (fl_is(f, "items")) {
        if (x.t == JV_UNDEF) return jv_of_list(gen(r, 0));
        if (x.t != JV_DICT) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "can only get item pairs from a mapping");
        jval v = fl_items_of(r, x.u.d);
        v.u.l->iter = true;
        return v;
    }
    if (fl_is(f, "join")) {
        const jval *sep = fl_arg(a, 0, "d"), *at = fl_arg(a, 1, "attribute");
        jstr s = sep ? jv_tostr(r, *sep) : (jstr){.p = "", .n = 0}, atp;
        if (at && at->t == JV_STR) atp = at->u.s;
        return fl_join(r, pos, fl_iter(r, pos, x), s, at && at->t == JV_STR ? &atp : NULL);
    }
    if (fl_is(f, "replace")) {
        jstr old = jv_tostr(r, *(fl_arg(a, 0, "old") ? fl_arg(a, 0, "old") : &x)), nw;
        if (!fl_arg(a, 0, "old") || !fl_arg(a, 1, "new")) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "replace needs old and new");
        nw = jv_tostr(r, *fl_arg(a, 1, "new"));
        return pys_replace(r, jv_tostr(r, x), old, nw, fl_arg_int(r, pos, a, 2, "count", -1));
    }
    if (fl_is(f, "default") || fl_is(f, "d")) {
        const jval *dv = fl_arg(a, 0, "default_value");
        bool boolean = fl_arg_bool(a, 1, "boolean", false);
        if (x.t == JV_UNDEF || (boolean && !jv_truthy(x))) return dv ? *dv : jv_str("", 0);
        return x;
    }
    if (fl_is(f, "first") || fl_is(f, "last")) {
        jlist *l = fl_iter(r, pos, x);
        if (fl_is(f, "last") && l->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'generator' object is not reversible");
        if (!l->n) return jv_undef(NULL);
        return fl_is(f, "first") ? l->v[0] : l->v[l->n - 1];
    }
    if (fl_is(f, "upper")) return pys_map(r, jv_tostr(r, x), PYS_UPPER);
    if (fl_is(f, "lower")) return pys_map(r, jv_tostr(r, x), PYS_LOWER);
    if (fl_is(f, "title")) return pys_map(r, jv_tostr(r, x), PYS_JTITLE);
    if (fl_is(f, "capitalize")) return pys_map(r, jv_tostr(r, x), PYS_CAPITALIZE);
    if (fl_is(f, "selectattr") || fl_is(f, "rejectattr"))
        return select_items(r, pos, x, a, true, fl_is(f, "selectattr"));
    if (fl_is(f, "select") || fl_is(f, "reject")) return select_items(r, pos, x, a, false, fl_is(f, "select"));
    if (fl_is(f, "map")) {
        jlist *in = jv_truthy(x) ? fl_iter(r, pos, x) : jl_new(&r->ar, 0), *out = gen(r, in->n);
        const jval *at = fl_arg(a, SIZE_MAX, "attribute");
        if (at) {
            if (at->t != JV_STR) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "map: attribute must be a string");
            const jval *dv = fl_arg(a, SIZE_MAX, "default");
            for (size_t i = 0; i < in->n; i++) jl_push(&r->ar, out, attr_path_d(r, pos, in->v[i], at->u.s, dv));
            return jv_of_list(out);
        }
        jstr fn = fl_arg_str(r, pos, a, 0, NULL);
        const char *name = ja_strndup(&r->ar, fn.p, fn.n);
        if (!fl_has_filter(name)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no filter named '%s'", name);
        jargs fa = {a->v + 1, a->n - 1, a->kwn, a->kwv, a->nkw};
        for (size_t i = 0; i < in->n; i++) {
            jr_step(r, pos);
            jl_push(&r->ar, out, fl_filter(r, pos, name, in->v[i], &fa));
        }
        return jv_of_list(out);
    }
    if (fl_is(f, "list")) {
        jlist *in = fl_iter(r, pos, x), *out = jl_new(&r->ar, in->n);
        for (size_t i = 0; i < in->n; i++) jl_push(&r->ar, out, in->v[i]);
        return jv_of_list(out);
    }
    if (fl_is(f, "string")) return jv_of_str(jv_tostr(r, x));
    if (fl_is(f, "int")) return to_int(r, x, a, pos);
    if (fl_is(f, "float")) return to_float(r, x, a);
    if (fl_is(f, "abs")) {
        if (x.t == JV_FLOAT) return jv_float(fabs(x.u.f));
        if (x.t == JV_INT && x.u.i != INT64_MIN) return jv_int(x.u.i < 0 ? -x.u.i : x.u.i);
        if (x.t == JV_BOOL) return jv_int(x.u.b);
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "bad operand type for abs(): '%s'", jv_typename(x));
    }
    if (fl_is(f, "round")) return fmt_round(r, pos, x, a);
    if (fl_is(f, "unique")) {
        jlist *in = fl_iter(r, pos, x), *out = gen(r, 0), *keys = jl_new(&r->ar, 0);
        bool cs = fl_arg_bool(a, 0, "case_sensitive", false);
        const jval *at = fl_arg(a, 1, "attribute");
        for (size_t i = 0; i < in->n; i++) {
            jval k = at && at->t == JV_STR ? attr_path(r, pos, in->v[i], at->u.s) : in->v[i];
            k = lower_key(r, k, cs);
            bool seen = false;
            for (size_t j = 0; j < keys->n && !seen; j++) {
                jr_step(r, pos);
                seen = jv_eq(keys->v[j], k);
            }
            if (!seen) {
                jl_push(&r->ar, keys, k);
                jl_push(&r->ar, out, in->v[i]);
            }
        }
        return jv_of_list(out);
    }
    if (fl_is(f, "sort")) {
        jlist *in = fl_iter(r, pos, x);
        bool rev = fl_arg_bool(a, 0, "reverse", false), cs = fl_arg_bool(a, 1, "case_sensitive", false);
        const jval *at = fl_arg(a, 2, "attribute");
        jval *keys = ja_alloc(&r->ar, (in->n + 1) * sizeof *keys);
        for (size_t i = 0; i < in->n; i++)
            keys[i] = lower_key(r, at && at->t == JV_STR ? attr_path(r, pos, in->v[i], at->u.s) : in->v[i], cs);
        return jv_of_list(sort_by(r, pos, in, keys, rev));
    }
    if (fl_is(f, "dictsort")) {
        if (x.t != JV_DICT) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "dictsort needs a mapping, got %s", jv_typename(x));
        bool cs = fl_arg_bool(a, 0, "case_sensitive", false), rev = fl_arg_bool(a, 2, "reverse", false);
        const jval *by = fl_arg(a, 1, "by");
        bool by_value = by && by->t == JV_STR && by->u.s.n == 5 && !memcmp(by->u.s.p, "value", 5);
        jlist *in = fl_items_of(r, x.u.d).u.l;
        jval *keys = ja_alloc(&r->ar, (in->n + 1) * sizeof *keys);
        for (size_t i = 0; i < in->n; i++) keys[i] = lower_key(r, in->v[i].u.l->v[by_value ? 1 : 0], cs);
        return jv_of_list(sort_by(r, pos, in, keys, rev));
    }
    if (fl_is(f, "reverse")) {
        if (x.t == JV_STR) return ev_slice(r, pos, x, jv_none(), jv_none(), jv_int(-1));
        jlist *in = fl_iter(r, pos, x), *out = gen(r, in->n);
        if (in->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'generator' object is not reversible");
        for (size_t i = in->n; i-- > 0;) jl_push(&r->ar, out, in->v[i]);
        return jv_of_list(out);
    }
    if (fl_is(f, "indent")) return indent(r, pos, x, a);
    if (fl_is(f, "e") || fl_is(f, "escape") || fl_is(f, "forceescape")) {
        jstr s = jv_tostr(r, x);
        jsb b;
        sb_init(&b);
        for (size_t i = 0; i < s.n; i++) {
            const char *rep = s.p[i] == '&' ? "&amp;" : s.p[i] == '<' ? "&lt;" : s.p[i] == '>' ? "&gt;"
                              : s.p[i] == '"' ? "&#34;" : s.p[i] == '\'' ? "&#39;" : NULL;
            if (rep) sb_puts(r, &b, rep);
            else sb_put(r, &b, s.p + i, 1);
        }
        if (s.nseg && b.n) sb_mark(r, &b, 0, js_msg(s));
        jval v = jv_of_str(sb_str(r, &b));
        v.u.s.safe = true;
        return v;
    }
    if (fl_is(f, "center")) {
        jstr s = jv_tostr(r, x);
        int64_t w = fl_arg_int(r, pos, a, 0, "width", 80), len = (int64_t)pys_len(s);
        if (w > (int64_t)r->max_output) w = (int64_t)r->max_output;
        jsb b;
        sb_init(&b);
        int64_t pad = w > len ? w - len : 0, left = pad / 2 + (pad & w & 1);
        for (int64_t i = 0; i < left; i++) sb_put(r, &b, " ", 1);
        sb_put_str(r, &b, s);
        for (int64_t i = 0; i < pad - left; i++) sb_put(r, &b, " ", 1);
        return jv_of_str(sb_str(r, &b));
    }
    if (fl_is(f, "wordcount")) { /* runs of \w (letters, digits, "_"; any non-ASCII counts as a letter) */
        jstr s = jv_tostr(r, x);
        int64_t words = 0;
        bool in = false;
        for (size_t i = 0; i < s.n; i++) {
            unsigned char c = (unsigned char)s.p[i];
            bool w = c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
            words += w && !in;
            in = w;
        }
        return jv_int(words);
    }
    if (fl_is(f, "min") || fl_is(f, "max")) return minmax(r, pos, x, a, fl_is(f, "max"));
    if (fl_is(f, "sum")) {
        jlist *in = fl_iter(r, pos, x);
        const jval *at = fl_arg(a, 0, "attribute"), *st = fl_arg(a, 1, "start");
        jval acc = st ? *st : jv_int(0);
        for (size_t i = 0; i < in->n; i++) {
            jval v = at && at->t == JV_STR ? attr_path(r, pos, in->v[i], at->u.s) : in->v[i];
            if (!jv_is_num(acc) || !jv_is_num(v))
                jr_fail(r, pos, SLM_ERR_INVALID_ARG, "sum needs numbers, got %s", jv_typename(v));
            if (acc.t == JV_FLOAT || v.t == JV_FLOAT) acc = jv_float(jv_num(acc) + jv_num(v));
            else if (__builtin_add_overflow(acc.t == JV_INT ? acc.u.i : acc.u.b, v.t == JV_INT ? v.u.i : v.u.b, &acc.u.i))
                jr_fail(r, pos, SLM_ERR_INVALID_ARG, "integer overflow in sum");
            else acc.t = JV_INT;
        }
        return acc;
    }
    if (fl_is(f, "attr")) {
        jstr n = fl_arg_str(r, pos, a, 0, "name"); /* Python getattr: a dict's keys are not attributes */
        if (x.t == JV_DICT && !fl_find_name(fl_dict_methods, n.p, n.n)) return jv_undef(ja_strndup(&r->ar, n.p, n.n));
        return fl_getattr(r, pos, x, n.p, n.n);
    }
    if (fl_is(f, "batch")) {
        jlist *in = fl_iter(r, pos, x), *out = gen(r, 0), *cur = NULL;
        int64_t k = fl_arg_int(r, pos, a, 0, "linecount", 1);
        const jval *fill = fl_arg(a, 1, "fill_with");
        if (k <= 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "batch needs a positive count");
        for (size_t i = 0; i < in->n; i++) {
            if (!cur || (int64_t)cur->n == k) {
                cur = jl_new(&r->ar, 0);
                jl_push(&r->ar, out, jv_of_list(cur));
            }
            jl_push(&r->ar, cur, in->v[i]);
        }
        while (fill && cur && (int64_t)cur->n < k) jl_push(&r->ar, cur, *fill);
        return jv_of_list(out);
    }
    if (fl_is(f, "format")) {
        jstr fmt = jv_tostr(r, x);
        jlist *t = jl_new(&r->ar, a->n);
        t->tuple = true;
        for (size_t i = 0; i < a->n; i++) jl_push(&r->ar, t, a->v[i]);
        return fl_percent(r, pos, fmt, jv_of_list(t));
    }
    if (fl_is(f, "striptags")) {
        jstr s = jv_tostr(r, x);
        jsb b;
        sb_init(&b);
        bool in_tag = false, sp = false;
        for (size_t i = 0; i < s.n; i++) {
            char c = s.p[i];
            if (c == '<') in_tag = true;
            else if (c == '>' && in_tag) in_tag = false;
            else if (!in_tag) {
                if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
                    sp = b.n > 0;
                } else {
                    if (sp) sb_put(r, &b, " ", 1);
                    sp = false;
                    sb_put(r, &b, &c, 1);
                }
            }
        }
        if (s.nseg && b.n) sb_mark(r, &b, 0, js_msg(s));
        return jv_of_str(sb_str(r, &b));
    }
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no filter named '%s'", f);
}
