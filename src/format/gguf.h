/* gguf.h — GGUF v2/v3 reader (docs/spec/gguf.md): header, metadata of every value type including nested
 * arrays, tensor infos, general.alignment, and tensor data as views into a read-only memory map.
 * Owns the parsed directory; does not interpret architectures (model/ does) or dequantise
 * (base/dtype does). Every count, offset and size is bounds- and overflow-checked; a bad file is
 * SLM_ERR_FORMAT (or SLM_ERR_UNSUPPORTED) with a message naming the field and the byte offset. */
#ifndef SLM_FORMAT_GGUF_H
#define SLM_FORMAT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/fmap.h"

/* Value type ids (docs/spec/gguf.md §1.2). */
typedef enum gguf_vtype {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3, GGUF_UINT32 = 4, GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12, GGUF_VTYPE_COUNT = 13
} gguf_vtype;

/* Hard caps (docs/style.md: strings, n_dims, n_tensors, n_kv and alignment have caps). */
#define GGUF_MAX_KEY_LEN 65535u
#define GGUF_MAX_STRING_LEN (1u << 28)  /* 256 MiB; a chat template or tokenizer.json fits */
#define GGUF_MAX_NAME_LEN 256u          /* tensor names (ggml uses 64; allow some slack) */
#define GGUF_MAX_TENSORS (1u << 20)
#define GGUF_MAX_KV (1u << 20)
#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_MAX_ALIGNMENT (1u << 16)

typedef struct gguf_str {
    const char *ptr; /* points into the map; NOT NUL-terminated; bytes as stored (value strings are
                        not checked for UTF-8: token texts may hold raw bytes) */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_vtype type;
    union {
        uint64_t u64;    /* UINT8/16/32/64 */
        int64_t i64;     /* INT8/16/32/64 */
        double f64;      /* FLOAT32/64 */
        bool b;          /* BOOL */
        gguf_str str;    /* STRING */
        struct {
            gguf_vtype elem_type;
            uint64_t n;
            /* Fixed-size element types: raw little-endian elements in the map. */
            const uint8_t *raw;
            /* STRING elements: n strings (allocated). */
            gguf_str *strs;
            /* ARRAY elements: n nested values (allocated). */
            gguf_value *items;
        } arr;
    } v;
};

typedef struct gguf_kv {
    char *key;          /* NUL-terminated copy, valid UTF-8 */
    uint64_t offset;    /* byte offset of the key in the file */
    gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
    char *name;           /* NUL-terminated copy */
    uint32_t n_dims;      /* 1..4 */
    int64_t ne[4];        /* ggml order; unused dims are 1 */
    uint32_t type;        /* ggml type id (slm_dtype) */
    uint64_t offset;      /* relative to data_start */
    uint64_t size_bytes;
    const uint8_t *data;  /* into the map */
    uint64_t info_offset; /* byte offset of this tensor info in the file (for messages) */
} gguf_tensor;

typedef struct gguf_file {
    slm_allocator alloc;
    fmap map;             /* owned when opened by gguf_open */
    bool owns_map;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_start;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
} gguf_file;

/* Parses a GGUF image held in memory (data stays borrowed and must outlive g). On failure g is
 * left empty (safe to gguf_close) and e explains. Tensor data must lie inside the image, must not
 * overlap, and every tensor type must be known (unknown ids are SLM_ERR_UNSUPPORTED). */
slm_status gguf_parse(gguf_file *g, const void *data, size_t size, const slm_allocator *a, slm_err *e);
/* Maps path and parses it. */
slm_status gguf_open(gguf_file *g, const char *path, const slm_allocator *a, slm_err *e);
void gguf_close(gguf_file *g);

/* Lookup (linear in n_kv, fine for < 1000 keys; callers cache what they need). NULL if absent. */
const gguf_kv *gguf_find(const gguf_file *g, const char *key);

/* Typed getters. Integer getters accept any integer width (and BOOL for ints); they fail with
 * SLM_ERR_FORMAT when the type does not fit or the value is out of range for the output. Absent
 * keys give SLM_ERR_NOT_FOUND (no message set: callers decide whether absence is an error). */
slm_status gguf_get_i64(const gguf_file *g, const char *key, int64_t *out, slm_err *e);
slm_status gguf_get_f64(const gguf_file *g, const char *key, double *out, slm_err *e); /* ints too */
slm_status gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, slm_err *e);
slm_status gguf_get_arr(const gguf_file *g, const char *key, const gguf_value **arr, slm_err *e);

/* Element access on an ARRAY value; false (and *out zeroed) when i is out of range or the element
 * type does not fit. gguf_arr_i64: integer elements of any width and BOOL (u64 above INT64_MAX
 * fails). gguf_arr_f64: F32/F64 elements, and integers converted to double. gguf_arr_str: STRING
 * elements (pointing into the map). Nested arrays: v.arr.items[i]. */
bool gguf_arr_i64(const gguf_value *arr, uint64_t i, int64_t *out);
bool gguf_arr_f64(const gguf_value *arr, uint64_t i, double *out);
bool gguf_arr_str(const gguf_value *arr, uint64_t i, gguf_str *out);

const char *gguf_vtype_name(gguf_vtype t);

#endif
