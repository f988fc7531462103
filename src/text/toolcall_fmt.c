/* toolcall_fmt.c — the call formats beyond the Hermes/LFM2/Llama 3 ones of toolcall.c (toolcall.h
 * describes each): Qwen's XML calls, Mistral's two [TOOL_CALLS] forms, Granite's <|tool_call|>
 * list and gpt-oss harmony messages; what of a partial answer is content for sure and the part of
 * a call that may be streamed. Parsing never fails on bad input: what is not a well-formed call is
 * content. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "text/toolcall.h"
#include "text/toolcall_impl.h"

#define FN_OPEN "<function="
#define FN_CLOSE "</function>"
#define PARAM_OPEN "<parameter="
#define PARAM_CLOSE "</parameter>"
#define MISTRAL_MARK "[TOOL_CALLS]"
#define GRANITE_MARK "<|tool_call|>"

static bool at(const char *t, size_t n, size_t k, const char *pat) {
    size_t m = strlen(pat);
    return k <= n && n - k >= m && !memcmp(t + k, pat, m);
}

static size_t skip_ws(const char *t, size_t n, size_t k) {
    while (k < n && tc_ws(t[k])) k++;
    return k;
}

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

/* ---- Qwen XML -------------------------------------------------------------------------------- */

/* Whether the tool's schema types parameter key as a string only ("type": "string"; a union of
 * types reads the JSON the value spells first, as does an untyped or unknown parameter). */
static bool string_param(const cJSON *tools, const char *fn, const char *key) {
    const cJSON *f = tools ? tc_find_tool(tools, fn) : NULL;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "parameters"), "properties");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, key), "type");
    return cJSON_IsString(type) && !strcmp(type->valuestring, "string");
}

/* A parameter's value text v[0, n) as JSON: the text itself for a string parameter, else the JSON
 * it spells (the text when it spells none). */
static cJSON *xml_value(const cJSON *tools, const char *fn, const char *key, const char *v, size_t n) {
    char *s = strndup(v, n);
    if (!s) return NULL;
    cJSON *j = NULL;
    if (!string_param(tools, fn, key)) {
        const char *end = NULL;
        j = cJSON_ParseWithLengthOpts(s, n, &end, false);
        if (j && skip_ws(s, n, (size_t)(end - s)) != n) {
            cJSON_Delete(j);
            j = NULL;
        }
    }
    if (!j) j = cJSON_CreateString(s);
    free(s);
    return j;
}

