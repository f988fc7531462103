/* serve.h — what the parts of `statelm serve` share (tools/serve/). The scheduler, slots, prefix
 * cache, batching, speculation and constraints are the engine (include/statelm_engine.h,
 * src/serve/engine.c); these files are the HTTP server around it:
 *   request.c, messages.c, responses.c, render.c   a body mapped to one internal request (request.h), checked,
 *             rendered into ids; no HTTP and no server state (unit-tested without sockets);
 *   jobs.c    a request's job: the engine's events turned into results and stream events, the
 *             generated-ids memory (chat turns continue from the ids a completion was generated as);
 *   openai.c  the OpenAI response shapes: responses, stream events, errors;
 *   anthropic.c  the Anthropic Messages shapes: message, stream events, errors;
 *   oai_responses.c  the OpenAI Responses shapes: response, stream events, the stored record
 *             (resp_store.c keeps records in memory and --state-dir files);
 *   llamacpp.c  llama-server's own: /completion's answer and stream, /tokenize, /detokenize,
 *             /apply-template, /props, /slots/{id} (save, restore, erase);
 *   http.c    libmicrohttpd: endpoints, authentication, CORS, connection watch;
 *   models.c  the models served (-m A -m B, --models-dir): lookup by name, loading on first use,
 *             unloading the least recently used idle one past --models-max, /v1/models;
 *   main.c    the command: options, start and shutdown;
 *   embed.c   POST /v1/embeddings (--embeddings) on a session of its own, outside the engine.
 * No globals: one serve_ctx, made by main.c, reaches every function (the daemon's callbacks get
 * it as their closure, a job points to it); each model served is a serve_model in it, with its own
 * engine (slots, snapshot cache), tokenizer and generated-ids memory. A request holds its model
 * (serve_model_acquire .. serve_model_release; a job holds it until freed), so a model with
 * requests in flight is never unloaded.
 * Threads: HTTP connection threads parse requests into jobs, submit them to the engine and wait;
 * the engine's thread delivers events (jobs.c) with no engine lock held. ctx->mu guards every job's
 * results, the generated-ids memories, the models' states and references, the connection list and
 * the counters; it is never held while calling the engine or loading a model. */
#ifndef SLM_TOOLS_SERVE_H
#define SLM_TOOLS_SERVE_H

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "cli.h"
#include "embed.h"
#include "request.h"
#include "resp_store.h"
#include "serve_tools.h"
#include "statelm_engine.h"

#define MAX_N SREQ_MAX_N               /* most choices per request */
#define GEN_MEMORY_N 4096              /* most completions whose ids are remembered */
#define GEN_MEMORY_BYTES (64u << 20)   /* and most bytes of text + ids */
#define RESP_STORE_N 4096              /* most stored responses kept in memory (more: in --state-dir files) */
#define RESP_STORE_BYTES (64u << 20)   /* and most bytes of them */

#define SERVE_MAX_MODELS 256         /* most models served (-m, --models-dir) */

typedef struct serve_opts {
    const char *models[SERVE_MAX_MODELS]; /* -m (repeatable) */
    int32_t n_models;
    const char *models_dir;               /* --models-dir: every *.gguf in it */
    int32_t models_max;                   /* --models-max: most models loaded at once (0: all) */
    int32_t models_mib;                   /* --models-mib: most MiB of model files loaded at once (0: no bound) */
    const char *host, *api_key, *state_dir, *draft_model, *alias, *cors, *chat_template;
    const char *chat_template_file, *chat_template_kwargs; /* --chat-template-file F, --chat-template-kwargs JSON */
    bool lookup, mtp, no_prefix_reuse;
    bool reasoning_none; /* --reasoning-format none: <think> text stays in content */
    bool embeddings;     /* --embeddings: POST /v1/embeddings (embed.c) */
    bool verbose;        /* --verbose: every request as with "verbose": true (request.h) */
    bool no_slots;       /* --no-slots: GET /slots answers 501, as llama-server's */
    slm_pooling pooling; /* --pooling, SLM_POOLING_MODEL when not given */
    slm_sampler_params sampling; /* defaults of every request (--temp, --top-k, ...) */
    bool seed_set;               /* --seed: the seed of requests that give none (else random per request) */
    slm_kv_type kv_k, kv_v;      /* --cache-type-k/-v (SLM_KV_DEFAULT: f16) */
    int32_t draft_max;
    int32_t port, parallel, n_ctx, n_threads, cache_mib, max_body_kib, max_tokens, queue_max, timeout_s;
    int32_t max_conns, max_conns_per_client; /* open connections accepted in all, and from one address */
} serve_opts;

/* One generated token with its log-probability and the top alternatives. */
typedef slm_engine_logprob tok_lp;

