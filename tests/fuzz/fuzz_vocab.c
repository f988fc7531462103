/* fuzz_vocab.c — libFuzzer target for a tokenizer built from a GGUF file's tokenizer metadata alone
 * (gguf_parse + tok_from_gguf, what slm_tokenizer_load does with a vocab-only file): any input is
 * refused with a status and a message (none only for "no tokenizer", SLM_ERR_NOT_FOUND), or loads
 * a tokenizer that encodes a fixed set of texts (with and without BOS and special-token parsing)
 * into ids inside the vocabulary, or refuses the text with SLM_ERR_INVALID_ARG and an offset
 * inside it, and decodes those ids. Seeds (scripts/gen-vocab-corpus.py: every tokenizer model
 * statelm reads, some pre-tokenizers, unsupported ones, damaged and truncated files) live in
 * tests/data/corpus/vocab/, replayed by CTest in every build. Run as fuzz_gguf (its header). */
#include <stdlib.h>
#include <string.h>

#include "text/tok_impl.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static const char *const texts[] = {
    "", "hello world", " leading  and trailing  ", "line\nbreak\r\n\n\ttab", "caf\xc3\xa9 e\xcc\x81 \xe6\x97\xa5\xe6\x9c\xac 12345",
    "\xf0\x9f\x98\x80 \xe2\x96\x81 <|endoftext|><|im_start|>", "bad \xff\xfe utf8 \xc3", "'s 'T 've 3.14 $+<=>",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    slm_err e;
    err_clear(&e);
    if (gguf_parse(&g, data, size, NULL, &e) != SLM_OK) {
        CHECK(e.msg[0] != '\0');
        gguf_close(&g);
        return 0;
    }
    slm_tokenizer *t = NULL;
    slm_status st = tok_from_gguf(&g, NULL, &t, &e);
    gguf_close(&g); /* the tokenizer keeps copies of everything */
    if (st != SLM_OK) {
        CHECK(t == NULL);
        CHECK(st == SLM_ERR_NOT_FOUND || (e.status == st && e.msg[0] != '\0'));
        return 0;
    }
    int32_t n_vocab = slm_tokenizer_n_vocab(t);
    CHECK(n_vocab > 0);
    int32_t ids[512];
    char buf[4096];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t len = strlen(texts[i]);
        for (uint32_t flags = 0; flags < 4; flags++) {
            size_t n = 0;
            st = slm_tokenizer_encode(t, texts[i], len, flags, ids, sizeof ids / sizeof ids[0], &n);
            if (st == SLM_ERR_INVALID_ARG) {
                CHECK(n <= 3 * len + 3); /* an offset in the text or its NFC form */
                continue;
            }
            CHECK(st == SLM_OK && n <= sizeof ids / sizeof ids[0]);
            for (size_t k = 0; k < n; k++) CHECK(ids[k] >= 0 && ids[k] < n_vocab);
            size_t nd = 0;
            st = slm_tokenizer_decode(t, ids, n, true, buf, sizeof buf, &nd);
            CHECK(st == SLM_OK || (st == SLM_ERR_RANGE && nd > sizeof buf));
        }
    }
    tok_destroy(t);
    return 0;
}
