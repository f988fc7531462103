/* test_dtype.c — base/dtype: block geometry against docs/spec/gguf.md §3, and the scalar dequantisers
 * bit-for-bit against gguf-py (tests/data/gguf/dtype_golden.bin, written by gen_gguf_golden.py;
 * Q8_1 and Q8_K, which gguf-py lacks, against the numpy formula there) and against hand-built
 * blocks whose values are worked out in the comments.
 * Every comparison is exact: with ggml's operation order (d·sc, then ·q, then −dmin·mn) there is
 * no rounding difference between C and numpy's float32 arithmetic. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/half.h"
#include "base/reader.h"

static void traits_match_spec(void **unused) {
    (void)unused;
    static const struct { uint32_t id; const char *name; uint32_t elems, bytes; bool quant, deq; } want[] = {
        {0, "f32", 1, 4, false, true},      {1, "f16", 1, 2, false, true},      {2, "q4_0", 32, 18, true, true},
        {3, "q4_1", 32, 20, true, true},    {6, "q5_0", 32, 22, true, true},    {7, "q5_1", 32, 24, true, true},
        {8, "q8_0", 32, 34, true, true},    {9, "q8_1", 32, 36, true, true},    {10, "q2_k", 256, 84, true, true},
        {11, "q3_k", 256, 110, true, true}, {12, "q4_k", 256, 144, true, true}, {13, "q5_k", 256, 176, true, true},
        {14, "q6_k", 256, 210, true, true}, {15, "q8_k", 256, 292, true, true}, {24, "i8", 1, 1, false, false},
        {25, "i16", 1, 2, false, false},    {26, "i32", 1, 4, false, false},    {27, "i64", 1, 8, false, false},
        {28, "f64", 1, 8, false, false},    {30, "bf16", 1, 2, false, true},
    };
    size_t n_known = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const dtype_traits *t = dtype_traits_of(want[i].id);
        assert_non_null(t);
        assert_string_equal(t->name, want[i].name);
        assert_int_equal(t->block_elems, want[i].elems);
        assert_int_equal(t->block_bytes, want[i].bytes);
        assert_int_equal(t->is_quantized, want[i].quant);
        assert_int_equal(t->can_dequant, want[i].deq);
        assert_string_equal(slm_dtype_name((slm_dtype)want[i].id), want[i].name);
    }
    for (uint32_t id = 0; id < 1000; id++) n_known += dtype_traits_of(id) != NULL;
    assert_int_equal(n_known, sizeof want / sizeof want[0]);
    /* Removed ids (4, 5, 31..33), IQ types, TQ, MXFP4 and out-of-range ids are unknown. */
    const uint32_t unknown[] = {4, 5, 16, 17, 18, 19, 20, 21, 22, 23, 29, 31, 32, 33, 34, 35, 39, 40, 41, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) assert_null(dtype_traits_of(unknown[i]));
    assert_string_equal(slm_dtype_name((slm_dtype)4), "unknown");
    assert_string_equal(slm_dtype_name(SLM_DTYPE_COUNT), "unknown");
    assert_string_equal(slm_dtype_name((slm_dtype)-1), "unknown");
}

static void row_bytes(void **unused) {
    (void)unused;
    uint64_t b = 0;
    assert_true(dtype_row_bytes(SLM_DTYPE_F32, 7, &b));
    assert_int_equal(b, 28);
    assert_true(dtype_row_bytes(SLM_DTYPE_Q4_K, 512, &b));
    assert_int_equal(b, 288);
    assert_true(dtype_row_bytes(SLM_DTYPE_Q8_0, 0, &b));
    assert_int_equal(b, 0);
    assert_true(dtype_row_bytes(SLM_DTYPE_Q6_K, 256 * 1000, &b));
    assert_int_equal(b, 210 * 1000);
    assert_false(dtype_row_bytes(SLM_DTYPE_Q4_0, 33, &b));   /* not a whole block */
    assert_false(dtype_row_bytes(SLM_DTYPE_Q4_K, 32, &b));
    assert_false(dtype_row_bytes(4, 32, &b));                 /* unknown type */
    assert_false(dtype_row_bytes(SLM_DTYPE_F64, UINT64_MAX / 4, &b)); /* overflow */
    assert_true(dtype_row_bytes(SLM_DTYPE_F64, UINT64_MAX / 8, &b));
    assert_int_equal(b, UINT64_MAX / 8 * 8);
}

