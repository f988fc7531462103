/* graph.c — Program storage, the builder (gb_*) with the shape rule of every op, and
 * graph_verify. Kernels live in backend/; this file only knows shapes and dtypes. */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *g_op_name(g_op op) {
    static const char *const names[] = {
#define G_X_NAME(name) #name,
        G_OP_LIST(G_X_NAME)
#undef G_X_NAME
    };
    return (unsigned)op < G_OP_COUNT ? names[op] : "?";
}

slm_status graph_create(const slm_allocator *a, g_program **out) {
    *out = NULL;
    g_program *p = al_calloc(a, 1, sizeof *p);
    if (!p) return SLM_ERR_NOMEM;
    p->alloc = *a;
    *out = p;
    return SLM_OK;
}

void graph_destroy(g_program *p) {
    if (!p) return;
    slm_allocator a = p->alloc;
    for (int32_t f = 0; f < p->n_functions; f++) al_free(&a, p->functions[f].nodes);
    al_free(&a, p->tensors);
    al_free(&a, p->nodes);
    al_free(&a, p->states);
    al_free(&a, p);
}

int32_t graph_find_function(const g_program *p, const char *name) {
    for (int32_t f = 0; f < p->n_functions; f++)
        if (strcmp(p->functions[f].name, name) == 0) return f;
    return -1;
}

int64_t g_nelements(const g_tensor *t, int64_t n) {
    int64_t c = 1;
    for (int d = 0; d < 4; d++) c *= g_ne(t, d, n);
    return c;
}

/* Grows a dynamic array of elem bytes to hold at least need elements. */
static bool grow(const slm_allocator *a, void **arr, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    int32_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need) ncap *= 2;
    size_t bytes;
    if (!size_mul_ok((size_t)ncap, elem, &bytes)) return false;
    void *q = al_realloc(a, *arr, (size_t)*cap * elem, bytes);
    if (!q) return false;
    *arr = q;
    *cap = ncap;
    return true;
}

static int32_t new_tensor(g_program *p, g_storage storage, uint32_t dtype, int32_t n_dims, const int64_t ne[4],
                          uint8_t n_mask, slm_err *e) {
    if (!grow(&p->alloc, (void **)&p->tensors, &p->cap_tensors, p->n_tensors + 1, sizeof(g_tensor))) {
        err_set(e, SLM_ERR_NOMEM, "out of memory building the program");
        return -1;
    }
    g_tensor *t = &p->tensors[p->n_tensors];
    memset(t, 0, sizeof *t);
    t->storage = storage;
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->n_mask = n_mask;
    t->src = -1;
    t->layer = -1;
    t->fn = -1;
    return p->n_tensors++;
}

slm_status graph_add_function(g_program *p, const char *name, bool symbolic_n, int32_t fixed_n, int32_t *fn,
                              slm_err *e) {
    if (p->n_functions >= G_MAX_FUNCTIONS) return err_set(e, SLM_ERR_INVALID_ARG, "too many functions");
    g_function *f = &p->functions[p->n_functions];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->symbolic_n = symbolic_n;
    f->fixed_n = fixed_n;
    f->tokens = -1;
    f->logits = -1;
    f->aux = -1;
    *fn = p->n_functions++;
    return SLM_OK;
}

int32_t graph_add_state(g_program *p, const char *name, slm_state_role role, int32_t layer, slm_dtype dtype,
                        int32_t n_dims, const int64_t ne[4], int32_t pos_axis, slm_err *e) {
    if (!grow(&p->alloc, (void **)&p->states, &p->cap_states, p->n_states + 1, sizeof(g_state))) {
        err_set(e, SLM_ERR_NOMEM, "out of memory building the program");
        return -1;
    }
    g_state *s = &p->states[p->n_states];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->role = role;
    s->layer = layer;
    s->dtype = dtype;
    s->n_dims = n_dims;
    for (int d = 0; d < 4; d++) s->ne[d] = s->alloc_ne[d] = d < n_dims ? ne[d] : 1;
    s->pos_axis = pos_axis;
    return p->n_states++;
}

int32_t graph_add_weight(g_program *p, const char *name, uint32_t dtype, int32_t n_dims, const int64_t ne[4],
                         const void *data, uint64_t size_bytes, slm_err *e) {
    for (int32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i].storage == G_WEIGHT && p->tensors[i].data == data && p->tensors[i].dtype == dtype)
            return i;
    int32_t t = new_tensor(p, G_WEIGHT, dtype, n_dims, ne, 0, e);
    if (t < 0) return -1;
    p->tensors[t].data = data;
    p->tensors[t].size_bytes = size_bytes;
    snprintf(p->tensors[t].name, sizeof p->tensors[t].name, "%s", name);
    return t;
}

/* ---- builder -------------------------------------------------------------------------------- */

void gb_init(g_builder *b, g_program *p, int32_t fn, slm_err *e) {
    b->p = p;
    b->fn = fn;
    b->layer = -1;
    b->e = e;
    b->status = SLM_OK;
}

