/* jinja_int.h — internals of the Jinja interpreter (text/jinja.h): the arena every parse and
 * render allocates from, the lexer's tokens, the syntax tree, values with provenance, and the
 * evaluator's state. Errors unwind with longjmp to jinja_parse / jinja_render, which free the arena:
 * nothing inside holds a resource outside its arena, so no path needs its own cleanup.
 *
 * Files: lex.c (source -> tokens, whitespace control), parse.c (tokens -> tree), value.c (values,
 * strings with provenance segments, str()/repr/tojson, comparisons), eval.c (statements and
 * expressions), lookup.c (attributes, items, tests), filters.c (filters), methods.c (str/dict/list
 * methods, globals), strs.c (Python str operations). */
#ifndef SLM_TEXT_JINJA_INT_H
#define SLM_TEXT_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <string.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "text/jinja.h"

/* ---- arena: bump allocation in chunks, all freed at once; limit bounds the total. ---- */
typedef struct ja_chunk ja_chunk;
typedef struct jarena {
    const slm_allocator *a;
    ja_chunk *head;
    size_t total, limit; /* bytes taken from a; limit 0 = none */
    jmp_buf *fail;       /* where an exhausted arena unwinds to */
    slm_err *e;
} jarena;

void ja_init(jarena *ar, const slm_allocator *a, size_t limit, jmp_buf *fail, slm_err *e);
void ja_free(jarena *ar);
void *ja_alloc(jarena *ar, size_t n);   /* zeroed, 16-byte aligned; unwinds on failure */
void *ja_grow(jarena *ar, void *p, size_t old_n, size_t new_n); /* copy into a larger block */
char *ja_strndup(jarena *ar, const char *s, size_t n);

/* ---- tokens ---- */
enum {
    TK_EOF, TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STR, TK_INT, TK_FLOAT, TK_OP,
};
/* Operators (TK_OP's op): single characters are their own code; two-character ones below. */
enum { OP_FLOORDIV = 256, OP_POW, OP_EQ, OP_NE, OP_LE, OP_GE, CMP_IN = 512, CMP_NOTIN };

typedef struct jtok {
    uint8_t type;
    int op;
    uint32_t pos;  /* offset in the normalised source */
    const char *s; /* TK_TEXT / TK_NAME / TK_STR (decoded) bytes */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* ---- values ---- */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_FUNC, JV_LOOP } jtype;

/* Provenance: bytes [off, off+len) of a string come from context data of message msg (-1: other
 * data); whole: they are that message's whole "content" string. Segments are sorted, disjoint. */
typedef struct jseg {
    size_t off, len;
    int64_t msg;
    bool whole;
} jseg;

/* The buffer a built string lives in, with room after it: a string that ends where the used part
 * ends may grow in place (js_concat), so "x = x ~ y" in a loop is amortised linear. Bytes and
 * segments before `used` / `nseg` never change. */
typedef struct jbacking {
    char *p;
    size_t used, cap;
    jseg *segs;
    size_t nseg, segcap;
} jbacking;

typedef struct jstr {
    const char *p;
    size_t n;
    const jseg *segs;
    size_t nseg;
    bool safe;      /* jinja2's Markup (the safe and escape filters): "+" escapes a plain operand */
    jbacking *bk;   /* NULL, or the backing p lies in (see jbacking) */
} jstr;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jval {
    jtype t;
    union {
        bool b;
        int64_t i;
        double f;
        jstr s;
        jlist *l;
        jdict *d; /* JV_DICT and JV_NS */
        jfunc *fn;
        jloop *loop;
    } u;
    const char *name; /* JV_UNDEF: the name that was looked up (messages), may be NULL */
} jval;

struct jlist {
    jval *v;
    size_t n, cap;
    bool tuple;
    bool iter; /* a generator (map, select, items, ... results in jinja2): always true, no len(),
                * no index, not JSON serialisable; iterating and |list work */
    const char *poison; /* a generator made from what it cannot iterate: iterating it fails with
                         * this message (jinja2's generators fail only when consumed) */
};
struct jdict { /* insertion-ordered; keys compare with jv_eq */
    jval *k, *v;
    size_t n, cap;
};

/* ---- syntax tree ---- */
typedef enum {
    E_LIT, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST,
    E_NEG, E_POS, E_NOT, E_AND, E_OR, E_BIN, E_CMP, E_COND, E_KWARG,
    S_BODY, S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK, S_FILTERBLOCK,
    S_BREAK, S_CONTINUE,
} jkind;

/* Fields by kind (unused ones NULL):
 *   E_LIT lit; E_NAME s; E_LIST/E_TUPLE v; E_DICT v = k0,v0,k1,v1...; E_ATTR a.s; E_ITEM a[b];
 *   E_SLICE a[b:c:d]; E_CALL a(v) (v holds E_KWARG for name=value); E_FILTER a|s(v), a NULL in a
 *   filter block (the body's text); E_TEST a is [not if op] s(v); E_NEG/E_POS/E_NOT a;
 *   E_AND/E_OR a b; E_BIN a op b; E_CMP v[0] ops[0] v[1] ops[1] v[2]...; E_COND b if a else c;
 *   S_BODY v; S_TEXT s; S_OUT a; S_IF if a: b else c; S_FOR for a in b if c: d else e;
 *   S_SET a = b; S_SETBLOCK a = body b filtered by c (E_FILTER chain on NULL) ; S_MACRO s(v): b
 *   (v: E_NAME or E_KWARG with default); S_CALLBLOCK call a with caller(v): b;
 *   S_FILTERBLOCK c (E_FILTER chain on NULL) over body b. */
