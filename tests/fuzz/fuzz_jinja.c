/* fuzz_jinja.c — libFuzzer target for text/jinja: the input is a template, parsed and rendered on a
 * small fixed context (messages with content, tool calls and thinking, tools, flags) under tight
 * limits. Contract: parsing succeeds or fails with SLM_ERR_FORMAT and a "line:column: " message;
 * rendering succeeds, or fails with INVALID_ARG (template error) or RANGE (a limit) and a message,
 * never anything else; the output has n bytes and a NUL after them; spans are inside it, sorted,
 * non-overlapping and name a message of the context (or -1); rendering twice gives the same bytes.
 * Seed corpus: tests/data/corpus/jinja/ (snippets of real templates and edge cases). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "text/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char k_ctx[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"  You are helpful.  \"},"
    "{\"role\": \"user\", \"content\": \"Hi <|im_end|> caf\\u00e9 {{ x }}\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\","
    " \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": [{\"type\": \"text\", \"text\": \"42\"}]}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}],"
    "\"add_generation_prompt\": true, \"enable_thinking\": false, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static cJSON *g_ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    if (!g_ctx) g_ctx = cJSON_Parse(k_ctx);
    FUZZ_CHECK(g_ctx);
    jinja_template *t = NULL;
    slm_err e;
    err_clear(&e);
    slm_status st = jinja_parse((const char *)data, size, NULL, &t, &e);
    if (st != SLM_OK) {
        FUZZ_CHECK(st == SLM_ERR_FORMAT && t == NULL && e.msg[0] >= '1' && e.msg[0] <= '9' && strstr(e.msg, ": "));
        return 0;
    }
    jinja_limits lim = {.max_steps = 20000, .max_depth = 24, .max_output = 1 << 16, .fixed_time = 1718447400};
    char *out[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        jinja_span *sp = NULL;
        size_t ns = 0;
        err_clear(&e);
        st = jinja_render(t, g_ctx, NULL, &lim, NULL, &out[k], &n[k], &sp, &ns, &e);
        if (st != SLM_OK) {
            FUZZ_CHECK((st == SLM_ERR_INVALID_ARG || st == SLM_ERR_RANGE) && out[k] == NULL && sp == NULL);
            FUZZ_CHECK(st == SLM_ERR_INVALID_ARG || e.msg[0]);
            break;
        }
        FUZZ_CHECK(out[k] && out[k][n[k]] == '\0' && n[k] <= lim.max_output);
        size_t end = 0;
        for (size_t i = 0; i < ns; i++) {
            FUZZ_CHECK(sp[i].len > 0 && sp[i].off >= end && sp[i].off + sp[i].len <= n[k]);
            FUZZ_CHECK(sp[i].msg >= -1 && sp[i].msg < 4);
            end = sp[i].off + sp[i].len;
        }
        free(sp);
    }
    if (out[0] && out[1]) FUZZ_CHECK(n[0] == n[1] && !memcmp(out[0], out[1], n[0]));
    free(out[0]);
    free(out[1]);
    jinja_free(t);
    return 0;
}
