/* test_gemma_tokenizer.c — Gemma 3's tokenizer (SentencePiece BPE, 262,144 tokens, byte fallback,
 * no space prefix, runs of newlines and spaces as user-defined tokens) loaded from the tokenizer.ggml.*
 * metadata of the real GGUF (gemma-3-270m.Q4_K_M.gguf, fetched by scripts/fetch-models.sh; the test
 * is skipped without it) through gguf_open + tok_from_gguf, without loading the model. Ids must
 * equal llama.cpp's llama-tokenize's (scripts/gen-gemma-tokenizer-golden.py: BOS first, special
 * tokens parsed, and the sample also without parsing them) on every chunk of
 * tests/data/tokenizer/corpus.txt and gemma_sample.txt, and decode(encode(x)) == x with a literal "▁"
 * (U+2581) coming back as a space, as llama.cpp's and Hugging Face's decoders give it.
 * Invalid UTF-8 is not compared: llama.cpp takes as many bytes as a lead byte announces as one
 * symbol (swallowing following ASCII, even a space's "▁" escape, into byte tokens, which breaks its
 * own round trip); statelm makes each invalid byte a symbol of its own (tokenizer.c). */
#include "testutil.h"
#include "toktest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char model_path[4096];
static gguf_file gf;
static slm_tokenizer *tok;

static const char *gemma_path(void) {
    const char *cache = getenv("STATELM_CACHE"), *home = getenv("HOME");
    if (cache) snprintf(model_path, sizeof model_path, "%s/models/gemma-3-270m.Q4_K_M.gguf", cache);
    else snprintf(model_path, sizeof model_path, "%s/.cache/statelm/models/gemma-3-270m.Q4_K_M.gguf", home ? home : "");
    return model_path;
}

