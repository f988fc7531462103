/* tokenizer.c — struct slm_tokenizer: the core constructor tok_build (vocabulary, token bytes,
 * lookup tables, merges, special tokens, end-of-generation set), the public tokenizer API
 * (statelm.h: getters, encode, decode, token bytes) and the streaming detokenizer.
 * Encoding: special/user-defined token text is matched on the raw text (leftmost, longest first);
 * the text between matches is NFC-normalised when asked, pre-tokenised and BPE-merged (pretok.c,
 * bpe.c) or escaped and SentencePiece-merged (spm.c). Invalid UTF-8 input is not an error: its
 * bytes never match a regex class, become pieces of their own and are encoded byte by byte (byte-
 * level BPE: the token of each byte's mapped character, as HF's ByteLevel maps any byte; SPM: byte
 * fallback), so decode(encode(x)) == x for any bytes x when the vocabulary has all byte tokens.
 * References: docs/spec/gguf.md §7; HF tokenizers (added tokens, ByteLevel); llama.cpp llama-vocab.cpp. */
#include <stdlib.h>
#include <string.h>
#include <uninorm.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "text/tok_impl.h"

/* ---- GPT-2 byte <-> unicode ---------------------------------------------------------------- */
static bool byte_is_printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

uint32_t tok_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    /* The 68 others map in increasing byte order to U+0100.. */
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!byte_is_printable(x)) k++;
    return 256 + k;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    for (unsigned x = 0; x < 256; x++)
        if (!byte_is_printable(x) && k-- == 0) return (int)x;
    return -1;
}

/* ---- small helpers ----------------------------------------------------------------------------- */
slm_status tok_ids_push(tok_ids *ids, int32_t id, const slm_allocator *a) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 256;
        size_t bytes;
        if (!size_mul_ok(cap, sizeof(int32_t), &bytes)) return SLM_ERR_NOMEM;
        int32_t *nv = al_realloc(a, ids->v, ids->cap * sizeof(int32_t), bytes);
        if (!nv) return SLM_ERR_NOMEM;
        ids->v = nv;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return SLM_OK;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static const char *tok_text(const slm_tokenizer *t, int32_t id) { return t->pool + t->tokens[id].text_off; }

int32_t tok_find(const slm_tokenizer *t, const char *s, size_t n) {
    if (n == 0 || t->vmap_cap == 0) return -1;
    size_t mask = t->vmap_cap - 1;
    for (size_t i = (size_t)hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        uint32_t v = t->vmap[i];
        if (v == 0) return -1;
        const tok_token *k = &t->tokens[v - 1];
        if (k->text_len == n && memcmp(t->pool + k->text_off, s, n) == 0) return (int32_t)(v - 1);
    }
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

void tok_spec_init(tok_spec *s) {
    memset(s, 0, sizeof *s);
    s->bos = s->eos = s->eot = s->eom = s->pad = s->unk = -1;
}

void tok_destroy(slm_tokenizer *t) {
    if (!t) return;
    const slm_allocator a = t->alloc;
    for (size_t i = 0; i < t->n_steps; i++) pretok_step_deinit(&t->steps[i]);
    al_free(&a, t->tokens);
    al_free(&a, t->pool);
    al_free(&a, t->vmap);
    al_free(&a, t->merges);
    al_free(&a, t->match_ids);
    al_free(&a, t->eog);
    al_free(&a, t);
}

/* Raw bytes of a token from its stored text; returns the length written to out (<= text length). */
static size_t token_bytes_of(bool spm_text, uint8_t type, const char *s, size_t n, char *out) {
    if (type == TOK_TYPE_CONTROL || type == TOK_TYPE_USER_DEFINED || type == TOK_TYPE_UNKNOWN) {
        memcpy(out, s, n);
        return n;
    }
    size_t k = 0;
    if (spm_text) {
        if (type == TOK_TYPE_BYTE && n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
            unsigned v = (unsigned)strtoul((char[3]){s[3], s[4], 0}, NULL, 16);
            out[0] = (char)v;
            return 1;
        }
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                out[k++] = ' ';
                i += 3;
            } else {
                out[k++] = s[i++];
            }
        }
        return k;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = utf8_decode((const uint8_t *)s + i, n - i, &cp);
        int b = l ? tok_cp_to_byte(cp) : -1;
        if (b >= 0) {
            out[k++] = (char)b;
        } else { /* not a byte-level character: kept as it is */
            if (l == 0) l = 1;
            memcpy(out + k, s + i, l);
            k += l;
        }
        i += l;
    }
    return k;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

typedef struct len_id {
    uint32_t first, len;
    int32_t id;
} len_id;