static int32_t fail(g_builder *b, slm_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int32_t fail(g_builder *b, slm_status st, const char *fmt, ...) {
    if (b->status != SLM_OK) return -1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (b->layer >= 0) err_set(b->e, st, "layer %d: %s", b->layer, msg);
    else err_set(b->e, st, "%s", msg);
    b->status = st;
    return -1;
}

static const g_tensor *T(const g_builder *b, int32_t t) { return &b->p->tensors[t]; }

static bool live(g_builder *b, int n, ...) {
    if (b->status != SLM_OK) return false;
    va_list ap;
    va_start(ap, n);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        int32_t t = va_arg(ap, int32_t);
        if (t < 0 || t >= b->p->n_tensors) ok = false;
    }
    va_end(ap);
    if (!ok) fail(b, SLM_ERR_INVALID_ARG, "invalid tensor operand");
    return ok;
}

static int32_t act(g_builder *b, int32_t n_dims, const int64_t ne[4], uint8_t mask) {
    int32_t t = new_tensor(b->p, G_ACTIVATION, SLM_DTYPE_F32, n_dims, ne, mask, b->e);
    if (t < 0) {
        fail(b, SLM_ERR_NOMEM, "out of memory");
        return -1;
    }
    b->p->tensors[t].layer = b->layer;
    b->p->tensors[t].fn = b->fn;
    return t;
}

static int32_t act_like(g_builder *b, int32_t like) {
    const g_tensor *l = T(b, like);
    int64_t ne[4] = {l->ne[0], l->ne[1], l->ne[2], l->ne[3]};
    return act(b, l->n_dims, ne, l->n_mask);
}

static int32_t node(g_builder *b, g_op op, int n_in, const int32_t *in, int n_out, const int32_t *out, g_node **pn) {
    g_program *p = b->p;
    g_function *f = &p->functions[b->fn];
    if (!grow(&p->alloc, (void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof(g_node)) ||
        !grow(&p->alloc, (void **)&f->nodes, &f->cap_nodes, f->n_nodes + 1, sizeof(int32_t)))
        return fail(b, SLM_ERR_NOMEM, "out of memory");
    int32_t id = p->n_nodes++;
    g_node *nd = &p->nodes[id];
    memset(nd, 0, sizeof *nd);
    nd->op = op;
    nd->n_in = n_in;
    nd->n_out = n_out;
    for (int i = 0; i < n_in; i++) nd->in[i] = in[i];
    for (int i = 0; i < n_out; i++) nd->out[i] = out[i];
    nd->layer = b->layer;
    nd->fn = b->fn;
    f->nodes[f->n_nodes++] = id;
    for (int i = 0; i < n_out; i++) {
        g_tensor *t = &p->tensors[out[i]];
        if (!t->name[0]) {
            if (b->layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s", b->layer, g_op_name(op));
            else snprintf(t->name, sizeof t->name, "%s", g_op_name(op));
        }
    }
    if (pn) *pn = nd;
    return out[0];
}

static bool same_shape(const g_tensor *a, const g_tensor *x) {
    if (a->n_mask != x->n_mask) return false;
    for (int d = 0; d < 4; d++)
        if (a->ne[d] != x->ne[d]) return false;
    return true;
}

static void shape_text(const g_tensor *t, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "(");
    for (int d = 0; d < t->n_dims && o < cap; d++) {
        bool sym = (t->n_mask >> d) & 1;
        if (sym && t->ne[d] == 0) o += (size_t)snprintf(buf + o, cap - o, "%sn", d ? ", " : "");
        else if (sym) o += (size_t)snprintf(buf + o, cap - o, "%sn%+lld", d ? ", " : "", (long long)t->ne[d]);
        else o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    }
    if (o < cap) snprintf(buf + o, cap - o, ")");
}

static int32_t shape_fail(g_builder *b, g_op op, int32_t x, const char *what) {
    char s[96];
    shape_text(T(b, x), s, sizeof s);
    return fail(b, SLM_ERR_SHAPE, "%s: %s %s has an incompatible shape %s", g_op_name(op), what, T(b, x)->name, s);
}

int32_t gb_tokens(g_builder *b) {
    if (b->status) return -1;
    g_function *f = &b->p->functions[b->fn];
    if (f->tokens >= 0) return f->tokens;
    int64_t ne[4] = {0, 1, 1, 1};
    int32_t t = new_tensor(b->p, G_INPUT, SLM_DTYPE_I32, 1, ne, 1, b->e);
    if (t < 0) return fail(b, SLM_ERR_NOMEM, "out of memory");
    b->p->tensors[t].fn = b->fn;
    snprintf(b->p->tensors[t].name, G_NAME_CAP, "tokens");
    f->tokens = t;
    return t;
}

g_affine gb_n(const g_builder *b) {
    (void)b;
    return g_n_plus(0);
}

int32_t gb_embed(g_builder *b, int32_t w, int32_t ids) {
    if (!live(b, 2, w, ids)) return -1;
    const g_tensor *W = T(b, w), *I = T(b, ids);
    if (W->n_dims != 2 || W->storage != G_WEIGHT) return shape_fail(b, G_OP_EMBED, w, "table");
    if (I->dtype != SLM_DTYPE_I32 || I->n_dims != 1) return shape_fail(b, G_OP_EMBED, ids, "ids");
    int64_t ne[4] = {W->ne[0], I->ne[0], 1, 1};
    int32_t out = act(b, 2, ne, (uint8_t)((I->n_mask & 1) << 1));
    int32_t in[2] = {w, ids};
    return out < 0 ? -1 : node(b, G_OP_EMBED, 2, in, 1, &out, NULL);
}

int32_t gb_matmul(g_builder *b, int32_t w, int32_t x) {
    if (!live(b, 2, w, x)) return -1;
    const g_tensor *W = T(b, w), *X = T(b, x);
    if (W->n_dims != 2 || W->storage != G_WEIGHT) return shape_fail(b, G_OP_MATMUL, w, "weight");
    if (X->ne[0] != W->ne[0] || (X->n_mask & 1)) return shape_fail(b, G_OP_MATMUL, x, "input");
    int64_t ne[4] = {W->ne[1], X->ne[1], X->ne[2], X->ne[3]};
    int32_t out = act(b, X->n_dims < 2 ? 2 : X->n_dims, ne, X->n_mask);
    int32_t in[2] = {w, x};
    return out < 0 ? -1 : node(b, G_OP_MATMUL, 2, in, 1, &out, NULL);
}

static int32_t binary(g_builder *b, g_op op, int32_t a, int32_t x) {
    if (!live(b, 2, a, x)) return -1;
    const g_tensor *A = T(b, a), *X = T(b, x);
    bool bcast = X->n_dims == 1 && X->n_mask == 0 && X->ne[0] == A->ne[0];
    if (!same_shape(A, X) && !bcast) return shape_fail(b, op, x, "operand");
    int32_t out = act_like(b, a);
    int32_t in[2] = {a, x};
    return out < 0 ? -1 : node(b, op, 2, in, 1, &out, NULL);
}

int32_t gb_add(g_builder *b, int32_t a, int32_t x) { return binary(b, G_OP_ADD, a, x); }
int32_t gb_mul(g_builder *b, int32_t a, int32_t x) { return binary(b, G_OP_MUL, a, x); }

static int32_t gated(g_builder *b, g_op op, int32_t gate, int32_t up) {
    if (!live(b, 2, gate, up)) return -1;
    if (!same_shape(T(b, gate), T(b, up))) return shape_fail(b, op, up, "up");
    int32_t out = act_like(b, gate);
    int32_t in[2] = {gate, up};
    return out < 0 ? -1 : node(b, op, 2, in, 1, &out, NULL);
}

int32_t gb_swiglu(g_builder *b, int32_t gate, int32_t up) { return gated(b, G_OP_SWIGLU, gate, up); }
int32_t gb_geglu(g_builder *b, int32_t gate, int32_t up) { return gated(b, G_OP_GEGLU, gate, up); }

int32_t gb_scale(g_builder *b, int32_t x, float s) {
    if (!live(b, 1, x)) return -1;
    int32_t out = act_like(b, x);
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_SCALE, 1, &x, 1, &out, &nd) < 0) return -1;
    nd->p.f[0] = s;
    return out;
}

