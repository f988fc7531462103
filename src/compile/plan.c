/* plan.c — the compute plan (struct slm_plan, compile/plan.h): runs check on the Program as
 * built, legalises it, checks the result again, places every node and estimates its cost; then
 * serves it through the public accessors and as JSON (src/compile/plan.schema.json).
 *
 * Cost model (estimates for shares, not measurements), per call of a function over n tokens
 * (prefill: n_prefill, decode: 1) at a full context (the call ends at position n_ctx):
 *   bytes  weights read in full (EMBED: the n rows it gathers), activations read and written
 *          (f32), state views at their dtype (ATTENTION: the keys/values up to the position;
 *          STATE_WRITE: the window written); views (RESHAPE, STATE_READ) move nothing.
 *   flops  MATMUL 2·k·m per column, ATTENTION 2·H·n·keys·(hd + hdv), CONV1D 2·K·C·n, DELTANET
 *          7·dk·dv per head and token, MATMUL_T 2·a·c·m, elementwise 1–4 per element.
 *   cost   max(flops / device flops/s, bytes / device bytes/s) with the profile's nominal figures;
 *          a node's share is its cost over the function's total. */
#include "compile/plan.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/dtype.h"
#include "base/params.h"
#include "compile/memplan.h"
#include "model/build.h"

SLM_API slm_plan_params slm_plan_params_default(void) {
    slm_plan_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    return p;
}

SLM_API int32_t slm_n_targets(void) { return tgt_count(); }
SLM_API const char *slm_target_name(int32_t i) { return tgt_at(i) ? tgt_at(i)->name : NULL; }
SLM_API const char *slm_plan_effect_name(slm_plan_effect effect) { return tgt_effect_name((tgt_effect)effect); }

/* ---- costs ------------------------------------------------------------------------------------ */

static double el_bytes(uint32_t dtype) {
    const dtype_traits *tr = dtype_traits_of(dtype); /* Q8_0/Q4_0 KV states: 34/32, 18/32 */
    return tr ? (double)tr->block_bytes / (double)tr->block_elems : 4.0;
}

static double tensor_bytes(const g_program *p, int32_t t, int64_t n) {
    const g_tensor *x = &p->tensors[t];
    if (x->storage == G_WEIGHT) return (double)x->size_bytes;
    if (x->storage == G_NONE) return 0.0;
    return (double)g_nelements(x, n) * el_bytes(x->dtype);
}

static void node_cost(const g_program *p, const g_node *nd, int64_t n, int64_t keys, double *bytes, double *flops) {
    const g_tensor *o = &p->tensors[nd->out[0]];
    double in_b = 0, out_b = 0, nel = (double)g_nelements(o, n);
    for (int k = 0; k < nd->n_in; k++) in_b += tensor_bytes(p, nd->in[k], n);
    for (int k = 0; k < nd->n_out; k++) out_b += tensor_bytes(p, nd->out[k], n);
    *flops = 0;
    switch (nd->op) {
    case G_OP_RESHAPE:
    case G_OP_STATE_READ: *bytes = 0; return;
    case G_OP_EMBED: {
        const g_tensor *w = &p->tensors[nd->in[0]];
        *bytes = (double)w->size_bytes / (double)w->ne[1] * (double)n + tensor_bytes(p, nd->in[1], n) + out_b;
        return;
    }
    case G_OP_MATMUL: {
        const g_tensor *w = &p->tensors[nd->in[0]];
        *bytes = in_b + out_b;
        *flops = 2.0 * (double)w->ne[0] * (double)w->ne[1] * (double)(g_nelements(o, n) / w->ne[1]);
        return;
    }
    case G_OP_ATTENTION: {
        const g_tensor *q = &p->tensors[nd->in[0]], *K = &p->tensors[nd->in[1]];
        double frac = K->ne[1] > 0 ? (double)keys / (double)K->ne[1] : 1.0;
        *bytes = tensor_bytes(p, nd->in[0], n) + out_b +
                 frac * (tensor_bytes(p, nd->in[1], n) + tensor_bytes(p, nd->in[2], n));
        *flops = 2.0 * (double)q->ne[1] * (double)g_ne(q, 2, n) * (double)keys * (double)(q->ne[0] + o->ne[0]);
        return;
    }
    case G_OP_STATE_WRITE: {
        const g_tensor *v = &p->tensors[nd->in[0]];
        *bytes = in_b + (double)g_nelements(v, n) * el_bytes(p->states[nd->p.write.state].dtype);
        return;
    }
    case G_OP_CONV1D: {
        const g_tensor *w = &p->tensors[nd->in[1]];
        *bytes = in_b + out_b;
        *flops = 2.0 * (double)w->ne[0] * nel;
        return;
    }
    case G_OP_DELTANET: {
        const g_tensor *q = &p->tensors[nd->in[0]], *v = &p->tensors[nd->in[2]];
        *bytes = in_b + out_b;
        *flops = 7.0 * (double)q->ne[0] * (double)v->ne[0] * (double)v->ne[1] * (double)g_ne(v, 2, n);
        return;
    }
    case G_OP_MATMUL_T: {
        const g_tensor *x = &p->tensors[nd->in[0]];
        *bytes = in_b + out_b;
        *flops = 2.0 * nel * (double)g_ne(x, 1, n);
        return;
    }
    case G_OP_SILU: case G_OP_SIGMOID: case G_OP_SOFTPLUS: case G_OP_EXP: case G_OP_SWIGLU: case G_OP_GEGLU:
    case G_OP_RMSNORM: case G_OP_L2NORM: case G_OP_GATED_RMSNORM: case G_OP_ROPE:
        *bytes = in_b + out_b;
        *flops = 4.0 * nel;
        return;
    case G_OP_SLICE: *bytes = 2.0 * out_b; return;
    case G_OP_SUM: *bytes = in_b + out_b; *flops = (double)g_nelements(&p->tensors[nd->in[0]], n); return;
    default: *bytes = in_b + out_b; *flops = nel; return;
    }
}

