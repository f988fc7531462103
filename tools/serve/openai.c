/* openai.c — the OpenAI JSON shapes of `statelm serve`: a request body parsed into a job, the
 * response object, stream events, error objects. Tools (serve_tools.c): tool_choice "required" or
 * named is the job's grammar; answers of requests with tools are parsed for calls (streams hold
 * back content that may be a call, and send a forced call as it is generated). */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

/* An OpenAI error object: type from the HTTP status (a context overflow: llama-server's
 * exceed_context_size_error); code as given, or the status's own. */
cJSON *error_json(const char *msg, unsigned status, const char *code) {
    const char *type = code && !strcmp(code, "context_length_exceeded") ? "exceed_context_size_error"
                       : status == 401 ? "authentication_error"
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

/* A context overflow also carries llama-server's n_prompt_tokens and n_ctx. */
cJSON *sreq_error_json(const sreq_err *e) {
    cJSON *root = error_json(e->msg, e->status, e->code);
    if (e->n_ctx > 0) {
        cJSON *err = cJSON_GetObjectItem(root, "error");
        cJSON_AddNumberToObject(err, "n_prompt_tokens", e->n_prompt_tokens);
        cJSON_AddNumberToObject(err, "n_ctx", e->n_ctx);
    }
    return root;
}

/* Appends "data: <obj>\n\n" (obj taken over). */
void sse_add_json(job *j, cJSON *obj) {
    char *s = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (!s) return;
    buf_printf(&j->sse, "data: %s\n\n", s);
    free(s);
}

static bool is_chat(const job *j) { return j->r.api == SAPI_CHAT; }

/* The token's text for logprobs: its bytes with invalid UTF-8 replaced; caller frees. */
char *token_string(const serve_model *s, int32_t id, cJSON **bytes_out) {
    char b[256];
    size_t n = 0;
    if (slm_tokenizer_token_bytes(s->tok, id, b, sizeof b - 1, &n) != SLM_OK) n = 0;
    if (n > sizeof b - 1) n = sizeof b - 1;
    b[n] = '\0';
    if (bytes_out) {
        *bytes_out = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(*bytes_out, cJSON_CreateNumber((uint8_t)b[i]));
    }
    return cli_utf8_sanitize(b);
}

const char *job_stop_word(const job *j, int32_t ci) {
    const choice *c = &j->choices[ci];
    if (!c->finish || strcmp(c->finish, "stop") != 0 || !c->ids_cut || j->r.n_stops == 0 || !c->ids) return NULL;
    size_t need = 0;
    slm_tokenizer_decode(j->mdl->tok, c->ids, c->n_ids, false, NULL, 0, &need);
    char *full = malloc(need + 1);
    const char *found = NULL;
    if (full && slm_tokenizer_decode(j->mdl->tok, c->ids, c->n_ids, false, full, need, &need) == SLM_OK)
        for (int32_t i = 0; i < j->r.n_stops && !found; i++) {
            size_t n = strlen(j->r.stops[i]);
            if (c->text.n + n <= need && !memcmp(full + c->text.n, j->r.stops[i], n)) found = j->r.stops[i];
        }
    free(full);
    return found;
}

/* Logprobs of c->lps[from, to) in the chat shape {"content":[...]} or the completions shape. */
static cJSON *logprobs_json(const job *j, const choice *c, size_t from, size_t to) {
    cJSON *root = cJSON_CreateObject();
    if (is_chat(j)) {
        cJSON *content = cJSON_AddArrayToObject(root, "content");
        for (size_t k = from; k < to; k++) {
            const tok_lp *t = &c->lps[k];
            cJSON *e = cJSON_CreateObject(), *bytes;
            char *s = token_string(j->mdl, t->id, &bytes);
            cJSON_AddStringToObject(e, "token", s ? s : "");
            free(s);
            cJSON_AddNumberToObject(e, "logprob", (double)t->logprob);
            cJSON_AddItemToObject(e, "bytes", bytes);
            cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int32_t i = 0; i < t->n_top; i++) {
                cJSON *te = cJSON_CreateObject(), *tb;
                char *ts = token_string(j->mdl, t->top_id[i], &tb);
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
            char *s = token_string(j->mdl, t->id, NULL);
            cJSON_AddItemToArray(tokens, cJSON_CreateString(s ? s : ""));
            cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
            off += s ? strlen(s) : 0;
            free(s);
            cJSON_AddItemToArray(lps, cJSON_CreateNumber((double)t->logprob));
            cJSON *top = cJSON_CreateObject();
            for (int32_t i = 0; i < t->n_top; i++) {
                char *ts = token_string(j->mdl, t->top_id[i], NULL);
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
    size_t n_gen = 0, n_think = 0;
    for (int32_t i = 0; i < j->r.n; i++) {
        n_gen += j->choices[i].n_tokens;
        n_think += j->choices[i].n_think;
    }
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->p.n_ids);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->p.n_ids + n_gen));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)j->cached_tokens);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "completion_tokens_details"), "reasoning_tokens", (double)n_think);
    return u;
}

