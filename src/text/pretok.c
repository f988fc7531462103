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

/* llama.cpp spells the contractions as '[sS]|'[tT]|...; the Hugging Face tokenizer.json of these
 * families uses (?i:'s|...). Both name the same pre-tokenizer, but they differ on text such as
 * "'ſ" (U+017F folds to 's'): the GGUF presets use llama.cpp's spelling, tokenizer.json its own. */
#define CONTRACTIONS_LC "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define PAT_LLAMA3_LC                                                                              \
    CONTRACTIONS_LC "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"  \
    "\\s+(?!\\S)|\\s+"
#define PAT_QWEN2_LC                                                                               \
    CONTRACTIONS_LC "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"       \
    "\\s+(?!\\S)|\\s+"
#define PAT_QWEN35_LC                                                                              \
    CONTRACTIONS_LC "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"        \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-2's regex as llama.cpp's multi-regex presets write it (no trailing \s+: whitespace it leaves
 * unmatched becomes a piece of its own all the same). */
#define PAT_GPT2_NOWS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* Han, CJK ranges and Hangul as deepseek's tokenizer.json writes them (U+0800..U+4E00 included). */
#define PAT_DEEPSEEK_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define PAT_DEEPSEEK_LLM_LETTERS                                                                   \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"             \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"           \
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"                 \
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"               \
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"               \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"       \
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"      \
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"                \
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"                 \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"                 \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"                \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"               \
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"             \
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"     \
    "\\x{1E900}-\\x{1E943}]+"
#define PAT_DEEPSEEK_LLM_PUNCT "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+"
#define PAT_DEEPSEEK3_MAIN                                                                         \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "          \
    "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_GPT4O                                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS_LC "?|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS_LC "?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

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

/* llama.cpp's pre-tokenizers (tokenizer.ggml.pre, src/llama-vocab.cpp): the regexes applied one
 * after the other, every match and every gap between matches a piece of its own (Split with
 * Isolated). GGUF text is not normalised, as in llama.cpp. Names on one line share one preset. */
typedef struct preset {
    const char *const *names; /* NULL-terminated tokenizer.ggml.pre values */
    const char *canonical;    /* slm_tokenizer_pre_name */
    const char *pats[TOK_MAX_PRE_STEPS];
    bool ignore_merges;       /* a piece that is a whole token is that token */
    bool add_bos;             /* llama.cpp adds BOS when tokenizer.ggml.add_bos_token is absent */
    bool raw;                 /* BPE on raw UTF-8, spaces as "▁", <0xNN> byte fallback (no GPT-2 byte map) */
} preset;

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

static const preset presets[] = {
    {NAMES("default"), "default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", PAT_GPT2_NOWS, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, false},
    {NAMES("gpt2", "gpt-2", "mpt", "phi-2", "olmo", "jais", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de",
           "gigachat", "mellum", "modern-bert", "a.x-4.0", "exaone4", "trillion", "granite-docling"),
     "gpt2", {PAT_GPT2}, false, false, false},
    {NAMES("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "jina-v5-nano"),
     "llama3", {PAT_LLAMA3_LC}, true, true, false},
    {NAMES("lfm2"), "lfm2", {PAT_LLAMA3_LC}, true, true, false},
    {NAMES("dbrx", "smaug-bpe"), "dbrx", {PAT_LLAMA3_LC}, false, false, false},
    {NAMES("qwen2", "qwen3", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan"), "qwen2",
     {PAT_QWEN2_LC}, false, false, false},
    {NAMES("qwen35"), "qwen35", {PAT_QWEN35_LC}, false, false, false},
    {NAMES("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"), "smollm",
     {PAT_DIGIT, PAT_GPT2_NOWS}, false, false, false},
    {NAMES("falcon"), "falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", PAT_GPT2_NOWS, "[0-9][0-9][0-9]"}, false, false, false},
    {NAMES("deepseek-llm"), "deepseek-llm",
     {"[\\r\\n]", PAT_DEEPSEEK_LLM_LETTERS, PAT_DEEPSEEK_LLM_PUNCT, "\\s+\\z", PAT_DEEPSEEK_CJK, "\\p{N}+"}, false,
     false, false},
    {NAMES("deepseek-coder"), "deepseek-coder",
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", PAT_DEEPSEEK_CJK, "\\p{N}"}, false, false, false},
    {NAMES("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"), "deepseek-v3",
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", PAT_DEEPSEEK3_MAIN}, false,
     false, false},
    {NAMES("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), "gpt-4o", {PAT_GPT4O}, false, false, false},
    /* Gemma 4 (tokenizer.ggml.model "gemma4" implies it): only newlines split the text. */
    {NAMES("gemma4", "granite-embed-multi-311m"), "gemma4", {"[^\\n]+|[\\n]+"}, false, false, true},
};

bool pretok_preset_add_bos(const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        for (const char *const *n = presets[i].names; *n; n++)
            if (strcmp(*n, name) == 0) return presets[i].add_bos;
    return false;
}

slm_status pretok_preset(const char *name, pretok_step *steps, size_t *n_steps, const char **canonical,
                         bool *ignore_merges, bool *raw, slm_err *e) {
    *n_steps = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        const char *const *n = p->names;
        while (*n && strcmp(*n, name) != 0) n++;
        if (!*n) continue;
        for (size_t k = 0; k < TOK_MAX_PRE_STEPS && p->pats[k]; k++) {
            slm_status st = pretok_step_init(&steps[k], p->pats[k], strlen(p->pats[k]), false, PRETOK_ISOLATED,
                                             false, e);
            if (st != SLM_OK) {
                for (size_t j = 0; j < k; j++) pretok_step_deinit(&steps[j]);
                *n_steps = 0;
                return st;
            }
            *n_steps = k + 1;
        }
        *canonical = p->canonical;
        *ignore_merges = p->ignore_merges;
        *raw = p->raw;
        return SLM_OK;
    }
    return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.ggml.pre: pre-tokenizer '%.64s' is not supported", name);
}

const char *pretok_name_for_pattern(const char *pattern, size_t len) {
    static const struct {
        const char *pat, *name;
    } known[] = {{PAT_LLAMA3, "llama3"}, {PAT_LLAMA3_LC, "llama3"}, {PAT_QWEN2, "qwen2"}, {PAT_QWEN2_LC, "qwen2"},
                 {PAT_QWEN35, "qwen35"}, {PAT_QWEN35_LC, "qwen35"}, {PAT_GPT2, "gpt2"}};
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
