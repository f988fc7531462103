/* session.h — struct slm_session: one instance of a model's Program states plus its position, the
 * executor that runs a Program function over a backend, and the token history.
 *
 * Invariants:
 *  1. Positions [0, pos) of every KV state hold the keys/values of history[0, pos); cells at and
 *     beyond pos are scratch (a failed call may have written there).
 *  2. Conv and recurrent states are the state after history[0, pos). They are double-buffered: a
 *     call writes into the back buffer and only a successful call swaps it to the front, so a
 *     failed call (bad input, abort, out of memory) leaves the session exactly as it was.
 *  3. pos == n_history <= n_ctx.
 * Transitions: create -> (prefill | decode)* ; reset returns to pos 0 with zeroed states. */
#ifndef SLM_RUNTIME_SESSION_H
#define SLM_RUNTIME_SESSION_H

#include "backend/backend.h"
#include "compile/memplan.h"
#include "graph/graph.h"
#include "model/model.h"

typedef struct sess_state {
    size_t bytes;          /* allocated bytes of one buffer */
    uint8_t *buf[2];       /* buf[front] is current; buf[1 - front] exists when double_buffered */
    int front;
    bool double_buffered;
    bool written;          /* written during the running call (its back buffer is current) */
} sess_state;

struct slm_session {
    const slm_model *model;
    slm_allocator alloc;
    g_program *prog;
    int32_t fn_prefill, fn_decode;
    backend *be;
    int32_t n_threads;
    int32_t n_ctx;
    slm_dtype kv_dtype;
    sess_state *states;    /* (prog->n_states) */
    memplan plans[G_MAX_FUNCTIONS];
    uint8_t *arena;
    size_t arena_bytes;
    void **tensor_ptr;     /* (prog->n_tensors) pointers bound during a call */
    int32_t pos;
    int32_t *history;      /* (n_ctx) */
    int32_t n_vocab;       /* logits per step */
    int32_t n_token_ids;   /* valid token ids are [0, n_token_ids) */
    float *logits;         /* (n_vocab) of the last processed token */
    slm_abort_fn abort_fn;
    void *abort_user_data;
    slm_err err;
};

/* Creates a session that runs prog (owned by the session from here on, also on failure). model may
 * be NULL for programs built directly (tests, field-report reproductions); prog needs a "decode"
 * function and may have a "prefill" function. n_threads 0 = the model's default (1 without one). */
slm_status sess_create_program(const slm_model *model, g_program *prog, int32_t n_threads, int32_t n_ctx,
                               slm_dtype kv_dtype, slm_session **out, slm_err *e);

/* Runs function fn over tokens[0, n) at the current position; on success commits states, pos and
 * history and copies the logits. Inputs must already be validated. */
slm_status sess_run(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n);

#endif
