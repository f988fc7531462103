/* tools.c — the grammar of a forced tool call (tool_choice "required" or a named function,
 * docs/serve.md "Tools"): one call in the template's call format (text/toolcall.h) whose
 * arguments are constrained by the tool's "parameters" JSON Schema, through the schema converter
 * (schema.c). A grammar produces a control token only where it names one (a token reference,
 * grammar.h); the formats whose markers are control tokens, except gpt-oss's, get the call without
 * them, in the bare form their parser also reads.
 *  - Hermes, Llama 3, Mistral's list, Granite: the call object {"name": const, "arguments"|
 *    "parameters": schema} is itself a JSON Schema, one anyOf branch per tool; the Hermes tags or
 *    the list brackets are one more rule around it.
 *  - LFM2: the Python-style list [name(k=v, ...)], each value the JSON that the property's schema
 *    converts to (JSON strings, numbers, lists and objects are Python literals; the parser also
 *    reads true/false/null), the converted grammars merged under per-property rule prefixes.
 *  - Qwen XML: <tool_call>\n<function=NAME>\n then <parameter=K>\nvalue\n</parameter>\n per
 *    argument; a "type": "string" value is raw text without "</" (an enum or const of strings: those
 *    texts; min/maxLength: that many characters other than '<'), any other value the JSON its
 *    schema converts to.
 *  - Mistral's [TOOL_CALLS]NAME[ARGS]{...}: NAME then the arguments object.
 *  - gpt-oss: the harmony header <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
 *    (its markers as token references: the model's control tokens, or their text in a vocabulary
 *    without them), then the arguments object; the model ends the call with <|call|>. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "grammar/grammar.h"
#include "text/toolcall.h"

/* {"type": "object", "properties": {"name": {"const": name}, key: parameters}, "required": [...],
 * "additionalProperties": false} for the function object fn. */
static cJSON *call_schema(const cJSON *fn, const char *key) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    cJSON *s = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(s, "properties"), *req = cJSON_CreateArray();
    cJSON *nm = cJSON_AddObjectToObject(props, "name");
    bool ok = s && props && req && nm && cJSON_AddStringToObject(s, "type", "object") &&
              cJSON_AddStringToObject(nm, "const", name->valuestring);
    cJSON *p = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    ok = ok && p && cJSON_AddItemToObject(props, key, p);
    if (!ok) cJSON_Delete(p);
    if (params == NULL && ok) ok = cJSON_AddStringToObject(p, "type", "object") != NULL;
    ok = ok && cJSON_AddItemToArray(req, cJSON_CreateString("name")) && cJSON_AddItemToArray(req, cJSON_CreateString(key));
    ok = ok && cJSON_AddItemToObject(s, "required", req);
    if (!ok) cJSON_Delete(req);
    ok = ok && cJSON_AddFalseToObject(s, "additionalProperties");
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* Refuses a tool whose parameters the converter cannot turn into a grammar, naming the tool. */
static slm_status check_params(const cJSON *fn, slm_err *e) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (!params) return SLM_OK;
    char *text = cJSON_PrintUnformatted(params), *gbnf = NULL;
    if (!text) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    slm_err inner;
    err_clear(&inner);
    slm_status st = gr_schema_to_gbnf(text, strlen(text), 0, NULL, &gbnf, &inner);
    cJSON_free(text);
    al_free(NULL, gbnf);
    if (st != SLM_OK)
        return err_set(e, st, "tool '%s': parameters: %s", cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring,
                       inner.msg);
    return SLM_OK;
}

/* Appends GBNF text g to out with every rule name prefixed by pre (names outside literals,
 * classes and {m,n} counts). */
static void prefix_rules(buf *out, const char *g, const char *pre) {
    for (const char *p = g; *p;) {
        char c = *p;
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            buf_putc(out, *p++);
            while (*p && *p != close) {
                if (*p == '\\' && p[1]) buf_putc(out, *p++);
                buf_putc(out, *p++);
            }
            if (*p) buf_putc(out, *p++);
        } else if (c == '{') {
            while (*p && *p != '}') buf_putc(out, *p++);
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            buf_puts(out, pre);
            while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                   *p == '-')
                buf_putc(out, *p++);
        } else {
            buf_putc(out, *p++);
        }
    }
}

/* A GBNF literal of s (with its quotes). */
static void gbnf_literal(buf *out, const char *s) {
    buf_putc(out, '"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') buf_printf(out, "\\%c", *c);
        else if (*c < 0x20) buf_printf(out, "\\x%02x", *c);
        else buf_putc(out, (char)*c);
    }
    buf_putc(out, '"');
}