int32_t gb_unary(g_builder *b, g_op op, int32_t x) {
    if (!live(b, 1, x)) return -1;
    if (op != G_OP_SILU && op != G_OP_SIGMOID && op != G_OP_SOFTPLUS && op != G_OP_EXP)
        return fail(b, SLM_ERR_INVALID_ARG, "%s is not a unary op", g_op_name(op));
    int32_t out = act_like(b, x);
    return out < 0 ? -1 : node(b, op, 1, &x, 1, &out, NULL);
}

static bool norm_weight_ok(g_builder *b, int32_t w, int64_t ne0) {
    if (w < 0) return true;
    const g_tensor *W = T(b, w);
    return W->n_dims == 1 && W->ne[0] == ne0 && W->n_mask == 0;
}

int32_t gb_rmsnorm(g_builder *b, int32_t x, int32_t w, float eps, float w_offset) {
    if (!live(b, 1, x) || (w >= 0 && !live(b, 1, w))) return -1;
    if (T(b, x)->n_mask & 1) return shape_fail(b, G_OP_RMSNORM, x, "input");
    if (!norm_weight_ok(b, w, T(b, x)->ne[0])) return shape_fail(b, G_OP_RMSNORM, w, "weight");
    int32_t out = act_like(b, x);
    int32_t in[2] = {x, w};
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_RMSNORM, w >= 0 ? 2 : 1, in, 1, &out, &nd) < 0) return -1;
    nd->p.norm.eps = eps;
    nd->p.norm.w_offset = w_offset;
    return out;
}

int32_t gb_l2norm(g_builder *b, int32_t x, float eps) {
    if (!live(b, 1, x)) return -1;
    if (T(b, x)->n_mask & 1) return shape_fail(b, G_OP_L2NORM, x, "input");
    int32_t out = act_like(b, x);
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_L2NORM, 1, &x, 1, &out, &nd) < 0) return -1;
    nd->p.norm.eps = eps;
    return out;
}

int32_t gb_gated_rmsnorm(g_builder *b, int32_t x, int32_t z, int32_t w, float eps) {
    if (!live(b, 3, x, z, w)) return -1;
    if (!same_shape(T(b, x), T(b, z))) return shape_fail(b, G_OP_GATED_RMSNORM, z, "gate");
    if (!norm_weight_ok(b, w, T(b, x)->ne[0])) return shape_fail(b, G_OP_GATED_RMSNORM, w, "weight");
    int32_t out = act_like(b, x);
    int32_t in[3] = {x, z, w};
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_GATED_RMSNORM, 3, in, 1, &out, &nd) < 0) return -1;
    nd->p.norm.eps = eps;
    return out;
}