typedef struct jnode jnode;
struct jnode {
    jkind k;
    int op;
    uint32_t pos;
    jnode *a, *b, *c, *d, *e;
    jnode **v;
    size_t nv;
    int *ops;
    const char *s;
    size_t sn;
    jval lit;
};

struct jinja_template {
    jarena ar;
    jmp_buf jb;
    jtok *tokens; /* while parsing: the lexer's token array (heap) */
    const char *src; /* normalised source, for line:column */
    size_t n;
    jnode *root;
};

/* lex.c: tokens of src (normalised by lex_normalise first); unwinds with a FORMAT error. The
 * token array is on the heap (ar->a), not in the arena: it is only needed while parsing, and
 * whoever runs the lexer frees it (al_free(ar->a, *owner)) whether or not parsing unwound. */
typedef struct jlexer {
    jarena *ar;
    const char *src;
    size_t n;
    jtok *t;
    size_t nt, cap;
    jtok **owner; /* kept equal to t as it moves (the caller frees it after an unwind) */
} jlexer;
void lex_normalise(jarena *ar, const char *in, size_t n, const char **out, size_t *n_out);
void lex_run(jlexer *lx);
/* Formats "line:column: " of offset pos in src into out (cap bytes). */
void lex_where(const char *src, size_t n, uint32_t pos, char *out, size_t cap);
_Noreturn void lex_fail(jarena *ar, const char *src, size_t n, uint32_t pos, slm_status st, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* parse.c */
jnode *parse_template(jarena *ar, const char *src, size_t n, const jtok *t, size_t nt);

/* ---- render state ---- */
typedef struct jscope jscope;
struct jscope {
    jscope *parent;
    const char **names;
    jval *vals;
    size_t n, cap;
};

typedef struct jsb { /* string builder with provenance */
    char *p;
    size_t n, cap;
    jseg *segs;
    size_t nseg, segcap;
} jsb;

typedef struct jrender {
    jarena ar;
    jmp_buf jb;
    const jinja_template *t;
    uint64_t steps, max_steps;
    uint32_t depth, max_depth; /* macro calls */
    uint32_t nest;             /* evaluator recursion (bounded by MAX_EVAL_NEST + max_depth) */
    size_t max_output;
    int64_t fixed_time;
    jscope *globals;
    jsb *out; /* the builder statements write to (the output, or a capture) */
    int brk;  /* 1 break, 2 continue pending */
    const jval *caller;
} jrender;

_Noreturn void jr_fail(jrender *r, uint32_t pos, slm_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void jr_step(jrender *r, uint32_t pos);
/* n steps at once: work linear in a value's size (a dict insertion, a list search). */
void jr_charge(jrender *r, uint32_t pos, size_t n);

/* value.c */
jval jv_undef(const char *name);
jval jv_none(void);
jval jv_bool(bool b);
jval jv_int(int64_t i);
jval jv_float(double f);
jval jv_str(const char *p, size_t n); /* template text: no provenance */
jval jv_strz(const char *p);
jlist *jl_new(jarena *ar, size_t cap);
void jl_push(jarena *ar, jlist *l, jval v);
jdict *jd_new(jarena *ar, size_t cap);
jval *jd_get(const jdict *d, jval k);
jval *jd_gets(const jdict *d, const char *k, size_t n);
void jd_set(jarena *ar, jdict *d, jval k, jval v);
bool jv_truthy(jval v);
bool jv_eq(jval a, jval b); /* Python ==; containers nested deeper than 1000 compare unequal */
/* <0, 0, >0; fails on types Python cannot order. */
int jv_cmp(jrender *r, uint32_t pos, jval a, jval b);
const char *jv_typename(jval v);
bool jv_is_num(jval v); /* int, float or bool */
double jv_num(jval v);

void sb_init(jsb *b);
void sb_put(jrender *r, jsb *b, const char *s, size_t n);        /* template text */
void sb_puts(jrender *r, jsb *b, const char *s);
void sb_put_str(jrender *r, jsb *b, jstr s);                       /* keeps s's provenance */
void sb_put_sub(jrender *r, jsb *b, jstr s, size_t off, size_t n); /* part of s, its provenance */
void sb_mark(jrender *r, jsb *b, size_t from, int64_t msg);        /* marks [from, n) data of msg */
jstr sb_str(jrender *r, jsb *b);
/* a + b, each keeping its provenance; in place at the end of a's backing when a ends it. */
jstr js_concat(jrender *r, jstr a, jstr b);
/* The data message of s's first segment, or INT64_MIN when s has no data. */
int64_t js_msg(jstr s);
jstr js_sub(jrender *r, jstr s, size_t off, size_t n);
/* str(v) as jinja2 prints it, into b. */
void jv_print(jrender *r, jsb *b, jval v);
jstr jv_tostr(jrender *r, jval v);
void jv_repr(jrender *r, jsb *b, jval v, uint32_t depth);
void jv_fmt_float(double f, char *out, size_t cap);
/* json.dumps(v, ensure_ascii=ascii, indent, separators, sort_keys); indent NULL = none. */
void jv_tojson(jrender *r, uint32_t pos, jsb *b, jval v, const char *indent, size_t indent_n, const char *item_sep,
               const char *key_sep, bool sort_keys, bool ascii, uint32_t depth);
/* A cJSON tree as a value; strings get provenance when data (msg: the message index for
 * messages[i], -1 otherwise). content: j is the message object itself (or, for a string, its
 * "content"), whose "content" string is marked whole. */
jval jv_from_json(jrender *r, const struct cJSON *j, bool data, int64_t msg, bool content);

/* eval.c */
/* x[lo:hi:st] with Python's rules (strings by characters); NONE/UNDEF bounds are omitted ones. */
jval ev_slice(jrender *r, uint32_t pos, jval x, jval lo, jval hi, jval st);
jval ev_expr(jrender *r, jscope *sc, const jnode *n);
void ev_body(jrender *r, jscope *sc, const jnode *n);
jval ev_call_value(jrender *r, uint32_t pos, jval fn, const jval *args, size_t nargs, const char **kwn,
                   const jval *kwv, size_t nkw);
jscope *sc_new(jrender *r, jscope *parent);
void sc_set(jrender *r, jscope *sc, const char *name, jval v);
jval *sc_find(jscope *sc, const char *name);

/* lookup.c, filters.c, methods.c */
typedef struct jargs {
    const jval *v;
    size_t n;
    const char **kwn;
    const jval *kwv;
    size_t nkw;
} jargs;
jval fl_filter(jrender *r, uint32_t pos, const char *name, jval x, const jargs *a);
bool fl_test(jrender *r, uint32_t pos, const char *name, jval x, const jargs *a);
bool fl_has_test(const char *name);
bool fl_has_filter(const char *name);
/* x.name: a method bound to x, a dict member, a loop member, or undefined. */
jval fl_getattr(jrender *r, uint32_t pos, jval x, const char *name, size_t n);
jval fl_getitem(jrender *r, uint32_t pos, jval x, jval key);
/* Calls a builtin function value (global or bound method). */
jval fl_call_builtin(jrender *r, uint32_t pos, jfunc *fn, const jargs *a);
/* The global functions (range, dict, namespace, raise_exception, strftime_now, ...). */
void fl_globals(jrender *r, jscope *g);
/* Python's printf-style fmt % args (args: a tuple, or one value). */
jval fl_percent(jrender *r, uint32_t pos, jstr fmt, jval args);
/* Iteration: the items of v as a list (dict: keys; string: characters; undefined: empty). */
jlist *fl_iter(jrender *r, uint32_t pos, jval v);

/* Helpers the builtins share (lookup.c). fl_arg: positional argument i, else keyword name (NULL:
 * positional only; i = SIZE_MAX: keyword only), NULL when absent. */
static inline bool fl_is(const char *a, const char *b) { return !strcmp(a, b); }
static inline jval jv_of_str(jstr s) { return (jval){.t = JV_STR, .u.s = s}; }
static inline jval jv_of_list(jlist *l) { return (jval){.t = JV_LIST, .u.l = l}; }
_Noreturn void fl_fail_undef(jrender *r, uint32_t pos, jval v);
const jval *fl_arg(const jargs *a, size_t i, const char *name);
bool fl_arg_bool(const jargs *a, size_t i, const char *name, bool dflt);
int64_t fl_arg_int(jrender *r, uint32_t pos, const jargs *a, size_t i, const char *name, int64_t dflt);
jstr fl_arg_str(jrender *r, uint32_t pos, const jargs *a, size_t i, const char *name);
jstr fl_need_str(jrender *r, uint32_t pos, jval x, const char *what);
/* The entry of the NULL-terminated names equal to s[0, n), or NULL. */
const char *fl_find_name(const char *const *names, const char *s, size_t n);
extern const char *const fl_dict_methods[];
/* d's (key, value) tuples as a list. */
jval fl_items_of(jrender *r, jdict *d);
/* The items (or their attr path) printed and joined by sep. */
jval fl_join(jrender *r, uint32_t pos, jlist *items, jstr sep, const jstr *attr);

typedef enum { FN_BUILTIN, FN_METHOD, FN_MACRO } jfkind;
struct jfunc {
    jfkind kind;
    const char *name;
    jval self;            /* FN_METHOD: the bound object */
    const jnode *macro;   /* FN_MACRO */
    jscope *closure;      /* FN_MACRO: the scope it was defined in */
    const jval *caller;   /* FN_MACRO made for a call block: its caller */
};
struct jloop {
    jlist *items;
    size_t i;
    int64_t depth0;
};

#endif
