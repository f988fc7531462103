/* hf.c — slm_convert: a Hugging Face folder to the GGUF llama.cpp's convert_hf_to_gguf.py
 * writes for it (docs/convert.md). The folder is loaded as slm_model_load loads it (tensor names
 * through the architecture table, layouts through hf_layout.c), so the file and the folder run the
 * same program on the same bytes. Metadata follows the converter: TextModel.set_gguf_parameters and
 * the per-architecture overrides (conversion/llama.py, qwen.py, lfm2.py, gemma.py), the tokenizer
 * keys of _set_vocab_gpt2 and gguf-py's SpecialVocab. Tensors are written one at a time in the
 * converter's order; a quantised outtype is the f32 conversion quantised with slm_quantize's rules
 * (quantize_plan), in the same pass. Output through write.c (cv_write_gguf: temporary file,
 * renamed when complete). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/dtype.h"
#include "base/fmap.h"
#include "base/params.h"
#include "convert/convert.h"
#include "format/quantize.h"
#include "model/model.h"
#include "text/tok_impl.h"

#define GGUF_ALIGNMENT 32

/* "{arch}.suffix" */
static const char *akey(const slm_model *m, const char *suffix) {
    static _Thread_local char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    return key;
}

/* ---- config.json reading as the converter's find_hparam does --------------------------------- */

/* True with *out set when c[key] is present and of the type; else *out is left as it was. */
static bool cfg_int(const cJSON *c, const char *key, int64_t *out) {
    int64_t v;
    if (hf_get_int(c, key, &v, NULL) != SLM_OK) return false;
    *out = v;
    return true;
}
static bool cfg_num(const cJSON *c, const char *key, double *out) {
    double v;
    if (hf_get_num(c, key, &v, NULL) != SLM_OK) return false;
    *out = v;
    return true;
}
static const cJSON *cfg_obj(const cJSON *c, const char *key) {
    const cJSON *o = NULL;
    return hf_get_object(c, key, &o, NULL) == SLM_OK ? o : NULL;
}

/* ModelBase.rope_parameters: rope_parameters, else rope_scaling, with a top-level rope_theta. */
static const cJSON *rope_params(const cJSON *c) {
    const cJSON *rp = cfg_obj(c, "rope_parameters");
    return rp ? rp : cfg_obj(c, "rope_scaling");
}

static int64_t lfm2_effective_ff(const cJSON *c) {
    int64_t ff = 0, multiple = 1;
    double mult;
    bool adjust = false;
    if (!cfg_int(c, "block_ff_dim", &ff)) cfg_int(c, "intermediate_size", &ff);
    hf_get_bool(c, "block_auto_adjust_ff_dim", &adjust, NULL);
    if (!adjust) return ff;
    ff = (int64_t)(2.0 * (double)ff / 3.0);
    if (cfg_num(c, "block_ffn_dim_multiplier", &mult)) ff = (int64_t)(mult * (double)ff);
    if (cfg_int(c, "block_multiple_of", &multiple) && multiple > 0) ff = multiple * ((ff + multiple - 1) / multiple);
    return ff;
}

/* TextModel.set_gguf_parameters and the overrides of the five architectures. n_nextn: the MTP
 * blocks written (qwen35; counted into block_count, _QwenMtpMixin). */
