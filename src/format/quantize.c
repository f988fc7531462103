/* quantize.c — the quantisation rules of slm_quantize (docs/quantize.md), below the files that use
 * them (convert/quantize.c and convert/hf.c write files; model/model.c quantises on load). The
 * tensor type of each weight follows llama-quantize (llama.cpp src/llama-quant.cpp:
 * tensor_allows_quantization, llama_tensor_get_type_impl for the mixes, tensor_type_fallback for
 * rows that are not a whole number of blocks). Tensors are visited in llama.cpp's order (layer,
 * then name), which is also the order the layer counters of the mix rules count in and the order
 * of the output file. A tensor's rows are split over n_threads, converted to f32 (F32/F16/BF16
 * sources; quantised ones only on the way to a float type) and quantised by base/quant.c. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dtype.h"
#include "base/err.h"
#include "base/params.h"
#include "base/quant.h"
#include "format/gguf.h"
#include "format/quantize.h"

/* A target of slm_quantize: its llama_ftype id (general.file_type) and base tensor type. */
typedef enum mix {
    MIX_PLAIN,   /* one type, with the output/embedding rules */
    MIX_Q4_K_S,
    MIX_Q4_K_M,
    MIX_Q5_K_S,
    MIX_Q5_K_M,
    MIX_Q6_K,
} mix;

typedef struct ftype_info {
    const char *name;
    uint32_t file_type; /* llama_ftype */
    uint32_t base;      /* slm_dtype */
    mix mix;
} ftype_info;

static const ftype_info k_ftypes[] = {
    {"f32", 0, SLM_DTYPE_F32, MIX_PLAIN},        {"f16", 1, SLM_DTYPE_F16, MIX_PLAIN},
    {"bf16", 32, SLM_DTYPE_BF16, MIX_PLAIN},     {"q4_0", 2, SLM_DTYPE_Q4_0, MIX_PLAIN},
    {"q4_1", 3, SLM_DTYPE_Q4_1, MIX_PLAIN},      {"q5_0", 8, SLM_DTYPE_Q5_0, MIX_PLAIN},
    {"q5_1", 9, SLM_DTYPE_Q5_1, MIX_PLAIN},      {"q8_0", 7, SLM_DTYPE_Q8_0, MIX_PLAIN},
    {"q4_k_s", 14, SLM_DTYPE_Q4_K, MIX_Q4_K_S},  {"q4_k_m", 15, SLM_DTYPE_Q4_K, MIX_Q4_K_M},
    {"q4_k", 15, SLM_DTYPE_Q4_K, MIX_Q4_K_M},    {"q5_k_s", 16, SLM_DTYPE_Q5_K, MIX_Q5_K_S},
    {"q5_k_m", 17, SLM_DTYPE_Q5_K, MIX_Q5_K_M},  {"q5_k", 17, SLM_DTYPE_Q5_K, MIX_Q5_K_M},
    {"q6_k", 18, SLM_DTYPE_Q6_K, MIX_Q6_K},
};

