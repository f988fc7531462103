/* regex.c — ECMAScript regular expressions (JSON Schema `pattern`) -> GBNF rules over the contents
 * of a JSON string (regex.h; the subset is in docs/grammar.md, "Regular expressions (pattern)").
 *
 * Three passes. Parse: the pattern becomes a tree; nodes live in one array, the children of CAT and
 * ALT nodes in a second (contiguous per node), character sets as sorted, merged, disjoint code point
 * ranges in a third. Anchors: the tree is rewritten without them, once for each way the match may
 * sit in the string (at its start or not, at its end or not; anc below), and an unanchored end
 * trims what it makes irrelevant (with any text allowed after it, `a+b*` derives the same strings
 * as `a`). Emit: each of these variants as one GBNF
 * alternative, every character spelled as its canonical JSON escape; repetitions of a nullable
 * operand are rewritten over its non-empty part, so no GBNF repetition is left-recursive.
 *
 * Node constructors normalise as they build: a CAT or ALT holds no EPS/NONE child and no child of
 * its own kind, a set is never empty (NONE instead), NONE (the empty language) appears only as a
 * whole result. Matching is over code points (ECMAScript's `u` semantics; surrogates never occur in
 * a JSON string's decoded value as the grammar spells it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"

#define MAX_CP 0x10FFFFu
#define RX_MAX_PATTERN ((size_t)1 << 16) /* bytes of pattern */
#define RX_MAX_NEST 50                   /* nested groups */
#define RX_MAX_NODES (1 << 20)
#define RX_MAX_ELEMS 100000 /* grammar elements a pattern may expand to (repetitions counted out) */
#define RX_MAX_TEXT ((size_t)256 << 10) /* bytes of GBNF a pattern may produce */

enum { R_SET, R_CAT, R_ALT, R_REP, R_EPS, R_NONE, R_BOL, R_EOL };

typedef struct rnode {
    uint8_t kind, nullable, anch; /* nullable: matches "" wherever it is (an anchor does not); anch: an anchor below */
    int32_t a, n;                 /* SET: ranges rg[a, a + 2n); CAT/ALT: kids[a, a + n); REP: a = operand */
    int32_t min, max;             /* REP: max < 0 = unbounded */
    size_t at;                    /* offset in the pattern (errors) */
} rnode;

typedef struct rx {
    const slm_allocator *al;
    const char *s;
    size_t len, pos;
    rnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *kids, n_kids, cap_kids;
    int32_t *tmp, n_tmp, cap_tmp; /* children being collected (a stack: each user truncates back) */
    uint32_t *rg;
    int32_t n_rg, cap_rg; /* uint32 entries */
    uint32_t *cls;
    int32_t n_cls, cap_cls; /* scratch range pairs of a set being built (uint32 entries) */
    int depth;
    size_t cost; /* grammar elements emitted so far */
    size_t text0; /* out->n before this pattern */
    slm_err *e;
    slm_status st;
    bool failed;
} rx;

/* ---- errors and storage -------------------------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static bool fail(rx *r, slm_status st, size_t at, const char *fmt, ...) {
    if (r->failed) return false;
    r->failed = true;
    r->st = st;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(r->e, st, "regex at offset %zu: %s", at, msg);
    return false;
}

static bool nomem(rx *r) {
    if (!r->failed) err_set(r->e, SLM_ERR_NOMEM, "regex: out of memory");
    if (!r->failed) r->st = SLM_ERR_NOMEM;
    r->failed = true;
    return false;
}

/* Ensures room for `need` elements of `size` bytes in *p (capacity *cap). */
static bool grow(rx *r, void **p, int32_t *cap, int32_t need, size_t size) {
    if (need <= *cap) return true;
    int32_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > INT32_MAX / 2) return nomem(r);
        c *= 2;
    }
    void *np = al_realloc(r->al, *p, (size_t)*cap * size, (size_t)c * size);
    if (!np) return nomem(r);
    *p = np;
    *cap = c;
    return true;
}

static bool push_tmp(rx *r, int32_t v) {
    if (!grow(r, (void **)&r->tmp, &r->cap_tmp, r->n_tmp + 1, sizeof *r->tmp)) return false;
    r->tmp[r->n_tmp++] = v;
    return true;
}

static bool push_cls(rx *r, uint32_t lo, uint32_t hi) {
    if (!grow(r, (void **)&r->cls, &r->cap_cls, r->n_cls + 2, sizeof *r->cls)) return false;
    r->cls[r->n_cls++] = lo;
    r->cls[r->n_cls++] = hi;
    return true;
}

/* ---- nodes --------------------------------------------------------------------------------------- */

static int32_t new_node(rx *r, int kind, size_t at) {
    if (r->failed) return -1;
    if (r->n_nodes >= RX_MAX_NODES) return fail(r, SLM_ERR_RANGE, at, "pattern too large (more than %d nodes)", RX_MAX_NODES), -1;
    if (!grow(r, (void **)&r->nodes, &r->cap_nodes, r->n_nodes + 1, sizeof *r->nodes)) return -1;
    rnode *n = &r->nodes[r->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->nullable = kind == R_EPS; /* an anchor matches the empty string only somewhere: not nullable */
    n->anch = kind == R_BOL || kind == R_EOL;
    n->at = at;
    return r->n_nodes++;
}

static int kind_of(const rx *r, int32_t id) { return r->nodes[id].kind; }

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* A SET node from the scratch ranges cls[0, n_cls) (complemented within [0, MAX_CP] when neg);
 * clears the scratch. NONE when the set is empty. */
static int32_t mk_set_from_cls(rx *r, bool neg, size_t at) {
    if (r->failed) return -1;
    int32_t n = r->n_cls / 2;
    uint32_t *p = r->cls;
    if (n) qsort(p, (size_t)n, 2 * sizeof *p, cmp_pair);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && (uint64_t)p[2 * i] <= (uint64_t)p[2 * m - 1] + 1) {
            if (p[2 * i + 1] > p[2 * m - 1]) p[2 * m - 1] = p[2 * i + 1];
        } else {
            p[2 * m] = p[2 * i];
            p[2 * m + 1] = p[2 * i + 1];
            m++;
        }
    }
    int32_t base = r->n_rg;
    if (!grow(r, (void **)&r->rg, &r->cap_rg, r->n_rg + 2 * m + 4, sizeof *r->rg)) return -1;
    if (!neg) {
        if (m) memcpy(r->rg + base, p, (size_t)m * 2 * sizeof *p);
        r->n_rg += 2 * m;
    } else {
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (p[2 * i] > next) {
                r->rg[r->n_rg++] = next;
                r->rg[r->n_rg++] = p[2 * i] - 1;
            }
            next = p[2 * i + 1] + 1;
        }
        if (next <= MAX_CP) {
            r->rg[r->n_rg++] = next;
            r->rg[r->n_rg++] = MAX_CP;
        }
    }
    /* drop the surrogates (a range spanning them splits in two: room for it was reserved) */
    for (int32_t i = base; i < r->n_rg; i += 2) {
        uint32_t lo = r->rg[i], hi = r->rg[i + 1];
        if (lo > 0xDFFF || hi < 0xD800) continue;
        if (lo < 0xD800 && hi > 0xDFFF) {
            memmove(r->rg + i + 2, r->rg + i, (size_t)(r->n_rg - i) * sizeof *r->rg);
            r->n_rg += 2;
            r->rg[i + 1] = 0xD7FF;
            r->rg[i + 2] = 0xE000;
        } else if (lo < 0xD800) r->rg[i + 1] = 0xD7FF;
        else if (hi > 0xDFFF) r->rg[i] = 0xE000;
        else {
            memmove(r->rg + i, r->rg + i + 2, (size_t)(r->n_rg - i - 2) * sizeof *r->rg);
            r->n_rg -= 2;
            i -= 2;
        }
    }
    r->n_cls = 0;
    int32_t npairs = (r->n_rg - base) / 2;
    int32_t id = new_node(r, npairs ? R_SET : R_NONE, at);
    if (id < 0) return -1;
    r->nodes[id].a = base;
    r->nodes[id].n = npairs;
    return id;
}

