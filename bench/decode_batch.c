/* decode_batch.c — benchmark (not a test) of batched decoding: aggregate decode tok/s of B sessions
 * of one model stepping together with slm_session_decode_batch (one pass over the weights per
 * step), next to the same B sessions stepping one slm_session_decode after another (what a server
 * loop without batching does), for B = 1, 2, 4, 8, the two stepping alternately. Each session first
 * takes a prompt of its own length (32 + 8 i tokens); token ids are synthetic and fixed.
 * Usage: bench_decode_batch MODEL.gguf [-t THREADS] [-n STEPS] [-c CTX] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "statelm.h"

#define BENCH_NAME "bench_decode_batch"
#include "bench_util.h"

enum { MAX_B = 8 };

/* Makes b sessions with prompts of different lengths. */
static void open_sessions(const slm_model *m, const slm_session_params *p, int32_t b, slm_session **s) {
    char err[512];
    int32_t prompt[128];
    for (int32_t i = 0; i < b; i++) {
        slm_status st = slm_session_create(m, p, &s[i], err, sizeof err);
        if (st) die("session", st, err);
        int32_t len = 32 + 8 * i;
        for (int32_t t = 0; t < len; t++)
            prompt[t] = (int32_t)((7919u * (uint32_t)(i + 1) + 104729u * (uint32_t)t) % 20000u);
        if ((st = slm_session_prefill(s[i], prompt, (size_t)len, NULL))) die("prefill", st, slm_session_errmsg(s[i]));
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_decode_batch MODEL.gguf [-t THREADS] [-n STEPS] [-c CTX]\n");
        return 2;
    }
    int32_t n_threads = 0, n_steps = 32, n_ctx = 512;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) n_steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) n_ctx = atoi(argv[i + 1]);
    }
    char err[512];
    slm_model *m = NULL;
    slm_status st = slm_model_load(argv[1], NULL, &m, err, sizeof err);
    if (st) die("load", st, err);
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.n_threads = n_threads;
    p.kernels = bench_kernels();
    printf("%-9s %14s %14s %8s\n", "sessions", "batched tok/s", "one-by-one", "ratio");
    double single = 0;
    for (int32_t b = 1; b <= MAX_B; b *= 2) {
        /* set 0 steps batched, set 1 one decode after another; one untimed step each (the first
         * call prepares the weights it reads), then the two alternate step by step, the order
         * swapped every step, so drift of the shared machine reaches both alike */
        slm_session *s[2][MAX_B];
        int32_t tok[2][MAX_B];
        double t_mode[2] = {0, 0};
        for (int set = 0; set < 2; set++) {
            open_sessions(m, &p, b, s[set]);
            for (int32_t i = 0; i < b; i++) tok[set][i] = 100 + i;
        }
        for (int32_t k = -1; k < n_steps; k++)
            for (int o = 0; o < 2; o++) {
                int set = (k & 1) ? 1 - o : o;
                double t0 = now_s();
                if (set == 0) {
                    if ((st = slm_session_decode_batch(s[0], tok[0], (size_t)b, NULL, err, sizeof err)))
                        die("batch", st, err);
                } else {
                    for (int32_t i = 0; i < b; i++)
                        if ((st = slm_session_decode(s[1][i], tok[1][i], NULL))) die("decode", st, slm_session_errmsg(s[1][i]));
                }
                if (k >= 0) t_mode[set] += now_s() - t0;
                for (int32_t i = 0; i < b; i++) tok[set][i] = (tok[set][i] * 31 + 7) % 20000;
            }
        double t_batch = t_mode[0], t_loop = t_mode[1];
        for (int set = 0; set < 2; set++)
            for (int32_t i = 0; i < b; i++) slm_session_destroy(s[set][i]);
        double tps = (double)b * n_steps / t_batch, tps_loop = (double)b * n_steps / t_loop;
        if (b == 1) single = tps;
        printf("%-9d %14.1f %14.1f %7.2fx   (%.2fx the single stream)\n", b, tps, tps_loop, tps / tps_loop,
               tps / single);
    }
    slm_model_destroy(m);
    return 0;
}
