/* tok_impl.h — the definition of struct slm_tokenizer and the internals shared by the tokenizer
 * files: the format-independent core constructor (tok_build from a tok_spec, used by tok_from_gguf,
 * tok_from_hf and tests), the pre-tokenizer (pretok.c, PCRE2 UTF+UCP), the byte-level BPE merge
 * loop (bpe.c) and the SentencePiece BPE (spm.c). Does not parse files (tok_gguf.c, tok_hf.c do).
 * References: docs/spec/gguf.md §7; llama.cpp llama-vocab.cpp (pre-tokenizer ids, SPM algorithm);
 * Hugging Face tokenizers (tokenizer.json semantics: added tokens, Split behaviours, ByteLevel). */
#ifndef SLM_TEXT_TOK_IMPL_H
#define SLM_TEXT_TOK_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "text/tokenizer.h"

struct cJSON;

/* Token types (GGUF tokenizer.ggml.token_type, docs/spec/gguf.md §7). */
enum {
    TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6
};

#define TOK_MAX_VOCAB (1 << 24)
#define TOK_MAX_TOKEN_LEN (1u << 16)
#define TOK_MAX_PRE_STEPS 8

typedef struct tok_str {
    const char *ptr; /* not NUL-terminated */
    size_t len;
} tok_str;

/* ---- pre-tokenizer ------------------------------------------------------------------------- */
typedef enum pretok_behavior {
    PRETOK_ISOLATED = 0, PRETOK_REMOVED, PRETOK_MERGED_PREV, PRETOK_MERGED_NEXT, PRETOK_CONTIGUOUS
} pretok_behavior;

typedef struct pretok_step {
    pcre2_code *re; /* owned; PCRE2 allocates with malloc; compiled with UTF|UCP|MATCH_INVALID_UTF (JIT if available) */
    pretok_behavior behavior;
    bool invert;
} pretok_step;

/* A piece of the text being pre-tokenised: text[off, off + len). */
typedef struct pretok_piece {
    size_t off, len;
} pretok_piece;

typedef struct pretok_vec {
    pretok_piece *v;
    size_t n, cap;
} pretok_vec;

/* Compiles pattern (UTF-8, pattern_len bytes; literal when is_literal) into step. Returns
 * SLM_ERR_FORMAT with the PCRE2 message and offset when the pattern does not compile. */
slm_status pretok_step_init(pretok_step *step, const char *pattern, size_t pattern_len, bool is_literal,
                            pretok_behavior behavior, bool invert, slm_err *e);
void pretok_step_deinit(pretok_step *step);
/* Named llama.cpp pre-tokenizer (tokenizer.ggml.pre): fills steps[0, *n_steps), the canonical name
 * (static storage), whether merges are ignored for whole-vocab pieces and whether the BPE runs on
 * raw UTF-8 (raw: spaces escaped as "▁", <0xNN> byte fallback; else GPT-2's byte mapping). Text is
 * not normalised (as in llama.cpp). SLM_ERR_UNSUPPORTED naming the pre-tokenizer otherwise. */
slm_status pretok_preset(const char *name, pretok_step *steps, size_t *n_steps, const char **canonical,
                         bool *ignore_merges, bool *raw, slm_err *e);
/* Whether llama.cpp adds BOS for this pre-tokenizer when the file does not say (llama3 family). */
bool pretok_preset_add_bos(const char *name);
/* Pattern of a preset regex by id, for matching tokenizer.json patterns to a name. */
const char *pretok_gpt2_pattern(void);
/* Canonical preset name whose single regex equals pattern, or NULL. */
const char *pretok_name_for_pattern(const char *pattern, size_t len);
/* Splits every piece of *pieces (pieces of text) with step; the result replaces *pieces.
 * SLM_ERR_NOMEM on allocation failure (pieces unchanged). */
slm_status pretok_apply(const pretok_step *step, const char *text, pretok_vec *pieces, pretok_vec *scratch,
                        const slm_allocator *a);
slm_status pretok_vec_push(pretok_vec *v, size_t off, size_t len, const slm_allocator *a);
void pretok_vec_free(pretok_vec *v, const slm_allocator *a);