static slm_status model_keys(const slm_model *m, cv_kv *b, uint32_t file_type, int32_t n_nextn, slm_err *e) {
    const cJSON *c = m->hf.text;
    const char *arch = m->arch->name;
    const bool gemma3 = !strcmp(arch, "gemma3"), lfm2 = !strcmp(arch, "lfm2"), qwen35 = !strcmp(arch, "qwen35");
    int64_t v, n_embd = m->hp.n_embd, n_head = m->hp.n_head, head_dim = 0;
    double f;
    cv_kv_u32(b, akey(m, "block_count"), (uint32_t)(m->hp.n_layer + n_nextn));
    if (cfg_int(c, "max_position_embeddings", &v)) cv_kv_u32(b, akey(m, "context_length"), (uint32_t)v);
    else if (gemma3) cv_kv_u32(b, akey(m, "context_length"), 131072);
    cv_kv_u32(b, akey(m, "embedding_length"), (uint32_t)n_embd);
    if (lfm2) cv_kv_u32(b, akey(m, "feed_forward_length"), (uint32_t)lfm2_effective_ff(c));
    else if (cfg_int(c, "intermediate_size", &v)) cv_kv_u32(b, akey(m, "feed_forward_length"), (uint32_t)v);
    cv_kv_u32(b, akey(m, "attention.head_count"), (uint32_t)n_head);
    if (lfm2) {
        int32_t kv[MDL_MAX_LAYERS];
        for (int32_t il = 0; il < m->hp.n_layer; il++) kv[il] = m->hp.layer_kind[il] == SLM_LAYER_CONV ? 0 : m->hp.n_head_kv;
        cv_kv_arr_i32(b, akey(m, "attention.head_count_kv"), kv, (uint64_t)m->hp.n_layer);
    } else if (cfg_int(c, "num_key_value_heads", &v)) {
        cv_kv_u32(b, akey(m, "attention.head_count_kv"), (uint32_t)v);
    } else if (gemma3) {
        cv_kv_u32(b, akey(m, "attention.head_count_kv"), 4);
    }
    const cJSON *rp = rope_params(c), *rp_full = cfg_obj(rp, "full_attention"), *rp_swa = cfg_obj(rp, "sliding_attention");
    if (!rp_full) rp_full = rp;
    const char *rope_type = NULL;
    if (hf_get_str(rp_full, "rope_type", &rope_type, NULL) == SLM_OK && strcmp(rope_type, "default") != 0) {
        if (strcmp(rope_type, "linear") != 0 || !cfg_num(rp_full, "factor", &f))
            return err_set(e, SLM_ERR_UNSUPPORTED, "config.json: rope_type \"%s\" is not supported", rope_type);
        cv_kv_str(b, akey(m, "rope.scaling.type"), "linear");
        cv_kv_f32(b, akey(m, "rope.scaling.factor"), f);
    }
    const cJSON *sections = NULL;
    if (hf_get_array(rp, "mrope_section", &sections, NULL) == SLM_OK) {
        int32_t s[4] = {0, 0, 0, 0};
        for (int i = 0; i < 4 && i < cJSON_GetArraySize(sections); i++) {
            const cJSON *it = cJSON_GetArrayItem(sections, i);
            if (!cJSON_IsNumber(it)) return err_set(e, SLM_ERR_FORMAT, "config.json: mrope_section[%d] is not a number", i);
            s[i] = (int32_t)it->valuedouble;
        }
        cv_kv_arr_i32(b, akey(m, "rope.dimension_sections"), s, 4);
    }
    if (cfg_num(rp_full, "rope_theta", &f) || cfg_num(c, "rope_theta", &f)) cv_kv_f32(b, akey(m, "rope.freq_base"), f);
    else if (gemma3) cv_kv_f32(b, akey(m, "rope.freq_base"), 1000000.0);
    /* without per-layer-type rope parameters, the converter takes the local base from the top level */
    if (cfg_num(rp_swa, "rope_theta", &f) || (!rp_swa && rp_full == rp && cfg_num(c, "rope_local_base_freq", &f)))
        cv_kv_f32(b, akey(m, "rope.freq_base_swa"), f);
    if (cfg_num(c, lfm2 ? "norm_eps" : "rms_norm_eps", &f)) cv_kv_f32(b, akey(m, "attention.layer_norm_rms_epsilon"), f);
    else if (gemma3) cv_kv_f32(b, akey(m, "attention.layer_norm_rms_epsilon"), 1e-6);
    if (cfg_int(c, "head_dim", &head_dim) || gemma3) {
        if (!head_dim) head_dim = 256;
        cv_kv_u32(b, akey(m, "attention.key_length"), (uint32_t)head_dim);
        cv_kv_u32(b, akey(m, "attention.value_length"), (uint32_t)head_dim);
    }
    cv_kv_u32(b, "general.file_type", file_type);
    if (!strcmp(arch, "llama") || lfm2) {
        int64_t vocab = 0;
        if (!cfg_int(c, "vocab_size", &vocab)) vocab = m->hp.n_vocab;
        cv_kv_u32(b, akey(m, "vocab_size"), (uint32_t)vocab);
    }
    if (!strcmp(arch, "llama")) cv_kv_u32(b, akey(m, "rope.dimension_count"), (uint32_t)(head_dim ? head_dim : n_embd / n_head));
    if (lfm2 && cfg_int(c, "conv_L_cache", &v)) cv_kv_u32(b, akey(m, "shortconv.l_cache"), (uint32_t)v);
    if (qwen35) {
        const mdl_hparams *hp = &m->hp;
        int64_t interval = 4;
        double partial = 0.25;
        if (n_nextn) cv_kv_u32(b, akey(m, "nextn_predict_layers"), (uint32_t)n_nextn);
        cv_kv_u32(b, akey(m, "ssm.conv_kernel"), (uint32_t)hp->ssm_conv_kernel);
        cv_kv_u32(b, akey(m, "ssm.state_size"), (uint32_t)hp->ssm_head_k_dim);
        cv_kv_u32(b, akey(m, "ssm.group_count"), (uint32_t)hp->ssm_n_k_heads);
        cv_kv_u32(b, akey(m, "ssm.time_step_rank"), (uint32_t)hp->ssm_n_v_heads);
        cv_kv_u32(b, akey(m, "ssm.inner_size"), (uint32_t)(hp->ssm_head_v_dim * hp->ssm_n_v_heads));
        const cJSON *layer_types = NULL;
        if (hf_get_array(c, "layer_types", &layer_types, NULL) == SLM_OK) { /* Qwen3NextModel: per layer */
            cv_kv_arr_head(b, akey(m, "attention.recurrent_layers"), GGUF_BOOL, (uint64_t)(hp->n_layer + n_nextn));
            for (int32_t il = 0; il < hp->n_layer + n_nextn; il++) { /* MTP blocks: full attention */
                uint8_t recurrent = il < hp->n_layer && hp->layer_kind[il] == SLM_LAYER_LINEAR_ATTENTION;
                cv_put(b, &recurrent, 1);
            }
        }
        cfg_int(c, "full_attention_interval", &interval);
        cv_kv_u32(b, akey(m, "full_attention_interval"), (uint32_t)interval);
        if (!cfg_num(rp, "partial_rotary_factor", &partial)) cfg_num(c, "partial_rotary_factor", &partial);
        cv_kv_u32(b, akey(m, "rope.dimension_count"), (uint32_t)((double)(head_dim ? head_dim : n_embd / n_head) * partial));
    }
    if (gemma3) {
        if (cfg_num(c, "final_logit_softcapping", &f) && f != 0) cv_kv_f32(b, akey(m, "final_logit_softcapping"), f);
        if (!(cfg_int(c, "sliding_window_pattern", &v) && v == 1) && cfg_int(c, "sliding_window", &v))
            cv_kv_u32(b, akey(m, "attention.sliding_window"), (uint32_t)v);
    }
    return SLM_OK;
}

