/* pretok.c — pre-tokenisation: splitting text into pieces with PCRE2 (UTF + UCP, invalid UTF-8
 * tolerated: invalid bytes never match and end up in the gaps between matches), with the Hugging
 * Face Split behaviours (Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous; invert),
 * and the named llama.cpp pre-tokenizers (tokenizer.ggml.pre). Owns compiled patterns; does not
 * normalise or merge. References: docs/spec/gguf.md §7, docs/spec/llama.md §7, docs/spec/lfm2.md §6,
 * docs/spec/qwen35.md §6; HF tokenizers pre_tokenizers/split.rs and normalizer.rs (split behaviours). */
#include <string.h>

#include "base/utf8.h"
#include "text/tok_impl.h"

#define PAT_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define PAT_LLAMA3                                                                                 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"     \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_QWEN2                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"          \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_QWEN35                                                                                 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"        \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_DIGIT "\\p{N}"

/* llama.cpp spells the llama3 contractions as '[sS]|'[tT]|...; the Hugging Face tokenizer.json of
 * these families uses (?i:'s|...). Both are accepted as the same pre-tokenizer. */
#define PAT_LLAMA3_LC                                                                              \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "      \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

const char *pretok_gpt2_pattern(void) { return PAT_GPT2; }

slm_status pretok_step_init(pretok_step *step, const char *pattern, size_t pattern_len, bool is_literal,
                            pretok_behavior behavior, bool invert, slm_err *e) {
    memset(step, 0, sizeof *step);
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (is_literal) opts |= PCRE2_LITERAL;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, pattern_len, opts, &errcode, &erroff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        if (pcre2_get_error_message(errcode, msg, sizeof msg) < 0) strcpy((char *)msg, "unknown error");
        return err_set(e, SLM_ERR_FORMAT, "pre-tokenizer regex does not compile at offset %zu: %s", (size_t)erroff,
                       (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is used when JIT is unavailable */
    step->re = re;
    step->behavior = behavior;
    step->invert = invert;
    return SLM_OK;
}

void pretok_step_deinit(pretok_step *step) {
    if (step->re) pcre2_code_free(step->re);
    step->re = NULL;
}

/* nfc: the Hugging Face tokenizers of the Qwen families normalise to NFC; llama.cpp does not. We
 * follow Hugging Face so that GGUF and tokenizer.json give the same ids. */
typedef struct preset {
    const char *name;      /* tokenizer.ggml.pre value */
    const char *canonical; /* slm_tokenizer_pre_name */
    const char *pats[2];
    bool ignore_merges;
    bool nfc;
} preset;

static const preset presets[] = {
    {"default", "gpt2", {PAT_GPT2, NULL}, false, false},
    {"gpt2", "gpt2", {PAT_GPT2, NULL}, false, false},
    {"gpt-2", "gpt2", {PAT_GPT2, NULL}, false, false},
    {"llama3", "llama3", {PAT_LLAMA3, NULL}, true, false},
    {"llama-bpe", "llama3", {PAT_LLAMA3, NULL}, true, false},
    {"lfm2", "lfm2", {PAT_LLAMA3, NULL}, true, false},
    {"qwen2", "qwen2", {PAT_QWEN2, NULL}, false, true},
    {"qwen3", "qwen2", {PAT_QWEN2, NULL}, false, true},
    {"qwen35", "qwen35", {PAT_QWEN35, NULL}, false, true},
    {"smollm", "smollm", {PAT_DIGIT, PAT_GPT2}, false, false},
};

slm_status pretok_preset(const char *name, pretok_step *steps, size_t *n_steps, const char **canonical,
                         bool *ignore_merges, bool *nfc, slm_err *e) {
    *n_steps = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name) != 0) continue;
        for (size_t k = 0; k < 2 && p->pats[k]; k++) {
            slm_status st = pretok_step_init(&steps[k], p->pats[k], strlen(p->pats[k]), false, PRETOK_ISOLATED,
                                             false, e);
            if (st != SLM_OK) {
                for (size_t j = 0; j < k; j++) pretok_step_deinit(&steps[j]);
                return st;
            }
            *n_steps = k + 1;
        }
        *canonical = p->canonical;
        *ignore_merges = p->ignore_merges;
        *nfc = p->nfc;
        return SLM_OK;
    }
    return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer '%s'", name);
}

const char *pretok_name_for_pattern(const char *pattern, size_t len) {
    static const struct {
        const char *pat, *name;
    } known[] = {{PAT_LLAMA3, "llama3"}, {PAT_LLAMA3_LC, "llama3"}, {PAT_QWEN2, "qwen2"},
                 {PAT_QWEN35, "qwen35"}, {PAT_GPT2, "gpt2"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i].pat) == len && memcmp(known[i].pat, pattern, len) == 0) return known[i].name;
    return NULL;
}

slm_status pretok_vec_push(pretok_vec *v, size_t off, size_t len, const slm_allocator *a) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        size_t bytes;
        if (!size_mul_ok(cap, sizeof *v->v, &bytes)) return SLM_ERR_NOMEM;
        pretok_piece *nv = al_realloc(a, v->v, v->cap * sizeof *v->v, bytes);
        if (!nv) return SLM_ERR_NOMEM;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n].off = off;
    v->v[v->n].len = len;
    v->n++;
    return SLM_OK;
}

void pretok_vec_free(pretok_vec *v, const slm_allocator *a) {
    al_free(a, v->v);
    v->v = NULL;
    v->n = v->cap = 0;
}

/* Length of the UTF-8 character at s[0] (1 for an invalid byte). */
static size_t char_len(const uint8_t *s, size_t n) {
    size_t l = utf8_decode(s, n, NULL);
    return l ? l : 1;
}

