/* oai_responses.c — the OpenAI Responses shapes of `statelm serve` (POST /v1/responses): the
 * response object, its stream events, and the record a stored response keeps (resp_store.h).
 * Output items: a reasoning item (the answer's <think> part, as reasoning_content), a message item
 * (output_text), function_call items (calls parsed from the answer of a request with tools).
 * Stream: response.created, response.in_progress, then per item output_item.added, its deltas
 * (reasoning_text.delta; content_part.added, output_text.delta, output_text.done,
 * content_part.done; function_call_arguments.delta/.done) and output_item.done, then
 * response.completed (or response.incomplete when max_output_tokens cut it); every event carries
 * its sequence_number. A request with tools sends its items when the answer ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* msg_/rs_/fc_ + the response id's hex digits (+ the call's index for fc_). */
static void item_id(const job *j, const char *prefix, int k, char out[64]) {
    const char *hex = strncmp(j->id, "resp_", 5) ? j->id : j->id + 5;
    if (k >= 0) snprintf(out, 64, "%s%s_%d", prefix, hex, k);
    else snprintf(out, 64, "%s%s", prefix, hex);
}

static cJSON *usage_json(const job *j) {
    size_t out = j->choices[0].n_tokens;
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", (double)j->p.n_ids);
    cJSON *in = cJSON_AddObjectToObject(u, "input_tokens_details");
    cJSON_AddNumberToObject(in, "cached_tokens", (double)j->cached_tokens);
    cJSON_AddNumberToObject(in, "cache_write_tokens", 0);
    cJSON_AddNumberToObject(u, "output_tokens", (double)out);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens",
                            (double)j->choices[0].n_think);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->p.n_ids + out));
    return u;
}

static cJSON *text_part(const char *text) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", text);
    cJSON_AddArrayToObject(p, "annotations");
    cJSON_AddArrayToObject(p, "logprobs");
    return p;
}

static cJSON *message_item(const job *j, const char *text, const char *status) {
    char id[64];
    item_id(j, "msg_", -1, id);
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "status", status);
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text) cJSON_AddItemToArray(content, text_part(text));
    return it;
}

static cJSON *reasoning_item(const job *j, const char *text) {
    char id[64];
    item_id(j, "rs_", -1, id);
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "reasoning");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddArrayToObject(it, "summary");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "reasoning_text");
        cJSON_AddStringToObject(p, "text", text);
        cJSON_AddItemToArray(content, p);
    }
    return it;
}

/* The output items of the finished answer; *m gets the OpenAI chat message it parses to (content,
 * tool_calls), for the stored conversation. */
static cJSON *output_items(const job *j, cJSON **m) {
    const choice *c = &j->choices[0];
    char *text = cli_utf8_sanitize(c->text.p ? c->text.p : "");
    size_t n = text ? strlen(text) : 0;
    answer_parts parts = split_answer(j, text ? text : "", n, true);
    cJSON *items = cJSON_CreateArray();
    *m = cJSON_CreateObject();
    bool calls = tools_message_json(&j->p.tools, j->p.tool_fmt, text ? text + parts.c0 : "", j->id, 0, *m);
    if (text && parts.r1 > parts.r0) {
        char keep = text[parts.r1];
        text[parts.r1] = '\0';
        cJSON_AddItemToArray(items, reasoning_item(j, text + parts.r0));
        text[parts.r1] = keep;
    }
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(*m, "content"));
    if (content || !calls) cJSON_AddItemToArray(items, message_item(j, content ? content : "", "completed"));
    const cJSON *call;
    int k = 0;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(*m, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        char id[64];
        item_id(j, "fc_", k++, id);
        cJSON *it = cJSON_CreateObject();
        cJSON_AddStringToObject(it, "type", "function_call");
        cJSON_AddStringToObject(it, "id", id);
        cJSON_AddStringToObject(it, "call_id", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(call, "id")));
        cJSON_AddStringToObject(it, "name", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name")));
        cJSON_AddStringToObject(it, "arguments", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "arguments")));
        cJSON_AddStringToObject(it, "status", "completed");
        cJSON_AddItemToArray(items, it);
    }
    free(text);
    return items;
}

