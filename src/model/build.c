/* build.c — the program builders: model math of llama, qwen3, lfm2, qwen35 and gemma3 written as
 * a Program (graph/graph.h) with functions "prefill" (n tokens), "decode" (1 token), "verify"
 * (n tokens, logits of every one: speculative decoding) and optionally "embed" (n tokens, the
 * final-norm hidden state of every one: embeddings) sharing the
 * states of model/states.c. Every weight's shape is checked against the hyper-parameters before
 * use. Builders contain model math only: no kernels, no memory management.
 * Specs: docs/spec/llama.md §2–3, docs/spec/lfm2.md §3–4, docs/spec/qwen35.md §2–4,
 * docs/spec/gemma3.md. */
#include "model/build.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/dtype.h"

typedef struct bctx {
    const slm_model *m;
    const mdl_hparams *hp;
    g_program *p;
    g_builder b;
    slm_err *e;
    int32_t (*layer_states)[2]; /* (n_layer) program state ids per layer: [kv_k|conv|ssm_conv, kv_v|ssm_state] */
    int32_t swa_ring;           /* rows of the sliding layers' ring states, 0 when they hold the whole context */
    bool mtp_hidden;            /* every function keeps its final-norm hidden states (g_function.aux) */
} bctx;

/* Adds the weight `fmt` (formatted with the current layer) after checking its shape; n_dims and
 * ne0/ne1 are the expected ggml dims (ne1 = 0 for 1-D). */
