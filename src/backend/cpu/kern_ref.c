/* kern_ref.c — the scalar reference kernel of every Program op: the oracle that SIMD and CUDA
 * kernels are tested against. Plain loops, f32 storage, double accumulation for reductions, and
 * weights dequantised row by row on the fly from every supported type (base/dtype.c).
 *
 * Batch invariance: every output element is computed by one task with the same arithmetic whatever
 * the number of tokens or threads, so prefill(n) equals n single decodes bit for bit (except where
 * the algorithm differs by design: chunked DeltaNet). Shapes in each kernel's comment, ggml order. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "base/dtype.h"
#include "base/half.h"
#include "base/quant.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static int64_t nel(const be_view *v) { return v->ne[0] * v->ne[1] * v->ne[2] * v->ne[3]; }
static int64_t ncols(const be_view *v) { return v->ne[1] * v->ne[2] * v->ne[3]; }

/* Pointer to row r (ne0 elements) of v as f32: direct for F32, else dequantised into tmp. */
static const float *row_f32(const be_view *v, int64_t r, float *tmp) {
    if (v->dtype == SLM_DTYPE_F32) return (const float *)v->data + r * v->ne[0];
    uint64_t row_bytes = 0;
    dtype_row_bytes(v->dtype, (uint64_t)v->ne[0], &row_bytes);
    dequant_row(v->dtype, (const uint8_t *)v->data + (uint64_t)r * row_bytes, tmp, v->ne[0]);
    return tmp;
}

/* Element i of a Q8_0 / Q4_0 state (d * q, d * (q - 8): exact in f32). */
static float load_q(uint32_t dtype, const void *base, int64_t i) {
    const uint8_t *b = (const uint8_t *)base + (i / 32) * (dtype == SLM_DTYPE_Q8_0 ? 34 : 18);
    float d = f16_to_f32((uint16_t)(b[0] | b[1] << 8));
    int j = (int)(i % 32);
    if (dtype == SLM_DTYPE_Q8_0) return d * (float)(int8_t)b[2 + j];
    return d * (float)((int)(j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4) - 8);
}

