/* targets.c — the target profiles, one table per target (compile/target.h). Everything statelm
 * knows about a target lives in these rows; check, legalize and place only interpret them.
 *  - cpu:  the reference backend (backend/cpu/kern_ref.c) has a kernel for every op and reads and
 *          writes states in f32, f16 and bf16 (test_compile checks the table against the kernels).
 *  - cuda: there is no CUDA backend yet (docs/architecture.md backend/cuda), so every op falls back to the
 *          CPU, and says so.
 *  - ane:  the Apple Neural Engine rules known from the field reports (docs/architecture.md, field reports 1–3);
 *          statelm cannot run it here: plans for it are simulated on the CPU. */
#include "compile/target.h"

#include <string.h>

#define DT(x) (1ull << SLM_DTYPE_##x)
#define STATE_DTYPES_CPU (DT(F32) | DT(F16) | DT(BF16))
/* the CPU's: also Q8_0 and Q4_0 KV caches (whole rows of 32-blocks; kern_attn_q.h, quant_row on the write) */
#define STATE_DTYPES_CPU_KV (STATE_DTYPES_CPU | DT(Q8_0) | DT(Q4_0))

const char *tgt_effect_name(tgt_effect e) {
    switch (e) {
    case TGT_OK: return "ok";
    case TGT_FALLBACK: return "fallback";
    default: return "reject";
    }
}

/* ---- cpu ------------------------------------------------------------------------------------- */

#define CPU_REF "reference kernel (backend/cpu/kern_ref.c)"
static const tgt_op_rule cpu_ops[] = {
    {G_OP_EMBED, 0, TGT_OK, CPU_REF " dequantises rows of every GGUF type statelm reads"},
    {G_OP_MATMUL, 0, TGT_OK, CPU_REF " dequantises rows of every GGUF type statelm reads"},
    {G_OP_ADD, 0, TGT_OK, CPU_REF},           {G_OP_MUL, 0, TGT_OK, CPU_REF},
    {G_OP_SCALE, 0, TGT_OK, CPU_REF},         {G_OP_SILU, 0, TGT_OK, CPU_REF},
    {G_OP_SIGMOID, 0, TGT_OK, CPU_REF},       {G_OP_SOFTPLUS, 0, TGT_OK, CPU_REF},
    {G_OP_EXP, 0, TGT_OK, CPU_REF},           {G_OP_SWIGLU, 0, TGT_OK, CPU_REF},
    {G_OP_GEGLU, 0, TGT_OK, CPU_REF},
    {G_OP_RMSNORM, 0, TGT_OK, CPU_REF},       {G_OP_L2NORM, 0, TGT_OK, CPU_REF},
    {G_OP_GATED_RMSNORM, 0, TGT_OK, CPU_REF}, {G_OP_ROPE, 0, TGT_OK, CPU_REF},
    {G_OP_ATTENTION, STATE_DTYPES_CPU_KV, TGT_OK, CPU_REF},
    {G_OP_CONV1D, 0, TGT_OK, CPU_REF},        {G_OP_DELTANET, 0, TGT_OK, CPU_REF},
    {G_OP_SLICE, 0, TGT_OK, CPU_REF},         {G_OP_CONCAT, 0, TGT_OK, CPU_REF},
    {G_OP_RESHAPE, 0, TGT_OK, "a view (no kernel)"},
    {G_OP_STATE_READ, STATE_DTYPES_CPU_KV, TGT_OK, "a view of the session's state buffer (no kernel)"},
    {G_OP_STATE_WRITE, STATE_DTYPES_CPU_KV, TGT_OK, CPU_REF},
    {G_OP_SUM, 0, TGT_OK, CPU_REF},           {G_OP_SELECT, 0, TGT_OK, CPU_REF},
    {G_OP_ONEHOT, 0, TGT_OK, CPU_REF},        {G_OP_MATMUL_T, 0, TGT_OK, CPU_REF},
    {G_OP_ROUND, 0, TGT_OK, CPU_REF},
};

