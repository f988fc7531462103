/* arch.c — the architecture registry and the hyper-parameter readers of llama, qwen3, lfm2 and
 * qwen35, from GGUF metadata ({arch}.KEY keys, see the spec files) and from Hugging Face config.json. Layer
 * kinds come from the file (head_count_kv array / layer_types / interval rule) and are cross-checked
 * against the tensors present; n_ff and n_vocab come from tensor shapes, never from a table.
 * Also maps Hugging Face tensor names to canonical GGUF names. Does not check tensor shapes in
 * detail (the program builders do, per layer). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* ---- GGUF key helpers: "{arch}.<suffix>" ---------------------------------------------------- */

static const char *akey(const slm_model *m, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", m->arch->name, suffix);
    return buf;
}

/* Reads an integer key into *out. required=false keeps *out (the default) when absent. */
static slm_status g_int(const slm_model *m, const char *suffix, bool required, int32_t lo, int32_t hi, int32_t *out,
                        slm_err *e) {
    char key[128];
    akey(m, suffix, key, sizeof key);
    int64_t v;
    slm_status st = gguf_get_i64(&m->gguf, key, &v, e);
    if (st == SLM_ERR_NOT_FOUND) {
        if (!required) return SLM_OK;
        return err_set(e, SLM_ERR_FORMAT, "missing metadata key %s", key);
    }
    if (st != SLM_OK) return st;
    if (v < lo || v > hi)
        return err_set(e, SLM_ERR_FORMAT, "metadata %s = %lld is out of range [%d, %d]", key, (long long)v, lo, hi);
    *out = (int32_t)v;
    return SLM_OK;
}

static slm_status g_float(const slm_model *m, const char *suffix, bool required, float *out, slm_err *e) {
    char key[128];
    akey(m, suffix, key, sizeof key);
    double v;
    slm_status st = gguf_get_f64(&m->gguf, key, &v, e);
    if (st == SLM_ERR_NOT_FOUND) {
        if (!required) return SLM_OK;
        return err_set(e, SLM_ERR_FORMAT, "missing metadata key %s", key);
    }
    if (st != SLM_OK) return st;
    if (!(v > 0) || v > 1e30) return err_set(e, SLM_ERR_FORMAT, "metadata %s = %g is out of range", key, v);
    *out = (float)v;
    return SLM_OK;
}

/* ---- HF config helpers ---------------------------------------------------------------------- */

static slm_status h_int(const cJSON *obj, const char *key, bool required, int32_t lo, int32_t hi, int32_t *out,
                        slm_err *e) {
    int64_t v;
    slm_status st = hf_get_int(obj, key, &v, e);
    if (st == SLM_ERR_NOT_FOUND) {
        if (!required) return SLM_OK;
        return err_set(e, SLM_ERR_FORMAT, "config.json: missing \"%s\"", key);
    }
    if (st != SLM_OK) return st;
    if (v < lo || v > hi)
        return err_set(e, SLM_ERR_FORMAT, "config.json: \"%s\" = %lld is out of range [%d, %d]", key, (long long)v, lo,
                       hi);
    *out = (int32_t)v;
    return SLM_OK;
}

static slm_status h_float(const cJSON *obj, const char *key, float *out, slm_err *e) {
    double v;
    slm_status st = hf_get_num(obj, key, &v, e);
    if (st == SLM_ERR_NOT_FOUND) return SLM_OK;
    if (st != SLM_OK) return st;
    if (!(v > 0) || v > 1e30) return err_set(e, SLM_ERR_FORMAT, "config.json: \"%s\" = %g is out of range", key, v);
    *out = (float)v;
    return SLM_OK;
}

/* Keeps *out (the default) when the key is absent. */
static slm_status h_bool(const cJSON *obj, const char *key, bool *out, slm_err *e) {
    bool v;
    slm_status st = hf_get_bool(obj, key, &v, e);
    if (st == SLM_OK) *out = v;
    return st == SLM_ERR_NOT_FOUND ? SLM_OK : st;
}

/* rope_theta lives at the top level (transformers 4) or under rope_parameters (transformers 5). */
static slm_status h_rope(const cJSON *cfg, float *theta, float *partial, slm_err *e) {
    slm_status st = h_float(cfg, "rope_theta", theta, e);
    if (st != SLM_OK) return st;
    const cJSON *rp = NULL;
    st = hf_get_object(cfg, "rope_parameters", &rp, e);
    if (st == SLM_ERR_NOT_FOUND) {
        st = hf_get_object(cfg, "rope_scaling", &rp, e);
        if (st == SLM_ERR_NOT_FOUND) rp = NULL;
        else if (st != SLM_OK) return st;
    } else if (st != SLM_OK) {
        return st;
    }
    if (partial) {
        st = h_float(cfg, "partial_rotary_factor", partial, e);
        if (st != SLM_OK) return st;
    }
    if (rp) {
        st = h_float(rp, "rope_theta", theta, e);
        if (st != SLM_OK) return st;
        if (partial && (st = h_float(rp, "partial_rotary_factor", partial, e)) != SLM_OK) return st;
        const char *type = NULL;
        if (hf_get_str(rp, "rope_type", &type, e) == SLM_OK && strcmp(type, "default") != 0)
            return err_set(e, SLM_ERR_UNSUPPORTED, "config.json: rope_type \"%s\" is not supported yet", type);
        err_clear(e);
    }
    return SLM_OK;
}

