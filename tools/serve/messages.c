/* messages.c — the Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) mapped
 * into sreq (request.h). Anthropic's shapes become the OpenAI-shaped messages the chat render path
 * takes:
 *   system (a string or text blocks)           -> a system message first;
 *   user text blocks                           -> a user message (blocks joined with "\n");
 *   user tool_result blocks                    -> one tool message each, in order, before the
 *                                                 user text of the same message; each must answer
 *                                                 a tool_use of the assistant message before it;
 *   assistant text + tool_use blocks           -> an assistant message with OpenAI tool_calls
 *                                                 (arguments: the input object as JSON text);
 *   assistant thinking blocks                  -> its reasoning_content (their texts joined, as
 *                                                 llama-server joins them), which templates such
 *                                                 as Qwen3's render in earlier turns;
 *   redacted_thinking blocks                   -> dropped;
 *   tools [{name, description, input_schema}]  -> OpenAI function tools;
 *   tool_choice auto / any / tool / none       -> auto / required / named / none. */
#include <math.h>
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

/* Appends piece to *text (malloc'd; NULL: empty), a "\n" between pieces. */
static bool join(char **text, const char *piece, sreq_err *e) {
    size_t n = *text ? strlen(*text) : 0, m = strlen(piece);
    char *v = realloc(*text, n + m + 2);
    if (!v) return oom(e);
    if (n) v[n++] = '\n';
    memcpy(v + n, piece, m + 1);
    *text = v;
    return true;
}

static const char *block_type(const cJSON *b) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type");
    return cJSON_IsObject(b) && cJSON_IsString(t) ? t->valuestring : NULL;
}

/* A content value of text blocks only (system, tool_result content): *out malloc'd. */
static bool text_blocks(const cJSON *c, const char *where, char **out, sreq_err *e) {
    *out = NULL;
    if (!c || cJSON_IsNull(c)) return (*out = dup("")) != NULL || oom(e);
    if (cJSON_IsString(c)) return (*out = dup(c->valuestring)) != NULL || oom(e);
    if (!cJSON_IsArray(c)) return sreq_fail(e, 400, NULL, "%s must be a string or a list of text blocks", where);
    const cJSON *b;
    size_t k = 0;
    char *acc = NULL;
    cJSON_ArrayForEach(b, c) {
        const char *type = block_type(b);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
        bool ok = false;
        if (!type) sreq_fail(e, 400, NULL, "%s[%zu] must be a block with a string 'type'", where, k);
        else if (!strcmp(type, "image") || !strcmp(type, "document"))
            sreq_fail(e, 400, "unsupported_content", "%s[%zu] is an '%s' block: this server reads text only", where, k, type);
        else if (strcmp(type, "text") != 0) sreq_fail(e, 400, NULL, "%s[%zu]: block type '%.40s' is not 'text'", where, k, type);
        else if (!cJSON_IsString(text)) sreq_fail(e, 400, NULL, "%s[%zu] needs a string 'text'", where, k);
        else ok = join(&acc, text->valuestring, e);
        if (!ok) {
            free(acc);
            return false;
        }
        k++;
    }
    *out = acc ? acc : dup("");
    return *out || oom(e);
}

/* The tool_use ids of the last assistant message, for checking tool_result blocks. */
typedef struct use_ids {
    char **v;
    size_t n;
} use_ids;

static void use_ids_clear(use_ids *u) {
    for (size_t i = 0; i < u->n; i++) free(u->v[i]);
    free(u->v);
    u->v = NULL;
    u->n = 0;
}

static bool use_ids_has(const use_ids *u, const char *id) {
    for (size_t i = 0; i < u->n; i++)
        if (!strcmp(u->v[i], id)) return true;
    return false;
}

