/* gguf.c — GGUF v2/v3 reader (docs/spec/gguf.md §1): header, metadata key/values of every value type
 * (nested arrays up to GGUF_MAX_ARRAY_DEPTH), general.alignment, tensor infos and the tensor data
 * directory as views into the image.
 * Owns: copies of keys and tensor names, the kv/tensor arrays and the per-array element tables
 * (string and nested-array elements). String values and fixed-size array elements stay in the
 * image. Does not: interpret architectures, check that value strings are UTF-8 (token texts may
 * hold raw bytes; consumers decide), dequantise, or read big-endian files (refused).
 * All input goes through the bounded reader; every error names the field and its byte offset. */
#include "format/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/half.h"
#include "base/reader.h"
#include "base/utf8.h"

#define GGUF_DEFAULT_ALIGNMENT 32u
/* Smallest encodings, used to bound counts by the bytes left before anything is allocated:
 * kv = key length (8) + a 1-byte key + value type (4) + a 1-byte value;
 * tensor info = name length (8) + a 1-byte name + n_dims (4) + one dim (8) + type (4) + offset (8);
 * array element: string = its length (8), nested array = element type (4) + count (8). */
#define MIN_KV_BYTES 14u
#define MIN_TENSOR_INFO_BYTES 33u
#define MIN_STRING_BYTES 8u
#define MIN_ARRAY_BYTES 12u

typedef struct parser {
    rd r;
    gguf_file *g;
    slm_err *e;
    const slm_allocator *a;
} parser;

typedef unsigned long long ull;