static int32_t weight(bctx *c, int64_t ne0, int64_t ne1, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int32_t weight(bctx *c, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    if (c->b.status) return -1;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const mdl_tensor *t = mdl_find_tensor(c->m, name);
    if (!t) {
        c->b.status = err_set(c->e, SLM_ERR_FORMAT, "missing tensor %s", name);
        return -1;
    }
    int32_t want_dims = ne1 ? 2 : 1;
    if (t->n_dims != want_dims || t->ne[0] != ne0 || (ne1 && t->ne[1] != ne1)) {
        c->b.status = err_set(c->e, SLM_ERR_SHAPE, "tensor %s has shape [%lld, %lld], expected [%lld, %lld]", name,
                              (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 0), (long long)ne0,
                              (long long)ne1);
        return -1;
    }
    const dtype_traits *tr = dtype_traits_of(t->type);
    if (!tr || !tr->can_dequant) {
        c->b.status = err_set(c->e, SLM_ERR_UNSUPPORTED, "tensor %s has type %s, which statelm cannot compute with", name,
                              slm_dtype_name((slm_dtype)t->type));
        return -1;
    }
    int64_t ne[4] = {t->ne[0], ne1 ? t->ne[1] : 1, 1, 1};
    int32_t id = graph_add_weight(c->p, name, t->type, want_dims, ne, t->data, t->size_bytes, c->e);
    if (id < 0) c->b.status = SLM_ERR_NOMEM;
    return id;
}

static bool has_tensor(bctx *c, const char *name) { return mdl_find_tensor(c->m, name) != NULL; }

static int32_t reshape3(bctx *c, int32_t x, int64_t a, int64_t h) {
    g_affine ne[4] = {g_const(a), g_const(h), gb_n(&c->b), g_const(1)};
    return gb_reshape(&c->b, x, 3, ne);
}

static int32_t reshape2(bctx *c, int32_t x, int64_t a) {
    g_affine ne[4] = {g_const(a), gb_n(&c->b), g_const(1), g_const(1)};
    return gb_reshape(&c->b, x, 2, ne);
}

static float norm_offset(const bctx *c) { return c->hp->norm_plus_one ? 1.0f : 0.0f; }

static int32_t norm(bctx *c, int32_t x, int32_t w) { return gb_rmsnorm(&c->b, x, w, c->hp->rms_eps, norm_offset(c)); }

/* Gated FFN: down(act(gate x) * up x), act = SiLU or (gemma3) tanh GELU, after the norm named
 * pre_norm; gemma3 normalises the output again (post_ffw_norm) before the residual add. */
static int32_t ffn(bctx *c, int32_t x, int il, const char *pre_norm) {
    const mdl_hparams *hp = c->hp;
    int32_t h = norm(c, x, weight(c, hp->n_embd, 0, "blk.%d.%s", il, pre_norm));
    int32_t g = gb_matmul(&c->b, weight(c, hp->n_embd, hp->n_ff, "blk.%d.ffn_gate.weight", il), h);
    int32_t u = gb_matmul(&c->b, weight(c, hp->n_embd, hp->n_ff, "blk.%d.ffn_up.weight", il), h);
    int32_t act = hp->geglu ? gb_geglu(&c->b, g, u) : gb_swiglu(&c->b, g, u);
    int32_t y = gb_matmul(&c->b, weight(c, hp->n_ff, hp->n_embd, "blk.%d.ffn_down.weight", il), act);
    if (hp->sandwich_norms) y = norm(c, y, weight(c, hp->n_embd, 0, "blk.%d.post_ffw_norm.weight", il));
    gb_name(&c->b, y, "ffn_out");
    return gb_add(&c->b, x, y);
}

/* Softmax attention with a KV cache (all four families); h is the normalised input (d, n).
 * qwen35 adds the per-head output gate carried in attn_q (docs/spec/qwen35.md §3). */
static int32_t attention(bctx *c, int32_t h, int il) {
    const mdl_hparams *hp = c->hp;
    g_builder *b = &c->b;
    int64_t hd = hp->head_dim, hdv = hp->head_dim_v, H = hp->n_head, Hkv = hp->n_head_kv, d = hp->n_embd;
    /* the three projections first, next to each other: the executor runs them as one matmul group */
    int64_t q_rows = hp->attn_output_gate ? 2 * hd * H : hd * H;
    int32_t q_proj = gb_matmul(b, weight(c, d, q_rows, "blk.%d.attn_q.weight", il), h);
    int32_t k_proj = gb_matmul(b, weight(c, d, hd * Hkv, "blk.%d.attn_k.weight", il), h);
    int32_t v = gb_matmul(b, weight(c, d, hdv * Hkv, "blk.%d.attn_v.weight", il), h);
    int32_t gate = -1, q;
    if (hp->attn_output_gate) {
        int32_t qg = reshape3(c, q_proj, 2 * hd, H);
        q = gb_slice(b, qg, 0, g_const(0), g_const(hd));
        gate = gb_slice(b, qg, 0, g_const(hd), g_const(hd));
    } else {
        q = reshape3(c, q_proj, hd, H);
    }
    int32_t k = reshape3(c, k_proj, hd, Hkv);
    if (hp->qk_norm) {
        q = norm(c, q, weight(c, hd, 0, "blk.%d.attn_q_norm.weight", il));
        k = norm(c, k, weight(c, hd, 0, "blk.%d.attn_k_norm.weight", il));
    }
    g_rope_style style = hp->rope_style == MDL_ROPE_NORM ? G_ROPE_NORM : G_ROPE_NEOX;
    /* sliding layers (gemma3): their own rope base, no rope scaling, a window and maybe a ring */
    bool sliding = hp->layer_kind[il] == SLM_LAYER_SLIDING_ATTENTION;
    float base = sliding ? hp->rope_base_swa : hp->rope_base;
    float freq_scale = sliding || hp->rope_freq_scale == 0.0f ? 1.0f : hp->rope_freq_scale;
    int32_t window = sliding ? hp->swa_window : 0, ring = sliding ? c->swa_ring : 0;
    q = gb_rope(b, q, hp->n_rot, style, base, freq_scale);
    k = gb_rope(b, k, hp->n_rot, style, base, freq_scale);
    gb_name(b, q, "q");
    gb_name(b, k, "k");
    gb_name(b, v, "v");
    g_affine at_pos[4] = {g_const(0), ring ? g_pos_mod(0, ring) : g_pos_plus(0), g_const(0), g_const(0)};
    int32_t s_k = c->layer_states[il][0], s_v = c->layer_states[il][1];
    gb_state_write(b, s_k, reshape2(c, k, hd * Hkv), at_pos);
    gb_state_write(b, s_v, v, at_pos);
    float scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hd);
    int32_t a = gb_attention_window(b, q, gb_state_read(b, s_k), gb_state_read(b, s_v), (int32_t)Hkv, scale, window,
                                    ring);
    if (gate >= 0) a = gb_mul(b, a, gb_unary(b, G_OP_SIGMOID, gate));
    int32_t o = gb_matmul(b, weight(c, hdv * H, d, "blk.%d.attn_output.weight", il), reshape2(c, a, hdv * H));
    if (hp->sandwich_norms) o = norm(c, o, weight(c, d, 0, "blk.%d.post_attention_norm.weight", il));
    gb_name(b, o, "attn_out");
    return o;
}

