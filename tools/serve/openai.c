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

/* An OpenAI error object: type from the HTTP status; code as given, or the status's own. */
cJSON *error_json(const char *msg, unsigned status, const char *code) {
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
    bool tagged = n - i >= n_open && !memcmp(t + i, open, n_open);
    if (!tagged && !j->think_open) { /* the prompt opened no think block: the answer may */
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
    } else if (j->think_open && !tagged && j->tools.parse &&
               (e = p.r0 + slm_tool_call_start(j->tool_fmt, t + p.r0, n - p.r0)) < n) {
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
    cJSON *deltas = text && c0 <= n ? tools_final_deltas(&j->tools, j->tool_fmt, text + c0, n - c0, sent, &c->ts,
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
        sse_deltas(j, ci, tools_progress_deltas(&j->tools, j->tool_fmt, c->text.v + c0, c->text.n - c0, &c->ts,
                                                j->id, ci));
    }
}

/* Appends the stream event of choice ci: text [n_sent, upto) (for chat, split into reasoning and
 * content deltas: split_answer), logprobs not yet sent and, when the choice has finished, its
 * finish_reason (with tools: sse_tool_progress after it). Under srv.mu. */
void sse_choice(job *j, int32_t ci, size_t upto) {
    choice *c = &j->choices[ci];
    const char *text0 = c->text.v ? c->text.v : "";
    answer_parts parts = split_answer(j, text0, c->text.n, c->finish != NULL);
    if (upto > parts.ready) upto = parts.ready;
    const char *finish = c->finish;
    if (j->tools.parse && parts.ready >= parts.c0) { /* content that may be a call waits for the end */
        size_t lim = parts.c0 + tools_content_ready(&j->tools, j->tool_fmt, text0 + parts.c0, parts.ready - parts.c0);
        if (finish) lim = c->n_sent > parts.c0 ? c->n_sent : parts.c0;
        if (upto > lim) upto = lim;
        finish = NULL; /* the calls and the finish reason follow this chunk (sse_tool_progress) */
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
void sse_finish(job *j) {
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

/* The template a chat request runs: its "chat_template" (Jinja text) or the server's, with its
 * "chat_template_kwargs" (an object; *kwargs its text, caller frees) or --chat-template-kwargs. */
static bool request_template(const cJSON *root, slm_chat_template *t, char **kwargs, char *msg, size_t cap) {
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    *t = (slm_chat_template){srv.chat_template, srv.template_text, srv.o.chat_template_kwargs};
    if (ct && !cJSON_IsNull(ct)) {
        if (!cJSON_IsString(ct) || !ct->valuestring[0])
            return snprintf(msg, cap, "'chat_template' must be a non-empty string (a Jinja template)"), false;
        *t = (slm_chat_template){NULL, ct->valuestring, t->kwargs};
    }
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw)) return snprintf(msg, cap, "'chat_template_kwargs' must be an object"), false;
        if (!(*kwargs = cJSON_PrintUnformatted(kw))) return snprintf(msg, cap, "out of memory"), false;
        t->kwargs = *kwargs;
    }
    return true;
}

/* Whether job j's prompt ends inside an open think block ("<think>" then white space: Qwen3.5, QwQ),
 * read from the text of its last tokens. */
static bool prompt_thinks(const job *j) {
    size_t k = j->n_prompt < 4 ? j->n_prompt : 4, n = 0;
    char text[256];
    if (slm_tokenizer_decode(srv.tok, j->prompt + j->n_prompt - k, k, true, text, sizeof text - 1, &n) != SLM_OK)
        return false;
    while (n > 0 && is_space(text[n - 1])) n--;
    return n >= 7 && !memcmp(text + n - 7, "<think>", 7);
}

/* Builds a job from a request body; returns 0 or the HTTP status of the error (message in msg,
 * OpenAI code in *code when more specific than the status's). */
unsigned parse_request(const char *body, size_t n_body, bool chat, job **out, const char **code, char *msg,
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
    slm_chat_template tmpl = {0};
    char *kwargs = NULL; /* the request's chat_template_kwargs as text */
    slm_chat_message *msgs = NULL;
    slm_chat_ids *content_ids = NULL;
    char **calls = NULL; /* (n_msgs) each message's tool_calls JSON, or NULL */
    const char **call_ids = NULL; /* (n_msgs) each message's tool_call_id (in root), or NULL */
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
        if (!request_template(root, &tmpl, &kwargs, msg, cap)) goto fail;
        j->tool_fmt = slm_chat_tool_format(srv.m, &tmpl);
        if (!j->tool_fmt) j->tool_fmt = "none";
        if (!tools_read_request(root, j->tool_fmt, j->grammar != NULL, &j->tools, &forced, msg, cap)) goto fail;
        if (forced && j->ignore_eos) {
            slm_grammar_destroy(forced);
            snprintf(msg, cap, "'ignore_eos' cannot be combined with a forced tool call");
            goto fail;
        }
        if (forced) j->grammar = forced;
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
        call_ids = calloc((size_t)cJSON_GetArraySize(arr), sizeof *call_ids);
        if (!msgs || !calls || !call_ids) goto fail;
        cJSON_ArrayForEach(e, arr) {
            const char *r, *content;
            if (!tools_read_message(e, n_msgs, &r, &content, &calls[n_msgs], msg, cap)) goto fail;
            any_calls |= calls[n_msgs] != NULL;
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "tool_call_id"); /* templates may read it */
            call_ids[n_msgs] = cJSON_IsString(id) ? id->valuestring : NULL;
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
        slm_chat_tools tools = {j->tools.tools, any_calls ? (const char *const *)calls : NULL, call_ids};
        char err[400] = "";
        slm_status st = slm_chat_tokenize_with(srv.m, &tmpl, msgs, n_msgs, &tools, content_ids, true, &j->prompt,
                                               &j->n_prompt, err, sizeof err);
        if (st == SLM_OK) j->think_open = !j->grammar && prompt_thinks(j); /* a constrained answer is content */
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
    free(kwargs);
    free(call_ids);
    free(msgs);
    for (size_t i = 0; calls && i < n_msgs; i++) free(calls[i]);
    free(calls);
    cJSON_Delete(root);
    *out = j;
    return 0;
fail:
    free(kwargs);
    free(call_ids);
    free(msgs);
    for (size_t i = 0; calls && i < n_msgs; i++) free(calls[i]);
    free(calls);
    free(content_ids);
    cJSON_Delete(root);
    if (j) job_unref_locked(j);
    if (!msg[0]) snprintf(msg, cap, "out of memory");
    return status;
}

cJSON *completion_json(const job *j) {
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
            calls = tools_message_json(&j->tools, j->tool_fmt, text ? text + parts.c0 : "", j->id, i, m);
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
