/* request.c — the OpenAI and llama.cpp mappings into sreq (request.h), the readers they share
 * with messages.c, and validation. */
#include "request.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sreq_free(sreq *r) {
    for (size_t i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
        free(r->msgs[i].tool_calls);
        free(r->msgs[i].tool_call_id);
        free(r->msgs[i].fields);
        free(r->msgs[i].ids);
    }
    free(r->msgs);
    free(r->prompt_text);
    free(r->prompt_ids);
    free((void *)(uintptr_t)r->sp.logit_bias);
    for (int32_t i = 0; i < r->n_bias_text; i++) free(r->bias_text[i].text);
    free(r->bias_text);
    free(r->response_fields);
    for (int32_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->grammar);
    free(r->schema);
    free(r->tools);
    free(r->tool_name);
    free(r->chat_template);
    free(r->chat_template_kwargs);
    free(r->previous_id);
    free(r->echo);
    memset(r, 0, sizeof *r);
}

bool sreq_fail(sreq_err *e, unsigned status, const char *code, const char *fmt, ...) {
    e->status = status ? status : 400;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}

static bool oom(sreq_err *e) { return sreq_fail(e, 500, NULL, "out of memory"); }

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

cJSON *sreq_parse_json(const char *body, size_t n_body, sreq_err *e) {
    if (json_depth(body, n_body) > SREQ_MAX_JSON_DEPTH)
        return sreq_fail(e, 400, NULL, "JSON nested deeper than %d levels", SREQ_MAX_JSON_DEPTH), NULL;
    cJSON *root = cJSON_ParseWithLength(body, n_body);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return sreq_fail(e, 400, NULL, "the body is not a JSON object"), NULL;
    }
    return root;
}

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *v = malloc(n);
    if (v) memcpy(v, s, n);
    return v;
}

bool sreq_num(const cJSON *root, const char *name, double lo, double hi, bool integer, double *out, sreq_err *e) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) return true;
    if (!cJSON_IsNumber(f) || !(f->valuedouble >= lo && f->valuedouble <= hi) ||
        (integer && f->valuedouble != floor(f->valuedouble)))
        return sreq_fail(e, 400, NULL, "'%s' must be %s in [%g, %g]", name, integer ? "an integer" : "a number", lo, hi);
    *out = f->valuedouble;
    return true;
}

bool sreq_read_bool(const cJSON *root, const char *name, bool *out, sreq_err *e) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) return true;
    if (!cJSON_IsBool(f)) return sreq_fail(e, 400, NULL, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(f);
    return true;
}

/* A bias value: a number in [-100, 100] (-100 or less bans, as OpenAI's -100) or false (bans). */
static bool bias_value(const cJSON *x, float *out) {
    if (cJSON_IsFalse(x)) *out = -INFINITY;
    else if (cJSON_IsNumber(x) && x->valuedouble >= -100 && x->valuedouble <= 100)
        *out = x->valuedouble <= -100 ? -INFINITY : (float)x->valuedouble;
    else return false;
    return true;
}

/* One entry: key a token id (a number or a decimal string) or, when text_ok, any other string (a
 * bias on each token of that text, llama-server's). */
static bool add_bias(sreq *r, slm_logit_bias *v, const cJSON *key_num, const char *key, const cJSON *val, sreq_err *e) {
    float bias;
    char name[48];
    snprintf(name, sizeof name, "%.40s", key ? key : "");
    if (!bias_value(val, &bias))
        return sreq_fail(e, 400, NULL, "logit_bias['%s'] must be a number in [-100, 100] or false", name);
    long id = -1;
    if (key_num) {
        if (key_num->valuedouble != floor(key_num->valuedouble) || key_num->valuedouble < 0 || key_num->valuedouble > INT32_MAX)
            return sreq_fail(e, 400, NULL, "logit_bias: %g is not a token id", key_num->valuedouble);
        id = (long)key_num->valuedouble;
    } else {
        char *end = NULL;
        errno = 0;
        id = key[0] ? strtol(key, &end, 10) : -1;
        bool number = key[0] && !*end;
        if (number && (errno || id < 0 || id > INT32_MAX))
            return sreq_fail(e, 400, NULL, "logit_bias: '%s' is not a token id", name);
        if (!number) { /* text */
            sreq_text_bias *tv = realloc(r->bias_text, (size_t)(r->n_bias_text + 1) * sizeof *tv);
            if (!tv) return oom(e);
            r->bias_text = tv;
            if (!(tv[r->n_bias_text].text = dup(key))) return oom(e);
            tv[r->n_bias_text++].bias = bias;
            return true;
        }
    }
    v[r->sp.n_logit_bias++] = (slm_logit_bias){(int32_t)id, bias};
    return true;
}

