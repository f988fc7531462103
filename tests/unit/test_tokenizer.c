/* test_tokenizer.c — text/tokenizer*: bad metadata and broken tokenizer.json (a status and a
 * message, never a crash), special-token parsing, invalid UTF-8 input, buffer caps, decoding,
 * the streaming detokenizer, end-of-generation ids, and allocation-failure sweeps. Uses the
 * committed tiny tokenizers (tests/data/tokenizer/tiny_bpe.json, spm_tiny.json). */
#include "testutil.h"
#include "toktest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

/* ---- helpers ------------------------------------------------------------------------------- */
static slm_tokenizer *tiny_bpe(void) {
    slm_tokenizer *t = tt_load_json(tu_data_path("tokenizer/tiny_bpe.json"));
    assert_non_null(t);
    return t;
}

static slm_tokenizer *spm_tiny(void) {
    tt_gguf gg;
    tt_gguf_spm_tiny(&gg, false);
    slm_tokenizer *t = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(tok_from_gguf(&gg.g, NULL, &t, &e), SLM_OK);
    tt_gguf_free(&gg);
    return t;
}

/* A small byte-level GGUF directory: the 256 byte tokens, "ab", "abc", two specials. */
static void small_gguf(tt_gguf *gg) {
    static char store[256][4];
    const char *toks[260];
    int32_t types[260];
    for (int b = 0; b < 256; b++) {
        size_t l = utf8_encode(tok_byte_to_cp((uint8_t)b), (uint8_t *)store[b]);
        store[b][l] = 0;
        toks[b] = store[b];
        types[b] = TOK_TYPE_NORMAL;
    }
    toks[256] = "ab";
    toks[257] = "abc";
    toks[258] = "<|im_start|>";
    toks[259] = "<|im_end|>";
    types[256] = types[257] = TOK_TYPE_NORMAL;
    types[258] = types[259] = TOK_TYPE_CONTROL;
    const char *merges[] = {"a b", "ab c"};
    tt_gguf_init(gg);
    tt_gguf_str(gg, "tokenizer.ggml.model", "gpt2");
    tt_gguf_str(gg, "tokenizer.ggml.pre", "qwen2");
    tt_gguf_strs(gg, "tokenizer.ggml.tokens", toks, 260);
    tt_gguf_arr(gg, "tokenizer.ggml.token_type", GGUF_INT32, types, 260);
    tt_gguf_strs(gg, "tokenizer.ggml.merges", merges, 2);
    tt_gguf_u32(gg, "tokenizer.ggml.eos_token_id", 259);
}

static slm_status gguf_status(tt_gguf *gg, slm_err *e) {
    slm_tokenizer *t = (slm_tokenizer *)1;
    err_clear(e);
    slm_status st = tok_from_gguf(&gg->g, NULL, &t, e);
    if (st == SLM_OK) tok_destroy(t);
    else assert_null(t);
    return st;
}

static slm_status json_status(const char *json, slm_err *e) {
    slm_tokenizer *t = (slm_tokenizer *)1;
    err_clear(e);
    slm_status st = tok_from_json(json, strlen(json), NULL, NULL, NULL, &t, e);
    if (st == SLM_OK) tok_destroy(t);
    else assert_null(t);
    return st;
}

#define EXPECT_ERR(call, status, fragment)                                                          \
    do {                                                                                           \
        slm_err e_;                                                                                \
        assert_int_equal(call(&e_), status);                                                      \
        if (!strstr(e_.msg, fragment)) fprintf(stderr, "message: %s\n", e_.msg);                   \
        assert_non_null(strstr(e_.msg, fragment));                                                 \
    } while (0)

