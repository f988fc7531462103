/* write.c — the one writer of slm_quantize and slm_convert (convert.h): the metadata encoders and
 * the output file (header, metadata, tensor infos, aligned data, each tensor quantised a slice of
 * rows at a time). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/dtype.h"
#include "convert/convert.h"
#include "format/gguf_write.h"
#include "format/quantize.h"

void cv_put(cv_kv *k, const void *p, size_t n) { buf_put(&k->b, p, n); }
void cv_put_u32(cv_kv *k, uint32_t v) { cv_put(k, &v, 4); }
void cv_put_str(cv_kv *k, const char *s, size_t len) {
    uint64_t l = len;
    cv_put(k, &l, 8);
    cv_put(k, s, len);
}
void cv_kv_key(cv_kv *k, const char *key, gguf_vtype type) {
    k->count++;
    cv_put_str(k, key, strlen(key));
    cv_put_u32(k, (uint32_t)type);
}
void cv_kv_u32(cv_kv *k, const char *key, uint32_t v) {
    cv_kv_key(k, key, GGUF_UINT32);
    cv_put_u32(k, v);
}
void cv_kv_f32(cv_kv *k, const char *key, double v) {
    float f = (float)v;
    cv_kv_key(k, key, GGUF_FLOAT32);
    cv_put(k, &f, 4);
}
void cv_kv_bool(cv_kv *k, const char *key, bool v) {
    uint8_t u = v;
    cv_kv_key(k, key, GGUF_BOOL);
    cv_put(k, &u, 1);
}
void cv_kv_str(cv_kv *k, const char *key, const char *s) {
    cv_kv_key(k, key, GGUF_STRING);
    cv_put_str(k, s, strlen(s));
}
void cv_kv_arr_head(cv_kv *k, const char *key, gguf_vtype elem, uint64_t n) {
    cv_kv_key(k, key, GGUF_ARRAY);
    cv_put_u32(k, (uint32_t)elem);
    cv_put(k, &n, 8);
}
void cv_kv_arr_i32(cv_kv *k, const char *key, const int32_t *v, uint64_t n) {
    cv_kv_arr_head(k, key, GGUF_INT32, n);
    cv_put(k, v, (size_t)n * 4);
}

static const char *type_name(uint32_t t) {
    const dtype_traits *tr = dtype_traits_of(t);
    return tr ? tr->name : "?";
}

/* Rows of t per slice: CV_SLICE_BYTES of source or of result as type, whichever is reached first;
 * one row at least. */
static uint64_t slice_rows(const gguf_tensor *t, uint32_t type) {
    uint64_t in_rb = 0, out_rb = 0;
    dtype_row_bytes(t->type, (uint64_t)t->ne[0], &in_rb);
    dtype_row_bytes(type, (uint64_t)t->ne[0], &out_rb);
    uint64_t rb = in_rb > out_rb ? in_rb : out_rb, rows = CV_SLICE_BYTES / (rb ? rb : 1);
    return rows ? rows : 1;
}

/* Writes t as type, a slice of rows at a time (copied when type is t's own), dropping each slice's
 * source pages once written when map is given; dst holds one slice's result. */
static slm_status write_tensor(gguf_writer *w, const fmap *map, const gguf_tensor *t, uint32_t type, uint8_t *dst,
                               int n_threads, const slm_allocator *a, slm_err *e) {
    const int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3], step = (int64_t)slice_rows(t, type);
    uint64_t in_rb = 0, out_rb = 0;
    dtype_row_bytes(t->type, (uint64_t)t->ne[0], &in_rb);
    dtype_row_bytes(type, (uint64_t)t->ne[0], &out_rb);
    slm_status st = SLM_OK;
    for (int64_t r0 = 0; r0 < n_rows && st == SLM_OK; r0 += step) {
        const int64_t r1 = r0 + step < n_rows ? r0 + step : n_rows;
        const uint8_t *src = t->data + (size_t)r0 * in_rb;
        const size_t n_src = (size_t)(r1 - r0) * in_rb;
        if (type == t->type) {
            st = gguf_writer_bytes(w, src, n_src, e);
        } else if ((st = quantize_rows(t, r0, r1, type, dst, n_threads, a, e)) == SLM_OK) {
            st = gguf_writer_bytes(w, dst, (size_t)(r1 - r0) * out_rb, e);
        }
        if (map) fmap_release(map, src, n_src);
    }
    return st;
}

