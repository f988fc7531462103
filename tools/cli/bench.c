/* bench.c — `statelm bench`: prompt-processing and generation speed with llama-bench's conventions.
 * Contract (relied on by bench/compare; extend, do not change):
 *   statelm bench -m MODEL [-p 512] [-n 128] [-d 0] [-r 5] [-t N] [--json] [--ckpt N]
 *   pp: p random token ids processed as one batch (one prefill call) from the start state;
 *   tg: n random token ids fed one at a time (n decode calls) from the start state;
 *   the start state is an empty session, or with -d N (llama-bench's -d) the session after a
 *   prefill of N other random ids, snapshotted once and restored before every run (untimed);
 *   token ids are generated (fixed seed), so tokenisation and sampling are excluded. One untimed
 *   warm-up of each test first, then r timed repetitions; median and min-max tokens/s over them,
 *   and the process's peak resident memory. Prints a markdown table, or with --json one JSON
 *   object on stdout with at least "pp_tps" and "tg_tps" (the medians; null for a test skipped
 *   with -p 0 or -n 0). --ckpt N sets the session's checkpoint interval (0 = the library default,
 *   -1 = none); hybrid models split a prefill at checkpoint boundaries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct bench_opts {
    const char *model;
    int32_t n_prompt, n_gen, n_depth, reps, n_threads, ckpt;
    bool json;
    slm_kv_type kv_k, kv_v; /* --cache-type-k/-v */
} bench_opts;