/* The rules of the JSON that schema converts to, appended to out under prefix pre (its root rule is
 * pre "root"). tool and prop name the property in an error. */
static slm_status schema_rules(buf *out, const cJSON *schema, const char *pre, const char *tool, const char *prop,
                               slm_err *e) {
    char *text = cJSON_PrintUnformatted(schema), *g = NULL;
    slm_err inner;
    err_clear(&inner);
    slm_status st = text ? gr_schema_to_gbnf(text, strlen(text), 0, NULL, &g, &inner) : SLM_ERR_NOMEM;
    cJSON_free(text);
    if (st != SLM_OK)
        return err_set(e, st, "tool '%s': parameters: property '%.40s': %s", tool, prop,
                       inner.msg[0] ? inner.msg : "out of memory");
    prefix_rules(out, g, pre);
    al_free(NULL, g);
    return SLM_OK;
}

static bool plain_key(const char *k) {
    if (!*k) return false;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_' ||
              *k == '-' || *k == '.'))
            return false;
    return true;
}

/* pre "root" for the raw text of a "type": "string" parameter of the XML format (tools.c's head). */
static slm_status xml_string_rule(buf *out, const cJSON *p, const char *pre, const char *tool, const char *prop,
                                  slm_err *e) {
    static const char *const refused[] = {"pattern", "format", "contentEncoding"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (cJSON_HasObjectItem(p, refused[i]))
            return err_set(e, SLM_ERR_UNSUPPORTED, "tool '%s': property '%.40s': keyword '%s' on a string argument "
                                                   "of the XML call format", tool, prop, refused[i]);
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(p, "const");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(p, "minLength"), *mx = cJSON_GetObjectItemCaseSensitive(p, "maxLength");
    buf_printf(out, "%sroot ::= ", pre);
    if (cJSON_IsString(cn)) {
        gbnf_literal(out, cn->valuestring);
    } else if (cJSON_IsArray(en)) {
        int k = 0;
        for (const cJSON *x = en->child; x; x = x->next)
            if (cJSON_IsString(x)) {
                if (k++) buf_puts(out, " | ");
                gbnf_literal(out, x->valuestring);
            }
        if (k == 0) return err_set(e, SLM_ERR_UNSUPPORTED, "tool '%s': property '%.40s': no string in its enum", tool, prop);
    } else if (cJSON_IsNumber(mn) || cJSON_IsNumber(mx)) {
        double lo = cJSON_IsNumber(mn) ? mn->valuedouble : 0, hi = cJSON_IsNumber(mx) ? mx->valuedouble : -1;
        if (lo < 0 || lo > 10000 || hi > 10000 || (hi >= 0 && hi < lo))
            return err_set(e, SLM_ERR_UNSUPPORTED, "tool '%s': property '%.40s': string length bounds out of range", tool,
                           prop);
        if (hi >= 0) buf_printf(out, "[^<]{%d,%d}", (int)lo, (int)hi);
        else buf_printf(out, "[^<]{%d,}", (int)lo);
    } else {
        buf_puts(out, "xml-text");
    }
    buf_putc(out, '\n');
    return SLM_OK;
}

/* True when the array req (a schema's "required") holds the string name. */
static bool listed(const cJSON *req, const char *name) {
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !strcmp(r->valuestring, name)) return true;
    return false;
}

static bool string_typed(const cJSON *p) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, "string");
}

/* The rules of tool k, function object fn named name, in one call format (after root). */
typedef slm_status (*tool_rules_fn)(buf *out, const cJSON *fn, const char *name, int k, slm_err *e);

/* root ::= open ( t<k> | ... ) close over the tools called (all, or the one named only), then the
 * text of common, then each such tool's rules (rules). */
static slm_status format_gbnf(const cJSON *tools, const char *only, const char *open, const char *close,
                              const char *common, tool_rules_fn rules, char **gbnf, slm_err *e) {
    buf out = buf_make(NULL);
    buf_printf(&out, "root ::= %s(", open);
    int k = 0;
    bool first = true;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        const char *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name")
                               ->valuestring;
        if (only && strcmp(name, only) != 0) continue;
        buf_printf(&out, "%st%d", first ? " " : " | ", k);
        first = false;
    }
    buf_printf(&out, " )%s\n%s", close, common);
    slm_status st = SLM_OK;
    k = 0;
    for (const cJSON *t = tools->child; t && st == SLM_OK; t = t->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (only && strcmp(name, only) != 0) continue;
        st = rules(&out, fn, name, k, e);
    }
    if (st == SLM_OK && out.oom) st = err_set(e, SLM_ERR_NOMEM, "out of memory");
    if (st != SLM_OK) {
        buf_free(&out);
        return st;
    }
    *gbnf = buf_take(&out);
    return SLM_OK;
}