/* Encoded size of a fixed-size value type; 0 for STRING, ARRAY and unknown ids. */
static size_t vtype_size(uint32_t t) {
    static const uint8_t sizes[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < GGUF_VTYPE_COUNT ? sizes[t] : 0;
}

static bool vtype_is_int(uint32_t t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 || t == GGUF_UINT32 ||
           t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64;
}

static bool vtype_is_unsigned(uint32_t t) {
    return t == GGUF_UINT8 || t == GGUF_UINT16 || t == GGUF_UINT32 || t == GGUF_UINT64;
}

const char *gguf_vtype_name(gguf_vtype t) {
    static const char *const names[GGUF_VTYPE_COUNT] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                        "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

/* Copies up to 80 bytes of s into out (>= 84 bytes) for messages: printable ASCII kept, other bytes
 * as '?', "..." when cut. */
static const char *msg_name(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (; k < n && k < 80; k++) {
        unsigned char c = (unsigned char)s[k];
        out[k] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
    }
    if (k < n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

/* ---- name set: duplicate detection for keys and tensor names in linear time ---------------- */

typedef struct name_set {
    const char **slots; /* (mask + 1) entries, NULL = empty */
    size_t mask;
} name_set;

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static bool set_init(name_set *s, const slm_allocator *a, uint64_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* n <= 2^20, so no overflow */
    s->slots = al_calloc(a, cap, sizeof *s->slots);
    s->mask = cap - 1;
    return s->slots != NULL;
}

/* Inserts name; returns the earlier equal name if there is one (and does not insert). */
static const char *set_insert(name_set *s, const char *name) {
    size_t i = (size_t)hash_str(name) & s->mask;
    while (s->slots[i]) {
        if (strcmp(s->slots[i], name) == 0) return s->slots[i];
        i = (i + 1) & s->mask;
    }
    s->slots[i] = name;
    return NULL;
}

/* ---- values --------------------------------------------------------------------------------- */

static void free_value(const slm_allocator *a, gguf_value *v) {
    if (v->type != GGUF_ARRAY) return;
    if (v->v.arr.items) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) free_value(a, &v->v.arr.items[i]);
        al_free(a, v->v.arr.items);
    }
    al_free(a, v->v.arr.strs);
    v->v.arr.items = NULL;
    v->v.arr.strs = NULL;
}

/* Decodes one fixed-size little-endian value of type t (already range-checked) from p. */
static void load_scalar(gguf_vtype t, const uint8_t *p, gguf_value *v) {
    uint64_t bits;
    switch (t) {
    case GGUF_UINT8: v->v.u64 = p[0]; break;
    case GGUF_INT8: v->v.i64 = (int8_t)p[0]; break;
    case GGUF_UINT16: v->v.u64 = ld_u16(p); break;
    case GGUF_INT16: v->v.i64 = (int16_t)ld_u16(p); break;
    case GGUF_UINT32: v->v.u64 = ld_u32(p); break;
    case GGUF_INT32: v->v.i64 = (int32_t)ld_u32(p); break;
    case GGUF_FLOAT32: v->v.f64 = (double)f32_from_bits(ld_u32(p)); break;
    case GGUF_BOOL: v->v.b = p[0] != 0; break;
    case GGUF_UINT64: v->v.u64 = ld_u64(p); break;
    case GGUF_INT64: v->v.i64 = (int64_t)ld_u64(p); break;
    case GGUF_FLOAT64:
        bits = ld_u64(p);
        memcpy(&v->v.f64, &bits, sizeof bits);
        break;
    default: break;
    }
}

/* Reads a gguf_string (u64 length + bytes) into s, pointing into the image. */
static slm_status parse_string(parser *p, const char *field, gguf_str *s) {
    size_t at = p->r.pos;
    uint64_t len;
    const uint8_t *bytes;
    slm_status st = rd_u64(&p->r, field, &len);
    if (st) return st;
    if (len > GGUF_MAX_STRING_LEN)
        return err_set(p->e, SLM_ERR_FORMAT, "%s length at byte offset %zu: %llu exceeds the cap of %u bytes", field,
                       at, (ull)len, GGUF_MAX_STRING_LEN);
    st = rd_bytes(&p->r, field, (size_t)len, &bytes);
    if (st) return st;
    s->ptr = (const char *)bytes;
    s->len = len;
    return SLM_OK;
}

static slm_status parse_value(parser *p, gguf_vtype type, gguf_value *v, int depth);

/* Reads an array body (element type, count, elements) into v (type ARRAY, depth >= 1). On failure
 * v owns whatever was allocated so far (free_value releases it). */
static slm_status parse_array(parser *p, gguf_value *v, int depth) {
    size_t type_at = p->r.pos;
    uint32_t et;
    uint64_t n;
    slm_status st = rd_u32(&p->r, "array element type", &et);
    if (st) return st;
    if (et >= GGUF_VTYPE_COUNT)
        return err_set(p->e, SLM_ERR_FORMAT, "array element type at byte offset %zu: %u is not a GGUF value type",
                       type_at, et);
    size_t count_at = p->r.pos;
    st = rd_u64(&p->r, "array count", &n);
    if (st) return st;
    v->v.arr.elem_type = (gguf_vtype)et;

    size_t esize = vtype_size(et);
    uint64_t min_bytes = et == GGUF_STRING ? MIN_STRING_BYTES : et == GGUF_ARRAY ? MIN_ARRAY_BYTES : esize;
    uint64_t need;
    if (!u64_mul_ok(n, min_bytes, &need) || need > rd_left(&p->r))
        return err_set(p->e, SLM_ERR_FORMAT,
                       "array count at byte offset %zu: %llu elements of type %s do not fit in the %zu bytes left",
                       count_at, (ull)n, gguf_vtype_name((gguf_vtype)et), rd_left(&p->r));

    if (et == GGUF_ARRAY && depth + 1 > GGUF_MAX_ARRAY_DEPTH)
        return err_set(p->e, SLM_ERR_FORMAT, "array element type at byte offset %zu: arrays nested deeper than %d",
                       type_at, GGUF_MAX_ARRAY_DEPTH);

    if (esize) {
        const uint8_t *raw;
        st = rd_bytes(&p->r, "array elements", (size_t)need, &raw);
        if (st) return st;
        if (et == GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++)
                if (raw[i] > 1)
                    return err_set(p->e, SLM_ERR_FORMAT, "bool array element %llu at byte offset %zu: %u is not 0 or 1",
                                   (ull)i, count_at + 8 + (size_t)i, raw[i]);
        }
        v->v.arr.raw = raw;
        v->v.arr.n = n;
        return SLM_OK;
    }
    if (n == 0) return SLM_OK;
    if (et == GGUF_STRING) {
        v->v.arr.strs = al_calloc(p->a, (size_t)n, sizeof(gguf_str));
        if (!v->v.arr.strs) return err_set(p->e, SLM_ERR_NOMEM, "out of memory for %llu array strings", (ull)n);
        v->v.arr.n = n;
        for (uint64_t i = 0; i < n; i++) {
            st = parse_string(p, "array string", &v->v.arr.strs[i]);
            if (st) return st;
        }
        return SLM_OK;
    }
    v->v.arr.items = al_calloc(p->a, (size_t)n, sizeof(gguf_value));
    if (!v->v.arr.items) return err_set(p->e, SLM_ERR_NOMEM, "out of memory for %llu nested arrays", (ull)n);
    v->v.arr.n = n;
    for (uint64_t i = 0; i < n; i++) {
        st = parse_value(p, GGUF_ARRAY, &v->v.arr.items[i], depth + 1);
        if (st) return st;
    }
    return SLM_OK;
}

/* Reads one value of a known type. depth is the array nesting level v would have (1 at top). */
static slm_status parse_value(parser *p, gguf_vtype type, gguf_value *v, int depth) {
    v->type = type;
    if (type == GGUF_STRING) return parse_string(p, "string value", &v->v.str);
    if (type == GGUF_ARRAY) return parse_array(p, v, depth);
    size_t at = p->r.pos;
    const uint8_t *b;
    slm_status st = rd_bytes(&p->r, "value", vtype_size(type), &b);
    if (st) return st;
    if (type == GGUF_BOOL && b[0] > 1)
        return err_set(p->e, SLM_ERR_FORMAT, "bool value at byte offset %zu: %u is not 0 or 1", at, b[0]);
    load_scalar(type, b, v);
    return SLM_OK;
}

/* ---- key/values ----------------------------------------------------------------------------- */

/* Reads a name (key or tensor name): length in [1, cap], valid UTF-8 without NUL bytes. Returns a
 * NUL-terminated copy in *out. */
static slm_status parse_name(parser *p, const char *field, uint64_t cap, char **out) {
    size_t at = p->r.pos;
    uint64_t len;
    const uint8_t *bytes;
    slm_status st = rd_u64(&p->r, field, &len);
    if (st) return st;
    if (len == 0 || len > cap)
        return err_set(p->e, SLM_ERR_FORMAT, "%s length at byte offset %zu: %llu is outside 1..%llu", field, at,
                       (ull)len, (ull)cap);
    st = rd_bytes(&p->r, field, (size_t)len, &bytes);
    if (st) return st;
    if (memchr(bytes, 0, (size_t)len))
        return err_set(p->e, SLM_ERR_FORMAT, "%s at byte offset %zu contains a NUL byte", field, at + 8);
    if (!utf8_valid(bytes, (size_t)len))
        return err_set(p->e, SLM_ERR_FORMAT, "%s at byte offset %zu is not valid UTF-8", field, at + 8);
    *out = al_strndup(p->a, (const char *)bytes, (size_t)len);
    if (!*out) return err_set(p->e, SLM_ERR_NOMEM, "out of memory copying a %s", field);
    return SLM_OK;
}

/* general.alignment: any integer width, non-zero, a multiple of 8, at most GGUF_MAX_ALIGNMENT. */
static slm_status take_alignment(parser *p, const gguf_kv *kv, size_t value_at) {
    const gguf_value *v = &kv->value;
    if (!vtype_is_int(v->type))
        return err_set(p->e, SLM_ERR_FORMAT, "general.alignment at byte offset %zu: type %s, expected an integer",
                       value_at, gguf_vtype_name(v->type));
    bool neg = !vtype_is_unsigned(v->type) && v->v.i64 < 0;
    uint64_t a = neg ? 0 : v->v.u64;
    if (neg || a == 0 || a % 8 != 0 || a > GGUF_MAX_ALIGNMENT)
        return err_set(p->e, SLM_ERR_FORMAT,
                       "general.alignment at byte offset %zu: %lld is not a non-zero multiple of 8 up to %u", value_at,
                       neg ? (long long)v->v.i64 : (long long)a, GGUF_MAX_ALIGNMENT);
    p->g->alignment = (uint32_t)a;
    return SLM_OK;
}

static slm_status parse_kv(parser *p, gguf_kv *kv, name_set *keys) {
    kv->offset = p->r.pos;
    slm_status st = parse_name(p, "key", GGUF_MAX_KEY_LEN, &kv->key);
    if (st) return st;
    const char *dup = set_insert(keys, kv->key);
    if (dup) return err_set(p->e, SLM_ERR_FORMAT, "key at byte offset %llu: duplicate key", (ull)kv->offset);
    size_t type_at = p->r.pos;
    uint32_t type;
    st = rd_u32(&p->r, "value type", &type);
    if (st) return st;
    if (type >= GGUF_VTYPE_COUNT)
        return err_set(p->e, SLM_ERR_FORMAT, "value type at byte offset %zu: %u is not a GGUF value type", type_at,
                       type);
    size_t value_at = p->r.pos;
    st = parse_value(p, (gguf_vtype)type, &kv->value, 1);
    if (st) return st;
    if (strcmp(kv->key, "general.alignment") == 0) return take_alignment(p, kv, value_at);
    return SLM_OK;
}

/* ---- tensor infos --------------------------------------------------------------------------- */

static slm_status parse_tensor_info(parser *p, gguf_tensor *t, name_set *names) {
    t->info_offset = p->r.pos;
    slm_status st = parse_name(p, "tensor name", GGUF_MAX_NAME_LEN, &t->name);
    if (st) return st;
    if (set_insert(names, t->name))
        return err_set(p->e, SLM_ERR_FORMAT, "tensor name at byte offset %llu: duplicate tensor name",
                       (ull)t->info_offset);

    size_t at = p->r.pos;
    st = rd_u32(&p->r, "n_dims", &t->n_dims);
    if (st) return st;
    if (t->n_dims < 1 || t->n_dims > 4)
        return err_set(p->e, SLM_ERR_FORMAT, "n_dims at byte offset %zu: %u is outside 1..4", at, t->n_dims);

    uint64_t n_elems = 1;
    size_t dim0_at = p->r.pos;
    for (uint32_t i = 0; i < 4; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < t->n_dims; i++) {
        uint64_t d;
        at = p->r.pos;
        st = rd_u64(&p->r, "dims", &d);
        if (st) return st;
        if (d < 1 || d > (uint64_t)INT64_MAX)
            return err_set(p->e, SLM_ERR_FORMAT, "dims[%u] at byte offset %zu: %llu is outside 1..2^63-1", i, at,
                           (ull)d);
        if (!u64_mul_ok(n_elems, d, &n_elems) || n_elems > (uint64_t)INT64_MAX)
            return err_set(p->e, SLM_ERR_FORMAT, "dims[%u] at byte offset %zu: the element count overflows", i, at);
        t->ne[i] = (int64_t)d;
    }

    at = p->r.pos;
    st = rd_u32(&p->r, "tensor type", &t->type);
    if (st) return st;
    const dtype_traits *tr = dtype_traits_of(t->type);
    if (!tr)
        return err_set(p->e, SLM_ERR_UNSUPPORTED, "tensor type at byte offset %zu: unknown or unsupported type id %u",
                       at, t->type);
    if ((uint64_t)t->ne[0] % tr->block_elems != 0)
        return err_set(p->e, SLM_ERR_FORMAT,
                       "dims[0] at byte offset %zu: %lld is not a multiple of the %s block size %u",
                       dim0_at, (long long)t->ne[0], tr->name, tr->block_elems);
    if (!dtype_row_bytes(t->type, n_elems, &t->size_bytes))
        return err_set(p->e, SLM_ERR_FORMAT, "tensor type at byte offset %zu: data size overflows", at);

    at = p->r.pos;
    st = rd_u64(&p->r, "tensor data offset", &t->offset);
    if (st) return st;
    if (t->offset % p->g->alignment != 0)
        return err_set(p->e, SLM_ERR_FORMAT,
                       "tensor data offset at byte offset %zu: %llu is not a multiple of the alignment %u", at,
                       (ull)t->offset, p->g->alignment);
    return SLM_OK;
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a;
    const gguf_tensor *y = *(const gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Places every tensor's data inside the image and refuses overlaps. */
static slm_status place_tensors(parser *p) {
    gguf_file *g = p->g;
    char nm[84], nm2[84];
    uint64_t blob = g->data_start <= p->r.size ? p->r.size - g->data_start : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        uint64_t end;
        if (g->data_start > p->r.size || !u64_add_ok(t->offset, t->size_bytes, &end) || end > blob)
            return err_set(p->e, SLM_ERR_FORMAT,
                           "tensor '%s' (info at byte offset %llu): data at byte offset %llu + %llu bytes lies outside "
                           "the file (%zu bytes)",
                           msg_name(t->name, strlen(t->name), nm), (ull)t->info_offset,
                           (ull)(g->data_start + t->offset), (ull)t->size_bytes, p->r.size);
        t->data = p->r.data + g->data_start + t->offset;
    }
    if (g->n_tensors < 2) return SLM_OK;
    gguf_tensor **order = al_array(p->a, (size_t)g->n_tensors, sizeof *order);
    if (!order) return err_set(p->e, SLM_ERR_NOMEM, "out of memory sorting %llu tensors", (ull)g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_tensor_offset);
    slm_status st = SLM_OK;
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        const gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->size_bytes > b->offset) {
            st = err_set(p->e, SLM_ERR_FORMAT,
                         "tensor '%s' (info at byte offset %llu): data at byte offset %llu overlaps tensor '%s' "
                         "[%llu, %llu)",
                         msg_name(b->name, strlen(b->name), nm), (ull)b->info_offset, (ull)(g->data_start + b->offset),
                         msg_name(a->name, strlen(a->name), nm2), (ull)(g->data_start + a->offset),
                         (ull)(g->data_start + a->offset + a->size_bytes));
            break;
        }
    }
    al_free(p->a, order);
    return st;
}

