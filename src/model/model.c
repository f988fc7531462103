/* model.c — slm_model_load and the model accessors of the public API. Detects the format (GGUF
 * magic or a folder with config.json), opens it through format/, builds the canonical tensor
 * directory (HF names mapped to GGUF names), reads hyper-parameters through the architecture
 * table, rewrites HF tensors to the GGUF layout (hf_layout.c), and attaches the tokenizer and chat
 * template. A failure at any step releases everything and leaves *out NULL. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: the fingerprint never allocates */
#include <xxhash.h>

#include "base/dtype.h"
#include "base/params.h"
#include "format/quantize.h"
#include "model/hf_layout.h"
#include "model/model.h"
#include "text/jinja.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"

SLM_API slm_model_params slm_model_params_default(void) {
    slm_model_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    return p;
}

const mdl_tensor *mdl_find_tensor(const slm_model *m, const char *name) {
    for (int32_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

const mdl_tensor *mdl_find_tensorf(const slm_model *m, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return mdl_find_tensor(m, name);
}

static slm_status add_tensor(slm_model *m, const char *canonical, const char *file_name, uint32_t type, uint32_t n_dims,
                             const int64_t ne[4], uint64_t size_bytes, const uint8_t *data, slm_err *e) {
    mdl_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = al_strdup(&m->alloc, canonical);
    if (!t->name) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    t->file_name = file_name;
    t->type = type;
    t->n_dims = (int32_t)(n_dims ? n_dims : 1);
    for (int d = 0; d < 4; d++) t->ne[d] = ne[d];
    /* HF depthwise conv weights are (C, 1, K): ggml order (K, 1, C); squeeze to (K, C) as GGUF. */
    if (t->n_dims == 3 && t->ne[1] == 1) {
        t->ne[1] = t->ne[2];
        t->ne[2] = 1;
        t->n_dims = 2;
    }
    t->size_bytes = size_bytes;
    t->data = data;
    m->n_tensors++;
    m->weight_bytes += size_bytes;
    if (mdl_find_tensor(m, canonical) != t) return err_set(e, SLM_ERR_FORMAT, "tensor %s appears twice", canonical);
    return SLM_OK;
}

static slm_status load_gguf(slm_model *m, slm_err *e) {
    slm_status st = gguf_open(&m->gguf, m->path, &m->alloc, e);
    if (st) return st;
    gguf_str arch;
    st = gguf_get_str(&m->gguf, "general.architecture", &arch, e);
    if (st == SLM_ERR_NOT_FOUND) return err_set(e, SLM_ERR_FORMAT, "missing metadata key general.architecture");
    if (st) return st;
    char name[64];
    snprintf(name, sizeof name, "%.*s", arch.len < 63 ? (int)arch.len : 63, arch.ptr);
    m->arch = arch_find(name);
    if (!m->arch) {
        char supported[256];
        arch_supported_list(supported, sizeof supported);
        return err_set(e, SLM_ERR_UNSUPPORTED, "unsupported architecture '%s' (supported: %s)", name, supported);
    }
    gguf_str gname;
    if (gguf_get_str(&m->gguf, "general.name", &gname, e) == SLM_OK &&
        !(m->name = al_strndup(&m->alloc, gname.ptr, (size_t)gname.len)))
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    err_clear(e);
    if (m->gguf.n_tensors > (uint64_t)INT32_MAX) return err_set(e, SLM_ERR_FORMAT, "too many tensors");
    m->tensors = al_calloc(&m->alloc, (size_t)m->gguf.n_tensors, sizeof(mdl_tensor));
    m->owned = al_calloc(&m->alloc, (size_t)m->gguf.n_tensors, sizeof *m->owned);
    if ((!m->tensors || !m->owned) && m->gguf.n_tensors) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) {
        const gguf_tensor *t = &m->gguf.tensors[i];
        if ((st = add_tensor(m, t->name, t->name, t->type, t->n_dims, t->ne, t->size_bytes, t->data, e))) return st;
    }
    if ((st = m->arch->hparams_gguf(m, e))) return st;
    st = tok_from_gguf(&m->gguf, &m->alloc, &m->tok, e);
    if (st == SLM_ERR_NOT_FOUND) {
        err_clear(e);
        st = SLM_OK;
    }
    if (st) {
        err_prefix(e, "tokenizer: ");
        return st;
    }
    gguf_str tmpl;
    if (gguf_get_str(&m->gguf, "tokenizer.chat_template", &tmpl, e) == SLM_OK) {
        m->chat_template = al_strndup(&m->alloc, tmpl.ptr, (size_t)tmpl.len);
        if (!m->chat_template) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    err_clear(e);
    return SLM_OK;
}

static slm_status load_hf_chat_template(slm_model *m, slm_err *e) {
    const cJSON *ct = m->hf.tok_config ? cJSON_GetObjectItemCaseSensitive(m->hf.tok_config, "chat_template") : NULL;
    const char *text = NULL;
    if (cJSON_IsString(ct)) {
        text = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        const cJSON *item;
        cJSON_ArrayForEach(item, ct) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(item, "name");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "template");
            if (cJSON_IsString(n) && cJSON_IsString(t) && strcmp(n->valuestring, "default") == 0) text = t->valuestring;
        }
    }
    if (text) {
        m->chat_template = al_strdup(&m->alloc, text);
        return m->chat_template ? SLM_OK : err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", m->path);
    char *buf = NULL;
    slm_status st = file_read_all(path, HF_MAX_JSON_BYTES, &buf, NULL, e);
    if (st == SLM_ERR_NOT_FOUND) {
        err_clear(e);
        return SLM_OK;
    }
    if (st) return st;
    m->chat_template = al_strdup(&m->alloc, buf);
    free(buf);
    return m->chat_template ? SLM_OK : err_set(e, SLM_ERR_NOMEM, "out of memory");
}

static slm_status load_hf(slm_model *m, slm_err *e) {
    slm_status st = hf_config_open(&m->hf, m->path, e);
    if (st) return st;
    const char *model_type = NULL;
    st = hf_get_str(m->hf.config, "model_type", &model_type, e);
    if (st == SLM_ERR_NOT_FOUND) return err_set(e, SLM_ERR_FORMAT, "config.json: missing \"model_type\"");
    if (st) return st;
    m->arch = arch_find_hf(model_type);
    if (!m->arch) {
        char supported[256];
        arch_supported_list(supported, sizeof supported);
        return err_set(e, SLM_ERR_UNSUPPORTED, "unsupported architecture '%s' (supported: %s)", model_type, supported);
    }
    const char *slash = strrchr(m->path, '/');
    if (!(m->name = al_strdup(&m->alloc, slash && slash[1] ? slash + 1 : m->path)))
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    if ((st = st_open_dir(&m->st, m->path, &m->alloc, e))) return st;
    if (m->st.n_tensors > (uint64_t)INT32_MAX) return err_set(e, SLM_ERR_FORMAT, "too many tensors");
    m->tensors = al_calloc(&m->alloc, (size_t)m->st.n_tensors, sizeof(mdl_tensor));
    m->owned = al_calloc(&m->alloc, 3 * (size_t)m->st.n_tensors, sizeof *m->owned);
    if ((!m->tensors || !m->owned) && m->st.n_tensors) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    int64_t n_layer = 0;
    if (hf_get_int(m->hf.text, "num_hidden_layers", &n_layer, NULL) != SLM_OK || n_layer < 0 || n_layer > MDL_MAX_LAYERS)
        n_layer = 0; /* the architecture's reader reports it */
    for (uint64_t i = 0; i < m->st.n_tensors; i++) {
        const st_tensor *t = &m->st.tensors[i];
        char canonical[256];
        if (!m->arch->hf_tensor_name(t->name, (int32_t)n_layer, canonical, sizeof canonical)) {
            log_msg(&m->log, SLM_LOG_DEBUG, "ignoring tensor %s", t->name);
            continue;
        }
        if ((st = add_tensor(m, canonical, t->name, t->type, t->n_dims, t->ne, t->size_bytes, t->data, e))) return st;
    }
    if ((st = m->arch->hparams_hf(m, e)) || (st = hf_layout_model(m, e))) return st;
    st = tok_from_hf(&m->hf, &m->alloc, &m->tok, e);
    if (st == SLM_ERR_NOT_FOUND) {
        err_clear(e);
        st = SLM_OK;
    }
    if (st) {
        err_prefix(e, "tokenizer: ");
        return st;
    }
    return load_hf_chat_template(m, e);
}

static void add_hparam(slm_model *m, const char *name, double value) {
    m->hparams[m->n_hparams].name = name;
    m->hparams[m->n_hparams].value = value;
    m->n_hparams++;
}

static slm_status build_hparam_list(slm_model *m, slm_err *e) {
    m->hparams = al_calloc(&m->alloc, 40, sizeof(mdl_hparam_entry));
    if (!m->hparams) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    const mdl_hparams *hp = &m->hp;
    add_hparam(m, "n_layer", hp->n_layer);
    add_hparam(m, "n_embd", hp->n_embd);
    add_hparam(m, "n_ff", hp->n_ff);
    add_hparam(m, "n_vocab", hp->n_vocab);
    add_hparam(m, "n_ctx_train", hp->n_ctx_train);
    add_hparam(m, "n_head", hp->n_head);
    add_hparam(m, "n_head_kv", hp->n_head_kv);
    add_hparam(m, "head_dim", hp->head_dim);
    add_hparam(m, "head_dim_v", hp->head_dim_v);
    add_hparam(m, "n_rot", hp->n_rot);
    add_hparam(m, "rope_base", hp->rope_base);
    add_hparam(m, "rope_neox", hp->rope_style == MDL_ROPE_NEOX);
    add_hparam(m, "rms_eps", hp->rms_eps);
    add_hparam(m, "tied_embeddings", hp->tied_embeddings);
    add_hparam(m, "qk_norm", hp->qk_norm);
    if (strcmp(m->arch->name, "lfm2") == 0) add_hparam(m, "conv_kernel", hp->conv_kernel);
    if (strcmp(m->arch->name, "qwen35") == 0) {
        add_hparam(m, "attn_output_gate", hp->attn_output_gate);
        add_hparam(m, "norm_plus_one", hp->norm_plus_one);
        add_hparam(m, "ssm_conv_kernel", hp->ssm_conv_kernel);
        add_hparam(m, "ssm_n_k_heads", hp->ssm_n_k_heads);
        add_hparam(m, "ssm_n_v_heads", hp->ssm_n_v_heads);
        add_hparam(m, "ssm_head_k_dim", hp->ssm_head_k_dim);
        add_hparam(m, "ssm_head_v_dim", hp->ssm_head_v_dim);
        add_hparam(m, "ssm_v_heads_tiled", hp->ssm_v_heads_tiled);
        if (hp->n_nextn) add_hparam(m, "nextn_predict_layers", hp->n_nextn);
    }
    if (strcmp(m->arch->name, "gemma3") == 0) {
        add_hparam(m, "norm_plus_one", hp->norm_plus_one);
        add_hparam(m, "sliding_window", hp->swa_window);
        add_hparam(m, "rope_base_swa", hp->rope_base_swa);
        add_hparam(m, "rope_freq_scale", hp->rope_freq_scale);
        add_hparam(m, "attn_scale", hp->attn_scale);
    }
    return SLM_OK;
}

/* Hash of what the Program depends on: architecture, hyper-parameters, layer kinds, and each
 * tensor's canonical name, type and shape (not the weights' values, so it is cheap). */
static void compute_fingerprint(slm_model *m) {
    XXH3_state_t state;
    XXH3_state_t *h = &state;
    XXH3_128bits_reset(h);
    XXH3_128bits_update(h, m->arch->name, strlen(m->arch->name) + 1);
    for (int32_t i = 0; i < m->n_hparams; i++) {
        XXH3_128bits_update(h, m->hparams[i].name, strlen(m->hparams[i].name) + 1);
        XXH3_128bits_update(h, &m->hparams[i].value, sizeof m->hparams[i].value);
    }
    XXH3_128bits_update(h, m->hp.layer_kind, sizeof(m->hp.layer_kind[0]) * (size_t)m->hp.n_layer);
    for (int32_t i = 0; i < m->n_tensors; i++) {
        const mdl_tensor *t = &m->tensors[i];
        XXH3_128bits_update(h, t->name, strlen(t->name) + 1);
        XXH3_128bits_update(h, &t->type, sizeof t->type);
        XXH3_128bits_update(h, t->ne, sizeof t->ne);
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
    memcpy(m->fingerprint, c.digest, 16);
}

SLM_API void slm_model_fingerprint(const slm_model *m, uint8_t out[16]) {
    if (out) memcpy(out, m ? m->fingerprint : (const uint8_t[16]){0}, 16);
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Frees p if it is one of m's owned buffers (a rewritten tensor replaced by its quantised copy). */
static void release_owned(slm_model *m, const uint8_t *p) {
    for (int32_t i = 0; i < m->n_owned; i++) {
        if (m->owned[i] != p) continue;
        al_free_aligned(&m->alloc, m->owned[i]);
        m->owned[i] = m->owned[--m->n_owned];
        return;
    }
}

/* slm_model_params.quantize: each weight gets the type slm_quantize would give it (quantize_plan
 * over the canonical names) and the bytes it would write (quantize_tensor), in buffers the model
 * owns; the mapped source stays untouched. On failure the model is destroyed by the caller. */
static slm_status quantize_on_load(slm_model *m, const char *type, slm_err *e) {
    const uint64_t n = (uint64_t)m->n_tensors;
    gguf_tensor *ts = al_calloc(&m->alloc, (size_t)n, sizeof *ts);
    const gguf_tensor **order = al_calloc(&m->alloc, (size_t)n, sizeof *order);
    uint32_t *types = al_calloc(&m->alloc, (size_t)n, sizeof *types), file_type = 0;
    slm_status st = SLM_OK;
    if (n && (!ts || !order || !types)) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        const mdl_tensor *t = &m->tensors[i];
        ts[i].name = t->name;
        ts[i].type = t->type;
        ts[i].n_dims = (uint32_t)t->n_dims;
        for (int d = 0; d < 4; d++) ts[i].ne[d] = t->ne[d];
        ts[i].size_bytes = t->size_bytes;
        ts[i].data = t->data;
    }
    /* llama.cpp's rules count layers by block_count: the GGUF's own, else the config's */
    char key[96];
    int64_t n_layer = m->hp.n_layer, n_expert = 0;
    snprintf(key, sizeof key, "%s.block_count", m->arch->name);
    if (m->format == SLM_FORMAT_GGUF && gguf_get_i64(&m->gguf, key, &n_layer, NULL) != SLM_OK) n_layer = m->hp.n_layer;
    snprintf(key, sizeof key, "%s.expert_count", m->arch->name);
    if (m->format == SLM_FORMAT_GGUF && gguf_get_i64(&m->gguf, key, &n_expert, NULL) != SLM_OK) n_expert = 0;
    slm_quantize_params qp = slm_quantize_params_default();
    if ((st = quantize_plan(type, &qp, m->arch->name, n_layer, n_expert, ts, n, order, types, &file_type, e)))
        goto done;
    for (uint64_t i = 0; i < n; i++) {
        mdl_tensor *t = &m->tensors[order[i] - ts];
        uint64_t bytes = 0;
        if (types[i] == t->type) continue;
        quantize_tensor_bytes(order[i], types[i], &bytes);
        uint8_t *buf = al_malloc_large(&m->alloc, (size_t)bytes);
        if (!buf) {
            st = err_set(e, SLM_ERR_NOMEM, "out of memory quantising %s", t->name);
            goto done;
        }
        m->owned[m->n_owned++] = buf;
        if ((st = quantize_tensor(order[i], types[i], buf, m->n_threads, &m->alloc, e))) goto done;
        release_owned(m, t->data);
        m->weight_bytes = m->weight_bytes - t->size_bytes + bytes;
        t->type = types[i];
        t->data = buf;
        t->size_bytes = bytes;
    }
done:
    al_free(&m->alloc, ts);
    al_free(&m->alloc, order);
    al_free(&m->alloc, types);
    return st;
}

SLM_API slm_status slm_model_load(const char *path, const slm_model_params *params, slm_model **out, char *err,
                                  size_t err_cap) {
    if (out) *out = NULL;
    slm_err e;
    slm_model_params p = slm_model_params_default();
    slm_allocator a;
    if (params_load_begin("slm_model_load", path, out != NULL, params, &p, &a, &e, err, err_cap)) return e.status;
    slm_model *m = al_calloc(&a, 1, sizeof *m);
    slm_status st;
    if (!m) {
        st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    m->alloc = a;
    pthread_mutex_init(&m->rt_mu, NULL);
    m->log.fn = p.log_fn;
    m->log.user_data = p.log_user_data;
    m->n_threads = p.n_threads > 0 ? p.n_threads : (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (m->n_threads < 1) m->n_threads = 1;
    m->path = al_strdup(&a, path);
    if (!m->path) {
        st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    m->format = is_dir(path) ? SLM_FORMAT_HF : SLM_FORMAT_GGUF;
    st = m->format == SLM_FORMAT_HF ? load_hf(m, &e) : load_gguf(m, &e);
    if (st) goto fail;
    if (p.quantize && (st = quantize_on_load(m, p.quantize, &e))) goto fail;
    if (!m->name && !(m->name = al_strdup(&a, ""))) {
        st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = mdl_states_init(m, &e)) || (st = build_hparam_list(m, &e))) goto fail;
    compute_fingerprint(m);
    *out = m;
    return SLM_OK;
fail:
    if (strncmp(e.msg, path, strlen(path)) != 0) err_prefix(&e, "%s: ", path);
    err_copy_out(&e, err, err_cap);
    slm_model_destroy(m);
    return st;
}

SLM_API void slm_model_destroy(slm_model *m) {
    if (!m) return;
    slm_allocator a = m->alloc;
    if (m->rt_cache && m->rt_cache_free) m->rt_cache_free(m->rt_cache);
    jinja_free(m->chat_jinja);
    pthread_mutex_destroy(&m->rt_mu);
    tok_destroy(m->tok);
    for (int32_t i = 0; i < m->n_tensors; i++) al_free(&a, m->tensors[i].name);
    for (int32_t i = 0; i < m->n_owned; i++) al_free_aligned(&a, m->owned[i]);
    al_free(&a, m->owned);
    al_free(&a, m->tensors);
    for (int32_t i = 0; m->state_names && i < m->n_states; i++) al_free(&a, m->state_names[i]);
    al_free(&a, m->state_names);
    al_free(&a, m->state_layer);
    al_free(&a, m->state_role);
    al_free(&a, m->hparams);
    al_free(&a, m->chat_template);
    gguf_close(&m->gguf);
    st_close(&m->st);
    hf_config_close(&m->hf);
    al_free(&a, m->name);
    al_free(&a, m->path);
    al_free(&a, m);
}

SLM_API slm_model_format slm_model_get_format(const slm_model *m) { return m ? m->format : SLM_FORMAT_GGUF; }
SLM_API const char *slm_model_arch(const slm_model *m) { return m ? m->arch->name : NULL; }
SLM_API const char *slm_model_name(const slm_model *m) { return m ? m->name : NULL; }
SLM_API int32_t slm_model_n_layer(const slm_model *m) { return m ? m->hp.n_layer : 0; }
SLM_API slm_layer_kind slm_model_layer_kind(const slm_model *m, int32_t il) {
    return m && il >= 0 && il < m->hp.n_layer ? m->hp.layer_kind[il] : SLM_LAYER_ATTENTION;
}
SLM_API int32_t slm_model_n_vocab(const slm_model *m) { return m ? m->hp.n_vocab : 0; }
SLM_API int32_t slm_model_n_embd(const slm_model *m) { return m ? m->hp.n_embd : 0; }
SLM_API int32_t slm_model_n_ctx_train(const slm_model *m) { return m ? m->hp.n_ctx_train : 0; }
SLM_API int32_t slm_model_pooling(const slm_model *m) { return m ? m->hp.pooling : SLM_POOLING_MODEL; }
SLM_API int32_t slm_model_n_ctx_default(const slm_model *m) {
    if (!m) return 0;
    return m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
}

SLM_API const char *slm_layer_kind_name(slm_layer_kind kind) {
    switch (kind) {
    case SLM_LAYER_ATTENTION: return "attention";
    case SLM_LAYER_CONV: return "conv";
    case SLM_LAYER_LINEAR_ATTENTION: return "linear_attention";
    case SLM_LAYER_SLIDING_ATTENTION: return "sliding_attention";
    }
    return "unknown";
}

SLM_API const char *slm_state_role_name(slm_state_role role) {
    switch (role) {
    case SLM_STATE_KV_KEY: return "kv_key";
    case SLM_STATE_KV_VALUE: return "kv_value";
    case SLM_STATE_CONV: return "conv";
    case SLM_STATE_RECURRENT: return "recurrent";
    }
    return "unknown";
}

SLM_API int32_t slm_model_n_hparams(const slm_model *m) { return m ? m->n_hparams : 0; }
SLM_API slm_status slm_model_hparam(const slm_model *m, int32_t i, const char **name, double *value) {
    if (name) *name = NULL;
    if (value) *value = 0;
    if (!m) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= m->n_hparams) return SLM_ERR_RANGE;
    if (name) *name = m->hparams[i].name;
    if (value) *value = m->hparams[i].value;
    return SLM_OK;
}

SLM_API int32_t slm_model_n_tensors(const slm_model *m) { return m ? m->n_tensors : 0; }
SLM_API slm_status slm_model_tensor(const slm_model *m, int32_t i, slm_tensor_info *info) {
    if (!m || !info) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= m->n_tensors) return SLM_ERR_RANGE;
    const mdl_tensor *t = &m->tensors[i];
    info->name = t->name;
    info->file_name = t->file_name;
    info->dtype = (slm_dtype)t->type;
    info->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) info->ne[d] = t->ne[d];
    info->size_bytes = t->size_bytes;
    return SLM_OK;
}
SLM_API uint64_t slm_model_weight_bytes(const slm_model *m) { return m ? m->weight_bytes : 0; }
SLM_API const char *slm_model_chat_template(const slm_model *m) { return m ? m->chat_template : NULL; }
SLM_API const slm_tokenizer *slm_model_tokenizer(const slm_model *m) { return m ? m->tok : NULL; }

SLM_API int32_t slm_model_n_states(const slm_model *m) { return m ? m->n_states : 0; }
SLM_API slm_status slm_model_state(const slm_model *m, int32_t n_ctx, slm_dtype kv_dtype, int32_t i,
                                   slm_state_info *info) {
    if (!m || !info) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= m->n_states) return SLM_ERR_RANGE;
    if (n_ctx <= 0) n_ctx = slm_model_n_ctx_default(m);
    if (kv_dtype != SLM_DTYPE_F16 && kv_dtype != SLM_DTYPE_F32 && kv_dtype != SLM_DTYPE_Q8_0 &&
        kv_dtype != SLM_DTYPE_Q4_0)
        return SLM_ERR_INVALID_ARG;
    mdl_state_spec s;
    mdl_state_spec_at(m, n_ctx, kv_dtype, kv_dtype, i, &s);
    info->name = s.name;
    info->role = s.role;
    info->layer = s.layer;
    info->dtype = s.dtype;
    info->n_dims = s.n_dims;
    for (int d = 0; d < 4; d++) info->ne[d] = s.ne[d];
    info->pos_axis = s.pos_axis;
    uint64_t n = 1, row = 0;
    for (int d = 1; d < 4; d++) n *= (uint64_t)s.ne[d];
    if (!dtype_row_bytes(s.dtype, (uint64_t)s.ne[0], &row)) return SLM_ERR_UNSUPPORTED; /* ne[0] not whole blocks */
    info->size_bytes = n * row;
    return SLM_OK;
}

