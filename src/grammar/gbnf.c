/* gbnf.c — GBNF text -> gr_grammar (grammar.h), compatible with llama.cpp's grammar format:
 * `name ::= alternatives` rules (a rule ends at a newline outside parentheses), `|`, sequences,
 * ( ) groups, postfix * + ? {m} {m,} {m,n}, "literals", [classes] with ranges, ^ negation and
 * escapes, `.` (any code point), \xHH \uHHHH \UHHHHHHHH \t \n \r \\ \" \[ \] escapes, # comments,
 * token references <text> (a control token of that text, or the text: grammar.h).
 * Repetitions and groups become generated rules named "<rule>#<n>" (a name GBNF cannot spell).
 * After parsing: undefined rules, a missing start rule, left recursion and rules that can never
 * end are refused with the line:column of the cause (docs/grammar.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#include "base/utf8.h"
#include "grammar/grammar.h"

#define MAX_CP 0x10FFFFu

typedef struct ivec {
    int32_t *v;
    int32_t n, cap;
} ivec;

typedef struct brule {
    char *name;
    size_t def_at, ref_at; /* byte offsets: definition (SIZE_MAX = none), first reference */
    ivec elems;            /* (type, val) pairs; each alternative ends with GR_END */
    int32_t n_generated;
} brule;

typedef struct parser {
    const slm_allocator *a; /* every allocation of the parse, and of the grammar it returns */
    const char *s;
    size_t len, pos;
    brule *rules;
    int32_t n_rules, cap_rules;
    int32_t *map; /* open addressing over rule names: id + 1, 0 = empty */
    int32_t map_cap;
    ivec ranges;  /* pairs */
    ivec classes; /* (off, n) pairs into ranges */
    size_t n_elems;
    int depth;
    slm_err *e;
    bool failed;
} parser;

