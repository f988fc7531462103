/* serve.h — what the parts of `statelm serve` share (tools/serve/). The scheduler, slots, prefix
 * cache, batching, speculation and constraints are the engine (include/statelm_engine.h,
 * src/serve/engine.c); these files are the OpenAI-compatible HTTP server around it:
 *   jobs.c    a request's job: the engine's events turned into results and stream events, the
 *             generated-ids memory (chat turns continue from the ids a completion was generated as);
 *   openai.c  the OpenAI JSON shapes: request parsing into a job, responses, stream events, errors;
 *   http.c    libmicrohttpd: endpoints, authentication, CORS, connection watch;
 *   main.c    the command: options, start and shutdown;
 *   embed.c   POST /v1/embeddings (--embeddings) on a session of its own, outside the engine.
 * Threads: HTTP connection threads parse requests into jobs, submit them to the engine and wait;
 * the engine's thread delivers events (jobs.c) with no engine lock held. srv.mu guards every job's
 * results, the generated-ids memory, the connection list and the counters; it is never held while
 * calling the engine. */
#ifndef SLM_TOOLS_SERVE_H
#define SLM_TOOLS_SERVE_H

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "embed.h"
#include "statelm_engine.h"
#include "serve_tools.h"

#define MAX_N SLM_ENGINE_MAX_N         /* most choices per request */
#define MAX_STOPS SLM_ENGINE_MAX_STOPS /* most stop strings, as the OpenAI API */
#define MAX_TOP_LOGPROBS SLM_ENGINE_MAX_TOP_LOGPROBS
#define MAX_JSON_DEPTH 32
#define GEN_MEMORY_N 4096              /* most completions whose ids are remembered */
#define GEN_MEMORY_BYTES (64u << 20)   /* and most bytes of text + ids */
#define MAX_LOGIT_BIAS 1024            /* most logit_bias entries per request */

typedef struct serve_opts {
    const char *model, *host, *api_key, *state_dir, *draft_model, *alias, *cors, *chat_template;
    const char *chat_template_file, *chat_template_kwargs; /* --chat-template-file F, --chat-template-kwargs JSON */
    bool lookup, no_prefix_reuse;
    bool reasoning_none; /* --reasoning-format none: <think> text stays in content */
    bool embeddings;     /* --embeddings: POST /v1/embeddings (embed.c) */
    slm_pooling pooling; /* --pooling, SLM_POOLING_MODEL when not given */
    slm_sampler_params sampling; /* defaults of every request (--temp, --top-k, ...) */
    int32_t draft_max;
    int32_t port, parallel, n_ctx, n_threads, cache_mib, max_body_kib, max_tokens, queue_max, timeout_s;
    int32_t max_conns, max_conns_per_client; /* open connections accepted in all, and from one address */
} serve_opts;

/* Growable byte buffer, always NUL-terminated when non-empty. */
typedef struct sbuf {
    char *v;
    size_t n, cap;
} sbuf;

/* One generated token with its log-probability and the top alternatives. */
typedef slm_engine_logprob tok_lp;

/* One choice of a job as the engine's events reported it (jobs.c). */
typedef struct choice {
    sbuf text;          /* generated text, cut at a stop string */
    size_t n_sent;      /* bytes of text already streamed */
    tok_lp *lps;        /* (n_tokens) when logprobs were asked for */
    size_t n_tokens, n_lps_sent;
    const char *finish; /* NULL while generating; "stop" or "length" */
    bool role_sent;
    int32_t *ids;       /* (n_ids) generated ids, end-of-generation token excluded; set when finished */
    size_t n_ids;
    bool ids_cut;       /* a stop string cut text (ids spell more than text), or ids are missing */
    tool_stream ts;     /* what a stream has sent of a forced tool call */
} choice;

/* A request. Invariants: refs counts the HTTP side (until its response is gone) and the engine
 * (from a successful submit until its DONE event); the job is freed at 0. Fields below "results"
 * change under srv.mu only. */
