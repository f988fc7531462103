/* eval.c — evaluation of the syntax tree (jinja_int.h): expressions with Python semantics
 * (and/or return an operand, chained comparisons, int/float arithmetic with Python's floor division
 * and modulo, str/list concatenation and repetition), statements writing into the current string
 * builder (the output, or a capture for macros, block sets and filter blocks), scopes (each loop
 * iteration and macro call opens one; if does not), macros with caller(). Every node evaluated
 * is a step. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text/jinja/jinja_int.h"

#define MAX_EVAL_NEST 3000

void jr_fail(jrender *r, uint32_t pos, slm_status st, const char *fmt, ...) {
    char msg[SLM_ERR_MSG_CAP], where[48] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (st != SLM_ERR_RANGE) lex_where(r->t->src, r->t->n, pos, where, sizeof where);
    err_set(r->ar.e, st, "%s%s", where, msg);
    longjmp(r->jb, 1);
}

void jr_step(jrender *r, uint32_t pos) {
    if (++r->steps > r->max_steps)
        jr_fail(r, pos, SLM_ERR_RANGE, "jinja: step limit (max_steps %llu) exceeded", (unsigned long long)r->max_steps);
}

void jr_charge(jrender *r, uint32_t pos, size_t n) {
    r->steps += n;
    jr_step(r, pos);
}

jscope *sc_new(jrender *r, jscope *parent) {
    jscope *s = ja_alloc(&r->ar, sizeof *s);
    s->parent = parent;
    return s;
}
jval *sc_find(jscope *sc, const char *name) {
    for (; sc; sc = sc->parent)
        for (size_t i = sc->n; i-- > 0;)
            if (!strcmp(sc->names[i], name)) return &sc->vals[i];
    return NULL;
}
void sc_set(jrender *r, jscope *sc, const char *name, jval v) {
    for (size_t i = 0; i < sc->n; i++)
        if (!strcmp(sc->names[i], name)) {
            sc->vals[i] = v;
            return;
        }
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 4;
        sc->names = ja_grow(&r->ar, sc->names, sc->n * sizeof *sc->names, cap * sizeof *sc->names);
        sc->vals = ja_grow(&r->ar, sc->vals, sc->n * sizeof *sc->vals, cap * sizeof *sc->vals);
        sc->cap = cap;
    }
    sc->names[sc->n] = name;
    sc->vals[sc->n++] = v;
}

static _Noreturn void undefined_error(jrender *r, uint32_t pos, jval v) {
    if (v.name) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' is undefined", v.name);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "a value is undefined");
}

static jval str_val(jstr s) { return (jval){.t = JV_STR, .u.s = s}; }
static jval list_val(jlist *l) { return (jval){.t = JV_LIST, .u.l = l}; }

static void enter(jrender *r, uint32_t pos) {
    if (++r->nest > MAX_EVAL_NEST + r->max_depth)
        jr_fail(r, pos, SLM_ERR_RANGE, "jinja: recursion limit (max_depth %u) exceeded", r->max_depth);
}

/* ---- arithmetic ---- */

static _Noreturn void bad_operands(jrender *r, uint32_t pos, const char *op, jval a, jval b) {
    if (a.t == JV_UNDEF) undefined_error(r, pos, a);
    if (b.t == JV_UNDEF) undefined_error(r, pos, b);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_typename(a),
            jv_typename(b));
}

static int64_t ival(jval v) { return v.t == JV_INT ? v.u.i : (int64_t)v.u.b; }

static jval repeat(jrender *r, uint32_t pos, jval seq, int64_t times) {
    if (times < 0 || (seq.t == JV_STR ? seq.u.s.n : seq.u.l->n) == 0) times = 0;
    if (seq.t == JV_STR) {
        jsb b;
        sb_init(&b);
        if (seq.u.s.n && (uint64_t)times > r->max_output / seq.u.s.n)
            jr_fail(r, pos, SLM_ERR_RANGE, "jinja: output limit (max_output %zu bytes) exceeded", r->max_output);
        for (int64_t i = 0; i < times; i++) sb_put_str(r, &b, seq.u.s);
        return str_val(sb_str(r, &b));
    }
    jlist *src = seq.u.l, *l = jl_new(&r->ar, 0);
    if (src->n && (uint64_t)times > r->max_output / src->n)
        jr_fail(r, pos, SLM_ERR_RANGE, "jinja: output limit (max_output %zu bytes) exceeded", r->max_output);
    l->tuple = src->tuple;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < src->n; k++) jl_push(&r->ar, l, src->v[k]);
    return list_val(l);
}

