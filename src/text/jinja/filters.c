/* filters.c — jinja2's filters and tests that chat templates use, Python's str/dict/list methods
 * as the immutable sandbox allows them (mutating methods fail as jinja2's SecurityError does),
 * attribute and item lookup with jinja2's order (dict: method, then key; [key]: key, then
 * method), the loop object, and the globals transformers defines (raise_exception, strftime_now)
 * with jinja2's range, dict, namespace. tojson follows transformers' override of json.dumps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"
#include "text/jinja/strs.h"

#define MAX_RANGE 100000 /* jinja2's sandbox limit */

static jval sval(jstr s) { return (jval){.t = JV_STR, .u.s = s}; }
static jval lval(jlist *l) { return (jval){.t = JV_LIST, .u.l = l}; }
static bool name_is(const char *a, const char *b) { return !strcmp(a, b); }

static _Noreturn void fail_undef(jrender *r, uint32_t pos, jval v) {
    if (v.name) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' is undefined", v.name);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "a value is undefined");
}

/* Argument i (positional) or the keyword name; NULL when absent. */
static const jval *arg(const jargs *a, size_t i, const char *name) {
    if (i < a->n) return &a->v[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return &a->kwv[k];
    return NULL;
}
static bool arg_bool(const jargs *a, size_t i, const char *name, bool dflt) {
    const jval *v = arg(a, i, name);
    return v ? jv_truthy(*v) : dflt;
}
static int64_t arg_int(jrender *r, uint32_t pos, const jargs *a, size_t i, const char *name, int64_t dflt) {
    const jval *v = arg(a, i, name);
    if (!v || v->t == JV_NONE) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "expected an integer argument%s%s, got %s", name ? " " : "", name ? name : "",
            jv_typename(*v));
}
static jstr arg_str(jrender *r, uint32_t pos, const jargs *a, size_t i, const char *name) {
    const jval *v = arg(a, i, name);
    if (!v) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "missing argument %s", name ? name : "");
    if (v->t != JV_STR) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "expected a string argument, got %s", jv_typename(*v));
    return v->u.s;
}
static jstr need_str(jrender *r, uint32_t pos, jval x, const char *what) {
    if (x.t == JV_STR) return x.u.s;
    if (x.t == JV_UNDEF) fail_undef(r, pos, x);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s needs a string, got %s", what, jv_typename(x));
}

jlist *fl_iter(jrender *r, uint32_t pos, jval v) {
    switch (v.t) {
    case JV_LIST: return v.u.l;
    case JV_UNDEF: return jl_new(&r->ar, 0);
    case JV_DICT: {
        jlist *l = jl_new(&r->ar, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) jl_push(&r->ar, l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jlist *l = jl_new(&r->ar, v.u.s.n);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t n;
            st_cp(v.u.s, i, &n);
            jl_push(&r->ar, l, sval(js_sub(r, v.u.s, i, n)));
            i += n;
        }
        return l;
    }
    default: jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' object is not iterable", jv_typename(v));
    }
}

static jval method(jrender *r, jval self, const char *name) {
    jfunc *f = ja_alloc(&r->ar, sizeof *f);
    *f = (jfunc){.kind = FN_METHOD, .name = name, .self = self};
    return (jval){.t = JV_FUNC, .u.fn = f};
}

static const char *find_name(const char *const *names, const char *s, size_t n) {
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return names[i];
    return NULL;
}

static const char *const k_str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "lower", "upper", "title",
    "capitalize", "swapcase", "casefold", "find", "rfind", "index", "rindex", "count", "format", "join", "isdigit",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "splitlines", "center", "ljust",
    "rjust", "zfill", "partition", "rpartition", "removeprefix", "removesuffix", NULL};
static const char *const k_dict_methods[] = {"get", "items", "keys", "values", "copy", "pop", "popitem", "update",
                                             "setdefault", "clear", NULL};
static const char *const k_list_methods[] = {"index", "count", "copy", "append", "pop", "extend", "insert", "remove",
                                             "reverse", "sort", "clear", NULL};

jval fl_getattr(jrender *r, uint32_t pos, jval x, const char *name, size_t n) {
    const char *m;
    switch (x.t) {
    case JV_UNDEF: fail_undef(r, pos, x);
    case JV_DICT:
        if ((m = find_name(k_dict_methods, name, n))) return method(r, x, m);
        /* fall through */
    case JV_NS: {
        jval *v = jd_gets(x.u.d, name, n);
        return v ? *v : jv_undef(ja_strndup(&r->ar, name, n));
    }
    case JV_STR:
        if ((m = find_name(k_str_methods, name, n))) return method(r, x, m);
        break;
    case JV_LIST:
        if ((m = find_name(k_list_methods, name, n))) return method(r, x, m);
        break;
    case JV_LOOP: {
        jloop *l = x.u.loop;
        size_t len = l->items->n, i = l->i;
        char k[16];
        snprintf(k, sizeof k, "%.*s", (int)(n < 15 ? n : 15), name);
        if (name_is(k, "index")) return jv_int((int64_t)i + 1);
        if (name_is(k, "index0")) return jv_int((int64_t)i);
        if (name_is(k, "revindex")) return jv_int((int64_t)(len - i));
        if (name_is(k, "revindex0")) return jv_int((int64_t)(len - i - 1));
        if (name_is(k, "first")) return jv_bool(i == 0);
        if (name_is(k, "last")) return jv_bool(i + 1 == len);
        if (name_is(k, "length")) return jv_int((int64_t)len);
        if (name_is(k, "depth")) return jv_int(1);
        if (name_is(k, "depth0")) return jv_int(0);
        if (name_is(k, "previtem")) return i > 0 ? l->items->v[i - 1] : jv_undef("previtem");
        if (name_is(k, "nextitem")) return i + 1 < len ? l->items->v[i + 1] : jv_undef("nextitem");
        if (name_is(k, "cycle")) return method(r, x, "cycle");
        break;
    }
    default: break;
    }
    return jv_undef(ja_strndup(&r->ar, name, n));
}