/* One <function=NAME>...</function> at t[k]; *end after it. false when malformed or cut. */
static bool xml_function(const cJSON *tools, const char *t, size_t n, size_t k, size_t *end, tc_result *r, bool *oom) {
    if (!at(t, n, k, FN_OPEN)) return false;
    size_t n0 = k + strlen(FN_OPEN), n1 = n0;
    while (n1 < n && name_char(t[n1])) n1++;
    if (n1 == n0 || n1 >= n || t[n1] != '>') return false;
    char *name = strndup(t + n0, n1 - n0);
    cJSON *args = cJSON_CreateObject();
    if (!name || !args) {
        free(name);
        cJSON_Delete(args);
        return *oom = true, false;
    }
    bool ok = false;
    for (k = skip_ws(t, n, n1 + 1);; k = skip_ws(t, n, k)) {
        if (at(t, n, k, FN_CLOSE)) {
            k += strlen(FN_CLOSE);
            ok = true;
            break;
        }
        if (!at(t, n, k, PARAM_OPEN)) break;
        size_t k0 = k + strlen(PARAM_OPEN), k1 = k0;
        while (k1 < n && t[k1] != '>' && t[k1] != '<' && t[k1] != '\n') k1++;
        if (k1 == k0 || k1 >= n || t[k1] != '>') break;
        size_t v0 = k1 + 1;
        const char *close = tc_find(t + v0, n - v0, PARAM_CLOSE);
        if (!close) break;
        size_t v1 = (size_t)(close - t);
        if (v0 < v1 && t[v0] == '\n') v0++; /* the value sits on lines of its own */
        if (v1 > v0 && t[v1 - 1] == '\n') v1--;
        char *key = strndup(t + k0, k1 - k0);
        cJSON *v = key ? xml_value(tools, name, key, t + v0, v1 - v0) : NULL;
        if (!v || !key) {
            free(key);
            cJSON_Delete(v);
            *oom = true;
            break;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(args, key);
        cJSON_AddItemToObject(args, key, v);
        free(key);
        k = (size_t)(close - t) + strlen(PARAM_CLOSE);
    }
    if (ok && !tc_add_call(r, name, strlen(name), args, NULL, 0)) *oom = true;
    else if (!ok) cJSON_Delete(args);
    free(name);
    *end = k;
    return ok && !*oom;
}

static bool xml_calls(const cJSON *tools, const char *t, size_t n, tc_result *r, size_t *c0, size_t *c1, bool *oom) {
    size_t a = tc_marker_at(t, n, HERMES_OPEN), b = tc_marker_at(t, n, FN_OPEN);
    if (a >= n && b >= n) return false;
    size_t k = *c0 = a < b ? a : b;
    for (bool first = true;; first = false) {
        bool opened = at(t, n, k, HERMES_OPEN);
        if (!opened && !first) break; /* only the first call may lack its <tool_call> */
        if (opened) k = skip_ws(t, n, k + strlen(HERMES_OPEN));
        if (!xml_function(tools, t, n, k, &k, r, oom)) return false;
        k = skip_ws(t, n, k);
        if (at(t, n, k, HERMES_CLOSE)) k += strlen(HERMES_CLOSE);
        else if (k < n) return false; /* unclosed, with more text after it */
        *c1 = k;
        k = skip_ws(t, n, k);
    }
    return true;
}

/* ---- JSON lists of call objects (Mistral Nemo, Granite) -------------------------------------- */

/* The string member key of the JSON object text s[0, end) when it has no escapes, malloc'd; NULL
 * otherwise. */
static char *plain_member(const char *s, const char *end, const char *key) {
    const char *v0, *v1;
    if (!tc_member_span(s, end, key, &v0, &v1) || !v1 || *v0 != '"' || memchr(v0, '\\', (size_t)(v1 - v0))) return NULL;
    return strndup(v0 + 1, (size_t)(v1 - v0 - 2));
}

/* A list of call objects after marker (or bare at the answer's start, the marker being a control
 * token). */
static bool list_calls(const char *marker, const char *t, size_t n, tc_result *r, size_t *c0, size_t *c1, bool *oom) {
    size_t i = skip_ws(t, n, 0), k;
    const char *m = tc_find(t, n, marker);
    if (m) k = (size_t)(m - t) + strlen(marker);
    else if (i < n && t[i] == '[') k = i;
    else return false;
    *c0 = m ? (size_t)(m - t) : i;
    k = skip_ws(t, n, k);
    if (k >= n || t[k] != '[') return false;
    k = skip_ws(t, n, k + 1);
    for (;;) {
        size_t used = 0, before = r->n_calls;
        if (!tc_json_call(t + k, n - k, "arguments", r, &used, oom)) return false;
        if (r->n_calls > before) r->calls[before].id = plain_member(t + k, t + k + used, "id");
        k = skip_ws(t, n, k + used);
        if (k < n && t[k] == ',') {
            k = skip_ws(t, n, k + 1);
            continue;
        }
        if (k < n && t[k] == ']') break;
        return false;
    }
    *c1 = k + 1;
    return true;
}

/* ---- Mistral's [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} ----------------------------------------- */

/* One JSON object at t[k] as a call's arguments; *end after it. */
static bool args_object(const char *t, size_t n, size_t k, const char *name, size_t name_len, tc_result *r, size_t *end,
                        bool *oom) {
    if (k >= n || t[k] != '{') return false;
    const char *e = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(t + k, n - k, &e, false);
    if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        return false;
    }
    if (!tc_add_call(r, name, name_len, v, t + k, (size_t)(e - (t + k)))) return *oom = true, false;
    *end = (size_t)(e - t);
    return true;
}

static bool args_calls(const char *t, size_t n, tc_result *r, size_t *c0, size_t *c1, bool *oom) {
    const char *m = tc_find(t, n, MISTRAL_MARK);
    if (!m) { /* bare: NAME{...} is the whole answer */
        size_t i = skip_ws(t, n, 0), j = i, e = 0;
        while (j < n && name_char(t[j])) j++;
        if (j == i || !args_object(t, n, j, t + i, j - i, r, &e, oom) || skip_ws(t, n, e) != n) return false;
        *c0 = i;
        *c1 = n;
        return true;
    }
    size_t k = *c0 = (size_t)(m - t);
    while (at(t, n, k, MISTRAL_MARK)) {
        size_t n0 = k + strlen(MISTRAL_MARK), n1 = n0;
        while (n1 < n && name_char(t[n1])) n1++;
        if (n1 == n0) return false;
        k = n1;
        char *id = NULL;
        if (at(t, n, k, "[CALL_ID]")) {
            size_t i0 = k + strlen("[CALL_ID]"), i1 = i0;
            while (i1 < n && t[i1] != '[') i1++;
            id = strndup(t + i0, i1 - i0);
            if (!id) return *oom = true, false;
            k = i1;
        }
        if (!at(t, n, k, "[ARGS]") || !args_object(t, n, skip_ws(t, n, k + strlen("[ARGS]")), t + n0, n1 - n0, r, &k, oom)) {
            free(id);
            return false;
        }
        r->calls[r->n_calls - 1].id = id;
        *c1 = k;
        k = skip_ws(t, n, k);
    }
    return true;
}