/* ---- shape-derived values shared by every arch ---------------------------------------------- */

static slm_status derive_from_tensors(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    const mdl_tensor *emb = mdl_find_tensor(m, "token_embd.weight");
    if (!emb) return err_set(e, SLM_ERR_FORMAT, "missing tensor token_embd.weight");
    if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return err_set(e, SLM_ERR_SHAPE, "tensor token_embd.weight has an unexpected shape");
    hp->n_vocab = (int32_t)emb->ne[1];
    if (emb->ne[0] != hp->n_embd)
        return err_set(e, SLM_ERR_SHAPE, "tensor token_embd.weight has %lld columns, expected n_embd = %d",
                       (long long)emb->ne[0], hp->n_embd);
    hp->tied_embeddings = mdl_find_tensor(m, "output.weight") == NULL;
    const mdl_tensor *gate = mdl_find_tensor(m, "blk.0.ffn_gate.weight");
    if (!gate) return err_set(e, SLM_ERR_FORMAT, "missing tensor blk.0.ffn_gate.weight");
    if (gate->n_dims != 2 || gate->ne[1] < 1 || gate->ne[1] > (1 << 24))
        return err_set(e, SLM_ERR_SHAPE, "tensor blk.0.ffn_gate.weight has an unexpected shape");
    hp->n_ff = (int32_t)gate->ne[1];
    return SLM_OK;
}

/* Cross-checks each layer's kind against the tensors present. */
static slm_status check_layer_kinds(slm_model *m, slm_err *e) {
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        slm_layer_kind k = m->hp.layer_kind[il];
        const char *probe = k == SLM_LAYER_ATTENTION || k == SLM_LAYER_SLIDING_ATTENTION ? "attn_q.weight"
                            : k == SLM_LAYER_CONV                                     ? "shortconv.in_proj.weight"
                                                                                      : "attn_qkv.weight";
        if (!mdl_find_tensorf(m, "blk.%d.%s", il, probe))
            return err_set(e, SLM_ERR_FORMAT, "layer %d is a%s %s layer per the metadata, but tensor blk.%d.%s is missing",
                           il, k == SLM_LAYER_ATTENTION ? "n" : "", slm_layer_kind_name(k), il, probe);
    }
    return SLM_OK;
}

static slm_status check_common(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    if (hp->n_layer < 1 || hp->n_layer > MDL_MAX_LAYERS)
        return err_set(e, SLM_ERR_FORMAT, "block count %d is out of range [1, %d]", hp->n_layer, MDL_MAX_LAYERS);
    if (hp->n_head < 1 || hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0)
        return err_set(e, SLM_ERR_FORMAT, "head counts %d / %d (kv) are inconsistent", hp->n_head, hp->n_head_kv);
    if (hp->head_dim < 2 || hp->head_dim % 2 != 0 || hp->head_dim_v < 1)
        return err_set(e, SLM_ERR_FORMAT, "head dimension %d is invalid", hp->head_dim);
    if (hp->n_rot < 2 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return err_set(e, SLM_ERR_FORMAT, "rope dimension count %d is invalid for head_dim %d", hp->n_rot, hp->head_dim);
    if (hp->n_ctx_train < 1) hp->n_ctx_train = 4096;
    slm_status st = derive_from_tensors(m, e);
    if (st != SLM_OK) return st;
    return check_layer_kinds(m, e);
}

/* ---- fields shared by every family ---------------------------------------------------------- */

static void defaults(mdl_hparams *hp) {
    hp->rope_base = 10000.0f;
    hp->rms_eps = 1e-5f;
    hp->n_ctx_train = 4096;
    hp->pooling = SLM_POOLING_MODEL;
}

/* {arch}.embedding_length, attention.head_count, key/value_length, rope and norm keys; head_dim
 * defaults to n_embd / n_head and n_rot to head_dim. head_count_kv is left to the family (an array
 * in lfm2). */
static slm_status gguf_common(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    defaults(hp);
    slm_status st;
    if ((st = g_int(m, "embedding_length", true, 1, 1 << 20, &hp->n_embd, e)) ||
        (st = g_int(m, "attention.head_count", true, 1, 1 << 12, &hp->n_head, e)))
        return st;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = g_int(m, "attention.key_length", false, 1, 1 << 14, &hp->head_dim, e))) return st;
    hp->head_dim_v = hp->head_dim;
    hp->n_rot = hp->head_dim;
    return (st = g_int(m, "attention.value_length", false, 1, 1 << 14, &hp->head_dim_v, e)) ||
                   (st = g_int(m, "rope.dimension_count", false, 1, 1 << 14, &hp->n_rot, e)) ||
                   (st = g_int(m, "context_length", false, 1, 1 << 30, &hp->n_ctx_train, e)) ||
                   (st = g_int(m, "pooling_type", false, INT32_MIN, INT32_MAX, &hp->pooling, e)) ||
                   (st = g_float(m, "attention.layer_norm_rms_epsilon", false, &hp->rms_eps, e)) ||
                   (st = g_float(m, "rope.freq_base", false, &hp->rope_base, e))
               ? st
               : SLM_OK;
}