static int32_t mk_char(rx *r, uint32_t cp, size_t at) {
    r->n_cls = 0;
    if (!push_cls(r, cp, cp)) return -1;
    return mk_set_from_cls(r, false, at);
}

static int32_t mk_rep(rx *r, int32_t x, int32_t min, int32_t max, size_t at);

/* CAT or ALT of tmp[start, n_tmp), normalised (see the top); truncates tmp to start. An ALT with
 * an empty alternative becomes (the others)?. */
static int32_t mk_list(rx *r, int kind, int32_t start, size_t at) {
    if (r->failed) return -1;
    if (kind == R_ALT) { /* the same node twice is one alternative */
        int32_t w = start;
        for (int32_t i = start; i < r->n_tmp; i++) {
            bool dup = false;
            for (int32_t j = start; j < w && !dup; j++) dup = r->tmp[j] == r->tmp[i];
            if (!dup) r->tmp[w++] = r->tmp[i];
        }
        r->n_tmp = w;
    }
    bool none = false, eps = false;
    int32_t need = 0, only = -1;
    for (int32_t i = start; i < r->n_tmp; i++) {
        const rnode *c = &r->nodes[r->tmp[i]];
        if (c->kind == R_NONE) none = true;
        else if (c->kind == R_EPS) eps = true;
        else {
            need += c->kind == kind ? c->n : 1;
            only = r->tmp[i];
        }
    }
    int32_t id;
    if (kind == R_CAT && none) id = new_node(r, R_NONE, at);
    else if (need == 0) id = new_node(r, kind == R_CAT || eps ? R_EPS : R_NONE, at);
    else if (need == 1) id = only;
    else {
        if (!grow(r, (void **)&r->kids, &r->cap_kids, r->n_kids + need, sizeof *r->kids)) return -1;
        int32_t base = r->n_kids;
        bool nullable = kind == R_CAT, anch = false;
        for (int32_t i = start; i < r->n_tmp; i++) {
            const rnode *c = &r->nodes[r->tmp[i]];
            if (c->kind == R_NONE || c->kind == R_EPS) continue;
            anch = anch || c->anch;
            if (kind == R_CAT) nullable = nullable && c->nullable;
            else nullable = nullable || c->nullable;
            if (c->kind == kind)
                for (int32_t j = 0; j < c->n; j++) r->kids[r->n_kids++] = r->kids[c->a + j];
            else r->kids[r->n_kids++] = r->tmp[i];
        }
        id = new_node(r, kind, at);
        if (id >= 0) {
            rnode *nd = &r->nodes[id];
            nd->a = base;
            nd->n = need;
            nd->nullable = nullable;
            nd->anch = anch;
        }
    }
    r->n_tmp = start;
    if (id >= 0 && kind == R_ALT && eps && need > 0 && !r->nodes[id].nullable) id = mk_rep(r, id, 0, 1, at);
    return id;
}

static int32_t mk_rep(rx *r, int32_t x, int32_t min, int32_t max, size_t at) {
    if (x < 0) return -1;
    int k = kind_of(r, x);
    if (max == 0 || k == R_EPS || (k == R_NONE && min == 0)) return new_node(r, R_EPS, at);
    if (k == R_NONE) return x;
    if (min == 1 && max == 1) return x;
    bool nullable = min == 0 || r->nodes[x].nullable, anch = r->nodes[x].anch;
    int32_t id = new_node(r, R_REP, at);
    if (id < 0) return -1;
    rnode *nd = &r->nodes[id];
    nd->a = x;
    nd->min = min;
    nd->max = max;
    nd->nullable = nullable;
    nd->anch = anch;
    return id;
}

static int32_t kid(const rx *r, int32_t id, int32_t i) { return r->kids[r->nodes[id].a + i]; }

/* ---- parsing ------------------------------------------------------------------------------------- */

/* ECMAScript's \d \w \s (WhiteSpace and LineTerminator) and the line terminators `.` excludes. */
static const uint32_t T_DIGIT[] = {'0', '9'};
static const uint32_t T_WORD[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
static const uint32_t T_SPACE[] = {0x09, 0x0D, 0x20, 0x20, 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A,
                                   0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000, 0xFEFF, 0xFEFF};
static const uint32_t T_LINE[] = {0x0A, 0x0A, 0x0D, 0x0D, 0x2028, 0x2029};

/* Adds table t (n pairs, sorted) or its complement to the scratch set. */
static bool add_table(rx *r, const uint32_t *t, int n, bool neg) {
    if (!neg) {
        for (int i = 0; i < n; i++)
            if (!push_cls(r, t[2 * i], t[2 * i + 1])) return false;
        return true;
    }
    uint32_t next = 0;
    for (int i = 0; i < n; i++) {
        if (t[2 * i] > next && !push_cls(r, next, t[2 * i] - 1)) return false;
        next = t[2 * i + 1] + 1;
    }
    return push_cls(r, next, MAX_CP);
}

static bool at_end(const rx *r) { return r->pos >= r->len; }
static char cur(const rx *r) { return r->pos < r->len ? r->s[r->pos] : 0; }

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads exactly n hex digits at pos; -1 when they are not there (pos unchanged then). */
static int64_t read_hex(rx *r, int n) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        int h = r->pos + (size_t)i < r->len ? hexval(r->s[r->pos + (size_t)i]) : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    r->pos += (size_t)n;
    return v;
}

