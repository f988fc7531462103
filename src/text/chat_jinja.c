/* chat_jinja.c — chat prompts rendered by a model's own Jinja template (text/jinja.h), with the
 * render context transformers' apply_chat_template builds: messages as a list of dicts (role,
 * content, a tool message's tool_call_id, the message's further members (name, reasoning_content,
 * ...: chat_tools.fields) replacing those of the same name; an assistant's tool_calls as [{"id",
 * "type": "function", "function": {"name", "arguments": a dict}}], the OpenAI argument strings
 * parsed), tools (when non-empty),
 * add_generation_prompt, bos_token and eos_token (the vocabulary's texts, "" when absent) and the
 * chat_template_kwargs keys at the top level (they replace a member of the same name; the public
 * entries refuse the names of the members above, as transformers does). Strings of messages and tools are data: their spans
 * in the output are returned (chat_span), so tokenising matches control tokens only in the
 * template's own text. chat_tmpl picks between this and the C built-ins of chat.c. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"
#include "text/tok_impl.h"

static const char *token_text(const slm_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_vocab ? tok->pool + tok->tokens[id].text_off : "";
}

/* One OpenAI tool call as transformers passes it: arguments a dict (a JSON string parsed). */
static cJSON *call_dict(const cJSON *c, size_t msg, size_t k, slm_err *e) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
    if (!cJSON_IsObject(c) || !cJSON_IsString(name)) {
        err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: tool_calls[%zu] needs function.name", msg, k);
        return NULL;
    }
    cJSON *a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : args ? cJSON_Duplicate(args, true)
                                                                            : cJSON_CreateObject();
    if (!cJSON_IsObject(a)) {
        cJSON_Delete(a);
        err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: tool_calls[%zu].function.arguments is not a JSON object",
                msg, k);
        return NULL;
    }
    cJSON *d = cJSON_CreateObject(), *f = cJSON_CreateObject();
    if (!d || !f) {
        cJSON_Delete(d);
        cJSON_Delete(f);
        cJSON_Delete(a);
        return NULL;
    }
    if (cJSON_IsString(id)) cJSON_AddStringToObject(d, "id", id->valuestring);
    cJSON_AddStringToObject(d, "type", "function");
    cJSON_AddItemToObject(d, "function", f);
    cJSON_AddStringToObject(f, "name", name->valuestring);
    cJSON_AddItemToObject(f, "arguments", a);
    return d;
}

