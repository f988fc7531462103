/* constraint.c — the public grammar API (statelm.h "Constrained decoding"): slm_grammar wraps a
 * gr_grammar; slm_grammar_vocab is a tokenizer's byte trie; slm_constraint walks the trie with the
 * matcher's byte automaton (matcher.h) to produce token masks, and caches the mask of each dstate.
 *
 * The trie is stored in preorder (trie_node): node i has a byte, a depth (the root, node 0, has
 * depth 0), the index just past its subtree (skip) and the tokens whose bytes end at it.
 * A mask walks the nodes in order with one automaton state per depth and jumps over the subtree of
 * a dead state, so its cost is the number of trie nodes on live paths; a token that spans several
 * grammar terminals or ends inside a UTF-8 character is just a longer path.
 *
 * Memory (statelm.h): a grammar allocates through slm_grammar_params' hooks (malloc/free without
 * params), a vocabulary through its tokenizer's allocator, a constraint (matcher tables, cached
 * masks) through its vocabulary's; each object keeps a copy of its allocator and frees through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/params.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

#define MAX_TOKEN_BYTES 4096         /* longer tokens are left out of the trie (never allowed) */
#define CONSTRAINT_MEM_CAP ((size_t)128 << 20) /* matcher tables + cached masks, per constraint */

struct slm_grammar {
    gr_grammar *g; /* its alloc is the handle's too */
};

typedef struct trie_node {
    int32_t skip;    /* index just past this node's subtree */
    int32_t tok_off; /* toks[tok_off, tok_off + tok_n) end here */
    int32_t tok_n;
    uint16_t depth;  /* bytes from the root */
    uint8_t byte;
} trie_node;

struct slm_grammar_vocab {
    slm_allocator alloc; /* every block below, and the constraints on the vocabulary */
    int32_t n_vocab;
    int32_t n_nodes;
    trie_node *nodes; /* (n_nodes), preorder */
    int32_t *toks;    /* token ids by node */
    int32_t max_depth;
    uint32_t *bytes_off; /* (n_vocab + 1): bytes of id in pool[bytes_off[id], bytes_off[id + 1]); empty = not in trie */
    uint8_t *pool;
    int32_t *eog;        /* end-of-generation ids, ascending */
    int32_t n_eog;
    uint8_t *is_eog;     /* (n_vocab) */
};

struct slm_constraint {
    slm_allocator alloc; /* the vocabulary's: this block, st, scratch and both matchers' tables */
    const slm_grammar *g;
    const slm_grammar_vocab *v;
    gm m;
    gm local;           /* the context split's matcher (matcher.h): stacks cut, masks per cut set */
    int32_t start, cur; /* dstates; start = -1 after a flush until the next reset */
    bool ended;         /* an end-of-generation token was accepted */
    int32_t *st;        /* (max_depth + 1) automaton state per trie depth during a walk */
    uint32_t *scratch;  /* (words) */
    size_t words;       /* (v->n_vocab + 31) / 32 */
    uint64_t n_walked, n_cached, n_split, n_split_cached;
    char err[256];
};

/* ---- grammars ---------------------------------------------------------------------------------- */

static void copy_err(const slm_err *e, char *err, size_t err_cap) {
    if (err && err_cap) err_copy_out(e, err, err_cap);
}

SLM_API slm_grammar_params slm_grammar_params_default(void) {
    slm_grammar_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    return p;
}

/* The caller's params over the defaults, and the allocator its hooks make (both or neither). */
static slm_grammar_params read_params(const slm_grammar_params *params, slm_allocator *a) {
    slm_grammar_params p = slm_grammar_params_default();
    params_read(&p, sizeof p, params);
    *a = params_allocator(p.alloc_fn, p.free_fn, p.alloc_user_data);
    return p;
}