static float load_elem(uint32_t dtype, const void *base, int64_t i) {
    switch (dtype) {
    case SLM_DTYPE_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    case SLM_DTYPE_Q8_0:
    case SLM_DTYPE_Q4_0: return load_q(dtype, base, i);
    case SLM_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

static void store_elem(uint32_t dtype, void *base, int64_t i, float v) {
    switch (dtype) {
    case SLM_DTYPE_F16: ((uint16_t *)base)[i] = f32_to_f16(v); break;
    case SLM_DTYPE_BF16: ((uint16_t *)base)[i] = f32_to_bf16(v); break;
    default: ((float *)base)[i] = v; break;
    }
}

static double dot_f32(const float *a, const float *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* Tasks of about `grain` items each over n items. */
static int64_t n_chunks(int64_t n, int64_t grain) { return (n + grain - 1) / grain; }

/* ---- EMBED: (d, n) <- table (d, V), ids i32 (n) --------------------------------------------- */

typedef struct embed_ctx {
    const be_view *w, *ids, *out;
} embed_ctx;

static void embed_task(void *vctx, int64_t t, int32_t thread) {
    (void)thread;
    embed_ctx *c = vctx;
    int32_t id = ((const int32_t *)c->ids->data)[t];
    int64_t d = c->w->ne[0];
    float *dst = (float *)c->out->data + t * d;
    const float *src = row_f32(c->w, id, dst);
    if (src != dst) memcpy(dst, src, (size_t)d * sizeof(float));
}

static slm_status k_embed(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                          const be_call *call, slm_err *e) {
    (void)nd, (void)call, (void)e;
    embed_ctx c = {&in[0], &in[1], &out[0]};
    pool_run(cb->pool, in[1].ne[0], embed_task, &c);
    return SLM_OK;
}

/* ---- MATMUL: y (m, cols) <- W (k, m), x (k, cols); y[o, c] = sum_i W[i, o] x[i, c] ----------- */

typedef struct matmul_ctx {
    cpu_backend *cb;
    const be_view *w, *x, *y;
    int64_t k, m, cols, rows_per_task;
} matmul_ctx;

static void matmul_task(void *vctx, int64_t task, int32_t thread) {
    matmul_ctx *c = vctx;
    float *tmp = cpu_scratch(c->cb, thread);
    int64_t r0 = task * c->rows_per_task, r1 = r0 + c->rows_per_task;
    if (r1 > c->m) r1 = c->m;
    const float *x = c->x->data;
    float *y = c->y->data;
    for (int64_t o = r0; o < r1; o++) {
        const float *w = row_f32(c->w, o, tmp);
        for (int64_t col = 0; col < c->cols; col++) y[col * c->m + o] = (float)dot_f32(w, x + col * c->k, c->k);
    }
}

static slm_status k_matmul(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)nd, (void)call, (void)e;
    matmul_ctx c = {cb, &in[0], &in[1], &out[0], in[0].ne[0], in[0].ne[1], ncols(&in[1]), 0};
    c.rows_per_task = c.m / (4 * cb->n_threads) + 1;
    if (c.rows_per_task > 64) c.rows_per_task = 64;
    pool_run(cb->pool, n_chunks(c.m, c.rows_per_task), matmul_task, &c);
    return SLM_OK;
}

/* ---- elementwise ---------------------------------------------------------------------------- */

/* gelu with the tanh approximation (HF gelu_pytorch_tanh), in double: the oracle. */
static float gelu_tanh(float x) {
    double u = 0.7978845608028654 * ((double)x + 0.044715 * (double)x * (double)x * (double)x);
    return (float)(0.5 * (double)x * (1.0 + tanh(u)));
}

/* ADD/MUL/SWIGLU/GEGLU: out (same as a) <- a, b (same shape, or (ne0) broadcast). b may be a weight. */
static slm_status k_binary(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)call, (void)e;
    const be_view *a = &in[0], *b = &in[1];
    float *tmp_b = cpu_scratch(cb, 0);
    int64_t ne0 = a->ne[0], rows = ncols(a);
    bool bcast = nel(b) == ne0 && rows > 1;
    float *y = out->data;
    for (int64_t r = 0; r < rows; r++) {
        const float *ar = (const float *)a->data + r * ne0;
        const float *br = row_f32(b, bcast ? 0 : r, tmp_b);
        float *yr = y + r * ne0;
        switch (nd->op) {
        case G_OP_ADD: for (int64_t i = 0; i < ne0; i++) yr[i] = ar[i] + br[i]; break;
        case G_OP_MUL: for (int64_t i = 0; i < ne0; i++) yr[i] = ar[i] * br[i]; break;
        case G_OP_GEGLU: for (int64_t i = 0; i < ne0; i++) yr[i] = gelu_tanh(ar[i]) * br[i]; break;
        default: /* SWIGLU */
            for (int64_t i = 0; i < ne0; i++) yr[i] = ar[i] / (1.0f + expf(-ar[i])) * br[i];
            break;
        }
    }
    return SLM_OK;
}

/* SCALE/SILU/SIGMOID/SOFTPLUS/EXP: out <- f(x); x may be a (1-D) weight. */
static slm_status k_unary(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                          const be_call *call, slm_err *e) {
    (void)call, (void)e;
    int64_t ne0 = in[0].ne[0], rows = ncols(&in[0]);
    float *tmp = cpu_scratch(cb, 0);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = row_f32(&in[0], r, tmp);
        float *y = (float *)out->data + r * ne0;
        for (int64_t i = 0; i < ne0; i++) {
            float v = x[i];
            switch (nd->op) {
            case G_OP_SCALE: y[i] = v * nd->p.f[0]; break;
            case G_OP_SILU: y[i] = v / (1.0f + expf(-v)); break;
            case G_OP_SIGMOID: y[i] = 1.0f / (1.0f + expf(-v)); break;
            case G_OP_SOFTPLUS: y[i] = v > 20.0f ? v : log1pf(expf(v)); break;
            default: y[i] = expf(v); break; /* EXP */
            }
        }
    }
    return SLM_OK;
}

/* ---- norms: over ne0, for every row --------------------------------------------------------- */

/* RMSNORM: x / sqrt(mean(x^2) + eps) * (w + w_offset); L2NORM: x / sqrt(sum(x^2) + eps);
 * GATED_RMSNORM: rmsnorm(x; w) * silu(z). */
static slm_status k_norm(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                         const be_call *call, slm_err *e) {
    (void)call, (void)e;
    int64_t ne0 = in[0].ne[0], rows = ncols(&in[0]);
    const be_view *wv = nd->op == G_OP_GATED_RMSNORM ? &in[2] : (nd->op == G_OP_RMSNORM && nd->n_in > 1 ? &in[1] : NULL);
    const float *w = wv ? row_f32(wv, 0, cpu_scratch(cb, 0)) : NULL;
    float eps = nd->p.norm.eps;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = (const float *)in[0].data + r * ne0;
        float *y = (float *)out->data + r * ne0;
        double ss = 0.0;
        for (int64_t i = 0; i < ne0; i++) ss += (double)x[i] * (double)x[i];
        if (nd->op == G_OP_L2NORM) {
            float inv = 1.0f / sqrtf((float)ss + eps);
            for (int64_t i = 0; i < ne0; i++) y[i] = x[i] * inv;
            continue;
        }
        float inv = 1.0f / sqrtf((float)(ss / (double)ne0) + eps);
        if (nd->op == G_OP_RMSNORM) {
            float off = nd->p.norm.w_offset;
            for (int64_t i = 0; i < ne0; i++) y[i] = w ? (x[i] * inv) * (w[i] + off) : x[i] * inv;
        } else {
            const float *z = (const float *)in[1].data + r * ne0;
            for (int64_t i = 0; i < ne0; i++) y[i] = (w[i] * (x[i] * inv)) * (z[i] / (1.0f + expf(-z[i])));
        }
    }
    return SLM_OK;
}

