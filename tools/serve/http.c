/* http.c — the HTTP side of `statelm serve` (libmicrohttpd, one thread per connection): endpoints,
 * authentication, CORS, bodies, streamed responses, and the watch that cuts slow clients. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve.h"

/* ---- requests ---------------------------------------------------------------------------------- */

typedef struct req {
    buf body;
    bool too_big;
} req;

/* Whether origin is a page of this machine: http(s)://localhost, 127.0.0.1 or [::1], any port. */
static bool origin_is_localhost(const char *origin) {
    const char *p = !strncmp(origin, "http://", 7) ? origin + 7 : !strncmp(origin, "https://", 8) ? origin + 8 : NULL;
    if (!p) return false;
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++) {
        size_t n = strlen(hosts[i]);
        if (strncmp(p, hosts[i], n)) continue;
        const char *q = p + n;
        if (!*q) return true;
        if (*q++ != ':' || !*q) return false;
        while (*q >= '0' && *q <= '9') q++;
        return !*q;
    }
    return false;
}

/* Whether --cors allows the request's Origin: "*" allows any, else a comma-separated list of origins,
 * where the entry "localhost" stands for the pages of this machine (origin_is_localhost, as
 * llama-server's --cors-origins localhost). */
static bool cors_allowed(const serve_ctx *s, const char *origin) {
    if (!s->o.cors || !origin) return false;
    if (!strcmp(s->o.cors, "*")) return true;
    size_t n = strlen(origin);
    for (const char *p = s->o.cors; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, origin, n)) return true;
        if (len == 9 && !memcmp(p, "localhost", 9) && origin_is_localhost(origin)) return true;
        p += len + (end != NULL);
    }
    return false;
}

/* Queues resp with the headers every response carries (CORS for an allowed Origin). */
static enum MHD_Result queue_response(serve_ctx *s, struct MHD_Connection *conn, unsigned status,
                                      struct MHD_Response *resp) {
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (cors_allowed(s, origin)) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", !strcmp(s->o.cors, "*") ? "*" : origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    enum MHD_Result ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(serve_ctx *s, struct MHD_Connection *conn, unsigned status, cJSON *obj,
                                 bool retry_after) {
    char *text = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (!text) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    return queue_response(s, conn, status, r);
}

/* An error response in the shape of the endpoint's API (Anthropic's for /v1/messages, else
 * OpenAI's), counted. */
static enum MHD_Result send_err(serve_ctx *s, struct MHD_Connection *conn, serve_api api, const sreq_err *e) {
    pthread_mutex_lock(&s->mu);
    s->m_errors++;
    pthread_mutex_unlock(&s->mu);
    cJSON *body = api == SAPI_MESSAGES ? anthropic_error_json(e->msg, e->status) : sreq_error_json(e);
    return send_json(s, conn, e->status, body, e->status == 503);
}

/* An error response of api's shape; code NULL: the status's own OpenAI code (error_json). */
static enum MHD_Result send_api_error(serve_ctx *s, struct MHD_Connection *conn, serve_api api, unsigned status,
                                      const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result send_api_error(serve_ctx *s, struct MHD_Connection *conn, serve_api api, unsigned status,
                                      const char *code, const char *fmt, ...) {
    sreq_err e = {status, code, "", 0, 0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    return send_err(s, conn, api, &e);
}
#define send_error(s, conn, ...) send_api_error(s, conn, SAPI_CHAT, __VA_ARGS__)

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    job *j = cls;
    serve_ctx *s = j->srv;
    pthread_mutex_lock(&s->mu);
    while (j->sse_off == j->sse.n && !j->sse_end) pthread_cond_wait(&j->cv, &s->mu);
    size_t n = j->sse.n - j->sse_off;
    if (n == 0) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n > max) n = max;
    memcpy(out, j->sse.p + j->sse_off, n);
    j->sse_off += n;
    if (j->sse_off == j->sse.n) {
        j->sse_off = 0;
        buf_truncate(&j->sse, 0);
    }
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
}

/* The stream's response is gone (sent, or the client went away; it may outlive the request's
 * req): the job is cancelled and this side's reference dropped. */
