/* responses.c — the OpenAI Responses API (POST /v1/responses) mapped into sreq (request.h), and a
 * stored response's conversation put before the new input (previous_response_id).
 *   instructions                            -> a system message first (never stored: each request
 *                                              gives its own, as OpenAI's API does);
 *   input as text                           -> one user message;
 *   message items (role user, assistant,    -> messages (developer reads system), content a string
 *   system, developer)                         or input_text/output_text parts;
 *   function_call items                     -> tool_calls of an assistant message (consecutive
 *                                              calls, and calls right after an assistant message,
 *                                              join it);
 *   function_call_output items              -> tool messages (tool_call_id = call_id); each must
 *                                              answer a call of the assistant message before it;
 *   reasoning items                         -> dropped;
 *   tools [{type: function, name, ...}]     -> OpenAI chat function tools;
 *   text.format text / json_object /        -> the output constraint.
 *   json_schema
 * A stored record (oai_responses.c writes it) is {"response": {...}, "conversation": [{role,
 * content, tool_calls?, tool_call_id?, ids?}]}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

static bool oom(sreq_err *e) { return sreq_fail(e, 500, NULL, "out of memory"); }

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *v = malloc(n);
    if (v) memcpy(v, s, n);
    return v;
}

static const char *str_field(const cJSON *o, const char *name) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
}

/* Adds the call {id, type: function, function: {name, arguments}} to the last message when it is
 * an assistant's, else to a new assistant message with empty content. */
static bool add_call(sreq *r, const char *call_id, const char *name, const char *args, sreq_err *e) {
    sreq_msg *last = r->n_msgs > r->n_input_from ? &r->msgs[r->n_msgs - 1] : NULL;
    if (!last || strcmp(last->role, "assistant") != 0) {
        char *empty = dup("");
        if (!empty || !sreq_add_msg(r, "assistant", empty, NULL, e)) return empty ? false : oom(e);
        last = &r->msgs[r->n_msgs - 1];
    }
    cJSON *calls = last->tool_calls ? cJSON_Parse(last->tool_calls) : cJSON_CreateArray();
    if (!calls) return oom(e);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", call_id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddStringToObject(fn, "arguments", args);
    cJSON_AddItemToArray(calls, c);
    char *text = cJSON_PrintUnformatted(calls);
    cJSON_Delete(calls);
    if (!text) return oom(e);
    free(last->tool_calls);
    last->tool_calls = text;
    return true;
}

static bool read_item(const cJSON *it, size_t i, sreq *r, sreq_err *e) {
    char where[32];
    snprintf(where, sizeof where, "input[%zu]", i);
    if (!cJSON_IsObject(it)) return sreq_fail(e, 400, NULL, "%s must be an object", where);
    const char *type = str_field(it, "type");
    const cJSON *type_f = cJSON_GetObjectItemCaseSensitive(it, "type");
    if (type_f && !type) return sreq_fail(e, 400, NULL, "%s: 'type' must be a string", where);
    if (!type || !strcmp(type, "message")) {
        const char *role = str_field(it, "role");
        if (!role) return sreq_fail(e, 400, NULL, "%s: a message needs a string 'role'", where);
        if (!strcmp(role, "developer")) role = "system";
        if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system"))
            return sreq_fail(e, 400, NULL, "%s: role '%.40s' is not user, assistant, system or developer", where, role);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!c) return sreq_fail(e, 400, NULL, "%s: a message needs a 'content'", where);
        char *content = NULL;
        if (!sreq_read_content(c, where, &content, e)) return false;
        return sreq_add_msg(r, role, content, NULL, e);
    }
    if (!strcmp(type, "function_call")) {
        const char *call_id = str_field(it, "call_id"), *name = str_field(it, "name"), *args = str_field(it, "arguments");
        if (!call_id || !name || !args)
            return sreq_fail(e, 400, NULL, "%s: a function_call needs string 'call_id', 'name' and 'arguments'", where);
        return add_call(r, call_id, name, args, e);
    }
    if (!strcmp(type, "function_call_output")) {
        const char *call_id = str_field(it, "call_id");
        const cJSON *out = cJSON_GetObjectItemCaseSensitive(it, "output");
        if (!call_id) return sreq_fail(e, 400, NULL, "%s: a function_call_output needs a string 'call_id'", where);
        if (!out) return sreq_fail(e, 400, NULL, "%s: a function_call_output needs an 'output'", where);
        char *content = NULL, *id = NULL;
        if (!sreq_read_content(out, where, &content, e)) return false;
        if (!(id = dup(call_id))) return free(content), oom(e);
        if (!sreq_add_msg(r, "tool", content, NULL, e)) return free(id), false;
        r->msgs[r->n_msgs - 1].tool_call_id = id;
        return true;
    }
    if (!strcmp(type, "reasoning")) return true;
    return sreq_fail(e, 400, NULL, "%s: item type '%.40s' is not message, function_call, function_call_output or reasoning",
                     where, type);
}

