/* quantize.h — the quantisation rules of slm_quantize (quantize.c): which type each tensor gets,
 * and the threaded quantisation of rows; the conversion layer (convert/) writes files with them and
 * loading with a quantisation type (model/model.c) uses them in memory. Tensors are described as gguf_tensor (name, type, ne, data); docs/quantize.md has the
 * rules. */
#ifndef SLM_FORMAT_QUANTIZE_H
#define SLM_FORMAT_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "format/gguf.h"

/* SLM_ERR_INVALID_ARG naming it when type is not one of slm_quantize's or p's token_embd_type /
 * output_type is not a tensor type statelm writes. */
slm_status quantize_check_type(const char *type, const slm_quantize_params *p, slm_err *e);
/* The target type of each of ts[0, n) for slm_quantize's type name and params p (its options
 * token_embd_type, output_type, pure, leave_output): order[i] gets the i-th tensor in llama.cpp's
 * order (layer, then name) and types[i] its type; *file_type the llama_ftype id. arch (may be
 * NULL), n_layer and n_expert feed the mix rules. Fails, naming the tensor, when a source type
 * cannot be converted or a row is not a whole number of the type's blocks. */
slm_status quantize_plan(const char *type, const slm_quantize_params *p, const char *arch, int64_t n_layer,
                         int64_t n_expert, const gguf_tensor *ts, uint64_t n, const gguf_tensor **order,
                         uint32_t *types, uint32_t *file_type, slm_err *e);
/* Bytes of t's elements as type; false on overflow or rows that are not whole blocks. */
bool quantize_tensor_bytes(const gguf_tensor *t, uint32_t type, uint64_t *bytes);
/* Rows [row0, row1) of t (rows counted over ne[1..3]) as out_type into dst, over n_threads, the
 * caller's among them (as quantize_tensor). */
slm_status quantize_rows(const gguf_tensor *t, int64_t row0, int64_t row1, uint32_t out_type, uint8_t *dst,
                         int n_threads, const slm_allocator *a, slm_err *e);
/* Quantises all rows of t (F32/F16/BF16, or any dequantisable type when out_type is a float type)
 * into dst (quantize_tensor_bytes) with n_threads threads,
 * the caller's among them. SLM_ERR_FORMAT naming the tensor and row for a non-finite value. */
slm_status quantize_tensor(const gguf_tensor *t, uint32_t out_type, uint8_t *dst, int n_threads,
                           const slm_allocator *a, slm_err *e);

#endif