static void usage_bench(void) {
    puts("usage: statelm bench -m MODEL [options]\n"
         "  -p N      prompt tokens processed as one batch (default 512; 0 = skip)\n"
         "  -n N      tokens generated one at a time (default 128; 0 = skip)\n"
         "  -d N      depth: both tests start after a prefill of N tokens (default 0)\n"
         "  -r N      timed repetitions (default 5)\n"
         "  -t N      threads (default: the online CPUs; more are capped unless --force-threads)\n"
         "  --json    one JSON object on stdout (pp_tps, tg_tps: medians in tokens/s)\n"
         "  --ckpt N  checkpoint interval of the session (0 = library default, -1 = none); hybrid\n"
         "            models split a prefill at checkpoint boundaries\n" CLI_KV_USAGE
         "environment: SLM_KERNELS=ref|generic|neon|i8mm|avx2|avxvnni|avx512|amx|auto selects the CPU kernels (a\n"
         "tier this CPU lacks is refused); the table and --json name the tier used");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, min and max of v[0, n) (sorts v). */
static void stats(double *v, int n, double *med, double *mn, double *mx) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *mn = v[0];
    *mx = v[n - 1];
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Puts s in the start state: the depth snapshot, or empty. */
static bool to_start(slm_session *s, const slm_snapshot *depth) {
    if (!depth) {
        slm_session_reset(s);
        return true;
    }
    return slm_session_restore(s, depth) == SLM_OK;
}

/* One pp run: prefill n ids from the start state; returns seconds or < 0 on error. */
static double run_pp(slm_session *s, const slm_snapshot *depth, const int32_t *ids, int32_t n) {
    if (!to_start(s, depth)) return -1.0;
    double t0 = now_s();
    if (slm_session_prefill(s, ids, (size_t)n, NULL) != SLM_OK) return -1.0;
    return now_s() - t0;
}

/* One tg run: n single-token decodes from the start state. */
static double run_tg(slm_session *s, const slm_snapshot *depth, const int32_t *ids, int32_t n) {
    if (!to_start(s, depth)) return -1.0;
    double t0 = now_s();
    for (int32_t i = 0; i < n; i++)
        if (slm_session_decode(s, ids[i], NULL) != SLM_OK) return -1.0;
    return now_s() - t0;
}

/* The session's K and V state types and the bytes its KV states take. */
static void kv_summary(const slm_session *s, const char **k, const char **v, uint64_t *bytes) {
    *k = *v = "none";
    *bytes = 0;
    for (int32_t i = 0; i < slm_session_n_states(s); i++) {
        slm_state_info st;
        if (slm_session_state(s, i, &st) != SLM_OK) continue;
        if (st.role != SLM_STATE_KV_KEY && st.role != SLM_STATE_KV_VALUE) continue;
        *(st.role == SLM_STATE_KV_KEY ? k : v) = slm_dtype_name(st.dtype);
        *bytes += st.size_bytes;
    }
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void json_samples(const char *key, const double *v, int n) {
    printf("\"%s\":[", key);
    for (int i = 0; i < n; i++) printf("%s%.4f", i ? "," : "", v[i]);
    printf("],");
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {NULL, 512, 128, 0, 5, 0, 0, false, SLM_KV_DEFAULT, SLM_KV_DEFAULT};
    bool force_threads = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_bench();
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(v = cli_value(argc, argv, &i))) return 1;
            o.model = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "-n") || !strcmp(a, "-d") || !strcmp(a, "-r") || !strcmp(a, "-t")) {
            int64_t lo = !strcmp(a, "-r") ? 1 : !strcmp(a, "-t") ? 1 : 0;
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, lo, !strcmp(a, "-r") ? 1000 : 1 << 20, &iv))
                return 1;
            if (a[1] == 'p') o.n_prompt = (int32_t)iv;
            else if (a[1] == 'n') o.n_gen = (int32_t)iv;
            else if (a[1] == 'd') o.n_depth = (int32_t)iv;
            else if (a[1] == 'r') o.reps = (int32_t)iv;
            else o.n_threads = (int32_t)iv;
        } else if (!strcmp(a, "--ckpt")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, -1, 1 << 24, &iv)) return 1;
            o.ckpt = (int32_t)iv;
        } else if ((iv = cli_kv_option(argc, argv, &i, &o.kv_k, &o.kv_v)) != 0) {
            if (iv < 0) return 1;
        } else if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "--force-threads")) {
            force_threads = true;
        } else {
            return cli_fail("bench: unknown option '%s' (try 'statelm bench --help')", a);
        }
    }
    if (!o.model) return cli_fail("bench: -m MODEL is required");
    o.n_threads = cli_cap_threads(o.n_threads, force_threads);

    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = o.n_threads;
    slm_model *m = NULL;
    if (slm_model_load(o.model, &mp, &m, err, sizeof err) != SLM_OK) return cli_fail("%s", err);
    slm_session_params sp = slm_session_params_default();
    sp.n_threads = o.n_threads;
    int32_t n_test = o.n_prompt > o.n_gen ? o.n_prompt : o.n_gen;
    sp.n_ctx = o.n_depth + n_test > 16 ? o.n_depth + n_test : 16;
    sp.checkpoint_interval = o.ckpt;
    sp.kv_type_k = o.kv_k;
    sp.kv_type_v = o.kv_v;
    cli_apply_env(&sp, NULL);
    slm_session *s = NULL;
    slm_snapshot *depth = NULL;
    int rc = 1;
    int32_t n_ids = o.n_depth + n_test; /* the depth's ids, then the tests' */
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_ids + 1));
    double *pp = calloc((size_t)o.reps, sizeof(double)), *tg = calloc((size_t)o.reps, sizeof(double));
    if (!ids || !pp || !tg) {
        cli_fail("out of memory");
        goto done;
    }
    if (slm_session_create(m, &sp, &s, err, sizeof err) != SLM_OK) {
        cli_name_env(err, sizeof err);
        cli_fail("%s", err);
        goto done;
    }
    uint64_t seed = 1234;
    int32_t n_vocab = slm_model_n_vocab(m);
    for (int32_t i = 0; i < n_ids; i++) ids[i] = (int32_t)(rng_next(&seed) % (uint64_t)n_vocab);
    int32_t *test_ids = ids + o.n_depth;
    if (o.n_depth > 0) { /* the depth, prefilled in pieces of 512 (the activation arena stays small) */
        for (int32_t at = 0; at < o.n_depth; at += 512) {
            int32_t k = o.n_depth - at < 512 ? o.n_depth - at : 512;
            if (slm_session_prefill(s, ids + at, (size_t)k, NULL) != SLM_OK) {
                cli_fail("bench: depth %d: %s", o.n_depth, slm_session_errmsg(s));
                goto done;
            }
        }
        if (slm_session_snapshot(s, &depth) != SLM_OK) {
            cli_fail("bench: depth %d: %s", o.n_depth, slm_session_errmsg(s));
            goto done;
        }
    }

    /* warm-up (untimed): pages the weights in, sizes the activation arenas */
    if ((o.n_prompt > 0 && run_pp(s, depth, test_ids, o.n_prompt) < 0) ||
        (o.n_gen > 0 && run_tg(s, depth, test_ids, o.n_gen < 4 ? o.n_gen : 4) < 0)) {
        cli_fail("bench: %s", slm_session_errmsg(s));
        goto done;
    }
    for (int r = 0; r < o.reps; r++) {
        if (o.n_prompt > 0) {
            double t = run_pp(s, depth, test_ids, o.n_prompt);
            if (t < 0) {
                cli_fail("bench: %s", slm_session_errmsg(s));
                goto done;
            }
            pp[r] = (double)o.n_prompt / t;
        }
        if (o.n_gen > 0) {
            double t = run_tg(s, depth, test_ids, o.n_gen);
            if (t < 0) {
                cli_fail("bench: %s", slm_session_errmsg(s));
                goto done;
            }
            tg[r] = (double)o.n_gen / t;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t rss = (uint64_t)ru.ru_maxrss * 1024u;
    const char *kernels = slm_session_kernels(s);
    double pp_s[1000], tg_s[1000];
    memcpy(pp_s, pp, sizeof(double) * (size_t)o.reps);
    memcpy(tg_s, tg, sizeof(double) * (size_t)o.reps);
    double ppm = 0, ppl = 0, pph = 0, tgm = 0, tgl = 0, tgh = 0;
    if (o.n_prompt > 0) stats(pp, o.reps, &ppm, &ppl, &pph);
    if (o.n_gen > 0) stats(tg, o.reps, &tgm, &tgl, &tgh);
    int threads = o.n_threads ? o.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *type_k, *type_v;
    uint64_t kv_bytes;
    kv_summary(s, &type_k, &type_v, &kv_bytes);
    if (o.json) {
        printf("{\"model\":");
        json_str(o.model);
        printf(",\"name\":");
        json_str(slm_model_name(m));
        printf(",\"arch\":");
        json_str(slm_model_arch(m));
        printf(",\"weight_bytes\":%llu,\"n_threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"n_depth\":%d,\"reps\":%d,"
               "\"ckpt\":%d,\"kernels\":",
               (unsigned long long)slm_model_weight_bytes(m), threads, o.n_prompt, o.n_gen, o.n_depth, o.reps, o.ckpt);
        json_str(kernels);
        printf(",\"type_k\":");
        json_str(type_k);
        printf(",\"type_v\":");
        json_str(type_v);
        printf(",\"kv_bytes\":%llu,\"n_ctx\":%d,", (unsigned long long)kv_bytes, slm_session_n_ctx(s));
        if (o.n_prompt > 0) {
            json_samples("pp_samples", pp_s, o.reps);
            printf("\"pp_tps\":%.4f,\"pp_min\":%.4f,\"pp_max\":%.4f,", ppm, ppl, pph);
        } else {
            printf("\"pp_tps\":null,");
        }
        if (o.n_gen > 0) {
            json_samples("tg_samples", tg_s, o.reps);
            printf("\"tg_tps\":%.4f,\"tg_min\":%.4f,\"tg_max\":%.4f,", tgm, tgl, tgh);
        } else {
            printf("\"tg_tps\":null,");
        }
        printf("\"peak_rss_bytes\":%llu}\n", (unsigned long long)rss);
    } else {
        char size[32], rss_s[32];
        cli_fmt_bytes(slm_model_weight_bytes(m), size, sizeof size);
        cli_fmt_bytes(rss, rss_s, sizeof rss_s);
        printf("| model | arch | size | threads | kernels | test | t/s (median) | min | max |\n");
        printf("| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: |\n");
        const char *name = slm_model_name(m)[0] ? slm_model_name(m) : o.model;
        char at[32] = "";
        if (o.n_depth > 0) snprintf(at, sizeof at, " @ d%d", o.n_depth);
        if (o.n_prompt > 0)
            printf("| %s | %s | %s | %d | %s | pp%d%s | %.2f | %.2f | %.2f |\n", name, slm_model_arch(m), size, threads,
                   kernels, o.n_prompt, at, ppm, ppl, pph);
        if (o.n_gen > 0)
            printf("| %s | %s | %s | %d | %s | tg%d%s | %.2f | %.2f | %.2f |\n", name, slm_model_arch(m), size, threads,
                   kernels, o.n_gen, at, tgm, tgl, tgh);
        char kv_s[32];
        cli_fmt_bytes(kv_bytes, kv_s, sizeof kv_s);
        printf("\npeak RSS %s over %d repetitions (+1 warm-up); KV cache K %s, V %s: %s for %d tokens\n", rss_s,
               o.reps, type_k, type_v, kv_s, slm_session_n_ctx(s));
    }
    rc = 0;
done:
    free(ids);
    free(pp);
    free(tg);
    slm_snapshot_destroy(depth);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return rc;
}
