/* main.c — the statelm command: dispatches subcommands. Uses only the public API (statelm.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fputs("usage: statelm COMMAND [options]\n"
          "commands:\n"
          "  info -m MODEL [--json] [-c N_CTX] [--kv-f32]   describe a GGUF file or Hugging Face folder\n"
          "  run  -m MODEL (-p TEXT | --prompt-ids 1,2,3) [options]   generate text\n"
          "  chat -m MODEL [options]                        interactive multi-turn chat\n"
          "  check -m MODEL --target T [--json]             what a target rejects or runs elsewhere\n"
          "  plan -m MODEL --target T [--json] [--simulate] the compute plan for a target\n"
          "  tokenize -m MODEL -p TEXT                      print the token ids of TEXT\n"
          "  score -m MODEL --prompt-ids IDS [--top K]      teacher-forced log-probabilities per position\n"
          "  export -m MODEL --target coreml -o OUT.mlpackage   the ane plan as a Core ML package\n"
          "  convert -m HF_FOLDER -o OUT.gguf [--outtype T] a Hugging Face folder as llama.cpp's converter writes it\n"
          "  quantize IN OUT.gguf TYPE                      quantise a GGUF or HF folder (q4_0 ... q8_0, q4_k_m, q6_k, f16)\n"
          "  bench -m MODEL [-p 512] [-n 128] [-r 5] [-t N] [--json]   prompt and generation speed\n"
          "  serve -m MODEL [--port N] [--parallel N]      OpenAI-compatible HTTP server\n"
          "  --version                                      print the version\n"
          "run 'statelm COMMAND --help' for the options of a command\n",
          f);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "chat") == 0) return cmd_chat(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0) return cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0) return cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "score") == 0) return cmd_score(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0) return cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "quantize") == 0) return cmd_quantize(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0) return cmd_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0) return cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0) {
        printf("statelm %d.%d.%d\n", SLM_VERSION_MAJOR, SLM_VERSION_MINOR, SLM_VERSION_PATCH);
        return 0;
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    cli_fail("unknown command '%s' (try 'statelm --help')", cmd);
    return 2;
}
