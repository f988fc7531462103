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

#endif
