/* spec_lookup.c — benchmark (not a test) of prompt-lookup speculation: decode tokens/s of plain
 * greedy decoding and of slm_spec with the prompt-lookup drafter on one prompt, after the same
 * prefill, and whether both produced the same ids. The prompt file is raw text, tokenized with
 * special-token parsing and without BOS (write the chat markup into it), so another tool can be
 * given the very same text. Prints the median over R repetitions of each, one line. With -e 1 both
 * stop after an end-of-generation token (at most TOKENS), so the rate is that of the answer itself.
 * Usage: bench_spec_lookup MODEL.gguf PROMPT.txt [-n TOKENS] [-t THREADS] [-r REPS] [-k DRAFT_MAX] [-e 0|1] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "statelm.h"

#define BENCH_NAME "bench_spec_lookup"
#include "bench_util.h"

static int32_t argmax(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_spec_lookup MODEL.gguf PROMPT.txt [-n TOKENS] [-t THREADS] [-r REPS] [-k DRAFT_MAX] "
                        "[-e 0|1]\n");
        return 2;
    }
    int threads = 2, n_gen = 128, reps = 3, draft_max = 8, stop_eog = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) n_gen = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-k")) draft_max = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) stop_eog = atoi(argv[i + 1]);
    }
    if (n_gen < 1 || reps < 1 || reps > 1000 || draft_max < 1 || draft_max > 64) return 2;
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "bench_spec_lookup: cannot open %s\n", argv[2]);
        return 1;
    }
    static char text[1 << 16];
    size_t n_text = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    slm_model *m = NULL;
    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = threads;
    slm_status st = slm_model_load(argv[1], &mp, &m, err, sizeof err);
    if (st) die("load", st, err);
    int32_t n_vocab = slm_model_n_vocab(m);
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    size_t cap = n_text + 16, n_prompt = 0;
    int32_t *prompt = malloc(cap * sizeof *prompt);
    int32_t *plain = malloc((size_t)n_gen * sizeof *plain), *spec = malloc((size_t)(n_gen + 64) * sizeof *spec);
    if ((st = slm_tokenizer_encode(tok, text, n_text, SLM_TOKENIZE_PARSE_SPECIAL, prompt, cap, &n_prompt)))
        die("tokenize", st, "the prompt");
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = (int32_t)n_prompt + n_gen + 80;
    sp.n_threads = threads;
    sp.kernels = bench_kernels();
    slm_session *s = NULL;
    if ((st = slm_session_create(m, &sp, &s, err, sizeof err))) die("session", st, err);
    double *t_plain = malloc((size_t)reps * sizeof *t_plain), *t_spec = malloc((size_t)reps * sizeof *t_spec);
    slm_spec_stats stats = {0};
    int same = 1;
    size_t n_plain = (size_t)n_gen, n_spec = (size_t)n_gen;
    const float *l;
    for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
        slm_session_reset(s);
        if ((st = slm_session_prefill(s, prompt, n_prompt, &l))) die("prefill", st, slm_session_errmsg(s));
        double t0 = now_s();
        n_plain = (size_t)n_gen;
        for (int i = 0; i < n_gen; i++) {
            plain[i] = argmax(l, n_vocab);
            if (stop_eog && slm_tokenizer_is_eog(tok, plain[i])) {
                n_plain = (size_t)i + 1;
                break;
            }
            if (i + 1 < n_gen && (st = slm_session_decode(s, plain[i], &l))) die("decode", st, slm_session_errmsg(s));
        }
        if (r) t_plain[r - 1] = now_s() - t0;
        slm_session_reset(s);
        if ((st = slm_session_prefill(s, prompt, n_prompt, &l))) die("prefill", st, slm_session_errmsg(s));
        slm_spec_params pp = slm_spec_params_default();
        pp.draft_max = draft_max;
        slm_spec *sx = NULL;
        if ((st = slm_spec_create(s, &pp, &sx, err, sizeof err))) die("spec", st, err);
        t0 = now_s();
        size_t n_done = 0;
        while (n_done < (size_t)n_gen) {
            size_t got = 0;
            if ((st = slm_spec_step(sx, (size_t)n_gen - n_done, spec + n_done, &got))) die("spec step", st, slm_spec_errmsg(sx));
            for (size_t i = n_done; stop_eog && i < n_done + got; i++)
                if (slm_tokenizer_is_eog(tok, spec[i])) got = i + 1 - n_done;
            n_done += got;
            if (stop_eog && slm_tokenizer_is_eog(tok, spec[n_done - 1])) break;
        }
        n_spec = n_done;
        if (r) t_spec[r - 1] = now_s() - t0;
        slm_spec_get_stats(sx, &stats);
        slm_spec_destroy(sx);
        if (n_spec != n_plain || memcmp(plain, spec, n_plain * sizeof *plain) != 0) same = 0;
    }
    double tp = median(t_plain, reps), ts = median(t_spec, reps);
    printf("prompt %zu tok, gen %zu: plain %.1f tok/s, lookup %.1f tok/s, x%.2f; %llu passes, %llu drafted, %llu accepted; "
           "same ids: %s\n",
           n_prompt, n_plain, (double)n_plain / tp, (double)n_spec / ts, tp / ts * (double)n_spec / (double)n_plain, (unsigned long long)stats.n_steps,
           (unsigned long long)stats.n_drafted, (unsigned long long)stats.n_accepted, same ? "yes" : "NO");
    free(t_plain);
    free(t_spec);
    free(prompt);
    free(plain);
    free(spec);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return same ? 0 : 1;
}