static int cmp_len_id(const void *pa, const void *pb) {
    const len_id *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

static const char *const eog_texts[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>",
                                        "<|eom_id|>", "<end_of_turn>", "<|end|>", "<|return|>"};

static slm_status check_special(const char *what, int64_t id, size_t n_vocab, int32_t *out, slm_err *e) {
    if (id < 0) {
        *out = -1;
        return SLM_OK;
    }
    if ((uint64_t)id >= n_vocab)
        return err_set(e, SLM_ERR_RANGE, "tokenizer: %s token id %lld out of range (vocabulary of %zu)", what,
                       (long long)id, n_vocab);
    *out = (int32_t)id;
    return SLM_OK;
}

static slm_status build_merges(slm_tokenizer *t, const tok_spec *spec, slm_err *e) {
    if (spec->n_merges == 0) return SLM_OK;
    if (spec->n_merges > (size_t)TOK_MAX_VOCAB * 4)
        return err_set(e, SLM_ERR_FORMAT, "tokenizer: %zu merges is too many", spec->n_merges);
    const slm_allocator *a = &t->alloc;
    t->merge_cap = pow2_at_least(spec->n_merges * 2);
    t->merges = al_array(a, t->merge_cap, sizeof *t->merges);
    char *cat = al_malloc(a, 2 * TOK_MAX_TOKEN_LEN);
    if (!t->merges || !cat) {
        al_free(a, cat);
        return err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory for merges");
    }
    for (size_t i = 0; i < t->merge_cap; i++) t->merges[i].key = UINT64_MAX;
    slm_status st = SLM_OK;
    for (size_t i = 0; i < spec->n_merges; i++) {
        tok_str l = spec->merges[2 * i], r = spec->merges[2 * i + 1];
        int32_t li = l.ptr ? tok_find(t, l.ptr, l.len) : -1;
        int32_t ri = r.ptr ? tok_find(t, r.ptr, r.len) : -1;
        if (li < 0 || ri < 0) {
            const tok_str *bad = li < 0 ? &l : &r;
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: merge %zu names unknown token '%.*s'", i,
                         (int)(bad->len > 64 ? 64 : bad->len), bad->ptr ? bad->ptr : "");
            break;
        }
        if (l.len + r.len > 2 * TOK_MAX_TOKEN_LEN) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: merge %zu is too long", i);
            break;
        }
        memcpy(cat, l.ptr, l.len);
        memcpy(cat + l.len, r.ptr, r.len);
        int32_t res = tok_find(t, cat, l.len + r.len);
        if (res < 0) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: merge %zu result '%.*s' is not a token", i,
                         (int)(l.len + r.len > 64 ? 64 : l.len + r.len), cat);
            break;
        }
        uint64_t key = ((uint64_t)(uint32_t)li << 32) | (uint32_t)ri;
        size_t mask = t->merge_cap - 1;
        size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
        while (t->merges[h].key != UINT64_MAX && t->merges[h].key != key) h = (h + 1) & mask;
        if (t->merges[h].key == key) continue; /* duplicate pair: the first (lowest) rank wins */
        t->merges[h] = (tok_merge_slot){key, (int32_t)i, res};
        t->n_merges++;
    }
    al_free(a, cat);
    return st;
}

