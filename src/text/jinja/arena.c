/* arena.c — the bump allocator of a parsed template or of one render (jinja_int.h). Chunks come
 * from the allocator hook; a request past the arena's limit or a failed allocation unwinds to the
 * arena's jmp_buf with SLM_ERR_RANGE or SLM_ERR_NOMEM. */
#include <string.h>

#include "text/jinja/jinja_int.h"

struct ja_chunk {
    ja_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

#define JA_CHUNK ((size_t)64 << 10)

void ja_init(jarena *ar, const slm_allocator *a, size_t limit, jmp_buf *fail, slm_err *e) {
    *ar = (jarena){.a = a, .limit = limit, .fail = fail, .e = e};
}

void ja_free(jarena *ar) {
    for (ja_chunk *c = ar->head, *next; c; c = next) {
        next = c->next;
        al_free(ar->a, c);
    }
    ar->head = NULL;
    ar->total = 0;
}

void *ja_alloc(jarena *ar, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    ja_chunk *c = ar->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > JA_CHUNK / 4 ? n : JA_CHUNK;
        if (n > ((size_t)1 << 40) || (ar->limit && ar->total + cap > ar->limit)) {
            err_set(ar->e, SLM_ERR_RANGE, "jinja: memory limit (%zu bytes) exceeded", ar->limit);
            longjmp(*ar->fail, 1);
        }
        c = al_malloc(ar->a, sizeof *c + cap);
        if (!c) {
            err_set(ar->e, SLM_ERR_NOMEM, "jinja: out of memory");
            longjmp(*ar->fail, 1);
        }
        ar->total += cap;
        c->cap = cap;
        c->used = 0;
        if (cap == JA_CHUNK || !ar->head) {
            c->next = ar->head;
            ar->head = c;
        } else { /* a big block goes behind the current chunk, which keeps its free room */
            c->next = ar->head->next;
            ar->head->next = c;
            c->used = n;
            memset(c->mem, 0, n);
            return c->mem;
        }
    }
    void *p = c->mem + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void *ja_grow(jarena *ar, void *p, size_t old_n, size_t new_n) {
    void *q = ja_alloc(ar, new_n);
    if (old_n) memcpy(q, p, old_n < new_n ? old_n : new_n);
    return q;
}

char *ja_strndup(jarena *ar, const char *s, size_t n) {
    char *p = ja_alloc(ar, n + 1);
    if (n) memcpy(p, s, n);
    return p;
}
