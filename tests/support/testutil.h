/* testutil.h — shared helpers for cmocka tests: test-data paths, file loading, temp files and
 * tolerance checks. Tests use cmocka's assert_* macros. */
#ifndef SLM_TESTUTIL_H
#define SLM_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Path under tests/data (static buffer per call slot; copy if kept). */
const char *tu_data_path(const char *rel);
/* Reads a whole file (malloc'd, NUL-terminated); NULL if absent. */
uint8_t *tu_read_file(const char *path, size_t *size);
/* Writes bytes to a fresh temp file; returns its path (malloc'd). */
char *tu_write_temp(const void *data, size_t size, const char *suffix);
/* Creates a fresh temp directory; returns its path (malloc'd). */
char *tu_temp_dir(void);
bool tu_file_exists(const char *path);
/* Writes n bytes to dir/name (fails the test on error). */
void tu_write_in_dir(const char *dir, const char *name, const void *data, size_t n);
/* Removes the files of dir, dir itself, and frees the (malloc'd) path. */
void tu_rm_dir(char *dir);
/* Prints "SKIPPED: why" and tells cmocka the test was skipped. */
#define TU_SKIP(...) do { fprintf(stderr, "SKIPPED: "); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); skip(); } while (0)

/* max_i |a_i - b_i| / max_i |b_i| */
double tu_max_rel_err(const float *a, const float *b, size_t n);

#endif