static jval arith(jrender *r, uint32_t pos, int op, jval a, jval b) {
    static const char *const names[] = {['+'] = "+", ['-'] = "-", ['*'] = "*", ['/'] = "/", ['%'] = "%"};
    const char *opn = op == OP_FLOORDIV ? "//" : op == OP_POW ? "** or pow()" : names[op];
    if (op == '+') {
        if (a.t == JV_STR && b.t == JV_STR) {
            bool safe = a.u.s.safe || b.u.s.safe;
            if (safe && !a.u.s.safe) a = fl_filter(r, pos, "escape", a, &(jargs){0});
            if (safe && !b.u.s.safe) b = fl_filter(r, pos, "escape", b, &(jargs){0});
            jval v = str_val(js_concat(r, a.u.s, b.u.s));
            v.u.s.safe = safe;
            return v;
        }
        if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple && !a.u.l->iter && !b.u.l->iter) {
            jlist *l = jl_new(&r->ar, a.u.l->n + b.u.l->n);
            l->tuple = a.u.l->tuple;
            for (size_t i = 0; i < a.u.l->n; i++) jl_push(&r->ar, l, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) jl_push(&r->ar, l, b.u.l->v[i]);
            return list_val(l);
        }
    }
    if ((a.t == JV_LIST && a.u.l->iter) || (b.t == JV_LIST && b.u.l->iter)) bad_operands(r, pos, opn, a, b);
    if (op == '*') {
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(r, pos, a, ival(b));
        if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(r, pos, b, ival(a));
    }
    if (op == '%' && a.t == JV_STR) return fl_percent(r, pos, a.u.s, b);
    if (!jv_is_num(a) || !jv_is_num(b)) bad_operands(r, pos, opn, a, b);
    if (a.t != JV_FLOAT && b.t != JV_FLOAT && op != '/') {
        int64_t x = ival(a), y = ival(b), z = 0;
        bool ok = true;
        switch (op) {
        case '+': ok = !__builtin_add_overflow(x, y, &z); break;
        case '-': ok = !__builtin_sub_overflow(x, y, &z); break;
        case '*': ok = !__builtin_mul_overflow(x, y, &z); break;
        case '%': case OP_FLOORDIV:
            if (y == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) {
                ok = op == '%';
                z = 0;
                break;
            }
            if (op == '%') {
                z = x % y;
                if (z && ((z < 0) != (y < 0))) z += y;
            } else {
                z = x / y;
                if ((x % y) && ((x < 0) != (y < 0))) z--;
            }
            break;
        case OP_POW:
            if (y < 0 && x == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "0.0 cannot be raised to a negative power");
            if (y < 0) return jv_float(pow((double)x, (double)y));
            z = 1;
            for (int64_t i = 0; i < y && ok; i++) {
                ok = !__builtin_mul_overflow(z, x, &z);
                if (z == 0 || z == 1) break;
                if (z == -1) {
                    z = (y % 2) ? -1 : 1;
                    break;
                }
            }
            break;
        }
        if (!ok) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "integer overflow in %s", opn);
        return jv_int(z);
    }
    double x = jv_num(a), y = jv_num(b);
    switch (op) {
    case '+': return jv_float(x + y);
    case '-': return jv_float(x - y);
    case '*': return jv_float(x * y);
    case '/':
        if (y == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "division by zero");
        return jv_float(x / y);
    case OP_FLOORDIV:
        if (y == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "float floor division by zero");
        return jv_float(floor(x / y));
    case '%': {
        if (y == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "float modulo");
        double m = fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        if (m == 0) m = copysign(0.0, y); /* Python: a zero remainder takes the divisor's sign */
        return jv_float(m);
    }
    default:
        if (x == 0 && y < 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "0.0 cannot be raised to a negative power");
        return jv_float(pow(x, y));
    }
}

