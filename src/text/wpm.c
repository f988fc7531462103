/* wpm.c — WordPiece (BERT, GGUF tokenizer model "bert") of one text segment, as llama.cpp's WPM:
 * the text splits into words at whitespace, and every punctuation character, ASCII symbol and CJK
 * ideograph is a word of its own; control characters, NUL and U+FFFD (invalid UTF-8 bytes) are
 * dropped; letters are lowercased and, with strip_accents, decomposed (NFD) without their marks
 * (\p{M}). Each word, prefixed with "▁", becomes the longest vocabulary pieces from left to right;
 * a word with a position no piece matches becomes the unknown token as a whole. Does not match
 * special tokens (tokenizer.c). References: llama.cpp llama-vocab.cpp llm_tokenizer_wpm; Hugging
 * Face tokenizers BertPreTokenizer / BertNormalizer; the Unicode categories of libunistring. */
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>
#include <uninorm.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "text/tok_impl.h"

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_control(uint32_t c) {
    return uc_is_general_category(c, UC_CATEGORY_Cc) || uc_is_general_category(c, UC_CATEGORY_Cf) ||
           uc_is_general_category(c, UC_CATEGORY_Co) || uc_is_general_category(c, UC_CATEGORY_Cs);
}

/* The pieces of word w[0, n) (UTF-8, "▁" prepended by the caller) appended to out, or the
 * unknown token; off is the word's offset in the segment for the error. */
static slm_status wpm_word(const slm_tokenizer *t, const char *w, size_t n, size_t off, tok_ids *out, size_t *bad_off) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > t->max_token_len ? i + t->max_token_len : n;
        int32_t id = -1;
        while (j > i && (id = tok_find(t, w + i, j - i)) < 0) j--;
        if (id < 0) {
            out->n = start;
            break;
        }
        slm_status st = tok_ids_push(out, id, &t->alloc);
        if (st != SLM_OK) return st;
        i = j;
    }
    if (out->n > start) return SLM_OK;
    if (t->text_unk < 0) {
        *bad_off = off;
        return SLM_ERR_INVALID_ARG;
    }
    return tok_ids_push(out, t->text_unk, &t->alloc);
}

slm_status wpm_encode_segment(const slm_tokenizer *t, const char *s, size_t n, tok_ids *out, size_t *bad_off) {
    const slm_allocator *a = &t->alloc;
    buf w = buf_make(a);
    size_t word_off = 0;
    slm_status st = SLM_OK;
    bool in_word = false;
#define FLUSH()                                                                                    \
    do {                                                                                           \
        if (in_word && st == SLM_OK) st = w.oom ? SLM_ERR_NOMEM : wpm_word(t, w.p, w.n, word_off, out, bad_off); \
        in_word = false;                                                                           \
    } while (0)
    for (size_t i = 0; i < n && st == SLM_OK;) {
        uint32_t c;
        size_t l = utf8_decode((const uint8_t *)s + i, n - i, &c);
        size_t at = i;
        i += l ? l : 1;
        if (l == 0 || c == 0 || c == 0xFFFD) continue;
        if (uc_is_property_white_space(c)) {
            FLUSH();
            continue;
        }
        if (is_control(c)) continue;
        /* The character's code points after NFD (accents stripped) or as is. */
        uint32_t one = c, *cps = &one, *dec = NULL;
        size_t n_cps = 1;
        if (t->wpm_strip_accents && c >= 0xC0) {
            dec = u32_normalize(UNINORM_NFD, &c, 1, NULL, &n_cps);
            if (!dec) st = SLM_ERR_NOMEM;
            else cps = dec;
        }
        for (size_t k = 0; k < n_cps && st == SLM_OK; k++) {
            uint32_t d = cps[k];
            if (t->wpm_strip_accents && uc_is_general_category(d, UC_CATEGORY_M)) continue;
            uint8_t u[4];
            size_t ul = utf8_encode(t->wpm_lowercase ? uc_tolower(d) : d, u);
            bool alone = uc_is_general_category(d, UC_CATEGORY_P) || (d < 0x7F && uc_is_general_category(d, UC_CATEGORY_S)) ||
                         is_cjk(d);
            if (alone) FLUSH();
            if (!in_word) {
                buf_truncate(&w, 0);
                buf_put(&w, "\xE2\x96\x81", 3);
                word_off = at;
                in_word = true;
            }
            buf_put(&w, u, ul);
            if (alone) FLUSH();
        }
        free(dec); /* libunistring allocates with malloc */
    }
    FLUSH();
#undef FLUSH
    buf_free(&w);
    return st;
}