/* "logit_bias": OpenAI's {"token id": bias} or llama-server's [[token id or text, bias], ...];
 * keys that are not token ids are texts whose tokens get the bias (render resolves them). Ids are
 * range-checked by sreq_validate. */
static bool read_logit_bias(const cJSON *f, sreq *r, sreq_err *e) {
    if (!f || cJSON_IsNull(f)) return true;
    if (!cJSON_IsObject(f) && !cJSON_IsArray(f))
        return sreq_fail(e, 400, NULL, "'logit_bias' must be an object of token ids to biases or a list of [token, bias]");
    int32_t n = cJSON_GetArraySize(f);
    if (n > SREQ_MAX_LOGIT_BIAS) return sreq_fail(e, 400, NULL, "'logit_bias' takes at most %d entries", SREQ_MAX_LOGIT_BIAS);
    if (n == 0) return true;
    slm_logit_bias *v = malloc((size_t)n * sizeof *v);
    if (!v) return oom(e);
    r->sp.logit_bias = v;
    const cJSON *x;
    cJSON_ArrayForEach(x, f) {
        if (cJSON_IsObject(f)) {
            if (!add_bias(r, v, NULL, x->string, x, e)) return false;
            continue;
        }
        const cJSON *k = cJSON_GetArrayItem(x, 0), *b = cJSON_GetArrayItem(x, 1);
        if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 2 || !(cJSON_IsNumber(k) || cJSON_IsString(k)))
            return sreq_fail(e, 400, NULL, "logit_bias entries must be [token id or text, bias]");
        if (!add_bias(r, v, cJSON_IsNumber(k) ? k : NULL, cJSON_GetStringValue(k), b, e)) return false;
    }
    return true;
}

/* The sampling fields every API shares (llama-server's names; each API maps its own onto them
 * first), logit_bias and seed. */
bool sreq_read_sampling(const cJSON *root, sreq *r, sreq_err *e) {
    static const struct {
        const char *name;
        double lo, hi;
        bool integer;
        size_t offset;
    } fields[] = {
        {"temperature", 0, 2, false, offsetof(slm_sampler_params, temperature)},
        {"top_p", 0, 1, false, offsetof(slm_sampler_params, top_p)},
        {"min_p", 0, 1, false, offsetof(slm_sampler_params, min_p)},
        {"top_k", 0, 1e9, true, offsetof(slm_sampler_params, top_k)},
        {"presence_penalty", -2, 2, false, offsetof(slm_sampler_params, presence_penalty)},
        {"frequency_penalty", -2, 2, false, offsetof(slm_sampler_params, frequency_penalty)},
        {"repeat_penalty", 1e-6, 100, false, offsetof(slm_sampler_params, repeat_penalty)},
        {"repeat_last_n", 0, 1e9, true, offsetof(slm_sampler_params, repeat_last_n)},
    };
    for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) {
        char *field = (char *)&r->sp + fields[k].offset;
        double v = fields[k].integer ? (double)*(int32_t *)(void *)field : (double)*(float *)(void *)field;
        if (!sreq_num(root, fields[k].name, fields[k].lo, fields[k].hi, fields[k].integer, &v, e)) return false;
        if (fields[k].integer) *(int32_t *)(void *)field = (int32_t)v;
        else *(float *)(void *)field = (float)v;
    }
    if (r->sp.top_p == 0.0f) r->sp.top_p = FLT_MIN; /* the most probable token only (0 is the C default) */
    if (!read_logit_bias(cJSON_GetObjectItemCaseSensitive(root, "logit_bias"), r, e)) return false;
    double v = -1;
    if (!sreq_num(root, "seed", -9.2e18, 9.2e18, true, &v, e)) return false;
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(root, "seed");
    if (seed && !cJSON_IsNull(seed) && v >= 0) { /* llama-server: -1 is a random seed */
        r->sp.seed = (uint64_t)(int64_t)v;
        r->seed_given = true;
    }
    return true;
}