static bool contains(jrender *r, uint32_t pos, jval item, jval c) {
    switch (c.t) {
    case JV_STR:
        if (item.t != JV_STR)
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'in <string>' requires string as left operand, not %s", jv_typename(item));
        if (item.u.s.n == 0) return true;
        for (size_t i = 0; i + item.u.s.n <= c.u.s.n; i++)
            if (c.u.s.p[i] == item.u.s.p[0] && !memcmp(c.u.s.p + i, item.u.s.p, item.u.s.n)) return true;
        return false;
    case JV_LIST:
        fl_iter(r, pos, c); /* a poisoned generator fails */
        jr_charge(r, pos, c.u.l->n);
        for (size_t i = 0; i < c.u.l->n; i++)
            if (jv_eq(c.u.l->v[i], item)) return true;
        return false;
    case JV_DICT:
        if ((item.t == JV_LIST && !item.u.l->tuple) || item.t == JV_DICT || item.t == JV_NS)
            jr_fail(r, pos, SLM_ERR_INVALID_ARG, "unhashable type: '%s'", jv_typename(item));
        jr_charge(r, pos, c.u.d->n);
        return jd_get(c.u.d, item) != NULL;
    case JV_UNDEF: return false;
    default: jr_fail(r, pos, SLM_ERR_INVALID_ARG, "argument of type '%s' is not iterable", jv_typename(c));
    }
}

/* ---- slicing (Python: by characters for strings) ---- */

static size_t n_chars(jstr s) {
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) k += ((unsigned char)s.p[i] & 0xC0) != 0x80;
    return k;
}
/* Byte offsets of the characters of s (cp[i], cp[n] = s.n); NULL when s is ASCII. */
static size_t *char_offsets(jrender *r, jstr s, size_t *nc) {
    *nc = n_chars(s);
    if (*nc == s.n) return NULL;
    size_t *o = ja_alloc(&r->ar, (*nc + 1) * sizeof *o), k = 0;
    for (size_t i = 0; i < s.n; i++)
        if (((unsigned char)s.p[i] & 0xC0) != 0x80) o[k++] = i;
    o[k] = s.n;
    return o;
}

static bool slice_arg(jrender *r, uint32_t pos, jval v, int64_t *out) {
    if (v.t == JV_NONE || v.t == JV_UNDEF) return false;
    if (v.t != JV_INT && v.t != JV_BOOL)
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "slice indices must be integers or None, not %s", jv_typename(v));
    *out = ival(v);
    return true;
}

jval ev_slice(jrender *r, uint32_t pos, jval x, jval lo, jval hi, jval st) {
    int64_t step = 1, start, stop, len;
    if (slice_arg(r, pos, st, &step) && step == 0) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "slice step cannot be zero");
    size_t nc = 0, *co = NULL;
    if (x.t == JV_STR) {
        co = char_offsets(r, x.u.s, &nc);
        len = (int64_t)nc;
    } else if (x.t == JV_LIST) {
        if (x.u.l->iter) return jv_undef(NULL);
        len = (int64_t)x.u.l->n;
    } else if (x.t == JV_UNDEF) {
        undefined_error(r, pos, x);
    } else {
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' object is not subscriptable", jv_typename(x));
    }
    int64_t dlo = step < 0 ? len - 1 : 0, dhi = step < 0 ? -1 : len;
    if (slice_arg(r, pos, lo, &start)) {
        if (start < 0) start += len;
        if (start < 0) start = step < 0 ? -1 : 0;
        if (start >= len) start = step < 0 ? len - 1 : len;
    } else {
        start = dlo;
    }
    if (slice_arg(r, pos, hi, &stop)) {
        if (stop < 0) stop += len;
        if (stop < 0) stop = step < 0 ? -1 : 0;
        if (stop >= len) stop = step < 0 ? len - 1 : len;
    } else {
        stop = dhi;
    }
    if (x.t == JV_LIST) {
        jlist *l = jl_new(&r->ar, 0);
        l->tuple = x.u.l->tuple;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jl_push(&r->ar, l, x.u.l->v[i]);
        return list_val(l);
    }
