/* tok_hf.c — tok_from_hf / tok_from_json: a Hugging Face tokenizer.json (model BPE with vocab and
 * merges in "a b" or [a, b] form; added_tokens; normalizer null / NFC / Sequence of NFC;
 * pre_tokenizer ByteLevel, Split (Regex or String, all behaviours, invert), Digits, Sequence;
 * post_processor TemplateProcessing for the BOS) plus tokenizer_config.json and
 * generation_config.json for special ids -> tok_spec -> tok_build. Anything else is
 * SLM_ERR_UNSUPPORTED naming the construct. Parsed with cJSON. Does not read config.json's model
 * fields. References: HF tokenizers serialisation (tokenizer.json), docs/spec/gguf.md §7. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmap.h"
#include "text/tok_impl.h"

#define HF_TOKENIZER_MAX_BYTES (256u << 20)

typedef struct hf_build {
    tok_spec spec;
    tok_str *tokens;
    uint8_t *types;
    tok_str *merges;
    pretok_step steps[TOK_MAX_PRE_STEPS];
    size_t n_steps;
    int64_t *eog;
    size_t n_eog;
    bool byte_level;
    int n_digits, n_split, n_bytelevel_regex;
    const char *split_name;
} hf_build;

static const cJSON *member(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNull(v) ? NULL : v;
}

static const char *type_of(const cJSON *o) {
    const cJSON *t = member(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static bool as_id(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d < (double)TOK_MAX_VOCAB) || floor(d) != d) return false;
    *out = (int64_t)d;
    return true;
}

static bool flag(const cJSON *o, const char *k, bool dflt) {
    const cJSON *v = member(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static slm_status add_step(hf_build *b, const char *pat, size_t len, bool literal, pretok_behavior beh, bool invert,
                           slm_err *e) {
    if (b->n_steps == TOK_MAX_PRE_STEPS)
        return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: more than %d pre-tokenizer steps", TOK_MAX_PRE_STEPS);
    slm_status st = pretok_step_init(&b->steps[b->n_steps], pat, len, literal, beh, invert, e);
    if (st != SLM_OK) return st;
    b->n_steps++;
    return SLM_OK;
}

static slm_status parse_pre(hf_build *b, const cJSON *p, slm_err *e) {
    if (!p) return SLM_OK;
    const char *ty = type_of(p);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = member(p, "pretokenizers"), *it;
        if (!cJSON_IsArray(list)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: pre_tokenizer Sequence without a list");
        cJSON_ArrayForEach(it, list) {
            slm_status st = parse_pre(b, it, e);
            if (st != SLM_OK) return st;
        }
        return SLM_OK;
    }
    if (strcmp(ty, "ByteLevel") == 0) {
        b->byte_level = true;
        if (flag(p, "add_prefix_space", false))
            return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: ByteLevel add_prefix_space is not supported");
        if (flag(p, "use_regex", true)) {
            b->n_bytelevel_regex++;
            const char *pat = pretok_gpt2_pattern();
            return add_step(b, pat, strlen(pat), false, PRETOK_ISOLATED, false, e);
        }
        return SLM_OK;
    }
    if (strcmp(ty, "Digits") == 0) {
        b->n_digits++;
        const char *pat = flag(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
        return add_step(b, pat, strlen(pat), false, PRETOK_ISOLATED, false, e);
    }
    if (strcmp(ty, "Split") == 0) {
        const cJSON *pat = member(p, "pattern"), *re = member(pat, "Regex"), *lit = member(pat, "String");
        const cJSON *s = cJSON_IsString(re) ? re : lit;
        if (!cJSON_IsString(s)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: Split without a Regex or String pattern");
        const cJSON *bv = member(p, "behavior");
        const char *bs = cJSON_IsString(bv) ? bv->valuestring : "";
        static const struct { const char *name; pretok_behavior b; } behs[] = {
            {"Isolated", PRETOK_ISOLATED}, {"Removed", PRETOK_REMOVED}, {"MergedWithPrevious", PRETOK_MERGED_PREV},
            {"MergedWithNext", PRETOK_MERGED_NEXT}, {"Contiguous", PRETOK_CONTIGUOUS}};
        int k = -1;
        for (int i = 0; i < 5; i++)
            if (strcmp(bs, behs[i].name) == 0) k = i;
        if (k < 0) return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: Split behavior '%.40s' is not supported", bs);
        b->n_split++;
        b->split_name = cJSON_IsString(re) ? pretok_name_for_pattern(s->valuestring, strlen(s->valuestring)) : NULL;
        return add_step(b, s->valuestring, strlen(s->valuestring), !cJSON_IsString(re), behs[k].b, flag(p, "invert", false), e);
    }
    return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer '%.40s' is not supported", ty);
}

static slm_status parse_normalizer(hf_build *b, const cJSON *n, slm_err *e) {
    if (!n) return SLM_OK;
    const char *ty = type_of(n);
    if (strcmp(ty, "NFC") == 0) {
        b->spec.nfc = true;
        return SLM_OK;
    }
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = member(n, "normalizers"), *it;
        cJSON_ArrayForEach(it, list) {
            slm_status st = parse_normalizer(b, it, e);
            if (st != SLM_OK) return st;
        }
        return SLM_OK;
    }
    return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: normalizer '%.40s' is not supported", ty);
}

/* Token text named by a tokenizer_config.json entry (a string or {"content": ...}). */
static const char *config_token(const cJSON *cfg, const char *key) {
    const cJSON *v = member(cfg, key);
    if (cJSON_IsObject(v)) v = member(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int64_t lookup(const hf_build *b, const char *s) {
    if (!s) return -1;
    size_t l = strlen(s);
    for (size_t i = 0; i < b->spec.n_vocab; i++)
        if (b->tokens[i].ptr && b->tokens[i].len == l && memcmp(b->tokens[i].ptr, s, l) == 0) return (int64_t)i;
    return -1;
}

static void first_template_special(const cJSON *pp, const char **name) {
    if (!pp) return;
    if (strcmp(type_of(pp), "Sequence") == 0) {
        const cJSON *it;
        cJSON_ArrayForEach(it, member(pp, "processors")) first_template_special(it, name);
        return;
    }
    if (strcmp(type_of(pp), "TemplateProcessing") != 0) return;
    const cJSON *single = member(pp, "single");
    const cJSON *first = cJSON_IsArray(single) ? cJSON_GetArrayItem(single, 0) : NULL;
    const cJSON *sp = member(member(first, "SpecialToken"), "id");
    if (cJSON_IsString(sp)) *name = sp->valuestring;
}

static slm_status build(hf_build *b, const cJSON *root, const cJSON *cfg, const cJSON *gen, const slm_allocator *a,
                        slm_tokenizer **out, slm_err *e) {
    tok_spec *s = &b->spec;
    const cJSON *model = member(root, "model");
    if (!cJSON_IsObject(model)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: no model object");
    if (strcmp(type_of(model), "BPE") != 0 && !(type_of(model)[0] == 0 && member(model, "merges")))
        return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: model type '%.40s' is not supported", type_of(model));
    const cJSON *vocab = member(model, "vocab"), *merges = member(model, "merges"), *added = member(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
    if (merges && !cJSON_IsArray(merges)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: model.merges is not an array");
    if (added && !cJSON_IsArray(added)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: added_tokens is not an array");
    const cJSON *pfx = member(model, "continuing_subword_prefix"), *sfx = member(model, "end_of_word_suffix");
    if ((cJSON_IsString(pfx) && pfx->valuestring[0]) || (cJSON_IsString(sfx) && sfx->valuestring[0]))
        return err_set(e, SLM_ERR_UNSUPPORTED, "tokenizer.json: subword prefixes/suffixes are not supported");
    /* Vocabulary size: largest id + 1. */
    int64_t max_id = -1, id;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!as_id(it, &id)) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: vocab entry '%.40s' has an invalid id", it->string);
        if (id > max_id) max_id = id;
    }
    cJSON_ArrayForEach(it, added) {
        if (!as_id(member(it, "id"), &id) || !cJSON_IsString(member(it, "content")))
            return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: added_tokens entry without a valid id and content");
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: empty vocabulary");
    s->n_vocab = (size_t)max_id + 1;
    b->tokens = al_calloc(a, s->n_vocab, sizeof *b->tokens);
    b->types = al_calloc(a, s->n_vocab, 1);
    if (!b->tokens || !b->types) return err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
    cJSON_ArrayForEach(it, vocab) {
        as_id(it, &id);
        if (b->tokens[id].ptr)
            return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: id %lld is used by two vocab entries", (long long)id);
        b->tokens[id] = (tok_str){it->string, strlen(it->string)};
        b->types[id] = TOK_TYPE_NORMAL;
    }
    cJSON_ArrayForEach(it, added) {
        as_id(member(it, "id"), &id);
        const char *c = member(it, "content")->valuestring;
        if (b->tokens[id].ptr && strcmp(b->tokens[id].ptr, c) != 0 && b->types[id] != TOK_TYPE_NORMAL)
            return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: added token id %lld given twice", (long long)id);
        b->tokens[id] = (tok_str){c, strlen(c)};
        b->types[id] = flag(it, "special", false) ? TOK_TYPE_CONTROL : TOK_TYPE_USER_DEFINED;
    }
    s->tokens = b->tokens;
    s->types = b->types;
    /* Merges. */
    size_t nm = merges ? (size_t)cJSON_GetArraySize(merges) : 0;
    if (nm) {
        b->merges = al_array(a, nm, 2 * sizeof *b->merges);
        if (!b->merges) return err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
        size_t i = 0;
        cJSON_ArrayForEach(it, merges) {
            if (cJSON_IsString(it)) {
                const char *m = it->valuestring, *sp = strchr(m, ' ');
                if (!sp || sp == m || !sp[1]) return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: merge %zu is not \"left right\"", i);
                b->merges[2 * i] = (tok_str){m, (size_t)(sp - m)};
                b->merges[2 * i + 1] = (tok_str){sp + 1, strlen(sp + 1)};
            } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                       cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
                const char *l = cJSON_GetArrayItem(it, 0)->valuestring, *r = cJSON_GetArrayItem(it, 1)->valuestring;
                b->merges[2 * i] = (tok_str){l, strlen(l)};
                b->merges[2 * i + 1] = (tok_str){r, strlen(r)};
            } else {
                return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: merge %zu is neither a string nor a pair", i);
            }
            i++;
        }
    }
    s->merges = b->merges;
    s->n_merges = nm;
    s->ignore_merges = flag(model, "ignore_merges", false);
    /* Normaliser and pre-tokenizer. */
    slm_status st = parse_normalizer(b, member(root, "normalizer"), e);
    if (st != SLM_OK) return st;
    st = parse_pre(b, member(root, "pre_tokenizer"), e);
    if (st != SLM_OK) return st;
    if (strcmp(type_of(member(root, "decoder")), "ByteLevel") == 0) b->byte_level = true;
    if (!b->byte_level || flag(model, "byte_fallback", false))
        return err_set(e, SLM_ERR_UNSUPPORTED,
                       "tokenizer.json: only byte-level BPE is supported (SentencePiece-style models load from GGUF)");
    s->kind = SLM_TOKENIZER_BPE;
    if (b->n_split == 1 && b->n_digits == 0 && b->n_bytelevel_regex == 0 && b->split_name) s->pre_name = b->split_name;
    else if (b->n_split == 0 && b->n_digits == 1 && b->n_bytelevel_regex == 1) s->pre_name = "smollm";
    else if (b->n_split == 0 && b->n_digits == 0 && b->n_bytelevel_regex == 1) s->pre_name = "gpt2";
    else s->pre_name = "custom";
    if (s->pre_name && strcmp(s->pre_name, "llama3") == 0 && flag(model, "ignore_merges", false)) s->ignore_merges = true;
    /* Special tokens. */
    const cJSON *unk = member(model, "unk_token");
    if (cJSON_IsString(unk)) s->unk = lookup(b, unk->valuestring);
    const char *bos_name = NULL;
    first_template_special(member(root, "post_processor"), &bos_name);
    if (bos_name) {
        s->bos = lookup(b, bos_name);
        s->add_bos = s->bos >= 0;
    }
    if (config_token(cfg, "bos_token")) s->bos = lookup(b, config_token(cfg, "bos_token"));
    if (config_token(cfg, "eos_token")) s->eos = lookup(b, config_token(cfg, "eos_token"));
    if (config_token(cfg, "pad_token")) s->pad = lookup(b, config_token(cfg, "pad_token"));
    if (config_token(cfg, "unk_token")) s->unk = lookup(b, config_token(cfg, "unk_token"));
    const cJSON *ab = member(cfg, "add_bos_token");
    if (cJSON_IsBool(ab)) s->add_bos = cJSON_IsTrue(ab);
    const cJSON *ae = member(cfg, "add_eos_token");
    if (cJSON_IsBool(ae)) s->add_eos = cJSON_IsTrue(ae);
    const cJSON *geos = member(gen, "eos_token_id");
    if (cJSON_IsNumber(geos) || cJSON_IsArray(geos)) {
        size_t ng = cJSON_IsArray(geos) ? (size_t)cJSON_GetArraySize(geos) : 1;
        b->eog = al_array(a, ng ? ng : 1, sizeof *b->eog);
        if (!b->eog) return err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
        if (cJSON_IsArray(geos)) {
            cJSON_ArrayForEach(it, geos) {
                if (!as_id(it, &id)) return err_set(e, SLM_ERR_FORMAT, "generation_config.json: eos_token_id is not an id");
                b->eog[b->n_eog++] = id;
            }
        } else {
            if (!as_id(geos, &id)) return err_set(e, SLM_ERR_FORMAT, "generation_config.json: eos_token_id is not an id");
            b->eog[b->n_eog++] = id;
        }
        if (s->eos < 0 && b->n_eog) s->eos = b->eog[0];
    }
    s->extra_eog = b->eog;
    s->n_extra_eog = b->n_eog;
    s->steps = b->steps;
    s->n_steps = b->n_steps;
    b->n_steps = 0; /* ownership moves to tok_build */
    return tok_build(s, a, out, e);
}

slm_status tok_from_json(const char *json, size_t len, const cJSON *tok_config, const cJSON *gen_config,
                         const slm_allocator *a, slm_tokenizer **out, slm_err *e) {
    *out = NULL;
    if (!a) a = &al_default;
    if (!json) return err_set(e, SLM_ERR_INVALID_ARG, "tokenizer.json: no text");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t off = end && end >= json ? (size_t)(end - json) : 0;
        return err_set(e, SLM_ERR_FORMAT, "tokenizer.json: invalid JSON near byte %zu", off);
    }
    hf_build b;
    memset(&b, 0, sizeof b);
    tok_spec_init(&b.spec);
    slm_status st = build(&b, root, tok_config, gen_config, a, out, e);
    for (size_t i = 0; i < b.n_steps; i++) pretok_step_deinit(&b.steps[i]);
    al_free(a, b.tokens);
    al_free(a, b.types);
    al_free(a, b.merges);
    al_free(a, b.eog);
    cJSON_Delete(root);
    return st;
}

slm_status tok_from_hf(const hf_config *c, const slm_allocator *a, slm_tokenizer **out, slm_err *e) {
    *out = NULL;
    if (!c || !c->tokenizer_json_path) return SLM_ERR_NOT_FOUND;
    char *text = NULL;
    size_t len = 0;
    slm_status st = file_read_all(c->tokenizer_json_path, HF_TOKENIZER_MAX_BYTES, &text, &len, e);
    if (st != SLM_OK) return st;
    st = tok_from_json(text, len, c->tok_config, c->generation ? c->generation : c->config, a, out, e);
    free(text);
    return st;
}
