/* graph.h — the Program: statelm's small typed IR (docs/architecture.md, graph/).
 *
 * A Program holds tensors, nodes from a closed op set, declared states, and named functions
 * (at least "prefill" over n tokens and "decode" over 1) that share the weights and the states.
 * Only STATE_READ and STATE_WRITE touch a state; a write carries an explicit window. There is no
 * other mutation: every other node writes a fresh activation.
 *
 * Shapes are in ggml order (ne[0] innermost, contiguous). A function over a variable number of
 * tokens n has symbolic axes: axis d of a tensor has size ne[d] + n when bit d of n_mask is set
 * (so "n" is {ne 0, bit set} and "n + K - 1" is {ne K-1, bit set}). Functions built for a fixed
 * token count (decode) have no symbolic axes. Shapes become concrete when a call binds n.
 *
 * Invariants:
 *  1. Node order inside a function is execution order and a topological order.
 *  2. Every activation tensor is the output of exactly one node of one function.
 *  3. A STATE_READ's value is the state as of that point in the function; consumers of a read
 *     must not run after a later STATE_WRITE to the same state (graph_verify checks it).
 *  4. Weight tensors are shared by all functions; states are declared once per Program.
 *  5. Activations are f32; state views have the state's dtype; token ids are i32.
 */
#ifndef SLM_GRAPH_GRAPH_H
#define SLM_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "statelm.h"

#define G_MAX_IN 6
#define G_MAX_OUT 2
#define G_MAX_FUNCTIONS 4
#define G_NAME_CAP 48

typedef enum g_storage {
    G_WEIGHT = 0,     /* mapped model data (borrowed) */
    G_INPUT = 1,      /* token ids of the call: i32 (n) */
    G_ACTIVATION = 2, /* planned per call */
    G_STATE_VIEW = 3, /* the whole storage of a state (output of STATE_READ) */
    G_VIEW = 4,       /* alias of another tensor with a new shape (RESHAPE) */
    G_NONE = 5        /* outputs of nodes that produce nothing (STATE_WRITE) */
} g_storage;

/* The closed op set. Shapes: outputs first; "n" is the token axis of the call. */
#define G_OP_LIST(X)                                                                               \
    X(EMBED)         /* (d, n) <- w (d, V), ids i32 (n)                                      */ \
    X(MATMUL)        /* (m, ...) <- w (k, m), x (k, ...): y = W x per column                 */ \
    X(ADD)           /* a + b; b same shape or (ne0) broadcast over the rest                 */ \
    X(MUL)           /* a * b; same broadcast rule                                           */ \
    X(SCALE)         /* x * p.f[0]                                                           */ \
    X(SILU)          /* x * sigmoid(x)                                                       */ \
    X(SIGMOID)       /* 1 / (1 + exp(-x))                                                    */ \
    X(SOFTPLUS)      /* log(1 + exp(x)), x when x > 20                                       */ \
    X(EXP)           /* exp(x)                                                               */ \
    X(SWIGLU)        /* silu(a) * b                                                          */ \
    X(GEGLU)         /* gelu_tanh(a) * b, gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */ \
    X(RMSNORM)       /* x / sqrt(mean(x^2 over ne0) + eps) * (w + p.f[1]); w optional        */ \
    X(L2NORM)        /* x / sqrt(sum(x^2 over ne0) + eps)                                    */ \
    X(GATED_RMSNORM) /* rmsnorm(x; w, eps) * silu(z) over ne0                                */ \
    X(ROPE)          /* (hd, H, n) <- x (hd, H, n); positions pos + t                        */ \
    X(ATTENTION)     /* (hdv, H, n) <- q (hd, H, n), k state (hd*Hkv, ctx), v state          */ \
    X(CONV1D)        /* (C, n) <- x (C, n + K - 1), w (K, C): y[c,t] = sum_k w[k,c] x[c,t+k] */ \
    X(DELTANET)      /* o (dv, Hv, n), S' (dv, dk, Hv) <- q, k (dk, Hk, n), v (dv, Hv, n),    \
                        g (Hv, n), beta (Hv, n), S (dv, dk, Hv)                               */ \
    X(SLICE)         /* x[begin, begin + len) along an axis (copy)                           */ \
    X(CONCAT)        /* a ++ b along an axis                                                 */ \
    X(RESHAPE)       /* view with a new shape, same elements (no copy)                       */ \
    X(STATE_READ)    /* view of a whole state                                                */ \
    X(STATE_WRITE)   /* state[window] <- value                                               */ \
    X(SUM)           /* x summed over p.reduce.axis (that axis becomes 1)                    */ \
    X(SELECT)        /* c != 0 ? a : b, size-1 axes broadcast (numpy rule); out f32         */ \
    X(ONEHOT)        /* (L, n): out[j, t] = (j == begin + t), begin may hold pos             */ \
    X(MATMUL_T)      /* (a, c) <- x (a, m), y (c, m): out = x y^T, contracted over axis 1   */ \
    X(ROUND)         /* x rounded to p.round.dtype (f16/bf16) and back to f32               */