jval fl_getitem(jrender *r, uint32_t pos, jval x, jval key) {
    switch (x.t) {
    case JV_UNDEF: fail_undef(r, pos, x);
    case JV_DICT: case JV_NS: {
        jval *v = jd_get(x.u.d, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (x.u.l->iter) return jv_undef(NULL);
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = key.t == JV_INT ? key.u.i : key.u.b, n = (int64_t)x.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return x.u.l->v[i];
            return jv_undef(NULL);
        }
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = key.t == JV_INT ? key.u.i : key.u.b;
            jval one = jv_int(1);
            if (i == -1) return ev_slice(r, pos, x, jv_int(-1), jv_none(), one);
            jval s = ev_slice(r, pos, x, jv_int(i), jv_int(i < 0 ? i + 1 : i + 1), one);
            return s.u.s.n ? s : jv_undef(NULL);
        }
        break;
    default: break;
    }
    if (key.t == JV_STR) return fl_getattr(r, pos, x, key.u.s.p, key.u.s.n);
    return jv_undef(NULL);
}

/* ---- tests ---- */

static const char *const k_tests[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "sequence", "iterable",
    "boolean", "true", "false", "even", "odd", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "<",
    "lessthan", "gt", ">", "greaterthan", "le", "<=", "ge", ">=", "in", "callable", "sameas", "lower", "upper",
    "escaped", "filter", "test", NULL};

bool fl_has_test(const char *name) { return find_name(k_tests, name, strlen(name)) != NULL; }

static const jval *need_arg(jrender *r, uint32_t pos, const jargs *a, const char *what) {
    const jval *v = arg(a, 0, NULL);
    if (!v) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "test '%s' needs an argument", what);
    return v;
}

bool fl_test(jrender *r, uint32_t pos, const char *t, jval x, const jargs *a) {
    if (!fl_has_test(t)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no test named '%s'", t);
    if (name_is(t, "defined")) return x.t != JV_UNDEF;
    if (name_is(t, "undefined")) return x.t == JV_UNDEF;
    if (name_is(t, "none")) return x.t == JV_NONE;
    if (name_is(t, "string")) return x.t == JV_STR;
    if (name_is(t, "number")) return jv_is_num(x);
    if (name_is(t, "integer")) return x.t == JV_INT;
    if (name_is(t, "float")) return x.t == JV_FLOAT;
    if (name_is(t, "mapping")) return x.t == JV_DICT;
    if (name_is(t, "sequence")) return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF;
    if (name_is(t, "iterable")) return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF;
    if (name_is(t, "boolean")) return x.t == JV_BOOL;
    if (name_is(t, "true")) return x.t == JV_BOOL && x.u.b;
    if (name_is(t, "false")) return x.t == JV_BOOL && !x.u.b;
    if (name_is(t, "callable")) return x.t == JV_FUNC;
    if (name_is(t, "escaped")) return false;
    if (name_is(t, "filter") || name_is(t, "test")) {
        if (x.t != JV_STR) return false;
        char *s = ja_strndup(&r->ar, x.u.s.p, x.u.s.n);
        return name_is(t, "filter") ? fl_has_filter(s) : fl_has_test(s);
    }
    if (name_is(t, "lower") || name_is(t, "upper")) {
        jstr s = need_str(r, pos, x, t);
        bool any = false;
        for (size_t i = 0; i < s.n;) {
            size_t l;
            uint32_t c = st_cp(s, i, &l);
            i += l;
            if (st_case(c, true) == c && st_case(c, false) == c) continue;
            any = true;
            if (st_case(c, name_is(t, "upper")) != c) return false;
        }
        return any;
    }
    if (name_is(t, "even") || name_is(t, "odd")) {
        if (x.t != JV_INT && x.t != JV_BOOL) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "test '%s' needs an integer", t);
        int64_t i = x.t == JV_INT ? x.u.i : x.u.b;
        return (i % 2 == 0) == name_is(t, "even");
    }
    if (name_is(t, "divisibleby")) {
        const jval *d = need_arg(r, pos, a, t);
        if (!jv_is_num(x) || !jv_is_num(*d)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "divisibleby needs numbers");
        double y = jv_num(*d);
        if (y == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "integer division or modulo by zero");
        return fmod(jv_num(x), y) == 0;
    }
    const jval *o = need_arg(r, pos, a, t);
    if (name_is(t, "eq") || name_is(t, "equalto") || name_is(t, "==")) return jv_eq(x, *o);
    if (name_is(t, "ne") || name_is(t, "!=")) return !jv_eq(x, *o);
    if (name_is(t, "sameas")) {
        if (x.t != o->t) return false;
        if (x.t == JV_NONE || x.t == JV_UNDEF) return true;
        if (x.t == JV_BOOL) return x.u.b == o->u.b;
        if (x.t == JV_INT) return x.u.i == o->u.i && x.u.i >= -5 && x.u.i <= 256;
        if (x.t == JV_LIST) return x.u.l == o->u.l;
        if (x.t == JV_DICT || x.t == JV_NS) return x.u.d == o->u.d;
        if (x.t == JV_STR) return x.u.s.p == o->u.s.p && x.u.s.n == o->u.s.n;
        return jv_eq(x, *o);
    }
    if (name_is(t, "in")) {
        jval c = *o;
        if (c.t == JV_STR) {
            jstr s = need_str(r, pos, x, "in");
            return st_find(c.u.s, s, 0) != SIZE_MAX;
        }
        if (c.t == JV_LIST) {
            for (size_t i = 0; i < c.u.l->n; i++)
                if (jv_eq(c.u.l->v[i], x)) return true;
            return false;
        }
        if (c.t == JV_DICT) return jd_get(c.u.d, x) != NULL;
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "argument of type '%s' is not iterable", jv_typename(c));
    }
    int c = jv_cmp(r, pos, x, *o);
    if (name_is(t, "lt") || name_is(t, "<") || name_is(t, "lessthan")) return c < 0;
    if (name_is(t, "gt") || name_is(t, ">") || name_is(t, "greaterthan")) return c > 0;
    if (name_is(t, "le") || name_is(t, "<=")) return c <= 0;
    return c >= 0;
}

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
    return st_map(r, v.u.s, ST_LOWER);
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
    const jval *ind = arg(a, 0, "indent"), *seps = arg(a, 2, "separators");
    bool sort_keys = arg_bool(a, 3, "sort_keys", false), ascii = arg_bool(a, SIZE_MAX, "ensure_ascii", false);
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
    return sval(sb_str(r, &b));
}

