/* embed.c — the OpenAI embeddings endpoint of statelm serve (embed.h).
 *
 * Request: {"input": INPUT | [INPUT, ...], "model"?: string or null, "encoding_format"?: "float" |
 * "base64", "dimensions"?: n_embd, "user"?: string}, an INPUT (llama-server's shapes) a string, a
 * list of token ids and strings, {"prompt_string": string or such a list} or {"content": [text
 * parts]}; a list with a number in it is one INPUT. Strings are tokenized as /v1/completions
 * prompts are (BOS when the model adds one, before a leading string only; special-token text
 * matched). Each input is embedded on its own from position 0 (slm_session_reset, then
 * slm_session_embed with the embedder's pooling, L2-normalised). Response: {"object": "list",
 * "data": [{"object": "embedding", "index": i, "embedding": [n_embd floats] | base64 of the
 * float32 little-endian bytes}], "model", "usage": {"prompt_tokens", "total_tokens"}}; with pooling
 * none an embedding is one vector per token ([[...], ...]; base64: the rows back to back). */
#include "embed.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/buf.h"

struct serve_embedder {
    const slm_model *m;
    const slm_tokenizer *tok;
    slm_session *s;
    slm_pooling pooling;
    int32_t d, n_ctx, n_vocab;
    pthread_mutex_t mu; /* guards s */
};

typedef struct embed_input {
    int32_t *ids;
    size_t n;
} embed_input;

bool serve_embed_parse_pooling(const char *text, slm_pooling *out) {
    static const slm_pooling all[] = {SLM_POOLING_NONE, SLM_POOLING_MEAN, SLM_POOLING_CLS, SLM_POOLING_LAST};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!strcmp(text, slm_pooling_name(all[i]))) return *out = all[i], true;
    return false;
}

slm_status serve_embedder_create(const slm_model *m, slm_pooling pooling, int32_t n_ctx, int32_t n_threads,
                                 serve_embedder **out, char *err, size_t err_cap) {
    *out = NULL;
    if (pooling == SLM_POOLING_MODEL) {
        int32_t mp = slm_model_pooling(m);
        if (mp == SLM_POOLING_MODEL) pooling = SLM_POOLING_LAST;
        else if (mp >= SLM_POOLING_NONE && mp <= SLM_POOLING_LAST) pooling = (slm_pooling)mp;
        else {
            snprintf(err, err_cap, "the model's pooling_type is %d (%s), which statelm does not run; choose "
                     "--pooling last|mean|cls|none", (int)mp, mp == SLM_POOLING_RANK ? "rank" : "unknown");
            return SLM_ERR_UNSUPPORTED;
        }
    }
    serve_embedder *e = calloc(1, sizeof *e);
    if (!e) return snprintf(err, err_cap, "out of memory"), SLM_ERR_NOMEM;
    e->m = m;
    e->tok = slm_model_tokenizer(m);
    e->pooling = pooling;
    e->d = slm_model_n_embd(m);
    e->n_vocab = slm_model_n_vocab(m);
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = n_ctx;
    sp.n_threads = n_threads;
    sp.embeddings = true;
    cli_apply_env(&sp, NULL);
    slm_status st = slm_session_create(m, &sp, &e->s, err, err_cap);
    if (st != SLM_OK) {
        cli_name_env(err, err_cap);
        free(e);
        return st;
    }
    e->n_ctx = slm_session_n_ctx(e->s);
    pthread_mutex_init(&e->mu, NULL);
    *out = e;
    return SLM_OK;
}

