/* parse.c — tokens to the syntax tree (jinja_int.h, "syntax tree"), with jinja2's grammar and
 * precedence: conditional < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary,
 * then postfix (.attr, [item], [a:b:c], call) and filters/tests. Statements: if/elif/else, for
 * (targets, "if" filter, else), set (names, tuples, ns.attr, block set), macro, call, filter,
 * break/continue, generation (transformers' extension: renders its body). Nesting is bounded. */
#include <string.h>

#include "text/jinja/jinja_int.h"

typedef struct jparser {
    jarena *ar;
    const char *src;
    size_t n;
    const jtok *t;
    size_t nt, i;
    int depth;
    int loops; /* enclosing for loops (break/continue) */
} jparser;

#define MAX_NEST 200

#define FAIL(pos, ...) lex_fail(p->ar, p->src, p->n, (uint32_t)(pos), SLM_ERR_FORMAT, __VA_ARGS__)

static const jtok *cur(jparser *p) { return &p->t[p->i]; }
static const jtok *next(jparser *p) {
    const jtok *t = &p->t[p->i];
    if (t->type != TK_EOF) p->i++;
    return t;
}
static bool is_op(jparser *p, int op) { return cur(p)->type == TK_OP && cur(p)->op == op; }
static bool is_name(jparser *p, const char *w) {
    const jtok *t = cur(p);
    return t->type == TK_NAME && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}
static bool accept_op(jparser *p, int op) {
    if (!is_op(p, op)) return false;
    p->i++;
    return true;
}
static bool accept_name(jparser *p, const char *w) {
    if (!is_name(p, w)) return false;
    p->i++;
    return true;
}
static const char *tokdesc(const jtok *t) {
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "text";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_NAME: return "a name";
    case TK_STR: return "a string";
    case TK_INT: case TK_FLOAT: return "a number";
    default: return "an operator";
    }
}
static void expect_op(jparser *p, int op) {
    if (!accept_op(p, op)) {
        if (op < 256) FAIL(cur(p)->pos, "expected '%c', got %s", op, tokdesc(cur(p)));
        FAIL(cur(p)->pos, "expected an operator, got %s", tokdesc(cur(p)));
    }
}
static void expect_type(jparser *p, int type, const char *what) {
    if (cur(p)->type != type) FAIL(cur(p)->pos, "expected %s, got %s", what, tokdesc(cur(p)));
    p->i++;
}
static const char *name_str(jparser *p, const jtok *t) { return ja_strndup(p->ar, t->s, t->n); }

static jnode *mk(jparser *p, jkind k, uint32_t pos) {
    jnode *n = ja_alloc(p->ar, sizeof *n);
    n->k = k;
    n->pos = pos;
    return n;
}

typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;
static void nv_push(jparser *p, nvec *v, jnode *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        v->v = ja_grow(p->ar, v->v, v->n * sizeof *v->v, cap * sizeof *v->v);
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static jnode *expr(jparser *p);
static jnode *expr_noternary(jparser *p);
static jnode *unary(jparser *p, bool with_filter);
static jnode *primary(jparser *p);
static jnode *postfix(jparser *p, jnode *n);

static void enter(jparser *p) {
    if (++p->depth > MAX_NEST) FAIL(cur(p)->pos, "nesting deeper than %d", MAX_NEST);
}

/* Call arguments after '(' up to ')': positional then name=value. */
static void call_args(jparser *p, jnode *n) {
    nvec v = {0};
    bool kw = false;
    while (!accept_op(p, ')')) {
        if (v.n && !accept_op(p, ',')) FAIL(cur(p)->pos, "expected ',' or ')' in the arguments");
        if (accept_op(p, ')')) break;
        if (is_op(p, '*')) FAIL(cur(p)->pos, "*args and **kwargs in a call are not supported");
        if (cur(p)->type == TK_NAME && p->t[p->i + 1].type == TK_OP && p->t[p->i + 1].op == '=') {
            jnode *k = mk(p, E_KWARG, cur(p)->pos);
            k->s = name_str(p, next(p));
            next(p);
            k->a = expr(p);
            nv_push(p, &v, k);
            kw = true;
        } else {
            if (kw) FAIL(cur(p)->pos, "a positional argument after a keyword argument");
            nv_push(p, &v, expr(p));
        }
    }
    n->v = v.v;
    n->nv = v.n;
}
/* A call of n: '(' arguments ')'. */
static jnode *call(jparser *p, jnode *n) {
    jnode *c = mk(p, E_CALL, next(p)->pos);
    c->a = n;
    call_args(p, c);
    return c;
}

static jnode *filter(jparser *p, jnode *operand) {
    uint32_t pos = cur(p)->pos;
    if (cur(p)->type != TK_NAME) FAIL(pos, "expected a filter name, got %s", tokdesc(cur(p)));
    const jtok *t = next(p);
    jnode *f = mk(p, E_FILTER, pos);
    f->s = name_str(p, t);
    while (accept_op(p, '.')) {
        if (cur(p)->type != TK_NAME) FAIL(cur(p)->pos, "expected a name after '.'");
        next(p);
    }
    f->a = operand;
    if (accept_op(p, '(')) call_args(p, f);
    return f;
}

static jnode *filter_expr(jparser *p, jnode *n) {
    for (;;) {
        if (accept_op(p, '|')) {
            n = filter(p, n);
        } else if (is_name(p, "is")) {
            uint32_t pos = next(p)->pos;
            jnode *t = mk(p, E_TEST, pos);
            t->op = accept_name(p, "not");
            if (cur(p)->type != TK_NAME) FAIL(cur(p)->pos, "expected a test name, got %s", tokdesc(cur(p)));
            t->s = name_str(p, next(p));
            t->a = n;
            const jtok *c = cur(p);
            if (accept_op(p, '(')) {
                call_args(p, t);
            } else if ((c->type == TK_NAME || c->type == TK_STR || c->type == TK_INT || c->type == TK_FLOAT ||
                        is_op(p, '[') || is_op(p, '{')) &&
                       !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
                if (is_name(p, "is")) FAIL(c->pos, "tests cannot be chained with 'is'");
                jnode *arg = postfix(p, primary(p));
                t->v = ja_alloc(p->ar, sizeof *t->v);
                t->v[0] = arg;
                t->nv = 1;
            }
            n = t;
        } else if (is_op(p, '(')) {
            n = call(p, n);
        } else {
            return n;
        }
    }
}

static jnode *postfix(jparser *p, jnode *n) {
    for (;;) {
        if (is_op(p, '.')) {
            uint32_t pos = next(p)->pos;
            const jtok *t = next(p);
            if (t->type == TK_NAME) {
                jnode *a = mk(p, E_ATTR, pos);
                a->a = n;
                a->s = name_str(p, t);
                a->sn = t->n;
                n = a;
            } else if (t->type == TK_INT) {
                jnode *a = mk(p, E_ITEM, pos);
                a->a = n;
                a->b = mk(p, E_LIT, pos);
                a->b->lit = jv_int(t->i);
                n = a;
            } else {
                FAIL(t->pos, "expected a name after '.', got %s", tokdesc(t));
            }
        } else if (is_op(p, '[')) {
            uint32_t pos = next(p)->pos;
            jnode *idx[3] = {0};
            int nc = 0;
            for (;;) {
                if (!is_op(p, ':') && !is_op(p, ']')) idx[nc] = expr(p);
                if (nc < 2 && accept_op(p, ':')) {
                    nc++;
                    continue;
                }
                break;
            }
            if (nc == 0 && idx[0] && is_op(p, ',')) { /* x[a, b]: a tuple key */
                nvec v = {0};
                nv_push(p, &v, idx[0]);
                while (accept_op(p, ',') && !is_op(p, ']')) nv_push(p, &v, expr(p));
                idx[0] = mk(p, E_TUPLE, pos);
                idx[0]->v = v.v;
                idx[0]->nv = v.n;
            }
            expect_op(p, ']');
            jnode *a;
            if (nc == 0) {
                if (!idx[0]) FAIL(pos, "expected an index");
                a = mk(p, E_ITEM, pos);
                a->b = idx[0];
            } else {
                a = mk(p, E_SLICE, pos);
                a->b = idx[0];
                a->c = idx[1];
                a->d = idx[2];
            }
            a->a = n;
            n = a;
        } else if (is_op(p, '(')) {
            n = call(p, n);
        } else {
            return n;
        }
    }
}

static jnode *seq(jparser *p, jkind k, int close, uint32_t pos) {
    jnode *n = mk(p, k, pos);
    nvec v = {0};
    while (!accept_op(p, close)) {
        if (v.n && !accept_op(p, ',')) FAIL(cur(p)->pos, "expected ',' or '%c', got %s", close, tokdesc(cur(p)));
        if (accept_op(p, close)) break;
        if (k == E_DICT) {
            nv_push(p, &v, expr(p));
            expect_op(p, ':');
        }
        nv_push(p, &v, expr(p));
    }
    n->v = v.v;
    n->nv = v.n;
    return n;
}

static jnode *primary(jparser *p) {
    const jtok *t = cur(p);
    jnode *n;
    enter(p);
    if (t->type == TK_NAME) {
        next(p);
        n = mk(p, E_LIT, t->pos);
        static const char *const lits[] = {"true", "True", "false", "False", "none", "None"};
        int which = -1;
        for (int k = 0; k < 6; k++)
            if (t->n == strlen(lits[k]) && !memcmp(t->s, lits[k], t->n)) which = k;
        if (which >= 4) n->lit = jv_none();
        else if (which >= 0) n->lit = jv_bool(which < 2);
        else {
            n->k = E_NAME;
            n->s = name_str(p, t);
        }
    } else if (t->type == TK_STR) {
        next(p);
        n = mk(p, E_LIT, t->pos);
        if (cur(p)->type != TK_STR) {
            n->lit = jv_str(t->s, t->n);
        } else { /* adjacent literals concatenate */
            size_t total = 0;
            for (size_t k = p->i - 1; p->t[k].type == TK_STR; k++) total += p->t[k].n;
            char *s = ja_alloc(p->ar, total + 1);
            size_t o = 0;
            memcpy(s, t->s, t->n);
            o = t->n;
            while (cur(p)->type == TK_STR) {
                const jtok *u = next(p);
                memcpy(s + o, u->s, u->n);
                o += u->n;
            }
            n->lit = jv_str(s, o);
        }
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        next(p);
        n = mk(p, E_LIT, t->pos);
        n->lit = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
    } else if (is_op(p, '(')) {
        next(p);
        if (accept_op(p, ')')) {
            n = mk(p, E_TUPLE, t->pos);
        } else {
            jnode *first = expr(p);
            if (is_op(p, ',')) {
                nvec v = {0};
                nv_push(p, &v, first);
                while (accept_op(p, ',')) {
                    if (is_op(p, ')')) break;
                    nv_push(p, &v, expr(p));
                }
                n = mk(p, E_TUPLE, t->pos);
                n->v = v.v;
                n->nv = v.n;
            } else {
                n = first;
            }
            expect_op(p, ')');
        }
    } else if (is_op(p, '[')) {
        next(p);
        n = seq(p, E_LIST, ']', t->pos);
    } else if (is_op(p, '{')) {
        next(p);
        n = seq(p, E_DICT, '}', t->pos);
    } else {
        FAIL(t->pos, "unexpected %s", tokdesc(t));
    }
    p->depth--;
    return n;
}

static jnode *unary(jparser *p, bool with_filter) {
    jnode *n;
    enter(p);
    if (is_op(p, '-') || is_op(p, '+')) {
        const jtok *t = next(p);
        n = mk(p, t->op == '-' ? E_NEG : E_POS, t->pos);
        n->a = unary(p, false);
    } else {
        n = primary(p);
    }
    n = postfix(p, n);
    if (with_filter) n = filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *bin(jparser *p, jnode *a, int op, uint32_t pos, jnode *b) {
    jnode *n = mk(p, E_BIN, pos);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *powx(jparser *p) {
    jnode *n = unary(p, true);
    while (is_op(p, OP_POW)) {
        uint32_t pos = next(p)->pos;
        n = bin(p, n, OP_POW, pos, unary(p, true));
    }
    return n;
}
static jnode *math2(jparser *p) {
    jnode *n = powx(p);
    while (is_op(p, '*') || is_op(p, '/') || is_op(p, OP_FLOORDIV) || is_op(p, '%')) {
        const jtok *t = next(p);
        n = bin(p, n, t->op, t->pos, powx(p));
    }
    return n;
}
static jnode *concat(jparser *p) {
    jnode *n = math2(p);
    while (is_op(p, '~')) {
        uint32_t pos = next(p)->pos;
        n = bin(p, n, '~', pos, math2(p));
    }
    return n;
}
static jnode *math1(jparser *p) {
    jnode *n = concat(p);
    while (is_op(p, '+') || is_op(p, '-')) {
        const jtok *t = next(p);
        n = bin(p, n, t->op, t->pos, concat(p));
    }
    return n;
}

static jnode *compare(jparser *p) {
    jnode *first = math1(p);
    nvec v = {0};
    int ops[64];
    size_t nops = 0;
    uint32_t pos = cur(p)->pos;
    for (;;) {
        int op = 0;
        const jtok *t = cur(p);
        if (t->type == TK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == '<' || t->op == '>' ||
                                 t->op == OP_LE || t->op == OP_GE)) {
            op = t->op;
            next(p);
        } else if (accept_name(p, "in")) {
            op = CMP_IN;
        } else if (is_name(p, "not") && p->t[p->i + 1].type == TK_NAME && p->t[p->i + 1].n == 2 &&
                   !memcmp(p->t[p->i + 1].s, "in", 2)) {
            p->i += 2;
            op = CMP_NOTIN;
        } else {
            break;
        }
        if (nops == 64) FAIL(t->pos, "comparison chain too long");
        if (!v.n) nv_push(p, &v, first);
        ops[nops++] = op;
        nv_push(p, &v, math1(p));
    }
    if (!nops) return first;
    jnode *n = mk(p, E_CMP, pos);
    n->v = v.v;
    n->nv = v.n;
    n->ops = ja_alloc(p->ar, nops * sizeof *n->ops);
    memcpy(n->ops, ops, nops * sizeof *ops);
    return n;
}
static jnode *notx(jparser *p) {
    if (is_name(p, "not")) {
        enter(p);
        jnode *n = mk(p, E_NOT, next(p)->pos);
        n->a = notx(p);
        p->depth--;
        return n;
    }
    return compare(p);
}
/* sub (word sub)*, grouped from the left into nodes of kind k: "and", "or". */
static jnode *chain(jparser *p, const char *word, jkind k, jnode *(*sub)(jparser *)) {
    jnode *n = sub(p);
    while (is_name(p, word)) {
        jnode *m = mk(p, k, next(p)->pos);
        m->a = n;
        m->b = sub(p);
        n = m;
    }
    return n;
}
static jnode *andx(jparser *p) { return chain(p, "and", E_AND, notx); }
static jnode *orx(jparser *p) { return chain(p, "or", E_OR, andx); }
static jnode *expr_noternary(jparser *p) { return orx(p); }
static jnode *expr(jparser *p) {
    enter(p);
    jnode *n = orx(p);
    while (is_name(p, "if")) {
        jnode *c = mk(p, E_COND, next(p)->pos);
        c->b = n;
        c->a = orx(p);
        if (accept_name(p, "else")) c->c = expr(p);
        n = c;
    }
    p->depth--;
    return n;
}

/* expr or an implicit tuple "a, b"; names_only: assignment targets (names, or ns.attr if attr). */
static jnode *tuple(jparser *p, bool target, bool attr_ok) {
    uint32_t pos = cur(p)->pos;
    nvec v = {0};
    for (;;) {
        jnode *n;
        if (target) {
            if (is_op(p, '(')) {
                next(p);
                n = tuple(p, true, false);
                expect_op(p, ')');
            } else {
                const jtok *t = cur(p);
                expect_type(p, TK_NAME, "a name");
                n = mk(p, E_NAME, t->pos);
                n->s = name_str(p, t);
                if (attr_ok && is_op(p, '.')) {
                    next(p);
                    const jtok *u = cur(p);
                    expect_type(p, TK_NAME, "an attribute name");
                    jnode *a = mk(p, E_ATTR, u->pos);
                    a->a = n;
                    a->s = name_str(p, u);
                    a->sn = u->n;
                    n = a;
                }
            }
        } else {
            n = expr(p);
        }
        nv_push(p, &v, n);
        if (!accept_op(p, ',')) break;
        if (cur(p)->type == TK_VAR_END || cur(p)->type == TK_BLOCK_END || is_op(p, '=') || is_op(p, ')') ||
            is_name(p, "in"))
            break;
    }
    if (v.n == 1 && !(p->t[p->i - 1].type == TK_OP && p->t[p->i - 1].op == ',')) return v.v[0];
    jnode *n = mk(p, E_TUPLE, pos);
    n->v = v.v;
    n->nv = v.n;
    return n;
}

static void block_end(jparser *p) { expect_type(p, TK_BLOCK_END, "'%}'"); }

/* Statements up to a "{% end... %}" (or elif/else) whose name is in ends (NULL-terminated);
 * the parser is left after that name. *which gets its index. */
static jnode *body(jparser *p, const char *const *ends, int *which, uint32_t open);

static jnode *filter_chain(jparser *p) {
    jnode *f = filter(p, NULL);
    while (accept_op(p, '|')) f = filter(p, f);
    return f;
}

static jnode *stmt(jparser *p) {
    const jtok *bt = next(p); /* '{%' */
    const jtok *t = cur(p);
    if (t->type != TK_NAME) FAIL(t->pos, "expected a statement name, got %s", tokdesc(t));
    int w;
    enter(p);
    jnode *n;
    if (accept_name(p, "if")) {
        n = mk(p, S_IF, t->pos);
        n->a = expr_noternary(p); /* jinja2: no conditional expression as an if's test */
        block_end(p);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        jnode *cur_if = n;
        for (;;) {
            cur_if->b = body(p, ends, &w, bt->pos);
            if (w == 0) {
                jnode *e = mk(p, S_IF, p->t[p->i - 1].pos);
                e->a = expr_noternary(p);
                block_end(p);
                cur_if->c = e;
                cur_if = e;
            } else if (w == 1) {
                block_end(p);
                static const char *const ends2[] = {"endif", NULL};
                cur_if->c = body(p, ends2, &w, bt->pos);
                block_end(p);
                break;
            } else {
                block_end(p);
                break;
            }
        }
    } else if (accept_name(p, "for")) {
        n = mk(p, S_FOR, t->pos);
        n->a = tuple(p, true, false);
        if (!accept_name(p, "in")) FAIL(cur(p)->pos, "expected 'in' in a for statement");
        n->b = expr_noternary(p);
        if (is_op(p, ',')) FAIL(cur(p)->pos, "a tuple to iterate needs parentheses");
        if (accept_name(p, "if")) n->c = expr(p);
        if (accept_name(p, "recursive")) FAIL(t->pos, "recursive loops are not supported");
        block_end(p);
        static const char *const ends[] = {"else", "endfor", NULL};
        p->loops++;
        n->d = body(p, ends, &w, bt->pos);
        p->loops--;
        block_end(p);
        if (w == 0) {
            static const char *const ends2[] = {"endfor", NULL};
            n->e = body(p, ends2, &w, bt->pos);
            block_end(p);
        }
    } else if (accept_name(p, "set")) {
        jnode *target = tuple(p, true, true);
        if (accept_op(p, '=')) {
            n = mk(p, S_SET, t->pos);
            n->a = target;
            n->b = tuple(p, false, false);
            block_end(p);
        } else {
            if (target->k != E_NAME && target->k != E_ATTR) FAIL(t->pos, "a block set assigns one name");
            n = mk(p, S_SETBLOCK, t->pos);
            n->a = target;
            if (accept_op(p, '|')) n->c = filter_chain(p);
            block_end(p);
            static const char *const ends[] = {"endset", NULL};
            n->b = body(p, ends, &w, bt->pos);
            block_end(p);
        }
    } else if (accept_name(p, "macro") || accept_name(p, "call")) {
        bool call = t->n == 4;
        n = mk(p, call ? S_CALLBLOCK : S_MACRO, t->pos);
        if (!call) {
            const jtok *nm = cur(p);
            expect_type(p, TK_NAME, "a macro name");
            n->s = name_str(p, nm);
        }
        nvec v = {0};
        if (accept_op(p, '(')) {
            while (!accept_op(p, ')')) {
                if (v.n) expect_op(p, ',');
                if (accept_op(p, ')')) break;
                const jtok *a = cur(p);
                expect_type(p, TK_NAME, "a parameter name");
                jnode *pn = mk(p, E_NAME, a->pos);
                pn->s = name_str(p, a);
                if (accept_op(p, '=')) {
                    pn->k = E_KWARG;
                    pn->a = expr(p);
                }
                nv_push(p, &v, pn);
            }
        } else if (!call) {
            FAIL(cur(p)->pos, "expected '(' after the macro name");
        }
        n->v = v.v;
        n->nv = v.n;
        if (call) {
            n->a = expr(p);
            if (n->a->k != E_CALL) FAIL(n->a->pos, "a call block needs a call expression");
        }
        block_end(p);
        int loops = p->loops;
        p->loops = 0;
        static const char *const mends[] = {"endmacro", NULL}, *const cends[] = {"endcall", NULL};
        n->b = body(p, call ? cends : mends, &w, bt->pos);
        p->loops = loops;
        if (!call && cur(p)->type == TK_NAME) next(p); /* {% endmacro name %} */
        block_end(p);
    } else if (accept_name(p, "filter")) {
        n = mk(p, S_FILTERBLOCK, t->pos);
        n->c = filter_chain(p);
        block_end(p);
        static const char *const ends[] = {"endfilter", NULL};
        n->b = body(p, ends, &w, bt->pos);
        block_end(p);
    } else if (accept_name(p, "generation")) {
        block_end(p);
        static const char *const ends[] = {"endgeneration", NULL};
        n = body(p, ends, &w, bt->pos);
        block_end(p);
    } else if (accept_name(p, "break") || accept_name(p, "continue")) {
        if (!p->loops) FAIL(t->pos, "'%.*s' outside a loop", (int)t->n, t->s);
        n = mk(p, t->n == 5 ? S_BREAK : S_CONTINUE, t->pos);
        block_end(p);
    } else {
        FAIL(t->pos, "unknown or misplaced statement '%.*s'", (int)t->n, t->s);
    }
    p->depth--;
    return n;
}

static jnode *body(jparser *p, const char *const *ends, int *which, uint32_t open) {
    jnode *b = mk(p, S_BODY, cur(p)->pos);
    nvec v = {0};
    for (;;) {
        const jtok *t = cur(p);
        if (t->type == TK_EOF) {
            if (!ends) break;
            FAIL(open, "block not closed: expected '{%% %s %%}'", ends[0]);
        }
        if (t->type == TK_TEXT) {
            jnode *x = mk(p, S_TEXT, t->pos);
            x->s = t->s;
            x->sn = t->n;
            nv_push(p, &v, x);
            next(p);
        } else if (t->type == TK_VAR_BEGIN) {
            next(p);
            jnode *x = mk(p, S_OUT, t->pos);
            x->a = tuple(p, false, false);
            expect_type(p, TK_VAR_END, "'}}'");
            nv_push(p, &v, x);
        } else if (t->type == TK_BLOCK_BEGIN) {
            const jtok *nm = &p->t[p->i + 1];
            if (ends && nm->type == TK_NAME) {
                bool hit = false;
                for (int k = 0; ends[k]; k++)
                    if (nm->n == strlen(ends[k]) && !memcmp(nm->s, ends[k], nm->n)) {
                        *which = k;
                        hit = true;
                    }
                if (hit) {
                    p->i += 2;
                    break;
                }
            }
            if (nm->type == TK_NAME && nm->n >= 3 &&
                (!memcmp(nm->s, "end", 3) || (nm->n == 4 && !memcmp(nm->s, "else", 4)) ||
                 (nm->n == 4 && !memcmp(nm->s, "elif", 4))))
                FAIL(nm->pos, "unexpected '%.*s'%s%s", (int)nm->n, nm->s, ends ? ", expected " : "",
                     ends ? ends[0] : "");
            nv_push(p, &v, stmt(p));
        } else {
            FAIL(t->pos, "unexpected %s", tokdesc(t));
        }
    }
    b->v = v.v;
    b->nv = v.n;
    return b;
}

jnode *parse_template(jarena *ar, const char *src, size_t n, const jtok *t, size_t nt) {
    jparser p = {.ar = ar, .src = src, .n = n, .t = t, .nt = nt};
    int w = 0;
    return body(&p, NULL, &w, 0);
}