bool sreq_read_stops(const cJSON *f, const char *name, sreq *r, sreq_err *e) {
    if (cJSON_IsString(f)) {
        if (f->valuestring[0] && !(r->stops[r->n_stops++] = dup(f->valuestring))) return oom(e);
        return true;
    }
    if (cJSON_IsArray(f)) {
        if (cJSON_GetArraySize(f) > SREQ_MAX_STOPS)
            return sreq_fail(e, 400, NULL, "'%s' takes at most %d strings", name, SREQ_MAX_STOPS);
        const cJSON *x;
        cJSON_ArrayForEach(x, f) {
            if (!cJSON_IsString(x)) return sreq_fail(e, 400, NULL, "'%s' must be a string or a list of strings", name);
            if (x->valuestring[0] && !(r->stops[r->n_stops++] = dup(x->valuestring))) return oom(e);
        }
        return true;
    }
    if (f && !cJSON_IsNull(f)) return sreq_fail(e, 400, NULL, "'%s' must be a string or a list of strings", name);
    return true;
}

bool sreq_read_reasoning_format(const cJSON *root, sreq *r, sreq_err *e) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "reasoning_format");
    if (!f || cJSON_IsNull(f)) return true;
    const char *v = cJSON_GetStringValue(f);
    if (v && !strcmp(v, "none")) r->reasoning_format = 1;
    else if (v && (!strcmp(v, "deepseek") || !strcmp(v, "auto") || !strcmp(v, "deepseek-legacy"))) r->reasoning_format = 2;
    else return sreq_fail(e, 400, NULL, "'reasoning_format' must be \"none\", \"deepseek\" or \"auto\"");
    return true;
}

bool sreq_effort_budget(const char *effort, const char *where, sreq *r, sreq_err *e) {
    static const struct {
        const char *name;
        int32_t budget; /* -1: none */
    } efforts[] = {{"none", 0}, {"minimal", 128}, {"low", 1024}, {"medium", 4096}, {"high", -1}, {"xhigh", -1}};
    for (size_t i = 0; effort && i < sizeof efforts / sizeof *efforts; i++)
        if (!strcmp(effort, efforts[i].name)) {
            r->has_think_budget = efforts[i].budget >= 0;
            r->think_budget = efforts[i].budget >= 0 ? efforts[i].budget : 0;
            return true;
        }
    return sreq_fail(e, 400, NULL, "%s must be none, minimal, low, medium, high or xhigh", where);
}

bool sreq_read_reasoning_control(const cJSON *root, sreq *r, sreq_err *e) {
    static const char *const names[] = {"thinking_budget_tokens", "reasoning_budget_tokens", "reasoning_budget"};
    double v = -1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        if (!f || cJSON_IsNull(f)) continue;
        if (!sreq_num(root, names[i], -1, 1 << 24, true, &v, e)) return false;
        r->has_think_budget = v >= 0;
        r->think_budget = v >= 0 ? (int32_t)v : 0;
        break;
    }
    const cJSON *eff = cJSON_GetObjectItemCaseSensitive(root, "reasoning_effort");
    if (eff && !cJSON_IsNull(eff) && v < 0 && !sreq_effort_budget(cJSON_GetStringValue(eff), "'reasoning_effort'", r, e))
        return false;
    const cJSON *slot = cJSON_GetObjectItemCaseSensitive(root, "id_slot");
    if (slot && !cJSON_IsNull(slot)) {
        if (!sreq_num(root, "id_slot", -1, 1 << 20, true, &v, e)) return false;
        r->has_id_slot = v >= 0;
        r->id_slot = v >= 0 ? (int32_t)v : 0;
    }
    return true;
}

/* max_tokens / max_completion_tokens / n_predict: absent, or -1 for n_predict, is the server's
 * limit. */