/* An assistant message: text blocks joined, tool_use blocks into OpenAI tool_calls. */
static bool read_assistant(const cJSON *c, const char *where, sreq *r, use_ids *ids, sreq_err *e) {
    use_ids_clear(ids);
    if (!cJSON_IsArray(c)) {
        char *text = NULL;
        if (!text_blocks(c, where, &text, e)) return false;
        return sreq_add_msg(r, "assistant", text, NULL, e);
    }
    char *text = NULL, *calls_text = NULL, *fields = NULL;
    cJSON *calls = cJSON_CreateArray(), *reasoning = NULL;
    const cJSON *b;
    size_t k = 0;
    bool ok = false;
    if (!calls) return oom(e);
    cJSON_ArrayForEach(b, c) {
        const char *type = block_type(b);
        if (!type) {
            sreq_fail(e, 400, NULL, "%s.content[%zu] must be a block with a string 'type'", where, k);
            goto done;
        }
        if (!strcmp(type, "text")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(t)) {
                sreq_fail(e, 400, NULL, "%s.content[%zu] needs a string 'text'", where, k);
                goto done;
            }
            if (!join(&text, t->valuestring, e)) goto done;
        } else if (!strcmp(type, "tool_use")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input)) {
                sreq_fail(e, 400, NULL, "%s.content[%zu]: a tool_use block needs a string 'id', a string 'name' and an "
                                        "object 'input'", where, k);
                goto done;
            }
            char *args = cJSON_PrintUnformatted(input), **v = realloc(ids->v, (ids->n + 1) * sizeof *v);
            if (v) ids->v = v;
            char *idc = v ? dup(id->valuestring) : NULL;
            if (!args || !idc) {
                free(args);
                free(idc);
                oom(e);
                goto done;
            }
            ids->v[ids->n++] = idc;
            cJSON *call = cJSON_CreateObject();
            cJSON_AddStringToObject(call, "id", id->valuestring);
            cJSON_AddStringToObject(call, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(call, "function");
            cJSON_AddStringToObject(fn, "name", name->valuestring);
            cJSON_AddStringToObject(fn, "arguments", args);
            free(args);
            cJSON_AddItemToArray(calls, call);
        } else if (!strcmp(type, "thinking")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "thinking");
            if (!cJSON_IsString(t)) {
                sreq_fail(e, 400, NULL, "%s.content[%zu]: a thinking block needs a string 'thinking'", where, k);
                goto done;
            }
            const char *had = reasoning ? cJSON_GetStringValue(reasoning) : "";
            size_t n0 = strlen(had), n1 = strlen(t->valuestring);
            char *joined = malloc(n0 + n1 + 1);
            if (joined) {
                memcpy(joined, had, n0);
                memcpy(joined + n0, t->valuestring, n1 + 1);
            }
            cJSON *next = joined ? cJSON_CreateString(joined) : NULL;
            free(joined);
            if (!next) {
                oom(e);
                goto done;
            }
            cJSON_Delete(reasoning);
            reasoning = next;
        } else if (strcmp(type, "redacted_thinking") != 0) {
            sreq_fail(e, 400, NULL, "%s.content[%zu]: block type '%.40s' is not text, tool_use or thinking", where, k, type);
            goto done;
        }
        k++;
    }
    if (cJSON_GetArraySize(calls) > 0 && !(calls_text = cJSON_PrintUnformatted(calls))) {
        oom(e);
        goto done;
    }
    if (!text && !(text = dup(""))) {
        oom(e);
        goto done;
    }
    if (reasoning) {
        cJSON *f = cJSON_CreateObject();
        if (f) cJSON_AddItemToObject(f, "reasoning_content", reasoning);
        else cJSON_Delete(reasoning);
        reasoning = NULL;
        fields = f ? cJSON_PrintUnformatted(f) : NULL;
        cJSON_Delete(f);
        if (!fields) {
            oom(e);
            goto done;
        }
    }
    ok = sreq_add_msg(r, "assistant", text, calls_text, e);
    text = calls_text = NULL;
    if (ok) r->msgs[r->n_msgs - 1].fields = fields;
    else free(fields);
    fields = NULL;
done:
    free(text);
    free(calls_text);
    free(fields);
    cJSON_Delete(reasoning);
    cJSON_Delete(calls);
    return ok;
}

/* A user message: tool_result blocks become tool messages (each answering a tool_use of the
 * assistant message before), the text blocks one user message after them. */