/* LFM2 gated short convolution (docs/spec/lfm2.md §4.2–4.3). */
static int32_t short_conv(bctx *c, int32_t h, int il) {
    const mdl_hparams *hp = c->hp;
    g_builder *b = &c->b;
    int64_t d = hp->n_embd, K = hp->conv_kernel;
    int32_t bcx = gb_matmul(b, weight(c, d, 3 * d, "blk.%d.shortconv.in_proj.weight", il), h); /* (3d, n) */
    int32_t B = gb_slice(b, bcx, 0, g_const(0), g_const(d));
    int32_t C = gb_slice(b, bcx, 0, g_const(d), g_const(d));
    int32_t X = gb_slice(b, bcx, 0, g_const(2 * d), g_const(d));
    int32_t u = gb_mul(b, B, X);                                       /* (d, n) */
    int32_t s = c->layer_states[il][0];
    int32_t xc = gb_concat(b, gb_state_read(b, s), u, 1);              /* (d, n + K - 1) */
    g_affine origin[4] = {g_const(0), g_const(0), g_const(0), g_const(0)};
    gb_state_write(b, s, gb_slice(b, xc, 1, gb_n(b), g_const(K - 1)), origin);
    int32_t v = gb_conv1d(b, xc, weight(c, K, d, "blk.%d.shortconv.conv.weight", il)); /* (d, n) */
    int32_t o = gb_matmul(b, weight(c, d, d, "blk.%d.shortconv.out_proj.weight", il), gb_mul(b, C, v));
    gb_name(b, o, "conv_out");
    return o;
}

/* Qwen3.5 gated DeltaNet (docs/spec/qwen35.md §4). */
static int32_t gated_deltanet(bctx *c, int32_t h, int il) {
    const mdl_hparams *hp = c->hp;
    g_builder *b = &c->b;
    int64_t d = hp->n_embd, Hk = hp->ssm_n_k_heads, Hv = hp->ssm_n_v_heads, dk = hp->ssm_head_k_dim,
            dv = hp->ssm_head_v_dim, K = hp->ssm_conv_kernel;
    int64_t key_dim = Hk * dk, value_dim = Hv * dv, conv_dim = 2 * key_dim + value_dim;
    int32_t mix = gb_matmul(b, weight(c, d, conv_dim, "blk.%d.attn_qkv.weight", il), h);   /* (conv_dim, n) */
    int32_t z = gb_matmul(b, weight(c, d, value_dim, "blk.%d.attn_gate.weight", il), h);   /* (Hv*dv, n) */
    int32_t beta_logit = gb_matmul(b, weight(c, d, Hv, "blk.%d.ssm_beta.weight", il), h);  /* (Hv, n) */
    int32_t alpha = gb_matmul(b, weight(c, d, Hv, "blk.%d.ssm_alpha.weight", il), h);      /* (Hv, n) */
    int32_t s_conv = c->layer_states[il][0], s_rec = c->layer_states[il][1];
    int32_t xc = gb_concat(b, gb_state_read(b, s_conv), mix, 1);                            /* (conv_dim, n+K-1) */
    g_affine origin[4] = {g_const(0), g_const(0), g_const(0), g_const(0)};
    gb_state_write(b, s_conv, gb_slice(b, xc, 1, gb_n(b), g_const(K - 1)), origin);
    int32_t cv = gb_unary(b, G_OP_SILU, gb_conv1d(b, xc, weight(c, K, conv_dim, "blk.%d.ssm_conv1d.weight", il)));
    int32_t q = reshape3(c, gb_slice(b, cv, 0, g_const(0), g_const(key_dim)), dk, Hk);
    int32_t k = reshape3(c, gb_slice(b, cv, 0, g_const(key_dim), g_const(key_dim)), dk, Hk);
    int32_t v = reshape3(c, gb_slice(b, cv, 0, g_const(2 * key_dim), g_const(value_dim)), dv, Hv);
    q = gb_scale(b, gb_l2norm(b, q, 1e-6f), 1.0f / sqrtf((float)dk));
    k = gb_l2norm(b, k, 1e-6f);
    int32_t beta = gb_unary(b, G_OP_SIGMOID, beta_logit);
    /* decay rate a = -exp(A_log): stored as such in GGUF (ssm_a), as A_log in HF folders */
    int32_t a = weight(c, Hv, 0, "blk.%d.ssm_a", il);
    if (hp->ssm_a_is_log) a = gb_scale(b, gb_unary(b, G_OP_EXP, a), -1.0f);
    int32_t dt = gb_unary(b, G_OP_SOFTPLUS, gb_add(b, alpha, weight(c, Hv, 0, "blk.%d.ssm_dt.bias", il)));
    int32_t g = gb_mul(b, dt, a);                                                            /* (Hv, n), <= 0 */
    int32_t s_new = -1;
    int32_t o = gb_deltanet(b, q, k, v, g, beta, gb_state_read(b, s_rec), hp->ssm_v_heads_tiled, &s_new);
    gb_state_write(b, s_rec, s_new, origin);
    int32_t y = gb_gated_rmsnorm(b, o, reshape3(c, z, dv, Hv), weight(c, dv, 0, "blk.%d.ssm_norm.weight", il), hp->rms_eps);
    int32_t out = gb_matmul(b, weight(c, value_dim, d, "blk.%d.ssm_out.weight", il), reshape2(c, y, value_dim));
    gb_name(b, out, "deltanet_out");
    return out;
}

