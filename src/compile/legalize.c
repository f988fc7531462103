/* legalize.c — builds the legalised copy of a Program for a target: every node is emitted again
 * through the builder (so every shape rule is checked again) while these rewrites apply, each
 * recorded for the plan:
 *   cast           a state's dtype becomes the one the target requires (warning when precision
 *                  is lost: compile/check.c check_cast_note);
 *   align          a state's innermost axis grows to the target's multiple; reads take the
 *                  original prefix, writes keep their windows;
 *   merge          several writes into one state within a function become one write of the whole
 *                  state: the writes are spliced into a running value (SLICE/CONCAT for static
 *                  windows, a one-hot masked SELECT for data-dependent ones), reads in between read
 *                  that value (rounded to the state's dtype, as the state would hold it);
 *   static_window  a write at a data-dependent begin (the KV write at pos) becomes a write of the
 *                  whole window at begin 0 of SELECT(mask, value placed by a one-hot matrix, state);
 *   pad            a state whose write covers its full extent along the written (outermost) axis
 *                  is allocated one row deeper (alloc_ne; the logical region stays a contiguous
 *                  prefix, which the executor relies on).
 * Every rewrite is exact (bit-identical outputs) except cast. The source Program is not changed. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compile/plan.h"

enum { ST_NONE = 0, ST_MERGE = 1, ST_MASK = 2 };

typedef struct onehot_entry {
    int64_t L;
    g_affine begin;
    int32_t oh;   /* (L, n) one-hot */
    int32_t mask; /* (1, L): 1 on the written rows */
} onehot_entry;

#define MAX_ONEHOT 16

typedef struct lctx {
    const g_program *src;
    const tgt_profile *t;
    g_program *dst;
    plan_rewrites *rw;
    slm_err *e;
    g_builder b;
    int32_t *map;           /* (src n_tensors): tensor of dst, -1 */
    bool *aligned;          /* (n_states): axis 0 grown */
    bool *feeds_attention;  /* (n_states): ATTENTION reads it as a state view */
    uint8_t *strategy;      /* (n_states): ST_* in the current function */
    int32_t *cur;           /* (n_states): merged value so far, -1 */
    int32_t *writes_left;   /* (n_states) */
    onehot_entry onehot[MAX_ONEHOT];
    int32_t n_onehot;
} lctx;

static slm_status record(lctx *c, const char *pass, int32_t fn, int32_t state, const char *warning, const char *format, ...)
    __attribute__((format(printf, 6, 7)));
static slm_status record(lctx *c, const char *pass, int32_t fn, int32_t state, const char *warning, const char *format, ...) {
    plan_rewrites *rw = c->rw;
    if (rw->n == rw->cap) {
        int32_t cap = rw->cap ? rw->cap * 2 : 32;
        plan_rewrite *v = al_realloc(&c->src->alloc, rw->v, (size_t)rw->cap * sizeof *v, (size_t)cap * sizeof *v);
        if (!v) return err_set(c->e, SLM_ERR_NOMEM, "out of memory legalising the program");
        rw->v = v;
        rw->cap = cap;
    }
    plan_rewrite *r = &rw->v[rw->n++];
    memset(r, 0, sizeof *r);
    r->pass = pass;
    r->fn = fn;
    r->state = state;
    va_list ap;
    va_start(ap, format);
    vsnprintf(r->detail, sizeof r->detail, format, ap);
    va_end(ap);
    snprintf(r->warning, sizeof r->warning, "%s", warning ? warning : "");
    return SLM_OK;
}

/* ---- per-state layout: cast, align ------------------------------------------------------------ */

