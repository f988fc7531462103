/* serve.c — `statelm serve`: an OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection) over the public API. Endpoints: POST /v1/chat/completions, POST /v1/completions,
 * GET /v1/models, GET /health, GET /metrics (Prometheus text); OPTIONS answers CORS preflights.
 * Constrained output (response_format, grammar, json_schema): a job owns its compiled grammar, each
 * stream a constraint over the model's one grammar vocabulary, attached to the stream's sampler.
 * Tools (serve_tools.c): tool_choice "required" or named is such a grammar; answers of requests with
 * tools are parsed for calls when they end (streams hold back content that may be a call).
 *
 * Threads: the HTTP connection threads parse requests into jobs and wait on them; one scheduler
 * thread owns every session and runs, in turn, one step per active stream (one sampled and decoded
 * token, or one prefill chunk of CHUNK tokens), so concurrent streams interleave and new requests
 * join between steps. decode_all() is the one place the decode steps of all streams happen: one
 * slm_session_decode_batch call per step for every stream that batches.
 *
 * State reuse: a job goes to the idle slot whose session history shares the longest token prefix
 * with its prompt; a cached snapshot (kept under --cache-mib, LRU) or a state file spilled into
 * --state-dir is restored first when it shares more. The session then continues with
 * slm_session_sync, which computes only what differs. File names are a hash of the token history,
 * never request data. One mutex (srv.mu) guards jobs, the queue and the counters; sessions,
 * samplers and the cache are touched by the scheduler thread only.
 *
 * Speculation (--lookup, --draft-model): a stream past its prompt (a fork: past its first token)
 * without logprobs generates by slm_spec_step, several tokens per weight pass, outside
 * decode_all(); each stream has its own driver (and draft session), greedy at temperature 0. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "serve_tools.h"

#define CHUNK 64           /* prefill tokens per scheduler step */
#define MAX_N 8            /* most choices per request */
#define MAX_STOPS 4        /* most stop strings, as the OpenAI API */
#define MAX_TOP_LOGPROBS 20
#define MAX_JSON_DEPTH 32
#define MAX_STATE_FILES 256
#define GEN_MEMORY_N 4096              /* most completions whose ids are remembered */
#define GEN_MEMORY_BYTES (64u << 20)   /* and most bytes of text + ids */
#define MAX_LOGIT_BIAS 1024            /* most logit_bias entries per request */

typedef struct serve_opts {
    const char *model, *host, *api_key, *state_dir, *draft_model, *alias, *cors, *chat_template;
    bool lookup, no_prefix_reuse;
    bool reasoning_none; /* --reasoning-format none: <think> text stays in content */
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

static bool sb_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return false;
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = '\0';
    return true;
}

/* One generated token with its log-probability and the top alternatives. */
typedef struct tok_lp {
    int32_t id;
    float logprob;
    int32_t n_top;
    int32_t top_id[MAX_TOP_LOGPROBS];
    float top_lp[MAX_TOP_LOGPROBS];
} tok_lp;

typedef struct choice {
    sbuf text;          /* generated text, cut at a stop string */
    size_t n_sent;      /* bytes of text already streamed */
    tok_lp *lps;        /* (n_tokens) when logprobs were asked for */
    size_t n_tokens, n_lps_sent;
    const char *finish; /* NULL while generating; "stop" or "length" */
    bool role_sent;
    int32_t *ids;       /* (n_ids) generated ids, end-of-generation token excluded */
    size_t n_ids, cap_ids;
    bool ids_cut;       /* a stop string cut text: ids spell more than text */
    tool_stream ts;     /* what a stream has sent of a forced tool call */
} choice;

/* A request. Invariants: refs counts the HTTP side (until its response is gone) and the
 * scheduler (until every stream of the job ended or it failed); the job is freed at 0. Fields
 * below "results" change under srv.mu only. */
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
    char *stops[MAX_STOPS];
    int32_t n_stops;
    char id[48];
    long long created;
    /* results */
    choice choices[MAX_N];
    int32_t n_done;
    size_t cached_tokens;
    int err_status;
    const char *err_code; /* OpenAI error code of err_status (static string) */
    char err_msg[256];
    bool cancelled, done;
    sbuf sse;     /* server-sent events not yet read */
    size_t sse_off;
    bool sse_end; /* the last event is in sse */
    pthread_cond_t cv;
    struct job *next;
} job;

/* A generation in progress on one session: a slot's own session or a fork of it (n > 1). */
typedef struct stream {
    slm_session *s;
    bool own_session; /* a fork, destroyed when the stream ends */
    job *j;           /* NULL: idle */
    int32_t choice;
    slm_sampler *smp;
    slm_constraint *con; /* the job's grammar, attached to smp, or NULL */
    slm_detokenizer *dt;
    size_t n_fed;     /* prompt tokens in the session; < n_prompt while prefilling */
    bool first_sync;
    const float *logits;
    float *own_logits; /* a fork's copy of the logits it starts from */
    int32_t n_gen;
    int32_t next_id;  /* sampled, to be decoded; -1 none */
    uint64_t last_used;
    slm_spec *spec;      /* speculation driver over s for this generation, or NULL */
    slm_session *draft;  /* --draft-model: this stream's draft session, kept across generations */
} stream;

/* An idle snapshot of a slot, kept in memory (snap) or spilled to a file (snap NULL). */
typedef struct cached_state {
    slm_snapshot *snap;
    int32_t *hist;
    size_t n_hist;
    uint64_t bytes, last_used, hash;
} cached_state;

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

static struct {
    serve_opts o;
    slm_model *m;
    slm_model *draft_model; /* --draft-model, or NULL */
    const slm_tokenizer *tok;
    slm_grammar_vocab *gvocab;   /* the tokenizer's byte trie, made at the first constrained request */
    pthread_mutex_t gvocab_mu;   /* guards making gvocab (not srv.mu: it takes up to a second) */
    char model_id[256];          /* --alias, or the model file's name */
    const char *model_file;      /* the model file's name */
    const char *chat_template;   /* --chat-template, the model's own (detected), or "chatml" */
    int32_t n_ctx, n_vocab;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the scheduler waits for work on it */
    bool stopping;
    job *queue_head, *queue_tail;
    int32_t queue_len;
    stream *slots;      /* (parallel) */
    stream *forks;      /* (parallel * (MAX_N - 1)) */
    int32_t n_forks_cap;
    cached_state *cache; /* snapshots in memory then state files */
    size_t n_cache, cap_cache;
    uint64_t cache_bytes, tick, next_id, hash_seed;
    int32_t n_inflight; /* HTTP requests not yet completed */
    conn_watch *conns;
    gen_memory *gens; /* (GEN_MEMORY_N), LRU by last_used; under mu */
    size_t n_gens, gens_bytes;
    uint64_t gen_tick;
    /* counters, under mu */
    uint64_t m_requests, m_errors, m_prompt_tokens, m_gen_tokens, m_reused_tokens, m_cancelled;
    int32_t m_busy;
    double m_decode_s;
    uint64_t m_decode_tokens;
    uint64_t m_drafted, m_accepted, m_replays;
    uint64_t m_batch_steps, m_batch_slots, m_batch_fallbacks; /* batched decode calls, slots in them, refusals */
    int32_t m_batch_max;                                      /* most slots in one batched decode call */
} srv;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* FNV-1a of the token ids, seeded with the model's fingerprint and the context size (srv.hash_seed):
 * the name of a state file, so servers of other models or contexts never share one. */
static uint64_t hash_ids(const int32_t *v, size_t n) {
    uint64_t h = srv.hash_seed;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) {
            h ^= (uint8_t)((uint32_t)v[i] >> (8 * b));
            h *= 1099511628211ull;
        }
    return h;
}

static size_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

static void job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    for (int32_t i = 0; i < MAX_N; i++) {
        free(j->choices[i].text.v);
        free(j->choices[i].lps);
        free(j->choices[i].ids);
    }
    for (int32_t i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free((void *)(uintptr_t)j->sp.logit_bias);
    slm_grammar_destroy(j->grammar);
    tools_req_free(&j->tools);
    free(j->prompt);
    free(j->sse.v);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* An OpenAI error object: type from the HTTP status; code as given, or the status's own. */
static cJSON *error_json(const char *msg, unsigned status, const char *code) {
    const char *type = status == 401 ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 503 ? "server_overloaded"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    if (!code)
        code = status == 401 ? "invalid_api_key"
               : status == 404 ? "unknown_url"
               : status == 405 ? "method_not_allowed"
               : status == 413 ? "request_too_large"
               : status == 503 ? "server_busy"
               : status >= 500 ? "server_error"
                               : "invalid_request";
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    cJSON_AddStringToObject(e, "code", code);
    return root;
}

static void sse_add_json(job *j, cJSON *obj) {
    char *s = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (!s) return;
    sb_add(&j->sse, "data: ", 6);
    sb_add(&j->sse, s, strlen(s));
    sb_add(&j->sse, "\n\n", 2);
    free(s);
}

/* The token's text for logprobs: its bytes with invalid UTF-8 replaced; caller frees. */
static char *token_string(int32_t id, cJSON **bytes_out) {
    char buf[256];
    size_t n = 0;
    if (slm_tokenizer_token_bytes(srv.tok, id, buf, sizeof buf - 1, &n) != SLM_OK) n = 0;
    if (n > sizeof buf - 1) n = sizeof buf - 1;
    buf[n] = '\0';
    if (bytes_out) {
        *bytes_out = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(*bytes_out, cJSON_CreateNumber((uint8_t)buf[i]));
    }
    return cli_utf8_sanitize(buf);
}

/* Logprobs of c->lps[from, to) in the chat shape {"content":[...]} or the completions shape. */
static cJSON *logprobs_json(const job *j, const choice *c, size_t from, size_t to) {
    cJSON *root = cJSON_CreateObject();
    if (j->chat) {
        cJSON *content = cJSON_AddArrayToObject(root, "content");
        for (size_t k = from; k < to; k++) {
            const tok_lp *t = &c->lps[k];
            cJSON *e = cJSON_CreateObject(), *bytes;
            char *s = token_string(t->id, &bytes);
            cJSON_AddStringToObject(e, "token", s ? s : "");
            free(s);
            cJSON_AddNumberToObject(e, "logprob", (double)t->logprob);
            cJSON_AddItemToObject(e, "bytes", bytes);
            cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int32_t i = 0; i < t->n_top; i++) {
                cJSON *te = cJSON_CreateObject(), *tb;
                char *ts = token_string(t->top_id[i], &tb);
                cJSON_AddStringToObject(te, "token", ts ? ts : "");
                free(ts);
                cJSON_AddNumberToObject(te, "logprob", (double)t->top_lp[i]);
                cJSON_AddItemToObject(te, "bytes", tb);
                cJSON_AddItemToArray(top, te);
            }
            cJSON_AddItemToArray(content, e);
        }
    } else {
        cJSON *tokens = cJSON_AddArrayToObject(root, "tokens"), *lps = cJSON_AddArrayToObject(root, "token_logprobs");
        cJSON *tops = cJSON_AddArrayToObject(root, "top_logprobs"), *offs = cJSON_AddArrayToObject(root, "text_offset");
        size_t off = 0;
        for (size_t k = from; k < to; k++) {
            const tok_lp *t = &c->lps[k];
            char *s = token_string(t->id, NULL);
            cJSON_AddItemToArray(tokens, cJSON_CreateString(s ? s : ""));
            cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
            off += s ? strlen(s) : 0;
            free(s);
            cJSON_AddItemToArray(lps, cJSON_CreateNumber((double)t->logprob));
            cJSON *top = cJSON_CreateObject();
            for (int32_t i = 0; i < t->n_top; i++) {
                char *ts = token_string(t->top_id[i], NULL);
                if (!cJSON_HasObjectItem(top, ts ? ts : "")) cJSON_AddNumberToObject(top, ts ? ts : "", (double)t->top_lp[i]);
                free(ts);
            }
            cJSON_AddItemToArray(tops, top);
        }
    }
    return root;
}

static cJSON *usage_json(const job *j) {
    cJSON *u = cJSON_CreateObject();
    size_t n_gen = 0;
    for (int32_t i = 0; i < j->n; i++) n_gen += j->choices[i].n_tokens;
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->n_prompt + n_gen));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)j->cached_tokens);
    return u;
}

/* The fields every response object of job j opens with (OpenAI: id, object, created, model). */
static cJSON *response_head(const job *j, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", j->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)j->created);
    cJSON_AddStringToObject(root, "model", srv.model_id);
    return root;
}

static cJSON *chunk_head(const job *j) { return response_head(j, j->chat ? "chat.completion.chunk" : "text_completion"); }