static void dequant_refusals(void **unused) {
    (void)unused;
    uint8_t blk[512] = {0};
    float y[512];
    assert_false(dequant_row(SLM_DTYPE_Q4_0, blk, y, 31));
    assert_false(dequant_row(SLM_DTYPE_Q4_K, blk, y, 32));
    assert_false(dequant_row(SLM_DTYPE_F32, blk, y, -1));
    assert_false(dequant_row(SLM_DTYPE_I32, blk, y, 4));
    assert_false(dequant_row(SLM_DTYPE_F64, blk, y, 4));
    assert_false(dequant_row(20 /* IQ4_NL */, blk, y, 32));
    assert_false(dequant_row(1234, blk, y, 32));
    assert_true(dequant_row(SLM_DTYPE_Q8_0, NULL, NULL, 0));
}

/* ---- golden records from gguf-py ------------------------------------------------------------ */

static void gguf_py_golden(void **unused) {
    (void)unused;
    size_t size = 0;
    uint8_t *buf = tu_read_file(tu_data_path("gguf/dtype_golden.bin"), &size);
    assert_non_null(buf);
    assert_true(size >= 12);
    assert_memory_equal(buf, "SLMDQ1\0\0", 8);
    uint32_t n_rec = ld_u32(buf + 8);
    size_t pos = 12;
    bool seen[SLM_DTYPE_COUNT] = {false};
    for (uint32_t r = 0; r < n_rec; r++) {
        assert_true(pos + 16 <= size);
        uint32_t type = ld_u32(buf + pos), n = ld_u32(buf + pos + 4), nb = ld_u32(buf + pos + 8);
        pos += 16;
        assert_true(pos + nb + (size_t)n * 4 <= size);
        uint64_t want_bytes = 0;
        assert_true(dtype_row_bytes(type, n, &want_bytes));
        assert_int_equal(want_bytes, nb);
        /* Exact-size copies so ASan catches any read past the blocks or write past the row. */
        uint8_t *src = malloc(nb);
        float *got = malloc((size_t)n * sizeof(float));
        assert_non_null(src);
        assert_non_null(got);
        memcpy(src, buf + pos, nb);
        assert_true(dequant_row(type, src, got, n));
        const uint8_t *want = buf + pos + nb;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t gb = f32_bits(got[i]), wb = ld_u32(want + 4 * i);
            if (gb != wb) {
                print_error("record %u (%s): element %u is %.9g (0x%08x), gguf-py says %.9g (0x%08x)\n", r,
                            slm_dtype_name((slm_dtype)type), i, (double)got[i], gb, (double)f32_from_bits(wb), wb);
                fail();
            }
        }
        seen[type] = true;
        free(src);
        free(got);
        pos += nb + (size_t)n * 4;
    }
    assert_int_equal(pos, size);
    for (uint32_t t = 0; t < SLM_DTYPE_COUNT; t++) {
        const dtype_traits *tr = dtype_traits_of(t);
        if (tr && tr->can_dequant && !seen[t]) {
            print_error("no golden record for %s\n", tr->name);
            fail();
        }
    }
    free(buf);
}

/* ---- hand-built blocks ---------------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void hand_plain(void **unused) {
    (void)unused;
    uint8_t h[6];
    float y[3];
    put16(h, 0x3C00);     /* 1.0 */
    put16(h + 2, 0xC000); /* -2.0 */
    put16(h + 4, 0x0001); /* smallest subnormal 2^-24 */
    assert_true(dequant_row(SLM_DTYPE_F16, h, y, 3));
    assert_true(y[0] == 1.0f && y[1] == -2.0f && y[2] == ldexpf(1.0f, -24));
    put16(h, 0x3F80);     /* bf16 1.0 */
    put16(h + 2, 0xC0A0); /* bf16 -5.0 */
    put16(h + 4, 0x7F80); /* bf16 +inf */
    assert_true(dequant_row(SLM_DTYPE_BF16, h, y, 3));
    assert_true(y[0] == 1.0f && y[1] == -5.0f && isinf(y[2]) && y[2] > 0);
    /* f32 from an unaligned source */
    uint8_t f[9] = {0};
    float v = -3.5f;
    memcpy(f + 1, &v, 4);
    v = 1e-40f;
    memcpy(f + 5, &v, 4);
    assert_true(dequant_row(SLM_DTYPE_F32, f + 1, y, 2));
    assert_true(y[0] == -3.5f && y[1] == 1e-40f);
}

