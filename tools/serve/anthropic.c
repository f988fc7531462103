/* anthropic.c — the Anthropic Messages shapes of `statelm serve` (POST /v1/messages): the
 * message object, the stream's event sequence and the error object. A message's content is a
 * list of blocks: a thinking block (the answer's <think> part, split as for OpenAI's
 * reasoning_content; signature ""), a text block, tool_use blocks (calls parsed from the answer of
 * a request with tools, as for OpenAI's tool_calls).
 * Stream: message_start, ping, then per block content_block_start / content_block_delta ... /
 * content_block_stop (thinking_delta, text_delta, input_json_delta), then message_delta (stop
 * reason, output tokens) and message_stop. A request with tools sends its blocks when the answer
 * ends (text before a call cannot be told from the call until then). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

cJSON *anthropic_error_json(const char *msg, unsigned status) {
    const char *type = status == 401   ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 ? "overloaded_error"
                       : status >= 500 ? "api_error"
                                       : "invalid_request_error";
    cJSON *root = cJSON_CreateObject(), *e;
    cJSON_AddStringToObject(root, "type", "error");
    e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddStringToObject(e, "message", msg);
    return root;
}

/* input_tokens counts what was prefilled; cache_read_input_tokens what a slot or snapshot held. */
static cJSON *usage_json(const job *j, bool with_output) {
    size_t cached = j->cached_tokens < j->p.n_ids ? j->cached_tokens : j->p.n_ids;
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", (double)(j->p.n_ids - cached));
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", (double)cached);
    cJSON_AddNumberToObject(u, "output_tokens", with_output ? (double)j->choices[0].n_tokens : 0.0);
    return u;
}

/* stop_reason: max_tokens, stop_sequence (*seq set), tool_use, end_turn. */
static const char *stop_reason(const job *j, bool calls, const char **seq) {
    const choice *c = &j->choices[0];
    *seq = NULL;
    if (c->finish && !strcmp(c->finish, "length")) return "max_tokens";
    if (calls) return "tool_use";
    if ((*seq = job_stop_word(j, 0)) != NULL) return "stop_sequence";
    return "end_turn";
}

/* "toolu_" and the id's characters after "call_". */
static void tool_use_id(const char *call_id, char out[48]) {
    snprintf(out, 48, "toolu_%s", strncmp(call_id, "call_", 5) ? call_id : call_id + 5);
}

/* The content blocks of the finished answer; *calls: whether it has tool_use blocks. */
static cJSON *blocks_json(const job *j, bool *calls) {
    const choice *c = &j->choices[0];
    char *text = cli_utf8_sanitize(c->text.p ? c->text.p : "");
    size_t n = text ? strlen(text) : 0;
    answer_parts parts = split_answer(j, text ? text : "", n, true);
    cJSON *blocks = cJSON_CreateArray(), *m = cJSON_CreateObject();
    *calls = tools_message_json(&j->p.tools, j->p.tool_fmt, text ? text + parts.c0 : "", j->id, 0, m);
    if (text && parts.r1 > parts.r0) {
        cJSON *b = cJSON_CreateObject();
        text[parts.r1] = '\0';
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", text + parts.r0);
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(blocks, b);
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(content) && (content->valuestring[0] || !*calls)) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", content->valuestring);
        cJSON_AddItemToArray(blocks, b);
    }
    const cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        const char *args = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
        cJSON *input = args ? cJSON_Parse(args) : NULL, *b = cJSON_CreateObject();
        char id[48];
        tool_use_id(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(call, "id")), id);
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", id);
        cJSON_AddStringToObject(b, "name", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name")));
        cJSON_AddItemToObject(b, "input", cJSON_IsObject(input) ? input : (cJSON_Delete(input), cJSON_CreateObject()));
        cJSON_AddItemToArray(blocks, b);
    }
    cJSON_Delete(m);
    free(text);
    return blocks;
}

static cJSON *message_head(const job *j) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", j->id);
    cJSON_AddStringToObject(root, "type", "message");
    cJSON_AddStringToObject(root, "role", "assistant");
    cJSON_AddStringToObject(root, "model", j->mdl->id);
    return root;
}

cJSON *anthropic_message_json(const job *j) {
    bool calls = false;
    const char *seq;
    cJSON *root = message_head(j);
    cJSON_AddItemToObject(root, "content", blocks_json(j, &calls));
    cJSON_AddStringToObject(root, "stop_reason", stop_reason(j, calls, &seq));
    if (seq) cJSON_AddStringToObject(root, "stop_sequence", seq);
    else cJSON_AddNullToObject(root, "stop_sequence");
    cJSON_AddItemToObject(root, "usage", usage_json(j, true));
    return root;
}

/* ---- stream ------------------------------------------------------------------------------------ */