/* ---- header --------------------------------------------------------------------------------- */

static uint32_t bswap32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xFF00u) | ((x << 8) & 0xFF0000u) | (x << 24);
}

static slm_status parse_header(parser *p, uint64_t *n_tensors, uint64_t *n_kv) {
    const uint8_t *magic;
    slm_status st = rd_bytes(&p->r, "magic", 4, &magic);
    if (st) return st;
    if (memcmp(magic, "GGUF", 4) != 0)
        return err_set(p->e, SLM_ERR_FORMAT, "magic at byte offset 0: expected 'GGUF', found %02x %02x %02x %02x",
                       magic[0], magic[1], magic[2], magic[3]);
    uint32_t version;
    st = rd_u32(&p->r, "version", &version);
    if (st) return st;
    if (version != 2 && version != 3) {
        uint32_t sw = bswap32(version);
        if (sw >= 1 && sw <= 3)
            return err_set(p->e, SLM_ERR_UNSUPPORTED,
                           "version at byte offset 4: reads 0x%08x, a big-endian GGUF v%u; big-endian files are not "
                           "supported",
                           version, sw);
        if (version == 1)
            return err_set(p->e, SLM_ERR_UNSUPPORTED,
                           "version at byte offset 4: GGUF v1 (32-bit counts) is not supported");
        return err_set(p->e, SLM_ERR_UNSUPPORTED, "version at byte offset 4: %u is not supported (expected 2 or 3)",
                       version);
    }
    p->g->version = version;
    st = rd_u64(&p->r, "tensor_count", n_tensors);
    if (st) return st;
    st = rd_u64(&p->r, "metadata_kv_count", n_kv);
    if (st) return st;
    if (*n_tensors > GGUF_MAX_TENSORS)
        return err_set(p->e, SLM_ERR_FORMAT, "tensor_count at byte offset 8: %llu exceeds the cap of %u",
                       (ull)*n_tensors, GGUF_MAX_TENSORS);
    if (*n_kv > GGUF_MAX_KV)
        return err_set(p->e, SLM_ERR_FORMAT, "metadata_kv_count at byte offset 16: %llu exceeds the cap of %u",
                       (ull)*n_kv, GGUF_MAX_KV);
    /* Both are at most 2^20, so these products cannot overflow. */
    if (*n_kv * MIN_KV_BYTES > rd_left(&p->r))
        return err_set(p->e, SLM_ERR_FORMAT,
                       "metadata_kv_count at byte offset 16: %llu key/values cannot fit in the %zu bytes left",
                       (ull)*n_kv, rd_left(&p->r));
    if (*n_tensors * MIN_TENSOR_INFO_BYTES > rd_left(&p->r))
        return err_set(p->e, SLM_ERR_FORMAT,
                       "tensor_count at byte offset 8: %llu tensor infos cannot fit in the %zu bytes left",
                       (ull)*n_tensors, rd_left(&p->r));
    return SLM_OK;
}