int32_t gb_rope(g_builder *b, int32_t x, int32_t n_rot, g_rope_style style, float base, float freq_scale) {
    if (!live(b, 1, x)) return -1;
    const g_tensor *X = T(b, x);
    if (X->n_dims != 3 || (X->n_mask & 3) || n_rot < 2 || n_rot % 2 || n_rot > X->ne[0])
        return shape_fail(b, G_OP_ROPE, x, "input");
    int32_t out = act_like(b, x);
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_ROPE, 1, &x, 1, &out, &nd) < 0) return -1;
    nd->p.rope.n_rot = n_rot;
    nd->p.rope.style = style;
    nd->p.rope.base = base;
    nd->p.rope.freq_scale = freq_scale;
    return out;
}

int32_t gb_attention_window(g_builder *b, int32_t q, int32_t k_state, int32_t v_state, int32_t n_head_kv, float scale,
                            int32_t window, int32_t ring) {
    if (!live(b, 3, q, k_state, v_state)) return -1;
    const g_tensor *Q = T(b, q), *K = T(b, k_state), *V = T(b, v_state);
    if (Q->n_dims != 3 || (Q->n_mask & 3)) return shape_fail(b, G_OP_ATTENTION, q, "query");
    int64_t hd = Q->ne[0], H = Q->ne[1];
    if (n_head_kv < 1 || H % n_head_kv) return fail(b, SLM_ERR_SHAPE, "ATTENTION: %lld heads over %d kv heads", (long long)H, n_head_kv);
    if (K->storage != G_STATE_VIEW || K->ne[0] != hd * n_head_kv) return shape_fail(b, G_OP_ATTENTION, k_state, "key state");
    if (V->storage != G_STATE_VIEW || V->ne[0] % n_head_kv || V->ne[1] != K->ne[1])
        return shape_fail(b, G_OP_ATTENTION, v_state, "value state");
    if (window < 0 || ring < 0 || ring % 16 || ring > K->ne[1])
        return fail(b, SLM_ERR_SHAPE, "ATTENTION: window %d / ring %d invalid for %lld key rows", window, ring,
                    (long long)K->ne[1]);
    int64_t ne[4] = {V->ne[0] / n_head_kv, H, Q->ne[2], 1};
    int32_t out = act(b, 3, ne, Q->n_mask);
    int32_t in[3] = {q, k_state, v_state};
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_ATTENTION, 3, in, 1, &out, &nd) < 0) return -1;
    nd->p.attn.n_head_kv = n_head_kv;
    nd->p.attn.scale = scale;
    nd->p.attn.window = window;
    nd->p.attn.ring = ring;
    return out;
}

int32_t gb_conv1d(g_builder *b, int32_t x, int32_t w) {
    if (!live(b, 2, x, w)) return -1;
    const g_tensor *X = T(b, x), *W = T(b, w);
    if (W->n_dims != 2 || W->ne[1] != X->ne[0] || W->n_mask) return shape_fail(b, G_OP_CONV1D, w, "weight");
    int64_t K = W->ne[0];
    if (X->n_dims != 2 || (X->n_mask & 1) || X->ne[1] < K - 1 || (!(X->n_mask & 2) && X->ne[1] < K))
        return shape_fail(b, G_OP_CONV1D, x, "input");
    int64_t ne[4] = {X->ne[0], X->ne[1] - (K - 1), 1, 1};
    int32_t out = act(b, 2, ne, X->n_mask);
    int32_t in[2] = {x, w};
    return out < 0 ? -1 : node(b, G_OP_CONV1D, 2, in, 1, &out, NULL);
}

int32_t gb_deltanet(g_builder *b, int32_t q, int32_t k, int32_t v, int32_t g, int32_t beta, int32_t s,
                    bool v_heads_tiled, int32_t *s_new) {
    *s_new = -1;
    if (!live(b, 6, q, k, v, g, beta, s)) return -1;
    const g_tensor *Q = T(b, q), *K = T(b, k), *V = T(b, v), *G = T(b, g), *B = T(b, beta), *S = T(b, s);
    int64_t dk = Q->ne[0], Hk = Q->ne[1], dv = V->ne[0], Hv = V->ne[1];
    if (Q->n_dims != 3 || (Q->n_mask & 3)) return shape_fail(b, G_OP_DELTANET, q, "query");
    if (!same_shape(Q, K)) return shape_fail(b, G_OP_DELTANET, k, "key");
    if (V->n_dims != 3 || V->n_mask != Q->n_mask || V->ne[2] != Q->ne[2] || Hv % Hk)
        return shape_fail(b, G_OP_DELTANET, v, "value");
    if (G->ne[0] != Hv || G->n_mask != (Q->n_mask >> 1) || G->ne[1] != Q->ne[2]) return shape_fail(b, G_OP_DELTANET, g, "decay");
    if (!same_shape(G, B)) return shape_fail(b, G_OP_DELTANET, beta, "beta");
    if (S->ne[0] != dv || S->ne[1] != dk || S->ne[2] != Hv || S->n_mask) return shape_fail(b, G_OP_DELTANET, s, "state");
    int64_t ne_o[4] = {dv, Hv, V->ne[2], 1};
    int64_t ne_s[4] = {dv, dk, Hv, 1};
    int32_t outs[2];
    outs[0] = act(b, 3, ne_o, V->n_mask);
    outs[1] = act(b, 3, ne_s, 0);
    if (outs[0] < 0 || outs[1] < 0) return -1;
    int32_t in[6] = {q, k, v, g, beta, s};
    g_node *nd = NULL;
    if (node(b, G_OP_DELTANET, 6, in, 2, outs, &nd) < 0) return -1;
    nd->p.dn.v_heads_tiled = v_heads_tiled;
    *s_new = outs[1];
    return outs[0];
}