typedef struct esc {
    bool is_set;
    uint32_t cp;          /* !is_set */
    const uint32_t *tab;  /* is_set: table, pairs, negated */
    int n_tab;
    bool neg;
} esc;

/* One escape after a backslash at `at` (pos is past the backslash). In a class \b is backspace. */
static bool read_escape(rx *r, size_t at, bool in_class, esc *out) {
    memset(out, 0, sizeof *out);
    if (at_end(r)) return fail(r, SLM_ERR_INVALID_ARG, at, "\\ at the end of the pattern");
    char c = cur(r);
    r->pos++;
    switch (c) {
    case 'd': case 'D': out->tab = T_DIGIT; out->n_tab = 1; break;
    case 'w': case 'W': out->tab = T_WORD; out->n_tab = 4; break;
    case 's': case 'S': out->tab = T_SPACE; out->n_tab = 10; break;
    case 't': out->cp = '\t'; return true;
    case 'n': out->cp = '\n'; return true;
    case 'r': out->cp = '\r'; return true;
    case 'f': out->cp = '\f'; return true;
    case 'v': out->cp = '\v'; return true;
    case '0':
        if (cur(r) >= '0' && cur(r) <= '9') return fail(r, SLM_ERR_UNSUPPORTED, at, "octal escape \\0%c is not supported", cur(r));
        out->cp = 0;
        return true;
    case 'c': {
        char l = cur(r);
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) return fail(r, SLM_ERR_INVALID_ARG, at, "\\c needs a letter");
        r->pos++;
        out->cp = (uint32_t)(l % 32);
        return true;
    }
    case 'x': {
        int64_t v = read_hex(r, 2);
        if (v < 0) return fail(r, SLM_ERR_INVALID_ARG, at, "\\x needs two hex digits");
        out->cp = (uint32_t)v;
        return true;
    }
    case 'u': {
        int64_t v;
        if (cur(r) == '{') {
            r->pos++;
            v = 0;
            size_t d0 = r->pos;
            while (hexval(cur(r)) >= 0) {
                v = v * 16 + hexval(cur(r));
                r->pos++;
                if (v > MAX_CP) return fail(r, SLM_ERR_INVALID_ARG, at, "\\u{...} above U+10FFFF");
            }
            if (r->pos == d0 || cur(r) != '}') return fail(r, SLM_ERR_INVALID_ARG, at, "\\u{ needs hex digits and }");
            r->pos++;
        } else {
            v = read_hex(r, 4);
            if (v < 0) return fail(r, SLM_ERR_INVALID_ARG, at, "\\u needs four hex digits");
            if (v >= 0xD800 && v <= 0xDBFF && r->pos + 6 <= r->len && r->s[r->pos] == '\\' && r->s[r->pos + 1] == 'u') {
                size_t save = r->pos;
                r->pos += 2;
                int64_t lo = read_hex(r, 4);
                if (lo >= 0xDC00 && lo <= 0xDFFF) v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                else r->pos = save;
            }
        }
        out->cp = (uint32_t)v;
        return true;
    }
    case 'b':
        if (in_class) {
            out->cp = 8;
            return true;
        }
        return fail(r, SLM_ERR_UNSUPPORTED, at, "word boundary \\b is not supported");
    case 'B': return fail(r, SLM_ERR_UNSUPPORTED, at, "non-word boundary \\B is not supported");
    case 'k': return fail(r, SLM_ERR_UNSUPPORTED, at, "named backreference \\k is not supported");
    case 'p': case 'P': return fail(r, SLM_ERR_UNSUPPORTED, at, "Unicode property escape \\%c is not supported", c);
    default:
        if (c >= '1' && c <= '9') return fail(r, SLM_ERR_UNSUPPORTED, at, "backreference \\%c is not supported", c);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return fail(r, SLM_ERR_UNSUPPORTED, at, "escape \\%c is not ECMAScript (Annex B would read it as '%c')", c, c);
        {
            uint32_t cp;
            r->pos--;
            size_t k = utf8_decode((const uint8_t *)r->s + r->pos, r->len - r->pos, &cp);
            if (!k) return fail(r, SLM_ERR_INVALID_ARG, r->pos, "invalid UTF-8");
            r->pos += k;
            out->cp = cp; /* identity escape: \/ \. \\ \( \- \_ ... (Annex B; Python reads them alike) */
            return true;
        }
    }
    out->is_set = true;
    out->neg = c >= 'A' && c <= 'Z';
    return true;
}

/* One class atom: a character (*is_set false, *cp) or a class escape (added to the scratch set). */
static bool class_atom(rx *r, bool *is_set, uint32_t *cp) {
    size_t at = r->pos;
    *is_set = false;
    if (cur(r) == '\\') {
        r->pos++;
        esc e;
        if (!read_escape(r, at, true, &e)) return false;
        if (e.is_set) {
            *is_set = true;
            return add_table(r, e.tab, e.n_tab, e.neg);
        }
        *cp = e.cp;
        return true;
    }
    size_t k = utf8_decode((const uint8_t *)r->s + r->pos, r->len - r->pos, cp);
    if (!k) return fail(r, SLM_ERR_INVALID_ARG, at, "invalid UTF-8");
    r->pos += k;
    return true;
}

/* [...] at pos. Annex B: a class escape next to '-' makes the dash a literal. */
static int32_t parse_class(rx *r) {
    size_t at = r->pos++;
    bool neg = cur(r) == '^';
    if (neg) r->pos++;
    r->n_cls = 0;
    while (true) {
        if (at_end(r)) return fail(r, SLM_ERR_INVALID_ARG, at, "unterminated character class"), -1;
        if (cur(r) == ']') break;
        bool set1, set2;
        uint32_t lo, hi;
        if (!class_atom(r, &set1, &lo)) return -1;
        if (cur(r) == '-' && r->pos + 1 < r->len && r->s[r->pos + 1] != ']') {
            size_t dash = r->pos++;
            if (!class_atom(r, &set2, &hi)) return -1;
            if (set1 || set2) { /* [\w-.] : the dash is literal */
                if (!set1 && !push_cls(r, lo, lo)) return -1;
                if (!set2 && !push_cls(r, hi, hi)) return -1;
                if (!push_cls(r, '-', '-')) return -1;
                continue;
            }
            if (hi < lo) return fail(r, SLM_ERR_INVALID_ARG, dash, "class range out of order (U+%04X-U+%04X)", lo, hi), -1;
            if (!push_cls(r, lo, hi)) return -1;
        } else if (!set1 && !push_cls(r, lo, lo)) return -1;
    }
    r->pos++;
    return mk_set_from_cls(r, neg, at);
}

