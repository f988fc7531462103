/* toktest.c — see toktest.h. Test-only code: aborts on allocation failure. */
#include "toktest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void *xmalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

static void *own(tt_gguf *t, void *p) {
    if (t->n_owned == t->cap_owned) {
        t->cap_owned = t->cap_owned ? t->cap_owned * 2 : 64;
        t->owned = realloc(t->owned, t->cap_owned * sizeof *t->owned);
        if (!t->owned) abort();
    }
    t->owned[t->n_owned++] = p;
    return p;
}

void tt_gguf_init(tt_gguf *t) { memset(t, 0, sizeof *t); }

void tt_gguf_free(tt_gguf *t) {
    for (size_t i = 0; i < t->n_owned; i++) free(t->owned[i]);
    free(t->owned);
    free(t->g.kv);
    memset(t, 0, sizeof *t);
}

static gguf_value *add(tt_gguf *t, const char *key) {
    /* Replace an existing key so tests can overwrite values. */
    for (uint64_t i = 0; i < t->g.n_kv; i++)
        if (strcmp(t->g.kv[i].key, key) == 0) return &t->g.kv[i].value;
    if (t->g.n_kv == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->g.kv = realloc(t->g.kv, t->cap * sizeof *t->g.kv);
        if (!t->g.kv) abort();
    }
    gguf_kv *kv = &t->g.kv[t->g.n_kv++];
    memset(kv, 0, sizeof *kv);
    kv->key = own(t, strdup(key));
    return &kv->value;
}

void tt_gguf_str(tt_gguf *t, const char *key, const char *val) {
    gguf_value *v = add(t, key);
    v->type = GGUF_STRING;
    char *s = own(t, strdup(val));
    v->v.str = (gguf_str){s, strlen(s)};
}

void tt_gguf_u32(tt_gguf *t, const char *key, uint32_t x) {
    gguf_value *v = add(t, key);
    v->type = GGUF_UINT32;
    v->v.u64 = x;
}

void tt_gguf_bool(tt_gguf *t, const char *key, bool b) {
    gguf_value *v = add(t, key);
    v->type = GGUF_BOOL;
    v->v.b = b;
}

void tt_gguf_strs(tt_gguf *t, const char *key, const char *const *s, size_t n) {
    gguf_value *v = add(t, key);
    v->type = GGUF_ARRAY;
    v->v.arr.elem_type = GGUF_STRING;
    v->v.arr.n = n;
    gguf_str *a = own(t, xmalloc(n * sizeof *a));
    for (size_t i = 0; i < n; i++) {
        char *c = own(t, strdup(s[i]));
        a[i] = (gguf_str){c, strlen(c)};
    }
    v->v.arr.strs = a;
}

void tt_gguf_arr(tt_gguf *t, const char *key, gguf_vtype elem_type, const void *src, size_t n) {
    gguf_value *v = add(t, key);
    v->type = GGUF_ARRAY;
    v->v.arr.elem_type = elem_type;
    v->v.arr.n = n;
    uint8_t *raw = own(t, xmalloc(n * 4));
    memcpy(raw, src, n * 4);
    v->v.arr.raw = raw;
}

const char *tt_cached_tokenizer(const char *name) {
    static char buf[4096];
    const char *cache = getenv("STATELM_CACHE");
    const char *home = getenv("HOME");
    if (cache) snprintf(buf, sizeof buf, "%s/tokenizers/%s/tokenizer.json", cache, name);
    else snprintf(buf, sizeof buf, "%s/.cache/statelm/tokenizers/%s/tokenizer.json", home ? home : "", name);
    return buf;
}

slm_tokenizer *tt_load_json(const char *path) {
    size_t n = 0;
    uint8_t *text = tu_read_file(path, &n);
    if (!text) return NULL;
    slm_tokenizer *t = NULL;
    slm_err e;
    err_clear(&e);
    slm_status st = tok_from_json((const char *)text, n, NULL, NULL, NULL, &t, &e);
    free(text);
    if (st != SLM_OK) fprintf(stderr, "tok_from_json(%s): %s: %s\n", path, slm_status_name(st), e.msg);
    return t;
}