typedef enum g_op {
#define G_X_ENUM(name) G_OP_##name,
    G_OP_LIST(G_X_ENUM)
#undef G_X_ENUM
    G_OP_COUNT
} g_op;

const char *g_op_name(g_op op);

/* An affine extent or offset: base + (has_n ? n : 0) + (has_pos ? pos : 0), taken modulo mod
 * when mod > 0 (a ring: the write begin of a sliding-window KV state). A write or ONEHOT whose
 * begin has a mod wraps: token t goes to row (begin + t) mod mod. */
typedef struct g_affine {
    int64_t base;
    bool has_n;
    bool has_pos;
    int64_t mod;
} g_affine;

typedef struct g_tensor {
    g_storage storage;
    uint32_t dtype;      /* slm_dtype */
    int32_t n_dims;      /* 1..4 */
    int64_t ne[4];       /* base sizes, unused dims 1 */
    uint8_t n_mask;      /* bit d: axis d has size ne[d] + n */
    int32_t src;         /* G_VIEW: viewed tensor; G_STATE_VIEW: state index; else -1 */
    int32_t layer;       /* -1 if none */
    int32_t fn;          /* owning function for activations/inputs, -1 for weights */
    const void *data;    /* G_WEIGHT: mapped data */
    uint64_t size_bytes; /* G_WEIGHT: stored bytes */
    char name[G_NAME_CAP];
} g_tensor;

/* Rope variants (docs/spec/llama.md §3). */
typedef enum g_rope_style { G_ROPE_NORM = 0, G_ROPE_NEOX = 1 } g_rope_style;

typedef struct g_node {
    g_op op;
    int32_t n_in, n_out;
    int32_t in[G_MAX_IN];
    int32_t out[G_MAX_OUT];
    int32_t layer;     /* model layer, -1 if none */
    int32_t fn;        /* owning function */
    union {
        float f[4];
        struct { float eps; float w_offset; } norm;                 /* RMSNORM, L2NORM, GATED_RMSNORM */
        struct { int32_t n_rot; g_rope_style style; float base; float freq_scale; } rope;
        /* ATTENTION: a query at position q attends keys at positions (q - window, q] (window 0:
         * [0, q]); the key at position P is row P mod ring of the states (ring 0: row P). */
        struct { int32_t n_head_kv; float scale; int32_t window; int32_t ring; } attn;
        struct { bool v_heads_tiled; bool chunked; } dn;             /* DELTANET */
        struct { int32_t axis; g_affine begin; } slice;             /* SLICE (len = output shape) */
        struct { int32_t axis; } concat;
        struct { int32_t state; g_affine begin[4]; } write;         /* STATE_WRITE (extent = value shape) */
        struct { int32_t state; } read;                             /* STATE_READ */
        struct { int32_t axis; } reduce;                            /* SUM */
        struct { g_affine begin; } onehot;                          /* ONEHOT (L = output ne0) */
        struct { uint32_t dtype; } round;                           /* ROUND */
    } p;
} g_node;

typedef struct g_state {
    char name[G_NAME_CAP];
    slm_state_role role;
    int32_t layer;
    uint32_t dtype;
    int32_t n_dims;
    int64_t ne[4];       /* logical shape */
    int64_t alloc_ne[4]; /* allocated shape (>= logical; padding added by legalisation) */
    int32_t pos_axis;    /* -1 if none */
} g_state;

/* What a function's output tensor holds. */
typedef enum g_output {
    G_OUT_LOGITS = 0, /* (n_vocab, 1) of the last token, or (n_vocab, n) of every token ("verify") */
    G_OUT_HIDDEN = 1  /* (n_embd, n): every token's hidden state after the final norm ("embed") */
} g_output;

/* Every function is written over a symbolic token count n; a function with symbolic_n false is
 * only ever called with n = fixed_n (decode: 1), which check/plan use to print concrete shapes. */