static void shapes_text(const g_program *p, const g_node *nd, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int k = 0; k < nd->n_out && o < cap; k++) {
        char s[96];
        const g_tensor *t = &p->tensors[nd->out[k]];
        if (t->storage == G_NONE) snprintf(s, sizeof s, "%s", p->states[nd->p.write.state].name);
        else plan_shape_text(t, s, sizeof s);
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", k ? ", " : "", s);
    }
    if (o < cap && nd->n_in) o += (size_t)snprintf(buf + o, cap - o, " <- ");
    for (int k = 0; k < nd->n_in && o < cap; k++) {
        char s[96];
        plan_shape_text(&p->tensors[nd->in[k]], s, sizeof s);
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", k ? ", " : "", s);
    }
}

static const tgt_device *device_of(const tgt_profile *t, const char *name) {
    return strcmp(name, t->device.name) == 0 ? &t->device : &t->fallback;
}

static void cost_plan(slm_plan *pl) {
    const g_program *p = pl->legal;
    for (int32_t fn = 0; fn < p->n_functions; fn++) {
        const g_function *f = &p->functions[fn];
        int64_t n = f->symbolic_n ? pl->n_prefill : f->fixed_n;
        int64_t keys = pl->n_ctx;
        pl->fn_tokens[fn] = (int32_t)n;
        double total = 0;
        for (int32_t i = 0; i < f->n_nodes; i++) {
            int32_t id = f->nodes[i];
            plan_node *pn = &pl->nodes[id];
            node_cost(p, &p->nodes[id], n, keys, &pn->bytes, &pn->flops);
            const tgt_device *d = device_of(pl->target, pn->device);
            double tf = pn->flops / d->flops_per_s, tb = pn->bytes / d->bytes_per_s;
            pn->cost = tf > tb ? tf : tb;
            total += pn->cost;
            shapes_text(p, &p->nodes[id], pn->shapes, sizeof pn->shapes);
        }
        for (int32_t i = 0; i < f->n_nodes; i++) {
            plan_node *pn = &pl->nodes[f->nodes[i]];
            pn->share = total > 0 ? pn->cost / total : 0.0;
        }
    }
}

/* ---- writes and the rules they keep ------------------------------------------------------------ */

static bool residual_has(const slm_plan *pl, int32_t node, tgt_rule_kind kind, int32_t state) {
    for (int32_t k = 0; k < pl->residual.n; k++) {
        const plan_finding *x = &pl->residual.v[k];
        if (!x->op_rule && x->kind == kind && (x->node == node || (x->fn < 0 && x->state == state))) return true;
    }
    return false;
}

static slm_status collect_writes(slm_plan *pl, slm_err *e) {
    const g_program *p = pl->legal;
    int32_t n = 0;
    for (int32_t i = 0; i < p->n_nodes; i++) n += p->nodes[i].op == G_OP_STATE_WRITE;
    pl->writes = al_calloc(&pl->alloc, (size_t)n + 1, sizeof(plan_write));
    if (!pl->writes) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    for (int32_t fn = 0; fn < p->n_functions; fn++) {
        const g_function *f = &p->functions[fn];
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            if (nd->op != G_OP_STATE_WRITE) continue;
            plan_write *w = &pl->writes[pl->n_writes++];
            w->state = nd->p.write.state;
            w->fn = fn;
            w->index = i;
            plan_window_text(p, nd, w->window, sizeof w->window);
            size_t o = 0;
            w->rules[0] = '\0';
            for (int32_t r = 0; r < pl->target->n_rules && o < sizeof w->rules; r++) {
                const tgt_state_rule *rule = &pl->target->rules[r];
                bool broken = residual_has(pl, f->nodes[i], rule->kind, w->state);
                o += (size_t)snprintf(w->rules + o, sizeof w->rules - o, "%s%s%s", o ? ", " : "", broken ? "BROKEN " : "",
                                      rule->id);
            }
        }
    }
    return SLM_OK;
}

/* ---- creation ---------------------------------------------------------------------------------- */

/* Finding x (on orig) is fixed when legal has no residual finding of the same rule for the same
 * state (and, for write rules, in the same function); op findings are never fixed by rewrites. */
static void mark_fixed(slm_plan *pl) {
    for (int32_t i = 0; i < pl->findings.n; i++) {
        plan_finding *x = &pl->findings.v[i];
        bool still = x->op_rule;
        for (int32_t k = 0; k < pl->residual.n && !still; k++) {
            const plan_finding *y = &pl->residual.v[k];
            if (y->op_rule || y->kind != x->kind || y->state != x->state) continue;
            still = x->fn < 0 || y->fn == x->fn;
        }
        x->fixed = !still;
    }
}

SLM_API void slm_plan_destroy(slm_plan *pl) {
    if (!pl) return;
    slm_allocator a = pl->alloc;
    graph_destroy(pl->orig);
    graph_destroy(pl->legal);
    al_free(&a, pl->findings.v);
    al_free(&a, pl->residual.v);
    al_free(&a, pl->rewrites.v);
    al_free(&a, pl->nodes);
    al_free(&a, pl->writes);
    for (int32_t fn = 0; fn < G_MAX_FUNCTIONS; fn++) {
        al_free(&a, pl->exec[fn].steps);
        al_free(&a, pl->exec[fn].step_of);
        al_free(&a, pl->exec[fn].cross);
        al_free(&a, pl->exec[fn].arena_offset);
        al_free(&a, pl->measure.step_us[fn]);
    }
    al_free(&a, pl->tensor_state);
    al_free(&a, pl->tensor_home);
    al_free(&a, pl->state_ring);
    al_free(&a, pl->accept.steps);
    al_free(&a, pl->accept.keep);
    al_free(&a, pl);
}