/* One function of the Program, by its output: LAST_LOGITS runs the head on the last column only
 * (logits (V, 1)); ALL_LOGITS on every column (logits (V, n), the "verify" function of speculative
 * decoding); HIDDEN stops before the head (final-norm hidden states (d, n), the "embed" function). */
typedef enum fn_kind { FN_LAST_LOGITS, FN_ALL_LOGITS, FN_HIDDEN } fn_kind;

static void build_function(bctx *c, fn_kind kind) {
    const mdl_hparams *hp = c->hp;
    g_builder *b = &c->b;
    int64_t d = hp->n_embd;
    b->layer = -1;
    int32_t x = gb_embed(b, weight(c, d, hp->n_vocab, "token_embd.weight"), gb_tokens(b));
    if (hp->embd_scale) x = gb_scale(b, x, sqrtf((float)d));
    const char *ffn_norm = hp->attn_output_gate ? "post_attention_norm.weight" : "ffn_norm.weight";
    for (int il = 0; il < hp->n_layer && !b->status; il++) {
        b->layer = il;
        int32_t h = norm(c, x, weight(c, d, 0, "blk.%d.attn_norm.weight", il));
        int32_t mix;
        switch (hp->layer_kind[il]) {
        case SLM_LAYER_CONV: mix = short_conv(c, h, il); break;
        case SLM_LAYER_LINEAR_ATTENTION: mix = gated_deltanet(c, h, il); break;
        default: mix = attention(c, h, il); break;
        }
        x = gb_add(b, x, mix);
        x = ffn(c, x, il, ffn_norm);
        gb_name(b, x, "out");
    }
    b->layer = -1;
    const char *final_norm = has_tensor(c, "output_norm.weight") ? "output_norm.weight" : "token_embd_norm.weight";
    int32_t hn;
    if (c->mtp_hidden) { /* the norm of every column (columnwise: the last one's is the same), kept */
        int32_t all = norm(c, x, weight(c, d, 0, "%s", final_norm));
        gb_name(b, all, "mtp_h");
        gb_set_aux(b, all);
        hn = kind != FN_LAST_LOGITS ? all : gb_slice(b, all, 1, g_n_plus(-1), g_const(1));
    } else {
        int32_t last = kind != FN_LAST_LOGITS ? x : gb_slice(b, x, 1, g_n_plus(-1), g_const(1)); /* (d, n) or (d, 1) */
        hn = norm(c, last, weight(c, d, 0, "%s", final_norm));
    }
    if (kind == FN_HIDDEN) {
        gb_name(b, hn, "hidden");
        gb_set_output(b, hn, G_OUT_HIDDEN);
        return;
    }
    int32_t head = hp->tied_embeddings ? weight(c, d, hp->n_vocab, "token_embd.weight")
                                       : weight(c, d, hp->n_vocab, "output.weight");
    int32_t logits = gb_matmul(b, head, hn);
    gb_name(b, logits, "logits");
    gb_set_logits(b, logits);
}

/* The end of a program build: the program into *out when st is SLM_OK, else destroyed. */
static slm_status program_done(const slm_model *m, bctx *c, g_program *p, slm_status st, g_program **out) {
    al_free(&m->alloc, c->layer_states);
    if (st) graph_destroy(p);
    else *out = p;
    return st;
}

slm_status mdl_build_program(const slm_model *m, int32_t n_ctx, slm_dtype kv_k, slm_dtype kv_v, bool embed,
                             g_program **out, slm_err *e) {
    return mdl_build_program_ex(m, n_ctx, kv_k, kv_v, embed, false, out, e);
}