/* config.json: layers, hidden size, heads, kv heads, head_dim, context, rope; eps_key names the
 * family's epsilon field; partial (optional) receives partial_rotary_factor. */
static slm_status hf_common(slm_model *m, const char *eps_key, float *partial, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    const cJSON *c = m->hf.text;
    slm_status st;
    if ((st = h_int(c, "num_hidden_layers", true, 1, MDL_MAX_LAYERS, &hp->n_layer, e)) ||
        (st = h_int(c, "hidden_size", true, 1, 1 << 20, &hp->n_embd, e)) ||
        (st = h_int(c, "num_attention_heads", true, 1, 1 << 12, &hp->n_head, e)))
        return st;
    hp->n_head_kv = hp->n_head;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = h_int(c, "num_key_value_heads", false, 1, 1 << 12, &hp->n_head_kv, e)) ||
        (st = h_int(c, "head_dim", false, 1, 1 << 14, &hp->head_dim, e)) ||
        (st = h_int(c, "max_position_embeddings", false, 1, 1 << 30, &hp->n_ctx_train, e)) ||
        (st = h_float(c, eps_key, &hp->rms_eps, e)) || (st = h_rope(c, &hp->rope_base, partial, e)))
        return st;
    hp->head_dim_v = hp->head_dim;
    hp->n_rot = hp->head_dim;
    hp->rope_style = MDL_ROPE_NEOX; /* HF safetensors keep q/k unpermuted: rotate-half */
    return SLM_OK;
}

/* config.json "layer_types": each entry must be one of the two names. SLM_ERR_NOT_FOUND (no
 * message) when absent. */
static slm_status hf_layer_types(slm_model *m, const char *name_a, slm_layer_kind kind_a, const char *name_b,
                                 slm_layer_kind kind_b, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    const cJSON *types = NULL;
    slm_status st = hf_get_array(m->hf.text, "layer_types", &types, e);
    if (st) return st;
    if (cJSON_GetArraySize(types) < hp->n_layer)
        return err_set(e, SLM_ERR_FORMAT, "config.json: layer_types has %d entries, expected %d",
                       cJSON_GetArraySize(types), hp->n_layer);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cJSON *t = cJSON_GetArrayItem(types, il);
        if (!cJSON_IsString(t)) return err_set(e, SLM_ERR_FORMAT, "config.json: layer_types[%d] is not a string", il);
        if (strcmp(t->valuestring, name_a) == 0) hp->layer_kind[il] = kind_a;
        else if (strcmp(t->valuestring, name_b) == 0) hp->layer_kind[il] = kind_b;
        else return err_set(e, SLM_ERR_UNSUPPORTED, "config.json: layer_types[%d] = \"%s\"", il, t->valuestring);
    }
    return SLM_OK;
}

/* ---- llama / qwen3 -------------------------------------------------------------------------- */

static slm_status dense_gguf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    slm_status st;
    if ((st = g_int(m, "block_count", true, 1, MDL_MAX_LAYERS, &hp->n_layer, e)) || (st = gguf_common(m, e))) return st;
    hp->n_head_kv = hp->n_head;
    if ((st = g_int(m, "attention.head_count_kv", false, 1, 1 << 12, &hp->n_head_kv, e))) return st;
    char key[128];
    gguf_str type;
    if (gguf_get_str(&m->gguf, akey(m, "rope.scaling.type", key, sizeof key), &type, e) == SLM_OK &&
        !(type.len == 4 && memcmp(type.ptr, "none", 4) == 0))
        return err_set(e, SLM_ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported yet", (int)type.len, type.ptr);
    err_clear(e);
    for (int32_t il = 0; il < hp->n_layer; il++) hp->layer_kind[il] = SLM_LAYER_ATTENTION;
    return SLM_OK;
}

static slm_status llama_gguf(slm_model *m, slm_err *e) {
    slm_status st = dense_gguf(m, e);
    if (st) return st;
    m->hp.rope_style = MDL_ROPE_NORM; /* convert_hf_to_gguf permutes q/k rows for llama */
    if (m->hp.n_rot != m->hp.head_dim)
        return err_set(e, SLM_ERR_FORMAT, "llama: rope.dimension_count %d must equal head_dim %d", m->hp.n_rot,
                       m->hp.head_dim);
    return check_common(m, e);
}

static slm_status qwen3_gguf(slm_model *m, slm_err *e) {
    slm_status st = dense_gguf(m, e);
    if (st) return st;
    m->hp.rope_style = MDL_ROPE_NEOX;
    m->hp.qk_norm = true;
    return check_common(m, e);
}

static slm_status dense_hf(slm_model *m, bool qk_norm, slm_err *e) {
    defaults(&m->hp);
    slm_status st = hf_common(m, "rms_norm_eps", NULL, e);
    if (st) return st;
    for (int32_t il = 0; il < m->hp.n_layer; il++) m->hp.layer_kind[il] = SLM_LAYER_ATTENTION;
    m->hp.qk_norm = qk_norm;
    return check_common(m, e);
}

