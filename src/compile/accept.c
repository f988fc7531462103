/* accept.c — the accept plan (compile/plan.h, "the accept plan"): per double-buffered state, how
 * slm_session_accept rebuilds it after keeping part of a verify call, or why it replays instead.
 * Compiled from the legalised verify function and its lowered steps; the executor runs it
 * (runtime/session.c) without looking at the IR. */
#include <stdio.h>
#include <string.h>

#include "compile/plan.h"

const char *plan_rebuild_kind_name(plan_rebuild_kind k) {
    switch (k) {
    case PLAN_REBUILD_CONV_WINDOW: return "conv_window";
    case PLAN_REBUILD_RECURRENCE: return "recurrence";
    case PLAN_REBUILD_REPLAY: return "replay";
    }
    return "?";
}

/* Position in f of the node producing tensor t, or -1. */
static int32_t producer(const g_program *p, const g_function *f, int32_t t) {
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        for (int k = 0; k < nd->n_out; k++)
            if (nd->out[k] == t) return i;
    }
    return -1;
}

/* The state view of si that node nd reads as operand k, i.e. the state as the call found it. */
static bool reads_state(const g_program *p, const g_node *nd, int k, int32_t si) {
    return k < nd->n_in && p->tensors[nd->in[k]].storage == G_STATE_VIEW && p->tensors[nd->in[k]].src == si;
}

/* The first j columns of tensor t over a call are its first bytes: the token axis is the only
 * symbolic one and every axis above it has size 1. */
static bool prefix_columns(const g_program *p, int32_t t) {
    const g_tensor *x = &p->tensors[t];
    int d = -1;
    for (int k = 0; k < 4; k++)
        if ((x->n_mask >> k) & 1) {
            if (d >= 0) return false;
            d = k;
        }
    for (int k = d + 1; d >= 0 && k < 4; k++)
        if (x->ne[k] != 1) return false;
    return d >= 0;
}

/* An activation of the call that stays in the arena (a value computed in a state's back buffer or
 * only inside a fused step cannot be read after the call). */
static bool in_arena(const slm_plan *pl, int32_t t) {
    const g_program *p = pl->legal;
    while (p->tensors[t].storage == G_VIEW) t = p->tensors[t].src;
    return p->tensors[t].storage == G_ACTIVATION && pl->tensor_home[t] == PLAN_HOME_ARENA;
}

/* CONV_WINDOW when the state's one write stores SLICE(CONCAT(state, x) along axis 1, from n, K - 1
 * columns) at the origin; else false with r->detail saying why not. */
static bool conv_window(const slm_plan *pl, const g_function *f, int32_t at, plan_rebuild *r) {
    const g_program *p = pl->legal;
    const g_state *gs = &p->states[r->state];
    const g_node *sl = &p->nodes[f->nodes[at]];
    const g_affine *b = &sl->p.slice.begin;
    int32_t cat_at = producer(p, f, sl->in[0]);
    const g_node *cat = cat_at >= 0 ? &p->nodes[f->nodes[cat_at]] : NULL;
    if (!cat || cat->op != G_OP_CONCAT || cat->p.concat.axis != 1 || !reads_state(p, cat, 0, r->state) ||
        sl->p.slice.axis != 1 || b->base != 0 || !b->has_n || b->has_pos || b->mod) {
        snprintf(r->detail, sizeof r->detail, "its value is a SLICE that is not the last columns of CONCAT(state, x)");
        return false;
    }
    int32_t x = cat->in[1];
    const g_tensor *xt = &p->tensors[x];
    if (gs->n_dims != 2 || gs->ne[1] < 1 || gs->alloc_ne[0] != gs->ne[0] || gs->alloc_ne[1] != gs->ne[1] ||
        xt->dtype != gs->dtype || xt->ne[0] != gs->ne[0] || p->tensors[sl->out[0]].ne[1] != gs->ne[1]) {
        snprintf(r->detail, sizeof r->detail, "a conv window, but the state is padded, of another dtype than x, or not "
                                              "(C, K - 1)");
        return false;
    }
    if (!in_arena(pl, x) || !prefix_columns(p, x)) {
        snprintf(r->detail, sizeof r->detail, "its input %s does not stay in the arena as columns", xt->name);
        return false;
    }
    r->kind = PLAN_REBUILD_CONV_WINDOW;
    r->node = cat_at;
    r->operand[PLAN_ROLE_STATE] = cat->in[0];
    r->operand[PLAN_ROLE_X] = x;
    snprintf(r->detail, sizeof r->detail, "the last %lld columns of (state before ++ %s[:, :n_keep])",
             (long long)gs->ne[1], xt->name);
    return true;
}

/* RECURRENCE when the state's value is computed by a DELTANET in the state's back buffer
 * (direct_write: its one full static write) from the state as the call found it; else false with
 * r->detail saying why not. */
