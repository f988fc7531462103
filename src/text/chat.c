/* chat.c — chat templates of the ChatML-style families, written out in C (no Jinja engine):
 * "chatml" (plain ChatML), "smollm2" (ChatML + SmolLM2-Instruct's default system prompt when the
 * first message is not a system message), "qwen3" / "qwen3-nothink" (Qwen3: reasoning handling of
 * assistant turns, tool turns as <tool_response> user turns; "-nothink" is enable_thinking=false,
 * an empty think block after the generation prompt), "lfm2" (BOS + ChatML, tool turns wrapped in
 * <|tool_response_start|>..., docs/spec/lfm2.md §7), "llama3" (Llama 3 header/eot format, BOS first),
 * "gemma" (Gemma 3: BOS, <start_of_turn>user|model ... <end_of_turn>, a system message folded into
 * the first turn, contents trimmed as Python's str.strip does, roles required to alternate).
 * Tools (chat_tools: the OpenAI "tools" array and each assistant message's "tool_calls") are rendered
 * as the families' templates render them: "qwen3" as Qwen3's; "chatml"/"smollm2" as Qwen2.5's
 * (Hermes format) once tools or tool calls are given, with the template's default system prompt
 * (none for chatml, SmolLM2's for smollm2); "lfm2" as LFM2's, a call written back as the model
 * writes it (<|tool_call_start|>[f(a=1)]<|tool_call_end|> before the content); "llama3" as Llama
 * 3.1's template once tools, calls or tool messages are given; "gemma" refuses them (Gemma 3's
 * template has none). Tool JSON is printed as Jinja's tojson (tc_pyjson) and recorded as message
 * text, so control-token text in it stays text. Non-string contents are not modelled. chat_detect maps a
 * stored Jinja template to a name by distinctive substrings. chat_render_spans records where message
 * text (roles, contents) lies in the rendered text; chat_tokenize tokenises the whole text in one
 * pass with control tokens matched only outside those spans (tok_encode_spans). Tests compare against jinja2
 * renderings of the real templates (scripts/gen-chat-golden.py). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"
#include "text/tok_impl.h"
#include "text/toolcall.h"

/* The rendered text and, when recording, the spans of message text in it. */
typedef struct sbuf {
    buf text;
    bool record;   /* record spans of message text */
    chat_span *sp; /* (n_sp) */
    size_t n_sp, cap_sp;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) { buf_put(&b->text, s, n); }

static void sb_puts(sbuf *b, const char *s) { buf_puts(&b->text, s); }

/* Appends s[0, n), text of message msg (whole: all its content, unchanged), recording its span. */
static void sb_msg(sbuf *b, const char *s, size_t n, size_t msg, bool whole) {
    if (b->record && !b->text.oom && n > 0) {
        if (b->n_sp == b->cap_sp) {
            size_t cap = b->cap_sp ? b->cap_sp * 2 : 16;
            chat_span *np = al_realloc(b->text.a, b->sp, b->cap_sp * sizeof *np, cap * sizeof *np);
            if (!np) {
                b->text.oom = true;
                return;
            }
            b->sp = np;
            b->cap_sp = cap;
        }
        b->sp[b->n_sp++] = (chat_span){b->text.n, n, msg, whole};
    }
    sb_put(b, s, n);
}

const char *chat_detect(const char *t) {
    if (!t) return NULL;
    if (strstr(t, "<|start_header_id|>")) return "llama3";
    if (strstr(t, "<start_of_turn>")) return "gemma";
    if (!strstr(t, "<|im_start|>")) return NULL;
    if (strstr(t, "<|tool_list_start|>") || strstr(t, "<|tool_response_start|>")) return "lfm2";
    if (strstr(t, "SmolLM")) return "smollm2";
    if (strstr(t, "<think>") || strstr(t, "enable_thinking")) return "qwen3";
    return "chatml";
}

static const char *bos_text(const slm_tokenizer *tok, const char *dflt) {
    if (tok && tok->bos >= 0) return tok->pool + tok->tokens[tok->bos].text_off;
    return dflt;
}