slm_plan *plan_clone_exec(const slm_plan *src) {
    const slm_allocator *a = &src->alloc;
    slm_plan *pl = al_calloc(a, 1, sizeof *pl);
    if (!pl) return NULL;
    pl->alloc = src->alloc;
    pl->model = src->model;
    pl->target = src->target;
    pl->n_ctx = src->n_ctx;
    pl->kv_dtype = src->kv_dtype;
    pl->kv_dtype_v = src->kv_dtype_v;
    pl->n_prefill = src->n_prefill;
    memcpy(pl->fn_tokens, src->fn_tokens, sizeof pl->fn_tokens);
    pl->lowered = src->lowered;
    memcpy(pl->kernels, src->kernels, sizeof pl->kernels);
    const g_program *p = src->legal;
    bool ok = (pl->legal = graph_clone(p)) != NULL;
    size_t nt = (size_t)p->n_tensors + 1;
    ok = ok && (pl->tensor_state = al_array(a, nt, sizeof(int32_t))) && (pl->tensor_home = al_array(a, nt, 1));
    size_t ns = (size_t)p->n_states + 1;
    ok = ok && (pl->state_ring = al_array(a, ns, 1)) && (pl->accept.keep = al_array(a, nt, 1)) &&
         (pl->accept.steps = al_array(a, ns, sizeof(plan_rebuild)));
    if (ok) {
        memcpy(pl->tensor_state, src->tensor_state, nt * sizeof(int32_t));
        memcpy(pl->tensor_home, src->tensor_home, nt);
        memcpy(pl->state_ring, src->state_ring, ns);
        memcpy(pl->accept.keep, src->accept.keep, nt);
        memcpy(pl->accept.steps, src->accept.steps, ns * sizeof(plan_rebuild));
        pl->accept.fn = src->accept.fn;
        pl->accept.n_steps = src->accept.n_steps;
        pl->accept.replay = src->accept.replay;
        pl->n_token_ids = src->n_token_ids;
    }
    for (int32_t fn = 0; ok && fn < p->n_functions; fn++) {
        const plan_fn_exec *x = &src->exec[fn];
        plan_fn_exec *y = &pl->exec[fn];
        size_t nn = (size_t)p->functions[fn].n_nodes + 1;
        ok = (y->steps = al_array(a, nn, sizeof(plan_step))) && (y->step_of = al_array(a, nn, sizeof(int32_t))) &&
             (y->arena_offset = al_array(a, nt, sizeof(size_t))) &&
             (!x->n_cross || (y->cross = al_array(a, (size_t)x->n_cross, sizeof(int32_t))));
        if (!ok) break;
        if (x->n_cross) memcpy(y->cross, x->cross, (size_t)x->n_cross * sizeof(int32_t));
        y->n_cross = x->n_cross;
        y->logits_batched = x->logits_batched;
        memcpy(y->arena_offset, x->arena_offset, (nt - 1) * sizeof(size_t));
        memcpy(y->steps, x->steps, (size_t)x->n_steps * sizeof(plan_step));
        memcpy(y->step_of, x->step_of, nn * sizeof(int32_t));
        y->n_steps = x->n_steps;
        y->arena_bytes = x->arena_bytes;
    }
    if (!ok) {
        slm_plan_destroy(pl);
        return NULL;
    }
    return pl;
}

/* The dtype of prog's first state of role r, else dflt. */
static slm_dtype prog_state_dtype(const g_program *prog, slm_state_role r, slm_dtype dflt) {
    for (int32_t i = 0; i < prog->n_states; i++)
        if (prog->states[i].role == r) return (slm_dtype)prog->states[i].dtype;
    return dflt;
}