#define OFF(i) (co ? co[i] : (size_t)(i))
    if (step == 1) {
        if (stop <= start) return jv_str("", 0);
        return str_val(js_sub(r, x.u.s, OFF(start), OFF(stop) - OFF(start)));
    }
    jsb b;
    sb_init(&b);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) sb_put(r, &b, x.u.s.p + OFF(i), OFF(i + 1) - OFF(i));
#undef OFF
    if (x.u.s.nseg && b.n) sb_mark(r, &b, 0, js_msg(x.u.s));
    return str_val(sb_str(r, &b));
}

/* ---- calls ---- */

static jstr capture(jrender *r, jscope *sc, const jnode *body) {
    jsb b, *saved = r->out;
    sb_init(&b);
    r->out = &b;
    ev_body(r, sc, body);
    r->out = saved;
    return sb_str(r, &b);
}

static jval call_macro(jrender *r, uint32_t pos, jfunc *fn, const jargs *a) {
    const jnode *m = fn->macro;
    if (++r->depth > r->max_depth)
        jr_fail(r, pos, SLM_ERR_RANGE, "jinja: recursion limit (max_depth %u) exceeded", r->max_depth);
    jscope *sc = sc_new(r, fn->closure);
    if (a->n > m->nv)
        jr_fail(r, pos, SLM_ERR_INVALID_ARG, "macro '%s' takes not more than %zu argument(s)", fn->name, m->nv);
    for (size_t k = 0; k < a->nkw; k++) {
        bool found = false;
        for (size_t i = 0; i < m->nv; i++) found |= !strcmp(m->v[i]->s, a->kwn[k]);
        if (!found) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "macro '%s' takes no keyword argument '%s'", fn->name, a->kwn[k]);
    }
    for (size_t i = 0; i < m->nv; i++) {
        const jnode *p = m->v[i];
        jval v = jv_undef(p->s);
        bool set = false;
        if (i < a->n) {
            v = a->v[i];
            set = true;
        }
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(p->s, a->kwn[k])) {
                if (set) jr_fail(r, pos, SLM_ERR_INVALID_ARG, "macro '%s' got multiple values for argument '%s'", fn->name, p->s);
                v = a->kwv[k];
                set = true;
            }
        if (!set && p->k == E_KWARG) v = ev_expr(r, sc, p->a);
        sc_set(r, sc, p->s, v);
    }
    if (fn->caller) sc_set(r, sc, "caller", *fn->caller);
    int brk = r->brk;
    jstr s = capture(r, sc, m->b);
    r->brk = brk;
    r->depth--;
    return str_val(s);
}

jval ev_call_value(jrender *r, uint32_t pos, jval fn, const jval *args, size_t nargs, const char **kwn,
                   const jval *kwv, size_t nkw) {
    jargs a = {args, nargs, kwn, kwv, nkw};
    if (fn.t == JV_FUNC) {
        if (fn.u.fn->kind == FN_MACRO) return call_macro(r, pos, fn.u.fn, &a);
        return fl_call_builtin(r, pos, fn.u.fn, &a);
    }
    if (fn.t == JV_UNDEF) undefined_error(r, pos, fn);
    jr_fail(r, pos, SLM_ERR_INVALID_ARG, "'%s' object is not callable", jv_typename(fn));
}

static void eval_args(jrender *r, jscope *sc, const jnode *n, jargs *a) {
    jval *v = n->nv ? ja_alloc(&r->ar, n->nv * sizeof *v) : NULL, *kv = NULL;
    const char **kn = NULL;
    size_t np = 0, nk = 0;
    for (size_t i = 0; i < n->nv; i++) {
        if (n->v[i]->k == E_KWARG) {
            if (!kn) {
                kn = ja_alloc(&r->ar, n->nv * sizeof *kn);
                kv = ja_alloc(&r->ar, n->nv * sizeof *kv);
            }
            kn[nk] = n->v[i]->s;
            kv[nk++] = ev_expr(r, sc, n->v[i]->a);
        } else {
            v[np++] = ev_expr(r, sc, n->v[i]);
        }
    }
    *a = (jargs){v, np, kn, kv, nk};
}