static slm_status declare_states(lctx *c) {
    const tgt_state_rule *rd = tgt_rule(c->t, TGT_STATE_DTYPE), *ra = tgt_rule(c->t, TGT_STATE_ALIGN);
    for (int32_t i = 0; i < c->src->n_states; i++) {
        const g_state *s = &c->src->states[i];
        slm_dtype dt = (slm_dtype)s->dtype;
        int64_t ne[4] = {s->ne[0], s->ne[1], s->ne[2], s->ne[3]};
        slm_status st;
        if (rd && !((rd->dtypes >> s->dtype) & 1)) {
            char note[200];
            check_cast_note(s, rd->cast_to, note, sizeof note);
            dt = rd->cast_to;
            if ((st = record(c, "cast", -1, i, note, "%s: %s -> %s (%s)", s->name, slm_dtype_name((slm_dtype)s->dtype),
                             slm_dtype_name(dt), rd->id)))
                return st;
        }
        if (ra && ra->multiple > 1 && s->ne[0] % ra->multiple && !c->feeds_attention[i]) {
            ne[0] = (s->ne[0] + ra->multiple - 1) / ra->multiple * ra->multiple;
            c->aligned[i] = true;
            if ((st = record(c, "align", -1, i, NULL, "%s: axis 0 %lld -> %lld, reads take [0,%lld) (%s)", s->name,
                             (long long)s->ne[0], (long long)ne[0], (long long)s->ne[0], ra->id)))
                return st;
        }
        if (graph_add_state(c->dst, s->name, s->role, s->layer, dt, s->n_dims, ne, s->pos_axis, c->e) < 0) return SLM_ERR_NOMEM;
    }
    return SLM_OK;
}

/* ---- emission helpers ------------------------------------------------------------------------- */

/* The state's value as the source program sees it: a view, sliced back when axis 0 grew. */
static int32_t read_state(lctx *c, int32_t s) {
    int32_t v = gb_state_read(&c->b, s);
    if (c->aligned[s]) {
        int32_t sl = gb_slice(&c->b, v, 0, g_const(0), g_const(c->src->states[s].ne[0]));
        gb_name(&c->b, sl, "state_prefix");
        return sl;
    }
    return v;
}

/* Can write nd be turned into a masked whole-window write? 2-D state, data-dependent begin on
 * axis 1 only, full static extent on axis 0, value's axis 1 the call's n (like the one-hot). */
static bool maskable(const g_program *p, const g_node *nd) {
    const g_state *s = &p->states[nd->p.write.state];
    const g_tensor *v = &p->tensors[nd->in[0]];
    const g_affine *b = nd->p.write.begin;
    return s->n_dims == 2 && b[1].has_pos && !b[1].has_n && !b[0].has_pos && !b[0].has_n && b[0].base == 0 &&
           !(v->n_mask & 1) && v->ne[0] == s->ne[0] && v->n_dims == 2 && (v->n_mask & 2) && v->ne[1] == 0 &&
           !b[2].has_pos && !b[3].has_pos;
}

/* Does write nd cover the whole (logical, source) state at begin 0 with static extents? */
static bool covers_state(const g_program *p, const g_node *nd) {
    const g_state *s = &p->states[nd->p.write.state];
    const g_tensor *v = &p->tensors[nd->in[0]];
    for (int d = 0; d < 4; d++) {
        g_affine b = nd->p.write.begin[d];
        if (b.has_n || b.has_pos || b.base != 0 || ((v->n_mask >> d) & 1) || v->ne[d] != s->ne[d]) return false;
    }
    return true;
}

/* Static window: begin and extent fixed on every axis. */
static bool spliceable(const g_program *p, const g_node *nd) {
    const g_tensor *v = &p->tensors[nd->in[0]];
    for (int d = 0; d < 4; d++) {
        g_affine b = nd->p.write.begin[d];
        if (b.has_n || b.has_pos || ((v->n_mask >> d) & 1)) return false;
    }
    return true;
}

/* base with v written at begin, by SLICE and CONCAT from the outermost axis d down. */
static int32_t splice(lctx *c, int32_t base, int32_t v, const g_affine *begin, int d) {
    g_builder *b = &c->b;
    for (; d >= 0 && !b->status; d--) {
        const g_tensor *B = &c->dst->tensors[base], *V = &c->dst->tensors[v];
        int64_t b0 = begin[d].base, ext = V->ne[d], full = B->ne[d];
        if (b0 == 0 && ext == full && !((B->n_mask >> d) & 1)) continue;
        int32_t pre = b0 > 0 ? gb_slice(b, base, d, g_const(0), g_const(b0)) : -1;
        int32_t mid = gb_slice(b, base, d, g_const(b0), g_const(ext));
        int64_t post_len = full - b0 - ext;
        int32_t post = post_len > 0 ? gb_slice(b, base, d, g_const(b0 + ext), g_const(post_len)) : -1;
        int32_t r = splice(c, mid, v, begin, d - 1);
        if (pre >= 0) r = gb_concat(b, pre, r, d);
        if (post >= 0) r = gb_concat(b, r, post, d);
        gb_name(b, r, "merged_write");
        return r;
    }
    return v;
}