/* Where the parts of a chat answer text[0, n) lie (llama-server's --reasoning-format deepseek): an
 * answer that opens, after white space, with "<think>" has its reasoning up to "</think>" (all of
 * the rest while that has not come) and its content after it, white space around both trimmed.
 * Unless final, ready stops short of what may still turn out to be a tag or the white space before
 * one: text[0, ready) may be sent. Without reasoning the content is all the text. */
typedef struct answer_parts {
    size_t r0, r1; /* reasoning: text[r0, r1); none when r0 == r1 */
    size_t c0;     /* content: text[c0, ready) */
    size_t ready;
} answer_parts;

static bool is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

static answer_parts split_answer(const job *j, const char *t, size_t n, bool final) {
    static const char open[] = "<think>", close[] = "</think>";
    const size_t n_open = sizeof open - 1, n_close = sizeof close - 1;
    answer_parts p = {0, 0, 0, n};
    if (!j->chat || srv.o.reasoning_none) return p;
    size_t i = 0;
    while (i < n && is_space(t[i])) i++;
    if (n - i < n_open) { /* too short to hold "<think>": may yet become it */
        if (!final && !memcmp(t + i, open, n - i)) p.ready = 0;
        return p;
    }
    if (memcmp(t + i, open, n_open) != 0) return p;
    p.r0 = i + n_open;
    while (p.r0 < n && is_space(t[p.r0])) p.r0++;
    size_t e = p.r0;
    while (e + n_close <= n && memcmp(t + e, close, n_close) != 0) e++;
    if (e + n_close <= n) { /* closed: content after the tag */
        p.r1 = e;
        for (p.c0 = e + n_close; p.c0 < n && is_space(t[p.c0]);) p.c0++;
    } else { /* open: everything so far is reasoning, less a tag that may be arriving */
        p.c0 = n;
        if (!final)
            for (size_t k = n_close - 1; k > 0; k--)
                if (k <= n - p.r0 && !memcmp(t + n - k, close, k)) {
                    p.ready = n - k;
                    break;
                }
        p.r1 = p.ready;
    }
    while (p.r1 > p.r0 && is_space(t[p.r1 - 1])) p.r1--;
    if (!final && p.c0 >= p.ready && p.ready > p.r1) p.ready = p.r1; /* trailing white space waits */
    if (p.ready < p.r0) p.ready = 0;
    return p;
}

/* text[from, to) as a new NUL-terminated string (caller frees; NULL when out of memory). */
static char *text_span(const choice *c, size_t from, size_t to) {
    char *v = malloc(to - from + 1);
    if (v) {
        memcpy(v, c->text.v ? c->text.v + from : "", to - from);
        v[to - from] = '\0';
    }
    return v;
}