static bool ivec_push(const slm_allocator *a, ivec *v, int32_t x) {
    if (v->n == v->cap) {
        int32_t cap = v->cap ? v->cap * 2 : 16;
        int32_t *nv = al_realloc(a, v->v, (size_t)v->cap * sizeof *nv, (size_t)cap * sizeof *nv);
        if (!nv) return false;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return true;
}

static void where(const parser *p, size_t off, int *line, int *col) {
    *line = 1;
    size_t bol = 0;
    for (size_t i = 0; i < off && i < p->len; i++)
        if (p->s[i] == '\n') {
            (*line)++;
            bol = i + 1;
        }
    *col = (int)(off - bol) + 1;
}

__attribute__((format(printf, 4, 5))) static bool fail_at(parser *p, slm_status st, size_t off, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(p, off, &line, &col);
    err_set(p->e, st, "grammar %d:%d: %s", line, col, msg);
    return false;
}

static bool nomem(parser *p) {
    if (!p->failed) err_set(p->e, SLM_ERR_NOMEM, "grammar: out of memory");
    p->failed = true;
    return false;
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static bool map_grow(parser *p) {
    int32_t cap = p->map_cap ? p->map_cap * 2 : 64;
    int32_t *m = al_calloc(p->a, (size_t)cap, sizeof *m);
    if (!m) return false;
    for (int32_t r = 0; r < p->n_rules; r++) {
        uint32_t h = name_hash(p->rules[r].name, strlen(p->rules[r].name)) & (uint32_t)(cap - 1);
        while (m[h]) h = (h + 1) & (uint32_t)(cap - 1);
        m[h] = r + 1;
    }
    al_free(p->a, p->map);
    p->map = m;
    p->map_cap = cap;
    return true;
}

/* Rule id of name[0, n), created (undefined) when new; -1 on failure. */
static int32_t rule_id(parser *p, const char *name, size_t n, size_t at) {
    if (p->map_cap) {
        uint32_t h = name_hash(name, n) & (uint32_t)(p->map_cap - 1);
        while (p->map[h]) {
            brule *r = &p->rules[p->map[h] - 1];
            if (strlen(r->name) == n && !memcmp(r->name, name, n)) return p->map[h] - 1;
            h = (h + 1) & (uint32_t)(p->map_cap - 1);
        }
    }
    if (p->n_rules >= (1 << 20)) return fail_at(p, SLM_ERR_RANGE, at, "more than %d rules", 1 << 20), -1;
    if ((p->n_rules + 1) * 2 > p->map_cap && !map_grow(p)) return nomem(p), -1;
    if (p->n_rules == p->cap_rules) {
        int32_t cap = p->cap_rules ? p->cap_rules * 2 : 16;
        brule *nr = al_realloc(p->a, p->rules, (size_t)p->cap_rules * sizeof *nr, (size_t)cap * sizeof *nr);
        if (!nr) return nomem(p), -1;
        p->rules = nr;
        p->cap_rules = cap;
    }
    brule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = al_strndup(p->a, name, n);
    if (!r->name) return nomem(p), -1;
    r->def_at = SIZE_MAX;
    r->ref_at = at;
    uint32_t h = name_hash(name, n) & (uint32_t)(p->map_cap - 1);
    while (p->map[h]) h = (h + 1) & (uint32_t)(p->map_cap - 1);
    p->map[h] = p->n_rules + 1;
    return p->n_rules++;
}

/* A generated rule "<parent>#<k>" (defined, empty). */
static int32_t new_rule(parser *p, int32_t parent, size_t at) {
    char name[300];
    int k = ++p->rules[parent].n_generated;
    snprintf(name, sizeof name, "%.200s#%d", p->rules[parent].name, k);
    int32_t id = rule_id(p, name, strlen(name), at);
    if (id >= 0) p->rules[id].def_at = at;
    return id;
}

static bool emit(parser *p, int32_t rule, int32_t type, int32_t val, size_t at) {
    if (++p->n_elems > GR_MAX_ELEMS) return fail_at(p, SLM_ERR_RANGE, at, "grammar grows past %d elements", GR_MAX_ELEMS);
    if (!ivec_push(p->a, &p->rules[rule].elems, type) || !ivec_push(p->a, &p->rules[rule].elems, val)) return nomem(p);
    return true;
}

/* A class of the sorted, disjoint pairs[0, 2 n_pairs). */
static int32_t add_class(parser *p, const uint32_t *pairs, int32_t n_pairs) {
    int32_t off = p->ranges.n;
    for (int32_t i = 0; i < 2 * n_pairs; i++)
        if (!ivec_push(p->a, &p->ranges, (int32_t)pairs[i])) return nomem(p), -1;
    if (!ivec_push(p->a, &p->classes, off) || !ivec_push(p->a, &p->classes, n_pairs)) return nomem(p), -1;
    return p->classes.n / 2 - 1;
}

static bool at_end(const parser *p) { return p->pos >= p->len; }
static char cur(const parser *p) { return p->pos < p->len ? p->s[p->pos] : 0; }
static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(parser *p, bool newline_ok) {
    while (!at_end(p)) {
        char c = cur(p);
        if (c == ' ' || c == '\t') p->pos++;
        else if (c == '#')
            while (!at_end(p) && cur(p) != '\n' && cur(p) != '\r') p->pos++;
        else if (newline_ok && (c == '\n' || c == '\r')) p->pos++;
        else break;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class (escape or UTF-8) into *cp. */
static bool read_char(parser *p, uint32_t *cp) {
    size_t at = p->pos;
    if (cur(p) == '\\') {
        p->pos++;
        if (at_end(p)) return fail_at(p, SLM_ERR_FORMAT, at, "escape at end of input");
        char c = cur(p);
        p->pos++;
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = hexval(cur(p));
                if (at_end(p) || h < 0)
                    return fail_at(p, SLM_ERR_FORMAT, at, "\\%c needs %d hex digits", c, digits);
                v = v * 16 + (uint32_t)h;
                p->pos++;
            }
            if (v > MAX_CP || (v >= 0xD800 && v <= 0xDFFF))
                return fail_at(p, SLM_ERR_FORMAT, at, "escape \\%c%0*X is not a Unicode scalar value", c, digits, v);
            *cp = v;
            return true;
        }
        switch (c) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '\\': case '"': case '[': case ']': *cp = (uint8_t)c; return true;
        default: return fail_at(p, SLM_ERR_FORMAT, at, "unknown escape \\%c", c);
        }
    }
    size_t n = utf8_decode((const uint8_t *)p->s + p->pos, p->len - p->pos, cp);
    if (!n) return fail_at(p, SLM_ERR_FORMAT, at, "invalid UTF-8");
    p->pos += n;
    return true;
}

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and merges pairs[0, 2n) in place; negates within [0, MAX_CP] when neg. Returns the new
 * count (pairs must hold n + 1 pairs for the negation). */
static int32_t normalize(uint32_t *pairs, int32_t n, bool neg) {
    qsort(pairs, (size_t)n, 2 * sizeof(uint32_t), cmp_pair);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && pairs[2 * i] <= pairs[2 * m - 1] + 1) {
            if (pairs[2 * i + 1] > pairs[2 * m - 1]) pairs[2 * m - 1] = pairs[2 * i + 1];
        } else {
            pairs[2 * m] = pairs[2 * i];
            pairs[2 * m + 1] = pairs[2 * i + 1];
            m++;
        }
    }
    if (!neg) return m;
    uint32_t next = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < m; i++) { /* writes trail reads: k <= i */
        uint32_t lo = pairs[2 * i], hi = pairs[2 * i + 1];
        if (lo > next) {
            pairs[2 * k] = next;
            pairs[2 * k + 1] = lo - 1;
            k++;
        }
        next = hi + 1;
    }
    if (next <= MAX_CP) {
        pairs[2 * k] = next;
        pairs[2 * k + 1] = MAX_CP;
        k++;
    }
    return k;
}