/* The public handle over GBNF text, through a. */
static slm_status grammar_new(const char *text, size_t len, const char *root, const slm_allocator *a, slm_grammar **out,
                              slm_err *e) {
    gr_grammar *g = NULL;
    slm_status st = gr_parse(text, len, root, a, &g, e);
    if (st) return st;
    slm_grammar *h = al_calloc(a, 1, sizeof *h);
    if (!h) {
        gr_free(g);
        return err_set(e, SLM_ERR_NOMEM, "grammar: out of memory");
    }
    h->g = g;
    *out = h;
    return SLM_OK;
}

SLM_API slm_status slm_grammar_create_with(const char *text, size_t len, const char *root,
                                           const slm_grammar_params *params, slm_grammar **out, char *err,
                                           size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (err && err_cap) err[0] = 0;
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    slm_allocator a;
    read_params(params, &a);
    slm_status st = grammar_new(text, len, root, &a, out, &e);
    if (st) copy_err(&e, err, err_cap);
    return st;
}

SLM_API slm_status slm_grammar_create(const char *text, size_t len, const char *root, slm_grammar **out, char *err,
                                      size_t err_cap) {
    return slm_grammar_create_with(text, len, root, NULL, out, err, err_cap);
}

SLM_API slm_status slm_grammar_from_json_schema_with(const char *schema, size_t len, const slm_grammar_params *params,
                                                     slm_grammar **out, char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (err && err_cap) err[0] = 0;
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!schema) return SLM_ERR_INVALID_ARG;
    slm_allocator a;
    slm_grammar_params p = read_params(params, &a);
    char *gbnf = NULL;
    slm_status st = gr_schema_to_gbnf(schema, len, p.schema_flags & SLM_SCHEMA_STRICT, &a, &gbnf, &e);
    if (!st) st = grammar_new(gbnf, strlen(gbnf), "root", &a, out, &e);
    al_free(&a, gbnf);
    if (st) copy_err(&e, err, err_cap);
    return st;
}

SLM_API slm_status slm_grammar_from_json_schema(const char *schema, size_t len, slm_grammar **out, char *err,
                                                size_t err_cap) {
    return slm_grammar_from_json_schema_with(schema, len, NULL, out, err, err_cap);
}

SLM_API slm_status slm_grammar_from_json_schema_ex(const char *schema, size_t len, unsigned flags, slm_grammar **out,
                                                   char *err, size_t err_cap) {
    slm_grammar_params p = slm_grammar_params_default();
    p.schema_flags = flags;
    return slm_grammar_from_json_schema_with(schema, len, &p, out, err, err_cap);
}

SLM_API slm_status slm_json_schema_to_gbnf(const char *schema, size_t len, char *buf, size_t cap, size_t *n_out,
                                           char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (err && err_cap) err[0] = 0;
    if (n_out) *n_out = 0;
    if (!schema || !n_out || (!buf && cap)) return SLM_ERR_INVALID_ARG;
    char *gbnf = NULL;
    slm_status st = gr_schema_to_gbnf(schema, len, 0, NULL, &gbnf, &e);
    if (st) {
        copy_err(&e, err, err_cap);
        return st;
    }
    size_t n = strlen(gbnf);
    *n_out = n;
    if (cap > n) memcpy(buf, gbnf, n + 1);
    al_free(NULL, gbnf);
    return cap > n ? SLM_OK : SLM_ERR_RANGE;
}

SLM_API void slm_grammar_destroy(slm_grammar *g) {
    if (!g) return;
    const slm_allocator a = g->g->alloc;
    gr_free(g->g);
    al_free(&a, g);
}

/* ---- the vocabulary trie ------------------------------------------------------------------------- */

typedef struct tok_ref {
    const uint8_t *b;
    uint32_t len;
    int32_t id;
} tok_ref;