static jval ev_call(jrender *r, jscope *sc, const jnode *n, const jval *caller) {
    jval fn = ev_expr(r, sc, n->a);
    jargs a;
    eval_args(r, sc, n, &a);
    if (caller) {
        if (fn.t != JV_FUNC || fn.u.fn->kind != FN_MACRO)
            jr_fail(r, n->pos, SLM_ERR_INVALID_ARG, "a call block must call a macro");
        jfunc *f = ja_alloc(&r->ar, sizeof *f);
        *f = *fn.u.fn;
        f->caller = caller;
        fn.u.fn = f;
    }
    return ev_call_value(r, n->pos, fn, a.v, a.n, a.kwn, a.kwv, a.nkw);
}

static jval ev_filters(jrender *r, jscope *sc, const jnode *n, jval base) {
    jval x = n->a ? (n->a->k == E_FILTER ? ev_filters(r, sc, n->a, base) : ev_expr(r, sc, n->a)) : base;
    jargs a;
    eval_args(r, sc, n, &a);
    jr_step(r, n->pos);
    return fl_filter(r, n->pos, n->s, x, &a);
}

/* ---- expressions ---- */

jval ev_expr(jrender *r, jscope *sc, const jnode *n) {
    jr_step(r, n->pos);
    enter(r, n->pos);
    jval v;
    switch (n->k) {
    case E_LIT: v = n->lit; break;
    case E_NAME: {
        jval *p = sc_find(sc, n->s);
        v = p ? *p : jv_undef(n->s);
        break;
    }
    case E_LIST: case E_TUPLE: {
        jlist *l = jl_new(&r->ar, n->nv);
        l->tuple = n->k == E_TUPLE;
        for (size_t i = 0; i < n->nv; i++) jl_push(&r->ar, l, ev_expr(r, sc, n->v[i]));
        v = list_val(l);
        break;
    }
    case E_DICT: {
        jdict *d = jd_new(&r->ar, n->nv / 2);
        for (size_t i = 0; i + 1 < n->nv; i += 2) {
            jval k = ev_expr(r, sc, n->v[i]);
            if (k.t == JV_LIST && !k.u.l->tuple) jr_fail(r, n->v[i]->pos, SLM_ERR_INVALID_ARG, "unhashable type: 'list'");
            if (k.t == JV_DICT) jr_fail(r, n->v[i]->pos, SLM_ERR_INVALID_ARG, "unhashable type: 'dict'");
            jr_charge(r, n->pos, d->n);
            jd_set(&r->ar, d, k, ev_expr(r, sc, n->v[i + 1]));
        }
        v = (jval){.t = JV_DICT, .u.d = d};
        break;
    }
    case E_ATTR: v = fl_getattr(r, n->pos, ev_expr(r, sc, n->a), n->s, n->sn); break;
    case E_ITEM: {
        jval x = ev_expr(r, sc, n->a);
        v = fl_getitem(r, n->pos, x, ev_expr(r, sc, n->b));
        break;
    }
    case E_SLICE: {
        jval x = ev_expr(r, sc, n->a), none = jv_none();
        jval lo = n->b ? ev_expr(r, sc, n->b) : none, hi = n->c ? ev_expr(r, sc, n->c) : none;
        jval st = n->d ? ev_expr(r, sc, n->d) : none;
        v = ev_slice(r, n->pos, x, lo, hi, st);
        break;
    }
    case E_CALL: v = ev_call(r, sc, n, NULL); break;
    case E_FILTER: v = ev_filters(r, sc, n, jv_undef(NULL)); break;
    case E_TEST: {
        jval x = ev_expr(r, sc, n->a);
        jargs a;
        eval_args(r, sc, n, &a);
        v = jv_bool(fl_test(r, n->pos, n->s, x, &a) != (n->op != 0));
        break;
    }
    case E_NEG: case E_POS: {
        jval x = ev_expr(r, sc, n->a);
        if (x.t == JV_FLOAT) v = jv_float(n->k == E_NEG ? -x.u.f : x.u.f);
        else if (x.t == JV_INT || x.t == JV_BOOL) {
            int64_t i = ival(x);
            if (n->k == E_NEG && i == INT64_MIN) jr_fail(r, n->pos, SLM_ERR_INVALID_ARG, "integer overflow in -");
            v = jv_int(n->k == E_NEG ? -i : i);
        } else if (x.t == JV_UNDEF) {
            undefined_error(r, n->pos, x);
        } else {
            jr_fail(r, n->pos, SLM_ERR_INVALID_ARG, "bad operand type for unary %c: '%s'", n->k == E_NEG ? '-' : '+',
                    jv_typename(x));
        }
        break;
    }
    case E_NOT: v = jv_bool(!jv_truthy(ev_expr(r, sc, n->a))); break;
    case E_AND: {
        jval a = ev_expr(r, sc, n->a);
        v = jv_truthy(a) ? ev_expr(r, sc, n->b) : a;
        break;
    }
    case E_OR: {
        jval a = ev_expr(r, sc, n->a);
        v = jv_truthy(a) ? a : ev_expr(r, sc, n->b);
        break;
    }
    case E_BIN: {
        jval a = ev_expr(r, sc, n->a), b = ev_expr(r, sc, n->b);
        if (n->op == '~') {
            v = str_val(js_concat(r, jv_tostr(r, a), jv_tostr(r, b)));
        } else {
            v = arith(r, n->pos, n->op, a, b);
        }
        break;
    }
    case E_CMP: {
        jval a = ev_expr(r, sc, n->v[0]);
        bool ok = true;
        for (size_t i = 1; i < n->nv && ok; i++) {
            jval b = ev_expr(r, sc, n->v[i]);
            int op = n->ops[i - 1];
            switch (op) {
            case OP_EQ: case OP_NE:
                if (a.t == JV_LIST && b.t == JV_LIST) jr_charge(r, n->pos, a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n);
                ok = jv_eq(a, b) == (op == OP_EQ);
                break;
            case '<': ok = jv_cmp(r, n->pos, a, b) < 0; break;
            case '>': ok = jv_cmp(r, n->pos, a, b) > 0; break;
            case OP_LE: ok = jv_cmp(r, n->pos, a, b) <= 0; break;
            case OP_GE: ok = jv_cmp(r, n->pos, a, b) >= 0; break;
            default: ok = contains(r, n->pos, a, b) == (op == CMP_IN); break;
            }
            a = b;
        }
        v = jv_bool(ok);
        break;
    }
    case E_COND:
        if (jv_truthy(ev_expr(r, sc, n->a))) v = ev_expr(r, sc, n->b);
        else v = n->c ? ev_expr(r, sc, n->c) : jv_undef(NULL);
        break;
    default: jr_fail(r, n->pos, SLM_ERR_INVALID_ARG, "not an expression");
    }
    r->nest--;
    return v;
}