static bool parse_class(parser *p, int32_t rule) {
    size_t at = p->pos++;
    bool neg = cur(p) == '^';
    if (neg) p->pos++;
    uint32_t *pairs = NULL;
    int32_t n = 0, cap = 0;
    bool ok = false;
    while (true) {
        if (at_end(p)) {
            fail_at(p, SLM_ERR_FORMAT, at, "unterminated character class");
            goto done;
        }
        if (cur(p) == ']') break;
        uint32_t lo, hi;
        if (!read_char(p, &lo)) goto done;
        hi = lo;
        if (cur(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] != ']') {
            p->pos++;
            size_t rat = p->pos;
            if (!read_char(p, &hi)) goto done;
            if (hi < lo) {
                fail_at(p, SLM_ERR_FORMAT, rat, "range end U+%04X is below its start U+%04X", hi, lo);
                goto done;
            }
        }
        if (n + 2 > cap) {
            int32_t ncap = cap ? cap * 2 : 8;
            uint32_t *np = al_realloc(p->a, pairs, (size_t)cap * 2 * sizeof *np, (size_t)ncap * 2 * sizeof *np);
            if (!np) {
                nomem(p);
                goto done;
            }
            pairs = np;
            cap = ncap;
        }
        pairs[2 * n] = lo;
        pairs[2 * n + 1] = hi;
        n++;
    }
    p->pos++;
    if (!n && !neg) {
        fail_at(p, SLM_ERR_FORMAT, at, "empty character class");
        goto done;
    }
    if (!n) { /* [^] : any code point */
        pairs = al_malloc(p->a, 2 * sizeof *pairs);
        if (!pairs) {
            nomem(p);
            goto done;
        }
    }
    n = normalize(pairs, n, neg);
    if (!n) {
        fail_at(p, SLM_ERR_FORMAT, at, "character class matches nothing");
        goto done;
    }
    int32_t c = add_class(p, pairs, n);
    ok = c >= 0 && emit(p, rule, GR_CLS, c, at);
done:
    al_free(p->a, pairs);
    return ok;
}

static bool parse_alternates(parser *p, int32_t rule, bool nested);

/* Applies a repetition {min, max} (max < 0: unbounded) to the last symbol of rule's current
 * alternative: the elements from index `last` to the end (several for a multi-character literal,
 * which is first moved into a rule of its own). */
static bool repeat(parser *p, int32_t rule, int32_t last, int min, int max, size_t at) {
    ivec *ev = &p->rules[rule].elems;
    int32_t t = ev->v[last], v = ev->v[last + 1];
    if (ev->n - last > 2) { /* W ::= the run */
        int32_t w = new_rule(p, rule, at);
        if (w < 0) return false;
        ev = &p->rules[rule].elems;
        for (int32_t i = last; i < ev->n; i += 2)
            if (!emit(p, w, ev->v[i], ev->v[i + 1], at)) return false;
        if (!emit(p, w, GR_END, 0, at)) return false;
        p->n_elems -= (size_t)(ev->n - last) / 2;
        ev->n = last;
        t = GR_REF;
        v = w;
    } else {
        ev->n = last;
        p->n_elems--;
    }
    for (int i = 0; i < min; i++)
        if (!emit(p, rule, t, v, at)) return false;
    if (max < 0) { /* R ::= X R | "" */
        int32_t r = new_rule(p, rule, at);
        if (r < 0 || !emit(p, r, t, v, at) || !emit(p, r, GR_REF, r, at) || !emit(p, r, GR_END, 0, at) ||
            !emit(p, r, GR_END, 0, at))
            return false;
        return emit(p, rule, GR_REF, r, at);
    }
    int32_t inner = -1; /* O_k ::= X O_{k-1} | "" */
    for (int k = 0; k < max - min; k++) {
        int32_t r = new_rule(p, rule, at);
        if (r < 0 || !emit(p, r, t, v, at)) return false;
        if (inner >= 0 && !emit(p, r, GR_REF, inner, at)) return false;
        if (!emit(p, r, GR_END, 0, at) || !emit(p, r, GR_END, 0, at)) return false;
        inner = r;
    }
    return inner < 0 || emit(p, rule, GR_REF, inner, at);
}

