/* serve_tools.c — tool-call hooks of `statelm serve` (serve_tools.h). */
#include "serve_tools.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tools_setup(const char *tools, bool forced, const char *name, const char *tmpl, tool_req *t, slm_grammar **grammar,
                 char *msg, size_t cap) {
    *t = (tool_req){0};
    *grammar = NULL;
    char err[400] = "";
    if (slm_tools_check(tools, err, sizeof err) != SLM_OK) return snprintf(msg, cap, "%s", err), false;
    if (tmpl && !strcmp(tmpl, "gemma"))
        return snprintf(msg, cap, "chat template 'gemma' has no tool support (Gemma 3's template renders no tools); "
                                  "serve with --chat-template naming one that has, or send tool_choice \"none\""), false;
    size_t n = strlen(tools) + 1;
    if (!(t->tools = malloc(n))) return snprintf(msg, cap, "out of memory"), false;
    memcpy(t->tools, tools, n);
    t->parse = true;
    t->forced = forced;
    if (forced) {
        slm_status st = slm_tool_call_grammar(tmpl, tools, name, grammar, err, sizeof err);
        if (st != SLM_OK) {
            tools_req_free(t);
            return snprintf(msg, cap, "tool_choice: %s (%s)", err[0] ? err : "no grammar", slm_status_name(st)), false;
        }
    }
    return true;
}

void tools_req_free(tool_req *t) {
    free(t->tools);
    *t = (tool_req){0};
}

/* "call_" and 24 characters from the job id, choice and call index (unique within a server run as
 * job ids are). */
static void call_id(const char *job_id, int choice, size_t k, char out[32]) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = job_id; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ (uint64_t)choice) * 1099511628211ull;
    h = (h ^ k) * 1099511628211ull;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    memcpy(out, "call_", 5);
    for (int i = 0; i < 24; i++) {
        out[5 + i] = digits[h % 62];
        h = h / 62 ^ (h * 6364136223846793005ull + (uint64_t)i);
    }
    out[29] = '\0';
}

/* The parse of text as a cJSON {"content", "tool_calls": [{"name", "arguments"}]}, or NULL; the
 * request's tools type the values of XML calls. */
static cJSON *parse_answer(const tool_req *t, const char *tmpl, const char *text, size_t n) {
    char *json = NULL;
    if (slm_tool_calls_parse_opts(tmpl, t->tools, 0, text, n, &json) != SLM_OK) return NULL;
    cJSON *r = cJSON_Parse(json);
    slm_free(json);
    return r;
}

/* Call k as OpenAI's {"index", "id", "type", "function"}: its id the one the model wrote (Mistral's
 * [CALL_ID], an "id" member: templates may check its shape), else call_id's. */
static cJSON *call_json(const cJSON *call, const char *job_id, int choice, size_t k, bool with_args) {
    char id[32];
    call_id(job_id, choice, k, id);
    const cJSON *own = cJSON_GetObjectItemCaseSensitive(call, "id");
    cJSON *c = cJSON_CreateObject(), *fn;
    cJSON_AddNumberToObject(c, "index", (double)k);
    cJSON_AddStringToObject(c, "id", cJSON_IsString(own) && own->valuestring[0] ? own->valuestring : id);
    cJSON_AddStringToObject(c, "type", "function");
    fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", cJSON_GetObjectItemCaseSensitive(call, "name")->valuestring);
    cJSON_AddStringToObject(fn, "arguments",
                            with_args ? cJSON_GetObjectItemCaseSensitive(call, "arguments")->valuestring : "");
    return c;
}

bool tools_message_json(const tool_req *t, const char *tmpl, const char *text, const char *job_id, int choice,
                        cJSON *m) {
    cJSON *r = t->parse ? parse_answer(t, tmpl, text, strlen(text)) : NULL;
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(r, "tool_calls");
    size_t n_calls = (size_t)cJSON_GetArraySize(calls);
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(r, "reasoning_content"); /* gpt-oss: its analysis channel */
    if (cJSON_IsString(reasoning) && reasoning->valuestring[0])
        cJSON_AddStringToObject(m, "reasoning_content", reasoning->valuestring);
    if (!r || n_calls == 0) { /* the parse's content: the text, less a format's own markup (gpt-oss's channels) */
        cJSON_AddStringToObject(m, "content", r ? cJSON_GetObjectItemCaseSensitive(r, "content")->valuestring : text);
        cJSON_Delete(r);
        return false;
    }
    const char *content = cJSON_GetObjectItemCaseSensitive(r, "content")->valuestring;
    if (content[0]) cJSON_AddStringToObject(m, "content", content);
    else cJSON_AddNullToObject(m, "content");
    cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
    size_t k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        cJSON *x = call_json(c, job_id, choice, k, true);
        cJSON_DeleteItemFromObject(x, "index"); /* the whole message has no indices */
        cJSON_AddItemToArray(arr, x);
    }
    cJSON_Delete(r);
    return true;
}