static bool read_max_tokens(const cJSON *root, const char *const *names, size_t n_names, sreq *r, sreq_err *e) {
    double v = 0;
    for (size_t i = 0; i < n_names; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        if (cJSON_IsNumber(f) && f->valuedouble == -1 && !strcmp(names[i], "n_predict")) continue;
        if (!sreq_num(root, names[i], 1, 1e9, true, &v, e)) return false;
    }
    r->max_tokens = (int32_t)v;
    return true;
}

/* sreq_read_content with the parts joined by sep. */
static bool read_content_sep(const cJSON *c, const char *where, const char *sep, char **out, sreq_err *e) {
    *out = NULL;
    if (!c || cJSON_IsNull(c)) return (*out = dup("")) != NULL || oom(e);
    if (cJSON_IsString(c)) return (*out = dup(c->valuestring)) != NULL || oom(e);
    if (!cJSON_IsArray(c)) return sreq_fail(e, 400, NULL, "%s: 'content' must be a string or a list of parts", where);
    size_t n = 0, k = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(type))
            return sreq_fail(e, 400, NULL, "%s: content[%zu] must be an object with a string 'type'", where, k);
        if (!strcmp(type->valuestring, "image_url") || !strcmp(type->valuestring, "input_image") ||
            !strcmp(type->valuestring, "image") || !strcmp(type->valuestring, "input_audio"))
            return sreq_fail(e, 400, "unsupported_content", "%s: content[%zu] is an '%s' part: this server reads text only",
                             where, k, type->valuestring);
        if (strcmp(type->valuestring, "text") != 0 && strcmp(type->valuestring, "input_text") != 0 &&
            strcmp(type->valuestring, "output_text") != 0)
            return sreq_fail(e, 400, NULL, "%s: content[%zu] has type '%.40s', not 'text'", where, k, type->valuestring);
        if (!cJSON_IsString(text)) return sreq_fail(e, 400, NULL, "%s: content[%zu] needs a string 'text'", where, k);
        n += strlen(text->valuestring) + strlen(sep);
        k++;
    }
    char *v = malloc(n + 1), *w = v;
    if (!v) return oom(e);
    cJSON_ArrayForEach(p, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        if (w != v) {
            memcpy(w, sep, strlen(sep));
            w += strlen(sep);
        }
        size_t len = strlen(t);
        memcpy(w, t, len);
        w += len;
    }
    *w = '\0';
    *out = v;
    return true;
}

bool sreq_read_content(const cJSON *c, const char *where, char **out, sreq_err *e) {
    return read_content_sep(c, where, "\n", out, e); /* "\n", as llama-server joins a message's text parts */
}

bool sreq_add_msg(sreq *r, const char *role, char *content, char *tool_calls, sreq_err *e) {
    sreq_msg *v = realloc(r->msgs, (r->n_msgs + 1) * sizeof *v);
    char *rd = v ? dup(role) : NULL;
    if (v) r->msgs = v;
    if (!rd) {
        free(content);
        free(tool_calls);
        return oom(e);
    }
    r->msgs[r->n_msgs++] = (sreq_msg){rd, content, tool_calls, NULL, NULL, NULL, 0};
    return true;
}

/* The members of OpenAI message m the template sees besides role, content (null reads "", as in
 * llama-server) and tool_calls: name, reasoning_content (strings; into x->fields as a JSON object's
 * text, NULL when none) and a tool message's tool_call_id (into x). */
static bool read_msg_fields(const cJSON *m, const char *where, sreq_msg *x, sreq_err *e) {
    static const char *const names[] = {"name", "reasoning_content", "tool_call_id"};
    cJSON *f = NULL;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, names[k]);
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsString(v)) {
            cJSON_Delete(f);
            return sreq_fail(e, 400, NULL, "%s: '%s' must be a string", where, names[k]);
        }
        if (k == 2) {
            if (strcmp(x->role, "tool") != 0) continue; /* only a tool message answers a call */
            if (!(x->tool_call_id = dup(v->valuestring))) return cJSON_Delete(f), oom(e);
            continue;
        }
        if ((!f && !(f = cJSON_CreateObject())) || !cJSON_AddStringToObject(f, names[k], v->valuestring))
            return cJSON_Delete(f), oom(e);
    }
    if (f && !(x->fields = cJSON_PrintUnformatted(f))) return cJSON_Delete(f), oom(e);
    cJSON_Delete(f);
    return true;
}