/* ---- tokenizer keys: _set_vocab_gpt2 + gguf-py SpecialVocab ----------------------------------- */

static const cJSON *member(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNull(v) ? NULL : v;
}

static bool starts_ends(const char *s, const char *pre, const char *suf) {
    size_t n = strlen(s), a = strlen(pre), z = strlen(suf);
    return n >= a + z && !strncmp(s, pre, a) && !strcmp(s + n - z, suf);
}

/* TextModel.does_token_look_special */
static bool looks_special(const char *t) {
    return !strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]") ||
           starts_ends(t, "<|", "|>") || starts_ends(t, "<\xef\xbd\x9c", "\xef\xbd\x9c>") || starts_ends(t, "<unused", ">");
}

/* GGUF tokenizer.ggml.pre for the pre-tokenizer statelm recognised in tokenizer.json. llama.cpp
 * identifies it by hashing the tokenisation of a check text; the families statelm runs map one to
 * one onto these names. */
static const char *gguf_pre_name(const slm_model *m) {
    const char *p = m->tok->pre_name;
    if (!strcmp(p, "llama3")) return !strcmp(m->arch->name, "lfm2") ? "lfm2" : "llama-bpe";
    if (!strcmp(p, "gpt2")) return "gpt-2";
    if (!strcmp(p, "smollm") || !strcmp(p, "qwen2") || !strcmp(p, "qwen35")) return p;
    return NULL;
}