/* SELECT(rows written, value placed by the one-hot matrix, base): the state after writing v at
 * begin (begin[1] data-dependent), as a static whole-state value. */
static int32_t masked(lctx *c, int32_t base, int32_t v, int64_t L, g_affine begin1) {
    g_builder *b = &c->b;
    onehot_entry *oe = NULL;
    for (int32_t i = 0; i < c->n_onehot; i++)
        if (c->onehot[i].L == L && !memcmp(&c->onehot[i].begin, &begin1, sizeof begin1)) oe = &c->onehot[i];
    onehot_entry tmp;
    if (!oe) {
        int32_t layer = b->layer;
        b->layer = -1;
        tmp.L = L;
        tmp.begin = begin1;
        tmp.oh = gb_onehot(b, L, begin1); /* (L, n) */
        gb_name(b, tmp.oh, "write_onehot");
        g_affine ne[4] = {g_const(1), g_const(L), g_const(1), g_const(1)};
        tmp.mask = gb_reshape(b, gb_sum(b, tmp.oh, 1), 2, ne); /* (1, L) */
        gb_name(b, tmp.mask, "write_mask");
        b->layer = layer;
        if (c->n_onehot < MAX_ONEHOT) c->onehot[c->n_onehot++] = tmp;
        oe = &tmp;
    }
    int32_t placed = gb_matmul_t(b, v, oe->oh); /* (D, L) */
    gb_name(b, placed, "write_placed");
    int32_t r = gb_select(b, oe->mask, placed, base);
    gb_name(b, r, "masked_write");
    return r;
}

static int32_t map_input(lctx *c, int32_t t) {
    if (c->map[t] >= 0) return c->map[t];
    const g_tensor *x = &c->src->tensors[t];
    if (x->storage == G_WEIGHT) {
        c->map[t] = graph_add_weight(c->dst, x->name, x->dtype, x->n_dims, x->ne, x->data, x->size_bytes, c->e);
        if (c->map[t] < 0 && !c->b.status) c->b.status = SLM_ERR_NOMEM;
        return c->map[t];
    }
    if (!c->b.status) c->b.status = err_set(c->e, SLM_ERR_INVALID_ARG, "legalize: %s is used before it is produced", x->name);
    return -1;
}

/* ---- per-function strategies ------------------------------------------------------------------ */