static bool parse_int(parser *p, int *out) {
    size_t at = p->pos;
    long v = 0;
    if (cur(p) < '0' || cur(p) > '9') return fail_at(p, SLM_ERR_FORMAT, at, "expected a number in { }");
    while (cur(p) >= '0' && cur(p) <= '9') {
        v = v * 10 + (cur(p) - '0');
        if (v > GR_MAX_REPEAT) return fail_at(p, SLM_ERR_RANGE, at, "repetition count above %d", GR_MAX_REPEAT);
        p->pos++;
    }
    *out = (int)v;
    return true;
}

/* A token reference <text> (llama.cpp's syntax; the text includes the angle brackets, as in
 * <|channel|> or <think>): a generated rule of two alternatives, the control token whose text that
 * is (its marks around the text: grammar.h) and the text as plain text. <[id]> is refused: a grammar
 * is compiled without a vocabulary. */
static bool parse_token_ref(parser *p, int32_t rule) {
    size_t at = p->pos, end = at + 1;
    if (end < p->len && p->s[end] == '[')
        return fail_at(p, SLM_ERR_FORMAT, at, "token ids (<[id]>) are not supported: name the token by its text (<|name|>)");
    while (end < p->len && p->s[end] != '>' && p->s[end] != '\n' && p->s[end] != '"') end++;
    if (end >= p->len || p->s[end] != '>' || end == at + 1)
        return fail_at(p, SLM_ERR_FORMAT, at, "unterminated token reference (<text>, on one line)");
    int32_t r = new_rule(p, rule, at);
    if (r < 0) return false;
    uint32_t mark[2] = {GR_TOKEN_MARK, GR_TOKEN_MARK};
    for (int alt = 0; alt < 2; alt++) {
        int32_t k = alt == 0 ? add_class(p, mark, 1) : 0;
        if (k < 0 || (alt == 0 && !emit(p, r, GR_CLS, k, at))) return false;
        for (size_t i = at; i <= end;) {
            uint32_t cp;
            size_t n = utf8_decode((const uint8_t *)p->s + i, end + 1 - i, &cp);
            if (!n) return fail_at(p, SLM_ERR_FORMAT, i, "invalid UTF-8");
            uint32_t pair[2] = {cp, cp};
            int32_t c = add_class(p, pair, 1);
            if (c < 0 || !emit(p, r, GR_CLS, c, i)) return false;
            i += n;
        }
        if ((alt == 0 && !emit(p, r, GR_CLS, k, at)) || !emit(p, r, GR_END, 0, at)) return false;
    }
    p->pos = end + 1;
    return emit(p, rule, GR_REF, r, at);
}

