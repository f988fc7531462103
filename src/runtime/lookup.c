/* lookup.c — prompt lookup's match search and draft-length policy (see lookup.h). */
#include "runtime/lookup.h"

lookup_match lookup_find(const int32_t *history, size_t n) {
    lookup_match m = {0, 0, 0, false};
    if (!history || n < 2) return m;
    int32_t last = history[n - 1];
    size_t best_end = 0;
    for (size_t i = n - 1; i-- > 0;) { /* i: the end of an earlier occurrence, most recent first */
        if (history[i] != last) continue;
        int32_t len = 1;
        while (len < LOOKUP_MATCH_MAX && (size_t)len <= i && history[i - (size_t)len] == history[n - 1 - (size_t)len])
            len++;
        if (len > m.len) {
            m.len = len;
            best_end = i;
            m.ambiguous = false;
            if (len == LOOKUP_MATCH_MAX) break;
        } else if (len == m.len && history[i + 1] != history[best_end + 1]) {
            m.ambiguous = true;
        }
    }
    if (m.len > 0) {
        m.start = best_end + 1;
        m.n_avail = n - m.start;
    }
    return m;
}

/* Prior P(accepted) by match length, measured with SmolLM2-135M on eight input-grounded tasks
 * (bench/spec_lookup.sh): one-token matches are right about 30% of the time, ambiguous ones less. */
static float prior(int32_t len) {
    static const float short_len[] = {0.15f, 0.3f, 0.45f, 0.7f, 0.8f, 0.8f, 0.87f, 0.87f, 0.87f};
    if (len < (int32_t)(sizeof short_len / sizeof short_len[0])) return short_len[len];
    return len < 16 ? 0.93f : len < LOOKUP_MATCH_MAX ? 0.96f : 0.98f;
}

#define PRIOR_WEIGHT 2.0f /* the prior counts as this many observations */
#define DECAY 0.97f       /* per observation of the same row */

void lookup_policy_init(lookup_policy *p, float verify_cost) {
    for (int32_t l = 0; l <= LOOKUP_MATCH_MAX; l++) {
        p->hit[l] = prior(l) * PRIOR_WEIGHT;
        p->seen[l] = PRIOR_WEIGHT;
    }
    for (int32_t k = 0; k <= LOOKUP_DRAFT_MAX; k++) {
        p->pass_cost[k] = 1.0f + verify_cost * (float)k;
        p->pass_s[k] = 0.0;
        p->n_timed[k] = 0;
    }
}

static int32_t row(const lookup_match *m, size_t i) {
    if (i == 0 && m->ambiguous) return 0;
    size_t l = (size_t)m->len + i;
    return l > LOOKUP_MATCH_MAX ? LOOKUP_MATCH_MAX : (int32_t)l;
}

size_t lookup_plan(const lookup_policy *p, const lookup_match *m, size_t k_max) {
    if (m->len == 0) return 0;
    if (k_max > LOOKUP_DRAFT_MAX) k_max = LOOKUP_DRAFT_MAX;
    size_t n = m->n_avail < k_max ? m->n_avail : k_max, best_k = 0;
    double best = 1.0, expected = 1.0, all_kept = 1.0; /* tokens per pass: 1 + E[accepted] */
    for (size_t i = 0; i < n; i++) {
        int32_t r = row(m, i);
        all_kept *= (double)p->hit[r] / (double)p->seen[r];
        expected += all_kept;
        double gain = expected / (double)p->pass_cost[i + 1];
        if (gain > best * (1.0 + 1e-6)) {
            best = gain;
            best_k = i + 1;
        }
    }
    return best_k;
}

void lookup_learn(lookup_policy *p, const lookup_match *m, size_t n_draft, size_t n_ok) {
    if (m->len == 0) return;
    for (size_t i = 0; i < n_draft && i <= n_ok; i++) { /* the tokens the target judged */
        int32_t r = row(m, i);
        p->hit[r] = p->hit[r] * DECAY + (i < n_ok ? 1.0f : 0.0f);
        p->seen[r] = p->seen[r] * DECAY + 1.0f;
    }
}

#define TIMED_MIN 3 /* passes of each size timed before their measured ratio replaces the prior */

void lookup_time(lookup_policy *p, size_t k, double seconds) {
    if (k > LOOKUP_DRAFT_MAX || !(seconds > 0.0)) return;
    p->pass_s[k] = p->n_timed[k] ? 0.8 * p->pass_s[k] + 0.2 * seconds : seconds;
    if (p->n_timed[k] < TIMED_MIN) p->n_timed[k]++;
    if (p->n_timed[0] < TIMED_MIN) return;
    for (size_t j = k ? k : 1; j <= (k ? k : LOOKUP_DRAFT_MAX); j++) { /* a new decode time rescales all */
        if (p->n_timed[j] < TIMED_MIN) continue;
        double ratio = p->pass_s[j] / p->pass_s[0];
        p->pass_cost[j] = (float)(ratio > 1.0 ? ratio : 1.0); /* a verify costs at least a decode step */
    }
}
