/* methods.c — Python's str, dict and list methods as transformers' immutable sandbox allows them
 * (mutating ones fail as jinja2's SecurityError does), and the globals: raise_exception and
 * strftime_now as transformers defines them, jinja2's range (sandbox-limited), dict, namespace. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"
#include "text/jinja/strs.h"

#define MAX_RANGE 100000 /* jinja2's sandbox limit */

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
            v = fl_arg(a, auto_i++, NULL);
        } else if (field.p[0] >= '0' && field.p[0] <= '9') {
            size_t k = 0;
            for (size_t q = 0; q < field.n && k < 1000000; q++) k = k * 10 + (size_t)(field.p[q] - '0');
            v = fl_arg(a, k, NULL);
        } else {
            for (size_t k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == field.n && !memcmp(a->kwn[k], field.p, field.n)) v = &a->kwv[k];
        }
        if (!v) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "format: no argument for '{%.*s}'", (int)field.n, field.p);
        if (rep) jv_repr(r, &b, *v, 0);
        else jv_print(r, &b, *v);
        i = j;
    }
    return jv_of_str(sb_str(r, &b));
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
    if (fl_is(m, "strip") || fl_is(m, "lstrip") || fl_is(m, "rstrip")) {
        const jval *c = fl_arg(a, 0, NULL);
        jstr chars = c && c->t == JV_STR ? c->u.s : (jstr){0};
        return pys_strip(r, s, c && c->t == JV_STR ? &chars : NULL, m[0] != 'r', m[0] != 'l');
    }
    if (fl_is(m, "split") || fl_is(m, "rsplit")) {
        const jval *sep = fl_arg(a, 0, "sep");
        jstr sp = sep && sep->t == JV_STR ? sep->u.s : (jstr){0};
        return pys_split(r, s, sep && sep->t == JV_STR ? &sp : NULL, fl_arg_int(r, pos, a, 1, "maxsplit", -1), m[0] == 'r');
    }
    if (fl_is(m, "startswith") || fl_is(m, "endswith")) {
        const jval *p = fl_arg(a, 0, NULL);
        if (!p) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s needs an argument", m);
        return jv_bool(prefix_match(r, pos, s, *p, m[0] == 'e'));
    }
    if (fl_is(m, "replace"))
        return pys_replace(r, s, fl_arg_str(r, pos, a, 0, NULL), fl_arg_str(r, pos, a, 1, NULL), fl_arg_int(r, pos, a, 2, "count", -1));
    if (fl_is(m, "lower") || fl_is(m, "casefold")) return pys_map(r, s, PYS_LOWER);
    if (fl_is(m, "upper")) return pys_map(r, s, PYS_UPPER);
    if (fl_is(m, "title")) return pys_map(r, s, PYS_TITLE);
    if (fl_is(m, "capitalize")) return pys_map(r, s, PYS_CAPITALIZE);
    if (fl_is(m, "swapcase")) return pys_map(r, s, PYS_SWAP);
    if (fl_is(m, "find") || fl_is(m, "rfind") || fl_is(m, "index") || fl_is(m, "rindex")) {
        jstr sub = fl_arg_str(r, pos, a, 0, NULL);
        size_t k = m[0] == 'r' ? pys_rfind(s, sub) : pys_find(s, sub, 0);
        if (k == SIZE_MAX && (fl_is(m, "index") || fl_is(m, "rindex"))) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "substring not found");
        return jv_int(k == SIZE_MAX ? -1 : (int64_t)pys_char_index(s, k));
    }
    if (fl_is(m, "count")) {
        jstr sub = fl_arg_str(r, pos, a, 0, NULL);
        if (!sub.n) return jv_int((int64_t)pys_len(s) + 1);
        int64_t k = 0;
        for (size_t i = pys_find(s, sub, 0); i != SIZE_MAX; i = pys_find(s, sub, i + sub.n)) k++;
        return jv_int(k);
    }
    if (fl_is(m, "format")) return str_format(r, pos, s, a);
    if (fl_is(m, "join")) {
        const jval *it = fl_arg(a, 0, NULL);
        if (!it) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "join needs an argument");
        jlist *l = fl_iter(r, pos, *it);
        for (size_t i = 0; i < l->n; i++)
            if (l->v[i].t != JV_STR)
                jr_fail(r, pos, SLM_ERR_INVALID_ARG, "sequence item %zu: expected str instance, %s found", i, jv_typename(l->v[i]));
        return fl_join(r, pos, l, s, NULL);
    }
    if (!strncmp(m, "is", 2)) {
        bool all = s.n > 0, any_cased = false;
        for (size_t i = 0; i < s.n;) {
            size_t l;
            uint32_t c = pys_cp(s, i, &l);
            i += l;
            bool digit = c >= '0' && c <= '9', alpha = (c | 32) >= 'a' && (c | 32) <= 'z';
            alpha = alpha || (c >= 0x80 && (pys_case(c, true) != c || pys_case(c, false) != c));
            bool ok = true;
            if (fl_is(m, "isdigit") || fl_is(m, "isnumeric") || fl_is(m, "isdecimal")) ok = digit;
            else if (fl_is(m, "isalpha")) ok = alpha;
            else if (fl_is(m, "isalnum")) ok = alpha || digit;
            else if (fl_is(m, "isspace")) ok = pys_isspace(c);
            else if (fl_is(m, "isupper") || fl_is(m, "islower")) {
                bool cased = pys_case(c, true) != c || pys_case(c, false) != c;
                any_cased |= cased;
                ok = !cased || pys_case(c, fl_is(m, "isupper")) == c;
            }
            all = all && ok;
        }
        if (fl_is(m, "isupper") || fl_is(m, "islower")) all = all && any_cased;
        return jv_bool(all);
    }
    if (fl_is(m, "splitlines")) {
        jlist *l = jl_new(&r->ar, 0);
        size_t i = 0;
        while (i < s.n) {
            size_t j = i;
            while (j < s.n && s.p[j] != '\n' && s.p[j] != '\r') j++;
            jl_push(&r->ar, l, jv_of_str(js_sub(r, s, i, j - i)));
            if (j + 1 < s.n && s.p[j] == '\r' && s.p[j + 1] == '\n') j++;
            i = j + 1;
        }
        return jv_of_list(l);
    }
    if (fl_is(m, "center") || fl_is(m, "ljust") || fl_is(m, "rjust") || fl_is(m, "zfill")) {
        int64_t w = fl_arg_int(r, pos, a, 0, NULL, 0), len = (int64_t)pys_len(s);
        if (w > (int64_t)r->max_output) w = (int64_t)r->max_output;
        const char *fill = fl_is(m, "zfill") ? "0" : " ";
        int64_t pad = w > len ? w - len : 0;
        int64_t left = fl_is(m, "ljust") ? 0 : fl_is(m, "center") ? pad / 2 + (pad & w & 1) : pad;
        jsb b;
        sb_init(&b);
        for (int64_t i = 0; i < left; i++) sb_puts(r, &b, fill);
        sb_put_str(r, &b, s);
        for (int64_t i = 0; i < pad - left; i++) sb_puts(r, &b, fill);
        return jv_of_str(sb_str(r, &b));
    }
    if (fl_is(m, "partition") || fl_is(m, "rpartition")) {
        jstr sep = fl_arg_str(r, pos, a, 0, NULL);
        if (!sep.n) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "empty separator");
        size_t k = m[0] == 'r' ? pys_rfind(s, sep) : pys_find(s, sep, 0);
        jlist *l = jl_new(&r->ar, 3);
        l->tuple = true;
        if (k == SIZE_MAX) {
            jval e = jv_str("", 0);
            jl_push(&r->ar, l, m[0] == 'r' ? e : jv_of_str(s));
            jl_push(&r->ar, l, e);
            jl_push(&r->ar, l, m[0] == 'r' ? jv_of_str(s) : e);
        } else {
            jl_push(&r->ar, l, jv_of_str(js_sub(r, s, 0, k)));
            jl_push(&r->ar, l, jv_of_str(js_sub(r, s, k, sep.n)));
            jl_push(&r->ar, l, jv_of_str(js_sub(r, s, k + sep.n, s.n - k - sep.n)));
        }
        return jv_of_list(l);
    }
    if (fl_is(m, "removeprefix") || fl_is(m, "removesuffix")) {
        jstr p = fl_arg_str(r, pos, a, 0, NULL);
        bool suf = m[6] == 's';
        if (p.n <= s.n && !memcmp(suf ? s.p + s.n - p.n : s.p, p.p, p.n))
            return jv_of_str(js_sub(r, s, suf ? 0 : p.n, s.n - p.n));
        return jv_of_str(s);
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
            if (fl_is(m, "get")) {
                const jval *k = fl_arg(a, 0, NULL), *dv = fl_arg(a, 1, NULL);
                if (!k) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "get expected at least 1 argument, got 0");
                jval *v = jd_get(d, *k);
                return v ? *v : dv ? *dv : jv_none();
            }
            if (fl_is(m, "items")) return fl_items_of(r, d);
            if (fl_is(m, "keys") || fl_is(m, "values")) {
                jlist *l = jl_new(&r->ar, d->n);
                for (size_t i = 0; i < d->n; i++) jl_push(&r->ar, l, m[0] == 'k' ? d->k[i] : d->v[i]);
                return jv_of_list(l);
            }
            if (fl_is(m, "copy")) {
                jdict *c = jd_new(&r->ar, d->n);
                for (size_t i = 0; i < d->n; i++) jd_set(&r->ar, c, d->k[i], d->v[i]);
                return (jval){.t = JV_DICT, .u.d = c};
            }
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "access to attribute '%s' of 'dict' object is unsafe.", m);
        }
        if (self.t == JV_LIST) {
            jlist *l = self.u.l;
            if (fl_is(m, "index") || fl_is(m, "count")) {
                const jval *x = fl_arg(a, 0, NULL);
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
            if (fl_is(m, "copy")) return fl_filter(r, pos, "list", self, &(jargs){0});
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "access to attribute '%s' of '%s' object is unsafe.", m,
                    l->tuple ? "tuple" : "list");
        }
        if (self.t == JV_LOOP && fl_is(m, "cycle")) {
            if (!a->n) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "no items for cycling given");
            return a->v[self.u.loop->i % a->n];
        }
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' is not callable", m);
    }
    if (fl_is(m, "raise_exception")) {
        const jval *msg = fl_arg(a, 0, "message");
        jstr s = msg ? jv_tostr(r, *msg) : (jstr){.p = "", .n = 0};
        err_set(r->ar.e, SLM_ERR_INVALID_ARG, "%.*s", (int)(s.n > 400 ? 400 : s.n), s.p);
        longjmp(r->jb, 1);
    }
    if (fl_is(m, "strftime_now")) {
        jstr f = fl_arg_str(r, pos, a, 0, NULL);
        char *fmt = ja_strndup(&r->ar, f.p, f.n), out[512];
        time_t t = r->fixed_time ? (time_t)r->fixed_time : time(NULL);
        struct tm tm;
        if (r->fixed_time) gmtime_r(&t, &tm);
        else localtime_r(&t, &tm);
        size_t n = fmt[0] ? strftime(out, sizeof out, fmt, &tm) : 0;
        return jv_of_str((jstr){.p = ja_strndup(&r->ar, out, n), .n = n});
    }
    if (fl_is(m, "range")) {
        int64_t start = 0, stop, step = 1;
        if (a->n == 1) stop = fl_arg_int(r, pos, a, 0, NULL, 0);
        else if (a->n == 2 || a->n == 3) {
            start = fl_arg_int(r, pos, a, 0, NULL, 0);
            stop = fl_arg_int(r, pos, a, 1, NULL, 0);
            step = fl_arg_int(r, pos, a, 2, NULL, 1);
        } else jr_fail(r, pos, SLM_ERR_INVALID_ARG, "range expected 1 to 3 arguments, got %zu", a->n);
        if (step == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "range() arg 3 must not be zero");
        double cnt = ceil(((double)stop - (double)start) / (double)step);
        if (cnt > MAX_RANGE) jr_fail(r, pos, SLM_ERR_RANGE, "jinja: range too big (more than %d items)", MAX_RANGE);
        jlist *l = jl_new(&r->ar, cnt > 0 ? (size_t)cnt : 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jl_push(&r->ar, l, jv_int(i));
        return jv_of_list(l);
    }
    if (fl_is(m, "dict") || fl_is(m, "namespace")) {
        jdict *d = jd_new(&r->ar, a->nkw);
        if (a->n > 1) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "%s expected at most 1 positional argument", m);
        if (a->n == 1) {
            jval src = a->v[0];
            if (src.t == JV_DICT || src.t == JV_NS) {
                for (size_t i = 0; i < src.u.d->n; i++) {
                    jr_charge(r, pos, d->n);
                    jd_set(&r->ar, d, src.u.d->k[i], src.u.d->v[i]);
                }
            } else {
                jlist *l = fl_iter(r, pos, src);
                for (size_t i = 0; i < l->n; i++) {
                    jlist *p = fl_iter(r, pos, l->v[i]);
                    if (p->n != 2) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "dictionary update sequence element has length %zu; 2 is required", p->n);
                    jr_charge(r, pos, d->n);
                    jd_set(&r->ar, d, p->v[0], p->v[1]);
                }
            }
        }
        for (size_t k = 0; k < a->nkw; k++) {
            jr_charge(r, pos, d->n);
            jd_set(&r->ar, d, jv_strz(a->kwn[k]), a->kwv[k]);
        }
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
