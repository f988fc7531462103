/* quantize.c — `statelm quantize [options] IN.gguf|HF_FOLDER OUT.gguf TYPE`: a copy of a GGUF file
 * with its weights quantised, or a Hugging Face folder converted and quantised in one pass
 * (slm_quantize, slm_convert; docs/quantize.md has the types and the per-tensor mix rules).
 * Options as llama-quantize names them: --leave-output-tensor (--leave-output), --pure,
 * --token-embedding-type T, --output-tensor-type T; plus --force (replace OUT), -t N, --quiet.
 * SIGXFSZ is ignored so a file-size limit (RLIMIT_FSIZE) is a write error that removes the
 * temporary file, not a kill that leaves it. Exit status: 0 on success, 1 when quantisation
 * fails, 2 on usage errors. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int usage(FILE *f) {
    fputs("usage: statelm quantize [options] IN.gguf|HF_FOLDER OUT.gguf TYPE\n"
          "  TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 f16 bf16 f32, or a mix: q4_k_m (= q4_k) q4_k_s q5_k_m (= q5_k)\n"
          "        q5_k_s q6_k (llama-quantize's per-tensor rules; see docs/quantize.md)\n"
          "  --leave-output           keep output.weight as it is (also --leave-output-tensor)\n"
          "  --pure                   no mix rules: every quantisable weight gets TYPE's base type\n"
          "  --token-embedding-type T token_embd.weight as T (f32 f16 bf16 q4_0 ... q6_k)\n"
          "  --output-tensor-type T   output.weight as T\n"
          "  --force                  replace OUT if it exists\n"
          "  -t N                     threads (default: all online CPUs)\n"
          "  --quiet                  no per-tensor lines on stderr\n",
          f);
    return f == stdout ? 0 : 2;
}

int cli_quantize_option(int argc, char **argv, int *i, slm_quantize_params *p, bool *quiet) {
    const char *a = argv[*i], *v = NULL;
    int64_t iv;
    if (!strcmp(a, "--leave-output") || !strcmp(a, "--leave-output-tensor")) {
        p->leave_output = true;
    } else if (!strcmp(a, "--pure")) {
        p->pure = true;
    } else if (!strcmp(a, "--force") || !strcmp(a, "-f")) {
        p->force = true;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
        *quiet = true;
    } else if (!strcmp(a, "--token-embedding-type")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        p->token_embd_type = v;
    } else if (!strcmp(a, "--output-tensor-type")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        p->output_type = v;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_parse_i64(a, v, 1, 4096, &iv)) return -1;
        p->n_threads = (int32_t)iv;
    } else {
        return 0;
    }
    return 1;
}

void cli_quantize_log(void *ud, slm_log_level level, const char *msg) {
    (void)ud;
    if (level <= SLM_LOG_INFO) fprintf(stderr, "%s\n", msg);
}

int cmd_quantize(int argc, char **argv) {
    slm_quantize_params p = slm_quantize_params_default();
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
        int used = cli_quantize_option(argc, argv, &i, &p, &quiet);
        if (used < 0) return 2;
        if (used) continue;
        if (a[0] == '-' && a[1] != '\0') {
            cli_fail("quantize: unknown option '%s' (try 'statelm quantize --help')", a);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            cli_fail("quantize: unexpected argument '%s' (IN OUT TYPE given already)", a);
            return 2;
        }
    }
    if (n_pos != 3) {
        cli_fail("quantize: expected IN.gguf|HF_FOLDER OUT.gguf TYPE (try 'statelm quantize --help')");
        return 2;
    }
    if (!quiet) p.log_fn = cli_quantize_log;
    signal(SIGXFSZ, SIG_IGN);
    char err[512];
    slm_status st = slm_quantize(pos[0], pos[1], pos[2], &p, err, sizeof err);
    if (st != SLM_OK) {
        cli_fail("quantize: %s", err);
        return 1;
    }
    return 0;
}