/* Appends "event: <type>\ndata: <obj>\n\n" (obj taken over; its "type" is the event's name). */
static void event(job *j, cJSON *obj) {
    char *s = cJSON_PrintUnformatted(obj);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "type"));
    if (s) buf_printf(&j->sse, "event: %s\ndata: %s\n\n", type ? type : "message", s);
    free(s);
    cJSON_Delete(obj);
}

static cJSON *typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void block_stop(job *j) {
    if (!j->a_open) return;
    cJSON *o = typed("content_block_stop");
    cJSON_AddNumberToObject(o, "index", j->a_blocks - 1);
    event(j, o);
    j->a_open = 0;
}

/* Starts block b (taken over) of kind ('k' thinking, 't' text, 'u' tool_use). */
static void block_start(job *j, cJSON *b, char kind) {
    block_stop(j);
    cJSON *o = typed("content_block_start");
    cJSON_AddNumberToObject(o, "index", j->a_blocks++);
    cJSON_AddItemToObject(o, "content_block", b);
    event(j, o);
    j->a_open = kind;
}

static void block_delta(job *j, const char *delta_type, const char *field, const char *s, size_t n) {
    char *v = malloc(n + 1);
    if (!v) return;
    memcpy(v, s, n);
    v[n] = '\0';
    cJSON *o = typed("content_block_delta"), *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", j->a_blocks - 1);
    cJSON_AddStringToObject(d, "type", delta_type);
    cJSON_AddStringToObject(d, field, v);
    cJSON_AddItemToObject(o, "delta", d);
    event(j, o);
    free(v);
}

/* Sends text[from, to) in a block of kind ('k' or 't'), opening one when another is open. */
static void stream_text(job *j, char kind, const char *text, size_t from, size_t to) {
    if (to <= from) return;
    if (j->a_open != kind) {
        cJSON *b = typed(kind == 'k' ? "thinking" : "text");
        cJSON_AddStringToObject(b, kind == 'k' ? "thinking" : "text", "");
        block_start(j, b, kind);
    }
    block_delta(j, kind == 'k' ? "thinking_delta" : "text_delta", kind == 'k' ? "thinking" : "text", text + from, to - from);
}

/* message_start and a ping: before the request is submitted, so they come first. */
void anthropic_sse_start(job *j) {
    cJSON *o = typed("message_start"), *m = message_head(j);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(m, "usage", usage_json(j, false));
    cJSON_AddItemToObject(o, "message", m);
    event(j, o);
    event(j, typed("ping"));
}

/* The new text [n_sent, upto) as thinking and text deltas; nothing for a request with tools until
 * it ends. Under srv->mu. */
void anthropic_sse_progress(job *j, size_t upto) {
    stream_answer(j, upto, stream_text);
}

/* The end: the rest of the text, or for a request with tools every block; message_delta and
 * message_stop. An error instead: an error event. Under srv->mu. */
void anthropic_sse_finish(job *j) {
    if (j->err_status) {
        event(j, anthropic_error_json(j->err_msg, (unsigned)j->err_status));
        j->sse_end = true;
        return;
    }
    bool calls = false;
    const char *seq;
    if (j->p.tools.parse) {
        cJSON *blocks = blocks_json(j, &calls);
        while (blocks->child) {
            cJSON *b = cJSON_DetachItemViaPointer(blocks, blocks->child);
            const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "type"));
            if (!strcmp(type, "tool_use")) {
                char *args = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "input"));
                cJSON_ReplaceItemInObject(b, "input", cJSON_CreateObject());
                block_start(j, b, 'u');
                if (args) block_delta(j, "input_json_delta", "partial_json", args, strlen(args));
                free(args);
            } else {
                char kind = !strcmp(type, "thinking") ? 'k' : 't';
                const char *field = kind == 'k' ? "thinking" : "text";
                char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, field));
                char *copy = v ? cli_utf8_sanitize(v) : NULL;
                cJSON_Delete(b);
                stream_text(j, kind, copy ? copy : "", 0, copy ? strlen(copy) : 0);
                free(copy);
            }
        }
        cJSON_Delete(blocks);
    } else {
        anthropic_sse_progress(j, j->choices[0].text.n);
    }
    if (j->a_blocks == 0) { /* an empty answer: one empty text block */
        cJSON *b = typed("text");
        cJSON_AddStringToObject(b, "text", "");
        block_start(j, b, 't');
    }
    block_stop(j);
    cJSON *o = typed("message_delta"), *d = cJSON_AddObjectToObject(o, "delta"), *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddStringToObject(d, "stop_reason", stop_reason(j, calls, &seq));
    if (seq) cJSON_AddStringToObject(d, "stop_sequence", seq);
    else cJSON_AddNullToObject(d, "stop_sequence");
    cJSON_AddNumberToObject(u, "output_tokens", (double)j->choices[0].n_tokens);
    event(j, o);
    event(j, typed("message_stop"));
    j->sse_end = true;
}
