/* lookup.c — what a value offers a template: attribute and item lookup in jinja2's order (dict:
 * method, then key; [key]: key, then method; missing: undefined), the loop object, iteration, the
 * tests (is defined, is string, ...), and the argument helpers the filters and methods share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"
#include "text/jinja/strs.h"

_Noreturn void fl_fail_undef(jrender *r, uint32_t pos, jval v) {
    if (v.name) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' is undefined", v.name);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "a value is undefined");
}

/* Argument i (positional) or the keyword name; NULL when absent. */
const jval *fl_arg(const jargs *a, size_t i, const char *name) {
    if (i < a->n) return &a->v[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return &a->kwv[k];
    return NULL;
}
bool fl_arg_bool(const jargs *a, size_t i, const char *name, bool dflt) {
    const jval *v = fl_arg(a, i, name);
    return v ? jv_truthy(*v) : dflt;
}
int64_t fl_arg_int(jrender *r, uint32_t pos, const jargs *a, size_t i, const char *name, int64_t dflt) {
    const jval *v = fl_arg(a, i, name);
    if (!v || v->t == JV_NONE) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "expected an integer argument%s%s, got %s", name ? " " : "", name ? name : "",
            jv_typename(*v));
}
jstr fl_arg_str(jrender *r, uint32_t pos, const jargs *a, size_t i, const char *name) {
    const jval *v = fl_arg(a, i, name);
    if (!v) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "missing argument %s", name ? name : "");
    if (v->t != JV_STR) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "expected a string argument, got %s", jv_typename(*v));
    return v->u.s;
}
jstr fl_need_str(jrender *r, uint32_t pos, jval x, const char *what) {
    if (x.t == JV_STR) return x.u.s;
    if (x.t == JV_UNDEF) fl_fail_undef(r, pos, x);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s needs a string, got %s", what, jv_typename(x));
}

