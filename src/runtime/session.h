/* session.h — struct slm_session: one instance of a model's Program states plus its position, the
 * executor that runs a Program function over a backend, and the token history.
 *
 * Invariants:
 *  1. Positions [0, pos) of every KV state hold the keys/values of history[0, pos); cells at and
 *     beyond pos are scratch (a failed call may have written there). A KV ring of R rows (sliding
 *     layers) holds positions [pos - W, pos) of its window W at rows P mod R; its other rows are
 *     scratch (a call writes at most R - W rows: program max_call_tokens).
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
#include "compile/plan.h"
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
    bool ring;             /* a sliding-window KV ring (attn.ring): written in place at pos mod R */
    bool written;          /* written during the running call (its back buffer is current) */
} sess_state;

/* States a rollback cannot truncate, so checkpoints and undo records copy them whole: the
 * double-buffered (conv, recurrent) states and the KV rings. */
static inline bool sess_state_checkpointed(const sess_state *ss) { return ss->double_buffered || ss->ring; }

/* Times of the plan's steps over the session's calls while recording (slm_plan_profile,
 * runtime/profile.c): a sample per step per completed call, up to cap_calls calls per function.
 * The timed steps run exactly as untimed ones; a failed call leaves no samples. */
typedef struct sess_profile {
    bool recording;
    int32_t cap_calls;
    int32_t n_calls[G_MAX_FUNCTIONS];
    double *step_s[G_MAX_FUNCTIONS]; /* (cap_calls x n_steps of the function), call-major */
    double *call_s[G_MAX_FUNCTIONS]; /* (cap_calls) wall seconds of each call */
} sess_profile;

/* Called with every step the executor runs, before it runs (tests record what executes). */
typedef void (*sess_trace_fn)(void *user, int32_t fn, int32_t step, const int32_t *nodes, int32_t n_nodes);

struct slm_session {
    const slm_model *model;
    slm_allocator alloc;
    slm_plan *plan;        /* what the session executes (owned): plan->legal and its steps */
    g_program *prog;       /* plan->legal */
    int32_t fn_prefill, fn_decode;
    int32_t fn_verify;     /* logits of every column, or -1 (runtime/spec.c) */
    int32_t fn_embed;      /* hidden states of every column, or -1 (runtime/embed.c) */
    backend *be;
    int32_t n_threads;
    int32_t n_ctx;
    slm_dtype kv_dtype;    /* the K states' dtype */
    slm_dtype kv_dtype_v;  /* the V states' */
    sess_state *states;    /* (prog->n_states) */
    uint8_t *state_block;  /* every states[i].buf[b], 64-byte aligned */
    memplan plans[G_MAX_FUNCTIONS];
    uint8_t *arena;
    size_t arena_bytes;
    void **tensor_ptr;     /* (prog->n_tensors) pointers bound during a call */
    int32_t pos;
    int32_t *history;      /* (n_ctx) */
    int32_t n_vocab;       /* logits per step */
    int32_t n_token_ids;   /* valid token ids are [0, n_token_ids) */
    float *logits;         /* (n_vocab) of the last processed token */
    float *mtp_hist;       /* NULL, or (n_ctx, n_embd): row P = the final-norm hidden state of position P
                              as the last call that ran it left it (slm_session_params.mtp; rows of
                              positions >= pos are scratch) */
    int32_t mtp_embd;      /* n_embd of mtp_hist rows */
    bool logits_valid;     /* logits belong to history[pos - 1] */
    sess_profile *profile; /* NULL unless profiling (runtime/profile.c) */
    sess_trace_fn trace;   /* NULL unless a test traces the executor */
    void *trace_user;
    slm_abort_fn abort_fn;
    void *abort_user_data;
    slm_err err;
    /* checkpoints (runtime/state.c) */
    bool has_recurrent;    /* any checkpointed state (sess_state_checkpointed): rollback replays */
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
    /* the last slm_session_verify (runtime/spec.c), acceptable while verify_k > 0 */
    int32_t verify_k;        /* tokens verified; 0 = nothing to accept (cleared by every call) */
    int32_t verify_pos;      /* position before the verify */
    int32_t verify_fn;       /* function of the verify's only call, -1 when it took several */
    bool verify_had_logits;  /* logits were valid before the verify */
    bool verify_in_place;    /* the states before the verify are where verify_front says (one call of a plan
                                that rebuilds: a written state's back buffer, else its front), not saved */
    uint8_t *verify_front;   /* (prog->n_states) each state's front before the verify */
    uint8_t *verify_state;   /* (ckpt_bytes) checkpointed states before the verify when not in place;
                                allocated at the first such verify */
    float *verify_logits;    /* (verify_cap, n_vocab): the logits before the verify, then the rows of the
                                verified tokens when they do not stay in the arena */
    int32_t verify_cap;
    const float *verify_rows; /* (k, n_vocab) the verified tokens' logits: the call's own in the arena
                                 (one call, and no accept of it replays, so nothing runs before accept
                                 reads them), else verify_logits + n_vocab */
    uint64_t n_accept_replays; /* accepts that replayed the kept tokens (the accept plan replays, or the
                                  verify took several calls) instead of running the accept plan */
    /* slm_session_decode_batch calls led by this session (runtime/batch.c): the activations of
     * the batched steps, one column per session */
    memplan batch_plan;
    uint8_t *batch_arena;
    size_t batch_arena_bytes;
    void **batch_ptr;        /* (prog->n_tensors) bound to batch_arena */
    struct batch_serial *batch_serial; /* NULL, or one-thread backends for per-session tasks */
};