slm_status cv_write_gguf(const cv_output *o, slm_err *e) {
    const slm_allocator *a = o->a ? o->a : &al_default;
    const uint64_t n = o->n_tensors, align = o->alignment;
    gguf_writer w;
    memset(&w, 0, sizeof w);
    w.fd = -1;
    uint8_t *slice = NULL;
    slm_status st = SLM_OK;
    if (o->kv->b.oom) return err_set(e, SLM_ERR_NOMEM, "out of memory (the metadata section)");
    /* sizes first: nothing is created for a tensor that cannot be written */
    uint64_t max_out = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = o->tensors[i];
        uint64_t bytes = 0, out_rb = 0;
        if (!quantize_tensor_bytes(t, o->types[i], &bytes))
            return err_set(e, SLM_ERR_SHAPE, "tensor %s: %lld elements per row cannot be %s", t->name,
                           (long long)t->ne[0], type_name(o->types[i]));
        if (o->types[i] == t->type) continue;
        dtype_row_bytes(o->types[i], (uint64_t)t->ne[0], &out_rb);
        uint64_t slice_bytes = slice_rows(t, o->types[i]) * out_rb;
        if (slice_bytes > max_out) max_out = slice_bytes;
    }
    int n_threads = o->n_threads > 0 ? o->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;

    if ((st = gguf_writer_open(&w, o->path, o->force, a, e)) != SLM_OK) goto done;
    /* header: magic, version 3, counts; the metadata */
    gguf_writer_bytes(&w, "GGUF", 4, e);
    gguf_writer_u32(&w, 3, e);
    gguf_writer_u64(&w, n, e);
    gguf_writer_u64(&w, o->kv->count, e);
    if (o->kv->b.n) gguf_writer_bytes(&w, o->kv->b.p, o->kv->b.n, e);
    /* tensor infos, data offsets aligned */
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = o->tensors[i];
        uint64_t bytes = 0;
        quantize_tensor_bytes(t, o->types[i], &bytes);
        gguf_writer_str(&w, t->name, strlen(t->name), e);
        gguf_writer_u32(&w, t->n_dims, e);
        for (uint32_t d = 0; d < t->n_dims; d++) gguf_writer_u64(&w, (uint64_t)t->ne[d], e);
        gguf_writer_u32(&w, o->types[i], e);
        gguf_writer_u64(&w, off, e);
        off += bytes + (align - bytes % align) % align;
    }
    if ((st = gguf_writer_pad(&w, align, e)) != SLM_OK) goto done;
    if (max_out > 0 && !(slice = al_malloc_large(a, (size_t)max_out))) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory (%llu bytes for one slice of rows)", (unsigned long long)max_out);
        goto done;
    }
    /* data, one tensor at a time */
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = o->tensors[i];
        if ((st = write_tensor(&w, o->map, t, o->types[i], slice, n_threads, a, e)) != SLM_OK ||
            (st = gguf_writer_pad(&w, align, e)) != SLM_OK)
            goto done;
        if (o->sources)
            log_msg(&o->log, SLM_LOG_INFO, "[%4llu/%4llu] %-32s %-40s %-5s -> %s", (unsigned long long)i + 1,
                    (unsigned long long)n, o->sources[i], t->name, type_name(t->type), type_name(o->types[i]));
        else
            log_msg(&o->log, SLM_LOG_INFO, "[%4llu/%4llu] %-40s %-5s -> %s", (unsigned long long)i + 1,
                    (unsigned long long)n, t->name, type_name(t->type), type_name(o->types[i]));
    }
    st = gguf_writer_commit(&w, e);
done:
    if (st != SLM_OK) gguf_writer_abort(&w);
    if (slice) al_free_aligned(a, slice);
    return st;
}