jlist *fl_iter(jrender *r, uint32_t pos, jval v) {
    switch (v.t) {
    case JV_LIST:
        if (v.u.l->poison) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s", v.u.l->poison);
        return v.u.l;
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
            pys_cp(v.u.s, i, &n);
            jl_push(&r->ar, l, jv_of_str(js_sub(r, v.u.s, i, n)));
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

const char *fl_find_name(const char *const *names, const char *s, size_t n) {
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return names[i];
    return NULL;
}

static const char *const k_str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "lower", "upper", "title",
    "capitalize", "swapcase", "casefold", "find", "rfind", "index", "rindex", "count", "format", "join", "isdigit",
    "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "splitlines", "center", "ljust",
    "rjust", "zfill", "partition", "rpartition", "removeprefix", "removesuffix", NULL};
const char *const fl_dict_methods[] = {"get", "items", "keys", "values", "copy", "pop", "popitem", "update",
                                             "setdefault", "clear", NULL};
static const char *const k_list_methods[] = {"index", "count", "copy", "append", "pop", "extend", "insert", "remove",
                                             "reverse", "sort", "clear", NULL};

jval fl_getattr(jrender *r, uint32_t pos, jval x, const char *name, size_t n) {
    const char *m;
    switch (x.t) {
    case JV_UNDEF: fl_fail_undef(r, pos, x);
    case JV_DICT:
        if ((m = fl_find_name(fl_dict_methods, name, n))) return method(r, x, m);
        /* fall through */
    case JV_NS: {
        jval *v = jd_gets(x.u.d, name, n);
        return v ? *v : jv_undef(ja_strndup(&r->ar, name, n));
    }
    case JV_STR:
        if ((m = fl_find_name(k_str_methods, name, n))) return method(r, x, m);
        break;
    case JV_LIST:
        if ((m = fl_find_name(k_list_methods, name, n))) return method(r, x, m);
        break;
    case JV_LOOP: {
        jloop *l = x.u.loop;
        size_t len = l->items->n, i = l->i;
        char k[16];
        snprintf(k, sizeof k, "%.*s", (int)(n < 15 ? n : 15), name);
        if (fl_is(k, "index")) return jv_int((int64_t)i + 1);
        if (fl_is(k, "index0")) return jv_int((int64_t)i);
        if (fl_is(k, "revindex")) return jv_int((int64_t)(len - i));
        if (fl_is(k, "revindex0")) return jv_int((int64_t)(len - i - 1));
        if (fl_is(k, "first")) return jv_bool(i == 0);
        if (fl_is(k, "last")) return jv_bool(i + 1 == len);
        if (fl_is(k, "length")) return jv_int((int64_t)len);
        if (fl_is(k, "depth")) return jv_int(1);
        if (fl_is(k, "depth0")) return jv_int(0);
        if (fl_is(k, "previtem")) return i > 0 ? l->items->v[i - 1] : jv_undef("previtem");
        if (fl_is(k, "nextitem")) return i + 1 < len ? l->items->v[i + 1] : jv_undef("nextitem");
        if (fl_is(k, "cycle")) return method(r, x, "cycle");
        break;
    }
    default: break;
    }
    return jv_undef(ja_strndup(&r->ar, name, n));
}

jval fl_getitem(jrender *r, uint32_t pos, jval x, jval key) {
    switch (x.t) {
    case JV_UNDEF: fl_fail_undef(r, pos, x);
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

bool fl_has_test(const char *name) { return fl_find_name(k_tests, name, strlen(name)) != NULL; }

static const jval *need_arg(jrender *r, uint32_t pos, const jargs *a, const char *what) {
    const jval *v = fl_arg(a, 0, NULL);
    if (!v) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "test '%s' needs an argument", what);
    return v;
}

/* Tests that take no argument besides the value. */
static const char *const k_unary_tests[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "sequence", "iterable",
    "boolean", "true", "false", "even", "odd", "callable", "escaped", "lower", "upper", "filter", "test", NULL};

bool fl_test(jrender *r, uint32_t pos, const char *t, jval x, const jargs *a) {
    if (!fl_has_test(t)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no test named '%s'", t);
    if ((a->n || a->nkw) && fl_find_name(k_unary_tests, t, strlen(t)))
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "test '%s' takes 1 positional argument but %zu were given", t, 1 + a->n + a->nkw);
    if (fl_is(t, "defined")) return x.t != JV_UNDEF;
    if (fl_is(t, "undefined")) return x.t == JV_UNDEF;
    if (fl_is(t, "none")) return x.t == JV_NONE;
    if (fl_is(t, "string")) return x.t == JV_STR;
    if (fl_is(t, "number")) return jv_is_num(x);
    if (fl_is(t, "integer")) return x.t == JV_INT;
    if (fl_is(t, "float")) return x.t == JV_FLOAT;
    if (fl_is(t, "mapping")) return x.t == JV_DICT;
    if (fl_is(t, "sequence")) return x.t == JV_STR || (x.t == JV_LIST && !x.u.l->iter) || x.t == JV_DICT || x.t == JV_UNDEF;
    if (fl_is(t, "iterable")) return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF;
    if (fl_is(t, "boolean")) return x.t == JV_BOOL;
    if (fl_is(t, "true")) return x.t == JV_BOOL && x.u.b;
    if (fl_is(t, "false")) return x.t == JV_BOOL && !x.u.b;
    if (fl_is(t, "callable")) return x.t == JV_FUNC;
    if (fl_is(t, "escaped")) return false;
    if (fl_is(t, "filter") || fl_is(t, "test")) {
        if (x.t != JV_STR) return false;
        char *s = ja_strndup(&r->ar, x.u.s.p, x.u.s.n);
        return fl_is(t, "filter") ? fl_has_filter(s) : fl_has_test(s);
    }
    if (fl_is(t, "lower") || fl_is(t, "upper")) { /* str(value).islower() */
        jstr s = jv_tostr(r, x);
        bool any = false;
        for (size_t i = 0; i < s.n;) {
            size_t l;
            uint32_t c = pys_cp(s, i, &l);
            i += l;
            if (pys_case(c, true) == c && pys_case(c, false) == c) continue;
            any = true;
            if (pys_case(c, fl_is(t, "upper")) != c) return false;
        }
        return any;
    }
    if (fl_is(t, "even") || fl_is(t, "odd")) { /* value % 2 == 0 / == 1, Python's modulo */
        if (!jv_is_num(x)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "unsupported operand type(s) for %%: '%s' and 'int'", jv_typename(x));
        double m = x.t == JV_FLOAT ? fmod(x.u.f, 2.0) : (double)((x.t == JV_INT ? x.u.i : x.u.b) % 2);
        if (m < 0) m += 2;
        return fl_is(t, "even") ? m == 0 : m == 1;
    }
    if (fl_is(t, "divisibleby")) {
        const jval *d = need_arg(r, pos, a, t);
        if (!jv_is_num(x) || !jv_is_num(*d)) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "divisibleby needs numbers");
        double y = jv_num(*d);
        if (y == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "integer division or modulo by zero");
        return fmod(jv_num(x), y) == 0;
    }
    const jval *o = need_arg(r, pos, a, t);
    if (fl_is(t, "eq") || fl_is(t, "equalto") || fl_is(t, "==")) return jv_eq(x, *o);
    if (fl_is(t, "ne") || fl_is(t, "!=")) return !jv_eq(x, *o);
    if (fl_is(t, "sameas")) {
        if (x.t != o->t) return false;
        if (x.t == JV_NONE || x.t == JV_UNDEF) return true;
        if (x.t == JV_BOOL) return x.u.b == o->u.b;
        if (x.t == JV_INT) return x.u.i == o->u.i && x.u.i >= -5 && x.u.i <= 256;
        if (x.t == JV_LIST) return x.u.l == o->u.l;
        if (x.t == JV_DICT || x.t == JV_NS) return x.u.d == o->u.d;
        if (x.t == JV_STR) return x.u.s.p == o->u.s.p && x.u.s.n == o->u.s.n;
        return jv_eq(x, *o);
    }
    if (fl_is(t, "in")) {
        jval c = *o;
        if (c.t == JV_STR) {
            jstr s = fl_need_str(r, pos, x, "in");
            return pys_find(c.u.s, s, 0) != SIZE_MAX;
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
    if (fl_is(t, "lt") || fl_is(t, "<") || fl_is(t, "lessthan")) return c < 0;
    if (fl_is(t, "gt") || fl_is(t, ">") || fl_is(t, "greaterthan")) return c > 0;
    if (fl_is(t, "le") || fl_is(t, "<=")) return c <= 0;
    return c >= 0;
}
