/* test_safetensors.c — format/safetensors: the single-file and sharded fixtures written by the
 * safetensors package (tests/data/hf/gen_hf_fixtures.py; values are formulas repeated here), and
 * every class of bad input built byte by byte in this file: each must give an error status and a
 * message naming what is wrong, with no crash or leak (the ASan build checks both). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/half.h"
#include "base/reader.h"
#include "format/safetensors.h"

/* ---- helpers ---- */

static void msg_has(const slm_err *e, const char *needle) {
    if (!strstr(e->msg, needle)) {
        print_error("message \"%s\" lacks \"%s\"\n", e->msg, needle);
        fail();
    }
}

/* 8-byte little-endian header length, the header text, then n_data bytes (value i & 0xFF). */
static uint8_t *mk_st(const char *header, size_t n_data, size_t *out_len) {
    size_t hl = strlen(header), n = 8 + hl + n_data;
    uint8_t *b = malloc(n ? n : 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < n_data; i++) b[8 + hl + i] = (uint8_t)i;
    *out_len = n;
    return b;
}

/* Parses the built image into a fresh set; leaves the set closed. */
static slm_status parse_hdr(const char *header, size_t n_data, slm_err *e) {
    size_t n;
    uint8_t *b = mk_st(header, n_data, &n);
    st_set s;
    memset(&s, 0, sizeof s);
    err_clear(e);
    slm_status st = st_parse_image(&s, b, n, 0, e);
    if (st != SLM_OK) {
        assert_int_equal(s.n_tensors, 0);
        assert_null(s.tensors);
    }
    st_close(&s);
    free(b);
    return st;
}

/* Expects status `want` and a message containing each non-NULL needle. */
static void expect(const char *header, size_t n_data, slm_status want, const char *n1, const char *n2) {
    slm_err e;
    slm_status st = parse_hdr(header, n_data, &e);
    if (st != want) {
        print_error("header %s: status %s, expected %s (%s)\n", header, slm_status_name(st), slm_status_name(want),
                    e.msg);
        fail();
    }
    if (want != SLM_OK) assert_true(e.msg[0] != '\0');
    if (n1) msg_has(&e, n1);
    if (n2) msg_has(&e, n2);
}

static void write_st(const char *dir, const char *name, const char *header, size_t n_data) {
    size_t n;
    uint8_t *b = mk_st(header, n_data, &n);
    tu_write_in_dir(dir, name, b, n);
    free(b);
}