/* A quantifier {m}, {m,}, {m,n} at pos: true and pos past it when one is there; Annex B reads a
 * '{' that does not start one as a literal. */
static bool read_braces(rx *r, int32_t *min, int32_t *max, bool *big) {
    size_t p = r->pos + 1;
    int64_t a = 0, b = -1;
    size_t d0 = p;
    *big = false;
    while (p < r->len && r->s[p] >= '0' && r->s[p] <= '9') {
        a = a * 10 + (r->s[p++] - '0');
        if (a > GR_MAX_REPEAT) {
            *big = true;
            a = GR_MAX_REPEAT + 1;
        }
    }
    if (p == d0) return false;
    if (p < r->len && r->s[p] == ',') {
        p++;
        size_t d1 = p;
        b = 0;
        while (p < r->len && r->s[p] >= '0' && r->s[p] <= '9') {
            b = b * 10 + (r->s[p++] - '0');
            if (b > GR_MAX_REPEAT) {
                *big = true;
                b = GR_MAX_REPEAT + 1;
            }
        }
        if (p == d1) b = -1;
    } else b = a;
    if (p >= r->len || r->s[p] != '}') return false;
    r->pos = p + 1;
    *min = (int32_t)a;
    *max = (int32_t)b;
    return true;
}

static int32_t parse_alt(rx *r);

