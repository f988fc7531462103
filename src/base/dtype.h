/* dtype.h — tensor element types: block geometry (docs/spec/gguf.md §3) and scalar dequantisation of
 * every supported type to f32 (docs/spec/gguf.md §4). These scalar routines are the reference the
 * SIMD and CUDA kernels are tested against. */
#ifndef SLM_BASE_DTYPE_H
#define SLM_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "statelm.h"

typedef struct dtype_traits {
    const char *name;     /* "f32", "q4_k", ... */
    uint32_t block_elems; /* elements per block (1 for plain types) */
    uint32_t block_bytes; /* bytes per block */
    bool is_quantized;
    bool can_dequant;     /* dequant_row supports it */
} dtype_traits;

/* Traits of a ggml type id, or NULL for ids statelm does not know (removed or exotic types). */
const dtype_traits *dtype_traits_of(uint32_t type);

/* Bytes of n elements of type t. False if t is unknown, n is not a multiple of the block size, or
 * the size overflows. */
bool dtype_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

/* Dequantises n elements (a multiple of the block size) from src to dst (n floats).
 * Returns false for types without a dequantiser (the caller reports it). */
bool dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

#endif