/* One choice of a job as the engine's events reported it (jobs.c). */
typedef struct choice {
    buf text;           /* generated text, cut at a stop string */
    size_t n_sent;      /* bytes of text already streamed */
    tok_lp *lps;        /* (n_tokens) when logprobs were asked for */
    size_t n_tokens, n_lps_sent;
    const char *finish; /* NULL while generating; "stop" or "length" */
    bool role_sent;
    int32_t *ids;       /* (n_ids) generated ids, end-of-generation token excluded; set when finished */
    size_t n_ids;
    bool ids_cut;       /* a stop string cut text (ids spell more than text), or ids are missing */
    tool_stream ts;     /* what a stream has sent of a forced tool call */
    size_t n_think;     /* tokens generated inside the think block (usage's reasoning_tokens) */
    bool think_forced;  /* the thinking budget closed the block */
} choice;

/* A request. Invariants: refs counts the HTTP side (until its response is gone) and the engine
 * (from a successful submit until its DONE event); the job is freed at 0. Fields below "results"
 * change under srv->mu only. */
typedef struct job {
    struct serve_ctx *srv;
    struct serve_model *mdl; /* the model it runs on, held (serve_model_acquire) until the job is freed */
    int refs;
    sreq r;    /* the request as mapped and validated */
    sprompt p; /* its prompt ids, grammar and tools */
    int32_t max_tokens; /* r.max_tokens, or the server's limit */
    char id[48];
    long long created;
    double t_start;     /* now_s() at submit: timings */
    uint64_t engine_id; /* the engine's name of the request, once submitted */
    /* results */
    choice choices[MAX_N];
    size_t cached_tokens;
    double t_first, t_end; /* now_s() at the first generated token, at DONE */
    int err_status;
    const char *err_code; /* error code of err_status (static string) */
    char err_msg[256];
    bool cancelled, done;
    buf sse;      /* server-sent events not yet read */
    size_t sse_off;
    bool sse_end; /* the last event is in sse */
    int32_t a_blocks; /* Anthropic and Responses streams: content blocks / output items started */
    char a_open;      /* the block open now: 0 none, 'k' thinking, 't' text, 'u' tool use */
    size_t a_from, a_to; /* Responses: the open item's text is choice 0's text[a_from, a_to) */
    int64_t a_seq;       /* Responses: the next event's sequence_number */
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
 * idle time). Linked in ctx->conns under ctx->mu between the STARTED and CLOSED notifications. */
typedef struct conn_watch {
    int fd;
    double t_start;
    bool receiving;
    struct conn_watch *next, *prev;
} conn_watch;

typedef enum serve_model_state { SM_UNLOADED, SM_LOADING, SM_LOADED, SM_UNLOADING } serve_model_state;

/* One model served. The names and path are fixed; what loading makes (m .. n_vocab) is set while
 * state is SM_LOADING by the loading thread alone, and read by holders of a reference. */
typedef struct serve_model {
    struct serve_ctx *srv;
    char id[256];               /* its name in requests and /v1/models: --alias, the file's name (-m),
                                 * or the file's stem (--models-dir) */
    char path[4096];            /* the GGUF file */
    const char *file;           /* path's last component */
    uint64_t file_bytes;        /* the file's size: its memory when loaded, as --models-mib counts it */
    slm_model *m;
    slm_model *draft_model;     /* --draft-model (one model served only), or NULL */
    serve_embedder *embedder;   /* --embeddings (embed.c): its own session, never a slot; else NULL */
    slm_engine *engine;
    const slm_tokenizer *tok;
    const char *chat_template;  /* --chat-template NAME (a built-in), "chatml" for a model without a
                                 * template, or NULL: template_text or the model's own Jinja template */
    const char *template_text;  /* the server's --chat-template-file text, or NULL */
    int32_t n_ctx, n_vocab;
    /* under srv->mu */
    serve_model_state state;
    int32_t refs;               /* requests holding it (a loaded model with refs is never unloaded) */
    uint64_t last_used;         /* srv->model_tick at its last acquire */
    char load_error[256];       /* why the last load failed ("" none) */
    gen_memory *gens;           /* (GEN_MEMORY_N), LRU by last_used */
    size_t n_gens, gens_bytes;
    uint64_t gen_tick;
} serve_model;

/* The server: the models, and what the HTTP side keeps. */
typedef struct serve_ctx {
    serve_opts o;
    serve_model *models;         /* (n_models); models[0] answers requests that name none */
    int32_t n_models;
    char *template_text;         /* --chat-template-file's text, or NULL */
    resp_store *responses;       /* stored /v1/responses (memory, and --state-dir files) */
    pthread_mutex_t mu;
    pthread_cond_t models_cv;    /* a model's state or refs changed, or stopping */
    bool stopping;               /* shutdown began: no model loads any more */
    uint64_t model_tick;
    uint64_t next_id;   /* of response ids */
    int32_t n_inflight; /* HTTP requests not yet completed */
    conn_watch *conns;
    /* counters of what the engine does not see (it counts the rest: slm_engine_get_stats) */
    uint64_t m_requests, m_errors, m_prompt_tokens;
    /* llama-server's counters (llamacpp:* in /metrics): prompt tokens prefilled and reused, tokens
     * generated, forward passes (a prefill, a decode step, an embedded input; summed over requests),
     * the longest context a request filled; seconds in prefill and in generation; the start time */
    uint64_t lc_prefilled, lc_cached, lc_predicted, lc_passes, lc_tokens_max;
    double lc_prompt_s, lc_predicted_s, t_started;
} serve_ctx;