/* A tokenizer_config.json token entry: a string or {"content": ...}. */
static const char *config_token(const cJSON *cfg, const char *key) {
    const cJSON *v = member(cfg, key);
    if (cJSON_IsObject(v)) v = member(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

enum { SP_BOS, SP_EOS, SP_UNK, SP_SEP, SP_PAD, SP_CLS, SP_MASK, SP_EOT, SP_EOM, SP_COUNT };
static const char *const sp_names[SP_COUNT] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask", "eot", "eom"};
/* GGUF key suffixes (gguf-py Keys.Tokenizer); GGUFWriter has no handler for a cls id, nor an
 * add_{typ}_token one but for bos, eos and sep: SpecialVocab skips those. */
static const char *const sp_id_keys[SP_COUNT] = {"bos_token_id", "eos_token_id", "unknown_token_id",
                                                 "seperator_token_id", "padding_token_id", NULL,
                                                 "mask_token_id", "eot_token_id", "eom_token_id"};

typedef struct special_vocab {
    const char *text[SP_COUNT]; /* token text from tokenizer_config.json (or the post-processor) */
    int64_t id[SP_COUNT];       /* -1 = not set */
    int add[SP_COUNT];          /* -1 = not set, else add_{typ}_token */
    int n_types;                /* bos..mask, then eot / eom when the post-processor adds them */
} special_vocab;

/* The id of the SpecialToken that opens (or, with last, closes) a TemplateProcessing sequence. */
static const char *first_special(const cJSON *seq, bool last) {
    int n = cJSON_GetArraySize(seq);
    const cJSON *it = n > 0 ? cJSON_GetArrayItem(seq, last ? n - 1 : 0) : NULL;
    const cJSON *id = member(member(it, "SpecialToken"), "id");
    return cJSON_IsString(id) && id->valuestring[0] ? id->valuestring : NULL;
}

static bool same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* SpecialVocab._try_load_from_tokenizer_json, the parts that apply to BPE tokenizers (the
 * RobertaProcessing and TemplateProcessing<pair> separator rules are not: BERT-style models). */
static void special_from_tokenizer(special_vocab *sv, const cJSON *tj, const cJSON *cfg) {
    for (int i = 0; i < SP_COUNT; i++) sv->text[i] = NULL, sv->id[i] = -1, sv->add[i] = -1;
    sv->n_types = SP_EOT;
    char key[32];
    for (int i = 0; i < SP_EOT; i++) {
        snprintf(key, sizeof key, "%s_token", sp_names[i]);
        sv->text[i] = config_token(cfg, key);
    }
    if (!sv->text[SP_BOS] && sv->text[SP_CLS]) sv->text[SP_BOS] = sv->text[SP_CLS];
    if (!sv->text[SP_EOS] && sv->text[SP_SEP]) sv->text[SP_EOS] = sv->text[SP_SEP];
    const cJSON *pp = member(tj, "post_processor"), *list = member(pp, "processors"), *proc;
    if (!pp) return;
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 1;
    for (int k = 0; k < n; k++) {
        proc = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, k) : pp;
        const cJSON *ty = member(proc, "type");
        const char *type = cJSON_IsString(ty) ? ty->valuestring : "";
        if (!strcmp(type, "ByteLevel")) {
            if (sv->add[SP_BOS] < 0) sv->add[SP_BOS] = 0;
            if (sv->add[SP_EOS] < 0) sv->add[SP_EOS] = 0;
        } else if (!strcmp(type, "TemplateProcessing")) {
            const cJSON *single = member(proc, "single");
            if (cJSON_GetArraySize(single) <= 1) continue;
            const char *first = first_special(single, false), *last = first_special(single, true);
            if (first) {
                if (!cfg) {
                    sv->text[SP_BOS] = first;
                } else if (!same(first, sv->text[SP_BOS]) && !same(first, sv->text[SP_CLS])) {
                    if (!sv->text[SP_BOS]) sv->text[SP_BOS] = first;
                    if (!sv->text[SP_CLS]) sv->text[SP_CLS] = first;
                }
                sv->add[SP_BOS] = same(first, sv->text[SP_BOS]) || same(first, sv->text[SP_CLS]);
            }
            if (last) {
                if (!cfg) {
                    sv->text[SP_EOS] = last;
                } else if (!same(last, sv->text[SP_EOS])) {
                    if (sv->n_types < SP_COUNT) sv->text[sv->n_types++] = sv->text[SP_EOS]; /* old EOS: EOT, then EOM */
                    sv->text[SP_EOS] = last;
                }
                sv->add[SP_EOS] = same(last, sv->text[SP_EOS]);
            }
        }
    }
}

/* The rest of SpecialVocab: add_{typ}_token and {typ}_token ids from tokenizer_config.json (ids
 * looked up among tokenizer.json's added_tokens), then config.json's {typ}_token_id. */
static void special_ids(special_vocab *sv, const cJSON *tj, const cJSON *cfg, const cJSON *config, const cJSON *text) {
    const cJSON *added = member(tj, "added_tokens"), *it;
    char key[40];
    for (int i = 0; cfg && i < sv->n_types; i++) {
        snprintf(key, sizeof key, "add_%s_token", sp_names[i]);
        const cJSON *ab = member(cfg, key);
        if (cJSON_IsBool(ab) && sv->add[i] < 0) sv->add[i] = cJSON_IsTrue(ab);
        if (!sv->text[i]) continue;
        cJSON_ArrayForEach(it, added) {
            const cJSON *content = member(it, "content"), *id = member(it, "id");
            if (cJSON_IsString(content) && !strcmp(content->valuestring, sv->text[i])) {
                if (cJSON_IsNumber(id) && id->valuedouble >= 0 && sv->id[i] < 0) sv->id[i] = (int64_t)id->valuedouble;
                break;
            }
        }
    }
    for (int i = 0; i < sv->n_types; i++) {
        snprintf(key, sizeof key, "%s_token_id", sp_names[i]);
        int64_t v;
        if (sv->id[i] < 0 && (cfg_int(config, key, &v) || (text != config && cfg_int(text, key, &v))) && v >= 0)
            sv->id[i] = v;
    }
}

/* The chat template as SpecialVocab reads it: tokenizer_config.json's chat_template (a string, or
 * a list of {name, template}: "default" becomes tokenizer.chat_template, the others
 * tokenizer.chat_template.NAME plus the tokenizer.chat_templates list), else chat_template.jinja. */
static slm_status chat_template_keys(const slm_model *m, cv_kv *b, slm_err *e) {
    const cJSON *cfg = m->hf.tok_config;
    if (!cfg) return SLM_OK;
    const cJSON *ct = member(cfg, "chat_template");
    if (cJSON_IsString(ct)) {
        cv_kv_str(b, "tokenizer.chat_template", ct->valuestring);
        return SLM_OK;
    }
    if (cJSON_IsArray(ct)) {
        const cJSON *it;
        uint64_t n_named = 0;
        cJSON_ArrayForEach(it, ct) {
            const cJSON *name = member(it, "name"), *t = member(it, "template");
            if (!cJSON_IsString(name) || !cJSON_IsString(t)) continue;
            char key[300];
            if (!strcmp(name->valuestring, "default")) {
                cv_kv_str(b, "tokenizer.chat_template", t->valuestring);
            } else {
                snprintf(key, sizeof key, "tokenizer.chat_template.%s", name->valuestring);
                cv_kv_str(b, key, t->valuestring);
                n_named++;
            }
        }
        if (n_named) {
            cv_kv_arr_head(b, "tokenizer.chat_templates", GGUF_STRING, n_named);
            cJSON_ArrayForEach(it, ct) {
                const cJSON *name = member(it, "name"), *t = member(it, "template");
                if (cJSON_IsString(name) && cJSON_IsString(t) && strcmp(name->valuestring, "default") != 0)
                    cv_put_str(b, name->valuestring, strlen(name->valuestring));
            }
        }
        return SLM_OK;
    }
    if (m->chat_template) cv_kv_str(b, "tokenizer.chat_template", m->chat_template); /* chat_template.jinja */
    (void)e;
    return SLM_OK;
}

static slm_status tokenizer_keys(const slm_model *m, cv_kv *b, slm_err *e) {
    if (!m->tok || !m->hf.tokenizer_json_path)
        return err_set(e, SLM_ERR_UNSUPPORTED, "%s: no tokenizer.json (convert writes byte-level BPE tokenizers)", m->path);
    const char *pre = gguf_pre_name(m);
    if (!pre)
        return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer '%s' has no llama.cpp name (llama.cpp's "
                       "converter would not recognise it either)", m->tok->pre_name);
    char *text = NULL;
    size_t len = 0;
    slm_status st = file_read_all(m->hf.tokenizer_json_path, 256u << 20, &text, &len, e);
    if (st) return st;
    cJSON *tj = cJSON_ParseWithLength(text, len);
    free(text);
    if (!tj) return err_set(e, SLM_ERR_FORMAT, "%s: invalid JSON", m->hf.tokenizer_json_path);
    const cJSON *model = member(tj, "model"), *vocab = member(model, "vocab"), *added = member(tj, "added_tokens"), *it;
    int64_t n_vocab = 0;
    if (!cfg_int(m->hf.text, "vocab_size", &n_vocab)) n_vocab = m->tok->n_vocab;
    if (n_vocab < m->tok->n_vocab) {
        cJSON_Delete(tj);
        return err_set(e, SLM_ERR_FORMAT, "config.json: vocab_size %lld is below the tokenizer's %d tokens",
                       (long long)n_vocab, m->tok->n_vocab);
    }
    const slm_allocator *a = &m->alloc;
    const char **tokens = al_calloc(a, (size_t)n_vocab, sizeof *tokens);
    int32_t *types = al_calloc(a, (size_t)n_vocab, sizeof *types);
    char **owned = al_calloc(a, (size_t)n_vocab, sizeof *owned);
    if (!tokens || !types || !owned) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    cJSON_ArrayForEach(it, vocab) {
        int64_t id = (int64_t)it->valuedouble;
        if (id >= 0 && id < n_vocab) tokens[id] = it->string, types[id] = TOK_TYPE_NORMAL;
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = member(it, "id"), *content = member(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || id->valuedouble < 0 || id->valuedouble >= (double)n_vocab)
            continue;
        int64_t i = (int64_t)id->valuedouble;
        const cJSON *special = member(it, "special");
        tokens[i] = content->valuestring;
        if (cJSON_IsTrue(special) || looks_special(tokens[i])) {
            types[i] = TOK_TYPE_CONTROL;
            continue;
        }
        types[i] = TOK_TYPE_USER_DEFINED;
        if (strstr(tokens[i], "\xe2\x96\x81")) { /* pre-normalise user-defined spaces ("▁" -> " ") */
            size_t l = strlen(tokens[i]);
            char *s = al_malloc(a, l + 1), *o = s;
            if (!s) {
                st = err_set(e, SLM_ERR_NOMEM, "out of memory");
                goto done;
            }
            for (const char *p = tokens[i]; *p;)
                if (!strncmp(p, "\xe2\x96\x81", 3)) *o++ = ' ', p += 3;
                else *o++ = *p++;
            *o = '\0';
            tokens[i] = owned[i] = s;
        }
    }
    cv_kv_str(b, "tokenizer.ggml.model", "gpt2");
    cv_kv_str(b, "tokenizer.ggml.pre", pre);
    cv_kv_arr_head(b, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)n_vocab);
    for (int64_t i = 0; i < n_vocab; i++) {
        char pad[32];
        if (!tokens[i]) snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i), types[i] = TOK_TYPE_UNUSED;
        const char *s = tokens[i] ? tokens[i] : pad;
        cv_put_str(b, s, strlen(s));
    }
    cv_kv_arr_i32(b, "tokenizer.ggml.token_type", types, (uint64_t)n_vocab);
    /* merges: "left right"; pairs with spaces encode them as U+0120 (gguf-py SpecialVocab) */
    const cJSON *merges = member(model, "merges");
    if (cJSON_GetArraySize(merges) > 0) {
        cv_kv_arr_head(b, "tokenizer.ggml.merges", GGUF_STRING, (uint64_t)cJSON_GetArraySize(merges));
        cJSON_ArrayForEach(it, merges) {
            if (cJSON_IsString(it)) {
                cv_put_str(b, it->valuestring, strlen(it->valuestring));
                continue;
            }
            char pair[1024];
            size_t o = 0;
            for (int side = 0; side < 2; side++) {
                const cJSON *part = cJSON_GetArrayItem(it, side);
                const char *p = cJSON_IsString(part) ? part->valuestring : "";
                if (side && o < sizeof pair) pair[o++] = ' ';
                for (; *p && o + 2 < sizeof pair; p++)
                    if (*p == ' ') pair[o++] = '\xc4', pair[o++] = '\xa0';
                    else pair[o++] = *p;
            }
            cv_put_str(b, pair, o);
        }
    }
    special_vocab sv;
    special_from_tokenizer(&sv, tj, m->hf.tok_config);
    special_ids(&sv, tj, m->hf.tok_config, m->hf.config, m->hf.text);
    char key[64];
    for (int i = 0; i < sv.n_types; i++) {
        if (sv.id[i] < 0 || !sp_id_keys[i]) continue;
        snprintf(key, sizeof key, "tokenizer.ggml.%s", sp_id_keys[i]);
        cv_kv_u32(b, key, (uint32_t)sv.id[i]);
    }
    for (int i = 0; i < sv.n_types; i++) {
        if (sv.add[i] < 0 || (i != SP_BOS && i != SP_EOS && i != SP_SEP)) continue;
        snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", sp_names[i]);
        cv_kv_bool(b, key, sv.add[i]);
    }
    st = chat_template_keys(m, b, e);