static jval items_of(jrender *r, jdict *d) {
    jlist *l = jl_new(&r->ar, d->n);
    for (size_t i = 0; i < d->n; i++) {
        jlist *p = jl_new(&r->ar, 2);
        p->tuple = true;
        jl_push(&r->ar, p, d->k[i]);
        jl_push(&r->ar, p, d->v[i]);
        jl_push(&r->ar, l, lval(p));
    }
    return lval(l);
}

static jval join(jrender *r, uint32_t pos, jlist *items, jstr sep, const jstr *attr) {
    jsb b;
    sb_init(&b);
    for (size_t i = 0; i < items->n; i++) {
        if (i) sb_put_str(r, &b, sep);
        jval v = attr ? attr_path(r, pos, items->v[i], *attr) : items->v[i];
        jv_print(r, &b, v);
    }
    return sval(sb_str(r, &b));
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
        attr = arg_str(r, pos, a, 0, NULL);
        first = 1;
    }
    const jval *tn = arg(a, first, NULL);
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
    return lval(out);
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
            if (v.t == JV_STR && st_len(v.u.s) == 1) sb_put_str(r, &b, v.u.s);
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
    if (k < na && av != &args) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "not all arguments converted during string formatting");
    return sval(sb_str(r, &b));
}

static jval to_int(jrender *r, jval x, const jargs *a, uint32_t pos) {
    int64_t dflt = arg_int(r, pos, a, 0, "default", 0);
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

static jval to_float(jrender *r, jval x, const jargs *a, uint32_t pos) {
    const jval *d = arg(a, 0, "default");
    double dflt = d && jv_is_num(*d) ? jv_num(*d) : 0.0;
    (void)pos;
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
    jstr s = jv_tostr(r, x), ind;
    const jval *w = arg(a, 0, "width");
    if (w && w->t == JV_STR) {
        ind = w->u.s;
    } else {
        int64_t k = arg_int(r, pos, a, 0, "width", 4);
        if (k < 0) k = 0;
        if (k > 1024) k = 1024;
        char *sp = ja_alloc(&r->ar, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        ind = (jstr){.p = sp, .n = (size_t)k};
    }
    bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
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
    return sval(sb_str(r, &b));
}

static jval fmt_round(jrender *r, uint32_t pos, jval x, const jargs *a) {
    if (!jv_is_num(x)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "round needs a number, got %s", jv_typename(x));
    int64_t prec = arg_int(r, pos, a, 0, "precision", 0);
    const jval *m = arg(a, 1, "method");
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

bool fl_has_filter(const char *name) { return find_name(k_filters, name, strlen(name)) != NULL; }

static jval minmax(jrender *r, uint32_t pos, jval x, const jargs *a, bool want_max) {
    jlist *l = fl_iter(r, pos, x);
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const jval *at = arg(a, 1, "attribute");
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

jval fl_filter(jrender *r, uint32_t pos, const char *f, jval x, const jargs *a) {
    if (name_is(f, "tojson")) return tojson(r, pos, x, a);
    if (name_is(f, "safe")) {
        jval s = sval(jv_tostr(r, x));
        s.u.s.safe = true;
        return s;
    }
    if (name_is(f, "trim")) {
        const jval *c = arg(a, 0, "chars");
        jstr chars = c && c->t == JV_STR ? c->u.s : (jstr){0};
        return st_strip(r, jv_tostr(r, x), c && c->t == JV_STR ? &chars : NULL, true, true);
    }
    if (name_is(f, "length") || name_is(f, "count")) {
        switch (x.t) {
        case JV_STR: return jv_int((int64_t)st_len(x.u.s));
        case JV_LIST:
            if (x.u.l->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "object of type 'generator' has no len()");
            return jv_int((int64_t)x.u.l->n);
        case JV_DICT: case JV_NS: return jv_int((int64_t)x.u.d->n);
        case JV_UNDEF: return jv_int(0);
        default: jr_fail(r, pos, SLM_ERR_INVALID_ARG, "object of type '%s' has no len()", jv_typename(x));
        }
    }
    if (name_is(f, "items")) {
        if (x.t == JV_UNDEF) return lval(gen(r, 0));
        if (x.t != JV_DICT) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "can only get item pairs from a mapping");
        jval v = items_of(r, x.u.d);
        v.u.l->iter = true;
        return v;
    }
    if (name_is(f, "join")) {
        const jval *sep = arg(a, 0, "d"), *at = arg(a, 1, "attribute");
        jstr s = sep ? jv_tostr(r, *sep) : (jstr){.p = "", .n = 0}, atp;
        if (at && at->t == JV_STR) atp = at->u.s;
        return join(r, pos, fl_iter(r, pos, x), s, at && at->t == JV_STR ? &atp : NULL);
    }
    if (name_is(f, "replace")) {
        jstr old = jv_tostr(r, *(arg(a, 0, "old") ? arg(a, 0, "old") : &x)), nw;
        if (!arg(a, 0, "old") || !arg(a, 1, "new")) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "replace needs old and new");
        nw = jv_tostr(r, *arg(a, 1, "new"));
        return st_replace(r, jv_tostr(r, x), old, nw, arg_int(r, pos, a, 2, "count", -1));
    }
    if (name_is(f, "default") || name_is(f, "d")) {
        const jval *dv = arg(a, 0, "default_value");
        bool boolean = arg_bool(a, 1, "boolean", false);
        if (x.t == JV_UNDEF || (boolean && !jv_truthy(x))) return dv ? *dv : jv_str("", 0);
        return x;
    }
    if (name_is(f, "first") || name_is(f, "last")) {
        jlist *l = fl_iter(r, pos, x);
        if (name_is(f, "last") && l->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'generator' object is not reversible");
        if (!l->n) return jv_undef(NULL);
        return name_is(f, "first") ? l->v[0] : l->v[l->n - 1];
    }
    if (name_is(f, "upper")) return st_map(r, jv_tostr(r, x), ST_UPPER);
    if (name_is(f, "lower")) return st_map(r, jv_tostr(r, x), ST_LOWER);
    if (name_is(f, "title")) return st_map(r, jv_tostr(r, x), ST_JTITLE);
    if (name_is(f, "capitalize")) return st_map(r, jv_tostr(r, x), ST_CAPITALIZE);
    if (name_is(f, "selectattr") || name_is(f, "rejectattr"))
        return select_items(r, pos, x, a, true, name_is(f, "selectattr"));
    if (name_is(f, "select") || name_is(f, "reject")) return select_items(r, pos, x, a, false, name_is(f, "select"));
    if (name_is(f, "map")) {
        jlist *in = jv_truthy(x) ? fl_iter(r, pos, x) : jl_new(&r->ar, 0), *out = gen(r, in->n);
        const jval *at = arg(a, SIZE_MAX, "attribute");
        if (at) {
            if (at->t != JV_STR) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "map: attribute must be a string");
            const jval *dv = arg(a, SIZE_MAX, "default");
            for (size_t i = 0; i < in->n; i++) jl_push(&r->ar, out, attr_path_d(r, pos, in->v[i], at->u.s, dv));
            return lval(out);
        }
        jstr fn = arg_str(r, pos, a, 0, NULL);
        const char *name = ja_strndup(&r->ar, fn.p, fn.n);
        if (!fl_has_filter(name)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no filter named '%s'", name);
        jargs fa = {a->v + 1, a->n - 1, a->kwn, a->kwv, a->nkw};
        for (size_t i = 0; i < in->n; i++) {
            jr_step(r, pos);
            jl_push(&r->ar, out, fl_filter(r, pos, name, in->v[i], &fa));
        }
        return lval(out);
    }
    if (name_is(f, "list")) {
        jlist *in = fl_iter(r, pos, x), *out = jl_new(&r->ar, in->n);
        for (size_t i = 0; i < in->n; i++) jl_push(&r->ar, out, in->v[i]);
        return lval(out);
    }
    if (name_is(f, "string")) return sval(jv_tostr(r, x));
    if (name_is(f, "int")) return to_int(r, x, a, pos);
    if (name_is(f, "float")) return to_float(r, x, a, pos);
    if (name_is(f, "abs")) {
        if (x.t == JV_FLOAT) return jv_float(fabs(x.u.f));
        if (x.t == JV_INT && x.u.i != INT64_MIN) return jv_int(x.u.i < 0 ? -x.u.i : x.u.i);
        if (x.t == JV_BOOL) return jv_int(x.u.b);
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "bad operand type for abs(): '%s'", jv_typename(x));
    }
    if (name_is(f, "round")) return fmt_round(r, pos, x, a);
    if (name_is(f, "unique")) {
        jlist *in = fl_iter(r, pos, x), *out = gen(r, 0), *keys = jl_new(&r->ar, 0);
        bool cs = arg_bool(a, 0, "case_sensitive", false);
        const jval *at = arg(a, 1, "attribute");
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
        return lval(out);
    }
    if (name_is(f, "sort")) {
        jlist *in = fl_iter(r, pos, x);
        bool rev = arg_bool(a, 0, "reverse", false), cs = arg_bool(a, 1, "case_sensitive", false);
        const jval *at = arg(a, 2, "attribute");
        jval *keys = ja_alloc(&r->ar, (in->n + 1) * sizeof *keys);
        for (size_t i = 0; i < in->n; i++)
            keys[i] = lower_key(r, at && at->t == JV_STR ? attr_path(r, pos, in->v[i], at->u.s) : in->v[i], cs);
        return lval(sort_by(r, pos, in, keys, rev));
    }
    if (name_is(f, "dictsort")) {
        if (x.t != JV_DICT) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "dictsort needs a mapping, got %s", jv_typename(x));
        bool cs = arg_bool(a, 0, "case_sensitive", false), rev = arg_bool(a, 2, "reverse", false);
        const jval *by = arg(a, 1, "by");
        bool by_value = by && by->t == JV_STR && by->u.s.n == 5 && !memcmp(by->u.s.p, "value", 5);
        jlist *in = items_of(r, x.u.d).u.l;
        jval *keys = ja_alloc(&r->ar, (in->n + 1) * sizeof *keys);
        for (size_t i = 0; i < in->n; i++) keys[i] = lower_key(r, in->v[i].u.l->v[by_value ? 1 : 0], cs);
        return lval(sort_by(r, pos, in, keys, rev));
    }
    if (name_is(f, "reverse")) {
        if (x.t == JV_STR) return ev_slice(r, pos, x, jv_none(), jv_none(), jv_int(-1));
        jlist *in = fl_iter(r, pos, x), *out = gen(r, in->n);
        if (in->iter) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'generator' object is not reversible");
        for (size_t i = in->n; i-- > 0;) jl_push(&r->ar, out, in->v[i]);
        return lval(out);
    }
    if (name_is(f, "indent")) return indent(r, pos, x, a);
    if (name_is(f, "e") || name_is(f, "escape") || name_is(f, "forceescape")) {
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
        jval v = sval(sb_str(r, &b));
        v.u.s.safe = true;
        return v;
    }
    if (name_is(f, "center")) {
        jstr s = jv_tostr(r, x);
        int64_t w = arg_int(r, pos, a, 0, "width", 80), len = (int64_t)st_len(s);
        if (w > (int64_t)r->max_output) w = (int64_t)r->max_output;
        jsb b;
        sb_init(&b);
        int64_t pad = w > len ? w - len : 0, left = pad / 2 + (pad & w & 1);
        for (int64_t i = 0; i < left; i++) sb_put(r, &b, " ", 1);
        sb_put_str(r, &b, s);
        for (int64_t i = 0; i < pad - left; i++) sb_put(r, &b, " ", 1);
        return sval(sb_str(r, &b));
    }
    if (name_is(f, "wordcount")) {
        jval parts = st_split(r, jv_tostr(r, x), NULL, -1, false);
        return jv_int((int64_t)parts.u.l->n);
    }
    if (name_is(f, "min") || name_is(f, "max")) return minmax(r, pos, x, a, name_is(f, "max"));
    if (name_is(f, "sum")) {
        jlist *in = fl_iter(r, pos, x);
        const jval *at = arg(a, 0, "attribute"), *st = arg(a, 1, "start");
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
    if (name_is(f, "attr")) {
        jstr n = arg_str(r, pos, a, 0, "name"); /* Python getattr: a dict's keys are not attributes */
        if (x.t == JV_DICT && !find_name(k_dict_methods, n.p, n.n)) return jv_undef(ja_strndup(&r->ar, n.p, n.n));
        return fl_getattr(r, pos, x, n.p, n.n);
    }
    if (name_is(f, "batch")) {
        jlist *in = fl_iter(r, pos, x), *out = gen(r, 0), *cur = NULL;
        int64_t k = arg_int(r, pos, a, 0, "linecount", 1);
        const jval *fill = arg(a, 1, "fill_with");
        if (k <= 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "batch needs a positive count");
        for (size_t i = 0; i < in->n; i++) {
            if (!cur || (int64_t)cur->n == k) {
                cur = jl_new(&r->ar, 0);
                jl_push(&r->ar, out, lval(cur));
            }
            jl_push(&r->ar, cur, in->v[i]);
        }
        while (fill && cur && (int64_t)cur->n < k) jl_push(&r->ar, cur, *fill);
        return lval(out);
    }
    if (name_is(f, "format")) {
        jstr fmt = jv_tostr(r, x);
        jlist *t = jl_new(&r->ar, a->n);
        t->tuple = true;
        for (size_t i = 0; i < a->n; i++) jl_push(&r->ar, t, a->v[i]);
        return fl_percent(r, pos, fmt, lval(t));
    }
    if (name_is(f, "striptags")) {
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
        return sval(sb_str(r, &b));
    }
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no filter named '%s'", f);
}

/* ---- methods ---- */

static jval str_format(jrender *r, uint32_t pos, jstr fmt, const jargs *a) {
    jsb b;
    sb_init(&b);
    size_t auto_i = 0;
    for (size_t i = 0; i < fmt.n; i++) {
        char c = fmt.p[i];
        if (c == '}' ) {
            if (i + 1 < fmt.n && fmt.p[i + 1] == '}') i++;
            else jr_fail(r, pos, SLM_ERR_INVALID_ARG, "Single '}' encountered in format string");
            sb_put(r, &b, "}", 1);
            continue;
        }
        if (c != '{') {
            sb_put_sub(r, &b, fmt, i, 1);
            continue;
        }
        if (i + 1 < fmt.n && fmt.p[i + 1] == '{') {
            sb_put(r, &b, "{", 1);
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < fmt.n && fmt.p[j] != '}') j++;
        if (j >= fmt.n) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "Single '{' encountered in format string");
        jstr field = {.p = fmt.p + i + 1, .n = j - i - 1};
        bool rep = false;
        if (field.n >= 2 && field.p[field.n - 2] == '!') {
            rep = field.p[field.n - 1] == 'r';
            field.n -= 2;
        }
        if (memchr(field.p, ':', field.n)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "format specs are not supported");
        const jval *v = NULL;
        if (field.n == 0) {
            v = arg(a, auto_i++, NULL);
        } else if (field.p[0] >= '0' && field.p[0] <= '9') {
            size_t k = 0;
            for (size_t q = 0; q < field.n && k < 1000000; q++) k = k * 10 + (size_t)(field.p[q] - '0');
            v = arg(a, k, NULL);
        } else {
            for (size_t k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == field.n && !memcmp(a->kwn[k], field.p, field.n)) v = &a->kwv[k];
        }
        if (!v) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "format: no argument for '{%.*s}'", (int)field.n, field.p);
        if (rep) jv_repr(r, &b, *v, 0);
        else jv_print(r, &b, *v);
        i = j;
    }
    return sval(sb_str(r, &b));
}