static bool parse_sequence(parser *p, int32_t rule, bool nested) {
    int32_t last = -1; /* elems index of the last symbol, for postfix operators */
    while (!at_end(p)) {
        size_t at = p->pos;
        char c = cur(p);
        if (c == '"') {
            p->pos++;
            last = p->rules[rule].elems.n;
            while (true) {
                if (at_end(p)) return fail_at(p, SLM_ERR_FORMAT, at, "unterminated string");
                if (cur(p) == '"') break;
                uint32_t cp;
                size_t cat = p->pos;
                if (!read_char(p, &cp)) return false;
                uint32_t pair[2] = {cp, cp};
                int32_t k = add_class(p, pair, 1);
                if (k < 0 || !emit(p, rule, GR_CLS, k, cat)) return false;
            }
            p->pos++;
            if (last == p->rules[rule].elems.n) last = -2; /* "" : nothing to repeat */
        } else if (c == '[') {
            last = p->rules[rule].elems.n;
            if (!parse_class(p, rule)) return false;
        } else if (c == '.') {
            p->pos++;
            uint32_t pair[2] = {0, MAX_CP};
            int32_t k = add_class(p, pair, 1);
            last = p->rules[rule].elems.n;
            if (k < 0 || !emit(p, rule, GR_CLS, k, at)) return false;
        } else if (is_word(c)) {
            while (is_word(cur(p))) p->pos++;
            int32_t r = rule_id(p, p->s + at, p->pos - at, at);
            last = p->rules[rule].elems.n;
            if (r < 0 || !emit(p, rule, GR_REF, r, at)) return false;
        } else if (c == '(') {
            if (++p->depth > GR_MAX_NEST) return fail_at(p, SLM_ERR_RANGE, at, "groups nested deeper than %d", GR_MAX_NEST);
            p->pos++;
            skip_space(p, true);
            int32_t r = new_rule(p, rule, at);
            if (r < 0 || !parse_alternates(p, r, true)) return false;
            if (cur(p) != ')') return fail_at(p, SLM_ERR_FORMAT, at, "unclosed '('");
            p->pos++;
            p->depth--;
            last = p->rules[rule].elems.n;
            if (!emit(p, rule, GR_REF, r, at)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return fail_at(p, SLM_ERR_FORMAT, at, "'%c' has nothing to repeat", c);
            int min = 0, max = -1;
            p->pos++;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                skip_space(p, nested);
                if (!parse_int(p, &min)) return false;
                skip_space(p, nested);
                max = min;
                if (cur(p) == ',') {
                    p->pos++;
                    skip_space(p, nested);
                    max = -1;
                    if (cur(p) != '}' && !parse_int(p, &max)) return false;
                    skip_space(p, nested);
                }
                if (cur(p) != '}') return fail_at(p, SLM_ERR_FORMAT, at, "unterminated '{'");
                p->pos++;
                if (max >= 0 && max < min) return fail_at(p, SLM_ERR_FORMAT, at, "{%d,%d}: max below min", min, max);
            }
            if (!repeat(p, rule, last, min, max, at)) return false;
            last = -1;
        } else if (c == '<') {
            last = p->rules[rule].elems.n;
            if (!parse_token_ref(p, rule)) return false;
        } else if (c == '!') {
            return fail_at(p, SLM_ERR_FORMAT, at, "negated token references (!<...>) are not supported");
        } else {
            break;
        }
        skip_space(p, nested);
    }
    return true;
}

static bool parse_alternates(parser *p, int32_t rule, bool nested) {
    while (true) {
        if (!parse_sequence(p, rule, nested) || !emit(p, rule, GR_END, 0, p->pos)) return false;
        if (cur(p) != '|') return true;
        p->pos++;
        skip_space(p, true);
    }
}

/* Marks rules for which `holds` becomes true by a least fixpoint over alternatives: an alternative
 * holds when each of its elements does (a class holds when cls_ok; a call when its rule holds). */
static bool fixpoint(const gr_grammar *g, bool cls_ok, uint8_t *holds) {
    bool ok = false;
    const slm_allocator *al = &g->alloc;
    int32_t *pending = al_calloc(al, (size_t)g->n_alts + 1, sizeof *pending);
    int32_t *alt_rule = al_array(al, (size_t)g->n_alts + 1, sizeof *alt_rule);
    int32_t *occ_off = al_calloc(al, (size_t)g->n_rules + 1, sizeof *occ_off);
    int32_t *occ = al_array(al, (size_t)g->n_elems + 1, sizeof *occ);
    int32_t *queue = al_array(al, (size_t)g->n_rules + 1, sizeof *queue);
    if (!pending || !alt_rule || !occ_off || !occ || !queue) goto done;
    memset(holds, 0, (size_t)g->n_rules);
    for (int32_t r = 0; r < g->n_rules; r++)
        for (int32_t a = g->rules[r].alt_off; a < g->rules[r].alt_off + g->rules[r].n_alt; a++)
            for (int32_t i = g->alts[a]; g->elems[i].type != GR_END; i++)
                if (g->elems[i].type == GR_REF) occ_off[g->elems[i].val]++;
    for (int32_t r = 0, sum = 0; r <= g->n_rules; r++) {
        int32_t c = r < g->n_rules ? occ_off[r] : 0;
        occ_off[r] = sum;
        sum += c;
    }
    int32_t *fill = queue; /* reused as a cursor per rule before the queue is needed */
    for (int32_t r = 0; r < g->n_rules; r++) fill[r] = occ_off[r];
    for (int32_t r = 0; r < g->n_rules; r++)
        for (int32_t a = g->rules[r].alt_off; a < g->rules[r].alt_off + g->rules[r].n_alt; a++) {
            alt_rule[a] = r;
            for (int32_t i = g->alts[a]; g->elems[i].type != GR_END; i++) {
                if (g->elems[i].type == GR_REF) {
                    occ[fill[g->elems[i].val]++] = a;
                    pending[a]++;
                } else if (!cls_ok) {
                    pending[a] = INT32_MIN / 2; /* never reaches 0 */
                }
            }
        }
    int32_t qn = 0;
    for (int32_t a = 0; a < g->n_alts; a++)
        if (pending[a] == 0 && !holds[alt_rule[a]]) {
            holds[alt_rule[a]] = 1;
            queue[qn++] = alt_rule[a];
        }
    for (int32_t qi = 0; qi < qn; qi++) {
        int32_t r = queue[qi];
        for (int32_t k = occ_off[r]; k < occ_off[r + 1]; k++) {
            int32_t a = occ[k];
            if (--pending[a] == 0 && !holds[alt_rule[a]]) {
                holds[alt_rule[a]] = 1;
                queue[qn++] = alt_rule[a];
            }
        }
    }
    ok = true;
done:
    al_free(al, pending);
    al_free(al, alt_rule);
    al_free(al, occ_off);
    al_free(al, occ);
    al_free(al, queue);
    return ok;
}

