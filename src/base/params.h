/* params.h — reading a caller's params struct (include/statelm.h: append-only, `size` first).
 * A caller built against an older, smaller struct passes its own size: only those bytes are read,
 * and the fields it lacks keep their defaults; size 0 (a zeroed struct) reads nothing, so every
 * field is its default. Each constructor then gives fields left at 0 their default as its header
 * comment says.
 * Growing a struct: an older caller's size covers its struct's trailing padding, whose bytes are
 * indeterminate, so a field appended to a struct whose last field leaves padding must not start
 * inside that padding (put an explicit reserved field there first, or start at the next multiple
 * of the old sizeof's alignment). */
#ifndef SLM_BASE_PARAMS_H
#define SLM_BASE_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "statelm.h"

/* Overwrites the first min(src->size, dst_size) bytes of dst (which holds the defaults, size
 * first) with src's; dst's size stays dst_size. Does nothing for a NULL src. */
static inline void params_read(void *dst, size_t dst_size, const void *src) {
    if (!src) return;
    size_t n;
    memcpy(&n, src, sizeof n);
    memcpy(dst, src, n < dst_size ? n : dst_size);
    memcpy(dst, &dst_size, sizeof dst_size);
}

/* The KV state dtype kv names (SLM_KV_DEFAULT: f16); false for a value that names none. */
/* The allocator that a params struct's hooks make: both hooks, or malloc/free (al_default) when
 * either is NULL. */
static inline slm_allocator params_allocator(slm_alloc_fn alloc_fn, slm_free_fn free_fn, void *user_data) {
    if (!alloc_fn || !free_fn) return al_default;
    return (slm_allocator){alloc_fn, free_fn, user_data};
}

/* The start of a loader taking slm_model_params (name: the public function): clears err, refuses a
 * NULL path or out with SLM_ERR_INVALID_ARG (the message copied out), then reads params over *p
 * (the defaults) and makes their allocator. */
static inline slm_status params_load_begin(const char *name, const char *path, bool has_out,
                                           const slm_model_params *params, slm_model_params *p, slm_allocator *a,
                                           slm_err *e, char *err, size_t err_cap) {
    err_clear(e);
    if (err && err_cap) err[0] = '\0';
    if (!path || !has_out) {
        err_set(e, SLM_ERR_INVALID_ARG, "%s: path and out are required", name);
        err_copy_out(e, err, err_cap);
        return e->status;
    }
    params_read(p, sizeof *p, params);
    *a = params_allocator(p->alloc_fn, p->free_fn, p->alloc_user_data);
    return SLM_OK;
}

static inline bool params_kv_dtype(slm_kv_type kv, slm_dtype *out) {
    switch (kv) {
    case SLM_KV_DEFAULT:
    case SLM_KV_F16: *out = SLM_DTYPE_F16; return true;
    case SLM_KV_F32: *out = SLM_DTYPE_F32; return true;
    case SLM_KV_Q8_0: *out = SLM_DTYPE_Q8_0; return true;
    case SLM_KV_Q4_0: *out = SLM_DTYPE_Q4_0; return true;
    }
    return false;
}

static inline slm_kv_type params_kv_type(slm_dtype kv_dtype) {
    switch (kv_dtype) {
    case SLM_DTYPE_F32: return SLM_KV_F32;
    case SLM_DTYPE_Q8_0: return SLM_KV_Q8_0;
    case SLM_DTYPE_Q4_0: return SLM_KV_Q4_0;
    default: return SLM_KV_F16;
    }
}

#define PARAMS_KV_NAMES "SLM_KV_DEFAULT, SLM_KV_F16, SLM_KV_F32, SLM_KV_Q8_0, SLM_KV_Q4_0"

/* The K and V state dtypes of kv_type, kv_type_k and kv_type_v (each of the last two, when not
 * SLM_KV_DEFAULT, overrides kv_type for its states). NULL on success, else the name of the field
 * that names no type, its value in *bad. */
static inline const char *params_kv_dtypes(slm_kv_type kv, slm_kv_type kv_k, slm_kv_type kv_v, slm_dtype *k,
                                           slm_dtype *v, int *bad) {
    *bad = (int)kv;
    if (!params_kv_dtype(kv, k)) return "kv_type";
    *v = *k;
    *bad = (int)kv_k;
    if (kv_k != SLM_KV_DEFAULT && !params_kv_dtype(kv_k, k)) return "kv_type_k";
    *bad = (int)kv_v;
    if (kv_v != SLM_KV_DEFAULT && !params_kv_dtype(kv_v, v)) return "kv_type_v";
    return NULL;
}

#endif