void serve_embedder_destroy(serve_embedder *e) {
    if (!e) return;
    slm_session_destroy(e->s);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

slm_pooling serve_embedder_pooling(const serve_embedder *e) { return e->pooling; }

/* RFC 4648 base64 of n bytes (NUL-terminated, malloc'd); NULL when out of memory. */
static char *base64(const uint8_t *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* Appends id to in (grown by doubling); false when out of memory. */
static bool push_id(embed_input *in, size_t *cap, int32_t id) {
    if (in->n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        int32_t *p = realloc(in->ids, c * sizeof *p);
        if (!p) return false;
        in->ids = p, *cap = c;
    }
    in->ids[in->n++] = id;
    return true;
}

/* Appends the tokens of text (BOS first when bos and the model adds one, special-token text matched). */
static bool push_text(const serve_embedder *e, const char *text, bool bos, const char *where, embed_input *in,
                      size_t *cap, char *msg, size_t mcap) {
    size_t len = strlen(text), room = len + 16, n = 0;
    int32_t *tmp = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(tmp);
        if (!(tmp = malloc(room * sizeof *tmp))) return snprintf(msg, mcap, "out of memory"), false;
        uint32_t flags = SLM_TOKENIZE_PARSE_SPECIAL | (bos ? SLM_TOKENIZE_ADD_BOS : 0);
        slm_status st = slm_tokenizer_encode(e->tok, text, len, flags, tmp, room, &n);
        if (st == SLM_OK) break;
        if (st != SLM_ERR_RANGE || attempt) {
            free(tmp);
            return snprintf(msg, mcap, "%s cannot be tokenized (%s)", where, slm_status_name(st)), false;
        }
        room = n;
    }
    for (size_t i = 0; i < n; i++)
        if (!push_id(in, cap, tmp[i])) return free(tmp), snprintf(msg, mcap, "out of memory"), false;
    free(tmp);
    return true;
}

/* One input (llama-server's shapes): a string; a list of token ids and strings (the strings' tokens
 * in place, BOS only before a leading string); {"prompt_string": that}; {"content": [parts]} whose
 * text parts are joined. where names it ("input" or "input[k]") in messages; an input with no tokens
 * is refused (a model without BOS and an empty string). */
static bool read_entry(const serve_embedder *e, const cJSON *x, const char *where, embed_input *in,
                       const char **code, char *msg, size_t mcap) {
    size_t cap = 0;
    const cJSON *ps = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "prompt_string") : NULL;
    const cJSON *content = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "content") : NULL;
    if (ps) x = ps;
    if (cJSON_IsString(x)) {
        if (!push_text(e, x->valuestring, true, where, in, &cap, msg, mcap)) return false;
    } else if (cJSON_IsArray(x) && !content) {
        size_t i = 0;
        const cJSON *y;
        cJSON_ArrayForEach(y, x) {
            if (cJSON_IsString(y)) {
                char sub[64];
                snprintf(sub, sizeof sub, "%s[%zu]", where, i);
                if (!push_text(e, y->valuestring, i == 0, sub, in, &cap, msg, mcap)) return false;
            } else if (!cJSON_IsNumber(y) || y->valuedouble != floor(y->valuedouble) || y->valuedouble < 0 ||
                       y->valuedouble >= e->n_vocab) {
                return snprintf(msg, mcap, "%s[%zu] is not a token id in [0, %d) or a string", where, i, e->n_vocab),
                       false;
            } else if (!push_id(in, &cap, (int32_t)y->valuedouble)) {
                return snprintf(msg, mcap, "out of memory"), false;
            }
            i++;
        }
    } else if (content && !ps) {
        if (!cJSON_IsArray(content)) {
            *code = "invalid_type";
            return snprintf(msg, mcap, "%s.content must be a list of content parts", where), false;
        }
        buf text = buf_make(NULL);
        size_t k = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, content) { /* text parts joined as they are, as llama-server joins them here */
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
            bool is_text = cJSON_IsString(type) && !strcmp(type->valuestring, "text");
            if (!is_text || !cJSON_IsString(t)) {
                buf_free(&text);
                if (cJSON_IsString(type) && (!strcmp(type->valuestring, "image_url") ||
                                             !strcmp(type->valuestring, "input_audio") ||
                                             !strcmp(type->valuestring, "input_video")))
                    return snprintf(msg, mcap, "%s.content[%zu] is an '%s' part: this server embeds text only", where,
                                    k, type->valuestring), false;
                return snprintf(msg, mcap, "%s.content[%zu] must be {\"type\": \"text\", \"text\": string}", where, k),
                       false;
            }
            buf_puts(&text, t->valuestring);
            k++;
        }
        bool ok = !text.oom && push_text(e, text.p ? text.p : "", true, where, in, &cap, msg, mcap);
        if (text.oom) snprintf(msg, mcap, "out of memory");
        buf_free(&text);
        if (!ok) return false;
    } else {
        *code = "invalid_type";
        return snprintf(msg, mcap, "%s must be a string, a list of token ids and strings, {\"prompt_string\": ...} or "
                        "{\"content\": [parts]}", where), false;
    }
    if (in->n == 0) return snprintf(msg, mcap, "%s is empty (it has no tokens)", where), false;
    return true;
}