slm_status tok_build(const tok_spec *spec, const slm_allocator *a, slm_tokenizer **out, slm_err *e) {
    *out = NULL;
    if (!a) a = &al_default;
    slm_status st = SLM_OK;
    slm_tokenizer *t = al_calloc(a, 1, sizeof *t);
    if (!t) {
        for (size_t i = 0; i < spec->n_steps; i++) pretok_step_deinit(&spec->steps[i]);
        return err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
    }
    t->alloc = *a;
    /* The steps are ours from here on, whatever happens. */
    if (spec->n_steps > TOK_MAX_PRE_STEPS) {
        for (size_t i = 0; i < spec->n_steps; i++) pretok_step_deinit(&spec->steps[i]);
        st = err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer: more than %d pre-tokenizer steps", TOK_MAX_PRE_STEPS);
        goto fail;
    }
    for (size_t i = 0; i < spec->n_steps; i++) t->steps[i] = spec->steps[i];
    t->n_steps = spec->n_steps;
    t->kind = spec->kind;
    t->pre_name = spec->pre_name ? spec->pre_name : (spec->kind == SLM_TOKENIZER_SPM ? "spm" : "gpt2");
    t->nfc = spec->nfc;
    t->ignore_merges = spec->ignore_merges;
    t->add_space_prefix = spec->add_space_prefix;
    t->add_bos = spec->add_bos;
    t->add_eos = spec->add_eos;
    t->wpm_lowercase = spec->wpm_lowercase;
    t->wpm_strip_accents = spec->wpm_strip_accents;
    if (spec->kind != SLM_TOKENIZER_BPE && spec->kind != SLM_TOKENIZER_SPM && spec->kind != SLM_TOKENIZER_WPM) {
        st = err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer: unknown kind %d", (int)spec->kind);
        goto fail;
    }
    if (spec->pre_preset) {
        if (spec->kind != SLM_TOKENIZER_BPE || t->n_steps > 0) {
            st = err_set(e, SLM_ERR_INVALID_ARG, "tokenizer: a preset pre-tokenizer is for BPE only");
            goto fail;
        }
        bool im = false, raw = false;
        st = pretok_preset(spec->pre_preset, t->steps, &t->n_steps, &t->pre_name, &im, &raw, e);
        if (st != SLM_OK) goto fail;
        t->ignore_merges = t->ignore_merges || im;
        t->raw_bpe = raw;
    }
    t->raw_bpe = t->raw_bpe || (spec->raw_bpe && spec->kind == SLM_TOKENIZER_BPE);
    bool spm_text = spec->kind != SLM_TOKENIZER_BPE || t->raw_bpe; /* "▁" and <0xNN> in token text */
    if (spec->n_vocab == 0 || spec->n_vocab > TOK_MAX_VOCAB) {
        st = err_set(e, SLM_ERR_FORMAT, "tokenizer: vocabulary size %zu out of range (1..%d)", spec->n_vocab,
                     TOK_MAX_VOCAB);
        goto fail;
    }
    size_t n = spec->n_vocab;
    t->n_vocab = (int32_t)n;
    /* Token texts and bytes. */
    size_t pool = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = spec->tokens[i].ptr ? spec->tokens[i].len : 0;
        if (l > TOK_MAX_TOKEN_LEN) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: token %zu is %zu bytes long (max %u)", i, l,
                         TOK_MAX_TOKEN_LEN);
            goto fail;
        }
        pool += 2 * l + 2;
    }
    t->tokens = al_calloc(a, n, sizeof *t->tokens);
    t->pool = al_malloc(a, pool);
    t->vmap_cap = pow2_at_least(2 * n);
    t->vmap = al_calloc(a, t->vmap_cap, sizeof *t->vmap);
    t->eog = al_calloc(a, (n + 7) / 8, 1);
    if (!t->tokens || !t->pool || !t->vmap || !t->eog) {
        st = err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory for %zu tokens", n);
        goto fail;
    }
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        const tok_str *s = &spec->tokens[i];
        size_t l = s->ptr ? s->len : 0;
        uint8_t type = spec->types ? spec->types[i] : TOK_TYPE_NORMAL;
        if (!s->ptr) type = TOK_TYPE_UNUSED;
        if (type > TOK_TYPE_BYTE) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: token %zu has unknown type %u", i, type);
            goto fail;
        }
        if (l && !utf8_valid((const uint8_t *)s->ptr, l)) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: token %zu text is not valid UTF-8", i);
            goto fail;
        }
        if (l && memchr(s->ptr, 0, l)) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: token %zu text contains a NUL byte", i);
            goto fail;
        }
        tok_token *k = &t->tokens[i];
        if (l > t->max_token_len) t->max_token_len = l;
        k->type = type;
        k->score = spec->scores ? spec->scores[i] : 0.0f;
        k->text_off = (uint32_t)p;
        k->text_len = (uint32_t)l;
        if (l) memcpy(t->pool + p, s->ptr, l);
        p += l;
        t->pool[p++] = '\0';
        k->bytes_off = (uint32_t)p;
        k->bytes_len = (uint32_t)(l ? token_bytes_of(spm_text, type, s->ptr, l, t->pool + p) : 0);
        p += k->bytes_len;
        t->pool[p++] = '\0';
        if (p > UINT32_MAX - 2 * TOK_MAX_TOKEN_LEN - 2) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer: vocabulary text too large");
            goto fail;
        }
        if (l == 0) continue;
        size_t mask = t->vmap_cap - 1;
        size_t h = (size_t)hash_bytes(s->ptr, l) & mask;
        bool dup = false;
        while (t->vmap[h] != 0) {
            const tok_token *o = &t->tokens[t->vmap[h] - 1];
            if (o->text_len == l && memcmp(t->pool + o->text_off, s->ptr, l) == 0) { dup = true; break; }
            h = (h + 1) & mask;
        }
        if (!dup) t->vmap[h] = (uint32_t)i + 1;
    }
    t->pool_len = p;
    /* Byte tokens. */
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (!spm_text) {
        for (int b = 0; b < 256; b++) {
            uint8_t u[4];
            size_t l = utf8_encode(tok_byte_to_cp((uint8_t)b), u);
            t->byte_id[b] = tok_find(t, (const char *)u, l);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            const tok_token *k = &t->tokens[i];
            const char *s = t->pool + k->text_off;
            if (k->text_len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') continue;
            int hi = hexval(s[3]), lo = hexval(s[4]);
            if (hi < 0 || lo < 0) continue;
            if (k->type == TOK_TYPE_BYTE || (!spec->types && t->byte_id[hi * 16 + lo] < 0))
                t->byte_id[hi * 16 + lo] = (int32_t)i;
        }
    }
    /* Merges. */
    if (spec->kind == SLM_TOKENIZER_BPE) {
        st = build_merges(t, spec, e);
        if (st != SLM_OK) goto fail;
    }
    /* Special ids. */
    if ((st = check_special("bos", spec->bos, n, &t->bos, e)) != SLM_OK) goto fail;
    if ((st = check_special("eos", spec->eos, n, &t->eos, e)) != SLM_OK) goto fail;
    if ((st = check_special("eot", spec->eot, n, &t->eot, e)) != SLM_OK) goto fail;
    if ((st = check_special("eom", spec->eom, n, &t->eom, e)) != SLM_OK) goto fail;
    if ((st = check_special("padding", spec->pad, n, &t->pad, e)) != SLM_OK) goto fail;
    if ((st = check_special("unknown", spec->unk, n, &t->unk, e)) != SLM_OK) goto fail;
    t->text_unk = t->unk >= 0 && (t->tokens[t->unk].type != TOK_TYPE_CONTROL || t->kind == SLM_TOKENIZER_WPM) ? t->unk : -1;
    /* Tokens matched on the raw text. */
    size_t n_match = 0;
    for (size_t i = 0; i < n; i++) {
        const tok_token *k = &t->tokens[i];
        if ((k->type == TOK_TYPE_CONTROL || k->type == TOK_TYPE_USER_DEFINED) && k->text_len > 0) n_match++;
    }
    if (n_match) {
        len_id *li = al_array(a, n_match, sizeof *li);
        t->match_ids = al_array(a, n_match, sizeof *t->match_ids);
        if (!li || !t->match_ids) {
            al_free(a, li);
            st = err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
            goto fail;
        }
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            const tok_token *k = &t->tokens[i];
            if ((k->type == TOK_TYPE_CONTROL || k->type == TOK_TYPE_USER_DEFINED) && k->text_len > 0)
                li[j++] = (len_id){(uint8_t)t->pool[k->text_off], k->text_len, (int32_t)i};
        }
        qsort(li, n_match, sizeof *li, cmp_len_id);
        for (size_t i = 0; i < n_match; i++) {
            t->match_ids[i] = li[i].id;
            t->first_byte_match[li[i].first] = true;
        }
        t->n_match = n_match;
        al_free(a, li);
    }
    /* End of turn, when not given: the first control token spelled like one (as llama.cpp does). */
    static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"};
    for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0] && t->eot < 0; i++) {
        int32_t id = tok_find(t, eot_texts[i], strlen(eot_texts[i]));
        if (id >= 0 && t->tokens[id].type == TOK_TYPE_CONTROL) t->eot = id;
    }
    /* End of generation. */
    int32_t eogs[3] = {t->eos, t->eot, t->eom};
    for (int i = 0; i < 3; i++)
        if (eogs[i] >= 0) t->eog[eogs[i] / 8] |= (uint8_t)(1u << (eogs[i] % 8));
    for (size_t i = 0; i < spec->n_extra_eog; i++) {
        int32_t id = -1;
        if ((st = check_special("end-of-generation", spec->extra_eog[i], n, &id, e)) != SLM_OK) goto fail;
        if (id >= 0) t->eog[id / 8] |= (uint8_t)(1u << (id % 8));
    }
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        int32_t id = tok_find(t, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0 && t->tokens[id].type == TOK_TYPE_CONTROL) t->eog[id / 8] |= (uint8_t)(1u << (id % 8));
    }
    *out = t;
    return SLM_OK;