int32_t gb_slice(g_builder *b, int32_t x, int32_t axis, g_affine begin, g_affine len) {
    if (!live(b, 1, x)) return -1;
    const g_tensor *X = T(b, x);
    if (axis < 0 || axis >= X->n_dims || len.has_pos || begin.has_pos || len.base < (len.has_n ? 0 : 1))
        return shape_fail(b, G_OP_SLICE, x, "input");
    /* Static axes are checked here; symbolic ones when a call binds n (the executor re-checks): a
     * symbolic length on a static axis (the first n columns of a state) for every n that fits. */
    bool xs = (X->n_mask >> axis) & 1;
    if (!xs && (begin.has_n || begin.base < 0 || begin.base + len.base > X->ne[axis]))
        return shape_fail(b, G_OP_SLICE, x, "input");
    int64_t ne[4] = {X->ne[0], X->ne[1], X->ne[2], X->ne[3]};
    ne[axis] = len.base;
    uint8_t mask = (uint8_t)((X->n_mask & ~(1u << axis)) | (len.has_n ? 1u << axis : 0u));
    int32_t out = act(b, X->n_dims, ne, mask);
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_SLICE, 1, &x, 1, &out, &nd) < 0) return -1;
    nd->p.slice.axis = axis;
    nd->p.slice.begin = begin;
    return out;
}

int32_t gb_concat(g_builder *b, int32_t a, int32_t x, int32_t axis) {
    if (!live(b, 2, a, x)) return -1;
    const g_tensor *A = T(b, a), *X = T(b, x);
    if (axis < 0 || axis >= 4 || A->n_dims != X->n_dims) return shape_fail(b, G_OP_CONCAT, x, "operand");
    for (int d = 0; d < 4; d++) {
        if (d == axis) continue;
        if (A->ne[d] != X->ne[d] || ((A->n_mask ^ X->n_mask) >> d & 1)) return shape_fail(b, G_OP_CONCAT, x, "operand");
    }
    if ((A->n_mask >> axis & 1) && (X->n_mask >> axis & 1)) return shape_fail(b, G_OP_CONCAT, x, "operand");
    int64_t ne[4] = {A->ne[0], A->ne[1], A->ne[2], A->ne[3]};
    ne[axis] = A->ne[axis] + X->ne[axis];
    int32_t out = act(b, A->n_dims, ne, (uint8_t)(A->n_mask | X->n_mask));
    int32_t in[2] = {a, x};
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_CONCAT, 2, in, 1, &out, &nd) < 0) return -1;
    nd->p.concat.axis = axis;
    return out;
}

int32_t gb_reshape(g_builder *b, int32_t x, int32_t n_dims, const g_affine ne_in[4]) {
    if (!live(b, 1, x)) return -1;
    const g_tensor *X = T(b, x);
    int64_t ne[4] = {1, 1, 1, 1};
    uint8_t mask = 0;
    int64_t static_out = 1, static_in = 1;
    int sym_out = -1, sym_in = -1;
    for (int d = 0; d < n_dims; d++) {
        if (ne_in[d].has_pos) return shape_fail(b, G_OP_RESHAPE, x, "input");
        ne[d] = ne_in[d].base;
        if (ne_in[d].has_n) {
            if (ne_in[d].base != 0 || sym_out >= 0) return shape_fail(b, G_OP_RESHAPE, x, "input");
            mask |= (uint8_t)(1u << d);
            sym_out = d;
        } else {
            static_out *= ne[d];
        }
    }
    for (int d = 0; d < 4; d++) {
        if ((X->n_mask >> d) & 1) {
            if (X->ne[d] != 0 || sym_in >= 0) return shape_fail(b, G_OP_RESHAPE, x, "input");
            sym_in = d;
        } else {
            static_in *= X->ne[d];
        }
    }
    /* The symbolic axis must be outermost (all later axes 1) on both sides. */
    bool ok = static_in == static_out && (sym_in < 0) == (sym_out < 0);
    for (int d = sym_in + 1; ok && sym_in >= 0 && d < 4; d++) ok = X->ne[d] == 1;
    for (int d = sym_out + 1; ok && sym_out >= 0 && d < 4; d++) ok = ne[d] == 1;
    if (!ok) return shape_fail(b, G_OP_RESHAPE, x, "input");
    int32_t out = new_tensor(b->p, G_VIEW, X->dtype, n_dims, ne, mask, b->e);
    if (out < 0) return fail(b, SLM_ERR_NOMEM, "out of memory");
    b->p->tensors[out].src = x;
    b->p->tensors[out].layer = b->layer;
    b->p->tensors[out].fn = b->fn;
    memcpy(b->p->tensors[out].name, b->p->tensors[x].name, G_NAME_CAP);
    return node(b, G_OP_RESHAPE, 1, &x, 1, &out, NULL);
}