static int setup(void **state) {
    (void)state;
    if (!tu_file_exists(gemma_path())) return 0;
    slm_err e;
    err_clear(&e);
    if (gguf_open(&gf, model_path, NULL, &e) != SLM_OK || tok_from_gguf(&gf, NULL, &tok, &e) != SLM_OK) {
        fprintf(stderr, "%s: %s\n", model_path, e.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tok_destroy(tok);
    gguf_close(&gf);
    return 0;
}

#define NEED_MODEL() \
    do { if (!tok) TU_SKIP("%s not found (run scripts/fetch-models.sh)", model_path); } while (0)

static void show_ids(const char *what, const int32_t *ids, size_t n, size_t at) {
    size_t lo = at > 4 ? at - 4 : 0, hi = at + 6 < n ? at + 6 : n;
    fprintf(stderr, "  %s[%zu..%zu):", what, lo, hi);
    for (size_t i = lo; i < hi; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Encodes every chunk of text file `text` as cut by golden file `golden`; returns the number of
 * chunks whose ids differ or that do not round-trip (details of the first few). */
static int check_file(const char *text_rel, const char *golden_rel, uint32_t flags) {
    size_t text_len = 0;
    uint8_t *text = tu_read_file(tu_data_path(text_rel), &text_len);
    assert_non_null(text);
    tt_golden g;
    assert_true(tt_golden_load(&g, tu_data_path(golden_rel)));
    size_t cap = 1 << 16, off = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *dec = malloc(1 << 20), *want = malloc(text_len + 1);
    assert_non_null(ids);
    assert_non_null(dec);
    assert_non_null(want);
    int bad = 0, bad_rt = 0;
    for (uint32_t c = 0; c < g.n_chunks; c++) {
        const char *s = (const char *)text + off;
        size_t len = g.byte_len[c], n = 0;
        assert_true(off + len <= text_len);
        assert_int_equal(slm_tokenizer_encode(tok, s, len, SLM_TOKENIZE_ADD_BOS | flags, ids, cap, &n), SLM_OK);
        size_t m = 0;
        while (m < n && m < g.n_ids[c] && ids[m] == g.ids[c][m]) m++;
        if ((m != n || n != g.n_ids[c]) && bad++ < 3) {
            fprintf(stderr, "%s: chunk %u (bytes %zu..%zu) differs at id %zu (ours %zu ids, llama.cpp %u)\n", text_rel, c,
                    off, off + len, m, n, g.n_ids[c]);
            show_ids("ours", ids, n, m);
            show_ids("llama.cpp", g.ids[c], g.n_ids[c], m);
            fprintf(stderr, "  text: %.*s\n", (int)(len > 300 ? 300 : len), s);
        }
        /* Round trip without the BOS the encoder put first; "▁" decodes as a space. */
        size_t nd = 0, nw = 0;
        assert_true(n >= 1 && ids[0] == slm_tokenizer_bos(tok));
        assert_int_equal(slm_tokenizer_decode(tok, ids + 1, n - 1, true, dec, 1 << 20, &nd), SLM_OK);
        for (size_t i = 0; i < len; nw++) {
            bool esc = i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0;
            want[nw] = esc ? ' ' : s[i];
            i += esc ? 3 : 1;
        }
        if ((nd != nw || memcmp(dec, want, nw) != 0) && bad_rt++ < 3) {
            fprintf(stderr, "%s: chunk %u does not round-trip\n  in:  %.*s\n  out: %.*s\n", text_rel, c,
                    (int)(len > 200 ? 200 : len), s, (int)(nd > 200 ? 200 : nd), dec);
        }
        off += len;
    }
    assert_int_equal(off, text_len);
    fprintf(stderr, "%s: %u chunks, %zu bytes, %d id mismatches, %d round-trip failures\n", text_rel, g.n_chunks, text_len,
            bad, bad_rt);
    free(ids);
    free(dec);
    free(want);
    free(text);
    tt_golden_free(&g);
    return bad + bad_rt;
}

/* What the file's metadata says (tokenizer.ggml.*) and what statelm derives from it. */
static void metadata(void **s) {
    (void)s;
    NEED_MODEL();
    assert_int_equal(slm_tokenizer_get_kind(tok), SLM_TOKENIZER_SPM);
    assert_int_equal(slm_tokenizer_n_vocab(tok), 262144);
    assert_int_equal(slm_tokenizer_bos(tok), 2);
    assert_int_equal(slm_tokenizer_eos(tok), 1);
    assert_int_equal(slm_tokenizer_pad(tok), 0);
    assert_true(slm_tokenizer_add_bos(tok));
    assert_false(tok->add_space_prefix);
    assert_int_equal(slm_tokenizer_eot(tok), 106);
    assert_string_equal(slm_tokenizer_token_text(tok, 105), "<start_of_turn>");
    assert_string_equal(slm_tokenizer_token_text(tok, 106), "<end_of_turn>");
    assert_true(slm_tokenizer_is_eog(tok, 1));
    assert_true(slm_tokenizer_is_eog(tok, 106));
    assert_false(slm_tokenizer_is_eog(tok, 105));
    for (int b = 0; b < 256; b++) assert_int_equal(tok->byte_id[b], 238 + b);
}

static void corpus_ids(void **s) {
    (void)s;
    NEED_MODEL();
    assert_int_equal(check_file("tokenizer/corpus.txt", "tokenizer/golden_gemma3.bin", SLM_TOKENIZE_PARSE_SPECIAL), 0);
}

static void sample_ids(void **s) {
    (void)s;
    NEED_MODEL();
    assert_int_equal(check_file("tokenizer/gemma_sample.txt", "tokenizer/golden_gemma3_sample.bin", SLM_TOKENIZE_PARSE_SPECIAL),
                     0);
}

/* Without SLM_TOKENIZE_PARSE_SPECIAL: control tokens stay text, user-defined ones still match. */
static void sample_ids_raw(void **s) {
    (void)s;
    NEED_MODEL();
    assert_int_equal(check_file("tokenizer/gemma_sample.txt", "tokenizer/golden_gemma3_sample_raw.bin", 0), 0);
}

/* Invalid UTF-8 (not compared with llama.cpp, see the top): each invalid byte becomes its own
 * <0xNN> token (id 238 + byte in this vocabulary) and the text round-trips. */
static void invalid_utf8(void **s) {
    (void)s;
    NEED_MODEL();
    static const char text[] = "ab\xE4" "cd \xFF\xFE x\xE4\xB8 y \xC3(";
    int32_t ids[64];
    size_t n = 0, nd = 0;
    assert_int_equal(slm_tokenizer_encode(tok, text, sizeof text - 1, 0, ids, 64, &n), SLM_OK);
    static const uint8_t invalid[] = {0xE4, 0xFF, 0xFE, 0xE4, 0xB8, 0xC3};
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof invalid; i++)
        if (ids[i] == 238 + invalid[k]) k++;
    assert_int_equal(k, sizeof invalid);
    char dec[64];
    assert_int_equal(slm_tokenizer_decode(tok, ids, n, true, dec, sizeof dec, &nd), SLM_OK);
    assert_int_equal(nd, sizeof text - 1);
    assert_memory_equal(dec, text, nd);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(metadata), cmocka_unit_test(corpus_ids),
                                       cmocka_unit_test(sample_ids), cmocka_unit_test(sample_ids_raw),
                                       cmocka_unit_test(invalid_utf8)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