static bool read_tools(const cJSON *root, sreq *r, sreq_err *e) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools"), *t;
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return sreq_fail(e, 400, NULL, "'tools' must be a list");
        cJSON *out = cJSON_CreateArray();
        size_t k = 0;
        if (!out) return oom(e);
        cJSON_ArrayForEach(t, tools) {
            const char *type = str_field(t, "type"), *name = str_field(t, "name");
            const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
            const cJSON *params = cJSON_GetObjectItemCaseSensitive(t, "parameters");
            if (!type || strcmp(type, "function") != 0) {
                cJSON_Delete(out);
                return sreq_fail(e, 400, NULL, "tools[%zu]: tool type '%.40s' is not supported (only 'function')", k,
                                 type ? type : "(none)");
            }
            if (!name || (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc)) ||
                (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))) {
                cJSON_Delete(out);
                return sreq_fail(e, 400, NULL, "tools[%zu] must be {\"type\": \"function\", \"name\": string, "
                                               "\"description\": string, \"parameters\": object}", k);
            }
            cJSON *ft = cJSON_CreateObject();
            cJSON_AddStringToObject(ft, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(ft, "function");
            cJSON_AddStringToObject(fn, "name", name);
            if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
            if (cJSON_IsObject(params)) cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(params, true));
            cJSON_AddItemToArray(out, ft);
            k++;
        }
        if (k > 0 && !(r->tools = cJSON_PrintUnformatted(out))) {
            cJSON_Delete(out);
            return oom(e);
        }
        cJSON_Delete(out);
    }
    if (cJSON_IsString(choice)) {
        const char *m = choice->valuestring;
        if (!strcmp(m, "none")) r->tool_mode = STOOL_NONE;
        else if (!strcmp(m, "auto")) r->tool_mode = STOOL_AUTO;
        else if (!strcmp(m, "required")) r->tool_mode = STOOL_REQUIRED;
        else return sreq_fail(e, 400, NULL, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                                            "\"name\": ...}");
    } else if (cJSON_IsObject(choice)) {
        const char *type = str_field(choice, "type"), *name = str_field(choice, "name");
        if (!type || strcmp(type, "function") || !name)
            return sreq_fail(e, 400, NULL, "'tool_choice' object must be {\"type\": \"function\", \"name\": string}");
        r->tool_mode = STOOL_NAMED;
        if (!(r->tool_name = dup(name))) return oom(e);
    } else if (choice && !cJSON_IsNull(choice)) {
        return sreq_fail(e, 400, NULL, "'tool_choice' must be a string or an object");
    }
    return true;
}

/* text.format: {"type": "text" | "json_object" | "json_schema", "schema": ...}. */
static bool read_text_format(const cJSON *root, sreq *r, sreq_err *e) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text");
    if (!text || cJSON_IsNull(text)) return true;
    if (!cJSON_IsObject(text)) return sreq_fail(e, 400, NULL, "'text' must be an object");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(text, "format");
    if (!fmt || cJSON_IsNull(fmt)) return true;
    const char *type = str_field(fmt, "type");
    if (!type) return sreq_fail(e, 400, NULL, "'text.format' must be an object with a string 'type'");
    if (!strcmp(type, "text")) return true;
    if (!strcmp(type, "json_object")) return (r->schema = dup("{\"type\":\"object\"}")) != NULL || oom(e);
    if (!strcmp(type, "json_schema")) {
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(fmt, "schema");
        if (!cJSON_IsObject(schema)) return sreq_fail(e, 400, NULL, "text.format json_schema needs a 'schema' object");
        return (r->schema = cJSON_PrintUnformatted(schema)) != NULL || oom(e);
    }
    return sreq_fail(e, 400, NULL, "text.format type '%.40s' is not text, json_object or json_schema", type);
}