slm_status mdl_build_program_ex(const slm_model *m, int32_t n_ctx, slm_dtype kv_k, slm_dtype kv_v, bool embed,
                                bool mtp_hidden, g_program **out, slm_err *e) {
    *out = NULL;
    const char *why = mdl_kv_dtype_why(m, kv_k, true);
    if (why) return err_set(e, SLM_ERR_UNSUPPORTED, "%s (this model's is %d)", why, (int)m->hp.head_dim);
    if ((why = mdl_kv_dtype_why(m, kv_v, false)))
        return err_set(e, SLM_ERR_UNSUPPORTED, "%s (this model's is %d)", why, (int)m->hp.head_dim_v);
    g_program *p = NULL;
    bctx c;
    memset(&c, 0, sizeof c);
    slm_status st = graph_create(&m->alloc, &p);
    if (st) return err_set(e, st, "out of memory");
    c.layer_states = al_calloc(&m->alloc, (size_t)m->hp.n_layer, sizeof *c.layer_states);
    if (!c.layer_states) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < mdl_n_states(m); i++) {
        mdl_state_spec s;
        mdl_state_spec_at(m, n_ctx, kv_k, kv_v, i, &s);
        int32_t id = graph_add_state(p, s.name, s.role, s.layer, s.dtype, s.n_dims, s.ne, s.pos_axis, e);
        if (id < 0) {
            st = SLM_ERR_NOMEM;
            goto fail;
        }
        int slot = (s.role == SLM_STATE_KV_VALUE || s.role == SLM_STATE_RECURRENT) ? 1 : 0;
        c.layer_states[s.layer][slot] = id;
    }
    c.m = m;
    c.hp = &m->hp;
    c.p = p;
    c.e = e;
    c.mtp_hidden = mtp_hidden;
    (void)mdl_swa_rows(&m->hp, n_ctx, &c.swa_ring);
    p->max_call_tokens = mdl_swa_call_tokens(&m->hp, n_ctx);
    static const struct {
        const char *name;
        bool symbolic;
        fn_kind kind;
    } fns[4] = {{"prefill", true, FN_LAST_LOGITS},
                {"decode", false, FN_LAST_LOGITS},
                {"verify", true, FN_ALL_LOGITS},
                {"embed", true, FN_HIDDEN}};
    for (int f = 0; f < (embed ? 4 : 3); f++) {
        int32_t fn;
        if ((st = graph_add_function(p, fns[f].name, fns[f].symbolic, 1, &fn, e))) goto fail;
        gb_init(&c.b, p, fn, e);
        build_function(&c, fns[f].kind);
        if ((st = c.b.status)) goto fail;
    }
    st = graph_verify(p, e);
fail:
    return program_done(m, &c, p, st, out);
}

/* ---- the MTP block (docs/spec/qwen35.md §10) ---------------------------------------------------- */

/* One function of the MTP program over n positions: the tokens and, in columns [0, n) of the
 * h_in state, the trunk's final-norm hidden state of the position before each. Output: the MTP's
 * own final-norm hidden states (d, n) (G_OUT_HIDDEN), or with logits their head (V, n), the
 * hidden states then kept as aux. */
