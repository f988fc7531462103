/* quant.h — scalar quantisers: f32 rows to the GGUF block types (docs/spec/gguf.md §3, the
 * inverse of dequant_row in dtype.h). The rounding rules are llama.cpp's reference ones
 * (ggml-quants.c quantize_row_*_ref, the path llama-quantize takes without an importance matrix),
 * so the bytes equal llama-quantize's and gguf-py's for the same f32 input; docs/quantize.md says
 * which types are checked against which reference. */
#ifndef SLM_BASE_QUANT_H
#define SLM_BASE_QUANT_H

#include <stdbool.h>
#include <stdint.h>

/* True for the types quant_row writes: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
 * Q6_K. */
bool quant_has_row(uint32_t type);

/* Quantises n floats of x (n a multiple of the type's block size, values finite) into dst
 * (dtype_row_bytes(type, n) bytes). Returns false, writing nothing, for a type quant_has_row
 * refuses or an n that is not a whole number of blocks. Thread-safe (no shared state). */
bool quant_row(uint32_t type, const float *x, void *dst, int64_t n);

/* A row of a Q8_0 / Q4_0 KV cache: each 32-block of x rotated (quant_hadamard32), then quantised
 * as quant_row. False, writing nothing, for another type or n not a multiple of 32. */
bool quant_kv_row(uint32_t type, const float *x, void *dst, int64_t n);

/* x (32 floats) <- H x, H the orthonormal 32 x 32 Walsh-Hadamard matrix (H = H^T, H H = I): the
 * butterflies x_j, x_{j+h} <- x_j + x_{j+h}, x_j - x_{j+h} for h = 1, 2, 4, 8, 16 (j ascending within
 * each h), then every element times 0.17677669529663687 (1/sqrt(32)), each step one IEEE f32
 * operation. Quantised KV caches store their rows rotated block by block (a head's q.k and p.v are
 * unchanged, an outlier is spread over its block): docs/architecture.md "KV cache types". */
static inline void quant_hadamard32(float *x) {
    for (int h = 1; h < 32; h *= 2)
        for (int i = 0; i < 32; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    for (int j = 0; j < 32; j++) x[j] *= 0.17677669529663687f;
}

#endif