/* ---- bad GGUF metadata ---------------------------------------------------------------------- */
static void gguf_bad_metadata(void **unused) {
    (void)unused;
    tt_gguf gg;
    slm_err e;
    small_gguf(&gg);
    assert_int_equal(gguf_status(&gg, &e), SLM_OK);

    /* Mismatched array lengths. */
    int32_t types[3] = {1, 1, 1};
    tt_gguf_arr(&gg, "tokenizer.ggml.token_type", GGUF_INT32, types, 3);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "tokenizer.ggml.token_type"));
    tt_gguf_free(&gg);

    small_gguf(&gg);
    float scores[5] = {0};
    tt_gguf_arr(&gg, "tokenizer.ggml.scores", GGUF_FLOAT32, scores, 5);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "tokenizer.ggml.scores"));
    tt_gguf_free(&gg);

    /* Merges naming unknown tokens, a merge whose result is not a token, a malformed merge. */
    const char *m1[] = {"a b", "x zz"};
    small_gguf(&gg);
    tt_gguf_strs(&gg, "tokenizer.ggml.merges", m1, 2);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "unknown token 'zz'"));
    const char *m2[] = {"b c"};
    tt_gguf_strs(&gg, "tokenizer.ggml.merges", m2, 1);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "is not a token"));
    const char *m3[] = {"abc"};
    tt_gguf_strs(&gg, "tokenizer.ggml.merges", m3, 1);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "tokenizer.ggml.merges[0]"));
    tt_gguf_free(&gg);

    /* Out-of-range special ids. */
    small_gguf(&gg);
    tt_gguf_u32(&gg, "tokenizer.ggml.bos_token_id", 260);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_RANGE);
    assert_non_null(strstr(e.msg, "bos_token_id"));
    tt_gguf_u32(&gg, "tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_RANGE);
    tt_gguf_free(&gg);

    /* Invalid UTF-8 token text. */
    small_gguf(&gg);
    {
        gguf_value *v = NULL;
        for (uint64_t i = 0; i < gg.g.n_kv; i++)
            if (strcmp(gg.g.kv[i].key, "tokenizer.ggml.tokens") == 0) v = &gg.g.kv[i].value;
        static const char bad[] = "a\xff";
        v->v.arr.strs[257] = (gguf_str){bad, 2};
    }
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "token 257 text is not valid UTF-8"));
    tt_gguf_free(&gg);

    /* Wrong value types, unknown model and pre-tokenizer, missing keys. */
    small_gguf(&gg);
    tt_gguf_u32(&gg, "tokenizer.ggml.model", 3);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "tokenizer.ggml.model"));
    tt_gguf_str(&gg, "tokenizer.ggml.model", "t5");
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "tokenizer 't5' is not supported"));
    tt_gguf_str(&gg, "tokenizer.ggml.model", "gpt2");
    tt_gguf_str(&gg, "tokenizer.ggml.pre", "no-such-pre");
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "no-such-pre"));
    tt_gguf_str(&gg, "tokenizer.ggml.pre", "llama-bpe");
    tt_gguf_u32(&gg, "tokenizer.ggml.merges", 1);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    int32_t ints[2] = {1, 2};
    tt_gguf_arr(&gg, "tokenizer.ggml.merges", GGUF_INT32, ints, 2);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "element type"));
    tt_gguf_arr(&gg, "tokenizer.ggml.tokens", GGUF_INT32, ints, 2);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    tt_gguf_strs(&gg, "tokenizer.ggml.tokens", NULL, 0);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    int32_t badtype[260];
    for (int i = 0; i < 260; i++) badtype[i] = 9;
    tt_gguf_free(&gg);
    small_gguf(&gg);
    tt_gguf_arr(&gg, "tokenizer.ggml.token_type", GGUF_INT32, badtype, 260);
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_FORMAT);
    tt_gguf_free(&gg);

    /* No tokenizer at all: NOT_FOUND without a message. */
    tt_gguf_init(&gg);
    tt_gguf_str(&gg, "general.architecture", "llama");
    assert_int_equal(gguf_status(&gg, &e), SLM_ERR_NOT_FOUND);
    assert_string_equal(e.msg, "");
    tt_gguf_free(&gg);
}

static void gguf_small_encode(void **unused) {
    (void)unused;
    tt_gguf gg;
    small_gguf(&gg);
    slm_tokenizer *t = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(tok_from_gguf(&gg.g, NULL, &t, &e), SLM_OK);
    tt_gguf_free(&gg);
    assert_string_equal(slm_tokenizer_pre_name(t), "qwen2");
    assert_int_equal(slm_tokenizer_n_vocab(t), 260);
    assert_int_equal(slm_tokenizer_eos(t), 259);
    assert_int_equal(slm_tokenizer_bos(t), -1);
    assert_int_equal(slm_tokenizer_eot(t), 259); /* found by its text */
    assert_int_equal(slm_tokenizer_pad(t), -1);
    assert_false(slm_tokenizer_add_bos(t));
    assert_true(slm_tokenizer_is_eog(t, 259));
    assert_false(slm_tokenizer_is_eog(t, 258));
    int32_t ids[16];
    size_t n = 0;
    assert_int_equal(slm_tokenizer_encode(t, "abc<|im_start|>ab", 17, SLM_TOKENIZE_PARSE_SPECIAL, ids, 16, &n), SLM_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 257);
    assert_int_equal(ids[1], 258);
    assert_int_equal(ids[2], 256);
    tok_destroy(t);
}

/* ---- broken tokenizer.json ------------------------------------------------------------------- */
#define J_HEAD "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":"
#define J_TAIL ",\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true}"

