/* plan.h — compiling a Program for a target (docs/architecture.md compile/): check (findings of the target's
 * rules, before anything is rewritten), legalize (a new Program with the known rewrites applied
 * and recorded), place (a device and a reason per node) and the compute plan (struct slm_plan, the
 * public handle: costs per node, state layouts and windows, totals per device, simulation).
 *
 * Invariants of a plan:
 *  1. orig is the Program as built; legal is a separate Program (orig is never modified), so both
 *     can run side by side (simulation).
 *  2. findings are about orig; residual are the same checks run on legal.
 *  3. Every node of legal has a device; a node not on the target's device has a non-empty reason.
 *  4. Every rewrite that changed legal is listed in rewrites, in the order applied. */
#ifndef SLM_COMPILE_PLAN_H
#define SLM_COMPILE_PLAN_H

#include "compile/target.h"

/* One rule broken by one node (fn >= 0) or by one state (fn = -1). */
typedef struct plan_finding {
    const char *rule;         /* rule id (static) */
    const char *rule_text;    /* the rule in words (static) */
    const char *source;       /* where it is known from (static) */
    tgt_effect effect;
    bool op_rule;             /* from the op table (else a state rule of kind `kind`) */
    tgt_rule_kind kind;
    int32_t fn;               /* function, -1 for state findings */
    int32_t index;            /* position of the node in the function, -1 for state findings */
    int32_t node;             /* node id, -1 for state findings */
    int32_t layer;            /* -1 if none */
    g_op op;
    int32_t state;            /* -1 when not about a state */
    char detail[256];         /* what exactly breaks the rule */
    char fix[256];            /* the rewrite statelm applies, or "none: ..." */
    bool fixed;               /* the legalised program no longer breaks it (set by plan) */
} plan_finding;

typedef struct plan_findings {
    plan_finding *v;
    int32_t n, cap;
} plan_findings;

/* Checks p against t. Appends to *out (caller frees out->v with p->alloc). SLM_ERR_NOMEM only. */
slm_status check_program(const g_program *p, const tgt_profile *t, plan_findings *out, slm_err *e);

/* A rewrite applied by legalize_program. */
typedef struct plan_rewrite {
    const char *pass;      /* "cast", "align", "merge", "static_window", "pad" (static) */
    int32_t fn;            /* -1 for state-level rewrites */
    int32_t state;
    char detail[256];
    char warning[256];     /* "" unless the rewrite changes numerics (precision) */
} plan_rewrite;

typedef struct plan_rewrites {
    plan_rewrite *v;
    int32_t n, cap;
} plan_rewrites;

/* Builds the legalised copy of p for t into *out (a new Program; p is not changed), recording
 * every rewrite in rw. Rewrites that cannot apply (e.g. a state that ATTENTION reads directly
 * cannot be padded along its innermost axis) are skipped: the rule stays broken and check on
 * *out reports it. On failure *out is NULL and rw may hold partial records. */
slm_status legalize_program(const g_program *p, const tgt_profile *t, g_program **out, plan_rewrites *rw, slm_err *e);

/* Per-node result of placement and costing (indexed by node id of the legalised program). */
typedef struct plan_node {
    const char *device;    /* static (profile) */
    char shapes[256];      /* "(out) <- (in), (in)" */
    char reason[320];      /* "" on the preferred device */
    double bytes, flops;   /* estimated per call (see plan.c for the cost model) */
    double cost;           /* roofline seconds on its device */
    double share;          /* of the function's total cost */
} plan_node;

/* Places every node of p (the legalised program) for t, given the residual findings on p. */
void place_program(const g_program *p, const tgt_profile *t, const plan_findings *residual, plan_node *nodes);

/* One write of the legalised program, with the target rules it keeps. */
typedef struct plan_write {
    int32_t state, fn, index;
    char window[160];
    char rules[320];
} plan_write;

/* Result of simulating a plan: greedy tokens of orig and legal over n_steps on the CPU. */
typedef struct plan_sim {
    bool ran;
    int32_t n_prompt, n_steps;
    bool identical;          /* every greedy token matched */
    int32_t first_diff;      /* step of the first differing token, -1 if none */
    int32_t token_orig, token_legal; /* at first_diff */
    bool logits_identical;   /* every logit of every step matched bit for bit */
    double max_abs_logit_diff;
} plan_sim;

struct slm_plan {
    slm_allocator alloc;
    const slm_model *model;   /* borrowed; NULL for programs built directly */
    const tgt_profile *target;
    int32_t n_ctx;
    slm_dtype kv_dtype;
    int32_t n_prefill;        /* tokens of the prefill call the costs assume */
    g_program *orig;
    g_program *legal;
    plan_findings findings;   /* on orig */
    plan_findings residual;   /* on legal */
    plan_rewrites rewrites;
    plan_node *nodes;         /* (legal->n_nodes) */
    int32_t fn_tokens[G_MAX_FUNCTIONS]; /* tokens per call the costs assume */
    plan_write *writes;       /* every STATE_WRITE of legal, by function then position */
    int32_t n_writes;
    plan_sim sim;
    slm_err err;
};

/* Compiles prog (owned by the plan from here on, also on failure) for target t. model may be
 * NULL; n_ctx and kv_dtype are what prog was built for (sessions for simulation use them). */
slm_status plan_create_program(const slm_model *model, g_program *prog, const tgt_profile *t, int32_t n_ctx,
                               slm_dtype kv_dtype, int32_t n_prefill, slm_plan **out, slm_err *e);

/* Runs orig and legal side by side on the CPU: prefill prompt[0, n_prompt), then n_steps greedy
 * tokens, each fed back to both; fills pl->sim. Stops at the first differing token. */
slm_status plan_simulate(slm_plan *pl, const int32_t *prompt, int32_t n_prompt, int32_t n_steps, int32_t n_threads,
                         slm_err *e);

/* True when STATE_WRITE nd of function fn covers the full (allocated) extent of its state along
 * the written axis; extents that depend on n count only in fixed-n functions. */
bool check_write_full_extent(const g_program *p, int32_t fn, const g_node *nd);
/* Writes into buf why casting state s to dtype `to` changes numbers ("" when it does not). */
void check_cast_note(const g_state *s, slm_dtype to, char *buf, size_t cap);

/* Text of an affine offset ("0", "pos", "pos+1", "n-1") into buf. */
void plan_affine_text(g_affine a, char *buf, size_t cap);
/* "[0,1024) x [pos,pos+n)" — the window of STATE_WRITE nd (innermost axis first). */
void plan_window_text(const g_program *p, const g_node *nd, char *buf, size_t cap);
/* "(1024, n+2)" — shape of tensor t, innermost first. */
void plan_shape_text(const g_tensor *t, char *buf, size_t cap);

#endif
