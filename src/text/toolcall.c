/* toolcall.c — tool calls in the chat formats (toolcall.h): Python-style JSON printing, the check
 * of an OpenAI "tools" array, and the parsers of the Hermes, LFM2 (Python call list) and Llama 3
 * (JSON object) call formats. Parsing never fails on bad input: what is not a well-formed call is
 * content. */
#include "text/toolcall.h"
#include "text/toolcall_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TC_MAX_DEPTH 64 /* nesting of Python values in an LFM2 call */

static const char *const k_names[TC_N_FORMATS] = {
    [TC_HERMES] = "hermes",   [TC_LFM2] = "lfm2",       [TC_LLAMA3] = "llama3",   [TC_QWEN_XML] = "qwen-xml",
    [TC_MISTRAL] = "mistral", [TC_MISTRAL_ARGS] = "mistral-args", [TC_GRANITE] = "granite", [TC_HARMONY] = "gpt-oss",
};

tc_format tc_format_of(const char *name) {
    if (!name) return TC_NONE;
    if (!strcmp(name, "chatml") || !strcmp(name, "smollm2") || !strcmp(name, "qwen3") || !strcmp(name, "qwen3-nothink"))
        return TC_HERMES;
    for (int f = 1; f < TC_N_FORMATS; f++)
        if (!strcmp(name, k_names[f])) return (tc_format)f;
    return TC_NONE;
}

const char *tc_format_name(tc_format f) { return f > TC_NONE && f < TC_N_FORMATS ? k_names[f] : NULL; }

/* The markers are what a template writes around a call (in a past assistant turn's rendering or
 * in the system prompt describing the format); the more specific ones are tested first, as
 * several templates mention <tool_call> too. */
tc_format tc_format_detect(const char *t) {
    if (!t) return TC_NONE;
    if (strstr(t, "<|channel|>") && strstr(t, "<|call|>")) return TC_HARMONY;
    if (strstr(t, "[TOOL_CALLS]")) return strstr(t, "[ARGS]") ? TC_MISTRAL_ARGS : TC_MISTRAL;
    if (strstr(t, "<function=") && strstr(t, "<parameter=") && strstr(t, HERMES_OPEN)) return TC_QWEN_XML;
    if (strstr(t, LFM2_OPEN) || (strstr(t, "List of tools: ") && strstr(t, "<|im_start|>"))) return TC_LFM2;
    if (strstr(t, "<|tool_call|>")) return TC_GRANITE;
    if (strstr(t, HERMES_OPEN)) return TC_HERMES;
    if (strstr(t, PYTHON_TAG) || (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
        return TC_LLAMA3;
    return TC_NONE;
}

void tc_think_tags(tc_format f, const char **open, const char **close) {
    bool mistral = f == TC_MISTRAL || f == TC_MISTRAL_ARGS;
    *open = mistral ? "[THINK]" : "<think>";
    *close = mistral ? "[/THINK]" : "</think>";
}

/* ---- Python's json.dumps --------------------------------------------------------------------- */

/* Python's repr of a finite double: the shortest digits that read back, positional notation for
 * exponents in [-4, 16), else d.ddde+XX. */
static void py_float(buf *b, double v) {
    char num[40];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(num, sizeof num, "%.*e", p - 1, v);
        if (strtod(num, NULL) == v) break;
    }
    snprintf(num, sizeof num, "%.*e", p - 1, v);
    char digits[24];
    size_t nd = 0;
    const char *s = num;
    bool neg = *s == '-';
    if (neg) s++;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int ex = atoi(s + 1);
    if (neg) buf_puts(b, "-");
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            buf_puts(b, "0.");
            for (int k = 0; k < -ex - 1; k++) buf_puts(b, "0");
            buf_put(b, digits, nd);
        } else {
            size_t whole = (size_t)ex + 1;
            for (size_t k = 0; k < whole; k++) buf_put(b, k < nd ? &digits[k] : "0", 1);
            buf_puts(b, ".");
            if (nd > whole) buf_put(b, digits + whole, nd - whole);
            else buf_puts(b, "0");
        }
    } else {
        buf_put(b, digits, 1);
        if (nd > 1) {
            buf_puts(b, ".");
            buf_put(b, digits + 1, nd - 1);
        }
        snprintf(num, sizeof num, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        buf_puts(b, num);
    }
}

static void py_number(buf *b, double v) {
    char num[32];
    if (!isfinite(v)) buf_puts(b, v != v ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(num, sizeof num, "%.0f", v == 0 ? 0.0 : v);
        buf_puts(b, num);
    } else py_float(b, v);
}