/* The fields every response object of job j opens with (OpenAI: id, object, created, model). */
static cJSON *response_head(const job *j, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", j->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)j->created);
    cJSON_AddStringToObject(root, "model", j->mdl->id);
    cJSON_AddStringToObject(root, "system_fingerprint", "b0-statelm"); /* llama-server's start with "b" (its build) */
    return root;
}

static cJSON *chunk_head(const job *j) { return response_head(j, is_chat(j) ? "chat.completion.chunk" : "text_completion"); }

/* split_answer (serve.h): where the parts of a chat answer text[0, n) lie (llama-server's --reasoning-format deepseek): an
 * answer that opens, after white space, with "<think>" has its reasoning up to "</think>" (all of
 * the rest while that has not come) and its content after it, white space around both trimmed; so
 * has one whose prompt ended inside an open think block (Qwen3.5), from its first byte, until
 * "</think>" or the start of a tool call. Unless final, ready stops short of what may still turn out to be a tag or the white space before
 * one: text[0, ready) may be sent. Without reasoning the content is all the text. */
static bool is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

answer_parts split_answer(const job *j, const char *t, size_t n, bool final) {
    static const char open[] = "<think>", close[] = "</think>";
    const size_t n_open = sizeof open - 1, n_close = sizeof close - 1;
    answer_parts p = {0, 0, 0, n};
    bool none = j->r.reasoning_format ? j->r.reasoning_format == 1 : j->srv->o.reasoning_none;
    if (!serve_api_is_chat(j->r.api) || none) return p;
    size_t i = 0;
    while (i < n && is_space(t[i])) i++;
    bool tagged = n - i >= n_open && !memcmp(t + i, open, n_open);
    if (!tagged && !j->p.think_open) { /* the prompt opened no think block: the answer may */
        if (n - i < n_open && !final && !memcmp(t + i, open, n - i)) p.ready = 0; /* may yet become "<think>" */
        return p;
    }
    p.r0 = tagged ? i + n_open : i;
    while (p.r0 < n && is_space(t[p.r0])) p.r0++;
    size_t e = p.r0;
    while (e + n_close <= n && memcmp(t + e, close, n_close) != 0) e++;
    if (e + n_close <= n) { /* closed: content after the tag */
        p.r1 = e;
        for (p.c0 = e + n_close; p.c0 < n && is_space(t[p.c0]);) p.c0++;
    } else if (j->p.think_open && !tagged && j->p.tools.parse &&
               (e = p.r0 + slm_tool_call_start(j->p.tool_fmt, t + p.r0, n - p.r0)) < n) {
        p.r1 = p.c0 = e; /* a call (or what may become one) ends the reasoning the prompt opened */
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

void stream_answer(job *j, size_t upto, answer_emit_fn emit) {
    choice *c = &j->choices[0];
    if (j->p.tools.parse) return;
    const char *t = c->text.p ? c->text.p : "";
    answer_parts parts = split_answer(j, t, c->text.n, c->finish != NULL);
    if (upto > parts.ready) upto = parts.ready;
    if (upto <= c->n_sent) return;
    size_t r_from = c->n_sent > parts.r0 ? c->n_sent : parts.r0, r_to = upto < parts.r1 ? upto : parts.r1;
    emit(j, 'k', t, r_from, r_to);
    size_t c_from = c->n_sent > parts.c0 ? c->n_sent : parts.c0;
    emit(j, 't', t, c_from, upto);
    c->n_sent = upto;
}

/* text[from, to) as a new NUL-terminated string (caller frees; NULL when out of memory). */
static char *text_span(const choice *c, size_t from, size_t to) {
    char *v = malloc(to - from + 1);
    if (v) {
        memcpy(v, c->text.p ? c->text.p + from : "", to - from);
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
 * when it made calls). c0: where the answer's content starts. Under srv->mu. */
static void sse_tool_calls(job *j, int32_t ci, size_t c0) {
    choice *c = &j->choices[ci];
    size_t sent = c->n_sent > c0 ? c->n_sent - c0 : 0;
    bool calls = false;
    char *text = cli_utf8_sanitize(c->text.p ? c->text.p : "");
    size_t n = text ? strlen(text) : 0;
    cJSON *deltas = text && c0 <= n ? tools_final_deltas(&j->p.tools, j->p.tool_fmt, text + c0, n - c0, sent, &c->ts,
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
    } else if (j->p.tools.forced && c->text.p && c->text.n >= c0) {
        sse_deltas(j, ci, tools_progress_deltas(&j->p.tools, j->p.tool_fmt, c->text.p + c0, c->text.n - c0, &c->ts,
                                                j->id, ci));
    }
}

/* Appends the stream event of choice ci: text [n_sent, upto) (for chat, split into reasoning and
 * content deltas: split_answer), logprobs not yet sent and, when the choice has finished, its
 * finish_reason (with tools: sse_tool_progress after it). Under srv->mu. */
void sse_choice(job *j, int32_t ci, size_t upto) {
    choice *c = &j->choices[ci];
    const char *text0 = c->text.p ? c->text.p : "";
    answer_parts parts = split_answer(j, text0, c->text.n, c->finish != NULL);
    if (upto > parts.ready) upto = parts.ready;
    const char *finish = c->finish;
    if (j->p.tools.parse && parts.ready >= parts.c0) { /* content that may be a call waits for the end */
        size_t lim = parts.c0 + tools_content_ready(&j->p.tools, j->p.tool_fmt, text0 + parts.c0, parts.ready - parts.c0);
        if (finish) lim = c->n_sent > parts.c0 ? c->n_sent : parts.c0;
        if (upto > lim) upto = lim;
        finish = NULL; /* the calls and the finish reason follow this chunk (sse_tool_progress) */
    }
    if (upto < c->n_sent) upto = c->n_sent;
    if (is_chat(j) && !c->role_sent) { /* a first chunk with the role alone, content null (llama-server's) */
        cJSON *role = cJSON_CreateObject();
        cJSON_AddStringToObject(role, "role", "assistant");
        cJSON_AddNullToObject(role, "content");
        sse_delta(j, ci, role, NULL);
        c->role_sent = true;
    }
    bool has_text = upto > c->n_sent, has_lp = j->r.logprobs && c->n_lps_sent < c->n_tokens;
    if (!has_text && !has_lp && !finish && c->role_sent) {
        if (j->p.tools.parse) sse_tool_progress(j, ci, parts.c0);
        return;
    }
    cJSON *root = chunk_head(j), *arr = cJSON_AddArrayToObject(root, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", ci);
    if (is_chat(j)) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        size_t r_from = c->n_sent > parts.r0 ? c->n_sent : parts.r0, r_to = upto < parts.r1 ? upto : parts.r1;
        if (r_to > r_from) {
            char *r = text_span(c, r_from, r_to);
            cJSON_AddStringToObject(delta, "reasoning_content", r ? r : "");
            free(r);
        }
        size_t c_from = c->n_sent > parts.c0 ? c->n_sent : parts.c0;
        if (upto > c_from) {
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
    if (j->p.tools.parse) sse_tool_progress(j, ci, parts.c0);
}

/* Ends the job's event stream: usage (and timings) when asked for, then [DONE]. Under srv->mu. */
void sse_finish(job *j) {
    if (j->err_status) {
        sse_add_json(j, error_json(j->err_msg, (unsigned)j->err_status, j->err_code));
    } else if (j->r.include_usage) {
        cJSON *root = chunk_head(j);
        cJSON_AddArrayToObject(root, "choices");
        cJSON_AddItemToObject(root, "usage", usage_json(j));
        cJSON_AddItemToObject(root, "timings", timings_json(j)); /* as llama-server's last chunk */
        sse_add_json(j, root);
    }
    buf_puts(&j->sse, "data: [DONE]\n\n");
    j->sse_end = true;
}

/* llama-server's "timings" of a finished job. */
cJSON *timings_json(const job *j) {
    size_t n_gen = 0, n_steps = 0; /* steps: tokens after each choice's first, which the prefill gave */
    for (int32_t i = 0; i < j->r.n; i++) {
        n_gen += j->choices[i].n_tokens;
        n_steps += j->choices[i].n_tokens > 0 ? j->choices[i].n_tokens - 1 : 0;
    }
    double t_first = j->t_first > 0 ? j->t_first : j->t_end, prompt_ms = (t_first - j->t_start) * 1e3;
    double gen_ms = (j->t_end - t_first) * 1e3;
    size_t n_prompt = j->p.n_ids - (j->cached_tokens < j->p.n_ids ? j->cached_tokens : j->p.n_ids);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "cache_n", (double)j->cached_tokens);
    cJSON_AddNumberToObject(t, "prompt_n", (double)n_prompt);
    cJSON_AddNumberToObject(t, "prompt_ms", prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", n_prompt ? prompt_ms / (double)n_prompt : 0.0);
    cJSON_AddNumberToObject(t, "prompt_per_second", prompt_ms > 0 ? 1e3 * (double)n_prompt / prompt_ms : 0.0);
    cJSON_AddNumberToObject(t, "predicted_n", (double)n_gen);
    cJSON_AddNumberToObject(t, "predicted_ms", gen_ms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", n_steps ? gen_ms / (double)n_steps : 0.0);
    cJSON_AddNumberToObject(t, "predicted_per_second", gen_ms > 0 && n_steps ? 1e3 * (double)n_steps / gen_ms : 0.0);
    return t;
}

cJSON *completion_json(const job *j) {
    cJSON *root = response_head(j, is_chat(j) ? "chat.completion" : "text_completion");
    cJSON *arr = cJSON_AddArrayToObject(root, "choices");
    for (int32_t i = 0; i < j->r.n; i++) {
        const choice *c = &j->choices[i];
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        bool calls = false;
        char *text = cli_utf8_sanitize(c->text.p ? c->text.p : "");
        if (is_chat(j)) {
            cJSON *m = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            answer_parts parts = split_answer(j, text ? text : "", text ? strlen(text) : 0, true);
            calls = tools_message_json(&j->p.tools, j->p.tool_fmt, text ? text + parts.c0 : "", j->id, i, m);
            if (text && parts.r1 > parts.r0) {
                text[parts.r1] = '\0';
                cJSON_AddStringToObject(m, "reasoning_content", text + parts.r0);
            }
        } else {
            cJSON_AddStringToObject(ch, "text", text ? text : "");
        }
        free(text);
        if (j->r.logprobs) cJSON_AddItemToObject(ch, "logprobs", logprobs_json(j, c, 0, c->n_tokens));
        else cJSON_AddNullToObject(ch, "logprobs");
        const char *finish = c->finish ? c->finish : "stop";
        cJSON_AddStringToObject(ch, "finish_reason", calls && !strcmp(finish, "stop") ? "tool_calls" : finish);
        cJSON_AddItemToArray(arr, ch);
    }
    cJSON_AddItemToObject(root, "usage", usage_json(j));
    cJSON_AddItemToObject(root, "timings", timings_json(j));
    if (j->r.verbose) cJSON_AddItemToObject(root, "__verbose", completion_native_json(j));
    return root;
}
