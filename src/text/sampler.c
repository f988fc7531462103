/* sampler.c — token sampling (public slm_sampler_* API): logit biases, the repetition, frequency and
 * presence penalties, then greedy when the temperature is 0, else temperature, top-k, top-p, min-p
 * (Hugging Face warper order) and a draw
 * from the sampler's own xoshiro256** generator seeded through splitmix64. Reproducible: the same
 * seed, logits and history give the same token on every machine (ties break to the lower id). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/params.h"
#include "statelm.h"
#include "text/sampler.h"

typedef struct cand {
    float v; /* logit, after penalty and temperature */
    int32_t id;
} cand;

struct slm_sampler {
    slm_sampler_params p; /* p.logit_bias points at the sampler's own copy */
    uint64_t rng[4];
    int32_t cap;
    cand *cands;      /* (cap) */
    int32_t n_sorted; /* cands[0, n_sorted) is the sorted head of this call's candidates */
    samp_filter filter;   /* token filter (samp_set_filter); filter.mask NULL: none */
    bool unfiltered;      /* this draw ignores the filter (the lazy first draw) */
    uint32_t *mask;       /* ((cap + 31) / 32) bits of the filter's last answer */
};

void samp_set_filter(slm_sampler *s, const samp_filter *f) {
    if (f && f->mask) s->filter = *f;
    else memset(&s->filter, 0, sizeof s->filter);
}