/* A ChatML turn of message msg (SIZE_MAX: the template's own text). */
static void im(sbuf *b, size_t msg, const char *role, const char *content) {
    sb_puts(b, "<|im_start|>");
    if (msg == SIZE_MAX) sb_puts(b, role);
    else sb_msg(b, role, strlen(role), msg, false);
    sb_puts(b, "\n");
    if (msg == SIZE_MAX) sb_puts(b, content);
    else sb_msg(b, content, strlen(content), msg, true);
    sb_puts(b, "<|im_end|>\n");
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool ends_with(const char *s, const char *p) {
    size_t n = strlen(s), m = strlen(p);
    return n >= m && memcmp(s + n - m, p, m) == 0;
}

/* Appends s[0, n) with '\n' stripped at the left and/or right. */
static void put_stripped(sbuf *b, const char *s, size_t n, bool left, bool right, size_t msg) {
    while (left && n > 0 && *s == '\n') { s++; n--; }
    while (right && n > 0 && s[n - 1] == '\n') n--;
    sb_msg(b, s, n, msg, false);
}

/* Last occurrence of p in s, or NULL. */
static const char *find_last(const char *s, const char *p) {
    const char *r = NULL, *q = s;
    while ((q = strstr(q, p)) != NULL) { r = q; q++; }
    return r;
}

/* ---- tools ---------------------------------------------------------------------------------- */

/* One call of an assistant message: the function's name and its arguments (an object, owned). */
typedef struct tcall {
    const char *name;
    cJSON *args;
} tcall;

/* The tools of a rendering: tools (a non-empty array, or NULL) and the calls of message i in
 * calls[first[i], first[i + 1]). */
typedef struct tctx {
    const cJSON *tools;
    tcall *calls;
    size_t *first;
    size_t n_msgs;
} tctx;

static size_t n_calls(const tctx *x, size_t i) { return x->first ? x->first[i + 1] - x->first[i] : 0; }
static const tcall *calls_of(const tctx *x, size_t i) { return x->calls + x->first[i]; }

static bool any_calls(const tctx *x) { return x->first && x->first[x->n_msgs] > 0; }

static void tools_free(tctx *x) {
    for (size_t k = 0; x->first && k < x->first[x->n_msgs]; k++) cJSON_Delete(x->calls[k].args);
    free(x->calls);
    free(x->first);
    memset(x, 0, sizeof *x);
}

/* Checks the tools and the calls of t and gathers them into x (arguments given as JSON text are
 * parsed: every template then renders an object, as vLLM and llama-server pass them). */
static slm_status tools_prepare(const chat_tools *t, const slm_chat_message *m, size_t n, tctx *x, slm_err *e) {
    memset(x, 0, sizeof *x);
    x->n_msgs = n;
    if (!t) return SLM_OK;
    if (t->tools && !cJSON_IsNull(t->tools)) {
        slm_status st = tc_check_tools(t->tools, e);
        if (st != SLM_OK) return st;
        if (t->tools->child) x->tools = t->tools;
    }
    if (!t->calls) return SLM_OK;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const cJSON *c = t->calls[i];
        if (!c || cJSON_IsNull(c)) continue;
        if (!cJSON_IsArray(c)) return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: 'tool_calls' must be a list", i);
        if (c->child && strcmp(m[i].role, "assistant") != 0)
            return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: only assistant messages carry tool_calls", i);
        total += (size_t)cJSON_GetArraySize(c);
    }
    x->first = calloc(n + 1, sizeof *x->first);
    x->calls = calloc(total ? total : 1, sizeof *x->calls);
    if (!x->first || !x->calls) {
        tools_free(x);
        return err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        x->first[i] = k;
        const cJSON *list = cJSON_IsArray(t->calls[i]) ? t->calls[i] : NULL, *call;
        int j = 0;
        cJSON_ArrayForEach(call, list) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            if (!cJSON_IsObject(fn) || !cJSON_IsString(name)) {
                x->first[n] = k; /* the calls gathered so far, for tools_free */
                tools_free(x);
                return err_set(e, SLM_ERR_INVALID_ARG,
                               "chat: message %zu: tool_calls[%d] needs \"function\": {\"name\": string, ...}", i, j);
            }
            cJSON *obj = !args || cJSON_IsNull(args) ? cJSON_CreateObject()
                         : cJSON_IsString(args)      ? cJSON_Parse(args->valuestring)
                         : cJSON_IsObject(args)      ? cJSON_Duplicate(args, true)
                                                     : NULL;
            if (!cJSON_IsObject(obj)) {
                cJSON_Delete(obj);
                x->first[n] = k; /* the calls gathered so far, for tools_free */
                tools_free(x);
                return err_set(e, SLM_ERR_INVALID_ARG,
                               "chat: message %zu: tool_calls[%d].function.arguments is not a JSON object", i, j);
            }
            x->calls[k++] = (tcall){name->valuestring, obj};
            j++;
        }
    }
    x->first[n] = k;
    return SLM_OK;
}