static float ld_f32(const uint8_t *p) {
    uint32_t u = ld_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static const st_tensor *find(const st_set *s, const char *name, uint32_t type, uint32_t n_dims, int64_t ne0,
                             int64_t ne1, int64_t ne2, int64_t ne3, uint64_t size_bytes) {
    const st_tensor *t = st_find(s, name);
    if (!t) {
        print_error("tensor %s not found\n", name);
        fail();
    }
    assert_string_equal(t->name, name);
    assert_int_equal(t->type, type);
    assert_int_equal(t->n_dims, n_dims);
    assert_int_equal(t->ne[0], ne0);
    assert_int_equal(t->ne[1], ne1);
    assert_int_equal(t->ne[2], ne2);
    assert_int_equal(t->ne[3], ne3);
    assert_int_equal(t->size_bytes, size_bytes);
    return t;
}

static void inside_map(const st_set *s, const st_tensor *t) {
    const fmap *m = &s->maps[t->shard];
    assert_true(t->data >= m->data + 8);
    assert_true(t->data + t->size_bytes <= m->data + m->size);
}

/* ---- fixtures written by the safetensors package ---- */

static void single_folder(void **unused) {
    (void)unused;
    st_set s;
    slm_err e;
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, tu_data_path("hf/single"), NULL, &e), SLM_OK);
    assert_int_equal(s.n_shards, 1);
    assert_non_null(strstr(s.shard_paths[0], "/model.safetensors"));
    assert_int_equal(s.n_tensors, 6);
    for (uint64_t i = 1; i < s.n_tensors; i++) assert_true(strcmp(s.tensors[i - 1].name, s.tensors[i].name) < 0);

    /* F32 (4, 3): ne = {3, 4}; v[i] = (i - 5) * 0.25 */
    const st_tensor *t = find(&s, "model.embed_tokens.weight", SLM_DTYPE_F32, 2, 3, 4, 1, 1, 48);
    inside_map(&s, t);
    for (int i = 0; i < 12; i++) assert_true(ld_f32(t->data + 4 * i) == (float)(i - 5) * 0.25f);

    /* F16 (5,): IEEE half encodings of 1, -2.5, 0.5, 65504, 2^-24 */
    t = find(&s, "model.norm.weight", SLM_DTYPE_F16, 1, 5, 1, 1, 1, 10);
    inside_map(&s, t);
    const uint16_t f16_bits[5] = {0x3C00, 0xC100, 0x3800, 0x7BFF, 0x0001};
    for (int i = 0; i < 5; i++) assert_int_equal(ld_u16(t->data + 2 * i), f16_bits[i]);

    /* BF16 (2, 3, 2): ne = {2, 3, 2}; v[i] = (i + 1) * 0.5 * (-1)^i */
    t = find(&s, "model.layers.0.mlp.up_proj.weight", SLM_DTYPE_BF16, 3, 2, 3, 2, 1, 24);
    inside_map(&s, t);
    for (int i = 0; i < 12; i++) {
        float want = (float)(i + 1) * 0.5f * (i % 2 ? -1.0f : 1.0f);
        assert_true(bf16_to_f32(ld_u16(t->data + 2 * i)) == want);
    }

    t = find(&s, "scalar", SLM_DTYPE_F32, 0, 1, 1, 1, 1, 4);
    inside_map(&s, t);
    assert_true(ld_f32(t->data) == 3.5f);

    t = find(&s, "model.layers.0.positions", SLM_DTYPE_I64, 1, 3, 1, 1, 1, 24);
    inside_map(&s, t);
    assert_int_equal((int64_t)ld_u64(t->data), -1);
    assert_int_equal((int64_t)ld_u64(t->data + 8), 0);
    assert_int_equal((int64_t)ld_u64(t->data + 16), (int64_t)1 << 40);

    t = find(&s, "empty", SLM_DTYPE_F32, 2, 4, 0, 1, 1, 0);

    assert_null(st_find(&s, "model.embed_tokens"));
    assert_null(st_find(&s, ""));
    st_close(&s);
    assert_int_equal(s.n_tensors, 0);
    assert_null(s.tensors);
    st_close(&s); /* idempotent on a zeroed set */
}

static void sharded_folder(void **unused) {
    (void)unused;
    st_set s;
    slm_err e;
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, tu_data_path("hf/sharded"), NULL, &e), SLM_OK);
    assert_int_equal(s.n_shards, 2);
    assert_non_null(strstr(s.shard_paths[0], "/model-00001-of-00002.safetensors"));
    assert_non_null(strstr(s.shard_paths[1], "/model-00002-of-00002.safetensors"));
    assert_int_equal(s.n_tensors, 4);

    const st_tensor *t = find(&s, "model.embed_tokens.weight", SLM_DTYPE_F32, 2, 2, 2, 1, 1, 16);
    assert_int_equal(t->shard, 0);
    inside_map(&s, t);
    for (int i = 0; i < 4; i++) assert_true(ld_f32(t->data + 4 * i) == (float)(i + 1));

    t = find(&s, "model.layers.0.input_layernorm.weight", SLM_DTYPE_BF16, 1, 4, 1, 1, 1, 8);
    assert_int_equal(t->shard, 0);
    inside_map(&s, t);
    const float bf[4] = {1.0f, -1.0f, 0.5f, 256.0f};
    for (int i = 0; i < 4; i++) assert_true(bf16_to_f32(ld_u16(t->data + 2 * i)) == bf[i]);

    t = find(&s, "lm_head.weight", SLM_DTYPE_F16, 2, 2, 2, 1, 1, 8);
    assert_int_equal(t->shard, 1);
    inside_map(&s, t);
    const uint16_t hb[4] = {0x3400, 0xB400, 0x6400, 0xFBFF}; /* 0.25 -0.25 1024 -65504 */
    for (int i = 0; i < 4; i++) assert_int_equal(ld_u16(t->data + 2 * i), hb[i]);

    t = find(&s, "model.norm.weight", SLM_DTYPE_F32, 1, 2, 1, 1, 1, 8);
    assert_int_equal(t->shard, 1);
    inside_map(&s, t);
    assert_true(ld_f32(t->data) == 0.5f);
    assert_true(ld_f32(t->data + 4) == 1.5f);
    st_close(&s);
}