static slm_status llama_hf(slm_model *m, slm_err *e) { return dense_hf(m, false, e); }
static slm_status qwen3_hf(slm_model *m, slm_err *e) { return dense_hf(m, true, e); }

/* HF layer suffix → GGUF suffix, for one family. */
typedef struct name_pair {
    const char *hf;
    const char *gguf;
} name_pair;

static bool map_layer_name(const char *rest, const name_pair *pairs, char *out, size_t cap) {
    /* rest = "N.suffix" */
    char *end;
    long il = strtol(rest, &end, 10);
    if (end == rest || *end != '.' || il < 0 || il >= MDL_MAX_LAYERS) return false;
    for (const name_pair *p = pairs; p->hf; p++) {
        if (strcmp(end + 1, p->hf) == 0) {
            snprintf(out, cap, "blk.%ld.%s", il, p->gguf);
            return true;
        }
    }
    return false;
}

static bool map_common(const char *hf, const name_pair *layer_pairs, const char *final_norm, char *out, size_t cap) {
    if (strcmp(hf, "model.embed_tokens.weight") == 0) return snprintf(out, cap, "token_embd.weight") > 0;
    if (strcmp(hf, "lm_head.weight") == 0) return snprintf(out, cap, "output.weight") > 0;
    if (strcmp(hf, "model.norm.weight") == 0 || strcmp(hf, "model.embedding_norm.weight") == 0)
        return snprintf(out, cap, "%s", final_norm) > 0;
    if (strncmp(hf, "model.layers.", 13) == 0) return map_layer_name(hf + 13, layer_pairs, out, cap);
    return false;
}

static const name_pair dense_pairs[] = {
    {"input_layernorm.weight", "attn_norm.weight"},      {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},        {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},   {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},   {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},         {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},         {NULL, NULL},
};

static bool dense_hf_name(const char *hf, int32_t n_layer, char *out, size_t cap) {
    (void)n_layer;
    return map_common(hf, dense_pairs, "output_norm.weight", out, cap);
}

/* ---- lfm2 ----------------------------------------------------------------------------------- */

static slm_status lfm2_gguf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    slm_status st;
    if ((st = g_int(m, "block_count", true, 1, MDL_MAX_LAYERS, &hp->n_layer, e)) || (st = gguf_common(m, e))) return st;
    hp->conv_kernel = 3;
    if ((st = g_int(m, "shortconv.l_cache", false, 2, 64, &hp->conv_kernel, e))) return st;
    /* Layer kinds: head_count_kv is an array with 0 for conv layers (docs/spec/lfm2.md §2.2). */
    char key[128];
    const gguf_value *arr = NULL;
    akey(m, "attention.head_count_kv", key, sizeof key);
    st = gguf_get_arr(&m->gguf, key, &arr, e);
    hp->n_head_kv = 0;
    if (st == SLM_OK) {
        if (arr->v.arr.n != (uint64_t)hp->n_layer)
            return err_set(e, SLM_ERR_FORMAT, "%s has %llu entries, expected block_count = %d", key,
                           (unsigned long long)arr->v.arr.n, hp->n_layer);
        for (int32_t il = 0; il < hp->n_layer; il++) {
            int64_t v;
            if (!gguf_arr_i64(arr, (uint64_t)il, &v) || v < 0 || v > (1 << 12))
                return err_set(e, SLM_ERR_FORMAT, "%s[%d] is not a valid head count", key, il);
            hp->layer_kind[il] = v == 0 ? SLM_LAYER_CONV : SLM_LAYER_ATTENTION;
            if (v > 0) {
                if (hp->n_head_kv && hp->n_head_kv != v)
                    return err_set(e, SLM_ERR_UNSUPPORTED, "%s: attention layers with different kv head counts", key);
                hp->n_head_kv = (int32_t)v;
            }
        }
    } else if (st == SLM_ERR_NOT_FOUND) {
        /* A scalar (or absent) head_count_kv loses the pattern: take kinds from the tensors. */
        err_clear(e);
        hp->n_head_kv = hp->n_head;
        if ((st = g_int(m, "attention.head_count_kv", false, 1, 1 << 12, &hp->n_head_kv, e))) return st;
        for (int32_t il = 0; il < hp->n_layer; il++)
            hp->layer_kind[il] = mdl_find_tensorf(m, "blk.%d.shortconv.in_proj.weight", il) ? SLM_LAYER_CONV
                                                                                          : SLM_LAYER_ATTENTION;
    } else {
        return st;
    }
    if (hp->n_head_kv == 0) hp->n_head_kv = hp->n_head; /* all-conv model: unused */
    hp->rope_style = MDL_ROPE_NEOX;
    hp->qk_norm = true;
    return check_common(m, e);
}

