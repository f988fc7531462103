/* schema_compile.c — JSON Schema compile time and refusals over a corpus (scripts/schema-corpus.py
 * drives it): reads schema file paths, one a line, on stdin and writes one line per schema,
 *   PATH <TAB> status (0 = accepted) <TAB> microseconds <TAB> message (the refusal, or empty)
 * where the time covers slm_grammar_from_json_schema (conversion to GBNF and its compilation).
 * With --gbnf SCHEMA.json it prints that schema's GBNF instead (for the exactness sampler).
 *   bench_schema_compile [--strict] < paths      bench_schema_compile --gbnf SCHEMA.json
 * Never a correctness gate. */
#define BENCH_NAME "bench_schema_compile"
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "statelm.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16;
    char *buf = malloc(cap + 1);
    *n = 0;
    for (size_t k; buf && (k = fread(buf + *n, 1, cap - *n, f)) > 0;) {
        *n += k;
        if (*n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[*n] = 0;
    return buf;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    unsigned flags = 0;
    if (argc == 3 && !strcmp(argv[1], "--gbnf")) {
        size_t n = 0, len;
        char *s = slurp(argv[2], &len), err[512];
        if (!s) return 1;
        slm_status st = slm_json_schema_to_gbnf(s, len, NULL, 0, &n, err, sizeof err);
        if (st != SLM_ERR_RANGE) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        char *g = malloc(n + 1);
        st = slm_json_schema_to_gbnf(s, len, g, n + 1, &n, err, sizeof err);
        if (st) return 1;
        fwrite(g, 1, n, stdout);
        free(g);
        free(s);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "--strict")) flags = SLM_SCHEMA_STRICT;
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        size_t len;
        char *s = slurp(line, &len), err[512] = "";
        if (!s) {
            printf("%s\t-1\t0\tcannot read\n", line);
            continue;
        }
        slm_grammar *g = NULL;
        double t0 = now_us();
        slm_status st = slm_grammar_from_json_schema_ex(s, len, flags, &g, err, sizeof err);
        double t1 = now_us();
        slm_grammar_destroy(g);
        for (char *p = err; *p; p++)
            if (*p == '\t' || *p == '\n') *p = ' ';
        printf("%s\t%d\t%.1f\t%s\n", line, (int)st, t1 - t0, st ? err : "");
        fflush(stdout);
        free(s);
    }
    return 0;
}