/* Bytes in lexicographic order (a prefix first), then id. */
static int cmp_token_bytes(const void *a, const void *b) {
    const tok_ref *x = a, *y = b;
    int c = memcmp(x->b, y->b, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

SLM_API void slm_grammar_vocab_destroy(slm_grammar_vocab *v) {
    if (!v) return;
    const slm_allocator a = v->alloc;
    al_free(&a, v->nodes);
    al_free(&a, v->toks);
    al_free(&a, v->bytes_off);
    al_free(&a, v->pool);
    al_free(&a, v->eog);
    al_free(&a, v->is_eog);
    al_free(&a, v);
}

static int32_t lcp(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb) {
    uint32_t i = 0;
    while (i < la && i < lb && a[i] == b[i]) i++;
    return (int32_t)i;
}

/* Whether t has a path in the trie: text (which never holds the mark byte), or a control token's
 * marked text; bytes in 1..MAX_TOKEN_BYTES. */
static bool in_trie(const gv_token *t) {
    if (t->kind != GV_TEXT && t->kind != GV_CONTROL) return false;
    if (t->len == 0 || t->len > MAX_TOKEN_BYTES) return false;
    return t->kind == GV_CONTROL || !memchr(t->bytes, GR_TOKEN_MARK_BYTE, t->len);
}

slm_status gv_create(const gv_token *tokens, int32_t n, const slm_allocator *al, slm_grammar_vocab **out) {
    *out = NULL;
    const slm_allocator *a = al ? al : &al_default;
    tok_ref *order = NULL;
    int32_t *path = NULL;
    slm_grammar_vocab *v = al_calloc(a, 1, sizeof *v);
    if (!v) return SLM_ERR_NOMEM;
    v->alloc = *a;
    v->n_vocab = n;
    v->bytes_off = al_calloc(a, (size_t)n + 1, sizeof *v->bytes_off);
    v->eog = al_array(a, (size_t)n + 1, sizeof *v->eog);
    v->is_eog = al_calloc(a, (size_t)n + 1, 1);
    order = al_array(a, (size_t)n + 1, sizeof *order);
    if (!v->bytes_off || !v->eog || !v->is_eog || !order) goto nomem;
    const uint8_t mark = GR_TOKEN_MARK_BYTE;
    size_t total = 0, nm = 1;
    for (int32_t id = 0; id < n; id++)
        if (in_trie(&tokens[id])) total += tokens[id].len + (tokens[id].kind == GV_CONTROL ? 2 * nm : 0);
    if (total > UINT32_MAX) goto nomem;
    v->pool = al_malloc(a, total + 1);
    if (!v->pool) goto nomem;
    uint32_t at = 0;
    int32_t n_in = 0;
    for (int32_t id = 0; id < n; id++) {
        v->bytes_off[id] = at;
        const gv_token *t = &tokens[id];
        if (t->kind == GV_EOG) {
            v->eog[v->n_eog++] = id;
            v->is_eog[id] = 1;
        }
        if (!in_trie(t)) continue;
        uint32_t start = at;
        if (t->kind == GV_CONTROL) v->pool[at++] = mark;
        memcpy(v->pool + at, t->bytes, t->len);
        at += t->len;
        if (t->kind == GV_CONTROL) v->pool[at++] = mark;
        order[n_in++] = (tok_ref){NULL, at - start, id};
    }
    v->bytes_off[n] = at;
    for (int32_t k = 0; k < n_in; k++) order[k].b = v->pool + v->bytes_off[order[k].id];
    qsort(order, (size_t)n_in, sizeof *order, cmp_token_bytes);
    /* at most one node per byte, plus the root */
    size_t cap = total + 1;
    v->nodes = al_calloc(a, cap, sizeof *v->nodes);
    v->toks = al_array(a, (size_t)n_in + 1, sizeof *v->toks);
    path = al_array(a, MAX_TOKEN_BYTES + 2 * nm + 1, sizeof *path);
    if (!v->nodes || !v->toks || !path) goto nomem;
    path[0] = 0;
    v->n_nodes = 1;
    int32_t cur_depth = 0;
    for (int32_t k = 0; k < n_in; k++) {
        int32_t id = order[k].id;
        const uint8_t *b = order[k].b;
        uint32_t len = order[k].len;
        int32_t l = k ? lcp(order[k - 1].b, order[k - 1].len, b, len) : 0;
        for (int32_t d = cur_depth; d > l; d--) v->nodes[path[d]].skip = v->n_nodes;
        for (int32_t d = l + 1; d <= (int32_t)len; d++) {
            int32_t i = v->n_nodes++;
            v->nodes[i] = (trie_node){0, k, 0, (uint16_t)d, b[d - 1]};
            path[d] = i;
        }
        cur_depth = (int32_t)len;
        if (cur_depth > v->max_depth) v->max_depth = cur_depth;
        int32_t node = path[len];
        if (!v->nodes[node].tok_n) v->nodes[node].tok_off = k;
        v->nodes[node].tok_n++;
        v->toks[k] = id;
    }
    for (int32_t d = cur_depth; d >= 0; d--) v->nodes[path[d]].skip = v->n_nodes;
    al_free(a, order);
    al_free(a, path);
    *out = v;
    return SLM_OK;
nomem:
    al_free(a, order);
    al_free(a, path);
    slm_grammar_vocab_destroy(v);
    return SLM_ERR_NOMEM;
}

int32_t gv_n_nodes(const slm_grammar_vocab *v) { return v->n_nodes; }

SLM_API slm_status slm_grammar_vocab_create(const slm_tokenizer *tok, slm_grammar_vocab **out) {
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!tok) return SLM_ERR_INVALID_ARG;
    int32_t n = slm_tokenizer_n_vocab(tok);
    const slm_allocator *a = tok_allocator(tok);
    gv_token *ts = al_calloc(a, (size_t)n + 1, sizeof *ts);
    if (!ts) return SLM_ERR_NOMEM;
    for (int32_t id = 0; id < n; id++) {
        size_t len = 0;
        slm_tokenizer_token_bytes(tok, id, NULL, 0, &len);
        ts[id].bytes = (const uint8_t *)tok_bytes(tok, id);
        ts[id].len = (uint32_t)(len < UINT32_MAX ? len : 0);
        ts[id].kind = slm_tokenizer_is_eog(tok, id) ? GV_EOG : tok_is_control(tok, id) ? GV_CONTROL : GV_TEXT;
    }
    slm_status st = gv_create(ts, n, a, out);
    al_free(a, ts);
    return st;
}

/* ---- constraints --------------------------------------------------------------------------------- */

SLM_API void slm_constraint_destroy(slm_constraint *c) {
    if (!c) return;
    gm_deinit(&c->m);
    gm_deinit(&c->local);
    const slm_allocator a = c->alloc;
    al_free(&a, c->st);
    al_free(&a, c->scratch);
    al_free(&a, c);
}

SLM_API slm_status slm_constraint_create(const slm_grammar *g, const slm_grammar_vocab *v, slm_constraint **out) {
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!g || !v) return SLM_ERR_INVALID_ARG;
    slm_constraint *c = al_calloc(&v->alloc, 1, sizeof *c);
    if (!c) return SLM_ERR_NOMEM;
    c->alloc = v->alloc;
    c->g = g;
    c->v = v;
    c->words = ((size_t)v->n_vocab + 31) / 32;
    gm_init(&c->m, g->g, &c->alloc);
    gm_init(&c->local, g->g, &c->alloc);
    c->st = al_array(&c->alloc, (size_t)v->max_depth + 1, sizeof *c->st);
    c->scratch = al_array(&c->alloc, c->words + 1, sizeof *c->scratch);
    c->start = c->cur = gm_start(&c->m);
    if (!c->st || !c->scratch || c->start < 0) { /* the start is never GM_DEAD: the root derives something */
        slm_constraint_destroy(c);
        return SLM_ERR_NOMEM;
    }
    *out = c;
    return SLM_OK;
}