static bool name_eq_ci(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

static const ftype_info *find_ftype(const char *name) {
    for (size_t i = 0; i < sizeof k_ftypes / sizeof k_ftypes[0]; i++)
        if (name_eq_ci(name, k_ftypes[i].name)) return &k_ftypes[i];
    return NULL;
}

/* A tensor type quant_row writes, by name ("q8_0", "F16"); false if none. */
static bool find_tensor_type(const char *name, uint32_t *type) {
    for (uint32_t t = 0; t < SLM_DTYPE_COUNT; t++) {
        const dtype_traits *tr = dtype_traits_of(t);
        if (tr && quant_has_row(t) && name_eq_ci(name, tr->name)) {
            *type = t;
            return true;
        }
    }
    return false;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* llama-quant.cpp tensor_get_category, for the categories the mixes here use. */
typedef enum category { CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_OUTPUT, CAT_FFN_DOWN } category;

static category category_of(const char *name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    /* attn_qkv and attn_kv_b count as attn_v (category_is_attn_v) */
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight"))
        return CAT_ATTN_V;
    if (strstr(name, "attn_k.weight")) return CAT_ATTN_K;
    if (strstr(name, "attn_q.weight")) return CAT_OTHER;
    if (strstr(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(name, "ffn_up") || strstr(name, "ffn_gate")) return CAT_OTHER;
    if (strstr(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

/* ggml_n_dims: 1 + the last dimension above 1. */
static int n_dims_of(const gguf_tensor *t) {
    for (int i = 3; i >= 1; i--)
        if (t->ne[i] > 1) return i + 1;
    return 1;
}

/* llama-quant.cpp tensor_allows_quantization (the architecture-independent names). */
static bool allows_quantization(const gguf_tensor *t, bool leave_output) {
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
        "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
        "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
        "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    if (n_dims_of(t) < 2 || !ends_with(t->name, "weight")) return false;
    if (leave_output && strcmp(t->name, "output.weight") == 0) return false;
    if (strcmp(t->name, "position_embd.weight") == 0 || strcmp(t->name, "token_types.weight") == 0) return false;
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(t->name, never[i])) return false;
    return true;
}

/* The N of "blk.N." as sscanf("blk.%d.") reads it, or -1. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end = NULL;
    long layer = strtol(name + 4, &end, 10);
    return end != name + 4 && layer >= INT32_MIN && layer <= INT32_MAX ? (int)layer : -1;
}

/* llama_model_loader's weight order: layer (non-layer tensors first), then name. */
static int cmp_weight(const void *pa, const void *pb) {
    const gguf_tensor *a = *(const gguf_tensor *const *)pa, *b = *(const gguf_tensor *const *)pb;
    int la = layer_of(a->name), lb = layer_of(b->name);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The mix state of llama-quant.cpp quantize_state_impl. */
typedef struct mix_state {
    const ftype_info *ft;
    const slm_quantize_params *p;
    uint32_t token_embd_type, output_type; /* SLM_DTYPE_COUNT = not set */
    bool falcon;
    int64_t n_expert;
    int n_attention_wv, i_attention_wv;
    int n_ffn_down, i_ffn_down;
    bool tied_embeddings;
} mix_state;

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* llama_tensor_get_type_impl for the ftypes of k_ftypes. */
static uint32_t mix_rule(mix_state *s, uint32_t t, const gguf_tensor *tensor, category cat) {
    const mix m = s->ft->mix;
    if (cat == CAT_OUTPUT || (s->tied_embeddings && cat == CAT_TOKEN_EMBD)) {
        if (s->output_type != SLM_DTYPE_COUNT) return s->output_type;
        if (s->falcon || tensor->ne[0] % dtype_traits_of(t)->block_elems != 0) return SLM_DTYPE_Q8_0;
        return t != SLM_DTYPE_Q8_0 ? SLM_DTYPE_Q6_K : t;
    }
    if (cat == CAT_TOKEN_EMBD) return s->token_embd_type != SLM_DTYPE_COUNT ? s->token_embd_type : t;
    if (cat == CAT_ATTN_V) {
        if ((m == MIX_Q4_K_M || m == MIX_Q5_K_M) && use_more_bits(s->i_attention_wv, s->n_attention_wv))
            t = SLM_DTYPE_Q6_K;
        else if (m == MIX_Q4_K_S && s->i_attention_wv < 4)
            t = SLM_DTYPE_Q5_K;
        if (s->n_expert == 8) t = SLM_DTYPE_Q8_0;
        ++s->i_attention_wv;
    } else if (cat == CAT_ATTN_K) {
        if (s->n_expert == 8) t = SLM_DTYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        int i_layer = s->i_ffn_down, n_layer = s->n_ffn_down;
        if (s->n_expert > 1) i_layer = layer_of(tensor->name);
        if (m == MIX_Q4_K_M) {
            if (s->falcon)
                t = i_layer < n_layer / 16 ? SLM_DTYPE_Q6_K : use_more_bits(i_layer, n_layer) ? SLM_DTYPE_Q5_K : SLM_DTYPE_Q4_K;
            else if (use_more_bits(i_layer, n_layer))
                t = SLM_DTYPE_Q6_K;
        } else if (m == MIX_Q5_K_M && use_more_bits(i_layer, n_layer)) {
            t = SLM_DTYPE_Q6_K;
        } else if (m == MIX_Q4_K_S && !s->falcon && i_layer < n_layer / 8) {
            t = SLM_DTYPE_Q5_K;
        }
        ++s->i_ffn_down;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (!s->falcon && s->n_expert == 8 && (m == MIX_Q4_K_S || m == MIX_Q4_K_M)) t = SLM_DTYPE_Q5_K;
    }
    return t;
}

/* llama-quant.cpp tensor_type_fallback: K-quants on rows that are not a whole number of 256-blocks
 * drop to a 32-block type, and anything that still does not fit becomes F16. */
static uint32_t fallback(uint32_t t, int64_t ncols) {
    if (ncols % dtype_traits_of(t)->block_elems == 0) return t;
    if (t == SLM_DTYPE_Q4_K) t = SLM_DTYPE_Q5_0;
    else if (t == SLM_DTYPE_Q5_K) t = SLM_DTYPE_Q5_1;
    else if (t == SLM_DTYPE_Q6_K) t = SLM_DTYPE_Q8_0;
    if (ncols % dtype_traits_of(t)->block_elems != 0) t = SLM_DTYPE_F16;
    return t;
}

/* llama_tensor_get_type. */
static uint32_t target_type(mix_state *s, const gguf_tensor *t) {
    if (!allows_quantization(t, s->p->leave_output)) return t->type;
    category cat = category_of(t->name);
    if (s->token_embd_type != SLM_DTYPE_COUNT && cat == CAT_TOKEN_EMBD) return s->token_embd_type;
    if (s->output_type != SLM_DTYPE_COUNT && cat == CAT_OUTPUT) return s->output_type;
    uint32_t type = s->ft->base;
    if (!dtype_traits_of(type)->is_quantized) return type;
    if (!s->p->pure) type = mix_rule(s, type, t, cat);
    return fallback(type, t->ne[0]);
}

/* ---- the rows of one tensor over the threads -------------------------------------------------- */

typedef struct job {
    const gguf_tensor *t;
    uint32_t out_type;
    uint8_t *dst;       /* the result of row row_base */
    int64_t row_base;
    size_t in_row_bytes, out_row_bytes;
    int64_t row0, row1;
    float *scratch;     /* (ne[0]) */
    int64_t bad_row;    /* first row with a non-finite value, or -1 */
} job;

static void *run_job(void *arg) {
    job *j = arg;
    const int64_t n = j->t->ne[0];
    for (int64_t r = j->row0; r < j->row1; r++) {
        dequant_row(j->t->type, j->t->data + (size_t)r * j->in_row_bytes, j->scratch, n);
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(j->scratch[i])) {
                j->bad_row = r;
                return NULL;
            }
        }
        quant_row(j->out_type, j->scratch, j->dst + (size_t)(r - j->row_base) * j->out_row_bytes, n);
    }
    return NULL;
}

slm_status quantize_rows(const gguf_tensor *t, int64_t row0, int64_t row1, uint32_t out_type, uint8_t *dst,
                         int n_threads, const slm_allocator *a, slm_err *e) {
    const int64_t n_rows = row1 - row0;
    uint64_t in_rb = 0, out_rb = 0;
    dtype_row_bytes(t->type, (uint64_t)t->ne[0], &in_rb);
    dtype_row_bytes(out_type, (uint64_t)t->ne[0], &out_rb);
    if (n_threads > n_rows) n_threads = (int)(n_rows > 0 ? n_rows : 1);
    job *jobs = al_calloc(a, (size_t)n_threads, sizeof *jobs);
    pthread_t *th = al_calloc(a, (size_t)n_threads, sizeof *th);
    bool *started = al_calloc(a, (size_t)n_threads, sizeof *started);
    slm_status st = SLM_OK;
    if (!jobs || !th || !started) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_threads; i++) {
        jobs[i] = (job){t, out_type, dst, row0, (size_t)in_rb, (size_t)out_rb, row0 + n_rows * i / n_threads,
                        row0 + n_rows * (i + 1) / n_threads, al_array(a, (size_t)t->ne[0], sizeof(float)), -1};
        if (!jobs[i].scratch) {
            st = err_set(e, SLM_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    for (int i = 1; i < n_threads; i++) started[i] = pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0;
    run_job(&jobs[0]);
    for (int i = 1; i < n_threads; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else run_job(&jobs[i]); /* no thread: its rows on this one */
    }
    for (int i = 0; i < n_threads; i++) {
        if (jobs[i].bad_row >= 0) {
            st = err_set(e, SLM_ERR_FORMAT, "tensor '%s': row %lld holds a non-finite value", t->name,
                         (long long)jobs[i].bad_row);
            break;
        }
    }
done:
    for (int i = 0; jobs && i < n_threads; i++) al_free(a, jobs[i].scratch);
    al_free(a, jobs);
    al_free(a, th);
    al_free(a, started);
    return st;
}

slm_status quantize_tensor(const gguf_tensor *t, uint32_t out_type, uint8_t *dst, int n_threads,
                           const slm_allocator *a, slm_err *e) {
    return quantize_rows(t, 0, t->ne[1] * t->ne[2] * t->ne[3], out_type, dst, n_threads, a, e);
}

SLM_API slm_quantize_params slm_quantize_params_default(void) {
    slm_quantize_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    return p;
}

static slm_status parse_type_option(const char *what, const char *name, uint32_t *out, slm_err *e) {
    *out = SLM_DTYPE_COUNT;
    if (!name) return SLM_OK;
    if (!find_tensor_type(name, out))
        return err_set(e, SLM_ERR_INVALID_ARG,
                       "%s '%s' is not a type statelm writes (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
                       "q4_k, q5_k, q6_k)", what, name);
    return SLM_OK;
}

/* Fills s's counts from the tensor list (sorted). */
static void mix_init(mix_state *s, const char *arch, int64_t n_layer, int64_t n_expert, const gguf_tensor *const *order,
                     uint64_t n) {
    s->falcon = arch && strcmp(arch, "falcon") == 0;
    s->n_ffn_down = n_layer > 0 && n_layer < (1 << 20) ? (int)n_layer : 0;
    s->n_expert = n_expert > 0 ? n_expert : 0;
    s->tied_embeddings = true;
    for (uint64_t i = 0; i < n; i++) {
        category c = category_of(order[i]->name);
        if (c == CAT_ATTN_V) s->n_attention_wv++;
        if (c == CAT_OUTPUT) s->tied_embeddings = false;
    }
}

/* Checks that t can become type out: source convertible (a float type, or a quantised type going
 * to a float type), rows whole blocks. */
static slm_status check_tensor(const gguf_tensor *t, uint32_t out, slm_err *e) {
    const dtype_traits *to = dtype_traits_of(out), *from = dtype_traits_of(t->type);
    if (out == t->type) return SLM_OK;
    if (!quant_has_row(out))
        return err_set(e, SLM_ERR_UNSUPPORTED, "tensor '%s': no quantiser for type %s", t->name, to ? to->name : "?");
    /* quantised sources may only be dequantised (to f32, f16, bf16): requantising compounds errors */
    if (t->type != SLM_DTYPE_F32 && t->type != SLM_DTYPE_F16 && t->type != SLM_DTYPE_BF16 &&
        (to->is_quantized || !from->can_dequant))
        return err_set(e, SLM_ERR_UNSUPPORTED, "tensor '%s' is %s: requantising is not supported (start from an "
                       "f32, f16 or bf16 file)", t->name, from->name);
    if (t->ne[0] % to->block_elems != 0)
        return err_set(e, SLM_ERR_SHAPE, "tensor '%s': rows of %lld elements are not a whole number of %s blocks "
                       "of %u", t->name, (long long)t->ne[0], to->name, to->block_elems);
    return SLM_OK;
}

slm_status quantize_check_type(const char *type, const slm_quantize_params *p, slm_err *e) {
    uint32_t t;
    slm_status st;
    if (!find_ftype(type))
        return err_set(e, SLM_ERR_INVALID_ARG, "unknown quantisation type '%s' (q4_0, q4_1, q5_0, q5_1, q8_0, "
                       "q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, f16, bf16, f32)", type);
    if ((st = parse_type_option("token embedding type", p->token_embd_type, &t, e)) != SLM_OK ||
        (st = parse_type_option("output tensor type", p->output_type, &t, e)) != SLM_OK)
        return st;
    return SLM_OK;
}

slm_status quantize_plan(const char *type, const slm_quantize_params *p, const char *arch, int64_t n_layer,
                         int64_t n_expert, const gguf_tensor *ts, uint64_t n, const gguf_tensor **order,
                         uint32_t *types, uint32_t *file_type, slm_err *e) {
    mix_state s;
    memset(&s, 0, sizeof s);
    s.p = p;
    slm_status st = quantize_check_type(type, p, e);
    if (st != SLM_OK) return st;
    s.ft = find_ftype(type);
    parse_type_option("token embedding type", p->token_embd_type, &s.token_embd_type, e);
    parse_type_option("output tensor type", p->output_type, &s.output_type, e);
    for (uint64_t i = 0; i < n; i++) order[i] = &ts[i];
    if (n) qsort(order, (size_t)n, sizeof *order, cmp_weight);
    mix_init(&s, arch, n_layer, n_expert, order, n);
    for (uint64_t i = 0; i < n; i++) {
        types[i] = target_type(&s, order[i]);
        if ((st = check_tensor(order[i], types[i], e)) != SLM_OK) return st;
        uint64_t bytes;
        if (!quantize_tensor_bytes(order[i], types[i], &bytes))
            return err_set(e, SLM_ERR_SHAPE, "tensor '%s': too large", order[i]->name);
    }
    *file_type = s.ft->file_type;
    return SLM_OK;
}

bool quantize_tensor_bytes(const gguf_tensor *t, uint32_t type, uint64_t *bytes) {
    uint64_t rb = 0, rows = 0;
    *bytes = 0;
    return dtype_row_bytes(type, (uint64_t)t->ne[0], &rb) && u64_mul_ok((uint64_t)t->ne[1], (uint64_t)t->ne[2], &rows) &&
           u64_mul_ok(rows, (uint64_t)t->ne[3], &rows) && u64_mul_ok(rb, rows, bytes) && *bytes <= SIZE_MAX / 2;
}