/* A chunk of choice ci with the given delta (taken over) and finish reason (NULL: null). */
static void sse_delta(job *j, int32_t ci, cJSON *delta, const char *finish) {
    cJSON *root = chunk_head(j), *arr = cJSON_AddArrayToObject(root, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", ci);
    cJSON_AddItemToObject(ch, "delta", delta ? delta : cJSON_CreateObject());
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(arr, ch);
    sse_add_json(j, root);
}

/* Sends each delta of the array deltas (taken over; NULL: none) as a chunk of choice ci. */
static void sse_deltas(job *j, int32_t ci, cJSON *deltas) {
    while (deltas && deltas->child) sse_delta(j, ci, cJSON_DetachItemViaPointer(deltas, deltas->child), NULL);
    cJSON_Delete(deltas);
}

/* The end of a choice of a request with tools: the rest of its content, its calls (a delta with
 * id, type and name, then one with the arguments, per call) and the finish reason ("tool_calls"
 * when it made calls). c0: where the answer's content starts. Under srv.mu. */
static void sse_tool_calls(job *j, int32_t ci, size_t c0) {
    choice *c = &j->choices[ci];
    size_t sent = c->n_sent > c0 ? c->n_sent - c0 : 0;
    bool calls = false;
    char *text = cli_utf8_sanitize(c->text.v ? c->text.v : "");
    size_t n = text ? strlen(text) : 0;
    cJSON *deltas = text && c0 <= n ? tools_final_deltas(&j->tools, srv.chat_template, text + c0, n - c0, sent, &c->ts,
                                                         j->id, ci, &calls)
                                    : NULL;
    free(text);
    sse_deltas(j, ci, deltas);
    c->n_sent = c->text.n;
    sse_delta(j, ci, NULL, calls && !strcmp(c->finish, "stop") ? "tool_calls" : c->finish);
}

/* After a stream event of a request with tools: at the end, sse_tool_calls; before it, the new
 * part of a forced call (its head, then argument pieces as they are generated). */
static void sse_tool_progress(job *j, int32_t ci, size_t c0) {
    choice *c = &j->choices[ci];
    if (c->finish) {
        sse_tool_calls(j, ci, c0);
    } else if (j->tools.forced && c->text.v && c->text.n >= c0) {
        sse_deltas(j, ci, tools_progress_deltas(&j->tools, srv.chat_template, c->text.v + c0, c->text.n - c0, &c->ts,
                                                j->id, ci));
    }
}

/* Appends the stream event of choice ci: text [n_sent, upto) (for chat, split into reasoning and
 * content deltas: split_answer), logprobs not yet sent and, when the choice has finished, its
 * finish_reason (with tools: sse_tool_progress after it). Under srv.mu. */
static void sse_choice(job *j, int32_t ci, size_t upto) {
    choice *c = &j->choices[ci];
    const char *text0 = c->text.v ? c->text.v : "";
    answer_parts parts = split_answer(j, text0, c->text.n, c->finish != NULL);
    if (upto > parts.ready) upto = parts.ready;
    const char *finish = c->finish;
    if (j->tools.parse && parts.ready >= parts.c0) { /* content that may be a call waits for the end */
        size_t lim = parts.c0 + tools_content_ready(&j->tools, srv.chat_template, text0 + parts.c0, parts.ready - parts.c0);
        if (finish) lim = c->n_sent > parts.c0 ? c->n_sent : parts.c0;
        if (upto > lim) upto = lim;
        finish = NULL; /* the calls and the finish reason follow this chunk (sse_tool_calls) */
    }
    if (upto < c->n_sent) upto = c->n_sent;
    bool has_text = upto > c->n_sent, has_lp = j->logprobs && c->n_lps_sent < c->n_tokens;
    if (!has_text && !has_lp && !finish && c->role_sent) {
        if (j->tools.parse) sse_tool_progress(j, ci, parts.c0);
        return;
    }
    cJSON *root = chunk_head(j), *arr = cJSON_AddArrayToObject(root, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", ci);
    if (j->chat) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        if (!c->role_sent) cJSON_AddStringToObject(delta, "role", "assistant");
        size_t r_from = c->n_sent > parts.r0 ? c->n_sent : parts.r0, r_to = upto < parts.r1 ? upto : parts.r1;
        if (r_to > r_from) {
            char *r = text_span(c, r_from, r_to);
            cJSON_AddStringToObject(delta, "reasoning_content", r ? r : "");
            free(r);
        }
        size_t c_from = c->n_sent > parts.c0 ? c->n_sent : parts.c0;
        if (upto > c_from || !c->role_sent) {
            char *text = text_span(c, upto > c_from ? c_from : upto, upto);
            cJSON_AddStringToObject(delta, "content", text ? text : "");
            free(text);
        }
    } else {
        char *text = text_span(c, c->n_sent, upto);
        cJSON_AddStringToObject(ch, "text", text ? text : "");
        free(text);
    }
    c->role_sent = true;
    c->n_sent = upto;
    if (has_lp) cJSON_AddItemToObject(ch, "logprobs", logprobs_json(j, c, c->n_lps_sent, c->n_tokens));
    else cJSON_AddNullToObject(ch, "logprobs");
    c->n_lps_sent = c->n_tokens;
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(arr, ch);
    sse_add_json(j, root);
    if (j->tools.parse) sse_tool_progress(j, ci, parts.c0);
}

/* Ends the job's event stream: usage when asked for, then [DONE]. Under srv.mu. */
static void sse_finish(job *j) {
    if (j->err_status) {
        sse_add_json(j, error_json(j->err_msg, (unsigned)j->err_status, j->err_code));
    } else if (j->include_usage) {
        cJSON *root = chunk_head(j);
        cJSON_AddArrayToObject(root, "choices");
        cJSON_AddItemToObject(root, "usage", usage_json(j));
        sse_add_json(j, root);
    }
    sb_add(&j->sse, "data: [DONE]\n\n", 14);
    j->sse_end = true;
}

/* Marks the job failed: a streamed job ends with an error event. Under srv.mu. */
static void job_fail_code_locked(job *j, int status, const char *code, const char *msg) {
    if (j->done) return;
    j->err_status = status;
    j->err_code = code;
    snprintf(j->err_msg, sizeof j->err_msg, "%s", msg);
    j->done = true;
    srv.m_errors++;
    if (j->stream) sse_finish(j);
    pthread_cond_broadcast(&j->cv);
}

static void job_fail_locked(job *j, int status, const char *msg) { job_fail_code_locked(j, status, NULL, msg); }

/* ---- stop strings ---------------------------------------------------------------------------- */

/* Position of the first stop string in text that ends at or after `from`, or -1. */
static long find_stop(const job *j, const sbuf *t, size_t from) {
    long best = -1;
    for (int32_t i = 0; i < j->n_stops; i++) {
        size_t ls = strlen(j->stops[i]);
        size_t start = from >= ls ? from - ls + 1 : 0;
        for (size_t p = start; p + ls <= t->n; p++)
            if (!memcmp(t->v + p, j->stops[i], ls)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* Bytes at the end of text that could begin a stop string (held back from the stream). */
static size_t stop_holdback(const job *j, const sbuf *t) {
    size_t hold = 0;
    for (int32_t i = 0; i < j->n_stops; i++) {
        size_t ls = strlen(j->stops[i]);
        for (size_t k = ls - 1; k > hold; k--)
            if (k <= t->n && !memcmp(t->v + t->n - k, j->stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* ---- state cache ------------------------------------------------------------------------------ */

static void state_path(uint64_t hash, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%016llx.slmstate", srv.o.state_dir, (unsigned long long)hash);
}

/* Drops entry i; its state file too unless keep_file (files outlive the server). */
static void cache_remove(size_t i, bool keep_file) {
    cached_state *c = &srv.cache[i];
    if (c->snap) {
        slm_snapshot_destroy(c->snap);
        srv.cache_bytes -= c->bytes;
    } else if (!keep_file) {
        char path[4096];
        state_path(c->hash, path, sizeof path);
        unlink(path);
    }
    free(c->hist);
    srv.cache[i] = srv.cache[--srv.n_cache];
}

/* Writes the snapshot of entry i to --state-dir and keeps only the file; without --state-dir or
 * when it cannot be written, drops the entry. */
static void cache_spill(size_t i) {
    cached_state *c = &srv.cache[i];
    if (!srv.o.state_dir) {
        cache_remove(i, false);
        return;
    }
    size_t n_files = 0, lru = SIZE_MAX;
    for (size_t k = 0; k < srv.n_cache; k++)
        if (!srv.cache[k].snap) {
            n_files++;
            if (lru == SIZE_MAX || srv.cache[k].last_used < srv.cache[lru].last_used) lru = k;
        }
    if (n_files >= MAX_STATE_FILES) {
        cache_remove(lru, false); /* moves the last entry into lru */
        if (i == srv.n_cache) i = lru;
        c = &srv.cache[i];
    }
    slm_session *tmp = NULL;
    char path[4096];
    state_path(c->hash, path, sizeof path);
    slm_session_params sp = slm_session_params_default();
    sp.n_threads = 1;
    if (slm_session_fork(c->snap, &sp, &tmp, NULL, 0) != SLM_OK || slm_session_save(tmp, path) != SLM_OK) {
        slm_session_destroy(tmp);
        cache_remove(i, false);
        return;
    }
    slm_session_destroy(tmp);
    slm_snapshot_destroy(c->snap);
    c->snap = NULL;
    srv.cache_bytes -= c->bytes;
}

/* Room for one more entry in srv.cache; false when out of memory. */
static bool cache_reserve(void) {
    if (srv.n_cache < srv.cap_cache) return true;
    size_t cap = srv.cap_cache ? srv.cap_cache * 2 : 16;
    cached_state *v = realloc(srv.cache, cap * sizeof *v);
    if (!v) return false;
    srv.cache = v;
    srv.cap_cache = cap;
    return true;
}

/* Keeps the session's state (its history is not a prefix of a kept one) before the slot is
 * reused; evicts the least recently used snapshots beyond --cache-mib. */
static void cache_keep(slm_session *s) {
    size_t n_hist;
    const int32_t *hist = slm_session_history(s, &n_hist);
    if (srv.o.cache_mib <= 0 || n_hist == 0) return;
    uint64_t h = hash_ids(hist, n_hist);
    for (size_t i = 0; i < srv.n_cache; i++)
        if (srv.cache[i].hash == h && srv.cache[i].n_hist == n_hist) {
            srv.cache[i].last_used = ++srv.tick;
            return;
        }
    if (!cache_reserve()) return;
    cached_state c = {0};
    c.hist = malloc(n_hist * sizeof *c.hist);
    if (!c.hist || slm_session_snapshot(s, &c.snap) != SLM_OK) {
        free(c.hist);
        return;
    }
    memcpy(c.hist, hist, n_hist * sizeof *c.hist);
    c.n_hist = n_hist;
    c.bytes = slm_snapshot_bytes(c.snap);
    c.hash = h;
    c.last_used = ++srv.tick;
    srv.cache[srv.n_cache++] = c;
    srv.cache_bytes += c.bytes;
    uint64_t budget = (uint64_t)srv.o.cache_mib << 20;
    while (srv.cache_bytes > budget) {
        size_t lru = SIZE_MAX;
        for (size_t i = 0; i < srv.n_cache; i++)
            if (srv.cache[i].snap && (lru == SIZE_MAX || srv.cache[i].last_used < srv.cache[lru].last_used)) lru = i;
        if (lru == SIZE_MAX) break;
        cache_spill(lru);
    }
}

/* Indexes the state files an earlier server left in --state-dir (names as state_path writes them,
 * loadable into a session of this model and context, history hashing to the name), least recently
 * used first; s is reset afterwards. Other files are left alone. */
static void index_state_dir(slm_session *s) {
    DIR *dir = srv.o.state_dir ? opendir(srv.o.state_dir) : NULL;
    if (!dir) return;
    struct dirent *e;
    size_t n_files = 0;
    while ((e = readdir(dir)) != NULL && n_files < MAX_STATE_FILES) {
        unsigned long long h;
        char tail[16];
        if (strlen(e->d_name) != 25 || sscanf(e->d_name, "%16llx%15s", &h, tail) != 2 || strcmp(tail, ".slmstate") != 0)
            continue;
        char path[4096];
        state_path(h, path, sizeof path);
        size_t n_hist;
        const int32_t *hist;
        if (slm_session_load(s, path) != SLM_OK || !(hist = slm_session_history(s, &n_hist)) ||
            hash_ids(hist, n_hist) != h)
            continue;
        if (!cache_reserve()) break;
        cached_state c = {0};
        if (!(c.hist = malloc(n_hist * sizeof *c.hist))) break;
        memcpy(c.hist, hist, n_hist * sizeof *c.hist);
        c.n_hist = n_hist;
        c.hash = h;
        srv.cache[srv.n_cache++] = c;
        n_files++;
    }
    closedir(dir);
    slm_session_reset(s);
}

/* ---- scheduler -------------------------------------------------------------------------------- */

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ srv.hash_seed;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static void gen_forget_locked(size_t i) {
    srv.gens_bytes -= srv.gens[i].n_text + srv.gens[i].n_ids * sizeof(int32_t);
    free(srv.gens[i].text);
    free(srv.gens[i].ids);
    srv.gens[i] = srv.gens[--srv.n_gens];
}

/* Index of the remembered completion whose text is s[0, n), or -1. */
static long gen_find_locked(const char *s, size_t n) {
    uint64_t h = hash_text(s, n);
    for (size_t i = 0; i < srv.n_gens; i++)
        if (srv.gens[i].hash == h && srv.gens[i].n_text == n && memcmp(srv.gens[i].text, s, n) == 0) return (long)i;
    return -1;
}

/* Remembers the ids of a finished chat choice under its text (evicting the least recently used). */
static void gen_remember_locked(const choice *c) {
    if (!srv.gens || c->ids_cut || c->n_ids == 0 || c->text.n == 0) return;
    size_t bytes = c->text.n + c->n_ids * sizeof(int32_t);
    if (bytes > GEN_MEMORY_BYTES / 4) return;
    long old = gen_find_locked(c->text.v, c->text.n);
    if (old >= 0) gen_forget_locked((size_t)old);
    while (srv.n_gens > 0 && (srv.n_gens == GEN_MEMORY_N || srv.gens_bytes + bytes > GEN_MEMORY_BYTES)) {
        size_t lru = 0;
        for (size_t i = 1; i < srv.n_gens; i++)
            if (srv.gens[i].last_used < srv.gens[lru].last_used) lru = i;
        gen_forget_locked(lru);
    }
    gen_memory g = {hash_text(c->text.v, c->text.n), ++srv.gen_tick, malloc(c->text.n), c->text.n,
                    malloc(c->n_ids * sizeof(int32_t)), c->n_ids};
    if (!g.text || !g.ids) {
        free(g.text);
        free(g.ids);
        return;
    }
    memcpy(g.text, c->text.v, c->text.n);
    memcpy(g.ids, c->ids, c->n_ids * sizeof(int32_t));
    srv.gens[srv.n_gens++] = g;
    srv.gens_bytes += bytes;
}

static void stream_end(stream *st) {
    slm_spec_stats ss = {0};
    if (st->spec) slm_spec_get_stats(st->spec, &ss);
    slm_spec_destroy(st->spec);
    st->spec = NULL;
    slm_sampler_destroy(st->smp);
    slm_constraint_destroy(st->con);
    slm_detokenizer_destroy(st->dt);
    free(st->own_logits);
    if (st->own_session) slm_session_destroy(st->s);
    st->smp = NULL;
    st->con = NULL;
    st->dt = NULL;
    st->own_logits = NULL;
    if (st->own_session) st->s = NULL;
    st->last_used = ++srv.tick;
    pthread_mutex_lock(&srv.mu);
    job *j = st->j;
    st->j = NULL;
    if (!st->own_session) srv.m_busy--;
    srv.m_drafted += ss.n_drafted;
    srv.m_accepted += ss.n_accepted;
    srv.m_replays += ss.n_replays;
    if (j) {
        if (++j->n_done == j->n || j->err_status || j->cancelled) {
            if (!j->done) {
                j->done = true;
                if (j->chat && !j->err_status && !j->cancelled)
                    for (int32_t i = 0; i < j->n; i++) gen_remember_locked(&j->choices[i]);
                if (j->stream) sse_finish(j);
                pthread_cond_broadcast(&j->cv);
            }
        }
        job_unref_locked(j);
    }
    pthread_mutex_unlock(&srv.mu);
}

static bool stream_begin(stream *st, job *j, int32_t ci) {
    slm_sampler_params sp = j->sp;
    sp.seed += (uint64_t)ci;
    st->j = j;
    st->choice = ci;
    st->n_gen = 0;
    st->next_id = -1;
    st->first_sync = true;
    if (slm_sampler_create(&sp, &st->smp) != SLM_OK || slm_detokenizer_create(srv.tok, &st->dt) != SLM_OK) return false;
    return !j->grammar || (slm_constraint_create(j->grammar, srv.gvocab, &st->con) == SLM_OK &&
                           slm_sampler_set_constraint(st->smp, st->con) == SLM_OK);
}

/* Picks the idle slot for j and brings it to the best kept state; NULL when none is idle. */
static stream *admit(job *j) {
    stream *best = NULL;
    size_t best_lcp = 0;
    for (int32_t i = 0; i < srv.o.parallel; i++) {
        stream *st = &srv.slots[i];
        if (st->j) continue;
        size_t n_hist;
        const int32_t *hist = slm_session_history(st->s, &n_hist);
        size_t lcp = common_prefix(hist, n_hist, j->prompt, j->n_prompt);
        if (!best || lcp > best_lcp || (lcp == best_lcp && st->last_used < best->last_used)) {
            best = st;
            best_lcp = lcp;
        }
    }
    if (!best) return NULL;
    if (srv.o.no_prefix_reuse) {
        slm_session_reset(best->s);
        best->n_fed = 0;
        return best;
    }
    size_t n_hist;
    slm_session_history(best->s, &n_hist);
    size_t best_cache = SIZE_MAX, cache_lcp = best_lcp;
    for (size_t i = 0; i < srv.n_cache; i++) {
        size_t lcp = common_prefix(srv.cache[i].hist, srv.cache[i].n_hist, j->prompt, j->n_prompt);
        bool better = lcp > cache_lcp ||
                      (best_cache != SIZE_MAX && lcp == cache_lcp && srv.cache[i].snap && !srv.cache[best_cache].snap);
        if (better) {
            best_cache = i;
            cache_lcp = lcp;
        }
    }
    if (best_lcp < n_hist) cache_keep(best->s); /* the slot's state is about to be lost */
    if (best_cache != SIZE_MAX) {
        /* cache_keep may have reordered the cache: find the entry again by its history */
        for (size_t i = 0; i < srv.n_cache; i++)
            if (common_prefix(srv.cache[i].hist, srv.cache[i].n_hist, j->prompt, j->n_prompt) == cache_lcp) {
                cached_state *c = &srv.cache[i];
                c->last_used = ++srv.tick;
                if (c->snap) {
                    slm_session_restore(best->s, c->snap);
                } else {
                    char path[4096];
                    state_path(c->hash, path, sizeof path);
                    if (slm_session_load(best->s, path) != SLM_OK) cache_remove(i, false);
                }
                break;
            }
    }
    best->n_fed = 0;
    return best;
}

/* One prefill chunk: brings st->s to prompt[0, min(n_prompt, n_fed + CHUNK)) with
 * slm_session_sync (the first call reuses the common prefix); false when the job failed. */
static bool prefill_step(stream *st) {
    job *j = st->j;
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    if (st->first_sync) st->n_fed = common_prefix(hist, n_hist, j->prompt, j->n_prompt);
    size_t target = st->n_fed + CHUNK < j->n_prompt ? st->n_fed + CHUNK : j->n_prompt;
    size_t reused = 0;
    slm_status s = slm_session_sync(st->s, j->prompt, target, &st->logits, &reused);
    pthread_mutex_lock(&srv.mu);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "prefill failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        job_fail_locked(j, 500, msg);
        pthread_mutex_unlock(&srv.mu);
        return false;
    }
    if (st->first_sync) {
        j->cached_tokens = reused;
        srv.m_reused_tokens += reused;
        st->first_sync = false;
    }
    pthread_mutex_unlock(&srv.mu);
    st->n_fed = target;
    return true;
}

/* Forks the slot's prefilled session for choices 1..n-1 (each starts from a copy of the prompt's
 * logits). A failed fork fails the job. */
static void fork_choices(stream *slot) {
    job *j = slot->j;
    if (j->n <= 1) return;
    slm_snapshot *snap = NULL;
    bool ok = slm_session_snapshot(slot->s, &snap) == SLM_OK;
    for (int32_t ci = 1; ok && ci < j->n; ci++) {
        stream *f = NULL;
        for (int32_t k = 0; k < srv.n_forks_cap && !f; k++)
            if (!srv.forks[k].j) f = &srv.forks[k];
        slm_session_params sp = slm_session_params_default();
        sp.n_threads = srv.o.n_threads;
        cli_apply_env(&sp, NULL);
        if (!f || slm_session_fork(snap, &sp, &f->s, NULL, 0) != SLM_OK) {
            ok = false;
            break;
        }
        f->own_session = true;
        f->own_logits = malloc((size_t)srv.n_vocab * sizeof *f->own_logits);
        pthread_mutex_lock(&srv.mu);
        j->refs++;
        pthread_mutex_unlock(&srv.mu);
        if (!stream_begin(f, j, ci) || !f->own_logits) {
            stream_end(f);
            ok = false;
            break;
        }
        memcpy(f->own_logits, slot->logits, (size_t)srv.n_vocab * sizeof *f->own_logits);
        f->logits = f->own_logits;
        f->n_fed = j->n_prompt;
        f->first_sync = false;
    }
    slm_snapshot_destroy(snap);
    if (!ok) {
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(j, 500, "cannot fork the session for n > 1");
        pthread_mutex_unlock(&srv.mu);
    }
}

static void top_logprobs(const float *logits, int32_t n_vocab, int32_t id, int32_t k, tok_lp *out) {
    double mx = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    out->id = id;
    out->logprob = (float)((double)logits[id] - lse);
    out->n_top = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        /* insertion into the k largest, ties to the lower id */
        int32_t p = out->n_top < k ? out->n_top++ : k;
        if (p == k && (k == 0 || !(logits[i] > logits[out->top_id[k - 1]]))) continue;
        if (p == k) p = k - 1;
        while (p > 0 && logits[i] > logits[out->top_id[p - 1]]) {
            out->top_id[p] = out->top_id[p - 1];
            p--;
        }
        out->top_id[p] = i;
    }
    for (int32_t i = 0; i < out->n_top; i++) out->top_lp[i] = (float)((double)logits[out->top_id[i]] - lse);
}

/* Publishes token id, generated at session position pos (st->logits are its logits when logprobs
 * were asked for); false when the stream ended. */
static bool publish_token(stream *st, int32_t id, int32_t pos) {
    job *j = st->j;
    choice *c = &j->choices[st->choice];
    tok_lp lp = {0};
    const char *piece = NULL, *tail = NULL;
    size_t n_piece = 0, n_tail = 0;
    const char *finish = NULL;
    bool eog = !j->ignore_eos && slm_tokenizer_is_eog(srv.tok, id);
    if (eog) {
        finish = "stop";
    } else {
        if (j->logprobs) top_logprobs(st->logits, srv.n_vocab, id, j->top_logprobs, &lp);
        if (slm_detokenizer_push(st->dt, id, &piece, &n_piece) != SLM_OK) n_piece = 0;
        st->n_gen++;
        if (st->con && slm_constraint_done(st->con)) finish = "stop"; /* only the end may follow */
        else if (st->n_gen >= j->max_tokens || pos >= srv.n_ctx) finish = "length";
    }
    pthread_mutex_lock(&srv.mu);
    bool ok = true;
    if (!eog) {
        size_t old = c->text.n;
        sb_add(&c->text, piece ? piece : "", n_piece);
        if (finish && slm_detokenizer_flush(st->dt, &tail, &n_tail) == SLM_OK) sb_add(&c->text, tail, n_tail);
        if (j->logprobs) {
            tok_lp *v = realloc(c->lps, (c->n_tokens + 1) * sizeof *v);
            if (v) {
                c->lps = v;
                v[c->n_tokens] = lp;
            } else {
                ok = false;
            }
        }
        c->n_tokens++;
        srv.m_gen_tokens++;
        if (c->n_ids == c->cap_ids) {
            size_t cap = c->cap_ids ? 2 * c->cap_ids : 64;
            int32_t *v = realloc(c->ids, cap * sizeof *v);
            if (v) {
                c->ids = v;
                c->cap_ids = cap;
            }
        }
        if (c->n_ids < c->cap_ids) c->ids[c->n_ids++] = id;
        else c->ids_cut = true; /* out of memory: not remembered */
        long at = j->n_stops ? find_stop(j, &c->text, old) : -1;
        if (at >= 0) {
            c->text.n = (size_t)at;
            c->text.v[at] = '\0';
            c->ids_cut = true;
            finish = "stop";
        }
    }
    if (finish) c->finish = finish;
    if (!ok) {
        job_fail_locked(j, 500, "out of memory");
    } else if (j->stream && !j->cancelled) {
        size_t upto = finish ? c->text.n : c->text.n - stop_holdback(j, &c->text);
        if (upto < c->n_sent) upto = c->n_sent;
        sse_choice(j, st->choice, upto);
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&srv.mu);
    return !finish && ok;
}

/* Samples the next token of a prefilled stream and publishes it; false when the stream ended. */
static bool sample_step(stream *st) {
    size_t n_hist;
    const int32_t *hist = slm_session_history(st->s, &n_hist);
    int32_t id = -1;
    slm_status ss = SLM_OK;
    if (cli_first_nonfinite(st->logits, srv.n_vocab) >= 0 ||
        (ss = slm_sampler_sample(st->smp, st->logits, srv.n_vocab, hist, n_hist, &id)) != SLM_OK) {
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(st->j, 500, ss == SLM_ERR_STATE   ? "no token of the vocabulary continues the grammar here"
                                    : ss == SLM_ERR_RANGE ? "logit_bias bans every token"
                                                          : "the model produced non-finite logits");
        pthread_mutex_unlock(&srv.mu);
        return false;
    }
    if (st->con && slm_constraint_accept(st->con, id) != SLM_OK) { /* the mask allowed it: a bug */
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(st->j, 500, slm_constraint_errmsg(st->con));
        pthread_mutex_unlock(&srv.mu);
        return false;
    }
    if (!publish_token(st, id, slm_session_pos(st->s))) return false;
    st->next_id = id;
    return true;
}

/* Whether st generates by speculation now: --lookup or --draft-model, no logprobs asked for, room
 * left in the context, and the session holds the logits of its last token (a fork holds them after
 * its first decode). */
static bool spec_wanted(const stream *st) {
    return (srv.o.lookup || srv.draft_model) && !st->j->logprobs && !st->con && slm_session_pos(st->s) < srv.n_ctx &&
           (!st->own_session || st->n_gen > 0);
}

/* Starts the speculation driver of st for its job: greedy at temperature 0 without a repetition
 * penalty (the tokens plain greedy decoding gives), else speculative sampling with the stream's
 * sampler. False when the job failed. */
static bool spec_begin(stream *st) {
    char err[200] = "";
    slm_status s = SLM_OK;
    if (srv.draft_model && !st->draft) {
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = srv.n_ctx;
        sp.n_threads = srv.o.n_threads;
        cli_apply_env(&sp, NULL);
        s = slm_session_create(srv.draft_model, &sp, &st->draft, err, sizeof err);
    }
    if (s == SLM_OK) {
        slm_spec_params p = slm_spec_params_default();
        if (srv.o.draft_max) p.draft_max = srv.o.draft_max;
        p.draft = srv.draft_model ? st->draft : NULL;
        p.sampler = cli_sampler_is_argmax(&st->j->sp) ? NULL : st->smp;
        s = slm_spec_create(st->s, &p, &st->spec, err, sizeof err);
    }
    if (s == SLM_OK) return true;
    char msg[256];
    snprintf(msg, sizeof msg, "cannot start speculative decoding: %s (%s)", err, slm_status_name(s));
    pthread_mutex_lock(&srv.mu);
    job_fail_locked(st->j, 500, msg);
    pthread_mutex_unlock(&srv.mu);
    return false;
}

/* One speculation step of st: the next token and the drafted ones the target kept, all decoded,
 * published in order; false when the stream ended. Tokens after the end stay in the session's
 * history (the next request's slm_session_sync drops them). */
static bool spec_step(stream *st) {
    job *j = st->j;
    int32_t ids[65];
    size_t n_max = (size_t)(j->max_tokens - st->n_gen), n = 0;
    if (n_max > 65) n_max = 65;
    int32_t pos0 = slm_session_pos(st->s);
    double t0 = now_s();
    slm_status s = slm_spec_step(st->spec, n_max, ids, &n);
    pthread_mutex_lock(&srv.mu);
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "speculative decoding failed: %s (%s)", slm_spec_errmsg(st->spec),
                 slm_status_name(s));
        job_fail_locked(j, 500, msg);
    } else {
        srv.m_decode_s += now_s() - t0;
        srv.m_decode_tokens += n;
    }
    pthread_mutex_unlock(&srv.mu);
    if (s != SLM_OK) return false;
    /* st->logits (the session's logits buffer) now holds the logits after ids[n - 1] */
    for (size_t i = 0; i < n; i++)
        if (!publish_token(st, ids[i], pos0 + (int32_t)i)) return false;
    return true;
}

/* Whether a stream's decode step may join the scheduler step's batch (every stream that reaches
 * decode_all today: speculating streams step through spec_step instead); one that returns false is
 * decoded alone. */
static bool stream_batches(const stream *st) {
    (void)st;
    return true;
}

/* One decode step alone; a failure fails that stream's request only. */
static void decode_one(stream *st) {
    slm_status s = slm_session_decode(st->s, st->next_id, &st->logits);
    st->next_id = -1;
    if (s != SLM_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "decode failed: %s (%s)", slm_session_errmsg(st->s), slm_status_name(s));
        pthread_mutex_lock(&srv.mu);
        job_fail_locked(st->j, 500, msg);
        pthread_mutex_unlock(&srv.mu);
    }
}

/* Decodes the sampled token of every stream in v[0, n), the one place decode steps happen: the
 * streams that batch go through one slm_session_decode_batch call (each weight read once for all
 * of them; bit-identical to decoding each alone), the others one by one. A refused batch changes
 * no session and falls back to decoding each stream alone, so a failure reaches only the request
 * whose decode fails. */
static void decode_all(stream **v, int32_t n) {
    double t0 = now_s();
    size_t cap = (size_t)n;
    stream **in_batch = malloc(cap * sizeof *in_batch);
    slm_session **sess = malloc(cap * sizeof *sess);
    const float **lg = malloc(cap * sizeof *lg);
    int32_t *tok = malloc(cap * sizeof *tok);
    bool scratch = in_batch && sess && lg && tok; /* without it, every stream decodes alone */
    int32_t n_batch = 0;
    for (int32_t i = 0; i < n; i++)
        if (scratch && stream_batches(v[i])) in_batch[n_batch++] = v[i];
        else decode_one(v[i]);
    bool batched = false;
    if (n_batch > 1) {
        for (int32_t i = 0; i < n_batch; i++) {
            sess[i] = in_batch[i]->s;
            tok[i] = in_batch[i]->next_id;
        }
        batched = slm_session_decode_batch(sess, tok, (size_t)n_batch, lg, NULL, 0) == SLM_OK;
        if (batched)
            for (int32_t i = 0; i < n_batch; i++) {
                in_batch[i]->logits = lg[i];
                in_batch[i]->next_id = -1;
            }
    }
    if (!batched)
        for (int32_t i = 0; i < n_batch; i++) decode_one(in_batch[i]);
    free(in_batch);
    free(sess);
    free(lg);
    free(tok);
    pthread_mutex_lock(&srv.mu);
    srv.m_decode_s += now_s() - t0;
    srv.m_decode_tokens += (uint64_t)n;
    if (batched) {
        srv.m_batch_steps++;
        srv.m_batch_slots += (uint64_t)n_batch;
        if (n_batch > srv.m_batch_max) srv.m_batch_max = n_batch;
    } else if (n_batch > 1) {
        srv.m_batch_fallbacks++;
    }
    pthread_mutex_unlock(&srv.mu);
}

static bool stream_dead(const stream *st) {
    pthread_mutex_lock(&srv.mu);
    bool dead = st->j->cancelled || st->j->err_status != 0 || srv.stopping;
    pthread_mutex_unlock(&srv.mu);
    return dead;
}

static void *scheduler(void *arg) {
    (void)arg;
    int32_t n_all = srv.o.parallel + srv.n_forks_cap;
    stream **all = malloc((size_t)n_all * sizeof *all), **dec = malloc((size_t)n_all * sizeof *dec);
    for (int32_t i = 0; i < srv.o.parallel; i++) all[i] = &srv.slots[i];
    for (int32_t i = 0; i < srv.n_forks_cap; i++) all[srv.o.parallel + i] = &srv.forks[i];
    for (;;) {
        /* admit queued jobs into idle slots */
        pthread_mutex_lock(&srv.mu);
        for (;;) {
            bool any_active = srv.m_busy > 0;
            for (int32_t i = 0; i < srv.n_forks_cap && !any_active; i++) any_active = srv.forks[i].j != NULL;
            if (srv.stopping || srv.queue_head || any_active) break;
            pthread_cond_wait(&srv.wake, &srv.mu);
        }
        bool stopping = srv.stopping;
        while (!stopping && srv.queue_head && srv.m_busy < srv.o.parallel) {
            job *j = srv.queue_head;
            srv.queue_head = j->next;
            if (!srv.queue_head) srv.queue_tail = NULL;
            srv.queue_len--;
            if (j->cancelled) {
                job_unref_locked(j);
                continue;
            }
            srv.m_busy++;
            pthread_mutex_unlock(&srv.mu);
            stream *st = admit(j);
            bool ok = st && stream_begin(st, j, 0);
            pthread_mutex_lock(&srv.mu);
            if (!ok) {
                job_fail_locked(j, 500, "cannot start the generation");
                if (st) {
                    pthread_mutex_unlock(&srv.mu);
                    stream_end(st);
                    pthread_mutex_lock(&srv.mu);
                } else {
                    srv.m_busy--;
                    job_unref_locked(j);
                }
            }
        }
        if (stopping) {
            while (srv.queue_head) {
                job *j = srv.queue_head;
                srv.queue_head = j->next;
                srv.queue_len--;
                job_fail_code_locked(j, 503, "server_shutting_down", "the server is shutting down");
                job_unref_locked(j);
            }
            srv.queue_tail = NULL;
        }
        pthread_mutex_unlock(&srv.mu);
        /* one step per active stream */
        int32_t n_dec = 0;
        bool any = false;
        for (int32_t i = 0; i < n_all; i++) {
            stream *st = all[i];
            if (!st->j) continue;
            any = true;
            if (stream_dead(st)) {
                pthread_mutex_lock(&srv.mu);
                if (st->j->cancelled && !st->j->done) srv.m_cancelled++;
                if (srv.stopping && !st->j->choices[st->choice].finish) /* cut short: an error, not "stop" */
                    job_fail_code_locked(st->j, 503, "server_shutting_down", "the server is shutting down");
                pthread_mutex_unlock(&srv.mu);
                stream_end(st);
                continue;
            }
            if (st->n_fed < st->j->n_prompt) {
                if (!prefill_step(st)) stream_end(st);
                else if (st->n_fed == st->j->n_prompt && !st->own_session) fork_choices(st);
                continue;
            }
            if (!st->spec && spec_wanted(st) && !spec_begin(st)) {
                stream_end(st);
                continue;
            }
            if (st->spec && slm_session_pos(st->s) < srv.n_ctx) {
                if (!spec_step(st)) stream_end(st);
                continue;
            }
            if (sample_step(st)) dec[n_dec++] = st;
            else stream_end(st);
        }
        if (n_dec) decode_all(dec, n_dec);
        if (stopping && !any) break;
    }
    free(all);
    free(dec);
    return NULL;
}

/* ---- requests ---------------------------------------------------------------------------------- */

typedef struct req {
    sbuf body;
    bool too_big;
} req;

/* Whether --cors allows the request's Origin: "*" allows any, else a comma-separated list. */
static bool cors_allowed(const char *origin) {
    if (!srv.o.cors || !origin) return false;
    if (!strcmp(srv.o.cors, "*")) return true;
    size_t n = strlen(origin);
    for (const char *p = srv.o.cors; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, origin, n)) return true;
        p += len + (end != NULL);
    }
    return false;
}

/* Queues resp with the headers every response carries (CORS for an allowed Origin). */
static enum MHD_Result queue_response(struct MHD_Connection *conn, unsigned status, struct MHD_Response *resp) {
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (cors_allowed(origin)) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", !strcmp(srv.o.cors, "*") ? "*" : origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    enum MHD_Result ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, cJSON *obj, bool retry_after) {
    char *s = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (!s) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    return queue_response(conn, status, r);
}

/* An error response; code NULL: the status's own OpenAI code (error_json). */
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&srv.mu);
    srv.m_errors++;
    pthread_mutex_unlock(&srv.mu);
    return send_json(conn, status, error_json(msg, status, code), status == 503);
}