/* One OpenAI chat message: role ("developer" reads "system"), content (a string, text parts, or
 * null for an assistant message with tool_calls), an assistant's tool_calls, its further members
 * (read_msg_fields). */
static bool read_chat_message(const cJSON *m, size_t i, sreq *r, sreq_err *e) {
    char where[32];
    snprintf(where, sizeof where, "messages[%zu]", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role)) return sreq_fail(e, 400, NULL, "%s needs a string 'role'", where);
    const char *rn = role->valuestring;
    if (!strcmp(rn, "developer")) rn = "system";
    if (strcmp(rn, "system") && strcmp(rn, "user") && strcmp(rn, "assistant") && strcmp(rn, "tool"))
        return sreq_fail(e, 400, NULL, "%s: role '%.40s' is not system, user, assistant or tool", where, rn);
    if (tc && !cJSON_IsNull(tc) && (!cJSON_IsArray(tc) || strcmp(rn, "assistant")))
        return sreq_fail(e, 400, NULL, "%s: 'tool_calls' must be a list, on an assistant message", where);
    bool has_calls = cJSON_IsArray(tc) && cJSON_GetArraySize(tc) > 0;
    if ((!c || cJSON_IsNull(c)) && !has_calls && strcmp(rn, "assistant") != 0)
        return sreq_fail(e, 400, NULL, "%s needs a 'content'", where);
    char *content = NULL, *calls = NULL;
    if (!sreq_read_content(c, where, &content, e)) return false;
    if (has_calls && !(calls = cJSON_PrintUnformatted(tc))) {
        free(content);
        return oom(e);
    }
    return sreq_add_msg(r, rn, content, calls, e) && read_msg_fields(m, where, &r->msgs[r->n_msgs - 1], e);
}

/* "tools" and "tool_choice" in OpenAI's shapes; the tools themselves are checked by render. */
static bool read_openai_tools(const cJSON *root, sreq *r, sreq_err *e) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    bool parallel = true;
    if (!sreq_read_bool(root, "parallel_tool_calls", &parallel, e)) return false;
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return sreq_fail(e, 400, NULL, "'tools' must be a list");
        if (cJSON_GetArraySize(tools) > 0 && !(r->tools = cJSON_PrintUnformatted(tools))) return oom(e);
    }
    if (cJSON_IsString(choice)) {
        const char *m = choice->valuestring;
        if (!strcmp(m, "none")) r->tool_mode = STOOL_NONE;
        else if (!strcmp(m, "auto")) r->tool_mode = STOOL_AUTO;
        else if (!strcmp(m, "required")) r->tool_mode = STOOL_REQUIRED;
        else
            return sreq_fail(e, 400, NULL, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                                           "\"function\", \"function\": {\"name\": ...}}");
    } else if (cJSON_IsObject(choice)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(choice, "type");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "function"), "name");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(nm))
            return sreq_fail(e, 400, NULL, "'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": "
                                           "string}}");
        r->tool_mode = STOOL_NAMED;
        if (!(r->tool_name = dup(nm->valuestring))) return oom(e);
    } else if (choice && !cJSON_IsNull(choice)) {
        return sreq_fail(e, 400, NULL, "'tool_choice' must be a string or an object");
    }
    return true;
}

/* The output constraint: response_format ({"type": "text"}, {"type": "json_object"} with an
 * optional llama-server "schema", {"type": "json_schema", "json_schema": {"schema": ...}}), or
 * llama-server's "grammar" (GBNF) or "json_schema"; at most one of them. */