bool tt_gguf_from_json(tt_gguf *t, const char *path, const char *pre) {
    size_t n = 0;
    uint8_t *text = tu_read_file(path, &n);
    if (!text) return false;
    cJSON *root = cJSON_Parse((const char *)text);
    free(text);
    if (!root) return false;
    cJSON *model = cJSON_GetObjectItem(root, "model"), *vocab = cJSON_GetObjectItem(model, "vocab");
    cJSON *merges = cJSON_GetObjectItem(model, "merges"), *added = cJSON_GetObjectItem(root, "added_tokens"), *it;
    int max_id = -1;
    cJSON_ArrayForEach(it, vocab) if (it->valueint > max_id) max_id = it->valueint;
    cJSON_ArrayForEach(it, added) if (cJSON_GetObjectItem(it, "id")->valueint > max_id) max_id = cJSON_GetObjectItem(it, "id")->valueint;
    size_t nv = (size_t)max_id + 1;
    const char **toks = xmalloc(nv * sizeof *toks);
    int32_t *types = xmalloc(nv * sizeof *types);
    for (size_t i = 0; i < nv; i++) { toks[i] = ""; types[i] = TOK_TYPE_UNUSED; }
    cJSON_ArrayForEach(it, vocab) { toks[it->valueint] = it->string; types[it->valueint] = TOK_TYPE_NORMAL; }
    cJSON_ArrayForEach(it, added) {
        int id = cJSON_GetObjectItem(it, "id")->valueint;
        toks[id] = cJSON_GetObjectItem(it, "content")->valuestring;
        types[id] = cJSON_IsTrue(cJSON_GetObjectItem(it, "special")) ? TOK_TYPE_CONTROL : TOK_TYPE_USER_DEFINED;
    }
    size_t nm = (size_t)cJSON_GetArraySize(merges);
    char **ms = xmalloc(nm * sizeof *ms);
    size_t k = 0;
    cJSON_ArrayForEach(it, merges) {
        if (cJSON_IsString(it)) {
            ms[k++] = strdup(it->valuestring);
        } else {
            const char *l = cJSON_GetArrayItem(it, 0)->valuestring, *r = cJSON_GetArrayItem(it, 1)->valuestring;
            ms[k] = xmalloc(strlen(l) + strlen(r) + 2);
            sprintf(ms[k++], "%s %s", l, r);
        }
    }
    tt_gguf_str(t, "tokenizer.ggml.model", "gpt2");
    tt_gguf_str(t, "tokenizer.ggml.pre", pre);
    tt_gguf_strs(t, "tokenizer.ggml.tokens", toks, nv);
    tt_gguf_arr(t, "tokenizer.ggml.token_type", GGUF_INT32, types, nv);
    tt_gguf_strs(t, "tokenizer.ggml.merges", (const char *const *)ms, nm);
    for (size_t i = 0; i < nm; i++) free(ms[i]);
    free(ms);
    free(toks);
    free(types);
    cJSON_Delete(root);
    return true;
}

bool tt_golden_load(tt_golden *g, const char *path) {
    memset(g, 0, sizeof *g);
    size_t n = 0;
    g->data = tu_read_file(path, &n);
    if (!g->data) return false;
    if (n < 12 || memcmp(g->data, "SLMG", 4) != 0) { free(g->data); return false; }
    memcpy(&g->n_chunks, g->data + 8, 4);
    g->byte_len = xmalloc(g->n_chunks * sizeof *g->byte_len);
    g->n_ids = xmalloc(g->n_chunks * sizeof *g->n_ids);
    g->ids = xmalloc(g->n_chunks * sizeof *g->ids);
    size_t off = 12;
    for (uint32_t i = 0; i < g->n_chunks; i++) {
        if (off + 8 > n) { tt_golden_free(g); return false; }
        memcpy(&g->byte_len[i], g->data + off, 4);
        memcpy(&g->n_ids[i], g->data + off + 4, 4);
        off += 8;
        if (off + 4ull * g->n_ids[i] > n) { tt_golden_free(g); return false; }
        g->ids[i] = (int32_t *)(void *)(g->data + off); /* 4-aligned: header and counts are 4-byte units */
        off += 4ull * g->n_ids[i];
    }
    return true;
}

void tt_golden_free(tt_golden *g) {
    free(g->byte_len);
    free(g->n_ids);
    free(g->ids);
    free(g->data);
    memset(g, 0, sizeof *g);
}

void tt_gguf_spm_tiny(tt_gguf *t, bool add_space_prefix) {
    size_t n = 0;
    uint8_t *text = tu_read_file(tu_data_path("tokenizer/spm_tiny.json"), &n);
    if (!text) abort();
    cJSON *root = cJSON_Parse((const char *)text);
    free(text);
    if (!root) abort();
    cJSON *toks = cJSON_GetObjectItem(root, "tokens"), *scores = cJSON_GetObjectItem(root, "scores");
    cJSON *types = cJSON_GetObjectItem(root, "token_type");
    size_t nv = (size_t)cJSON_GetArraySize(toks);
    const char **tv = xmalloc(nv * sizeof *tv);
    float *sv = xmalloc(nv * sizeof *sv);
    int32_t *yv = xmalloc(nv * sizeof *yv);
    for (size_t i = 0; i < nv; i++) {
        tv[i] = cJSON_GetArrayItem(toks, (int)i)->valuestring;
        sv[i] = (float)cJSON_GetArrayItem(scores, (int)i)->valuedouble;
        yv[i] = cJSON_GetArrayItem(types, (int)i)->valueint;
    }
    tt_gguf_init(t);
    tt_gguf_str(t, "tokenizer.ggml.model", "llama");
    tt_gguf_strs(t, "tokenizer.ggml.tokens", tv, nv);
    tt_gguf_arr(t, "tokenizer.ggml.scores", GGUF_FLOAT32, sv, nv);
    tt_gguf_arr(t, "tokenizer.ggml.token_type", GGUF_INT32, yv, nv);
    tt_gguf_u32(t, "tokenizer.ggml.bos_token_id", 1);
    tt_gguf_u32(t, "tokenizer.ggml.eos_token_id", 2);
    tt_gguf_u32(t, "tokenizer.ggml.unknown_token_id", 0);
    if (add_space_prefix) tt_gguf_bool(t, "tokenizer.ggml.add_space_prefix", true);
    free(tv);
    free(sv);
    free(yv);
    cJSON_Delete(root);
}