/* s as a JSON string literal with Python's escapes (ensure_ascii=False: non-ASCII kept). */
static void py_string(buf *b, const char *s) {
    buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        case '\b': buf_puts(b, "\\b"); break;
        case '\f': buf_puts(b, "\\f"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                buf_puts(b, esc);
            } else buf_put(b, (const char *)p, 1);
        }
    }
    buf_puts(b, "\"");
}

static void py_newline(buf *b, int indent, int level) {
    buf_puts(b, "\n");
    for (int k = 0; k < indent * level; k++) buf_puts(b, " ");
}

static void py_json(buf *b, const cJSON *v, int indent, int level) {
    if (cJSON_IsNull(v)) buf_puts(b, "null");
    else if (cJSON_IsFalse(v)) buf_puts(b, "false");
    else if (cJSON_IsTrue(v)) buf_puts(b, "true");
    else if (cJSON_IsNumber(v)) py_number(b, v->valuedouble);
    else if (cJSON_IsString(v)) py_string(b, v->valuestring);
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        if (!v->child) {
            buf_puts(b, obj ? "{}" : "[]");
            return;
        }
        buf_puts(b, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) buf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0) py_newline(b, indent, level + 1);
            if (obj) {
                py_string(b, c->string ? c->string : "");
                buf_puts(b, ": ");
            }
            py_json(b, c, indent, level + 1);
        }
        if (indent >= 0) py_newline(b, indent, level);
        buf_puts(b, obj ? "}" : "]");
    } else buf_puts(b, "null");
}

/* v as a Python literal: JSON with True, False and None. */
static void py_literal(buf *b, const cJSON *v) {
    if (cJSON_IsNull(v)) buf_puts(b, "None");
    else if (cJSON_IsFalse(v)) buf_puts(b, "False");
    else if (cJSON_IsTrue(v)) buf_puts(b, "True");
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        buf_puts(b, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) buf_puts(b, ", ");
            if (obj) {
                py_string(b, c->string ? c->string : "");
                buf_puts(b, ": ");
            }
            py_literal(b, c);
        }
        buf_puts(b, obj ? "}" : "]");
    } else py_json(b, v, -1, 0);
}

char *tc_pycall(const char *name, const cJSON *args) {
    buf b = {0};
    buf_puts(&b, name);
    buf_puts(&b, "(");
    for (const cJSON *c = args ? args->child : NULL; c; c = c->next) {
        if (c != args->child) buf_puts(&b, ", ");
        buf_puts(&b, c->string ? c->string : "");
        buf_puts(&b, "=");
        py_literal(&b, c);
    }
    buf_puts(&b, ")");
    return buf_take(&b);
}

char *tc_pyjson(const cJSON *v, int indent) {
    buf b = {0};
    py_json(&b, v, indent, 0);
    return buf_take(&b);
}

/* ---- the tools array ------------------------------------------------------------------------- */

static bool good_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

slm_status tc_check_tools(const cJSON *tools, slm_err *e) {
    if (!cJSON_IsArray(tools)) return err_set(e, SLM_ERR_INVALID_ARG, "'tools' must be a list");
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0)
            return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", i);
        if (!cJSON_IsObject(fn)) return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d].function must be an object", i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(name) || !good_name(name->valuestring))
            return err_set(e, SLM_ERR_INVALID_ARG,
                           "tools[%d].function.name must be 1 to 64 characters of a-z, A-Z, 0-9, '_', '-', '.'", i);
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
        if (desc && !cJSON_IsString(desc))
            return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d].function.description must be a string", i);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (params) {
            const cJSON *pt = cJSON_GetObjectItemCaseSensitive(params, "type");
            const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
            const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
            if (!cJSON_IsObject(params))
                return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d].function.parameters must be a JSON Schema object", i);
            if (pt && !(cJSON_IsString(pt) && !strcmp(pt->valuestring, "object")))
                return err_set(e, SLM_ERR_INVALID_ARG,
                               "tools[%d].function.parameters: 'type' must be \"object\" (arguments are an object)", i);
            if (props && !cJSON_IsObject(props))
                return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d].function.parameters: 'properties' must be an object", i);
            for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
                if (!cJSON_IsObject(p) && !cJSON_IsBool(p))
                    return err_set(e, SLM_ERR_INVALID_ARG,
                                   "tools[%d].function.parameters: property '%.40s' must be a schema (an object)", i,
                                   p->string);
            if (req && !cJSON_IsArray(req))
                return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d].function.parameters: 'required' must be a list", i);
            for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
                if (!cJSON_IsString(r))
                    return err_set(e, SLM_ERR_INVALID_ARG,
                                   "tools[%d].function.parameters: 'required' must list property names", i);
        }
        int k = 0;
        for (const cJSON *u = tools->child; u != t; u = u->next, k++) {
            const cJSON *un = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "function"), "name");
            if (!strcmp(un->valuestring, name->valuestring))
                return err_set(e, SLM_ERR_INVALID_ARG, "tools[%d] and tools[%d] are both named '%s'", k, i,
                               name->valuestring);
        }
    }
    return SLM_OK;
}