SLM_API const char *slm_chat_template_detect(const slm_model *m) {
    return m && m->chat_template ? chat_detect(m->chat_template) : NULL;
}

/* The chat_tmpl that t selects for model m: a built-in by name, Jinja text, or the model's stored
 * template; *kwargs the parsed chat_template_kwargs (caller deletes). */
static slm_status pick_template(const slm_model *m, const slm_chat_template *t, chat_tmpl *out, cJSON **kwargs,
                                slm_err *e) {
    *kwargs = NULL;
    *out = (chat_tmpl){0};
    if (t && t->name) {
        if (!chat_is_builtin(t->name))
            return err_set(e, SLM_ERR_NOT_FOUND, "chat: unknown template '%.40s' (built-ins: chatml, smollm2, qwen3, "
                                                 "qwen3-nothink, lfm2, llama3, gemma)", t->name);
        out->name = t->name;
    } else {
        out->src = t && t->text ? t->text : m->chat_template;
        out->request = t && t->text && t->request;
        if (!out->src) return err_set(e, SLM_ERR_NOT_FOUND, "chat: the model has no chat template");
        if (out->src == m->chat_template) { /* parsed once per model (the model is shared read-only) */
            slm_model *mm = (slm_model *)(uintptr_t)m;
            slm_status st = SLM_OK;
            slm_err pe;
            err_clear(&pe);
            pthread_mutex_lock(&mm->rt_mu);
            if (!mm->chat_jinja) st = jinja_parse(m->chat_template, strlen(m->chat_template), &al_default, &mm->chat_jinja, &pe);
            out->parsed = mm->chat_jinja;
            pthread_mutex_unlock(&mm->rt_mu);
            if (st != SLM_OK) return err_set(e, st, "chat template: %s", pe.msg);
        }
    }
    if (t && t->kwargs && !(*kwargs = cJSON_Parse(t->kwargs)))
        return err_set(e, SLM_ERR_INVALID_ARG, "chat: chat_template_kwargs is not valid JSON");
    if (*kwargs && !cJSON_IsObject(*kwargs)) {
        cJSON_Delete(*kwargs);
        *kwargs = NULL;
        return err_set(e, SLM_ERR_INVALID_ARG, "chat: chat_template_kwargs must be a JSON object");
    }
    static const char *const reserved[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};
    for (const cJSON *k = *kwargs ? (*kwargs)->child : NULL; k; k = k->next)
        for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++)
            if (!strcmp(k->string, reserved[r])) {
                cJSON_Delete(*kwargs);
                *kwargs = NULL;
                return err_set(e, SLM_ERR_INVALID_ARG, "chat: chat_template_kwargs: '%s' is set by the chat itself",
                               reserved[r]);
            }
    out->kwargs = *kwargs;
    return SLM_OK;
}