/* Creates a session that runs prog (owned by the session from here on, also on failure), compiled
 * for the CPU target (check, legalise, lower on the session's backend). model may be NULL for
 * programs built directly (tests, field-report reproductions); prog needs a "decode" function and
 * may have a "prefill" function. n_threads 0 = the model's default (1 without one); kernels as in
 * slm_session_params (NULL = the best this CPU has). */
slm_status sess_create_program(const slm_model *model, g_program *prog, int32_t n_threads, int32_t n_ctx,
                               slm_dtype kv_dtype, const char *kernels, slm_session **out, slm_err *e);
/* Creates a session that executes pl (owned from here on, also on failure), which must have been
 * lowered on be (owned likewise): pl->legal is the session's Program. */
slm_status sess_create_plan(const slm_model *model, slm_plan *pl, backend *be, int32_t n_threads, slm_session **out,
                            slm_err *e);
/* The backend of the plan's target for a session: n_threads, kernels and no_repack as in
 * slm_session_params; shares model's per-model cache. */
slm_status sess_backend(const slm_model *model, const tgt_profile *t, int32_t n_threads, const char *kernels,
                        bool no_repack, backend **out, slm_err *e);

/* Runs function fn over tokens[0, n) at the current position; on success commits states, pos and
 * history and copies the logits (a function whose output is not logits leaves none valid). Inputs
 * must already be validated. */
slm_status sess_run(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n);
/* The executor in parts (sess_run and runtime/batch.c): sess_bind binds every tensor of fn for a
 * call over n tokens (the arena by its memory plan, direct_write values to back buffers) and
 * clears the states' written flags; sess_run_step runs step i of fn over n tokens at pos;
 * sess_states_finish makes the back buffers written during the call current (commit) or forgets
 * them; sess_tensor_data is where tensor t is bound. */
slm_status sess_bind(slm_session *s, int32_t fn, int32_t n);
slm_status sess_run_step(slm_session *s, int32_t fn, int32_t i, int64_t n, int32_t pos);
/* Releases the one-thread backends of s's batch calls (runtime/batch.c); accepts NULL fields. */
void sess_batch_serial_free(slm_session *s);
void sess_states_finish(slm_session *s, bool commit);
void *sess_tensor_data(slm_session *s, int32_t t);
/* Feeds tokens[0, n) in Program calls split at checkpoint positions, taking checkpoints. With
 * atomic, a failure restores the state before the call (undo record); without, the caller owns the
 * undo record. Inputs must already be validated. */
slm_status sess_feed(slm_session *s, const int32_t *tokens, int32_t n, bool atomic);
/* sess_feed running function fn for every call (-1: decode for one token, else prefill), and
 * after(user, s, fn, first, len) after each successful call over tokens[first, first + len), while
 * that call's output is still bound (sess_tensor_data of the function's output). */
typedef void (*sess_after_call_fn)(void *user, slm_session *s, int32_t fn, int32_t first, int32_t len);
slm_status sess_feed_fn(slm_session *s, int32_t fn, const int32_t *tokens, int32_t n, bool atomic,
                        sess_after_call_fn after, void *user);
/* Logits of the call that just ran function fn ((n_vocab, rows) floats in the arena; valid until
 * the next call). */
const float *sess_call_logits(slm_session *s, int32_t fn);
/* Runs the plan's accept steps (compile/plan.h, "the accept plan") after the call of the verify
 * function (at pos) that just ran: every double-buffered (conv, recurrent) state becomes its value
 * after the first n_keep tokens of the call, from the states before the call and the activations
 * of the call that its memory plan keeps; KV states are left alone. The states before: before (in
 * checkpoint layout), or with before NULL where verify_front says (the back buffer of a state the
 * call wrote, which the step then rebuilds in place). Each step is reported to the trace hook as
 * function PLAN_FN_ACCEPT. SLM_ERR_STATE when the plan replays instead. Allocation failures come
 * before any write and leave the session unchanged; a backend failure in a step after that leaves
 * the current states as they were, but in place a state before the call may be lost: then
 * verify_k is cleared (the verify can no longer be accepted in part). */
slm_status sess_run_accept(slm_session *s, const uint8_t *before, int32_t pos, int32_t n_keep);
/* Validates n tokens for feeding at the current position (ids in range, room in the context). */
slm_status sess_check_tokens(slm_session *s, const int32_t *tokens, size_t n);
/* Bytes of one position of KV state i (the row along its position axis), 0 for other states. */
size_t sess_kv_row_bytes(const slm_session *s, int32_t i);

/* runtime/profile.c: releases s->profile (accepts none). */
void sess_profile_free(slm_session *s);

/* runtime/state.c */
slm_status sess_ckpt_init(slm_session *s, int32_t interval, int32_t budget_mib, const char *dir, slm_err *e);
void sess_ckpt_take(slm_session *s);
void sess_ckpt_drop_after(slm_session *s, int32_t pos);
void sess_ckpt_free(slm_session *s);
/* Undo record: conv/recurrent states, position, and KV rows and history from `from` to pos. */
slm_status sess_undo_begin(slm_session *s, int32_t from);
void sess_undo_restore(slm_session *s);
/* Copies the front buffers of the checkpointed states to dst (ckpt_bytes) / loads them (NULL = zero). */
void sess_states_save(const slm_session *s, uint8_t *dst);
void sess_states_load(slm_session *s, const uint8_t *src);
/* Parses a state file image (data[0, size), the bytes slm_session_save writes) into a snapshot
 * checked against s; on success *out is a new snapshot for slm_session_restore (caller destroys),
 * on failure *out is NULL and s->err names the reason. s itself does not change. */
slm_status sess_parse_state_file(slm_session *s, const uint8_t *data, size_t size, slm_snapshot **out);

/* First index of the largest of v[0, n): greedy decoding's choice of a logits row. */
static inline int32_t sess_argmax(const float *v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

#endif