const cJSON *tc_find_tool(const cJSON *tools, const char *name) {
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return fn;
    }
    return NULL;
}

/* ---- parsing --------------------------------------------------------------------------------- */


bool tc_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

const char *tc_find(const char *s, size_t n, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(s + i, pat, m)) return s + i;
    return NULL;
}

/* Adds a call with arguments args (an object; taken over) to r, written as raw[0, n_raw) when raw
 * is given (the model's own text of the object) or else as compact JSON. false when out of memory. */
bool tc_add_call(tc_result *r, const char *name, size_t name_len, cJSON *args, const char *raw, size_t n_raw) {
    char *a = raw ? strndup(raw, n_raw) : cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    char *nm = malloc(name_len + 1);
    tc_call *v = realloc(r->calls, (r->n_calls + 1) * sizeof *v);
    if (v) r->calls = v;
    if (!a || !nm || !v) {
        free(a);
        free(nm);
        return false;
    }
    memcpy(nm, name, name_len);
    nm[name_len] = '\0';
    r->calls[r->n_calls++] = (tc_call){nm, a, NULL};
    return true;
}

/* A call object {"name": non-empty string, <args_key or "arguments">: object or string holding one}; the
 * arguments (detached, caller owns) and the name, or NULL when v is not one. */
cJSON *tc_call_parts(cJSON *v, const char *args_key, const char **name) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(v, "name");
    if (!cJSON_IsObject(v) || !cJSON_IsString(nm) || !nm->valuestring[0]) return NULL;
    const char *key = cJSON_HasObjectItem(v, args_key) ? args_key : "arguments";
    cJSON *args = cJSON_GetObjectItemCaseSensitive(v, key);
    if (!args) {
        *name = nm->valuestring;
        return cJSON_CreateObject();
    }
    if (cJSON_IsString(args)) {
        cJSON *inner = cJSON_Parse(args->valuestring);
        if (!cJSON_IsObject(inner)) {
            cJSON_Delete(inner);
            return NULL;
        }
        *name = nm->valuestring;
        return inner;
    }
    if (!cJSON_IsObject(args)) return NULL;
    *name = nm->valuestring;
    return cJSON_DetachItemViaPointer(v, args);
}

/* The end of the JSON value at s (before end), or NULL when the text ends inside it. The text is
 * not validated (cJSON does that): strings, brackets and the characters of scalars are skipped. */
const char *tc_skip_value(const char *s, const char *end) {
    int depth = 0;
    for (; s < end; s++) {
        char c = *s;
        if (c == '"') {
            for (s++; s < end && *s != '"'; s++)
                if (*s == '\\') s++;
            if (s >= end) return NULL;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth < 0) return s; /* the enclosing object's end: a scalar stopped before it */
        } else if (depth == 0 && (c == ',' || tc_ws(c))) {
            return s;
        }
        if (depth == 0 && (c == '"' || c == '}' || c == ']')) return s + 1;
    }
    return NULL;
}

/* In the JSON object text s[0, end) (possibly incomplete), the value of the top-level member
 * whose raw key is key: *v0 its start, *v1 its end (NULL while the text ends inside it). false
 * when the key has not come (yet). */
bool tc_member_span(const char *s, const char *end, const char *key, const char **v0, const char **v1) {
    size_t nk = strlen(key);
    while (s < end && tc_ws(*s)) s++;
    if (s >= end || *s != '{') return false;
    for (s++;;) {
        while (s < end && tc_ws(*s)) s++;
        if (s >= end || *s != '"') return false;
        const char *k0 = s + 1, *k1 = tc_skip_value(s, end);
        if (!k1) return false;
        s = k1;
        while (s < end && (tc_ws(*s) || *s == ':')) s++;
        if (s >= end) return false;
        const char *e = tc_skip_value(s, end);
        if ((size_t)(k1 - 1 - k0) == nk && !memcmp(k0, key, nk)) {
            *v0 = s;
            *v1 = e;
            return true;
        }
        if (!e) return false;
        s = e;
        while (s < end && (tc_ws(*s) || *s == ',')) s++;
    }
}

/* Parses one JSON call object at s[0, n); *used: bytes consumed. false when there is none. The
 * arguments are the model's own text of the object when it wrote one (what streaming sends). */
