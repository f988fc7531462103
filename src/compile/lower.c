/* lower.c — lowering a legalised Program into the executable plan (compile/plan.h, "the executable
 * plan"): one step per IR node, then the target's fusion passes in the profile's order, then a
 * backend kernel per step and the activation memory of each function at the plan's token count.
 *
 * The fusion passes, each giving the bits of the nodes it replaces:
 *  direct_write  a value whose only use is its function's one full, static write of a
 *                double-buffered f32 state is computed in the state's back buffer; the write
 *                becomes a COMMIT step that makes the back buffer current and copies nothing (the
 *                DeltaNet state: 18 MiB a token on Qwen3.5-0.8B). The back buffer becomes current
 *                only at the write's own position, so reads in between still see the old state.
 *  conv_step     at consecutive steps
 *                  xc = CONCAT(state_read(s), x) along axis 1        (C, K - 1 + n)
 *                  SLICE(xc, axis 1, [n, n + K - 1)) computed into s (direct_write)
 *                  COMMIT of s
 *                  y = CONV1D(xc, w)                                   (C, n)
 *                  SILU(y), taken in when y has no other use
 *                with xc read by the SLICE and the CONV1D only: one backend job
 *                (exec_conv_step) that never materialises xc.
 *  matmul_group  the MATMULs of one layer that read the same activations, with nothing between
 *                them but RESHAPEs (views: LFM2 and Qwen3.5 reshape q and k between their
 *                projections), as one backend job (exec_matmul_group); the RESHAPEs follow it.
 * conv_step and matmul_group need the backend to take the job (backend_vtable takes_*), asked at
 * the largest token count the function runs with; without a backend they are not applied.
 *
 * After the steps of every function: the accept plan (compile/accept.c, whose steps read
 * activations of the verify call that its memory plan then keeps to the end), and the activation
 * memory of each function.
 *
 * Batched steps (plan_step.batched, only in a symbolic function with logits for every column,
 * "verify", the function slm_session_decode_batch runs): a step whose nodes are column-local
 * ops (EMBED, MATMUL, elementwise, norms, RESHAPE) on weights and on activations laid out as
 * columns (the token axis is the outermost axis, of size n) gives column j from column j of its
 * inputs alone, so one call over the columns of several sessions equals one call per session
 * (runtime/batch.c). Everything else (states, ROPE, ATTENTION, conv, DELTANET, ONEHOT, SLICE,
 * CONCAT, SUM, SELECT) runs per session. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "compile/memplan.h"
#include "compile/plan.h"

typedef struct lower_ctx {
    slm_plan *pl;
    const g_program *p;
    backend *be;
    const g_function *f;
    plan_fn_exec *x;
    int64_t n_max;  /* tokens of the largest call of the function */
    int32_t *uses;  /* (n_tensors) consumers of each tensor in the function */
} lower_ctx;

static const g_node *step_node(const lower_ctx *c, const plan_step *s, int32_t k) {
    return &c->p->nodes[c->f->nodes[s->nodes[k]]];
}

static void view_of(const g_program *p, int32_t t, int64_t n, be_view *v) {
    const g_tensor *gt = &p->tensors[t];
    v->dtype = gt->dtype;
    v->n_dims = gt->n_dims;
    for (int d = 0; d < 4; d++) v->ne[d] = g_ne(gt, d, n);
    v->data = NULL;
}

/* The views exec gets for nd over n tokens (STATE_WRITE: the state's storage as out[0]). */
static void node_views(const g_program *p, const g_node *nd, int64_t n, be_view *out, be_view *in) {
    for (int k = 0; k < nd->n_in; k++) view_of(p, nd->in[k], n, &in[k]);
    if (nd->op == G_OP_STATE_WRITE) {
        const g_state *gs = &p->states[nd->p.write.state];
        out[0].dtype = gs->dtype;
        out[0].n_dims = gs->n_dims;
        for (int d = 0; d < 4; d++) out[0].ne[d] = gs->alloc_ne[d];
        out[0].data = NULL;
        return;
    }
    for (int k = 0; k < nd->n_out; k++) view_of(p, nd->out[k], n, &out[k]);
}

/* A step of kind made by pass (NULL: none) that binds no state and has no operand roles yet. */
static plan_step new_step(plan_step_kind kind, const char *pass) {
    plan_step m = {.kind = kind, .pass = pass, .state = -1, .layer = -1};
    for (int r = 0; r < PLAN_N_ROLES; r++) m.operand[r] = -1;
    return m;
}