/* Counting allocator: every allocation of an st_set goes through s->alloc and is freed by st_close. */
typedef struct counter {
    long n_alloc, n_free;
} counter;
static void *count_alloc(void *ud, size_t n) {
    ((counter *)ud)->n_alloc++;
    return malloc(n);
}
static void count_free(void *ud, void *p) {
    ((counter *)ud)->n_free++;
    free(p);
}

static void custom_allocator(void **unused) {
    (void)unused;
    counter c = {0, 0};
    slm_allocator a = {count_alloc, count_free, &c};
    st_set s;
    slm_err e;
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, tu_data_path("hf/sharded"), &a, &e), SLM_OK);
    assert_true(c.n_alloc > 0);
    st_close(&s);
    assert_int_equal(c.n_alloc, c.n_free);
    /* and on a failure path */
    char *dir = tu_temp_dir();
    const char *idx = "{\"weight_map\": {\"a\": \"x.safetensors\"}}";
    tu_write_in_dir(dir, "model.safetensors.index.json", idx, strlen(idx));
    write_st(dir, "x.safetensors", "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, dir, &a, &e), SLM_ERR_FORMAT);
    msg_has(&e, "\"a\" is mapped to shard \"x.safetensors\"");
    assert_int_equal(c.n_alloc, c.n_free);
    tu_rm_dir(dir);
}

/* Allocation-failure sweep: fail the k-th allocation of the set for k = 0, 1, ... until the open
 * succeeds; each failing run must report NOMEM and free everything it allocated. */

static void alloc_failures(void **unused) {
    (void)unused;
    const char *dirs[] = {"hf/single", "hf/sharded"};
    for (size_t d = 0; d < 2; d++) {
        long k = 0;
        for (;; k++) {
            tu_failing f = tu_failing_at(k);
            slm_allocator a = tu_failing_allocator(&f);
            st_set s;
            slm_err e;
            err_clear(&e);
            slm_status st = st_open_dir(&s, tu_data_path(dirs[d]), &a, &e);
            if (st == SLM_OK) {
                st_close(&s);
                assert_int_equal(f.n_alloc, f.n_free);
                assert_int_equal(k, f.n_alloc); /* every allocation was failed once before */
                break;
            }
            assert_int_equal(st, SLM_ERR_NOMEM);
            msg_has(&e, "out of memory");
            assert_int_equal(f.n_alloc - 1, f.n_free); /* all but the refused one were freed */
            assert_int_equal(f.n_live, 0);
            assert_null(s.tensors);
            assert_true(k < 1000);
        }
        assert_true(k > 3);
    }
}

