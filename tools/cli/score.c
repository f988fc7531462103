/* score.c — `statelm score -m MODEL --prompt-ids 1,2,3 [--top K] [-t N] [-c N_CTX] [--kv-f32]`:
 * teacher-forced scoring. Feeds the ids one at a time and prints, after each position t, one JSON
 * line {"pos":t,"next":ID,"logprob":LP,"top":[[ID,LOGPROB],...]} where next is ids[t+1] (absent at
 * the last position) and top the K largest log-softmax values (default 1). For perplexity and for
 * position-by-position comparisons with other runtimes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cmd_score(int argc, char **argv) {
    const char *model = NULL, *ids_arg = NULL;
    int64_t top_k = 1, n_threads = 0, n_ctx = 0;
    slm_dtype kv = SLM_DTYPE_F16;
    slm_kv_type kv_k = SLM_KV_DEFAULT, kv_v = SLM_KV_DEFAULT;
    bool force_threads = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--prompt-ids")) {
            if (!(ids_arg = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--top")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 1, 1000, &top_k)) return 1;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 1, 1024, &n_threads)) return 1;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_i64(a, v, 1, 1 << 24, &n_ctx)) return 1;
        } else if (!strcmp(a, "--kv-f32")) {
            kv = SLM_DTYPE_F32;
        } else if ((iv = cli_kv_option(argc, argv, &i, &kv_k, &kv_v)) != 0) {
            if (iv < 0) return 1;
        } else if (!strcmp(a, "--force-threads")) {
            force_threads = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: statelm score -m MODEL --prompt-ids 1,2,3 [--top K] [-t N [--force-threads]] [-c N_CTX]\n"
                 "         [--kv-f32] [-ctk T] [-ctv T]\n"
                 "  ids are separated by commas or spaces; -t beyond the CPU count is capped unless forced\n"
                 CLI_KV_USAGE);
            return 0;
        } else {
            return cli_fail("score: unknown option '%s'", a);
        }
    }
    if (!model || !ids_arg) return cli_fail("score: -m MODEL and --prompt-ids are required");
    n_threads = cli_cap_threads((int32_t)n_threads, force_threads);
    int32_t *top = malloc((size_t)top_k * sizeof *top);
    if (!top) return cli_fail("out of memory");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    slm_model *m = NULL;
    slm_session *s = NULL;
    char err[512];
    int rc = 0;
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = (int32_t)n_threads;
    slm_status st = slm_model_load(model, &mp, &m, err, sizeof err);
    if (st == SLM_OK && !cli_parse_ids(ids_arg, slm_model_n_vocab(m), &ids, &n_ids)) {
        free(top);
        slm_model_destroy(m);
        return 1;
    }
    if (st == SLM_OK && n_ctx) cli_warn_ctx(m, (int32_t)n_ctx, kv);
    if (st == SLM_OK) {
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = n_ctx ? (int32_t)n_ctx : (int32_t)n_ids;
        sp.kv_type = kv == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
        sp.kv_type_k = kv_k;
        sp.kv_type_v = kv_v;
        cli_apply_env(&sp, NULL);
        if ((st = slm_session_create(m, &sp, &s, err, sizeof err)) != SLM_OK) cli_name_env(err, sizeof err);
    }
    if (st != SLM_OK) rc = cli_fail("%s (%s)", err, slm_status_name(st));
    int32_t n_vocab = m ? slm_model_n_vocab(m) : 0;
    for (size_t t = 0; !rc && t < n_ids; t++) {
        const float *l;
        if ((st = slm_session_decode(s, ids[t], &l)) != SLM_OK) {
            rc = cli_fail("position %zu: %s (%s)", t, slm_session_errmsg(s), slm_status_name(st));
            break;
        }
        int32_t bad = cli_first_nonfinite(l, n_vocab);
        if (bad >= 0) {
            rc = cli_fail_nonfinite(l, bad, (int32_t)t);
            break;
        }
        double mx = -INFINITY, sum = 0.0;
        for (int32_t i = 0; i < n_vocab; i++) mx = l[i] > mx ? l[i] : mx;
        for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)l[i] - mx);
        double lse = mx + log(sum);
        int32_t n_top = 0;
        for (int32_t i = 0; i < n_vocab; i++) {
            int32_t j = n_top < top_k ? n_top++ : (int32_t)top_k;
            if (j == top_k && !(l[i] > l[top[top_k - 1]])) continue;
            if (j == top_k) j = (int32_t)top_k - 1;
            while (j > 0 && l[i] > l[top[j - 1]]) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = i;
        }
        printf("{\"pos\":%zu", t);
        if (t + 1 < n_ids)
            printf(",\"next\":%d,\"logprob\":%.6f", ids[t + 1], (double)l[ids[t + 1]] - lse);
        printf(",\"top\":[");
        for (int32_t i = 0; i < n_top; i++) printf("%s[%d,%.6f]", i ? "," : "", top[i], (double)l[top[i]] - lse);
        printf("]}\n");
    }
    free(ids);
    free(top);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return rc;
}