/* Appends v as Jinja's tojson writes it, as message text (control-token text in it stays text). */
static void put_json(sbuf *b, const cJSON *v, int indent) {
    char *s = tc_pyjson(v, indent);
    if (!s) {
        b->text.oom = true;
        return;
    }
    sb_msg(b, s, strlen(s), 0, false);
    free(s);
}

static void put_text(sbuf *b, const char *s) { sb_msg(b, s, strlen(s), 0, false); }

static const char HERMES_TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>";
static const char HERMES_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

static void hermes_tool_list(sbuf *b, const cJSON *tools) {
    sb_puts(b, HERMES_TOOLS_HEAD);
    for (const cJSON *t = tools->child; t; t = t->next) {
        sb_puts(b, "\n");
        put_json(b, t, -1);
    }
    sb_puts(b, HERMES_TOOLS_TAIL);
}

static void hermes_call(sbuf *b, const tcall *c) {
    sb_puts(b, "<tool_call>\n{\"name\": \"");
    put_text(b, c->name);
    sb_puts(b, "\", \"arguments\": ");
    put_json(b, c->args, -1);
    sb_puts(b, "}\n</tool_call>");
}

/* A tool message i as the Qwen templates write it: within one user turn for a run of them. */
static void hermes_tool_response(sbuf *b, const slm_chat_message *m, size_t n, size_t i) {
    if (i == 0 || strcmp(m[i - 1].role, "tool") != 0) sb_puts(b, "<|im_start|>user");
    sb_puts(b, "\n<tool_response>\n");
    sb_msg(b, m[i].content, strlen(m[i].content), i, true);
    sb_puts(b, "\n</tool_response>");
    if (i == n - 1 || strcmp(m[i + 1].role, "tool") != 0) sb_puts(b, "<|im_end|>\n");
}

/* "chatml"/"smollm2" with tools or calls: Qwen2.5's template (dflt: its default system prompt). */
static void render_hermes(sbuf *b, const slm_chat_message *m, size_t n, bool gen, const char *dflt, const tctx *x) {
    bool sys = n > 0 && strcmp(m[0].role, "system") == 0;
    if (x->tools) {
        sb_puts(b, "<|im_start|>system\n");
        if (sys) sb_msg(b, m[0].content, strlen(m[0].content), 0, true);
        else sb_puts(b, dflt);
        sb_puts(b, "\n\n");
        hermes_tool_list(b, x->tools);
    } else if (sys) {
        im(b, 0, "system", m[0].content);
    } else if (dflt[0]) {
        im(b, SIZE_MAX, "system", dflt);
    }
    for (size_t i = 0; i < n; i++) {
        const char *role = m[i].role;
        bool asst = strcmp(role, "assistant") == 0;
        if (!strcmp(role, "user") || (!strcmp(role, "system") && i > 0) || (asst && n_calls(x, i) == 0)) {
            im(b, i, role, m[i].content);
        } else if (asst) {
            sb_puts(b, "<|im_start|>");
            sb_msg(b, role, strlen(role), i, false);
            if (m[i].content[0]) {
                sb_puts(b, "\n");
                sb_msg(b, m[i].content, strlen(m[i].content), i, true);
            }
            for (size_t k = 0; k < n_calls(x, i); k++) {
                sb_puts(b, "\n");
                hermes_call(b, &calls_of(x, i)[k]);
            }
            sb_puts(b, "<|im_end|>\n");
        } else if (!strcmp(role, "tool")) {
            hermes_tool_response(b, m, n, i);
        }
    }
    if (gen) sb_puts(b, "<|im_start|>assistant\n");
}