/* The inputs of the request's "input" into *ins / *n_ins; 400 with msg and *code on bad input. A list
 * with a number in it is one input (of token ids, strings among them); any other list is a list of
 * inputs (read_entry), as llama-server reads it. */
static unsigned read_inputs(const serve_embedder *e, const cJSON *input, embed_input **ins, size_t *n_ins,
                            const char **code, char *msg, size_t cap) {
    *code = "invalid_value";
    const cJSON *x;
    bool many = cJSON_IsArray(input);
    if (many) cJSON_ArrayForEach(x, input) many = many && !cJSON_IsNumber(x);
    if (!input || cJSON_IsNull(input) || cJSON_IsNumber(input) || cJSON_IsBool(input)) {
        *code = input ? "invalid_type" : "missing_required_parameter";
        snprintf(msg, cap, "'input' must be a string, a list of token ids and strings, a list of those, "
                           "{\"prompt_string\": ...} or {\"content\": [parts]}");
        return 400;
    }
    size_t n = many ? (size_t)cJSON_GetArraySize(input) : 1;
    if (n == 0) return snprintf(msg, cap, "'input' is an empty list"), 400;
    if (n > SERVE_EMBED_MAX_INPUTS)
        return snprintf(msg, cap, "'input' has %zu items; the limit is %d per request", n, SERVE_EMBED_MAX_INPUTS), 400;
    if (!(*ins = calloc(n, sizeof **ins))) return snprintf(msg, cap, "out of memory"), 500;
    *n_ins = n;
    if (!many) return read_entry(e, input, "input", &(*ins)[0], code, msg, cap) ? 0 : 400;
    size_t i = 0;
    cJSON_ArrayForEach(x, input) {
        char where[32];
        snprintf(where, sizeof where, "input[%zu]", i);
        if (!read_entry(e, x, where, &(*ins)[i], code, msg, cap)) return 400;
        i++;
    }
    return 0;
}

static void free_inputs(embed_input *ins, size_t n) {
    for (size_t i = 0; ins && i < n; i++) free(ins[i].ids);
    free(ins);
}

/* data[i] of the response: the vectors of one input (rows of d floats). */
static cJSON *embedding_item(const float *v, size_t rows, int32_t d, bool b64, bool nested, size_t index) {
    cJSON *item = cJSON_CreateObject();
    if (!item) return NULL;
    cJSON_AddStringToObject(item, "object", "embedding");
    cJSON_AddNumberToObject(item, "index", (double)index);
    if (b64) {
        char *text = base64((const uint8_t *)v, rows * (size_t)d * sizeof(float)); /* float32 LE: the hosts we build for */
        if (!text || !cJSON_AddStringToObject(item, "embedding", text)) {
            free(text);
            cJSON_Delete(item);
            return NULL;
        }
        free(text);
        return item;
    }
    cJSON *arr = cJSON_AddArrayToObject(item, "embedding");
    for (size_t r = 0; arr && r < rows; r++) {
        cJSON *row = nested ? cJSON_CreateArray() : arr;
        for (int32_t k = 0; row && k < d; k++) {
            char num[32]; /* 9 significant digits: the float32 value exactly, after a round trip */
            snprintf(num, sizeof num, "%.9g", (double)v[r * (size_t)d + (size_t)k]);
            cJSON_AddItemToArray(row, cJSON_CreateRaw(num));
        }
        if (nested && row) cJSON_AddItemToArray(arr, row);
    }
    return item;
}