/* Left recursion: a cycle in "rule A may start with a call of rule B" (after nullable calls).
 * Returns the id of a rule on a cycle, -1 when none, -2 on allocation failure. */
static int32_t left_recursive(const gr_grammar *g, const uint8_t *nullable) {
    int32_t found = -2;
    const slm_allocator *a = &g->alloc;
    uint8_t *color = al_calloc(a, (size_t)g->n_rules + 1, 1);
    int32_t *stack_r = al_array(a, (size_t)g->n_rules + 1, sizeof *stack_r);
    int32_t *stack_i = al_array(a, (size_t)g->n_rules + 1, sizeof *stack_i); /* next (alt, elem) cursor: elem index */
    int32_t *stack_a = al_array(a, (size_t)g->n_rules + 1, sizeof *stack_a);
    if (!color || !stack_r || !stack_i || !stack_a) goto done;
    found = -1;
    for (int32_t s = 0; s < g->n_rules && found == -1; s++) {
        if (color[s]) continue;
        int32_t sp = 0;
        stack_r[0] = s;
        stack_a[0] = g->rules[s].alt_off;
        stack_i[0] = g->rules[s].n_alt ? g->alts[g->rules[s].alt_off] : -1;
        color[s] = 1;
        while (sp >= 0 && found == -1) {
            int32_t r = stack_r[sp];
            const gr_rule *rr = &g->rules[r];
            int32_t next = -1;
            while (stack_a[sp] < rr->alt_off + rr->n_alt) { /* the next rule callable at the start */
                int32_t i = stack_i[sp];
                const gr_elem *el = &g->elems[i];
                if (el->type == GR_REF) {
                    stack_i[sp] = nullable[el->val] ? i + 1 : -1;
                    next = el->val;
                } else {
                    stack_i[sp] = -1;
                }
                if (stack_i[sp] < 0 || g->elems[stack_i[sp]].type == GR_END) {
                    stack_a[sp]++;
                    if (stack_a[sp] < rr->alt_off + rr->n_alt) stack_i[sp] = g->alts[stack_a[sp]];
                }
                if (next >= 0) break;
            }
            if (next < 0) {
                color[r] = 2;
                sp--;
            } else if (color[next] == 1) {
                found = next;
            } else if (color[next] == 0) {
                color[next] = 1;
                sp++;
                stack_r[sp] = next;
                stack_a[sp] = g->rules[next].alt_off;
                stack_i[sp] = g->alts[g->rules[next].alt_off];
            }
        }
    }
done:
    al_free(a, color);
    al_free(a, stack_r);
    al_free(a, stack_i);
    al_free(a, stack_a);
    return found;
}

