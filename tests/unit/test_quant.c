/* test_quant.c — base/quant: every quantiser byte for byte against llama.cpp's own reference
 * quantisers (ggml-quants.c quantize_row_*_ref; tests/data/quant/, written by
 * scripts/gen_quant_golden.py, which also checked the legacy types against gguf-py), the round trip
 * through base/dtype's dequantisers within each type's step, the refusals, and slm_quantize's
 * params and output rules (tests/py/test_quantize.py covers the file against gguf-py). */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/quant.h"

#define ROW 512

static const struct { const char *file; uint32_t type; } k_golden[] = {
    {"quant/q4_0.bin", SLM_DTYPE_Q4_0}, {"quant/q4_1.bin", SLM_DTYPE_Q4_1}, {"quant/q5_0.bin", SLM_DTYPE_Q5_0},
    {"quant/q5_1.bin", SLM_DTYPE_Q5_1}, {"quant/q8_0.bin", SLM_DTYPE_Q8_0}, {"quant/q4_k.bin", SLM_DTYPE_Q4_K},
    {"quant/q5_k.bin", SLM_DTYPE_Q5_K}, {"quant/q6_k.bin", SLM_DTYPE_Q6_K},
};

static float *load_input(size_t *n_rows) {
    size_t size = 0;
    float *x = (float *)tu_read_file(tu_data_path("quant/input.f32"), &size);
    assert_non_null(x);
    assert_int_equal(size % (ROW * sizeof(float)), 0);
    *n_rows = size / (ROW * sizeof(float));
    return x;
}

static void bytes_equal_llama_cpp(void **unused) {
    (void)unused;
    size_t n_rows;
    float *x = load_input(&n_rows);
    for (size_t t = 0; t < sizeof k_golden / sizeof k_golden[0]; t++) {
        size_t size = 0;
        uint8_t *want = tu_read_file(tu_data_path(k_golden[t].file), &size);
        assert_non_null(want);
        uint64_t rb = 0;
        assert_true(dtype_row_bytes(k_golden[t].type, ROW, &rb));
        assert_int_equal(size, rb * n_rows);
        uint8_t *got = malloc(size + 16);
        memset(got, 0xA5, size + 16);
        for (size_t r = 0; r < n_rows; r++)
            assert_true(quant_row(k_golden[t].type, x + r * ROW, got + r * rb, ROW));
        for (size_t i = 0; i < size; i++) {
            if (got[i] != want[i]) {
                fprintf(stderr, "%s: byte %zu (row %zu) is %02x, llama.cpp wrote %02x\n", k_golden[t].file, i, i / rb,
                        got[i], want[i]);
                fail();
            }
        }
        for (size_t i = size; i < size + 16; i++) assert_int_equal(got[i], 0xA5); /* guard bytes */
        free(got);
        free(want);
    }
    free(x);
}

/* dequant(quant(x)) stays within one quantisation step of x: the step of each block is its range
 * over the type's levels (2^bits - 1); for the K-quants the block is the super-block of 256 (their
 * sub-block scales and mins are themselves quantised against the super-block's) and the step is
 * doubled. */
static void round_trip_within_step(void **unused) {
    (void)unused;
    static const struct { uint32_t type; int bits; int block; } ty[] = {
        {SLM_DTYPE_Q4_0, 4, 32}, {SLM_DTYPE_Q4_1, 4, 32}, {SLM_DTYPE_Q5_0, 5, 32}, {SLM_DTYPE_Q5_1, 5, 32},
        {SLM_DTYPE_Q8_0, 8, 32}, {SLM_DTYPE_Q4_K, 4, 256}, {SLM_DTYPE_Q5_K, 5, 256}, {SLM_DTYPE_Q6_K, 6, 256},
        {SLM_DTYPE_F16, 11, 1},  {SLM_DTYPE_BF16, 8, 1},
    };
    size_t n_rows;
    float *x = load_input(&n_rows);
    uint8_t q[ROW * 4];
    float y[ROW];
    for (size_t t = 0; t < sizeof ty / sizeof ty[0]; t++) {
        for (size_t r = 0; r < n_rows; r++) {
            const float *xr = x + r * ROW;
            assert_true(quant_row(ty[t].type, xr, q, ROW));
            assert_true(dequant_row(ty[t].type, q, y, ROW));
            for (int b = 0; b < ROW; b += ty[t].block) {
                float lo = xr[b], hi = xr[b];
                for (int i = b; i < b + ty[t].block; i++) lo = fminf(lo, xr[i]), hi = fmaxf(hi, xr[i]);
                float range = fmaxf(hi - lo, fmaxf(fabsf(hi), fabsf(lo)));
                float step = 2.0f * range / (float)((1 << ty[t].bits) - 1);
                if (ty[t].type == SLM_DTYPE_Q4_K || ty[t].type == SLM_DTYPE_Q5_K || ty[t].type == SLM_DTYPE_Q6_K)
                    step *= 2.0f;
                for (int i = b; i < b + ty[t].block; i++) {
                    /* 2e-6: f16 scales flush blocks below ~6e-8 per level to zero */
                    float tol = (ty[t].block == 1 ? fabsf(xr[i]) * ldexpf(1.0f, -ty[t].bits) : step) + 2e-6f;
                    if (!(fabsf(y[i] - xr[i]) <= tol)) {
                        fprintf(stderr, "type %u row %zu elem %d: %g -> %g (tolerance %g)\n", ty[t].type, r, i, xr[i],
                                y[i], tol);
                        fail();
                    }
                }
            }
        }
    }
    free(x);
}

