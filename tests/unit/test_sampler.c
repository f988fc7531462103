/* test_sampler.c — the sampler against probabilities computed here from the definitions: greedy
 * (ties to the lower id), seeded reproducibility, empirical frequencies of temperature sampling
 * versus softmax, and the sets top-k / top-p / min-p keep; repetition penalty as in llama.cpp and
 * HF (positive logits divided, negative multiplied); logit biases, frequency and presence penalties
 * as llama.cpp and OpenAI define them. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "statelm.h"

static slm_sampler *make(float temp, int32_t top_k, float top_p, float min_p, float rep, uint64_t seed) {
    slm_sampler_params p = slm_sampler_params_default();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = rep;
    p.seed = seed;
    slm_sampler *s = NULL;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
    return s;
}

static int32_t draw(slm_sampler *s, const float *logits, int32_t n) {
    int32_t t = -1;
    assert_int_equal(slm_sampler_sample(s, logits, n, NULL, 0, &t), SLM_OK);
    return t;
}

static void greedy(void **unused) {
    (void)unused;
    float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, -3.0f};
    slm_sampler *s = make(0.0f, 0, 1.0f, 0.0f, 1.0f, 1);
    assert_int_equal(draw(s, logits, 6), 1); /* tie between 1 and 3 goes to 1 */
    /* repetition penalty 2 on token 1 (positive logit halves to 1.0): token 3 wins */
    int32_t hist[2] = {1, 1}, t = -1;
    slm_sampler_destroy(s);
    s = make(0.0f, 0, 1.0f, 0.0f, 2.0f, 1);
    assert_int_equal(slm_sampler_sample(s, logits, 6, hist, 2, &t), SLM_OK);
    assert_int_equal(t, 3);
    slm_sampler_destroy(s);
}

static void seeded_reproducible(void **unused) {
    (void)unused;
    float logits[50];
    for (int i = 0; i < 50; i++) logits[i] = (float)sin(i * 1.3);
    slm_sampler *a = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 42), *b = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 42);
    slm_sampler *c = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 43);
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < 200; i++) {
        int32_t ta = draw(a, logits, 50), tb = draw(b, logits, 50), tc = draw(c, logits, 50);
        same_ab += ta == tb;
        same_ac += ta == tc;
    }
    assert_int_equal(same_ab, 200);
    assert_true(same_ac < 100);
    slm_sampler_destroy(a), slm_sampler_destroy(b), slm_sampler_destroy(c);
}

/* Empirical frequencies over N draws against the expected distribution (chi-square-like bound). */
static void check_distribution(slm_sampler *s, const float *logits, int32_t n, const double *expect) {
    enum { N = 40000 };
    int counts[16] = {0};
    for (int i = 0; i < N; i++) counts[draw(s, logits, n)]++;
    for (int32_t i = 0; i < n; i++) {
        double f = (double)counts[i] / N, sd = sqrt(expect[i] * (1 - expect[i]) / N);
        if (expect[i] == 0.0) {
            if (counts[i] != 0) fail_msg("token %d drawn %d times, expected never", i, counts[i]);
        } else if (fabs(f - expect[i]) > 5 * sd + 1e-9) {
            fail_msg("token %d frequency %.4f, expected %.4f", i, f, expect[i]);
        }
    }
}

static void softmax(const float *x, int32_t n, float temp, double *p) {
    double mx = -1e30, sum = 0;
    for (int32_t i = 0; i < n; i++) mx = x[i] / temp > mx ? x[i] / temp : mx;
    for (int32_t i = 0; i < n; i++) sum += p[i] = exp(x[i] / temp - mx);
    for (int32_t i = 0; i < n; i++) p[i] /= sum;
}