slm_status plan_create_program(const slm_model *model, g_program *prog, const tgt_profile *t, int32_t n_ctx,
                               slm_dtype kv_dtype, int32_t n_prefill, backend *be, slm_plan **out, slm_err *e) {
    *out = NULL;
    slm_plan *pl = al_calloc(&prog->alloc, 1, sizeof *pl);
    if (!pl) {
        graph_destroy(prog);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    pl->alloc = prog->alloc;
    pl->model = model;
    pl->target = t;
    pl->orig = prog;
    pl->n_ctx = n_ctx;
    pl->kv_dtype = prog_state_dtype(prog, SLM_STATE_KV_KEY, kv_dtype);
    pl->kv_dtype_v = prog_state_dtype(prog, SLM_STATE_KV_VALUE, kv_dtype);
    pl->n_prefill = n_prefill > 0 ? n_prefill : (n_ctx < 128 ? n_ctx : 128);
    if (pl->n_prefill > n_ctx) pl->n_prefill = n_ctx;
    slm_status st;
    if ((st = check_program(prog, t, &pl->findings, e))) goto fail;
    if ((st = legalize_program(prog, t, &pl->legal, &pl->rewrites, e))) goto fail;
    if ((st = check_program(pl->legal, t, &pl->residual, e))) goto fail;
    mark_fixed(pl);
    pl->nodes = al_calloc(&pl->alloc, (size_t)pl->legal->n_nodes + 1, sizeof(plan_node));
    if (!pl->nodes) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    place_program(pl->legal, t, &pl->residual, pl->nodes);
    cost_plan(pl);
    if ((st = collect_writes(pl, e))) goto fail;
    if ((st = lower_plan(pl, be, e))) goto fail;
    *out = pl;
    return SLM_OK;
fail:
    slm_plan_destroy(pl);
    return st;
}

/* The backend a plan for t is compiled against (one thread: it only answers the compile-time
 * questions), or *be = NULL for a target no backend of this build runs. */
static slm_status plan_backend(const slm_allocator *a, const tgt_profile *t, const char *kernels, backend **be,
                               slm_err *e) {
    *be = NULL;
    int32_t kind = t->executable ? backend_kind_find(t->backend) : -1;
    if (kind < 0) return SLM_OK;
    backend_params bp = {.kind = (backend_kind)kind, .n_threads = 1, .kernels = kernels};
    return backend_create(a, &bp, be, e);
}

SLM_API slm_status slm_plan_create(const slm_model *model, const slm_plan_params *params, slm_plan **out, char *err,
                                   size_t err_cap) {
    slm_err e;
    err_clear(&e);
    if (out) *out = NULL;
    if (err && err_cap) err[0] = '\0';
    slm_plan_params p = slm_plan_params_default();
    params_read(&p, sizeof p, params);
    const tgt_profile *t = tgt_find(p.target ? p.target : "cpu");
    int32_t n_ctx = model && p.n_ctx == 0 ? slm_model_n_ctx_default(model) : p.n_ctx;
    slm_dtype kv = SLM_DTYPE_F16, kv_v = SLM_DTYPE_F16;
    int bad_val = 0;
    const char *bad_kv = params_kv_dtypes(p.kv_type, p.kv_type_k, p.kv_type_v, &kv, &kv_v, &bad_val);
    g_program *prog = NULL;
    backend *be = NULL;
    slm_status st = SLM_OK;
    if (!model || !out) st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_plan_create: model and out are required");
    else if (!t) st = err_set(&e, SLM_ERR_INVALID_ARG, "unknown target '%s' (targets: cpu, cuda, ane)", p.target);
    else if (bad_kv)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "%s %d is none of " PARAMS_KV_NAMES, bad_kv, bad_val);
    else if (n_ctx < 1 || n_ctx > (1 << 24))
        st = err_set(&e, SLM_ERR_INVALID_ARG, "n_ctx %d is out of range [1, %d]", n_ctx, 1 << 24);
    else if (p.n_prefill < 0)
        st = err_set(&e, SLM_ERR_INVALID_ARG, "n_prefill %d is negative", p.n_prefill);
    else if ((st = plan_backend(&model->alloc, t, p.kernels, &be, &e)) == SLM_OK &&
             (st = mdl_build_program(model, n_ctx, kv, kv_v, p.embeddings, &prog, &e)) == SLM_OK)
        st = plan_create_program(model, prog, t, n_ctx, kv, p.n_prefill, be, out, &e);
    if (be) be->vt->destroy(be);
    err_copy_out(&e, err, err_cap);
    return st;
}

/* ---- accessors --------------------------------------------------------------------------------- */

SLM_API const char *slm_plan_errmsg(const slm_plan *pl) { return pl ? pl->err.msg : SLM_NULL_HANDLE_MSG; }
SLM_API const char *slm_plan_target(const slm_plan *pl) { return pl ? pl->target->name : NULL; }
SLM_API const char *slm_plan_device(const slm_plan *pl) { return pl ? pl->target->device.name : NULL; }
SLM_API const char *slm_plan_fallback_device(const slm_plan *pl) { return pl ? pl->target->fallback.name : NULL; }
SLM_API bool slm_plan_executable(const slm_plan *pl) { return pl && pl->target->executable; }
SLM_API int32_t slm_plan_n_ctx(const slm_plan *pl) { return pl ? pl->n_ctx : 0; }
SLM_API int32_t slm_plan_n_findings(const slm_plan *pl) { return pl ? pl->findings.n : 0; }
SLM_API int32_t slm_plan_n_residual(const slm_plan *pl) { return pl ? pl->residual.n : 0; }
SLM_API int32_t slm_plan_n_rewrites(const slm_plan *pl) { return pl ? pl->rewrites.n : 0; }
SLM_API int32_t slm_plan_n_functions(const slm_plan *pl) { return pl ? pl->legal->n_functions : 0; }
SLM_API int32_t slm_plan_n_states(const slm_plan *pl) { return pl ? pl->legal->n_states : 0; }

static void finding_out(const g_program *p, const plan_finding *x, slm_plan_finding *out) {
    out->rule = x->rule;
    out->rule_text = x->rule_text;
    out->source = x->source;
    out->effect = (slm_plan_effect)x->effect;
    out->function = x->fn >= 0 ? p->functions[x->fn].name : NULL;
    out->node = x->index;
    out->layer = x->layer;
    out->op = g_op_name(x->op);
    out->state = x->state >= 0 ? p->states[x->state].name : NULL;
    out->detail = x->detail;
    out->fix = x->fix;
    out->fixed = x->fixed;
}

SLM_API slm_status slm_plan_finding_at(const slm_plan *pl, int32_t i, slm_plan_finding *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= pl->findings.n) return SLM_ERR_RANGE;
    finding_out(pl->orig, &pl->findings.v[i], out);
    return SLM_OK;
}

SLM_API slm_status slm_plan_residual_at(const slm_plan *pl, int32_t i, slm_plan_finding *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= pl->residual.n) return SLM_ERR_RANGE;
    finding_out(pl->legal, &pl->residual.v[i], out);
    return SLM_OK;
}

SLM_API slm_status slm_plan_rewrite_at(const slm_plan *pl, int32_t i, slm_plan_rewrite *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= pl->rewrites.n) return SLM_ERR_RANGE;
    const plan_rewrite *r = &pl->rewrites.v[i];
    out->pass = r->pass;
    out->function = r->fn >= 0 ? pl->legal->functions[r->fn].name : NULL;
    out->state = r->state >= 0 ? pl->legal->states[r->state].name : NULL;
    out->detail = r->detail;
    out->warning = r->warning;
    return SLM_OK;
}

SLM_API const char *slm_plan_function_name(const slm_plan *pl, int32_t fn) {
    return pl && fn >= 0 && fn < pl->legal->n_functions ? pl->legal->functions[fn].name : NULL;
}