bool tc_json_call(const char *s, size_t n, const char *args_key, tc_result *r, size_t *used, bool *oom) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, false);
    if (!v) return false;
    const char *name = NULL, *a0 = NULL, *a1 = NULL;
    cJSON *args = tc_call_parts(v, args_key, &name);
    bool ok = args != NULL;
    if (ok && !((tc_member_span(s, end, args_key, &a0, &a1) || tc_member_span(s, end, "arguments", &a0, &a1)) && a1 &&
                *a0 == '{'))
        a0 = a1 = NULL;
    if (ok && !tc_add_call(r, name, strlen(name), args, a0, a0 ? (size_t)(a1 - a0) : 0)) *oom = true;
    cJSON_Delete(v);
    *used = (size_t)(end - s);
    return ok;
}

void tc_args_span(const char *t, const char *a0, const char *a1, const char *end, tc_partial *p) {
    p->args_off = (size_t)(a0 - t);
    p->args_len = (size_t)((a1 ? a1 : end) - a0);
    while (!a1 && p->args_len > 0 && ((uint8_t)t[p->args_off + p->args_len - 1] & 0xC0) == 0x80) p->args_len--;
    if (!a1 && p->args_len > 0 && (uint8_t)t[p->args_off + p->args_len - 1] >= 0xC0) p->args_len--; /* a cut character */
    p->args_done = a1 != NULL;
}

bool tc_object_partial(const char *t, const char *s, const char *end, const char *key, tc_partial *p) {
    const char *n0, *n1, *a0, *a1;
    if (!tc_member_span(s, end, "name", &n0, &n1) || !n1 || *n0 != '"') return false;
    p->name_off = (size_t)(n0 + 1 - t);
    p->name_len = (size_t)(n1 - 1 - (n0 + 1));
    if (!tc_member_span(s, end, key, &a0, &a1) || *a0 != '{') return true;
    tc_args_span(t, a0, a1, end, p);
    return true;
}

bool tc_partial_call(tc_format f, const char *t, size_t n, tc_partial *p) {
    memset(p, 0, sizeof *p);
    n = strnlen(t, n);
    if (f != TC_HERMES && f != TC_LLAMA3) return tc_partial_call_fmt(f, t, n, p);
    size_t i = 0;
    while (i < n && tc_ws(t[i])) i++;
    const char *open = f == TC_HERMES ? HERMES_OPEN : PYTHON_TAG;
    if (n - i >= strlen(open) && !memcmp(t + i, open, strlen(open))) i += strlen(open);
    else if (f == TC_HERMES) return false;
    return tc_object_partial(t, t + i, t + n, f == TC_HERMES ? "arguments" : "parameters", p);
}

/* Python literal values of an LFM2 call, as JSON. */
typedef struct pyp {
    const char *s, *end;
} pyp;

static void py_ws(pyp *p) {
    while (p->s < p->end && tc_ws(*p->s)) p->s++;
}

/* Skips white space and a ',' with the white space after it: false when no ',' follows. */
static bool py_comma(pyp *p) {
    py_ws(p);
    if (p->s >= p->end || *p->s != ',') return false;
    p->s++;
    py_ws(p);
    return true;
}

static bool py_ident(pyp *p, const char **id, size_t *len, bool dotted) {
    const char *s = p->s;
    if (s >= p->end || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    while (s < p->end && ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                          *s == '_' || (dotted && (*s == '.' || *s == '-'))))
        s++;
    *id = p->s;
    *len = (size_t)(s - p->s);
    p->s = s;
    return true;
}

static void tc_put_utf8(buf *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) u[0] = (char)c, n = 1;
    else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 63)), n = 2;
    else if (c < 0x10000)
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | ((c >> 6) & 63)), u[2] = (char)(0x80 | (c & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | ((c >> 12) & 63)), u[2] = (char)(0x80 | ((c >> 6) & 63)),
        u[3] = (char)(0x80 | (c & 63)), n = 4;
    buf_put(b, u, n);
}