static void build_mtp_function(bctx *c, int32_t s_h, bool logits) {
    const mdl_hparams *hp = c->hp;
    g_builder *b = &c->b;
    const int il = hp->n_layer;
    const int64_t d = hp->n_embd;
    b->layer = -1;
    char embd[64];
    snprintf(embd, sizeof embd, "blk.%d.nextn.embed_tokens.weight", il);
    if (!has_tensor(c, embd)) snprintf(embd, sizeof embd, "token_embd.weight");
    int32_t x = gb_embed(b, weight(c, d, hp->n_vocab, "%s", embd), gb_tokens(b));       /* (d, n) */
    int32_t h = gb_slice(b, gb_state_read(b, s_h), 1, g_const(0), gb_n(b));              /* (d, n) */
    b->layer = il;
    int32_t en = norm(c, x, weight(c, d, 0, "blk.%d.nextn.enorm.weight", il));
    int32_t hn = norm(c, h, weight(c, d, 0, "blk.%d.nextn.hnorm.weight", il));
    int32_t u = gb_matmul(b, weight(c, 2 * d, d, "blk.%d.nextn.eh_proj.weight", il), gb_concat(b, en, hn, 0));
    gb_name(b, u, "eh_proj");
    u = gb_add(b, u, attention(c, norm(c, u, weight(c, d, 0, "blk.%d.attn_norm.weight", il)), il));
    u = ffn(c, u, il, "post_attention_norm.weight");
    char head_norm[64];
    snprintf(head_norm, sizeof head_norm, "blk.%d.nextn.shared_head_norm.weight", il);
    if (!has_tensor(c, head_norm)) snprintf(head_norm, sizeof head_norm, "output_norm.weight");
    int32_t out = norm(c, u, weight(c, d, 0, "%s", head_norm));
    gb_name(b, out, "mtp_h");
    b->layer = -1;
    if (!logits) {
        gb_set_output(b, out, G_OUT_HIDDEN);
        return;
    }
    char head[64];
    snprintf(head, sizeof head, "blk.%d.nextn.shared_head_head.weight", il);
    if (!has_tensor(c, head)) snprintf(head, sizeof head, hp->tied_embeddings ? "token_embd.weight" : "output.weight");
    int32_t l = gb_matmul(b, weight(c, d, hp->n_vocab, "%s", head), out);
    gb_name(b, l, "logits");
    gb_set_logits(b, l);
    gb_set_aux(b, out);
}

slm_status mdl_build_mtp_program(const slm_model *m, int32_t n_ctx, slm_dtype kv_dtype, g_program **out, slm_err *e) {
    *out = NULL;
    const mdl_hparams *hp = &m->hp;
    const int il = hp->n_layer;
    if (hp->n_nextn < 1 || !mdl_find_tensorf(m, "blk.%d.nextn.eh_proj.weight", il))
        return err_set(e, SLM_ERR_UNSUPPORTED, "the model has no multi-token-prediction block (a Qwen3.5 GGUF converted "
                       "with its MTP block: qwen35.nextn_predict_layers, blk.%d.nextn.*)", il);
    if (!hp->attn_output_gate || hp->layer_kind[il] != SLM_LAYER_ATTENTION)
        return err_set(e, SLM_ERR_UNSUPPORTED, "multi-token prediction is implemented for qwen35 only");
    g_program *p = NULL;
    bctx c;
    memset(&c, 0, sizeof c);
    slm_status st = graph_create(&m->alloc, &p);
    if (st) return err_set(e, st, "out of memory");
    c.layer_states = al_calloc(&m->alloc, (size_t)il + 1, sizeof *c.layer_states);
    if (!c.layer_states) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    char name[64];
    int64_t kne[4] = {hp->head_dim * hp->n_head_kv, n_ctx, 1, 1}, vne[4] = {hp->head_dim_v * hp->n_head_kv, n_ctx, 1, 1};
    int64_t hne[4] = {hp->n_embd, MDL_MTP_MAX_CALL, 1, 1};
    snprintf(name, sizeof name, "blk.%d.kv_k", il);
    c.layer_states[il][0] = graph_add_state(p, name, SLM_STATE_KV_KEY, il, kv_dtype, 2, kne, 1, e);
    snprintf(name, sizeof name, "blk.%d.kv_v", il);
    c.layer_states[il][1] = graph_add_state(p, name, SLM_STATE_KV_VALUE, il, kv_dtype, 2, vne, 1, e);
    int32_t s_h = graph_add_state(p, MDL_MTP_H_STATE, SLM_STATE_RECURRENT, il, SLM_DTYPE_F32, 2, hne, -1, e);
    if (c.layer_states[il][0] < 0 || c.layer_states[il][1] < 0 || s_h < 0) {
        st = e->status ? e->status : SLM_ERR_NOMEM;
        goto fail;
    }
    c.m = m;
    c.hp = hp;
    c.p = p;
    c.e = e;
    p->max_call_tokens = MDL_MTP_MAX_CALL;
    static const struct {
        const char *name;
        bool symbolic, logits;
    } fns[2] = {{"prefill", true, false}, {"decode", false, true}};
    for (int f = 0; f < 2; f++) {
        int32_t fn;
        if ((st = graph_add_function(p, fns[f].name, fns[f].symbolic, 1, &fn, e))) goto fail;
        gb_init(&c.b, p, fn, e);
        build_mtp_function(&c, s_h, fns[f].logits);
        if ((st = c.b.status)) goto fail;
    }
    st = graph_verify(p, e);
fail:
    return program_done(m, &c, p, st, out);
}
