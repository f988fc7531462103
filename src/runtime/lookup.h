/* lookup.h — prompt lookup: the match search of the drafter (slm_draft_lookup) and the draft-length
 * policy of the speculation driver over it.
 *
 * The search finds the earlier occurrence whose preceding tokens agree longest with the end of the
 * history; its continuation is the draft. After i of those tokens are accepted the history ends in
 * a match of length len + i, so one table serves every draft position: the estimated probability
 * that a token drafted after a match of length L is the target's choice (learned from the verify
 * results, starting from priors measured on input-grounded tasks). The policy drafts the k that
 * maximises (1 + expected accepted tokens) / (1 + verify_cost * k), verify tokens per decode-step
 * cost, and nothing when no k beats plain decoding. */
#ifndef SLM_RUNTIME_LOOKUP_H
#define SLM_RUNTIME_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOKUP_MATCH_MAX 32 /* longer matches count as this long (and end the search) */

typedef struct lookup_match {
    size_t start;   /* index in the history of the continuation's first token */
    size_t n_avail; /* tokens from start to the end of the history (>= 1 when len > 0) */
    int32_t len;    /* tokens matched, 1..LOOKUP_MATCH_MAX; 0 = no earlier occurrence of the last token */
    bool ambiguous; /* another occurrence matched as long and continues with a different token */
} lookup_match;

/* The longest match of the end of history[0, n) (the most recent among equals). */
lookup_match lookup_find(const int32_t *history, size_t n);

/* Acceptance estimates: row 0 is the first token after an ambiguous match, row L a token drafted
 * where the history ends in a match of length L (capped). hit / seen is the estimate; both decay. */
typedef struct lookup_policy {
    float verify_cost;
    float hit[LOOKUP_MATCH_MAX + 1];
    float seen[LOOKUP_MATCH_MAX + 1];
} lookup_policy;

void lookup_policy_init(lookup_policy *p, float verify_cost);
/* Tokens worth drafting after match m, at most k_max (0: decode plainly). */
size_t lookup_plan(const lookup_policy *p, const lookup_match *m, size_t k_max);
/* Records that the target kept n_ok of the n_draft tokens drafted after m. */
void lookup_learn(lookup_policy *p, const lookup_match *m, size_t n_draft, size_t n_ok);

#endif