static bool hex_digits(const char *s, const char *end, int n, uint32_t *out) {
    uint32_t v = 0;
    if (end - s < n) return false;
    for (int i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return true;
}

/* A quoted Python string ('...' or "...", with Python's escapes). */
static cJSON *py_str(pyp *p) {
    char q = *p->s++;
    buf b = {0};
    while (p->s < p->end && *p->s != q) {
        char c = *p->s++;
        if (c == '\n') break;
        if (c != '\\') {
            buf_put(&b, &c, 1);
            continue;
        }
        if (p->s >= p->end) break;
        char x = *p->s++;
        uint32_t cp = 0;
        static const char escapes[] = "nrtbf\\'\"/", meaning[] = "\n\r\t\b\f\\'\"/"; /* \/: JSON's */
        const char *simple = x ? strchr(escapes, x) : NULL;
        if (simple) {
            buf_put(&b, &meaning[simple - escapes], 1);
        } else if ((x == 'x' && hex_digits(p->s, p->end, 2, &cp)) || (x == 'u' && hex_digits(p->s, p->end, 4, &cp)) ||
                   (x == 'U' && hex_digits(p->s, p->end, 8, &cp))) {
            p->s += x == 'x' ? 2 : x == 'u' ? 4 : 8;
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000) || cp == 0) {
                buf_free(&b);
                return NULL;
            }
            tc_put_utf8(&b, cp);
        } else {
            buf_free(&b);
            return NULL;
        }
    }
    if (p->s >= p->end || *p->s != q) {
        buf_free(&b);
        return NULL;
    }
    p->s++;
    char *s = buf_take(&b);
    cJSON *v = s ? cJSON_CreateString(s) : NULL;
    free(s);
    return v;
}

static cJSON *py_val(pyp *p, int depth);

/* [v, ...] or {k: v, ...} (closing bracket close). */
static cJSON *py_seq(pyp *p, int depth, bool dict) {
    char close = dict ? '}' : ']';
    p->s++;
    cJSON *v = dict ? cJSON_CreateObject() : cJSON_CreateArray();
    if (!v) return NULL;
    py_ws(p);
    while (p->s < p->end && *p->s != close) {
        char *key = NULL;
        if (dict) {
            cJSON *k = p->s < p->end && (*p->s == '"' || *p->s == '\'') ? py_str(p) : NULL;
            py_ws(p);
            if (!k || p->s >= p->end || *p->s != ':') {
                cJSON_Delete(k);
                cJSON_Delete(v);
                return NULL;
            }
            key = strdup(k->valuestring);
            cJSON_Delete(k);
            p->s++;
            py_ws(p);
        }
        cJSON *e = py_val(p, depth + 1);
        if (!e || (dict && !key)) {
            free(key);
            cJSON_Delete(e);
            cJSON_Delete(v);
            return NULL;
        }
        if (dict) cJSON_AddItemToObject(v, key, e);
        else cJSON_AddItemToArray(v, e);
        free(key);
        if (!py_comma(p)) break;
    }
    if (p->s >= p->end || *p->s != close) {
        cJSON_Delete(v);
        return NULL;
    }
    p->s++;
    return v;
}

static cJSON *py_val(pyp *p, int depth) {
    if (depth > TC_MAX_DEPTH || p->s >= p->end) return NULL;
    char c = *p->s;
    if (c == '"' || c == '\'') return py_str(p);
    if (c == '[') return py_seq(p, depth, false);
    if (c == '{') return py_seq(p, depth, true);
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) {
        char num[64];
        size_t n = 0;
        while (p->s + n < p->end && n < sizeof num - 1 && strchr("+-.eE0123456789", p->s[n]) && p->s[n]) n++;
        memcpy(num, p->s, n);
        num[n] = '\0';
        char *e = NULL;
        double d = strtod(num, &e);
        if (n == 0 || e != num + n || !isfinite(d)) return NULL;
        p->s += n;
        return cJSON_CreateNumber(d);
    }
    const char *id;
    size_t len;
    if (!py_ident(p, &id, &len, false)) return NULL;
#define IS(w) (len == sizeof w - 1 && !memcmp(id, w, len))
    if (IS("True") || IS("true")) return cJSON_CreateTrue();
    if (IS("False") || IS("false")) return cJSON_CreateFalse();
    if (IS("None") || IS("null")) return cJSON_CreateNull();
#undef IS
    return NULL;
}

/* An LFM2 call list [f(a=1), ...] at p; the calls go to r. false when it is not one. */
static bool py_calls(pyp *p, tc_result *r, bool *oom) {
    py_ws(p);
    if (p->s >= p->end || *p->s != '[') return false;
    p->s++;
    py_ws(p);
    for (;;) {
        const char *name;
        size_t name_len;
        if (!py_ident(p, &name, &name_len, true)) return false;
        py_ws(p);
        if (p->s >= p->end || *p->s != '(') return false;
        p->s++;
        py_ws(p);
        cJSON *args = cJSON_CreateObject();
        if (!args) return *oom = true, false;
        while (p->s < p->end && *p->s != ')') {
            const char *k;
            size_t kl;
            if (!py_ident(p, &k, &kl, false)) break;
            py_ws(p);
            if (p->s >= p->end || *p->s != '=') break;
            p->s++;
            py_ws(p);
            cJSON *v = py_val(p, 0);
            char *key = v ? malloc(kl + 1) : NULL;
            if (!key) {
                cJSON_Delete(v);
                break;
            }
            memcpy(key, k, kl);
            key[kl] = '\0';
            cJSON_AddItemToObject(args, key, v);
            free(key);
            if (!py_comma(p)) break;
        }
        if (p->s >= p->end || *p->s != ')') {
            cJSON_Delete(args);
            return false;
        }
        p->s++;
        if (!tc_add_call(r, name, name_len, args, NULL, 0)) return *oom = true, false;
        py_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            py_ws(p);
            continue;
        }
        if (p->s < p->end && *p->s == ']') {
            p->s++;
            return true;
        }
        return false;
    }
}