static bool cut_by_length(const job *j) {
    const char *f = j->choices[0].finish;
    return f && !strcmp(f, "length");
}

/* The response object; output: its items (taken over), or NULL for an empty list; status as
 * given. The request's own fields are repeated from r.echo. */
static cJSON *response_object(const job *j, cJSON *output, const char *status) {
    cJSON *root = cJSON_CreateObject(), *echo = j->r.echo ? cJSON_Parse(j->r.echo) : NULL;
    cJSON_AddStringToObject(root, "id", j->id);
    cJSON_AddStringToObject(root, "object", "response");
    cJSON_AddNumberToObject(root, "created_at", (double)j->created);
    cJSON_AddStringToObject(root, "status", status);
    cJSON_AddNullToObject(root, "error");
    if (!strcmp(status, "incomplete"))
        cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(root, "incomplete_details");
    cJSON_AddStringToObject(root, "model", j->mdl->id);
    cJSON_AddItemToObject(root, "output", output ? output : cJSON_CreateArray());
    static const char *const defaults[][2] = {{"parallel_tool_calls", "true"}, {"tool_choice", "\"auto\""},
                                              {"tools", "[]"},                 {"instructions", "null"},
                                              {"metadata", "{}"},              {"previous_response_id", "null"},
                                              {"max_output_tokens", "null"},   {"text", "{\"format\":{\"type\":\"text\"}}"},
                                              {"truncation", "\"disabled\""}};
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++) {
        cJSON *f = cJSON_DetachItemFromObjectCaseSensitive(echo, defaults[i][0]);
        cJSON_AddItemToObject(root, defaults[i][0], f && !cJSON_IsNull(f) ? f : (cJSON_Delete(f), cJSON_Parse(defaults[i][1])));
    }
    cJSON_AddNumberToObject(root, "temperature", (double)j->r.sp.temperature);
    cJSON_AddNumberToObject(root, "top_p", j->r.sp.top_p < 1e-30f ? 0.0 : (double)j->r.sp.top_p);
    cJSON_AddBoolToObject(root, "store", j->r.store);
    cJSON_Delete(echo);
    if (!strcmp(status, "in_progress")) cJSON_AddNullToObject(root, "usage");
    else cJSON_AddItemToObject(root, "usage", usage_json(j));
    return root;
}

cJSON *responses_json(const job *j) {
    cJSON *m = NULL, *items = output_items(j, &m);
    cJSON_Delete(m);
    return response_object(j, items, cut_by_length(j) ? "incomplete" : "completed");
}

/* The stored record: {"response", "conversation"}: the request's messages but its instructions,
 * then the answer as an assistant message (with the ids it was generated as, when it has no
 * calls). */
char *responses_record(const job *j) {
    const choice *c = &j->choices[0];
    cJSON *m = NULL, *items = output_items(j, &m), *rec = cJSON_CreateObject();
    cJSON_AddItemToObject(rec, "response", response_object(j, items, cut_by_length(j) ? "incomplete" : "completed"));
    cJSON *conv = cJSON_AddArrayToObject(rec, "conversation");
    for (size_t i = j->r.has_instructions ? 1 : 0; i < j->r.n_msgs; i++) {
        const sreq_msg *x = &j->r.msgs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", x->role);
        cJSON_AddStringToObject(o, "content", x->content);
        if (x->tool_calls) cJSON_AddItemToObject(o, "tool_calls", cJSON_Parse(x->tool_calls));
        if (x->tool_call_id) cJSON_AddStringToObject(o, "tool_call_id", x->tool_call_id);
        if (x->ids) cJSON_AddItemToObject(o, "ids", cJSON_CreateIntArray(x->ids, (int)x->n_ids));
        cJSON_AddItemToArray(conv, o);
    }
    cJSON *a = cJSON_CreateObject(), *calls = cJSON_DetachItemFromObjectCaseSensitive(m, "tool_calls");
    cJSON_AddStringToObject(a, "role", "assistant");
    if (calls) {
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
        cJSON_AddStringToObject(a, "content", content ? content : "");
        cJSON_AddItemToObject(a, "tool_calls", calls);
    } else {
        char *text = cli_utf8_sanitize(c->text.p ? c->text.p : "");
        cJSON_AddStringToObject(a, "content", text ? text : "");
        if (!c->ids_cut && c->n_ids && text && strlen(text) == c->text.n)
            cJSON_AddItemToObject(a, "ids", cJSON_CreateIntArray(c->ids, (int)c->n_ids));
        free(text);
    }
    cJSON_AddItemToArray(conv, a);
    cJSON_Delete(m);
    char *s = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
    return s;
}