static void render_qwen3(sbuf *b, const slm_chat_message *m, size_t n, bool gen, bool no_think, const tctx *x) {
    size_t start = 0;
    bool sys = n > 0 && strcmp(m[0].role, "system") == 0;
    if (x->tools) {
        sb_puts(b, "<|im_start|>system\n");
        if (sys) {
            sb_msg(b, m[0].content, strlen(m[0].content), 0, true);
            sb_puts(b, "\n\n");
        }
        hermes_tool_list(b, x->tools);
    } else if (sys) {
        im(b, 0, "system", m[0].content);
    }
    start = sys ? 1 : 0;
    /* Index of the last user message that is not a wrapped tool response. */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        if (strcmp(m[k].role, "user") == 0 &&
            !(starts_with(m[k].content, "<tool_response>") && ends_with(m[k].content, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    for (size_t i = start; i < n; i++) {
        const char *role = m[i].role, *c = m[i].content;
        if (strcmp(role, "user") == 0 || strcmp(role, "system") == 0) {
            im(b, i, role, c);
        } else if (strcmp(role, "assistant") == 0) {
            const char *content = c, *reason = "";
            size_t content_len = strlen(c), reason_len = 0;
            const char *end_tag = strstr(c, "</think>");
            if (end_tag) {
                const char *last_end = find_last(c, "</think>") + strlen("</think>");
                content = last_end;
                while (*content == '\n') content++;
                content_len = strlen(content);
                /* reasoning = (before first </think>).rstrip('\n'), then after its last <think>, lstrip('\n') */
                size_t before = (size_t)(end_tag - c);
                while (before > 0 && c[before - 1] == '\n') before--;
                const char *r0 = c;
                for (const char *q = c; (q = strstr(q, "<think>")) != NULL && q + 7 <= c + before; q++) r0 = q + 7;
                if (r0 > c + before) r0 = c + before;
                while (r0 < c + before && *r0 == '\n') r0++;
                reason = r0;
                reason_len = (size_t)(c + before - r0);
            }
            sb_puts(b, "<|im_start|>assistant\n");
            if (i > last_query) {
                if (i == n - 1 || reason_len > 0) {
                    sb_puts(b, "<think>\n");
                    put_stripped(b, reason, reason_len, true, true, i);
                    sb_puts(b, "\n</think>\n\n");
                    put_stripped(b, content, content_len, true, false, i);
                } else {
                    sb_msg(b, content, content_len, i, content == c);
                }
            } else {
                sb_msg(b, content, content_len, i, content == c);
            }
            for (size_t k = 0; k < n_calls(x, i); k++) {
                if (k > 0 || content_len > 0) sb_puts(b, "\n");
                hermes_call(b, &calls_of(x, i)[k]);
            }
            sb_puts(b, "<|im_end|>\n");
        } else if (strcmp(role, "tool") == 0) {
            hermes_tool_response(b, m, n, i);
        }
        /* Other roles are not rendered by the Qwen3 template. */
    }
    if (gen) {
        sb_puts(b, "<|im_start|>assistant\n");
        if (no_think) sb_puts(b, "<think>\n\n</think>\n\n");
    }
}

static void render_lfm2(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen,
                        const tctx *x) {
    sb_puts(b, bos_text(tok, "<|startoftext|>"));
    size_t start = n > 0 && strcmp(m[0].role, "system") == 0 ? 1 : 0;
    const char *sys = start ? m[0].content : "";
    if (sys[0] || x->tools) {
        sb_puts(b, "<|im_start|>system\n");
        sb_msg(b, sys, strlen(sys), 0, true);
        if (x->tools) {
            if (sys[0]) sb_puts(b, "\n");
            sb_puts(b, "List of tools: <|tool_list_start|>[");
            for (const cJSON *t = x->tools->child; t; t = t->next) {
                if (t != x->tools->child) sb_puts(b, ", ");
                put_json(b, t, -1);
            }
            sb_puts(b, "]<|tool_list_end|>");
        }
        sb_puts(b, "<|im_end|>\n");
    }
    for (size_t i = start; i < n; i++) {
        sb_puts(b, "<|im_start|>");
        sb_msg(b, m[i].role, strlen(m[i].role), i, false);
        sb_puts(b, "\n");
        if (n_calls(x, i) > 0) { /* the calls as the model writes them, before the content */
            sb_puts(b, "<|tool_call_start|>[");
            for (size_t k = 0; k < n_calls(x, i); k++) {
                char *call = tc_pycall(calls_of(x, i)[k].name, calls_of(x, i)[k].args);
                if (!call) b->text.oom = true;
                else if (k > 0) sb_puts(b, ", ");
                if (call) put_text(b, call);
                free(call);
            }
            sb_puts(b, "]<|tool_call_end|>");
        }
        if (strcmp(m[i].role, "tool") == 0) {
            sb_puts(b, "<|tool_response_start|>");
            sb_msg(b, m[i].content, strlen(m[i].content), i, true);
            sb_puts(b, "<|tool_response_end|>");
        } else {
            sb_msg(b, m[i].content, strlen(m[i].content), i, true);
        }
        sb_puts(b, "<|im_end|>\n");
    }
    if (gen) sb_puts(b, "<|im_start|>assistant\n");
}

/* Python's str.strip() whitespace (ASCII subset used by Jinja's trim on these inputs). */
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void render_llama3(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        if (i == 0) sb_puts(b, bos_text(tok, "<|begin_of_text|>"));
        sb_puts(b, "<|start_header_id|>");
        sb_msg(b, m[i].role, strlen(m[i].role), i, false);
        sb_puts(b, "<|end_header_id|>\n\n");
        const char *c = m[i].content;
        size_t len = strlen(c), full = len;
        while (len > 0 && is_ws(*c)) { c++; len--; }
        while (len > 0 && is_ws(c[len - 1])) len--;
        sb_msg(b, c, len, i, len == full);
        sb_puts(b, "<|eot_id|>");
    }
    if (gen) sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Python's str.isspace() code points (what Jinja's trim filter strips). */
static void put_py_trimmed(sbuf *b, const char *s, size_t msg);

/* Llama 3.1's template (meta-llama/Llama-3.1-8B-Instruct), used by "llama3" once tools, calls or
 * tool messages are given: a system turn with its knowledge and (fixed) today dates, the tools
 * in the first user turn, a call as {"name": ..., "parameters": ...} (one per message: the
 * template raises otherwise), tool results as "ipython" turns holding the content as a JSON
 * string. */
static slm_status render_llama31(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen,
                                 const tctx *x, slm_err *e) {
    sb_puts(b, bos_text(tok, "<|begin_of_text|>"));
    size_t start = n > 0 && strcmp(m[0].role, "system") == 0 ? 1 : 0;
    sb_puts(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (x->tools) sb_puts(b, "Environment: ipython\n");
    sb_puts(b, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    if (start) put_py_trimmed(b, m[0].content, 0);
    sb_puts(b, "<|eot_id|>");
    if (x->tools) {
        if (start == n)
            return err_set(e, SLM_ERR_INVALID_ARG,
                           "chat: llama3: tools go into the first user message, and there is none");
        sb_puts(b, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a "
                   "JSON for a function call with its proper arguments that best answers the given prompt.\n\nRespond "
                   "in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
                   "value}.Do not use variables.\n\n");
        for (const cJSON *t = x->tools->child; t; t = t->next) {
            put_json(b, t, 4);
            sb_puts(b, "\n\n");
        }
        put_py_trimmed(b, m[start].content, start);
        sb_puts(b, "<|eot_id|>");
        start++;
    }
    for (size_t i = start; i < n; i++) {
        const char *role = m[i].role;
        bool tool = !strcmp(role, "tool") || !strcmp(role, "ipython");
        if (n_calls(x, i) > 0) {
            if (n_calls(x, i) != 1)
                return err_set(e, SLM_ERR_INVALID_ARG,
                               "chat: llama3: message %zu has %zu tool calls; Llama 3.1's format takes one per message",
                               i, n_calls(x, i));
            sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            put_text(b, calls_of(x, i)->name);
            sb_puts(b, "\", \"parameters\": ");
            put_json(b, calls_of(x, i)->args, -1);
            sb_puts(b, "}<|eot_id|>");
        } else if (tool) {
            sb_puts(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            cJSON *str = cJSON_CreateString(m[i].content);
            if (!str) b->text.oom = true;
            else put_json(b, str, -1);
            cJSON_Delete(str);
            sb_puts(b, "<|eot_id|>");
        } else {
            sb_puts(b, "<|start_header_id|>");
            sb_msg(b, role, strlen(role), i, false);
            sb_puts(b, "<|end_header_id|>\n\n");
            put_py_trimmed(b, m[i].content, i);
            sb_puts(b, "<|eot_id|>");
        }
    }
    if (gen) sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return SLM_OK;
}

/* Python's str.isspace() code points (what Jinja's trim filter strips). */
static bool is_py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Appends s with leading and trailing Python whitespace removed (invalid UTF-8 is kept as it is). */
static void put_py_trimmed(sbuf *b, const char *s, size_t msg) {
    size_t n = strlen(s), lo = 0, hi = n;
    while (lo < n) {
        uint32_t c = 0;
        size_t l = utf8_decode((const uint8_t *)s + lo, n - lo, &c);
        if (l == 0 || !is_py_space(c)) break;
        lo += l;
    }
    for (size_t i = lo; i < n;) {
        uint32_t c = 0;
        size_t l = utf8_decode((const uint8_t *)s + i, n - i, &c);
        if (l == 0) { /* an invalid byte */
            l = 1;
            c = 0;
        }
        i += l;
        if (!is_py_space(c)) hi = i;
    }
    if (hi < lo) hi = lo;
    sb_msg(b, s + lo, hi - lo, msg, hi - lo == n);
}

/* Gemma 3's template (google/gemma-3-*-it): a leading system message becomes "content\n\n" at the
 * start of the first turn; the rest must go user, other, user, other... (the template raises
 * otherwise; here SLM_ERR_INVALID_ARG); "assistant" is written "model". */
static slm_status render_gemma(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen,
                               slm_err *e) {
    sb_puts(b, bos_text(tok, "<bos>"));
    size_t start = n > 0 && strcmp(m[0].role, "system") == 0 ? 1 : 0;
    for (size_t i = start; i < n; i++) {
        bool is_user = strcmp(m[i].role, "user") == 0;
        if (is_user != ((i - start) % 2 == 0))
            return err_set(e, SLM_ERR_INVALID_ARG,
                           "chat: gemma: message %zu is '%.20s'; roles must alternate user/assistant after an optional "
                           "system message", i, m[i].role);
        sb_puts(b, "<start_of_turn>");
        if (strcmp(m[i].role, "assistant") == 0) sb_puts(b, "model");
        else sb_msg(b, m[i].role, strlen(m[i].role), i, false);
        sb_puts(b, "\n");
        if (i == start && start == 1) {
            sb_msg(b, m[0].content, strlen(m[0].content), 0, true);
            sb_puts(b, "\n\n");
        }
        put_py_trimmed(b, m[i].content, i);
        sb_puts(b, "<end_of_turn>\n");
    }
    if (gen) sb_puts(b, "<start_of_turn>model\n");
    return SLM_OK;
}

#define SMOLLM2_SYSTEM "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

slm_status chat_render_tools_spans(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs,
                                   size_t n_msgs, const chat_tools *tools, bool add_generation_prompt,
                                   const slm_allocator *a, char **out, chat_span **spans, size_t *n_spans, slm_err *e) {
    if (out) *out = NULL;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!name || !out || (!msgs && n_msgs > 0)) return err_set(e, SLM_ERR_INVALID_ARG, "chat: missing argument");
    if (!a) a = &al_default;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
    tctx x;
    slm_status st = tools_prepare(tools, msgs, n_msgs, &x, e);
    if (st != SLM_OK) return st;
    bool with_tools = x.tools || any_calls(&x);
    bool tool_msgs = false;
    for (size_t i = 0; i < n_msgs; i++) tool_msgs |= !strcmp(msgs[i].role, "tool") || !strcmp(msgs[i].role, "ipython");
    sbuf b = {buf_make(a), spans != NULL, NULL, 0, 0};
    sb_put(&b, "", 0);
    if (with_tools && (strcmp(name, "chatml") == 0 || strcmp(name, "smollm2") == 0)) {
        render_hermes(&b, msgs, n_msgs, add_generation_prompt, strcmp(name, "smollm2") == 0 ? SMOLLM2_SYSTEM : "", &x);
    } else if (strcmp(name, "chatml") == 0 || strcmp(name, "smollm2") == 0) {
        for (size_t i = 0; i < n_msgs; i++) {
            if (i == 0 && strcmp(name, "smollm2") == 0 && strcmp(msgs[0].role, "system") != 0)
                im(&b, SIZE_MAX, "system", SMOLLM2_SYSTEM);
            im(&b, i, msgs[i].role, msgs[i].content);
        }
        if (add_generation_prompt) sb_puts(&b, "<|im_start|>assistant\n");
    } else if (strcmp(name, "qwen3") == 0 || strcmp(name, "qwen3-nothink") == 0) {
        if (n_msgs > 0) render_qwen3(&b, msgs, n_msgs, add_generation_prompt, strcmp(name, "qwen3-nothink") == 0, &x);
        else if (add_generation_prompt) {
            sb_puts(&b, "<|im_start|>assistant\n");
            if (strcmp(name, "qwen3-nothink") == 0) sb_puts(&b, "<think>\n\n</think>\n\n");
        }
    } else if (strcmp(name, "lfm2") == 0) {
        render_lfm2(&b, tok, msgs, n_msgs, add_generation_prompt, &x);
    } else if (strcmp(name, "llama3") == 0) {
        if (with_tools || tool_msgs) st = render_llama31(&b, tok, msgs, n_msgs, add_generation_prompt, &x, e);
        else render_llama3(&b, tok, msgs, n_msgs, add_generation_prompt);
    } else if (strcmp(name, "gemma") == 0) {
        st = with_tools ? err_set(e, SLM_ERR_UNSUPPORTED,
                                  "chat: gemma: Gemma 3's template has no tool support (tools and tool_calls cannot be "
                                  "rendered)")
                        : render_gemma(&b, tok, msgs, n_msgs, add_generation_prompt, e);
    } else {
        st = err_set(e, SLM_ERR_NOT_FOUND, "chat: unknown template '%.40s'", name);
    }
    tools_free(&x);
    if (st == SLM_OK && b.text.oom) st = err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
    if (st != SLM_OK) {
        buf_free(&b.text);
        al_free(a, b.sp);
        return st;
    }
    *out = buf_take(&b.text);
    if (spans) {
        *spans = b.sp;
        *n_spans = b.n_sp;
    }
    return SLM_OK;
}

slm_status chat_render_spans(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                             bool add_generation_prompt, const slm_allocator *a, char **out, chat_span **spans,
                             size_t *n_spans, slm_err *e) {
    return chat_render_tools_spans(name, tok, msgs, n_msgs, NULL, add_generation_prompt, a, out, spans, n_spans, e);
}

slm_status chat_render(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                       bool add_generation_prompt, const slm_allocator *a, char **out, slm_err *e) {
    return chat_render_spans(name, tok, msgs, n_msgs, add_generation_prompt, a, out, NULL, NULL, e);
}

slm_status chat_tokenize(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                         const slm_chat_ids *content_ids, bool add_generation_prompt, const slm_allocator *a,
                         int32_t **ids, size_t *n_ids, slm_err *e) {
    return chat_tokenize_tools(name, tok, msgs, n_msgs, NULL, content_ids, add_generation_prompt, a, ids, n_ids, e);
}

bool chat_is_builtin(const char *name) {
    static const char *const names[] = {"chatml", "smollm2", "qwen3", "qwen3-nothink", "lfm2", "llama3", "gemma"};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

slm_status chat_render_tmpl(const chat_tmpl *t, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                            const chat_tools *tools, bool add_generation_prompt, const slm_allocator *a, char **out,
                            chat_span **spans, size_t *n_spans, slm_err *e) {
    if (out) *out = NULL;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!t || (!t->name && !t->src)) return err_set(e, SLM_ERR_INVALID_ARG, "chat: no template");
    if (t->name)
        return chat_render_tools_spans(t->name, tok, msgs, n_msgs, tools, add_generation_prompt, a, out, spans, n_spans,
                                       e);
    if (!out || (!msgs && n_msgs > 0)) return err_set(e, SLM_ERR_INVALID_ARG, "chat: missing argument");
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
    return chat_render_jinja(t->src, t->parsed, t->kwargs, t->request, tok, msgs, n_msgs, tools, add_generation_prompt,
                             a ? a : &al_default, out, spans, n_spans, e);
}

slm_status chat_tokenize_tools(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                               const chat_tools *tools, const slm_chat_ids *content_ids, bool add_generation_prompt,
                               const slm_allocator *a, int32_t **ids, size_t *n_ids, slm_err *e) {
    chat_tmpl t = {name, NULL, NULL, NULL, false};
    if (!name) {
        if (ids) *ids = NULL;
        if (n_ids) *n_ids = 0;
        return err_set(e, SLM_ERR_INVALID_ARG, "chat: missing argument");
    }
    return chat_tokenize_tmpl(&t, tok, msgs, n_msgs, tools, content_ids, add_generation_prompt, a, ids, n_ids, e);
}

slm_status chat_tokenize_tmpl(const chat_tmpl *tm, const slm_tokenizer *tok, const slm_chat_message *msgs,
                              size_t n_msgs, const chat_tools *tools, const slm_chat_ids *content_ids,
                              bool add_generation_prompt, const slm_allocator *a, int32_t **ids, size_t *n_ids,
                              slm_err *e) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!tok || !ids || !n_ids) return err_set(e, SLM_ERR_INVALID_ARG, "chat: missing argument");
    if (!a) a = &al_default;
    char *text = NULL;
    chat_span *sp = NULL;
    size_t n_sp = 0;
    slm_status st = chat_render_tmpl(tm, tok, msgs, n_msgs, tools, add_generation_prompt, a, &text, &sp, &n_sp, e);
    if (st != SLM_OK) return st;
    tok_span *ts = n_sp ? al_array(a, n_sp, sizeof *ts) : NULL;
    if (n_sp && !ts) st = err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
    for (size_t i = 0; i < n_sp && st == SLM_OK; i++) {
        const slm_chat_ids *c = content_ids && sp[i].whole && sp[i].msg < n_msgs ? &content_ids[sp[i].msg] : NULL;
        bool splice = c && c->ids && c->n_ids > 0;
        ts[i] = (tok_span){sp[i].off, sp[i].len, splice ? c->ids : NULL, splice ? c->n_ids : 0};
        for (size_t q = 0; q < ts[i].n_ids && st == SLM_OK; q++)
            if (ts[i].ids[q] < 0 || ts[i].ids[q] >= tok->n_vocab)
                st = err_set(e, SLM_ERR_RANGE, "chat: message %zu: token id %d out of range", sp[i].msg,
                             (int)ts[i].ids[q]);
    }
    tok_ids v = {0};
    size_t bad_off = 0;
    if (st == SLM_OK) {
        st = tok_encode_spans(tok, text, strlen(text), SLM_TOKENIZE_PARSE_SPECIAL, ts, n_sp, &v, &bad_off);
        if (st != SLM_OK) st = err_set(e, st, "chat: cannot tokenize the rendered text (at byte %zu)", bad_off);
    }
    if (st == SLM_OK) { /* in a's memory, not the tokenizer's */
        *ids = al_array(a, v.n ? v.n : 1, sizeof **ids);
        if (!*ids) st = err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
        else {
            if (v.n) memcpy(*ids, v.v, v.n * sizeof **ids);
            *n_ids = v.n;
        }
    }
    al_free(&tok->alloc, v.v);
    al_free(a, ts);
    al_free(a, sp);
    al_free(a, text);
    return st;
}
