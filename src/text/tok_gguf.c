/* tok_gguf.c — tok_from_gguf: the tokenizer.ggml.* metadata of a parsed GGUF file -> tok_spec ->
 * tok_build. Reads the gguf_file directory directly (keys, typed values, arrays as laid out by the
 * reader) and validates every type and length. Does not parse the file (format/gguf.c does).
 * References: docs/spec/gguf.md §7; llama.cpp llama-vocab.cpp (key names, defaults). */
#include <stddef.h>
#include <string.h>

#include "base/utf8.h"
#include "text/tok_impl.h"

static const char *gguf_type_label(gguf_vtype t) {
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                        "bool", "string", "array", "uint64", "int64", "float64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown type";
}

static const gguf_value *find(const gguf_file *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0) return &g->kv[i].value;
    return NULL;
}

static size_t elem_size(gguf_vtype t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static uint64_t rd_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Integer element i of a fixed-size integer array (sign-extended for signed types). */
static bool arr_int(const gguf_value *v, uint64_t i, int64_t *out) {
    size_t es = elem_size(v->v.arr.elem_type);
    if (!es || v->v.arr.elem_type == GGUF_FLOAT32 || v->v.arr.elem_type == GGUF_FLOAT64 || !v->v.arr.raw) return false;
    uint64_t u = rd_le(v->v.arr.raw + i * es, es);
    switch (v->v.arr.elem_type) {
    case GGUF_INT8: *out = (int8_t)u; break;
    case GGUF_INT16: *out = (int16_t)u; break;
    case GGUF_INT32: *out = (int32_t)u; break;
    case GGUF_INT64: *out = (int64_t)u; break;
    default: if (u > INT64_MAX) return false; *out = (int64_t)u; break;
    }
    return true;
}

static bool arr_float(const gguf_value *v, uint64_t i, float *out) {
    if (!v->v.arr.raw) return false;
    if (v->v.arr.elem_type == GGUF_FLOAT32) {
        uint32_t u = (uint32_t)rd_le(v->v.arr.raw + i * 4, 4);
        memcpy(out, &u, 4);
        return true;
    }
    if (v->v.arr.elem_type == GGUF_FLOAT64) {
        uint64_t u = rd_le(v->v.arr.raw + i * 8, 8);
        double d;
        memcpy(&d, &u, 8);
        *out = (float)d;
        return true;
    }
    int64_t x;
    if (!arr_int(v, i, &x)) return false;
    *out = (float)x;
    return true;
}

static slm_status get_str(const gguf_file *g, const char *key, gguf_str *out, slm_err *e) {
    const gguf_value *v = find(g, key);
    if (!v) return SLM_ERR_NOT_FOUND;
    if (v->type != GGUF_STRING) return err_set(e, SLM_ERR_FORMAT, "%s: expected a string, found %s", key, gguf_type_label(v->type));
    *out = v->v.str;
    return SLM_OK;
}

static slm_status get_array(const gguf_file *g, const char *key, bool want_strings, const gguf_value **out, slm_err *e) {
    const gguf_value *v = find(g, key);
    if (!v) return SLM_ERR_NOT_FOUND;
    if (v->type != GGUF_ARRAY) return err_set(e, SLM_ERR_FORMAT, "%s: expected an array, found %s", key, gguf_type_label(v->type));
    if (want_strings ? (v->v.arr.elem_type != GGUF_STRING || (!v->v.arr.strs && v->v.arr.n))
                     : (elem_size(v->v.arr.elem_type) == 0 || v->v.arr.elem_type == GGUF_BOOL || (!v->v.arr.raw && v->v.arr.n)))
        return err_set(e, SLM_ERR_FORMAT, "%s: unexpected element type %s", key, gguf_type_label(v->v.arr.elem_type));
    *out = v;
    return SLM_OK;
}

static slm_status get_id(const gguf_file *g, const char *key, int64_t *out, slm_err *e) {
    const gguf_value *v = find(g, key);
    if (!v) return SLM_ERR_NOT_FOUND;
    switch (v->type) {
    case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT32: case GGUF_UINT64:
        if (v->v.u64 > (uint64_t)INT32_MAX) return err_set(e, SLM_ERR_RANGE, "%s: value %llu out of range", key, (unsigned long long)v->v.u64);
        *out = (int64_t)v->v.u64;
        return SLM_OK;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
        if (v->v.i64 > INT32_MAX || v->v.i64 < -1) return err_set(e, SLM_ERR_RANGE, "%s: value %lld out of range", key, (long long)v->v.i64);
        *out = v->v.i64;
        return SLM_OK;
    default:
        return err_set(e, SLM_ERR_FORMAT, "%s: expected an integer, found %s", key, gguf_type_label(v->type));
    }
}

static slm_status get_bool(const gguf_file *g, const char *key, bool *out, slm_err *e) {
    const gguf_value *v = find(g, key);
    if (!v) return SLM_ERR_NOT_FOUND;
    if (v->type != GGUF_BOOL) return err_set(e, SLM_ERR_FORMAT, "%s: expected a bool, found %s", key, gguf_type_label(v->type));
    *out = v->v.b;
    return SLM_OK;
}

slm_status tok_from_gguf(const gguf_file *g, const slm_allocator *a, slm_tokenizer **out, slm_err *e) {
    *out = NULL;
    if (!a) a = &al_default;
    tok_spec spec;
    tok_spec_init(&spec);
    tok_str *tokens = NULL, *merges = NULL;
    uint8_t *types = NULL;
    float *scores = NULL;
    char *pre = NULL;
    slm_status st;
    gguf_str model = {0};
    st = get_str(g, "tokenizer.ggml.model", &model, e);
    if (st != SLM_OK) return st; /* NOT_FOUND (no message) when the file has no tokenizer */
    /* "gemma4": BPE on raw UTF-8 whose pre-tokenizer is always "gemma4" (llama.cpp does the same). */
    bool gemma4 = model.len == 6 && memcmp(model.ptr, "gemma4", 6) == 0;
    if ((model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0) || gemma4) spec.kind = SLM_TOKENIZER_BPE;
    else if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0) spec.kind = SLM_TOKENIZER_SPM;
    else if (model.len == 4 && memcmp(model.ptr, "bert", 4) == 0) spec.kind = SLM_TOKENIZER_WPM;
    else
        return err_set(e, SLM_ERR_UNSUPPORTED,
                       "tokenizer.ggml.model: tokenizer '%.*s' is not supported (supported: gpt2, llama, gemma4, bert)",
                       (int)(model.len > 32 ? 32 : model.len), model.ptr);

    const gguf_value *vt = NULL, *vtype = NULL, *vscore = NULL, *vmerge = NULL;
    st = get_array(g, "tokenizer.ggml.tokens", true, &vt, e);
    if (st == SLM_ERR_NOT_FOUND) return err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.tokens: missing");
    if (st != SLM_OK) return st;
    uint64_t n = vt->v.arr.n;
    if (n == 0 || n > TOK_MAX_VOCAB) return err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens out of range", (unsigned long long)n);
    st = get_array(g, "tokenizer.ggml.token_type", false, &vtype, e);
    if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) return st;
    if (vtype && vtype->v.arr.n != n)
        return err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.token_type: %llu entries for %llu tokens", (unsigned long long)vtype->v.arr.n, (unsigned long long)n);
    st = get_array(g, "tokenizer.ggml.scores", false, &vscore, e);
    if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) return st;
    if (vscore && vscore->v.arr.n != n)
        return err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.scores: %llu entries for %llu tokens", (unsigned long long)vscore->v.arr.n, (unsigned long long)n);
    st = get_array(g, "tokenizer.ggml.merges", true, &vmerge, e);
    if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) return st;
    if (spec.kind == SLM_TOKENIZER_BPE && !vmerge) return err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.merges: missing (required for gpt2)");
    if (vmerge && vmerge->v.arr.n > (uint64_t)TOK_MAX_VOCAB * 4) return err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.merges: too many entries");

    tokens = al_array(a, n, sizeof *tokens);
    types = vtype ? al_array(a, n, 1) : NULL;
    scores = vscore ? al_array(a, n, sizeof *scores) : NULL;
    size_t n_merges = (spec.kind == SLM_TOKENIZER_BPE && vmerge) ? (size_t)vmerge->v.arr.n : 0;
    merges = n_merges ? al_array(a, n_merges, 2 * sizeof *merges) : NULL;
    if (!tokens || (vtype && !types) || (vscore && !scores) || (n_merges && !merges)) {
        st = err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        tokens[i].ptr = vt->v.arr.strs[i].ptr ? vt->v.arr.strs[i].ptr : "";
        tokens[i].len = (size_t)vt->v.arr.strs[i].len;
        if (types) {
            int64_t ty;
            if (!arr_int(vtype, i, &ty) || ty < 0 || ty > TOK_TYPE_BYTE) {
                st = err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.token_type[%llu]: invalid type", (unsigned long long)i);
                goto done;
            }
            types[i] = (uint8_t)ty;
        }
        if (scores && !arr_float(vscore, i, &scores[i])) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.scores[%llu]: not a number", (unsigned long long)i);
            goto done;
        }
    }
    for (size_t i = 0; i < n_merges; i++) {
        gguf_str m = vmerge->v.arr.strs[i];
        const char *sp = m.ptr ? memchr(m.ptr, ' ', (size_t)m.len) : NULL;
        if (!sp || sp == m.ptr || sp + 1 == m.ptr + m.len) {
            st = err_set(e, SLM_ERR_FORMAT, "tokenizer.ggml.merges[%zu]: not of the form \"left right\"", i);
            goto done;
        }
        merges[2 * i] = (tok_str){m.ptr, (size_t)(sp - m.ptr)};
        merges[2 * i + 1] = (tok_str){sp + 1, (size_t)(m.ptr + m.len - sp - 1)};
    }
    spec.n_vocab = (size_t)n;
    spec.tokens = tokens;
    spec.types = types;
    spec.scores = scores;
    spec.merges = merges;
    spec.n_merges = n_merges;

    static const struct { const char *key; size_t off; } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(tok_spec, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(tok_spec, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(tok_spec, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(tok_spec, eom)},
        {"tokenizer.ggml.padding_token_id", offsetof(tok_spec, pad)},
        {"tokenizer.ggml.unknown_token_id", offsetof(tok_spec, unk)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        int64_t v = -1;
        st = get_id(g, ids[i].key, &v, e);
        if (st == SLM_ERR_NOT_FOUND) continue;
        if (st != SLM_OK) goto done;
        if (v >= (int64_t)n) {
            st = err_set(e, SLM_ERR_RANGE, "%s: id %lld out of range (vocabulary of %llu)", ids[i].key, (long long)v, (unsigned long long)n);
            goto done;
        }
        memcpy((char *)&spec + ids[i].off, &v, sizeof v);
    }
    if (spec.kind == SLM_TOKENIZER_BPE) {
        gguf_str p = {0};
        st = gemma4 ? SLM_ERR_NOT_FOUND : get_str(g, "tokenizer.ggml.pre", &p, e);
        if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
        pre = st == SLM_OK ? al_strndup(a, p.ptr, (size_t)p.len) : al_strdup(a, gemma4 ? "gemma4" : "default");
        if (!pre) {
            st = err_set(e, SLM_ERR_NOMEM, "tokenizer: out of memory");
            goto done;
        }
        spec.pre_preset = pre;
    }
    /* Defaults as in llama.cpp: SPM adds BOS and a space prefix; BPE does neither, but for the
     * pre-tokenizers that llama.cpp gives BOS (llama3); WPM adds its [CLS] as BOS, lowercases
     * and strips accents unless tokenizer.ggml.normalizer.* say otherwise. */
    spec.add_bos = spec.kind != SLM_TOKENIZER_BPE || (pre && pretok_preset_add_bos(pre));
    if (spec.kind == SLM_TOKENIZER_WPM) {
        if (spec.bos < 0) {
            st = get_id(g, "tokenizer.ggml.cls_token_id", &spec.bos, e);
            if (st == SLM_OK && spec.bos >= (int64_t)n) st = err_set(e, SLM_ERR_RANGE, "tokenizer.ggml.cls_token_id: id %lld out of range", (long long)spec.bos);
            if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
        }
        spec.wpm_lowercase = true;
        st = get_bool(g, "tokenizer.ggml.normalizer.lowercase", &spec.wpm_lowercase, e);
        if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
        spec.wpm_strip_accents = spec.wpm_lowercase;
        st = get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &spec.wpm_strip_accents, e);
        if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
    }
    spec.add_space_prefix = spec.kind == SLM_TOKENIZER_SPM;
    st = get_bool(g, "tokenizer.ggml.add_bos_token", &spec.add_bos, e);
    if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
    st = get_bool(g, "tokenizer.ggml.add_eos_token", &spec.add_eos, e);
    if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
    if (spec.kind == SLM_TOKENIZER_SPM) {
        st = get_bool(g, "tokenizer.ggml.add_space_prefix", &spec.add_space_prefix, e);
        if (st != SLM_OK && st != SLM_ERR_NOT_FOUND) goto done;
    }
    st = tok_build(&spec, a, out, e);
done:
    al_free(a, tokens);
    al_free(a, types);
    al_free(a, scores);
    al_free(a, merges);
    al_free(a, pre);
    return st;
}
