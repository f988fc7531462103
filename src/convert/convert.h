/* convert.h — the conversion layer (src/convert/): slm_quantize (quantize.c: a GGUF file's weights
 * to other types) and slm_convert (hf.c: a Hugging Face folder to GGUF, optionally quantised) lay
 * out their output through one writer (write.c). The layer sits above format/ (the GGUF reader,
 * writer and the quantisation rules of format/quantize.h) and model/ (a folder is loaded as
 * slm_model_load loads it); nothing below includes it. */
#ifndef SLM_CONVERT_CONVERT_H
#define SLM_CONVERT_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/fmap.h"
#include "base/log.h"
#include "format/gguf.h"

#define CV_QNT_VERSION 2 /* general.quantization_version, as llama.cpp writes it */

/* The metadata section as encoded key/value pairs (GGUF little-endian, as are our targets) and
 * their count; the buffer's oom is checked once by cv_write_gguf. */
typedef struct cv_kv {
    buf b;
    uint64_t count;
} cv_kv;

void cv_kv_key(cv_kv *k, const char *key, gguf_vtype type); /* counts one pair */
void cv_kv_u32(cv_kv *k, const char *key, uint32_t v);
void cv_kv_f32(cv_kv *k, const char *key, double v);
void cv_kv_bool(cv_kv *k, const char *key, bool v);
void cv_kv_str(cv_kv *k, const char *key, const char *s);
/* The key, the array type, elem and n; the caller appends the n elements (cv_put_*). */
void cv_kv_arr_head(cv_kv *k, const char *key, gguf_vtype elem, uint64_t n);
void cv_kv_arr_i32(cv_kv *k, const char *key, const int32_t *v, uint64_t n);
void cv_put(cv_kv *k, const void *p, size_t n);
void cv_put_u32(cv_kv *k, uint32_t v);
void cv_put_str(cv_kv *k, const char *s, size_t len);

/* One output file: the metadata, then tensors[i] (in file order) as types[i], data aligned to
 * alignment. A tensor whose type differs is quantised (format/quantize.h quantize_rows) a slice of
 * rows at a time (at most CV_SLICE_BYTES of source or result), the slice written and, when map is
 * given, its source pages dropped before the next, so the resident set stays near two slices.
 * sources (NULL or one label per tensor) names where each tensor came from in the log line. */
#define CV_SLICE_BYTES ((uint64_t)16 << 20)
typedef struct cv_output {
    const char *path;
    bool force;
    const cv_kv *kv;
    const gguf_tensor *const *tensors;
    const uint32_t *types;
    const char *const *sources;
    uint64_t n_tensors;
    uint64_t alignment;
    const fmap *map;
    int n_threads; /* <= 0: the online CPUs */
    const slm_allocator *a;
    slm_logger log;
} cv_output;

/* Writes o->path atomically (format/gguf_write.h: published whole or not at all). SLM_ERR_NOMEM
 * when o->kv ran out of memory; SLM_ERR_SHAPE naming a tensor whose rows are not whole blocks of
 * its type; the writer's and quantiser's failures. */
slm_status cv_write_gguf(const cv_output *o, slm_err *e);

#endif