/* ---- ROPE: (hd, H, n) <- x (hd, H, n); token t has position pos + t ------------------------
 * theta_i = p * inv_freq_i, inv_freq_i = freq_scale / base^(2i / n_rot), computed in f32 as
 * Hugging Face does. NEOX rotates (x_i, x_{i+n_rot/2}); NORM rotates (x_2i, x_2i+1). Dims beyond
 * n_rot pass through. */
static slm_status k_rope(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                         const be_call *call, slm_err *e) {
    (void)e;
    int64_t hd = in[0].ne[0], H = in[0].ne[1], n = in[0].ne[2];
    int32_t n_rot = nd->p.rope.n_rot, half = n_rot / 2;
    float *inv_freq = cpu_scratch(cb, 0);
    for (int32_t i = 0; i < half; i++)
        inv_freq[i] = nd->p.rope.freq_scale * (1.0f / powf(nd->p.rope.base, (float)(2 * i) / (float)n_rot));
    for (int64_t t = 0; t < n; t++) {
        float p = (float)(call->pos + t);
        for (int64_t h = 0; h < H; h++) {
            const float *x = (const float *)in[0].data + (t * H + h) * hd;
            float *y = (float *)out->data + (t * H + h) * hd;
            for (int64_t i = n_rot; i < hd; i++) y[i] = x[i];
            for (int32_t i = 0; i < half; i++) {
                float theta = p * inv_freq[i];
                float cs = cosf(theta), sn = sinf(theta);
                int32_t i0 = nd->p.rope.style == G_ROPE_NEOX ? i : 2 * i;
                int32_t i1 = nd->p.rope.style == G_ROPE_NEOX ? i + half : 2 * i + 1;
                float a = x[i0], b = x[i1];
                y[i0] = a * cs - b * sn;
                y[i1] = b * cs + a * sn;
            }
        }
    }
    return SLM_OK;
}

/* ---- ATTENTION: (hdv, H, n) <- q (hd, H, n), K state (hd*Hkv, ctx), V state (hdv*Hkv, ctx) ----
 * Query t (position q = pos + t) attends the keys at positions [lo, q], lo = window ? max(0,
 * q - window + 1) : 0; the key at position P is row (ring ? P mod ring : P) of the states; head h
 * reads kv head h / (H / Hkv). */
typedef struct attn_ctx {
    cpu_backend *cb;
    const be_view *q, *k, *v, *out;
    int64_t hd, hdv, H, Hkv, pos, window, ring;
    float scale;
} attn_ctx;

static void attn_task(void *vctx, int64_t task, int32_t thread) {
    attn_ctx *c = vctx;
    int64_t t = task / c->H, h = task % c->H, g = h / (c->H / c->Hkv);
    int64_t hi = c->pos + t, lo = c->window && hi - c->window + 1 > 0 ? hi - c->window + 1 : 0;
    int64_t n_keys = hi - lo + 1;
    const float *q = (const float *)c->q->data + (t * c->H + h) * c->hd;
    float *scores = cpu_scratch(c->cb, thread);
    double *acc = (double *)(scores + ((n_keys + 1) & ~(int64_t)1));
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
        int64_t row = c->ring ? (lo + j) % c->ring : lo + j;
        int64_t kbase = row * c->hd * c->Hkv + g * c->hd;
        double s = 0.0;
        for (int64_t i = 0; i < c->hd; i++) s += (double)q[i] * (double)load_elem(c->k->dtype, c->k->data, kbase + i);
        scores[j] = (float)s * c->scale;
        if (scores[j] > mx) mx = scores[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_keys; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int64_t i = 0; i < c->hdv; i++) acc[i] = 0.0;
    for (int64_t j = 0; j < n_keys; j++) {
        int64_t row = c->ring ? (lo + j) % c->ring : lo + j;
        int64_t vbase = row * c->hdv * c->Hkv + g * c->hdv;
        for (int64_t i = 0; i < c->hdv; i++) acc[i] += (double)scores[j] * (double)load_elem(c->v->dtype, c->v->data, vbase + i);
    }
    float *y = (float *)c->out->data + (t * c->H + h) * c->hdv;
    for (int64_t i = 0; i < c->hdv; i++) y[i] = (float)(acc[i] / sum);
}

/* SLM_ERR_BACKEND when a ring state cannot hold every query's keys: the first query's oldest key
 * (position lo(pos)) must not share its row with the call's newest position pos + n - 1. */
