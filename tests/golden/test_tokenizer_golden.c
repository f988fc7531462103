/* test_tokenizer_golden.c — token ids of tests/data/tokenizer/corpus.txt (230 KB, many scripts,
 * code, numbers, emoji, whitespace) against ids from Hugging Face `tokenizers` and `sentencepiece`
 * (scripts/gen-tokenizer-golden.py), chunk by chunk, plus decode(encode(x)) == x. Tokenizers:
 * tiny byte-level BPE (committed), SentencePiece BPE with byte fallback (committed, loaded through
 * the GGUF path), and SmolLM2, Qwen3, Qwen3.5, LFM2 (fetched by scripts/fetch-models.sh; skipped
 * when absent), each loaded from tokenizer.json and, for the byte-level ones, from an equivalent
 * GGUF directory with the llama.cpp pre-tokenizer name (GGUF text is not NFC-normalised, as in
 * llama.cpp: the Qwen chunks are normalised before the GGUF tokenizer sees them). */
#include "testutil.h"
#include "toktest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uninorm.h>

static uint8_t *corpus;
static size_t corpus_len;

static int setup(void **state) {
    (void)state;
    corpus = tu_read_file(tu_data_path("tokenizer/corpus.txt"), &corpus_len);
    return corpus ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    free(corpus);
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void show_ids(const char *what, const int32_t *ids, size_t n, size_t at) {
    size_t lo = at > 4 ? at - 4 : 0, hi = at + 6 < n ? at + 6 : n;
    fprintf(stderr, "  %s[%zu..%zu):", what, lo, hi);
    for (size_t i = lo; i < hi; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Compares every chunk; returns the number of mismatching chunks (details of the first few).
 * nfc_first: the chunk is NFC-normalised before encoding, for a GGUF tokenizer (which, as llama.cpp,
 * does not normalise) against a reference whose tokenizer.json normalises. */
static int check_corpus(const slm_tokenizer *t, const char *golden, uint32_t flags, bool nfc_first, const char *label) {
    tt_golden g;
    assert_true(tt_golden_load(&g, tu_data_path(golden)));
    size_t off = 0, cap = 1 << 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *dec = malloc(1 << 20);
    assert_non_null(ids);
    assert_non_null(dec);
    int bad = 0, bad_rt = 0;
    double t0 = now_s();
    for (uint32_t c = 0; c < g.n_chunks; c++) {
        const char *text = (const char *)corpus + off;
        size_t len = g.byte_len[c], chunk_len = len;
        assert_true(off + len <= corpus_len);
        uint8_t *normed = NULL;
        if (nfc_first) {
            normed = u8_normalize(UNINORM_NFC, (const uint8_t *)text, chunk_len, NULL, &len);
            assert_non_null(normed);
            text = (const char *)normed;
        }
        size_t n = 0;
        assert_int_equal(slm_tokenizer_encode(t, text, len, flags, ids, cap, &n), SLM_OK);
        size_t m = 0;
        while (m < n && m < g.n_ids[c] && ids[m] == g.ids[c][m]) m++;
        if (m != n || n != g.n_ids[c]) {
            if (bad++ < 3) {
                fprintf(stderr, "%s: chunk %u (bytes %zu..%zu) differs at id %zu (ours %zu ids, reference %u)\n", label,
                        c, off, off + len, m, n, g.n_ids[c]);
                show_ids("ours", ids, n, m);
                show_ids("reference", g.ids[c], g.n_ids[c], m);
                fprintf(stderr, "  text: %.*s\n", (int)(len > 300 ? 300 : len), text);
            }
        }
        size_t nd = 0;
        assert_int_equal(slm_tokenizer_decode(t, ids, n, true, dec, 1 << 20, &nd), SLM_OK);
        /* NFC tokenizers give back the NFC form of the text (as Hugging Face's do). */
        const char *want = text;
        size_t want_len = len;
        uint8_t *nfc = NULL;
        if (t->nfc) {
            nfc = u8_normalize(UNINORM_NFC, (const uint8_t *)text, len, NULL, &want_len);
            assert_non_null(nfc);
            want = (const char *)nfc;
        }
        bool same = nd == want_len && memcmp(dec, want, want_len) == 0;
        free(nfc);
        free(normed);
        if (!same) {
            if (bad_rt++ < 3) fprintf(stderr, "%s: chunk %u does not round-trip\n", label, c);
        }
        off += chunk_len;
    }
    double dt = now_s() - t0;
    assert_int_equal(off, corpus_len);
    fprintf(stderr, "%s: %u chunks, %zu bytes, %.3f s, %d id mismatches, %d round-trip failures\n", label,
            g.n_chunks, corpus_len, dt, bad, bad_rt);
    free(ids);
    free(dec);
    tt_golden_free(&g);
    return bad + bad_rt;
}

/* Encodes the whole corpus as one text; returns seconds. Checks the round trip. */
static double whole_corpus(const slm_tokenizer *t) {
    size_t cap = corpus_len + 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    double t0 = now_s();
    assert_int_equal(slm_tokenizer_encode(t, (const char *)corpus, corpus_len, SLM_TOKENIZE_PARSE_SPECIAL, ids, cap, &n),
                     SLM_OK);
    double dt = now_s() - t0;
    char *dec = malloc(2 * corpus_len);
    size_t nd = 0, want_len = corpus_len;
    assert_int_equal(slm_tokenizer_decode(t, ids, n, true, dec, 2 * corpus_len, &nd), SLM_OK);
    uint8_t *nfc = t->nfc ? u8_normalize(UNINORM_NFC, corpus, corpus_len, NULL, &want_len) : NULL;
    assert_int_equal(nd, want_len);
    assert_memory_equal(dec, nfc ? nfc : corpus, want_len);
    free(nfc);
    free(dec);
    free(ids);
    return dt;
}

static void golden_json(const char *path, const char *golden, const char *pre_name, const char *label) {
    if (!tu_file_exists(path)) TU_SKIP("%s not found (run scripts/fetch-models.sh)", path);
    double t0 = now_s();
    slm_tokenizer *t = tt_load_json(path);
    assert_non_null(t);
    fprintf(stderr, "%s: loaded %d tokens in %.3f s\n", label, slm_tokenizer_n_vocab(t), now_s() - t0);
    assert_string_equal(slm_tokenizer_pre_name(t), pre_name);
    assert_int_equal(check_corpus(t, golden, SLM_TOKENIZE_PARSE_SPECIAL, false, label), 0);
    fprintf(stderr, "%s: whole corpus in one call: %.3f s\n", label, whole_corpus(t));
    tok_destroy(t);
}

/* nfc: the tokenizer.json normalises to NFC; the GGUF tokenizer does not (llama.cpp's ids), so the
 * chunks are normalised first. */
static void golden_gguf(const char *path, const char *golden, const char *pre, bool nfc, const char *label) {
    if (!tu_file_exists(path)) TU_SKIP("%s not found (run scripts/fetch-models.sh)", path);
    tt_gguf gg;
    tt_gguf_init(&gg);
    assert_true(tt_gguf_from_json(&gg, path, pre));
    slm_tokenizer *t = NULL;
    slm_err e;
    err_clear(&e);
    slm_status st = tok_from_gguf(&gg.g, NULL, &t, &e);
    if (st != SLM_OK) fprintf(stderr, "%s: %s\n", label, e.msg);
    assert_int_equal(st, SLM_OK);
    assert_int_equal(check_corpus(t, golden, SLM_TOKENIZE_PARSE_SPECIAL, nfc, label), 0);
    tok_destroy(t);
    tt_gguf_free(&gg);
}

static void tiny_bpe_json(void **s) {
    (void)s;
    golden_json(tu_data_path("tokenizer/tiny_bpe.json"), "tokenizer/golden_tiny_bpe.bin", "llama3", "tiny-bpe");
}
static void smollm2_json(void **s) {
    (void)s;
    golden_json(tt_cached_tokenizer("smollm2"), "tokenizer/golden_smollm2.bin", "smollm", "smollm2");
}
static void smollm2_gguf(void **s) {
    (void)s;
    golden_gguf(tt_cached_tokenizer("smollm2"), "tokenizer/golden_smollm2.bin", "smollm", false, "smollm2-gguf");
}
static void qwen3_json(void **s) {
    (void)s;
    golden_json(tt_cached_tokenizer("qwen3"), "tokenizer/golden_qwen3.bin", "qwen2", "qwen3");
}
static void qwen3_gguf(void **s) {
    (void)s;
    golden_gguf(tt_cached_tokenizer("qwen3"), "tokenizer/golden_qwen3.bin", "qwen2", true, "qwen3-gguf");
}
static void qwen35_json(void **s) {
    (void)s;
    golden_json(tt_cached_tokenizer("qwen35"), "tokenizer/golden_qwen35.bin", "qwen35", "qwen35");
}
static void qwen35_gguf(void **s) {
    (void)s;
    golden_gguf(tt_cached_tokenizer("qwen35"), "tokenizer/golden_qwen35.bin", "qwen35", true, "qwen35-gguf");
}
static void lfm2_json(void **s) {
    (void)s;
    golden_json(tt_cached_tokenizer("lfm2"), "tokenizer/golden_lfm2.bin", "llama3", "lfm2");
}
/* llama.cpp treats "lfm2" as llama3 with ignore_merges; the ids must still agree with HF's. */
static void lfm2_gguf(void **s) {
    (void)s;
    golden_gguf(tt_cached_tokenizer("lfm2"), "tokenizer/golden_lfm2.bin", "lfm2", false, "lfm2-gguf");
}

/* SentencePiece BPE vocabulary (tests/data/tokenizer/spm_tiny.json, trained by the golden script)
 * as GGUF metadata with model "llama". */
static void spm_tiny_gguf(void **s) {
    (void)s;
    tt_gguf gg;
    tt_gguf_spm_tiny(&gg, true);
    slm_tokenizer *t = NULL;
    slm_err e;
    err_clear(&e);
    slm_status st = tok_from_gguf(&gg.g, NULL, &t, &e);
    if (st != SLM_OK) fprintf(stderr, "spm: %s\n", e.msg);
    assert_int_equal(st, SLM_OK);
    assert_int_equal(slm_tokenizer_get_kind(t), SLM_TOKENIZER_SPM);
    assert_true(slm_tokenizer_add_bos(t));
    assert_int_equal(check_corpus(t, "tokenizer/golden_spm_tiny.bin", 0, false, "spm-tiny"), 0);
    tok_destroy(t);
    tt_gguf_free(&gg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tiny_bpe_json), cmocka_unit_test(spm_tiny_gguf), cmocka_unit_test(smollm2_json),
        cmocka_unit_test(smollm2_gguf),  cmocka_unit_test(qwen3_json),    cmocka_unit_test(qwen3_gguf),
        cmocka_unit_test(qwen35_json),   cmocka_unit_test(qwen35_gguf),   cmocka_unit_test(lfm2_json), cmocka_unit_test(lfm2_gguf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