static slm_status j_ok(slm_err *e) { return json_status(J_HEAD "[\"a b\"]}" J_TAIL "}", e); }
static slm_status j_syntax(slm_err *e) { return json_status("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0", e); }
static slm_status j_nomodel(slm_err *e) { return json_status("{\"added_tokens\": []}", e); }
static slm_status j_wordpiece(slm_err *e) { return json_status("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", e); }
static slm_status j_vocab_type(slm_err *e) { return json_status("{\"model\":{\"type\":\"BPE\",\"vocab\":[1,2]}}", e); }
static slm_status j_bad_id(slm_err *e) { return json_status("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-4}}}", e); }
static slm_status j_dup_id(slm_err *e) {
    return json_status("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}" J_TAIL "}", e);
}
static slm_status j_merge_unknown(slm_err *e) { return json_status(J_HEAD "[[\"a\",\"q\"]]}" J_TAIL "}", e); }
static slm_status j_merge_shape(slm_err *e) { return json_status(J_HEAD "[[\"a\"]]}" J_TAIL "}", e); }
static slm_status j_pre(slm_err *e) {
    return json_status(J_HEAD "[]},\"pre_tokenizer\":{\"type\":\"Whitespace\"}}", e);
}
static slm_status j_regex(slm_err *e) {
    return json_status(J_HEAD "[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                              "\"pattern\":{\"Regex\":\"(unclosed\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}}",
                       e);
}
static slm_status j_norm(slm_err *e) {
    return json_status(J_HEAD "[]},\"normalizer\":{\"type\":\"Lowercase\"}" J_TAIL "}", e);
}
static slm_status j_spm(slm_err *e) {
    return json_status("{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0},\"merges\":[]}}", e);
}
static slm_status j_added(slm_err *e) {
    return json_status(J_HEAD "[]},\"added_tokens\":[{\"id\":\"x\"}]" J_TAIL "}", e);
}

static void json_bad_files(void **unused) {
    (void)unused;
    EXPECT_ERR(j_ok, SLM_OK, "");
    EXPECT_ERR(j_syntax, SLM_ERR_FORMAT, "invalid JSON near byte");
    EXPECT_ERR(j_nomodel, SLM_ERR_FORMAT, "no model");
    EXPECT_ERR(j_wordpiece, SLM_ERR_UNSUPPORTED, "WordPiece");
    EXPECT_ERR(j_vocab_type, SLM_ERR_FORMAT, "model.vocab");
    EXPECT_ERR(j_bad_id, SLM_ERR_FORMAT, "invalid id");
    EXPECT_ERR(j_dup_id, SLM_ERR_FORMAT, "two vocab entries");
    EXPECT_ERR(j_merge_unknown, SLM_ERR_FORMAT, "unknown token 'q'");
    EXPECT_ERR(j_merge_shape, SLM_ERR_FORMAT, "merge 0");
    EXPECT_ERR(j_pre, SLM_ERR_UNSUPPORTED, "Whitespace");
    EXPECT_ERR(j_regex, SLM_ERR_FORMAT, "regex does not compile");
    EXPECT_ERR(j_norm, SLM_ERR_UNSUPPORTED, "Lowercase");
    EXPECT_ERR(j_spm, SLM_ERR_UNSUPPORTED, "byte-level");
    EXPECT_ERR(j_added, SLM_ERR_FORMAT, "added_tokens");
    slm_tokenizer *t = (slm_tokenizer *)1;
    slm_err e;
    err_clear(&e);
    assert_int_equal(tok_from_json(NULL, 0, NULL, NULL, NULL, &t, &e), SLM_ERR_INVALID_ARG);
    assert_null(t);
    hf_config c;
    memset(&c, 0, sizeof c);
    assert_int_equal(tok_from_hf(&c, NULL, &t, &e), SLM_ERR_NOT_FOUND);
    c.tokenizer_json_path = "/nonexistent/tokenizer.json";
    err_clear(&e);
    assert_int_equal(tok_from_hf(&c, NULL, &t, &e), SLM_ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "/nonexistent/tokenizer.json"));
}

/* ---- encoding behaviour ----------------------------------------------------------------------- */
static void special_tokens(void **unused) {
    (void)unused;
    slm_tokenizer *t = tiny_bpe();
    int32_t ids[64];
    size_t n = 0;
    const char *s = "<|im_start|>user<think>";
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), SLM_TOKENIZE_PARSE_SPECIAL, ids, 64, &n), SLM_OK);
    int32_t im_start = tok_find(t, "<|im_start|>", 12), think = tok_find(t, "<think>", 7);
    assert_true(im_start >= 0 && think >= 0);
    assert_int_equal(ids[0], im_start);
    assert_int_equal(ids[n - 1], think);
    /* Without parsing, the control token is plain text; the user-defined <think> still matches. */
    size_t n2 = 0;
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), 0, ids, 64, &n2), SLM_OK);
    assert_true(n2 > n);
    assert_int_not_equal(ids[0], im_start);
    assert_int_equal(ids[n2 - 1], think);
    /* Round trip with and without rendering specials. */
    char buf[128];
    size_t nb = 0;
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), SLM_TOKENIZE_PARSE_SPECIAL, ids, 64, &n), SLM_OK);
    assert_int_equal(slm_tokenizer_decode(t, ids, n, true, buf, sizeof buf, &nb), SLM_OK);
    assert_int_equal(nb, strlen(s));
    assert_memory_equal(buf, s, nb);
    assert_int_equal(slm_tokenizer_decode(t, ids, n, false, buf, sizeof buf, &nb), SLM_OK);
    assert_int_equal(nb, strlen("user<think>"));
    assert_memory_equal(buf, "user<think>", nb);
    assert_true(slm_tokenizer_is_eog(t, tok_find(t, "<|im_end|>", 10)));
    assert_true(slm_tokenizer_is_eog(t, tok_find(t, "<|endoftext|>", 13)));
    assert_false(slm_tokenizer_is_eog(t, think));
    assert_false(slm_tokenizer_is_eog(t, -1));
    assert_false(slm_tokenizer_is_eog(t, 1 << 30));
    tok_destroy(t);
}