/* The request fields the response object repeats, as JSON text. */
static bool make_echo(const cJSON *root, sreq *r, sreq_err *e) {
    static const char *const fields[] = {"instructions", "max_output_tokens", "metadata", "parallel_tool_calls",
                                         "previous_response_id", "temperature", "text", "tool_choice", "tools",
                                         "top_p", "truncation", "user", "reasoning"};
    cJSON *o = cJSON_CreateObject();
    if (!o) return oom(e);
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, fields[i]);
        if (f) cJSON_AddItemToObject(o, fields[i], cJSON_Duplicate(f, true));
    }
    r->echo = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return r->echo || oom(e);
}

bool sreq_from_responses(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    memset(r, 0, sizeof *r);
    r->api = SAPI_RESPONSES;
    r->sp = *defaults;
    r->sp.logit_bias = NULL;
    r->sp.n_logit_bias = 0;
    r->n = 1;
    r->store = true;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
        return sreq_fail(e, 400, NULL, "'model' must be a string or null");
    if (!sreq_read_sampling(root, r, e)) return false;
    double v = 0;
    if (!sreq_num(root, "max_output_tokens", 1, 1e9, true, &v, e)) return false;
    r->max_tokens = (int32_t)v;
    if (!sreq_read_bool(root, "stream", &r->stream, e) || !sreq_read_bool(root, "store", &r->store, e)) return false;
    bool parallel = true;
    if (!sreq_read_bool(root, "parallel_tool_calls", &parallel, e)) return false;
    if (!sreq_read_reasoning_format(root, r, e)) return false;
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(root, "previous_response_id");
    if (prev && !cJSON_IsNull(prev)) {
        if (!cJSON_IsString(prev)) return sreq_fail(e, 400, NULL, "'previous_response_id' must be a string");
        if (!(r->previous_id = dup(prev->valuestring))) return oom(e);
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (meta && !cJSON_IsNull(meta) && !cJSON_IsObject(meta)) return sreq_fail(e, 400, NULL, "'metadata' must be an object");
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(root, "reasoning");
    if (reasoning && !cJSON_IsNull(reasoning) && !cJSON_IsObject(reasoning))
        return sreq_fail(e, 400, NULL, "'reasoning' must be an object");
    if (!sreq_read_reasoning_control(root, r, e)) return false;
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(reasoning, "effort");
    if (effort && !cJSON_IsNull(effort) && !sreq_effort_budget(cJSON_GetStringValue(effort), "'reasoning'.effort", r, e))
        return false;
    if (!read_tools(root, r, e) || !read_text_format(root, r, e) || !make_echo(root, r, e)) return false;
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    if (ins && !cJSON_IsNull(ins)) {
        if (!cJSON_IsString(ins)) return sreq_fail(e, 400, NULL, "'instructions' must be a string");
        char *text = dup(ins->valuestring);
        if (!text || !sreq_add_msg(r, "system", text, NULL, e)) return text ? false : oom(e);
        r->has_instructions = true;
    }
    r->n_input_from = r->n_msgs;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input"), *it;
    if (cJSON_IsString(input)) {
        char *text = dup(input->valuestring);
        return text ? sreq_add_msg(r, "user", text, NULL, e) : oom(e);
    }
    if (!cJSON_IsArray(input) || cJSON_GetArraySize(input) == 0)
        return sreq_fail(e, 400, NULL, "'input' must be a string or a non-empty list of items");
    size_t i = 0;
    cJSON_ArrayForEach(it, input) if (!read_item(it, i++, r, e)) return false;
    if (r->n_msgs == r->n_input_from) return sreq_fail(e, 400, NULL, "'input' has no message, function_call or output");
    return true;
}

/* Whether the tool_calls JSON text of an assistant message has a call with this id. */
static bool has_call(const char *calls, const char *id) {
    cJSON *arr = calls ? cJSON_Parse(calls) : NULL, *c;
    bool found = false;
    cJSON_ArrayForEach(c, arr) if (!found && str_field(c, "id") && !strcmp(str_field(c, "id"), id)) found = true;
    cJSON_Delete(arr);
    return found;
}

/* Reads the stored conversation's message into m (fields malloc'd). */
static bool read_stored(const cJSON *x, sreq_msg *m, sreq_err *e) {
    const char *role = str_field(x, "role"), *content = str_field(x, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(x, "tool_calls"), *ids = cJSON_GetObjectItemCaseSensitive(x, "ids");
    const char *call_id = str_field(x, "tool_call_id");
    memset(m, 0, sizeof *m);
    if (!role || !content ||
        (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool")))
        return sreq_fail(e, 500, NULL, "a stored response's conversation is malformed");
    if (!(m->role = dup(role)) || !(m->content = dup(content))) return oom(e);
    if (cJSON_IsArray(calls) && !(m->tool_calls = cJSON_PrintUnformatted(calls))) return oom(e);
    if (call_id && !(m->tool_call_id = dup(call_id))) return oom(e);
    if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) > 0) {
        size_t n = (size_t)cJSON_GetArraySize(ids), k = 0;
        if (!(m->ids = malloc(n * sizeof *m->ids))) return oom(e);
        const cJSON *id;
        cJSON_ArrayForEach(id, ids) {
            double v = cJSON_GetNumberValue(id);
            if (!cJSON_IsNumber(id) || !(v >= 0 && v <= INT32_MAX) || v != (double)(int32_t)v)
                return sreq_fail(e, 500, NULL, "a stored response's conversation is malformed");
            m->ids[k++] = (int32_t)v;
        }
        m->n_ids = n;
    }
    return true;
}

static void msg_free(sreq_msg *m) {
    free(m->role);
    free(m->content);
    free(m->tool_calls);
    free(m->tool_call_id);
    free(m->ids);
}

bool sreq_responses_resolve(sreq *r, const char *record, sreq_err *e) {
    if (r->previous_id) {
        cJSON *rec = record ? cJSON_Parse(record) : NULL;
        const cJSON *conv = cJSON_GetObjectItemCaseSensitive(rec, "conversation"), *x;
        if (!rec) return sreq_fail(e, 404, "response_not_found", "previous_response_id '%.80s': no such response stored",
                                   r->previous_id);
        size_t n = (size_t)cJSON_GetArraySize(conv), at = r->has_instructions ? 1 : 0, k = 0;
        sreq_msg *v = realloc(r->msgs, (r->n_msgs + n + 1) * sizeof *v);
        if (!v) {
            cJSON_Delete(rec);
            return oom(e);
        }
        r->msgs = v;
        sreq_msg *stored = calloc(n ? n : 1, sizeof *stored);
        bool ok = stored != NULL || oom(e);
        cJSON_ArrayForEach(x, conv) if (ok) ok = read_stored(x, &stored[k++], e);
        cJSON_Delete(rec);
        if (!ok) {
            for (size_t i = 0; stored && i < k; i++) msg_free(&stored[i]);
            free(stored);
            return false;
        }
        memmove(r->msgs + at + n, r->msgs + at, (r->n_msgs - at) * sizeof *r->msgs);
        memcpy(r->msgs + at, stored, n * sizeof *stored);
        free(stored);
        r->n_msgs += n;
        r->n_input_from += n;
    }
    /* every tool output answers a call of the assistant message before it */
    const char *calls = NULL;
    for (size_t i = 0; i < r->n_msgs; i++) {
        const sreq_msg *m = &r->msgs[i];
        if (!strcmp(m->role, "assistant")) calls = m->tool_calls;
        else if (!strcmp(m->role, "tool") && m->tool_call_id && !has_call(calls, m->tool_call_id))
            return sreq_fail(e, 400, NULL, "input: function_call_output '%.64s' answers no function_call before it",
                             m->tool_call_id);
        else if (strcmp(m->role, "tool") != 0) calls = NULL;
    }
    return true;
}