static void sse_free(void *cls) {
    job *j = cls;
    job_cancel(j);
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

typedef bool (*map_fn)(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e);

/* The model a request names (its body's "model", else the query's ?model=), held
 * (serve_model_acquire: loaded first when needed); NULL with e set: 404 model_not_found for a name
 * no model has. */
static serve_model *model_for(serve_ctx *s, struct MHD_Connection *conn, const cJSON *root, sreq_err *e) {
    const cJSON *f = root ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    if (f && !cJSON_IsNull(f) && !cJSON_IsString(f)) return sreq_fail(e, 400, NULL, "'model' must be a string"), NULL;
    const char *name = f && cJSON_IsString(f) ? f->valuestring
                                              : MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "model");
    serve_model *sm = serve_model_find(s, name);
    if (!sm) return sreq_fail(e, 404, "model_not_found", "the model '%.200s' does not exist (GET /v1/models lists them)", name), NULL;
    return serve_model_acquire(sm, e) ? sm : NULL;
}

/* The sreq_model view of a loaded model (lookup: its generated-ids memory). */
static sreq_model model_view(serve_model *sm, bool lookup) {
    const sreq_model mv = {sm->m,     sm->tok,     sm->chat_template,        sm->template_text, sm->srv->o.chat_template_kwargs,
                           sm->n_ctx, sm->n_vocab, lookup ? gen_lookup : NULL, lookup ? sm : NULL};
    return mv;
}

/* A stored response's ids are token ids of the model that made it: continued on another model,
 * the stored messages are re-tokenised from their text. */
static void drop_foreign_ids(sreq *r, const char *record, const char *model_id) {
    cJSON *rec = record ? cJSON_Parse(record) : NULL;
    const char *made_by =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rec, "response"), "model"));
    if (made_by && strcmp(made_by, model_id) != 0)
        for (size_t i = 0; i < r->n_msgs; i++) {
            free(r->msgs[i].ids);
            r->msgs[i].ids = NULL;
            r->msgs[i].n_ids = 0;
        }
    cJSON_Delete(rec);
}

/* A body through map, validate and render into a job with one reference, on the model the body
 * names (held by the job); NULL with e set. */
static job *make_job(serve_ctx *s, struct MHD_Connection *conn, req *q, map_fn map, sreq_err *e) {
    cJSON *root = sreq_parse_json(q->body.p ? q->body.p : "", q->body.n, e);
    serve_model *sm = root ? model_for(s, conn, root, e) : NULL;
    job *j = sm ? job_create(s, sm) : NULL;
    if (!j) {
        if (sm) {
            serve_model_release(sm);
            sreq_fail(e, 500, NULL, "out of memory");
        }
        cJSON_Delete(root);
        return NULL;
    }
    const sreq_limits lim = {s->o.max_tokens, sm->n_vocab};
    const sreq_model mv = model_view(sm, true);
    bool ok = map(root, &s->o.sampling, &j->r, e);
    if (ok && s->o.verbose) j->r.verbose = true;
    if (ok && j->r.api == SAPI_RESPONSES) { /* the stored conversation goes before the new input */
        char *record = j->r.previous_id ? resp_store_get(s->responses, j->r.previous_id) : NULL;
        ok = sreq_responses_resolve(&j->r, record, e);
        if (ok && record) drop_foreign_ids(&j->r, record, sm->id);
        free(record);
    }
    ok = ok && sreq_validate(&j->r, &lim, e) && sreq_render(&j->r, &mv, &j->p, e);
    cJSON_Delete(root);
    if (!ok) {
        pthread_mutex_lock(&s->mu);
        job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    if (!j->r.seed_given && !s->o.seed_set) j->r.sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)j << 7);
    j->max_tokens = j->r.max_tokens > 0 && j->r.max_tokens < s->o.max_tokens ? j->r.max_tokens : s->o.max_tokens;
    return j;
}

static const char *id_prefix(serve_api api) {
    switch (api) {
    case SAPI_CHAT: return "chatcmpl";
    case SAPI_MESSAGES: return "msg";
    case SAPI_RESPONSES: return "resp";
    default: return "cmpl";
    }
}