/* Replaces steps [i, i + span) by merged (which must already hold the nodes it stands for),
 * followed by the steps listed in keep[0, n_keep) (copied before the replacement). */
static void replace_steps(plan_fn_exec *x, int32_t i, int32_t span, const plan_step *merged, const plan_step *keep,
                          int32_t n_keep) {
    x->steps[i] = *merged;
    for (int32_t k = 0; k < n_keep; k++) x->steps[i + 1 + k] = keep[k];
    int32_t removed = span - 1 - n_keep;
    if (removed > 0) {
        memmove(&x->steps[i + 1 + n_keep], &x->steps[i + span], (size_t)(x->n_steps - i - span) * sizeof(plan_step));
        x->n_steps -= removed;
    }
}

/* ---- direct_write ------------------------------------------------------------------------------ */

static slm_status pass_direct_write(lower_ctx *c, slm_err *e) {
    (void)e;
    const g_program *p = c->p;
    for (int32_t i = 0; i < c->x->n_steps; i++) {
        plan_step *s = &c->x->steps[i];
        const g_node *w = step_node(c, s, 0);
        if (s->kind != PLAN_STEP_NODE || w->op != G_OP_STATE_WRITE) continue;
        int32_t si = w->p.write.state, t = w->in[0], writes = 0;
        const g_state *st = &p->states[si];
        const g_tensor *v = &p->tensors[t];
        if (!plan_state_double_buffered(st) || st->dtype != SLM_DTYPE_F32 || v->storage != G_ACTIVATION || v->n_mask ||
            c->uses[t] != 1 || t == c->f->logits)
            continue;
        bool whole = true;
        for (int d = 0; d < 4; d++) {
            const g_affine *b = &w->p.write.begin[d];
            whole &= b->base == 0 && !b->has_n && !b->has_pos && v->ne[d] == st->ne[d];
            whole &= d == st->n_dims - 1 || st->alloc_ne[d] == st->ne[d]; /* logical = prefix */
        }
        for (int32_t j = 0; j < c->f->n_nodes; j++) {
            const g_node *nd = &p->nodes[c->f->nodes[j]];
            writes += nd->op == G_OP_STATE_WRITE && nd->p.write.state == si;
        }
        if (!whole || writes != 1) continue;
        c->pl->tensor_home[t] = PLAN_HOME_STATE;
        c->pl->tensor_state[t] = si;
        s->kind = PLAN_STEP_COMMIT;
        s->pass = "direct_write";
    }
    return SLM_OK;
}

/* ---- conv_step --------------------------------------------------------------------------------- */

static slm_status pass_conv_step(lower_ctx *c, slm_err *e) {
    (void)e;
    const g_program *p = c->p;
    plan_fn_exec *x = c->x;
    if (!c->be || !c->be->vt->takes_conv_step || !c->be->vt->exec_conv_step) return SLM_OK;
    for (int32_t i = 0; i + 3 < x->n_steps; i++) {
        const plan_step *s = &x->steps[i];
        if (s[0].kind != PLAN_STEP_NODE || s[1].kind != PLAN_STEP_NODE || s[2].kind != PLAN_STEP_COMMIT ||
            s[3].kind != PLAN_STEP_NODE)
            continue;
        const g_node *cat = step_node(c, &s[0], 0), *sl = step_node(c, &s[1], 0), *wr = step_node(c, &s[2], 0),
                     *cv = step_node(c, &s[3], 0);
        if (cat->op != G_OP_CONCAT || cat->p.concat.axis != 1) continue;
        const g_tensor *st = &p->tensors[cat->in[0]];
        int32_t xc = cat->out[0], si = st->src;
        if (st->storage != G_STATE_VIEW || st->n_dims != 2 || c->uses[xc] != 2 || xc == c->f->logits) continue;
        const g_affine *begin = &sl->p.slice.begin;
        if (sl->op != G_OP_SLICE || sl->in[0] != xc || sl->p.slice.axis != 1 || begin->base != 0 || !begin->has_n ||
            begin->has_pos || c->pl->tensor_state[sl->out[0]] != si)
            continue;
        if (wr->op != G_OP_STATE_WRITE || wr->in[0] != sl->out[0] || wr->p.write.state != si) continue;
        if (cv->op != G_OP_CONV1D || cv->in[0] != xc || p->tensors[cv->in[1]].ne[0] != st->ne[1] + 1) continue;
        int32_t span = 4, last = cv->out[0];
        if (i + 4 < x->n_steps && s[4].kind == PLAN_STEP_NODE) {
            const g_node *act = step_node(c, &s[4], 0);
            if (act->op == G_OP_SILU && act->in[0] == cv->out[0] && c->uses[cv->out[0]] == 1 &&
                cv->out[0] != c->f->logits) {
                span = 5;
                last = act->out[0];
            }
        }
        be_view in[3], out[2];
        view_of(p, cat->in[0], c->n_max, &in[0]);
        view_of(p, cat->in[1], c->n_max, &in[1]);
        view_of(p, cv->in[1], c->n_max, &in[2]);
        view_of(p, last, c->n_max, &out[0]);
        view_of(p, sl->out[0], c->n_max, &out[1]);
        plan_step m = new_step(PLAN_STEP_CONV_STEP, "conv_step");
        m.n_nodes = span;
        m.state = si;
        m.silu = span == 5;
        if (!c->be->vt->takes_conv_step(c->be, out, in, m.silu, m.kernel_text, sizeof m.kernel_text)) continue;
        for (int32_t k = 0; k < span; k++) m.nodes[k] = s[k].nodes[0];
        m.operand[PLAN_ROLE_STATE] = cat->in[0];
        m.operand[PLAN_ROLE_X] = cat->in[1];
        m.operand[PLAN_ROLE_WEIGHT] = cv->in[1];
        m.operand[PLAN_ROLE_OUT] = last;
        m.operand[PLAN_ROLE_NEXT] = sl->out[0];
        c->pl->tensor_home[xc] = PLAN_HOME_FUSED;
        if (span == 5) c->pl->tensor_home[cv->out[0]] = PLAN_HOME_FUSED;
        replace_steps(x, i, span, &m, NULL, 0);
    }
    return SLM_OK;
}