fail:
    tok_destroy(t);
    return st;
}

/* ---- public getters --------------------------------------------------------------------------- */
SLM_API slm_tokenizer_kind slm_tokenizer_get_kind(const slm_tokenizer *tok) { return tok ? tok->kind : SLM_TOKENIZER_BPE; }
SLM_API const char *slm_tokenizer_pre_name(const slm_tokenizer *tok) { return tok ? tok->pre_name : NULL; }
SLM_API int32_t slm_tokenizer_n_vocab(const slm_tokenizer *tok) { return tok ? tok->n_vocab : 0; }
SLM_API int32_t slm_tokenizer_bos(const slm_tokenizer *tok) { return tok ? tok->bos : -1; }
SLM_API int32_t slm_tokenizer_eos(const slm_tokenizer *tok) { return tok ? tok->eos : -1; }
SLM_API int32_t slm_tokenizer_eot(const slm_tokenizer *tok) { return tok ? tok->eot : -1; }
SLM_API int32_t slm_tokenizer_pad(const slm_tokenizer *tok) { return tok ? tok->pad : -1; }
SLM_API bool slm_tokenizer_add_bos(const slm_tokenizer *tok) { return tok && tok->add_bos && tok->bos >= 0; }

SLM_API bool slm_tokenizer_is_eog(const slm_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_vocab) return false;
    return (tok->eog[id / 8] >> (id % 8)) & 1u;
}