static bool read_user(const cJSON *c, const char *where, sreq *r, use_ids *ids, sreq_err *e) {
    if (cJSON_IsArray(c) && cJSON_GetArraySize(c) == 0) return sreq_fail(e, 400, NULL, "%s: 'content' is an empty list", where);
    if (!cJSON_IsArray(c)) {
        char *text = NULL;
        if (!text_blocks(c, where, &text, e)) return false;
        use_ids_clear(ids);
        return sreq_add_msg(r, "user", text, NULL, e);
    }
    char *text = NULL;
    const cJSON *b;
    size_t k = 0;
    cJSON_ArrayForEach(b, c) {
        const char *type = block_type(b);
        char inner[64];
        snprintf(inner, sizeof inner, "%s.content[%zu]", where, k);
        if (!type) {
            free(text);
            return sreq_fail(e, 400, NULL, "%s must be a block with a string 'type'", inner);
        }
        if (!strcmp(type, "text")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(t)) {
                free(text);
                return sreq_fail(e, 400, NULL, "%s needs a string 'text'", inner);
            }
            if (!join(&text, t->valuestring, e)) return free(text), false;
        } else if (!strcmp(type, "tool_result")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
            const cJSON *is_error = cJSON_GetObjectItemCaseSensitive(b, "is_error");
            if (!cJSON_IsString(id)) {
                free(text);
                return sreq_fail(e, 400, NULL, "%s: a tool_result block needs a string 'tool_use_id'", inner);
            }
            if (!use_ids_has(ids, id->valuestring)) {
                free(text);
                return sreq_fail(e, 400, NULL, "%s: tool_result '%.64s' answers no tool_use of the assistant message before "
                                               "it", inner, id->valuestring);
            }
            if (is_error && !cJSON_IsNull(is_error) && !cJSON_IsBool(is_error)) {
                free(text);
                return sreq_fail(e, 400, NULL, "%s: 'is_error' must be a boolean", inner);
            }
            char *content = NULL, field[80];
            snprintf(field, sizeof field, "%s.content", inner);
            if (!text_blocks(cJSON_GetObjectItemCaseSensitive(b, "content"), field, &content, e)) return free(text), false;
            if (!sreq_add_msg(r, "tool", content, NULL, e)) return free(text), false;
            if (!(r->msgs[r->n_msgs - 1].tool_call_id = dup(id->valuestring))) /* templates may read it */
                return free(text), oom(e);
        } else if (!strcmp(type, "image") || !strcmp(type, "document")) {
            free(text);
            return sreq_fail(e, 400, "unsupported_content", "%s is an '%s' block: this server reads text only", inner, type);
        } else {
            free(text);
            return sreq_fail(e, 400, NULL, "%s: block type '%.40s' is not text or tool_result", inner, type);
        }
        k++;
    }
    use_ids_clear(ids);
    if (!text) return true; /* tool results only */
    return sreq_add_msg(r, "user", text, NULL, e);
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
            const char *type = block_type(t);
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
            const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
            if (type && strcmp(type, "custom") != 0) {
                cJSON_Delete(out);
                return sreq_fail(e, 400, NULL, "tools[%zu]: tool type '%.60s' is not supported (only client tools with an "
                                               "input_schema)", k, type);
            }
            if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !cJSON_IsObject(schema) ||
                (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))) {
                cJSON_Delete(out);
                return sreq_fail(e, 400, NULL, "tools[%zu] must be {\"name\": string, \"description\": string, "
                                               "\"input_schema\": object}", k);
            }
            cJSON *ft = cJSON_CreateObject();
            cJSON_AddStringToObject(ft, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(ft, "function");
            cJSON_AddStringToObject(fn, "name", name->valuestring);
            if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
            cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, true));
            cJSON_AddItemToArray(out, ft);
            k++;
        }
        if (k > 0 && !(r->tools = cJSON_PrintUnformatted(out))) {
            cJSON_Delete(out);
            return oom(e);
        }
        cJSON_Delete(out);
    }
    if (choice && !cJSON_IsNull(choice)) {
        const char *type = block_type(choice);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(choice, "name");
        if (!type) return sreq_fail(e, 400, NULL, "'tool_choice' must be an object with a string 'type'");
        if (!strcmp(type, "auto")) r->tool_mode = STOOL_AUTO;
        else if (!strcmp(type, "any")) r->tool_mode = STOOL_REQUIRED;
        else if (!strcmp(type, "none")) r->tool_mode = STOOL_NONE;
        else if (!strcmp(type, "tool")) {
            if (!cJSON_IsString(name)) return sreq_fail(e, 400, NULL, "'tool_choice' {\"type\": \"tool\"} needs a string 'name'");
            r->tool_mode = STOOL_NAMED;
            if (!(r->tool_name = dup(name->valuestring))) return oom(e);
        } else {
            return sreq_fail(e, 400, NULL, "'tool_choice' type '%.40s' is not auto, any, tool or none", type);
        }
    }
    return true;
}

