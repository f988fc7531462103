/* convert.c — `statelm convert -m HF_FOLDER -o OUT.gguf [--outtype T]`: the GGUF llama.cpp's
 * convert_hf_to_gguf.py writes for a Hugging Face folder (slm_convert; docs/convert.md). T is f32,
 * f16 (default), bf16, or any type of `statelm quantize` (the f32 conversion quantised in the same
 * pass, with that command's options). --no-mtp drops a Qwen3.5 MTP block. --force replaces OUT. SIGXFSZ is ignored so a file-size
 * limit is a write error that removes the temporary file. Exit status: 0 on success, 1 when the
 * conversion fails, 2 on usage errors. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int usage(FILE *f) {
    fputs("usage: statelm convert -m HF_FOLDER -o OUT.gguf [options]\n"
          "  --outtype T              f32, f16 (default), bf16, or a statelm quantize type: q4_0 q4_1 q5_0\n"
          "                           q5_1 q8_0 q4_k_m (= q4_k) q4_k_s q5_k_m (= q5_k) q5_k_s q6_k\n"
          "  --leave-output, --pure, --token-embedding-type T, --output-tensor-type T\n"
          "                           as for statelm quantize (quantised outtypes only)\n"
          "  --no-mtp                 leave out a Qwen3.5 checkpoint's multi-token-prediction block (kept\n"
          "                           by default, as blk.N.nextn.* and the blocks after the last layer)\n"
          "  --force                  replace OUT if it exists\n"
          "  -t N                     threads (default: all online CPUs)\n"
          "  --quiet                  no per-tensor lines on stderr\n",
          f);
    return f == stdout ? 0 : 2;
}

int cmd_convert(int argc, char **argv) {
    slm_quantize_params p = slm_quantize_params_default();
    const char *in = NULL, *out = NULL, *outtype = "f16";
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
        int used = cli_quantize_option(argc, argv, &i, &p, &quiet);
        if (used < 0) return 2;
        if (used) continue;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(in = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--outfile")) {
            if (!(out = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--no-mtp")) {
            p.no_mtp = true;
        } else if (!strcmp(a, "--outtype")) {
            if (!(outtype = cli_value(argc, argv, &i))) return 2;
        } else {
            cli_fail("convert: unexpected argument '%s' (try 'statelm convert --help')", a);
            return 2;
        }
    }
    if (!in || !out) {
        cli_fail("convert: -m HF_FOLDER and -o OUT.gguf are required (try 'statelm convert --help')");
        return 2;
    }
    if (!quiet) p.log_fn = cli_quantize_log;
    signal(SIGXFSZ, SIG_IGN);
    char err[512];
    slm_status st = slm_convert(in, out, outtype, &p, err, sizeof err);
    if (st != SLM_OK) {
        cli_fail("convert: %s", err);
        return 1;
    }
    return 0;
}