SLM_API slm_sampler_params slm_sampler_params_default(void) {
    slm_sampler_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0;
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

SLM_API slm_status slm_sampler_create(const slm_sampler_params *params, slm_sampler **out) {
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    slm_sampler_params d = slm_sampler_params_default(), p = d;
    params_read(&p, sizeof p, params);
    if (p.top_p == 0.0f) p.top_p = d.top_p;
    if (p.repeat_penalty == 0.0f) p.repeat_penalty = d.repeat_penalty;
    if (p.repeat_last_n == 0) p.repeat_last_n = d.repeat_last_n;
    if (!(p.temperature >= 0) || p.top_k < 0 || !(p.top_p > 0 && p.top_p <= 1) || !(p.min_p >= 0 && p.min_p <= 1) ||
        !(p.repeat_penalty > 0) || p.repeat_last_n < 0 || !isfinite(p.presence_penalty) ||
        !isfinite(p.frequency_penalty) || p.n_logit_bias < 0 || (p.n_logit_bias && !p.logit_bias))
        return SLM_ERR_INVALID_ARG;
    for (int32_t i = 0; i < p.n_logit_bias; i++)
        if (p.logit_bias[i].token < 0 || isnan(p.logit_bias[i].bias) || p.logit_bias[i].bias == INFINITY)
            return SLM_ERR_INVALID_ARG;
    slm_sampler *s = calloc(1, sizeof *s);
    if (!s) return SLM_ERR_NOMEM;
    if (p.n_logit_bias) {
        slm_logit_bias *copy = malloc((size_t)p.n_logit_bias * sizeof *copy);
        if (!copy) {
            free(s);
            return SLM_ERR_NOMEM;
        }
        memcpy(copy, p.logit_bias, (size_t)p.n_logit_bias * sizeof *copy);
        p.logit_bias = copy;
    } else {
        p.logit_bias = NULL;
    }
    s->p = p;
    uint64_t x = p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    *out = s;
    return SLM_OK;
}

SLM_API void slm_sampler_destroy(slm_sampler *s) {
    if (!s) return;
    free((void *)(uintptr_t)s->p.logit_bias);
    free(s->cands);
    free(s->mask);
    free(s);
}

/* Descending by value, ascending id on ties. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static inline bool cand_before(const cand *x, const cand *y) {
    return x->v > y->v || (x->v == y->v && x->id < y->id);
}

/* Reorders c[0, n) so that c[0, k) holds the k candidates that come first in cand_cmp's order (in
 * any order among themselves): quickselect, median-of-three pivot. */
static void select_first(cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        cand a = c[lo], b = c[lo + (hi - lo) / 2], d = c[hi];
        cand p = cand_before(&a, &b) ? (cand_before(&b, &d) ? b : cand_before(&a, &d) ? d : a)
                                     : (cand_before(&a, &d) ? a : cand_before(&b, &d) ? d : b);
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &p)) i++;
            while (cand_before(&p, &c[j])) j--;
            if (i <= j) {
                cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* Extends the sorted head of s->cands[0, n) to at least `want` candidates (geometrically, so a
 * walk over the first m costs O(n + m log m) in all, not a sort of all n). The order is total
 * (ties by id), so the head is the same whatever the algorithm. */
static void sort_head(slm_sampler *s, int32_t n, int32_t want) {
    if (want <= s->n_sorted) return;
    int32_t m = s->n_sorted * 2;
    if (m < 64) m = 64;
    if (m < want) m = want;
    if (m > n) m = n;
    cand *rest = s->cands + s->n_sorted;
    if (m < n) select_first(rest, n - s->n_sorted, m - s->n_sorted);
    qsort(rest, (size_t)(m - s->n_sorted), sizeof(cand), cand_cmp);
    s->n_sorted = m;
}

/* The penalties over the distinct tokens of history's last p->repeat_last_n: repetition (divides a
 * positive logit, multiplies a negative one), then minus count * frequency + presence. */
static void apply_penalties(const slm_sampler_params *p, cand *c, int32_t n_vocab, const int32_t *history,
                            size_t n_history) {
    bool counted = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if ((p->repeat_penalty == 1.0f && !counted) || !n_history) return;
    size_t from = n_history > (size_t)p->repeat_last_n ? n_history - (size_t)p->repeat_last_n : 0;
    for (size_t i = from; i < n_history; i++) {
        int32_t id = history[i];
        if (id < 0 || id >= n_vocab) continue;
        bool seen = false;
        for (size_t j = from; j < i && !seen; j++) seen = history[j] == id;
        if (seen) continue;
        float v = c[id].v;
        if (p->repeat_penalty != 1.0f) v = v > 0 ? v / p->repeat_penalty : v * p->repeat_penalty;
        if (counted) {
            int32_t count = 1;
            for (size_t j = i + 1; j < n_history; j++) count += history[j] == id;
            v -= (float)count * p->frequency_penalty + p->presence_penalty;
        }
        c[id].v = v;
    }
}

/* What slm_sampler_sample draws from: *greedy >= 0 at temperature 0 (the argmax after the
 * biases and penalties, lowest id on ties); otherwise *greedy = -1 and the kept candidates are
 * s->cands[0, *n_kept) (penalised logits over the temperature, cut by top-k, top-p and min-p in
 * the order descending, ascending id on ties), with weights exp(v - *mx) summing to *sum. When a
 * cut applies the kept ones are a sorted head (s->n_sorted >= *n_kept) and *sum adds them in that
 * order; when none does they are all n_vocab in any order (the sorted head grows on demand) and
 * *sum adds them in id order. Top-p's running sum goes in the sorted order over the weights'
 * total before the cut (in id order without top-k). */
static slm_status kept_candidates(slm_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                                  size_t n_history, int32_t *greedy, int32_t *n_kept, double *mx, double *sum) {
    *greedy = -1;
    if (n_vocab > s->cap) {
        cand *grown = realloc(s->cands, (size_t)n_vocab * sizeof(cand));
        if (!grown) return SLM_ERR_NOMEM;
        s->cands = grown;
        uint32_t *bits = realloc(s->mask, ((size_t)n_vocab + 31) / 32 * sizeof *bits);
        if (!bits) return SLM_ERR_NOMEM;
        s->mask = bits;
        s->cap = n_vocab;
    }
    cand *c = s->cands;
    s->n_sorted = 0;
    for (int32_t i = 0; i < n_vocab; i++) c[i] = (cand){logits[i], i};
    for (int32_t i = 0; i < s->p.n_logit_bias; i++) {
        if (s->p.logit_bias[i].token >= n_vocab) return SLM_ERR_RANGE;
        c[s->p.logit_bias[i].token].v += s->p.logit_bias[i].bias;
    }
    apply_penalties(&s->p, c, n_vocab, history, n_history);
    if (s->filter.mask && !s->unfiltered) { /* keep only the allowed ids, in id order */
        slm_status st = s->filter.mask(s->filter.ud, s->mask, n_vocab);
        if (st) return st;
        int32_t m = 0;
        for (int32_t i = 0; i < n_vocab; i++)
            if (s->mask[i / 32] >> (i % 32) & 1) c[m++] = c[i];
        if (!m) return SLM_ERR_STATE;
        n_vocab = m;
    }
    if (s->p.temperature == 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; i++)
            if (c[i].v > c[best].v) best = i;
        if (c[best].v == -INFINITY) return SLM_ERR_RANGE;
        *greedy = c[best].id;
        return SLM_OK;
    }
    for (int32_t i = 0; i < n_vocab; i++) c[i].v /= s->p.temperature;
    int32_t n = n_vocab;
    bool cut = false;
    double top, total = 0.0;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        sort_head(s, n_vocab, s->p.top_k);
        n = s->p.top_k;
        cut = true;
        top = c[0].v;
        for (int32_t i = 0; i < n; i++) total += exp((double)c[i].v - top);
    } else { /* the first candidate's value, then the weights in id order (nothing moved yet) */
        int32_t first = 0;
        for (int32_t i = 1; i < n; i++)
            if (cand_before(&c[i], &c[first])) first = i;
        top = c[first].v;
        for (int32_t i = 0; i < n; i++) total += exp((double)c[i].v - top);
    }
    if (top == -INFINITY) return SLM_ERR_RANGE;
    /* top-p: smallest prefix with cumulative probability >= top_p */
    if (s->p.top_p < 1.0f) {
        double cum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            sort_head(s, n, i + 1);
            cum += exp((double)c[i].v - top) / total;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
        cut = true;
    }
    /* min-p: drop candidates with probability below min_p * max probability */
    if (s->p.min_p > 0.0f) {
        double thresh = log((double)s->p.min_p);
        int32_t keep = 1;
        for (; keep < n; keep++) {
            sort_head(s, n, keep + 1);
            if ((double)c[keep].v - top < thresh) break;
        }
        n = keep;
        cut = true;
    }
    if (cut) {
        sort_head(s, n, n);
        total = 0.0;
        for (int32_t i = 0; i < n; i++) total += exp((double)c[i].v - top);
    }
    *n_kept = n;
    *mx = top;
    *sum = total;
    return SLM_OK;
}