/* The cJSON trees of t's JSON texts in *x (calls: n_msgs entries); cleared by chat_tools_free. */
static slm_status chat_tools_parse(const slm_chat_tools *t, size_t n_msgs, chat_tools *x, cJSON **tools, cJSON ***calls,
                                   cJSON ***fields, slm_err *e) {
    *tools = NULL;
    *calls = NULL;
    *fields = NULL;
    *x = (chat_tools){0};
    if (!t) return SLM_OK;
    if (t->tools && !(*tools = cJSON_Parse(t->tools)))
        return err_set(e, SLM_ERR_INVALID_ARG, "chat: 'tools' is not valid JSON");
    x->tools = *tools;
    x->tool_call_ids = t->tool_call_ids;
    if (t->fields && n_msgs > 0) {
        if (!(*fields = calloc(n_msgs, sizeof **fields))) return err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
        for (size_t i = 0; i < n_msgs; i++) {
            if (!t->fields[i]) continue;
            cJSON *f = (*fields)[i] = cJSON_Parse(t->fields[i]);
            if (!cJSON_IsObject(f))
                return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: 'fields' is not a JSON object", i);
            if (cJSON_GetObjectItemCaseSensitive(f, "role") || cJSON_GetObjectItemCaseSensitive(f, "tool_calls"))
                return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: 'fields' may not set role or tool_calls", i);
        }
        x->fields = (const cJSON *const *)*fields;
    }
    if (!t->tool_calls || n_msgs == 0) return SLM_OK;
    if (!(*calls = calloc(n_msgs, sizeof **calls))) return err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
    for (size_t i = 0; i < n_msgs; i++)
        if (t->tool_calls[i] && !((*calls)[i] = cJSON_Parse(t->tool_calls[i])))
            return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu: 'tool_calls' is not valid JSON", i);
    x->calls = (const cJSON *const *)*calls;
    return SLM_OK;
}