/* ---- the tokenizer --------------------------------------------------------------------------- */
typedef struct tok_token {
    uint32_t text_off, text_len;   /* stored text (e.g. "Ġthe") in pool, NUL-terminated */
    uint32_t bytes_off, bytes_len; /* raw bytes after undoing the byte mapping / "▁" / <0xNN> */
    float score;
    uint8_t type;                  /* TOK_TYPE_* */
} tok_token;

typedef struct tok_merge_slot {
    uint64_t key;   /* (left << 32) | right, UINT64_MAX = empty */
    int32_t rank;
    int32_t result; /* id of left+right */
} tok_merge_slot;

/* Invariants:
 * 1. tokens[0, n_vocab) are valid; every text_off/bytes_off range lies inside pool.
 * 2. vmap is an open-addressing table (vmap_cap a power of two, load <= 1/2) of id+1 (0 = empty)
 *    keyed by token text; every token with a non-empty text is found (first id wins on duplicates).
 * 3. merges (BPE only) maps an adjacent pair of ids to its rank (0 = merged first) and result id.
 * 4. match_ids are the ids of control and user-defined tokens with non-empty text, sorted by text
 *    length, longest first; first_byte_match[b] says whether some such text starts with byte b.
 * 5. bos/eos/eot/eom/pad/unk are -1 or in [0, n_vocab). eog (n_vocab bits) marks end-of-generation.
 *    text_unk is unk when that is not a control token, else -1: text never encodes to a control
 *    token (GGUF files often name <|endoftext|> as the unknown token), but for WPM, whose [UNK] is
 *    a control token that stands for an unknown word.
 * 6. The tokenizer is immutable after tok_build; all per-call scratch lives on the call. */
struct slm_tokenizer {
    slm_allocator alloc;
    slm_tokenizer_kind kind;
    const char *pre_name; /* static storage */
    int32_t n_vocab;
    tok_token *tokens;    /* (n_vocab) */
    char *pool;
    size_t pool_len;
    uint32_t *vmap;       /* (vmap_cap) */
    size_t vmap_cap;
    tok_merge_slot *merges; /* (merge_cap) */
    size_t merge_cap;
    size_t n_merges;
    int32_t byte_id[256]; /* byte-level BPE: id of the token of byte b's mapped char; SPM, raw BPE: id of <0xNN>; -1 */
    int32_t *match_ids;   /* (n_match) */
    size_t n_match;
    bool first_byte_match[256];
    pretok_step steps[TOK_MAX_PRE_STEPS];
    size_t n_steps;
    bool nfc;
    bool ignore_merges;
    bool raw_bpe;          /* BPE on raw UTF-8: "▁" for spaces, <0xNN> byte tokens (Gemma 4) */
    bool wpm_lowercase, wpm_strip_accents; /* WPM normalisation (BertNormalizer) */
    size_t max_token_len;  /* longest token text in bytes (WPM's longest-match bound) */
    bool add_space_prefix; /* SPM */
    bool add_bos, add_eos;
    int32_t bos, eos, eot, eom, pad, unk;
    int32_t text_unk;     /* the token for text the vocabulary cannot spell; -1 = refuse such text */
    uint8_t *eog;         /* (n_vocab + 7) / 8 */
};

/* Everything tok_build needs, independent of the file format. Arrays are borrowed for the call. */
typedef struct tok_spec {
    slm_tokenizer_kind kind;
    size_t n_vocab;
    const tok_str *tokens;   /* (n_vocab) stored text; ptr may be NULL for holes (empty, unused) */
    const uint8_t *types;    /* (n_vocab) or NULL = all NORMAL */
    const float *scores;     /* (n_vocab) or NULL */
    size_t n_merges;
    const tok_str *merges;   /* (n_merges, 2): left, right */
    /* Pre-tokenizer: either a llama.cpp preset name, or explicit steps (ownership moves to the
     * tokenizer on success and on failure; the caller must not deinit them). */
    const char *pre_preset;
    pretok_step *steps;
    size_t n_steps;
    const char *pre_name;    /* static name for explicit steps */
    bool nfc, ignore_merges, raw_bpe, add_space_prefix, add_bos, add_eos;
    bool wpm_lowercase, wpm_strip_accents; /* WPM only */
    int64_t bos, eos, eot, eom, pad, unk; /* -1 = absent */
    const int64_t *extra_eog; /* (n_extra_eog) more end-of-generation ids (e.g. generation_config) */
    size_t n_extra_eog;
} tok_spec;