/* Deepest nesting of arrays and objects in a JSON text (strings skipped). */
static int json_depth(const char *s, size_t n) {
    int depth = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max) max = depth;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return max;
}

/* Tokenizes text into a fresh job prompt; false with msg on failure. */
static bool encode_prompt(job *j, const char *text, uint32_t flags, char *msg, size_t cap) {
    size_t len = strlen(text), n = 0;
    j->prompt = malloc((len + 16) * sizeof *j->prompt);
    if (!j->prompt) return snprintf(msg, cap, "out of memory"), false;
    slm_status s = slm_tokenizer_encode(srv.tok, text, len, flags, j->prompt, len + 16, &n);
    if (s != SLM_OK) return snprintf(msg, cap, "cannot tokenize the prompt (%s)", slm_status_name(s)), false;
    j->n_prompt = n;
    return true;
}

/* Reads a number field into *out; absent leaves *out. false with msg when not a number in [lo, hi]. */
static bool num_field(const cJSON *root, const char *name, double lo, double hi, bool integer, double *out, char *msg,
                      size_t cap) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) return true;
    if (!cJSON_IsNumber(f) || !(f->valuedouble >= lo && f->valuedouble <= hi) ||
        (integer && f->valuedouble != floor(f->valuedouble))) {
        snprintf(msg, cap, "'%s' must be %s in [%g, %g]", name, integer ? "an integer" : "a number", lo, hi);
        return false;
    }
    *out = f->valuedouble;
    return true;
}