/* ---- statements ---- */

static void assign(jrender *r, jscope *sc, const jnode *t, jval v) {
    if (t->k == E_NAME) {
        sc_set(r, sc, t->s, v);
    } else if (t->k == E_ATTR) {
        jval ns = ev_expr(r, sc, t->a);
        if (ns.t != JV_NS) jr_fail(r, t->pos, SLM_ERR_INVALID_ARG, "cannot assign attribute on non-namespace object");
        jd_set(&r->ar, ns.u.d, jv_str(t->s, t->sn), v);
    } else {
        jlist *items = fl_iter(r, t->pos, v);
        if (items->n != t->nv)
            jr_fail(r, t->pos, SLM_ERR_INVALID_ARG, "%s values to unpack (expected %zu, got %zu)",
                    items->n < t->nv ? "not enough" : "too many", t->nv, items->n);
        for (size_t i = 0; i < t->nv; i++) assign(r, sc, t->v[i], items->v[i]);
    }
}

static void ev_for(jrender *r, jscope *sc, const jnode *n) {
    jlist *items = fl_iter(r, n->pos, ev_expr(r, sc, n->b));
    jscope *ls = sc_new(r, sc);
    if (n->c) {
        jlist *kept = jl_new(&r->ar, items->n);
        for (size_t i = 0; i < items->n; i++) {
            assign(r, ls, n->a, items->v[i]);
            if (jv_truthy(ev_expr(r, ls, n->c))) jl_push(&r->ar, kept, items->v[i]);
        }
        items = kept;
    }
    jloop *lp = ja_alloc(&r->ar, sizeof *lp);
    lp->items = items;
    bool completed = false;
    jscope *it = NULL;
    size_t base = 0;
    for (size_t i = 0; i < items->n; i++) {
        jr_step(r, n->pos);
        /* each iteration its own scope, as jinja2's; one the body added no name to is reused */
        if (!it || it->n != base) it = sc_new(r, sc);
        lp->i = i;
        assign(r, it, n->a, items->v[i]);
        sc_set(r, it, "loop", (jval){.t = JV_LOOP, .u.loop = lp});
        base = it->n;
        ev_body(r, it, n->d);
        if (r->brk == 1) {
            r->brk = 0;
            break;
        }
        completed |= r->brk == 0;
        r->brk = 0;
    }
    /* jinja2 runs the else body unless some iteration ran to its end (a break or continue does
     * not count) */
    if (!completed && n->e) ev_body(r, sc_new(r, sc), n->e);
}