static enum MHD_Result handle_generate(serve_ctx *s, struct MHD_Connection *conn, req *r, serve_api api, map_fn map) {
    sreq_err e = {0};
    job *j = make_job(s, conn, r, map, &e);
    if (!j) return send_err(s, conn, api, &e);
    pthread_mutex_lock(&s->mu);
    s->m_requests++;
    s->m_prompt_tokens += j->p.n_ids;
    if (api != SAPI_RESPONSES || !resp_store_new_id(j->id)) /* stored ids are unique across servers */
        snprintf(j->id, sizeof j->id, "%s-%llu", id_prefix(api), (unsigned long long)++s->next_id);
    j->created = (long long)time(NULL);
    j->t_start = now_s();
    j->refs = 2; /* this side and the engine (until its DONE event) */
    if (j->r.stream && api == SAPI_MESSAGES) anthropic_sse_start(j); /* before any engine event */
    if (j->r.stream && api == SAPI_RESPONSES) responses_sse_start(j);
    pthread_mutex_unlock(&s->mu);
    slm_engine_request q = slm_engine_request_default();
    q.ids = j->p.ids;
    q.n_ids = j->p.n_ids;
    q.sampler = j->r.sp;
    if (j->p.bias) { /* the request's text biases resolved to tokens, with its id biases */
        q.sampler.logit_bias = j->p.bias;
        q.sampler.n_logit_bias = j->p.n_bias;
    }
    q.grammar = j->p.grammar;
    q.max_tokens = j->max_tokens;
    q.n = j->r.n;
    q.stops = (const char *const *)j->r.stops;
    q.n_stops = j->r.n_stops;
    q.logprobs = j->r.logprobs;
    q.top_logprobs = j->r.top_logprobs;
    q.ignore_eos = j->r.ignore_eos;
    q.keep_ids = j->p.keep;
    q.n_keep_ids = j->p.n_keep;
    q.on_event = on_engine_event;
    q.user = j;
    if (j->p.think_track) {
        q.think_open = "<think>";
        q.think_close = "</think>";
        q.think_in_prompt = j->p.think_in_prompt;
        if (j->p.think_budget >= 0) {
            q.think_close_ids = j->p.think_close_ids;
            q.n_think_close_ids = j->p.n_think_close;
            q.think_budget = j->p.think_budget;
        }
    }
    q.pin_slot = j->r.has_id_slot;
    q.slot = j->r.id_slot;
    uint64_t engine_id = 0;
    slm_status st = slm_engine_submit(j->mdl->engine, &q, &engine_id, e.msg, sizeof e.msg);
    pthread_mutex_lock(&s->mu);
    if (st != SLM_OK) { /* no event comes: the engine's reference goes too */
        j->refs = 1;
        job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        if (st == SLM_ERR_RANGE)
            return send_api_error(s, conn, api, 503, NULL, "the server is busy (%d slots, %d requests queued): retry later",
                              s->o.parallel, s->o.queue_max);
        if (st == SLM_ERR_ABORTED)
            return send_api_error(s, conn, api, 503, "server_shutting_down", "the server is shutting down");
        e.status = st == SLM_ERR_NOMEM ? 500 : 400;
        e.code = st == SLM_ERR_CONTEXT_FULL ? "context_length_exceeded" : NULL;
        return send_err(s, conn, api, &e);
    }
    j->engine_id = engine_id;
    if (j->r.stream) {
        pthread_mutex_unlock(&s->mu);
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, j, sse_free);
        if (!resp) {
            sse_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        return queue_response(s, conn, MHD_HTTP_OK, resp);
    }
    while (!j->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000 * 1000 * 1000) {
            until.tv_sec++;
            until.tv_nsec -= 1000 * 1000 * 1000;
        }
        pthread_cond_timedwait(&j->cv, &s->mu, &until);
        if (j->done) break;
        pthread_mutex_unlock(&s->mu);
        bool gone = client_gone(conn);
        pthread_mutex_lock(&s->mu);
        if (gone && !j->done) { /* the engine frees the slot at its next step, as for a stream */
            pthread_mutex_unlock(&s->mu);
            job_cancel(j);
            return MHD_NO;
        }
    }
    cJSON *out = NULL;
    unsigned http_status = 200;
    if (j->err_status) {
        http_status = (unsigned)j->err_status;
        out = api == SAPI_MESSAGES ? anthropic_error_json(j->err_msg, http_status)
                                   : error_json(j->err_msg, http_status, j->err_code);
    } else {
        out = api == SAPI_COMPLETION  ? completion_native_json(j)
              : api == SAPI_MESSAGES  ? anthropic_message_json(j)
              : api == SAPI_RESPONSES ? responses_json(j)
                                      : completion_json(j);
    }
    j->cancelled = true;
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
    return send_json(s, conn, http_status, out, http_status == 503);
}