/* Invalid UTF-8 input: never an error, every byte kept (byte-level tokens / byte fallback). */
static void invalid_utf8_input(void **unused) {
    (void)unused;
    static const char in[] = "ok \xff\xfe caf\xc3 \xe2\x82 end\xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf" "e\xcc\x81\xff";
    size_t len = sizeof in - 1;
    slm_tokenizer *ts[2] = {tiny_bpe(), spm_tiny()};
    for (int k = 0; k < 2; k++) {
        int32_t ids[256];
        size_t n = 0, nb = 0;
        char buf[256];
        assert_int_equal(slm_tokenizer_encode(ts[k], in, len, SLM_TOKENIZE_PARSE_SPECIAL, ids, 256, &n), SLM_OK);
        assert_int_equal(slm_tokenizer_decode(ts[k], ids, n, true, buf, sizeof buf, &nb), SLM_OK);
        /* tiny_bpe normalises to NFC: the only valid decomposed pair e+U+0301 becomes U+00E9. */
        if (k == 0) {
            assert_int_equal(nb, len - 1);
            assert_memory_equal(buf, in, len - 4);
            assert_memory_equal(buf + len - 4, "\xc3\xa9\xff", 3);
        } else {
            assert_int_equal(nb, len);
            assert_memory_equal(buf, in, len);
        }
        tok_destroy(ts[k]);
    }
}

static void buffer_caps_and_args(void **unused) {
    (void)unused;
    slm_tokenizer *t = tiny_bpe();
    const char *s = "Hello, world! 12345";
    size_t n = 0, n2 = 0;
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), 0, NULL, 0, &n), SLM_ERR_RANGE); /* size query */
    assert_true(n > 2);
    int32_t ids[64];
    ids[1] = -7;
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), 0, ids, 1, &n2), SLM_ERR_RANGE);
    assert_int_equal(n2, n);
    assert_int_equal(ids[1], -7);
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), 0, ids, 64, &n2), SLM_OK);
    assert_int_equal(slm_tokenizer_encode(t, "", 0, 0, ids, 64, &n2), SLM_OK);
    assert_int_equal(n2, 0);
    assert_int_equal(slm_tokenizer_encode(NULL, s, 1, 0, ids, 64, &n2), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tokenizer_encode(t, NULL, 1, 0, ids, 64, &n2), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tokenizer_encode(t, s, 1, 0, NULL, 64, &n2), SLM_ERR_INVALID_ARG);
    assert_int_equal(slm_tokenizer_encode(t, s, 1, 0, ids, 64, NULL), SLM_ERR_INVALID_ARG);
    /* decode: caps, out-of-range ids */
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), 0, ids, 64, &n), SLM_OK);
    char buf[8];
    size_t nb = 0;
    assert_int_equal(slm_tokenizer_decode(t, ids, n, false, buf, sizeof buf, &nb), SLM_ERR_RANGE);
    assert_int_equal(nb, strlen(s));
    assert_memory_equal(buf, s, sizeof buf);
    int32_t bad[2] = {ids[0], slm_tokenizer_n_vocab(t)};
    assert_int_equal(slm_tokenizer_decode(t, bad, 2, false, buf, sizeof buf, &nb), SLM_ERR_RANGE);
    assert_int_equal(nb, 0);
    bad[1] = -1;
    assert_int_equal(slm_tokenizer_decode(t, bad, 2, false, buf, sizeof buf, &nb), SLM_ERR_RANGE);
    /* token text / bytes */
    int32_t sp = tok_find(t, "\xc4\xa0", 2); /* "Ġ" = space */
    assert_true(sp >= 0);
    assert_string_equal(slm_tokenizer_token_text(t, sp), "\xc4\xa0");
    assert_int_equal(slm_tokenizer_token_bytes(t, sp, buf, sizeof buf, &nb), SLM_OK);
    assert_int_equal(nb, 1);
    assert_int_equal(buf[0], ' ');
    assert_null(slm_tokenizer_token_text(t, -1));
    assert_null(slm_tokenizer_token_text(t, slm_tokenizer_n_vocab(t)));
    assert_int_equal(slm_tokenizer_token_bytes(t, -1, buf, sizeof buf, &nb), SLM_ERR_RANGE);
    assert_int_equal(slm_tokenizer_token_bytes(t, sp, NULL, 0, &nb), SLM_ERR_RANGE);
    assert_int_equal(nb, 1);
    assert_int_equal(slm_tokenizer_get_kind(t), SLM_TOKENIZER_BPE);
    assert_int_equal(slm_tokenizer_n_vocab(NULL), 0);
    assert_int_equal(slm_tokenizer_bos(NULL), -1);
    tok_destroy(t);
    tok_destroy(NULL);
}

