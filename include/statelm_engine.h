/* statelm_engine.h — the serving engine: many generation requests over one model, scheduled on a
 * fixed set of slots (sessions). What `statelm serve` runs behind its HTTP layer (tools/serve/),
 * usable without it: submit token ids with sampler parameters, an optional grammar, stop strings
 * and a token budget; receive the generated text, ids and log-probabilities as events.
 *
 * Scheduling: a request waits in a FIFO queue until a slot is idle; it takes the idle slot whose
 * session history shares the longest token prefix with its prompt, or a kept snapshot (memory, then
 * state files in state_dir) that shares more, and prefills only what differs, CHUNK tokens per step.
 * Each step runs one unit of work per active stream (a prefill chunk, or one sampled token); the
 * decode steps of all sampling streams are one slm_session_decode_batch call (bit-identical to
 * decoding each alone). Requests with n > 1 fork the slot's session after the prompt.
 *
 * Threads: slm_engine_submit, slm_engine_cancel and slm_engine_get_stats may be called from any thread
 * at any time. The engine steps on one thread at a time: either the caller's (slm_engine_step, for
 * deterministic tests and single-threaded embedders) or its own (slm_engine_start ..
 * slm_engine_stop); never both. Events are delivered on the stepping thread, with no engine lock
 * held: a callback may call submit, cancel and stats, not step, stop or free; it should return
 * quickly (it holds up every stream). An event may arrive before slm_engine_submit has returned.
 * The pointers in an event are valid only during the callback.
 *
 * Every accepted request gets exactly one SLM_ENGINE_EVENT_DONE, last; after it the engine holds
 * nothing of the request (its grammar and user data may be freed). A refused submit changes
 * nothing. */
#ifndef STATELM_ENGINE_H
#define STATELM_ENGINE_H

#include "statelm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLM_ENGINE_MAX_N 8            /* most choices per request */
#define SLM_ENGINE_MAX_STOPS 4        /* most stop strings per request */
#define SLM_ENGINE_MAX_KEEP 32        /* control tokens a request keeps in its text */
#define SLM_ENGINE_MAX_TOP_LOGPROBS 20
#define SLM_ENGINE_MAX_THINK_CLOSE 16 /* most tokens of a thinking budget's close tag */

typedef struct slm_engine slm_engine;

/* Append-only, `size` first, as every params struct of statelm.h. */
typedef struct slm_engine_params {
    size_t size;                  /* sizeof(slm_engine_params) */
    int32_t n_slots;              /* requests generated at once; 0 = 4 */
    int32_t queue_max;            /* requests waiting beyond the slots before submit refuses (default 64; 0 none) */
    slm_session_params session;   /* every slot, fork and draft session (n_ctx: context per slot) */
    int32_t cache_mib;            /* memory for idle snapshots kept for prefix reuse (default 256; 0 none) */
    const char *state_dir;        /* snapshots evicted from memory spill here as state files; NULL: dropped */
    bool no_prefix_reuse;         /* every request prefills from position 0 */
    bool lookup;                  /* speculative decoding with prompt-lookup drafts */
    const slm_model *draft_model; /* speculative decoding with this draft model (same tokenizer), or NULL */
    int32_t draft_max;            /* most drafted tokens per step (0: slm_spec_params_default) */
    bool mtp;                     /* speculative decoding with the model's own multi-token-prediction block
                                     (Qwen3.5 with one; every slot session keeps its hidden states) */
} slm_engine_params;

/* The defaults: 4 slots, a queue of 64, slm_session_params_default, 256 MiB of snapshots. */
SLM_API slm_engine_params slm_engine_params_default(void);

/* Creates the slots' sessions over model (which must have a tokenizer and outlive the engine), and
 * indexes the state files state_dir holds for this model and context. */
SLM_API slm_status slm_engine_create(const slm_model *model, const slm_engine_params *params, slm_engine **out,
                                     char *err, size_t err_cap);
/* Stops (slm_engine_stop) and frees. NULL is a no-op. */
SLM_API void slm_engine_free(slm_engine *e);
/* The context per slot, as the sessions have it. */
SLM_API int32_t slm_engine_n_ctx(const slm_engine *e);

typedef enum slm_engine_finish {
    SLM_ENGINE_FINISH_NONE = 0, /* still generating */
    SLM_ENGINE_FINISH_STOP,     /* end of generation, a stop string, or the grammar complete */
    SLM_ENGINE_FINISH_LENGTH,   /* max_tokens or the context reached */
} slm_engine_finish;

typedef enum slm_engine_outcome {
    SLM_ENGINE_DONE_OK = 0,    /* every choice finished */
    SLM_ENGINE_DONE_CANCELLED, /* slm_engine_cancel */
    SLM_ENGINE_DONE_SHUTDOWN,  /* slm_engine_stop before it finished */
    SLM_ENGINE_DONE_FAILED,    /* an error: status and message say which */
} slm_engine_outcome;

