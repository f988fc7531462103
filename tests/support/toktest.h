/* toktest.h — helpers for the tokenizer tests: build a tokenizer from a tokenizer.json file, from a
 * GGUF-style directory assembled in memory (no GGUF file needed), read golden id files written by
 * scripts/gen-tokenizer-golden.py, and locate the tokenizer files fetched by fetch-models.sh. */
#ifndef SLM_TOKTEST_H
#define SLM_TOKTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "text/tok_impl.h"

/* A GGUF metadata directory built in memory; values point into strings owned by the builder. */
typedef struct tt_gguf {
    gguf_file g;
    size_t cap;
    void **owned; /* allocations released by tt_gguf_free */
    size_t n_owned, cap_owned;
} tt_gguf;

void tt_gguf_init(tt_gguf *t);
void tt_gguf_free(tt_gguf *t);
void tt_gguf_str(tt_gguf *t, const char *key, const char *val);
void tt_gguf_u32(tt_gguf *t, const char *key, uint32_t v);
void tt_gguf_bool(tt_gguf *t, const char *key, bool v);
/* String array (n strings, NUL-terminated inputs copied). */
void tt_gguf_strs(tt_gguf *t, const char *key, const char *const *v, size_t n);
/* Fixed-size array: elem_type GGUF_INT32 or GGUF_FLOAT32, n elements copied from v. */
void tt_gguf_arr(tt_gguf *t, const char *key, gguf_vtype elem_type, const void *v, size_t n);

/* Cached tokenizer file: $STATELM_CACHE (default ~/.cache/statelm)/tokenizers/NAME/tokenizer.json.
 * Static buffer. */
const char *tt_cached_tokenizer(const char *name);
/* Loads a tokenizer.json file; NULL (with a message printed) on failure. */
slm_tokenizer *tt_load_json(const char *path);
/* A gguf directory equivalent to a tokenizer.json file (tokens, token types from added tokens,
 * merges as "a b" strings), with tokenizer.ggml.pre = pre. false if the file is unreadable. */
bool tt_gguf_from_json(tt_gguf *t, const char *path, const char *pre);
/* The committed tiny SentencePiece vocabulary (tests/data/tokenizer/spm_tiny.json) as GGUF
 * metadata: model "llama", scores, token types, bos 1, eos 2, unk 0, and add_space_prefix when
 * asked (absent otherwise). */
void tt_gguf_spm_tiny(tt_gguf *t, bool add_space_prefix);

typedef struct tt_golden {
    uint32_t n_chunks;
    uint32_t *byte_len;  /* (n_chunks) */
    uint32_t *n_ids;     /* (n_chunks) */
    int32_t **ids;       /* (n_chunks) pointers into data */
    uint8_t *data;
} tt_golden;

bool tt_golden_load(tt_golden *g, const char *path);
void tt_golden_free(tt_golden *g);

#endif