static bool read_constraint(const cJSON *root, sreq *r, sreq_err *e) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "json_schema");
    const cJSON *given[3] = {rf, gbnf, schema};
    int n_given = 0;
    for (int i = 0; i < 3; i++) n_given += given[i] && !cJSON_IsNull(given[i]);
    if (n_given > 1) return sreq_fail(e, 400, NULL, "give one of 'response_format', 'grammar' and 'json_schema'");
    bool any_object = false;
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
            return sreq_fail(e, 400, NULL, "'response_format' must be an object with a string 'type'");
        if (!strcmp(type->valuestring, "text")) return true;
        if (!strcmp(type->valuestring, "json_object")) {
            schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
            any_object = !schema || cJSON_IsNull(schema);
        } else if (!strcmp(type->valuestring, "json_schema")) {
            const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            schema = js ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
            if (!cJSON_IsObject(schema))
                return sreq_fail(e, 400, NULL, "response_format json_schema needs 'json_schema': {'schema': {...}}");
        } else {
            return sreq_fail(e, 400, NULL, "response_format type '%.40s' is not text, json_object or json_schema",
                             type->valuestring);
        }
    }
    if (gbnf && !cJSON_IsNull(gbnf)) {
        if (!cJSON_IsString(gbnf)) return sreq_fail(e, 400, NULL, "'grammar' must be a string (GBNF)");
        return (r->grammar = dup(gbnf->valuestring)) != NULL || oom(e);
    }
    if (any_object) return (r->schema = dup("{\"type\":\"object\"}")) != NULL || oom(e);
    if (schema && !cJSON_IsNull(schema)) {
        if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
            return sreq_fail(e, 400, NULL, "'json_schema' must be a JSON Schema object");
        return (r->schema = cJSON_PrintUnformatted(schema)) != NULL || oom(e);
    }
    return true;
}

/* The fields chat, completions and /completion share. */
static bool read_common(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    r->sp = *defaults;
    r->sp.logit_bias = NULL;
    r->sp.n_logit_bias = 0;
    r->n = 1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
        return sreq_fail(e, 400, NULL, "'model' must be a string or null");
    if (!sreq_read_sampling(root, r, e)) return false;
    double v = 1;
    if (!sreq_num(root, "n", 1, SREQ_MAX_N, true, &v, e)) return false;
    r->n = (int32_t)v;
    if (!sreq_read_bool(root, "stream", &r->stream, e)) return false;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    r->include_usage = so && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
    if (!sreq_read_bool(root, "ignore_eos", &r->ignore_eos, e)) return false;
    if (!sreq_read_bool(root, "verbose", &r->verbose, e)) return false;
    if (!sreq_read_stops(cJSON_GetObjectItemCaseSensitive(root, "stop"), "stop", r, e)) return false;
    if (!sreq_read_reasoning_format(root, r, e)) return false;
    if (!sreq_read_reasoning_control(root, r, e)) return false;
    return read_constraint(root, r, e);
}

/* "chat_template" (a Jinja template's text) and "chat_template_kwargs" (an object), as llama-server
 * and transformers take them. */
static bool read_template(const cJSON *root, sreq *r, sreq_err *e) {
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (ct && !cJSON_IsNull(ct)) {
        if (!cJSON_IsString(ct) || !ct->valuestring[0])
            return sreq_fail(e, 400, NULL, "'chat_template' must be a non-empty string (a Jinja template)");
        if (!(r->chat_template = dup(ct->valuestring))) return oom(e);
    }
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw)) return sreq_fail(e, 400, NULL, "'chat_template_kwargs' must be an object");
        if (!(r->chat_template_kwargs = cJSON_PrintUnformatted(kw))) return oom(e);
    }
    return true;
}

