/* fmap.h — read-only memory maps of files (model weights stay mapped, never copied).
 * An empty file maps to data = NULL, size = 0. */
#ifndef SLM_BASE_FMAP_H
#define SLM_BASE_FMAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct fmap {
    const uint8_t *data; /* (size) bytes, read-only */
    size_t size;
} fmap;

/* Maps path read-only. On failure *m is zeroed and e names the path and the OS error. */
slm_status fmap_open(fmap *m, const char *path, slm_err *e);
void fmap_close(fmap *m);
/* Drops the resident pages of [p, p + n) (inside m; whole pages only) so a single pass over a
 * large map keeps its resident set bounded; later reads fault them back in from the file. */
void fmap_release(const fmap *m, const void *p, size_t n);

/* Reads a whole (small) file into a NUL-terminated heap buffer (malloc; caller frees with free).
 * Refuses files over max_bytes. */
slm_status file_read_all(const char *path, size_t max_bytes, char **out, size_t *out_len, slm_err *e);

#endif