SLM_API void slm_constraint_reset(slm_constraint *c) {
    if (!c) return;
    c->ended = false;
    c->err[0] = 0;
    if (c->start < 0) c->start = gm_start(&c->m);
    if (c->start < 0) { /* out of memory even for the start: drop the tables and retry once */
        gm_deinit(&c->m);
        gm_init(&c->m, c->g->g, &c->alloc);
        c->start = gm_start(&c->m);
    }
    c->cur = c->start;
}

/* Drops the matcher's tables (keeping the current state) when they outgrow the cap. */
static slm_status keep_small(slm_constraint *c) {
    if (c->m.bytes <= CONSTRAINT_MEM_CAP) return SLM_OK;
    slm_status st = gm_flush(&c->m, &c->cur);
    c->start = -1;
    if (st) {
        slm_constraint_reset(c);
        snprintf(c->err, sizeof c->err, "constraint: out of memory; reset to the start");
    }
    return st;
}

/* ORs into bits the tokens of trie nodes [from, to) (one subtree, or all of it from node 1) that
 * dstate `d0` of m allows, d0 being the state at depth(from) - 1. With esc (m is the context
 * split's matcher), a node where a token's path escapes is appended to esc (*n_esc) with its own
 * tokens allowed and its subtree left to the real matcher. */
