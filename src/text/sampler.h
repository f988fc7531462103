/* sampler.h — the sampler's internal hook for a token filter: a layer above text/ (grammar/,
 * slm_sampler_set_constraint) installs the functions that write the allowed-token bit mask and that
 * say whether a single token is allowed. */
#ifndef SLM_TEXT_SAMPLER_H
#define SLM_TEXT_SAMPLER_H

#include "statelm.h"

/* A token filter. mask writes bits for ids [0, n_vocab) into ((n_vocab + 31) / 32) words: bit set
 * = allowed. allows (may be NULL) says whether one token is allowed, exactly as mask's bit would;
 * mask_at_hand says whether mask costs no more than a copy now (e.g. cached). When allows is set and
 * the mask is not at hand, slm_sampler_sample draws lazily where that gives the same distribution
 * (sampler.c, sample_lazily): it draws without the filter, keeps the token when allows says yes,
 * and only otherwise builds the mask and draws again from the allowed tokens. */
typedef struct samp_filter {
    slm_status (*mask)(void *ud, uint32_t *mask, int32_t n_vocab);
    bool (*allows)(void *ud, int32_t token);
    bool (*mask_at_hand)(void *ud);
    void *ud;
} samp_filter;

/* Installs (f != NULL, f->mask != NULL; copied) or removes the filter. */
void samp_set_filter(slm_sampler *s, const samp_filter *f);

#endif