static slm_status k_attention(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                              const be_call *call, slm_err *e) {
    int64_t window = nd->p.attn.window, ring = nd->p.attn.ring, n = in[0].ne[2];
    int64_t lo0 = window && call->pos - window + 1 > 0 ? call->pos - window + 1 : 0;
    if (ring && (ring > in[1].ne[1] || lo0 + ring < call->pos + n))
        return err_set(e, SLM_ERR_BACKEND, "ATTENTION: a ring of %lld rows cannot hold window %lld for %lld tokens",
                       (long long)ring, (long long)window, (long long)n);
    attn_ctx c = {cb, &in[0], &in[1], &in[2], &out[0], in[0].ne[0], out->ne[0], in[0].ne[1], nd->p.attn.n_head_kv,
                  call->pos, window, ring, nd->p.attn.scale};
    /* a Q8_0 / Q4_0 cache holds rows rotated per 32-block (quant_kv_row): q is rotated alike (K),
     * the output rotated back (V) */
    bool rot_q = in[1].dtype == SLM_DTYPE_Q8_0 || in[1].dtype == SLM_DTYPE_Q4_0;
    bool rot_out = in[2].dtype == SLM_DTYPE_Q8_0 || in[2].dtype == SLM_DTYPE_Q4_0;
    size_t nq = (size_t)(in[0].ne[0] * in[0].ne[1] * n);
    be_view qr = in[0];
    if (rot_q) {
        float *w = cpu_work(cb, nq * sizeof(float), e);
        if (!w) return SLM_ERR_NOMEM;
        memcpy(w, in[0].data, nq * sizeof(float));
        for (size_t i = 0; i + 32 <= nq; i += 32) quant_hadamard32(w + i);
        qr.data = w;
        c.q = &qr;
    }
    pool_run(cb->pool, n * c.H, attn_task, &c);
    if (rot_out)
        for (int64_t i = 0; i + 32 <= out->ne[0] * out->ne[1] * n; i += 32) quant_hadamard32((float *)out->data + i);
    return SLM_OK;
}

/* ---- CONV1D: (C, n) <- x (C, n + K - 1), w (K, C); y[c, t] = sum_k w[k, c] x[c, t + k] ------- */
static slm_status k_conv1d(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)nd, (void)call, (void)e;
    int64_t C = in[0].ne[0], n = out->ne[1], K = in[1].ne[0];
    float *wrow = cpu_scratch(cb, 0);
    const float *x = in[0].data;
    float *y = out->data;
    for (int64_t ch = 0; ch < C; ch++) {
        const float *w = row_f32(&in[1], ch, wrow);
        for (int64_t t = 0; t < n; t++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) s += (double)w[k] * (double)x[ch + C * (t + k)];
            y[ch + C * t] = (float)s;
        }
    }
    return SLM_OK;
}

/* ---- DELTANET (recurrent form, docs/spec/qwen35.md §4.2 step 6) -----------------------------------
 * o (dv, Hv, n), S' (dv, dk, Hv) <- q, k (dk, Hk, n), v (dv, Hv, n), g (Hv, n), beta (Hv, n),
 * S (dv, dk, Hv). Per v-head h with k-head kh (tiled: h mod Hk; grouped: h / (Hv / Hk)), per token:
 *   S *= exp(g); u = S^T k; S += k (beta (v - u))^T; o = S^T q.  S[h][i][j]: i in dk, j in dv. */
/* S <- n elements of state view s from element off, in f32 whatever the state's dtype. */
static void load_state_head(const be_view *s, int64_t off, int64_t n, float *S) {
    if (s->dtype == SLM_DTYPE_F32) memcpy(S, (const float *)s->data + off, (size_t)n * sizeof(float));
    else
        for (int64_t i = 0; i < n; i++) S[i] = load_elem(s->dtype, s->data, off + i);
}

typedef struct dn_ctx {
    const be_view *q, *k, *v, *g, *beta, *s, *o, *s_new;
    cpu_backend *cb;
    bool tiled;
} dn_ctx;

static void dn_task(void *vctx, int64_t h, int32_t thread) {
    dn_ctx *c = vctx;
    int64_t dk = c->q->ne[0], Hk = c->q->ne[1], n = c->q->ne[2], dv = c->v->ne[0], Hv = c->v->ne[1];
    int64_t kh = c->tiled ? h % Hk : h / (Hv / Hk);
    float *S = (float *)c->s_new->data + h * dk * dv;
    load_state_head(c->s, h * dk * dv, dk * dv, S);
    double *u = cpu_scratch(c->cb, thread);
    for (int64_t t = 0; t < n; t++) {
        const float *q = (const float *)c->q->data + (t * Hk + kh) * dk;
        const float *k = (const float *)c->k->data + (t * Hk + kh) * dk;
        const float *v = (const float *)c->v->data + (t * Hv + h) * dv;
        float decay = expf(((const float *)c->g->data)[t * Hv + h]);
        float beta = ((const float *)c->beta->data)[t * Hv + h];
        for (int64_t i = 0; i < dk * dv; i++) S[i] *= decay;
        for (int64_t j = 0; j < dv; j++) u[j] = 0.0;
        for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++) u[j] += (double)S[i * dv + j] * (double)k[i];
        for (int64_t j = 0; j < dv; j++) u[j] = (double)beta * ((double)v[j] - u[j]); /* delta */
        for (int64_t i = 0; i < dk; i++)
            for (int64_t j = 0; j < dv; j++) S[i * dv + j] += (float)((double)k[i] * u[j]);
        float *o = (float *)c->o->data + (t * Hv + h) * dv;
        for (int64_t j = 0; j < dv; j++) {
            double s = 0.0;
            for (int64_t i = 0; i < dk; i++) s += (double)S[i * dv + j] * (double)q[i];
            o[j] = (float)s;
        }
    }
}