/* Q4_0, d = 1: qs[j] = j | (15-j)<<4, so y[j] = j - 8 and y[j+16] = 7 - j. */
static void hand_q4_0(void **unused) {
    (void)unused;
    uint8_t b[18];
    float y[32];
    put16(b, 0x3C00);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    assert_true(dequant_row(SLM_DTYPE_Q4_0, b, y, 32));
    assert_true(y[0] == -8.0f && y[15] == 7.0f && y[16] == 7.0f && y[31] == -8.0f && y[8] == 0.0f);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)(j - 8));
        assert_true(y[j + 16] == (float)(7 - j));
    }
}

/* Q4_1, d = 0.5, m = -1, qs = 0xF3: low nibble 3 -> 0.5, high nibble 15 -> 6.5. */
static void hand_q4_1(void **unused) {
    (void)unused;
    uint8_t b[20];
    float y[32];
    put16(b, 0x3800);
    put16(b + 2, 0xBC00);
    memset(b + 4, 0xF3, 16);
    assert_true(dequant_row(SLM_DTYPE_Q4_1, b, y, 32));
    for (int j = 0; j < 16; j++) assert_true(y[j] == 0.5f && y[j + 16] == 6.5f);
}

/* Q5_0, d = 2, qh = 0x80000001 (5th bit of elements 0 and 31), qs[0] = 0x21, qs[15] = 0xF0,
 * others 0x88: y[0] = 2·((1|16)-16) = 2, y[16] = 2·(2-16) = -28, y[15] = 2·(0-16) = -32,
 * y[31] = 2·((15|16)-16) = 30, and 0x88 gives 2·(8-16) = -16 elsewhere. */
static void hand_q5_0(void **unused) {
    (void)unused;
    uint8_t b[22];
    float y[32];
    put16(b, 0x4000);
    b[2] = 0x01, b[3] = 0x00, b[4] = 0x00, b[5] = 0x80;
    memset(b + 6, 0x88, 16);
    b[6] = 0x21;
    b[6 + 15] = 0xF0;
    assert_true(dequant_row(SLM_DTYPE_Q5_0, b, y, 32));
    assert_true(y[0] == 2.0f && y[16] == -28.0f && y[15] == -32.0f && y[31] == 30.0f);
    assert_true(y[1] == -16.0f && y[17] == -16.0f && y[30] == -16.0f);
}

/* Q5_1, d = 1, m = 0.25, every 5th bit set, qs = 0 except qs[3] = 0xFF: 16.25, and 31.25 at 3, 19. */
static void hand_q5_1(void **unused) {
    (void)unused;
    uint8_t b[24];
    float y[32];
    put16(b, 0x3C00);
    put16(b + 2, 0x3400);
    memset(b + 4, 0xFF, 4);
    memset(b + 8, 0, 16);
    b[8 + 3] = 0xFF;
    assert_true(dequant_row(SLM_DTYPE_Q5_1, b, y, 32));
    for (int j = 0; j < 32; j++) assert_true(y[j] == ((j == 3 || j == 19) ? 31.25f : 16.25f));
}

/* Q8_0, d = 0.25, qs[j] = 8j - 128: y[j] = 2j - 32. Q8_1 the same with s ignored. */
static void hand_q8(void **unused) {
    (void)unused;
    uint8_t b[36];
    float y[32];
    put16(b, 0x3400);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(8 * j - 128);
    assert_true(dequant_row(SLM_DTYPE_Q8_0, b, y, 32));
    for (int j = 0; j < 32; j++) assert_true(y[j] == (float)(2 * j - 32));
    put16(b, 0x3400);
    put16(b + 2, 0x7BFF); /* s: not used by dequantisation */
    for (int j = 0; j < 32; j++) b[4 + j] = (uint8_t)(int8_t)(8 * j - 128);
    assert_true(dequant_row(SLM_DTYPE_Q8_1, b, y, 32));
    for (int j = 0; j < 32; j++) assert_true(y[j] == (float)(2 * j - 32));
}