static slm_status lfm2_hf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    defaults(hp);
    hp->rope_base = 1000000.0f;
    hp->conv_kernel = 3;
    slm_status st;
    bool conv_bias = false;
    if ((st = hf_common(m, "norm_eps", NULL, e)) ||
        (st = h_int(m->hf.text, "conv_L_cache", false, 2, 64, &hp->conv_kernel, e)) ||
        (st = h_bool(m->hf.text, "conv_bias", &conv_bias, e)))
        return st;
    if (conv_bias) return err_set(e, SLM_ERR_UNSUPPORTED, "config.json: conv_bias = true is not supported");
    st = hf_layer_types(m, "conv", SLM_LAYER_CONV, "full_attention", SLM_LAYER_ATTENTION, e);
    if (st == SLM_ERR_NOT_FOUND) {
        /* legacy full_attn_idxs; with neither, every layer is attention (HF's default) */
        const cJSON *idx = NULL;
        st = hf_get_array(m->hf.text, "full_attn_idxs", &idx, e);
        if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) return st;
        for (int32_t il = 0; il < hp->n_layer; il++) hp->layer_kind[il] = idx ? SLM_LAYER_CONV : SLM_LAYER_ATTENTION;
        for (int i = 0; idx && i < cJSON_GetArraySize(idx); i++) {
            const cJSON *v = cJSON_GetArrayItem(idx, i);
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= hp->n_layer)
                return err_set(e, SLM_ERR_FORMAT, "config.json: full_attn_idxs[%d] is not a layer index", i);
            hp->layer_kind[(int)v->valuedouble] = SLM_LAYER_ATTENTION;
        }
        st = SLM_OK;
    }
    if (st) return st;
    err_clear(e);
    hp->qk_norm = true;
    return check_common(m, e);
}

static const name_pair lfm2_pairs[] = {
    {"operator_norm.weight", "attn_norm.weight"},        {"ffn_norm.weight", "ffn_norm.weight"},
    {"feed_forward.w1.weight", "ffn_gate.weight"},       {"feed_forward.w3.weight", "ffn_up.weight"},
    {"feed_forward.w2.weight", "ffn_down.weight"},       {"conv.in_proj.weight", "shortconv.in_proj.weight"},
    {"conv.conv.weight", "shortconv.conv.weight"},       {"conv.out_proj.weight", "shortconv.out_proj.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},        {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},        {"self_attn.out_proj.weight", "attn_output.weight"},
    {"self_attn.q_layernorm.weight", "attn_q_norm.weight"}, {"self_attn.k_layernorm.weight", "attn_k_norm.weight"},
    {NULL, NULL},
};

static bool lfm2_hf_name(const char *hf, int32_t n_layer, char *out, size_t cap) {
    (void)n_layer;
    return map_common(hf, lfm2_pairs, "token_embd_norm.weight", out, cap);
}

/* ---- qwen35 --------------------------------------------------------------------------------- */

static slm_status qwen35_check(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    if (hp->ssm_n_k_heads < 1 || hp->ssm_n_v_heads < 1 || hp->ssm_n_v_heads % hp->ssm_n_k_heads != 0)
        return err_set(e, SLM_ERR_FORMAT, "linear-attention head counts %d (k) / %d (v) are inconsistent",
                       hp->ssm_n_k_heads, hp->ssm_n_v_heads);
    if (hp->ssm_head_k_dim < 1 || hp->ssm_head_v_dim < 1 || hp->ssm_conv_kernel < 2)
        return err_set(e, SLM_ERR_FORMAT, "linear-attention dimensions are invalid");
    hp->rope_style = MDL_ROPE_NEOX;
    hp->qk_norm = true;
    hp->attn_output_gate = true;
    return check_common(m, e);
}

/* Layer i is linear attention iff (i + 1) % interval != 0 (docs/spec/qwen35.md §1, §5.1). */
static void qwen35_interval_kinds(mdl_hparams *hp, int32_t interval) {
    for (int32_t il = 0; il < hp->n_layer; il++)
        hp->layer_kind[il] = (il + 1) % interval != 0 ? SLM_LAYER_LINEAR_ATTENTION : SLM_LAYER_ATTENTION;
}

static slm_status qwen35_gguf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    int32_t block_count = 0, nextn = 0, interval = 4, inner = 0;
    slm_status st;
    if ((st = g_int(m, "block_count", true, 1, MDL_MAX_LAYERS, &block_count, e)) ||
        (st = g_int(m, "nextn_predict_layers", false, 0, MDL_MAX_LAYERS, &nextn, e)) || (st = gguf_common(m, e)))
        return st;
    if (nextn >= block_count) return err_set(e, SLM_ERR_FORMAT, "nextn_predict_layers %d >= block_count %d", nextn, block_count);
    hp->n_layer = block_count - nextn;
    hp->n_nextn = nextn;
    hp->n_head_kv = hp->n_head;
    hp->ssm_conv_kernel = 4;
    if ((st = g_int(m, "attention.head_count_kv", false, 1, 1 << 12, &hp->n_head_kv, e)) ||
        (st = g_int(m, "ssm.conv_kernel", false, 2, 64, &hp->ssm_conv_kernel, e)) ||
        (st = g_int(m, "ssm.state_size", true, 1, 1 << 12, &hp->ssm_head_k_dim, e)) ||
        (st = g_int(m, "ssm.group_count", true, 1, 1 << 12, &hp->ssm_n_k_heads, e)) ||
        (st = g_int(m, "ssm.time_step_rank", true, 1, 1 << 12, &hp->ssm_n_v_heads, e)) ||
        (st = g_int(m, "ssm.inner_size", true, 1, 1 << 20, &inner, e)) ||
        (st = g_int(m, "full_attention_interval", false, 1, MDL_MAX_LAYERS, &interval, e)))
        return st;
    if (inner % hp->ssm_n_v_heads != 0)
        return err_set(e, SLM_ERR_FORMAT, "ssm.inner_size %d is not a multiple of ssm.time_step_rank %d", inner,
                       hp->ssm_n_v_heads);
    hp->ssm_head_v_dim = inner / hp->ssm_n_v_heads;
    char key[128];
    const gguf_value *arr = NULL;
    akey(m, "attention.recurrent_layers", key, sizeof key);
    st = gguf_get_arr(&m->gguf, key, &arr, e);
    if (st == SLM_OK) {
        if (arr->v.arr.n < (uint64_t)hp->n_layer)
            return err_set(e, SLM_ERR_FORMAT, "%s has %llu entries, expected %d", key, (unsigned long long)arr->v.arr.n,
                           hp->n_layer);
        for (int32_t il = 0; il < hp->n_layer; il++) {
            int64_t v;
            if (!gguf_arr_i64(arr, (uint64_t)il, &v)) return err_set(e, SLM_ERR_FORMAT, "%s[%d] is not an integer", key, il);
            hp->layer_kind[il] = v ? SLM_LAYER_LINEAR_ATTENTION : SLM_LAYER_ATTENTION;
        }
    } else if (st == SLM_ERR_NOT_FOUND) {
        err_clear(e);
        qwen35_interval_kinds(hp, interval);
    } else {
        return st;
    }
    hp->ssm_a_is_log = false;
    hp->ssm_v_heads_tiled = true;
    return qwen35_check(m, e);
}

