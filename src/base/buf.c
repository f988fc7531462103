/* buf.c — the growable byte buffer (buf.h). */
#include "base/buf.h"

#include <stdio.h>
#include <string.h>

static const slm_allocator *buf_alloc(const buf *b) { return b->a ? b->a : &al_default; }

bool buf_reserve(buf *b, size_t extra) {
    if (b->oom) return false;
    size_t need;
    if (!size_add_ok(b->n, extra, &need) || !size_add_ok(need, 1, &need)) {
        b->oom = true;
        return false;
    }
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *np = al_realloc(buf_alloc(b), b->p, b->cap, cap);
    if (!np) {
        b->oom = true;
        return false;
    }
    if (!b->p) np[0] = '\0';
    b->p = np;
    b->cap = cap;
    return true;
}

void buf_put(buf *b, const void *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void buf_puts(buf *b, const char *s) { buf_put(b, s, strlen(s)); }

void buf_putc(buf *b, char c) { buf_put(b, &c, 1); }

void buf_vprintf(buf *b, const char *fmt, va_list ap) {
    if (b->oom) return;
    va_list aq;
    va_copy(aq, ap);
    char small[256];
    int k = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (k < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)k < sizeof small) {
        buf_put(b, small, (size_t)k);
        return;
    }
    if (!buf_reserve(b, (size_t)k)) return;
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    b->n += (size_t)k;
}

void buf_printf(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_truncate(buf *b, size_t n) {
    if (b->p && n < b->n) {
        b->n = n;
        b->p[n] = '\0';
    }
}

char *buf_take(buf *b) {
    if (b->oom) {
        buf_free(b);
        return NULL;
    }
    if (!buf_reserve(b, 0)) {
        buf_free(b);
        return NULL;
    }
    char *p = b->p;
    b->p = NULL;
    b->n = b->cap = 0;
    return p;
}

void buf_free(buf *b) {
    al_free(buf_alloc(b), b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = false;
}