typedef struct g_function {
    char name[16];
    bool symbolic_n;
    int32_t fixed_n;
    int32_t n_nodes, cap_nodes;
    int32_t *nodes;      /* node ids in execution order */
    int32_t tokens;      /* input tensor: ids i32 (n) */
    int32_t logits;      /* output tensor, of kind `output` (the name is historical: most are logits) */
    g_output output;
    int32_t aux;         /* -1, or a second result the call keeps to its end: the final-norm hidden
                          * states (n_embd, n) of a program built for an MTP drafter (model/build.c) */
} g_function;

typedef struct g_program {
    slm_allocator alloc;
    int32_t n_tensors, cap_tensors;
    g_tensor *tensors;
    int32_t n_nodes, cap_nodes;
    g_node *nodes;
    int32_t n_states, cap_states;
    g_state *states;
    int32_t n_functions;
    g_function functions[G_MAX_FUNCTIONS];
    int32_t max_call_tokens; /* most tokens one call may take (a ring write covers at most that
                              * many rows without overwriting keys still in a window); 0 = any */
} g_program;

slm_status graph_create(const slm_allocator *a, g_program **out);
void graph_destroy(g_program *p);

/* Returns the function index with that name, or -1. */
int32_t graph_find_function(const g_program *p, const char *name);

/* Concrete size of axis d of tensor t for a call over n tokens. */
static inline int64_t g_ne(const g_tensor *t, int d, int64_t n) {
    return t->ne[d] + (((t->n_mask >> d) & 1) ? n : 0);
}
static inline int64_t g_affine_eval(g_affine a, int64_t n, int64_t pos) {
    int64_t v = a.base + (a.has_n ? n : 0) + (a.has_pos ? pos : 0);
    return a.mod > 0 ? ((v % a.mod) + a.mod) % a.mod : v;
}
/* Elements of t for n tokens. */
int64_t g_nelements(const g_tensor *t, int64_t n);
/* Checks invariants 1–5 and that every shape is consistent; SLM_ERR_SHAPE with the node on failure. */
slm_status graph_verify(const g_program *p, slm_err *e);

/* ---- building ----------------------------------------------------------------------------
 * A builder appends to one function. Each gb_* returns the output tensor id, or -1 after the
 * first error (later calls are no-ops), so builders read as straight-line math and check
 * gb_status once at the end. Shape rules are checked as nodes are added. */
typedef struct g_builder {
    g_program *p;
    int32_t fn;
    int32_t layer;      /* stamped on nodes and tensors added */
    slm_err *e;
    slm_status status;
} g_builder;

slm_status graph_add_function(g_program *p, const char *name, bool symbolic_n, int32_t fixed_n, int32_t *fn,
                              slm_err *e);
int32_t graph_add_state(g_program *p, const char *name, slm_state_role role, int32_t layer, slm_dtype dtype,
                        int32_t n_dims, const int64_t ne[4], int32_t pos_axis, slm_err *e);
/* The dtype/shape of a mapped weight; dedupes by data pointer. */
int32_t graph_add_weight(g_program *p, const char *name, uint32_t dtype, int32_t n_dims, const int64_t ne[4],
                         const void *data, uint64_t size_bytes, slm_err *e);

void gb_init(g_builder *b, g_program *p, int32_t fn, slm_err *e);
/* The function's token-id input (created on first call). */
int32_t gb_tokens(g_builder *b);
/* The symbolic token count of the function as an extent (n, or the fixed count). */
g_affine gb_n(const g_builder *b);
int32_t gb_embed(g_builder *b, int32_t w, int32_t ids);
int32_t gb_matmul(g_builder *b, int32_t w, int32_t x);
int32_t gb_add(g_builder *b, int32_t a, int32_t x);
int32_t gb_mul(g_builder *b, int32_t a, int32_t x);
int32_t gb_scale(g_builder *b, int32_t x, float s);
int32_t gb_unary(g_builder *b, g_op op, int32_t x); /* SILU, SIGMOID, SOFTPLUS, EXP */
int32_t gb_swiglu(g_builder *b, int32_t gate, int32_t up);
int32_t gb_geglu(g_builder *b, int32_t gate, int32_t up);
int32_t gb_rmsnorm(g_builder *b, int32_t x, int32_t w, float eps, float w_offset);
int32_t gb_l2norm(g_builder *b, int32_t x, float eps);
int32_t gb_gated_rmsnorm(g_builder *b, int32_t x, int32_t z, int32_t w, float eps);
int32_t gb_rope(g_builder *b, int32_t x, int32_t n_rot, g_rope_style style, float base, float freq_scale);
/* Sliding-window attention over ring states (see g_node.p.attn): window >= 1; ring = 0 or a
 * multiple of 16 no larger than the states' rows. */
