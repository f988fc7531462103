/* gguf_write.c — buffered, atomic file output for GGUF writers (see gguf_write.h). */
#include "format/gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITER_BUF (4u << 20)

static slm_status fail_io(gguf_writer *w, slm_err *e, const char *what, int en) {
    w->st = err_set(e, SLM_ERR_IO, "cannot %s %s: %s", what, w->path, strerror(en ? en : EIO));
    return w->st;
}

slm_status gguf_writer_open(gguf_writer *w, const char *path, bool replace, const slm_allocator *a, slm_err *e) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->alloc = a ? *a : al_default;
    w->replace = replace;
    struct stat st;
    if (!replace && lstat(path, &st) == 0)
        return w->st = err_set(e, SLM_ERR_INVALID_ARG, "%s exists (not replaced unless asked to)", path);
    size_t len = strlen(path);
    w->path = al_strdup(&w->alloc, path);
    w->tmp = al_malloc(&w->alloc, len + 11);
    w->buf = al_malloc(&w->alloc, WRITER_BUF);
    if (!w->path || !w->tmp || !w->buf) {
        gguf_writer_abort(w);
        return w->st = err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    memcpy(w->tmp, path, len);
    memcpy(w->tmp + len, ".tmpXXXXXX", 11);
    w->fd = mkstemp(w->tmp);
    if (w->fd < 0) {
        int en = errno;
        al_free(&w->alloc, w->tmp);
        w->tmp = NULL;
        slm_status s = fail_io(w, e, "create a temporary file beside", en);
        gguf_writer_abort(w);
        return s;
    }
    (void)fchmod(w->fd, 0644);
    return SLM_OK;
}

static slm_status flush(gguf_writer *w, slm_err *e) {
    size_t off = 0;
    while (off < w->n_buf) {
        ssize_t k = write(w->fd, w->buf + off, w->n_buf - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fail_io(w, e, "write", k < 0 ? errno : ENOSPC);
        off += (size_t)k;
    }
    w->n_buf = 0;
    return SLM_OK;
}

slm_status gguf_writer_bytes(gguf_writer *w, const void *p, size_t n, slm_err *e) {
    if (w->st != SLM_OK) return w->st;
    const uint8_t *b = p;
    while (n > 0) {
        if (w->n_buf == WRITER_BUF && flush(w, e) != SLM_OK) return w->st;
        size_t k = WRITER_BUF - w->n_buf < n ? WRITER_BUF - w->n_buf : n;
        memcpy(w->buf + w->n_buf, b, k);
        w->n_buf += k;
        w->pos += k;
        b += k;
        n -= k;
    }
    return SLM_OK;
}

slm_status gguf_writer_u32(gguf_writer *w, uint32_t v, slm_err *e) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    return gguf_writer_bytes(w, b, 4, e);
}

slm_status gguf_writer_u64(gguf_writer *w, uint64_t v, slm_err *e) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return gguf_writer_bytes(w, b, 8, e);
}

slm_status gguf_writer_str(gguf_writer *w, const char *s, size_t len, slm_err *e) {
    if (gguf_writer_u64(w, len, e) != SLM_OK) return w->st;
    return gguf_writer_bytes(w, s, len, e);
}

slm_status gguf_writer_pad(gguf_writer *w, uint64_t alignment, slm_err *e) {
    static const uint8_t zeros[64];
    if (alignment == 0) return w->st;
    uint64_t n = (alignment - w->pos % alignment) % alignment;
    while (n > 0 && w->st == SLM_OK) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        gguf_writer_bytes(w, zeros, k, e);
        n -= k;
    }
    return w->st;
}

slm_status gguf_writer_commit(gguf_writer *w, slm_err *e) {
    if (w->st == SLM_OK && flush(w, e) == SLM_OK && fsync(w->fd) != 0) fail_io(w, e, "write", errno);
    if (w->fd >= 0 && close(w->fd) != 0 && w->st == SLM_OK) fail_io(w, e, "write", errno);
    w->fd = -1;
    if (w->st == SLM_OK) {
        if (w->replace) {
            if (rename(w->tmp, w->path) != 0) fail_io(w, e, "write", errno);
        } else if (link(w->tmp, w->path) != 0) {
            /* link refuses an existing path atomically; where the file system has no hard links,
             * check and rename */
            int en = errno;
            struct stat st;
            if (en == EEXIST || lstat(w->path, &st) == 0)
                w->st = err_set(e, SLM_ERR_INVALID_ARG, "%s exists (not replaced unless asked to)", w->path);
            else if (rename(w->tmp, w->path) != 0)
                fail_io(w, e, "write", errno);
        }
    }
    slm_status st = w->st;
    gguf_writer_abort(w); /* removes the temporary name (after link it is a second name) */
    return st;
}

void gguf_writer_abort(gguf_writer *w) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    if (w->tmp) unlink(w->tmp);
    al_free(&w->alloc, w->tmp);
    al_free(&w->alloc, w->path);
    al_free(&w->alloc, w->buf);
    w->tmp = w->path = NULL;
    w->buf = NULL;
    w->n_buf = 0;
}