static void spm_behaviour(void **unused) {
    (void)unused;
    slm_tokenizer *t = spm_tiny();
    assert_int_equal(slm_tokenizer_get_kind(t), SLM_TOKENIZER_SPM);
    assert_string_equal(slm_tokenizer_pre_name(t), "spm");
    int32_t ids[64];
    size_t n = 0;
    const char *s = "Hello world";
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), SLM_TOKENIZE_ADD_BOS, ids, 64, &n), SLM_OK);
    assert_int_equal(ids[0], 1);
    /* BOS is control: skipped when decoding; the dummy-prefix space is removed. */
    char buf[64];
    size_t nb = 0;
    assert_int_equal(slm_tokenizer_decode(t, ids, n, false, buf, sizeof buf, &nb), SLM_OK);
    assert_int_equal(nb, strlen(s));
    assert_memory_equal(buf, s, nb);
    /* A character outside the vocabulary falls back to bytes. */
    const char *ml = "\xe0\xb4\x85"; /* Malayalam, not in the corpus the vocabulary was trained on */
    assert_int_equal(slm_tokenizer_encode(t, ml, 3, 0, ids, 64, &n), SLM_OK);
    assert_true(n >= 3);
    for (size_t i = n - 3; i < n; i++) assert_int_equal(t->tokens[ids[i]].type, TOK_TYPE_BYTE);
    assert_int_equal(slm_tokenizer_decode(t, ids, n, false, buf, sizeof buf, &nb), SLM_OK);
    assert_int_equal(nb, 3);
    assert_memory_equal(buf, ml, 3);
    tok_destroy(t);
}

/* Long pieces (one regex match of 1 MB) merge in O(n log n); a quadratic loop would take minutes. */
static void long_pieces(void **unused) {
    (void)unused;
    slm_tokenizer *ts[2] = {tiny_bpe(), spm_tiny()};
    size_t len = 1 << 20;
    char *s = malloc(len);
    int32_t *ids = malloc((len + 16) * sizeof *ids);
    char *dec = malloc(len);
    for (int k = 0; k < 2; k++) {
        for (int pat = 0; pat < 3; pat++) {
            for (size_t i = 0; i < len; i++) s[i] = pat == 0 ? 'a' : pat == 1 ? ' ' : "ab"[i % 2];
            size_t n = 0, nd = 0;
            assert_int_equal(slm_tokenizer_encode(ts[k], s, len, 0, ids, len + 16, &n), SLM_OK);
            assert_true(n <= len + 1);
            assert_int_equal(slm_tokenizer_decode(ts[k], ids, n, false, dec, len, &nd), SLM_OK);
            assert_int_equal(nd, len);
            assert_memory_equal(dec, s, len);
        }
        tok_destroy(ts[k]);
    }
    free(s);
    free(ids);
    free(dec);
}