/* Chunked form (docs/spec/qwen35.md §4.3), the same recurrence rearranged per chunk of DN_CHUNK tokens.
 * With G_i the cumulative log-decay inside the chunk (G_i - G_j <= 0 for j <= i, so no exponent
 * ever grows) and A_ij = beta_i e^{G_i - G_j} (k_i . k_j) for j < i, the deltas solve
 *   (I + A) D = beta (V - e^{G} K S0)   ->  D = U - W S0  by forward substitution,
 * then o_i = e^{G_i} S0^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i . k_j) d_j and
 * S = e^{G_C} S0 + sum_j e^{G_C - G_j} k_j d_j^T. Equal to the recurrent form in exact arithmetic. */
#define DN_CHUNK 64

static void dn_chunked_task(void *vctx, int64_t h, int32_t thread) {
    dn_ctx *c = vctx;
    int64_t dk = c->q->ne[0], Hk = c->q->ne[1], n = c->q->ne[2], dv = c->v->ne[0], Hv = c->v->ne[1];
    int64_t kh = c->tiled ? h % Hk : h / (Hv / Hk);
    float *S = (float *)c->s_new->data + h * dk * dv;
    load_state_head(c->s, h * dk * dv, dk * dv, S);
    /* scratch: G (C), A (C*C), D (C*dv), W (C*dk), O (dv), all double */
    double *G = cpu_scratch(c->cb, thread);
    double *A = G + DN_CHUNK, *D = A + DN_CHUNK * DN_CHUNK, *W = D + DN_CHUNK * dv, *O = W + DN_CHUNK * dk;
    for (int64_t t0 = 0; t0 < n; t0 += DN_CHUNK) {
        int64_t C = n - t0 < DN_CHUNK ? n - t0 : DN_CHUNK;
#define QV(t) ((const float *)c->q->data + ((t0 + (t)) * Hk + kh) * dk)
#define KV(t) ((const float *)c->k->data + ((t0 + (t)) * Hk + kh) * dk)
#define VV(t) ((const float *)c->v->data + ((t0 + (t)) * Hv + h) * dv)
#define GV(t) ((double)((const float *)c->g->data)[(t0 + (t)) * Hv + h])
#define BV(t) ((double)((const float *)c->beta->data)[(t0 + (t)) * Hv + h])
        double acc = 0.0;
        for (int64_t i = 0; i < C; i++) G[i] = (acc += GV(i));
        for (int64_t i = 0; i < C; i++)
            for (int64_t j = 0; j < i; j++) {
                double kk = 0.0;
                for (int64_t x = 0; x < dk; x++) kk += (double)KV(i)[x] * (double)KV(j)[x];
                A[i * DN_CHUNK + j] = BV(i) * exp(G[i] - G[j]) * kk;
            }
        /* right-hand sides: D_i = beta_i v_i (U), W_i = beta_i e^{G_i} k_i; then forward substitution */
        for (int64_t i = 0; i < C; i++) {
            for (int64_t y = 0; y < dv; y++) D[i * dv + y] = BV(i) * (double)VV(i)[y];
            for (int64_t x = 0; x < dk; x++) W[i * dk + x] = BV(i) * exp(G[i]) * (double)KV(i)[x];
            for (int64_t j = 0; j < i; j++) {
                double a = A[i * DN_CHUNK + j];
                for (int64_t y = 0; y < dv; y++) D[i * dv + y] -= a * D[j * dv + y];
                for (int64_t x = 0; x < dk; x++) W[i * dk + x] -= a * W[j * dk + x];
            }
        }
        /* D = U - W S0 */
        for (int64_t i = 0; i < C; i++)
            for (int64_t x = 0; x < dk; x++) {
                double w = W[i * dk + x];
                for (int64_t y = 0; y < dv; y++) D[i * dv + y] -= w * (double)S[x * dv + y];
            }
        /* outputs */
        for (int64_t i = 0; i < C; i++) {
            float *o = (float *)c->o->data + ((t0 + i) * Hv + h) * dv;
            double eg = exp(G[i]);
            for (int64_t y = 0; y < dv; y++) {
                double s = 0.0;
                for (int64_t x = 0; x < dk; x++) s += (double)S[x * dv + y] * (double)QV(i)[x];
                O[y] = s * eg;
            }
            for (int64_t j = 0; j <= i; j++) {
                double qk = 0.0;
                for (int64_t x = 0; x < dk; x++) qk += (double)QV(i)[x] * (double)KV(j)[x];
                double f = exp(G[i] - G[j]) * qk;
                for (int64_t y = 0; y < dv; y++) O[y] += f * D[j * dv + y];
            }
            for (int64_t y = 0; y < dv; y++) o[y] = (float)O[y];
        }
        /* state */
        double eC = exp(G[C - 1]);
        for (int64_t x = 0; x < dk; x++)
            for (int64_t y = 0; y < dv; y++) {
                double s = eC * (double)S[x * dv + y];
                for (int64_t j = 0; j < C; j++) s += exp(G[C - 1] - G[j]) * (double)KV(j)[x] * D[j * dv + y];
                S[x * dv + y] = (float)s;
            }
#undef QV
#undef KV
#undef VV
#undef GV
#undef BV
    }
}