/* models.c */
/* Fills s->models from s->o (-m files, --models-dir's *.gguf sorted by name); false with a message
 * printed. Loads nothing. */
bool serve_models_init(serve_ctx *s);
/* The model named `name` (its id, file name or file stem); NULL or "": models[0]; a single model
 * answers any name (as llama-server without a router). NULL: no such model. */
serve_model *serve_model_find(serve_ctx *s, const char *name);
/* Takes a reference on sm, loading it first when needed (unloading the least recently used idle
 * models past --models-max; waits while every loaded one is busy). false with e set (500: it could
 * not be loaded). */
bool serve_model_acquire(serve_model *sm, sreq_err *e);
void serve_model_release_locked(serve_model *sm);
void serve_model_release(serve_model *sm);
/* POST /models/load, /models/unload {"model"}: llama-server's router's answers. */
bool serve_models_load(serve_ctx *s, const cJSON *root, cJSON **out, sreq_err *e);
bool serve_models_unload(serve_ctx *s, const cJSON *root, cJSON **out, sreq_err *e);
/* GET /v1/models: every model, loaded or not (status.value), OpenAI's and llama-server's fields. */
cJSON *serve_models_json(serve_ctx *s);
/* Stops every engine and frees every loaded model (shutdown). */
void serve_models_free(serve_ctx *s);

/* jobs.c */
double now_s(void);
job *job_create(serve_ctx *s, serve_model *sm); /* sm held by the caller: the job takes that reference */
void job_unref_locked(job *j);
void on_engine_event(void *user, const slm_engine_event *ev);
void job_cancel(job *j);
void gen_forget_locked(serve_model *sm, size_t i);
bool gen_lookup(void *model, const char *text, size_t n, int32_t **ids, size_t *n_ids); /* sreq_ids_lookup_fn over a serve_model */

/* Where a chat answer's reasoning and content lie (split_answer, openai.c). */
typedef struct answer_parts {
    size_t r0, r1; /* reasoning: text[r0, r1); none when r0 == r1 */
    size_t c0;     /* content: text[c0, ready) */
    size_t ready;
} answer_parts;

/* openai.c */
answer_parts split_answer(const job *j, const char *t, size_t n, bool final);
/* Streams choice 0's answer up to upto (at most what split_answer says is ready) from where it
 * stopped (n_sent, which advances): the new reasoning, then the new content, each through emit
 * (kind 'k' reasoning, 't' content; text[from, to), maybe empty). Nothing for a request with tools
 * (its calls go at the end). Under srv->mu. The Anthropic and Responses streams use it. */
typedef void (*answer_emit_fn)(job *j, char kind, const char *text, size_t from, size_t to);
void stream_answer(job *j, size_t upto, answer_emit_fn emit);
/* The stop string that ended choice ci (its ids spell it right after the text), or NULL. */
const char *job_stop_word(const job *j, int32_t ci);
cJSON *error_json(const char *msg, unsigned status, const char *code);
cJSON *sreq_error_json(const sreq_err *e);
void sse_add_json(job *j, cJSON *obj);
void sse_choice(job *j, int32_t ci, size_t upto);
void sse_finish(job *j);
cJSON *completion_json(const job *j);
cJSON *timings_json(const job *j);
char *token_string(const serve_model *sm, int32_t id, cJSON **bytes_out);

/* anthropic.c */
cJSON *anthropic_error_json(const char *msg, unsigned status);
cJSON *anthropic_message_json(const job *j);
void anthropic_sse_start(job *j);
void anthropic_sse_progress(job *j, size_t upto);
void anthropic_sse_finish(job *j);

/* oai_responses.c */
cJSON *responses_json(const job *j);
char *responses_record(const job *j);
void responses_sse_start(job *j);
void responses_sse_progress(job *j, size_t upto);
void responses_sse_finish(job *j);

/* llamacpp.c */
cJSON *completion_native_json(const job *j);
void native_sse_choice(job *j, size_t upto);
void native_sse_finish(job *j);
bool util_tokenize(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e);
bool util_detokenize(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e);
bool util_apply_template(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e);
cJSON *util_props(const serve_model *sm);
bool util_slot(serve_model *sm, const char *id_text, const char *action, const cJSON *root, cJSON **out, sreq_err *e);
/* A finished job's share of the llamacpp:* counters; an embeddings request's (its inputs, their
 * tokens, the seconds it took). Under srv->mu. */
void util_metrics_count(serve_ctx *s, const job *j);
void util_metrics_embed(serve_ctx *s, uint64_t n_inputs, uint64_t n_tokens, double seconds);
/* Appends llama-server's metrics (llamacpp:*, Prometheus text with HELP and TYPE lines). Under srv->mu. */
void util_metrics(const serve_ctx *s, const slm_engine_stats *es, buf *out);

/* http.c */
/* cls: the serve_ctx */
enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                           const char *version, const char *upload, size_t *upload_size, void **con_cls);
void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe);
void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                   enum MHD_ConnectionNotificationCode toe);
void watch_connections(serve_ctx *s);

#endif
