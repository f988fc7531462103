/* simulate.c — runs a plan's original and legalised Programs side by side on the CPU backend and
 * compares their greedy outputs (docs/architecture.md compile/: "a plan for a non-executable target can be
 * simulated"). For a target whose device computes in less than f32 (ane: f16), a third run executes
 * the legalised Program at the device's precision: a simulation-only copy with every f32 activation
 * rounded to the compute dtype after the node that produces it, and every weight rounded to f16 (what
 * the Core ML export writes by default). Lives in runtime/ because it needs sessions; compile/ knows
 * nothing of them. Each Program runs in its own session on its own copy (sessions own their Program). */
#include <math.h>
#include <string.h>

#include "base/dtype.h"
#include "base/half.h"
#include "compile/plan.h"
#include "compile/target.h"
#include "runtime/session.h"

/* Owned copies of the weights of a device-precision Program, freed after its session. */
typedef struct weight_copies {
    const slm_allocator *alloc;
    void **bufs;             /* (cap) */
    int32_t n, cap;
} weight_copies;

static void copies_free(weight_copies *w) {
    for (int32_t i = 0; i < w->n; i++) al_free(w->alloc, w->bufs[i]);
    al_free(w->alloc, w->bufs);
    memset(w, 0, sizeof *w);
}

/* Weight x of src rounded to f16, added to dst. F16 stays as is (shared data), F32 stays F32 with
 * f16-representable values, other dequantisable types (bf16, blocks) become F16 copies (the
 * reference kernels read every weight operand through dequant_row). Returns the tensor id, or -1
 * (message in e). */
static int32_t rounded_weight(g_program *dst, const g_tensor *x, weight_copies *w, slm_err *e) {
    const dtype_traits *tr = dtype_traits_of(x->dtype);
    if (x->dtype == SLM_DTYPE_F16 || !tr || !tr->can_dequant)
        return graph_add_weight(dst, x->name, x->dtype, x->n_dims, x->ne, x->data, x->size_bytes, e);
    int64_t row = x->ne[0], n_rows = x->ne[1] * x->ne[2] * x->ne[3];
    uint64_t row_bytes = 0;
    if (!dtype_row_bytes(x->dtype, (uint64_t)row, &row_bytes)) {
        err_set(e, SLM_ERR_INVALID_ARG, "simulation: weight %s has rows of %lld elements", x->name, (long long)row);
        return -1;
    }
    bool keep_f32 = x->dtype == SLM_DTYPE_F32;
    size_t elem = keep_f32 ? sizeof(float) : sizeof(uint16_t);
    if (w->n == w->cap) {
        int32_t cap = w->cap ? 2 * w->cap : 64;
        void **bufs = al_array(w->alloc, (size_t)cap, sizeof(void *));
        if (!bufs) goto nomem;
        if (w->n) memcpy(bufs, w->bufs, (size_t)w->n * sizeof(void *));
        al_free(w->alloc, w->bufs);
        w->bufs = bufs;
        w->cap = cap;
    }
    void *buf = al_array(w->alloc, (size_t)(row * n_rows), elem);
    float *tmp = al_array(w->alloc, (size_t)row, sizeof(float));
    if (!buf || !tmp) {
        al_free(w->alloc, buf);
        al_free(w->alloc, tmp);
        goto nomem;
    }
    w->bufs[w->n++] = buf;
    for (int64_t r = 0; r < n_rows; r++) {
        dequant_row(x->dtype, (const uint8_t *)x->data + (uint64_t)r * row_bytes, tmp, row);
        for (int64_t i = 0; i < row; i++) {
            uint16_t h = f32_to_f16(tmp[i]);
            if (keep_f32) ((float *)buf)[r * row + i] = f16_to_f32(h);
            else ((uint16_t *)buf)[r * row + i] = h;
        }
    }
    al_free(w->alloc, tmp);
    return graph_add_weight(dst, x->name, keep_f32 ? SLM_DTYPE_F32 : SLM_DTYPE_F16, x->n_dims, x->ne, buf,
                            (uint64_t)(row * n_rows) * elem, e);
nomem:
    err_set(e, SLM_ERR_NOMEM, "out of memory rounding the weights for the simulation");
    return -1;
}

/* *out <- p as a device computing in cdt (F16 or BF16) runs it: p's states, weights rounded by
 * rounded_weight (copies owned by w), and p's functions node for node with a ROUND to cdt after
 * every f32 activation (logits included: the export computes them in f16 and casts). */