/* POST /v1/embeddings: answered in this connection's thread by the model's embedder (embed.c). */
static enum MHD_Result handle_embeddings(serve_ctx *s, struct MHD_Connection *conn, req *r) {
    if (!s->o.embeddings)
        return send_error(s, conn, 404, "embeddings_disabled",
                          "embeddings are off: start the server with --embeddings (and optionally --pooling "
                          "last|mean|cls|none)");
    sreq_err e = {0};
    cJSON *root = cJSON_ParseWithLength(r->body.p ? r->body.p : "", r->body.n); /* for "model"; embed.c reads the rest */
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "model"))) cJSON_DeleteItemFromObject(root, "model");
    serve_model *sm = model_for(s, conn, root, &e);
    cJSON_Delete(root);
    if (!sm) return send_err(s, conn, SAPI_CHAT, &e);
    char msg[512];
    const char *code = NULL;
    cJSON *resp = NULL;
    double t0 = now_s();
    unsigned status = serve_embedder_answer(sm->embedder, r->body.p ? r->body.p : "", r->body.n, sm->id, &resp,
                                            &code, msg, sizeof msg);
    pthread_mutex_lock(&s->mu);
    serve_model_release_locked(sm);
    s->m_requests++;
    const cJSON *usage = resp ? cJSON_GetObjectItem(resp, "usage") : NULL;
    if (usage) {
        uint64_t n_tokens = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "prompt_tokens"));
        s->m_prompt_tokens += n_tokens;
        util_metrics_embed(s, (uint64_t)cJSON_GetArraySize(cJSON_GetObjectItem(resp, "data")), n_tokens, now_s() - t0);
    }
    pthread_mutex_unlock(&s->mu);
    return resp ? send_json(s, conn, 200, resp, false) : send_error(s, conn, status, code, "%s", msg);
}

static enum MHD_Result send_text(serve_ctx *s, struct MHD_Connection *conn, const char *text, const char *type) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                                                MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(resp, "Content-Type", type);
    return queue_response(s, conn, MHD_HTTP_OK, resp);
}

/* A CORS preflight (or any OPTIONS request): 200 with an empty body (as llama-server answers it), no
 * authentication, the allowed methods and, for an Origin --cors allows, the CORS grant. */
static enum MHD_Result send_options(serve_ctx *s, struct MHD_Connection *conn) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Allow", "GET, POST, DELETE, OPTIONS");
    if (cors_allowed(s, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"))) {
        const char *asked = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", asked ? asked : "Authorization, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    }
    return queue_response(s, conn, MHD_HTTP_OK, resp);
}

/* The endpoints: a path (llama-server's aliases without /v1 too), its method, what answers it. */
typedef enum route {
    R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS, R_COMPLETION, R_EMBEDDINGS, R_TOKENIZE, R_DETOKENIZE,
    R_APPLY_TEMPLATE, R_PROPS, R_MESSAGES, R_COUNT_TOKENS, R_RESPONSES, R_RESPONSE_TOKENS, R_RESPONSE_GET,
    R_RESPONSE_DELETE, R_SLOT, R_SLOTS, R_CHAT_TOKENS, R_MODELS_LOAD, R_MODELS_UNLOAD,
} route;

static const struct {
    const char *url, *method;
    route r;
} routes[] = {
    {"/health", "GET", R_HEALTH},
    {"/v1/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},
    {"/v1/models", "GET", R_MODELS},
    {"/models", "GET", R_MODELS},
    {"/models/load", "POST", R_MODELS_LOAD},
    {"/models/unload", "POST", R_MODELS_UNLOAD},
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/chat/completions", "POST", R_CHAT},
    {"/v1/chat/completions/input_tokens", "POST", R_CHAT_TOKENS},
    {"/chat/completions/input_tokens", "POST", R_CHAT_TOKENS},
    {"/v1/completions", "POST", R_COMPLETIONS},
    {"/completion", "POST", R_COMPLETION},
    {"/completions", "POST", R_COMPLETION}, /* llama-server's: its native shape, as /completion */
    {"/v1/embeddings", "POST", R_EMBEDDINGS},
    {"/embeddings", "POST", R_EMBEDDINGS},
    {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},
    {"/apply-template", "POST", R_APPLY_TEMPLATE},
    {"/props", "GET", R_PROPS},
    {"/v1/messages", "POST", R_MESSAGES},
    {"/v1/messages/count_tokens", "POST", R_COUNT_TOKENS},
    {"/v1/responses", "POST", R_RESPONSES},
    {"/responses", "POST", R_RESPONSES},
    {"/v1/responses/input_tokens", "POST", R_RESPONSE_TOKENS},
    {"/responses/input_tokens", "POST", R_RESPONSE_TOKENS},
    {"/v1/responses/", "GET", R_RESPONSE_GET}, /* /v1/responses/{id} */
    {"/v1/responses/", "DELETE", R_RESPONSE_DELETE},
    {"/slots/", "POST", R_SLOT}, /* /slots/{id}?action=... */
    {"/slots", "GET", R_SLOTS},
};

/* The route of method and url (a path ending in "/" takes any last segment), or -1; *known: some
 * route has this path. */
static int find_route(const char *method, const char *url, bool *known) {
    *known = false;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        size_t n = strlen(routes[i].url);
        bool match = routes[i].url[n - 1] == '/' ? !strncmp(url, routes[i].url, n) && url[n] && !strchr(url + n, '/')
                                                 : !strcmp(url, routes[i].url);
        if (!match) continue;
        *known = true;
        if (!strcmp(method, routes[i].method)) return (int)i;
    }
    return -1;
}