static void chat_tools_free(cJSON *tools, cJSON **calls, cJSON **fields, size_t n_msgs) {
    cJSON_Delete(tools);
    for (size_t i = 0; calls && i < n_msgs; i++) cJSON_Delete(calls[i]);
    for (size_t i = 0; fields && i < n_msgs; i++) cJSON_Delete(fields[i]);
    free(calls);
    free(fields);
}

/* Renders (text != NULL) or tokenises the messages with their tools after the argument checks. */
static slm_status chat_with(const slm_model *m, const slm_chat_template *t, const slm_chat_message *msgs, size_t n_msgs,
                            const slm_chat_tools *tools, const slm_chat_ids *content_ids, bool gen, char **text,
                            int32_t **ids, size_t *n_ids, char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    chat_tools x;
    cJSON *tj = NULL, **cj = NULL, **fj = NULL, *kw = NULL;
    chat_tmpl ct;
    slm_status st = pick_template(m, t, &ct, &kw, &e);
    if (st == SLM_OK) st = chat_tools_parse(tools, n_msgs, &x, &tj, &cj, &fj, &e);
    /* Rendered text and ids are returned through slm_free (malloc), independent of the model allocator. */
    if (st == SLM_OK && text) st = chat_render_tmpl(&ct, m->tok, msgs, n_msgs, &x, gen, &al_default, text, NULL, NULL, &e);
    else if (st == SLM_OK) st = chat_tokenize_tmpl(&ct, m->tok, msgs, n_msgs, &x, content_ids, gen, &al_default, ids, n_ids, &e);
    chat_tools_free(tj, cj, fj, n_msgs);
    cJSON_Delete(kw);
    if (st != SLM_OK && err && err_cap) err_copy_out(&e, err, err_cap);
    return st;
}