void tok_spec_init(tok_spec *s);
/* The core constructor. Validates everything in spec: vocabulary size, token text (valid UTF-8 for
 * BPE), types, special ids in range, merges naming known tokens whose concatenation is a token.
 * SLM_ERR_FORMAT/RANGE/UNSUPPORTED with a message naming the item; SLM_ERR_NOMEM. *out is NULL on
 * failure. */
slm_status tok_build(const tok_spec *spec, const slm_allocator *a, slm_tokenizer **out, slm_err *e);

/* Builds a tokenizer from tokenizer.json text (json, len bytes) plus an optional parsed
 * tokenizer_config.json (tok_config) and generation_config.json (gen_config). */
slm_status tok_from_json(const char *json, size_t len, const struct cJSON *tok_config,
                         const struct cJSON *gen_config, const slm_allocator *a, slm_tokenizer **out, slm_err *e);

/* Id of the token whose stored text is s[0, n), or -1. */
int32_t tok_find(const slm_tokenizer *t, const char *s, size_t n);

/* Growable id vector used by encode. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
slm_status tok_ids_push(tok_ids *ids, int32_t id, const slm_allocator *a);

/* A byte range text[off, off + len) of the text being encoded. ids NULL: plain text, where no
 * control token is matched (user-defined tokens are, as without SLM_TOKENIZE_PARSE_SPECIAL), nor
 * one that overlaps the span. ids set: the range encodes as ids[0, n_ids), the text on either side
 * as separate segments. Spans are sorted by off and do not overlap. */
typedef struct tok_span {
    size_t off, len;
    const int32_t *ids;
    size_t n_ids;
} tok_span;
/* slm_tokenizer_encode into *out (allocated with tok's allocator; the caller frees out->v) with
 * spans. SLM_ERR_INVALID_ARG: *bad_off as slm_tokenizer_encode's *n_out. */
slm_status tok_encode_spans(const slm_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                            const tok_span *spans, size_t n_spans, tok_ids *out, size_t *bad_off);

/* BPE of one pre-tokenised piece (bytes s[0, n)), appending ids. Byte-level: symbols start as the
 * tokens of each byte's mapped character. Raw (t->raw_bpe, s already "▁"-escaped): symbols start
 * as UTF-8 characters, a piece of newlines only that is a token is that token, and a symbol without
 * a token becomes its bytes' <0xNN> tokens. A byte with no token becomes text_unk; without one the
 * call fails with SLM_ERR_INVALID_ARG and *bad_off receives the byte's offset in s. */
slm_status bpe_encode_piece(const slm_tokenizer *t, const uint8_t *s, size_t n, tok_ids *out, size_t *bad_off);
/* SentencePiece BPE of one escaped text segment ("▁" for spaces), appending ids. A symbol with
 * neither a token nor byte-fallback tokens becomes text_unk; without one SLM_ERR_INVALID_ARG with
 * the symbol's offset in s in *bad_off. */
slm_status spm_encode_segment(const slm_tokenizer *t, const char *s, size_t n, tok_ids *out, size_t *bad_off);

/* WordPiece of one text segment (llama.cpp's WPM: words at whitespace and punctuation, lowercased
 * and accent-stripped as the tokenizer says, longest pieces of "▁" + word), appending ids. A word
 * no pieces spell becomes the unknown token; without one SLM_ERR_INVALID_ARG with the word's
 * offset in s in *bad_off. */
slm_status wpm_encode_segment(const slm_tokenizer *t, const char *s, size_t n, tok_ids *out, size_t *bad_off);

/* GPT-2 byte<->unicode mapping (docs/spec/gguf.md §7). */
uint32_t tok_byte_to_cp(uint8_t b);
/* Byte of code point cp under the mapping, or -1 if cp is not a mapped char. */
int tok_cp_to_byte(uint32_t cp);

#endif