/* Reads "logit_bias": {"token id": bias, ...} (OpenAI; a bias <= -100 or false bans the token, as
 * -100 does there) into the job's sampler parameters. false with msg on a bad entry. */
static bool parse_logit_bias(const cJSON *f, job *j, char *msg, size_t cap) {
    if (!f || cJSON_IsNull(f)) return true;
    if (!cJSON_IsObject(f)) return snprintf(msg, cap, "'logit_bias' must be an object of token ids to biases"), false;
    int32_t n = cJSON_GetArraySize(f);
    if (n > MAX_LOGIT_BIAS) return snprintf(msg, cap, "'logit_bias' takes at most %d entries", MAX_LOGIT_BIAS), false;
    if (n == 0) return true;
    slm_logit_bias *v = malloc((size_t)n * sizeof *v);
    if (!v) return snprintf(msg, cap, "out of memory"), false;
    j->sp.logit_bias = v;
    const cJSON *e;
    int32_t i = 0;
    cJSON_ArrayForEach(e, f) {
        char *end = NULL;
        long id = strtol(e->string, &end, 10);
        if (!e->string[0] || *end || id < 0 || id >= srv.n_vocab)
            return snprintf(msg, cap, "logit_bias: '%.40s' is not a token id in [0, %d)", e->string, srv.n_vocab), false;
        float bias;
        if (cJSON_IsFalse(e)) bias = -INFINITY;
        else if (cJSON_IsNumber(e) && e->valuedouble >= -100 && e->valuedouble <= 100)
            bias = e->valuedouble <= -100 ? -INFINITY : (float)e->valuedouble;
        else return snprintf(msg, cap, "logit_bias['%.40s'] must be a number in [-100, 100] or false", e->string), false;
        v[i++] = (slm_logit_bias){(int32_t)id, bias};
        j->sp.n_logit_bias = i;
    }
    return true;
}

/* The grammar vocabulary of the model, made once (at the first constrained request); NULL when it
 * cannot be made. */
static const slm_grammar_vocab *grammar_vocab(void) {
    pthread_mutex_lock(&srv.gvocab_mu);
    if (!srv.gvocab && slm_grammar_vocab_create(srv.tok, &srv.gvocab) != SLM_OK) srv.gvocab = NULL;
    pthread_mutex_unlock(&srv.gvocab_mu);
    return srv.gvocab;
}

/* Compiles the request's output constraint into j->grammar: response_format ({"type": "text"},
 * {"type": "json_object"} with an optional llama-server "schema", {"type": "json_schema",
 * "json_schema": {"schema": ...}}), or llama-server's "grammar" (GBNF) or "json_schema"; at most
 * one of them. false with msg naming what is wrong. */
static bool parse_constraint(const cJSON *root, job *j, char *msg, size_t cap) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "json_schema");
    const cJSON *given[3] = {rf, gbnf, schema};
    int n_given = 0;
    for (int i = 0; i < 3; i++) n_given += given[i] && !cJSON_IsNull(given[i]);
    if (n_given > 1) return snprintf(msg, cap, "give one of 'response_format', 'grammar' and 'json_schema'"), false;
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
            return snprintf(msg, cap, "'response_format' must be an object with a string 'type'"), false;
        if (!strcmp(type->valuestring, "text")) return true;
        if (!strcmp(type->valuestring, "json_object")) {
            schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
            if (!schema) schema = rf; /* any object: its "type" is "json_object", read below as such */
        } else if (!strcmp(type->valuestring, "json_schema")) {
            const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            schema = js ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
            if (!cJSON_IsObject(schema))
                return snprintf(msg, cap, "response_format json_schema needs 'json_schema': {'schema': {...}}"), false;
        } else {
            return snprintf(msg, cap, "response_format type '%.40s' is not text, json_object or json_schema",
                            type->valuestring), false;
        }
    }
    if (gbnf && !cJSON_IsNull(gbnf) && !cJSON_IsString(gbnf))
        return snprintf(msg, cap, "'grammar' must be a string (GBNF)"), false;
    if (schema && !cJSON_IsNull(schema) && !cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return snprintf(msg, cap, "'json_schema' must be a JSON Schema object"), false;
    bool any_object = schema == rf && rf != NULL;
    if (!cJSON_IsString(gbnf) && !(schema && !cJSON_IsNull(schema))) return true;
    if (j->ignore_eos) return snprintf(msg, cap, "'ignore_eos' cannot be combined with a grammar"), false;
    if (!grammar_vocab()) return snprintf(msg, cap, "cannot build the vocabulary's trie for the grammar"), false;
    char err[384] = "";
    slm_status st;
    if (cJSON_IsString(gbnf)) {
        st = slm_grammar_create(gbnf->valuestring, strlen(gbnf->valuestring), NULL, &j->grammar, err, sizeof err);
    } else {
        char *text = any_object ? strdup("{\"type\":\"object\"}") : cJSON_PrintUnformatted(schema);
        if (!text) return snprintf(msg, cap, "out of memory"), false;
        st = slm_grammar_from_json_schema(text, strlen(text), &j->grammar, err, sizeof err);
        free(text);
    }
    if (st != SLM_OK) return snprintf(msg, cap, "%s (%s)", err[0] ? err : "bad grammar", slm_status_name(st)), false;
    return true;
}

/* Builds a job from a request body; returns 0 or the HTTP status of the error (message in msg,
 * OpenAI code in *code when more specific than the status's). */