static bool recurrence(const slm_plan *pl, const g_function *f, int32_t at, int32_t value, plan_rebuild *r) {
    const g_program *p = pl->legal;
    const g_node *nd = &p->nodes[f->nodes[at]];
    const plan_step *ps = &pl->exec[pl->accept.fn].steps[pl->exec[pl->accept.fn].step_of[at]];
    if (nd->op != G_OP_DELTANET || nd->out[1] != value) {
        snprintf(r->detail, sizeof r->detail, "its value comes from %s, which no rebuild re-runs", g_op_name(nd->op));
        return false;
    }
    if (!reads_state(p, nd, 5, r->state)) {
        snprintf(r->detail, sizeof r->detail, "the DELTANET reads a converted copy of the state, not the state itself");
        return false;
    }
    if (pl->tensor_state[value] != r->state || ps->kind != PLAN_STEP_NODE) {
        snprintf(r->detail, sizeof r->detail,
                 "the DELTANET's next state is not computed in its back buffer (direct_write)");
        return false;
    }
    for (int k = 0; k < 5; k++)
        if (!in_arena(pl, nd->in[k]) || !prefix_columns(p, nd->in[k])) {
            snprintf(r->detail, sizeof r->detail, "DELTANET input %s does not stay in the arena as columns",
                     p->tensors[nd->in[k]].name);
            return false;
        }
    r->kind = PLAN_REBUILD_RECURRENCE;
    r->node = at;
    r->kernel = ps->kernel;
    r->operand[PLAN_ROLE_STATE] = nd->in[5];
    r->operand[PLAN_ROLE_OUT] = nd->out[0];
    r->operand[PLAN_ROLE_NEXT] = value;
    snprintf(r->detail, sizeof r->detail,
             "DELTANET re-run over the kept columns of its inputs from the state before%s%s",
             ps->kernel_text[0] ? "; kernel: " : "", ps->kernel_text);
    return true;
}

/* The step of state si in function f (r->kind REPLAY with the reason when it cannot be rebuilt). */
static void plan_state(const slm_plan *pl, const g_function *f, int32_t si, plan_rebuild *r) {
    const g_program *p = pl->legal;
    memset(r, 0, sizeof *r);
    r->kind = PLAN_REBUILD_REPLAY;
    r->state = si;
    r->node = -1;
    for (int r2 = 0; r2 < PLAN_N_ROLES; r2++) r->operand[r2] = -1;
    int32_t writes = 0, w_at = -1;
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        if (nd->op == G_OP_STATE_WRITE && nd->p.write.state == si) writes++, w_at = i;
    }
    if (writes != 1) {
        snprintf(r->detail, sizeof r->detail, "%s writes it %d times (a rebuild needs one write)", f->name, writes);
        return;
    }
    const g_node *w = &p->nodes[f->nodes[w_at]];
    bool origin = true;
    for (int d = 0; d < 4; d++) {
        const g_affine *b = &w->p.write.begin[d];
        origin &= b->base == 0 && !b->has_n && !b->has_pos;
    }
    int32_t value = w->in[0], at = producer(p, f, value);
    if (!origin || at < 0 || at > w_at) {
        snprintf(r->detail, sizeof r->detail, "its write is not of a value computed before it, at the origin");
        return;
    }
    if (p->nodes[f->nodes[at]].op == G_OP_SLICE) (void)conv_window(pl, f, at, r);
    else (void)recurrence(pl, f, at, value, r);
}

slm_status accept_plan(slm_plan *pl, slm_err *e) {
    const g_program *p = pl->legal;
    plan_accept *a = &pl->accept;
    a->fn = graph_find_function(p, "verify");
    if (!(a->keep = al_calloc(&pl->alloc, (size_t)p->n_tensors + 1, 1)) ||
        !(a->steps = al_calloc(&pl->alloc, (size_t)p->n_states + 1, sizeof(plan_rebuild))))
        return err_set(e, SLM_ERR_NOMEM, "out of memory planning the accept");
    if (a->fn < 0) return SLM_OK;
    const g_function *f = &p->functions[a->fn];
    for (int32_t si = 0; si < p->n_states; si++) {
        if (!plan_state_double_buffered(&p->states[si])) continue;
        plan_rebuild *r = &a->steps[a->n_steps++];
        plan_state(pl, f, si, r);
        a->replay |= r->kind == PLAN_REBUILD_REPLAY;
    }
    for (int32_t i = 0; i < a->n_steps && !a->replay; i++) {
        const plan_rebuild *r = &a->steps[i];
        if (r->kind == PLAN_REBUILD_CONV_WINDOW) a->keep[r->operand[PLAN_ROLE_X]] = 1;
        const g_node *nd = &p->nodes[f->nodes[r->node]];
        for (int k = 0; r->kind == PLAN_REBUILD_RECURRENCE && k < nd->n_in; k++)
            if (nd->in[k] != r->operand[PLAN_ROLE_STATE]) a->keep[nd->in[k]] = 1;
    }
    return SLM_OK;
}