static void refusals(void **unused) {
    (void)unused;
    float x[256] = {0};
    uint8_t y[1024];
    memset(y, 0x5A, sizeof y);
    assert_false(quant_row(SLM_DTYPE_Q4_0, x, y, 31));  /* not whole blocks */
    assert_false(quant_row(SLM_DTYPE_Q4_K, x, y, 32));
    assert_false(quant_row(SLM_DTYPE_Q8_K, x, y, 256)); /* activation type: no writer */
    assert_false(quant_row(SLM_DTYPE_Q2_K, x, y, 256));
    assert_false(quant_row(SLM_DTYPE_I32, x, y, 4));
    assert_false(quant_row(1000, x, y, 4));
    for (size_t i = 0; i < sizeof y; i++) assert_int_equal(y[i], 0x5A);
    assert_true(quant_has_row(SLM_DTYPE_Q6_K));
    assert_false(quant_has_row(SLM_DTYPE_Q3_K));
}

static int n_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) n += de->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* slm_quantize's params as callers pass them (NULL, zeroed, an older layout with only `size`):
 * the same file; an existing output is refused without force and replaced with it; a failure
 * leaves only what was there. */
static void quantize_file_params(void **unused) {
    (void)unused;
    char *dir = tu_temp_dir();
    char a[1024], b[1024], c[1024];
    snprintf(a, sizeof a, "%s/a.gguf", dir);
    snprintf(b, sizeof b, "%s/b.gguf", dir);
    snprintf(c, sizeof c, "%s/c.gguf", dir);
    const char *src = tu_data_path("tiny/lfm2/lfm2-f32.gguf");
    char err[512];
    assert_int_equal(slm_quantize(src, a, "q8_0", NULL, err, sizeof err), SLM_OK);
    slm_quantize_params zero;
    memset(&zero, 0, sizeof zero);
    assert_int_equal(slm_quantize(src, b, "Q8_0", &zero, err, sizeof err), SLM_OK);
    size_t size_old = sizeof(size_t);
    assert_int_equal(slm_quantize(src, c, "q8_0", (const slm_quantize_params *)&size_old, err, sizeof err), SLM_OK);
    size_t na = 0, nb = 0, nc = 0;
    uint8_t *fa = tu_read_file(a, &na), *fb = tu_read_file(b, &nb), *fc = tu_read_file(c, &nc);
    assert_true(na > 0 && na == nb && na == nc && memcmp(fa, fb, na) == 0 && memcmp(fa, fc, na) == 0);
    free(fb);
    free(fc);
    /* refused without force: a unchanged; replaced with force: by the q4_0 file */
    assert_int_equal(slm_quantize(src, a, "q4_0", NULL, err, sizeof err), SLM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "exists"));
    uint8_t *again = tu_read_file(a, &nb);
    assert_true(nb == na && memcmp(again, fa, na) == 0);
    free(again);
    slm_quantize_params p = slm_quantize_params_default();
    p.force = true;
    p.n_threads = 3;
    assert_int_equal(slm_quantize(src, a, "q4_0", &p, err, sizeof err), SLM_OK);
    again = tu_read_file(a, &nb);
    assert_true(nb < na);
    free(again);
    free(fa);
    /* failures leave nothing new */
    assert_int_equal(slm_quantize(src, b, "q4_0", &p, err, sizeof err), SLM_OK);
    p.token_embd_type = "q4_k"; /* rows of 64: not whole 256-blocks */
    assert_int_equal(slm_quantize(src, c, "q4_0", &p, err, sizeof err), SLM_ERR_SHAPE);
    assert_non_null(strstr(err, "token_embd.weight"));
    assert_int_equal(n_files(dir), 3);
    tu_rm_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bytes_equal_llama_cpp),
        cmocka_unit_test(round_trip_within_step),
        cmocka_unit_test(refusals),
        cmocka_unit_test(quantize_file_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