static slm_status k_deltanet(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                             const be_call *call, slm_err *e) {
    (void)call, (void)e;
    dn_ctx c = {&in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &out[0], &out[1], cb, nd->p.dn.v_heads_tiled};
    pool_run(cb->pool, in[2].ne[1], nd->p.dn.chunked ? dn_chunked_task : dn_task, &c);
    return SLM_OK;
}

/* ---- data movement -------------------------------------------------------------------------- */

/* Copies the 4-D box of size `box` from src (shape sne, at offset soff) to dst (shape dne, at
 * offset doff), converting dtypes element by element. */
static void copy_box(void *dst, uint32_t ddt, const int64_t dne[4], const int64_t doff[4], const void *src,
                     uint32_t sdt, const int64_t sne[4], const int64_t soff[4], const int64_t box[4]) {
    for (int64_t i3 = 0; i3 < box[3]; i3++)
        for (int64_t i2 = 0; i2 < box[2]; i2++)
            for (int64_t i1 = 0; i1 < box[1]; i1++) {
                int64_t s = soff[0] + sne[0] * ((soff[1] + i1) + sne[1] * ((soff[2] + i2) + sne[2] * (soff[3] + i3)));
                int64_t d = doff[0] + dne[0] * ((doff[1] + i1) + dne[1] * ((doff[2] + i2) + dne[2] * (doff[3] + i3)));
                if (sdt == ddt && sdt == SLM_DTYPE_F32) {
                    memcpy((float *)dst + d, (const float *)src + s, (size_t)box[0] * sizeof(float));
                } else {
                    for (int64_t i0 = 0; i0 < box[0]; i0++) store_elem(ddt, dst, d + i0, load_elem(sdt, src, s + i0));
                }
            }
}

/* SLICE: out <- x[begin, begin + len) along axis. */
static slm_status k_slice(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                          const be_call *call, slm_err *e) {
    (void)cb;
    int32_t ax = nd->p.slice.axis;
    int64_t begin = g_affine_eval(nd->p.slice.begin, call->n, call->pos);
    if (begin < 0 || begin + out->ne[ax] > in[0].ne[ax])
        return err_set(e, SLM_ERR_BACKEND, "SLICE out of bounds: [%lld, %lld) of %lld", (long long)begin,
                       (long long)(begin + out->ne[ax]), (long long)in[0].ne[ax]);
    int64_t soff[4] = {0, 0, 0, 0}, doff[4] = {0, 0, 0, 0};
    soff[ax] = begin;
    copy_box(out->data, out->dtype, out->ne, doff, in[0].data, in[0].dtype, in[0].ne, soff, out->ne);
    return SLM_OK;
}

/* CONCAT: out <- a ++ b along axis. */
static slm_status k_concat(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)cb, (void)call, (void)e;
    int32_t ax = nd->p.concat.axis;
    int64_t zero[4] = {0, 0, 0, 0}, off[4] = {0, 0, 0, 0};
    copy_box(out->data, out->dtype, out->ne, zero, in[0].data, in[0].dtype, in[0].ne, zero, in[0].ne);
    off[ax] = in[0].ne[ax];
    copy_box(out->data, out->dtype, out->ne, off, in[1].data, in[1].dtype, in[1].ne, zero, in[1].ne);
    return SLM_OK;
}

/* STATE_WRITE into a Q8_0 / Q4_0 state: whole rows (axis 0 complete), each by quant_kv_row (its
 * 32-blocks rotated, then ggml's reference rounding); axes 1-3 as below (mod[d] > 0: the index
 * wraps). */
static slm_status write_q_rows(const be_view *out, const be_view *in, const int64_t begin[4], const int64_t mod[4],
                               slm_err *e) {
    uint64_t row_bytes = 0;
    if (begin[0] != 0 || mod[0] > 0 || in[0].ne[0] != out->ne[0] || in[0].dtype != SLM_DTYPE_F32 ||
        !dtype_row_bytes(out->dtype, (uint64_t)out->ne[0], &row_bytes))
        return err_set(e, SLM_ERR_BACKEND, "STATE_WRITE into a %s state must write whole rows of 32-blocks from f32",
                       slm_dtype_name(out->dtype));
    const int64_t *sne = in[0].ne, *dne = out->ne;
    for (int64_t i3 = 0; i3 < sne[3]; i3++)
        for (int64_t i2 = 0; i2 < sne[2]; i2++)
            for (int64_t i1 = 0; i1 < sne[1]; i1++) {
                int64_t o[4] = {0, begin[1] + i1, begin[2] + i2, begin[3] + i3};
                for (int d = 1; d < 4; d++) o[d] = mod[d] > 0 ? o[d] % mod[d] : o[d];
                const float *src = (const float *)in[0].data + sne[0] * (i1 + sne[1] * (i2 + sne[2] * i3));
                quant_kv_row(out->dtype, src,
                             (uint8_t *)out->data + row_bytes * (uint64_t)(o[1] + dne[1] * (o[2] + dne[2] * o[3])), sne[0]);
            }
    return SLM_OK;
}

/* STATE_WRITE: state (out[0], allocated shape, state dtype)[window] <- value. An axis whose begin
 * has a mod M (a ring, M <= the state's extent) wraps: value index i lands at (begin + i) mod M. */
