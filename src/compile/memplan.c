/* memplan.c — liveness-based first-fit placement of activations in one arena. */
#include "compile/memplan.h"

#include <string.h>

#include "base/dtype.h"

size_t memplan_tensor_bytes(const g_tensor *t, int64_t n) {
    size_t el = t->dtype == SLM_DTYPE_F16 || t->dtype == SLM_DTYPE_BF16 ? 2 : 4;
    return (size_t)g_nelements(t, n) * el;
}

void memplan_free(const g_program *p, memplan *mp) {
    if (!mp) return;
    al_free(&p->alloc, mp->offset);
    memset(mp, 0, sizeof *mp);
}

typedef struct interval {
    size_t begin, end; /* [begin, end) bytes in use */
    int32_t release;   /* node index after which it is free */
} interval;

/* Root of a view chain (the tensor that owns bytes). */
static int32_t root_of(const g_program *p, int32_t t) {
    while (p->tensors[t].storage == G_VIEW) t = p->tensors[t].src;
    return t;
}

slm_status memplan_build(const g_program *p, int32_t fn, int64_t n, const int32_t *step_of, const uint8_t *not_stored,
                         const uint8_t *keep, memplan *mp, slm_err *e) {
    memplan_free(p, mp);
    const g_function *f = &p->functions[fn];
    size_t nt = (size_t)p->n_tensors;
    int32_t *last_use = al_array(&p->alloc, nt ? nt : 1, sizeof(int32_t));
    interval *live = al_array(&p->alloc, nt ? nt : 1, sizeof(interval));
    mp->offset = al_array(&p->alloc, nt ? nt : 1, sizeof(size_t));
    /* positions in step order (stable): a step may run a node placed after a later step's node */
    int32_t *order = step_of ? al_array(&p->alloc, (size_t)f->n_nodes + 1, sizeof(int32_t)) : NULL;
    int32_t *first = step_of ? al_calloc(&p->alloc, (size_t)f->n_nodes + 2, sizeof(int32_t)) : NULL;
    if (!last_use || !live || !mp->offset || (step_of && (!order || !first))) {
        al_free(&p->alloc, order);
        al_free(&p->alloc, first);
        al_free(&p->alloc, last_use);
        al_free(&p->alloc, live);
        memplan_free(p, mp);
        return err_set(e, SLM_ERR_NOMEM, "out of memory planning %s", f->name);
    }
    if (step_of) { /* counting sort by step; steps are < n_nodes */
        for (int32_t i = 0; i < f->n_nodes; i++) first[step_of[i] + 1]++;
        for (int32_t k = 0; k < f->n_nodes; k++) first[k + 1] += first[k];
        for (int32_t i = 0; i < f->n_nodes; i++) order[first[step_of[i]]++] = i;
        al_free(&p->alloc, first);
    }
    mp->fn = fn;
    mp->n = n;
    mp->n_offsets = (int32_t)nt;
    for (size_t t = 0; t < nt; t++) {
        last_use[t] = -1;
        mp->offset[t] = MEMPLAN_NONE;
    }
    int32_t end = f->n_nodes; /* after every step (steps are at most the nodes) */
    for (int32_t i = 0; i < f->n_nodes; i++) {
        const g_node *nd = &p->nodes[f->nodes[i]];
        int32_t step = step_of ? step_of[i] : i;
        for (int k = 0; k < nd->n_in; k++) {
            int32_t r = root_of(p, nd->in[k]);
            if (last_use[r] < step) last_use[r] = step;
        }
        for (int k = 0; k < nd->n_out; k++) {
            int32_t r = root_of(p, nd->out[k]);
            if (last_use[r] < step) last_use[r] = step;
        }
    }
    if (f->logits >= 0) last_use[root_of(p, f->logits)] = end;
    if (f->aux >= 0) last_use[root_of(p, f->aux)] = end;
    for (size_t t = 0; keep && t < nt; t++)
        if (keep[t] && p->tensors[root_of(p, (int32_t)t)].fn == fn) last_use[root_of(p, (int32_t)t)] = end;
    int32_t n_live = 0;
    size_t arena = 0;
    /* The token input lives for the whole call. */
    if (f->tokens >= 0) {
        mp->offset[f->tokens] = 0;
        arena = (memplan_tensor_bytes(&p->tensors[f->tokens], n) + MEMPLAN_ALIGN - 1) & ~(size_t)(MEMPLAN_ALIGN - 1);
        live[n_live++] = (interval){0, arena, end};
    }
    for (int32_t at = 0; at < f->n_nodes; at++) {
        int32_t i = order ? order[at] : at;
        const g_node *nd = &p->nodes[f->nodes[i]];
        int32_t step = step_of ? step_of[i] : i;
        /* release intervals whose last use was in an earlier step */
        for (int32_t j = 0; j < n_live;) {
            if (live[j].release < step) live[j] = live[--n_live];
            else j++;
        }
        for (int k = 0; k < nd->n_out; k++) {
            int32_t t = nd->out[k];
            if (p->tensors[t].storage != G_ACTIVATION || (not_stored && not_stored[t])) continue;
            size_t bytes = (memplan_tensor_bytes(&p->tensors[t], n) + MEMPLAN_ALIGN - 1) & ~(size_t)(MEMPLAN_ALIGN - 1);
            /* first fit: lowest offset whose [off, off+bytes) overlaps no live interval */
            size_t off = 0;
            for (bool moved = true; moved;) {
                moved = false;
                for (int32_t j = 0; j < n_live; j++) {
                    if (off < live[j].end && live[j].begin < off + bytes) {
                        off = live[j].end;
                        moved = true;
                    }
                }
            }
            mp->offset[t] = off;
            live[n_live++] = (interval){off, off + bytes, last_use[t] < step ? step : last_use[t]};
            if (off + bytes > arena) arena = off + bytes;
        }
    }
    mp->arena_bytes = arena;
    al_free(&p->alloc, order);
    al_free(&p->alloc, last_use);
    al_free(&p->alloc, live);
    return SLM_OK;
}