static void dtypes(void **unused) {
    (void)unused;
    static const struct {
        const char *name;
        uint32_t type, size;
    } ok[] = {{"F32", SLM_DTYPE_F32, 4}, {"F16", SLM_DTYPE_F16, 2}, {"BF16", SLM_DTYPE_BF16, 2},
              {"F64", SLM_DTYPE_F64, 8}, {"I8", SLM_DTYPE_I8, 1},   {"I16", SLM_DTYPE_I16, 2},
              {"I32", SLM_DTYPE_I32, 4}, {"I64", SLM_DTYPE_I64, 8}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char h[256];
        snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%u]}}", ok[i].name,
                 3 * ok[i].size);
        size_t n;
        uint8_t *b = mk_st(h, 3 * ok[i].size, &n);
        st_set s;
        memset(&s, 0, sizeof s);
        slm_err e;
        err_clear(&e);
        assert_int_equal(st_parse_image(&s, b, n, 0, &e), SLM_OK);
        assert_int_equal(s.tensors[0].type, ok[i].type);
        assert_int_equal(s.tensors[0].size_bytes, 3 * ok[i].size);
        assert_true(st_dtype_known(ok[i].type));
        st_close(&s);
        free(b);
    }
    assert_false(st_dtype_known(SLM_DTYPE_Q4_0));
    const char *refused[] = {"BOOL", "U8", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "C64"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char h[256];
        snprintf(h, sizeof h, "{\"my.tensor\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[0,2]}}", refused[i]);
        char want[64];
        snprintf(want, sizeof want, "\"%s\"", refused[i]);
        expect(h, 2, SLM_ERR_UNSUPPORTED, "my.tensor", want);
    }
    expect("{\"t\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "unknown dtype",
           "\"Q9\"");
    expect("{\"t\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "unknown dtype",
           "\"f32\"");
}

/* ---- bad input, one class per test ---- */

static void header_length(void **unused) {
    (void)unused;
    st_set s;
    memset(&s, 0, sizeof s);
    slm_err e;
    const uint8_t tiny[3] = {2, 0, 0};
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, tiny, sizeof tiny, 0, &e), SLM_ERR_FORMAT);
    msg_has(&e, "3 bytes");
    msg_has(&e, "byte offset 0");
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, tiny, 0, 0, &e), SLM_ERR_FORMAT);

    uint8_t past[10] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, past, sizeof past, 0, &e), SLM_ERR_FORMAT);
    msg_has(&e, "header length 100");
    msg_has(&e, "past the end");

    uint8_t absurd[10] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, absurd, sizeof absurd, 0, &e), SLM_ERR_FORMAT);
    msg_has(&e, "9223372036854775808");
    msg_has(&e, "limit");

    uint8_t over_cap[10] = {0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100000001 */
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, over_cap, sizeof over_cap, 0, &e), SLM_ERR_FORMAT);
    msg_has(&e, "100000001");
    assert_int_equal(s.n_tensors, 0);
    st_close(&s);

    expect("", 0, SLM_ERR_FORMAT, "empty JSON", "byte offset 8");
}

static void header_json(void **unused) {
    (void)unused;
    expect("{\"t\" 1}", 0, SLM_ERR_FORMAT, "invalid JSON", "byte offset 13"); /* the '1' at JSON byte 5 */
    expect("{not json", 0, SLM_ERR_FORMAT, "invalid JSON", "header");
    expect("[1, 2]", 0, SLM_ERR_FORMAT, "array", "expected a JSON object");
    expect("\"s\"", 0, SLM_ERR_FORMAT, "string", "expected a JSON object");
    expect("{} x", 0, SLM_ERR_FORMAT, "unexpected data", "byte offset 11");
    expect("{\"t\xff\": 1}", 0, SLM_ERR_FORMAT, "invalid UTF-8", "byte offset 11");
    /* mk_st uses strlen, so the NUL case is built by hand: NUL at JSON byte 2 = byte offset 10 */
    uint8_t b[8 + 8] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '"', 0, '"', ':', '1', ' ', '}'};
    st_set s;
    memset(&s, 0, sizeof s);
    slm_err e;
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, b, sizeof b, 0, &e), SLM_ERR_FORMAT);
    msg_has(&e, "NUL byte at byte offset 10");
    /* padding with spaces (the reference writer aligns the header to 8 bytes) and metadata are fine */
    expect("{\"__metadata__\":{\"format\":\"pt\"},\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}   ", 4,
           SLM_OK, NULL, NULL);
    expect("{\"__metadata__\":null}", 0, SLM_OK, NULL, NULL);
    expect("{}", 0, SLM_OK, NULL, NULL);
    expect("{\"__metadata__\":{\"k\":1}}", 0, SLM_ERR_FORMAT, "__metadata__", "\"k\"");
    expect("{\"__metadata__\":[\"k\"]}", 0, SLM_ERR_FORMAT, "__metadata__", "array");
    expect("{\"t\":5}", 0, SLM_ERR_FORMAT, "\"t\"", "expected an object");
    expect("{\"t\":[]}", 0, SLM_ERR_FORMAT, "\"t\"", "expected an object");
}