size_t tools_content_ready(const tool_req *t, const char *tmpl, const char *text, size_t n) {
    return t->parse ? slm_tool_calls_content_ready(tmpl, text, n) : n;
}

/* A delta {"tool_calls": [{"index": k, "function": {"arguments": args[0, n)}}]}. */
static cJSON *args_delta(size_t k, const char *args, size_t n) {
    cJSON *d = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(d, "tool_calls");
    cJSON *item = cJSON_CreateObject(), *fn;
    cJSON_AddItemToArray(arr, item);
    cJSON_AddNumberToObject(item, "index", (double)k);
    fn = cJSON_AddObjectToObject(item, "function");
    char *piece = strndup(args, n);
    cJSON_AddStringToObject(fn, "arguments", piece ? piece : "");
    free(piece);
    return d;
}

/* A delta {"tool_calls": [call k with its id, type, name and empty arguments]}. */
static cJSON *head_delta(const cJSON *call, const char *job_id, int choice, size_t k) {
    cJSON *d = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(d, "tool_calls");
    cJSON_AddItemToArray(arr, call_json(call, job_id, choice, k, false));
    return d;
}

cJSON *tools_progress_deltas(const tool_req *t, const char *tmpl, const char *text, size_t n, tool_stream *ts,
                             const char *job_id, int choice) {
    cJSON *out = cJSON_CreateArray();
    size_t span[4];
    if (!out || !t->forced || !slm_tool_call_partial(tmpl, text, n, span)) return out;
    if (!ts->head_sent) {
        cJSON *call = cJSON_CreateObject();
        char *name = strndup(text + span[0], span[1]);
        cJSON_AddStringToObject(call, "name", name ? name : "");
        free(name);
        cJSON_AddItemToArray(out, head_delta(call, job_id, choice, 0));
        cJSON_Delete(call);
        ts->head_sent = true;
    }
    if (span[3] > ts->args_sent) {
        cJSON_AddItemToArray(out, args_delta(0, text + span[2] + ts->args_sent, span[3] - ts->args_sent));
        ts->args_sent = span[3];
    }
    return out;
}

cJSON *tools_final_deltas(const tool_req *t, const char *tmpl, const char *text, size_t n, size_t sent,
                          const tool_stream *ts, const char *job_id, int choice, bool *has_calls) {
    *has_calls = false;
    cJSON *out = cJSON_CreateArray();
    cJSON *r = t->parse ? parse_answer(t, tmpl, text, n) : NULL;
    if (!out || (t->parse && !r)) {
        cJSON_Delete(out);
        cJSON_Delete(r);
        return NULL;
    }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(r, "tool_calls");
    const char *content = r ? cJSON_GetObjectItemCaseSensitive(r, "content")->valuestring : text;
    size_t n_content = r ? strlen(content) : n;
    if (ts->head_sent && !cJSON_GetArraySize(calls)) n_content = 0; /* a streamed call cut short: no content */
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(r, "reasoning_content"); /* gpt-oss: held to the end */
    if (cJSON_IsString(reasoning) && reasoning->valuestring[0] && sent == 0) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "reasoning_content", reasoning->valuestring);
        cJSON_AddItemToArray(out, d);
    }
    if (n_content > sent) {
        cJSON *d = cJSON_CreateObject();
        char *rest = strndup(content + sent, n_content - sent);
        cJSON_AddStringToObject(d, "content", rest ? rest : "");
        free(rest);
        cJSON_AddItemToArray(out, d);
    }
    size_t k = 0;
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next, k++) {
        const char *args = cJSON_GetObjectItemCaseSensitive(c, "arguments")->valuestring;
        size_t done = k == 0 && ts->head_sent ? ts->args_sent : 0, n_args = strlen(args);
        if (!(k == 0 && ts->head_sent)) cJSON_AddItemToArray(out, head_delta(c, job_id, choice, k));
        if (n_args > done) cJSON_AddItemToArray(out, args_delta(k, args + done, n_args - done));
        *has_calls = true;
    }
    cJSON_Delete(r);
    return out;
}