/* ---- gpt-oss harmony ------------------------------------------------------------------------- */

#define H_CHANNEL "<|channel|>"
#define H_MESSAGE "<|message|>"

/* One harmony message: its channel name, recipient (after "to="; may be empty) and body. */
typedef struct hmsg {
    const char *chan, *to, *body;
    size_t chan_len, to_len, body_len;
    bool ended; /* a terminator or a next message follows the body */
} hmsg;

static const char *last_of(const char *s, size_t n, const char *pat) {
    const char *found = NULL;
    for (const char *p = s; (p = tc_find(p, n - (size_t)(p - s), pat)) != NULL; p++) found = p;
    return found;
}

static void recipient(const char *s, size_t n, hmsg *m) {
    const char *to = tc_find(s, n, "to=");
    if (!to || m->to) return;
    const char *e = to + 3;
    while (e < s + n && !tc_ws(*e) && *e != '<') e++;
    m->to = to + 3;
    m->to_len = (size_t)(e - m->to);
}

/* The message whose header starts at t[k]; *next where the one after it starts. false when no
 * complete header (up to <|message|>) is there. */
static bool harmony_msg(const char *t, size_t n, size_t k, hmsg *m, size_t *next) {
    static const char *const ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
    memset(m, 0, sizeof *m);
    const char *msg = tc_find(t + k, n - k, H_MESSAGE);
    if (!msg) return false;
    const char *h = t + k;
    size_t hn = (size_t)(msg - h);
    const char *first = tc_find(h, hn, H_CHANNEL), *last = last_of(h, hn, H_CHANNEL);
    const char *cp = last ? last + strlen(H_CHANNEL) : h;
    size_t cn = (size_t)(msg - cp);
    m->chan = cp = cp + (size_t)(skip_ws(cp, cn, 0));
    while (m->chan_len < (size_t)(msg - cp) && !tc_ws(cp[m->chan_len]) && cp[m->chan_len] != '<') m->chan_len++;
    recipient(cp, (size_t)(msg - cp), m);
    if (first == last) recipient(h, first ? (size_t)(first - h) : hn, m); /* "to=" in the role header */
    m->body = msg + strlen(H_MESSAGE);
    size_t b1 = n, skip = 0;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        const char *e = tc_find(m->body, n - (size_t)(m->body - t), ends[i]);
        if (e && (size_t)(e - t) < b1) {
            b1 = (size_t)(e - t);
            skip = i < 3 ? strlen(ends[i]) : 0;
            m->ended = true;
        }
    }
    m->body_len = b1 - (size_t)(m->body - t);
    *next = b1 + skip;
    return true;
}

static bool is_call(const hmsg *m) { return m->to_len > 10 && !memcmp(m->to, "functions.", 10); }

/* The JSON object opening body b[0, n) (after white space): *o0 its start, *o1 its end (NULL when
 * cut); false when the body does not open with '{'. */
static bool body_object(const char *b, size_t n, const char **o0, const char **o1) {
    size_t i = skip_ws(b, n, 0);
    if (i >= n || b[i] != '{') return false;
    *o0 = b + i;
    *o1 = tc_skip_value(b + i, b + n);
    return true;
}

slm_status tc_parse_harmony(const char *t, size_t n, tc_result *r) {
    buf content = {0}, reasoning = {0};
    bool oom = false, bad = false, any = false;
    size_t k = 0;
    hmsg m;
    while (k < n && harmony_msg(t, n, k, &m, &k)) {
        any = true;
        if (is_call(&m)) {
            const char *o0 = NULL, *o1 = NULL;
            cJSON *v = NULL;
            if (body_object(m.body, m.body_len, &o0, &o1) && o1 &&
                skip_ws(m.body, m.body_len, (size_t)(o1 - m.body)) == m.body_len)
                v = cJSON_ParseWithLength(o0, (size_t)(o1 - o0));
            if (!cJSON_IsObject(v)) {
                cJSON_Delete(v);
                bad = true;
            } else if (!tc_add_call(r, m.to + 10, m.to_len - 10, v, o0, (size_t)(o1 - o0))) {
                oom = true;
                break;
            }
        } else if (m.to_len == 0) { /* a message to another recipient (a built-in tool) is dropped */
            bool analysis = m.chan_len == 8 && !memcmp(m.chan, "analysis", 8);
            buf_put(analysis ? &reasoning : &content, m.body, m.body_len);
        }
    }
    if (!any) buf_put(&content, t, n);
    if (bad) tc_drop_calls(r);
    r->content = buf_take(&content);
    r->reasoning = reasoning.n ? buf_take(&reasoning) : (free(reasoning.p), NULL);
    if (oom || !r->content || (reasoning.n && !r->reasoning)) {
        tc_result_free(r);
        return SLM_ERR_NOMEM;
    }
    return SLM_OK;
}

