/* lookup.h — prompt lookup: the match search of the drafter (slm_draft_lookup) and the draft-length
 * policy of the speculation driver over it.
 *
 * The search finds the earlier occurrence whose preceding tokens agree longest with the end of the
 * history; its continuation is the draft. After i of those tokens are accepted the history ends in
 * a match of length len + i, so one table serves every draft position: the estimated probability
 * that a token drafted after a match of length L is the target's choice (learned from the verify
 * results, starting from priors measured on input-grounded tasks). The policy drafts the k that
 * maximises (1 + expected accepted tokens) / cost of a pass of 1 + k tokens in decode steps, and
 * nothing when no k beats plain decoding. The pass costs start as 1 + verify_cost * k and become
 * the measured ratios of the driver's own passes once both have been timed a few times. */
#ifndef SLM_RUNTIME_LOOKUP_H
#define SLM_RUNTIME_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOKUP_MATCH_MAX 32 /* longer matches count as this long (and end the search) */
#define LOOKUP_DRAFT_MAX 64 /* most tokens drafted in one pass (slm_spec_params.draft_max) */

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
    float hit[LOOKUP_MATCH_MAX + 1];
    float seen[LOOKUP_MATCH_MAX + 1];
    float pass_cost[LOOKUP_DRAFT_MAX + 1];  /* [k]: a pass of 1 + k tokens, in decode steps */
    double pass_s[LOOKUP_DRAFT_MAX + 1];    /* [k]: its running mean time, seconds */
    int32_t n_timed[LOOKUP_DRAFT_MAX + 1];
} lookup_policy;

void lookup_policy_init(lookup_policy *p, float verify_cost);
/* Tokens worth drafting after match m, at most k_max (0: decode plainly). */
size_t lookup_plan(const lookup_policy *p, const lookup_match *m, size_t k_max);
/* Records that the target kept n_ok of the n_draft tokens drafted after m. */
void lookup_learn(lookup_policy *p, const lookup_match *m, size_t n_draft, size_t n_ok);
/* Records that a pass of 1 + k tokens took seconds. */
void lookup_time(lookup_policy *p, size_t k, double seconds);

#endif