void tc_drop_calls(tc_result *r) {
    for (size_t i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
        free(r->calls[i].id);
    }
    free(r->calls);
    r->calls = NULL;
    r->n_calls = 0;
}

void tc_result_free(tc_result *r) {
    if (!r) return;
    tc_drop_calls(r);
    free(r->content);
    free(r->reasoning);
    r->content = r->reasoning = NULL;
}


/* Calls of format f in text[0, n): sets *c0 (where the first call starts) and *c1 (where the last
 * ends); false (r without calls) when there is no well-formed call. */
static bool find_calls(tc_format f, const char *t, size_t n, tc_result *r, size_t *c0, size_t *c1, bool *oom) {
    size_t i = 0;
    while (i < n && tc_ws(t[i])) i++;
    if (f == TC_LLAMA3) {
        size_t k = i;
        if (n - k >= strlen(PYTHON_TAG) && !memcmp(t + k, PYTHON_TAG, strlen(PYTHON_TAG))) k += strlen(PYTHON_TAG);
        while (k < n && tc_ws(t[k])) k++;
        size_t used = 0;
        if (k >= n || t[k] != '{' || !tc_json_call(t + k, n - k, "parameters", r, &used, oom)) return false;
        for (k += used; k < n && tc_ws(t[k]); k++) {
        }
        if (k < n) return false; /* the call must be the whole answer */
        *c0 = i;
        *c1 = n;
        return true;
    }
    if (f == TC_LFM2 && i < n && t[i] == '[') { /* the bare list: its markers were control tokens */
        pyp p = {t + i, t + n};
        if (!py_calls(&p, r, oom)) return false;
        *c0 = i;
        *c1 = (size_t)(p.s - t);
        return true;
    }
    const char *open = f == TC_HERMES ? HERMES_OPEN : LFM2_OPEN, *close = f == TC_HERMES ? HERMES_CLOSE : LFM2_CLOSE;
    size_t no = strlen(open), nc = strlen(close);
    const char *at = tc_find(t, n, open);
    if (!at) return false;
    *c0 = (size_t)(at - t);
    size_t k = *c0;
    while (k + no <= n && !memcmp(t + k, open, no)) {
        k += no;
        while (k < n && tc_ws(t[k])) k++;
        if (f == TC_HERMES) {
            size_t used = 0;
            if (!tc_json_call(t + k, n - k, "arguments", r, &used, oom)) return false;
            k += used;
        } else {
            pyp p = {t + k, t + n};
            if (!py_calls(&p, r, oom)) return false;
            k = (size_t)(p.s - t);
        }
        while (k < n && tc_ws(t[k])) k++;
        if (k + nc <= n && !memcmp(t + k, close, nc)) k += nc;
        else if (k < n) return false; /* unclosed, with more text after it */
        *c1 = k;
        while (k < n && tc_ws(t[k])) k++;
    }
    return true;
}

/* Where the answer's leading reasoning lies (tc_opts): text[*r0, *r1) is reasoning, the answer
 * proper starts at the returned offset (0 when there is no reasoning: *r0 == *r1 == 0). */
static size_t split_think(tc_format f, bool open, const char *t, size_t n, size_t *r0, size_t *r1) {
    const char *o, *c;
    tc_think_tags(f, &o, &c);
    size_t i = 0, no = strlen(o), nc = strlen(c);
    *r0 = *r1 = 0;
    while (i < n && tc_ws(t[i])) i++;
    bool tagged = n - i >= no && !memcmp(t + i, o, no);
    if (!tagged && !open) return 0;
    if (tagged) i += no;
    const char *end = tc_find(t + i, n - i, c);
    size_t e = end ? (size_t)(end - t) : n, next = end ? e + nc : n;
    if (!end && open) { /* no close tag: a call ends the reasoning */
        const char *at = NULL;
        static const char *const starts[] = {HERMES_OPEN, "<function=", LFM2_OPEN, "[TOOL_CALLS]", "<|tool_call|>"};
        for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
            const char *a = tc_find(t + i, e - i, starts[k]);
            if (a && (!at || a < at)) at = a;
        }
        if (at) e = next = (size_t)(at - t);
    }
    while (i < e && tc_ws(t[i])) i++;
    *r0 = i;
    while (e > i && tc_ws(t[e - 1])) e--;
    *r1 = e;
    return next;
}