/* Q8_K, d = 0.5 (f32), qs[j] = j - 128, bsums garbage: y[j] = (j - 128) / 2. */
static void hand_q8_k(void **unused) {
    (void)unused;
    uint8_t b[292];
    float y[256];
    float d = 0.5f;
    memcpy(b, &d, 4);
    for (int j = 0; j < 256; j++) b[4 + j] = (uint8_t)(int8_t)(j - 128);
    memset(b + 260, 0xAB, 32);
    assert_true(dequant_row(SLM_DTYPE_Q8_K, b, y, 256));
    for (int j = 0; j < 256; j++) assert_true(y[j] == (float)(j - 128) * 0.5f);
}

/* Shared Q4_K/Q5_K scales: sc = {1,2,3,4,17,0,0,0}, mn = {5,6,7,8,35,0,0,0}.
 * sc[4] = 17 = 0b01'0001: low nibble 1 in scales[8], top bits 01 in scales[0] bits 6..7;
 * mn[4] = 35 = 0b10'0011: high nibble 3 in scales[8], top bits 10 in scales[4] bits 6..7. */
static void k_scales(uint8_t *s) {
    const uint8_t v[12] = {0x40 | 1, 2, 3, 4, 0x80 | 5, 6, 7, 8, 0x31, 0, 0, 0};
    memcpy(s, v, 12);
}

/* Q4_K, d = 1, dmin = 0.5, qs = 0x9A (low 10, high 9):
 * [0,32) 1·10-0.5·5 = 7.5; [32,64) 2·9-0.5·6 = 15; [64,96) 3·10-3.5 = 26.5; [96,128) 4·9-4 = 32;
 * [128,160) 17·10-0.5·35 = 152.5; [160,256) 0. */
static void hand_q4_k(void **unused) {
    (void)unused;
    uint8_t b[144];
    float y[256];
    put16(b, 0x3C00);
    put16(b + 2, 0x3800);
    k_scales(b + 4);
    memset(b + 16, 0x9A, 128);
    assert_true(dequant_row(SLM_DTYPE_Q4_K, b, y, 256));
    for (int i = 0; i < 256; i++) {
        float want = i < 32 ? 7.5f : i < 64 ? 15.0f : i < 96 ? 26.5f : i < 128 ? 32.0f : i < 160 ? 152.5f : 0.0f;
        assert_true(y[i] == want);
    }
}

/* Q5_K with the same scales and qs, qh = 0x11 (bit 0: +16 on [0,32); bit 4: +16 on [128,160)):
 * [0,32) 1·26-2.5 = 23.5; [128,160) 17·26-17.5 = 424.5; the rest as Q4_K. */
static void hand_q5_k(void **unused) {
    (void)unused;
    uint8_t b[176];
    float y[256];
    put16(b, 0x3C00);
    put16(b + 2, 0x3800);
    k_scales(b + 4);
    memset(b + 16, 0x11, 32);
    memset(b + 48, 0x9A, 128);
    assert_true(dequant_row(SLM_DTYPE_Q5_K, b, y, 256));
    for (int i = 0; i < 256; i++) {
        float want = i < 32 ? 23.5f : i < 64 ? 15.0f : i < 96 ? 26.5f : i < 128 ? 32.0f : i < 160 ? 424.5f : 0.0f;
        assert_true(y[i] == want);
    }
}

/* Q6_K, d = 1, scales[s] = s - 8, ql = 0x21, qh = 0xE4 (2-bit fields 0,1,2,3):
 * q0 = 1-32 = -31, q1 = (1|1<<4)-32 = -15, q2 = (2|2<<4)-32 = 2, q3 = (2|3<<4)-32 = 18;
 * element e = 128n + l + 32k is (e/16 - 8)·q_k: y[0] = 248, y[32] = 90, y[64] = -8, y[96] = -36,
 * y[128] = 0, y[255] = 7·18 = 126, y[160] = (10-8)·-15 = -30. */