static slm_status device_program(const g_program *p, slm_dtype cdt, weight_copies *w, g_program **out, slm_err *e) {
    *out = NULL;
    const slm_allocator *a = &p->alloc;
    g_program *q = NULL;
    int32_t *map = NULL;
    slm_status st = graph_create(a, &q);
    if (st) return err_set(e, st, "out of memory copying the program");
    q->max_call_tokens = p->max_call_tokens;
    if (!(map = al_array(a, (size_t)p->n_tensors + 1, sizeof(int32_t)))) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory copying the program");
        goto done;
    }
    for (int32_t i = 0; i < p->n_tensors; i++) map[i] = -1;
    for (int32_t i = 0; i < p->n_states; i++) {
        const g_state *s = &p->states[i];
        int32_t id = graph_add_state(q, s->name, s->role, s->layer, (slm_dtype)s->dtype, s->n_dims, s->ne, s->pos_axis, e);
        if (id < 0) {
            st = e->status ? e->status : SLM_ERR_NOMEM;
            goto done;
        }
        memcpy(q->states[id].alloc_ne, s->alloc_ne, sizeof s->alloc_ne);
    }
    for (int32_t fn = 0; fn < p->n_functions && !st; fn++) {
        const g_function *f = &p->functions[fn];
        int32_t dfn;
        if ((st = graph_add_function(q, f->name, f->symbolic_n, f->fixed_n, &dfn, e))) goto done;
        g_builder b;
        gb_init(&b, q, dfn, e);
        if (f->tokens >= 0) map[f->tokens] = gb_tokens(&b);
        for (int32_t i = 0; i < f->n_nodes && !b.status; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            int32_t in[G_MAX_IN], outs[G_MAX_OUT];
            for (int k = 0; k < nd->n_in; k++) {
                const g_tensor *x = &p->tensors[nd->in[k]];
                if (map[nd->in[k]] < 0 && x->storage == G_WEIGHT)
                    map[nd->in[k]] = rounded_weight(q, x, w, e);
                if ((in[k] = map[nd->in[k]]) < 0) {
                    b.status = e->status ? e->status : err_set(e, SLM_ERR_INVALID_ARG, "simulation: %s is used "
                                                                "before it is produced", x->name);
                    break;
                }
            }
            if (b.status) break;
            b.layer = nd->layer;
            if (gb_clone_node(&b, p, nd, in, outs) < 0) break;
            for (int k = 0; k < nd->n_out; k++) {
                const g_tensor *t = &q->tensors[outs[k]];
                bool activation = t->storage == G_ACTIVATION && t->dtype == SLM_DTYPE_F32;
                map[nd->out[k]] = activation ? gb_round(&b, outs[k], cdt) : outs[k];
            }
        }
        b.layer = -1;
        if (!b.status && f->logits >= 0) gb_set_output(&b, map[f->logits], f->output);
        st = b.status;
    }
    if (!st && (st = graph_verify(q, e))) err_prefix(e, "device-precision program: ");
done:
    al_free(a, map);
    if (st) graph_destroy(q);
    else *out = q;
    return st;
}

/* Both sessions run the reference kernels (the oracle): the check is about the two Programs, and
 * the fast kernels' 8-bit activation rounding would amplify a legalisation's intended f16 casts
 * chaotically on quantised models. */
static slm_status open_session(slm_plan *pl, const g_program *p, int32_t n_threads, slm_session **s, slm_err *e) {
    g_program *copy = graph_clone(p);
    if (!copy) return err_set(e, SLM_ERR_NOMEM, "out of memory copying the program");
    return sess_create_program(pl->model, copy, n_threads, pl->n_ctx, pl->kv_dtype, "ref", s, e);
}

/* Feeds tokens[0, n) to s (prefill for n > 1, decode for one). */
static slm_status feed(slm_session *s, const int32_t *tokens, int32_t n, slm_err *e) {
    slm_status st = n == 1 ? slm_session_decode(s, tokens[0], NULL) : slm_session_prefill(s, tokens, (size_t)n, NULL);
    if (st) err_set(e, st, "%s", slm_session_errmsg(s));
    return st;
}