static const tgt_state_rule cpu_rules[] = {
    {"cpu.state.dtype", TGT_STATE_DTYPE, TGT_REJECT, STATE_DTYPES_CPU_KV, SLM_DTYPE_F32, 0,
     "states are f32, f16 or bf16; KV caches also q8_0 or q4_0",
     "backend/cpu/kern_ref.c load_elem/store_elem, write_q_rows; backend/cpu/kern_attn_q.h", 0},
    {"cpu.write.declared", TGT_WRITE_DECLARED, TGT_REJECT, 0, SLM_DTYPE_F32, 0,
     "an in-place write goes into a declared state that the session binds", "runtime/session.c", 0},
};

/* ---- cuda ------------------------------------------------------------------------------------ */

#define NO_CUDA "no CUDA kernel: statelm has no CUDA backend yet (docs/architecture.md backend/cuda)"
static const tgt_op_rule cuda_ops[] = {
    {G_OP_EMBED, 0, TGT_FALLBACK, NO_CUDA},    {G_OP_MATMUL, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_ADD, 0, TGT_FALLBACK, NO_CUDA},      {G_OP_MUL, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_SCALE, 0, TGT_FALLBACK, NO_CUDA},    {G_OP_SILU, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_SIGMOID, 0, TGT_FALLBACK, NO_CUDA},  {G_OP_SOFTPLUS, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_EXP, 0, TGT_FALLBACK, NO_CUDA},      {G_OP_SWIGLU, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_GEGLU, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_RMSNORM, 0, TGT_FALLBACK, NO_CUDA},  {G_OP_L2NORM, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_GATED_RMSNORM, 0, TGT_FALLBACK, NO_CUDA}, {G_OP_ROPE, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_ATTENTION, 0, TGT_FALLBACK, NO_CUDA}, {G_OP_CONV1D, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_DELTANET, 0, TGT_FALLBACK, NO_CUDA}, {G_OP_SLICE, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_CONCAT, 0, TGT_FALLBACK, NO_CUDA},   {G_OP_RESHAPE, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_STATE_READ, 0, TGT_FALLBACK, NO_CUDA}, {G_OP_STATE_WRITE, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_SUM, 0, TGT_FALLBACK, NO_CUDA},      {G_OP_SELECT, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_ONEHOT, 0, TGT_FALLBACK, NO_CUDA},   {G_OP_MATMUL_T, 0, TGT_FALLBACK, NO_CUDA},
    {G_OP_ROUND, 0, TGT_FALLBACK, NO_CUDA},
};

static const tgt_state_rule cuda_rules[] = {
    {"cuda.state.dtype", TGT_STATE_DTYPE, TGT_REJECT, STATE_DTYPES_CPU, SLM_DTYPE_F32, 0,
     "states are f32, f16 or bf16", "docs/architecture.md backend/cuda: the same ops as the CPU", 0},
    {"cuda.write.declared", TGT_WRITE_DECLARED, TGT_REJECT, 0, SLM_DTYPE_F32, 0,
     "an in-place write goes into a declared state that the session binds", "runtime/session.c", 0},
};

/* ---- ane ------------------------------------------------------------------------------------- */

#define ANE_OP "an engine op (field report 3: the decode graph ran on the engine but for mask arithmetic)"
#define ANE_WEIGHTS (DT(F32) | DT(F16) | DT(BF16) | DT(Q8_0) | DT(Q4_0) | DT(Q4_1))
#define ANE_NO_WEIGHT \
    "no Core ML weight form for this GGUF block type (linear 8/4-bit blocks and f16 only); requantise to q4_0 or q8_0"