static void entry_fields(void **unused) {
    (void)unused;
    expect("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "\"t\"", "missing \"dtype\"");
    expect("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "\"t\"", "missing \"shape\"");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, SLM_ERR_FORMAT, "\"t\"", "missing \"data_offsets\"");
    expect("{\"t\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "\"dtype\"",
           "expected a string");
    expect("{\"t\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "\"dtype\"", "null");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "\"shape\"",
           "expected an array");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 4, SLM_ERR_FORMAT, "\"data_offsets\"",
           "expected an array");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"dtype\":\"F16\"}}", 4, SLM_ERR_FORMAT,
           "duplicate key \"dtype\"", "\"t\"");
}

static void shapes(void **unused) {
    (void)unused;
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT, "\"shape\"[0]",
           "-1");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT,
           "\"shape\"[1]", "1.5");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, SLM_ERR_FORMAT, "\"shape\"[0]",
           "string");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[9007199254740992],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT,
           "\"shape\"[0]", "2^53");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, SLM_ERR_UNSUPPORTED,
           "5 dims", "\"t\"");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,2,1,3],\"data_offsets\":[0,24]}}", 24, SLM_OK, NULL, NULL);
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,4]}}", 4,
           SLM_ERR_FORMAT, "element count", "overflows");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,2048],\"data_offsets\":[0,4]}}", 4, SLM_ERR_FORMAT,
           "byte size", "overflows");
    /* a zero dim makes the count 0 whatever the other dims are */
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[4503599627370495,0,4503599627370495],\"data_offsets\":[0,0]}}", 0,
           SLM_OK, NULL, NULL);
}

static void offsets(void **unused) {
    (void)unused;
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, SLM_ERR_FORMAT, "reversed", "\"t\"");
    /* the header is 54 bytes, so the data section starts at byte offset 62; the tensor would end at 70 */
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, SLM_ERR_FORMAT,
           "past the data section", "byte offset 70");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, SLM_ERR_FORMAT, "needs 8", "\"t\"");
    expect("{\"t\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SLM_ERR_FORMAT, "needs 4", "F16");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, SLM_ERR_FORMAT, "3 entries", NULL);
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 8, SLM_ERR_FORMAT, "1 entries", NULL);
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8, SLM_ERR_FORMAT,
           "\"data_offsets\"[0]", "-4");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 8, SLM_ERR_FORMAT,
           "\"data_offsets\"[1]", "4.5");
    expect("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 8, SLM_ERR_FORMAT,
           "\"data_offsets\"[1]", "string");
    /* overlap, adjacency, a gap and an empty tensor inside another's bytes */
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, SLM_ERR_FORMAT, "overlap", "\"a\"");
    expect("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
           12, SLM_ERR_FORMAT, "overlap", "\"b\"");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           4, SLM_ERR_FORMAT, "overlap", NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, SLM_OK, NULL, NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           16, SLM_OK, NULL, NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
           8, SLM_OK, NULL, NULL);
}