int32_t gb_state_read(g_builder *b, int32_t state) {
    if (b->status) return -1;
    if (state < 0 || state >= b->p->n_states) return fail(b, SLM_ERR_INVALID_ARG, "STATE_READ: no state %d", state);
    const g_state *s = &b->p->states[state];
    int32_t out = new_tensor(b->p, G_STATE_VIEW, s->dtype, s->n_dims, s->ne, 0, b->e);
    if (out < 0) return fail(b, SLM_ERR_NOMEM, "out of memory");
    b->p->tensors[out].src = state;
    b->p->tensors[out].layer = b->layer;
    b->p->tensors[out].fn = b->fn;
    snprintf(b->p->tensors[out].name, G_NAME_CAP, "%s", s->name);
    g_node *nd = NULL;
    if (node(b, G_OP_STATE_READ, 0, NULL, 1, &out, &nd) < 0) return -1;
    nd->p.read.state = state;
    return out;
}

void gb_state_write(g_builder *b, int32_t state, int32_t value, const g_affine begin[4]) {
    if (!live(b, 1, value)) return;
    if (state < 0 || state >= b->p->n_states) {
        fail(b, SLM_ERR_INVALID_ARG, "STATE_WRITE: no state %d", state);
        return;
    }
    const g_state *s = &b->p->states[state];
    const g_tensor *V = T(b, value);
    for (int d = 0; d < 4; d++) {
        bool sym = (V->n_mask >> d) & 1;
        /* Static parts must fit; symbolic extents are checked against the context per call. */
        if (!sym && !begin[d].has_pos && !begin[d].has_n && begin[d].base + V->ne[d] > s->ne[d]) {
            shape_fail(b, G_OP_STATE_WRITE, value, "value");
            return;
        }
        if (begin[d].base < 0) {
            shape_fail(b, G_OP_STATE_WRITE, value, "value");
            return;
        }
    }
    int64_t ne0[4] = {0, 1, 1, 1};
    int32_t out = new_tensor(b->p, G_NONE, SLM_DTYPE_F32, 1, ne0, 0, b->e);
    if (out < 0) {
        fail(b, SLM_ERR_NOMEM, "out of memory");
        return;
    }
    b->p->tensors[out].fn = b->fn;
    b->p->tensors[out].layer = b->layer;
    snprintf(b->p->tensors[out].name, G_NAME_CAP, "%s", s->name);
    g_node *nd = NULL;
    if (node(b, G_OP_STATE_WRITE, 1, &value, 1, &out, &nd) < 0) return;
    nd->p.write.state = state;
    for (int d = 0; d < 4; d++) nd->p.write.begin[d] = begin[d];
}

void gb_set_output(g_builder *b, int32_t x, g_output kind) {
    if (!live(b, 1, x)) return;
    b->p->functions[b->fn].logits = x;
    b->p->functions[b->fn].output = kind;
}

void gb_set_logits(g_builder *b, int32_t x) { gb_set_output(b, x, G_OUT_LOGITS); }

void gb_set_aux(g_builder *b, int32_t x) {
    if (!live(b, 1, x)) return;
    b->p->functions[b->fn].aux = x;
}

void gb_name(g_builder *b, int32_t t, const char *name) {
    if (b->status || t < 0 || t >= b->p->n_tensors) return;
    g_tensor *x = &b->p->tensors[t];
    if (b->layer >= 0) snprintf(x->name, sizeof x->name, "blk.%d.%s", b->layer, name);
    else snprintf(x->name, sizeof x->name, "%s", name);
}

/* ---- verification --------------------------------------------------------------------------- */

slm_status graph_verify(const g_program *p, slm_err *e) {
    int32_t *producer = al_array(&p->alloc, (size_t)(p->n_tensors ? p->n_tensors : 1), sizeof(int32_t));
    if (!producer) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    slm_status st = SLM_OK;
    for (int32_t f = 0; f < p->n_functions && !st; f++) {
        const g_function *fn = &p->functions[f];
        for (int32_t t = 0; t < p->n_tensors; t++) producer[t] = -1;
        for (int32_t i = 0; i < fn->n_nodes && !st; i++) {
            const g_node *nd = &p->nodes[fn->nodes[i]];
            for (int k = 0; k < nd->n_in && !st; k++) {
                const g_tensor *t = &p->tensors[nd->in[k]];
                if (t->storage == G_ACTIVATION || t->storage == G_VIEW || t->storage == G_STATE_VIEW) {
                    if (t->fn != f || producer[nd->in[k]] < 0)
                        st = err_set(e, SLM_ERR_SHAPE, "function %s: node %d (%s) reads %s before it is produced",
                                     fn->name, i, g_op_name(nd->op), t->name);
                }
                /* Invariant 3: no STATE_WRITE to a state between a read and this consumer. */
                if (!st && t->storage == G_STATE_VIEW) {
                    for (int32_t j = producer[nd->in[k]] + 1; j < i; j++) {
                        const g_node *w = &p->nodes[fn->nodes[j]];
                        if (w->op == G_OP_STATE_WRITE && w->p.write.state == t->src)
                            st = err_set(e, SLM_ERR_SHAPE,
                                         "function %s: node %d (%s) reads state %s through a view taken before a later write",
                                         fn->name, i, g_op_name(nd->op), t->name);
                    }
                }
            }
            for (int k = 0; k < nd->n_out && !st; k++) {
                if (producer[nd->out[k]] >= 0)
                    st = err_set(e, SLM_ERR_SHAPE, "function %s: %s produced twice", fn->name, p->tensors[nd->out[k]].name);
                producer[nd->out[k]] = i;
            }
        }
        if (!st && (fn->tokens < 0 || fn->logits < 0))
            st = err_set(e, SLM_ERR_SHAPE, "function %s has no token input or no output", fn->name);
    }
    al_free(&p->alloc, producer);
    return st;
}