/* ---- open / close --------------------------------------------------------------------------- */

static void release(gguf_file *g) {
    const slm_allocator *a = &g->alloc;
    if (g->kv) {
        for (uint64_t i = 0; i < g->n_kv; i++) {
            al_free(a, g->kv[i].key);
            free_value(a, &g->kv[i].value);
        }
        al_free(a, g->kv);
    }
    if (g->tensors) {
        for (uint64_t i = 0; i < g->n_tensors; i++) al_free(a, g->tensors[i].name);
        al_free(a, g->tensors);
    }
    if (g->owns_map) fmap_close(&g->map);
    slm_allocator keep = g->alloc;
    memset(g, 0, sizeof *g);
    g->alloc = keep;
}

slm_status gguf_parse(gguf_file *g, const void *data, size_t size, const slm_allocator *a, slm_err *e) {
    err_clear(e);
    memset(g, 0, sizeof *g);
    g->alloc = a ? *a : al_default;
    g->map.data = data;
    g->map.size = size;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;

    parser p;
    rd_init(&p.r, data, size, e);
    p.g = g;
    p.e = e;
    p.a = &g->alloc;
    name_set keys = {NULL, 0}, names = {NULL, 0};
    char nm[84];
    uint64_t n_tensors, n_kv;
    slm_status st = parse_header(&p, &n_tensors, &n_kv);
    if (st) goto fail;

    if (n_kv) {
        g->kv = al_calloc(p.a, (size_t)n_kv, sizeof *g->kv);
        if (!g->kv) {
            st = err_set(e, SLM_ERR_NOMEM, "out of memory for %llu key/values", (ull)n_kv);
            goto fail;
        }
    }
    g->n_kv = n_kv;
    if (!set_init(&keys, p.a, n_kv)) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory for the key set");
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        st = parse_kv(&p, &g->kv[i], &keys);
        if (st) {
            if (g->kv[i].key)
                err_prefix(e, "kv %llu '%s': ", (ull)i, msg_name(g->kv[i].key, strlen(g->kv[i].key), nm));
            else
                err_prefix(e, "kv %llu: ", (ull)i);
            goto fail;
        }
    }

    if (n_tensors) {
        g->tensors = al_calloc(p.a, (size_t)n_tensors, sizeof *g->tensors);
        if (!g->tensors) {
            st = err_set(e, SLM_ERR_NOMEM, "out of memory for %llu tensor infos", (ull)n_tensors);
            goto fail;
        }
    }
    g->n_tensors = n_tensors;
    if (!set_init(&names, p.a, n_tensors)) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory for the tensor name set");
        goto fail;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        st = parse_tensor_info(&p, &g->tensors[i], &names);
        if (st) {
            if (g->tensors[i].name)
                err_prefix(e, "tensor %llu '%s': ", (ull)i, msg_name(g->tensors[i].name, strlen(g->tensors[i].name), nm));
            else
                err_prefix(e, "tensor %llu: ", (ull)i);
            goto fail;
        }
    }

    /* align_up(pos, A) = pos + (A - pos mod A) mod A; pos <= size, A <= 2^16: no overflow. */
    g->data_start = (uint64_t)p.r.pos + (g->alignment - p.r.pos % g->alignment) % g->alignment;
    st = place_tensors(&p);
    if (st) goto fail;

    al_free(p.a, keys.slots);
    al_free(p.a, names.slots);
    return SLM_OK;