static bool prefix_match(jrender *r, uint32_t pos, jstr s, jval pre, bool end) {
    if (pre.t == JV_LIST && pre.u.l->tuple) {
        for (size_t i = 0; i < pre.u.l->n; i++)
            if (prefix_match(r, pos, s, pre.u.l->v[i], end)) return true;
        return false;
    }
    if (pre.t != JV_STR)
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s first arg must be str or a tuple of str, not %s",
                end ? "endswith" : "startswith", jv_typename(pre));
    jstr p = pre.u.s;
    if (p.n > s.n) return false;
    return !memcmp(end ? s.p + s.n - p.n : s.p, p.p, p.n);
}

static jval str_method(jrender *r, uint32_t pos, const char *m, jstr s, const jargs *a) {
    if (name_is(m, "strip") || name_is(m, "lstrip") || name_is(m, "rstrip")) {
        const jval *c = arg(a, 0, NULL);
        jstr chars = c && c->t == JV_STR ? c->u.s : (jstr){0};
        return st_strip(r, s, c && c->t == JV_STR ? &chars : NULL, m[0] != 'r', m[0] != 'l');
    }
    if (name_is(m, "split") || name_is(m, "rsplit")) {
        const jval *sep = arg(a, 0, "sep");
        jstr sp = sep && sep->t == JV_STR ? sep->u.s : (jstr){0};
        return st_split(r, s, sep && sep->t == JV_STR ? &sp : NULL, arg_int(r, pos, a, 1, "maxsplit", -1), m[0] == 'r');
    }
    if (name_is(m, "startswith") || name_is(m, "endswith")) {
        const jval *p = arg(a, 0, NULL);
        if (!p) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s needs an argument", m);
        return jv_bool(prefix_match(r, pos, s, *p, m[0] == 'e'));
    }
    if (name_is(m, "replace"))
        return st_replace(r, s, arg_str(r, pos, a, 0, NULL), arg_str(r, pos, a, 1, NULL), arg_int(r, pos, a, 2, "count", -1));
    if (name_is(m, "lower") || name_is(m, "casefold")) return st_map(r, s, ST_LOWER);
    if (name_is(m, "upper")) return st_map(r, s, ST_UPPER);
    if (name_is(m, "title")) return st_map(r, s, ST_TITLE);
    if (name_is(m, "capitalize")) return st_map(r, s, ST_CAPITALIZE);
    if (name_is(m, "swapcase")) return st_map(r, s, ST_SWAP);
    if (name_is(m, "find") || name_is(m, "rfind") || name_is(m, "index") || name_is(m, "rindex")) {
        jstr sub = arg_str(r, pos, a, 0, NULL);
        size_t k = m[0] == 'r' ? st_rfind(s, sub) : st_find(s, sub, 0);
        if (k == SIZE_MAX && (name_is(m, "index") || name_is(m, "rindex"))) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "substring not found");
        return jv_int(k == SIZE_MAX ? -1 : (int64_t)st_char_index(s, k));
    }
    if (name_is(m, "count")) {
        jstr sub = arg_str(r, pos, a, 0, NULL);
        if (!sub.n) return jv_int((int64_t)st_len(s) + 1);
        int64_t k = 0;
        for (size_t i = st_find(s, sub, 0); i != SIZE_MAX; i = st_find(s, sub, i + sub.n)) k++;
        return jv_int(k);
    }
    if (name_is(m, "format")) return str_format(r, pos, s, a);
    if (name_is(m, "join")) {
        const jval *it = arg(a, 0, NULL);
        if (!it) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "join needs an argument");
        jlist *l = fl_iter(r, pos, *it);
        for (size_t i = 0; i < l->n; i++)
            if (l->v[i].t != JV_STR)
                jr_fail(r, pos, SLM_ERR_INVALID_ARG, "sequence item %zu: expected str instance, %s found", i, jv_typename(l->v[i]));
        return join(r, pos, l, s, NULL);
    }
    if (!strncmp(m, "is", 2)) {
        bool all = s.n > 0, any_cased = false;
        for (size_t i = 0; i < s.n;) {
            size_t l;
            uint32_t c = st_cp(s, i, &l);
            i += l;
            bool digit = c >= '0' && c <= '9', alpha = (c | 32) >= 'a' && (c | 32) <= 'z';
            alpha = alpha || (c >= 0x80 && (st_case(c, true) != c || st_case(c, false) != c));
            bool ok = true;
            if (name_is(m, "isdigit") || name_is(m, "isnumeric") || name_is(m, "isdecimal")) ok = digit;
            else if (name_is(m, "isalpha")) ok = alpha;
            else if (name_is(m, "isalnum")) ok = alpha || digit;
            else if (name_is(m, "isspace")) ok = st_isspace(c);
            else if (name_is(m, "isupper") || name_is(m, "islower")) {
                bool cased = st_case(c, true) != c || st_case(c, false) != c;
                any_cased |= cased;
                ok = !cased || st_case(c, name_is(m, "isupper")) == c;
            }
            all = all && ok;
        }
        if (name_is(m, "isupper") || name_is(m, "islower")) all = all && any_cased;
        return jv_bool(all);
    }
    if (name_is(m, "splitlines")) {
        jlist *l = jl_new(&r->ar, 0);
        size_t i = 0;
        while (i < s.n) {
            size_t j = i;
            while (j < s.n && s.p[j] != '\n' && s.p[j] != '\r') j++;
            jl_push(&r->ar, l, sval(js_sub(r, s, i, j - i)));
            if (j + 1 < s.n && s.p[j] == '\r' && s.p[j + 1] == '\n') j++;
            i = j + 1;
        }
        return lval(l);
    }
    if (name_is(m, "center") || name_is(m, "ljust") || name_is(m, "rjust") || name_is(m, "zfill")) {
        int64_t w = arg_int(r, pos, a, 0, NULL, 0), len = (int64_t)st_len(s);
        if (w > (int64_t)r->max_output) w = (int64_t)r->max_output;
        const char *fill = name_is(m, "zfill") ? "0" : " ";
        int64_t pad = w > len ? w - len : 0;
        int64_t left = name_is(m, "ljust") ? 0 : name_is(m, "center") ? pad / 2 + (pad & w & 1) : pad;
        jsb b;
        sb_init(&b);
        for (int64_t i = 0; i < left; i++) sb_puts(r, &b, fill);
        sb_put_str(r, &b, s);
        for (int64_t i = 0; i < pad - left; i++) sb_puts(r, &b, fill);
        return sval(sb_str(r, &b));
    }
    if (name_is(m, "partition") || name_is(m, "rpartition")) {
        jstr sep = arg_str(r, pos, a, 0, NULL);
        if (!sep.n) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "empty separator");
        size_t k = m[0] == 'r' ? st_rfind(s, sep) : st_find(s, sep, 0);
        jlist *l = jl_new(&r->ar, 3);
        l->tuple = true;
        if (k == SIZE_MAX) {
            jval e = jv_str("", 0);
            jl_push(&r->ar, l, m[0] == 'r' ? e : sval(s));
            jl_push(&r->ar, l, e);
            jl_push(&r->ar, l, m[0] == 'r' ? sval(s) : e);
        } else {
            jl_push(&r->ar, l, sval(js_sub(r, s, 0, k)));
            jl_push(&r->ar, l, sval(js_sub(r, s, k, sep.n)));
            jl_push(&r->ar, l, sval(js_sub(r, s, k + sep.n, s.n - k - sep.n)));
        }
        return lval(l);
    }
    if (name_is(m, "removeprefix") || name_is(m, "removesuffix")) {
        jstr p = arg_str(r, pos, a, 0, NULL);
        bool suf = m[6] == 's';
        if (p.n <= s.n && !memcmp(suf ? s.p + s.n - p.n : s.p, p.p, p.n))
            return sval(js_sub(r, s, suf ? 0 : p.n, s.n - p.n));
        return sval(s);
    }
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'str' object has no attribute '%s'", m);
}