static unsigned parse_request(const char *body, size_t n_body, bool chat, job **out, const char **code, char *msg,
                              size_t cap) {
    *out = NULL;
    *code = NULL;
    if (json_depth(body, n_body) > MAX_JSON_DEPTH)
        return (unsigned)snprintf(msg, cap, "JSON nested deeper than %d levels", MAX_JSON_DEPTH), 400;
    cJSON *root = cJSON_ParseWithLength(body, n_body);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(msg, cap, "the body is not a JSON object");
        return 400;
    }
    unsigned status = 400;
    slm_chat_message *msgs = NULL;
    slm_chat_ids *content_ids = NULL;
    char **calls = NULL; /* (n_msgs) each message's tool_calls JSON, or NULL */
    size_t n_msgs = 0;
    bool any_calls = false;
    job *j = calloc(1, sizeof *j);
    if (!j) goto fail;
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->chat = chat;
    j->n = 1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsString(model)) {
        snprintf(msg, cap, "'model' must be a string");
        goto fail;
    }
    /* one model is served: any name is accepted, as llama-server does (/v1/models says so) */
    double v;
    j->sp = srv.o.sampling;
    j->sp.logit_bias = NULL;
    j->sp.n_logit_bias = 0;
    j->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)j << 7);
    static const struct {
        const char *name;
        double lo, hi;
        bool integer;
        size_t offset;
    } sampling_fields[] = {
        {"temperature", 0, 2, false, offsetof(slm_sampler_params, temperature)},
        {"top_p", 0, 1, false, offsetof(slm_sampler_params, top_p)},
        {"min_p", 0, 1, false, offsetof(slm_sampler_params, min_p)},
        {"top_k", 0, 1e9, true, offsetof(slm_sampler_params, top_k)},
        {"presence_penalty", -2, 2, false, offsetof(slm_sampler_params, presence_penalty)},
        {"frequency_penalty", -2, 2, false, offsetof(slm_sampler_params, frequency_penalty)},
        {"repeat_penalty", 1e-6, 100, false, offsetof(slm_sampler_params, repeat_penalty)},
        {"repeat_last_n", 0, 1e9, true, offsetof(slm_sampler_params, repeat_last_n)},
    };
    for (size_t k = 0; k < sizeof sampling_fields / sizeof *sampling_fields; k++) {
        char *field = (char *)&j->sp + sampling_fields[k].offset;
        bool integer = sampling_fields[k].integer;
        if (integer) v = *(int32_t *)(void *)field;
        else v = *(float *)(void *)field;
        if (!num_field(root, sampling_fields[k].name, sampling_fields[k].lo, sampling_fields[k].hi, integer, &v, msg, cap))
            goto fail;
        if (integer) *(int32_t *)(void *)field = (int32_t)v;
        else *(float *)(void *)field = (float)v;
    }
    if (j->sp.top_p == 0.0f) j->sp.top_p = FLT_MIN; /* the most probable token only (0 is the C default) */
    if (!parse_logit_bias(cJSON_GetObjectItemCaseSensitive(root, "logit_bias"), j, msg, cap)) goto fail;
    v = -1;
    if (!num_field(root, "seed", -9.2e18, 9.2e18, true, &v, msg, cap)) goto fail;
    if (v >= 0 || cJSON_GetObjectItemCaseSensitive(root, "seed")) j->sp.seed = (uint64_t)(int64_t)v;
    v = 1;
    if (!num_field(root, "n", 1, MAX_N, true, &v, msg, cap)) goto fail;
    j->n = (int32_t)v;
    v = -1;
    if (!num_field(root, "max_tokens", 1, 1e9, true, &v, msg, cap)) goto fail;
    if (!num_field(root, "max_completion_tokens", 1, 1e9, true, &v, msg, cap)) goto fail;
    if (v > srv.o.max_tokens) {
        snprintf(msg, cap, "max_tokens %.0f is beyond this server's limit of %d", v, srv.o.max_tokens);
        goto fail;
    }
    j->max_tokens = v > 0 ? (int32_t)v : srv.o.max_tokens;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (f && !cJSON_IsNull(f) && !cJSON_IsBool(f)) {
        snprintf(msg, cap, "'stream' must be a boolean");
        goto fail;
    }
    j->stream = cJSON_IsTrue(f);
    f = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    j->include_usage = f && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "include_usage"));
    f = cJSON_GetObjectItemCaseSensitive(root, "ignore_eos");
    j->ignore_eos = cJSON_IsTrue(f);
    if (!parse_constraint(root, j, msg, cap)) goto fail;
    if (chat) {
        slm_grammar *forced = NULL;
        if (!tools_read_request(root, srv.chat_template, j->grammar != NULL, &j->tools, &forced, msg, cap)) goto fail;
        if (forced) {
            if (j->ignore_eos || !grammar_vocab()) {
                slm_grammar_destroy(forced);
                snprintf(msg, cap, j->ignore_eos ? "'ignore_eos' cannot be combined with a forced tool call"
                                                 : "cannot build the vocabulary's trie for the grammar");
                goto fail;
            }
            j->grammar = forced;
        }
    }
    f = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (cJSON_IsString(f)) {
        if (f->valuestring[0] && !(j->stops[j->n_stops++] = strdup(f->valuestring))) goto fail;
    } else if (cJSON_IsArray(f)) {
        const cJSON *e;
        if (cJSON_GetArraySize(f) > MAX_STOPS) {
            snprintf(msg, cap, "'stop' takes at most %d strings", MAX_STOPS);
            goto fail;
        }
        cJSON_ArrayForEach(e, f) {
            if (!cJSON_IsString(e)) {
                snprintf(msg, cap, "'stop' must be a string or a list of strings");
                goto fail;
            }
            if (e->valuestring[0] && !(j->stops[j->n_stops++] = strdup(e->valuestring))) goto fail;
        }
    } else if (f && !cJSON_IsNull(f)) {
        snprintf(msg, cap, "'stop' must be a string or a list of strings");
        goto fail;
    }
    f = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    if (chat) {
        if (f && !cJSON_IsNull(f) && !cJSON_IsBool(f)) {
            snprintf(msg, cap, "'logprobs' must be a boolean");
            goto fail;
        }
        j->logprobs = cJSON_IsTrue(f);
        v = 0;
        if (!num_field(root, "top_logprobs", 0, MAX_TOP_LOGPROBS, true, &v, msg, cap)) goto fail;
        j->top_logprobs = (int32_t)v;
        if (v > 0 && !j->logprobs) {
            snprintf(msg, cap, "'top_logprobs' needs 'logprobs': true");
            goto fail;
        }
    } else {
        v = -1;
        if (!num_field(root, "logprobs", 0, 5, true, &v, msg, cap)) goto fail;
        j->logprobs = v >= 0;
        j->top_logprobs = v > 0 ? (int32_t)v : 0;
    }
    if (chat) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "messages"), *e;
        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0) {
            snprintf(msg, cap, "'messages' must be a non-empty list");
            goto fail;
        }
        msgs = calloc((size_t)cJSON_GetArraySize(arr), sizeof *msgs);
        calls = calloc((size_t)cJSON_GetArraySize(arr), sizeof *calls);
        if (!msgs || !calls) goto fail;
        cJSON_ArrayForEach(e, arr) {
            const char *r, *content;
            if (!tools_read_message(e, n_msgs, &r, &content, &calls[n_msgs], msg, cap)) goto fail;
            any_calls |= calls[n_msgs] != NULL;
            msgs[n_msgs++] = (slm_chat_message){r, content};
        }
        /* an assistant message that is exactly a completion this server returned continues from the
         * ids it was generated as */
        if (!(content_ids = calloc(n_msgs ? n_msgs : 1, sizeof *content_ids))) goto fail;
        pthread_mutex_lock(&srv.mu);
        for (size_t i = 0; i < n_msgs; i++) {
            if (strcmp(msgs[i].role, "assistant") != 0) continue;
            long g = gen_find_locked(msgs[i].content, strlen(msgs[i].content));
            int32_t *copy = g >= 0 ? malloc(srv.gens[g].n_ids * sizeof *copy) : NULL;
            if (!copy) continue;
            memcpy(copy, srv.gens[g].ids, srv.gens[g].n_ids * sizeof *copy);
            content_ids[i] = (slm_chat_ids){copy, srv.gens[g].n_ids};
            srv.gens[g].last_used = ++srv.gen_tick;
        }
        pthread_mutex_unlock(&srv.mu);
        /* message contents are text: control-token text in them stays text */
        slm_chat_tools tools = {j->tools.tools, any_calls ? (const char *const *)calls : NULL};
        char err[400] = "";
        slm_status st = slm_chat_tokenize_tools(srv.m, srv.chat_template, msgs, n_msgs, &tools, content_ids, true,
                                                &j->prompt, &j->n_prompt, err, sizeof err);
        for (size_t i = 0; i < n_msgs; i++) free((void *)(uintptr_t)content_ids[i].ids);
        free(content_ids);
        content_ids = NULL;
        if (st != SLM_OK) {
            snprintf(msg, cap, "cannot render and tokenize the chat template (%s)%s%s", slm_status_name(st),
                     err[0] ? ": " : "", err);
            goto fail;
        }
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
            p = cJSON_GetArrayItem(p, 0);
        if (cJSON_IsString(p)) {
            if (!encode_prompt(j, p->valuestring, SLM_TOKENIZE_PARSE_SPECIAL | SLM_TOKENIZE_ADD_BOS, msg, cap)) goto fail;
        } else if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) {
            size_t n = (size_t)cJSON_GetArraySize(p), i = 0;
            const cJSON *e;
            if (!(j->prompt = malloc(n * sizeof *j->prompt))) goto fail;
            cJSON_ArrayForEach(e, p) {
                if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
                    e->valuedouble >= srv.n_vocab) {
                    snprintf(msg, cap, "prompt[%zu] is not a token id in [0, %d)", i, srv.n_vocab);
                    goto fail;
                }
                j->prompt[i++] = (int32_t)e->valuedouble;
            }
            j->n_prompt = n;
        } else {
            snprintf(msg, cap, "'prompt' must be a string, a list of token ids or a list of one string");
            goto fail;
        }
    }
    if (j->n_prompt == 0) {
        snprintf(msg, cap, "the prompt is empty");
        goto fail;
    }
    if (j->n_prompt >= (size_t)srv.n_ctx) {
        *code = "context_length_exceeded";
        snprintf(msg, cap, "the prompt has %zu tokens; this server's context limit is %d tokens (prompt plus at least one "
                           "generated token)", j->n_prompt, srv.n_ctx);
        goto fail;
    }
    free(msgs);
    for (size_t i = 0; calls && i < n_msgs; i++) free(calls[i]);
    free(calls);
    cJSON_Delete(root);
    *out = j;
    return 0;
fail:
    free(msgs);
    for (size_t i = 0; calls && i < n_msgs; i++) free(calls[i]);
    free(calls);
    free(content_ids);
    cJSON_Delete(root);
    if (j) job_unref_locked(j);
    if (!msg[0]) snprintf(msg, cap, "out of memory");
    return status;
}

static cJSON *completion_json(const job *j) {
    cJSON *root = response_head(j, j->chat ? "chat.completion" : "text_completion");
    cJSON *arr = cJSON_AddArrayToObject(root, "choices");
    for (int32_t i = 0; i < j->n; i++) {
        const choice *c = &j->choices[i];
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        bool calls = false;
        char *text = cli_utf8_sanitize(c->text.v ? c->text.v : "");
        if (j->chat) {
            cJSON *m = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            answer_parts parts = split_answer(j, text ? text : "", text ? strlen(text) : 0, true);
            calls = tools_message_json(&j->tools, srv.chat_template, text ? text + parts.c0 : "", j->id, i, m);
            if (text && parts.r1 > parts.r0) {
                text[parts.r1] = '\0';
                cJSON_AddStringToObject(m, "reasoning_content", text + parts.r0);
            }
        } else {
            cJSON_AddStringToObject(ch, "text", text ? text : "");
        }
        free(text);
        if (j->logprobs) cJSON_AddItemToObject(ch, "logprobs", logprobs_json(j, c, 0, c->n_tokens));
        else cJSON_AddNullToObject(ch, "logprobs");
        const char *finish = c->finish ? c->finish : "stop";
        cJSON_AddStringToObject(ch, "finish_reason", calls && !strcmp(finish, "stop") ? "tool_calls" : finish);
        cJSON_AddItemToArray(arr, ch);
    }
    cJSON_AddItemToObject(root, "usage", usage_json(j));
    return root;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    pthread_mutex_lock(&srv.mu);
    while (j->sse_off == j->sse.n && !j->sse_end) pthread_cond_wait(&j->cv, &srv.mu);
    size_t n = j->sse.n - j->sse_off;
    if (n == 0) {
        pthread_mutex_unlock(&srv.mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n > max) n = max;
    memcpy(buf, j->sse.v + j->sse_off, n);
    j->sse_off += n;
    if (j->sse_off == j->sse.n) j->sse_off = j->sse.n = 0;
    pthread_mutex_unlock(&srv.mu);
    return (ssize_t)n;
}

/* The stream's response is gone (sent, or the client went away; it may outlive the request's
 * req): the job is cancelled and this side's reference dropped. */
static void sse_free(void *cls) {
    job *j = cls;
    pthread_mutex_lock(&srv.mu);
    j->cancelled = true;
    job_unref_locked(j);
    pthread_cond_signal(&srv.wake);
    pthread_mutex_unlock(&srv.mu);
}

/* Whether the client of conn has closed the connection (or it failed): checked while a
 * non-streamed request waits for its answer, since libmicrohttpd does not read the socket then. */
static bool client_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {ci->connect_fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    char c;
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT); /* 0: the client's FIN */
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result handle_generate(struct MHD_Connection *conn, req *r, bool chat) {
    char msg[512] = "";
    job *j = NULL;
    const char *code = NULL;
    unsigned status = parse_request(r->body.v ? r->body.v : "", r->body.n, chat, &j, &code, msg, sizeof msg);
    if (status) return send_error(conn, status, code, "%s", msg);
    pthread_mutex_lock(&srv.mu);
    srv.m_requests++;
    srv.m_prompt_tokens += j->n_prompt;
    if (srv.stopping || srv.queue_len + srv.m_busy >= srv.o.parallel + srv.o.queue_max) {
        job_unref_locked(j);
        pthread_mutex_unlock(&srv.mu);
        return send_error(conn, 503, srv.stopping ? "server_shutting_down" : NULL,
                          "the server is busy (%d slots, %d requests queued): retry later", srv.o.parallel,
                          srv.o.queue_max);
    }
    snprintf(j->id, sizeof j->id, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)++srv.next_id);
    j->created = (long long)time(NULL);
    j->refs = 2; /* this side and the scheduler */
    if (srv.queue_tail) srv.queue_tail->next = j;
    else srv.queue_head = j;
    srv.queue_tail = j;
    srv.queue_len++;
    pthread_cond_signal(&srv.wake);
    if (j->stream) {
        pthread_mutex_unlock(&srv.mu);
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, j, sse_free);
        if (!resp) {
            sse_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        return queue_response(conn, MHD_HTTP_OK, resp);
    }
    while (!j->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000 * 1000 * 1000) {
            until.tv_sec++;
            until.tv_nsec -= 1000 * 1000 * 1000;
        }
        pthread_cond_timedwait(&j->cv, &srv.mu, &until);
        if (j->done) break;
        pthread_mutex_unlock(&srv.mu);
        bool gone = client_gone(conn);
        pthread_mutex_lock(&srv.mu);
        if (gone && !j->done) { /* the scheduler frees the slot at its next step, as for a stream */
            j->cancelled = true;
            job_unref_locked(j);
            pthread_cond_signal(&srv.wake);
            pthread_mutex_unlock(&srv.mu);
            return MHD_NO;
        }
    }
    cJSON *out = NULL;
    unsigned http_status = 200;
    if (j->err_status) {
        http_status = (unsigned)j->err_status;
        out = error_json(j->err_msg, http_status, j->err_code);
    } else {
        out = completion_json(j);
    }
    j->cancelled = true;
    job_unref_locked(j);
    pthread_mutex_unlock(&srv.mu);
    return send_json(conn, http_status, out, http_status == 503);
}