SLM_API const char *slm_tokenizer_token_text(const slm_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_vocab) return NULL;
    return tok_text(tok, id);
}

/* ---- encode ----------------------------------------------------------------------------------- */
/* NFC of s[0, n) into *dst (allocated), valid UTF-8 runs normalised separately around invalid
 * bytes, which are copied. Text without code points >= U+0300 is returned as is (*dst = NULL). */
static slm_status nfc_normalize(const slm_allocator *a, const char *s, size_t n, char **dst, size_t *dst_len) {
    *dst = NULL;
    bool need = false;
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)s[i] >= 0xCC) { need = true; break; }
    if (!need) return SLM_OK;
    buf out = buf_make(a);
    buf_reserve(&out, n + 16);
    size_t i = 0;
    while (i < n && !out.oom) {
        size_t j = i;
        while (j < n) {
            size_t l = utf8_decode((const uint8_t *)s + j, n - j, NULL);
            if (l == 0) break;
            j += l;
        }
        if (j > i) {
            size_t nlen = 0;
            uint8_t *norm = u8_normalize(UNINORM_NFC, (const uint8_t *)s + i, j - i, NULL, &nlen);
            if (!norm) {
                buf_free(&out);
                return SLM_ERR_NOMEM;
            }
            buf_put(&out, norm, nlen);
            free(norm); /* libunistring allocates with malloc */
        }
        if (j < n) buf_putc(&out, s[j++]); /* an invalid byte, kept */
        i = j;
    }
    *dst_len = out.n;
    *dst = buf_take(&out);
    return *dst ? SLM_OK : SLM_ERR_NOMEM;
}

typedef struct enc_ctx {
    const slm_tokenizer *t;
    tok_ids ids;
    pretok_vec pieces, scratch;
    char *esc;
    size_t esc_cap;
    bool prev_special; /* SPM: the segment follows the start or a special token */
    size_t bad_off;    /* SLM_ERR_INVALID_ARG: offset of the text the vocabulary cannot spell, in the segment */
} enc_ctx;

/* s[0, n) with every space as "▁" (after one more "▁" when prefix) into c->esc; *k its length. */
static slm_status escape_spaces(enc_ctx *c, const char *s, size_t n, bool prefix, size_t *k) {
    const slm_tokenizer *t = c->t;
    size_t need;
    if (!size_mul_ok(n + 1, 3, &need)) return SLM_ERR_NOMEM;
    if (need > c->esc_cap) {
        char *ne = al_realloc(&t->alloc, c->esc, c->esc_cap, need);
        if (!ne) return SLM_ERR_NOMEM;
        c->esc = ne;
        c->esc_cap = need;
    }
    size_t w = 0;
    if (prefix) {
        memcpy(c->esc, "\xE2\x96\x81", 3);
        w = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(c->esc + w, "\xE2\x96\x81", 3);
            w += 3;
        } else {
            c->esc[w++] = s[i];
        }
    }
    *k = w;
    return SLM_OK;
}

/* The offset in s of escaped offset esc_off (escape_spaces: each space took 3 escaped bytes). */
static size_t unescaped_offset(const char *s, size_t n, bool prefix, size_t esc_off) {
    size_t at = prefix ? 3 : 0, i = 0;
    while (i < n && at + (s[i] == ' ' ? 3 : 1) <= esc_off) at += s[i++] == ' ' ? 3 : 1;
    return i;
}