static slm_status qwen35_hf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    const cJSON *c = m->hf.text;
    defaults(hp);
    hp->rms_eps = 1e-6f;
    hp->ssm_conv_kernel = 4;
    int32_t interval = 4;
    float partial = 0.25f;
    bool gate = true;
    slm_status st;
    if ((st = hf_common(m, "rms_norm_eps", &partial, e)) ||
        (st = h_int(c, "linear_conv_kernel_dim", false, 2, 64, &hp->ssm_conv_kernel, e)) ||
        (st = h_int(c, "linear_num_key_heads", true, 1, 1 << 12, &hp->ssm_n_k_heads, e)) ||
        (st = h_int(c, "linear_num_value_heads", true, 1, 1 << 12, &hp->ssm_n_v_heads, e)) ||
        (st = h_int(c, "linear_key_head_dim", true, 1, 1 << 12, &hp->ssm_head_k_dim, e)) ||
        (st = h_int(c, "linear_value_head_dim", true, 1, 1 << 12, &hp->ssm_head_v_dim, e)) ||
        (st = h_int(c, "full_attention_interval", false, 1, MDL_MAX_LAYERS, &interval, e)) ||
        (st = h_bool(c, "attn_output_gate", &gate, e)))
        return st;
    if (!gate) return err_set(e, SLM_ERR_UNSUPPORTED, "config.json: attn_output_gate = false is not supported");
    hp->n_rot = (int32_t)((float)hp->head_dim * partial + 0.5f);
    st = hf_layer_types(m, "linear_attention", SLM_LAYER_LINEAR_ATTENTION, "full_attention", SLM_LAYER_ATTENTION, e);
    if (st == SLM_ERR_NOT_FOUND) {
        err_clear(e);
        qwen35_interval_kinds(hp, interval);
    } else if (st) {
        return st;
    }
    hp->norm_plus_one = true;
    hp->ssm_a_is_log = true;
    hp->ssm_v_heads_tiled = false;
    /* MTP blocks: config.json's mtp_num_hidden_layers, else those the checkpoint holds (as
     * llama.cpp's converter counts them); a config that names blocks the checkpoint lacks still
     * counts them (the converter writes them into block_count too), and nothing drafts then */
    int32_t found = 0;
    while (hp->n_layer + found < MDL_MAX_LAYERS && mdl_find_tensorf(m, "blk.%d.attn_norm.weight", hp->n_layer + found))
        found++;
    if ((st = h_int(c, "mtp_num_hidden_layers", false, 0, MDL_MAX_LAYERS - hp->n_layer, &hp->n_nextn, e))) return st;
    if (hp->n_nextn == 0) hp->n_nextn = found;
    if (found && !mdl_find_tensorf(m, "blk.%d.nextn.eh_proj.weight", hp->n_layer))
        return err_set(e, SLM_ERR_FORMAT, "mtp.layers.* without mtp.fc.weight (the MTP block is incomplete)");
    return qwen35_check(m, e);
}

static const name_pair qwen35_pairs[] = {
    {"input_layernorm.weight", "attn_norm.weight"},        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},           {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},           {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},          {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},     {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},     {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},  {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},  {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},                {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},        {"linear_attn.out_proj.weight", "ssm_out.weight"},
    {NULL, NULL},
};

/* map_common for checkpoints of multimodal wrappers, whose text model lives under
 * "model.language_model." instead of "model." (Qwen3.5, Gemma 3). */