static slm_status walk(slm_constraint *c, gm *m, int32_t d0, int32_t from, int32_t to, uint32_t *bits, int32_t **esc,
                       int32_t *n_esc, int32_t *cap_esc) {
    const slm_grammar_vocab *v = c->v;
    int32_t *st = c->st;
    st[v->nodes[from].depth - 1] = d0;
    for (int32_t i = from; i < to;) {
        const trie_node *nd = &v->nodes[i];
        int32_t t = gm_step(m, st[nd->depth - 1], nd->byte);
        if (t < 0) {
            if (t == GM_NOMEM) return SLM_ERR_NOMEM;
            i = nd->skip;
            continue;
        }
        for (int32_t k = nd->tok_off, e = k + nd->tok_n; k < e; k++) bits[v->toks[k] / 32] |= 1u << (v->toks[k] % 32);
        if (esc && gm_escaped(m, t)) {
            if (*n_esc == *cap_esc) {
                int32_t cap = *cap_esc ? 2 * *cap_esc : 64;
                int32_t *grown = al_realloc(m->a, *esc, (size_t)*cap_esc * sizeof *grown, (size_t)cap * sizeof *grown);
                if (!grown) return SLM_ERR_NOMEM;
                *esc = grown;
                *cap_esc = cap;
            }
            (*esc)[(*n_esc)++] = i;
            i = nd->skip;
            continue;
        }
        st[nd->depth] = t;
        i++;
    }
    return SLM_OK;
}

/* The mask of the current dstate into c->scratch. Split when gm_local_start cuts its stacks: the
 * cut set's own mask and escape nodes (computed once per cut set, kept with it), then the subtree
 * of each escape node walked from the real dstate; else the whole trie from the real dstate. */