SLM_API slm_status slm_chat_render_with(const slm_model *m, const slm_chat_template *t, const slm_chat_message *msgs,
                                        size_t n_msgs, const slm_chat_tools *tools, bool add_generation_prompt,
                                        char **out, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!m || (!msgs && n_msgs)) return SLM_ERR_INVALID_ARG;
    if (!(t && (t->name || t->text)) && !m->chat_template) return SLM_ERR_NOT_FOUND;
    return chat_with(m, t, msgs, n_msgs, tools, NULL, add_generation_prompt, out, NULL, NULL, err, err_cap);
}

SLM_API slm_status slm_chat_tokenize_with(const slm_model *m, const slm_chat_template *t, const slm_chat_message *msgs,
                                          size_t n_msgs, const slm_chat_tools *tools, const slm_chat_ids *content_ids,
                                          bool add_generation_prompt, int32_t **ids, size_t *n_ids, char *err,
                                          size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!ids || !n_ids) return SLM_ERR_INVALID_ARG;
    *ids = NULL;
    *n_ids = 0;
    if (!m || (!msgs && n_msgs)) return SLM_ERR_INVALID_ARG;
    if (!(t && (t->name || t->text)) && !m->chat_template) return SLM_ERR_NOT_FOUND;
    if (!m->tok) return SLM_ERR_UNSUPPORTED;
    return chat_with(m, t, msgs, n_msgs, tools, content_ids, add_generation_prompt, NULL, ids, n_ids, err, err_cap);
}

