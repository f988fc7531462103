/* spm.c — SentencePiece-style BPE of one text segment whose spaces are already escaped as "▁":
 * symbols start as UTF-8 characters (an invalid byte is a symbol of its own); the adjacent pair
 * whose concatenation is a vocabulary piece with the highest score is merged (leftmost on ties)
 * until none is left; each final symbol becomes its token, or its bytes as <0xNN> tokens (byte
 * fallback), or the unknown token. Does not add the space prefix or match special tokens.
 * References: sentencepiece bpe_model.cc (agenda order, pieces eligible for merging); llama.cpp
 * llama-vocab.cpp llm_tokenizer_spm. */
#include <string.h>

#include "base/utf8.h"
#include "text/tok_impl.h"

typedef struct sym {
    int32_t prev, next;
    uint32_t off, len; /* len 0 = merged away */
} sym;

typedef struct bigram {
    float score;
    int32_t left, right;
    uint32_t size; /* byte length of the merged text when the bigram was made */
    int32_t id;
} bigram;

static bool bigram_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void bq_push(bigram *h, size_t *n, bigram c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static bigram bq_pop(bigram *h, size_t *n) {
    bigram top = h[0];
    bigram last = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, k = i;
        const bigram *best = &last;
        if (l < m && bigram_before(&h[l], best)) { k = l; best = &h[l]; }
        if (r < m && bigram_before(&h[r], best)) { k = r; }
        if (k == i) break;
        h[i] = h[k];
        i = k;
    }
    if (m > 0) h[i] = last;
    return top;
}

/* Pieces that take part in merges: sentencepiece keeps control, unknown and byte pieces apart. */
static bool mergeable(const slm_tokenizer *t, int32_t id) {
    uint8_t ty = t->tokens[id].type;
    return ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNUSED || ty == TOK_TYPE_UNDEFINED;
}

static void try_bigram(const slm_tokenizer *t, const char *s, const sym *sy, bigram *h, size_t *nh, int32_t l,
                       int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = sy[l].len + sy[r].len;
    int32_t id = tok_find(t, s + sy[l].off, size);
    if (id < 0 || !mergeable(t, id)) return;
    bigram b = {t->tokens[id].score, l, r, size, id};
    bq_push(h, nh, b);
}

static slm_status emit_symbol(const slm_tokenizer *t, const char *s, const sym *y, tok_ids *out, size_t *bad_off) {
    int32_t id = tok_find(t, s + y->off, y->len);
    if (id >= 0 && t->tokens[id].type != TOK_TYPE_BYTE && t->tokens[id].type != TOK_TYPE_CONTROL)
        return tok_ids_push(out, id, &t->alloc);
    for (uint32_t k = 0; k < y->len; k++) {
        int32_t b = t->byte_id[(uint8_t)s[y->off + k]];
        if (b < 0) {
            /* No byte fallback: one unknown token for the whole symbol (refused without one). */
            if (t->text_unk >= 0) return tok_ids_push(out, t->text_unk, &t->alloc);
            *bad_off = y->off;
            return SLM_ERR_INVALID_ARG;
        }
        slm_status st = tok_ids_push(out, b, &t->alloc);
        if (st != SLM_OK) return st;
    }
    return SLM_OK;
}

slm_status spm_encode_segment(const slm_tokenizer *t, const char *s, size_t n, tok_ids *out, size_t *bad_off) {
    if (n == 0) return SLM_OK;
    if (n > INT32_MAX / 4) return SLM_ERR_RANGE;
    const slm_allocator *a = &t->alloc;
    sym *sy = al_array(a, n, sizeof *sy);
    bigram *h = al_array(a, 3 * n, sizeof *h);
    if (!sy || !h) {
        al_free(a, sy);
        al_free(a, h);
        return SLM_ERR_NOMEM;
    }
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_decode((const uint8_t *)s + i, n - i, NULL);
        if (l == 0) l = 1;
        sy[ns] = (sym){(int32_t)ns - 1, -1, (uint32_t)i, (uint32_t)l};
        if (ns > 0) sy[ns - 1].next = (int32_t)ns;
        ns++;
        i += l;
    }
    size_t nh = 0;
    for (size_t i = 0; i + 1 < ns; i++) try_bigram(t, s, sy, h, &nh, (int32_t)i, (int32_t)i + 1);
    while (nh > 0) {
        bigram b = bq_pop(h, &nh);
        sym *l = &sy[b.left], *r = &sy[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.size || l->next != b.right) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sy[r->next].prev = b.left;
        try_bigram(t, s, sy, h, &nh, l->prev, b.left);
        try_bigram(t, s, sy, h, &nh, b.left, l->next);
    }
    slm_status st = SLM_OK;
    for (int32_t i = 0; i >= 0 && st == SLM_OK; i = sy[i].next) st = emit_symbol(t, s, &sy[i], out, bad_off);
    al_free(a, sy);
    al_free(a, h);
    return st;
}