static void hand_q6_k(void **unused) {
    (void)unused;
    uint8_t b[210];
    float y[256];
    memset(b, 0x21, 128);
    memset(b + 128, 0xE4, 64);
    for (int s = 0; s < 16; s++) b[192 + s] = (uint8_t)(int8_t)(s - 8);
    put16(b + 208, 0x3C00);
    assert_true(dequant_row(SLM_DTYPE_Q6_K, b, y, 256));
    assert_true(y[0] == 248.0f && y[32] == 90.0f && y[64] == -8.0f && y[96] == -36.0f);
    assert_true(y[128] == 0.0f && y[255] == 126.0f && y[160] == -30.0f);
    const int qk[4] = {-31, -15, 2, 18};
    for (int e = 0; e < 256; e++) assert_true(y[e] == (float)((e / 16 - 8) * qk[(e % 128) / 32]));
}

/* Q2_K, d = 1, dmin = 1, scales[i] = i | 1<<4 (scale i, min 1), qs = 0xE4 (step j reads value j):
 * element 128h + 32j + 16·half + l is (8h + 2j + half)·j - 1:
 * y[0] = -1, y[32] = 1, y[48] = 2, y[200] = 12·2-1 = 23, y[255] = 15·3-1 = 44. */
static void hand_q2_k(void **unused) {
    (void)unused;
    uint8_t b[84];
    float y[256];
    for (int i = 0; i < 16; i++) b[i] = (uint8_t)(i | (1 << 4));
    memset(b + 16, 0xE4, 64);
    put16(b + 80, 0x3C00);
    put16(b + 82, 0x3C00);
    assert_true(dequant_row(SLM_DTYPE_Q2_K, b, y, 256));
    assert_true(y[0] == -1.0f && y[16] == -1.0f && y[32] == 1.0f && y[48] == 2.0f && y[200] == 23.0f &&
                y[255] == 44.0f);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, j = (e % 128) / 32, half = (e % 32) / 16;
        assert_true(y[e] == (float)((8 * h + 2 * j + half) * j - 1));
    }
}

/* Q3_K, d = 1, all 16 scales = 32 + s (so s after the -32 offset): low nibbles in scales[0..7]
 * (s | (s+8)<<4), top bits 0b10 everywhere (scales[8..11] = 0xAA); qs = 0xE4 (step j reads j);
 * hmask all set (no -4) except bit 1 of hmask[2], which makes element 34 (h 0, step 1, scale 2)
 * 2·(1-4) = -6 instead of 2. Otherwise element 128h+32j+16·half+l is (8h+2j+half)·j. */
static void hand_q3_k(void **unused) {
    (void)unused;
    uint8_t b[110];
    float y[256];
    memset(b, 0xFF, 32);
    b[2] = 0xFD;
    memset(b + 32, 0xE4, 64);
    for (int k = 0; k < 8; k++) b[96 + k] = (uint8_t)(k | ((k + 8) << 4));
    memset(b + 104, 0xAA, 4);
    put16(b + 108, 0x3C00);
    assert_true(dequant_row(SLM_DTYPE_Q3_K, b, y, 256));
    assert_true(y[34] == -6.0f && y[33] == 2.0f && y[255] == 45.0f && y[0] == 0.0f);
    for (int e = 0; e < 256; e++) {
        if (e == 34) continue;
        int h = e / 128, j = (e % 128) / 32, half = (e % 32) / 16;
        assert_true(y[e] == (float)((8 * h + 2 * j + half) * j));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(traits_match_spec), cmocka_unit_test(row_bytes),   cmocka_unit_test(dequant_refusals),
        cmocka_unit_test(gguf_py_golden),    cmocka_unit_test(hand_plain),  cmocka_unit_test(hand_q4_0),
        cmocka_unit_test(hand_q4_1),         cmocka_unit_test(hand_q5_0),   cmocka_unit_test(hand_q5_1),
        cmocka_unit_test(hand_q8),           cmocka_unit_test(hand_q8_k),   cmocka_unit_test(hand_q4_k),
        cmocka_unit_test(hand_q5_k),         cmocka_unit_test(hand_q6_k),   cmocka_unit_test(hand_q2_k),
        cmocka_unit_test(hand_q3_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