/* Whether the request carries --api-key: "Authorization: Bearer KEY", or Anthropic's
 * "X-Api-Key: KEY" (as llama-server accepts). */
static bool authorized(const serve_ctx *s, struct MHD_Connection *conn) {
    if (!s->o.api_key) return true;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (auth && !strncmp(auth, "Bearer ", 7) && !strcmp(auth + 7, s->o.api_key)) return true;
    const char *x = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Api-Key");
    return x && !strcmp(x, s->o.api_key);
}

/* The prompt tokens a request with this body would prefill: POST /v1/messages/count_tokens
 * {"input_tokens"}, /v1/responses/input_tokens {"object": "response.input_tokens",
 * "input_tokens"}, /chat/completions/input_tokens (llama-server's) {"input_tokens"}. */
static enum MHD_Result handle_input_tokens(serve_ctx *s, struct MHD_Connection *conn, req *r, map_fn map,
                                           serve_api api) {
    sreq_err e = {0};
    job *j = make_job(s, conn, r, map, &e);
    if (!j) return send_err(s, conn, api, &e);
    cJSON *out = cJSON_CreateObject();
    if (api == SAPI_RESPONSES) cJSON_AddStringToObject(out, "object", "response.input_tokens");
    cJSON_AddNumberToObject(out, "input_tokens", (double)j->p.n_ids);
    pthread_mutex_lock(&s->mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
    return send_json(s, conn, 200, out, false);
}

/* GET /v1/responses/{id}: the stored response object; DELETE: forgets it. */
static enum MHD_Result handle_response_id(serve_ctx *s, struct MHD_Connection *conn, const char *id, bool del) {
    if (del) {
        if (!resp_store_delete(s->responses, id))
            return send_error(s, conn, 404, "response_not_found", "no stored response '%.80s'", id);
        cJSON *out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "id", id);
        cJSON_AddStringToObject(out, "object", "response.deleted");
        cJSON_AddBoolToObject(out, "deleted", true);
        return send_json(s, conn, 200, out, false);
    }
    char *record = resp_store_get(s->responses, id);
    cJSON *rec = record ? cJSON_Parse(record) : NULL;
    free(record);
    cJSON *resp = cJSON_DetachItemFromObjectCaseSensitive(rec, "response");
    cJSON_Delete(rec);
    if (!resp) return send_error(s, conn, 404, "response_not_found", "no stored response '%.80s'", id);
    return send_json(s, conn, 200, resp, false);
}

/* POST /slots/{id}?action=save|restore|erase (llamacpp.c util_slot), on the model the body or
 * ?model= names. */
static enum MHD_Result handle_slot(serve_ctx *s, struct MHD_Connection *conn, req *r, const char *id) {
    sreq_err e = {0};
    const char *action = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "action");
    cJSON *out = NULL, *root = r->body.n ? sreq_parse_json(r->body.p, r->body.n, &e) : cJSON_CreateObject();
    serve_model *sm = root ? model_for(s, conn, root, &e) : NULL;
    bool ok = sm && util_slot(sm, id, action, root, &out, &e);
    if (sm) serve_model_release(sm);
    cJSON_Delete(root);
    return ok ? send_json(s, conn, 200, out, false) : send_err(s, conn, SAPI_CHAT, &e);
}