SLM_API const char *slm_chat_tool_format(const slm_model *m, const slm_chat_template *t) {
    if (t && t->name) return tc_format_name(tc_format_of(t->name));
    return tc_format_name(tc_format_detect(t && t->text ? t->text : m ? m->chat_template : NULL));
}

SLM_API slm_status slm_chat_render(const slm_model *m, const char *template_name, const slm_chat_message *msgs,
                                   size_t n_msgs, bool add_generation_prompt, char **out) {
    slm_chat_template t = {template_name, NULL, NULL, false};
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!m || (!msgs && n_msgs)) return SLM_ERR_INVALID_ARG;
    if (!template_name && !m->chat_template) return SLM_ERR_NOT_FOUND;
    if (!m->tok) return SLM_ERR_UNSUPPORTED;
    return chat_with(m, &t, msgs, n_msgs, NULL, NULL, add_generation_prompt, out, NULL, NULL, NULL, 0);
}

SLM_API slm_status slm_chat_tokenize(const slm_model *m, const char *template_name, const slm_chat_message *msgs,
                                     size_t n_msgs, const slm_chat_ids *content_ids, bool add_generation_prompt,
                                     int32_t **ids, size_t *n_ids) {
    slm_chat_template t = {template_name, NULL, NULL, false};
    return slm_chat_tokenize_with(m, &t, msgs, n_msgs, NULL, content_ids, add_generation_prompt, ids, n_ids, NULL, 0);
}

SLM_API slm_status slm_chat_render_tools(const slm_model *m, const char *template_name, const slm_chat_message *msgs,
                                         size_t n_msgs, const slm_chat_tools *tools, bool add_generation_prompt,
                                         char **out, char *err, size_t err_cap) {
    slm_chat_template t = {template_name, NULL, NULL, false};
    return slm_chat_render_with(m, &t, msgs, n_msgs, tools, add_generation_prompt, out, err, err_cap);
}

SLM_API slm_status slm_chat_tokenize_tools(const slm_model *m, const char *template_name, const slm_chat_message *msgs,
                                           size_t n_msgs, const slm_chat_tools *tools, const slm_chat_ids *content_ids,
                                           bool add_generation_prompt, int32_t **ids, size_t *n_ids, char *err,
                                           size_t err_cap) {
    slm_chat_template t = {template_name, NULL, NULL, false};
    return slm_chat_tokenize_with(m, &t, msgs, n_msgs, tools, content_ids, add_generation_prompt, ids, n_ids, err,
                                  err_cap);
}

SLM_API void slm_free(void *ptr) { free(ptr); }
