/* mtp.h — the multi-token-prediction drafter: a Qwen3.5 model's MTP block (docs/spec/qwen35.md
 * §10) run as a program of its own (model/build.c mdl_build_mtp_program) in a session of its own,
 * which follows a target session created with slm_session_params.mtp.
 *
 * Invariant: rows [0, valid) of the drafter's KV cache were computed from tokens[0, valid), which
 * equal the target's history there, each paired with the target's final-norm hidden state of the
 * position before (zeros before position 0) — llama.cpp's pairing (common/speculative.cpp,
 * draft-mtp). Rows from valid on are scratch (drafts write them; the next catch-up overwrites
 * them with the target's). */
#ifndef SLM_RUNTIME_MTP_H
#define SLM_RUNTIME_MTP_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "statelm.h"

typedef struct mtp_drafter mtp_drafter;

/* A drafter for target (borrowed; created with slm_session_params.mtp), on the target's
 * kernels, threads, context size and KV type. */
slm_status mtp_create(slm_session *target, mtp_drafter **out, slm_err *e);
void mtp_destroy(mtp_drafter *d);
/* Greedy drafts after the target's history followed by `next` (the token the target has not run
 * yet, at position target->pos) into draft[0, n_max): first the drafter catches up with the
 * target's history, then each step runs the MTP block on (token, hidden state) at the next
 * position, the hidden state being the target's for the first step and the MTP's own after. */
slm_status mtp_draft(mtp_drafter *d, slm_session *target, int32_t next, int32_t *draft, size_t n_max, size_t *n_draft,
                     slm_err *e);

#endif