static void temperature_top_k_top_p_min_p(void **unused) {
    (void)unused;
    const float logits[5] = {1.0f, 2.0f, 0.0f, 3.0f, -1.0f};
    double p[5];
    /* plain temperature 0.7 */
    slm_sampler *s = make(0.7f, 0, 1.0f, 0.0f, 1.0f, 7);
    softmax(logits, 5, 0.7f, p);
    check_distribution(s, logits, 5, p);
    slm_sampler_destroy(s);
    /* top-k 2: only tokens 3 and 1, renormalised */
    s = make(1.0f, 2, 1.0f, 0.0f, 1.0f, 8);
    double e = exp(1.0), k2[5] = {0, 1 / (1 + e), 0, e / (1 + e), 0};
    check_distribution(s, logits, 5, k2);
    slm_sampler_destroy(s);
    /* top-p 0.8 at T=1: probabilities sorted 0.6439, 0.2369, 0.0871, ...; cumulative reaches 0.8
     * with the second token, so tokens 3 and 1 remain */
    s = make(1.0f, 0, 0.8f, 0.0f, 1.0f, 9);
    check_distribution(s, logits, 5, k2);
    slm_sampler_destroy(s);
    /* min-p 0.1 at T=1: keep p >= 0.1 * p_max, i.e. logit >= 3 + ln 0.1 = 0.697: tokens 3, 1, 0 */
    s = make(1.0f, 0, 1.0f, 0.1f, 1.0f, 10);
    double z = exp(3.0) + exp(2.0) + exp(1.0), m3[5] = {exp(1.0) / z, exp(2.0) / z, 0, exp(3.0) / z, 0};
    check_distribution(s, logits, 5, m3);
    slm_sampler_destroy(s);
}

/* The draw by the definition, written here the direct way: every candidate sorted (value
 * descending, id ascending), top-k, top-p over the weights' total, min-p, then u times the kept
 * weights' sum walked in that order; at temperature alone (no cut) u times the sum of all weights
 * walked in id order. */
typedef struct ref_cand {
    float v;
    int32_t id;
} ref_cand;