static const tgt_op_rule ane_ops[] = {
    {G_OP_EMBED, ANE_WEIGHTS, TGT_OK, ANE_OP},
    {G_OP_EMBED, 0, TGT_FALLBACK, ANE_NO_WEIGHT},
    {G_OP_MATMUL, ANE_WEIGHTS, TGT_OK, ANE_OP " (field report 1: 4-bit weights lower)"},
    {G_OP_MATMUL, 0, TGT_FALLBACK, ANE_NO_WEIGHT},
    {G_OP_ADD, 0, TGT_OK, ANE_OP},           {G_OP_MUL, 0, TGT_OK, ANE_OP},
    {G_OP_SCALE, 0, TGT_OK, ANE_OP},         {G_OP_SILU, 0, TGT_OK, ANE_OP},
    {G_OP_SIGMOID, 0, TGT_OK, ANE_OP},       {G_OP_SOFTPLUS, 0, TGT_OK, ANE_OP},
    {G_OP_EXP, 0, TGT_OK, ANE_OP},           {G_OP_SWIGLU, 0, TGT_OK, ANE_OP},
    {G_OP_GEGLU, 0, TGT_OK, ANE_OP},
    {G_OP_RMSNORM, 0, TGT_OK, ANE_OP},       {G_OP_L2NORM, 0, TGT_OK, ANE_OP},
    {G_OP_GATED_RMSNORM, 0, TGT_OK, ANE_OP}, {G_OP_ROPE, 0, TGT_OK, ANE_OP},
    {G_OP_ATTENTION, 0, TGT_OK, ANE_OP},     {G_OP_CONV1D, 0, TGT_OK, ANE_OP},
    {G_OP_DELTANET, 0, TGT_OK, ANE_OP},      {G_OP_SLICE, 0, TGT_OK, ANE_OP},
    {G_OP_CONCAT, 0, TGT_OK, ANE_OP},        {G_OP_RESHAPE, 0, TGT_OK, "a view (no op)"},
    {G_OP_STATE_READ, 0, TGT_OK, "reads a declared state (MLState)"},
    {G_OP_STATE_WRITE, 0, TGT_OK, "writes a declared state (MLState) under the state rules"},
    {G_OP_SUM, 0, TGT_OK, ANE_OP},           {G_OP_SELECT, 0, TGT_OK, ANE_OP},
    {G_OP_ONEHOT, 0, TGT_FALLBACK,
     "position arithmetic (an index compared with pos) runs on the CPU: field report 3 found the mask "
     "arithmetic (select, greater_equal, gather, cast) there, 9 of 6756 ops"},
    {G_OP_MATMUL_T, 0, TGT_OK, ANE_OP},      {G_OP_ROUND, 0, TGT_OK, ANE_OP},
};

static const tgt_state_rule ane_rules[] = {
    {"ane.state.dtype", TGT_STATE_DTYPE, TGT_REJECT, DT(F16), SLM_DTYPE_F16, 0,
     "states are f16", "Core ML states (MLState) on the engine; field reports 2–3", 0},
    {"ane.state.static_shape", TGT_STATE_STATIC_SHAPE, TGT_REJECT, 0, SLM_DTYPE_F16, 0,
     "states have static shapes", "Core ML states; field report 3", 0},
    {"ane.state.align", TGT_STATE_ALIGN, TGT_REJECT, 0, SLM_DTYPE_F16, 32,
     "a state's innermost dimension is a multiple of 32", "engine tensor layout (64-byte rows of f16)", 0},
    {"ane.state.max_extent", TGT_STATE_MAX_EXTENT, TGT_FALLBACK, 0, SLM_DTYPE_F16, 0,
     "no axis of a state holds more than 16384 elements",
     "practitioner field guides (Apple documents no limit): the engine takes tensors of fewer than 16K elements "
     "per dimension, larger ones run elsewhere",
     16384},
    {"ane.write.declared", TGT_WRITE_DECLARED, TGT_REJECT, 0, SLM_DTYPE_F16, 0,
     "an in-place write into a slice of a buffer goes into a declared state that the runtime binds",
     "field report 2: an undeclared sliced buffer became an unbound state (\"must be an MLState\")", 0},
    {"ane.write.full_extent", TGT_WRITE_FULL_EXTENT, TGT_REJECT, 0, SLM_DTYPE_F16, 0,
     "a state write may not cover the full extent of its state along the written axis",
     "field reports 1 and 3: ANECCompile() FAILED / E5RT (11) at N rows, builds at N + 1", 0},
    {"ane.write.one_per_function", TGT_WRITE_ONE_PER_FN, TGT_FALLBACK, 0, SLM_DTYPE_F16, 0,
     "at most one write into a state per function",
     "field report 3: two slice_updates into one state silently run on the CPU/GPU", 0},
    {"ane.write.static_begin", TGT_WRITE_STATIC_BEGIN, TGT_FALLBACK, 0, SLM_DTYPE_F16, 0,
     "a state write's begin may not depend on data",
     "field report 3: a write at a data-dependent begin silently runs on the CPU/GPU", 0},
};