fail:
    al_free(p.a, keys.slots);
    al_free(p.a, names.slots);
    release(g);
    return st;
}

slm_status gguf_open(gguf_file *g, const char *path, const slm_allocator *a, slm_err *e) {
    err_clear(e);
    fmap m;
    slm_status st = fmap_open(&m, path, e);
    if (st) {
        memset(g, 0, sizeof *g);
        g->alloc = a ? *a : al_default;
        return st;
    }
    st = gguf_parse(g, m.data, m.size, a, e);
    if (st) {
        fmap_close(&m);
        err_prefix(e, "%s: ", path);
        return st;
    }
    g->map = m;
    g->owns_map = true;
    return SLM_OK;
}

void gguf_close(gguf_file *g) {
    if (g) release(g);
}

/* ---- lookup and typed access ---------------------------------------------------------------- */

const gguf_kv *gguf_find(const gguf_file *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

static slm_status wrong_type(slm_err *e, const gguf_kv *kv, const char *expected) {
    char nm[84];
    return err_set(e, SLM_ERR_FORMAT, "kv '%s' at byte offset %llu: type %s, expected %s",
                   msg_name(kv->key, strlen(kv->key), nm), (ull)kv->offset, gguf_vtype_name(kv->value.type), expected);
}

slm_status gguf_get_i64(const gguf_file *g, const char *key, int64_t *out, slm_err *e) {
    *out = 0;
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return SLM_ERR_NOT_FOUND;
    const gguf_value *v = &kv->value;
    if (v->type == GGUF_BOOL) {
        *out = v->v.b;
        return SLM_OK;
    }
    if (!vtype_is_int(v->type)) return wrong_type(e, kv, "an integer");
    if (vtype_is_unsigned(v->type)) {
        if (v->v.u64 > (uint64_t)INT64_MAX) {
            char nm[84];
            return err_set(e, SLM_ERR_FORMAT, "kv '%s' at byte offset %llu: %llu does not fit in int64",
                           msg_name(kv->key, strlen(kv->key), nm), (ull)kv->offset, (ull)v->v.u64);
        }
        *out = (int64_t)v->v.u64;
    } else {
        *out = v->v.i64;
    }
    return SLM_OK;
}

slm_status gguf_get_f64(const gguf_file *g, const char *key, double *out, slm_err *e) {
    *out = 0;
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return SLM_ERR_NOT_FOUND;
    const gguf_value *v = &kv->value;
    if (v->type == GGUF_FLOAT32 || v->type == GGUF_FLOAT64) *out = v->v.f64;
    else if (vtype_is_unsigned(v->type)) *out = (double)v->v.u64;
    else if (vtype_is_int(v->type)) *out = (double)v->v.i64;
    else return wrong_type(e, kv, "a number");
    return SLM_OK;
}

slm_status gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, slm_err *e) {
    out->ptr = NULL;
    out->len = 0;
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return SLM_ERR_NOT_FOUND;
    if (kv->value.type != GGUF_STRING) return wrong_type(e, kv, "string");
    *out = kv->value.v.str;
    return SLM_OK;
}

