/* fuzz_serve_request.c — libFuzzer target for the request mappings of `statelm serve`
 * (tools/serve/request.h: request.c, messages.c, responses.c). The first byte picks the API
 * (0 chat, 1 completions, 2 /completion, 3 Anthropic messages, 4 messages count_tokens,
 * 5 Responses); the rest is the body. Contracts: a refused body has a 4xx/5xx status and a
 * message; an accepted one has 1..8 choices, at most 4 stops, messages with a known role and
 * content for the chat APIs, a thinking budget and id_slot >= 0; validation against limits
 * either passes or names a 4xx; the Responses resolution with no record (404 when a previous id
 * is given) or with the body itself as a record never crashes and keeps every message whole.
 * Seed corpus: tests/data/corpus/serve_request/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef bool (*map_fn)(const cJSON *, const slm_sampler_params *, sreq *, sreq_err *);

static void check_msgs(const sreq *r) {
    for (size_t i = 0; i < r->n_msgs; i++) {
        const sreq_msg *m = &r->msgs[i];
        FUZZ_CHECK(m->role && m->content);
        FUZZ_CHECK(!strcmp(m->role, "system") || !strcmp(m->role, "user") || !strcmp(m->role, "assistant") ||
                   !strcmp(m->role, "tool"));
        cJSON *f = m->fields ? cJSON_Parse(m->fields) : NULL; /* a message's further members: an object */
        FUZZ_CHECK(!m->fields || cJSON_IsObject(f));
        cJSON_Delete(f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const map_fn maps[] = {sreq_from_chat,     sreq_from_completions,    sreq_from_completion,
                                  sreq_from_messages, sreq_from_messages_count, sreq_from_responses};
    if (size < 1) return 0;
    map_fn map = maps[data[0] % 6];
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    sreq_err e = {0};
    cJSON *root = sreq_parse_json(body, n, &e);
    if (!root) {
        FUZZ_CHECK(e.status == 400 && e.msg[0]);
        return 0;
    }
    slm_sampler_params sp = slm_sampler_params_default();
    sreq r;
    bool ok = map(root, &sp, &r, &e);
    if (!ok) {
        FUZZ_CHECK(e.status >= 400 && e.status < 600 && e.msg[0]);
    } else {
        FUZZ_CHECK(r.n >= 1 && r.n <= SREQ_MAX_N && r.n_stops <= SREQ_MAX_STOPS && r.max_tokens >= 0);
        FUZZ_CHECK(r.think_budget >= 0 && (!r.has_id_slot || r.id_slot >= 0));
        check_msgs(&r);
        if (serve_api_is_chat(r.api)) FUZZ_CHECK(r.n_msgs > 0);
        if (r.api == SAPI_RESPONSES) {
            sreq_err re = {0};
            char *self = cJSON_PrintUnformatted(root);
            bool resolved = sreq_responses_resolve(&r, r.previous_id ? self : NULL, &re);
            if (!resolved) FUZZ_CHECK(re.status >= 400 && re.status < 600 && re.msg[0]);
            free(self);
            check_msgs(&r);
        }
        const sreq_limits lim = {4096, 1000};
        sreq_err ve = {0};
        if (!sreq_validate(&r, &lim, &ve)) FUZZ_CHECK(ve.status >= 400 && ve.status < 500 && ve.msg[0]);
    }
    sreq_free(&r);
    cJSON_Delete(root);
    return 0;
}
