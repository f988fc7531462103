/* fuzz_toolcall.c — libFuzzer target for text/toolcall*.c and the tool renderings of text/chat.c.
 * The first byte b picks what the rest of the input is. b < 0x80: b & 7 in 0-3 an answer parsed in
 * the format of "gemma", "qwen3", "lfm2", "llama3" (tc_parse: every call has a name and arguments
 * that parse as a JSON object; without calls the content is the input, with calls a prefix of it
 * followed by a suffix; for cut points of the input, what tc_content_ready lets out is a prefix of
 * the final content, and a streamed call's name and arguments start the parsed first call's);
 * b >= 0x80: an answer in format qwen-xml, mistral, mistral-args, granite or gpt-oss (b & 7, mod
 * 5), with reasoning split off when b & 8, the prompt's think block open when b & 16 (the same
 * checks; with reasoning split or for gpt-oss only that calls are well-formed and content and
 * reasoning no longer than the input); b & 7 in 4-7 (b < 0x80): a "tools" JSON array (tc_check_tools accepts or names the problem; an accepted one
 * renders with the qwen3, chatml, lfm2, llama3 and gemma templates and through a Jinja template
 * (spans inside the output) or is refused with a message;
 * tc_pyjson of any JSON reads back as the same tree). Seed corpus: tests/data/corpus/toolcall/. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "text/tok_impl.h"
#include "text/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const tc_format k_formats[] = {TC_NONE, TC_HERMES, TC_LFM2, TC_LLAMA3};
static const tc_format k_new_formats[] = {TC_QWEN_XML, TC_MISTRAL, TC_MISTRAL_ARGS, TC_GRANITE, TC_HARMONY};

static void parse_answer(tc_format f, const tc_opts *o, const char *t, size_t n) {
    n = strnlen(t, n); /* the answer text ends at a NUL byte */
    tc_result r;
    FUZZ_CHECK(tc_parse_opts(f, o, t, n, &r) == SLM_OK);
    size_t nc = strlen(r.content);
    FUZZ_CHECK(nc <= n && (!r.reasoning || strlen(r.reasoning) <= n));
    for (size_t i = 0; i < r.n_calls; i++) {
        FUZZ_CHECK(r.calls[i].name[0]);
        cJSON *a = cJSON_Parse(r.calls[i].arguments);
        FUZZ_CHECK(cJSON_IsObject(a));
        cJSON_Delete(a);
    }
    if (o->reasoning || o->think_open) { /* the server streams what follows the reasoning */
        tc_result_free(&r);
        return;
    }
    bool plain_content = f != TC_HARMONY; /* harmony's content is its final channel's, not the text's ends */
    if (plain_content && r.n_calls == 0) FUZZ_CHECK(nc == n && !memcmp(r.content, t, n));
    size_t pre = 0;
    while (pre < nc && pre < n && r.content[pre] == t[pre]) pre++;
    if (plain_content) FUZZ_CHECK(!memcmp(r.content + pre, t + n - (nc - pre), nc - pre)); /* a prefix, then a suffix */
    bool plain = !memchr(t, '\\', n); /* no escapes: raw names and keys are the decoded ones */
    for (size_t k = 0; k < 16; k++) {
        size_t m = n * k / 15, ready = tc_content_ready(f, t, m);
        FUZZ_CHECK(ready <= m && ready <= nc && !memcmp(r.content, t, ready));
        tc_partial p;
        if (!tc_partial_call(f, t, m, &p)) continue;
        FUZZ_CHECK(p.name_off + p.name_len <= m && p.args_off + p.args_len <= m);
        if (plain && r.n_calls > 0) { /* what streams is the start of the parsed call */
            FUZZ_CHECK(strlen(r.calls[0].name) == p.name_len && !memcmp(r.calls[0].name, t + p.name_off, p.name_len));
            FUZZ_CHECK(strlen(r.calls[0].arguments) >= p.args_len &&
                       !memcmp(r.calls[0].arguments, t + p.args_off, p.args_len));
        }
    }
    tc_result_free(&r);
}

static bool finite_tree(const cJSON *v) {
    if (cJSON_IsNumber(v)) return isfinite(v->valuedouble);
    for (const cJSON *c = v->child; c; c = c->next)
        if (!finite_tree(c)) return false;
    return true;
}

/* a and b hold the same values in the same order (repeated keys included; -0 equals 0). */
static bool same_tree(const cJSON *a, const cJSON *b) {
    if ((a->type & 0xFF) != (b->type & 0xFF)) return false;
    if (cJSON_IsNumber(a)) return a->valuedouble == b->valuedouble;
    if (cJSON_IsString(a)) return !strcmp(a->valuestring, b->valuestring);
    const cJSON *x = a->child, *y = b->child;
    for (; x && y; x = x->next, y = y->next)
        if ((x->string || y->string) && (!x->string || !y->string || strcmp(x->string, y->string))) return false;
        else if (!same_tree(x, y)) return false;
    return !x && !y;
}

static void check_tools(const char *t, size_t n) {
    cJSON *v = cJSON_ParseWithLength(t, n);
    if (!v) return;
    char *py = tc_pyjson(v, (int)(n % 3) - 1);
    FUZZ_CHECK(py);
    cJSON *back = cJSON_Parse(py); /* Python writes Infinity for an overflowing number, as JSON cannot */
    FUZZ_CHECK(!finite_tree(v) || (back && same_tree(v, back)));
    cJSON_Delete(back);
    free(py);
    slm_err e;
    err_clear(&e);
    slm_status st = tc_check_tools(v, &e);
    FUZZ_CHECK(st == SLM_OK || (st == SLM_ERR_INVALID_ARG && e.msg[0]));
    if (st == SLM_OK) {
        static const char *const names[] = {"qwen3", "chatml", "lfm2", "llama3", "gemma"};
        slm_chat_message m[2] = {{"system", "s"}, {"user", "u"}};
        chat_tools tools = {v, NULL, NULL, NULL};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char *out = NULL;
            err_clear(&e);
            st = chat_render_tools_spans(names[i], NULL, m, 2, &tools, true, NULL, &out, NULL, NULL, &e);
            FUZZ_CHECK(st == SLM_OK ? out != NULL : out == NULL && e.msg[0]);
            al_free(NULL, out);
        }
        /* the Jinja path (chat_jinja.c): the tools in transformers' context, their strings data */
        char *out = NULL;
        chat_span *sp = NULL;
        size_t n_sp = 0;
        err_clear(&e);
        st = chat_render_jinja("{% for t in tools %}{{ t.function.name }}: {{ t | tojson }}\n{% endfor %}", NULL, NULL, false, NULL, m,
                               2, &tools, true, NULL, &out, &sp, &n_sp, &e);
        FUZZ_CHECK(st == SLM_OK ? out != NULL : out == NULL && e.msg[0]);
        for (size_t i = 0; st == SLM_OK && i < n_sp; i++) FUZZ_CHECK(sp[i].off + sp[i].len <= strlen(out));
        al_free(NULL, out);
        al_free(NULL, sp);
    }
    cJSON_Delete(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 16) return 0;
    const char *t = (const char *)data + 1;
    size_t n = size - 1;
    tc_opts o = {NULL, (data[0] & 0x88) == 0x88, (data[0] & 0x90) == 0x90};
    if (data[0] & 0x80) parse_answer(k_new_formats[(data[0] & 7) % 5], &o, t, n);
    else if ((data[0] & 7) < 4) parse_answer(k_formats[data[0] & 3], &o, t, n);
    else check_tools(t, n);
    return 0;
}
