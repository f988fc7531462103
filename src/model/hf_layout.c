/* hf_layout.c — the tensor rewrites of hf_layout.h, after llama.cpp conversion/llama.py
 * (LlamaModel.permute), conversion/qwen.py (_LinearAttentionVReorderBase, Qwen3NextModel: A_log,
 * norm shift) and conversion/gemma.py (Gemma3Model.norm_shift). Runs once per load, before
 * quantisation on load and before slm_convert writes anything. */
#include <math.h>
#include <string.h>

#include "base/dtype.h"
#include "base/half.h"
#include "model/hf_layout.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A buffer for t's new bytes, owned by m (freed at destroy). */
static uint8_t *owned_buffer(slm_model *m, size_t bytes, slm_err *e) {
    uint8_t *p = al_malloc_large(&m->alloc, bytes ? bytes : 1);
    if (!p) {
        err_set(e, SLM_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
        return NULL;
    }
    m->owned[m->n_owned++] = p;
    return p;
}

/* In each of n_outer consecutive blocks of A*B units of u bytes at p, unit (a, b) (index a*B + b)
 * moves to index b*A + a: [A, B] -> [B, A]. src and dst do not overlap. */
static void transpose_units(uint8_t *dst, const uint8_t *src, size_t n_outer, size_t A, size_t B, size_t u) {
    const size_t block = A * B * u;
    for (size_t o = 0; o < n_outer; o++)
        for (size_t a = 0; a < A; a++)
            for (size_t b = 0; b < B; b++) memcpy(dst + o * block + (b * A + a) * u, src + o * block + (a * B + b) * u, u);
}

typedef enum elementwise { EW_PLUS_ONE, EW_NEG_EXP } elementwise;

/* t (F32, F16 or BF16) -> F32 with f applied. F16 sources compute in F16 (torch keeps the dtype),
 * the others in F32 (the converter widens BF16 first). */
static slm_status apply_elementwise(slm_model *m, mdl_tensor *t, elementwise f, slm_err *e) {
    uint64_t n = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
    if (t->type != SLM_DTYPE_F32 && t->type != SLM_DTYPE_F16 && t->type != SLM_DTYPE_BF16)
        return err_set(e, SLM_ERR_UNSUPPORTED, "tensor %s (%s): expected a float tensor", t->file_name,
                       dtype_traits_of(t->type)->name);
    float *out = (float *)owned_buffer(m, (size_t)n * sizeof(float), e);
    if (!out) return SLM_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        float x = t->type == SLM_DTYPE_F32    ? ((const float *)t->data)[i]
                  : t->type == SLM_DTYPE_BF16 ? bf16_to_f32(((const uint16_t *)t->data)[i])
                                              : f16_to_f32(((const uint16_t *)t->data)[i]);
        float y = f == EW_PLUS_ONE ? x + 1.0f : -expf(x);
        out[i] = t->type == SLM_DTYPE_F16 ? f16_to_f32(f32_to_f16(y)) : y;
    }
    t->type = SLM_DTYPE_F32;
    t->data = (const uint8_t *)out;
    t->size_bytes = n * sizeof(float);
    return SLM_OK;
}

/* Rows [row0, n_rows) of t (rows of ne[0] elements) regrouped [A, B, u rows] -> [B, A, u rows];
 * with by_column, the columns of every row instead ([A, B, u columns]). */
static slm_status reorder(slm_model *m, mdl_tensor *t, bool by_column, int64_t row0, int64_t A, int64_t B, int64_t u,
                          slm_err *e) {
    uint64_t elem = 0, row_bytes = 0;
    if (!dtype_row_bytes(t->type, 1, &elem) || dtype_traits_of(t->type)->block_elems != 1)
        return err_set(e, SLM_ERR_UNSUPPORTED, "tensor %s: cannot reorder a %s tensor", t->file_name,
                       dtype_traits_of(t->type)->name);
    row_bytes = elem * (uint64_t)t->ne[0];
    const int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    const int64_t span = by_column ? t->ne[0] : n_rows - row0;
    if (A < 1 || B < 1 || u < 1 || row0 < 0 || span != A * B * u)
        return err_set(e, SLM_ERR_SHAPE, "tensor %s: %lld %s, expected %lld x %lld x %lld", t->file_name,
                       (long long)span, by_column ? "columns" : "rows", (long long)A, (long long)B, (long long)u);
    uint8_t *out = owned_buffer(m, (size_t)t->size_bytes, e);
    if (!out) return SLM_ERR_NOMEM;
    const size_t head = (size_t)(row0 * (int64_t)row_bytes);
    memcpy(out, t->data, head);
    if (by_column) transpose_units(out, t->data, (size_t)n_rows, (size_t)A, (size_t)B, (size_t)(u * (int64_t)elem));
    else transpose_units(out + head, t->data + head, 1, (size_t)A, (size_t)B, (size_t)(u * (int64_t)row_bytes));
    t->data = out;
    return SLM_OK;
}