/* ---- ops added for compile/ (reductions, masks, one-hot writes) ----------------------------- */

int32_t gb_sum(g_builder *b, int32_t x, int32_t axis) {
    if (!live(b, 1, x)) return -1;
    const g_tensor *X = T(b, x);
    if (axis < 0 || axis >= X->n_dims || X->storage == G_NONE) return shape_fail(b, G_OP_SUM, x, "input");
    int64_t ne[4] = {X->ne[0], X->ne[1], X->ne[2], X->ne[3]};
    ne[axis] = 1;
    int32_t out = act(b, X->n_dims, ne, (uint8_t)(X->n_mask & ~(1u << axis)));
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_SUM, 1, &x, 1, &out, &nd) < 0) return -1;
    nd->p.reduce.axis = axis;
    return out;
}

int32_t gb_select(g_builder *b, int32_t c, int32_t a, int32_t x) {
    if (!live(b, 3, c, a, x)) return -1;
    const int32_t ops[3] = {c, a, x};
    int64_t ne[4] = {1, 1, 1, 1};
    uint8_t mask = 0;
    int32_t n_dims = 1;
    for (int d = 0; d < 4; d++) {
        bool have = false;
        for (int k = 0; k < 3; k++) {
            const g_tensor *t = T(b, ops[k]);
            bool sym = (t->n_mask >> d) & 1;
            if (t->n_dims > n_dims) n_dims = t->n_dims;
            if (!sym && t->ne[d] == 1) continue; /* broadcasts */
            if (!have) {
                ne[d] = t->ne[d];
                mask = (uint8_t)(mask | (sym ? 1u << d : 0u));
                have = true;
            } else if (ne[d] != t->ne[d] || ((mask >> d) & 1) != sym) {
                return shape_fail(b, G_OP_SELECT, ops[k], k == 0 ? "condition" : "operand");
            }
        }
    }
    int32_t out = act(b, n_dims, ne, mask);
    return out < 0 ? -1 : node(b, G_OP_SELECT, 3, ops, 1, &out, NULL);
}

int32_t gb_onehot(g_builder *b, int64_t L, g_affine begin) {
    if (b->status) return -1;
    if (L < 1 || begin.base < 0) return fail(b, SLM_ERR_SHAPE, "ONEHOT: length %lld or begin %lld is invalid", (long long)L, (long long)begin.base);
    int64_t ne[4] = {L, 0, 1, 1};
    int32_t out = act(b, 2, ne, 2);
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_ONEHOT, 0, NULL, 1, &out, &nd) < 0) return -1;
    nd->p.onehot.begin = begin;
    return out;
}

int32_t gb_matmul_t(g_builder *b, int32_t x, int32_t y) {
    if (!live(b, 2, x, y)) return -1;
    const g_tensor *X = T(b, x), *Y = T(b, y);
    if (X->n_dims != 2 || (X->n_mask & 1) || X->storage == G_NONE) return shape_fail(b, G_OP_MATMUL_T, x, "left operand");
    if (Y->n_dims != 2 || (Y->n_mask & 1) || Y->ne[1] != X->ne[1] || ((X->n_mask ^ Y->n_mask) & 2))
        return shape_fail(b, G_OP_MATMUL_T, y, "right operand");
    int64_t ne[4] = {X->ne[0], Y->ne[0], 1, 1};
    int32_t out = act(b, 2, ne, 0);
    int32_t in[2] = {x, y};
    return out < 0 ? -1 : node(b, G_OP_MATMUL_T, 2, in, 1, &out, NULL);
}

int32_t gb_round(g_builder *b, int32_t x, slm_dtype dtype) {
    if (!live(b, 1, x)) return -1;
    if (dtype != SLM_DTYPE_F16 && dtype != SLM_DTYPE_BF16)
        return fail(b, SLM_ERR_INVALID_ARG, "ROUND: %s is not f16 or bf16", slm_dtype_name(dtype));
    int32_t out = act_like(b, x);
    g_node *nd = NULL;
    if (out < 0 || node(b, G_OP_ROUND, 1, &x, 1, &out, &nd) < 0) return -1;
    nd->p.round.dtype = dtype;
    return out;
}

/* Extent of axis d of t as an affine (what gb_slice/gb_reshape take). */
static g_affine extent_of(const g_tensor *t, int d) {
    g_affine a = {t->ne[d], ((t->n_mask >> d) & 1) != 0, false, 0};
    return a;
}

