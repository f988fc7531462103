/* bpe.c — BPE of one pre-tokenised piece: symbols start as the tokens of each byte's GPT-2 mapped
 * character (byte-level) or of each UTF-8 character (raw, Gemma 4), then the adjacent pair with
 * the lowest merge rank (leftmost on ties) is merged until no pair has a rank. A binary heap of
 * candidate pairs with lazy invalidation makes a piece of n bytes cost O(n log n). Does not split
 * text (pretok.c) or match special tokens (tokenizer.c).
 * References: docs/spec/gguf.md §7 (byte mapping, merge ranks); HF tokenizers models/bpe/word.rs
 * (tie-breaking by position, ignore_merges, byte fallback); llama.cpp llama-vocab.cpp (Gemma 4's
 * newline pieces). */
#include <string.h>

#include "base/utf8.h"
#include "text/tok_impl.h"

typedef struct cand {
    int32_t rank;
    int32_t left, right;       /* symbol indices */
    int32_t left_id, right_id; /* ids when the candidate was made (stale if they changed) */
    int32_t result;
} cand;

static bool cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0];
    cand last = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, k = i;
        const cand *best = &last;
        if (l < m && cand_less(&h[l], best)) { k = l; best = &h[l]; }
        if (r < m && cand_less(&h[r], best)) { k = r; }
        if (k == i) break;
        h[i] = h[k];
        i = k;
    }
    if (m > 0) h[i] = last;
    return top;
}

static inline size_t merge_hash(uint64_t key, size_t cap) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* Rank and result of merging ids (l, r); false when the pair is not a merge. */
static bool merge_lookup(const slm_tokenizer *t, int32_t l, int32_t r, int32_t *rank, int32_t *result) {
    if (t->merge_cap == 0 || l < 0 || r < 0) return false;
    uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    for (size_t i = merge_hash(key, t->merge_cap);; i = (i + 1) & (t->merge_cap - 1)) {
        const tok_merge_slot *s = &t->merges[i];
        if (s->key == UINT64_MAX) return false;
        if (s->key == key) {
            *rank = s->rank;
            *result = s->result;
            return true;
        }
    }
}

static void try_cand(const slm_tokenizer *t, const int32_t *id, cand *h, size_t *nh, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    cand c = {0, left, right, id[left], id[right], 0};
    if (merge_lookup(t, id[left], id[right], &c.rank, &c.result)) heap_push(h, nh, c);
}

/* id < 0: the byte at offset off has no token of its own (and took part in no merge). */
static slm_status emit(const slm_tokenizer *t, int32_t id, size_t off, tok_ids *out, size_t *bad_off) {
    if (id >= 0) return tok_ids_push(out, id, &t->alloc);
    if (t->text_unk >= 0) return tok_ids_push(out, t->text_unk, &t->alloc);
    *bad_off = off;
    return SLM_ERR_INVALID_ARG;
}

/* Raw BPE: a symbol without a token of its own (s[off, off + len), never merged) as its bytes'
 * <0xNN> tokens. */
static slm_status emit_raw(const slm_tokenizer *t, int32_t id, const uint8_t *s, size_t off, size_t len, tok_ids *out,
                           size_t *bad_off) {
    if (id >= 0) return tok_ids_push(out, id, &t->alloc);
    for (size_t k = 0; k < len; k++) {
        slm_status st = emit(t, t->byte_id[s[off + k]], off + k, out, bad_off);
        if (st != SLM_OK) return st;
    }
    return SLM_OK;
}

static bool all_newlines(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n') return false;
    return true;
}

slm_status bpe_encode_piece(const slm_tokenizer *t, const uint8_t *s, size_t n, tok_ids *out, size_t *bad_off) {
    if (n == 0) return SLM_OK;
    if (n == 1 && !t->raw_bpe) return emit(t, t->byte_id[s[0]], 0, out, bad_off);
    if (n > INT32_MAX / 4) return SLM_ERR_RANGE;
    const slm_allocator *a = &t->alloc;
    if (t->raw_bpe && (t->ignore_merges || all_newlines(s, n))) {
        int32_t id = tok_find(t, (const char *)s, n);
        if (id >= 0) return tok_ids_push(out, id, a);
    } else if (t->ignore_merges) {
        /* The piece as mapped text; each byte maps to a 1- or 2-byte UTF-8 character. */
        char small[512];
        char *m = n * 2 <= sizeof small ? small : al_array(a, n, 2);
        if (!m) return SLM_ERR_NOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t cp = tok_byte_to_cp(s[i]);
            if (cp < 0x80) {
                m[k++] = (char)cp;
            } else {
                m[k++] = (char)(0xC0 | (cp >> 6));
                m[k++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        int32_t id = tok_find(t, m, k);
        if (m != small) al_free(a, m);
        if (id >= 0) return tok_ids_push(out, id, a);
    }
    int32_t *id = al_array(a, n, 3 * sizeof(int32_t));
    cand *h = al_array(a, 3 * n, sizeof(cand));
    if (!id || !h) {
        al_free(a, id);
        al_free(a, h);
        return SLM_ERR_NOMEM;
    }
    /* Symbol i starts at byte i; raw symbols are characters, so some indices stay unused. */
    int32_t *prev = id + n, *next = id + 2 * n;
    int32_t last = -1;
    for (size_t i = 0; i < n;) {
        size_t l = 1;
        if (t->raw_bpe) {
            l = utf8_decode(s + i, n - i, NULL);
            if (l == 0) l = 1;
            id[i] = tok_find(t, (const char *)s + i, l);
        } else {
            id[i] = t->byte_id[s[i]];
        }
        prev[i] = last;
        next[i] = -1;
        if (last >= 0) next[last] = (int32_t)i;
        last = (int32_t)i;
        i += l;
    }
    size_t nh = 0;
    for (int32_t i = 0; i >= 0 && next[i] >= 0; i = next[i]) try_cand(t, id, h, &nh, i, next[i]);
    while (nh > 0) {
        cand c = heap_pop(h, &nh);
        if (id[c.left] != c.left_id || next[c.left] != c.right || id[c.right] != c.right_id) continue; /* stale */
        id[c.left] = c.result;
        int32_t after = next[c.right];
        next[c.left] = after;
        if (after >= 0) prev[after] = c.left;
        id[c.right] = INT32_MIN; /* dead */
        next[c.right] = -1;
        try_cand(t, id, h, &nh, prev[c.left], c.left);
        try_cand(t, id, h, &nh, c.left, after);
    }
    slm_status st = SLM_OK;
    for (int32_t i = 0; i >= 0 && st == SLM_OK; i = next[i]) {
        if (!t->raw_bpe) {
            st = emit(t, id[i], (size_t)i, out, bad_off);
        } else { /* an unmerged symbol ends where the next begins */
            size_t end = next[i] >= 0 ? (size_t)next[i] : n;
            st = emit_raw(t, id[i], s, (size_t)i, end - (size_t)i, out, bad_off);
        }
    }
    al_free(a, id);
    al_free(a, h);
    return st;
}