/* One draw from what kept_candidates leaves (filtered unless s->unfiltered): the kept candidates
 * walked in the order their weights were summed, the sorted head after a cut, else id order (no
 * sort of the vocabulary at temperature alone). Either order is fixed, so a seed gives the same
 * token on every machine. */
static slm_status draw(slm_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history, size_t n_history,
                       int32_t *token) {
    int32_t greedy, n;
    double mx, sum;
    slm_status st = kept_candidates(s, logits, n_vocab, history, n_history, &greedy, &n, &mx, &sum);
    if (st) return st;
    if (greedy >= 0) {
        *token = greedy;
        return SLM_OK;
    }
    const cand *c = s->cands;
    double r = (double)(next_u64(s->rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double cum = 0.0;
    bool sorted = s->n_sorted > 0; /* a cut leaves a sorted head, summed in that order */
    for (int32_t i = 0; i < n; i++) {
        if (sorted) sort_head(s, n, i + 1);
        cum += exp((double)c[i].v - mx);
        if (r < cum) {
            *token = c[i].id;
            return SLM_OK;
        }
    }
    if (sorted) sort_head(s, n, n);
    *token = c[n - 1].id;
    return SLM_OK;
}

/* True when drawing without the filter, keeping an allowed token and otherwise drawing again with
 * the filter gives exactly the filtered distribution (docs/grammar.md, "How masks are computed"):
 * - greedy (temperature 0): the argmax of all tokens (lowest id on ties), when allowed, is also the
 *   argmax of the allowed ones (lowest id on ties);
 * - temperature alone (no top-k, top-p or min-p cut, which would apply among the allowed tokens):
 *   with p the unfiltered distribution and Z = p(allowed), an allowed t comes out with probability
 *   p(t) + (1 - Z) p(t) / Z = p(t) / Z, the filtered distribution (the second draw uses fresh
 *   random bits). Biases and penalties come before the filter in both.
 * Only taken when the mask is not at hand: a cached mask makes the filtered draw cheaper than an
 * unfiltered one (it weighs the allowed tokens only). The choice depends on the filter's state
 * alone, never on the draw, so each step's distribution is the filtered one either way. */
static bool sample_lazily(const slm_sampler *s, int32_t n_vocab) {
    const samp_filter *f = &s->filter;
    if (!f->mask || !f->allows || (f->mask_at_hand && f->mask_at_hand(f->ud))) return false;
    if (s->p.temperature == 0.0f) return true;
    return (s->p.top_k <= 0 || s->p.top_k >= n_vocab) && s->p.top_p >= 1.0f && s->p.min_p <= 0.0f;
}

SLM_API slm_status slm_sampler_sample(slm_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                                      size_t n_history, int32_t *token) {
    if (!s || !logits || !token || n_vocab <= 0 || (!history && n_history)) return SLM_ERR_INVALID_ARG;
    *token = -1;
    if (sample_lazily(s, n_vocab)) {
        int32_t t = -1;
        s->unfiltered = true;
        slm_status st = draw(s, logits, n_vocab, history, n_history, &t);
        s->unfiltered = false;
        if (st == SLM_OK && s->filter.allows(s->filter.ud, t)) {
            *token = t;
            return SLM_OK;
        }
        if (st == SLM_ERR_INVALID_ARG || st == SLM_ERR_NOMEM) return st;
    }
    return draw(s, logits, n_vocab, history, n_history, token);
}

SLM_API slm_status slm_sampler_probs(slm_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                                     size_t n_history, float *probs) {
    if (!s || !logits || !probs || n_vocab <= 0 || (!history && n_history)) return SLM_ERR_INVALID_ARG;
    int32_t greedy, n;
    double mx, sum;
    slm_status st = kept_candidates(s, logits, n_vocab, history, n_history, &greedy, &n, &mx, &sum);
    if (st) return st;
    memset(probs, 0, (size_t)n_vocab * sizeof *probs);
    if (greedy >= 0) {
        probs[greedy] = 1.0f;
        return SLM_OK;
    }
    const cand *c = s->cands;
    for (int32_t i = 0; i < n; i++) probs[c[i].id] = (float)(exp((double)c[i].v - mx) / sum);
    return SLM_OK;
}

SLM_API double slm_sampler_uniform(slm_sampler *s) {
    return s ? (double)(next_u64(s->rng) >> 11) * (1.0 / 9007199254740992.0) : 0.0;
}

SLM_API slm_status slm_sampler_draw(slm_sampler *s, const float *weights, int32_t n, int32_t *token) {
    if (token) *token = -1;
    if (!s || !weights || !token || n <= 0) return SLM_ERR_INVALID_ARG;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (!(weights[i] >= 0.0f) || weights[i] == INFINITY) return SLM_ERR_RANGE;
        sum += weights[i];
    }
    if (!(sum > 0.0)) return SLM_ERR_RANGE;
    double r = slm_sampler_uniform(s) * sum, cum = 0.0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (weights[i] <= 0.0f) continue;
        last = i;
        cum += weights[i];
        if (r < cum) {
            *token = i;
            return SLM_OK;
        }
    }
    *token = last;
    return SLM_OK;
}