static int32_t parse_atom(rx *r) {
    size_t at = r->pos;
    char c = cur(r);
    int32_t mn, mx;
    bool big;
    switch (c) {
    case '^': r->pos++; return new_node(r, R_BOL, at);
    case '$': r->pos++; return new_node(r, R_EOL, at);
    case '.':
        r->pos++;
        r->n_cls = 0;
        if (!add_table(r, T_LINE, 3, true)) return -1;
        return mk_set_from_cls(r, false, at);
    case '[': return parse_class(r);
    case '*': case '+': case '?': return fail(r, SLM_ERR_INVALID_ARG, at, "'%c' has nothing to repeat", c), -1;
    case '{':
        if (read_braces(r, &mn, &mx, &big)) return fail(r, SLM_ERR_INVALID_ARG, at, "quantifier has nothing to repeat"), -1;
        r->pos++;
        return mk_char(r, '{', at);
    case ')': return fail(r, SLM_ERR_INVALID_ARG, at, "unmatched ')'"), -1;
    case '(': {
        r->pos++;
        if (cur(r) == '?') {
            const char *q = r->s + r->pos, *end = r->s + r->len;
            if (end - q >= 2 && (q[1] == '=' || q[1] == '!'))
                return fail(r, SLM_ERR_UNSUPPORTED, at, "lookahead (?%c is not supported", q[1]), -1;
            if (end - q >= 3 && q[1] == '<' && (q[2] == '=' || q[2] == '!'))
                return fail(r, SLM_ERR_UNSUPPORTED, at, "lookbehind (?<%c is not supported", q[2]), -1;
            if (end - q >= 2 && q[1] == ':') r->pos += 2;
            else if (end - q >= 2 && q[1] == '<') { /* (?<name> */
                r->pos += 2;
                size_t n0 = r->pos;
                while (!at_end(r) && cur(r) != '>') {
                    char k = cur(r);
                    bool ok = (k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || k == '_' || k == '$' ||
                              (r->pos > n0 && k >= '0' && k <= '9') || (k & 0x80);
                    if (!ok) return fail(r, SLM_ERR_INVALID_ARG, r->pos, "bad character in a group name"), -1;
                    r->pos++;
                }
                if (at_end(r) || r->pos == n0) return fail(r, SLM_ERR_INVALID_ARG, at, "unterminated group name"), -1;
                r->pos++;
            } else return fail(r, SLM_ERR_INVALID_ARG, at, "unknown group syntax (?%c", end - q >= 2 ? q[1] : ' '), -1;
        }
        if (++r->depth > RX_MAX_NEST) return fail(r, SLM_ERR_RANGE, at, "groups nested deeper than %d", RX_MAX_NEST), -1;
        int32_t g = parse_alt(r);
        if (g < 0) return -1;
        if (cur(r) != ')') return fail(r, SLM_ERR_INVALID_ARG, at, "unclosed '('"), -1;
        r->pos++;
        r->depth--;
        return g;
    }
    case '\\': {
        r->pos++;
        esc e;
        if (!read_escape(r, at, false, &e)) return -1;
        if (!e.is_set) return mk_char(r, e.cp, at);
        r->n_cls = 0;
        if (!add_table(r, e.tab, e.n_tab, e.neg)) return -1;
        return mk_set_from_cls(r, false, at);
    }
    default: {
        uint32_t cp;
        size_t k = utf8_decode((const uint8_t *)r->s + r->pos, r->len - r->pos, &cp);
        if (!k) return fail(r, SLM_ERR_INVALID_ARG, at, "invalid UTF-8"), -1;
        r->pos += k;
        return mk_char(r, cp, at);
    }
    }
}

/* An atom and its quantifier. */
static int32_t parse_term(rx *r) {
    size_t atom_at = r->pos;
    int32_t x = parse_atom(r);
    if (x < 0) return -1;
    size_t at = r->pos;
    int32_t mn = 0, mx = -1;
    bool big = false;
    char c = cur(r);
    if (c == '*') r->pos++;
    else if (c == '+') {
        r->pos++;
        mn = 1;
    } else if (c == '?') {
        r->pos++;
        mx = 1;
    } else if (c == '{' && read_braces(r, &mn, &mx, &big)) {
        if (big) return fail(r, SLM_ERR_RANGE, at, "repetition count above %d", GR_MAX_REPEAT), -1;
        if (mx >= 0 && mx < mn) return fail(r, SLM_ERR_INVALID_ARG, at, "quantifier {%d,%d} out of order", mn, mx), -1;
    } else return x;
    if (cur(r) == '?') r->pos++; /* lazy: the same strings */
    c = cur(r);
    int32_t d1, d2;
    if (c == '*' || c == '+' || c == '?' || (c == '{' && read_braces(r, &d1, &d2, &big)))
        return fail(r, SLM_ERR_INVALID_ARG, r->pos, "quantifier has nothing to repeat"), -1;
    if (r->s[atom_at] == '^' || r->s[atom_at] == '$') /* (^)* is fine, ^* is not */
        return fail(r, SLM_ERR_INVALID_ARG, at, "quantifier on an anchor"), -1;
    return mk_rep(r, x, mn, mx, at);
}

static int32_t parse_alt(rx *r) {
    size_t at = r->pos;
    int32_t alts = r->n_tmp;
    while (true) {
        int32_t seq = r->n_tmp;
        size_t sat = r->pos;
        while (!at_end(r) && cur(r) != '|' && cur(r) != ')') {
            int32_t t = parse_term(r);
            if (t < 0 || !push_tmp(r, t)) return -1;
        }
        int32_t s = mk_list(r, R_CAT, seq, sat);
        if (s < 0 || !push_tmp(r, s)) return -1;
        if (cur(r) != '|') break;
        r->pos++;
    }
    return mk_list(r, R_ALT, alts, at);
}

/* ---- anchors and unanchored ends ---------------------------------------------------------------- */

typedef struct variant {
    int32_t node;
    bool sa, ea; /* anchored at the start / at the end */
} variant;

/* trim(x, right): a node y with L(y)·Σ* = L(x)·Σ* (right) or Σ*·L(y) = Σ*·L(x) (left), smaller. */
static int32_t trim(rx *r, int32_t id, bool right) {
    if (id < 0) return -1;
    const rnode nd = r->nodes[id];
    if (nd.kind == R_NONE) return id;
    if (nd.nullable) return new_node(r, R_EPS, nd.at);
    if (nd.kind == R_REP) { /* x{m,n} -> x{m-1} trim(x), m >= 1 */
        int32_t t = trim(r, nd.a, right);
        if (nd.min == 1) return t;
        int32_t start = r->n_tmp, rest = mk_rep(r, nd.a, nd.min - 1, nd.min - 1, nd.at);
        if (rest < 0 || t < 0) return -1;
        if (!push_tmp(r, right ? rest : t) || !push_tmp(r, right ? t : rest)) return -1;
        return mk_list(r, R_CAT, start, nd.at);
    }
    if (nd.kind == R_ALT) {
        int32_t start = r->n_tmp;
        for (int32_t i = 0; i < nd.n; i++) {
            int32_t t = trim(r, kid(r, id, i), right);
            if (t < 0 || !push_tmp(r, t)) return -1;
        }
        return mk_list(r, R_ALT, start, nd.at);
    }
    if (nd.kind == R_CAT) { /* drop nullable children at the trimmed end, trim the next one */
        int32_t k = nd.n, t = -1, lo = 0;
        if (right) {
            while (k > 0 && r->nodes[kid(r, id, k - 1)].nullable) k--;
            t = trim(r, kid(r, id, k - 1), right);
            k--;
        } else {
            while (lo < k && r->nodes[kid(r, id, lo)].nullable) lo++;
            t = trim(r, kid(r, id, lo), right);
            lo++;
        }
        if (t < 0) return -1;
        int32_t start = r->n_tmp;
        if (!right && !push_tmp(r, t)) return -1;
        for (int32_t i = lo; i < k; i++)
            if (!push_tmp(r, kid(r, id, i))) return -1;
        if (right && !push_tmp(r, t)) return -1;
        return mk_list(r, R_CAT, start, nd.at);
    }
    return id; /* SET */
}

/* L(x) without the empty string. */
static int32_t nonnull(rx *r, int32_t id) {
    if (id < 0) return -1;
    const rnode nd = r->nodes[id];
    if (!nd.nullable) return id;
    if (nd.kind == R_EPS) return new_node(r, R_NONE, nd.at);
    if (nd.kind == R_REP) return mk_rep(r, nonnull(r, nd.a), 1, nd.max, nd.at);
    int32_t start = r->n_tmp;
    if (nd.kind == R_ALT) {
        for (int32_t i = 0; i < nd.n; i++) {
            int32_t t = nonnull(r, kid(r, id, i));
            if (t < 0 || !push_tmp(r, t)) return -1;
        }
        return mk_list(r, R_ALT, start, nd.at);
    }
    /* CAT, every child nullable: the first non-empty child is child i */
    for (int32_t i = 0; i < nd.n; i++) {
        int32_t t = nonnull(r, kid(r, id, i));
        int32_t cs = r->n_tmp;
        if (t < 0 || !push_tmp(r, t)) return -1;
        for (int32_t j = i + 1; j < nd.n; j++)
            if (!push_tmp(r, kid(r, id, j))) return -1;
        int32_t c = mk_list(r, R_CAT, cs, nd.at);
        if (c < 0 || !push_tmp(r, c)) return -1;
    }
    return mk_list(r, R_ALT, start, nd.at);
}

/* Anchor elimination. L(x, s, e) is the anchor-free language of what x matches when its match
 * starts at the string's start exactly when s and ends at its end exactly when e (so ^ inside x
 * holds where nothing of x's match precedes it and s, $ likewise). For a sequence A B:
 *   L(AB, s, e) = L(A, s, 0) L(B, 0, e)  |  [ε in L(A, s, 0)] L(B, s, e)
 *               | L(A, s, e) [ε in L(B, 0, e)]  |  [ε in L(A, s, e) and ε in L(B, s, e)] ε
 * (A and B non-empty, A empty, B empty, both empty; each term only under-uses the flags, so the
 * union is exact). For x{m,n}: j >= 1 non-empty iterations, the first under (s, e if j = 1), the
 * middle ones (0, 0), the last (0, e); empty ones may pad the count where ε is in L(x, s, 0)
 * (before the first) or L(x, 0, e) (after the last), else j >= m; the whole may be empty when m = 0
 * or ε is in L(x, s, e). Results are memoised per (node, s, e) and per (sequence suffix, s, e). */
typedef struct anc_memo {
    int32_t *node; /* [node * 4 + s * 2 + e] */
    int32_t *suffix; /* [kids index * 4 + s * 2 + e] */
    int32_t n_nodes, n_kids;
} anc_memo;

static int32_t anc(rx *r, anc_memo *mm, int32_t id, int s, int e);

static int32_t anc_cat(rx *r, anc_memo *mm, int32_t id, int32_t i, int s, int e) {
    const rnode nd = r->nodes[id];
    if (i == nd.n - 1) return anc(r, mm, kid(r, id, i), s, e);
    int32_t *slot = &mm->suffix[(size_t)(nd.a + i) * 4 + (size_t)(s * 2 + e)];
    if (*slot >= 0) return *slot;
    bool rest_anch = false;
    for (int32_t j = i + 1; j < nd.n; j++) rest_anch = rest_anch || r->nodes[kid(r, id, j)].anch;
    int32_t a = kid(r, id, i), res;
    bool a_anch = r->nodes[a].anch;
    if (!a_anch && !rest_anch) { /* the same for every flag */
        int32_t start = r->n_tmp;
        for (int32_t j = i; j < nd.n; j++)
            if (!push_tmp(r, kid(r, id, j))) return -1;
        res = mk_list(r, R_CAT, start, nd.at);
        if (res >= 0)
            for (int f = 0; f < 4; f++) mm->suffix[(size_t)(nd.a + i) * 4 + (size_t)f] = res;
        return res;
    }
    int32_t a_s0 = anc(r, mm, a, s, 0), rest_0e = anc_cat(r, mm, id, i + 1, 0, e);
    if (a_s0 < 0 || rest_0e < 0) return -1;
    int32_t terms = r->n_tmp;
    bool a_only_eps = kind_of(r, a_s0) == R_EPS;
    if (!a_only_eps) { /* A non-empty (its empty match is under the next term too) */
        int32_t cs = r->n_tmp;
        if (!push_tmp(r, a_s0) || !push_tmp(r, rest_0e)) return -1;
        int32_t t = mk_list(r, R_CAT, cs, nd.at);
        if (t < 0 || !push_tmp(r, t)) return -1;
    }
    /* the other terms use a flag the first one does not, else they are inside it */
    if (r->nodes[a_s0].nullable && (a_only_eps || (s && rest_anch))) { /* A empty: B at A's place */
        int32_t t = anc_cat(r, mm, id, i + 1, s, e);
        if (t < 0 || !push_tmp(r, t)) return -1;
    }
    if (a_anch && e) {
        int32_t a_se = anc(r, mm, a, s, e);
        if (a_se < 0) return -1;
        if (r->nodes[rest_0e].nullable && !push_tmp(r, a_se)) return -1; /* B empty: A at B's end */
        if (s && rest_anch && r->nodes[a_se].nullable) { /* both empty */
            int32_t b_se = anc_cat(r, mm, id, i + 1, s, e);
            if (b_se < 0) return -1;
            if (r->nodes[b_se].nullable) {
                int32_t eps = new_node(r, R_EPS, nd.at);
                if (eps < 0 || !push_tmp(r, eps)) return -1;
            }
        }
    }
    res = mk_list(r, R_ALT, terms, nd.at);
    if (res >= 0) *slot = res;
    return res;
}

static int32_t anc_rep(rx *r, anc_memo *mm, int32_t id, int s, int e) {
    const rnode nd = r->nodes[id];
    int32_t x = nd.a, m = nd.min, n = nd.max;
    int32_t x_s0 = anc(r, mm, x, s, 0), x_00 = anc(r, mm, x, 0, 0), x_0e = anc(r, mm, x, 0, e),
            x_se = anc(r, mm, x, s, e);
    if (x_s0 < 0 || x_00 < 0 || x_0e < 0 || x_se < 0) return -1;
    bool pad = r->nodes[x_s0].nullable || r->nodes[x_0e].nullable;
    int32_t jmin = pad ? 1 : (m > 1 ? m : 1);
    int32_t terms = r->n_tmp;
    if (jmin <= 1) { /* one non-empty iteration */
        int32_t t = nonnull(r, x_se);
        if (t < 0 || !push_tmp(r, t)) return -1;
    }
    if (n < 0 || n >= 2) { /* first, middle{j - 2}, last */
        int32_t lo = (jmin > 2 ? jmin : 2) - 2;
        if (n < 0 || lo <= n - 2) {
            int32_t cs = r->n_tmp;
            int32_t f = nonnull(r, x_s0);
            if (f < 0 || !push_tmp(r, f)) return -1;
            int32_t mid = mk_rep(r, nonnull(r, x_00), lo, n < 0 ? -1 : n - 2, nd.at);
            if (mid < 0 || !push_tmp(r, mid)) return -1;
            int32_t l = nonnull(r, x_0e);
            if (l < 0 || !push_tmp(r, l)) return -1;
            int32_t t = mk_list(r, R_CAT, cs, nd.at);
            if (t < 0 || !push_tmp(r, t)) return -1;
        }
    }
    if (m == 0 || r->nodes[x_se].nullable) {
        int32_t eps = new_node(r, R_EPS, nd.at);
        if (eps < 0 || !push_tmp(r, eps)) return -1;
    }
    return mk_list(r, R_ALT, terms, nd.at);
}

static int32_t anc(rx *r, anc_memo *mm, int32_t id, int s, int e) {
    if (id < 0 || r->failed) return -1;
    const rnode nd = r->nodes[id];
    if (!nd.anch) return id;
    int32_t *slot = &mm->node[(size_t)id * 4 + (size_t)(s * 2 + e)];
    if (*slot >= 0) return *slot;
    int32_t res;
    if (nd.kind == R_BOL) res = new_node(r, s ? R_EPS : R_NONE, nd.at);
    else if (nd.kind == R_EOL) res = new_node(r, e ? R_EPS : R_NONE, nd.at);
    else if (nd.kind == R_CAT) res = anc_cat(r, mm, id, 0, s, e);
    else if (nd.kind == R_REP) res = anc_rep(r, mm, id, s, e);
    else { /* ALT */
        int32_t start = r->n_tmp;
        for (int32_t i = 0; i < nd.n; i++) {
            int32_t t = anc(r, mm, kid(r, id, i), s, e);
            if (t < 0 || !push_tmp(r, t)) return -1;
        }
        res = mk_list(r, R_ALT, start, nd.at);
    }
    if (res >= 0) mm->node[(size_t)id * 4 + (size_t)(s * 2 + e)] = res;
    return res;
}

/* The variants of the whole pattern: L(root, s, e) for each (s, e) an anchor of the pattern can
 * use, anchored at the start when s, at the end when e (the unanchored sides take any text). */
static bool variants(rx *r, int32_t root, variant *v, int32_t *nv) {
    bool has_bol = false, has_eol = false;
    for (int32_t i = 0; i < r->n_nodes; i++) {
        has_bol = has_bol || r->nodes[i].kind == R_BOL;
        has_eol = has_eol || r->nodes[i].kind == R_EOL;
    }
    anc_memo mm = {.n_nodes = r->n_nodes, .n_kids = r->n_kids};
    mm.node = al_array(r->al, (size_t)r->n_nodes * 4 + 1, sizeof *mm.node);
    mm.suffix = al_array(r->al, (size_t)r->n_kids * 4 + 1, sizeof *mm.suffix);
    bool ok = mm.node && mm.suffix;
    if (!ok) nomem(r);
    for (int32_t i = 0; ok && i < r->n_nodes * 4; i++) mm.node[i] = -1;
    for (int32_t i = 0; ok && i < r->n_kids * 4; i++) mm.suffix[i] = -1;
    *nv = 0;
    for (int s = 0; ok && s < 2; s++)
        for (int e = 0; ok && e < 2; e++) {
            if ((s && !has_bol) || (e && !has_eol)) continue;
            int32_t t = anc(r, &mm, root, s, e);
            if (t < 0) ok = false;
            else v[(*nv)++] = (variant){t, s == 1, e == 1};
        }
    al_free(r->al, mm.node);
    al_free(r->al, mm.suffix);
    return ok && !r->failed;
}

/* ---- emitting ------------------------------------------------------------------------------------ */

/* Decoded characters written as themselves in a JSON string (all others are escaped). */
static const uint32_t T_PLAIN[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0xD7FF, 0xE000, MAX_CP};

static bool count_cost(rx *r, size_t n, size_t at) {
    r->cost += n;
    if (r->cost > RX_MAX_ELEMS)
        return fail(r, SLM_ERR_RANGE, at, "pattern too large: its grammar would exceed %d elements", RX_MAX_ELEMS);
    return true;
}

/* The GBNF literal body spelling cp as it appears in a JSON string. */
static void lit_char(buf *o, uint32_t cp) {
    static const char named[] = {'b', 't', 'n', 0, 'f', 'r'}; /* 0x08 - 0x0D */
    if (cp == '"') buf_puts(o, "\\\\\\\"");
    else if (cp == '\\') buf_puts(o, "\\\\\\\\");
    else if (cp >= 8 && cp <= 13 && named[cp - 8]) buf_printf(o, "\\\\%c", named[cp - 8]);
    else if (cp < 0x20) buf_printf(o, "\\\\u00%02x", cp);
    else if (cp < 0x7F) buf_putc(o, (char)cp);
    else if (cp <= 0xFFFF) buf_printf(o, "\\u%04X", cp);
    else buf_printf(o, "\\U%08X", cp);
}

static void class_char(buf *o, uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) buf_putc(o, (char)cp);
    else if (cp <= 0xFF) buf_printf(o, "\\x%02X", cp);
    else if (cp <= 0xFFFF) buf_printf(o, "\\u%04X", cp);
    else buf_printf(o, "\\U%08X", cp);
}

