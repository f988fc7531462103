/* render.c — an sreq rendered for the engine (request.h): messages through the chat template
 * (assistant contents this server generated continue from their ids; a trailing assistant message
 * is continued), completion prompts through the tokenizer, the output constraint and forced tool
 * call compiled into a grammar. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "request.h"

void sprompt_free(sprompt *p) {
    free(p->ids);
    slm_grammar_destroy(p->grammar);
    tools_req_free(&p->tools);
    free(p->bias);
    memset(p, 0, sizeof *p);
}

/* The template request r runs: its own chat_template / chat_template_kwargs, else the server's. */
static slm_chat_template request_template(const sreq *r, const sreq_model *mv) {
    slm_chat_template t = {mv->tmpl, mv->tmpl_text, mv->tmpl_kwargs, false};
    if (r->chat_template) t = (slm_chat_template){NULL, r->chat_template, t.kwargs, true};
    if (r->chat_template_kwargs) t.kwargs = r->chat_template_kwargs;
    return t;
}

/* The template variables r renders with: llama-server's date_string and datetime (today, as
 * "%d %b %Y" and "%b %d %Y", as llama.cpp sets them: Llama 3.x templates print date_string) under the
 * keys of the request's chat_template_kwargs, else the server's. malloc'd JSON object text; NULL
 * when out of memory. */
static char *request_kwargs(const sreq *r, const sreq_model *mv) {
    const char *given = r->chat_template_kwargs ? r->chat_template_kwargs : mv->tmpl_kwargs;
    cJSON *kw = given ? cJSON_Parse(given) : cJSON_CreateObject();
    if (!cJSON_IsObject(kw)) { /* the mapping and the server's start checked it: out of memory */
        cJSON_Delete(kw);
        return NULL;
    }
    time_t now = time(NULL);
    struct tm tm;
    char date[32], datetime[32];
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    strftime(datetime, sizeof datetime, "%b %d %Y", &tm);
    if (!cJSON_HasObjectItem(kw, "date_string")) cJSON_AddStringToObject(kw, "date_string", date);
    if (!cJSON_HasObjectItem(kw, "datetime")) cJSON_AddStringToObject(kw, "datetime", datetime);
    char *text = cJSON_PrintUnformatted(kw);
    cJSON_Delete(kw);
    return text;
}

/* The call format of the template r runs ("none" when it implies none). */
static const char *request_tool_format(const sreq *r, const sreq_model *mv) {
    slm_chat_template t = request_template(r, mv);
    const char *f = slm_chat_tool_format(mv->m, &t);
    return f ? f : "none";
}

static bool is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

/* Whether the prompt ends inside an open think block ("<think>" then white space: Qwen3.5, QwQ),
 * read from the text of its last tokens. */
static bool prompt_thinks(const sreq_model *mv, const sprompt *p) {
    size_t k = p->n_ids < 4 ? p->n_ids : 4, n = 0;
    char text[256];
    if (slm_tokenizer_decode(mv->tok, p->ids + p->n_ids - k, k, true, text, sizeof text - 1, &n) != SLM_OK) return false;
    while (n > 0 && is_space(text[n - 1])) n--;
    return n >= 7 && !memcmp(text + n - 7, "<think>", 7);
}

/* Appends the ids of text (plain text: control-token text stays text) to p->ids. */
static bool append_text(const sreq_model *mv, sprompt *p, const char *text, uint32_t flags, sreq_err *e) {
    size_t len = strlen(text), cap = len + 16, n = 0;
    int32_t *v = realloc(p->ids, (p->n_ids + cap) * sizeof *v);
    if (!v) return sreq_fail(e, 500, NULL, "out of memory");
    p->ids = v;
    slm_status st = slm_tokenizer_encode(mv->tok, text, len, flags, v + p->n_ids, cap, &n);
    if (st != SLM_OK) return sreq_fail(e, 400, NULL, "cannot tokenize the prompt (%s)", slm_status_name(st));
    p->n_ids += n;
    return true;
}

/* p->keep: the markers of p->tool_fmt the vocabulary holds as one control token (text only when
 * rendered as special), the call markers only when the answer is parsed for calls. */