bool sreq_from_chat(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    memset(r, 0, sizeof *r);
    r->api = SAPI_CHAT;
    if (!read_common(root, defaults, r, e)) return false;
    static const char *const max_names[] = {"max_tokens", "max_completion_tokens"};
    if (!read_max_tokens(root, max_names, 2, r, e)) return false;
    if (!sreq_read_bool(root, "logprobs", &r->logprobs, e)) return false;
    double v = 0;
    if (!sreq_num(root, "top_logprobs", 0, SREQ_MAX_TOP_LOGPROBS, true, &v, e)) return false;
    r->top_logprobs = (int32_t)v;
    if (!read_openai_tools(root, r, e)) return false;
    if (!read_template(root, r, e)) return false;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "messages"), *m;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return sreq_fail(e, 400, NULL, "'messages' must be a non-empty list");
    size_t i = 0;
    cJSON_ArrayForEach(m, arr) if (!read_chat_message(m, i++, r, e)) return false;
    /* continue_final_message (vLLM's, transformers'): what a trailing assistant message gets anyway
     * (sreq_prefill); as llama-server, it needs add_generation_prompt false, and a final assistant
     * message without tool calls. add_generation_prompt false otherwise: the template's
     * add_generation_prompt false */
    bool gen_prompt = true, cont = false;
    if (!sreq_read_bool(root, "add_generation_prompt", &gen_prompt, e)) return false;
    if (!sreq_read_bool(root, "continue_final_message", &cont, e)) return false;
    if (cont && gen_prompt)
        return sreq_fail(e, 400, NULL, "'add_generation_prompt' and 'continue_final_message' cannot both be true");
    if (cont && !sreq_prefill(r))
        return sreq_fail(e, 400, NULL, "'continue_final_message' needs a final assistant message without tool calls");
    r->no_gen_prompt = !gen_prompt && !sreq_prefill(r);
    /* a continued message's text parts are joined with "\n\n", as llama-server joins them there */
    const cJSON *last = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, (int)i - 1), "content");
    if (sreq_prefill(r) && cJSON_IsArray(last)) {
        char *text = NULL, where[48];
        snprintf(where, sizeof where, "messages[%zu]", i - 1);
        if (!read_content_sep(last, where, "\n\n", &text, e)) return false;
        free(r->msgs[r->n_msgs - 1].content);
        r->msgs[r->n_msgs - 1].content = text;
    }
    return true;
}

/* "prompt": a string, a list of token ids, or a list of one string. */
static bool read_prompt(const cJSON *p, sreq *r, sreq_err *e) {
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && (cJSON_IsString(cJSON_GetArrayItem(p, 0)) ||
                                                            cJSON_IsObject(cJSON_GetArrayItem(p, 0))))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsObject(p)) { /* llama-server's {"prompt_string": text, "multimodal_data": [...]} */
        const cJSON *mm = cJSON_GetObjectItemCaseSensitive(p, "multimodal_data");
        if (mm && !cJSON_IsNull(mm))
            return sreq_fail(e, 400, "unsupported_content", "'multimodal_data': this server reads text only");
        p = cJSON_GetObjectItemCaseSensitive(p, "prompt_string");
        if (!cJSON_IsString(p)) return sreq_fail(e, 400, NULL, "a prompt object needs a string 'prompt_string'");
    }
    if (cJSON_IsString(p)) return (r->prompt_text = dup(p->valuestring)) != NULL || oom(e);
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) {
        size_t n = (size_t)cJSON_GetArraySize(p), i = 0;
        if (!(r->prompt_ids = malloc(n * sizeof *r->prompt_ids))) return oom(e);
        const cJSON *x;
        cJSON_ArrayForEach(x, p) {
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
                x->valuedouble > INT32_MAX)
                return sreq_fail(e, 400, NULL, "prompt[%zu] is not a token id", i);
            r->prompt_ids[i++] = (int32_t)x->valuedouble;
            r->n_prompt_ids = i;
        }
        return true;
    }
    return sreq_fail(e, 400, NULL, "'prompt' must be a string, a list of token ids or a list of one string");
}

bool sreq_from_completions(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    memset(r, 0, sizeof *r);
    r->api = SAPI_COMPLETIONS;
    if (!read_common(root, defaults, r, e)) return false;
    static const char *const max_names[] = {"max_tokens"};
    if (!read_max_tokens(root, max_names, 1, r, e)) return false;
    double v = -1;
    if (!sreq_num(root, "logprobs", 0, 5, true, &v, e)) return false;
    r->logprobs = v >= 0;
    r->top_logprobs = v > 0 ? (int32_t)v : 0;
    return read_prompt(cJSON_GetObjectItemCaseSensitive(root, "prompt"), r, e);
}

/* llama.cpp's native /completion: n_predict (-1: the limit), n_probs (top alternatives per token),
 * cache_prompt, return_tokens, and the shared sampling fields. */
