/* test_sampler.c — the sampler against probabilities computed here from the definitions: greedy
 * (ties to the lower id), seeded reproducibility, empirical frequencies of temperature sampling
 * versus softmax, and the sets top-k / top-p / min-p keep; repetition penalty as in llama.cpp and
 * HF (positive logits divided, negative multiplied). */
#include "testutil.h"

#include <math.h>
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

static void invalid_params(void **unused) {
    (void)unused;
    slm_sampler_params p = slm_sampler_params_default();
    slm_sampler *s = NULL;
    p.top_p = 0.0f;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    assert_null(s);
    p = slm_sampler_params_default();
    p.temperature = -1.0f;
    assert_int_equal(slm_sampler_create(&p, &s), SLM_ERR_INVALID_ARG);
    p = slm_sampler_params_default();
    assert_int_equal(slm_sampler_create(&p, &s), SLM_OK);
    int32_t t;
    assert_int_equal(slm_sampler_sample(s, NULL, 5, NULL, 0, &t), SLM_ERR_INVALID_ARG);
    slm_sampler_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy),
        cmocka_unit_test(seeded_reproducible),
        cmocka_unit_test(temperature_top_k_top_p_min_p),
        cmocka_unit_test(invalid_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