/* ---- matmul_group ------------------------------------------------------------------------------ */

static slm_status pass_matmul_group(lower_ctx *c, slm_err *e) {
    (void)e;
    const g_program *p = c->p;
    plan_fn_exec *x = c->x;
    if (!c->be || !c->be->vt->takes_matmul_group || !c->be->vt->exec_matmul_group) return SLM_OK;
    for (int32_t i = 0; i < x->n_steps; i++) {
        if (x->steps[i].kind != PLAN_STEP_NODE) continue;
        const g_node *first = step_node(c, &x->steps[i], 0);
        if (first->op != G_OP_MATMUL) continue;
        plan_step m = new_step(PLAN_STEP_MATMUL_GROUP, "matmul_group"), views[PLAN_STEP_MAX_NODES];
        int32_t n_views = 0, span = 1;
        m.nodes[m.n_nodes++] = x->steps[i].nodes[0];
        for (int32_t j = i + 1; m.n_nodes < PLAN_STEP_MAX_NODES && j < x->n_steps; j++) {
            const plan_step *s = &x->steps[j];
            const g_node *nd = step_node(c, s, 0);
            if (s->kind == PLAN_STEP_VIEW && nd->op == G_OP_RESHAPE && n_views < PLAN_STEP_MAX_NODES) {
                views[n_views++] = *s;
                continue;
            }
            if (s->kind != PLAN_STEP_NODE || nd->op != G_OP_MATMUL || nd->layer != first->layer ||
                nd->in[1] != first->in[1])
                break;
            m.nodes[m.n_nodes++] = s->nodes[0];
            span = j - i + 1;
        }
        if (m.n_nodes < 2) continue;
        while (n_views > 0 && views[n_views - 1].nodes[0] > x->steps[i + span - 1].nodes[0])
            n_views--; /* RESHAPEs after the last member stay where they are */
        be_view out[PLAN_STEP_MAX_NODES], in[2 * PLAN_STEP_MAX_NODES];
        for (int32_t k = 0; k < m.n_nodes; k++) {
            const g_node *nd = step_node(c, &m, k);
            view_of(p, nd->in[0], c->n_max, &in[2 * k]);
            view_of(p, nd->in[1], c->n_max, &in[2 * k + 1]);
            view_of(p, nd->out[0], c->n_max, &out[k]);
        }
        if (!c->be->vt->takes_matmul_group(c->be, m.n_nodes, out, in, m.kernel_text, sizeof m.kernel_text)) continue;
        replace_steps(x, i, span, &m, views, n_views);
        i += n_views;
    }
    return SLM_OK;
}

/* ---- lowering ---------------------------------------------------------------------------------- */

typedef slm_status (*lower_pass_fn)(lower_ctx *c, slm_err *e);