/* ---- stream ------------------------------------------------------------------------------------ */

/* Appends "event: <type>\ndata: <obj>\n\n" with the next sequence_number (obj taken over). */
static void event(job *j, const char *type, cJSON *obj) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddNumberToObject(o, "sequence_number", (double)j->a_seq++);
    for (cJSON *f = obj ? obj->child : NULL; f;) {
        cJSON *next = f->next;
        cJSON_AddItemToObject(o, f->string, cJSON_DetachItemViaPointer(obj, f));
        f = next;
    }
    cJSON_Delete(obj);
    char *s = cJSON_PrintUnformatted(o);
    if (s) buf_printf(&j->sse, "event: %s\ndata: %s\n\n", type, s);
    free(s);
    cJSON_Delete(o);
}

static cJSON *at(const job *j, const char *item, bool with_content_index) {
    cJSON *o = cJSON_CreateObject();
    if (item) cJSON_AddStringToObject(o, "item_id", item);
    cJSON_AddNumberToObject(o, "output_index", j->a_blocks - 1);
    if (with_content_index) cJSON_AddNumberToObject(o, "content_index", 0);
    return o;
}

static char *span(const char *t, size_t from, size_t to) {
    char *v = malloc(to - from + 1);
    if (v) {
        memcpy(v, t + from, to - from);
        v[to - from] = '\0';
    }
    return v;
}

/* Closes the open reasoning or message item: its done events with the whole text. */
static void item_close(job *j) {
    if (!j->a_open) return;
    const choice *c = &j->choices[0];
    char *text = span(c->text.p ? c->text.p : "", j->a_from, j->a_to), id[64];
    if (j->a_open == 'k') {
        item_id(j, "rs_", -1, id);
        cJSON *o = at(j, id, true);
        cJSON_AddStringToObject(o, "text", text ? text : "");
        event(j, "response.reasoning_text.done", o);
        o = at(j, NULL, false);
        cJSON_AddItemToObject(o, "item", reasoning_item(j, text ? text : ""));
        event(j, "response.output_item.done", o);
    } else {
        item_id(j, "msg_", -1, id);
        cJSON *o = at(j, id, true);
        cJSON_AddStringToObject(o, "text", text ? text : "");
        cJSON_AddArrayToObject(o, "logprobs");
        event(j, "response.output_text.done", o);
        o = at(j, id, true);
        cJSON_AddItemToObject(o, "part", text_part(text ? text : ""));
        event(j, "response.content_part.done", o);
        o = at(j, NULL, false);
        cJSON_AddItemToObject(o, "item", message_item(j, text ? text : "", "completed"));
        event(j, "response.output_item.done", o);
    }
    free(text);
    j->a_open = 0;
}

/* Opens a reasoning ('k') or message ('t') item whose text starts at byte from. */
static void item_open(job *j, char kind, size_t from) {
    item_close(j);
    j->a_blocks++;
    char id[64];
    cJSON *o = at(j, NULL, false);
    cJSON_AddItemToObject(o, "item", kind == 'k' ? reasoning_item(j, NULL) : message_item(j, NULL, "in_progress"));
    event(j, "response.output_item.added", o);
    if (kind == 't') {
        item_id(j, "msg_", -1, id);
        o = at(j, id, true);
        cJSON_AddItemToObject(o, "part", text_part(""));
        event(j, "response.content_part.added", o);
    }
    j->a_open = kind;
    j->a_from = j->a_to = from;
}

static void stream_text(job *j, char kind, const char *t, size_t from, size_t to) {
    if (to <= from) return;
    if (j->a_open != kind) item_open(j, kind, from);
    char *d = span(t, from, to), id[64];
    item_id(j, kind == 'k' ? "rs_" : "msg_", -1, id);
    cJSON *o = at(j, id, true);
    cJSON_AddStringToObject(o, "delta", d ? d : "");
    if (kind == 't') cJSON_AddArrayToObject(o, "logprobs");
    event(j, kind == 'k' ? "response.reasoning_text.delta" : "response.output_text.delta", o);
    free(d);
    j->a_to = to;
}

