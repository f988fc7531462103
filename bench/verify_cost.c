/* verify_cost.c — benchmark (not a test) of speculative decoding's ceiling: the time of a verify
 * pass of k = 1, 2, 4, 8 tokens (slm_session_verify, then slm_session_accept keeping half of
 * them, which on hybrids rebuilds the states without the weights) relative to one decode step,
 * after a prompt of P synthetic tokens. Prints the median over R repetitions of each. -c 1 times
 * the process's CPU time instead of the wall clock: on a loaded machine it leaves out the time the
 * process waits descheduled (with -t 1 it is the work itself; with more threads it adds their
 * spinning).
 * Usage: bench_verify_cost MODEL.gguf [-t THREADS] [-p PROMPT] [-r REPS] [-c 0|1] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "statelm.h"

#define BENCH_NAME "bench_verify_cost"
#include "bench_util.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_verify_cost MODEL.gguf [-t THREADS] [-p PROMPT] [-r REPS] [-c 0|1]\n");
        return 2;
    }
    int threads = 2, n_prompt = 128, reps = 9, cpu_time = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-p")) n_prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) cpu_time = atoi(argv[i + 1]);
    }
    double (*clock_s)(void) = cpu_time ? cpu_s : now_s;
    if (n_prompt < 1 || reps < 1 || reps > 1000) return 2;
    slm_model *m = NULL;
    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = threads;
    slm_status st = slm_model_load(argv[1], &mp, &m, err, sizeof err);
    if (st) die("load", st, err);
    int32_t n_vocab = slm_model_n_vocab(m);
    int32_t *toks = malloc((size_t)(n_prompt + 8) * sizeof *toks);
    uint32_t x = 7;
    for (int32_t i = 0; i < n_prompt + 8; i++) {
        x = x * 1103515245u + 12345u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)(n_vocab - 10)) + 5;
    }
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = n_prompt + 16;
    sp.n_threads = threads;
    sp.kernels = bench_kernels();
    slm_session *s = NULL;
    if ((st = slm_session_create(m, &sp, &s, err, sizeof err))) die("session", st, err);
    const float *l;
    if ((st = slm_session_prefill(s, toks, (size_t)n_prompt, &l))) die("prefill", st, slm_session_errmsg(s));
    double *t = malloc((size_t)reps * sizeof *t), decode_s = 0;
    static const int ks[] = {1, 2, 4, 8};
    if (cpu_time) printf("# process CPU time, not wall time\n");
    printf("%-8s %12s %10s %18s\n", "pass", "median ms", "x decode", "accept(k/2) ms");
    for (int w = -1; w < 4; w++) { /* w = -1: decode(1) */
        double *ta = malloc((size_t)reps * sizeof *ta);
        for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
            double t0 = clock_s(), t1;
            if (w < 0) {
                if ((st = slm_session_decode(s, toks[n_prompt], &l))) die("decode", st, slm_session_errmsg(s));
                t1 = clock_s();
                if ((st = slm_session_rollback(s, n_prompt))) die("rollback", st, slm_session_errmsg(s));
            } else {
                if ((st = slm_session_verify(s, toks + n_prompt, (size_t)ks[w], &l))) die("verify", st, slm_session_errmsg(s));
                t1 = clock_s();
                if ((st = slm_session_accept(s, (size_t)ks[w] / 2, &l))) die("accept", st, slm_session_errmsg(s));
                if (r) ta[r - 1] = clock_s() - t1;
                if ((st = slm_session_rollback(s, n_prompt))) die("rollback", st, slm_session_errmsg(s));
            }
            if (r) t[r - 1] = t1 - t0;
        }
        double med = median(t, reps);
        if (w < 0) {
            decode_s = med;
            printf("%-8s %12.3f %10.2f %18s\n", "decode", 1e3 * med, 1.0, "-");
        } else {
            char name[16];
            snprintf(name, sizeof name, "verify%d", ks[w]);
            printf("%-8s %12.3f %10.2f %18.3f\n", name, 1e3 * med, med / decode_s, 1e3 * median(ta, reps));
        }
        free(ta);
    }
    free(t);
    free(toks);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return 0;
}