static const struct {
    const char *name;
    lower_pass_fn run;
} lower_passes[] = {
    {"direct_write", pass_direct_write},
    {"conv_step", pass_conv_step},
    {"matmul_group", pass_matmul_group},
};

static lower_pass_fn find_pass(const char *name) {
    for (size_t i = 0; i < sizeof lower_passes / sizeof lower_passes[0]; i++)
        if (strcmp(lower_passes[i].name, name) == 0) return lower_passes[i].run;
    return NULL;
}

static void choose_kernels(lower_ctx *c) {
    for (int32_t i = 0; i < c->x->n_steps; i++) {
        plan_step *s = &c->x->steps[i];
        const g_node *nd = step_node(c, s, 0);
        switch (s->kind) {
        case PLAN_STEP_VIEW:
            snprintf(s->kernel_text, sizeof s->kernel_text, "view");
            break;
        case PLAN_STEP_COMMIT:
            snprintf(s->kernel_text, sizeof s->kernel_text, "in place: makes the back buffer current");
            break;
        case PLAN_STEP_NODE:
            if (c->be && c->be->vt->select_kernel) {
                be_view out[G_MAX_OUT], in[G_MAX_IN];
                node_views(c->p, nd, c->n_max, out, in);
                s->kernel = c->be->vt->select_kernel(c->be, nd, out, in, s->kernel_text, sizeof s->kernel_text);
            }
            break;
        default: break; /* fused steps: the pass wrote what the backend runs */
        }
    }
}

/* Tensor t holds one column per token contiguously: its only symbolic axis d has size n, every axis
 * above d has size 1, and d > 0 unless it holds token ids. Views are judged with their source. */
static bool column_laid(const g_program *p, int32_t t) {
    for (int32_t hop = 0; hop < 8; hop++) {
        const g_tensor *gt = &p->tensors[t];
        if (gt->storage == G_WEIGHT) return true;
        if (gt->storage != G_ACTIVATION && gt->storage != G_INPUT && gt->storage != G_VIEW) return false;
        int d = -1;
        for (int k = 0; k < 4; k++)
            if ((gt->n_mask >> k) & 1) {
                if (d >= 0) return false;
                d = k;
            }
        if (d < 0 || gt->ne[d] != 0 || (d == 0 && gt->dtype != SLM_DTYPE_I32)) return false;
        for (int k = d + 1; k < 4; k++)
            if (gt->ne[k] != 1) return false;
        if (gt->storage != G_VIEW) return true;
        t = gt->src;
    }
    return false;
}

static bool op_column_local(g_op op) {
    switch (op) {
    case G_OP_EMBED: case G_OP_MATMUL: case G_OP_ADD: case G_OP_MUL: case G_OP_SCALE: case G_OP_SILU:
    case G_OP_SIGMOID: case G_OP_SOFTPLUS: case G_OP_EXP: case G_OP_SWIGLU: case G_OP_GEGLU: case G_OP_RMSNORM:
    case G_OP_L2NORM: case G_OP_GATED_RMSNORM: case G_OP_ROUND: case G_OP_RESHAPE: return true;
    default: return false;
    }
}

static void mark_batched(lower_ctx *c) {
    const g_program *p = c->p;
    /* the function slm_session_decode_batch runs: symbolic, logits for every column ("verify") */
    bool per_column = c->f->symbolic_n && c->f->logits >= 0 && ((p->tensors[c->f->logits].n_mask >> 1) & 1);
    for (int32_t i = 0; i < c->x->n_steps; i++) {
        plan_step *ps = &c->x->steps[i];
        bool ok = per_column && (ps->kind == PLAN_STEP_NODE || ps->kind == PLAN_STEP_MATMUL_GROUP ||
                                       ps->kind == PLAN_STEP_VIEW);
        for (int32_t k = 0; k < ps->n_nodes && ok; k++) {
            const g_node *nd = step_node(c, ps, k);
            ok = op_column_local(nd->op);
            for (int j = 0; j < nd->n_in && ok; j++) ok = column_laid(p, nd->in[j]);
            for (int j = 0; j < nd->n_out && ok; j++) /* in the arena: not a state's back buffer */
                ok = column_laid(p, nd->out[j]) && c->pl->tensor_home[nd->out[j]] == PLAN_HOME_ARENA;
        }
        ps->batched = ok;
    }
}

/* The tensor a view stands for (views follow their source). */
static int32_t root_of(const g_program *p, int32_t t) {
    while (p->tensors[t].storage == G_VIEW) t = p->tensors[t].src;
    return t;
}