/* ---- streaming detokenizer -------------------------------------------------------------------- */
static void detokenizer_stream(void **unused) {
    (void)unused;
    slm_tokenizer *t = tiny_bpe();
    slm_detokenizer *d = NULL;
    assert_int_equal(slm_detokenizer_create(t, &d), SLM_OK);
    const char *txt;
    size_t len;
    int32_t c3 = t->byte_id[0xC3], a9 = t->byte_id[0xA9], f0 = t->byte_id[0xF0], x9f = t->byte_id[0x9F];
    int32_t a = t->byte_id['a'];
    assert_int_equal(slm_detokenizer_push(d, c3, &txt, &len), SLM_OK);
    assert_int_equal(len, 0);
    assert_int_equal(slm_detokenizer_push(d, a9, &txt, &len), SLM_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(txt, "\xc3\xa9", 2);
    /* An incomplete sequence followed by ASCII: U+FFFD, then the ASCII. */
    assert_int_equal(slm_detokenizer_push(d, c3, &txt, &len), SLM_OK);
    assert_int_equal(len, 0);
    assert_int_equal(slm_detokenizer_push(d, a, &txt, &len), SLM_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(txt, "\xef\xbf\xbd" "a", 4);
    /* A 4-byte emoji split over two tokens, then flushed incomplete. */
    assert_int_equal(slm_detokenizer_push(d, f0, &txt, &len), SLM_OK);
    assert_int_equal(slm_detokenizer_push(d, x9f, &txt, &len), SLM_OK);
    assert_int_equal(len, 0);
    assert_int_equal(slm_detokenizer_flush(d, &txt, &len), SLM_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(txt, "\xef\xbf\xbd", 3);
    assert_int_equal(slm_detokenizer_flush(d, &txt, &len), SLM_OK);
    assert_int_equal(len, 0);
    /* A byte that can never start a character. */
    assert_int_equal(slm_detokenizer_push(d, t->byte_id[0xFF], &txt, &len), SLM_OK);
    assert_int_equal(len, 3);
    /* Control tokens produce nothing; out of range ids fail. */
    assert_int_equal(slm_detokenizer_push(d, tok_find(t, "<|im_end|>", 10), &txt, &len), SLM_OK);
    assert_int_equal(len, 0);
    assert_int_equal(slm_detokenizer_push(d, -3, &txt, &len), SLM_ERR_RANGE);
    assert_int_equal(slm_detokenizer_push(NULL, a, &txt, &len), SLM_ERR_INVALID_ARG);
    slm_detokenizer_destroy(d);
    slm_detokenizer_destroy(NULL);

    /* Streaming the corpus token by token gives back exactly the decoded text. */
    size_t clen = 0;
    uint8_t *corpus = tu_read_file(tu_data_path("tokenizer/corpus.txt"), &clen);
    size_t cap = clen, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    assert_int_equal(slm_tokenizer_encode(t, (const char *)corpus, clen, SLM_TOKENIZE_PARSE_SPECIAL, ids, cap, &n), SLM_OK);
    char *whole = malloc(2 * clen), *streamed = malloc(2 * clen);
    size_t nw = 0, ns = 0;
    assert_int_equal(slm_tokenizer_decode(t, ids, n, false, whole, 2 * clen, &nw), SLM_OK);
    assert_int_equal(slm_detokenizer_create(t, &d), SLM_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(slm_detokenizer_push(d, ids[i], &txt, &len), SLM_OK);
        assert_true(utf8_valid((const uint8_t *)txt, len));
        memcpy(streamed + ns, txt, len);
        ns += len;
    }
    assert_int_equal(slm_detokenizer_flush(d, &txt, &len), SLM_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ns, nw);
    assert_memory_equal(streamed, whole, nw);
    slm_detokenizer_destroy(d);
    free(whole);
    free(streamed);
    free(ids);
    free(corpus);
    tok_destroy(t);
}

/* ---- allocation failure ------------------------------------------------------------------------ */

static void allocation_failures(void **unused) {
    (void)unused;
    size_t n = 0;
    uint8_t *json = tu_read_file(tu_data_path("tokenizer/tiny_bpe.json"), &n);
    assert_non_null(json);
    tu_failing f = tu_failing_at(-1);
    f.keep_failing = true;
    slm_allocator a = tu_failing_allocator(&f);
    slm_tokenizer *t = NULL;
    int runs = 0;
    for (long k = 0;; k++) {
        f.n_alloc = 0;
        f.fail_at = k;
        slm_err e;
        err_clear(&e);
        slm_status st = tok_from_json((const char *)json, n, NULL, NULL, &a, &t, &e);
        runs++;
        if (st == SLM_OK) break;
        assert_int_equal(st, SLM_ERR_NOMEM);
        assert_null(t);
        assert_int_equal(f.n_live, 0);
    }
    f.fail_at = -1;
    assert_true(runs > 3);
    const char *s = "Encode this text, caf\xc3\xa9 <|im_start|> and   more   1234567!";
    int32_t ids[128];
    size_t want = 0;
    assert_int_equal(slm_tokenizer_encode(t, s, strlen(s), SLM_TOKENIZE_PARSE_SPECIAL, ids, 128, &want), SLM_OK);
    long live_before = f.n_live;
    for (long k = 0;; k++) {
        f.n_alloc = 0;
        f.fail_at = k;
        size_t got = 0;
        slm_status st = slm_tokenizer_encode(t, s, strlen(s), SLM_TOKENIZE_PARSE_SPECIAL, ids, 128, &got);
        if (st == SLM_OK) {
            assert_int_equal(got, want);
            break;
        }
        assert_int_equal(st, SLM_ERR_NOMEM);
        assert_int_equal(got, 0);
        assert_int_equal(f.n_live, live_before);
    }
    f.fail_at = -1;
    tok_destroy(t);
    assert_int_equal(f.n_live, 0);
    assert_int_equal(f.live_bytes, 0);
    free(json);
}

/* ---- text the vocabulary cannot spell (issue 13, defect 8) --------------------------------------- */
/* A vocabulary of the given kind, without byte tokens, whose unknown token is unk (-1 = none).
 * Tokens: 0 "a", 1 "b", 2 "<|endoftext|>" (control), 3 "<unk>" (type unknown), 4 "▁a". */
static slm_tokenizer *tiny_no_bytes(slm_tokenizer_kind kind, int64_t unk) {
    static const char *const text[] = {"a", "b", "<|endoftext|>", "<unk>", "\xe2\x96\x81" "a"};
    tok_str toks[5];
    for (int i = 0; i < 5; i++) toks[i] = (tok_str){text[i], strlen(text[i])};
    const uint8_t types[5] = {TOK_TYPE_NORMAL, TOK_TYPE_NORMAL, TOK_TYPE_CONTROL, TOK_TYPE_UNKNOWN, TOK_TYPE_NORMAL};
    const float scores[5] = {-1, -1, 0, 0, -0.5f};
    tok_spec sp;
    tok_spec_init(&sp);
    sp.kind = kind;
    sp.n_vocab = kind == SLM_TOKENIZER_BPE ? 4 : 5; /* "▁a" is SentencePiece's */
    sp.tokens = toks;
    sp.types = types;
    sp.scores = scores;
    sp.pre_preset = kind == SLM_TOKENIZER_BPE ? "gpt2" : NULL;
    sp.unk = unk;
    slm_tokenizer *t = NULL;
    slm_err e;
    err_clear(&e);
    if (tok_build(&sp, NULL, &t, &e) != SLM_OK) fail_msg("tok_build: %s", e.msg);
    return t;
}

static void expect_refused_at(const slm_tokenizer *t, const char *text, uint32_t flags, size_t want_off) {
    int32_t ids[16];
    size_t n = 99;
    slm_status st = slm_tokenizer_encode(t, text, strlen(text), flags, ids, 16, &n);
    if (st != SLM_ERR_INVALID_ARG) fail_msg("'%s': status %s, want SLM_ERR_INVALID_ARG", text, slm_status_name(st));
    if (n != want_off) fail_msg("'%s': offset %zu, want %zu", text, n, want_off);
}

/* Never a control token for text: a byte (BPE) or character (SPM) without a token becomes the
 * unknown token only when that is not a control token; else the call fails at the byte's offset. */
static void unencodable_text(void **unused) {
    (void)unused;
    int32_t ids[16];
    size_t n = 0;
    /* Byte-level BPE: 'a' and 'b' are tokens; 0xFF ("ÿ") and the space ("Ġ") are not. */
    slm_tokenizer *t = tiny_no_bytes(SLM_TOKENIZER_BPE, 2); /* unknown = <|endoftext|>, a control token */
    expect_refused_at(t, "a\xff" "b", 0, 1);
    expect_refused_at(t, "ab\xff", 0, 2);
    expect_refused_at(t, "ab a", 0, 2);
    expect_refused_at(t, "<|endoftext|>a\xff", SLM_TOKENIZE_PARSE_SPECIAL, 14);
    assert_int_equal(slm_tokenizer_encode(t, "<|endoftext|>ab", 15, SLM_TOKENIZE_PARSE_SPECIAL, ids, 16, &n), SLM_OK);
    assert_int_equal(n, 3); /* text that spells a control token still may, when asked */
    assert_int_equal(ids[0], 2);
    tok_destroy(t);
    t = tiny_no_bytes(SLM_TOKENIZER_BPE, -1); /* no unknown token: refused, not dropped */
    expect_refused_at(t, "a\xff" "b", 0, 1);
    tok_destroy(t);
    t = tiny_no_bytes(SLM_TOKENIZER_BPE, 3); /* a real unknown token stands in */
    assert_int_equal(slm_tokenizer_encode(t, "a\xff" "b", 3, 0, ids, 16, &n), SLM_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 1);
    tok_destroy(t);
    /* SentencePiece without byte fallback: "é" has no token; offsets are in the text, not in its
     * escaped form (each space became the 3-byte "▁"). */
    t = tiny_no_bytes(SLM_TOKENIZER_SPM, 2);
    expect_refused_at(t, "a a\xc3\xa9", 0, 3);
    assert_int_equal(slm_tokenizer_encode(t, "a a", 3, 0, ids, 16, &n), SLM_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 4);
    tok_destroy(t);
    t = tiny_no_bytes(SLM_TOKENIZER_SPM, 3);
    assert_int_equal(slm_tokenizer_encode(t, "a\xc3\xa9", 3, 0, ids, 16, &n), SLM_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 3);
    tok_destroy(t);
}

/* The real SmolLM2 vocabulary (GGUF; its unknown token is <|endoftext|>, a control token): the
 * bytes whose GPT-2 character has no token — listed by reading the GGUF with the gguf Python
 * package and applying the GPT-2 byte mapping — are refused at their offset; every other byte
 * encodes to tokens none of which is a control token. */
static void smollm2_unencodable_bytes(void **unused) {
    (void)unused;
    char path[1024];
    const char *cache = getenv("STATELM_CACHE"), *home = getenv("HOME");
    if (cache) snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else snprintf(path, sizeof path, "%s/.cache/statelm/models/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : "");
    if (!tu_file_exists(path)) TU_SKIP("%s not found (scripts/fetch-models.sh)", path);
    slm_model *m = NULL;
    char err[256];
    if (slm_model_load(path, NULL, &m, err, sizeof err) != SLM_OK) fail_msg("%s", err);
    const slm_tokenizer *t = slm_model_tokenizer(m);
    static const uint8_t missing[] = {0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, 0xc0, 0xc1, 0xf1, 0xf2, 0xf5,
                                      0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff};
    for (int b = 0; b < 256; b++) {
        char text[3] = {'x', (char)b, 0};
        int32_t ids[8];
        size_t n = 0;
        slm_status st = slm_tokenizer_encode(t, text, 2, 0, ids, 8, &n);
        bool is_missing = memchr(missing, b, sizeof missing) != NULL;
        if (is_missing) {
            if (st != SLM_ERR_INVALID_ARG || n != 1) fail_msg("byte 0x%02x: %s, offset %zu", b, slm_status_name(st), n);
            continue;
        }
        if (st != SLM_OK) fail_msg("byte 0x%02x: %s", b, slm_status_name(st));
        for (size_t i = 0; i < n; i++)
            if (t->tokens[ids[i]].type == TOK_TYPE_CONTROL) fail_msg("byte 0x%02x: control token %d", b, ids[i]);
    }
    expect_refused_at(t, "Hello \xff\xfe", 0, 6);
    slm_model_destroy(m);
}

/* slm_tokenizer_load: the tokenizer of each tiny model file (GGUF and HF folder), loaded alone,
 * gives the ids and info of the model's own; the vocab-only seeds of the fuzz corpus load or are
 * refused naming what; bad arguments and paths fail with a message. */
static void standalone_load(void **unused) {
    (void)unused;
    static const char *const archs[] = {"llama", "qwen3", "lfm2", "qwen35", "gemma3"};
    static const char *const texts[] = {"Hello world", " two  spaces\n\ttab", "caf\xc3\xa9 \xe6\x97\xa5 123456",
                                        "<|im_start|>user<|im_end|>"};
    char path[1024], err[512];
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        for (int hf = 0; hf < 2; hf++) {
            if (hf) snprintf(path, sizeof path, "%s", tu_data_path("tiny"));
            if (hf) snprintf(path + strlen(path), sizeof path - strlen(path), "/%s/hf", archs[a]);
            else snprintf(path, sizeof path, "%s/%s/%s-f32.gguf", tu_data_path("tiny"), archs[a], archs[a]);
            slm_model *m = NULL;
            slm_tokenizer *t = NULL;
            assert_int_equal(slm_model_load(path, NULL, &m, err, sizeof err), SLM_OK);
            if (slm_tokenizer_load(path, NULL, &t, err, sizeof err) != SLM_OK) fail_msg("%s: %s", path, err);
            const slm_tokenizer *mt = slm_model_tokenizer(m);
            assert_int_equal(slm_tokenizer_n_vocab(t), slm_tokenizer_n_vocab(mt));
            assert_string_equal(slm_tokenizer_pre_name(t), slm_tokenizer_pre_name(mt));
            assert_int_equal(slm_tokenizer_bos(t), slm_tokenizer_bos(mt));
            assert_int_equal(slm_tokenizer_eos(t), slm_tokenizer_eos(mt));
            for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
                int32_t a1[64], a2[64];
                size_t n1 = 0, n2 = 0;
                uint32_t flags = SLM_TOKENIZE_ADD_BOS | SLM_TOKENIZE_PARSE_SPECIAL;
                assert_int_equal(slm_tokenizer_encode(t, texts[i], strlen(texts[i]), flags, a1, 64, &n1), SLM_OK);
                assert_int_equal(slm_tokenizer_encode(mt, texts[i], strlen(texts[i]), flags, a2, 64, &n2), SLM_OK);
                assert_int_equal(n1, n2);
                assert_memory_equal(a1, a2, n1 * sizeof *a1);
            }
            slm_tokenizer_free(t);
            slm_model_destroy(m);
        }
    }
    static const struct { const char *seed, *msg; slm_status st; } seeds[] = {
        {"seed_gemma4", NULL, SLM_OK},
        {"seed_bpe_deepseek-llm", NULL, SLM_OK},
        {"seed_bad_model_t5", "tokenizer 't5' is not supported", SLM_ERR_UNSUPPORTED},
        {"seed_wpm", NULL, SLM_OK},
        {"seed_bad_pre", "pre-tokenizer 'no-such-pre' is not supported", SLM_ERR_UNSUPPORTED},
        {"seed_spm_cut", "truncated", SLM_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tu_data_path("corpus/vocab"), seeds[i].seed);
        slm_tokenizer *t = (slm_tokenizer *)1;
        slm_status st = slm_tokenizer_load(path, NULL, &t, err, sizeof err);
        if (st != seeds[i].st) fail_msg("%s: %s (%s)", seeds[i].seed, err, slm_status_name(st));
        if (seeds[i].msg) {
            assert_null(t);
            if (!strstr(err, seeds[i].msg) || !strstr(err, seeds[i].seed)) fail_msg("%s: message '%s'", seeds[i].seed, err);
        }
        slm_tokenizer_free(st == SLM_OK ? t : NULL);
    }
    slm_tokenizer *t = (slm_tokenizer *)1;
    assert_int_equal(slm_tokenizer_load(NULL, NULL, &t, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_null(t);
    assert_int_equal(slm_tokenizer_load("x.gguf", NULL, NULL, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_true(strlen(err) > 0);
    assert_int_not_equal(slm_tokenizer_load("/nonexistent/vocab.gguf", NULL, &t, err, sizeof err), SLM_OK);
    assert_null(t);
    assert_non_null(strstr(err, "/nonexistent/vocab.gguf"));
    slm_tokenizer_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gguf_bad_metadata), cmocka_unit_test(gguf_small_encode), cmocka_unit_test(json_bad_files),
        cmocka_unit_test(special_tokens),    cmocka_unit_test(invalid_utf8_input), cmocka_unit_test(buffer_caps_and_args),
        cmocka_unit_test(spm_behaviour),     cmocka_unit_test(long_pieces),     cmocka_unit_test(detokenizer_stream), cmocka_unit_test(allocation_failures),
        cmocka_unit_test(unencodable_text), cmocka_unit_test(smollm2_unencodable_bytes),
        cmocka_unit_test(standalone_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
