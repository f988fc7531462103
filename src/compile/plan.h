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

/* ---- the executable plan: what a session runs (compile/lower.c) --------------------------------
 * Lowering turns each function of the legalised program into steps, one per IR node, then runs the
 * target's fusion passes over them (tgt_profile.fusions), each replacing a pattern of steps by one
 * fused step that records its pass and the IR nodes it stands for; then it picks a backend kernel
 * for every step and plans the activation memory. A session runs the steps in order and nothing
 * else (runtime/session.c; after a partial accept, the accept plan's steps below), so the list a
 * plan prints is the list a session executes.
 *
 * Invariants:
 *  1. Every node of a function belongs to exactly one step of that function.
 *  2. Steps run in order; a step's inputs are produced by earlier steps (or are weights, states).
 *  3. A fused step gives the bits its nodes give one by one (each pass says why).
 *  4. tensor_state[t] >= 0 only for a value whose only use is its function's one full, static write
 *     of a double-buffered f32 state: it is computed in that state's back buffer, and the write is
 *     a COMMIT step (it makes the back buffer current, copying nothing). */
typedef enum plan_step_kind {
    PLAN_STEP_NODE = 0,      /* one IR node on the backend (exec) */
    PLAN_STEP_VIEW,          /* RESHAPE or STATE_READ: binds a view, runs nothing */
    PLAN_STEP_COMMIT,        /* direct_write: a STATE_WRITE whose value is already in the back buffer */
    PLAN_STEP_MATMUL_GROUP,  /* matmul_group: MATMULs reading the same activations, one backend job */
    PLAN_STEP_CONV_STEP      /* conv_step: CONCAT(state, x), SLICE, STATE_WRITE, CONV1D[, SILU], one job */
} plan_step_kind;

#define PLAN_STEP_MAX_NODES 8

/* The operands of a fused step (and of an accept step) by role: tensor ids of the legalised
 * program, set by the pass that made the step, -1 for a role the step does not have. The runtime
 * binds operands by role and never by their position in the nodes the step stands for. */
typedef enum plan_role {
    PLAN_ROLE_STATE = 0,  /* the state view the step reads: the state as the call found it */
    PLAN_ROLE_X,          /* conv: the call's new columns x (C, n) */
    PLAN_ROLE_WEIGHT,     /* conv: the filter (K, C) */
    PLAN_ROLE_OUT,        /* the step's output (conv_step: CONV1D's, or the SILU's after it) */
    PLAN_ROLE_NEXT,       /* the state's next value (computed in its back buffer) */
    PLAN_N_ROLES
} plan_role;

/* Where an activation lives during a call: the arena (memplan), the back buffer of
 * tensor_state[t], or nowhere (only inside a fused step). */
typedef enum plan_home { PLAN_HOME_ARENA = 0, PLAN_HOME_STATE = 1, PLAN_HOME_FUSED = 2 } plan_home;

/* Conv and recurrent states are double-buffered by sessions (runtime/session.h invariant 2). */
static inline bool plan_state_double_buffered(const g_state *s) {
    return s->role == SLM_STATE_CONV || s->role == SLM_STATE_RECURRENT;
}

typedef struct plan_step {
    plan_step_kind kind;
    const char *pass;       /* the fusion pass that made it (static), NULL for a plain node */
    int32_t n_nodes;
    int32_t nodes[PLAN_STEP_MAX_NODES]; /* positions in the function, ascending; nodes[0] names it */
    int32_t kernel;         /* be_call.kernel for NODE steps; 0 when the backend chooses or none runs */
    char kernel_text[80];   /* the kernel or job the backend runs ("" when not lowered for a backend) */
    bool batched;           /* in the function with logits per column ("verify"): column-local, touching no state and no position, so
                               slm_session_decode_batch runs it once over one column per session;
                               otherwise it runs per session on that session's states and position */
    int32_t state;          /* the state it binds (VIEW of a STATE_READ), writes (a STATE_WRITE NODE, COMMIT,
                               CONV_STEP), or -1 */
    int32_t operand[PLAN_N_ROLES]; /* by role: CONV_STEP all five; a VIEW of a state: STATE (the view) */
    bool silu;              /* CONV_STEP: SILU applied to the convolution (its OUT is the SILU's) */
    int32_t layer;          /* the layer of its first IR node (g_node.layer, -1: none): slm_session_decode_batch
                               runs consecutive per-session steps of one layer as one job */
    int32_t cross;          /* a per-session step of a function with batched steps: its arena crossings are
                               plan_fn_exec.cross[cross, cross + n_cross_in) (root tensors it reads that batched
                               steps make, or the token input: copied from the batch arena into each session's
                               before it runs) and the n_cross_out after them (root tensors it makes that
                               batched steps read: copied back after it); 0 and 0 for every other step */
    int32_t n_cross_in, n_cross_out;
} plan_step;

