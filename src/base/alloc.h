/* alloc.h — the allocator hook every library allocation goes through (params carry it).
 * Sizes are overflow-checked: al_array(a, n, size) fails instead of wrapping. */
#ifndef SLM_BASE_ALLOC_H
#define SLM_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "statelm.h"

typedef struct slm_allocator {
    slm_alloc_fn alloc; /* NULL = malloc */
    slm_free_fn free;   /* NULL = free */
    void *user_data;
} slm_allocator;

/* The allocator used when none is given (malloc/free). */
extern const slm_allocator al_default;

void *al_malloc(const slm_allocator *a, size_t size);
void *al_calloc(const slm_allocator *a, size_t n, size_t size);  /* zeroed; NULL on overflow */
void *al_array(const slm_allocator *a, size_t n, size_t size);   /* not zeroed; NULL on overflow */
/* Grows or shrinks p (old_size bytes) to new_size bytes; on failure p is untouched, NULL returned. */
void *al_realloc(const slm_allocator *a, void *p, size_t old_size, size_t new_size);
void al_free(const slm_allocator *a, void *p);
/* Blocks aligned to AL_ALIGN bytes (a cache line and a full AVX-512 vector), for buffers that
 * kernels stream with aligned or non-temporal vector accesses: states, activations, scratch.
 * Free them with al_free_aligned only. */
#define AL_ALIGN 64
void *al_malloc_aligned(const slm_allocator *a, size_t size);
void *al_calloc_aligned(const slm_allocator *a, size_t size); /* zeroed */
void al_free_aligned(const slm_allocator *a, void *p);
/* Large streamed buffers (weights, states): blocks of at least AL_HUGE_PAGE bytes start on an
 * AL_HUGE_PAGE boundary and are marked for transparent huge pages (madvise, a hint), since each
 * decode step reads them whole and 4 KiB pages cost ~15% of the read bandwidth in page walks;
 * smaller ones are as al_malloc_aligned. Not zeroed. Free with al_free_aligned. */
#define AL_HUGE_PAGE ((size_t)2 << 20)
void *al_malloc_large(const slm_allocator *a, size_t size);
char *al_strndup(const slm_allocator *a, const char *s, size_t n);
char *al_strdup(const slm_allocator *a, const char *s);

/* Checked arithmetic: return false on overflow. */
static inline int size_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int size_add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline int u64_mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int u64_add_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

#endif
