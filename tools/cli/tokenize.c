/* tokenize.c — `statelm tokenize -m MODEL -p TEXT [--no-special] [--add-bos] [--pieces]`: prints the
 * token ids of TEXT (space-separated, one line), or one "id<TAB>piece" line per token. Special-token
 * text is parsed by default, as `run` does with rendered chat templates. Only the tokenizer is
 * loaded (slm_tokenizer_load): a vocab-only GGUF or a model statelm cannot run tokenizes as well. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    uint32_t flags = SLM_TOKENIZE_PARSE_SPECIAL;
    bool pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(text = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--no-special")) {
            flags &= ~SLM_TOKENIZE_PARSE_SPECIAL;
        } else if (!strcmp(a, "--add-bos")) {
            flags |= SLM_TOKENIZE_ADD_BOS;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: statelm tokenize -m MODEL -p TEXT [--no-special] [--add-bos] [--pieces]");
            return 0;
        } else {
            return cli_fail("tokenize: unknown option '%s'", a);
        }
    }
    if (!model || !text) return cli_fail("tokenize: -m MODEL and -p TEXT are required");
    slm_tokenizer *tok = NULL;
    char err[512];
    slm_status st = slm_tokenizer_load(model, NULL, &tok, err, sizeof err);
    if (st != SLM_OK) return cli_fail("%s (%s)", err, slm_status_name(st));
    int rc = 0;
    size_t len = strlen(text), n = 0, cap = len + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) rc = cli_fail("out of memory");
    else if ((st = slm_tokenizer_encode(tok, text, len, flags, ids, cap, &n)) == SLM_ERR_INVALID_ARG)
        rc = cli_fail("tokenize: the text at byte offset %zu has no token in this vocabulary (SLM_ERR_INVALID_ARG)", n);
    else if (st != SLM_OK)
        rc = cli_fail("tokenize failed (%s)", slm_status_name(st));
    for (size_t i = 0; !rc && i < n; i++) {
        if (pieces) {
            char buf[256];
            size_t bl = 0;
            slm_tokenizer_token_bytes(tok, ids[i], buf, sizeof buf, &bl);
            printf("%d\t%.*s\n", ids[i], (int)(bl < sizeof buf ? bl : sizeof buf), buf);
        } else {
            printf("%s%d", i ? " " : "", ids[i]);
        }
    }
    if (!rc && !pieces) printf("\n");
    free(ids);
    slm_tokenizer_free(tok);
    return rc;
}
