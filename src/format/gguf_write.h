/* gguf_write.h — the byte sink of a GGUF writer (docs/spec/gguf.md §1): little-endian scalars and
 * strings through a buffer into a temporary file beside the destination, published whole or not
 * at all. The file appears at path only after gguf_writer_commit (fsync, then a no-replace link or
 * a rename); every failure, including a full disk or RLIMIT_FSIZE (EFBIG: the caller must ignore
 * SIGXFSZ), removes the temporary file. Does not know the GGUF structure (convert/write.c lays it out). */
#ifndef SLM_FORMAT_GGUF_WRITE_H
#define SLM_FORMAT_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"

typedef struct gguf_writer {
    slm_allocator alloc;
    int fd;          /* the temporary file; -1 when closed */
    char *path;      /* destination (owned copy) */
    char *tmp;       /* temporary file path (owned) */
    bool replace;    /* commit may replace an existing path */
    uint8_t *buf;    /* pending bytes [0, n_buf) */
    size_t n_buf;
    uint64_t pos;    /* bytes accepted so far (written + pending) */
    slm_status st;   /* first failure; later calls do nothing and return it */
} gguf_writer;

/* Creates the temporary file. SLM_ERR_INVALID_ARG when path exists and replace is false (nothing
 * created); SLM_ERR_IO when the folder cannot take a file. */
slm_status gguf_writer_open(gguf_writer *w, const char *path, bool replace, const slm_allocator *a, slm_err *e);
slm_status gguf_writer_bytes(gguf_writer *w, const void *p, size_t n, slm_err *e);
slm_status gguf_writer_u32(gguf_writer *w, uint32_t v, slm_err *e);
slm_status gguf_writer_u64(gguf_writer *w, uint64_t v, slm_err *e);
/* u64 length then the bytes (GGUF string). */
slm_status gguf_writer_str(gguf_writer *w, const char *s, size_t len, slm_err *e);
/* Zero bytes up to the next multiple of alignment (a power of two is not required). */
slm_status gguf_writer_pad(gguf_writer *w, uint64_t alignment, slm_err *e);
/* Flushes, fsyncs and publishes the file at path; then the writer is closed (abort is a no-op).
 * Without replace an existing path is never overwritten (SLM_ERR_INVALID_ARG). On failure the
 * temporary file is removed. */
slm_status gguf_writer_commit(gguf_writer *w, slm_err *e);
/* Closes and removes the temporary file (if any) and frees w's buffers. Safe after commit and
 * after a failed open. */
void gguf_writer_abort(gguf_writer *w);

#endif