static slm_status k_state_write(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                                const be_call *call, slm_err *e) {
    (void)cb;
    int64_t begin[4], zero[4] = {0, 0, 0, 0}, mod[4];
    bool wraps = false;
    for (int d = 0; d < 4; d++) {
        begin[d] = g_affine_eval(nd->p.write.begin[d], call->n, call->pos);
        mod[d] = nd->p.write.begin[d].mod;
        bool bad = mod[d] > 0 ? mod[d] > out->ne[d] || in[0].ne[d] > mod[d]
                              : begin[d] < 0 || begin[d] + in[0].ne[d] > out->ne[d];
        if (bad) return err_set(e, SLM_ERR_BACKEND, "STATE_WRITE window outside the state on axis %d", d);
        wraps = wraps || mod[d] > 0;
    }
    if (out->dtype == SLM_DTYPE_Q8_0 || out->dtype == SLM_DTYPE_Q4_0) return write_q_rows(out, in, begin, mod, e);
    if (!wraps) {
        copy_box(out->data, out->dtype, out->ne, begin, in[0].data, in[0].dtype, in[0].ne, zero, in[0].ne);
        return SLM_OK;
    }
    const int64_t *sne = in[0].ne, *dne = out->ne;
    int64_t i[4], o[4];
    for (i[3] = 0; i[3] < sne[3]; i[3]++)
        for (i[2] = 0; i[2] < sne[2]; i[2]++)
            for (i[1] = 0; i[1] < sne[1]; i[1]++)
                for (i[0] = 0; i[0] < sne[0]; i[0]++) {
                    for (int d = 0; d < 4; d++) o[d] = mod[d] > 0 ? (begin[d] + i[d]) % mod[d] : begin[d] + i[d];
                    int64_t src = i[0] + sne[0] * (i[1] + sne[1] * (i[2] + sne[2] * i[3]));
                    int64_t dst = o[0] + dne[0] * (o[1] + dne[1] * (o[2] + dne[2] * o[3]));
                    store_elem(out->dtype, out->data, dst, load_elem(in[0].dtype, in[0].data, src));
                }
    return SLM_OK;
}

/* RESHAPE and STATE_READ are views resolved by the executor. */
static slm_status k_view(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                         const be_call *call, slm_err *e) {
    (void)cb, (void)nd, (void)out, (void)in, (void)call, (void)e;
    return SLM_OK;
}

/* ---- ops added for compile/ legalisations ----------------------------------------------------
 * Self-contained: each kernel reads any state dtype through load_elem and writes f32. */

/* Element offset of index i[4] in a view of shape ne, with size-1 axes broadcast. */
static int64_t bcast_offset(const int64_t ne[4], const int64_t i[4]) {
    int64_t off = 0, stride = 1;
    for (int d = 0; d < 4; d++) {
        off += (ne[d] == 1 ? 0 : i[d]) * stride;
        stride *= ne[d];
    }
    return off;
}

/* SUM: out (x with ne[axis] = 1) <- x summed over axis (double accumulation, in index order). */
static slm_status k_sum(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                        const be_call *call, slm_err *e) {
    (void)cb, (void)call, (void)e;
    int32_t ax = nd->p.reduce.axis;
    int64_t len = in[0].ne[ax], stride = 1;
    for (int d = 0; d < ax; d++) stride *= in[0].ne[d];
    int64_t n_out = nel(out);
    float *y = out->data;
    for (int64_t o = 0; o < n_out; o++) {
        int64_t inner = o % stride, outer = o / stride;
        int64_t base = outer * stride * len + inner;
        double s = 0.0;
        for (int64_t k = 0; k < len; k++) s += (double)load_elem(in[0].dtype, in[0].data, base + k * stride);
        y[o] = (float)s;
    }
    return SLM_OK;
}

/* SELECT: out <- c != 0 ? a : b elementwise, size-1 axes of c, a, b broadcast. */
static slm_status k_select(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)cb, (void)nd, (void)call, (void)e;
    float *y = out->data;
    int64_t i[4];
    for (i[3] = 0; i[3] < out->ne[3]; i[3]++)
        for (i[2] = 0; i[2] < out->ne[2]; i[2]++)
            for (i[1] = 0; i[1] < out->ne[1]; i[1]++)
                for (i[0] = 0; i[0] < out->ne[0]; i[0]++) {
                    float c = load_elem(in[0].dtype, in[0].data, bcast_offset(in[0].ne, i));
                    const be_view *src = c != 0.0f ? &in[1] : &in[2];
                    *y++ = load_elem(src->dtype, src->data, bcast_offset(src->ne, i));
                }
    return SLM_OK;
}

/* ONEHOT: (L, n): out[j, t] = 1 when j == begin + t (begin evaluated at the call's n and pos),
 * or j == (begin + t) mod M when the begin has a mod M (a ring). */
