/* testutil.h — shared helpers for cmocka tests: test-data paths, file loading, temp files,
 * tolerance checks and a failing allocator for allocation-failure sweeps. Tests use cmocka's
 * assert_* macros. */
#ifndef SLM_TESTUTIL_H
#define SLM_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "statelm.h"

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

/* First index of the largest of v[0, n): greedy decoding's choice. The tests' own, not the
 * runtime's sess_argmax, so that the reference a test compares against is not the code under test. */
int32_t tu_argmax(const float *v, int32_t n);
/* The greedy continuation of prompt[0, n) by a plain session of n_ctx positions on one thread:
 * n_gen ids into out (the reference the engine and speculation tests compare against). */
void tu_greedy(const slm_model *m, int32_t n_ctx, const int32_t *prompt, size_t n, int32_t n_gen, int32_t *out);

/* Failing allocator for allocation-failure sweeps (STYLE: fail allocation N = 0, 1, 2, ... until
 * the run succeeds). Pass tu_fail_alloc/tu_fail_free with a tu_failing as user data, or use
 * tu_failing_allocator(). Allocation number fail_at (0-based, counted in n_alloc) returns NULL;
 * with keep_failing every later one does too. Blocks carry a 16-byte size header (malloc's
 * alignment is kept), so live blocks and bytes are exact: both are 0 when nothing leaked.
 * Invariants: n_live = n_alloc - n_refused - n_free; live_bytes = sum of live block sizes. */
typedef struct tu_failing {
    long fail_at;       /* allocation to refuse; < 0 = never */
    bool keep_failing;  /* refuse every allocation after fail_at too */
    long n_alloc;       /* allocations asked for, refused ones included */
    long n_refused;     /* allocations refused */
    long n_free;        /* blocks freed (free(NULL) not counted) */
    long n_live;        /* blocks allocated and not freed */
    size_t live_bytes;  /* bytes in those blocks */
} tu_failing;

/* A counter that refuses allocation fail_at (< 0: none). */
tu_failing tu_failing_at(long fail_at);
void *tu_fail_alloc(void *user_data, size_t size);
void tu_fail_free(void *user_data, void *p);
/* The library's allocator hook (base/alloc.h) over f. */
#define tu_failing_allocator(f) ((slm_allocator){tu_fail_alloc, tu_fail_free, (f)})

#endif