/* GET /slots (?model=, ?fail_on_no_slot=1): llama-server's list of slots, as far as statelm has
 * their fields: id, n_ctx, speculative, is_processing; for a busy slot id_task, n_prompt_tokens
 * and next_token [{has_next_token, n_decoded}]; statelm's n_cached_tokens (what the
 * slot's session holds). fail_on_no_slot: 503 when every slot is busy. */
static enum MHD_Result handle_slots(serve_ctx *s, struct MHD_Connection *conn) {
    if (s->o.no_slots) return send_error(s, conn, 501, "not_supported", "GET /slots is off (--no-slots)");
    sreq_err e = {0};
    serve_model *sm = model_for(s, conn, NULL, &e);
    if (!sm) return send_err(s, conn, SAPI_CHAT, &e);
    int32_t n = 0;
    slm_engine_slot_info *v = calloc((size_t)s->o.parallel, sizeof *v);
    if (!v || slm_engine_slots(sm->engine, v, s->o.parallel, &n) != SLM_OK) {
        free(v);
        serve_model_release(sm);
        return send_error(s, conn, 500, NULL, "out of memory");
    }
    cJSON *arr = cJSON_CreateArray();
    bool any_idle = false;
    for (int32_t i = 0; i < n && i < s->o.parallel; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", v[i].id);
        cJSON_AddNumberToObject(o, "n_ctx", sm->n_ctx);
        cJSON_AddBoolToObject(o, "speculative", s->o.lookup || s->o.draft_model);
        cJSON_AddBoolToObject(o, "is_processing", v[i].busy);
        cJSON_AddNumberToObject(o, "n_cached_tokens", (double)v[i].n_history);
        if (v[i].busy) {
            cJSON_AddNumberToObject(o, "id_task", (double)v[i].request);
            cJSON_AddNumberToObject(o, "n_prompt_tokens", (double)v[i].n_prompt);
            cJSON *next = cJSON_CreateObject();
            cJSON_AddBoolToObject(next, "has_next_token", true);
            cJSON_AddNumberToObject(next, "n_decoded", (double)v[i].n_generated);
            cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "next_token"), next);
        }
        any_idle |= !v[i].busy;
        cJSON_AddItemToArray(arr, o);
    }
    free(v);
    serve_model_release(sm);
    const char *fail = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (fail && strcmp(fail, "0") != 0 && !any_idle) {
        cJSON_Delete(arr);
        return send_error(s, conn, 503, "server_busy", "no slot available");
    }
    return send_json(s, conn, 200, arr, false);
}

typedef bool (*util_fn)(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e);

/* A utility endpoint answered in the connection's thread: body -> JSON -> fn on the model it names. */
static enum MHD_Result handle_util(serve_ctx *s, struct MHD_Connection *conn, req *r, util_fn fn) {
    sreq_err e = {0};
    cJSON *out = NULL, *root = sreq_parse_json(r->body.p ? r->body.p : "", r->body.n, &e);
    serve_model *sm = root ? model_for(s, conn, root, &e) : NULL;
    bool ok = sm && fn(sm, root, &out, &e);
    if (sm) serve_model_release(sm);
    cJSON_Delete(root);
    return ok ? send_json(s, conn, 200, out, false) : send_err(s, conn, SAPI_CHAT, &e);
}

/* GET /props (?model=): llama-server's properties of the model named. */
static enum MHD_Result handle_props(serve_ctx *s, struct MHD_Connection *conn) {
    sreq_err e = {0};
    serve_model *sm = model_for(s, conn, NULL, &e);
    if (!sm) return send_err(s, conn, SAPI_CHAT, &e);
    cJSON *out = util_props(sm);
    serve_model_release(sm);
    return send_json(s, conn, 200, out, false);
}

typedef bool (*models_fn)(serve_ctx *s, const cJSON *root, cJSON **out, sreq_err *e);

/* POST /models/load, /models/unload (models.c). */
static enum MHD_Result handle_models_op(serve_ctx *s, struct MHD_Connection *conn, req *r, models_fn fn) {
    sreq_err e = {0};
    cJSON *out = NULL, *root = sreq_parse_json(r->body.p ? r->body.p : "", r->body.n, &e);
    bool ok = root && fn(s, root, &out, &e);
    cJSON_Delete(root);
    return ok ? send_json(s, conn, 200, out, false) : send_err(s, conn, SAPI_CHAT, &e);
}