static slm_status compute_mask(slm_constraint *c) {
    const slm_grammar_vocab *v = c->v;
    size_t mask_bytes = c->words * sizeof *c->scratch;
    memset(c->scratch, 0, mask_bytes);
    if (v->n_nodes < 2) return SLM_OK;
    if (c->local.bytes > CONSTRAINT_MEM_CAP / 2) { /* the split's tables are a cache: drop them all */
        gm_deinit(&c->local);
        gm_init(&c->local, c->g->g, &c->alloc);
    }
    int32_t ld = gm_local_start(&c->local, &c->m, c->cur);
    if (ld == GM_NOMEM) return SLM_ERR_NOMEM;
    if (ld == GM_NO_SPLIT) return walk(c, &c->m, c->cur, 1, v->n_nodes, c->scratch, NULL, NULL, NULL);
    gm_dstate *lds = &c->local.ds[ld];
    if (!lds->mask) {
        int32_t *esc = NULL, n_esc = 0, cap_esc = 0;
        slm_status st = walk(c, &c->local, ld, 1, v->n_nodes, c->scratch, &esc, &n_esc, &cap_esc);
        uint32_t *copy = st ? NULL : al_malloc(&c->alloc, mask_bytes);
        if (!copy) {
            al_free(&c->alloc, esc);
            return SLM_ERR_NOMEM;
        }
        memcpy(copy, c->scratch, mask_bytes);
        lds = &c->local.ds[ld]; /* the walk may have grown the table */
        lds->mask = copy;
        lds->esc = esc;
        lds->n_esc = n_esc;
        c->local.bytes += mask_bytes + (size_t)cap_esc * sizeof *esc;
    } else {
        memcpy(c->scratch, lds->mask, mask_bytes);
        c->n_split_cached++;
    }
    c->n_split++;
    for (int32_t k = 0; k < lds->n_esc; k++) {
        int32_t e = c->local.ds[ld].esc[k];
        const trie_node *nd = &v->nodes[e];
        const uint8_t *path = v->pool + v->bytes_off[v->toks[nd->tok_off]]; /* a token through node e */
        int32_t d = c->cur;
        for (int32_t j = 0; j + 1 < nd->depth && d >= 0; j++) d = gm_step(&c->m, d, path[j]);
        if (d == GM_NOMEM) return SLM_ERR_NOMEM;
        if (d < 0) continue; /* not reached: the cut set's path was live, so the real one is */
        slm_status st = walk(c, &c->m, d, e, nd->skip, c->scratch, NULL, NULL, NULL);
        if (st) return st;
    }
    return SLM_OK;
}

SLM_API slm_status slm_constraint_mask(slm_constraint *c, uint32_t *mask, int32_t n_vocab) {
    if (!c || !mask || n_vocab <= 0) return SLM_ERR_INVALID_ARG;
    slm_status st = keep_small(c);
    if (st) return st;
    const slm_grammar_vocab *v = c->v;
    const uint32_t *bits = c->scratch;
    if (c->ended) {
        memset(c->scratch, 0, c->words * sizeof *c->scratch);
    } else if (c->m.ds[c->cur].mask) {
        bits = c->m.ds[c->cur].mask;
        c->n_cached++;
    } else {
        st = compute_mask(c);
        if (st) {
            gm_deinit(&c->m);
            gm_init(&c->m, c->g->g, &c->alloc);
            gm_deinit(&c->local);
            gm_init(&c->local, c->g->g, &c->alloc);
            c->start = -1;
            slm_constraint_reset(c);
            snprintf(c->err, sizeof c->err, "constraint: out of memory; reset to the start");
            return st;
        }
        c->n_walked++;
        size_t mask_bytes = c->words * sizeof *c->scratch;
        if (c->m.bytes + mask_bytes <= CONSTRAINT_MEM_CAP) {
            uint32_t *copy = al_malloc(&c->alloc, mask_bytes);
            if (copy) {
                memcpy(copy, c->scratch, mask_bytes);
                c->m.ds[c->cur].mask = copy;
                c->m.bytes += mask_bytes;
            }
        }
    }
    size_t words = ((size_t)n_vocab + 31) / 32, common = words < c->words ? words : c->words;
    memcpy(mask, bits, common * sizeof *mask);
    if (words > common) memset(mask + common, 0, (words - common) * sizeof *mask);
    if (n_vocab < v->n_vocab && n_vocab % 32) mask[words - 1] &= (1u << (n_vocab % 32)) - 1;
    if (c->ended || gm_can_end(&c->m, c->cur))
        for (int32_t k = 0; k < v->n_eog; k++)
            if (v->eog[k] < n_vocab) mask[v->eog[k] / 32] |= 1u << (v->eog[k] % 32);
    return SLM_OK;
}