int32_t gb_clone_node(g_builder *b, const g_program *src, const g_node *nd, const int32_t *in, int32_t *out) {
    if (b->status) return -1;
    const g_tensor *o0 = &src->tensors[nd->out[0]];
    int32_t r = -1, second = -1;
    switch (nd->op) {
    case G_OP_EMBED: r = gb_embed(b, in[0], in[1]); break;
    case G_OP_MATMUL: r = gb_matmul(b, in[0], in[1]); break;
    case G_OP_ADD: r = gb_add(b, in[0], in[1]); break;
    case G_OP_MUL: r = gb_mul(b, in[0], in[1]); break;
    case G_OP_SCALE: r = gb_scale(b, in[0], nd->p.f[0]); break;
    case G_OP_SILU: case G_OP_SIGMOID: case G_OP_SOFTPLUS: case G_OP_EXP: r = gb_unary(b, nd->op, in[0]); break;
    case G_OP_SWIGLU: r = gb_swiglu(b, in[0], in[1]); break;
    case G_OP_GEGLU: r = gb_geglu(b, in[0], in[1]); break;
    case G_OP_RMSNORM:
        r = gb_rmsnorm(b, in[0], nd->n_in > 1 ? in[1] : -1, nd->p.norm.eps, nd->p.norm.w_offset);
        break;
    case G_OP_L2NORM: r = gb_l2norm(b, in[0], nd->p.norm.eps); break;
    case G_OP_GATED_RMSNORM: r = gb_gated_rmsnorm(b, in[0], in[1], in[2], nd->p.norm.eps); break;
    case G_OP_ROPE:
        r = gb_rope(b, in[0], nd->p.rope.n_rot, nd->p.rope.style, nd->p.rope.base, nd->p.rope.freq_scale);
        break;
    case G_OP_ATTENTION:
        r = gb_attention_window(b, in[0], in[1], in[2], nd->p.attn.n_head_kv, nd->p.attn.scale, nd->p.attn.window,
                                nd->p.attn.ring);
        break;
    case G_OP_CONV1D: r = gb_conv1d(b, in[0], in[1]); break;
    case G_OP_DELTANET:
        r = gb_deltanet(b, in[0], in[1], in[2], in[3], in[4], in[5], nd->p.dn.v_heads_tiled, &second);
        if (r >= 0) b->p->nodes[b->p->n_nodes - 1].p.dn.chunked = nd->p.dn.chunked;
        break;
    case G_OP_SLICE: r = gb_slice(b, in[0], nd->p.slice.axis, nd->p.slice.begin, extent_of(o0, nd->p.slice.axis)); break;
    case G_OP_CONCAT: r = gb_concat(b, in[0], in[1], nd->p.concat.axis); break;
    case G_OP_RESHAPE: {
        g_affine ne[4];
        for (int d = 0; d < 4; d++) ne[d] = extent_of(o0, d);
        r = gb_reshape(b, in[0], o0->n_dims, ne);
        break;
    }
    case G_OP_STATE_READ: r = gb_state_read(b, nd->p.read.state); break;
    case G_OP_STATE_WRITE:
        gb_state_write(b, nd->p.write.state, in[0], nd->p.write.begin);
        if (!b->status) r = b->p->nodes[b->p->n_nodes - 1].out[0];
        break;
    case G_OP_SUM: r = gb_sum(b, in[0], nd->p.reduce.axis); break;
    case G_OP_SELECT: r = gb_select(b, in[0], in[1], in[2]); break;
    case G_OP_ONEHOT: r = gb_onehot(b, o0->ne[0], nd->p.onehot.begin); break;
    case G_OP_MATMUL_T: r = gb_matmul_t(b, in[0], in[1]); break;
    case G_OP_ROUND: r = gb_round(b, in[0], (slm_dtype)nd->p.round.dtype); break;
    default: return fail(b, SLM_ERR_INVALID_ARG, "cannot clone op %d", (int)nd->op);
    }
    if (r < 0) return -1;
    out[0] = r;
    if (nd->n_out > 1) out[1] = second;
    for (int k = 0; k < nd->n_out; k++)
        memcpy(b->p->tensors[out[k]].name, src->tensors[nd->out[k]].name, G_NAME_CAP);
    return r;
}

g_program *graph_clone(const g_program *p) {
    g_program *q = NULL;
    if (graph_create(&p->alloc, &q)) return NULL;
    const slm_allocator *a = &p->alloc;
    q->tensors = al_array(a, (size_t)(p->n_tensors ? p->n_tensors : 1), sizeof(g_tensor));
    q->nodes = al_array(a, (size_t)(p->n_nodes ? p->n_nodes : 1), sizeof(g_node));
    q->states = al_array(a, (size_t)(p->n_states ? p->n_states : 1), sizeof(g_state));
    if (!q->tensors || !q->nodes || !q->states) goto fail;
    q->cap_tensors = p->n_tensors ? p->n_tensors : 1;
    q->cap_nodes = p->n_nodes ? p->n_nodes : 1;
    q->cap_states = p->n_states ? p->n_states : 1;
    if (p->n_tensors) memcpy(q->tensors, p->tensors, (size_t)p->n_tensors * sizeof(g_tensor));
    if (p->n_nodes) memcpy(q->nodes, p->nodes, (size_t)p->n_nodes * sizeof(g_node));
    if (p->n_states) memcpy(q->states, p->states, (size_t)p->n_states * sizeof(g_state));
    q->n_tensors = p->n_tensors;
    q->n_nodes = p->n_nodes;
    q->n_states = p->n_states;
    q->max_call_tokens = p->max_call_tokens;
    for (int32_t f = 0; f < p->n_functions; f++) {
        g_function *qf = &q->functions[f];
        *qf = p->functions[f];
        qf->nodes = al_array(a, (size_t)(qf->n_nodes ? qf->n_nodes : 1), sizeof(int32_t));
        if (!qf->nodes) {
            qf->cap_nodes = 0;
            q->n_functions = f;
            goto fail;
        }
        qf->cap_nodes = qf->n_nodes ? qf->n_nodes : 1;
        if (qf->n_nodes) memcpy(qf->nodes, p->functions[f].nodes, (size_t)qf->n_nodes * sizeof(int32_t));
        q->n_functions = f + 1;
    }
    return q;
fail:
    graph_destroy(q);
    return NULL;
}