slm_status tc_parse_opts(tc_format f, const tc_opts *o, const char *t, size_t n, tc_result *r) {
    memset(r, 0, sizeof *r);
    n = strnlen(t, n);
    if (f == TC_HARMONY) return tc_parse_harmony(t, n, r);
    size_t r0 = 0, r1 = 0, skip = o && (o->reasoning || o->think_open) ? split_think(f, o->think_open, t, n, &r0, &r1) : 0;
    if (skip) {
        r->reasoning = strndup(t + r0, r1 - r0);
        if (!r->reasoning) return SLM_ERR_NOMEM;
        t += skip;
        n -= skip;
    }
    size_t c0 = 0, c1 = 0;
    bool oom = false, found = false;
    if (f == TC_HERMES || f == TC_LFM2 || f == TC_LLAMA3) found = find_calls(f, t, n, r, &c0, &c1, &oom);
    else if (f != TC_NONE) found = tc_find_calls_fmt(f, o ? o->tools : NULL, t, n, r, &c0, &c1, &oom);
    if (oom) {
        tc_result_free(r);
        return SLM_ERR_NOMEM;
    }
    buf b = {0};
    if (!found) {
        tc_drop_calls(r);
        buf_put(&b, t, n);
    } else {
        while (c0 > 0 && tc_ws(t[c0 - 1])) c0--;
        while (c1 < n && tc_ws(t[c1])) c1++;
        buf_put(&b, t, c0);
        buf_put(&b, t + c1, n - c1);
    }
    r->content = buf_take(&b);
    if (!r->content) {
        tc_result_free(r);
        return SLM_ERR_NOMEM;
    }
    return SLM_OK;
}

slm_status tc_parse(tc_format f, const char *t, size_t n, tc_result *r) { return tc_parse_opts(f, NULL, t, n, r); }

bool tc_prompt_thinks(tc_format f, const char *t, size_t n) {
    const char *o, *c;
    tc_think_tags(f, &o, &c);
    n = strnlen(t, n);
    while (n > 0 && tc_ws(t[n - 1])) n--;
    return n >= strlen(o) && !memcmp(t + n - strlen(o), o, strlen(o));
}

size_t tc_call_start(tc_format f, const char *t, size_t n) {
    n = strnlen(t, n);
    static const char *const marks[TC_N_FORMATS][2] = {
        [TC_HERMES] = {HERMES_OPEN, NULL},        [TC_QWEN_XML] = {HERMES_OPEN, "<function="},
        [TC_LFM2] = {LFM2_OPEN, NULL},            [TC_LLAMA3] = {PYTHON_TAG, NULL},
        [TC_MISTRAL] = {"[TOOL_CALLS]", NULL},    [TC_MISTRAL_ARGS] = {"[TOOL_CALLS]", NULL},
        [TC_GRANITE] = {"<|tool_call|>", NULL},   [TC_HARMONY] = {"<|start|>", "<|channel|>"},
    };
    size_t at = n;
    for (int k = 0; f > TC_NONE && f < TC_N_FORMATS && k < 2; k++)
        if (marks[f][k]) {
            size_t a = tc_marker_at(t, n, marks[f][k]);
            if (a < at) at = a;
        }
    return at;
}

bool tc_prefix_of(const char *t, size_t n, const char *pat) { return n < strlen(pat) && !memcmp(t, pat, n); }

size_t tc_marker_at(const char *t, size_t n, const char *pat) {
    const char *at = tc_find(t, n, pat);
    if (at) return (size_t)(at - t);
    for (size_t k = n > strlen(pat) ? n - strlen(pat) + 1 : 0; k < n; k++)
        if (tc_prefix_of(t + k, n - k, pat)) return k;
    return n;
}

size_t tc_content_ready(tc_format f, const char *t, size_t n) {
    n = strnlen(t, n);
    if (f == TC_NONE) return n;
    size_t i = 0;
    while (i < n && tc_ws(t[i])) i++;
    if (f == TC_LLAMA3) {
        if (i == n || t[i] == '{' || tc_prefix_of(t + i, n - i, PYTHON_TAG) ||
            (n - i >= strlen(PYTHON_TAG) && !memcmp(t + i, PYTHON_TAG, strlen(PYTHON_TAG))))
            return 0;
        return n;
    }
    if (f == TC_LFM2 && (i == n || t[i] == '[')) return 0;
    if (f != TC_HERMES && f != TC_LFM2) return tc_content_ready_fmt(f, t, n);
    size_t lim = tc_marker_at(t, n, f == TC_HERMES ? HERMES_OPEN : LFM2_OPEN);
    while (lim > 0 && tc_ws(t[lim - 1])) lim--;
    return lim;
}

