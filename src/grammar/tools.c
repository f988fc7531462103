/* tools.c — the grammar of a forced tool call (tool_choice "required" or a named function,
 * docs/serve.md "Tools"): one call in the template family's format (text/toolcall.h) whose
 * arguments are constrained by the tool's "parameters" JSON Schema, through the schema converter
 * (schema.c). Hermes and Llama 3: the call object {"name": const, "arguments"|"parameters": schema}
 * is itself a JSON Schema, one anyOf branch per tool; the Hermes tags are one more rule around it.
 * LFM2: the Python-style list [name(k=v, ...)] (its markers are control tokens, which a grammar
 * never allows; the parser takes the bare list), each value the JSON that the property's schema
 * converts to (JSON strings, numbers, lists and objects are Python literals; the parser also
 * reads true/false/null), the converted grammars merged under per-property rule prefixes. */
#define _GNU_SOURCE /* open_memstream */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    slm_status st = gr_schema_to_gbnf(text, strlen(text), 0, &gbnf, &inner);
    free(text);
    free(gbnf);
    if (st != SLM_OK)
        return err_set(e, st, "tool '%s': parameters: %s", cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring,
                       inner.msg);
    return SLM_OK;
}

/* Appends GBNF text g to out with every rule name prefixed by pre (names outside literals,
 * classes and {m,n} counts). */
static void prefix_rules(FILE *out, const char *g, const char *pre) {
    for (const char *p = g; *p;) {
        char c = *p;
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            fputc(*p++, out);
            while (*p && *p != close) {
                if (*p == '\\' && p[1]) fputc(*p++, out);
                fputc(*p++, out);
            }
            if (*p) fputc(*p++, out);
        } else if (c == '{') {
            while (*p && *p != '}') fputc(*p++, out);
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            fputs(pre, out);
            while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                   *p == '-')
                fputc(*p++, out);
        } else {
            fputc(*p++, out);
        }
    }
}

/* The GBNF of LFM2's forced call: root ::= "[" a call of one of the tools (or only) "]". Each
 * call's keyword arguments come in the schema's property order, required ones always:
 * rule N<i> writes arguments i.. when none was written yet, W<i> after one was. */
static slm_status lfm2_gbnf(const cJSON *tools, const char *only, char **gbnf, slm_err *e) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    slm_status st = SLM_OK;
    fputs("root ::= \"[\" (", out);
    int k = 0;
    bool first = true;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        const char *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name")
                               ->valuestring;
        if (only && strcmp(name, only) != 0) continue;
        fprintf(out, "%st%d", first ? " " : " | ", k);
        first = false;
    }
    fputs(" ) \"]\"\n", out);
    k = 0;
    for (const cJSON *t = tools->child; t && st == SLM_OK; t = t->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (only && strcmp(name, only) != 0) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
        fprintf(out, "t%d ::= \"%s(\" t%d-n0 \")\"\n", k, name, k);
        int i = 0, n = cJSON_GetArraySize(props);
        for (const cJSON *p = props ? props->child : NULL; p && st == SLM_OK; p = p->next, i++) {
            bool required = false;
            for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
                required |= cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
            char *schema = cJSON_PrintUnformatted(p), *g = NULL;
            slm_err inner;
            err_clear(&inner);
            st = schema ? gr_schema_to_gbnf(schema, strlen(schema), 0, &g, &inner) : SLM_ERR_NOMEM;
            free(schema);
            if (st != SLM_OK) {
                err_set(e, st, "tool '%s': parameters: property '%.40s': %s", name, p->string,
                        inner.msg[0] ? inner.msg : "out of memory");
                break;
            }
            for (const char *c = p->string; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) {
                    st = err_set(e, SLM_ERR_UNSUPPORTED,
                                 "tool '%s': property '%.40s' is not a Python keyword-argument name", name, p->string);
                    break;
                }
            if (st != SLM_OK) {
                free(g);
                break;
            }
            char pre[32];
            snprintf(pre, sizeof pre, "t%d-p%d-", k, i);
            prefix_rules(out, g, pre);
            free(g);
            fprintf(out, "t%d-kv%d ::= \"%s=\" %sroot\n", k, i, p->string, pre);
            if (required) {
                fprintf(out, "t%d-n%d ::= t%d-kv%d t%d-w%d\n", k, i, k, i, k, i + 1);
                fprintf(out, "t%d-w%d ::= \", \" t%d-kv%d t%d-w%d\n", k, i, k, i, k, i + 1);
            } else {
                fprintf(out, "t%d-n%d ::= t%d-kv%d t%d-w%d | t%d-n%d\n", k, i, k, i, k, i + 1, k, i + 1);
                fprintf(out, "t%d-w%d ::= ( \", \" t%d-kv%d )? t%d-w%d\n", k, i, k, i, k, i + 1);
            }
        }
        fprintf(out, "t%d-n%d ::= \"\"\nt%d-w%d ::= \"\"\n", k, n, k, n);
    }
    fclose(out);
    if (st != SLM_OK) {
        free(text);
        return st;
    }
    *gbnf = text;
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
    if (f == TC_LFM2) return lfm2_gbnf(tools, only, gbnf, e);
    const char *key = f == TC_HERMES ? "arguments" : "parameters";
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
    st = gr_schema_to_gbnf(text, strlen(text), 0, &body, e);
    free(text);
    if (st != SLM_OK) return st;
    *root = "root";
    if (f == TC_HERMES) {
        static const char wrap[] = "tool-call ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n";
        size_t n = strlen(body);
        char *g = realloc(body, n + sizeof wrap);
        if (!g) {
            free(body);
            return err_set(e, SLM_ERR_NOMEM, "out of memory");
        }
        memcpy(g + n, wrap, sizeof wrap);
        body = g;
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
        free(gbnf);
        return st;
    }
    if (err && err_cap) err_copy_out(&e, err, err_cap);
    return st;
}