/* Qwen XML (tools.c's head); arguments in the schema's property order, required ones always:
 * rule t<k>-n<i> writes arguments i.. of tool k. */
static slm_status xml_rules(buf *out, const cJSON *fn, const char *name, int k, slm_err *e) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    buf_printf(out, "t%d ::= \"<tool_call>\\n<function=%s>\\n\" t%d-n0 \"</function>\\n</tool_call>\"\n", k, name, k);
    int i = 0, n = cJSON_GetArraySize(props);
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        if (!plain_key(p->string))
            return err_set(e, SLM_ERR_UNSUPPORTED, "tool '%s': property '%.40s' is not a name the XML call format "
                                                   "can write (a-z, A-Z, 0-9, '_', '-', '.')", name, p->string);
        const bool required = listed(req, p->string);
        char pre[32];
        snprintf(pre, sizeof pre, "t%d-p%d-", k, i);
        slm_status st = string_typed(p) ? xml_string_rule(out, p, pre, name, p->string, e)
                                        : schema_rules(out, p, pre, name, p->string, e);
        if (st != SLM_OK) return st;
        buf_printf(out, "t%d-kv%d ::= \"<parameter=%s>\\n\" %sroot \"\\n</parameter>\\n\"\n", k, i, p->string, pre);
        if (required) buf_printf(out, "t%d-n%d ::= t%d-kv%d t%d-n%d\n", k, i, k, i, k, i + 1);
        else buf_printf(out, "t%d-n%d ::= t%d-kv%d t%d-n%d | t%d-n%d\n", k, i, k, i, k, i + 1, k, i + 1);
    }
    buf_printf(out, "t%d-n%d ::= \"\"\n", k, n);
    return SLM_OK;
}

/* t<k> ::= NAME, the GBNF between (it may be empty), then the arguments object. */
static slm_status named_args_rules(buf *out, const cJSON *fn, const char *name, int k, const char *between, slm_err *e) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    cJSON *any = params ? NULL : cJSON_CreateObject();
    if (any) cJSON_AddStringToObject(any, "type", "object");
    char pre[32];
    snprintf(pre, sizeof pre, "t%d-a-", k);
    buf_printf(out, "t%d ::= \"%s\" %s%sroot\n", k, name, between, pre);
    slm_status st = params || any ? schema_rules(out, params ? params : any, pre, name, "(arguments)", e)
                                  : err_set(e, SLM_ERR_NOMEM, "out of memory");
    cJSON_Delete(any);
    return st;
}

/* Mistral's bare NAME{arguments} (its [TOOL_CALLS] and [ARGS] are control tokens). */
static slm_status args_rules(buf *out, const cJSON *fn, const char *name, int k, slm_err *e) {
    return named_args_rules(out, fn, name, k, "", e);
}

/* gpt-oss: NAME <|constrain|>json<|message|>{arguments}, after root's <|channel|>commentary
 * to=functions. (the harmony header of a call; its markers token references, grammar.h). */
static slm_status harmony_rules(buf *out, const cJSON *fn, const char *name, int k, slm_err *e) {
    return named_args_rules(out, fn, name, k, "\" \" <|constrain|> \"json\" <|message|> ", e);
}

/* LFM2's [name(k=v, ...)]: keyword arguments in the schema's property order, required ones
 * always: rule t<k>-n<i> writes arguments i.. when none was written yet, t<k>-w<i> after one was. */
static slm_status lfm2_rules(buf *out, const cJSON *fn, const char *name, int k, slm_err *e) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    buf_printf(out, "t%d ::= \"%s(\" t%d-n0 \")\"\n", k, name, k);
    int i = 0, n = cJSON_GetArraySize(props);
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        const bool required = listed(req, p->string);
        for (const char *c = p->string; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
                return err_set(e, SLM_ERR_UNSUPPORTED, "tool '%s': property '%.40s' is not a Python keyword-argument name",
                               name, p->string);
        char pre[32];
        snprintf(pre, sizeof pre, "t%d-p%d-", k, i);
        slm_status st = schema_rules(out, p, pre, name, p->string, e);
        if (st != SLM_OK) return st;
        buf_printf(out, "t%d-kv%d ::= \"%s=\" %sroot\n", k, i, p->string, pre);
        if (required) {
            buf_printf(out, "t%d-n%d ::= t%d-kv%d t%d-w%d\n", k, i, k, i, k, i + 1);
            buf_printf(out, "t%d-w%d ::= \", \" t%d-kv%d t%d-w%d\n", k, i, k, i, k, i + 1);
        } else {
            buf_printf(out, "t%d-n%d ::= t%d-kv%d t%d-w%d | t%d-n%d\n", k, i, k, i, k, i + 1, k, i + 1);
            buf_printf(out, "t%d-w%d ::= ( \", \" t%d-kv%d )? t%d-w%d\n", k, i, k, i, k, i + 1);
        }
    }
    buf_printf(out, "t%d-n%d ::= \"\"\nt%d-w%d ::= \"\"\n", k, n, k, n);
    return SLM_OK;
}

