/* check.c — evaluates a target profile's tables against a Program before anything is compiled:
 * every node whose op/dtype the target rejects or runs elsewhere, every state write that breaks
 * a state rule (full extent, several writes per function, data-dependent begin) and every state
 * whose layout does (dtype, innermost alignment), each with the rule, the node and the fix
 * legalize.c applies. It reads the Program and the profile only; it changes nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compile/plan.h"

void plan_affine_text(g_affine a, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    if (a.has_pos) o += (size_t)snprintf(buf + o, cap - o, "pos");
    if (a.has_n && o < cap) o += (size_t)snprintf(buf + o, cap - o, "%sn", o ? "+" : "");
    if (o < cap && (a.base != 0 || o == 0))
        o += (size_t)snprintf(buf + o, cap - o, o ? "%+lld" : "%lld", (long long)a.base);
    if (o < cap && a.mod > 0) snprintf(buf + o, cap - o, " mod %lld", (long long)a.mod);
}

void plan_shape_text(const g_tensor *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < t->n_dims && o < cap; d++) {
        char ax[32];
        g_affine a = {t->ne[d], ((t->n_mask >> d) & 1) != 0, false, 0};
        plan_affine_text(a, ax, sizeof ax);
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", d ? ", " : "", ax);
    }
    if (o < cap) snprintf(buf + o, cap - o, ")");
}

void plan_window_text(const g_program *p, const g_node *nd, char *buf, size_t cap) {
    const g_state *s = &p->states[nd->p.write.state];
    const g_tensor *v = &p->tensors[nd->in[0]];
    size_t o = 0;
    buf[0] = '\0';
    for (int d = 0; d < s->n_dims && o < cap; d++) {
        g_affine b = nd->p.write.begin[d];
        g_affine end = {b.base + v->ne[d], b.has_n || ((v->n_mask >> d) & 1), b.has_pos, b.mod};
        char tb[32], te[32];
        plan_affine_text(b, tb, sizeof tb);
        plan_affine_text(end, te, sizeof te);
        o += (size_t)snprintf(buf + o, cap - o, "%s[%s,%s)", d ? " x " : "", tb, te);
    }
}

bool check_write_full_extent(const g_program *p, int32_t fn, const g_node *nd) {
    const g_function *f = &p->functions[fn];
    const g_state *s = &p->states[nd->p.write.state];
    const g_tensor *v = &p->tensors[nd->in[0]];
    int32_t a = tgt_written_axis(s);
    g_affine b = nd->p.write.begin[a];
    bool sym_ext = (v->n_mask >> a) & 1;
    if (b.has_pos) return false;
    if (f->symbolic_n && (b.has_n || sym_ext)) return false;
    int64_t n = f->symbolic_n ? 0 : f->fixed_n;
    return g_affine_eval(b, n, 0) == 0 && g_ne(v, a, n) == s->alloc_ne[a];
}

void check_cast_note(const g_state *s, slm_dtype to, char *buf, size_t cap) {
    buf[0] = '\0';
    if ((slm_dtype)s->dtype == to || to == SLM_DTYPE_F32) return;
    if (s->role == SLM_STATE_RECURRENT)
        snprintf(buf, cap, "%s -> %s loses precision, and the error compounds: the recurrent state is carried "
                 "and decayed across every token", slm_dtype_name((slm_dtype)s->dtype), slm_dtype_name(to));
    else if (s->dtype == SLM_DTYPE_Q8_0 || s->dtype == SLM_DTYPE_Q4_0)
        snprintf(buf, cap, "the %s KV cache becomes %s on the target: not quantised there (more bytes a token), "
                 "its outputs follow a %s cache, not this %s one", slm_dtype_name((slm_dtype)s->dtype),
                 slm_dtype_name(to), slm_dtype_name(to), slm_dtype_name((slm_dtype)s->dtype));
    else if (s->role == SLM_STATE_CONV)
        snprintf(buf, cap, "%s -> %s loses precision (bounded: the conv state holds the last %lld inputs and is "
                 "replaced as tokens move on)", slm_dtype_name((slm_dtype)s->dtype), slm_dtype_name(to),
                 (long long)s->ne[tgt_written_axis(s)]);
    else
        snprintf(buf, cap, "%s -> %s loses precision", slm_dtype_name((slm_dtype)s->dtype), slm_dtype_name(to));
}

static plan_finding *add(const g_program *p, plan_findings *out) {
    if (out->n == out->cap) {
        int32_t cap = out->cap ? out->cap * 2 : 64;
        plan_finding *v = al_realloc(&p->alloc, out->v, (size_t)out->cap * sizeof *v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        out->v = v;
        out->cap = cap;
    }
    plan_finding *f = &out->v[out->n++];
    memset(f, 0, sizeof *f);
    f->fn = f->index = f->node = f->layer = f->state = -1;
    return f;
}

static void fmt(char *buf, size_t cap, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t cap, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(buf, cap, format, ap);
    va_end(ap);
}

static void from_rule(plan_finding *f, const tgt_state_rule *r) {
    f->rule = r->id;
    f->rule_text = r->text;
    f->source = r->source;
    f->effect = r->effect;
    f->kind = r->kind;
}

static slm_status state_findings(const g_program *p, const tgt_profile *t, plan_findings *out, slm_err *e) {
    const tgt_state_rule *rd = tgt_rule(t, TGT_STATE_DTYPE), *ra = tgt_rule(t, TGT_STATE_ALIGN),
                         *rm = tgt_rule(t, TGT_STATE_MAX_EXTENT);
    for (int32_t i = 0; i < p->n_states; i++) {
        const g_state *s = &p->states[i];
        int longest = 0;
        for (int d = 1; d < s->n_dims; d++)
            if (s->alloc_ne[d] > s->alloc_ne[longest]) longest = d;
        if (rm && rm->max_extent > 0 && s->alloc_ne[longest] > rm->max_extent) {
            plan_finding *f = add(p, out);
            if (!f) return err_set(e, SLM_ERR_NOMEM, "out of memory checking the program");
            from_rule(f, rm);
            f->state = i;
            f->layer = s->layer;
            f->op = G_OP_STATE_WRITE;
            fmt(f->detail, sizeof f->detail, "%s axis %d holds %lld elements (allocated shape), more than %lld", s->name,
                longest, (long long)s->alloc_ne[longest], (long long)rm->max_extent);
            fmt(f->fix, sizeof f->fix, "none: %s", longest == s->pos_axis ? "a shorter context shrinks this axis"
                                                                          : "the model's shape fixes this axis");
        }
        if (rd && !((rd->dtypes >> s->dtype) & 1)) {
            plan_finding *f = add(p, out);
            if (!f) return err_set(e, SLM_ERR_NOMEM, "out of memory checking the program");
            from_rule(f, rd);
            f->state = i;
            f->layer = s->layer;
            f->op = G_OP_STATE_WRITE;
            fmt(f->detail, sizeof f->detail, "%s is %s", s->name, slm_dtype_name((slm_dtype)s->dtype));
            char note[200];
            check_cast_note(s, rd->cast_to, note, sizeof note);
            fmt(f->fix, sizeof f->fix, "cast %s to %s%s%s", s->name, slm_dtype_name(rd->cast_to), note[0] ? "; warning: " : "",
                note);
        }
        if (ra && ra->multiple > 1 && s->ne[0] % ra->multiple) {
            plan_finding *f = add(p, out);
            if (!f) return err_set(e, SLM_ERR_NOMEM, "out of memory checking the program");
            from_rule(f, ra);
            f->state = i;
            f->layer = s->layer;
            f->op = G_OP_STATE_WRITE;
            int64_t to = (s->ne[0] + ra->multiple - 1) / ra->multiple * ra->multiple;
            fmt(f->detail, sizeof f->detail, "%s has ne[0] = %lld, not a multiple of %lld", s->name, (long long)s->ne[0],
                (long long)ra->multiple);
            fmt(f->fix, sizeof f->fix, "pad axis 0 of %s from %lld to %lld; every read takes the first %lld", s->name,
                (long long)s->ne[0], (long long)to, (long long)s->ne[0]);
        }
    }
    return SLM_OK;
}

static slm_status write_findings(const g_program *p, const tgt_profile *t, int32_t fn, int32_t i, const g_node *nd,
                                 const int32_t *n_writes, plan_findings *out, slm_err *e) {
    const g_function *f = &p->functions[fn];
    const g_state *s = &p->states[nd->p.write.state];
    int32_t a = tgt_written_axis(s);
    char win[160];
    plan_window_text(p, nd, win, sizeof win);
    const tgt_state_rule *rules[3] = {tgt_rule(t, TGT_WRITE_FULL_EXTENT), tgt_rule(t, TGT_WRITE_ONE_PER_FN),
                                      tgt_rule(t, TGT_WRITE_STATIC_BEGIN)};
    for (int k = 0; k < 3; k++) {
        const tgt_state_rule *r = rules[k];
        if (!r) continue;
        int dyn_axis = -1;
        for (int d = 0; d < 4; d++)
            if (nd->p.write.begin[d].has_pos && dyn_axis < 0) dyn_axis = d;
        bool broken = r->kind == TGT_WRITE_FULL_EXTENT  ? check_write_full_extent(p, fn, nd)
                      : r->kind == TGT_WRITE_ONE_PER_FN ? n_writes[nd->p.write.state] > 1
                                                        : dyn_axis >= 0;
        if (!broken) continue;
        plan_finding *x = add(p, out);
        if (!x) return err_set(e, SLM_ERR_NOMEM, "out of memory checking the program");
        from_rule(x, r);
        x->fn = fn;
        x->index = i;
        x->node = f->nodes[i];
        x->layer = nd->layer;
        x->op = nd->op;
        x->state = nd->p.write.state;
        if (r->kind == TGT_WRITE_FULL_EXTENT) {
            fmt(x->detail, sizeof x->detail, "window %s covers all %lld of axis %d of %s", win, (long long)s->alloc_ne[a],
                a, s->name);
            fmt(x->fix, sizeof x->fix, "pad %s by one along axis %d (%lld -> %lld); the window stays as it is", s->name, a,
                (long long)s->alloc_ne[a], (long long)s->alloc_ne[a] + 1);
        } else if (r->kind == TGT_WRITE_ONE_PER_FN) {
            int32_t k_th = 0;
            for (int32_t j = 0; j <= i; j++) {
                const g_node *w = &p->nodes[f->nodes[j]];
                k_th += w->op == G_OP_STATE_WRITE && w->p.write.state == nd->p.write.state;
            }
            fmt(x->detail, sizeof x->detail, "write %d of %d into %s in %s, window %s", k_th,
                n_writes[nd->p.write.state], s->name, f->name, win);
            fmt(x->fix, sizeof x->fix, "merge the %d writes into %s in %s into one write of the whole state",
                n_writes[nd->p.write.state], s->name, f->name);
        } else {
            char b[32];
            plan_affine_text(nd->p.write.begin[dyn_axis], b, sizeof b);
            fmt(x->detail, sizeof x->detail, "window %s begins at %s on axis %d", win, b, dyn_axis);
            fmt(x->fix, sizeof x->fix,
                "write the whole window [0,%lld) of axis %d at begin 0: SELECT(one-hot mask of %s, value, state)",
                (long long)s->ne[dyn_axis], dyn_axis, b);
        }
    }
    return SLM_OK;
}

slm_status check_program(const g_program *p, const tgt_profile *t, plan_findings *out, slm_err *e) {
    slm_status st = state_findings(p, t, out, e);
    int32_t *n_writes = al_calloc(&p->alloc, (size_t)p->n_states + 1, sizeof(int32_t));
    if (!n_writes) return err_set(e, SLM_ERR_NOMEM, "out of memory checking the program");
    for (int32_t fn = 0; fn < p->n_functions && !st; fn++) {
        const g_function *f = &p->functions[fn];
        memset(n_writes, 0, ((size_t)p->n_states + 1) * sizeof(int32_t));
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            if (nd->op == G_OP_STATE_WRITE) n_writes[nd->p.write.state]++;
        }
        for (int32_t i = 0; i < f->n_nodes && !st; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            uint32_t dt = tgt_node_dtype(p, nd);
            const tgt_op_rule *r = tgt_op_lookup(t, nd->op, dt);
            if (!r || r->effect != TGT_OK) {
                plan_finding *x = add(p, out);
                if (!x) {
                    st = err_set(e, SLM_ERR_NOMEM, "out of memory checking the program");
                    break;
                }
                x->op_rule = true;
                x->effect = r ? r->effect : TGT_FALLBACK;
                x->rule = x->effect == TGT_REJECT ? "op.reject" : "op.fallback";
                x->rule_text = r ? r->why : "the target has no such op";
                x->source = t->name;
                x->fn = fn;
                x->index = i;
                x->node = f->nodes[i];
                x->layer = nd->layer;
                x->op = nd->op;
                if (nd->op == G_OP_STATE_WRITE) x->state = nd->p.write.state;
                if (nd->op == G_OP_STATE_READ) x->state = nd->p.read.state;
                fmt(x->detail, sizeof x->detail, "%s (%s) %s on %s: %s", g_op_name(nd->op),
                    slm_dtype_name((slm_dtype)dt), x->effect == TGT_REJECT ? "is rejected" : "does not run",
                    t->device.name, x->rule_text);
                fmt(x->fix, sizeof x->fix, "none: runs on %s", t->fallback.name);
            }
            if (nd->op == G_OP_STATE_WRITE) st = write_findings(p, t, fn, i, nd, n_writes, out, e);
        }
    }
    al_free(&p->alloc, n_writes);
    return st;
}
