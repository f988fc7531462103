/* fmap.c — POSIX mmap wrapper and whole-file reads for small text files. */
#include "base/fmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

slm_status fmap_open(fmap *m, const char *path, slm_err *e) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(e, SLM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int en = errno;
        close(fd);
        return err_set(e, SLM_ERR_IO, "cannot stat %s: %s", path, strerror(en));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(e, SLM_ERR_IO, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return SLM_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int en = errno;
    close(fd);
    if (p == MAP_FAILED) return err_set(e, SLM_ERR_IO, "cannot map %s: %s", path, strerror(en));
    m->data = p;
    m->size = (size_t)st.st_size;
    return SLM_OK;
}

void fmap_close(fmap *m) {
    if (m && m->data) munmap((void *)m->data, m->size);
    if (m) {
        m->data = NULL;
        m->size = 0;
    }
}

void fmap_release(const fmap *m, const void *p, size_t n) {
    if (!m || !m->data || !p || n == 0) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (lo < (uintptr_t)m->data || hi > (uintptr_t)m->data + m->size || hi <= lo) return;
    (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

slm_status file_read_all(const char *path, size_t max_bytes, char **out, size_t *out_len, slm_err *e) {
    *out = NULL;
    if (out_len) *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, errno == ENOENT ? SLM_ERR_NOT_FOUND : SLM_ERR_IO, "cannot open %s: %s", path,
                           strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) goto io_fail;
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) goto io_fail;
    if ((unsigned long)n > max_bytes) {
        fclose(f);
        return err_set(e, SLM_ERR_FORMAT, "%s is %ld bytes, over the limit of %zu", path, n, max_bytes);
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return err_set(e, SLM_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(buf);
        return err_set(e, SLM_ERR_IO, "short read on %s", path);
    }
    buf[got] = '\0';
    *out = buf;
    if (out_len) *out_len = got;
    return SLM_OK;
io_fail:
    fclose(f);
    return err_set(e, SLM_ERR_IO, "cannot read %s: %s", path, strerror(errno));
}