SLM_API int32_t slm_plan_function_tokens(const slm_plan *pl, int32_t fn) {
    return pl && fn >= 0 && fn < pl->legal->n_functions ? pl->fn_tokens[fn] : 0;
}

SLM_API uint64_t slm_plan_function_arena_bytes(const slm_plan *pl, int32_t fn) {
    return pl && fn >= 0 && fn < pl->legal->n_functions ? (uint64_t)pl->exec[fn].arena_bytes : 0;
}

SLM_API const char *slm_plan_kernels(const slm_plan *pl) { return pl ? pl->kernels : NULL; }

SLM_API int32_t slm_plan_n_nodes(const slm_plan *pl, int32_t fn) {
    return pl && fn >= 0 && fn < pl->legal->n_functions ? pl->exec[fn].n_steps : 0;
}

static const char *step_op_name(const g_program *p, const g_function *f, const plan_step *s) {
    switch (s->kind) {
    case PLAN_STEP_MATMUL_GROUP: return "MATMUL_GROUP";
    case PLAN_STEP_CONV_STEP: return "CONV_STEP";
    default: return g_op_name(p->nodes[f->nodes[s->nodes[0]]].op);
    }
}

/* Where the output of step s lives: its last IR node's first output (plan_home). */
static const char *step_output(const slm_plan *pl, const g_function *f, const plan_step *s, const char **state) {
    const g_program *p = pl->legal;
    int32_t t = p->nodes[f->nodes[s->nodes[s->n_nodes - 1]]].out[0];
    *state = NULL;
    if (s->kind == PLAN_STEP_VIEW) return "view";
    if (p->tensors[t].storage == G_NONE) return "none";
    if (pl->tensor_home && pl->tensor_home[t] == PLAN_HOME_STATE) {
        *state = p->states[pl->tensor_state[t]].name;
        return "state";
    }
    return "arena";
}

SLM_API slm_status slm_plan_node_at(const slm_plan *pl, int32_t fn, int32_t i, slm_plan_node *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (fn < 0 || fn >= pl->legal->n_functions || i < 0 || i >= pl->exec[fn].n_steps) return SLM_ERR_RANGE;
    const g_program *p = pl->legal;
    const g_function *f = &p->functions[fn];
    const plan_step *s = &pl->exec[fn].steps[i];
    int32_t id = f->nodes[s->nodes[0]];
    const g_node *nd = &p->nodes[id];
    const plan_node *pn = &pl->nodes[id];
    memset(out, 0, sizeof *out);
    out->op = step_op_name(p, f, s);
    out->name = p->tensors[nd->out[0]].name;
    out->layer = nd->layer;
    out->shapes = pn->shapes;
    out->dtype = slm_dtype_name((slm_dtype)tgt_node_dtype(p, nd));
    out->device = pn->device;
    out->reason = pn->reason;
    for (int32_t k = 0; k < s->n_nodes; k++) {
        const plan_node *m = &pl->nodes[f->nodes[s->nodes[k]]];
        out->bytes += m->bytes;
        out->flops += m->flops;
        out->cost_share += m->share;
        if (!out->reason[0]) out->reason = m->reason;
    }
    out->pass = s->pass;
    out->n_ir_nodes = s->n_nodes;
    out->ir_nodes = s->nodes;
    out->kernel = s->kernel_text;
    out->batched = s->batched;
    out->output = step_output(pl, f, s, &out->output_state);
    int32_t last_out = p->nodes[f->nodes[s->nodes[s->n_nodes - 1]]].out[0];
    const size_t *off = pl->exec[fn].arena_offset;
    out->arena_offset = off && strcmp(out->output, "arena") == 0 && off[last_out] != MEMPLAN_NONE ? (int64_t)off[last_out] : -1;
    out->measured_us = pl->measure.ran && pl->measure.step_us[fn] ? pl->measure.step_us[fn][i] : -1.0;
    out->measured_share = -1.0;
    if (out->measured_us >= 0) {
        double total = 0;
        for (int32_t k = 0; k < pl->exec[fn].n_steps; k++) total += pl->measure.step_us[fn][k];
        out->measured_share = total > 0 ? out->measured_us / total : 0.0;
    }
    return SLM_OK;
}

SLM_API double slm_plan_function_measured_us(const slm_plan *pl, int32_t fn) {
    return pl && pl->measure.ran && fn >= 0 && fn < pl->legal->n_functions ? pl->measure.call_us[fn] : -1.0;
}

/* Devices used by fn, in order: the target's device first. */
static int32_t devices_of(const slm_plan *pl, int32_t fn, const char **dev) {
    const g_function *f = &pl->legal->functions[fn];
    int32_t n = 0;
    dev[n++] = pl->target->device.name;
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const char *d = pl->nodes[f->nodes[i]].device;
        bool seen = false;
        for (int32_t k = 0; k < n; k++) seen |= strcmp(dev[k], d) == 0;
        if (!seen && n < 4) dev[n++] = d;
    }
    return n;
}

SLM_API int32_t slm_plan_n_devices(const slm_plan *pl, int32_t fn) {
    if (!pl || fn < 0 || fn >= pl->legal->n_functions) return 0;
    const char *dev[4];
    return devices_of(pl, fn, dev);
}

SLM_API slm_status slm_plan_device_total_at(const slm_plan *pl, int32_t fn, int32_t i, slm_plan_device_total *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (fn < 0 || fn >= pl->legal->n_functions) return SLM_ERR_RANGE;
    const char *dev[4];
    int32_t n = devices_of(pl, fn, dev);
    if (i < 0 || i >= n) return SLM_ERR_RANGE;
    memset(out, 0, sizeof *out);
    out->device = dev[i];
    for (int32_t k = 0; k < slm_plan_n_nodes(pl, fn); k++) {
        slm_plan_node nd;
        slm_plan_node_at(pl, fn, k, &nd);
        if (strcmp(nd.device, dev[i]) != 0) continue;
        out->n_nodes++;
        out->bytes += nd.bytes;
        out->flops += nd.flops;
        out->cost_share += nd.cost_share;
    }
    return SLM_OK;
}

