/* common.c — argument parsing and error reporting shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("statelm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

bool cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_fail("%s expects an integer in [%lld, %lld], got '%s'", opt, (long long)lo, (long long)hi, s);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_f64(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        cli_fail("%s expects a number in [%g, %g], got '%s'", opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail("option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

void cli_fmt_bytes(uint64_t n, char *buf, size_t cap) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else snprintf(buf, cap, "%.2f %s", v, units[u]);
}