/* Writes ranges [lo, hi] as GBNF class items, skipping the surrogates (never decoded). */
static void class_range(buf *o, uint32_t lo, uint32_t hi) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) class_range(o, lo, 0xD7FF);
        if (hi > 0xDFFF) class_range(o, 0xE000, hi);
        return;
    }
    class_char(o, lo);
    if (hi > lo) {
        buf_putc(o, '-');
        class_char(o, hi);
    }
}

/* Intersection of ranges a (na pairs) and b (nb pairs) into out (room for na + nb pairs). */
static int32_t intersect(const uint32_t *a, int32_t na, const uint32_t *b, int32_t nb, uint32_t *out) {
    int32_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        uint32_t lo = a[2 * i] > b[2 * j] ? a[2 * i] : b[2 * j];
        uint32_t hi = a[2 * i + 1] < b[2 * j + 1] ? a[2 * i + 1] : b[2 * j + 1];
        if (lo <= hi) {
            out[2 * k] = lo;
            out[2 * k + 1] = hi;
            k++;
        }
        if (a[2 * i + 1] < b[2 * j + 1]) i++;
        else j++;
    }
    return k;
}

static bool set_has(const uint32_t *p, int32_t n, uint32_t cp) {
    for (int32_t i = 0; i < n; i++)
        if (cp >= p[2 * i] && cp <= p[2 * i + 1]) return true;
    return false;
}