static bool map_messages(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e, bool counting) {
    memset(r, 0, sizeof *r);
    r->api = SAPI_MESSAGES;
    r->sp = *defaults;
    r->sp.logit_bias = NULL;
    r->sp.n_logit_bias = 0;
    r->n = 1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
        return sreq_fail(e, 400, NULL, "'model' must be a string or null");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
    if (!counting && !mt) return sreq_fail(e, 400, NULL, "'max_tokens' is required");
    double v = 0;
    if (!sreq_num(root, "max_tokens", 1, 1e9, true, &v, e)) return false;
    r->max_tokens = (int32_t)v;
    if (!sreq_read_sampling(root, r, e)) return false;
    if (!sreq_read_bool(root, "stream", &r->stream, e)) return false;
    if (!sreq_read_stops(cJSON_GetObjectItemCaseSensitive(root, "stop_sequences"), "stop_sequences", r, e)) return false;
    if (!sreq_read_reasoning_format(root, r, e) || !sreq_read_reasoning_control(root, r, e)) return false;
    const cJSON *thinking = cJSON_GetObjectItemCaseSensitive(root, "thinking");
    if (thinking && !cJSON_IsNull(thinking)) {
        const char *type = block_type(thinking);
        if (!type || (strcmp(type, "enabled") && strcmp(type, "disabled") && strcmp(type, "adaptive")))
            return sreq_fail(e, 400, NULL, "'thinking' must be {\"type\": \"enabled\" | \"disabled\", ...}");
        /* enabled: budget_tokens; disabled: a budget of 0 (the block closed at once); adaptive: none */
        const cJSON *bt = cJSON_GetObjectItemCaseSensitive(thinking, "budget_tokens");
        double budget = bt && !cJSON_IsNull(bt) ? cJSON_GetNumberValue(bt) : -1;
        if (bt && !cJSON_IsNull(bt) && (!cJSON_IsNumber(bt) || budget != floor(budget) || budget < 0 || budget > 1 << 24))
            return sreq_fail(e, 400, NULL, "'thinking'.budget_tokens must be a non-negative integer");
        if (strcmp(type, "enabled") != 0) budget = -1;
        r->has_think_budget = !strcmp(type, "disabled") || budget >= 0;
        r->think_budget = budget >= 0 ? (int32_t)budget : 0;
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (meta && !cJSON_IsNull(meta) && !cJSON_IsObject(meta)) return sreq_fail(e, 400, NULL, "'metadata' must be an object");
    if (!read_tools(root, r, e)) return false;
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "system");
    if (sys && !cJSON_IsNull(sys)) {
        char *text = NULL;
        if (!text_blocks(sys, "'system'", &text, e)) return false;
        if (!sreq_add_msg(r, "system", text, NULL, e)) return false;
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "messages"), *m;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return sreq_fail(e, 400, NULL, "'messages' must be a non-empty list");
    use_ids ids = {0};
    size_t i = 0;
    bool ok = true;
    cJSON_ArrayForEach(m, arr) {
        char where[32];
        snprintf(where, sizeof where, "messages[%zu]", i++);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            ok = sreq_fail(e, 400, NULL, "%s needs a string 'role'", where);
            break;
        }
        if (!c) {
            ok = sreq_fail(e, 400, NULL, "%s needs a 'content'", where);
            break;
        }
        if (!strcmp(role->valuestring, "user")) ok = read_user(c, where, r, &ids, e);
        else if (!strcmp(role->valuestring, "assistant")) ok = read_assistant(c, where, r, &ids, e);
        else ok = sreq_fail(e, 400, NULL, "%s: role '%.40s' is not user or assistant", where, role->valuestring);
        if (!ok) break;
    }
    use_ids_clear(&ids);
    return ok;
}

bool sreq_from_messages(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    return map_messages(root, defaults, r, e, false);
}

bool sreq_from_messages_count(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    return map_messages(root, defaults, r, e, true);
}