done:
    for (int64_t i = 0; owned && i < n_vocab; i++) al_free(a, owned[i]);
    al_free(a, owned);
    al_free(a, tokens);
    al_free(a, types);
    cJSON_Delete(tj);
    return st;
}

/* ---- tensors --------------------------------------------------------------------------------- */

/* The converter's order: the checkpoint's tensors by Hugging Face name (the order of the keys
 * of a safetensors file of one dtype; "model.layers.10." sorts before "model.layers.2."). */
static int cmp_converter_order(const void *pa, const void *pb) {
    const mdl_tensor *a = *(const mdl_tensor *const *)pa, *b = *(const mdl_tensor *const *)pb;
    return strcmp(a->file_name, b->file_name);
}

/* convert_hf_to_gguf.py's type for a float outtype (ModelBase.prepare_tensors): 1-D tensors,
 * *_norm.weight, ssm_conv1d, shortconv.conv and names not ending in ".weight" stay F32. */
static uint32_t float_outtype_of(const mdl_tensor *t, uint32_t outtype) {
    size_t n = strlen(t->name);
    if (t->n_dims <= 1 || (n >= 12 && !strcmp(t->name + n - 12, "_norm.weight"))) return SLM_DTYPE_F32;
    if (strstr(t->name, ".ssm_conv1d.") || strstr(t->name, ".shortconv.conv.") || n < 7 ||
        strcmp(t->name + n - 7, ".weight") != 0)
        return SLM_DTYPE_F32;
    return outtype;
}