typedef struct plan_fn_exec {
    int32_t n_steps;
    plan_step *steps;
    int32_t *step_of;       /* (n_nodes of the function) the step each position belongs to */
    size_t arena_bytes;     /* activation arena of a call over the plan's tokens for this function */
    size_t *arena_offset;   /* (legal->n_tensors) each tensor's offset in that arena, or MEMPLAN_NONE */
    int32_t n_cross;        /* the arena crossings of its per-session steps (plan_step.cross), when some step is */
    int32_t *cross;         /* batched; 0 and NULL otherwise */
    bool logits_batched;    /* its logits are made by a batched step (they live in the batch arena) */
} plan_fn_exec;

/* ---- the accept plan: rebuilding states after a partial accept (compile/accept.c) ----------------
 * slm_session_accept(n_keep) after a verify of k tokens in one call of the verify function must
 * leave the session as if only the first n_keep had been decoded. KV states need nothing (rows past
 * the kept position are scratch); every double-buffered state (conv, recurrent) gets one accept
 * step that computes its value after the kept columns into its back buffer, from the states before
 * the verify (which that one call left in the back buffers: the step runs in place) and the verify
 * call's own activations, without the weights:
 *   CONV_WINDOW  the state is the last K - 1 columns of CONCAT(state, x) (the verify's SLICE): the
 *                last K - 1 columns of (state before ++ x[:, :n_keep])
 *   RECURRENCE   the state is the next-state output of one node (DELTANET) whose other inputs are
 *                column-wise: that node re-run over the kept columns, from the state before (its
 *                state input bound to its next-state output: backends take S_in == S)
 *   REPLAY       neither: accept restores the states before the verify and replays the kept tokens
 * A state that replays makes every state replay (accept either rebuilds all or replays), and so
 * does a verify split into several calls (more than max_call_tokens tokens) at run time; sessions
 * count replays (slm_spec_stats.n_replays). The activations the steps read (keep) live to the end
 * of a verify call (memplan), only when the plan rebuilds. The executor runs the steps in order
 * (runtime/session.c, sess_run_accept) and makes the back buffers current only when all succeeded. */
typedef enum plan_rebuild_kind {
    PLAN_REBUILD_CONV_WINDOW = 0,
    PLAN_REBUILD_RECURRENCE,
    PLAN_REBUILD_REPLAY
} plan_rebuild_kind;

/* The function id the executor's trace hook reports for accept steps. */
#define PLAN_FN_ACCEPT (-1)

typedef struct plan_rebuild {
    plan_rebuild_kind kind;
    int32_t state;
    int32_t node;           /* position in the verify function of the node whose operands it reads (CONV_WINDOW:
                               the CONCAT; RECURRENCE: the node it re-runs), -1 for REPLAY */
    int32_t kernel;         /* RECURRENCE: be_call.kernel of that node's step */
    int32_t operand[PLAN_N_ROLES]; /* CONV_WINDOW: STATE, X; RECURRENCE: STATE, OUT, NEXT (operands of the node) */
    char detail[224];       /* what it computes, or why the state replays */
} plan_rebuild;

typedef struct plan_accept {
    int32_t fn;             /* the verify function, -1 when the program has none (then no steps) */
    int32_t n_steps;        /* one per double-buffered state, in state order */
    plan_rebuild *steps;
    bool replay;            /* some step is REPLAY: accept replays the kept tokens for every state */
    uint8_t *keep;          /* (legal->n_tensors + 1) activations the steps read (none when replay) */
} plan_accept;

/* Compiles pl->accept from pl->legal and its lowered steps (lower_plan calls it before planning
 * memory). SLM_ERR_NOMEM only. */
slm_status accept_plan(slm_plan *pl, slm_err *e);
const char *plan_rebuild_kind_name(plan_rebuild_kind k);