/* ---- the profiles ----------------------------------------------------------------------------- */

/* The CPU backend's fused jobs (backend_vtable exec_matmul_group, exec_conv_step) and values
 * computed straight into a state's back buffer. The ANE leaves fusion to the Core ML compiler;
 * there is no CUDA backend to fuse for. */
static const char *const cpu_fusions[] = {"direct_write", "conv_step", "matmul_group"};

#define N(a) (int32_t)(sizeof(a) / sizeof((a)[0]))
static const tgt_profile profiles[] = {
    {"cpu", "statelm's CPU backend", {"cpu", 50e9, 20e9}, {"cpu", 50e9, 20e9}, true, NULL, "cpu", cpu_fusions,
     N(cpu_fusions), cpu_ops, N(cpu_ops), cpu_rules, N(cpu_rules), SLM_DTYPE_F32},
    {"cuda", "statelm's CUDA backend (not written yet: everything falls back to the CPU)", {"cuda", 60e12, 3e12},
     {"cpu", 50e9, 20e9}, false, "statelm has no CUDA backend yet", NULL, NULL, 0, cuda_ops, N(cuda_ops), cuda_rules,
     N(cuda_rules), SLM_DTYPE_F32},
    {"ane", "Apple Neural Engine through Core ML (rules from the field reports)", {"ane", 15e12, 60e9},
     {"cpu", 50e9, 20e9}, false, "the Neural Engine is not on this machine: plans are simulated on the CPU", NULL,
     NULL, 0, ane_ops, N(ane_ops), ane_rules, N(ane_rules), SLM_DTYPE_F16},
};

int32_t tgt_count(void) { return N(profiles); }

const tgt_profile *tgt_at(int32_t i) { return i >= 0 && i < N(profiles) ? &profiles[i] : NULL; }

const tgt_profile *tgt_find(const char *name) {
    for (int32_t i = 0; name && i < N(profiles); i++)
        if (strcmp(profiles[i].name, name) == 0) return &profiles[i];
    return NULL;
}

const tgt_op_rule *tgt_op_lookup(const tgt_profile *t, g_op op, uint32_t dtype) {
    for (int32_t i = 0; i < t->n_ops; i++) {
        const tgt_op_rule *r = &t->ops[i];
        if (r->op == op && (r->dtypes == 0 || (dtype < 64 && ((r->dtypes >> dtype) & 1)))) return r;
    }
    return NULL;
}

uint32_t tgt_node_dtype(const g_program *p, const g_node *nd) {
    switch (nd->op) {
    case G_OP_EMBED:
    case G_OP_MATMUL: return p->tensors[nd->in[0]].dtype;
    case G_OP_STATE_READ: return p->states[nd->p.read.state].dtype;
    case G_OP_STATE_WRITE: return p->states[nd->p.write.state].dtype;
    case G_OP_ATTENTION: return p->tensors[nd->in[1]].dtype;
    default: return SLM_DTYPE_F32;
    }
}

const tgt_state_rule *tgt_rule(const tgt_profile *t, tgt_rule_kind kind) {
    for (int32_t i = 0; i < t->n_rules; i++)
        if (t->rules[i].kind == kind) return &t->rules[i];
    return NULL;
}

int32_t tgt_written_axis(const g_state *s) { return s->pos_axis >= 0 ? s->pos_axis : s->n_dims - 1; }
