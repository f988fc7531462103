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
 *  4. Checkpoints hold the conv and recurrent states after history[0, ckpt.pos), for ascending
 *     positions in (0, pos]; position 0 is the zero state and is never stored.
 *  5. A call that runs several Program calls (multi-chunk prefill, rollback replay, sync) keeps an
 *     undo record and restores it on failure, so every public call is all-or-nothing.
 * Transitions: create -> (prefill | decode | rollback | sync | restore | load)* ; reset returns to
 * pos 0 with zeroed states and no checkpoints. */
#ifndef SLM_RUNTIME_SESSION_H
#define SLM_RUNTIME_SESSION_H

#include "backend/backend.h"
#include "compile/memplan.h"
#include "graph/graph.h"
#include "model/model.h"

typedef struct sess_ckpt {
    int32_t pos;
    uint8_t *data;   /* (ckpt_bytes): front buffers of the double-buffered states, or NULL if spilled */
    char *path;      /* spilled file, or NULL */
} sess_ckpt;

typedef struct sess_state {
    size_t bytes;          /* allocated bytes of one buffer */
    uint8_t *buf[2];       /* buf[front] is current; buf[1 - front] exists when double_buffered */
    int front;
    bool double_buffered;
    bool written;          /* written during the running call (its back buffer is current) */
} sess_state;

/* Time per op kind over the session's Program calls, kept when slm_session_params.profile is set
 * and printed to stderr when the session is destroyed (a diagnostic for benchmarks;
 * the timed nodes run exactly as untimed ones). A function's first call is not counted: it repacks
 * the weights it reads. */
typedef struct sess_profile {
    bool seen[G_MAX_FUNCTIONS]; /* the function has completed a call */
    double seconds[G_OP_COUNT];
    int64_t calls[G_OP_COUNT];
    int64_t tokens;      /* tokens processed by the timed calls */
    double call_seconds; /* wall time of those calls: kernels plus the executor between them */
} sess_profile;

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
    uint8_t *state_block;  /* every states[i].buf[b], 64-byte aligned */
    memplan plans[G_MAX_FUNCTIONS];
    uint8_t *arena;
    size_t arena_bytes;
    void **tensor_ptr;     /* (prog->n_tensors) pointers bound during a call */
    int32_t *direct_state; /* (prog->n_tensors) state whose back buffer the tensor is computed into
                            * (its only use is a full write of that state), or -1 */
    uint8_t *conv_step;    /* (prog->n_nodes) nodes from a CONCAT that runs a causal-conv step as one
                            * backend job (find_conv_steps), else 0 */
    int32_t pos;
    int32_t *history;      /* (n_ctx) */
    int32_t n_vocab;       /* logits per step */
    int32_t n_token_ids;   /* valid token ids are [0, n_token_ids) */
    float *logits;         /* (n_vocab) of the last processed token */
    bool logits_valid;     /* logits belong to history[pos - 1] */
    sess_profile *profile; /* NULL unless slm_session_params.profile is set */
    slm_abort_fn abort_fn;
    void *abort_user_data;
    slm_err err;
    /* checkpoints (runtime/state.c) */
    bool has_recurrent;    /* any double-buffered (conv / recurrent) state */
    size_t ckpt_bytes;     /* bytes of one checkpoint */
    int32_t ckpt_interval; /* 0 = no interval checkpoints */
    bool ckpt_at_prefill_end;
    size_t ckpt_budget;    /* bytes of in-memory checkpoints */
    char *ckpt_dir;        /* NULL = thin instead of spilling */
    uint64_t uid;          /* distinguishes spill files of sessions in one process */
    int32_t n_ckpt, cap_ckpt;
    sess_ckpt *ckpts;
    int32_t *ckpt_pos;     /* (cap_ckpt) positions for slm_session_checkpoints */
    /* undo record of the running call */
    uint8_t *undo;         /* (ckpt_bytes) */
    uint8_t *undo_kv;      /* KV rows [undo_from, undo_pos) of every KV state, then history */
    size_t undo_kv_cap;
    int32_t undo_pos, undo_from;
};

/* Creates a session that runs prog (owned by the session from here on, also on failure). model may
 * be NULL for programs built directly (tests, field-report reproductions); prog needs a "decode"
 * function and may have a "prefill" function. n_threads 0 = the model's default (1 without one).
 * opts gives kernels, no_repack and profile (slm_session_params); NULL = their defaults. */
slm_status sess_create_program(const slm_model *model, g_program *prog, int32_t n_threads, int32_t n_ctx,
                               slm_dtype kv_dtype, const slm_session_params *opts, slm_session **out, slm_err *e);

/* Runs function fn over tokens[0, n) at the current position; on success commits states, pos and
 * history and copies the logits. Inputs must already be validated. */
slm_status sess_run(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n);
/* Feeds tokens[0, n) in Program calls split at checkpoint positions, taking checkpoints. With
 * atomic, a failure restores the state before the call (undo record); without, the caller owns the
 * undo record. Inputs must already be validated. */
slm_status sess_feed(slm_session *s, const int32_t *tokens, int32_t n, bool atomic);
/* Validates n tokens for feeding at the current position (ids in range, room in the context). */
slm_status sess_check_tokens(slm_session *s, const int32_t *tokens, size_t n);
/* Bytes of one position of KV state i (the row along its position axis), 0 for other states. */
size_t sess_kv_row_bytes(const slm_session *s, int32_t i);

/* runtime/state.c */
slm_status sess_ckpt_init(slm_session *s, int32_t interval, int32_t budget_mib, const char *dir, slm_err *e);
void sess_ckpt_take(slm_session *s);
void sess_ckpt_drop_after(slm_session *s, int32_t pos);
void sess_ckpt_free(slm_session *s);
/* Undo record: conv/recurrent states, position, and KV rows and history from `from` to pos. */
slm_status sess_undo_begin(slm_session *s, int32_t from);
void sess_undo_restore(slm_session *s);
/* Parses a state file image (data[0, size), the bytes slm_session_save writes) into a snapshot
 * checked against s; on success *out is a new snapshot for slm_session_restore (caller destroys),
 * on failure *out is NULL and s->err names the reason. s itself does not change. */
slm_status sess_parse_state_file(slm_session *s, const uint8_t *data, size_t size, slm_snapshot **out);

#endif