/* The render context; NULL with e set. */
static cJSON *context(const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs, const chat_tools *tools,
                      const cJSON *kwargs, bool gen, slm_err *e) {
    if (kwargs && !cJSON_IsObject(kwargs)) {
        err_set(e, SLM_ERR_INVALID_ARG, "chat: chat_template_kwargs must be a JSON object");
        return NULL;
    }
    cJSON *ctx = cJSON_CreateObject(), *ms = cJSON_AddArrayToObject(ctx, "messages");
    bool ok = ctx && ms;
    for (size_t i = 0; ok && i < n_msgs; i++) {
        cJSON *m = cJSON_CreateObject();
        ok = m && cJSON_AddItemToArray(ms, m) && cJSON_AddStringToObject(m, "role", msgs[i].role) &&
             cJSON_AddStringToObject(m, "content", msgs[i].content);
        const char *call_id = tools && tools->tool_call_ids ? tools->tool_call_ids[i] : NULL;
        if (ok && call_id) ok = cJSON_AddStringToObject(m, "tool_call_id", call_id) != NULL;
        const cJSON *fields = tools && tools->fields ? tools->fields[i] : NULL;
        for (const cJSON *f = fields ? fields->child : NULL; ok && f; f = f->next) { /* they replace */
            cJSON_DeleteItemFromObjectCaseSensitive(m, f->string);
            ok = cJSON_AddItemToObject(m, f->string, cJSON_Duplicate(f, true));
        }
        const cJSON *calls = tools && tools->calls ? tools->calls[i] : NULL;
        if (!ok || !cJSON_IsArray(calls) || !calls->child) continue;
        cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
        size_t k = 0;
        for (const cJSON *c = calls->child; ok && c; c = c->next, k++) {
            cJSON *d = arr ? call_dict(c, i, k, e) : NULL;
            ok = d && cJSON_AddItemToArray(arr, d);
        }
        if (!ok) {
            cJSON_Delete(ctx);
            err_set(e, SLM_ERR_NOMEM, "chat: out of memory"); /* kept when call_dict said why */
            return NULL;
        }
    }
    if (ok && tools && cJSON_IsArray(tools->tools) && tools->tools->child)
        ok = cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools->tools, true));
    ok = ok && cJSON_AddBoolToObject(ctx, "add_generation_prompt", gen) &&
         cJSON_AddStringToObject(ctx, "bos_token", token_text(tok, tok ? tok->bos : -1)) &&
         cJSON_AddStringToObject(ctx, "eos_token", token_text(tok, tok ? tok->eos : -1));
    for (const cJSON *k = kwargs ? kwargs->child : NULL; ok && k; k = k->next) { /* later keys win */
        cJSON_DeleteItemFromObjectCaseSensitive(ctx, k->string);
        ok = cJSON_AddItemToObject(ctx, k->string, cJSON_Duplicate(k, true));
    }
    if (!ok) {
        cJSON_Delete(ctx);
        err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
        return NULL;
    }
    return ctx;
}

slm_status chat_render_jinja(const char *src, const jinja_template *parsed, const cJSON *kwargs, bool request,
                             const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs, const chat_tools *tools,
                             bool gen, const slm_allocator *a, char **out, chat_span **spans, size_t *n_spans, slm_err *e) {
    slm_err ce;
    err_clear(&ce);
    cJSON *ctx = context(tok, msgs, n_msgs, tools, kwargs, gen, &ce);
    if (!ctx) return err_set(e, ce.status ? ce.status : SLM_ERR_NOMEM, "%s", ce.msg[0] ? ce.msg : "chat: out of memory");
    jinja_template *own = NULL;
    slm_err pe;
    err_clear(&pe);
    slm_status st = parsed ? SLM_OK : jinja_parse(src, strlen(src), a, &own, &pe);
    if (st != SLM_OK) {
        cJSON_Delete(ctx);
        return err_set(e, st, "chat template: %s", pe.msg);
    }
    const jinja_template *t = parsed ? parsed : own;
    char *text = NULL;
    size_t n = 0, nj = 0;
    jinja_span *js = NULL;
    const jinja_limits tight = {JINJA_REQUEST_MAX_STEPS, JINJA_REQUEST_MAX_DEPTH, JINJA_REQUEST_MAX_OUTPUT, 0,
                                JINJA_REQUEST_MAX_MEMORY, NULL};
    st = jinja_render(t, ctx, NULL, request ? &tight : NULL, a, &text, &n, spans ? &js : NULL, spans ? &nj : NULL, &pe);
    jinja_free(own);
    cJSON_Delete(ctx);
    if (st != SLM_OK) return err_set(e, st, "chat template: %s", pe.msg);
    if (spans) {
        chat_span *sp = nj ? al_array(a, nj, sizeof *sp) : NULL;
        if (nj && !sp) {
            al_free(a, js);
            al_free(a, text);
            return err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
        }
        for (size_t i = 0; i < nj; i++) /* msg < 0: tools data, never a whole content */
            sp[i] = (chat_span){js[i].off, js[i].len, js[i].msg >= 0 ? (size_t)js[i].msg : SIZE_MAX,
                                js[i].whole && js[i].msg >= 0 && (size_t)js[i].msg < n_msgs};
        al_free(a, js);
        *spans = sp;
        *n_spans = nj;
    }
    *out = text;
    return SLM_OK;
}