/* One generated token: its log-probability and the top alternatives (ties to the lower id). */
typedef struct slm_engine_logprob {
    int32_t id;
    float logprob;
    int32_t n_top;
    int32_t top_id[SLM_ENGINE_MAX_TOP_LOGPROBS];
    float top_lp[SLM_ENGINE_MAX_TOP_LOGPROBS];
} slm_engine_logprob;

typedef enum slm_engine_event_kind {
    SLM_ENGINE_EVENT_CHOICE, /* a choice generated a token or finished */
    SLM_ENGINE_EVENT_DONE,   /* the request ended: the last event of it */
} slm_engine_event_kind;

typedef struct slm_engine_event {
    slm_engine_event_kind kind;
    uint64_t request;
    /* SLM_ENGINE_EVENT_CHOICE: the state of choice `choice` so far */
    int32_t choice;
    const char *text;    /* (n_text) generated text, cut before a stop string; not NUL-terminated */
    size_t n_text;
    size_t n_stable;     /* text[0, n_stable) stays as it is (the rest may begin a stop string) */
    size_t n_tokens;     /* tokens generated, end-of-generation token excluded */
    const int32_t *ids;  /* (n_ids) their ids (n_ids < n_tokens only when out of memory) */
    size_t n_ids;
    bool ids_cut;        /* a stop string cut the text: ids spell more than text */
    const slm_engine_logprob *logprobs; /* (n_logprobs) one per generated token, when asked for */
    size_t n_logprobs;
    slm_engine_finish finish;
    size_t n_think_tokens; /* tokens generated inside the think block (the request's think_close set) */
    bool think_forced;     /* the thinking budget ran out: the close tag was written, not sampled */
    /* SLM_ENGINE_EVENT_DONE */
    slm_engine_outcome outcome;
    slm_status status;   /* SLM_OK unless outcome is FAILED */
    const char *message; /* what failed ("" otherwise) */
    size_t n_prompt;     /* prompt tokens */
    size_t n_cached;     /* of them, reused from the slot or a kept state */
} slm_engine_event;

typedef void (*slm_engine_event_fn)(void *user, const slm_engine_event *ev);

/* Append-only, `size` first. */
typedef struct slm_engine_request {
    size_t size;                   /* sizeof(slm_engine_request) */
    const int32_t *ids;            /* (n_ids) the prompt, copied; 1 <= n_ids < n_ctx */
    size_t n_ids;
    slm_sampler_params sampler;    /* copied (logit_bias too); choice i samples with seed + i */
    const slm_grammar *grammar;    /* output constraint or NULL; borrowed until the DONE event */
    int32_t max_tokens;            /* most generated tokens per choice, >= 1 */
    int32_t n;                     /* choices, 1..SLM_ENGINE_MAX_N; 0 = 1 */
    const char *const *stops;      /* (n_stops) stop strings, copied; empty ones are ignored */
    int32_t n_stops;               /* 0..SLM_ENGINE_MAX_STOPS */
    bool logprobs;                 /* report each token's log-probability ... */
    int32_t top_logprobs;          /* ... and this many alternatives, 0..SLM_ENGINE_MAX_TOP_LOGPROBS */
    bool ignore_eos;               /* end-of-generation tokens are text (not with a grammar) */
    slm_engine_event_fn on_event;  /* required */
    void *user;                    /* passed to on_event */
    /* Thinking. With think_close set, each choice counts the tokens it generates inside its think
     * block: from its start when think_in_prompt (the prompt ended inside an open block), else
     * from where its text holds think_open; until its text holds think_close (the first block
     * only). With think_close_ids too, a thinking budget: once a choice has generated think_budget
     * tokens inside the block, its next tokens are think_close_ids, written instead of sampled
     * (the answer follows, sampled again); a grammar must allow them. Speculation waits for the
     * block's end. All copied. */
    const char *think_open, *think_close;
    bool think_in_prompt;
    const int32_t *think_close_ids; /* (n_think_close_ids): the close tag's ids; NULL: no budget */
    int32_t n_think_close_ids;      /* 0..SLM_ENGINE_MAX_THINK_CLOSE */
    int32_t think_budget;           /* >= 0 (0: the block is closed at once) */
    /* id_slot: run on slot `slot` (0..n_slots-1) only, waiting for it when busy (requests queued
     * behind it that another slot can take go first) */
    bool pin_slot;
    int32_t slot;
    const int32_t *keep_ids;       /* (n_keep_ids) control tokens whose text the answer keeps (a call
                                    * format's markers: slm_tool_format_markers), copied; the text
                                    * drops every other control token */
    int32_t n_keep_ids;            /* 0..SLM_ENGINE_MAX_KEEP */
} slm_engine_request;