static void as_gguf_tensor(const mdl_tensor *t, gguf_tensor *g) {
    memset(g, 0, sizeof *g);
    g->name = t->name;
    g->type = t->type;
    g->n_dims = (uint32_t)t->n_dims;
    for (int d = 0; d < 4; d++) g->ne[d] = t->ne[d];
    g->size_bytes = t->size_bytes;
    g->data = t->data;
}

/* gemma3 (Gemma3Model.modify_tensors): token_embd keeps only the rows the tokenizer.json
 * vocabulary and added tokens cover. */
static void gemma3_cut_embedding(const slm_model *m, gguf_tensor *g) {
    if (strcmp(m->arch->name, "gemma3") != 0 || strcmp(g->name, "token_embd.weight") != 0 || !m->tok) return;
    if (m->tok->n_vocab < g->ne[1]) {
        uint64_t row = g->size_bytes / (uint64_t)g->ne[1];
        g->ne[1] = m->tok->n_vocab;
        g->size_bytes = row * (uint64_t)g->ne[1];
    }
}

/* A tensor of a qwen35 MTP block: blk.N.* with N >= n_layer. */
static bool is_mtp_tensor(const slm_model *m, const mdl_tensor *t) {
    int il = -1;
    return sscanf(t->name, "blk.%d.", &il) == 1 && il >= m->hp.n_layer;
}