static bool map_text_model(const char *hf, const name_pair *pairs, char *out, size_t cap) {
    char buf[512];
    if (strncmp(hf, "model.language_model.", 21) == 0) {
        snprintf(buf, sizeof buf, "model.%s", hf + 21);
        hf = buf;
    }
    return map_common(hf, pairs, "output_norm.weight", out, cap);
}

/* The multi-token-prediction block (mtp.*, or model.mtp.*) in llama.cpp's nextn layout: its decoder
 * layers i become blocks n_layer + i, its own tensors blk.{n_layer}.nextn.* (conversion/qwen.py's
 * _QwenMtpMixin; docs/spec/qwen35.md §10). */
static bool qwen35_mtp_name(const char *hf, int32_t n_layer, char *out, size_t cap) {
    static const name_pair own[] = {
        {"fc.weight", "nextn.eh_proj.weight"},
        {"pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
        {"pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
        {"norm.weight", "nextn.shared_head_norm.weight"},
        {NULL, NULL},
    };
    if (strncmp(hf, "model.", 6) == 0) hf += 6;
    if (strncmp(hf, "mtp.", 4) != 0 || n_layer < 1) return false;
    hf += 4;
    for (const name_pair *p = own; p->hf; p++)
        if (!strcmp(hf, p->hf)) return snprintf(out, cap, "blk.%d.%s", n_layer, p->gguf) > 0;
    if (strncmp(hf, "layers.", 7) != 0) return false;
    char *end;
    long i = strtol(hf + 7, &end, 10);
    if (end == hf + 7 || *end != '.' || i < 0 || i >= MDL_MAX_LAYERS - n_layer) return false;
    char local[256];
    snprintf(local, sizeof local, "%ld%s", (long)n_layer + i, end);
    return map_layer_name(local, qwen35_pairs, out, cap);
}

static bool qwen35_hf_name(const char *hf, int32_t n_layer, char *out, size_t cap) {
    return qwen35_mtp_name(hf, n_layer, out, cap) || map_text_model(hf, qwen35_pairs, out, cap);
}

/* ---- gemma3 --------------------------------------------------------------------------------- */

/* Every period-th layer (il % period == period - 1) is full attention, the others sliding
 * (llama.cpp's gemma3 convention, set_swa_pattern(6), when the file has no per-layer pattern). */
static void gemma3_period_kinds(mdl_hparams *hp, int32_t period) {
    for (int32_t il = 0; il < hp->n_layer; il++)
        hp->layer_kind[il] = il % period == period - 1 ? SLM_LAYER_ATTENTION : SLM_LAYER_SLIDING_ATTENTION;
}

static slm_status gemma3_check(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    if (hp->swa_window < 1 || hp->swa_window > (1 << 20))
        return err_set(e, SLM_ERR_FORMAT, "sliding window %d is out of range [1, %d]", hp->swa_window, 1 << 20);
    hp->rope_style = MDL_ROPE_NEOX;
    hp->qk_norm = true;
    hp->embd_scale = true;
    hp->sandwich_norms = true;
    hp->geglu = true;
    return check_common(m, e);
}

static slm_status gemma3_gguf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    slm_status st;
    if ((st = g_int(m, "block_count", true, 1, MDL_MAX_LAYERS, &hp->n_layer, e)) || (st = gguf_common(m, e))) return st;
    hp->n_head_kv = hp->n_head;
    hp->rope_base = 1000000.0f;
    hp->rope_base_swa = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    hp->rms_eps = 1e-6f;
    int32_t period = 6;
    if ((st = g_int(m, "attention.head_count_kv", false, 1, 1 << 12, &hp->n_head_kv, e)) ||
        (st = g_int(m, "attention.sliding_window", true, 1, 1 << 20, &hp->swa_window, e)) ||
        (st = g_float(m, "rope.freq_base", false, &hp->rope_base, e)) ||
        (st = g_float(m, "rope.freq_base_swa", false, &hp->rope_base_swa, e)) ||
        (st = g_float(m, "attention.layer_norm_rms_epsilon", false, &hp->rms_eps, e)))
        return st;
    char key[128];
    gguf_str type;
    if (gguf_get_str(&m->gguf, akey(m, "rope.scaling.type", key, sizeof key), &type, e) == SLM_OK) {
        float factor = 1.0f;
        if (type.len == 6 && memcmp(type.ptr, "linear", 6) == 0) {
            if ((st = g_float(m, "rope.scaling.factor", true, &factor, e))) return st;
            hp->rope_freq_scale = 1.0f / factor;
        } else if (!(type.len == 4 && memcmp(type.ptr, "none", 4) == 0)) {
            return err_set(e, SLM_ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported yet", (int)type.len, type.ptr);
        }
    }
    err_clear(e);
    /* per-layer pattern when the file carries one (newer llama.cpp: a bool per layer, true = sliding) */
    const gguf_value *arr = NULL;
    st = gguf_get_arr(&m->gguf, akey(m, "attention.sliding_window_pattern", key, sizeof key), &arr, e);
    if (st == SLM_OK) {
        if (arr->v.arr.n < (uint64_t)hp->n_layer)
            return err_set(e, SLM_ERR_FORMAT, "%s has %llu entries, expected %d", key, (unsigned long long)arr->v.arr.n,
                           hp->n_layer);
        for (int32_t il = 0; il < hp->n_layer; il++) {
            int64_t v;
            if (!gguf_arr_i64(arr, (uint64_t)il, &v)) return err_set(e, SLM_ERR_FORMAT, "%s[%d] is not a flag", key, il);
            hp->layer_kind[il] = v ? SLM_LAYER_SLIDING_ATTENTION : SLM_LAYER_ATTENTION;
        }
    } else if (st == SLM_ERR_NOT_FOUND || st == SLM_ERR_FORMAT) {
        err_clear(e);
        if ((st = g_int(m, "attention.sliding_window_pattern", false, 1, MDL_MAX_LAYERS, &period, e))) return st;
        gemma3_period_kinds(hp, period);
    } else {
        return st;
    }
    /* llama.cpp: 1 / sqrt(key_length) (its 27B rule, n_embd / n_head, is not used by the small models) */
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->norm_plus_one = false; /* convert_hf_to_gguf stores 1 + w */
    return gemma3_check(m, e);
}

static slm_status gemma3_hf(slm_model *m, slm_err *e) {
    mdl_hparams *hp = &m->hp;
    const cJSON *c = m->hf.text;
    defaults(hp);
    hp->rms_eps = 1e-6f;
    hp->rope_base = 1000000.0f;
    hp->rope_base_swa = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    int32_t period = 6, qpas = 0;
    slm_status st;
    if ((st = hf_common(m, "rms_norm_eps", NULL, e)) ||
        (st = h_int(c, "sliding_window", true, 1, 1 << 20, &hp->swa_window, e)) ||
        (st = h_float(c, "rope_local_base_freq", &hp->rope_base_swa, e)) ||
        (st = h_int(c, "sliding_window_pattern", false, 1, MDL_MAX_LAYERS, &period, e)) ||
        (st = h_int(c, "query_pre_attn_scalar", false, 1, 1 << 20, &qpas, e)))
        return st;
    static const char *const softcaps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++) {
        double v;
        if (hf_get_num(c, softcaps[i], &v, e) == SLM_OK)
            return err_set(e, SLM_ERR_UNSUPPORTED, "config.json: %s is not supported", softcaps[i]);
        err_clear(e);
    }
    st = hf_layer_types(m, "sliding_attention", SLM_LAYER_SLIDING_ATTENTION, "full_attention", SLM_LAYER_ATTENTION, e);
    if (st == SLM_ERR_NOT_FOUND) {
        err_clear(e);
        gemma3_period_kinds(hp, period);
    } else if (st) {
        return st;
    }
    hp->attn_scale = 1.0f / sqrtf((float)(qpas ? qpas : hp->head_dim));
    hp->norm_plus_one = true; /* Gemma3RMSNorm: x * (1 + w) */
    return gemma3_check(m, e);
}

static const name_pair gemma3_pairs[] = {
    {"input_layernorm.weight", "attn_norm.weight"},           {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},             {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},  {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},              {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},              {NULL, NULL},
};

static bool gemma3_hf_name(const char *hf, int32_t n_layer, char *out, size_t cap) {
    (void)n_layer;
    return map_text_model(hf, gemma3_pairs, out, cap);
}

/* ---- registry ------------------------------------------------------------------------------- */

static const char *const llama_types[] = {"llama", NULL};
static const char *const qwen3_types[] = {"qwen3", NULL};
static const char *const lfm2_types[] = {"lfm2", NULL};
static const char *const qwen35_types[] = {"qwen3_5", "qwen3_5_text", NULL};
static const char *const gemma3_types[] = {"gemma3_text", NULL};

static const arch_def arch_llama = {"llama", llama_types, llama_gguf, llama_hf, dense_hf_name};
static const arch_def arch_qwen3 = {"qwen3", qwen3_types, qwen3_gguf, qwen3_hf, dense_hf_name};
static const arch_def arch_lfm2 = {"lfm2", lfm2_types, lfm2_gguf, lfm2_hf, lfm2_hf_name};
static const arch_def arch_qwen35 = {"qwen35", qwen35_types, qwen35_gguf, qwen35_hf, qwen35_hf_name};
static const arch_def arch_gemma3 = {"gemma3", gemma3_types, gemma3_gguf, gemma3_hf, gemma3_hf_name};

const arch_def *const arch_table[] = {&arch_llama, &arch_qwen3, &arch_lfm2, &arch_qwen35, &arch_gemma3, NULL};

const arch_def *arch_find(const char *gguf_arch) {
    for (int i = 0; arch_table[i]; i++)
        if (strcmp(arch_table[i]->name, gguf_arch) == 0) return arch_table[i];
    return NULL;
}

const arch_def *arch_find_hf(const char *model_type) {
    for (int i = 0; arch_table[i]; i++)
        for (const char *const *t = arch_table[i]->hf_model_types; *t; t++)
            if (strcmp(*t, model_type) == 0) return arch_table[i];
    return NULL;
}

void arch_supported_list(char *out, size_t cap) {
    size_t n = 0;
    if (cap) out[0] = '\0';
    for (int i = 0; arch_table[i] && n < cap; i++) {
        int k = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", arch_table[i]->name);
        if (k < 0) break;
        n += (size_t)k;
    }
}