static enum MHD_Result send_text(struct MHD_Connection *conn, const char *text, const char *type) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                                                MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(resp, "Content-Type", type);
    return queue_response(conn, MHD_HTTP_OK, resp);
}

/* A CORS preflight (or any OPTIONS request): 204, no authentication, the allowed methods and, for
 * an Origin --cors allows, the CORS grant. */
static enum MHD_Result send_options(struct MHD_Connection *conn) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Allow", "GET, POST, OPTIONS");
    if (cors_allowed(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"))) {
        const char *asked = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", asked ? asked : "Authorization, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    }
    return queue_response(conn, MHD_HTTP_NO_CONTENT, resp);
}

/* The method each endpoint takes, for 405 answers. */
static const char *endpoint_method(const char *url) {
    static const struct {
        const char *url, *method;
    } endpoints[] = {{"/health", "GET"},           {"/metrics", "GET"},         {"/v1/models", "GET"},
                     {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"}};
    for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++)
        if (!strcmp(url, endpoints[i].url)) return endpoints[i].method;
    return NULL;
}

static enum MHD_Result handle_metrics(struct MHD_Connection *conn) {
    char buf[4096];
    pthread_mutex_lock(&srv.mu);
    size_t n_files = 0;
    for (size_t i = 0; i < srv.n_cache; i++) n_files += srv.cache[i].snap == NULL;
    snprintf(buf, sizeof buf,
             "# TYPE statelm_requests_total counter\nstatelm_requests_total %llu\n"
             "# TYPE statelm_request_errors_total counter\nstatelm_request_errors_total %llu\n"
             "# TYPE statelm_requests_cancelled_total counter\nstatelm_requests_cancelled_total %llu\n"
             "# TYPE statelm_prompt_tokens_total counter\nstatelm_prompt_tokens_total %llu\n"
             "# TYPE statelm_generated_tokens_total counter\nstatelm_generated_tokens_total %llu\n"
             "# TYPE statelm_prefix_reuse_tokens_total counter\nstatelm_prefix_reuse_tokens_total %llu\n"
             "# TYPE statelm_queue_depth gauge\nstatelm_queue_depth %d\n"
             "# TYPE statelm_slots_busy gauge\nstatelm_slots_busy %d\n"
             "# TYPE statelm_slots_total gauge\nstatelm_slots_total %d\n"
             "# TYPE statelm_decode_tokens_per_second gauge\nstatelm_decode_tokens_per_second %.3f\n"
             "# TYPE statelm_cached_states gauge\nstatelm_cached_states %zu\n"
             "# TYPE statelm_cached_state_bytes gauge\nstatelm_cached_state_bytes %llu\n"
             "# TYPE statelm_state_files gauge\nstatelm_state_files %zu\n"
             "# TYPE statelm_spec_drafted_tokens_total counter\nstatelm_spec_drafted_tokens_total %llu\n"
             "# TYPE statelm_spec_accepted_tokens_total counter\nstatelm_spec_accepted_tokens_total %llu\n"
             "# TYPE statelm_spec_replays_total counter\nstatelm_spec_replays_total %llu\n"
             "# TYPE statelm_decode_batch_steps_total counter\nstatelm_decode_batch_steps_total %llu\n"
             "# TYPE statelm_decode_batch_slots_total counter\nstatelm_decode_batch_slots_total %llu\n"
             "# TYPE statelm_decode_batch_max_slots gauge\nstatelm_decode_batch_max_slots %d\n"
             "# TYPE statelm_decode_batch_fallbacks_total counter\nstatelm_decode_batch_fallbacks_total %llu\n",
             (unsigned long long)srv.m_requests, (unsigned long long)srv.m_errors, (unsigned long long)srv.m_cancelled,
             (unsigned long long)srv.m_prompt_tokens, (unsigned long long)srv.m_gen_tokens,
             (unsigned long long)srv.m_reused_tokens, srv.queue_len, srv.m_busy, srv.o.parallel,
             srv.m_decode_s > 0 ? (double)srv.m_decode_tokens / srv.m_decode_s : 0.0, srv.n_cache - n_files,
             (unsigned long long)srv.cache_bytes, n_files, (unsigned long long)srv.m_drafted,
             (unsigned long long)srv.m_accepted, (unsigned long long)srv.m_replays, (unsigned long long)srv.m_batch_steps,
             (unsigned long long)srv.m_batch_slots, srv.m_batch_max, (unsigned long long)srv.m_batch_fallbacks);
    pthread_mutex_unlock(&srv.mu);
    return send_text(conn, buf, "text/plain; version=0.0.4");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls;
    (void)version;
    req *r = *con_cls;
    size_t cap = (size_t)srv.o.max_body_kib << 10;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        *con_cls = r;
        pthread_mutex_lock(&srv.mu);
        srv.n_inflight++;
        pthread_mutex_unlock(&srv.mu);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > cap)
            return send_error(conn, 413, NULL, "the request body is larger than %d KiB", srv.o.max_body_kib);
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->body.n + *upload_size > cap) r->too_big = true;
        else if (!sb_add(&r->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_watch *cw = ci ? ci->socket_context : NULL;
    if (cw) {
        pthread_mutex_lock(&srv.mu);
        cw->receiving = false;
        pthread_mutex_unlock(&srv.mu);
    }
    if (r->too_big) return send_error(conn, 413, NULL, "the request body is larger than %d KiB", srv.o.max_body_kib);
    if (!strcmp(method, "OPTIONS")) return send_options(conn);
    const char *wanted = endpoint_method(url);
    if (!wanted) return send_error(conn, 404, NULL, "no endpoint %s %s", method, url);
    if (strcmp(method, wanted) != 0)
        return send_error(conn, 405, NULL, "%s takes %s, not %s", url, wanted, method); /* before auth, as a 404 */
    bool is_get = !strcmp(method, "GET"), is_post = !strcmp(method, "POST");
    if (is_get && !strcmp(url, "/health")) return send_text(conn, "{\"status\":\"ok\"}", "application/json");
    if (srv.o.api_key) {
        const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
        if (!auth || strncmp(auth, "Bearer ", 7) != 0 || strcmp(auth + 7, srv.o.api_key) != 0)
            return send_error(conn, 401, NULL, "invalid API key");
    }
    if (is_get && !strcmp(url, "/metrics")) return handle_metrics(conn);
    if (is_get && !strcmp(url, "/v1/models")) {
        cJSON *root = cJSON_CreateObject(), *arr;
        cJSON_AddStringToObject(root, "object", "list");
        arr = cJSON_AddArrayToObject(root, "data");
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", srv.model_id);
        cJSON_AddStringToObject(e, "object", "model");
        cJSON_AddNumberToObject(e, "created", 0);
        cJSON_AddStringToObject(e, "owned_by", "statelm");
        cJSON *meta = cJSON_AddObjectToObject(e, "meta");
        cJSON_AddStringToObject(meta, "file", srv.model_file);
        cJSON_AddBoolToObject(meta, "any_model_name_accepted", true); /* one model: requests may name any */
        cJSON_AddStringToObject(meta, "chat_template", srv.chat_template ? srv.chat_template : "");
        cJSON_AddNumberToObject(meta, "n_ctx", srv.n_ctx);
        cJSON_AddNumberToObject(meta, "n_vocab", srv.n_vocab);
        cJSON_AddItemToArray(arr, e);
        return send_json(conn, 200, root, false);
    }
    if (is_post && !strcmp(url, "/v1/chat/completions")) return handle_generate(conn, r, true);
    if (is_post && !strcmp(url, "/v1/completions")) return handle_generate(conn, r, false);
    return send_error(conn, 404, NULL, "no endpoint %s %s", method, url);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)toe;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_watch *cw = ci ? ci->socket_context : NULL;
    pthread_mutex_lock(&srv.mu);
    if (cw) { /* the next request on this connection starts now */
        cw->receiving = true;
        cw->t_start = now_s();
    }
    pthread_mutex_unlock(&srv.mu);
    req *r = *con_cls;
    if (!r) return;
    free(r->body.v);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&srv.mu);
    srv.n_inflight--;
    pthread_mutex_unlock(&srv.mu);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    (void)cls;
    pthread_mutex_lock(&srv.mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_watch *cw = ci ? calloc(1, sizeof *cw) : NULL;
        if (cw) {
            cw->fd = ci->connect_fd;
            cw->t_start = now_s();
            cw->receiving = true;
            cw->next = srv.conns;
            if (srv.conns) srv.conns->prev = cw;
            srv.conns = cw;
        }
        *socket_context = cw;
    } else if (*socket_context) {
        conn_watch *cw = *socket_context;
        if (cw->prev) cw->prev->next = cw->next;
        else srv.conns = cw->next;
        if (cw->next) cw->next->prev = cw->prev;
        free(cw);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&srv.mu);
}

/* Cuts connections whose request has been arriving for longer than --timeout seconds. */
static void watch_connections(void) {
    double now = now_s();
    pthread_mutex_lock(&srv.mu);
    for (conn_watch *cw = srv.conns; cw; cw = cw->next)
        if (cw->receiving && now - cw->t_start > srv.o.timeout_s) {
            shutdown(cw->fd, SHUT_RDWR);
            cw->t_start = INFINITY;
        }
    pthread_mutex_unlock(&srv.mu);
}

/* ---- command ---------------------------------------------------------------------------------- */

static void usage_serve(void) {
    puts("usage: statelm serve -m MODEL [options]   an OpenAI-compatible HTTP server\n"
         "  --host HOST          IPv4 or IPv6 address or host name to bind (default 127.0.0.1)\n"
         "  --port N             port (default 8080; 0 = a free port); prints the URL when ready\n"
         "  --parallel N         slots: requests generated concurrently (default 4)\n"
         "  -c N_CTX             context per slot (default: the model's default)\n"
         "  -t N                 threads per session\n"
         "  --api-key KEY        require 'Authorization: Bearer KEY' (not on /health)\n"
         "  --cache-mib MiB      memory for idle snapshots reused by prefix (default 256; 0 = none)\n"
         "  --state-dir DIR      evicted snapshots spill to files in DIR (must exist); they outlive the\n"
         "                       server and are reused by the next one of the same model and context\n"
         "  --max-body-kib K     largest request body (default 1024)\n"
         "  --max-tokens N       largest max_tokens a request may ask for (default 4096)\n"
         "  --queue N            requests waiting for a slot before 503 (default 64)\n"
         "  --timeout S          a request must arrive within S seconds, and a connection idle that\n"
         "                       long is closed (default 30)\n"
         "  --max-conns N        open connections accepted; more are closed at once (default 1024)\n"
         "  --max-conns-per-client N   open connections from one IP address (default 128)\n"
         "  --lookup             speculative decoding per slot, drafts from prompt lookup\n"
         "  --draft-model M2     speculative decoding per slot, drafts from model M2 (same tokenizer)\n"
         "  --draft-max K        most tokens drafted per step, 1..64 (default 8; adapts below it)\n"
         "  --no-prefix-reuse    every request prefills from position 0 (to measure what reuse saves)\n"
         "  --alias NAME         the model's name in responses and /v1/models (default: the file's name);\n"
         "                       requests may name any model\n"
         "  --chat-template NAME chatml | smollm2 | qwen3 | qwen3-nothink | lfm2 | llama3 | gemma (default:\n"
         "                       the model's own; chatml, with a warning, for a model that has none)\n"
         "  --cors ORIGINS       allow browser clients from ORIGINS ('*' or a comma-separated list)\n"
         "  --reasoning-format F deepseek (default): a chat answer's leading <think>...</think> goes to\n"
         "                       reasoning_content; none: it stays in content\n"
         "Sampling defaults of requests that do not set the field (llama-server's defaults):\n"
         "  --temp T (0.8)  --top-k K (40)  --top-p P (0.95)  --min-p P (0.05)  --repeat-penalty R (1)\n"
         "  --repeat-last-n N (64)  --presence-penalty P (0)  --frequency-penalty P (0)\n"
         "SIGINT or SIGTERM stops it: requests in flight end with an error (code server_shutting_down).\n"
         "Request fields, errors and limits: docs/serve.md.");
}