static uint64_t state_alloc_bytes(const g_state *s) {
    uint64_t n = (uint64_t)el_bytes(s->dtype);
    for (int d = 0; d < 4; d++) n *= (uint64_t)s->alloc_ne[d];
    return n;
}

SLM_API slm_status slm_plan_state_at(const slm_plan *pl, int32_t i, slm_plan_state *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= pl->legal->n_states) return SLM_ERR_RANGE;
    const g_state *s = &pl->legal->states[i], *o = &pl->orig->states[i];
    out->name = s->name;
    out->role = s->role;
    out->layer = s->layer;
    out->n_dims = s->n_dims;
    for (int d = 0; d < 4; d++) {
        out->ne[d] = o->ne[d];
        out->alloc_ne[d] = s->alloc_ne[d];
    }
    out->dtype = (slm_dtype)s->dtype;
    out->orig_dtype = (slm_dtype)o->dtype;
    out->size_bytes = state_alloc_bytes(s);
    out->n_writes = 0;
    for (int32_t k = 0; k < pl->n_writes; k++) out->n_writes += pl->writes[k].state == i;
    out->n_buffers = plan_state_double_buffered(s) ? 2 : 1;
    return SLM_OK;
}

SLM_API slm_status slm_plan_state_write_at(const slm_plan *pl, int32_t state, int32_t k, slm_plan_write *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    for (int32_t j = 0; j < pl->n_writes; j++) {
        const plan_write *w = &pl->writes[j];
        if (w->state != state || k-- != 0) continue;
        out->function = pl->legal->functions[w->fn].name;
        out->node = w->index;
        out->window = w->window;
        out->rules = w->rules;
        return SLM_OK;
    }
    return SLM_ERR_RANGE;
}

SLM_API int32_t slm_plan_n_accept_steps(const slm_plan *pl) { return pl ? pl->accept.n_steps : 0; }
SLM_API int32_t slm_plan_max_call_tokens(const slm_plan *pl) { return pl ? pl->legal->max_call_tokens : 0; }

SLM_API slm_status slm_plan_accept_step_at(const slm_plan *pl, int32_t i, slm_plan_accept_step *out) {
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    if (i < 0 || i >= pl->accept.n_steps) return SLM_ERR_RANGE;
    const plan_rebuild *r = &pl->accept.steps[i];
    out->state = pl->legal->states[r->state].name;
    out->how = plan_rebuild_kind_name(r->kind);
    out->node = r->node;
    out->detail = r->detail;
    return SLM_OK;
}

/* ---- JSON -------------------------------------------------------------------------------------- */

static void add_accept(const slm_plan *pl, cJSON *root) {
    cJSON *ja = cJSON_AddObjectToObject(root, "accept");
    if (pl->accept.fn >= 0) cJSON_AddStringToObject(ja, "function", pl->legal->functions[pl->accept.fn].name);
    else cJSON_AddNullToObject(ja, "function");
    cJSON_AddBoolToObject(ja, "replays", pl->accept.replay);
    cJSON_AddNumberToObject(ja, "max_call_tokens", slm_plan_max_call_tokens(pl));
    cJSON *steps = cJSON_AddArrayToObject(ja, "steps");
    for (int32_t i = 0; i < slm_plan_n_accept_steps(pl); i++) {
        slm_plan_accept_step a;
        slm_plan_accept_step_at(pl, i, &a);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "state", a.state);
        cJSON_AddStringToObject(j, "how", a.how);
        cJSON_AddNumberToObject(j, "node", a.node);
        cJSON_AddStringToObject(j, "detail", a.detail);
        cJSON_AddItemToArray(steps, j);
    }
}

static cJSON *shape_json(const int64_t *ne, int32_t n_dims) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t d = 0; d < n_dims; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ne[d]));
    return a;
}

static cJSON *finding_json(const g_program *p, const plan_finding *x) {
    slm_plan_finding f;
    finding_out(p, x, &f);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "rule", f.rule);
    cJSON_AddStringToObject(j, "rule_text", f.rule_text);
    cJSON_AddStringToObject(j, "source", f.source);
    cJSON_AddStringToObject(j, "effect", slm_plan_effect_name(f.effect));
    if (f.function) cJSON_AddStringToObject(j, "function", f.function);
    else cJSON_AddNullToObject(j, "function");
    cJSON_AddNumberToObject(j, "node", f.node);
    cJSON_AddNumberToObject(j, "layer", f.layer);
    cJSON_AddStringToObject(j, "op", f.op);
    if (f.state) cJSON_AddStringToObject(j, "state", f.state);
    else cJSON_AddNullToObject(j, "state");
    cJSON_AddStringToObject(j, "detail", f.detail);
    cJSON_AddStringToObject(j, "fix", f.fix);
    cJSON_AddBoolToObject(j, "fixed", f.fixed);
    return j;
}

static void add_findings(cJSON *root, const char *key, const g_program *p, const plan_findings *fs) {
    cJSON *a = cJSON_AddArrayToObject(root, key);
    for (int32_t i = 0; i < fs->n; i++) cJSON_AddItemToArray(a, finding_json(p, &fs->v[i]));
}