static bool harmony_partial(const char *t, size_t n, tc_partial *p) {
    size_t k = 0;
    hmsg m;
    while (k < n && harmony_msg(t, n, k, &m, &k)) {
        if (!is_call(&m)) continue;
        p->name_off = (size_t)(m.to + 10 - t);
        p->name_len = m.to_len - 10;
        const char *o0, *o1;
        if (body_object(m.body, m.body_len, &o0, &o1)) tc_args_span(t, o0, o1, m.body + m.body_len, p);
        return true;
    }
    return false;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

bool tc_find_calls_fmt(tc_format f, const cJSON *tools, const char *t, size_t n, tc_result *r, size_t *c0, size_t *c1,
                       bool *oom) {
    switch (f) {
    case TC_QWEN_XML: return xml_calls(tools, t, n, r, c0, c1, oom);
    case TC_MISTRAL: return list_calls(MISTRAL_MARK, t, n, r, c0, c1, oom);
    case TC_GRANITE: return list_calls(GRANITE_MARK, t, n, r, c0, c1, oom);
    case TC_MISTRAL_ARGS: return args_calls(t, n, r, c0, c1, oom);
    default: return false;
    }
}

size_t tc_content_ready_fmt(tc_format f, const char *t, size_t n) {
    size_t i = skip_ws(t, n, 0), lim = n;
    switch (f) {
    case TC_QWEN_XML: {
        size_t a = tc_marker_at(t, n, HERMES_OPEN), b = tc_marker_at(t, n, FN_OPEN);
        lim = a < b ? a : b;
        break;
    }
    case TC_MISTRAL:
    case TC_GRANITE:
        if (i == n || t[i] == '[') return 0;
        lim = tc_marker_at(t, n, f == TC_MISTRAL ? MISTRAL_MARK : GRANITE_MARK);
        break;
    case TC_MISTRAL_ARGS: {
        size_t j = i;
        while (j < n && name_char(t[j])) j++;
        if (j == n || t[j] == '{') return 0; /* may be a bare NAME{...} */
        lim = tc_marker_at(t, n, MISTRAL_MARK);
        break;
    }
    case TC_HARMONY: return 0; /* the content is the final channel's: it comes at the end */
    default: return n;
    }
    while (lim > 0 && tc_ws(t[lim - 1])) lim--;
    return lim;
}

bool tc_partial_call_fmt(tc_format f, const char *t, size_t n, tc_partial *p) {
    if (f == TC_HARMONY) return harmony_partial(t, n, p);
    if (f == TC_MISTRAL || f == TC_GRANITE) {
        const char *m = tc_find(t, n, f == TC_MISTRAL ? MISTRAL_MARK : GRANITE_MARK);
        size_t k = m ? (size_t)(m - t) + strlen(f == TC_MISTRAL ? MISTRAL_MARK : GRANITE_MARK) : skip_ws(t, n, 0);
        k = skip_ws(t, n, k);
        if (k >= n || t[k] != '[') return false;
        return tc_object_partial(t, t + skip_ws(t, n, k + 1), t + n, "arguments", p);
    }
    if (f == TC_MISTRAL_ARGS) {
        const char *m = tc_find(t, n, MISTRAL_MARK);
        if (!m) return false;
        size_t n0 = (size_t)(m - t) + strlen(MISTRAL_MARK), n1 = n0;
        while (n1 < n && name_char(t[n1])) n1++;
        if (n1 == n0 || n1 >= n || t[n1] != '[') return false;
        p->name_off = n0;
        p->name_len = n1 - n0;
        const char *a = tc_find(t + n1, n - n1, "[ARGS]");
        if (a) {
            size_t k = skip_ws(t, n, (size_t)(a - t) + strlen("[ARGS]"));
            if (k < n && t[k] == '{') tc_args_span(t, t + k, tc_skip_value(t + k, t + n), t + n, p);
        }
        return true;
    }
    return false;
}