/* size set, n = 1, sampler = slm_sampler_params_default(), everything else 0. */
SLM_API slm_engine_request slm_engine_request_default(void);

/* Queues a request; *id names it in events and slm_engine_cancel. Refused, with nothing changed:
 * SLM_ERR_INVALID_ARG (a field out of its range, a token id outside the vocabulary, ignore_eos with
 * a grammar), SLM_ERR_CONTEXT_FULL (n_ids >= n_ctx), SLM_ERR_RANGE (queue_max requests already
 * wait), SLM_ERR_ABORTED (the engine is stopping), SLM_ERR_NOMEM; err says which. */
SLM_API slm_status slm_engine_submit(slm_engine *e, const slm_engine_request *req, uint64_t *id, char *err,
                                     size_t err_cap);
/* Ends request id at the next step (its DONE event says CANCELLED unless it finished first).
 * SLM_ERR_NOT_FOUND when no such request is queued or running. */
SLM_API slm_status slm_engine_cancel(slm_engine *e, uint64_t id);

/* One scheduling step on the caller's thread: admits queued requests into idle slots, then one unit
 * of work per active stream (one prefill chunk, one sampled and decoded token, or one speculation
 * step). *n_pending (may be NULL): requests queued or running after it. SLM_ERR_STATE while the
 * engine's own thread runs. */
SLM_API slm_status slm_engine_step(slm_engine *e, int32_t *n_pending);
/* Starts the engine's thread, which steps while there is work and sleeps otherwise. */
SLM_API slm_status slm_engine_start(slm_engine *e);
/* Refuses new requests, ends queued and running ones (DONE with SHUTDOWN unless already finished)
 * and, when started, joins the engine's thread. Idempotent. */
SLM_API void slm_engine_stop(slm_engine *e);

/* What slm_engine_slot does to a slot's session. */
typedef enum slm_engine_slot_action {
    SLM_ENGINE_SLOT_SAVE = 1, /* slm_session_save to path */
    SLM_ENGINE_SLOT_RESTORE,  /* slm_session_load from path: the next request sharing its history continues it */
    SLM_ENGINE_SLOT_ERASE,    /* slm_session_reset */
} slm_engine_slot_action;
/* Saves, restores or erases the session of slot (0..n_slots-1), between steps on the stepping
 * thread (the caller waits for the engine's thread, or runs it itself when the engine is stepped by
 * hand). *n_tokens (may be NULL): the history saved, restored or erased. SLM_ERR_STATE when the slot
 * is generating, SLM_ERR_RANGE for a slot out of range, slm_session_save/load's status otherwise (a
 * file of another model or context: SLM_ERR_STATE); err says why. */
SLM_API slm_status slm_engine_slot(slm_engine *e, int32_t slot, slm_engine_slot_action action, const char *path,
                                   size_t *n_tokens, char *err, size_t err_cap);

typedef struct slm_engine_stats {
    uint64_t n_submitted, n_completed, n_cancelled, n_failed; /* failed includes shut down */
    uint64_t n_generated_tokens, n_reused_tokens;             /* reused: prompt tokens not recomputed */
    int32_t n_queued, n_busy, n_slots;                        /* now */
    double decode_seconds;                                    /* time in decode and speculation steps */
    uint64_t n_decoded_tokens;                                /* tokens those steps produced */
    size_t n_cached_states, n_state_files;                    /* kept snapshots: in memory, spilled */
    uint64_t cached_state_bytes;
    uint64_t n_drafted, n_accepted, n_replays;                /* speculation */
    uint64_t n_spec_steps;                                    /* speculation: verify passes (one per draft) */
    uint64_t n_batch_steps, n_batch_slots, n_batch_fallbacks; /* batched decode calls, streams in them, refusals */
    int32_t batch_max;                                        /* most streams in one batched decode call */
} slm_engine_stats;

SLM_API void slm_engine_get_stats(slm_engine *e, slm_engine_stats *out);

/* One slot as slm_engine_slots reports it. */
typedef struct slm_engine_slot_info {
    int32_t id;
    bool busy;            /* a request is being generated on it */
    uint64_t request;     /* that request's id (0 when idle) */
    size_t n_prompt;      /* its prompt tokens */
    size_t n_generated;   /* tokens its first choice has generated so far */
    size_t n_history;     /* tokens in the slot's session (its cached prefix when idle) */
} slm_engine_slot_info;

/* The slots now: up to cap entries into out (*n: n_slots). Taken between steps, like
 * slm_engine_slot (the caller waits for the engine's thread, or reads them itself when the engine
 * is stepped by hand). */
SLM_API slm_status slm_engine_slots(slm_engine *e, slm_engine_slot_info *out, int32_t cap, int32_t *n);

#ifdef __cplusplus
}
#endif
#endif
