/* target.h — target profiles as data: per op and dtype, whether a target runs a node and why not;
 * per state, the rules its writes and layouts must follow (compile/targets.c holds the tables).
 * check.c evaluates the tables against a Program, legalize.c applies the fixes the rules name, and
 * place.c reads the op table to give every node a device. No target-specific `if` lives anywhere
 * else: adding a target or a rule means adding rows here.
 *
 * Profiles: "cpu" (the reference backend), "cuda" (what the CUDA backend implements: nothing yet),
 * "ane" (the Apple Neural Engine rules known from the field reports; not executable here). */
#ifndef SLM_COMPILE_TARGET_H
#define SLM_COMPILE_TARGET_H

#include "graph/graph.h"

/* What a target does with a node or a state that breaks one of its rules. */
typedef enum tgt_effect {
    TGT_OK = 0,       /* runs on the target's device */
    TGT_FALLBACK = 1, /* runs elsewhere (on the real target: silently) */
    TGT_REJECT = 2    /* compilation for the target fails */
} tgt_effect;

const char *tgt_effect_name(tgt_effect e); /* "ok", "fallback", "reject" */

typedef enum tgt_rule_kind {
    TGT_STATE_DTYPE,        /* a state's dtype must be one of `dtypes`; fix: cast to cast_to */
    TGT_STATE_ALIGN,        /* a state's innermost axis (ne[0]) must be a multiple of `multiple` */
    TGT_STATE_STATIC_SHAPE, /* states have static shapes (every statelm state has) */
    TGT_WRITE_DECLARED,     /* an in-place write must go into a declared, bound state (every
                               statelm write does: STATE_WRITE is the only mutation in the IR) */
    TGT_WRITE_FULL_EXTENT,  /* a write may not cover the full extent of its state along the written
                               axis (pos_axis, or the outermost axis for states without one) */
    TGT_WRITE_ONE_PER_FN,   /* at most one write into a state per function */
    TGT_WRITE_STATIC_BEGIN, /* a write's begin may not depend on data (the position) */
    TGT_STATE_MAX_EXTENT    /* no axis of a state's allocated shape longer than `max_extent` */
} tgt_rule_kind;

typedef struct tgt_state_rule {
    const char *id;      /* stable name, e.g. "ane.write.full_extent" */
    tgt_rule_kind kind;
    tgt_effect effect;   /* what the target does with a program that breaks it */
    uint64_t dtypes;     /* TGT_STATE_DTYPE: allowed dtypes, bit (1 << slm_dtype) */
    slm_dtype cast_to;   /* TGT_STATE_DTYPE: what legalisation casts a state to */
    int64_t multiple;    /* TGT_STATE_ALIGN */
    const char *text;    /* the rule in words */
    const char *source;  /* where the rule is known from */
    int64_t max_extent;  /* TGT_STATE_MAX_EXTENT */
} tgt_state_rule;

/* One row of an op table: op with a (weight or state) operand of one of `dtypes` (0 = any). The
 * first matching row wins; an op with no matching row is not supported (falls back). */
typedef struct tgt_op_rule {
    g_op op;
    uint64_t dtypes;
    tgt_effect effect;
    const char *why;
} tgt_op_rule;

/* Nominal device figures: only used to split a plan's cost into shares (a roofline estimate per
 * node: max(flops / flops_per_s, bytes / bytes_per_s)); not a benchmark. */
typedef struct tgt_device {
    const char *name;
    double flops_per_s;
    double bytes_per_s;
} tgt_device;

typedef struct tgt_profile {
    const char *name;
    const char *summary;
    tgt_device device;          /* the preferred device */
    tgt_device fallback;        /* where nodes run that the device does not take */
    bool executable;            /* statelm can run a plan for this target on this machine */
    const char *executable_why; /* why not, when it cannot */
    const char *backend;        /* the backend (backend_kind_find) that runs its plans; NULL when none */
    const char *const *fusions; /* the fusion passes lowering applies, in order (compile/lower.c) */
    int32_t n_fusions;
    const tgt_op_rule *ops;
    int32_t n_ops;
    const tgt_state_rule *rules;
    int32_t n_rules;
    slm_dtype compute_dtype;    /* what the device computes activations in (F32 or F16); `plan --simulate`
                                   rounds every activation to it (runtime/simulate.c) */
} tgt_profile;

int32_t tgt_count(void);
const tgt_profile *tgt_at(int32_t i);
/* Profile by name, or NULL. */
const tgt_profile *tgt_find(const char *name);
/* The first row of t's op table matching op and dtype, or NULL when the target lacks the op. */
const tgt_op_rule *tgt_op_lookup(const tgt_profile *t, g_op op, uint32_t dtype);
/* The dtype an op table row is matched on for node nd: the weight of EMBED/MATMUL, the state of
 * STATE_READ/STATE_WRITE/ATTENTION, F32 (activations) otherwise. */
uint32_t tgt_node_dtype(const g_program *p, const g_node *nd);
/* The rule of the given kind in t, or NULL when t has none. */
const tgt_state_rule *tgt_rule(const tgt_profile *t, tgt_rule_kind kind);
/* The axis a state's writes move along: pos_axis, or the outermost axis without one. */
int32_t tgt_written_axis(const g_state *s);

#endif