static void add_plan_body(const slm_plan *pl, cJSON *root) {
    cJSON *rws = cJSON_AddArrayToObject(root, "rewrites");
    for (int32_t i = 0; i < pl->rewrites.n; i++) {
        slm_plan_rewrite r;
        slm_plan_rewrite_at(pl, i, &r);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "pass", r.pass);
        if (r.function) cJSON_AddStringToObject(j, "function", r.function);
        else cJSON_AddNullToObject(j, "function");
        cJSON_AddStringToObject(j, "state", r.state);
        cJSON_AddStringToObject(j, "detail", r.detail);
        cJSON_AddStringToObject(j, "warning", r.warning);
        cJSON_AddItemToArray(rws, j);
    }
    add_findings(root, "residual", pl->legal, &pl->residual);
    cJSON *fns = cJSON_AddArrayToObject(root, "functions");
    for (int32_t fn = 0; fn < pl->legal->n_functions; fn++) {
        cJSON *jf = cJSON_CreateObject();
        cJSON_AddStringToObject(jf, "name", slm_plan_function_name(pl, fn));
        cJSON_AddNumberToObject(jf, "n_tokens", slm_plan_function_tokens(pl, fn));
        cJSON *nodes = cJSON_AddArrayToObject(jf, "nodes");
        for (int32_t i = 0; i < slm_plan_n_nodes(pl, fn); i++) {
            slm_plan_node n;
            slm_plan_node_at(pl, fn, i, &n);
            cJSON *jn = cJSON_CreateObject();
            cJSON_AddNumberToObject(jn, "index", i);
            cJSON_AddStringToObject(jn, "op", n.op);
            cJSON_AddStringToObject(jn, "name", n.name);
            cJSON_AddNumberToObject(jn, "layer", n.layer);
            cJSON_AddStringToObject(jn, "shapes", n.shapes);
            cJSON_AddStringToObject(jn, "dtype", n.dtype);
            cJSON_AddStringToObject(jn, "device", n.device);
            cJSON_AddStringToObject(jn, "reason", n.reason);
            cJSON_AddNumberToObject(jn, "bytes", n.bytes);
            cJSON_AddNumberToObject(jn, "flops", n.flops);
            cJSON_AddNumberToObject(jn, "cost_share", n.cost_share);
            if (n.pass) cJSON_AddStringToObject(jn, "pass", n.pass);
            else cJSON_AddNullToObject(jn, "pass");
            cJSON *ir = cJSON_AddArrayToObject(jn, "ir_nodes");
            for (int32_t k = 0; k < n.n_ir_nodes; k++) cJSON_AddItemToArray(ir, cJSON_CreateNumber(n.ir_nodes[k]));
            cJSON_AddStringToObject(jn, "kernel", n.kernel);
            cJSON_AddStringToObject(jn, "output", n.output);
            cJSON_AddBoolToObject(jn, "batched", n.batched);
            if (n.arena_offset >= 0) cJSON_AddNumberToObject(jn, "arena_offset", (double)n.arena_offset);
            if (n.output_state) cJSON_AddStringToObject(jn, "output_state", n.output_state);
            if (n.measured_us >= 0) {
                cJSON *jm = cJSON_AddObjectToObject(jn, "measured");
                cJSON_AddNumberToObject(jm, "median_us", n.measured_us);
                cJSON_AddNumberToObject(jm, "share", n.measured_share);
            }
            cJSON_AddItemToArray(nodes, jn);
        }
        cJSON_AddNumberToObject(jf, "arena_bytes", (double)slm_plan_function_arena_bytes(pl, fn));
        if (pl->measure.ran) {
            cJSON *jm = cJSON_AddObjectToObject(jf, "measured");
            cJSON_AddNumberToObject(jm, "calls", pl->measure.calls[fn]);
            cJSON_AddNumberToObject(jm, "median_call_us", pl->measure.call_us[fn]);
        }
        cJSON *tot = cJSON_AddArrayToObject(jf, "totals");
        for (int32_t i = 0; i < slm_plan_n_devices(pl, fn); i++) {
            slm_plan_device_total d;
            slm_plan_device_total_at(pl, fn, i, &d);
            cJSON *jd = cJSON_CreateObject();
            cJSON_AddStringToObject(jd, "device", d.device);
            cJSON_AddNumberToObject(jd, "nodes", d.n_nodes);
            cJSON_AddNumberToObject(jd, "bytes", d.bytes);
            cJSON_AddNumberToObject(jd, "flops", d.flops);
            cJSON_AddNumberToObject(jd, "cost_share", d.cost_share);
            cJSON_AddItemToArray(tot, jd);
        }
        cJSON_AddItemToArray(fns, jf);
    }
    add_accept(pl, root);
    cJSON *sts = cJSON_AddArrayToObject(root, "states");
    for (int32_t i = 0; i < slm_plan_n_states(pl); i++) {
        slm_plan_state s;
        slm_plan_state_at(pl, i, &s);
        cJSON *js = cJSON_CreateObject();
        cJSON_AddStringToObject(js, "name", s.name);
        cJSON_AddStringToObject(js, "role", slm_state_role_name(s.role));
        cJSON_AddNumberToObject(js, "layer", s.layer);
        cJSON_AddItemToObject(js, "logical_shape", shape_json(s.ne, s.n_dims));
        cJSON_AddItemToObject(js, "allocated_shape", shape_json(s.alloc_ne, s.n_dims));
        cJSON_AddStringToObject(js, "dtype", slm_dtype_name(s.dtype));
        cJSON_AddStringToObject(js, "original_dtype", slm_dtype_name(s.orig_dtype));
        cJSON_AddNumberToObject(js, "bytes", (double)s.size_bytes);
        cJSON_AddNumberToObject(js, "buffers", s.n_buffers);
        cJSON *ws = cJSON_AddArrayToObject(js, "writes");
        for (int32_t k = 0; k < s.n_writes; k++) {
            slm_plan_write w;
            slm_plan_state_write_at(pl, i, k, &w);
            cJSON *jw = cJSON_CreateObject();
            cJSON_AddStringToObject(jw, "function", w.function);
            cJSON_AddNumberToObject(jw, "node", w.node);
            cJSON_AddStringToObject(jw, "window", w.window);
            cJSON *rules = cJSON_AddArrayToObject(jw, "rules");
            int32_t fn = 0;
            while (fn < pl->legal->n_functions && strcmp(pl->legal->functions[fn].name, w.function)) fn++;
            int32_t node = pl->legal->functions[fn].nodes[w.node];
            for (int32_t r = 0; r < pl->target->n_rules; r++) {
                cJSON *jr = cJSON_CreateObject();
                cJSON_AddStringToObject(jr, "rule", pl->target->rules[r].id);
                cJSON_AddBoolToObject(jr, "kept", !residual_has(pl, node, pl->target->rules[r].kind, i));
                cJSON_AddItemToArray(rules, jr);
            }
            cJSON_AddItemToArray(ws, jw);
        }
        cJSON_AddItemToArray(sts, js);
    }
    if (pl->measure.ran) {
        cJSON *jp = cJSON_AddObjectToObject(root, "profile");
        cJSON_AddNumberToObject(jp, "n_prompt", pl->measure.n_prompt);
        cJSON_AddNumberToObject(jp, "n_decode", pl->measure.n_decode);
        cJSON_AddNumberToObject(jp, "reps", pl->measure.n_reps);
        cJSON_AddStringToObject(jp, "statistic", "median per call over the timed calls");
    }
    if (pl->sim.ran) {
        cJSON *js = cJSON_AddObjectToObject(root, "simulation");
        cJSON_AddStringToObject(js, "device", "cpu");
        cJSON_AddNumberToObject(js, "n_prompt", pl->sim.n_prompt);
        cJSON_AddNumberToObject(js, "n_steps", pl->sim.n_steps);
        cJSON_AddBoolToObject(js, "identical", pl->sim.identical);
        cJSON_AddNumberToObject(js, "first_diff", pl->sim.first_diff);
        cJSON_AddBoolToObject(js, "logits_identical", pl->sim.logits_identical);
        cJSON_AddNumberToObject(js, "max_abs_logit_diff", pl->sim.max_abs_logit_diff);
        if (pl->sim.device_ran) {
            cJSON *jd = cJSON_AddObjectToObject(js, "device_precision");
            cJSON_AddStringToObject(jd, "compute_dtype", slm_dtype_name(pl->sim.compute_dtype));
            cJSON_AddStringToObject(jd, "weights", "f16");
            cJSON_AddStringToObject(jd, "compared_with", "original program, fed the original's greedy tokens");
            cJSON_AddNumberToObject(jd, "n_steps", pl->sim.device_n_steps);
            cJSON_AddNumberToObject(jd, "greedy_agree", pl->sim.device_n_agree);
            cJSON_AddNumberToObject(jd, "first_diff", pl->sim.device_first_diff);
            cJSON_AddNumberToObject(jd, "max_abs_logit_diff", pl->sim.device_max_abs_logit_diff);
        }
    }
}