static slm_status k_onehot(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)cb, (void)in, (void)e;
    int64_t L = out->ne[0], n = out->ne[1];
    int64_t begin = g_affine_eval(nd->p.onehot.begin, call->n, call->pos), mod = nd->p.onehot.begin.mod;
    float *y = out->data;
    for (int64_t t = 0; t < n; t++) {
        int64_t hot = mod > 0 ? (begin + t) % mod : begin + t;
        for (int64_t j = 0; j < L; j++) y[t * L + j] = j == hot ? 1.0f : 0.0f;
    }
    return SLM_OK;
}

/* MATMUL_T: (a, c) <- x (a, m), y (c, m): out[i, j] = sum_k x[i, k] y[j, k], one task per j. */
typedef struct matmul_t_ctx {
    const be_view *x, *y, *out;
} matmul_t_ctx;

static void matmul_t_task(void *vctx, int64_t j, int32_t thread) {
    (void)thread;
    matmul_t_ctx *c = vctx;
    int64_t a = c->x->ne[0], m = c->x->ne[1], cn = c->y->ne[0];
    const float *x = c->x->data, *yv = c->y->data;
    float *o = (float *)c->out->data + j * a;
    for (int64_t i = 0; i < a; i++) {
        double s = 0.0;
        for (int64_t k = 0; k < m; k++) s += (double)x[k * a + i] * (double)yv[k * cn + j];
        o[i] = (float)s;
    }
}

static slm_status k_matmul_t(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                             const be_call *call, slm_err *e) {
    (void)nd, (void)call, (void)e;
    matmul_t_ctx c = {&in[0], &in[1], &out[0]};
    pool_run(cb->pool, in[1].ne[0], matmul_t_task, &c);
    return SLM_OK;
}

/* ROUND: out <- x rounded to the node's dtype (f16/bf16) and back to f32. */
static slm_status k_round(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                          const be_call *call, slm_err *e) {
    (void)cb, (void)call, (void)e;
    int64_t n = nel(out);
    float *y = out->data;
    for (int64_t i = 0; i < n; i++) {
        float v = load_elem(in[0].dtype, in[0].data, i);
        y[i] = nd->p.round.dtype == SLM_DTYPE_BF16 ? bf16_to_f32(f32_to_bf16(v)) : f16_to_f32(f32_to_f16(v));
    }
    return SLM_OK;
}

const cpu_kernel_fn cpu_ref_kernels[G_OP_COUNT] = {
    [G_OP_EMBED] = k_embed,         [G_OP_MATMUL] = k_matmul,       [G_OP_ADD] = k_binary,
    [G_OP_MUL] = k_binary,          [G_OP_SCALE] = k_unary,         [G_OP_SILU] = k_unary,
    [G_OP_SIGMOID] = k_unary,       [G_OP_SOFTPLUS] = k_unary,      [G_OP_EXP] = k_unary,
    [G_OP_SWIGLU] = k_binary,       [G_OP_GEGLU] = k_binary,       [G_OP_RMSNORM] = k_norm,        [G_OP_L2NORM] = k_norm,
    [G_OP_GATED_RMSNORM] = k_norm,  [G_OP_ROPE] = k_rope,           [G_OP_ATTENTION] = k_attention,
    [G_OP_CONV1D] = k_conv1d,       [G_OP_DELTANET] = k_deltanet,   [G_OP_SLICE] = k_slice,
    [G_OP_CONCAT] = k_concat,       [G_OP_RESHAPE] = k_view,        [G_OP_STATE_READ] = k_view,
    [G_OP_STATE_WRITE] = k_state_write,
    [G_OP_SUM] = k_sum,             [G_OP_SELECT] = k_select,       [G_OP_ONEHOT] = k_onehot,
    [G_OP_MATMUL_T] = k_matmul_t,   [G_OP_ROUND] = k_round,
};

size_t cpu_ref_scratch_bytes(const g_node *nd, const be_view *out, const be_view *in) {
    size_t f = sizeof(float);
    switch (nd->op) {
    case G_OP_EMBED: return 0;
    case G_OP_MATMUL: return (size_t)in[0].ne[0] * f;
    case G_OP_ADD: case G_OP_MUL: case G_OP_SWIGLU: case G_OP_GEGLU: return (size_t)in[1].ne[0] * f;
    case G_OP_SCALE: case G_OP_SILU: case G_OP_SIGMOID: case G_OP_SOFTPLUS: case G_OP_EXP:
        return (size_t)in[0].ne[0] * f;
    case G_OP_RMSNORM: case G_OP_GATED_RMSNORM: return (size_t)in[0].ne[0] * f;
    case G_OP_ROPE: return (size_t)nd->p.rope.n_rot * f;
    case G_OP_ATTENTION: return ((size_t)in[1].ne[1] + 2) * f + (size_t)out->ne[0] * sizeof(double);
    case G_OP_CONV1D: return (size_t)in[1].ne[0] * f;
    case G_OP_DELTANET:
        if (!nd->p.dn.chunked) return (size_t)in[2].ne[0] * sizeof(double);
        return (size_t)(DN_CHUNK + DN_CHUNK * DN_CHUNK + DN_CHUNK * (in[2].ne[0] + in[0].ne[0]) + in[2].ne[0]) *
               sizeof(double);
    default: return 0;
    }
}
