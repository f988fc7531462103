/* tokenize.c — `statelm tokenize -m MODEL (-p TEXT | -f FILE) [--split SEP] [--no-special]
 * [--add-bos] [--pieces]`: prints the token ids of TEXT (space-separated, one line), or one
 * "id<TAB>piece" line per token. Special-token text is parsed by default, as `run` does with
 * rendered chat templates. Only the tokenizer is loaded (slm_tokenizer_load): a vocab-only GGUF or
 * a model statelm cannot run tokenizes as well. --split SEP tokenizes each part of the text between
 * occurrences of SEP on its own, one line of ids per part; a text that ends with SEP has no empty
 * last part (llama.cpp's tokenizer test files: SEP "\n__ggml_vocab_test__\n"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define TOKENIZE_MAX_FILE ((size_t)64 << 20)


/* First occurrence of sep[0, sl) in s[0, n), or NULL. */
static const char *find_sep(const char *s, size_t n, const char *sep, size_t sl) {
    for (size_t i = 0; i + sl <= n; i++)
        if (s[i] == sep[0] && memcmp(s + i, sep, sl) == 0) return s + i;
    return NULL;
}

/* Prints the ids of text[0, len) as one line (or id/piece lines). Returns 0 or an exit code. */
static int print_ids(const slm_tokenizer *tok, const char *text, size_t len, uint32_t flags, bool pieces) {
    size_t n = 0, cap = len + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return cli_fail("out of memory");
    slm_status st = slm_tokenizer_encode(tok, text, len, flags, ids, cap, &n);
    if (st == SLM_ERR_RANGE && n > cap) { /* more ids than bytes + 8 (byte fallback of escaped spaces) */
        int32_t *grown = realloc(ids, n * sizeof *ids);
        if (!grown) {
            free(ids);
            return cli_fail("out of memory");
        }
        ids = grown;
        cap = n;
        st = slm_tokenizer_encode(tok, text, len, flags, ids, cap, &n);
    }
    int rc = 0;
    if (st == SLM_ERR_INVALID_ARG)
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
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL, *sep = NULL;
    uint32_t flags = SLM_TOKENIZE_PARSE_SPECIAL;
    bool pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(text = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--split")) {
            if (!(sep = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--no-special")) {
            flags &= ~SLM_TOKENIZE_PARSE_SPECIAL;
        } else if (!strcmp(a, "--add-bos")) {
            flags |= SLM_TOKENIZE_ADD_BOS;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: statelm tokenize -m MODEL (-p TEXT | -f FILE) [--split SEP] [--no-special] [--add-bos] "
                 "[--pieces]");
            return 0;
        } else {
            return cli_fail("tokenize: unknown option '%s'", a);
        }
    }
    if (!model || !text == !file) return cli_fail("tokenize: -m MODEL and one of -p TEXT, -f FILE are required");
    if (sep && (!*sep || pieces)) return cli_fail("tokenize: --split needs a non-empty SEP and no --pieces");
    size_t len = 0;
    char *owned = NULL;
    if (file) {
        if (!(owned = cli_read_file(file, TOKENIZE_MAX_FILE, &len))) return 1;
        text = owned;
    } else {
        len = strlen(text);
    }
    slm_tokenizer *tok = NULL;
    char err[512];
    slm_status st = slm_tokenizer_load(model, NULL, &tok, err, sizeof err);
    if (st != SLM_OK) {
        free(owned);
        return cli_fail("%s (%s)", err, slm_status_name(st));
    }
    int rc = 0;
    if (!sep) {
        rc = print_ids(tok, text, len, flags, pieces);
    } else {
        size_t sl = strlen(sep), pos = 0;
        while (!rc && pos < len) {
            const char *hit = find_sep(text + pos, len - pos, sep, sl);
            size_t end = hit ? (size_t)(hit - text) : len;
            rc = print_ids(tok, text + pos, end - pos, flags, false);
            pos = hit ? end + sl : len;
        }
    }
    free(owned);
    slm_tokenizer_free(tok);
    return rc;
}