unsigned serve_embedder_answer(serve_embedder *e, const char *body, size_t n_body, const char *model_id,
                               cJSON **response, const char **code, char *msg, size_t cap) {
    *response = NULL;
    *code = "invalid_request";
    msg[0] = '\0';
    cJSON *root = cJSON_ParseWithLength(body, n_body);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(msg, cap, "the body is not a JSON object");
        return 400;
    }
    unsigned status = 400;
    embed_input *ins = NULL;
    size_t n_ins = 0;
    float *vec = NULL;
    cJSON *resp = NULL;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    bool b64 = false;
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model)) {
        *code = "invalid_type";
        snprintf(msg, cap, "'model' must be a string or null");
        goto done;
    }
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64"))) {
            *code = "invalid_value";
            snprintf(msg, cap, "'encoding_format' must be \"float\" or \"base64\"");
            goto done;
        }
        b64 = !strcmp(fmt->valuestring, "base64");
    }
    if (dims && !cJSON_IsNull(dims) && (!cJSON_IsNumber(dims) || dims->valuedouble != e->d)) {
        *code = "invalid_value";
        snprintf(msg, cap, "'dimensions' must be %d, this model's embedding size (statelm does not truncate)", e->d);
        goto done;
    }
    if ((status = read_inputs(e, cJSON_GetObjectItemCaseSensitive(root, "input"), &ins, &n_ins, code, msg, cap)))
        goto done;
    size_t total = 0, most = 0;
    for (size_t i = 0; i < n_ins; i++) {
        if (ins[i].n > (size_t)e->n_ctx) {
            *code = "context_length_exceeded";
            snprintf(msg, cap, "input[%zu] is too large: %zu tokens; this server's context limit is %d tokens", i,
                     ins[i].n, e->n_ctx);
            status = 400;
            goto done;
        }
        total += ins[i].n;
        if (ins[i].n > most) most = ins[i].n;
    }
    bool none = e->pooling == SLM_POOLING_NONE;
    size_t rows_max = none ? most : 1;
    resp = cJSON_CreateObject();
    vec = malloc(rows_max * (size_t)e->d * sizeof *vec);
    cJSON *data = resp && cJSON_AddStringToObject(resp, "object", "list") ? cJSON_AddArrayToObject(resp, "data") : NULL;
    status = 500;
    *code = "server_error";
    if (!vec || !data) {
        snprintf(msg, cap, "out of memory");
        goto done;
    }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n_ins; i++) {
        size_t n_out = 0;
        slm_session_reset(e->s);
        slm_status st = slm_session_embed(e->s, ins[i].ids, ins[i].n, e->pooling, true, vec, rows_max * (size_t)e->d,
                                          &n_out);
        bool finite = true;
        for (size_t k = 0; st == SLM_OK && k < n_out; k++) finite = finite && isfinite(vec[k]);
        cJSON *item = st == SLM_OK && finite ? embedding_item(vec, n_out / (size_t)e->d, e->d, b64, none, i) : NULL;
        if (!item) {
            snprintf(msg, cap, "input[%zu]: %s", i, st != SLM_OK ? slm_session_errmsg(e->s)
                                                     : !finite ? "the model computed a non-finite value"
                                                               : "out of memory");
            if (st == SLM_ERR_RANGE) status = 400, *code = "invalid_value"; /* an id the tokenizer lacks */
            pthread_mutex_unlock(&e->mu);
            goto done;
        }
        cJSON_AddItemToArray(data, item);
    }
    slm_session_reset(e->s);
    pthread_mutex_unlock(&e->mu);
    cJSON_AddStringToObject(resp, "model", model_id);
    cJSON *usage = cJSON_AddObjectToObject(resp, "usage");
    cJSON_AddNumberToObject(usage, "prompt_tokens", (double)total);
    cJSON_AddNumberToObject(usage, "total_tokens", (double)total);
    *response = resp;
    resp = NULL;
    status = 200;
    *code = NULL;
done:
    cJSON_Delete(resp);
    free(vec);
    free_inputs(ins, n_ins);
    cJSON_Delete(root);
    return status;
}