static slm_status tool_call_gbnf(tc_format f, const cJSON *tools, const char *only, char **gbnf, const char **root,
                                 slm_err *e) {
    *gbnf = NULL;
    if (f == TC_NONE) return err_set(e, SLM_ERR_UNSUPPORTED, "this template has no tool-call format");
    slm_status st = tc_check_tools(tools, e);
    if (st != SLM_OK) return st;
    if (only && !tc_find_tool(tools, only))
        return err_set(e, SLM_ERR_INVALID_ARG, "no tool is named '%.64s'", only);
    if (!only && !tools->child) return err_set(e, SLM_ERR_INVALID_ARG, "no tools to call");
    *root = "root";
    if (f == TC_LFM2) return format_gbnf(tools, only, "\"[\" ", " \"]\"", "", lfm2_rules, gbnf, e);
    if (f == TC_QWEN_XML)
        return format_gbnf(tools, only, "", "", "xml-text ::= ( [^<] | \"<\" [^/<] )*\n", xml_rules, gbnf, e);
    if (f == TC_MISTRAL_ARGS) return format_gbnf(tools, only, "", "", "", args_rules, gbnf, e);
    if (f == TC_HARMONY)
        return format_gbnf(tools, only, "<|channel|> \"commentary to=functions.\" ", "", "", harmony_rules, gbnf, e);
    const char *key = f == TC_LLAMA3 ? "parameters" : "arguments";
    cJSON *any = cJSON_CreateObject(), *branches = cJSON_AddArrayToObject(any, "anyOf");
    if (!any || !branches) {
        cJSON_Delete(any);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    for (const cJSON *t = tools->child; t && st == SLM_OK; t = t->next) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (only && strcmp(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring, only) != 0) continue;
        st = check_params(fn, e);
        cJSON *s = st == SLM_OK ? call_schema(fn, key) : NULL;
        if (st == SLM_OK && !s) st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        if (s) cJSON_AddItemToArray(branches, s);
    }
    char *text = st == SLM_OK ? cJSON_PrintUnformatted(cJSON_GetArraySize(branches) == 1 ? branches->child : any) : NULL;
    cJSON_Delete(any);
    if (st != SLM_OK) return st;
    if (!text) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    char *body = NULL;
    st = gr_schema_to_gbnf(text, strlen(text), 0, NULL, &body, e);
    cJSON_free(text);
    if (st != SLM_OK) return st;
    *root = "root";
    if (f == TC_HERMES || f == TC_MISTRAL || f == TC_GRANITE) {
        buf b = buf_make(NULL);
        buf_puts(&b, body);
        al_free(NULL, body);
        buf_puts(&b, f == TC_HERMES ? "tool-call ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n"
                                    : "tool-call ::= \"[\" root \"]\"\n");
        body = buf_take(&b);
        if (!body) return err_set(e, SLM_ERR_NOMEM, "out of memory");
        *root = "tool-call";
    }
    *gbnf = body;
    return SLM_OK;
}

SLM_API slm_status slm_tool_call_grammar(const char *template_name, const char *tools_json, const char *name,
                                         slm_grammar **out, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!template_name || !tools_json) return SLM_ERR_INVALID_ARG;
    slm_err e;
    err_clear(&e);
    cJSON *tools = cJSON_Parse(tools_json);
    char *gbnf = NULL;
    const char *root = NULL;
    slm_status st = tools ? tool_call_gbnf(tc_format_of(template_name), tools, name, &gbnf, &root, &e)
                          : err_set(&e, SLM_ERR_INVALID_ARG, "'tools' is not valid JSON");
    cJSON_Delete(tools);
    if (st == SLM_OK) {
        st = slm_grammar_create(gbnf, strlen(gbnf), root, out, err, err_cap);
        al_free(NULL, gbnf);
        return st;
    }
    if (err && err_cap) err_copy_out(&e, err, err_cap);
    return st;
}