/* The set's characters as a GBNF expression (parenthesised when it has several alternatives and
 * wrap is set): one class for the characters written as themselves, a literal per escape. */
static bool emit_set(rx *r, buf *o, int32_t id, bool wrap) {
    const rnode nd = r->nodes[id];
    const uint32_t *p = r->rg + nd.a;
    if (nd.n == 1 && p[0] == p[1]) {
        buf_putc(o, '"');
        lit_char(o, p[0]);
        buf_putc(o, '"');
        return count_cost(r, 1, nd.at);
    }
    uint32_t *plain = al_array(r->al, (size_t)nd.n + 4, 2 * sizeof *plain);
    if (!plain) return nomem(r);
    int32_t np = intersect(p, nd.n, T_PLAIN, 4, plain);
    int n_alt = np > 0;
    const uint32_t specials[] = {'"', '\\', 8, 9, 10, 12, 13};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) n_alt += set_has(p, nd.n, specials[i]);
    bool lo_ctl = false, hi_ctl = false; /* \u000X and \u001X */
    for (uint32_t c = 0; c < 0x20; c++)
        if (!(c >= 8 && c <= 13 && c != 11) && set_has(p, nd.n, c)) *(c < 16 ? &lo_ctl : &hi_ctl) = true;
    n_alt += lo_ctl + hi_ctl;
    bool paren = wrap && n_alt > 1;
    if (paren) buf_puts(o, "( ");
    bool first = true;
    if (np) {
        /* the complement of plain within all code points, when it is shorter */
        uint32_t *comp = al_array(r->al, (size_t)np + 1, 2 * sizeof *comp);
        if (!comp) {
            al_free(r->al, plain);
            return nomem(r);
        }
        int32_t nc = 0;
        uint32_t next = 0;
        for (int32_t i = 0; i < np; i++) {
            if (plain[2 * i] > next) {
                comp[2 * nc] = next;
                comp[2 * nc + 1] = plain[2 * i] - 1;
                nc++;
            }
            next = plain[2 * i + 1] + 1;
        }
        if (next <= MAX_CP) {
            comp[2 * nc] = next;
            comp[2 * nc + 1] = MAX_CP;
            nc++;
        }
        bool neg = nc < np;
        buf_puts(o, neg ? "[^" : "[");
        for (int32_t i = 0; i < (neg ? nc : np); i++)
            class_range(o, neg ? comp[2 * i] : plain[2 * i], neg ? comp[2 * i + 1] : plain[2 * i + 1]);
        buf_putc(o, ']');
        al_free(r->al, comp);
        first = false;
    }
    al_free(r->al, plain);
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (set_has(p, nd.n, specials[i])) {
            buf_puts(o, first ? "\"" : " | \"");
            lit_char(o, specials[i]);
            buf_putc(o, '"');
            first = false;
        }
    for (int h = 0; h < 2; h++) {
        if (!(h ? hi_ctl : lo_ctl)) continue;
        buf_printf(o, "%s\"\\\\u00%d\" [", first ? "" : " | ", h);
        for (uint32_t c = (uint32_t)h * 16; c < (uint32_t)h * 16 + 16; c++)
            if (!(c >= 8 && c <= 13 && c != 11) && set_has(p, nd.n, c)) buf_putc(o, "0123456789abcdef"[c & 15]);
        buf_putc(o, ']');
        first = false;
    }
    if (paren) buf_puts(o, " )");
    return count_cost(r, (size_t)n_alt * 3, nd.at);
}

static bool is_char(const rx *r, int32_t id) {
    const rnode *n = &r->nodes[id];
    return n->kind == R_SET && n->n == 1 && r->rg[n->a] == r->rg[n->a + 1];
}