bool sreq_from_completion(const cJSON *root, const slm_sampler_params *defaults, sreq *r, sreq_err *e) {
    memset(r, 0, sizeof *r);
    r->api = SAPI_COMPLETION;
    if (!read_common(root, defaults, r, e)) return false;
    if (r->n != 1) return sreq_fail(e, 400, NULL, "/completion generates one answer: 'n' must be 1");
    static const char *const max_names[] = {"n_predict", "max_tokens"};
    if (!read_max_tokens(root, max_names, 2, r, e)) return false;
    double v = 0;
    if (!sreq_num(root, "n_probs", 0, SREQ_MAX_TOP_LOGPROBS, true, &v, e)) return false;
    r->logprobs = v > 0;
    r->top_logprobs = (int32_t)v;
    r->cache_prompt = true;
    if (!sreq_read_bool(root, "cache_prompt", &r->cache_prompt, e)) return false;
    if (!sreq_read_bool(root, "return_tokens", &r->return_tokens, e)) return false;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_fields"), *x;
    if (rf && !cJSON_IsNull(rf)) {
        if (!cJSON_IsArray(rf)) return sreq_fail(e, 400, NULL, "'response_fields' must be a list of strings");
        cJSON_ArrayForEach(x, rf) if (!cJSON_IsString(x)) return sreq_fail(e, 400, NULL, "'response_fields' must be a list of strings");
        if (cJSON_GetArraySize(rf) > 0 && !(r->response_fields = cJSON_PrintUnformatted(rf))) return oom(e);
    }
    return read_prompt(cJSON_GetObjectItemCaseSensitive(root, "prompt"), r, e);
}

bool sreq_prefill(const sreq *r) {
    return serve_api_is_chat(r->api) && r->n_msgs > 0 && !strcmp(r->msgs[r->n_msgs - 1].role, "assistant") &&
           !r->msgs[r->n_msgs - 1].tool_calls;
}

bool sreq_validate(const sreq *r, const sreq_limits *lim, sreq_err *e) {
    if (r->max_tokens > lim->max_tokens && r->api != SAPI_MESSAGES) /* Anthropic's is required: capped instead */
        return sreq_fail(e, 400, NULL, "max_tokens %d is beyond this server's limit of %d", r->max_tokens, lim->max_tokens);
    if (r->top_logprobs > 0 && !r->logprobs) return sreq_fail(e, 400, NULL, "'top_logprobs' needs 'logprobs': true");
    for (int32_t i = 0; i < r->sp.n_logit_bias; i++)
        if (r->sp.logit_bias[i].token >= lim->n_vocab)
            return sreq_fail(e, 400, NULL, "logit_bias: '%d' is not a token id in [0, %d)", r->sp.logit_bias[i].token,
                             lim->n_vocab);
    for (size_t i = 0; i < r->n_prompt_ids; i++)
        if (r->prompt_ids[i] >= lim->n_vocab)
            return sreq_fail(e, 400, NULL, "prompt[%zu] is not a token id in [0, %d)", i, lim->n_vocab);
    bool constrained = r->grammar || r->schema;
    bool forced = r->tools && (r->tool_mode == STOOL_REQUIRED || r->tool_mode == STOOL_NAMED);
    if (constrained && r->ignore_eos) return sreq_fail(e, 400, NULL, "'ignore_eos' cannot be combined with a grammar");
    if ((r->tool_mode == STOOL_REQUIRED || r->tool_mode == STOOL_NAMED) && !r->tools)
        return sreq_fail(e, 400, NULL, "'tool_choice' \"%s\" needs a non-empty 'tools' list",
                         r->tool_mode == STOOL_NAMED ? "named" : "required");
    if (forced && r->ignore_eos) return sreq_fail(e, 400, NULL, "'ignore_eos' cannot be combined with a forced tool call");
    if (forced && constrained)
        return sreq_fail(e, 400, NULL, "tool_choice \"%s\" cannot be combined with 'response_format', 'grammar' or "
                                       "'json_schema'", r->tool_name ? r->tool_name : "required");
    if (serve_api_is_chat(r->api) && r->n_msgs == 0) return sreq_fail(e, 400, NULL, "'messages' must be a non-empty list");
    if (sreq_prefill(r) && r->n_msgs >= 2 && !strcmp(r->msgs[r->n_msgs - 2].role, "assistant"))
        return sreq_fail(e, 400, NULL, "two assistant messages at the end of the list: only a last one is continued");
    return true;
}
