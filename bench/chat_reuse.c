/* chat_reuse.c — benchmark (not a test) of prefix reuse across chat turns on a hybrid model:
 * a first prompt of H tokens (default 2048), then turns of a 32-token reply plus a 64-token user
 * message. For turns 2 and 3 it times bringing the session to the whole conversation
 *   (a) with prefix reuse (slm_session_sync on the live session: only the new tokens are computed),
 *   (b) with a rollback of the last 3 reply tokens first (the re-tokenised reply differs at its end,
 *       so conv/recurrent states come from a checkpoint plus a short replay),
 *   (c) by a full re-prefill in a fresh session (what llama.cpp does for hybrid models),
 * and prints the ratios and the checkpoint memory in use. Token ids are synthetic and fixed.
 * Usage: bench_chat_reuse MODEL.gguf [-t THREADS] [--history H] [-r REPS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "statelm.h"

#define BENCH_NAME "bench_chat_reuse"
#include "bench_util.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_chat_reuse MODEL.gguf [-t THREADS] [--history H] [-r REPS]\n");
        return 2;
    }
    int threads = 2, history = 2048, reps = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--history")) history = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
    }
    enum { REPLY = 32, USER = 64, TURNS = 3 };
    int32_t n_total = history + TURNS * (REPLY + USER);
    slm_model *m = NULL;
    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = threads;
    slm_status st = slm_model_load(argv[1], &mp, &m, err, sizeof err);
    if (st) die("load", st, err);
    int32_t n_vocab = slm_model_n_vocab(m);
    int32_t *conv = malloc((size_t)n_total * sizeof *conv);
    uint32_t x = 42;
    for (int32_t i = 0; i < n_total; i++) {
        x = x * 1103515245u + 12345u;
        conv[i] = (int32_t)((x >> 8) % (uint32_t)(n_vocab - 100)) + 50;
    }
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = n_total + 8;
    sp.n_threads = threads;
    double t_reuse[TURNS][8], t_roll[TURNS][8], t_full[TURNS][8];
    slm_checkpoint_stats cs = {0};
    for (int r = 0; r < reps; r++) {
        slm_session *s = NULL;
        if ((st = slm_session_create(m, &sp, &s, err, sizeof err))) die("session", st, err);
        const float *l;
        int32_t len = history;
        if ((st = slm_session_sync(s, conv, (size_t)len, &l, NULL))) die("history", st, slm_session_errmsg(s));
        for (int turn = 1; turn < TURNS; turn++) {
            /* the reply to the previous prompt, decoded one token at a time as generation does */
            for (int k = 0; k < REPLY; k++)
                if ((st = slm_session_decode(s, conv[len + k], &l))) die("reply", st, slm_session_errmsg(s));
            len += REPLY + USER; /* the next prompt: the conversation so far plus the user's message */
            slm_snapshot *before = NULL;
            if ((st = slm_session_snapshot(s, &before))) die("snapshot", st, slm_session_errmsg(s));
            double t0 = now_s();
            if ((st = slm_session_sync(s, conv, (size_t)len, &l, NULL))) die("reuse", st, slm_session_errmsg(s));
            t_reuse[turn][r] = now_s() - t0;
            /* (b): the same turn from the pre-turn state, the reply's last 3 tokens rolled back first */
            if ((st = slm_session_restore(s, before))) die("restore", st, slm_session_errmsg(s));
            t0 = now_s();
            if ((st = slm_session_rollback(s, len - USER - 3)) ||
                (st = slm_session_sync(s, conv, (size_t)len, &l, NULL)))
                die("rollback", st, slm_session_errmsg(s));
            t_roll[turn][r] = now_s() - t0;
            slm_snapshot_destroy(before);
            slm_session *fresh = NULL;
            if ((st = slm_session_create(m, &sp, &fresh, err, sizeof err))) die("session", st, err);
            t0 = now_s();
            if ((st = slm_session_prefill(fresh, conv, (size_t)len, &l))) die("full", st, slm_session_errmsg(fresh));
            t_full[turn][r] = now_s() - t0;
            slm_session_destroy(fresh);
        }
        slm_session_checkpoint_stats(s, &cs);
        slm_session_destroy(s);
    }
    printf("model %s, history %d tokens, reply %d + user %d per turn, %d threads, median of %d\n\n", argv[1], history,
           REPLY, USER, threads, reps);
    printf("| turn | tokens | prefix reuse | reuse + rollback 3 | full re-prefill | reuse / full | rollback / full |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int turn = 1; turn < TURNS; turn++) {
        double a = median(t_reuse[turn], reps), b = median(t_roll[turn], reps), c = median(t_full[turn], reps);
        printf("| %d | %d | %.3f s | %.3f s | %.3f s | %.1f%% | %.1f%% |\n", turn + 1,
               history + turn * (REPLY + USER), a, b, c, 100 * a / c, 100 * b / c);
    }
    printf("\ncheckpoints: %d in memory (%.1f KiB), %d on disk, %.1f KiB each\n", cs.n_in_memory,
           (double)cs.bytes_in_memory / 1024.0, cs.n_on_disk, (double)cs.bytes_each / 1024.0);
    free(conv);
    slm_model_destroy(m);
    return 0;
}