static slm_status encode_bpe_text(enc_ctx *c, const char *s, size_t n) {
    const slm_tokenizer *t = c->t;
    const char *orig = s;
    size_t orig_n = n;
    if (t->raw_bpe) { /* Gemma 4: spaces become "▁" before the split */
        slm_status st = escape_spaces(c, s, n, false, &n);
        if (st != SLM_OK) return st;
        s = c->esc;
    }
    c->pieces.n = 0;
    slm_status st = pretok_vec_push(&c->pieces, 0, n, &t->alloc);
    for (size_t k = 0; k < t->n_steps && st == SLM_OK; k++)
        st = pretok_apply(&t->steps[k], s, &c->pieces, &c->scratch, &t->alloc);
    for (size_t i = 0; i < c->pieces.n && st == SLM_OK; i++) {
        st = bpe_encode_piece(t, (const uint8_t *)s + c->pieces.v[i].off, c->pieces.v[i].len, &c->ids, &c->bad_off);
        if (st == SLM_ERR_INVALID_ARG) c->bad_off += c->pieces.v[i].off;
    }
    if (st == SLM_ERR_INVALID_ARG && t->raw_bpe) c->bad_off = unescaped_offset(orig, orig_n, false, c->bad_off);
    return st;
}

static slm_status encode_spm_text(enc_ctx *c, const char *s, size_t n) {
    const slm_tokenizer *t = c->t;
    bool prefix = t->add_space_prefix && c->prev_special;
    size_t k = 0;
    slm_status st = escape_spaces(c, s, n, prefix, &k);
    if (st != SLM_OK) return st;
    size_t esc_off = 0;
    st = spm_encode_segment(t, c->esc, k, &c->ids, &esc_off);
    if (st == SLM_ERR_INVALID_ARG) c->bad_off = unescaped_offset(s, n, prefix, esc_off);
    return st;
}

static slm_status encode_text(enc_ctx *c, const char *s, size_t n) {
    if (n == 0) return SLM_OK;
    const slm_tokenizer *t = c->t;
    char *norm = NULL;
    size_t norm_len = 0;
    if (t->nfc) {
        slm_status st = nfc_normalize(&t->alloc, s, n, &norm, &norm_len);
        if (st != SLM_OK) return st;
        if (norm) {
            s = norm;
            n = norm_len;
        }
    }
    slm_status st = t->kind == SLM_TOKENIZER_SPM   ? encode_spm_text(c, s, n)
                    : t->kind == SLM_TOKENIZER_WPM ? wpm_encode_segment(t, s, n, &c->ids, &c->bad_off)
                                                   : encode_bpe_text(c, s, n);
    c->prev_special = false;
    al_free(&t->alloc, norm);
    return st;
}

/* Id of the longest matchable token starting at s[0, n), or -1. */
static int32_t match_special(const slm_tokenizer *t, const char *s, size_t n, bool parse_special, size_t *len) {
    /* match_ids is sorted by first byte, then by length (longest first). */
    uint8_t b = (uint8_t)s[0];
    size_t lo = 0, hi = t->n_match;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uint8_t)t->pool[t->tokens[t->match_ids[mid]].text_off] < b) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i < t->n_match; i++) {
        const tok_token *k = &t->tokens[t->match_ids[i]];
        if ((uint8_t)t->pool[k->text_off] != b) break;
        if (k->type == TOK_TYPE_CONTROL && !parse_special) continue;
        if (k->text_len <= n && memcmp(t->pool + k->text_off, s, k->text_len) == 0) {
            *len = k->text_len;
            return t->match_ids[i];
        }
    }
    return -1;
}

slm_status tok_encode_spans(const slm_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                            const tok_span *spans, size_t n_spans, tok_ids *out, size_t *bad_off) {
    enc_ctx c = {0};
    c.t = tok;
    c.prev_special = true;
    *bad_off = 0;
    slm_status st = SLM_OK;
    bool parse_special = (flags & SLM_TOKENIZE_PARSE_SPECIAL) != 0;
    if ((flags & SLM_TOKENIZE_ADD_BOS) && tok->add_bos && tok->bos >= 0) st = tok_ids_push(&c.ids, tok->bos, &tok->alloc);
    size_t seg = 0, i = 0, k = 0;
    while (i < len && st == SLM_OK) {
        while (k < n_spans && spans[k].off + spans[k].len <= i && !(spans[k].ids && spans[k].off == i)) k++;
        if (k < n_spans && spans[k].ids && spans[k].off == i) { /* the span's text is these ids */
            st = encode_text(&c, text + seg, i - seg);
            if (st == SLM_ERR_INVALID_ARG) c.bad_off += seg;
            for (size_t q = 0; q < spans[k].n_ids && st == SLM_OK; q++) st = tok_ids_push(&c.ids, spans[k].ids[q], &tok->alloc);
            c.prev_special = false;
            i += spans[k].len;
            seg = i;
            k++;
            continue;
        }
        size_t mlen = 0;
        int32_t id = -1;
        if (tok->first_byte_match[(uint8_t)text[i]]) {
            /* control tokens only where the match lies wholly outside the spans */
            bool in_span = k < n_spans && spans[k].off <= i;
            id = match_special(tok, text + i, len - i, parse_special && !in_span, &mlen);
            if (id >= 0 && !in_span && k < n_spans && i + mlen > spans[k].off &&
                tok->tokens[id].type == TOK_TYPE_CONTROL)
                id = match_special(tok, text + i, len - i, false, &mlen);
        }
        if (id < 0) {
            i++;
            continue;
        }
        st = encode_text(&c, text + seg, i - seg);
        if (st == SLM_ERR_INVALID_ARG) c.bad_off += seg;
        if (st == SLM_OK) st = tok_ids_push(&c.ids, id, &tok->alloc);
        c.prev_special = true;
        i += mlen;
        seg = i;
    }
    if (st == SLM_OK && (st = encode_text(&c, text + seg, len - seg)) == SLM_ERR_INVALID_ARG) c.bad_off += seg;
    if (st == SLM_ERR_INVALID_ARG) *bad_off = c.bad_off;
    if (st == SLM_OK) *out = c.ids;
    else al_free(&tok->alloc, c.ids.v);
    pretok_vec_free(&c.pieces, &tok->alloc);
    pretok_vec_free(&c.scratch, &tok->alloc);
    al_free(&tok->alloc, c.esc);
    return st;
}