/* Appends t to list[0, *n) unless it is there (a step reads a tensor once however many of its nodes do). */
static void add_unique(int32_t *list, int32_t first, int32_t *n, int32_t t) {
    for (int32_t k = first; k < *n; k++)
        if (list[k] == t) return;
    list[(*n)++] = t;
}

/* The arena crossings of a function with batched steps (plan_step.cross): a root tensor made by a
 * batched step (or the token input) lives in the batch arena, so a per-session step that reads it
 * copies its session's column in first; one a batched step reads is copied back from each
 * session's arena after the per-session step that makes it. The layer of every step, too. */
static slm_status batch_crossings(lower_ctx *c, slm_err *e) {
    const g_program *p = c->p;
    plan_fn_exec *x = c->x;
    bool any = false;
    for (int32_t i = 0; i < x->n_steps; i++) {
        x->steps[i].layer = step_node(c, &x->steps[i], 0)->layer;
        any = any || x->steps[i].batched;
    }
    if (!any) return SLM_OK;
    uint8_t *made = al_calloc(&c->pl->alloc, 2 * (size_t)p->n_tensors + 1, 1);
    if (!made) return err_set(e, SLM_ERR_NOMEM, "out of memory lowering %s", c->f->name);
    uint8_t *read = made + p->n_tensors;
    made[c->f->tokens] = 1;
    int32_t n_max = 0; /* an upper bound of the crossings: every operand of every per-session step */
    for (int32_t i = 0; i < x->n_steps; i++) {
        const plan_step *ps = &x->steps[i];
        for (int32_t k = 0; k < ps->n_nodes; k++) {
            const g_node *nd = step_node(c, ps, k);
            if (!ps->batched) {
                n_max += nd->n_in + nd->n_out;
                continue;
            }
            for (int j = 0; j < nd->n_in; j++) read[root_of(p, nd->in[j])] = 1;
            for (int j = 0; j < nd->n_out; j++) made[root_of(p, nd->out[j])] = 1;
        }
    }
    x->logits_batched = c->f->logits >= 0 && made[c->f->logits];
    if (!(x->cross = al_array(&c->pl->alloc, (size_t)n_max + 1, sizeof(int32_t)))) {
        al_free(&c->pl->alloc, made);
        return err_set(e, SLM_ERR_NOMEM, "out of memory lowering %s", c->f->name);
    }
    int32_t n = 0;
    for (int32_t i = 0; i < x->n_steps; i++) {
        plan_step *ps = &x->steps[i];
        ps->cross = n;
        if (ps->batched) continue;
        for (int32_t k = 0; k < ps->n_nodes; k++) {
            const g_node *nd = step_node(c, ps, k);
            for (int j = 0; j < nd->n_in; j++)
                if (made[root_of(p, nd->in[j])]) add_unique(x->cross, ps->cross, &n, root_of(p, nd->in[j]));
        }
        ps->n_cross_in = n - ps->cross;
        int32_t out_first = n;
        for (int32_t k = 0; k < ps->n_nodes; k++) {
            const g_node *nd = step_node(c, ps, k);
            for (int j = 0; j < nd->n_out; j++)
                if (read[root_of(p, nd->out[j])]) add_unique(x->cross, out_first, &n, root_of(p, nd->out[j]));
        }
        ps->n_cross_out = n - out_first;
    }
    x->n_cross = n;
    al_free(&c->pl->alloc, made);
    return SLM_OK;
}

