/* reader.c — bounded little-endian reads with field/offset error messages. */
#include "base/reader.h"

void rd_init(rd *r, const void *data, size_t size, slm_err *e) {
    r->data = data;
    r->size = size;
    r->pos = 0;
    r->e = e;
}

static slm_status short_read(rd *r, const char *field, uint64_t need) {
    return err_set(r->e, SLM_ERR_FORMAT, "truncated: %s at byte offset %zu needs %llu bytes, %zu left", field, r->pos,
                   (unsigned long long)need, rd_left(r));
}

slm_status rd_bytes(rd *r, const char *field, size_t n, const uint8_t **p) {
    if (n > rd_left(r)) return short_read(r, field, n);
    *p = r->data + r->pos;
    r->pos += n;
    return SLM_OK;
}

slm_status rd_u32(rd *r, const char *field, uint32_t *v) {
    const uint8_t *p = NULL;
    slm_status st = rd_bytes(r, field, 4, &p);
    if (st == SLM_OK) *v = ld_u32(p);
    return st;
}

slm_status rd_u64(rd *r, const char *field, uint64_t *v) {
    const uint8_t *p = NULL;
    slm_status st = rd_bytes(r, field, 8, &p);
    if (st == SLM_OK) *v = ld_u64(p);
    return st;
}
