/* engine.h — the serving engine's insides (include/statelm_engine.h is its API), shared by
 *   engine.c  requests in and out (submit, cancel, events, DONE), stepping, the engine's thread,
 *             create and free;
 *   prefix.c  where a request starts: the idle slot with the longest common prefix, or a kept
 *             snapshot (memory, LRU under cache_mib) or state file that shares more;
 *   stream.c  a generation on one session: prefill chunks, forks for n > 1, sampling under the
 *             sampler and constraint, stop strings, speculation, and the batched decode step.
 *
 * Memory: everything the engine allocates goes through the model's allocator (e->a, base/alloc.h),
 * as its sessions' allocations do.
 *
 * Ownership and locking: e->mu guards the queue, the list of live requests, every request's
 * `cancelled` flag, e->stopping and the counters. Everything else — sessions, streams, samplers,
 * the cache, a request's choices and refs once it left the queue — belongs to the stepping thread
 * (slm_engine_step's caller or the engine's own thread) and is touched by it only. Events are sent
 * from the stepping thread with e->mu released.
 *
 * A request's refs count the queue (until popped) or the streams working on it, plus one while it
 * has not sent DONE; it is freed at 0. State reuse: a request goes to the idle slot whose history
 * shares the longest prefix with its prompt; a kept snapshot (memory under cache_mib, LRU) or state
 * file that shares more is restored first; slm_session_sync then computes only what differs. State
 * file names are a hash of the token history seeded with the model's fingerprint and the context,
 * never request data.
 *
 * Speculation (lookup, draft_model): a stream past its prompt (a fork: past its first token) without
 * logprobs or a grammar generates by slm_spec_step, several tokens per weight pass, outside
 * eng_decode_all(); each stream has its own driver (and draft session). */
#ifndef SLM_SERVE_ENGINE_H
#define SLM_SERVE_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "statelm_engine.h"

#define CHUNK 64 /* prefill tokens per step */
#define MAX_STATE_FILES 256

/* One choice of a request, as generated so far. */
typedef struct choice {
    buf text;                 /* generated text, cut at a stop string */
    slm_engine_logprob *lps;  /* (n_tokens) when logprobs were asked for */
    size_t n_tokens;
    int32_t *ids;             /* (n_ids) */
    size_t n_ids, cap_ids;
    bool ids_cut;
    slm_engine_finish finish;
} choice;

/* A submitted request: what was asked (copied), its choices, and how it ended. */
typedef struct request {
    const slm_allocator *a; /* the engine's: everything the request owns */
    uint64_t id;
    int refs;
    int32_t *prompt;
    size_t n_prompt;
    slm_sampler_params sp; /* sp.logit_bias: the request's own copy */
    const slm_grammar *grammar;
    int32_t max_tokens, n, top_logprobs;
    bool logprobs, ignore_eos;
    char *stops[SLM_ENGINE_MAX_STOPS];
    int32_t n_stops;
    slm_engine_event_fn on_event;
    void *user;
    choice choices[SLM_ENGINE_MAX_N];
    int32_t n_done;
    size_t cached_tokens;
    bool cancelled; /* under mu */
    bool done;      /* DONE sent */
    slm_engine_outcome outcome;
    slm_status status;
    char message[256];
    struct request *next;             /* queue */
    struct request *live_prev, *live_next; /* requests not yet DONE, under mu */
} request;

/* A generation in progress on one session: a slot's own session or a fork of it (n > 1). */
typedef struct stream {
    slm_session *s;
    bool own_session; /* a fork, destroyed when the stream ends */
    request *r;       /* NULL: idle */
    bool busy;        /* a slot between admission and its stream's end; changes under e->mu (slm_engine_slots_busy) */
    int32_t choice;
    slm_sampler *smp;
    slm_constraint *con; /* over the request's grammar, attached to smp, or NULL */
    slm_detokenizer *dt;
    size_t n_fed;        /* prompt tokens in the session; < n_prompt while prefilling */
    bool first_sync;
    const float *logits;
    float *own_logits;   /* a fork's copy of the logits it starts from */
    int32_t n_gen;
    int32_t next_id;     /* sampled, to be decoded; -1 none */
    uint64_t last_used;
    slm_spec *spec;      /* speculation driver over s for this generation, or NULL */
    slm_session *draft;  /* draft_model: this stream's draft session, kept across generations */
} stream;

/* An idle snapshot of a slot, kept in memory (snap) or spilled to a file (snap NULL). */
typedef struct cached_state {
    slm_snapshot *snap;
    int32_t *hist;
    size_t n_hist;
    uint64_t bytes, last_used, hash;
} cached_state;

/* The engine: slots and forks, the kept states, the queue; see the top of this file for who owns what. */
struct slm_engine {
    const slm_allocator *a; /* the model's: every allocation of the engine goes through it */
    slm_engine_params p;
    char *state_dir;
    const slm_model *m;
    const slm_tokenizer *tok;
    int32_t n_ctx, n_vocab;
    uint64_t hash_seed;
    slm_grammar_vocab *gvocab; /* made at the first constrained request */
    pthread_mutex_t gvocab_mu;
    stream *slots; /* (n_slots) */
    stream *forks; /* (n_forks) */
    int32_t n_forks;
    stream **all, **dec; /* (n_slots + n_forks) step scratch */
    cached_state *cache;
    size_t n_cache, cap_cache;
    uint64_t cache_bytes, tick;
    pthread_t thread;
    bool started;
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stopping;
    request *queue_head, *queue_tail, *live;
    int32_t queue_len;
    /* a slot operation waiting for the stepping thread (slm_engine_slot; one at a time: op_mu) */
    pthread_mutex_t op_mu;
    pthread_cond_t op_cv;
    bool op_pending;
    int32_t op_slot;
    slm_engine_slot_action op_action;
    const char *op_path;
    size_t op_n;
    slm_status op_status;
    char op_msg[256];
    uint64_t next_id;
    slm_engine_stats st;
};

/* engine.c */
void eng_request_unref(request *r);
/* Sends r's DONE (once) with outcome and message; stepping thread, mu not held. */
void eng_request_finish(slm_engine *e, request *r, slm_engine_outcome outcome, slm_status status, const char *msg);
void eng_request_fail(slm_engine *e, request *r, slm_status status, const char *msg);
/* The CHOICE event of choice ci; nothing once DONE was sent. */
void eng_send_choice(request *r, int32_t ci, size_t n_stable);

/* prefix.c */
uint64_t eng_hash_ids(const slm_engine *e, const int32_t *v, size_t n);
size_t eng_common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb);
void eng_cache_remove(slm_engine *e, size_t i, bool keep_file);
void eng_index_state_dir(slm_engine *e, slm_session *s);
stream *eng_admit(slm_engine *e, const request *r);

/* stream.c */
bool eng_stream_begin(slm_engine *e, stream *st, request *r, int32_t ci);
void eng_stream_end(slm_engine *e, stream *st);
bool eng_prefill_step(slm_engine *e, stream *st);
void eng_fork_choices(slm_engine *e, stream *slot);
bool eng_sample_step(slm_engine *e, stream *st);
bool eng_spec_wanted(const slm_engine *e, const stream *st);
bool eng_spec_begin(slm_engine *e, stream *st);
bool eng_spec_step(slm_engine *e, stream *st);
void eng_decode_all(slm_engine *e, stream **v, int32_t n);

#endif