static slm_status lower_function(slm_plan *pl, backend *be, int32_t fn, slm_err *e) {
    const g_program *p = pl->legal;
    const g_function *f = &p->functions[fn];
    plan_fn_exec *x = &pl->exec[fn];
    lower_ctx c = {pl, p, be, f, x, f->symbolic_n ? pl->n_ctx : f->fixed_n, NULL};
    x->steps = al_calloc(&pl->alloc, (size_t)f->n_nodes + 1, sizeof(plan_step));
    x->step_of = al_calloc(&pl->alloc, (size_t)f->n_nodes + 1, sizeof(int32_t));
    c.uses = al_calloc(&pl->alloc, (size_t)p->n_tensors + 1, sizeof(int32_t));
    if (!x->steps || !x->step_of || !c.uses) {
        al_free(&pl->alloc, c.uses);
        return err_set(e, SLM_ERR_NOMEM, "out of memory lowering %s", f->name);
    }
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        for (int k = 0; k < nd->n_in; k++) c.uses[nd->in[k]]++;
        plan_step *s = &x->steps[i];
        *s = new_step(nd->op == G_OP_RESHAPE || nd->op == G_OP_STATE_READ ? PLAN_STEP_VIEW : PLAN_STEP_NODE, NULL);
        s->n_nodes = 1;
        s->nodes[0] = i;
        s->state = nd->op == G_OP_STATE_READ ? nd->p.read.state : nd->op == G_OP_STATE_WRITE ? nd->p.write.state : -1;
        if (nd->op == G_OP_STATE_READ) s->operand[PLAN_ROLE_STATE] = nd->out[0];
    }
    x->n_steps = f->n_nodes;
    slm_status st = SLM_OK;
    for (int32_t k = 0; k < pl->target->n_fusions && !st; k++) {
        lower_pass_fn run = find_pass(pl->target->fusions[k]);
        st = run ? run(&c, e)
                 : err_set(e, SLM_ERR_UNSUPPORTED, "target %s names an unknown fusion pass %s", pl->target->name,
                           pl->target->fusions[k]);
    }
    al_free(&pl->alloc, c.uses);
    if (st) return st;
    choose_kernels(&c);
    mark_batched(&c);
    if ((st = batch_crossings(&c, e))) return st;
    for (int32_t i = 0; i < x->n_steps; i++)
        for (int32_t k = 0; k < x->steps[i].n_nodes; k++) x->step_of[x->steps[i].nodes[k]] = i;
    return SLM_OK;
}

slm_status plan_memplan(const slm_plan *pl, int32_t fn, int64_t n, memplan *mp, slm_err *e) {
    const uint8_t *keep = fn == pl->accept.fn ? pl->accept.keep : NULL;
    return memplan_build(pl->legal, fn, n, pl->exec[fn].step_of, pl->tensor_home, keep, mp, e);
}

/* What a session needs to know of the program's states and inputs, so that it matches no ops:
 * the valid token ids and the KV rings. */
static slm_status session_facts(slm_plan *pl, slm_err *e) {
    const g_program *p = pl->legal;
    if (!(pl->state_ring = al_calloc(&pl->alloc, (size_t)p->n_states + 1, 1)))
        return err_set(e, SLM_ERR_NOMEM, "out of memory lowering the plan");
    int32_t decode = graph_find_function(p, "decode");
    const g_function *f = decode >= 0 ? &p->functions[decode] : NULL;
    for (int32_t i = 0; f && i < f->n_nodes && !pl->n_token_ids; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        if (nd->op == G_OP_EMBED && nd->in[1] == f->tokens) pl->n_token_ids = (int32_t)p->tensors[nd->in[0]].ne[1];
    }
    for (int32_t n = 0; n < p->n_nodes; n++) {
        const g_node *nd = &p->nodes[n];
        if (nd->op != G_OP_ATTENTION || nd->p.attn.ring <= 0) continue;
        for (int k = 1; k < 3; k++) pl->state_ring[p->tensors[nd->in[k]].src] = 1;
    }
    return SLM_OK;
}

slm_status lower_plan(slm_plan *pl, backend *be, slm_err *e) {
    const g_program *p = pl->legal;
    pl->tensor_state = al_array(&pl->alloc, (size_t)p->n_tensors + 1, sizeof(int32_t));
    pl->tensor_home = al_calloc(&pl->alloc, (size_t)p->n_tensors + 1, 1);
    if (!pl->tensor_state || !pl->tensor_home) return err_set(e, SLM_ERR_NOMEM, "out of memory lowering the plan");
    for (int32_t t = 0; t < p->n_tensors; t++) pl->tensor_state[t] = -1;
    snprintf(pl->kernels, sizeof pl->kernels, "%s", be ? be->vt->kernels(be) : "");
    slm_status st = session_facts(pl, e);
    for (int32_t fn = 0; fn < p->n_functions && !st; fn++) st = lower_function(pl, be, fn, e);
    if (!st) st = accept_plan(pl, e);
    for (int32_t fn = 0; fn < p->n_functions && !st; fn++) {
        plan_fn_exec *x = &pl->exec[fn];
        memplan mp = {0};
        if ((st = plan_memplan(pl, fn, pl->fn_tokens[fn] > 0 ? pl->fn_tokens[fn] : 1, &mp, e))) break;
        x->arena_bytes = mp.arena_bytes;
        x->arena_offset = mp.offset; /* the plan keeps the offsets (allocated with p->alloc = pl->alloc) */
    }
    pl->lowered = st == SLM_OK;
    return st;
}