SLM_API slm_status slm_tokenizer_encode(const slm_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                                        int32_t *ids, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!tok || !n_out || (!text && len > 0) || (!ids && cap > 0)) return SLM_ERR_INVALID_ARG;
    tok_ids v = {0};
    size_t bad_off = 0;
    slm_status st = tok_encode_spans(tok, text, len, flags, NULL, 0, &v, &bad_off);
    if (st == SLM_ERR_INVALID_ARG) *n_out = bad_off;
    if (st == SLM_OK) {
        *n_out = v.n;
        if (ids && v.n) memcpy(ids, v.v, (v.n < cap ? v.n : cap) * sizeof *ids);
        if (v.n > cap) st = SLM_ERR_RANGE;
    }
    al_free(&tok->alloc, v.v);
    return st;
}

/* ---- decode ----------------------------------------------------------------------------------- */
SLM_API slm_status slm_tokenizer_token_bytes(const slm_tokenizer *tok, int32_t id, char *dst, size_t cap,
                                             size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!tok || !n_out || (!dst && cap > 0)) return SLM_ERR_INVALID_ARG;
    if (id < 0 || id >= tok->n_vocab) return SLM_ERR_RANGE;
    const tok_token *k = &tok->tokens[id];
    *n_out = k->bytes_len;
    if (dst) memcpy(dst, tok->pool + k->bytes_off, k->bytes_len < cap ? k->bytes_len : cap);
    return k->bytes_len > cap ? SLM_ERR_RANGE : SLM_OK;
}

static bool skipped_type(uint8_t type) { return type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN; }

/* The space the encoder put before the first word (SPM's prefix, WPM's "▁") is not text. */
static bool strips_first_space(const slm_tokenizer *t) {
    return (t->kind == SLM_TOKENIZER_SPM && t->add_space_prefix) || t->kind == SLM_TOKENIZER_WPM;
}

SLM_API slm_status slm_tokenizer_decode(const slm_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                        bool render_special, char *dst, size_t cap, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!tok || !n_out || (!ids && n_ids > 0) || (!dst && cap > 0)) return SLM_ERR_INVALID_ARG;
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= tok->n_vocab) return SLM_ERR_RANGE;
    size_t total = 0;
    bool first = true;
    for (size_t i = 0; i < n_ids; i++) {
        const tok_token *k = &tok->tokens[ids[i]];
        if (skipped_type(k->type) && !render_special) continue;
        const char *b = tok->pool + k->bytes_off;
        size_t l = k->bytes_len;
        if (first && strips_first_space(tok) && !skipped_type(k->type) && l > 0 &&
            b[0] == ' ') {
            b++;
            l--;
        }
        if (!skipped_type(k->type)) first = false;
        if (total < cap) memcpy(dst + total, b, cap - total < l ? cap - total : l);
        total += l;
    }
    *n_out = total;
    return total > cap ? SLM_ERR_RANGE : SLM_OK;
}

/* ---- streaming detokenizer ---------------------------------------------------------------------- */
/* Invariants: 1. pend[0, n_pend) is a valid but incomplete UTF-8 prefix (n_pend <= 3).
 * 2. out.p[0, out.n) is the text returned by the last push/flush, borrowed by the caller. */
struct slm_detokenizer {
    const slm_tokenizer *tok;
    uint8_t pend[4];
    size_t n_pend;
    buf out;
    bool first;
};