static slm_status choose(lctx *c, int32_t fn) {
    const g_program *p = c->src;
    const g_function *f = &p->functions[fn];
    const tgt_state_rule *one = tgt_rule(c->t, TGT_WRITE_ONE_PER_FN), *stat = tgt_rule(c->t, TGT_WRITE_STATIC_BEGIN);
    memset(c->strategy, 0, (size_t)p->n_states);
    for (int32_t s = 0; s < p->n_states; s++) {
        c->cur[s] = -1;
        c->writes_left[s] = 0;
    }
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        if (nd->op == G_OP_STATE_WRITE) c->writes_left[nd->p.write.state]++;
    }
    for (int32_t s = 0; s < p->n_states; s++) {
        int32_t n = c->writes_left[s];
        if (n == 0) continue;
        bool ok = true, dynamic = false, after_first = false;
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            if (nd->op == G_OP_STATE_WRITE && nd->p.write.state == s) {
                dynamic |= nd->p.write.begin[1].has_pos || nd->p.write.begin[0].has_pos || nd->p.write.begin[2].has_pos;
                if (!covers_state(p, nd) && !spliceable(p, nd) && !maskable(p, nd)) ok = false;
                after_first = true;
            }
            /* a read after the first write becomes the merged value: fine unless ATTENTION needs the view */
            if (after_first && nd->op == G_OP_STATE_READ && nd->p.read.state == s && c->feeds_attention[s]) ok = false;
        }
        slm_status st = SLM_OK;
        if (one && n > 1 && ok) {
            c->strategy[s] = ST_MERGE;
            st = record(c, "merge", fn, s, NULL, "%s in %s: %d writes -> one write of the whole state (%s)",
                        p->states[s].name, f->name, n, one->id);
        } else if (stat && n == 1 && dynamic) {
            for (int32_t i = 0; i < f->n_nodes; i++) {
                const g_node *nd = &p->nodes[f->nodes[i]];
                if (nd->op != G_OP_STATE_WRITE || nd->p.write.state != s || !maskable(p, nd)) continue;
                char bt[32];
                plan_affine_text(nd->p.write.begin[1], bt, sizeof bt);
                c->strategy[s] = ST_MASK;
                st = record(c, "static_window", fn, s, NULL,
                            "%s in %s: write at %s -> whole window [0,%lld) at 0, SELECT with a one-hot mask of %s (%s)",
                            p->states[s].name, f->name, bt, (long long)p->states[s].ne[1], bt, stat->id);
            }
        }
        if (st) return st;
    }
    return SLM_OK;
}

static void emit_write(lctx *c, const g_node *nd) {
    g_builder *b = &c->b;
    const g_program *p = c->src;
    int32_t s = nd->p.write.state;
    int32_t v = map_input(c, nd->in[0]);
    static const g_affine origin[4] = {{0, false, false, 0}, {0, false, false, 0}, {0, false, false, 0},
                                       {0, false, false, 0}};
    if (v < 0) return;
    switch (c->strategy[s]) {
    case ST_MASK:
        gb_state_write(b, s, masked(c, read_state(c, s), v, p->states[s].ne[1], nd->p.write.begin[1]), origin);
        break;
    case ST_MERGE: {
        int32_t base = c->cur[s] >= 0 ? c->cur[s] : read_state(c, s);
        if (covers_state(p, nd)) c->cur[s] = v;
        else if (spliceable(p, nd)) c->cur[s] = splice(c, base, v, nd->p.write.begin, p->states[s].n_dims - 1);
        else c->cur[s] = masked(c, base, v, p->states[s].ne[1], nd->p.write.begin[1]);
        if (--c->writes_left[s] == 0) gb_state_write(b, s, c->cur[s], origin);
        break;
    }
    default: gb_state_write(b, s, v, nd->p.write.begin); break;
    }
}

static slm_status emit_function(lctx *c, int32_t fn) {
    const g_program *p = c->src;
    const g_function *f = &p->functions[fn];
    int32_t dfn;
    slm_status st = graph_add_function(c->dst, f->name, f->symbolic_n, f->fixed_n, &dfn, c->e);
    if (st) return st;
    gb_init(&c->b, c->dst, dfn, c->e);
    c->n_onehot = 0;
    if ((st = choose(c, fn))) return st;
    g_builder *b = &c->b;
    if (f->tokens >= 0) c->map[f->tokens] = gb_tokens(b);
    for (int32_t i = 0; i < f->n_nodes && !b->status; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        b->layer = nd->layer;
        if (nd->op == G_OP_STATE_WRITE) {
            emit_write(c, nd);
            continue;
        }
        if (nd->op == G_OP_STATE_READ) {
            int32_t s = nd->p.read.state;
            if (c->strategy[s] == ST_MERGE && c->cur[s] >= 0) {
                slm_dtype dt = (slm_dtype)c->dst->states[s].dtype;
                int32_t r = dt == SLM_DTYPE_F32 ? c->cur[s] : gb_round(b, c->cur[s], dt);
                if (dt != SLM_DTYPE_F32) gb_name(b, r, "merged_state");
                c->map[nd->out[0]] = r;
            } else {
                c->map[nd->out[0]] = read_state(c, s);
            }
            continue;
        }
        int32_t in[G_MAX_IN], out[G_MAX_OUT];
        for (int k = 0; k < nd->n_in; k++) in[k] = map_input(c, nd->in[k]);
        if (b->status) break;
        if (gb_clone_node(b, p, nd, in, out) < 0) break;
        for (int k = 0; k < nd->n_out; k++) c->map[nd->out[k]] = out[k];
    }
    b->layer = -1;
    if (!b->status && f->logits >= 0) gb_set_output(b, c->map[f->logits], f->output);
    if (!b->status && f->aux >= 0) gb_set_aux(b, c->map[f->aux]);
    return b->status;
}

