/* alloc.c — allocation through the caller's hook, with overflow-checked sizes. */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const slm_allocator al_default = {NULL, NULL, NULL};

void *al_malloc(const slm_allocator *a, size_t size) {
    if (size == 0) size = 1;
    if (a && a->alloc) return a->alloc(a->user_data, size);
    return malloc(size);
}

void *al_array(const slm_allocator *a, size_t n, size_t size) {
    size_t total;
    if (!size_mul_ok(n, size, &total)) return NULL;
    return al_malloc(a, total);
}

void *al_calloc(const slm_allocator *a, size_t n, size_t size) {
    size_t total;
    if (!size_mul_ok(n, size, &total)) return NULL;
    void *p = al_malloc(a, total);
    if (p) memset(p, 0, total);
    return p;
}

void *al_realloc(const slm_allocator *a, void *p, size_t old_size, size_t new_size) {
    if (!a || !a->alloc) {
        void *q = realloc(p, new_size ? new_size : 1);
        return q;
    }
    void *q = al_malloc(a, new_size);
    if (!q) return NULL;
    if (p) {
        memcpy(q, p, old_size < new_size ? old_size : new_size);
        al_free(a, p);
    }
    return q;
}

void al_free(const slm_allocator *a, void *p) {
    if (!p) return;
    if (a && a->free) a->free(a->user_data, p);
    else free(p);
}

/* The pointer the hook returned is kept in the sizeof(void *) bytes just before the block. */
void *al_malloc_aligned(const slm_allocator *a, size_t size) {
    size_t total;
    if (!size_add_ok(size, AL_ALIGN + sizeof(void *), &total)) return NULL;
    uint8_t *raw = al_malloc(a, total);
    if (!raw) return NULL;
    uintptr_t p = ((uintptr_t)(raw + sizeof(void *)) + (AL_ALIGN - 1)) & ~(uintptr_t)(AL_ALIGN - 1);
    memcpy((uint8_t *)p - sizeof(void *), &raw, sizeof raw);
    return (void *)p;
}

void *al_calloc_aligned(const slm_allocator *a, size_t size) {
    void *p = al_malloc_aligned(a, size);
    if (p) memset(p, 0, size);
    return p;
}

void *al_malloc_large(const slm_allocator *a, size_t size) {
    size_t total;
    if (size < AL_HUGE_PAGE) return al_malloc_aligned(a, size);
    if (!size_add_ok(size, AL_HUGE_PAGE + sizeof(void *), &total)) return NULL;
    uint8_t *raw = al_malloc(a, total);
    if (!raw) return NULL;
    uintptr_t p = ((uintptr_t)(raw + sizeof(void *)) + (AL_HUGE_PAGE - 1)) & ~(uintptr_t)(AL_HUGE_PAGE - 1);
    memcpy((uint8_t *)p - sizeof(void *), &raw, sizeof raw);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)p, size & ~(AL_HUGE_PAGE - 1), MADV_HUGEPAGE); /* before the first touch */
#endif
    return (void *)p;
}

void al_free_aligned(const slm_allocator *a, void *p) {
    if (!p) return;
    void *raw;
    memcpy(&raw, (uint8_t *)p - sizeof(void *), sizeof raw);
    al_free(a, raw);
}

char *al_strndup(const slm_allocator *a, const char *s, size_t n) {
    size_t total;
    if (!size_add_ok(n, 1, &total)) return NULL;
    char *d = al_malloc(a, total);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *al_strdup(const slm_allocator *a, const char *s) { return al_strndup(a, s, strlen(s)); }