/* Measured time per step (slm_plan_profile, runtime/profile.c). */
typedef struct plan_measure {
    bool ran;
    int32_t n_prompt, n_decode, n_reps;
    double *step_us[G_MAX_FUNCTIONS];   /* (exec[fn].n_steps) median microseconds per call */
    double call_us[G_MAX_FUNCTIONS];    /* median wall microseconds per call (kernels + executor) */
    int32_t calls[G_MAX_FUNCTIONS];     /* timed calls */
} plan_measure;

/* Result of simulating a plan: greedy tokens of orig and legal over n_steps on the CPU. */
typedef struct plan_sim {
    bool ran;
    int32_t n_prompt, n_steps;
    bool identical;          /* every greedy token matched */
    int32_t first_diff;      /* step of the first differing token, -1 if none */
    int32_t token_orig, token_legal; /* at first_diff */
    bool logits_identical;   /* every logit of every step matched bit for bit */
    double max_abs_logit_diff;
    /* The legalised program as the target's device computes it (target compute_dtype != F32):
     * every activation rounded to compute_dtype after the node producing it, every weight rounded
     * to f16 (the export's default --weights f16). Fed the original's greedy tokens, compared
     * with the original at every step of the run (not only up to first_diff). */
    bool device_ran;
    slm_dtype compute_dtype;
    int32_t device_n_steps;
    int32_t device_n_agree;          /* steps whose greedy token matched the original's */
    int32_t device_first_diff;       /* -1 if none */
    double device_max_abs_logit_diff;
} plan_sim;

struct slm_plan {
    slm_allocator alloc;
    const slm_model *model;   /* borrowed; NULL for programs built directly */
    const tgt_profile *target;
    int32_t n_ctx;
    slm_dtype kv_dtype;       /* the K states' dtype (F16, F32, Q8_0, Q4_0) */
    slm_dtype kv_dtype_v;     /* the V states' */
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
    /* the executable plan (lower_plan) */
    bool lowered;             /* steps exist (every target; kernels only with a backend) */
    char kernels[16];         /* the backend's kernel tier it was lowered for, "" without a backend */
    plan_fn_exec exec[G_MAX_FUNCTIONS];
    int32_t *tensor_state;    /* (legal->n_tensors) invariant 4, else -1 */
    uint8_t *tensor_home;     /* (legal->n_tensors) plan_home: where an activation lives */
    plan_accept accept;       /* after a partial accept of a verify call */
    int32_t n_token_ids;      /* valid token ids are [0, n): rows of the table the decode function embeds from */
    uint8_t *state_ring;      /* (legal->n_states + 1) a KV ring: a ring ATTENTION reads it (written at pos mod R) */
    plan_measure measure;
    slm_err err;
};

struct backend;
/* Lowers pl->legal into steps (fusion passes of pl->target), choosing kernels on be when given
 * (the backend a session runs or one made for the plan; NULL: no kernels, no backend-dependent
 * fusions), then compiles the accept plan (accept_plan) and plans each function's memory; also
 * fills n_token_ids and state_ring. Fusions a backend must take are asked of it at the largest
 * token count a function runs with (its fixed count; n_ctx for symbolic functions). */
slm_status lower_plan(slm_plan *pl, struct backend *be, slm_err *e);
/* A copy of pl's executable part (legal program, steps, accept plan, memory, target, context, tier) for a
 * session to own; findings, rewrites, orig and the per-node costs are not
 * copied (the copy serves execution, not the node accessors). NULL on OOM. */
slm_plan *plan_clone_exec(const slm_plan *pl);
/* The arena layout of function fn of pl for a call over n tokens (memplan_build on its steps). */
struct memplan;
slm_status plan_memplan(const slm_plan *pl, int32_t fn, int64_t n, struct memplan *mp, slm_err *e);

/* Compiles prog (owned by the plan from here on, also on failure) for target t and lowers it
 * (lower_plan on be; be may be NULL). model may be NULL; n_ctx and kv_dtype are what prog was
 * built for (sessions use them): the plan's K and V dtypes are those of prog's first kv_key and
 * kv_value states, kv_dtype for a role prog has no state of. */
slm_status plan_create_program(const slm_model *model, g_program *prog, const tgt_profile *t, int32_t n_ctx,
                               slm_dtype kv_dtype, int32_t n_prefill, struct backend *be, slm_plan **out, slm_err *e);

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