static int parse_serve(int argc, char **argv, serve_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 4;
    o->cache_mib = 256;
    o->max_body_kib = 1024;
    o->max_tokens = 4096;
    o->queue_max = 64;
    o->timeout_s = 30;
    o->max_conns = 1024;
    o->max_conns_per_client = 128;
    o->sampling = slm_sampler_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t iv;
        double fv;
        int32_t *dst = NULL;
        float *fdst = NULL;
        int64_t lo = 0, hi = 0;
        double flo = 0, fhi = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_serve();
            return 0;
        }
        if (!strcmp(a, "--lookup")) {
            o->lookup = true;
            continue;
        }
        if (!strcmp(a, "--no-prefix-reuse")) {
            o->no_prefix_reuse = true;
            continue;
        }
        if (!(v = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--api-key")) o->api_key = v;
        else if (!strcmp(a, "--state-dir")) o->state_dir = v;
        else if (!strcmp(a, "--draft-model")) o->draft_model = v;
        else if (!strcmp(a, "--draft-max")) dst = &o->draft_max, lo = 1, hi = 64;
        else if (!strcmp(a, "--port")) dst = &o->port, lo = 0, hi = 65535;
        else if (!strcmp(a, "--parallel")) dst = &o->parallel, lo = 1, hi = 256;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) dst = &o->n_ctx, lo = 2, hi = 1 << 24;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) dst = &o->n_threads, lo = 1, hi = 1024;
        else if (!strcmp(a, "--cache-mib")) dst = &o->cache_mib, lo = 0, hi = 1 << 20;
        else if (!strcmp(a, "--max-body-kib")) dst = &o->max_body_kib, lo = 1, hi = 1 << 20;
        else if (!strcmp(a, "--max-tokens")) dst = &o->max_tokens, lo = 1, hi = 1 << 24;
        else if (!strcmp(a, "--queue")) dst = &o->queue_max, lo = 0, hi = 1 << 20;
        else if (!strcmp(a, "--timeout")) dst = &o->timeout_s, lo = 1, hi = 86400;
        else if (!strcmp(a, "--max-conns")) dst = &o->max_conns, lo = 1, hi = 65536;
        else if (!strcmp(a, "--max-conns-per-client")) dst = &o->max_conns_per_client, lo = 1, hi = 65536;
        else if (!strcmp(a, "--alias")) o->alias = v;
        else if (!strcmp(a, "--cors")) o->cors = v;
        else if (!strcmp(a, "--chat-template")) o->chat_template = v;
        else if (!strcmp(a, "--reasoning-format")) {
            if (strcmp(v, "none") != 0 && strcmp(v, "deepseek") != 0)
                return cli_fail("--reasoning-format %s: not none or deepseek", v), 2;
            o->reasoning_none = !strcmp(v, "none");
        }
        else if (!strcmp(a, "--top-k")) dst = &o->sampling.top_k, lo = 0, hi = INT32_MAX;
        else if (!strcmp(a, "--repeat-last-n")) dst = &o->sampling.repeat_last_n, lo = 0, hi = INT32_MAX;
        else if (!strcmp(a, "--temp")) fdst = &o->sampling.temperature, flo = 0, fhi = 2;
        else if (!strcmp(a, "--top-p")) fdst = &o->sampling.top_p, flo = 0, fhi = 1;
        else if (!strcmp(a, "--min-p")) fdst = &o->sampling.min_p, flo = 0, fhi = 1;
        else if (!strcmp(a, "--repeat-penalty")) fdst = &o->sampling.repeat_penalty, flo = 1e-6, fhi = 100;
        else if (!strcmp(a, "--presence-penalty")) fdst = &o->sampling.presence_penalty, flo = -2, fhi = 2;
        else if (!strcmp(a, "--frequency-penalty")) fdst = &o->sampling.frequency_penalty, flo = -2, fhi = 2;
        else return cli_fail("serve: unknown option '%s'", a), 2;
        if (dst) {
            if (!cli_parse_i64(a, v, lo, hi, &iv)) return 2;
            *dst = (int32_t)iv;
        }
        if (fdst) {
            if (!cli_parse_f64(a, v, flo, fhi, &fv)) return 2;
            *fdst = (float)fv;
        }
    }
    if (!o->model) return cli_fail("-m MODEL is required"), 2;
    if (o->lookup && o->draft_model) return cli_fail("serve: --lookup and --draft-model exclude each other"), 2;
    if (o->draft_max && !o->lookup && !o->draft_model)
        return cli_fail("serve: --draft-max needs --lookup or --draft-model"), 2;
    if (o->state_dir && access(o->state_dir, W_OK) != 0)
        return cli_fail("--state-dir %s: not a writable folder", o->state_dir), 2;
    o->n_threads = cli_cap_threads(o->n_threads, false);
    return -1;
}

int cmd_serve(int argc, char **argv) {
    int rc = parse_serve(argc, argv, &srv.o);
    if (rc >= 0) return rc;
    rc = 1;
    char err[512];
    struct MHD_Daemon *d = NULL;
    pthread_t sched;
    bool sched_started = false;
    /* SIGINT and SIGTERM go to sigwait below: blocked before any thread starts */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    pthread_mutex_init(&srv.mu, NULL);
    pthread_mutex_init(&srv.gvocab_mu, NULL);
    pthread_cond_init(&srv.wake, NULL);
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = srv.o.n_threads;
    slm_status st = slm_model_load(srv.o.model, &mp, &srv.m, err, sizeof err);
    if (st != SLM_OK) {
        cli_fail("%s (%s)", err, slm_status_name(st));
        goto done;
    }
    if (!(srv.tok = slm_model_tokenizer(srv.m))) {
        cli_fail("serve: the model has no tokenizer");
        goto done;
    }
    const char *base = strrchr(srv.o.model, '/');
    srv.model_file = base && base[1] ? base + 1 : srv.o.model;
    snprintf(srv.model_id, sizeof srv.model_id, "%s", srv.o.alias ? srv.o.alias : srv.model_file);
    srv.n_vocab = slm_model_n_vocab(srv.m);
    srv.chat_template = srv.o.chat_template ? srv.o.chat_template : slm_chat_template_detect(srv.m);
    if (!srv.chat_template) {
        srv.chat_template = "chatml";
        fprintf(stderr, "statelm serve: warning: the model has no known chat template; chat requests use chatml "
                        "(--chat-template NAME to choose)\n");
    }
    {
        const slm_chat_message probe = {"user", "hi"};
        int32_t *ids = NULL;
        size_t n_ids = 0;
        st = slm_chat_tokenize(srv.m, srv.chat_template, &probe, 1, NULL, true, &ids, &n_ids);
        slm_free(ids);
        if (st != SLM_OK) {
            cli_fail("--chat-template %s: not a template statelm renders (%s)", srv.chat_template, slm_status_name(st));
            goto done;
        }
    }
    if (srv.o.draft_model && (st = slm_model_load(srv.o.draft_model, &mp, &srv.draft_model, err, sizeof err)) != SLM_OK) {
        cli_fail("draft model: %s (%s)", err, slm_status_name(st));
        goto done;
    }
    srv.n_forks_cap = srv.o.parallel * (MAX_N - 1);
    srv.slots = calloc((size_t)srv.o.parallel, sizeof *srv.slots);
    srv.forks = calloc((size_t)srv.n_forks_cap, sizeof *srv.forks);
    srv.gens = calloc(GEN_MEMORY_N, sizeof *srv.gens);
    if (!srv.slots || !srv.forks || !srv.gens) {
        cli_fail("out of memory");
        goto done;
    }
    if (srv.o.n_ctx) cli_warn_ctx(srv.m, srv.o.n_ctx, SLM_DTYPE_F16);
    for (int32_t i = 0; i < srv.o.parallel; i++) {
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = srv.o.n_ctx;
        sp.n_threads = srv.o.n_threads;
        cli_apply_env(&sp, NULL);
        if ((st = slm_session_create(srv.m, &sp, &srv.slots[i].s, err, sizeof err)) != SLM_OK) {
            cli_name_env(err, sizeof err);
            cli_fail("%s (%s)", err, slm_status_name(st));
            goto done;
        }
    }
    srv.n_ctx = slm_session_n_ctx(srv.slots[0].s);
    if (srv.draft_model) { /* a draft model with another tokenizer is refused here, not per request */
        slm_session_params sp = slm_session_params_default();
        sp.n_ctx = srv.n_ctx;
        sp.n_threads = srv.o.n_threads;
        cli_apply_env(&sp, NULL);
        slm_spec_params p = slm_spec_params_default();
        slm_spec *probe = NULL;
        if ((st = slm_session_create(srv.draft_model, &sp, &srv.slots[0].draft, err, sizeof err)) == SLM_OK) {
            p.draft = srv.slots[0].draft;
            st = slm_spec_create(srv.slots[0].s, &p, &probe, err, sizeof err);
        }
        slm_spec_destroy(probe);
        if (st != SLM_OK) {
            cli_fail("draft model: %s (%s)", err, slm_status_name(st));
            goto done;
        }
    }
    uint8_t fp[16];
    slm_model_fingerprint(srv.m, fp);
    srv.hash_seed = 1469598103934665603ull ^ (uint64_t)srv.n_ctx;
    for (int k = 0; k < 16; k++) srv.hash_seed = (srv.hash_seed ^ fp[k]) * 1099511628211ull;
    index_state_dir(srv.slots[0].s);
    /* --host: an IPv4 or IPv6 address or a name, bound to its first address */
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        int gai = getaddrinfo(srv.o.host, NULL, &hints, &res);
        if (gai != 0 || !res) {
            cli_fail("--host %s: %s", srv.o.host, gai ? gai_strerror(gai) : "no address");
            goto done;
        }
        memcpy(&addr, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);
    }
    bool ipv6 = addr.ss_family == AF_INET6;
    if (ipv6) ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)srv.o.port);
    else ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)srv.o.port);
    char host_text[INET6_ADDRSTRLEN + 2];
    {
        char a[INET6_ADDRSTRLEN];
        const void *raw = ipv6 ? (const void *)&((struct sockaddr_in6 *)&addr)->sin6_addr
                               : (const void *)&((struct sockaddr_in *)&addr)->sin_addr;
        inet_ntop(addr.ss_family, raw, a, sizeof a);
        snprintf(host_text, sizeof host_text, ipv6 ? "[%s]" : "%s", a);
    }
    if (pthread_create(&sched, NULL, scheduler, NULL) != 0) {
        cli_fail("cannot start the scheduler thread");
        goto done;
    }
    sched_started = true;
    d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                             (ipv6 ? MHD_USE_IPv6 : 0),
                         0, NULL, NULL,
                         on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)srv.o.timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned int)srv.o.max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                         (unsigned int)srv.o.max_conns_per_client, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_END);
    if (!d) {
        cli_fail("cannot listen on %s port %d: %s", host_text, srv.o.port, strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    int port = srv.o.port;
    if (info && getsockname(info->listen_fd, (struct sockaddr *)&bound, &len) == 0)
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    printf("statelm serve: listening on http://%s:%d (model %s, %d slots, context %d)\n", host_text, port,
           srv.model_id, srv.o.parallel, srv.n_ctx);
    fflush(stdout);
    int sig = 0;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    const struct timespec tick = {0, 250 * 1000 * 1000};
    while ((sig = sigtimedwait(&stop, NULL, &tick)) < 0) watch_connections();
    fprintf(stderr, "statelm serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    if (d) MHD_quiesce_daemon(d);
    if (sched_started) {
        pthread_mutex_lock(&srv.mu);
        srv.stopping = true;
        pthread_cond_broadcast(&srv.wake);
        pthread_mutex_unlock(&srv.mu);
        pthread_join(sched, NULL);
    }
    if (d) {
        /* let responses in flight (final chunks included) reach their clients, for up to 5 s */
        double t_end = now_s() + 5;
        for (;;) {
            pthread_mutex_lock(&srv.mu);
            int32_t n = srv.n_inflight;
            pthread_mutex_unlock(&srv.mu);
            if (n == 0 || now_s() > t_end) break;
            usleep(10000);
        }
        MHD_stop_daemon(d);
    }
    while (srv.n_cache) cache_remove(srv.n_cache - 1, true);
    free(srv.cache);
    while (srv.n_gens > 0) gen_forget_locked(srv.n_gens - 1);
    free(srv.gens);
    for (int32_t i = 0; srv.slots && i < srv.o.parallel; i++) {
        slm_session_destroy(srv.slots[i].s);
        slm_session_destroy(srv.slots[i].draft);
    }
    for (int32_t i = 0; srv.forks && i < srv.n_forks_cap; i++) slm_session_destroy(srv.forks[i].draft);
    free(srv.slots);
    free(srv.forks);
    slm_grammar_vocab_destroy(srv.gvocab);
    slm_model_destroy(srv.draft_model);
    slm_model_destroy(srv.m);
    pthread_cond_destroy(&srv.wake);
    pthread_mutex_destroy(&srv.mu);
    /* SIGINT and SIGTERM stay blocked: a second one while stopping must not kill the process */
    return rc;
}