static slm_status outtype_of(const char *outtype, uint32_t *float_type, uint32_t *file_type) {
    static const struct { const char *name; uint32_t type, file_type; } floats[] = {
        {"f32", SLM_DTYPE_F32, 0}, {"f16", SLM_DTYPE_F16, 1}, {"bf16", SLM_DTYPE_BF16, 32}};
    for (size_t i = 0; i < 3; i++)
        if (!strcasecmp(outtype, floats[i].name)) {
            *float_type = floats[i].type;
            *file_type = floats[i].file_type;
            return SLM_OK;
        }
    *float_type = SLM_DTYPE_COUNT;
    return SLM_ERR_NOT_FOUND;
}

SLM_API slm_status slm_convert(const char *hf_dir, const char *out_path, const char *outtype,
                               const slm_quantize_params *params, char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    slm_quantize_params p = slm_quantize_params_default();
    params_read(&p, sizeof p, params);
    const slm_allocator *a = &al_default;
    slm_model *m = NULL;
    cv_kv kb = {buf_make(a), 0};
    gguf_tensor *ts = NULL;
    const gguf_tensor **order = NULL;
    const mdl_tensor **sorted = NULL;
    uint32_t *types = NULL, float_type = SLM_DTYPE_COUNT, file_type = 0;
    slm_status st = SLM_OK;
    if (!hf_dir || !out_path) {
        st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_convert: NULL argument");
        goto done;
    }
    if (!outtype) outtype = "f16";
    /* the type first, so a typo is reported before anything is read */
    if (outtype_of(outtype, &float_type, &file_type) != SLM_OK && (st = quantize_check_type(outtype, &p, &e)))
        goto done;
    struct stat sb;
    if (stat(hf_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st = err_set(&e, SLM_ERR_INVALID_ARG, "%s is not a folder: convert reads a Hugging Face folder (config.json, "
                     "*.safetensors, tokenizer.json); statelm quantize converts between GGUF types", hf_dir);
        goto done;
    }
    if (!p.force && stat(out_path, &sb) == 0) {
        st = err_set(&e, SLM_ERR_INVALID_ARG, "%s exists (use --force to replace it)", out_path);
        goto done;
    }
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = p.n_threads;
    mp.log_fn = p.log_fn;
    mp.log_user_data = p.log_user_data;
    char lerr[512];
    if ((st = slm_model_load(hf_dir, &mp, &m, lerr, sizeof lerr))) {
        err_set(&e, st, "%s", lerr);
        goto done;
    }
    /* the MTP block is the tensors of blocks n_layer and up (model/arch.c qwen35_mtp_name) */
    const int32_t n_nextn = p.no_mtp ? 0 : m->hp.n_nextn;
    uint64_t n = 0;
    ts = al_calloc(a, (size_t)m->n_tensors + 1, sizeof *ts);
    order = al_calloc(a, (size_t)m->n_tensors + 1, sizeof *order);
    sorted = al_calloc(a, (size_t)m->n_tensors + 1, sizeof *sorted);
    types = al_calloc(a, (size_t)m->n_tensors + 1, sizeof *types);
    if (!ts || !order || !sorted || !types) {
        st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < m->n_tensors; i++)
        if (!p.no_mtp || !is_mtp_tensor(m, &m->tensors[i])) sorted[n++] = &m->tensors[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_converter_order);
    for (uint64_t i = 0; i < n; i++) {
        as_gguf_tensor(sorted[i], &ts[i]);
        gemma3_cut_embedding(m, &ts[i]);
        uint32_t t = ts[i].type;
        if (t != SLM_DTYPE_F32 && t != SLM_DTYPE_F16 && t != SLM_DTYPE_BF16) {
            st = err_set(&e, SLM_ERR_UNSUPPORTED, "tensor %s (%s) is %s: convert reads F32, F16 and BF16 weights",
                         ts[i].name, sorted[i]->file_name, dtype_traits_of(t)->name);
            goto done;
        }
    }
    if (float_type != SLM_DTYPE_COUNT) {
        for (uint64_t i = 0; i < n; i++) {
            order[i] = &ts[i];
            types[i] = float_outtype_of(sorted[i], float_type);
        }
    } else {
        /* the plan sees the f32 conversion: every tensor F32, in llama.cpp's quantize order */
        uint32_t *src_types = al_calloc(a, (size_t)n + 1, sizeof *src_types);
        if (!src_types) {
            st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (uint64_t i = 0; i < n; i++) src_types[i] = ts[i].type, ts[i].type = SLM_DTYPE_F32;
        st = quantize_plan(outtype, &p, m->arch->name, m->hp.n_layer + n_nextn, 0, ts, n, order, types, &file_type, &e);
        for (uint64_t i = 0; i < n; i++) ts[i].type = src_types[i];
        al_free(a, src_types);
        if (st) goto done;
    }
    /* metadata */
    const char *slash = strrchr(m->path, '/');
    cv_kv_str(&kb, "general.architecture", m->arch->name);
    cv_kv_str(&kb, "general.type", "model");
    cv_kv_str(&kb, "general.name", m->name && m->name[0] ? m->name : (slash ? slash + 1 : m->path));
    if ((st = model_keys(m, &kb, file_type, n_nextn, &e)) || (st = tokenizer_keys(m, &kb, &e))) goto done;
    cv_kv_u32(&kb, "general.quantization_version", CV_QNT_VERSION);
    const char **sources = al_calloc(a, (size_t)n + 1, sizeof *sources);
    if (!sources) {
        st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) sources[i] = sorted[order[i] - ts]->file_name;
    cv_output o = {.path = out_path, .force = p.force, .kv = &kb, .tensors = order, .types = types,
                   .sources = sources, .n_tensors = n, .alignment = GGUF_ALIGNMENT, .n_threads = p.n_threads,
                   .a = a, .log = {p.log_fn, p.log_user_data}};
    st = cv_write_gguf(&o, &e);
    al_free(a, sources);
done:
    buf_free(&kb.b);
    al_free(a, ts);
    al_free(a, order);
    al_free(a, sorted);
    al_free(a, types);
    slm_model_destroy(m);
    if (st != SLM_OK) err_copy_out(&e, err, err_cap);
    else if (err && err_cap) err[0] = '\0';
    return st;
}