/* The engine statistics of every loaded model, summed (each held while read). */
static void engine_stats(serve_ctx *s, slm_engine_stats *out) {
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < s->n_models; i++) {
        serve_model *sm = &s->models[i];
        pthread_mutex_lock(&s->mu);
        bool held = sm->state == SM_LOADED;
        if (held) sm->refs++;
        pthread_mutex_unlock(&s->mu);
        if (!held) continue;
        slm_engine_stats es;
        slm_engine_get_stats(sm->engine, &es);
        serve_model_release(sm);
        out->n_submitted += es.n_submitted;
        out->n_completed += es.n_completed;
        out->n_cancelled += es.n_cancelled;
        out->n_failed += es.n_failed;
        out->n_generated_tokens += es.n_generated_tokens;
        out->n_reused_tokens += es.n_reused_tokens;
        out->n_queued += es.n_queued;
        out->n_busy += es.n_busy;
        out->n_slots += es.n_slots;
        out->decode_seconds += es.decode_seconds;
        out->n_decoded_tokens += es.n_decoded_tokens;
        out->n_cached_states += es.n_cached_states;
        out->n_state_files += es.n_state_files;
        out->cached_state_bytes += es.cached_state_bytes;
        out->n_drafted += es.n_drafted;
        out->n_accepted += es.n_accepted;
        out->n_replays += es.n_replays;
        out->n_batch_steps += es.n_batch_steps;
        out->n_batch_slots += es.n_batch_slots;
        out->n_batch_fallbacks += es.n_batch_fallbacks;
        out->n_spec_steps += es.n_spec_steps;
        if (es.batch_max > out->batch_max) out->batch_max = es.batch_max;
    }
}

static enum MHD_Result handle_metrics(serve_ctx *s, struct MHD_Connection *conn) {
    char text[4096], started[32];
    slm_engine_stats es;
    engine_stats(s, &es);
    pthread_mutex_lock(&s->mu);
    snprintf(text, sizeof text,
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
             (unsigned long long)s->m_requests, (unsigned long long)(s->m_errors + es.n_failed),
             (unsigned long long)es.n_cancelled, (unsigned long long)s->m_prompt_tokens,
             (unsigned long long)es.n_generated_tokens, (unsigned long long)es.n_reused_tokens, es.n_queued, es.n_busy,
             es.n_slots, es.decode_seconds > 0 ? (double)es.n_decoded_tokens / es.decode_seconds : 0.0,
             es.n_cached_states, (unsigned long long)es.cached_state_bytes, es.n_state_files,
             (unsigned long long)es.n_drafted, (unsigned long long)es.n_accepted, (unsigned long long)es.n_replays,
             (unsigned long long)es.n_batch_steps, (unsigned long long)es.n_batch_slots, es.batch_max,
             (unsigned long long)es.n_batch_fallbacks);
    buf all = buf_make(NULL);
    buf_puts(&all, text);
    util_metrics(s, &es, &all);
    pthread_mutex_unlock(&s->mu);
    if (all.oom) return buf_free(&all), MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(all.n, all.p, MHD_RESPMEM_MUST_COPY);
    buf_free(&all);
    MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
    snprintf(started, sizeof started, "%lld", (long long)s->t_started);
    MHD_add_response_header(resp, "Process-Start-Time-Unix", started); /* as llama-server */
    return queue_response(s, conn, MHD_HTTP_OK, resp);
}

enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_ctx *s = cls;
    req *r = *con_cls;
    size_t cap = (size_t)s->o.max_body_kib << 10;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        r->body = buf_make(NULL);
        *con_cls = r;
        pthread_mutex_lock(&s->mu);
        s->n_inflight++;
        pthread_mutex_unlock(&s->mu);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > cap)
            return send_error(s, conn, 413, NULL, "the request body is larger than %d KiB", s->o.max_body_kib);
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->body.n + *upload_size > cap) r->too_big = true;
        else if (buf_put(&r->body, upload, *upload_size), r->body.oom) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_watch *cw = ci ? ci->socket_context : NULL;
    if (cw) {
        pthread_mutex_lock(&s->mu);
        cw->receiving = false;
        pthread_mutex_unlock(&s->mu);
    }
    if (r->too_big) return send_error(s, conn, 413, NULL, "the request body is larger than %d KiB", s->o.max_body_kib);
    if (!strcmp(method, "OPTIONS")) return send_options(s, conn);
    bool known = false;
    int ri = find_route(method, url, &known);
    if (ri < 0 && !known) return send_error(s, conn, 404, NULL, "no endpoint %s %s", method, url);
    if (ri < 0) return send_error(s, conn, 405, NULL, "%s does not take %s", url, method); /* before auth, as a 404 */
    route rt = routes[ri].r;
    if (rt == R_HEALTH) return send_text(s, conn, "{\"status\":\"ok\"}", "application/json");
    serve_api api = rt == R_MESSAGES || rt == R_COUNT_TOKENS ? SAPI_MESSAGES : SAPI_CHAT;
    if (!authorized(s, conn)) return send_api_error(s, conn, api, 401, NULL, "invalid API key");
    switch (rt) {
    case R_METRICS: return handle_metrics(s, conn);
    case R_MODELS: return send_json(s, conn, 200, serve_models_json(s), false);
    case R_MODELS_LOAD: return handle_models_op(s, conn, r, serve_models_load);
    case R_MODELS_UNLOAD: return handle_models_op(s, conn, r, serve_models_unload);
    case R_CHAT: return handle_generate(s, conn, r, SAPI_CHAT, sreq_from_chat);
    case R_COMPLETIONS: return handle_generate(s, conn, r, SAPI_COMPLETIONS, sreq_from_completions);
    case R_COMPLETION: return handle_generate(s, conn, r, SAPI_COMPLETION, sreq_from_completion);
    case R_EMBEDDINGS: return handle_embeddings(s, conn, r);
    case R_TOKENIZE: return handle_util(s, conn, r, util_tokenize);
    case R_DETOKENIZE: return handle_util(s, conn, r, util_detokenize);
    case R_APPLY_TEMPLATE: return handle_util(s, conn, r, util_apply_template);
    case R_PROPS: return handle_props(s, conn);
    case R_MESSAGES: return handle_generate(s, conn, r, SAPI_MESSAGES, sreq_from_messages);
    case R_COUNT_TOKENS: return handle_input_tokens(s, conn, r, sreq_from_messages_count, SAPI_MESSAGES);
    case R_CHAT_TOKENS: return handle_input_tokens(s, conn, r, sreq_from_chat, SAPI_CHAT);
    case R_RESPONSES: return handle_generate(s, conn, r, SAPI_RESPONSES, sreq_from_responses);
    case R_RESPONSE_TOKENS: return handle_input_tokens(s, conn, r, sreq_from_responses, SAPI_RESPONSES);
    case R_SLOT: return handle_slot(s, conn, r, url + strlen("/slots/"));
    case R_SLOTS: return handle_slots(s, conn);
    case R_RESPONSE_GET:
    case R_RESPONSE_DELETE: return handle_response_id(s, conn, url + strlen("/v1/responses/"), rt == R_RESPONSE_DELETE);
    case R_HEALTH: break;
    }
    return send_error(s, conn, 404, NULL, "no endpoint %s %s", method, url);
}

void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    serve_ctx *s = cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_watch *cw = ci ? ci->socket_context : NULL;
    pthread_mutex_lock(&s->mu);
    if (cw) { /* the next request on this connection starts now */
        cw->receiving = true;
        cw->t_start = now_s();
    }
    pthread_mutex_unlock(&s->mu);
    req *r = *con_cls;
    if (!r) return;
    free(r->body.p);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&s->mu);
    s->n_inflight--;
    pthread_mutex_unlock(&s->mu);
}

void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    serve_ctx *s = cls;
    pthread_mutex_lock(&s->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_watch *cw = ci ? calloc(1, sizeof *cw) : NULL;
        if (cw) {
            cw->fd = ci->connect_fd;
            cw->t_start = now_s();
            cw->receiving = true;
            cw->next = s->conns;
            if (s->conns) s->conns->prev = cw;
            s->conns = cw;
        }
        *socket_context = cw;
    } else if (*socket_context) {
        conn_watch *cw = *socket_context;
        if (cw->prev) cw->prev->next = cw->next;
        else s->conns = cw->next;
        if (cw->next) cw->next->prev = cw->prev;
        free(cw);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Cuts connections whose request has been arriving for longer than --timeout seconds. */
void watch_connections(serve_ctx *s) {
    double now = now_s();
    pthread_mutex_lock(&s->mu);
    for (conn_watch *cw = s->conns; cw; cw = cw->next)
        if (cw->receiving && now - cw->t_start > s->o.timeout_s) {
            shutdown(cw->fd, SHUT_RDWR);
            cw->t_start = INFINITY;
        }
    pthread_mutex_unlock(&s->mu);
}