static void keep_markers(const sreq_model *mv, sprompt *p) {
    for (const char *const *m = slm_tool_format_markers(p->tool_fmt); *m && p->n_keep < SLM_ENGINE_MAX_KEEP; m++) {
        bool think = strstr(*m, "think>") || strstr(*m, "THINK]"); /* the reasoning tags: kept without tools too */
        int32_t id[2];
        size_t n = 0, n_plain = 0, n_special = 0;
        char text[64];
        if (!think && !p->tools.parse) continue;
        if (slm_tokenizer_encode(mv->tok, *m, strlen(*m), SLM_TOKENIZE_PARSE_SPECIAL, id, 2, &n) != SLM_OK || n != 1) continue;
        if (slm_tokenizer_decode(mv->tok, id, 1, false, text, sizeof text, &n_plain) != SLM_OK || n_plain != 0) continue;
        if (slm_tokenizer_decode(mv->tok, id, 1, true, text, sizeof text, &n_special) != SLM_OK || n_special != strlen(*m))
            continue;
        p->keep[p->n_keep++] = id[0];
    }
}

static bool render_chat(const sreq *r, const sreq_model *mv, sprompt *p, sreq_err *e) {
    bool prefill = sreq_prefill(r);
    size_t n = r->n_msgs - (prefill ? 1 : 0);
    slm_chat_message *msgs = calloc(n ? n : 1, sizeof *msgs);
    slm_chat_ids *content_ids = calloc(n ? n : 1, sizeof *content_ids);
    const char **calls = calloc(n ? n : 1, sizeof *calls);
    const char **call_ids = calloc(n ? n : 1, sizeof *call_ids); /* tool messages' tool_call_id: templates may read it */
    const char **fields = calloc(n ? n : 1, sizeof *fields);
    char *kwargs = NULL;
    bool ok = false, any_calls = false;
    if (!msgs || !content_ids || !calls || !call_ids || !fields) {
        sreq_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        msgs[i] = (slm_chat_message){r->msgs[i].role, r->msgs[i].content};
        calls[i] = r->msgs[i].tool_calls;
        call_ids[i] = r->msgs[i].tool_call_id;
        fields[i] = r->msgs[i].fields;
        any_calls |= calls[i] != NULL;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (r->msgs[i].ids && (ids = malloc(r->msgs[i].n_ids * sizeof *ids)) != NULL) { /* a stored turn's own */
            memcpy(ids, r->msgs[i].ids, r->msgs[i].n_ids * sizeof *ids);
            content_ids[i] = (slm_chat_ids){ids, r->msgs[i].n_ids};
        } else if (mv->lookup && !strcmp(msgs[i].role, "assistant") &&
                   mv->lookup(mv->lookup_user, msgs[i].content, strlen(msgs[i].content), &ids, &n_ids)) {
            content_ids[i] = (slm_chat_ids){ids, n_ids};
        }
    }
    slm_chat_tools tools = {p->tools.tools, any_calls ? calls : NULL, call_ids, fields};
    slm_chat_template tmpl = request_template(r, mv);
    if (!(kwargs = request_kwargs(r, mv))) {
        sreq_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    tmpl.kwargs = kwargs;
    char err[400] = "";
    slm_status st = slm_chat_tokenize_with(mv->m, &tmpl, msgs, n, &tools, content_ids, !r->no_gen_prompt, &p->ids,
                                           &p->n_ids, err, sizeof err);
    if (st != SLM_OK) {
        sreq_fail(e, 400, NULL, "cannot render and tokenize the chat template (%s)%s%s", slm_status_name(st),
                  err[0] ? ": " : "", err);
        goto done;
    }
    /* slm_chat_tokenize_with allocates with slm_free's allocator: moved to malloc'd memory */
    int32_t *copy = malloc((p->n_ids ? p->n_ids : 1) * sizeof *copy);
    if (!copy) {
        sreq_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    memcpy(copy, p->ids, p->n_ids * sizeof *copy);
    slm_free(p->ids);
    p->ids = copy;
    p->prefill = prefill;
    /* an answer the prompt opened inside <think> is reasoning first; a constrained one is content */
    p->think_open = !prefill && !p->grammar && p->n_ids > 0 && prompt_thinks(mv, p);
    if (prefill && !append_text(mv, p, r->msgs[r->n_msgs - 1].content, 0, e)) goto done;
    keep_markers(mv, p);
    ok = true;
done:
    for (size_t i = 0; content_ids && i < n; i++) free((void *)(uintptr_t)content_ids[i].ids);
    free(content_ids);
    free(fields);
    free(kwargs);
    free(call_ids);
    free(calls);
    free(msgs);
    return ok;
}

/* The request's id biases and the tokens of its text biases, into p->bias. */
static bool resolve_text_biases(const sreq *r, const sreq_model *mv, sprompt *p, sreq_err *e) {
    if (r->n_bias_text == 0) return true;
    size_t cap = (size_t)r->sp.n_logit_bias, n = (size_t)r->sp.n_logit_bias;
    for (int32_t i = 0; i < r->n_bias_text; i++) cap += strlen(r->bias_text[i].text) + 16;
    if (!(p->bias = malloc(cap * sizeof *p->bias))) return sreq_fail(e, 500, NULL, "out of memory");
    if (n) memcpy(p->bias, r->sp.logit_bias, n * sizeof *p->bias);
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return sreq_fail(e, 500, NULL, "out of memory");
    for (int32_t i = 0; i < r->n_bias_text; i++) {
        size_t k = 0;
        const char *t = r->bias_text[i].text;
        slm_status st = slm_tokenizer_encode(mv->tok, t, strlen(t), 0, ids, cap, &k);
        if (st != SLM_OK) {
            free(ids);
            return sreq_fail(e, 400, NULL, "logit_bias: cannot tokenize '%.40s' (%s)", t, slm_status_name(st));
        }
        for (size_t m = 0; m < k; m++) p->bias[n++] = (slm_logit_bias){ids[m], r->bias_text[i].bias};
    }
    free(ids);
    p->n_bias = (int32_t)n;
    return true;
}

/* The engine's thinking settings: think blocks ("<think>" .. "</think>", as split_answer reads
 * them) are tracked in answers that are not constrained or continued; with the request's budget,
 * the close tag's ids (its special token where the vocabulary has one). */
static bool think_setup(const sreq *r, const sreq_model *mv, sprompt *p, sreq_err *e) {
    p->think_budget = -1;
    if (p->grammar || p->prefill) return true;
    p->think_track = true;
    p->think_in_prompt = serve_api_is_chat(r->api) ? p->think_open : prompt_thinks(mv, p);
    if (!r->has_think_budget) return true;
    static const char close[] = "</think>";
    size_t n = 0;
    slm_status st = slm_tokenizer_encode(mv->tok, close, sizeof close - 1, SLM_TOKENIZE_PARSE_SPECIAL, p->think_close_ids,
                                         SLM_ENGINE_MAX_THINK_CLOSE, &n);
    if (st != SLM_OK || n == 0) return sreq_fail(e, 500, NULL, "cannot tokenize the think close tag (%s)", slm_status_name(st));
    p->n_think_close = (int32_t)n;
    p->think_budget = r->think_budget;
    return true;
}

bool sreq_render(const sreq *r, const sreq_model *mv, sprompt *p, sreq_err *e) {
    memset(p, 0, sizeof *p);
    char err[384] = "";
    slm_status st = SLM_OK;
    if (!resolve_text_biases(r, mv, p, e)) goto fail;
    if (r->grammar) st = slm_grammar_create(r->grammar, strlen(r->grammar), NULL, &p->grammar, err, sizeof err);
    else if (r->schema) st = slm_grammar_from_json_schema(r->schema, strlen(r->schema), &p->grammar, err, sizeof err);
    if (st != SLM_OK) {
        sreq_fail(e, 400, NULL, "%s (%s)", err[0] ? err : "bad grammar", slm_status_name(st));
        goto fail;
    }
    p->tool_fmt = serve_api_is_chat(r->api) ? request_tool_format(r, mv) : "none";
    if (serve_api_is_chat(r->api) && r->tools && r->tool_mode != STOOL_NONE) {
        slm_grammar *forced = NULL;
        if (!tools_setup(r->tools, r->tool_mode == STOOL_REQUIRED || r->tool_mode == STOOL_NAMED, r->tool_name, p->tool_fmt,
                         &p->tools, &forced, e->msg, sizeof e->msg)) {
            e->status = 400;
            e->code = NULL;
            goto fail;
        }
        if (forced) p->grammar = forced; /* validate refused a forced call with another constraint */
    }
    /* a harmony answer is channels whether or not it may call: parsed (and its markers kept) without tools too */
    if (serve_api_is_chat(r->api) && !p->tools.parse && !strcmp(p->tool_fmt, "gpt-oss")) p->tools.parse = true;
    if (serve_api_is_chat(r->api)) {
        if (!render_chat(r, mv, p, e)) goto fail;
    } else if (r->prompt_text) {
        if (!append_text(mv, p, r->prompt_text, SLM_TOKENIZE_PARSE_SPECIAL | SLM_TOKENIZE_ADD_BOS, e)) goto fail;
    } else if (r->n_prompt_ids) {
        if (!(p->ids = malloc(r->n_prompt_ids * sizeof *p->ids))) {
            sreq_fail(e, 500, NULL, "out of memory");
            goto fail;
        }
        memcpy(p->ids, r->prompt_ids, r->n_prompt_ids * sizeof *p->ids);
        p->n_ids = r->n_prompt_ids;
    }
    if (p->n_ids == 0) {
        sreq_fail(e, 400, NULL, "the prompt is empty");
        goto fail;
    }
    if (!think_setup(r, mv, p, e)) goto fail;
    if (p->n_ids >= (size_t)mv->n_ctx) {
        sreq_fail(e, 400, "context_length_exceeded",
                  "the prompt has %zu tokens; this server's context limit is %d tokens (prompt plus at least one "
                  "generated token)", p->n_ids, mv->n_ctx);
        e->n_prompt_tokens = (int32_t)p->n_ids;
        e->n_ctx = mv->n_ctx;
        goto fail;
    }
    return true;
fail:
    sprompt_free(p);
    return false;
}

bool sreq_render_text(const sreq *r, const sreq_model *mv, char **out, sreq_err *e) {
    *out = NULL;
    bool prefill = sreq_prefill(r);
    size_t n = r->n_msgs - (prefill ? 1 : 0);
    slm_chat_message *msgs = calloc(n ? n : 1, sizeof *msgs);
    const char **calls = calloc(n ? n : 1, sizeof *calls);
    const char **call_ids = calloc(n ? n : 1, sizeof *call_ids);
    const char **fields = calloc(n ? n : 1, sizeof *fields);
    tool_req t = {0};
    slm_grammar *forced = NULL;
    char *text = NULL, *kwargs = NULL;
    bool ok = false, any_calls = false;
    if (!msgs || !calls || !call_ids || !fields) {
        sreq_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        msgs[i] = (slm_chat_message){r->msgs[i].role, r->msgs[i].content};
        calls[i] = r->msgs[i].tool_calls;
        call_ids[i] = r->msgs[i].tool_call_id;
        fields[i] = r->msgs[i].fields;
        any_calls |= calls[i] != NULL;
    }
    slm_chat_template tmpl = request_template(r, mv);
    if (r->tools && r->tool_mode != STOOL_NONE &&
        !tools_setup(r->tools, false, NULL, request_tool_format(r, mv), &t, &forced, e->msg, sizeof e->msg)) {
        e->status = 400;
        goto done;
    }
    slm_chat_tools tools = {t.tools, any_calls ? calls : NULL, call_ids, fields};
    if (!(kwargs = request_kwargs(r, mv))) {
        sreq_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    tmpl.kwargs = kwargs;
    char err[400] = "";
    slm_status st = slm_chat_render_with(mv->m, &tmpl, msgs, n, &tools, !r->no_gen_prompt, &text, err, sizeof err);
    if (st != SLM_OK) {
        sreq_fail(e, 400, NULL, "cannot render the chat template (%s)%s%s", slm_status_name(st), err[0] ? ": " : "", err);
        goto done;
    }
    const char *tail = prefill ? r->msgs[r->n_msgs - 1].content : "";
    size_t n_text = strlen(text), n_tail = strlen(tail);
    if (!(*out = malloc(n_text + n_tail + 1))) {
        sreq_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    memcpy(*out, text, n_text);
    memcpy(*out + n_text, tail, n_tail + 1);
    ok = true;
done:
    free(kwargs);
    slm_free(text);
    tools_req_free(&t);
    free(fields);
    free(call_ids);
    free(calls);
    free(msgs);
    return ok;
}