static int ref_cmp(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int32_t ref_draw(const float *logits, int32_t n_vocab, float temp, int32_t top_k, float top_p, float min_p,
                        double u, ref_cand *c) {
    for (int32_t i = 0; i < n_vocab; i++) c[i] = (ref_cand){logits[i] / temp, i};
    if (!(top_k > 0 && top_k < n_vocab) && top_p >= 1.0f && min_p <= 0.0f) {
        double top = c[0].v, total = 0.0, cum = 0.0;
        for (int32_t i = 1; i < n_vocab; i++) top = c[i].v > top ? c[i].v : top;
        for (int32_t i = 0; i < n_vocab; i++) total += exp((double)c[i].v - top);
        double r = u * total;
        for (int32_t i = 0; i < n_vocab; i++)
            if (r < (cum += exp((double)c[i].v - top))) return i;
        return n_vocab - 1;
    }
    qsort(c, (size_t)n_vocab, sizeof *c, ref_cmp);
    int32_t n = top_k > 0 && top_k < n_vocab ? top_k : n_vocab;
    double top = c[0].v, total = 0.0;
    for (int32_t i = 0; i < n; i++) total += exp((double)c[i].v - top);
    if (top_p < 1.0f) {
        double cum = 0.0;
        for (int32_t i = 0; i < n; i++)
            if ((cum += exp((double)c[i].v - top) / total) >= top_p) {
                n = i + 1;
                break;
            }
    }
    if (min_p > 0.0f) {
        int32_t keep = 1;
        while (keep < n && (double)c[keep].v - top >= log((double)min_p)) keep++;
        n = keep;
    }
    total = 0.0;
    for (int32_t i = 0; i < n; i++) total += exp((double)c[i].v - top);
    double r = u * total, cum = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (r < (cum += exp((double)c[i].v - top))) return c[i].id;
    return c[n - 1].id;
}

/* The sampler (which sorts only the head of the order it walks, nothing without a cut) draws the token of the direct
 * definition for every seed, on a 16384-token vocabulary of several shapes (flat, peaked, many
 * ties) under each cut: the same uniform number through a twin sampler of the same seed. */
static void draws_match_full_sort(void **unused) {
    (void)unused;
    const int32_t n = 16384;
    float *logits = malloc((size_t)n * sizeof *logits);
    ref_cand *work = malloc((size_t)n * sizeof *work);
    assert_non_null(logits);
    assert_non_null(work);
    static const struct {
        float temp;
        int32_t top_k;
        float top_p, min_p;
    } cuts[] = {{0.7f, 0, 1.0f, 0.0f}, {1.3f, 0, 1.0f, 0.0f}, {0.8f, 40, 0.95f, 0.05f}, {0.7f, 0, 0.9f, 0.0f},
                {1.0f, 0, 1.0f, 0.05f}, {0.6f, 100, 1.0f, 0.0f}, {1.0f, 0, 0.5f, 0.1f}};
    uint32_t x = 2463534242u;
    int n_draws = 0;
    for (int shape = 0; shape < 3; shape++) {
        for (int32_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            float g = (float)(x >> 8) / 16777216.0f;
            logits[i] = shape == 0 ? 4.0f * g : shape == 1 ? 30.0f * g * g * g * g : (float)(int)(8.0f * g);
        }
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
            for (uint64_t seed = 1; seed <= 16; seed++) {
                slm_sampler *s = make(cuts[k].temp, cuts[k].top_k, cuts[k].top_p, cuts[k].min_p, 1.0f, seed);
                slm_sampler *twin = make(cuts[k].temp, cuts[k].top_k, cuts[k].top_p, cuts[k].min_p, 1.0f, seed);
                for (int d = 0; d < 3; d++, n_draws++) {
                    int32_t got = draw(s, logits, n);
                    int32_t want = ref_draw(logits, n, cuts[k].temp, cuts[k].top_k, cuts[k].top_p, cuts[k].min_p,
                                            slm_sampler_uniform(twin), work);
                    if (got != want)
                        fail_msg("shape %d cut %zu seed %llu draw %d: sampler %d, definition %d", shape, k,
                                 (unsigned long long)seed, d, got, want);
                }
                slm_sampler_destroy(s);
                slm_sampler_destroy(twin);
            }
    }
    assert_int_equal(n_draws, 3 * 7 * 16 * 3);
    free(logits);
    free(work);
}

static void invalid_params(void **unused) {
    (void)unused;
    slm_sampler_params p = slm_sampler_params_default();
    slm_sampler *s = NULL;
    p.top_p = 1.5f;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    assert_null(s);
    p = slm_sampler_params_default();
    p.presence_penalty = NAN;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    slm_logit_bias bad[2] = {{1, INFINITY}, {-1, 0.0f}};
    for (int i = 0; i < 2; i++) {
        p = slm_sampler_params_default();
        p.logit_bias = &bad[i];
        p.n_logit_bias = 1;
        assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    }
    p = slm_sampler_params_default();
    p.n_logit_bias = 1; /* and no array */
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    p = slm_sampler_params_default();
    p.temperature = -1.0f;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    p = slm_sampler_params_default();
    p.repeat_last_n = -1;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    p = slm_sampler_params_default();
    assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
    int32_t t;
    assert_int_equal(slm_sampler_sample(s, NULL, 5, NULL, 0, &t), SLM_ERR_INVALID_ARG);
    slm_sampler_destroy(s);
}

/* slm_sampler_probs at temperature 1 without cuts against softmax(want). */
static void check_probs(const slm_sampler_params *p, const float *logits, int32_t n, const int32_t *hist, size_t n_hist,
                        const float *want) {
    slm_sampler *s = NULL;
    assert_int_equal(slm_sampler_create(p, &s), SLM_OK);
    float got[8];
    double expect[8];
    softmax(want, n, 1.0f, expect);
    assert_int_equal(slm_sampler_probs(s, logits, n, hist, n_hist, got), SLM_OK);
    for (int32_t i = 0; i < n; i++) assert_true(fabs((double)got[i] - expect[i]) < 1e-6);
    slm_sampler_destroy(s);
}

/* Logit biases, then repetition, then frequency and presence penalties (llama.cpp's and OpenAI's
 * definitions: minus count * frequency + presence over the window's distinct tokens); a top_p of
 * FLT_MIN keeps the argmax; a bias past the vocabulary or a fully banned vocabulary is SLM_ERR_RANGE. */
static void bias_and_penalties(void **unused) {
    (void)unused;
    const float logits[5] = {1.0f, 0.5f, 0.2f, -0.3f, 0.0f};
    const int32_t hist[5] = {0, 0, 0, 3, 1}; /* counts: token 0 three times, 1 and 3 once */
    slm_sampler_params p = slm_sampler_params_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.presence_penalty = 0.4f;
    p.frequency_penalty = 0.3f;
    const float counted[5] = {1.0f - (3 * 0.3f + 0.4f), 0.5f - (0.3f + 0.4f), 0.2f, -0.3f - (0.3f + 0.4f), 0.0f};
    check_probs(&p, logits, 5, hist, 5, counted);
    p.repeat_penalty = 2.0f; /* applied first: 1.0 halves, -0.3 doubles */
    const float both[5] = {0.5f - (3 * 0.3f + 0.4f), 0.25f - (0.3f + 0.4f), 0.2f, -0.6f - (0.3f + 0.4f), 0.0f};
    check_probs(&p, logits, 5, hist, 5, both);
    p.repeat_last_n = 2; /* the window sees tokens 3 and 1 only */
    const float window[5] = {1.0f, 0.25f - (0.3f + 0.4f), 0.2f, -0.6f - (0.3f + 0.4f), 0.0f};
    check_probs(&p, logits, 5, hist, 5, window);

    p = slm_sampler_params_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    slm_logit_bias bias[2] = {{4, 2.5f}, {0, -INFINITY}};
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    const float biased[5] = {-INFINITY, 0.5f, 0.2f, -0.3f, 2.5f};
    check_probs(&p, logits, 5, NULL, 0, biased);
    slm_sampler *s = NULL;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
    bias[1].token = 3; /* the sampler holds its own copy */
    for (int i = 0; i < 200; i++) assert_int_not_equal(draw(s, logits, 5), 0);
    int32_t t;
    assert_int_equal(slm_sampler_sample(s, logits, 4, NULL, 0, &t), SLM_ERR_RANGE); /* token 4 >= n_vocab */
    slm_sampler_destroy(s);
    p.temperature = 0.0f;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
    assert_int_equal(draw(s, logits, 5), 4);
    slm_sampler_destroy(s);

    slm_logit_bias ban[5] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {3, -INFINITY}, {4, -INFINITY}};
    p.logit_bias = ban;
    p.n_logit_bias = 5;
    for (int greedy_run = 0; greedy_run < 2; greedy_run++) {
        p.temperature = greedy_run ? 0.0f : 1.0f;
        assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
        assert_int_equal(slm_sampler_sample(s, logits, 5, NULL, 0, &t), SLM_ERR_RANGE);
        slm_sampler_destroy(s);
    }

    s = make(1.0f, 0, FLT_MIN, 0.0f, 1.0f, 7); /* top_p FLT_MIN: only the most probable token */
    for (int i = 0; i < 100; i++) assert_int_equal(draw(s, logits, 5), 0);
    slm_sampler_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy),
        cmocka_unit_test(seeded_reproducible),
        cmocka_unit_test(temperature_top_k_top_p_min_p),
        cmocka_unit_test(draws_match_full_sort),
        cmocka_unit_test(invalid_params),
        cmocka_unit_test(bias_and_penalties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