slm_status plan_simulate(slm_plan *pl, const int32_t *prompt, int32_t n_prompt, int32_t n_steps, int32_t n_threads,
                         slm_err *e) {
    memset(&pl->sim, 0, sizeof pl->sim);
    if (n_prompt < 1 || n_steps < 1 || (int64_t)n_prompt + n_steps - 1 > pl->n_ctx)
        return err_set(e, SLM_ERR_INVALID_ARG, "simulation: %d prompt tokens and %d steps do not fit a %d-token context",
                       n_prompt, n_steps, pl->n_ctx);
    slm_dtype cdt = pl->target->compute_dtype;
    bool device = cdt != SLM_DTYPE_F32;
    weight_copies w = {&pl->legal->alloc, NULL, 0, 0};
    slm_session *a = NULL, *b = NULL, *c = NULL;
    slm_status st;
    if ((st = open_session(pl, pl->orig, n_threads, &a, e)) || (st = open_session(pl, pl->legal, n_threads, &b, e))) goto done;
    if (device) {
        g_program *dp = NULL;
        if ((st = device_program(pl->legal, cdt, &w, &dp, e))) goto done;
        if ((st = sess_create_program(pl->model, dp, n_threads, pl->n_ctx, pl->kv_dtype, "ref", &c, e))) goto done;
    }
    if ((st = feed(a, prompt, n_prompt, e)) || (st = feed(b, prompt, n_prompt, e))) goto done;
    if (c && (st = feed(c, prompt, n_prompt, e))) goto done;
    pl->sim.n_prompt = n_prompt;
    pl->sim.first_diff = -1;
    pl->sim.logits_identical = true;
    pl->sim.compute_dtype = cdt;
    pl->sim.device_first_diff = -1;
    int32_t nv = a->n_vocab;
    bool legal_live = true;
    for (int32_t step = 0; step < n_steps; step++) {
        int32_t ta = sess_argmax(a->logits, nv), tb = -1;
        if (legal_live) {
            for (int32_t i = 0; i < nv; i++) {
                double d = fabs((double)a->logits[i] - (double)b->logits[i]);
                if (!(d <= pl->sim.max_abs_logit_diff)) pl->sim.max_abs_logit_diff = d; /* NaN sticks */
            }
            if (memcmp(a->logits, b->logits, (size_t)nv * sizeof(float))) pl->sim.logits_identical = false;
            tb = sess_argmax(b->logits, nv);
            pl->sim.n_steps = step + 1;
            if (ta != tb) {
                pl->sim.first_diff = step;
                pl->sim.token_orig = ta;
                pl->sim.token_legal = tb;
                legal_live = false;
            }
        }
        if (c) {
            for (int32_t i = 0; i < nv; i++) {
                double d = fabs((double)a->logits[i] - (double)c->logits[i]);
                if (!(d <= pl->sim.device_max_abs_logit_diff)) pl->sim.device_max_abs_logit_diff = d;
            }
            if (sess_argmax(c->logits, nv) == ta) pl->sim.device_n_agree++;
            else if (pl->sim.device_first_diff < 0) pl->sim.device_first_diff = step;
            pl->sim.device_n_steps = step + 1;
        }
        if (step + 1 == n_steps || (!legal_live && !c)) break;
        if ((st = feed(a, &ta, 1, e)) || (legal_live && (st = feed(b, &tb, 1, e))) || (c && (st = feed(c, &ta, 1, e))))
            goto done;
    }
    pl->sim.identical = pl->sim.first_diff < 0;
    pl->sim.device_ran = c != NULL;
    pl->sim.ran = true;
done:
    slm_session_destroy(a);
    slm_session_destroy(b);
    slm_session_destroy(c);
    copies_free(&w);
    return st;
}

SLM_API slm_status slm_plan_simulate(slm_plan *pl, const int32_t *prompt, size_t n_prompt, int32_t n_steps,
                                     int32_t n_threads, bool *identical, int32_t *first_diff) {
    if (identical) *identical = false;
    if (first_diff) *first_diff = -1;
    if (!pl) return SLM_ERR_INVALID_ARG;
    err_clear(&pl->err);
    if (!prompt || n_prompt == 0 || n_prompt > (size_t)INT32_MAX)
        return err_set(&pl->err, SLM_ERR_INVALID_ARG, "simulation needs at least one prompt token");
    slm_status st = plan_simulate(pl, prompt, (int32_t)n_prompt, n_steps, n_threads, &pl->err);
    if (st == SLM_OK) {
        if (identical) *identical = pl->sim.identical;
        if (first_diff) *first_diff = pl->sim.first_diff;
    }
    return st;
}

SLM_API slm_status slm_plan_simulation_device(const slm_plan *pl, slm_dtype *compute_dtype,
                                              double *max_abs_logit_diff, int32_t *n_agree, int32_t *n_steps) {
    bool ran = pl && pl->sim.ran && pl->sim.device_ran;
    if (compute_dtype) *compute_dtype = ran ? pl->sim.compute_dtype : SLM_DTYPE_F32;
    if (max_abs_logit_diff) *max_abs_logit_diff = ran ? pl->sim.device_max_abs_logit_diff : 0.0;
    if (n_agree) *n_agree = ran ? pl->sim.device_n_agree : 0;
    if (n_steps) *n_steps = ran ? pl->sim.device_n_steps : 0;
    return ran ? SLM_OK : SLM_ERR_INVALID_ARG;
}