/* ---- public API ------------------------------------------------------------------------------ */

SLM_API slm_status slm_tools_check(const char *tools_json, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    slm_err e;
    err_clear(&e);
    cJSON *t = tools_json ? cJSON_Parse(tools_json) : NULL;
    slm_status st = t ? tc_check_tools(t, &e) : err_set(&e, SLM_ERR_INVALID_ARG, "'tools' is not valid JSON");
    cJSON_Delete(t);
    if (st != SLM_OK && err && err_cap) err_copy_out(&e, err, err_cap);
    return st;
}

SLM_API const char *slm_tool_format_detect(const char *template_text) {
    return tc_format_name(tc_format_detect(template_text));
}

SLM_API slm_status slm_tool_calls_parse_opts(const char *format, const char *tools_json, unsigned flags,
                                             const char *text, size_t len, char **out) {
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!format || (!text && len)) return SLM_ERR_INVALID_ARG;
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    if (tools_json && !tools) return SLM_ERR_INVALID_ARG;
    tc_opts o = {tools, (flags & SLM_TOOL_PARSE_REASONING) != 0, (flags & SLM_TOOL_PARSE_THINK_OPEN) != 0};
    tc_result r;
    slm_status st = tc_parse_opts(tc_format_of(format), &o, text ? text : "", len, &r);
    cJSON_Delete(tools);
    if (st != SLM_OK) return st;
    cJSON *root = cJSON_CreateObject(), *calls = cJSON_AddArrayToObject(root, "tool_calls");
    bool ok = root && calls && cJSON_AddStringToObject(root, "content", r.content);
    if (ok && r.reasoning) ok = cJSON_AddStringToObject(root, "reasoning_content", r.reasoning) != NULL;
    for (size_t i = 0; ok && i < r.n_calls; i++) {
        cJSON *c = cJSON_CreateObject();
        ok = c && cJSON_AddItemToArray(calls, c) && cJSON_AddStringToObject(c, "name", r.calls[i].name) &&
             cJSON_AddStringToObject(c, "arguments", r.calls[i].arguments) &&
             (!r.calls[i].id || cJSON_AddStringToObject(c, "id", r.calls[i].id));
    }
    tc_result_free(&r);
    if (ok) *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return *out ? SLM_OK : SLM_ERR_NOMEM;
}

SLM_API slm_status slm_tool_calls_parse(const char *template_name, const char *text, size_t len, char **out) {
    return slm_tool_calls_parse_opts(template_name, NULL, 0, text, len, out);
}

SLM_API bool slm_tool_call_partial(const char *template_name, const char *text, size_t len, size_t span[4]) {
    tc_partial p;
    if (!text || !span || !tc_partial_call(tc_format_of(template_name), text, len, &p)) return false;
    span[0] = p.name_off;
    span[1] = p.name_len;
    span[2] = p.args_off;
    span[3] = p.args_len;
    return true;
}

SLM_API size_t slm_tool_call_start(const char *format, const char *text, size_t len) {
    return text ? tc_call_start(tc_format_of(format), text, len) : 0;
}

SLM_API size_t slm_tool_calls_content_ready(const char *template_name, const char *text, size_t len) {
    if (!text) return 0;
    return tc_content_ready(tc_format_of(template_name), text, len);
}

SLM_API const char *const *slm_tool_format_markers(const char *format) {
    static const char *const think[] = {"<think>", "</think>", NULL};
    static const char *const hermes[] = {"<think>", "</think>", HERMES_OPEN, HERMES_CLOSE, NULL};
    static const char *const lfm2[] = {"<think>", "</think>", LFM2_OPEN, LFM2_CLOSE, NULL};
    static const char *const llama3[] = {"<think>", "</think>", PYTHON_TAG, NULL};
    static const char *const mistral[] = {"[THINK]", "[/THINK]", "[TOOL_CALLS]", "[CALL_ID]", "[ARGS]", NULL};
    static const char *const granite[] = {"<think>", "</think>", "<|tool_call|>", NULL};
    static const char *const harmony[] = {"<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>", NULL};
    switch (tc_format_of(format)) {
    case TC_HERMES:
    case TC_QWEN_XML: return hermes;
    case TC_LFM2: return lfm2;
    case TC_LLAMA3: return llama3;
    case TC_MISTRAL:
    case TC_MISTRAL_ARGS: return mistral;
    case TC_GRANITE: return granite;
    case TC_HARMONY: return harmony;
    default: return think;
    }
}