/* ---- padding (after emission: the writes are final) -------------------------------------------- */

static slm_status pad_states(lctx *c) {
    const tgt_state_rule *r = tgt_rule(c->t, TGT_WRITE_FULL_EXTENT);
    if (!r) return SLM_OK;
    g_program *q = c->dst;
    for (int32_t fn = 0; fn < q->n_functions; fn++) {
        const g_function *f = &q->functions[fn];
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &q->nodes[f->nodes[i]];
            if (nd->op != G_OP_STATE_WRITE || !check_write_full_extent(q, fn, nd)) continue;
            g_state *s = &q->states[nd->p.write.state];
            int32_t a = tgt_written_axis(s);
            if (a != s->n_dims - 1) continue; /* only the outermost axis pads in place; the rule stays broken */
            char win[160];
            plan_window_text(q, nd, win, sizeof win);
            s->alloc_ne[a] = s->alloc_ne[a] + 1;
            slm_status st = record(c, "pad", -1, nd->p.write.state, NULL,
                                   "%s: axis %d allocated %lld -> %lld; window %s (in %s) no longer covers it (%s)",
                                   s->name, a, (long long)s->ne[a], (long long)s->alloc_ne[a], win, f->name, r->id);
            if (st) return st;
        }
    }
    return SLM_OK;
}

slm_status legalize_program(const g_program *p, const tgt_profile *t, g_program **out, plan_rewrites *rw, slm_err *e) {
    *out = NULL;
    lctx c;
    memset(&c, 0, sizeof c);
    c.src = p;
    c.t = t;
    c.rw = rw;
    c.e = e;
    const slm_allocator *a = &p->alloc;
    size_t ns = (size_t)p->n_states + 1;
    slm_status st = graph_create(a, &c.dst);
    if (st) return err_set(e, st, "out of memory legalising the program");
    c.dst->max_call_tokens = p->max_call_tokens;
    c.map = al_array(a, (size_t)p->n_tensors + 1, sizeof(int32_t));
    c.aligned = al_calloc(a, ns, sizeof(bool));
    c.feeds_attention = al_calloc(a, ns, sizeof(bool));
    c.strategy = al_calloc(a, ns, 1);
    c.cur = al_array(a, ns, sizeof(int32_t));
    c.writes_left = al_array(a, ns, sizeof(int32_t));
    if (!c.map || !c.aligned || !c.feeds_attention || !c.strategy || !c.cur || !c.writes_left) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory legalising the program");
        goto done;
    }
    for (int32_t i = 0; i < p->n_tensors; i++) c.map[i] = -1;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const g_node *nd = &p->nodes[i];
        if (nd->op != G_OP_ATTENTION) continue;
        for (int k = 1; k < 3; k++)
            if (p->tensors[nd->in[k]].storage == G_STATE_VIEW) c.feeds_attention[p->tensors[nd->in[k]].src] = true;
    }
    if ((st = declare_states(&c))) goto done;
    for (int32_t fn = 0; fn < p->n_functions && !st; fn++) st = emit_function(&c, fn);
    if (!st) st = pad_states(&c);
    if (!st && (st = graph_verify(c.dst, e))) err_prefix(e, "legalised program: ");
done:
    al_free(a, c.map);
    al_free(a, c.aligned);
    al_free(a, c.feeds_attention);
    al_free(a, c.strategy);
    al_free(a, c.cur);
    al_free(a, c.writes_left);
    if (st) graph_destroy(c.dst);
    else *out = c.dst;
    return st;
}
