/* common.c — argument parsing and error reporting shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "cli.h"

void cli_apply_env(slm_session_params *sp, slm_plan_params *pp) {
    const char *kernels = getenv("SLM_KERNELS");
    const char *repack = getenv("SLM_REPACK");
    if (sp) {
        sp->kernels = kernels;
        sp->no_repack = repack && !strcmp(repack, "0");
    }
    if (pp) pp->kernels = kernels;
}

void cli_name_env(char *err, size_t cap) {
    static const char lib_prefix[] = "kernels=";
    const char *kernels = getenv("SLM_KERNELS");
    if (!kernels || strncmp(err, lib_prefix, sizeof lib_prefix - 1)) return;
    char named[512];
    snprintf(named, sizeof named, "SLM_KERNELS=%s", err + sizeof lib_prefix - 1);
    snprintf(err, cap, "%s", named);
}

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

void cli_fmt_bytes(uint64_t n, char *out, size_t cap) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(out, cap, "%llu B", (unsigned long long)n);
    else snprintf(out, cap, "%.2f %s", v, units[u]);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Checks the entry e[0, len) (position pos, 1-based) and stores its value; false with a message. */
static bool parse_id_entry(const char *e, size_t len, size_t pos, int32_t n_vocab, int32_t *out) {
    int shown = len > 40 ? 40 : (int)len;
    const char *more = len > 40 ? "..." : "";
    if (e[0] == '+' || e[0] == '-') {
        cli_fail("--prompt-ids: entry %zu '%.*s%s' has a sign: ids are unsigned decimal numbers", pos, shown, e, more);
        return false;
    }
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (e[i] < '0' || e[i] > '9') {
            cli_fail("--prompt-ids: entry %zu '%.*s%s' is not a decimal id", pos, shown, e, more);
            return false;
        }
        v = v * 10 + (e[i] - '0');
        if (v > INT32_MAX) {
            cli_fail("--prompt-ids: entry %zu '%.*s%s' is larger than %d", pos, shown, e, more, INT32_MAX);
            return false;
        }
    }
    if (n_vocab > 0 && v >= n_vocab) {
        cli_fail("--prompt-ids: entry %zu '%.*s' is out of range: the vocabulary has ids 0 to %d", pos, shown, e,
                 n_vocab - 1);
        return false;
    }
    *out = (int32_t)v;
    return true;
}

bool cli_parse_ids(const char *s, int32_t n_vocab, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    /* every entry takes at least one character */
    int32_t *v = malloc((strlen(s) + 1) * sizeof *v);
    if (!v) {
        cli_fail("out of memory");
        return false;
    }
    size_t count = 0;
    const char *p = s;
    while (is_space(*p)) p++;
    if (!*p) {
        free(v);
        cli_fail("--prompt-ids: no ids given");
        return false;
    }
    for (;;) {
        while (is_space(*p)) p++;
        const char *e = p;
        while (*p && *p != ',' && !is_space(*p)) p++;
        if (p == e) {
            free(v);
            cli_fail("--prompt-ids: entry %zu is empty", count + 1);
            return false;
        }
        if (!parse_id_entry(e, (size_t)(p - e), count + 1, n_vocab, &v[count])) {
            free(v);
            return false;
        }
        count++;
        while (is_space(*p)) p++;
        if (*p == ',') p++;
        else if (!*p) break;
    }
    *ids = v;
    *n = count;
    return true;
}

int32_t cli_cap_threads(int32_t n, bool force) {
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (force || n_cpu < 1 || n <= n_cpu) return n;
    fprintf(stderr, "statelm: warning: -t %d is more than the %ld online CPUs: using %ld (--force-threads keeps %d)\n", n,
            n_cpu, n_cpu, n);
    return (int32_t)n_cpu;
}

int cli_kv_option(int argc, char **argv, int *i, slm_kv_type *k, slm_kv_type *v) {
    const char *a = argv[*i];
    bool is_k = !strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k");
    if (!is_k && strcmp(a, "-ctv") != 0 && strcmp(a, "--cache-type-v") != 0) return 0;
    const char *val = cli_value(argc, argv, i);
    if (!val) return -1;
    static const struct {
        const char *name;
        slm_kv_type t;
    } types[] = {{"f16", SLM_KV_F16}, {"f32", SLM_KV_F32}, {"q8_0", SLM_KV_Q8_0}, {"q4_0", SLM_KV_Q4_0}};
    for (size_t j = 0; j < sizeof types / sizeof types[0]; j++)
        if (!strcmp(val, types[j].name)) {
            *(is_k ? k : v) = types[j].t;
            return 1;
        }
    cli_fail("%s %s: not f16, f32, q8_0 or q4_0", a, val);
    return -1;
}

void cli_warn_ctx(const slm_model *m, int32_t n_ctx, slm_dtype kv_dtype) {
    int32_t n_train = slm_model_n_ctx_train(m);
    if (n_train <= 0 || n_ctx <= n_train) return;
    uint64_t total = 0;
    for (int32_t i = 0; i < slm_model_n_states(m); i++) {
        slm_state_info st;
        if (slm_model_state(m, n_ctx, kv_dtype, i, &st) == SLM_OK) total += st.size_bytes;
    }
    char b[32];
    cli_fmt_bytes(total, b, sizeof b);
    fprintf(stderr,
            "statelm: warning: -c %d exceeds the model's training context (%d): output past it may degrade; the states "
            "take %s\n",
            n_ctx, n_train, b);
}

int32_t cli_first_nonfinite(const float *v, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return i;
    return -1;
}

int cli_fail_nonfinite(const float *logits, int32_t at, int32_t pos) {
    return cli_fail("the model produced a non-finite logit (%s for token %d) at position %d: its weights or "
                    "activations are damaged",
                    isnan(logits[at]) ? "nan" : logits[at] > 0 ? "+inf" : "-inf", at, pos);
}

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0 when p does not start one. */
static size_t utf8_seq_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    unsigned cp = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

char *cli_utf8_sanitize(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    if (!out) return NULL;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = utf8_seq_len(p);
        if (len) {
            memcpy(out + o, p, len);
            o += len;
            p += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            p++;
        }
    }
    out[o] = '\0';
    return out;
}

bool cli_sampler_is_argmax(const slm_sampler_params *p) {
    return p->temperature == 0.0f && p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f && p->n_logit_bias == 0;
}

char *cli_read_file(const char *path, size_t max, size_t *n) {
    bool std_in = !strcmp(path, "-");
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) {
        cli_fail("%s: cannot open", path);
        return NULL;
    }
    buf text = buf_make(NULL);
    for (size_t got = 1; got > 0 && text.n <= max && buf_reserve(&text, 1 << 16);) {
        got = fread(text.p + text.n, 1, text.cap - 1 - text.n, f);
        text.n += got;
        text.p[text.n] = '\0';
    }
    bool bad = text.oom || ferror(f);
    if (!std_in) fclose(f);
    if (bad || text.n > max) {
        cli_fail(bad ? "%s: cannot read" : "%s: larger than %zu bytes", path, max);
        buf_free(&text);
        return NULL;
    }
    if (n) *n = text.n;
    return buf_take(&text);
}