/* The "blk.N." suffix of a canonical name, or the name itself. */
static const char *layer_suffix(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return name;
    const char *dot = strchr(name + 4, '.');
    return dot ? dot + 1 : name;
}

static slm_status llama_tensor(slm_model *m, mdl_tensor *t, slm_err *e) {
    const char *s = layer_suffix(t->name);
    int64_t heads = strcmp(s, "attn_q.weight") == 0 ? m->hp.n_head : strcmp(s, "attn_k.weight") == 0 ? m->hp.n_head_kv : 0;
    if (!heads) return SLM_OK;
    /* per head: [2, hd/2] rows -> [hd/2, 2]; heads are the outer blocks */
    int64_t rows = t->ne[1], half = rows / heads / 2;
    if (t->n_dims != 2 || half * heads * 2 != rows)
        return err_set(e, SLM_ERR_SHAPE, "tensor %s: %lld rows are not %lld heads of an even size", t->file_name,
                       (long long)rows, (long long)heads);
    uint64_t row_bytes = 0;
    if (!dtype_row_bytes(t->type, (uint64_t)t->ne[0], &row_bytes) || dtype_traits_of(t->type)->block_elems != 1)
        return err_set(e, SLM_ERR_UNSUPPORTED, "tensor %s: cannot permute a %s tensor", t->file_name,
                       dtype_traits_of(t->type)->name);
    uint8_t *out = owned_buffer(m, (size_t)t->size_bytes, e);
    if (!out) return SLM_ERR_NOMEM;
    transpose_units(out, t->data, (size_t)heads, 2, (size_t)half, (size_t)row_bytes);
    t->data = out;
    return SLM_OK;
}

static slm_status qwen35_tensor(slm_model *m, mdl_tensor *t, slm_err *e) {
    const mdl_hparams *hp = &m->hp;
    const char *s = layer_suffix(t->name);
    const int64_t Hk = hp->ssm_n_k_heads, r = hp->ssm_n_v_heads / hp->ssm_n_k_heads, dv = hp->ssm_head_v_dim;
    const int64_t qk_rows = 2 * Hk * hp->ssm_head_k_dim;
    slm_status st = SLM_OK;
    if (Hk != hp->ssm_n_v_heads) {
        if (!strcmp(s, "attn_qkv.weight") || !strcmp(s, "ssm_conv1d.weight")) st = reorder(m, t, false, qk_rows, Hk, r, dv, e);
        else if (!strcmp(s, "attn_gate.weight")) st = reorder(m, t, false, 0, Hk, r, dv, e);
        else if (!strcmp(s, "ssm_beta.weight") || !strcmp(s, "ssm_alpha.weight")) st = reorder(m, t, false, 0, Hk, r, 1, e);
        else if (!strcmp(s, "ssm_a") || !strcmp(s, "ssm_dt.bias")) st = reorder(m, t, true, 0, Hk, r, 1, e);
        else if (!strcmp(s, "ssm_out.weight")) st = reorder(m, t, true, 0, Hk, r, dv, e);
        if (st) return st;
    }
    if (!strcmp(s, "ssm_a")) return apply_elementwise(m, t, EW_NEG_EXP, e);
    if (ends_with(t->name, "norm.weight") && strcmp(s, "ssm_norm.weight") != 0)
        return apply_elementwise(m, t, EW_PLUS_ONE, e);
    return SLM_OK;
}

static slm_status gemma3_tensor(slm_model *m, mdl_tensor *t, slm_err *e) {
    return ends_with(t->name, "norm.weight") ? apply_elementwise(m, t, EW_PLUS_ONE, e) : SLM_OK;
}

slm_status hf_layout_model(slm_model *m, slm_err *e) {
    const char *arch = m->arch->name;
    slm_status (*fn)(slm_model *, mdl_tensor *, slm_err *) = !strcmp(arch, "llama")    ? llama_tensor
                                                            : !strcmp(arch, "qwen35") ? qwen35_tensor
                                                            : !strcmp(arch, "gemma3") ? gemma3_tensor
                                                                                      : NULL;
    if (!fn) return SLM_OK;
    for (int32_t i = 0; i < m->n_tensors; i++) {
        mdl_tensor *t = &m->tensors[i];
        const uint64_t before = t->size_bytes;
        slm_status st = fn(m, t, e);
        if (st) return st;
        m->weight_bytes = m->weight_bytes - before + t->size_bytes;
    }
    mdl_hparams *hp = &m->hp;
    if (!strcmp(arch, "llama")) hp->rope_style = MDL_ROPE_NORM;
    hp->norm_plus_one = false;
    hp->ssm_a_is_log = false;
    hp->ssm_v_heads_tiled = true;
    return SLM_OK;
}
