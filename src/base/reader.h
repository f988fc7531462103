/* reader.h — the bounded reader all binary parsing goes through.
 * Every read checks the remaining bytes first; a short read sets an SLM_ERR_FORMAT error naming
 * the field and the byte offset where it starts, and leaves pos unchanged. Little-endian. */
#ifndef SLM_BASE_READER_H
#define SLM_BASE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct rd {
    const uint8_t *data; /* (size) bytes */
    size_t size;
    size_t pos;          /* invariant: pos <= size */
    slm_err *e;
} rd;

void rd_init(rd *r, const void *data, size_t size, slm_err *e);
static inline size_t rd_left(const rd *r) { return r->size - r->pos; }

slm_status rd_u32(rd *r, const char *field, uint32_t *v);
slm_status rd_u64(rd *r, const char *field, uint64_t *v);
/* Returns a pointer to n bytes inside the buffer and advances. */
slm_status rd_bytes(rd *r, const char *field, size_t n, const uint8_t **p);

/* Little-endian loads from unaligned memory. */
static inline uint16_t ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ld_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t ld_u64(const uint8_t *p) { return (uint64_t)ld_u32(p) | ((uint64_t)ld_u32(p + 4) << 32); }

#endif