void ev_body(jrender *r, jscope *sc, const jnode *body) {
    enter(r, body->pos);
    for (size_t i = 0; i < body->nv && !r->brk; i++) {
        const jnode *n = body->v[i];
        jr_step(r, n->pos);
        switch (n->k) {
        case S_TEXT: sb_put(r, r->out, n->s, n->sn); break;
        case S_OUT: jv_print(r, r->out, ev_expr(r, sc, n->a)); break;
        case S_IF: {
            const jnode *c = n;
            while (c && c->k == S_IF && !jv_truthy(ev_expr(r, sc, c->a))) c = c->c;
            if (c) ev_body(r, sc, c->k == S_IF ? c->b : c);
            break;
        }
        case S_FOR: ev_for(r, sc, n); break;
        case S_SET: assign(r, sc, n->a, ev_expr(r, sc, n->b)); break;
        case S_SETBLOCK: { /* a block set's and a filter block's bodies have their own scope */
            jval v = str_val(capture(r, sc_new(r, sc), n->b));
            if (n->c) v = ev_filters(r, sc, n->c, v);
            assign(r, sc, n->a, v);
            break;
        }
        case S_MACRO: {
            jfunc *f = ja_alloc(&r->ar, sizeof *f);
            *f = (jfunc){.kind = FN_MACRO, .name = n->s, .macro = n, .closure = sc};
            sc_set(r, sc, n->s, (jval){.t = JV_FUNC, .u.fn = f});
            break;
        }
        case S_CALLBLOCK: {
            jfunc *f = ja_alloc(&r->ar, sizeof *f);
            *f = (jfunc){.kind = FN_MACRO, .name = "caller", .macro = n, .closure = sc};
            jval *cv = ja_alloc(&r->ar, sizeof *cv);
            *cv = (jval){.t = JV_FUNC, .u.fn = f};
            jv_print(r, r->out, ev_call(r, sc, n->a, cv));
            break;
        }
        case S_FILTERBLOCK: jv_print(r, r->out, ev_filters(r, sc, n->c, str_val(capture(r, sc_new(r, sc), n->b)))); break;
        case S_BODY: ev_body(r, sc, n); break;
        case S_BREAK: r->brk = 1; break;
        case S_CONTINUE: r->brk = 2; break;
        default: jr_fail(r, n->pos, SLM_ERR_INVALID_ARG, "not a statement");
        }
    }
    r->nest--;
}
