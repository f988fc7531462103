/* testutil.c — see testutil.h. */
#define _GNU_SOURCE
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tu_data_path(const char *rel) {
    static char bufs[8][4096];
    static int slot;
    const char *root = getenv("SLM_TEST_DATA_DIR");
    if (!root) root = SLM_TEST_DATA_DIR;
    char *b = bufs[slot++ & 7];
    snprintf(b, 4096, "%s/%s", root, rel);
    return b;
}

uint8_t *tu_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    if (!buf) { fclose(f); return NULL; }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = 0;
    if (size) *size = got;
    return buf;
}

char *tu_write_temp(const void *data, size_t size, const char *suffix) {
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/slmtest_XXXXXX%s", suffix ? suffix : "");
    int fd = mkstemps(tmpl, suffix ? (int)strlen(suffix) : 0);
    if (fd < 0) return NULL;
    if (size && write(fd, data, size) != (ssize_t)size) { close(fd); return NULL; }
    close(fd);
    return strdup(tmpl);
}

char *tu_temp_dir(void) {
    char tmpl[] = "/tmp/slmtestdir_XXXXXX";
    if (!mkdtemp(tmpl)) return NULL;
    return strdup(tmpl);
}

bool tu_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

void tu_write_in_dir(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

void tu_rm_dir(char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

double tu_max_rel_err(const float *a, const float *b, size_t n) {
    double maxd = 0, maxb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > maxd || isnan(d)) maxd = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > maxb) maxb = fabs((double)b[i]);
    }
    return maxb > 0 ? maxd / maxb : maxd;
}

tu_failing tu_failing_at(long fail_at) {
    tu_failing f;
    memset(&f, 0, sizeof f);
    f.fail_at = fail_at;
    return f;
}

#define TU_FAIL_HEADER 16 /* keeps malloc's 16-byte alignment */

void *tu_fail_alloc(void *user_data, size_t size) {
    tu_failing *f = user_data;
    long i = f->n_alloc++;
    if (f->fail_at >= 0 && (i == f->fail_at || (f->keep_failing && i > f->fail_at))) {
        f->n_refused++;
        return NULL;
    }
    if (size > SIZE_MAX - TU_FAIL_HEADER) return NULL;
    uint8_t *p = malloc(size + TU_FAIL_HEADER);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    f->n_live++;
    f->live_bytes += size;
    return p + TU_FAIL_HEADER;
}

void tu_fail_free(void *user_data, void *p) {
    tu_failing *f = user_data;
    if (!p) return;
    uint8_t *block = (uint8_t *)p - TU_FAIL_HEADER;
    size_t size;
    memcpy(&size, block, sizeof size);
    f->n_free++;
    f->n_live--;
    f->live_bytes -= size;
    free(block);
}

int32_t tu_argmax(const float *v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

void tu_greedy(const slm_model *m, int32_t n_ctx, const int32_t *prompt, size_t n, int32_t n_gen, int32_t *out) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.n_threads = 1;
    slm_session *s = NULL;
    char err[256];
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    const float *logits = NULL;
    assert_int_equal(slm_session_prefill(s, prompt, n, &logits), SLM_OK);
    int32_t n_vocab = slm_model_n_vocab(m);
    for (int32_t i = 0; i < n_gen; i++) {
        out[i] = tu_argmax(logits, n_vocab);
        if (i + 1 < n_gen) assert_int_equal(slm_session_decode(s, out[i], &logits), SLM_OK);
    }
    slm_session_destroy(s);
}
