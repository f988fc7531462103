/* grammar_mask.c — cost of constrained decoding (docs/grammar.md): the time to build a model's
 * vocabulary trie, microseconds per token mask along random walks through a JSON Schema's grammar
 * (masks the constraint computed by walking the trie, and masks its per-state cache served; mean,
 * p50 and p99 of all), and, with --decode N, sampled decoding of N tokens at temperature 1 with and
 * without the constraint in R alternating rounds (tok/s of both and their ratio per round, the
 * median and range of the ratios; generations of at most 64 tokens, the prompt's prefill outside
 * the timing), with the masks the lazy sampler had to build and the sampler's µs per token.
 *   bench_grammar_mask MODEL SCHEMA.json [--walks W] [--steps S] [--decode N] [--rounds R] [-t THREADS]
 * Fixed seeds; never a correctness gate. */
#define BENCH_NAME "bench_grammar_mask"
#include <stdint.h>
#include <string.h>

#include "bench_util.h"
#include "statelm.h"

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path, SLM_ERR_IO, "cannot open");
    char *buf = malloc((1 << 20) + 1);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    buf[*n] = 0;
    return buf;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_grammar_mask MODEL SCHEMA.json [--walks W] [--steps S] [--decode N] [--rounds R] "
                        "[-t T]\n");
        return 2;
    }
    int walks = 20, steps = 48, decode = 0, rounds = 3, threads = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--walks")) walks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode")) decode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
    }
    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = threads;
    slm_model *m = NULL;
    slm_status st = slm_model_load(argv[1], &mp, &m, err, sizeof err);
    if (st) die("load", st, err);
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    int32_t n_vocab = slm_model_n_vocab(m);
    size_t n = 0;
    char *schema = read_all(argv[2], &n);
    slm_grammar *g = NULL;
    if ((st = slm_grammar_from_json_schema(schema, n, &g, err, sizeof err))) die("schema", st, err);
    double t0 = now_s();
    slm_grammar_vocab *v = NULL;
    if ((st = slm_grammar_vocab_create(tok, &v))) die("vocab", st, "");
    double t_trie = now_s() - t0;
    printf("model %s: n_vocab %d, trie built in %.1f ms\n", argv[1], n_vocab, 1e3 * t_trie);

    slm_constraint *c = NULL;
    if ((st = slm_constraint_create(g, v, &c))) die("constraint", st, "");
    uint32_t *mask = malloc(((size_t)n_vocab + 31) / 32 * sizeof *mask);
    int32_t *allowed = malloc((size_t)n_vocab * sizeof *allowed);
    double t_walk = 0, t_cached = 0, worst = 0;
    double *walk_us = malloc((size_t)walks * (size_t)steps * sizeof *walk_us);
    double *cached_us = malloc((size_t)walks * (size_t)steps * sizeof *cached_us);
    double *all_us = malloc((size_t)walks * (size_t)steps * sizeof *all_us);
    uint64_t n_walk = 0, n_cached = 0, n_tok = 0;
    for (int w = 0; w < walks; w++) {
        slm_constraint_reset(c);
        for (int s = 0; s < steps; s++) {
            uint64_t w0, c0, w1, c1;
            slm_constraint_stats(c, &w0, &c0);
            double a = now_s();
            if ((st = slm_constraint_mask(c, mask, n_vocab))) die("mask", st, slm_constraint_errmsg(c));
            double dt = now_s() - a;
            slm_constraint_stats(c, &w1, &c1);
            all_us[n_walk + n_cached] = 1e6 * dt;
            if (w1 > w0) {
                walk_us[n_walk] = 1e6 * dt;
                t_walk += dt;
                n_walk++;
                if (dt > worst) worst = dt;
            } else {
                cached_us[n_cached] = 1e6 * dt;
                t_cached += dt;
                n_cached++;
            }
            int32_t k = 0;
            for (int32_t i = 0; i < n_vocab; i++)
                if (mask[i / 32] >> (i % 32) & 1) allowed[k++] = i;
            if (!k) break;
            int32_t t = allowed[rnd() % (uint32_t)k];
            if (slm_tokenizer_is_eog(tok, t)) break;
            if ((st = slm_constraint_accept(c, t))) die("accept", st, slm_constraint_errmsg(c));
            n_tok++;
        }
    }
    printf("masks along %d random walks (%llu tokens): %llu by trie walk, median %.1f us, mean %.1f us (worst %.1f us, "
           "the first ones build the automaton); %llu from the cache, median %.2f us; all: mean %.1f us/mask\n",
           walks, (unsigned long long)n_tok, (unsigned long long)n_walk, n_walk ? median(walk_us, (int)n_walk) : 0.0,
           n_walk ? 1e6 * t_walk / (double)n_walk : 0.0, 1e6 * worst, (unsigned long long)n_cached,
           n_cached ? median(cached_us, (int)n_cached) : 0.0,
           1e6 * (t_walk + t_cached) / (double)(n_walk + n_cached ? n_walk + n_cached : 1));
    int n_all = (int)(n_walk + n_cached);
    if (n_all) {
        double p50 = median(all_us, n_all); /* sorts */
        printf("all masks: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us over %d masks\n",
               1e6 * (t_walk + t_cached) / n_all, p50, all_us[(int)(0.99 * (n_all - 1))], all_us[n_all - 1], n_all);
    }
    free(walk_us);
    free(cached_us);
    free(all_us);

    if (decode > 0) {
        slm_session_params sp = slm_session_params_default();
        sp.n_threads = threads;
        slm_session *sess = NULL;
        if ((st = slm_session_create(m, &sp, &sess, err, sizeof err))) die("session", st, err);
        const char *prompt = "Reply with one JSON value and nothing else.";
        int32_t ids[64];
        size_t n_ids = 0;
        if ((st = slm_tokenizer_encode(tok, prompt, strlen(prompt), SLM_TOKENIZE_ADD_BOS, ids, 64, &n_ids)))
            die("encode", st, "");
        slm_snapshot *snap = NULL;
        const float *logits = NULL;
        if ((st = slm_session_sync(sess, ids, n_ids, &logits, NULL)) || (st = slm_session_snapshot(sess, &snap)))
            die("prefill", st, slm_session_errmsg(sess));
        double *ratios = malloc((size_t)rounds * sizeof *ratios);
        for (int r = 0; r < rounds; r++) {
            double tps[2];
            for (int constrained = 0; constrained < 2; constrained++) {
                slm_sampler_params pp = slm_sampler_params_default();
                pp.temperature = 1.0f;
                pp.top_k = 0;
                pp.top_p = 1.0f;
                pp.min_p = 0.0f;
                pp.seed = 7 + (uint64_t)r;
                slm_sampler *smp = NULL;
                slm_sampler_create(&pp, &smp);
                if (constrained) slm_sampler_set_constraint(smp, c);
                int32_t done = 0, runs = 0;
                double t = 0, t_sample = 0;
                uint64_t w0, c0, w1, c1;
                slm_constraint_stats(c, &w0, &c0);
                while (done < decode) {
                    slm_session_restore(sess, snap);
                    slm_session_sync(sess, ids, n_ids, &logits, NULL);
                    slm_constraint_reset(c);
                    runs++;
                    double a = now_s();
                    for (int i = 0; i < 64 && done < decode; i++) {
                        int32_t id;
                        double b = now_s();
                        if ((st = slm_sampler_sample(smp, logits, n_vocab, NULL, 0, &id))) die("sample", st, "");
                        if (constrained && (st = slm_constraint_accept(c, id)))
                            die("accept", st, slm_constraint_errmsg(c));
                        t_sample += now_s() - b;
                        done++;
                        if (slm_tokenizer_is_eog(tok, id) || (constrained && slm_constraint_done(c))) break;
                        if ((st = slm_session_decode(sess, id, &logits))) die("decode", st, slm_session_errmsg(sess));
                    }
                    t += now_s() - a;
                }
                slm_constraint_stats(c, &w1, &c1);
                tps[constrained] = (double)done / t;
                printf("round %d decode %s: %d tokens in %d generations, %.1f tok/s; sampling%s %.1f us/token",
                       r + 1, constrained ? "constrained  " : "unconstrained", done, runs, tps[constrained],
                       constrained ? " and accept" : "", 1e6 * t_sample / done);
                if (constrained)
                    printf("; masks built %llu (%llu from the cache) for %d tokens",
                           (unsigned long long)(w1 + c1 - w0 - c0), (unsigned long long)(c1 - c0), done);
                printf("\n");
                slm_sampler_destroy(smp);
            }
            ratios[r] = tps[1] / tps[0];
            printf("round %d: constrained / unconstrained %.3f\n", r + 1, ratios[r]);
        }
        double lo = ratios[0], hi = ratios[0];
        for (int r = 1; r < rounds; r++) {
            if (ratios[r] < lo) lo = ratios[r];
            if (ratios[r] > hi) hi = ratios[r];
        }
        printf("constrained / unconstrained tok/s over %d rounds: median %.3f, range %.3f-%.3f\n", rounds,
               median(ratios, rounds), lo, hi);
        free(ratios);
        slm_snapshot_destroy(snap);
        slm_session_destroy(sess);
    }
    free(mask);
    free(allowed);
    free(schema);
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
    slm_model_destroy(m);
    return 0;
}