jval fl_call_builtin(jrender *r, uint32_t pos, jfunc *fn, const jargs *a) {
    const char *m = fn->name;
    if (fn->kind == FN_METHOD) {
        jval self = fn->self;
        if (self.t == JV_STR) return str_method(r, pos, m, self.u.s, a);
        if (self.t == JV_DICT) {
            jdict *d = self.u.d;
            if (name_is(m, "get")) {
                const jval *k = arg(a, 0, NULL), *dv = arg(a, 1, NULL);
                if (!k) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "get expected at least 1 argument, got 0");
                jval *v = jd_get(d, *k);
                return v ? *v : dv ? *dv : jv_none();
            }
            if (name_is(m, "items")) return items_of(r, d);
            if (name_is(m, "keys") || name_is(m, "values")) {
                jlist *l = jl_new(&r->ar, d->n);
                for (size_t i = 0; i < d->n; i++) jl_push(&r->ar, l, m[0] == 'k' ? d->k[i] : d->v[i]);
                return lval(l);
            }
            if (name_is(m, "copy")) {
                jdict *c = jd_new(&r->ar, d->n);
                for (size_t i = 0; i < d->n; i++) jd_set(&r->ar, c, d->k[i], d->v[i]);
                return (jval){.t = JV_DICT, .u.d = c};
            }
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "access to attribute '%s' of 'dict' object is unsafe.", m);
        }
        if (self.t == JV_LIST) {
            jlist *l = self.u.l;
            if (name_is(m, "index") || name_is(m, "count")) {
                const jval *x = arg(a, 0, NULL);
                if (!x) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s needs an argument", m);
                int64_t c = 0;
                for (size_t i = 0; i < l->n; i++)
                    if (jv_eq(l->v[i], *x)) {
                        if (m[0] == 'i') return jv_int((int64_t)i);
                        c++;
                    }
                if (m[0] == 'i') jr_fail(r, pos, SLM_ERR_INVALID_ARG, "value is not in list");
                return jv_int(c);
            }
            if (name_is(m, "copy")) return fl_filter(r, pos, "list", self, &(jargs){0});
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "access to attribute '%s' of '%s' object is unsafe.", m,
                    l->tuple ? "tuple" : "list");
        }
        if (self.t == JV_LOOP && name_is(m, "cycle")) {
            if (!a->n) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no items for cycling given");
            return a->v[self.u.loop->i % a->n];
        }
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' is not callable", m);
    }
    if (name_is(m, "raise_exception")) {
        const jval *msg = arg(a, 0, "message");
        jstr s = msg ? jv_tostr(r, *msg) : (jstr){.p = "", .n = 0};
        err_set(r->ar.e, SLM_ERR_INVALID_ARG, "%.*s", (int)(s.n > 400 ? 400 : s.n), s.p);
        longjmp(r->jb, 1);
    }
    if (name_is(m, "strftime_now")) {
        jstr f = arg_str(r, pos, a, 0, NULL);
        char *fmt = ja_strndup(&r->ar, f.p, f.n), out[512];
        time_t t = r->fixed_time ? (time_t)r->fixed_time : time(NULL);
        struct tm tm;
        if (r->fixed_time) gmtime_r(&t, &tm);
        else localtime_r(&t, &tm);
        size_t n = fmt[0] ? strftime(out, sizeof out, fmt, &tm) : 0;
        return sval((jstr){.p = ja_strndup(&r->ar, out, n), .n = n});
    }
    if (name_is(m, "range")) {
        int64_t start = 0, stop, step = 1;
        if (a->n == 1) stop = arg_int(r, pos, a, 0, NULL, 0);
        else if (a->n == 2 || a->n == 3) {
            start = arg_int(r, pos, a, 0, NULL, 0);
            stop = arg_int(r, pos, a, 1, NULL, 0);
            step = arg_int(r, pos, a, 2, NULL, 1);
        } else jr_fail(r, pos, SLM_ERR_INVALID_ARG, "range expected 1 to 3 arguments, got %zu", a->n);
        if (step == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "range() arg 3 must not be zero");
        double cnt = ceil(((double)stop - (double)start) / (double)step);
        if (cnt > MAX_RANGE) jr_fail(r, pos, SLM_ERR_RANGE, "jinja: range too big (more than %d items)", MAX_RANGE);
        jlist *l = jl_new(&r->ar, cnt > 0 ? (size_t)cnt : 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jl_push(&r->ar, l, jv_int(i));
        return lval(l);
    }
    if (name_is(m, "dict") || name_is(m, "namespace")) {
        jdict *d = jd_new(&r->ar, a->nkw);
        if (a->n > 1) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s expected at most 1 positional argument", m);
        if (a->n == 1) {
            jval src = a->v[0];
            if (src.t == JV_DICT || src.t == JV_NS) {
                for (size_t i = 0; i < src.u.d->n; i++) jd_set(&r->ar, d, src.u.d->k[i], src.u.d->v[i]);
            } else {
                jlist *l = fl_iter(r, pos, src);
                for (size_t i = 0; i < l->n; i++) {
                    jlist *p = fl_iter(r, pos, l->v[i]);
                    if (p->n != 2) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "dictionary update sequence element has length %zu; 2 is required", p->n);
                    jd_set(&r->ar, d, p->v[0], p->v[1]);
                }
            }
        }
        for (size_t k = 0; k < a->nkw; k++) jd_set(&r->ar, d, jv_strz(a->kwn[k]), a->kwv[k]);
        return (jval){.t = m[0] == 'd' ? JV_DICT : JV_NS, .u.d = d};
    }
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' is not callable", m);
}

void fl_globals(jrender *r, jscope *g) {
    static const char *const names[] = {"raise_exception", "strftime_now", "range", "dict", "namespace", NULL};
    for (size_t i = 0; names[i]; i++) {
        jfunc *f = ja_alloc(&r->ar, sizeof *f);
        *f = (jfunc){.kind = FN_BUILTIN, .name = names[i]};
        sc_set(r, g, names[i], (jval){.t = JV_FUNC, .u.fn = f});
    }
}
