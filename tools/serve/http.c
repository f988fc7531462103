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

static enum MHD_Result handle_generate(struct MHD_Connection *conn, req *r, bool chat) {
    char msg[512] = "";
    job *j = NULL;
    const char *code = NULL;
    unsigned status = parse_request(r->body.v ? r->body.v : "", r->body.n, chat, &j, &code, msg, sizeof msg);
    if (status) return send_error(conn, status, code, "%s", msg);
    pthread_mutex_lock(&srv.mu);
    srv.m_requests++;
    srv.m_prompt_tokens += j->n_prompt;
    snprintf(j->id, sizeof j->id, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)++srv.next_id);
    j->created = (long long)time(NULL);
    j->refs = 2; /* this side and the engine (until its DONE event) */
    pthread_mutex_unlock(&srv.mu);
    slm_engine_request q = slm_engine_request_default();
    q.ids = j->prompt;
    q.n_ids = j->n_prompt;
    q.sampler = j->sp;
    q.grammar = j->grammar;
    q.max_tokens = j->max_tokens;
    q.n = j->n;
    q.stops = (const char *const *)j->stops;
    q.n_stops = j->n_stops;
    q.logprobs = j->logprobs;
    q.top_logprobs = j->top_logprobs;
    q.ignore_eos = j->ignore_eos;
    q.on_event = on_engine_event;
    q.user = j;
    uint64_t engine_id = 0;
    slm_status st = slm_engine_submit(srv.engine, &q, &engine_id, msg, sizeof msg);
    pthread_mutex_lock(&srv.mu);
    if (st != SLM_OK) { /* no event comes: the engine's reference goes too */
        j->refs = 1;
        job_unref_locked(j);
        pthread_mutex_unlock(&srv.mu);
        if (st == SLM_ERR_RANGE)
            return send_error(conn, 503, NULL, "the server is busy (%d slots, %d requests queued): retry later",
                              srv.o.parallel, srv.o.queue_max);
        if (st == SLM_ERR_ABORTED) return send_error(conn, 503, "server_shutting_down", "the server is shutting down");
        return send_error(conn, st == SLM_ERR_NOMEM ? 500 : 400,
                          st == SLM_ERR_CONTEXT_FULL ? "context_length_exceeded" : NULL, "%s", msg);
    }
    j->engine_id = engine_id;
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
        if (gone && !j->done) { /* the engine frees the slot at its next step, as for a stream */
            pthread_mutex_unlock(&srv.mu);
            job_cancel(j);
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

/* POST /v1/embeddings: answered in this connection's thread by the embedder (embed.c). */
static enum MHD_Result handle_embeddings(struct MHD_Connection *conn, req *r) {
    if (!srv.embedder)
        return send_error(conn, 404, "embeddings_disabled",
                          "embeddings are off: start the server with --embeddings (and optionally --pooling "
                          "last|mean|cls|none)");
    char msg[512];
    const char *code = NULL;
    cJSON *resp = NULL;
    unsigned status = serve_embedder_answer(srv.embedder, r->body.v ? r->body.v : "", r->body.n, srv.model_id, &resp,
                                            &code, msg, sizeof msg);
    pthread_mutex_lock(&srv.mu);
    srv.m_requests++;
    const cJSON *usage = resp ? cJSON_GetObjectItem(resp, "usage") : NULL;
    if (usage) srv.m_prompt_tokens += (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(usage, "prompt_tokens"));
    pthread_mutex_unlock(&srv.mu);
    return resp ? send_json(conn, 200, resp, false) : send_error(conn, status, code, "%s", msg);
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
                     {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"}, {"/v1/embeddings", "POST"}};
    for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++)
        if (!strcmp(url, endpoints[i].url)) return endpoints[i].method;
    return NULL;
}

static enum MHD_Result handle_metrics(struct MHD_Connection *conn) {
    char buf[4096];
    slm_engine_stats es;
    slm_engine_get_stats(srv.engine, &es);
    pthread_mutex_lock(&srv.mu);
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
             (unsigned long long)srv.m_requests, (unsigned long long)(srv.m_errors + es.n_failed),
             (unsigned long long)es.n_cancelled, (unsigned long long)srv.m_prompt_tokens,
             (unsigned long long)es.n_generated_tokens, (unsigned long long)es.n_reused_tokens, es.n_queued, es.n_busy,
             es.n_slots, es.decode_seconds > 0 ? (double)es.n_decoded_tokens / es.decode_seconds : 0.0,
             es.n_cached_states, (unsigned long long)es.cached_state_bytes, es.n_state_files,
             (unsigned long long)es.n_drafted, (unsigned long long)es.n_accepted, (unsigned long long)es.n_replays,
             (unsigned long long)es.n_batch_steps, (unsigned long long)es.n_batch_slots, es.batch_max,
             (unsigned long long)es.n_batch_fallbacks);
    pthread_mutex_unlock(&srv.mu);
    return send_text(conn, buf, "text/plain; version=0.0.4");
}

enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
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
        /* a built-in's name, the --chat-template-file path, or "model": the model's own template */
        cJSON_AddStringToObject(meta, "chat_template", srv.chat_template      ? srv.chat_template
                                                       : srv.o.chat_template_file ? srv.o.chat_template_file
                                                                              : "model");
        cJSON_AddNumberToObject(meta, "n_ctx", srv.n_ctx);
        cJSON_AddNumberToObject(meta, "n_vocab", srv.n_vocab);
        cJSON_AddBoolToObject(meta, "embeddings", srv.embedder != NULL);
        if (srv.embedder) {
            cJSON_AddNumberToObject(meta, "n_embd", slm_model_n_embd(srv.m));
            cJSON_AddStringToObject(meta, "pooling", slm_pooling_name(serve_embedder_pooling(srv.embedder)));
        }
        cJSON_AddItemToArray(arr, e);
        return send_json(conn, 200, root, false);
    }
    if (is_post && !strcmp(url, "/v1/chat/completions")) return handle_generate(conn, r, true);
    if (is_post && !strcmp(url, "/v1/completions")) return handle_generate(conn, r, false);
    if (is_post && !strcmp(url, "/v1/embeddings")) return handle_embeddings(conn, r);
    return send_error(conn, 404, NULL, "no endpoint %s %s", method, url);
}

void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
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

void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
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
void watch_connections(void) {
    double now = now_s();
    pthread_mutex_lock(&srv.mu);
    for (conn_watch *cw = srv.conns; cw; cw = cw->next)
        if (cw->receiving && now - cw->t_start > srv.o.timeout_s) {
            shutdown(cw->fd, SHUT_RDWR);
            cw->t_start = INFINITY;
        }
    pthread_mutex_unlock(&srv.mu);
}