typedef struct job {
    int refs;
    bool chat, stream, logprobs, ignore_eos, include_usage;
    int32_t top_logprobs, n;
    int32_t *prompt;
    size_t n_prompt;
    int32_t max_tokens;
    slm_sampler_params sp; /* sp.logit_bias is the job's own array */
    slm_grammar *grammar;  /* response_format / grammar / json_schema / a forced tool call, or NULL */
    tool_req tools;
    const char *tool_fmt; /* the call format of the template the request runs (slm_chat_tool_format; "none") */
    bool think_open;      /* its prompt ends inside a think block: the answer opens as reasoning */
    char *stops[MAX_STOPS];
    int32_t n_stops;
    char id[48];
    long long created;
    uint64_t engine_id; /* the engine's name of the request, once submitted */
    /* results */
    choice choices[MAX_N];
    size_t cached_tokens;
    int err_status;
    const char *err_code; /* OpenAI error code of err_status (static string) */
    char err_msg[256];
    bool cancelled, done;
    sbuf sse;     /* server-sent events not yet read */
    size_t sse_off;
    bool sse_end; /* the last event is in sse */
    pthread_cond_t cv;
} job;

/* A returned completion: its text and the ids it was generated as. A later chat request whose
 * assistant message is exactly this text continues from these ids (re-tokenising the text may
 * give other ids, which would end the reusable prefix there). */
typedef struct gen_memory {
    uint64_t hash, last_used;
    char *text;
    size_t n_text;
    int32_t *ids;
    size_t n_ids;
} gen_memory;

/* A TCP connection, watched against slow clients. receiving: it is reading a request (headers and
 * body) that began at t_start; a request not received within --timeout seconds is cut by shutting
 * the socket down, however slowly its bytes trickle in (libmicrohttpd's own timeout only counts
 * idle time). Linked in srv.conns under srv.mu between the STARTED and CLOSED notifications. */
typedef struct conn_watch {
    int fd;
    double t_start;
    bool receiving;
    struct conn_watch *next, *prev;
} conn_watch;

/* The server: one model, its engine, and what the HTTP side keeps. */
typedef struct serve_state {
    serve_opts o;
    slm_model *m;
    slm_model *draft_model; /* --draft-model, or NULL */
    serve_embedder *embedder;       /* --embeddings (embed.c): its own session, never a slot; else NULL */
    slm_engine *engine;
    const slm_tokenizer *tok;
    char model_id[256];          /* --alias, or the model file's name */
    const char *model_file;      /* the model file's name */
    const char *chat_template;   /* --chat-template NAME (a built-in), "chatml" for a model without a
                                  * template, or NULL: template_text or the model's own Jinja template */
    char *template_text;         /* --chat-template-file's text, or NULL */
    int32_t n_ctx, n_vocab;
    pthread_mutex_t mu;
    uint64_t next_id;   /* of response ids */
    int32_t n_inflight; /* HTTP requests not yet completed */
    conn_watch *conns;
    gen_memory *gens; /* (GEN_MEMORY_N), LRU by last_used */
    size_t n_gens, gens_bytes;
    uint64_t gen_tick;
    /* counters of what the engine does not see (it counts the rest: slm_engine_get_stats) */
    uint64_t m_requests, m_errors, m_prompt_tokens;
} serve_state;

extern serve_state srv;

/* jobs.c */
bool sb_add(sbuf *b, const char *s, size_t n);
double now_s(void);
void job_unref_locked(job *j);
void on_engine_event(void *user, const slm_engine_event *ev);
void job_cancel(job *j);
void gen_forget_locked(size_t i);
long gen_find_locked(const char *s, size_t n);

/* openai.c */
cJSON *error_json(const char *msg, unsigned status, const char *code);
void sse_choice(job *j, int32_t ci, size_t upto);
void sse_finish(job *j);
unsigned parse_request(const char *body, size_t n_body, bool chat, job **out, const char **code, char *msg,
                       size_t cap);
cJSON *completion_json(const job *j);

/* http.c */
enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                           const char *version, const char *upload, size_t *upload_size, void **con_cls);
void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe);
void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                   enum MHD_ConnectionNotificationCode toe);
void watch_connections(void);

#endif
