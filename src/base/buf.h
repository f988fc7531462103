/* buf.h — the growable byte buffer every module appends text or bytes to (rendered prompts,
 * generated grammars, JSON bodies, SSE events). It allocates through the allocator hook; the first
 * failed allocation makes the buffer sticky-failed (oom), later appends are no-ops, and the caller
 * checks oom once at the end. Invariant: when p != NULL, p[n] == '\0' (the contents are always a C
 * string as well as n bytes), n < cap. */
#ifndef SLM_BASE_BUF_H
#define SLM_BASE_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/alloc.h"

typedef struct buf {
    const slm_allocator *a; /* NULL = al_default */
    char *p;
    size_t n, cap;
    bool oom;
} buf;

/* An empty buffer allocating through a (NULL: malloc/free). */
static inline buf buf_make(const slm_allocator *a) { return (buf){.a = a}; }
/* Ensures room for extra more bytes plus the terminator; false (and oom set) when it cannot. */
bool buf_reserve(buf *b, size_t extra);
void buf_put(buf *b, const void *s, size_t n);
void buf_puts(buf *b, const char *s);
void buf_putc(buf *b, char c);
__attribute__((format(printf, 2, 3))) void buf_printf(buf *b, const char *fmt, ...);
void buf_vprintf(buf *b, const char *fmt, va_list ap);
/* Drops everything after the first n bytes (n <= b->n). */
void buf_truncate(buf *b, size_t n);
/* Hands the contents (a NUL-terminated string, never NULL unless oom) to the caller, who frees it
 * with al_free(b->a, ...); the buffer is left empty. On oom frees what it holds and returns NULL. */
char *buf_take(buf *b);
void buf_free(buf *b);

#endif