void responses_sse_start(job *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "response", response_object(j, NULL, "in_progress"));
    event(j, "response.created", o);
    o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "response", response_object(j, NULL, "in_progress"));
    event(j, "response.in_progress", o);
}

void responses_sse_progress(job *j, size_t upto) {
    stream_answer(j, upto, stream_text);
}

/* A request with tools: every item of the finished answer, as events. */
static void items_at_end(job *j) {
    cJSON *m = NULL, *items = output_items(j, &m);
    cJSON_Delete(m);
    while (items->child) {
        cJSON *it = cJSON_DetachItemViaPointer(items, items->child);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "type"));
        if (!strcmp(type, "function_call")) {
            j->a_blocks++;
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "id"));
            char *args = strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "arguments")));
            cJSON *added = cJSON_Duplicate(it, true), *o = at(j, NULL, false);
            cJSON_ReplaceItemInObject(added, "arguments", cJSON_CreateString(""));
            cJSON_ReplaceItemInObject(added, "status", cJSON_CreateString("in_progress"));
            cJSON_AddItemToObject(o, "item", added);
            event(j, "response.output_item.added", o);
            o = at(j, id, false);
            cJSON_AddStringToObject(o, "delta", args ? args : "");
            event(j, "response.function_call_arguments.delta", o);
            o = at(j, id, false);
            cJSON_AddStringToObject(o, "arguments", args ? args : "");
            event(j, "response.function_call_arguments.done", o);
            free(args);
            o = at(j, NULL, false);
            cJSON_AddItemToObject(o, "item", it);
            event(j, "response.output_item.done", o);
        } else {
            bool reasoning = !strcmp(type, "reasoning");
            const cJSON *content = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "content"), 0);
            const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(content, "text"));
            /* stream_text spans the choice's text: these items are sent whole through one delta */
            char kind = reasoning ? 'k' : 't';
            item_open(j, kind, 0);
            char id[64];
            item_id(j, reasoning ? "rs_" : "msg_", -1, id);
            cJSON *o = at(j, id, true);
            cJSON_AddStringToObject(o, "delta", text ? text : "");
            if (!reasoning) cJSON_AddArrayToObject(o, "logprobs");
            event(j, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", o);
            j->a_open = 0; /* closed here with the item's own text */
            if (reasoning) {
                o = at(j, id, true);
                cJSON_AddStringToObject(o, "text", text ? text : "");
                event(j, "response.reasoning_text.done", o);
            } else {
                o = at(j, id, true);
                cJSON_AddStringToObject(o, "text", text ? text : "");
                cJSON_AddArrayToObject(o, "logprobs");
                event(j, "response.output_text.done", o);
                o = at(j, id, true);
                cJSON_AddItemToObject(o, "part", text_part(text ? text : ""));
                event(j, "response.content_part.done", o);
            }
            o = at(j, NULL, false);
            cJSON_AddItemToObject(o, "item", it);
            event(j, "response.output_item.done", o);
        }
    }
    cJSON_Delete(items);
}

void responses_sse_finish(job *j) {
    if (j->err_status) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "code", j->err_code ? j->err_code : "server_error");
        cJSON_AddStringToObject(o, "message", j->err_msg);
        cJSON_AddNullToObject(o, "param");
        event(j, "error", o);
        j->sse_end = true;
        return;
    }
    if (j->p.tools.parse) {
        items_at_end(j);
    } else {
        responses_sse_progress(j, j->choices[0].text.n);
        if (j->a_blocks == 0) item_open(j, 't', j->choices[0].text.n); /* an empty answer: one empty message */
        item_close(j);
    }
    cJSON *o = cJSON_CreateObject();
    bool incomplete = cut_by_length(j);
    cJSON_AddItemToObject(o, "response", responses_json(j));
    event(j, incomplete ? "response.incomplete" : "response.completed", o);
    j->sse_end = true;
}
