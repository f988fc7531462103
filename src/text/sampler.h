/* sampler.h — the sampler's internal hook for a token filter: a layer above text/ (grammar/,
 * slm_sampler_set_constraint) installs a function that writes the allowed-token bit mask before
 * each draw. */
#ifndef SLM_TEXT_SAMPLER_H
#define SLM_TEXT_SAMPLER_H

#include "statelm.h"

/* Writes bits for ids [0, n_vocab) into mask ((n_vocab + 31) / 32 words): bit set = allowed. */
typedef slm_status (*samp_mask_fn)(void *ud, uint32_t *mask, int32_t n_vocab);

/* Installs (fn != NULL) or removes the filter. */
void samp_set_mask(slm_sampler *s, samp_mask_fn fn, void *ud);

#endif