int32_t gb_attention_window(g_builder *b, int32_t q, int32_t k_state, int32_t v_state, int32_t n_head_kv, float scale,
                            int32_t window, int32_t ring);
int32_t gb_conv1d(g_builder *b, int32_t x, int32_t w);
/* Returns o; *s_new receives the updated state tensor. */
int32_t gb_deltanet(g_builder *b, int32_t q, int32_t k, int32_t v, int32_t g, int32_t beta, int32_t s,
                    bool v_heads_tiled, int32_t *s_new);
/* Slice of length len (an extent) starting at begin along axis. */
int32_t gb_slice(g_builder *b, int32_t x, int32_t axis, g_affine begin, g_affine len);
int32_t gb_concat(g_builder *b, int32_t a, int32_t x, int32_t axis);
/* Reshape to n_dims dims; the symbolic axis (if any) must stay the outermost non-unit axis and be
 * given as an extent with has_n. */
int32_t gb_reshape(g_builder *b, int32_t x, int32_t n_dims, const g_affine ne[4]);
int32_t gb_state_read(g_builder *b, int32_t state);
/* Writes value into state at begin[axis] (extent = value's shape). */
void gb_state_write(g_builder *b, int32_t state, int32_t value, const g_affine begin[4]);
/* Sum over axis (output size 1 there); x may be a state view of any state dtype. */
int32_t gb_sum(g_builder *b, int32_t x, int32_t axis);
/* c != 0 ? a : x elementwise. Every axis of the three operands has one size or 1 (a static 1
 * broadcasts); symbolic axes must agree exactly. Operands may be state views (any state dtype). */
int32_t gb_select(g_builder *b, int32_t c, int32_t a, int32_t x);
/* (L, n) one-hot position matrix of the function's n tokens: out[j, t] = 1 when j == begin + t,
 * else 0. begin may depend on pos (that is what it is for: a static-shaped stand-in for a write
 * at a data-dependent offset). */
int32_t gb_onehot(g_builder *b, int64_t L, g_affine begin);
/* (a, c) <- x (a, m), y (c, m): out[i, j] = sum_k x[i, k] y[j, k]; both 2-D, same axis 1
 * (symbolic or not). The output is static. */
int32_t gb_matmul_t(g_builder *b, int32_t x, int32_t y);
/* x rounded to dtype (F16 or BF16) and back: what a state of that dtype would hold. */
int32_t gb_round(g_builder *b, int32_t x, slm_dtype dtype);
/* Appends a node that computes what node nd of program src computes, on operands in[0, nd->n_in)
 * of b's program, through the gb_* call of its op (so every shape rule is checked again). Output
 * ids go to out[0, nd->n_out) and take the names of nd's outputs. STATE_READ/STATE_WRITE keep
 * nd's state index (the caller keeps state indices aligned). Returns out[0], or -1 on error. */
int32_t gb_clone_node(g_builder *b, const g_program *src, const g_node *nd, const int32_t *in, int32_t *out);
/* Deep copy of p (same allocator); weights stay borrowed from the same mapping. NULL on OOM. */
g_program *graph_clone(const g_program *p);
/* Marks x as the function's logits output. */
void gb_set_logits(g_builder *b, int32_t x);
/* Marks x as the function's output of that kind. */
void gb_set_output(g_builder *b, int32_t x, g_output kind);
/* Marks x as the function's aux result (g_function.aux). */
void gb_set_aux(g_builder *b, int32_t x);
/* Names tensor t (for plans and errors); the layer is prefixed as "blk.N." when set. */
void gb_name(g_builder *b, int32_t t, const char *name);

static inline g_affine g_const(int64_t v) { g_affine a = {v, false, false, 0}; return a; }
static inline g_affine g_n_plus(int64_t v) { g_affine a = {v, true, false, 0}; return a; }
static inline g_affine g_pos_plus(int64_t v) { g_affine a = {v, false, true, 0}; return a; }
/* (pos + v) mod m: the begin of a ring write. */
static inline g_affine g_pos_mod(int64_t v, int64_t m) { g_affine a = {v, false, true, m}; return a; }

#endif