/* prec: 0 in an alternation, 1 in a sequence, 2 as the operand of a repetition. */
static bool emit_node(rx *r, buf *o, int32_t id, int prec) {
    if (r->failed) return false;
    if (o->n - r->text0 > RX_MAX_TEXT)
        return fail(r, SLM_ERR_RANGE, r->nodes[id].at, "pattern too large: its grammar would exceed %zu bytes", RX_MAX_TEXT);
    const rnode nd = r->nodes[id];
    switch (nd.kind) {
    case R_SET: return emit_set(r, o, id, prec > 0);
    case R_EPS: buf_puts(o, "\"\""); return true;
    case R_ALT:
        if (prec > 0) buf_puts(o, "( ");
        for (int32_t i = 0; i < nd.n; i++) {
            if (i) buf_puts(o, " | ");
            if (!emit_node(r, o, kid(r, id, i), 0)) return false;
        }
        if (prec > 0) buf_puts(o, " )");
        return count_cost(r, (size_t)nd.n + 2, nd.at);
    case R_CAT:
        if (prec > 1) buf_puts(o, "( ");
        for (int32_t i = 0; i < nd.n;) {
            if (i) buf_putc(o, ' ');
            int32_t k = kid(r, id, i);
            if (is_char(r, k) && i + 1 < nd.n && is_char(r, kid(r, id, i + 1))) {
                buf_putc(o, '"');
                for (; i < nd.n && is_char(r, kid(r, id, i)); i++) {
                    lit_char(o, r->rg[r->nodes[kid(r, id, i)].a]);
                    if (!count_cost(r, 1, nd.at)) return false;
                }
                buf_putc(o, '"');
                continue;
            }
            if (!emit_node(r, o, k, 1)) return false;
            i++;
        }
        if (prec > 1) buf_puts(o, " )");
        return count_cost(r, 2, nd.at);
    case R_REP: {
        int32_t x = nd.a, mn = nd.min, mx = nd.max;
        if (r->nodes[x].nullable) { /* x{m,n} = (x minus "") {0,n}: no left-recursive repetition */
            x = nonnull(r, x);
            if (x < 0) return false;
            if (kind_of(r, x) == R_NONE) {
                buf_puts(o, "\"\"");
                return true;
            }
            mn = 0;
        }
        if (prec > 1) buf_puts(o, "( "); /* a repetition of a repetition */
        if (!emit_node(r, o, x, 2)) return false;
        if (mn == 0 && mx < 0) buf_putc(o, '*');
        else if (mn == 1 && mx < 0) buf_putc(o, '+');
        else if (mn == 0 && mx == 1) buf_putc(o, '?');
        else if (mn == mx) buf_printf(o, "{%d}", mn);
        else if (mx < 0) buf_printf(o, "{%d,}", mn);
        else buf_printf(o, "{%d,%d}", mn, mx);
        if (prec > 1) buf_puts(o, " )");
        return count_cost(r, 2 + (size_t)mn + 3 * (size_t)(mx < 0 ? 1 : mx - mn), nd.at);
    }
    default: return fail(r, SLM_ERR_INVALID_ARG, nd.at, "internal: unexpected node");
    }
}

static bool valid_name(const char *name) {
    if (!name || !*name || strlen(name) > 200) return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            return false;
    return true;
}

slm_status gr_regex_to_gbnf(const char *pattern, size_t len, const char *name, buf *out, slm_err *e) {
    if (!pattern || !out || !valid_name(name))
        return err_set(e, SLM_ERR_INVALID_ARG, "regex: NULL pattern or output, or a rule name that is not [A-Za-z0-9_-]+");
    if (len > RX_MAX_PATTERN)
        return err_set(e, SLM_ERR_RANGE, "regex: pattern of %zu bytes, above the cap of %zu", len, RX_MAX_PATTERN);
    rx r = {.al = out->a ? out->a : &al_default, .s = pattern, .len = len, .e = e, .text0 = out->n};
    variant *v = NULL;
    int32_t root = parse_alt(&r), nv = 0;
    if (root >= 0 && !at_end(&r)) fail(&r, SLM_ERR_INVALID_ARG, r.pos, "unmatched ')'");
    if (r.failed) goto done;
    v = al_array(r.al, 4, sizeof *v);
    if (!v) {
        nomem(&r);
        goto done;
    }
    if (!variants(&r, root, v, &nv)) goto done;
    /* trim unanchored ends; drop variants that match nothing; one that matches everything wins */
    int32_t kept = 0;
    bool all = false;
    for (int32_t i = 0; i < nv; i++) {
        int32_t b = v[i].node;
        if (!v[i].sa) b = trim(&r, b, false);
        if (!v[i].ea) b = trim(&r, b, true);
        if (b < 0) goto done;
        if (kind_of(&r, b) == R_NONE) continue;
        if (!v[i].sa && !v[i].ea && kind_of(&r, b) == R_EPS) all = true;
        v[kept++] = (variant){b, v[i].sa, v[i].ea};
    }
    if (!kept) {
        fail(&r, SLM_ERR_UNSUPPORTED, 0, "the pattern matches no string");
        goto done;
    }
    bool any = all;
    for (int32_t i = 0; i < kept; i++) any = any || !v[i].sa || !v[i].ea;
    buf_printf(out, "%s ::= ", name);
    if (all) buf_printf(out, "%s-any*", name);
    for (int32_t i = 0; !all && i < kept; i++) {
        if (i) buf_puts(out, " | ");
        bool body = kind_of(&r, v[i].node) != R_EPS || (v[i].sa && v[i].ea);
        if (!v[i].sa) buf_printf(out, "%s-any*%s", name, body ? " " : "");
        if (body && !emit_node(&r, out, v[i].node, 1)) goto done;
        if (!v[i].ea) buf_printf(out, "%s%s-any*", body ? " " : "", name);
    }
    buf_putc(out, '\n');
    if (any) { /* any character, as the JSON string spells it */
        r.n_cls = 0;
        int32_t s = push_cls(&r, 0, MAX_CP) ? mk_set_from_cls(&r, false, 0) : -1;
        if (s < 0) goto done;
        buf_printf(out, "%s-any ::= ", name);
        if (!emit_set(&r, out, s, false)) goto done;
        buf_putc(out, '\n');
    }
    if (out->oom) nomem(&r);
done:
    al_free(r.al, v);
    al_free(r.al, r.nodes);
    al_free(r.al, r.kids);
    al_free(r.al, r.tmp);
    al_free(r.al, r.rg);
    al_free(r.al, r.cls);
    if (r.failed) {
        if (out->p && !out->oom) buf_truncate(out, r.text0);
        return r.st;
    }
    return SLM_OK;
}