SLM_API slm_status slm_constraint_accept(slm_constraint *c, int32_t token) {
    if (!c) return SLM_ERR_INVALID_ARG;
    c->err[0] = 0;
    const slm_grammar_vocab *v = c->v;
    if (token < 0 || token >= v->n_vocab) {
        snprintf(c->err, sizeof c->err, "token %d is outside the vocabulary [0, %d)", token, v->n_vocab);
        return SLM_ERR_INVALID_ARG;
    }
    if (v->is_eog[token]) {
        if (!c->ended && !gm_can_end(&c->m, c->cur)) {
            snprintf(c->err, sizeof c->err, "end-of-generation token %d where the grammar cannot end", token);
            return SLM_ERR_INVALID_ARG;
        }
        c->ended = true;
        return SLM_OK;
    }
    if (c->ended) {
        snprintf(c->err, sizeof c->err, "token %d after the end of generation", token);
        return SLM_ERR_INVALID_ARG;
    }
    uint32_t from = v->bytes_off[token], to = v->bytes_off[token + 1];
    if (from == to) {
        snprintf(c->err, sizeof c->err, "token %d has no text the grammar could match (control or empty)", token);
        return SLM_ERR_INVALID_ARG;
    }
    slm_status st = keep_small(c);
    if (st) return st;
    int32_t d = c->cur;
    for (uint32_t i = from; i < to && d >= 0; i++) d = gm_step(&c->m, d, v->pool[i]);
    if (d == GM_NOMEM) {
        snprintf(c->err, sizeof c->err, "constraint: out of memory");
        return SLM_ERR_NOMEM;
    }
    if (d < 0) {
        snprintf(c->err, sizeof c->err, "token %d is not allowed by the grammar here", token);
        return SLM_ERR_INVALID_ARG;
    }
    c->cur = d;
    return SLM_OK;
}

SLM_API bool slm_constraint_can_end(const slm_constraint *c) { return c && (c->ended || gm_can_end(&c->m, c->cur)); }

SLM_API bool slm_constraint_done(const slm_constraint *c) { return c && (c->ended || gm_only_end(&c->m, c->cur)); }

SLM_API const char *slm_constraint_errmsg(const slm_constraint *c) { return c ? c->err : SLM_NULL_HANDLE_MSG; }

SLM_API void slm_constraint_stats(const slm_constraint *c, uint64_t *n_walked, uint64_t *n_cached) {
    if (n_walked) *n_walked = c ? c->n_walked : 0;
    if (n_cached) *n_cached = c ? c->n_cached : 0;
}

static slm_status sampler_mask(void *ud, uint32_t *mask, int32_t n_vocab) {
    return slm_constraint_mask(ud, mask, n_vocab);
}

/* Bit `token` of slm_constraint_mask without building the mask: the token's bytes through the
 * automaton (false also when its tables cannot grow: the sampler then asks for the mask, which
 * reports that). */
static bool sampler_allows(void *ud, int32_t token) {
    slm_constraint *c = ud;
    const slm_grammar_vocab *v = c->v;
    if (token < 0 || token >= v->n_vocab) return false;
    if (v->is_eog[token]) return c->ended || gm_can_end(&c->m, c->cur);
    if (c->ended) return false;
    uint32_t from = v->bytes_off[token], to = v->bytes_off[token + 1];
    if (from == to || c->m.bytes > CONSTRAINT_MEM_CAP) return false;
    int32_t d = c->cur;
    for (uint32_t i = from; i < to && d >= 0; i++) d = gm_step(&c->m, d, v->pool[i]);
    return d >= 0;
}

/* The mask costs a copy: cached for this state, or all zero after the end. */
static bool sampler_mask_at_hand(void *ud) {
    const slm_constraint *c = ud;
    return c->ended || c->m.ds[c->cur].mask;
}

SLM_API slm_status slm_sampler_set_constraint(slm_sampler *s, slm_constraint *c) {
    if (!s) return SLM_ERR_INVALID_ARG;
    samp_filter f = {sampler_mask, sampler_allows, sampler_mask_at_hand, c};
    samp_set_filter(s, c ? &f : NULL);
    return SLM_OK;
}

const gr_grammar *gr_of(const slm_grammar *g) { return g->g; }

void gc_split_stats(const slm_constraint *c, uint64_t *n_split, uint64_t *n_split_cached) {
    *n_split = c->n_split;
    *n_split_cached = c->n_split_cached;
}