/* The checks of grammar.h invariants 2-3 (1 and 4 hold by construction). */
static bool check(parser *p, const gr_grammar *g) {
    bool ok = false;
    uint8_t *holds = al_malloc(p->a, (size_t)g->n_rules + 1);
    int32_t *queue = al_array(p->a, (size_t)g->n_rules + 1, sizeof *queue);
    uint8_t *seen = al_calloc(p->a, (size_t)g->n_rules + 1, 1);
    if (!holds || !queue || !seen) {
        nomem(p);
        goto done;
    }
    if (!fixpoint(g, false, holds)) {
        nomem(p);
        goto done;
    }
    int32_t lr = left_recursive(g, holds);
    if (lr == -2) {
        nomem(p);
        goto done;
    }
    if (lr >= 0) {
        fail_at(p, SLM_ERR_FORMAT, p->rules[lr].def_at, "rule '%s' is left-recursive (it can call itself before matching "
                "a character); rewrite it with repetition", g->rules[lr].name);
        goto done;
    }
    if (!fixpoint(g, true, holds)) {
        nomem(p);
        goto done;
    }
    int32_t qn = 0;
    queue[qn++] = g->root;
    seen[g->root] = 1;
    for (int32_t qi = 0; qi < qn; qi++) {
        int32_t r = queue[qi];
        if (!holds[r]) {
            fail_at(p, SLM_ERR_FORMAT, p->rules[r].def_at, "rule '%s' can never end: every alternative calls a rule "
                    "that never ends", g->rules[r].name);
            goto done;
        }
        for (int32_t a = g->rules[r].alt_off; a < g->rules[r].alt_off + g->rules[r].n_alt; a++)
            for (int32_t i = g->alts[a]; g->elems[i].type != GR_END; i++)
                if (g->elems[i].type == GR_REF && !seen[g->elems[i].val]) {
                    seen[g->elems[i].val] = 1;
                    queue[qn++] = g->elems[i].val;
                }
    }
    ok = true;
done:
    al_free(p->a, holds);
    al_free(p->a, queue);
    al_free(p->a, seen);
    return ok;
}

void gr_free(gr_grammar *g) {
    if (!g) return;
    const slm_allocator a = g->alloc;
    for (int32_t r = 0; r < g->n_rules; r++) al_free(&a, g->rules[r].name);
    al_free(&a, g->rules);
    al_free(&a, g->elems);
    al_free(&a, g->alts);
    al_free(&a, g->classes);
    al_free(&a, g->ranges);
    al_free(&a, g);
}

static gr_grammar *flatten(parser *p) {
    gr_grammar *g = al_calloc(p->a, 1, sizeof *g);
    if (!g) return NULL;
    g->alloc = *p->a;
    size_t n_el = 0, n_alt = 0;
    for (int32_t r = 0; r < p->n_rules; r++) {
        n_el += (size_t)p->rules[r].elems.n / 2;
        for (int32_t i = 0; i < p->rules[r].elems.n; i += 2) n_alt += p->rules[r].elems.v[i] == GR_END;
    }
    g->elems = al_array(p->a, n_el + 1, sizeof *g->elems);
    g->alts = al_array(p->a, n_alt + 1, sizeof *g->alts);
    g->rules = al_calloc(p->a, (size_t)p->n_rules + 1, sizeof *g->rules);
    g->classes = al_array(p->a, (size_t)p->classes.n / 2 + 1, sizeof *g->classes);
    g->ranges = al_array(p->a, (size_t)p->ranges.n + 1, sizeof *g->ranges);
    if (!g->elems || !g->alts || !g->rules || !g->classes || !g->ranges) {
        gr_free(g);
        return NULL;
    }
    g->n_rules = p->n_rules;
    for (int32_t r = 0; r < p->n_rules; r++) {
        g->rules[r].name = p->rules[r].name;
        p->rules[r].name = NULL;
        g->rules[r].alt_off = g->n_alts;
        bool start = true;
        for (int32_t i = 0; i < p->rules[r].elems.n; i += 2) {
            if (start) {
                g->alts[g->n_alts++] = g->n_elems;
                g->rules[r].n_alt++;
            }
            g->elems[g->n_elems++] = (gr_elem){p->rules[r].elems.v[i], p->rules[r].elems.v[i + 1]};
            start = p->rules[r].elems.v[i] == GR_END;
        }
    }
    for (int32_t i = 0; i < p->classes.n; i += 2) g->classes[g->n_classes++] = (gr_class){p->classes.v[i], p->classes.v[i + 1]};
    for (int32_t i = 0; i < p->ranges.n; i++) g->ranges[i] = (uint32_t)p->ranges.v[i];
    g->n_ranges = p->ranges.n;
    return g;
}