/* Segments of one piece: alternating gaps and matches, in order, each non-empty. */
typedef struct seg {
    size_t off, len;
    bool is_match;
} seg;

typedef struct seg_vec {
    seg *v;
    size_t n, cap;
} seg_vec;

static slm_status seg_push(seg_vec *s, size_t off, size_t len, bool m, const slm_allocator *a) {
    if (len == 0) return SLM_OK;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        seg *nv = al_realloc(a, s->v, s->cap * sizeof *s->v, cap * sizeof *s->v);
        if (!nv) return SLM_ERR_NOMEM;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = (seg){off, len, m};
    return SLM_OK;
}

/* Finds the segments of text[off, off+len). A PCRE2 failure other than "no match" (e.g. a resource
 * limit) ends the search: the rest of the piece becomes one gap. */
static slm_status find_segments(const pretok_step *step, pcre2_match_data *md, const char *text, size_t off,
                                size_t len, seg_vec *out, const slm_allocator *a) {
    const uint8_t *s = (const uint8_t *)text + off;
    size_t start = 0, prev_end = 0;
    while (start < len) {
        int rc = pcre2_match(step->re, s, len, start, 0, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m1 <= m0) { /* empty match: ignored, move on by one character */
            start = m0 + char_len(s + m0, len - m0);
            continue;
        }
        if (seg_push(out, off + prev_end, m0 - prev_end, step->invert, a) != SLM_OK) return SLM_ERR_NOMEM;
        if (seg_push(out, off + m0, m1 - m0, !step->invert, a) != SLM_OK) return SLM_ERR_NOMEM;
        prev_end = start = m1;
    }
    if (seg_push(out, off + prev_end, len - prev_end, step->invert, a) != SLM_OK) return SLM_ERR_NOMEM;
    return SLM_OK;
}

/* Applies the split behaviour to one piece's segments, appending the resulting pieces. */
static slm_status emit_segments(pretok_behavior b, const seg_vec *sv, pretok_vec *out, const slm_allocator *a) {
    size_t first = out->n; /* pieces of this piece start here */
    bool prev_match = false;
    switch (b) {
    case PRETOK_ISOLATED:
        for (size_t i = 0; i < sv->n; i++)
            if (pretok_vec_push(out, sv->v[i].off, sv->v[i].len, a) != SLM_OK) return SLM_ERR_NOMEM;
        return SLM_OK;
    case PRETOK_REMOVED:
        for (size_t i = 0; i < sv->n; i++)
            if (!sv->v[i].is_match && pretok_vec_push(out, sv->v[i].off, sv->v[i].len, a) != SLM_OK)
                return SLM_ERR_NOMEM;
        return SLM_OK;
    case PRETOK_MERGED_PREV:
        for (size_t i = 0; i < sv->n; i++) {
            const seg *g = &sv->v[i];
            if (g->is_match && !prev_match && out->n > first) {
                pretok_piece *last = &out->v[out->n - 1];
                last->len = g->off + g->len - last->off;
            } else if (pretok_vec_push(out, g->off, g->len, a) != SLM_OK) {
                return SLM_ERR_NOMEM;
            }
            prev_match = g->is_match;
        }
        return SLM_OK;
    case PRETOK_MERGED_NEXT: {
        /* Walk backwards: a match joins the piece that follows it unless that piece is a match. */
        size_t n = 0;
        for (size_t k = sv->n; k-- > 0;) {
            const seg *g = &sv->v[k];
            if (g->is_match && !prev_match && n > 0) {
                pretok_piece *last = &out->v[out->n - 1];
                last->len = last->off + last->len - g->off;
                last->off = g->off;
            } else {
                if (pretok_vec_push(out, g->off, g->len, a) != SLM_OK) return SLM_ERR_NOMEM;
                n++;
            }
            prev_match = g->is_match;
        }
        for (size_t i = first, j = out->n - 1; i < j; i++, j--) {
            pretok_piece tmp = out->v[i];
            out->v[i] = out->v[j];
            out->v[j] = tmp;
        }
        return SLM_OK;
    }
    case PRETOK_CONTIGUOUS:
        for (size_t i = 0; i < sv->n; i++) {
            const seg *g = &sv->v[i];
            if (g->is_match == prev_match && out->n > first) {
                pretok_piece *last = &out->v[out->n - 1];
                last->len = g->off + g->len - last->off;
            } else if (pretok_vec_push(out, g->off, g->len, a) != SLM_OK) {
                return SLM_ERR_NOMEM;
            }
            prev_match = g->is_match;
        }
        return SLM_OK;
    }
    return SLM_OK;
}

slm_status pretok_apply(const pretok_step *step, const char *text, pretok_vec *pieces, pretok_vec *scratch,
                        const slm_allocator *a) {
    pcre2_match_data *md = pcre2_match_data_create(2, NULL);
    if (!md) return SLM_ERR_NOMEM;
    seg_vec sv = {0};
    slm_status st = SLM_OK;
    scratch->n = 0;
    for (size_t i = 0; i < pieces->n; i++) {
        sv.n = 0;
        st = find_segments(step, md, text, pieces->v[i].off, pieces->v[i].len, &sv, a);
        if (st != SLM_OK) break;
        st = emit_segments(step->behavior, &sv, scratch, a);
        if (st != SLM_OK) break;
    }
    al_free(a, sv.v);
    pcre2_match_data_free(md);
    if (st != SLM_OK) return st;
    pretok_vec tmp = *pieces;
    *pieces = *scratch;
    *scratch = tmp;
    return SLM_OK;
}