SLM_API slm_status slm_plan_json(const slm_plan *pl, bool check_only, char **out) {
    if (out) *out = NULL;
    if (!pl || !out) return SLM_ERR_INVALID_ARG;
    cJSON *root = cJSON_CreateObject();
    if (!root) return SLM_ERR_NOMEM;
    const tgt_profile *t = pl->target;
    cJSON_AddStringToObject(root, "schema", check_only ? "statelm.check/1" : "statelm.plan/1");
    cJSON_AddStringToObject(root, "target", t->name);
    cJSON_AddStringToObject(root, "target_summary", t->summary);
    cJSON_AddStringToObject(root, "device", t->device.name);
    cJSON_AddStringToObject(root, "fallback_device", t->fallback.name);
    cJSON_AddBoolToObject(root, "executable", t->executable);
    cJSON_AddStringToObject(root, "kernels", pl->kernels);
    cJSON_AddNumberToObject(root, "n_ctx", pl->n_ctx);
    cJSON_AddStringToObject(root, "kv_dtype", slm_dtype_name(pl->kv_dtype));
    cJSON_AddStringToObject(root, "kv_dtype_v", slm_dtype_name(pl->kv_dtype_v));
    cJSON_AddStringToObject(root, "shape_order", "ggml: ne[0] innermost");
    bool clean = true;
    for (int32_t i = 0; i < pl->findings.n; i++) clean &= pl->findings.v[i].effect == TGT_OK;
    cJSON_AddBoolToObject(root, "clean", clean);
    add_findings(root, "findings", pl->orig, &pl->findings);
    if (!check_only) {
        cJSON *cm = cJSON_AddObjectToObject(root, "cost_model");
        cJSON_AddStringToObject(cm, "assumes", "per call at a full context; roofline of nominal device figures");
        cJSON_AddNumberToObject(cm, "prefill_tokens", pl->n_prefill);
        cJSON *devs = cJSON_AddArrayToObject(cm, "devices");
        const tgt_device *d2[2] = {&t->device, &t->fallback};
        for (int k = 0; k < 2; k++) {
            cJSON *jd = cJSON_CreateObject();
            cJSON_AddStringToObject(jd, "name", d2[k]->name);
            cJSON_AddNumberToObject(jd, "flops_per_s", d2[k]->flops_per_s);
            cJSON_AddNumberToObject(jd, "bytes_per_s", d2[k]->bytes_per_s);
            cJSON_AddItemToArray(devs, jd);
        }
        cJSON *fu = cJSON_AddArrayToObject(root, "fusions");
        for (int32_t k = 0; k < t->n_fusions; k++) cJSON_AddItemToArray(fu, cJSON_CreateString(t->fusions[k]));
        add_plan_body(pl, root);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return SLM_ERR_NOMEM;
    *out = text;
    return SLM_OK;
}