slm_status gr_parse(const char *text, size_t len, const char *root, const slm_allocator *a, gr_grammar **out,
                    slm_err *e) {
    *out = NULL;
    if (!text) return err_set(e, SLM_ERR_INVALID_ARG, "grammar: NULL text");
    if (len > GR_MAX_TEXT) return err_set(e, SLM_ERR_RANGE, "grammar: %zu bytes, above the cap of %zu", len, GR_MAX_TEXT);
    if (!root) root = "root";
    parser p = {.a = a ? a : &al_default, .s = text, .len = len, .e = e};
    gr_grammar *g = NULL;
    skip_space(&p, true);
    while (!at_end(&p) && !p.failed) {
        size_t at = p.pos;
        if (!is_word(cur(&p))) {
            fail_at(&p, SLM_ERR_FORMAT, at, "expected a rule name");
            break;
        }
        while (is_word(cur(&p))) p.pos++;
        int32_t r = rule_id(&p, text + at, p.pos - at, at);
        if (r < 0) break;
        if (p.rules[r].def_at != SIZE_MAX) {
            int l, c;
            where(&p, p.rules[r].def_at, &l, &c);
            fail_at(&p, SLM_ERR_FORMAT, at, "rule '%s' defined twice (first at %d:%d)", p.rules[r].name, l, c);
            break;
        }
        p.rules[r].def_at = at;
        skip_space(&p, false);
        if (p.len - p.pos < 3 || memcmp(text + p.pos, "::=", 3)) {
            fail_at(&p, SLM_ERR_FORMAT, p.pos, "expected '::=' after rule name '%s'", p.rules[r].name);
            break;
        }
        p.pos += 3;
        skip_space(&p, true);
        if (!parse_alternates(&p, r, false)) break;
        if (!at_end(&p) && cur(&p) != '\n' && cur(&p) != '\r') {
            if (cur(&p) == ')') fail_at(&p, SLM_ERR_FORMAT, p.pos, "unmatched ')'");
            else fail_at(&p, SLM_ERR_FORMAT, p.pos, "unexpected '%c'", cur(&p));
            break;
        }
        skip_space(&p, true);
    }
    if (!p.failed && !p.n_rules) fail_at(&p, SLM_ERR_FORMAT, 0, "empty grammar (no rules)");
    for (int32_t r = 0; r < p.n_rules && !p.failed; r++)
        if (p.rules[r].def_at == SIZE_MAX) fail_at(&p, SLM_ERR_FORMAT, p.rules[r].ref_at, "undefined rule '%s'", p.rules[r].name);
    int32_t root_id = -1;
    if (!p.failed) {
        for (int32_t r = 0; r < p.n_rules && root_id < 0; r++)
            if (!strcmp(p.rules[r].name, root)) root_id = r;
        if (root_id < 0) fail_at(&p, SLM_ERR_FORMAT, 0, "no rule named '%s' (the start rule)", root);
    }
    if (!p.failed) {
        g = flatten(&p);
        if (!g) nomem(&p);
        else {
            g->root = root_id;
            if (!check(&p, g)) {
                gr_free(g);
                g = NULL;
            }
        }
    }
    for (int32_t r = 0; r < p.n_rules; r++) {
        al_free(p.a, p.rules[r].name);
        al_free(p.a, p.rules[r].elems.v);
    }
    al_free(p.a, p.rules);
    al_free(p.a, p.map);
    al_free(p.a, p.ranges.v);
    al_free(p.a, p.classes.v);
    if (p.failed) {
        gr_free(g);
        return e ? e->status : SLM_ERR_FORMAT;
    }
    *out = g;
    return SLM_OK;
}

/* Index of the range of class c that holds cp, or -1. */
static int32_t range_holding(const gr_grammar *g, int32_t c, uint32_t cp) {
    const uint32_t *r = g->ranges + g->classes[c].off;
    int32_t lo = 0, hi = g->classes[c].n - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        if (cp < r[2 * mid]) hi = mid - 1;
        else if (cp > r[2 * mid + 1]) lo = mid + 1;
        else return mid;
    }
    return -1;
}

bool gr_class_has(const gr_grammar *g, int32_t c, uint32_t cp) { return range_holding(g, c, cp) >= 0; }

bool gr_class_covers(const gr_grammar *g, int32_t c, uint32_t lo, uint32_t hi) {
    int32_t i = range_holding(g, c, lo); /* ranges are merged: one range holds all of [lo, hi] or none does */
    return i >= 0 && hi <= g->ranges[g->classes[c].off + 2 * i + 1];
}

bool gr_class_meets(const gr_grammar *g, int32_t c, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->ranges + g->classes[c].off;
    for (int32_t i = 0; i < g->classes[c].n; i++)
        if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return true;
    return false;
}