static void duplicates(void **unused) {
    (void)unused;
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, SLM_ERR_FORMAT, "duplicate key \"a\"", NULL);
    /* the same name in a second image of the set: refused, and the set keeps the first image */
    size_t n1, n2;
    uint8_t *b1 = mk_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &n1);
    uint8_t *b2 = mk_st("{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
                        8, &n2);
    st_set s;
    memset(&s, 0, sizeof s);
    slm_err e;
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, b1, n1, 0, &e), SLM_OK);
    assert_int_equal(st_parse_image(&s, b2, n2, 1, &e), SLM_ERR_FORMAT);
    msg_has(&e, "\"a\" appears twice");
    assert_int_equal(s.n_tensors, 1);
    assert_int_equal(st_find(&s, "a")->type, SLM_DTYPE_F32);
    assert_null(st_find(&s, "c"));
    st_close(&s);
    free(b1);
    free(b2);
}

/* Every proper prefix of the single-file fixture must be refused, with a byte offset. */
static void truncation(void **unused) {
    (void)unused;
    size_t size = 0;
    uint8_t *full = tu_read_file(tu_data_path("hf/single/model.safetensors"), &size);
    assert_non_null(full);
    assert_true(size > 100);
    for (size_t n = 0; n < size; n++) {
        uint8_t *p = malloc(n ? n : 1); /* exact size: ASan sees any read past the prefix */
        memcpy(p, full, n);
        st_set s;
        memset(&s, 0, sizeof s);
        slm_err e;
        err_clear(&e);
        slm_status st = st_parse_image(&s, p, n, 0, &e);
        if (st == SLM_OK) {
            print_error("prefix of %zu of %zu bytes was accepted\n", n, size);
            fail();
        }
        msg_has(&e, "byte offset");
        assert_int_equal(s.n_tensors, 0);
        st_close(&s);
        free(p);
    }
    st_set s;
    memset(&s, 0, sizeof s);
    slm_err e;
    err_clear(&e);
    assert_int_equal(st_parse_image(&s, full, size, 0, &e), SLM_OK);
    assert_int_equal(s.n_tensors, 6);
    st_close(&s);
    free(full);
}

/* ---- folders ---- */

#define A_HDR "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"
#define B_HDR "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"

static slm_status open_dir_with_index(const char *index, slm_err *e, bool write_shards) {
    char *dir = tu_temp_dir();
    assert_non_null(dir);
    if (write_shards) {
        write_st(dir, "s1.safetensors", A_HDR, 4);
        write_st(dir, "s2.safetensors", B_HDR, 4);
    }
    if (index) tu_write_in_dir(dir, "model.safetensors.index.json", index, strlen(index));
    st_set s;
    err_clear(e);
    slm_status st = st_open_dir(&s, dir, NULL, e);
    if (st != SLM_OK) {
        assert_int_equal(s.n_tensors, 0);
        assert_int_equal(s.n_shards, 0);
        assert_null(s.tensors);
    }
    st_close(&s);
    tu_rm_dir(dir);
    return st;
}