SLM_API slm_status slm_detokenizer_create(const slm_tokenizer *tok, slm_detokenizer **out) {
    if (out) *out = NULL;
    if (!tok || !out) return SLM_ERR_INVALID_ARG;
    slm_detokenizer *d = al_calloc(&tok->alloc, 1, sizeof *d);
    if (!d) return SLM_ERR_NOMEM;
    d->tok = tok;
    d->out = buf_make(&tok->alloc);
    d->first = true;
    *out = d;
    return SLM_OK;
}

SLM_API void slm_detokenizer_destroy(slm_detokenizer *d) {
    if (!d) return;
    const slm_allocator a = d->tok->alloc;
    buf_free(&d->out);
    al_free(&a, d);
}

/* How many bytes of s[0, n) form a valid prefix of one UTF-8 sequence (0 if s[0] cannot start one),
 * and in *need the sequence's full length. */
static size_t valid_prefix(const uint8_t *s, size_t n, size_t *need) {
    uint8_t c = s[0];
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) { *need = 1; return 1; }
    if (c >= 0xC2 && c <= 0xDF) *need = 2;
    else if (c >= 0xE0 && c <= 0xEF) { *need = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { *need = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else { *need = 1; return 0; }
    size_t k = 1;
    while (k < *need && k < n) {
        uint8_t x = s[k];
        if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) break;
        k++;
    }
    return k;
}

/* Moves complete characters of pend + s[0, n) into out; keeps a trailing incomplete sequence in
 * pend unless final (then it becomes U+FFFD). Maximal invalid subparts become one U+FFFD each. */
static slm_status detok_feed(slm_detokenizer *d, const uint8_t *s, size_t n, bool final) {
    uint8_t small[64];
    size_t total = d->n_pend + n;
    uint8_t *w = total <= sizeof small ? small : al_malloc(&d->tok->alloc, total);
    if (!w) return SLM_ERR_NOMEM;
    memcpy(w, d->pend, d->n_pend);
    if (n) memcpy(w + d->n_pend, s, n);
    d->n_pend = 0;
    slm_status st = SLM_OK;
    if (!buf_reserve(&d->out, total * 3 + 3)) { /* each byte becomes at most U+FFFD */
        buf_free(&d->out); /* not sticky: the next push starts afresh */
        st = SLM_ERR_NOMEM;
    }
    for (size_t i = 0; i < total && st == SLM_OK;) {
        size_t l = utf8_decode(w + i, total - i, NULL);
        if (l > 0) {
            buf_put(&d->out, w + i, l);
            i += l;
            continue;
        }
        size_t need, p = valid_prefix(w + i, total - i, &need);
        if (p > 0 && i + p == total && p < need && !final) {
            memcpy(d->pend, w + i, p);
            d->n_pend = p;
            break;
        }
        buf_put(&d->out, "\xEF\xBF\xBD", 3);
        i += p ? p : 1;
    }
    if (w != small) al_free(&d->tok->alloc, w);
    return st;
}

SLM_API slm_status slm_detokenizer_push(slm_detokenizer *d, int32_t id, const char **text, size_t *len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!d || !text || !len) return SLM_ERR_INVALID_ARG;
    const slm_tokenizer *t = d->tok;
    if (id < 0 || id >= t->n_vocab) return SLM_ERR_RANGE;
    buf_truncate(&d->out, 0);
    const tok_token *k = &t->tokens[id];
    if (skipped_type(k->type)) return SLM_OK;
    const uint8_t *b = (const uint8_t *)t->pool + k->bytes_off;
    size_t l = k->bytes_len;
    if (d->first && strips_first_space(t) && l > 0 && b[0] == ' ') {
        b++;
        l--;
    }
    d->first = false;
    slm_status st = detok_feed(d, b, l, false);
    if (st != SLM_OK) return st;
    *text = d->out.p ? d->out.p : "";
    *len = d->out.n;
    return SLM_OK;
}

SLM_API slm_status slm_detokenizer_flush(slm_detokenizer *d, const char **text, size_t *len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!d || !text || !len) return SLM_ERR_INVALID_ARG;
    buf_truncate(&d->out, 0);
    slm_status st = detok_feed(d, NULL, 0, true);
    if (st != SLM_OK) return st;
    *text = d->out.p ? d->out.p : "";
    *len = d->out.n;
    return SLM_OK;
}

bool tok_is_control(const slm_tokenizer *t, int32_t id) {
    uint8_t type = t->tokens[id].type;
    return skipped_type(type) || type == TOK_TYPE_UNUSED;
}

const char *tok_bytes(const slm_tokenizer *t, int32_t id) { return t->pool + t->tokens[id].bytes_off; }

const slm_allocator *tok_allocator(const slm_tokenizer *t) { return &t->alloc; }