slm_status gguf_get_arr(const gguf_file *g, const char *key, const gguf_value **arr, slm_err *e) {
    *arr = NULL;
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return SLM_ERR_NOT_FOUND;
    if (kv->value.type != GGUF_ARRAY) return wrong_type(e, kv, "array");
    *arr = &kv->value;
    return SLM_OK;
}

bool gguf_arr_i64(const gguf_value *arr, uint64_t i, int64_t *out) {
    *out = 0;
    if (!arr || arr->type != GGUF_ARRAY || i >= arr->v.arr.n) return false;
    gguf_vtype t = arr->v.arr.elem_type;
    if (!vtype_is_int(t) && t != GGUF_BOOL) return false;
    gguf_value v;
    memset(&v, 0, sizeof v);
    load_scalar(t, arr->v.arr.raw + i * vtype_size(t), &v);
    if (t == GGUF_BOOL) *out = v.v.b;
    else if (!vtype_is_unsigned(t)) *out = v.v.i64;
    else if (v.v.u64 <= (uint64_t)INT64_MAX) *out = (int64_t)v.v.u64;
    else return false;
    return true;
}

bool gguf_arr_f64(const gguf_value *arr, uint64_t i, double *out) {
    *out = 0;
    if (!arr || arr->type != GGUF_ARRAY || i >= arr->v.arr.n) return false;
    gguf_vtype t = arr->v.arr.elem_type;
    if (t != GGUF_FLOAT32 && t != GGUF_FLOAT64 && !vtype_is_int(t)) return false;
    gguf_value v;
    memset(&v, 0, sizeof v);
    load_scalar(t, arr->v.arr.raw + i * vtype_size(t), &v);
    if (t == GGUF_FLOAT32 || t == GGUF_FLOAT64) *out = v.v.f64;
    else if (vtype_is_unsigned(t)) *out = (double)v.v.u64;
    else *out = (double)v.v.i64;
    return true;
}

bool gguf_arr_str(const gguf_value *arr, uint64_t i, gguf_str *out) {
    out->ptr = NULL;
    out->len = 0;
    if (!arr || arr->type != GGUF_ARRAY || arr->v.arr.elem_type != GGUF_STRING || i >= arr->v.arr.n) return false;
    *out = arr->v.arr.strs[i];
    return true;
}