static void folders(void **unused) {
    (void)unused;
    slm_err e;
    assert_int_equal(open_dir_with_index(NULL, &e, false), SLM_ERR_NOT_FOUND);
    msg_has(&e, "no model.safetensors");
    assert_int_equal(
        open_dir_with_index("{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}", &e, true),
        SLM_OK);
    /* broken index */
    assert_int_equal(open_dir_with_index("{\"weight_map\": {\"a\": \"s1.safe", &e, true), SLM_ERR_FORMAT);
    msg_has(&e, "model.safetensors.index.json");
    msg_has(&e, "invalid JSON at byte offset");
    assert_int_equal(open_dir_with_index("[]", &e, true), SLM_ERR_FORMAT);
    msg_has(&e, "expected an object");
    assert_int_equal(open_dir_with_index("{\"metadata\": {}}", &e, true), SLM_ERR_FORMAT);
    msg_has(&e, "missing \"weight_map\"");
    assert_int_equal(open_dir_with_index("{\"weight_map\": [\"s1.safetensors\"]}", &e, true), SLM_ERR_FORMAT);
    msg_has(&e, "weight_map");
    msg_has(&e, "expected an object");
    assert_int_equal(open_dir_with_index("{\"weight_map\": {}}", &e, true), SLM_ERR_FORMAT);
    msg_has(&e, "empty");
    assert_int_equal(open_dir_with_index("{\"weight_map\": {\"a\": 1}}", &e, true), SLM_ERR_FORMAT);
    msg_has(&e, "weight_map[\"a\"]");
    /* a missing shard */
    assert_int_equal(open_dir_with_index("{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s3.safetensors\"}}",
                                         &e, true),
                     SLM_ERR_IO);
    msg_has(&e, "s3.safetensors");
    /* path traversal */
    const char *bad_names[] = {"../s1.safetensors", "/etc/passwd", "..", ".", "", "sub/s1.safetensors"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        char idx[256];
        snprintf(idx, sizeof idx, "{\"weight_map\": {\"a\": \"%s\"}}", bad_names[i]);
        assert_int_equal(open_dir_with_index(idx, &e, true), SLM_ERR_FORMAT);
        msg_has(&e, "not a plain file name");
        char q[64];
        snprintf(q, sizeof q, "\"%s\"", bad_names[i]);
        msg_has(&e, q);
    }
    /* a tensor missing from its shard, and one listed in the wrong shard */
    assert_int_equal(open_dir_with_index("{\"weight_map\": {\"a\": \"s1.safetensors\", \"c\": \"s1.safetensors\"}}",
                                         &e, true),
                     SLM_ERR_FORMAT);
    msg_has(&e, "\"c\" is mapped to shard \"s1.safetensors\"");
    assert_int_equal(open_dir_with_index("{\"weight_map\": {\"a\": \"s2.safetensors\", \"b\": \"s1.safetensors\"}}",
                                         &e, true),
                     SLM_ERR_FORMAT);
    msg_has(&e, "\"a\" is mapped to shard \"s2.safetensors\"");
    msg_has(&e, "it is in ");
    msg_has(&e, "/s1.safetensors");
    /* one tensor in two shards */
    char *dir = tu_temp_dir();
    write_st(dir, "s1.safetensors", A_HDR, 4);
    write_st(dir, "s2.safetensors", A_HDR, 4);
    const char *idx = "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}";
    tu_write_in_dir(dir, "model.safetensors.index.json", idx, strlen(idx));
    st_set s;
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, dir, NULL, &e), SLM_ERR_FORMAT);
    msg_has(&e, "\"a\" appears twice");
    msg_has(&e, "s1.safetensors");
    msg_has(&e, "s2.safetensors");
    /* a broken shard is named */
    write_st(dir, "s2.safetensors", "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4);
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, dir, NULL, &e), SLM_ERR_FORMAT);
    msg_has(&e, "s2.safetensors: tensor \"b\"");
    /* model.safetensors wins over the index */
    tu_write_in_dir(dir, "model.safetensors.index.json", "{", 1);
    write_st(dir, "model.safetensors", B_HDR, 4);
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, dir, NULL, &e), SLM_OK);
    assert_int_equal(s.n_shards, 1);
    assert_non_null(st_find(&s, "b"));
    st_close(&s);
    /* an empty model.safetensors */
    tu_write_in_dir(dir, "model.safetensors", "", 0);
    err_clear(&e);
    assert_int_equal(st_open_dir(&s, dir, NULL, &e), SLM_ERR_FORMAT);
    msg_has(&e, "model.safetensors: file is 0 bytes");
    tu_rm_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_folder), cmocka_unit_test(sharded_folder), cmocka_unit_test(custom_allocator), cmocka_unit_test(alloc_failures),
        cmocka_unit_test(dtypes),        cmocka_unit_test(header_length),  cmocka_unit_test(header_json),
        cmocka_unit_test(entry_fields),  cmocka_unit_test(shapes),         cmocka_unit_test(offsets),
        cmocka_unit_test(duplicates),    cmocka_unit_test(truncation),     cmocka_unit_test(folders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
