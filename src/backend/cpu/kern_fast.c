/* kern_fast.c — the fast CPU kernels: for each op they take (cpu_fast_lookup), the work split
 * over threads and the calls into the ISA micro-kernels (cpu.h, struct cpu_isa). Nodes a fast
 * kernel does not take (other dtypes, the chunked DeltaNet, ops without a fast kernel) run the
 * reference kernel (kern_ref.c).
 *
 * Batch invariance: every output element is computed by one task with the same arithmetic for
 * any token count and thread count: matmuls split over row tiles (all columns of a tile use the
 * canonical arithmetic of cpu.h), attention over (token, head), DeltaNet over heads, the
 * elementwise ops and norms over rows. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"
#include "base/dtype.h"
#include "base/half.h"
#include "base/quant.h"

static int64_t ncols(const be_view *v) { return v->ne[1] * v->ne[2] * v->ne[3]; }
static int64_t nel(const be_view *v) { return v->ne[0] * ncols(v); }
static bool is_f32(const be_view *v) { return v->dtype == SLM_DTYPE_F32; }

/* Below this many elements an elementwise op runs on the calling thread only. */
#define PAR_MIN_ELEMS 32768

/* ---- MATMUL: y (m, cols) <- W (k, m), x (k, cols) -------------------------------------------- */

typedef struct mm_ctx {
    cpu_backend *cb;
    uint32_t wt;
    const uint8_t *w;
    size_t row_bytes;
    int64_t k, m, cols;
    const uint8_t *act; /* quantised columns, or NULL for float weights */
    const uint8_t *pk;  /* repacked weights (cpu_wpack_get), or NULL */
    const cpu_isa *pk_isa; /* the tier that runs them (cpu_mm_pick) */
    size_t tile_bytes;  /* bytes of one 16-row tile in pk */
    size_t act_stride;
    const float *x;
    float *y;
    int64_t tiles_per_task;
} mm_ctx;

#define MM_TILE 16
/* Prefill on float weights: tiles per task; mm_float then runs each block of activation columns
 * against all 64 rows, so the activations are read from L3 once per 64 rows, not per 4. */
#define MMF_PREFILL_TILES 4

static void mm_task(void *vctx, int64_t task, int32_t thread) {
    mm_ctx *c = vctx;
    const cpu_isa *isa = c->cb->isa;
    void *scratch = cpu_scratch(c->cb, thread);
    int64_t r0 = task * c->tiles_per_task * MM_TILE, r1 = r0 + c->tiles_per_task * MM_TILE;
    if (r1 > c->m) r1 = c->m;
    const uint8_t *w = c->w + (size_t)r0 * c->row_bytes;
    if (c->pk)
        c->pk_isa->mm_quant_packed(c->wt, c->pk + (size_t)(r0 / MM_TILE) * c->tile_bytes, r1 - r0, c->k, c->act,
                                   c->act_stride, c->cols, c->y + r0, c->m);
    else if (c->act)
        isa->mm_quant(c->wt, w, c->row_bytes, r1 - r0, c->k, c->act, c->act_stride, c->cols, c->y + r0, c->m, scratch);
    else
        isa->mm_float(c->wt, w, c->row_bytes, r1 - r0, c->k, c->x, c->cols, c->y + r0, c->m, scratch);
}

typedef struct quant_ctx {
    const cpu_isa *isa;
    uint32_t wt;
    const float *x;
    int64_t k, cols, per_task;
    uint8_t *act;
    size_t stride;
} quant_ctx;

static void quant_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    quant_ctx *q = vctx;
    int64_t c0 = task * q->per_task, c1 = c0 + q->per_task < q->cols ? c0 + q->per_task : q->cols;
    for (int64_t c = c0; c < c1; c++) q->isa->quant_act(q->wt, q->x + c * q->k, q->k, q->act + (size_t)c * q->stride);
}

static bool mm_supports(const g_node *nd, const be_view *out, const be_view *in) {
    (void)nd;
    if (!cpu_mm_supports(in[0].dtype) || !is_f32(&in[1]) || !is_f32(out)) return false;
    int64_t k = in[0].ne[0];
    if (in[0].ne[2] != 1 || in[0].ne[3] != 1 || in[1].ne[0] != k) return false;
    const dtype_traits *t = dtype_traits_of(in[0].dtype);
    return t && k % t->block_elems == 0;
}

static size_t mm_scratch(const cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in) {
    (void)cb, (void)nd, (void)out;
    return cpu_mm_scratch_bytes(in[0].dtype, in[0].ne[0], ncols(&in[1]));
}

/* The columns x (k, cols) quantised for weights of type wt into the shared work buffer; NULL when
 * out of memory. */
static uint8_t *quantise_act(cpu_backend *cb, uint32_t wt, const float *x, int64_t k, int64_t cols, slm_err *e) {
    size_t stride = cpu_act_bytes(wt, k);
    uint8_t *act = cpu_work(cb, stride * (size_t)cols, e);
    if (!act) return NULL;
    quant_ctx q = {cb->isa, wt, x, k, cols, 0, act, stride};
    q.per_task = cols * k < PAR_MIN_ELEMS ? cols : (cols + 4 * cb->n_threads - 1) / (4 * cb->n_threads);
    pool_run(cb->pool, (cols + q.per_task - 1) / q.per_task, quant_task, &q);
    return act;
}

/* Fills c for out <- in[0] x in[1] (act: the quantised columns for quantised weights, else NULL)
 * and returns its number of tasks. */
static int64_t mm_setup(cpu_backend *cb, const be_view *out, const be_view *in, uint8_t *act, mm_ctx *c) {
    memset(c, 0, sizeof *c);
    c->cb = cb;
    c->wt = in[0].dtype;
    c->w = in[0].data;
    c->k = in[0].ne[0];
    c->m = in[0].ne[1];
    c->cols = ncols(&in[1]);
    c->x = in[1].data;
    c->y = out->data;
    uint64_t rb = 0;
    dtype_row_bytes(c->wt, (uint64_t)c->k, &rb);
    c->row_bytes = (size_t)rb;
    if (act) {
        c->act = act;
        c->act_stride = cpu_act_bytes(c->wt, c->k);
        c->pk = cpu_wpack_get(cb, c->wt, c->w, c->row_bytes, c->k, c->m);
        if (c->pk) c->tile_bytes = (size_t)(c->k / CPU_QK) * cb->isa->tile_block_bytes(c->wt);
        c->pk_isa = cpu_mm_pick(cb, c->wt, c->cols);
    } else {
        const uint8_t *copy = cpu_wpack_get(cb, c->wt, c->w, c->row_bytes, c->k, c->m); /* on huge pages */
        if (copy) c->w = copy;
    }
    int64_t n_tiles = (c->m + MM_TILE - 1) / MM_TILE;
    /* Quantised weights, any column count: two long row ranges per thread, each streamed and
     * prefetched sequentially. Measured against one tile (group) per task, which restarts the
     * stream and the prefetch every 2 tiles (Intel Xeon, 2 threads): verify passes of 4 and 8
     * columns and batched decode of 4-8 streams 1.2-1.3x faster, prefills of 16 and 32 columns
     * 1.14x and 1.07x, 64 to 512 the same. Float weights with 4+ columns: MMF_PREFILL_TILES per task. */
    c->tiles_per_task = (n_tiles + 2 * cb->n_threads - 1) / (2 * cb->n_threads);
    if (c->cols >= 4 && !c->act) c->tiles_per_task = MMF_PREFILL_TILES;
    if (c->cols * c->k * c->m < 4 * PAR_MIN_ELEMS) c->tiles_per_task = n_tiles;
    if (c->pk) { /* ranges start at a tile group (a pair of interleaved tiles) */
        int64_t g = cb->isa->tile_group(c->wt);
        c->tiles_per_task = (c->tiles_per_task + g - 1) / g * g;
    }
    return (n_tiles + c->tiles_per_task - 1) / c->tiles_per_task;
}

static slm_status k_matmul(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)nd, (void)call;
    uint8_t *act = NULL;
    if (cpu_mm_is_quant(in[0].dtype) && !(act = quantise_act(cb, in[0].dtype, in[1].data, in[0].ne[0], ncols(&in[1]), e)))
        return SLM_ERR_NOMEM;
    mm_ctx c;
    int64_t n_tasks = mm_setup(cb, out, in, act, &c);
    pool_run(cb->pool, n_tasks, mm_task, &c);
    return SLM_OK;
}

/* ---- MATMUL groups: several weights against the same activations, one job ----------------------- */

#define MM_GROUP_MAX 8

typedef struct mm_group_ctx {
    mm_ctx mm[MM_GROUP_MAX];
    int64_t first_task[MM_GROUP_MAX + 1]; /* tasks of matrix i: [first_task[i], first_task[i + 1]) */
    int32_t n;
} mm_group_ctx;

static void mm_group_task(void *vctx, int64_t task, int32_t thread) {
    mm_group_ctx *g = vctx;
    int32_t i = 0;
    while (task >= g->first_task[i + 1]) i++;
    mm_task(&g->mm[i], task - g->first_task[i], thread);
}

bool cpu_matmul_group_takes(int32_t n, const be_view *out, const be_view *in) {
    if (n < 2 || n > MM_GROUP_MAX) return false;
    uint32_t wt = in[0].dtype;
    for (int32_t i = 0; i < n; i++) {
        const be_view *w = &in[2 * i], *x = &in[2 * i + 1];
        if (!mm_supports(NULL, &out[i], w) || !cpu_mm_is_quant(w->dtype) || w->dtype != wt || w->ne[0] != in[0].ne[0] ||
            x->data != in[1].data || ncols(x) != ncols(&in[1]))
            return false;
    }
    return true;
}

slm_status cpu_matmul_group(cpu_backend *cb, int32_t n, const be_view *out, const be_view *in, slm_err *e) {
    if (!cpu_matmul_group_takes(n, out, in)) return SLM_ERR_UNSUPPORTED;
    uint32_t wt = in[0].dtype;
    uint8_t *act = quantise_act(cb, wt, in[1].data, in[0].ne[0], ncols(&in[1]), e);
    if (!act) return SLM_ERR_NOMEM;
    mm_group_ctx g;
    g.n = n;
    g.first_task[0] = 0;
    for (int32_t i = 0; i < n; i++) g.first_task[i + 1] = g.first_task[i] + mm_setup(cb, &out[i], &in[2 * i], act, &g.mm[i]);
    pool_run(cb->pool, g.first_task[n], mm_group_task, &g);
    return SLM_OK;
}

/* ---- ATTENTION: (hdv, H, n) <- q (hd, H, n), K state (hd*Hkv, ctx), V state (hdv*Hkv, ctx) ---- */

/* The KV state types attn_chunk_q reads. */
static bool kv_is_quant(uint32_t t) { return t == SLM_DTYPE_Q8_0 || t == SLM_DTYPE_Q4_0; }

/* Bytes of n elements (a multiple of the block size) of a state of type t. */
static size_t kv_bytes(uint32_t t, int64_t n) {
    uint64_t b = 0;
    dtype_row_bytes(t, (uint64_t)n, &b);
    return (size_t)b;
}

typedef struct attn_ctx {
    cpu_backend *cb;
    const be_view *q, *k, *v, *out;
    int64_t hd, hdv, H, Hkv, pos, n, window, ring;
    float scale;
    /* the split of decode's keys: chunks [ch0, ch0 + nch) cut into nseg runs per KV head; chunk c
     * of KV head g writes its n*G partials at part + (c*Hkv + g) * n*G * cpu_attn_part_floats(hdv) */
    int64_t ch0, nch, nseg;
    float *part;
    /* the fold, in chunk order, of fold units (every KV head together: 1; else one per KV head):
     * unit u's totals (rows of its heads, as in part) at tot + u * ng*n*G * cpu_attn_part_floats(hdv);
     * done[s * units + u]: run s of unit u has written its partials; fold[u]: its cursor */
    int64_t units;
    float *tot;
    atomic_int *done;
    struct attn_fold_cursor *fold;
} attn_ctx;

/* Unit u's fold: runs [0, next) folded; busy: one thread folds at a time (and keeps it once the
 * unit's outputs are written). */
typedef struct attn_fold_cursor {
    atomic_int_fast64_t next;
    atomic_int busy;
} attn_fold_cursor;

#define ATTN_TB 16 /* query tokens per task */
#define ATTN_HEADS_ROWS 64 /* rows (tokens x query heads) up to which a split runs its KV heads together */

/* K and V of KV head g (head offsets in bytes of the states' types). */
static void attn_heads(const attn_ctx *c, int64_t g, const uint8_t **kb, const uint8_t **vb) {
    *kb = (const uint8_t *)c->k->data + kv_bytes(c->k->dtype, g * c->hd);
    *vb = (const uint8_t *)c->v->data + kv_bytes(c->v->dtype, g * c->hdv);
}

static bool attn_quant(const attn_ctx *c) { return kv_is_quant(c->k->dtype) || kv_is_quant(c->v->dtype); }

/* Task = (block of ATTN_TB tokens, KV head), the latest tokens (most keys) first for balance. */
static void attn_task(void *vctx, int64_t task, int32_t thread) {
    attn_ctx *c = vctx;
    int64_t nblk = (c->n + ATTN_TB - 1) / ATTN_TB;
    int64_t blk = nblk - 1 - task / c->Hkv, g = task % c->Hkv, G = c->H / c->Hkv;
    int64_t t0 = blk * ATTN_TB, T = c->n - t0 < ATTN_TB ? c->n - t0 : ATTN_TB;
    const float *q = (const float *)c->q->data + (t0 * c->H + g * G) * c->hd;
    float *y = (float *)c->out->data + (t0 * c->H + g * G) * c->hdv;
    const uint8_t *kb, *vb;
    attn_heads(c, g, &kb, &vb);
    if (attn_quant(c))
        cpu_attn_block_q(c->cb->isa, q, c->H * c->hd, T, G, kb, vb, c->k->dtype, c->v->dtype, c->k->ne[0],
                         c->v->ne[0], c->hd, c->hdv, c->pos + t0 + 1, c->window, c->ring, c->scale, y, c->H * c->hdv,
                         cpu_scratch(c->cb, thread));
    else
        cpu_attn_block(c->cb->isa, q, c->H * c->hd, T, G, kb, vb, c->k->dtype, c->k->ne[0], c->v->ne[0], c->hd,
                       c->hdv, c->pos + t0 + 1, c->window, c->ring, c->scale, y, c->H * c->hdv,
                       cpu_scratch(c->cb, thread));
}

/* Run s of a split: its chunks [*cb0, *cb1) of the nch, and the returned prefetch end (cpu.h
 * attn_chunk's pf_end: the run's last key, within the call's keys). */
static int64_t attn_run(const attn_ctx *c, int64_t s, int64_t *cb0, int64_t *cb1) {
    *cb0 = s * c->nch / c->nseg, *cb1 = (s + 1) * c->nch / c->nseg;
    int64_t end = (c->ch0 + *cb1) * CPU_ATTN_CHUNK, nk_max = c->pos + c->n;
    return end < nk_max ? end : nk_max;
}

/* Fold unit u = the rows of KV heads [g0, g0 + ng) (each: tokens x its G query heads), adjacent in
 * every chunk's partials and in the unit's totals. Run s's chunks folded in order, all rows of a
 * chunk at once (the tier's attn_fold_rows). */
static void attn_fold_run(const attn_ctx *c, int64_t u, int64_t s, int64_t g0, int64_t ng) {
    int64_t R = c->n * (c->H / c->Hkv), pf = cpu_attn_part_floats(c->hdv), cb0, cb1;
    attn_run(c, s, &cb0, &cb1);
    for (int64_t ch = cb0; ch < cb1; ch++)
        c->cb->isa->attn_fold_rows(c->tot + u * ng * R * pf, c->part + (ch * c->Hkv + g0) * R * pf, ng * R, c->hdv);
}

/* Run s of unit u has written its partials: whichever thread finds the unit's fold free folds
 * every finished run from its cursor on, in order, so the fold of chunk c waits only for the runs
 * up to c, not for the slowest run; the fold of the last run writes the outputs. The fold's bits
 * are the order's, the same as one thread folding every chunk after the last run (cpu.h). The
 * flag's release is followed by a look at the next run (seq_cst, against the run finishing
 * thread's store then exchange): a run that finishes while its fold is held is never left behind.
 * SmolLM2 at depth 8192 (Zen 3, statelm bench -d 8192 -t 2): folding every chunk after the last
 * run took 10% of the attention node, one thread folding while the other waited. */
static void attn_run_done(attn_ctx *c, int64_t u, int64_t s, int64_t g0, int64_t ng) {
    attn_fold_cursor *f = &c->fold[u];
    atomic_store(&c->done[s * c->units + u], 1);
    for (;;) {
        if (atomic_exchange(&f->busy, 1)) return; /* its holder looks at run next after letting go */
        int64_t next = atomic_load_explicit(&f->next, memory_order_relaxed);
        while (next < c->nseg && atomic_load(&c->done[next * c->units + u])) attn_fold_run(c, u, next++, g0, ng);
        atomic_store_explicit(&f->next, next, memory_order_relaxed);
        if (next == c->nseg) {
            int64_t G = c->H / c->Hkv, R = c->n * G, pf = cpu_attn_part_floats(c->hdv);
            const float *tot = c->tot + u * ng * R * pf;
            for (int64_t r = 0; r < ng * R; r++) {
                int64_t g = g0 + r / R, rg = r % R;
                cpu_attn_finish(tot + r * pf, c->hdv,
                                (float *)c->out->data + ((rg / G) * c->H + g * G + rg % G) * c->hdv);
            }
            return; /* busy stays set: nothing is left to fold */
        }
        atomic_store(&f->busy, 0);
        if (!atomic_load(&c->done[next * c->units + u])) return;
    }
}

/* The rows of the first ATTN_WARM_BLOCKS blocks of 16 keys of run [cb0, cb1), the columns of KV
 * heads [g0, g0 + ng), prefetched into L2 before its products. The kernels prefetch a few blocks
 * ahead of their cursor, up to the run's end (pf_end): without this each run starts on demand
 * misses. SmolLM2 at depth 8192 (statelm bench -d 8192 -t 2, Zen 4, alternated): 86.5 / 89.3
 * and 85.7 / 90.1 tok/s without / with; Gemma 3 (one KV head, the per-head split) neutral. */
#define ATTN_WARM_BLOCKS 4
static void attn_run_warm(const attn_ctx *c, int64_t g0, int64_t ng, int64_t cb0, int64_t pf_end) {
    int64_t j0 = (c->ch0 + cb0) * CPU_ATTN_CHUNK, j1 = j0 + 16 * ATTN_WARM_BLOCKS;
    if (j1 > pf_end) j1 = pf_end;
    size_t k0 = kv_bytes(c->k->dtype, g0 * c->hd), kn = kv_bytes(c->k->dtype, ng * c->hd);
    size_t v0 = kv_bytes(c->v->dtype, g0 * c->hdv), vn = kv_bytes(c->v->dtype, ng * c->hdv);
    size_t ks = kv_bytes(c->k->dtype, c->k->ne[0]), vs = kv_bytes(c->v->dtype, c->v->ne[0]);
    for (int64_t j = j0; j < j1; j++) {
        size_t row = (size_t)(c->ring ? j % c->ring : j);
        const char *kr = (const char *)c->k->data + row * ks + k0, *vr = (const char *)c->v->data + row * vs + v0;
        for (size_t o = 0; o < kn; o += 64) __builtin_prefetch(kr + o, 0, 1);
        for (size_t o = 0; o < vn; o += 64) __builtin_prefetch(vr + o, 0, 1);
    }
}

/* Split task = (run of chunks, KV head), the runs of one chunk range side by side (they read the
 * same rows of the states); each finished run is folded into its head's totals (attn_run_done). */
static void attn_split_task(void *vctx, int64_t task, int32_t thread) {
    attn_ctx *c = vctx;
    int64_t s = task / c->Hkv, g = task % c->Hkv, G = c->H / c->Hkv, R = c->n * G, cb0, cb1;
    int64_t pf_end = attn_run(c, s, &cb0, &cb1);
    const float *q = (const float *)c->q->data + g * G * c->hd;
    const uint8_t *kb, *vb;
    attn_heads(c, g, &kb, &vb);
    bool quant = attn_quant(c);
    attn_run_warm(c, g, 1, cb0, pf_end);
    for (int64_t ch = cb0; ch < cb1; ch++) {
        float *part = c->part + (ch * c->Hkv + g) * R * cpu_attn_part_floats(c->hdv);
        if (quant)
            c->cb->isa->attn_chunk_q(q, c->H * c->hd, c->n, G, kb, vb, c->k->dtype, c->v->dtype, c->k->ne[0],
                                     c->v->ne[0], c->hd, c->hdv, c->pos + 1, c->window, c->ring, c->scale,
                                     (c->ch0 + ch) * CPU_ATTN_CHUNK, part, cpu_scratch(c->cb, thread));
        else
            c->cb->isa->attn_chunk(q, c->H * c->hd, c->n, G, kb, vb, c->k->dtype, c->k->ne[0], c->v->ne[0], c->hd,
                                   c->hdv, c->pos + 1, c->window, c->ring, c->scale, (c->ch0 + ch) * CPU_ATTN_CHUNK,
                                   pf_end, part, cpu_scratch(c->cb, thread));
    }
    attn_run_done(c, g, s, g, 1);
}

/* Heads task = run of chunks [cb0, cb1) for every KV head (cpu.h attn_chunk_heads: each block's
 * rows read once for all heads); each finished run is folded into every head's totals (one unit). */
static void attn_heads_task(void *vctx, int64_t s, int32_t thread) {
    attn_ctx *c = vctx;
    int64_t G = c->H / c->Hkv, R = c->n * G, cb0, cb1;
    int64_t pf_end = attn_run(c, s, &cb0, &cb1);
    attn_run_warm(c, 0, c->Hkv, cb0, pf_end);
    for (int64_t ch = cb0; ch < cb1; ch++)
        c->cb->isa->attn_chunk_heads(c->q->data, c->H * c->hd, c->n, G, c->Hkv, c->k->data, c->v->data, c->k->dtype,
                                     c->k->ne[0], c->v->ne[0], c->hd, c->hdv, c->pos + 1, c->window, c->ring,
                                     c->scale, (c->ch0 + ch) * CPU_ATTN_CHUNK, pf_end,
                                     c->part + ch * c->Hkv * R * cpu_attn_part_floats(c->hdv),
                                     cpu_scratch(c->cb, thread));
    attn_run_done(c, 0, s, 0, c->Hkv);
}

static bool attn_supports(const g_node *nd, const be_view *out, const be_view *in) {
    uint32_t kt = in[1].dtype, vt = in[2].dtype;
    int32_t hkv = nd->p.attn.n_head_kv;
    bool shapes = is_f32(&in[0]) && is_f32(out) && hkv > 0 && in[0].ne[1] % hkv == 0 && nd->p.attn.ring % 16 == 0;
    if (!kv_is_quant(kt) && !kv_is_quant(vt)) return shapes && (kt == SLM_DTYPE_F16 || kt == SLM_DTYPE_F32) && vt == kt;
    /* quantised K or V: whole 32-blocks per head (attn_chunk_q) */
    bool types = (kv_is_quant(kt) || kt == SLM_DTYPE_F16 || kt == SLM_DTYPE_F32) &&
                 (kv_is_quant(vt) || vt == SLM_DTYPE_F16 || vt == SLM_DTYPE_F32);
    return shapes && types && in[0].ne[0] % 32 == 0 && out->ne[0] % 32 == 0;
}

static size_t attn_scratch(const cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in) {
    (void)cb;
    int64_t rows = ATTN_TB * (in[0].ne[1] / nd->p.attn.n_head_kv);
    if (nd->p.attn.n_head_kv > 1 && rows < ATTN_HEADS_ROWS) rows = ATTN_HEADS_ROWS; /* attn_heads_task's */
    return cpu_attn_scratch_bytes(in[0].ne[0], out->ne[0], rows);
}

/* SLM_ERR_BACKEND when a ring state cannot hold every query's keys (as the reference kernel).
 * One block of tokens (decode, verify) over several chunks of keys with fewer KV heads than 4 per
 * thread runs split: runs of chunks per KV head on every thread, or, with several KV heads, up to
 * ATTN_HEADS_ROWS rows and two runs per thread, runs of chunks covering every KV head (the tier's
 * attn_chunk_heads), each finished run folded in order by whichever thread is free and the outputs
 * written by the fold of the last (attn_run_done; one job: no second wake-up of the pool); else one
 * task per (block of tokens, KV head). The bits are the same either way (cpu.h). */
static slm_status k_attention(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                              const be_call *call, slm_err *e) {
    int64_t window = nd->p.attn.window, ring = nd->p.attn.ring, n = in[0].ne[2];
    int64_t lo0 = window && call->pos - window + 1 > 0 ? call->pos - window + 1 : 0;
    if (ring && (ring > in[1].ne[1] || lo0 + ring < call->pos + n))
        return err_set(e, SLM_ERR_BACKEND, "ATTENTION: a ring of %lld rows cannot hold window %lld for %lld tokens",
                       (long long)ring, (long long)window, (long long)n);
    attn_ctx c = {.cb = cb, .q = &in[0], .k = &in[1], .v = &in[2], .out = &out[0], .hd = in[0].ne[0],
                  .hdv = out->ne[0], .H = in[0].ne[1], .Hkv = nd->p.attn.n_head_kv, .pos = call->pos, .n = n,
                  .window = window, .ring = ring, .scale = nd->p.attn.scale};
    c.ch0 = lo0 / CPU_ATTN_CHUNK;
    c.nch = (call->pos + n - 1) / CPU_ATTN_CHUNK - c.ch0 + 1;
    bool split = n <= ATTN_TB && c.nch > 1 && cb->n_threads > 1 && c.Hkv < 4 * cb->n_threads;
    /* a quantised K cache holds its rows rotated per 32-block (quant_kv_row): q is rotated alike
     * into the work buffer, before the partials */
    bool rot_q = kv_is_quant(in[1].dtype), rot_out = kv_is_quant(in[2].dtype);
    size_t nq = rot_q ? ((size_t)(in[0].ne[0] * in[0].ne[1] * n) + 15) / 16 * 16 : 0;
    /* several KV heads, few rows, at least two runs per thread: the heads of a chunk together */
    bool heads = split && cb->isa->attn_chunk_heads && !rot_q && !rot_out && c.Hkv > 1 && n * c.H <= ATTN_HEADS_ROWS &&
                 c.nch >= 2 * cb->n_threads;
    if (split) {
        int64_t per = heads ? 8 * cb->n_threads : (8 * cb->n_threads + c.Hkv - 1) / c.Hkv;
        c.nseg = c.nch < per ? c.nch : per;
        c.units = heads ? 1 : c.Hkv;
    }
    /* work: rotated q, the partials, the totals (nq and both float counts multiples of 16: 64-byte
     * aligned), the fold cursors, the runs' flags */
    size_t pfl = split ? (size_t)(c.H * n * cpu_attn_part_floats(c.hdv)) : 0;
    size_t pbytes = sizeof(float) * (size_t)c.nch * pfl, tbytes = sizeof(float) * pfl;
    size_t fbytes = split ? sizeof(attn_fold_cursor) * (size_t)c.units + sizeof(atomic_int) * (size_t)(c.nseg * c.units)
                          : 0;
    size_t bytes = sizeof(float) * nq + pbytes + tbytes + fbytes;
    float *work = NULL;
    if (bytes && !(work = cpu_work(cb, bytes, e))) return SLM_ERR_NOMEM;
    be_view qr = in[0];
    if (rot_q) {
        memcpy(work, in[0].data, sizeof(float) * (size_t)(in[0].ne[0] * in[0].ne[1] * n));
        for (size_t i = 0; i + 32 <= (size_t)(in[0].ne[0] * in[0].ne[1] * n); i += 32) quant_hadamard32(work + i);
        qr.data = work;
        c.q = &qr;
    }
    if (split) {
        c.part = work + nq;
        c.tot = c.part + pbytes / sizeof(float);
        c.fold = (attn_fold_cursor *)(c.tot + tbytes / sizeof(float));
        c.done = (atomic_int *)(c.fold + c.units);
        cpu_attn_empty_totals(c.tot, c.H * n, c.hdv);
        for (int64_t u = 0; u < c.units; u++) {
            atomic_init(&c.fold[u].next, 0);
            atomic_init(&c.fold[u].busy, 0);
        }
        for (int64_t i = 0; i < c.nseg * c.units; i++) atomic_init(&c.done[i], 0);
        if (heads) pool_run(cb->pool, c.nseg, attn_heads_task, &c);
        else pool_run(cb->pool, c.nseg * c.Hkv, attn_split_task, &c);
    } else {
        pool_run(cb->pool, (c.n + ATTN_TB - 1) / ATTN_TB * c.Hkv, attn_task, &c);
    }
    if (rot_out) /* the values were rotated alike: rotate the output back (H H = I) */
        for (int64_t i = 0; i + 32 <= out->ne[0] * out->ne[1] * n; i += 32) quant_hadamard32((float *)out->data + i);
    return SLM_OK;
}

/* ---- DELTANET (recurrent form) ----------------------------------------------------------------- */

typedef struct dn_ctx {
    cpu_backend *cb;
    const be_view *q, *k, *v, *g, *beta, *s, *o, *s_new;
    bool tiled;
    int64_t heads_per_task;
} dn_ctx;

static void dn_task(void *vctx, int64_t task, int32_t thread) {
    dn_ctx *c = vctx;
    int64_t dk = c->q->ne[0], Hk = c->q->ne[1], n = c->q->ne[2], dv = c->v->ne[0], Hv = c->v->ne[1];
    int64_t h0 = task * c->heads_per_task, h1 = h0 + c->heads_per_task < Hv ? h0 + c->heads_per_task : Hv;
    bool f32_state = c->s->dtype == SLM_DTYPE_F32;
    for (int64_t h = h0; h < h1; h++) {
        int64_t kh = c->tiled ? h % Hk : h / (Hv / Hk);
        float *S = (float *)c->s_new->data + h * dk * dv;
        const float *S_in = (const float *)c->s->data + h * dk * dv;
        if (!f32_state) { /* an f16/bf16 state (legalised programs): widen exactly first */
            const uint16_t *s16 = (const uint16_t *)c->s->data + h * dk * dv;
            for (int64_t i = 0; i < dk * dv; i++)
                S[i] = c->s->dtype == SLM_DTYPE_F16 ? f16_to_f32(s16[i]) : bf16_to_f32(s16[i]);
            S_in = S;
        }
        const float *next = f32_state && h + 1 < h1 ? S_in + dk * dv : NULL;
        c->cb->isa->deltanet_head(S, S_in, (const float *)c->q->data + kh * dk, (const float *)c->k->data + kh * dk,
                                  (const float *)c->v->data + h * dv, (const float *)c->g->data + h,
                                  (const float *)c->beta->data + h, (float *)c->o->data + h * dv, n, dk, dv, Hk * dk,
                                  Hv * dv, Hv, next, cpu_scratch(c->cb, thread));
    }
}

static bool dn_supports(const g_node *nd, const be_view *out, const be_view *in) {
    if (nd->p.dn.chunked) return false;
    for (int i = 0; i < 5; i++)
        if (!is_f32(&in[i])) return false;
    if (!is_f32(&in[5]) && in[5].dtype != SLM_DTYPE_F16 && in[5].dtype != SLM_DTYPE_BF16) return false;
    return is_f32(&out[0]) && is_f32(&out[1]) && in[2].ne[0] <= 4096 && in[0].ne[2] >= 1;
}

static size_t dn_scratch(const cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in) {
    (void)cb, (void)nd, (void)out;
    return cpu_deltanet_scratch_bytes(in[0].ne[0]);
}

static slm_status k_deltanet(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                             const be_call *call, slm_err *e) {
    (void)call, (void)e;
    dn_ctx c = {cb, &in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &out[0], &out[1], nd->p.dn.v_heads_tiled, 1};
    int64_t Hv = in[2].ne[1];
    /* one contiguous run of heads per thread: each head's state is prefetched while the previous
     * one is worked on */
    c.heads_per_task = (Hv + cb->n_threads - 1) / cb->n_threads;
    pool_run(cb->pool, (Hv + c.heads_per_task - 1) / c.heads_per_task, dn_task, &c);
    return SLM_OK;
}

/* ---- CONV1D: (C, n) <- x (C, n + K - 1), w (K, C) ----------------------------------------------- */

typedef struct conv_ctx {
    const cpu_isa *isa;
    const float *x, *w;
    float *y;
    int64_t C, K, n, wsc, wsk;
    int64_t per_task; /* tokens per task, or channels per task when split_channels */
    bool split_channels;
} conv_ctx;

static void conv_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    conv_ctx *c = vctx;
    if (c->split_channels) {
        int64_t c0 = task * c->per_task, nc = c->C - c0 < c->per_task ? c->C - c0 : c->per_task;
        for (int64_t t = 0; t < c->n; t++)
            c->isa->conv_row(c->y + t * c->C + c0, c->x + t * c->C + c0, c->C, c->w + c0 * c->wsc, c->wsc, c->wsk, nc,
                             c->K);
        return;
    }
    int64_t t0 = task * c->per_task, t1 = t0 + c->per_task < c->n ? t0 + c->per_task : c->n;
    for (int64_t t = t0; t < t1; t++)
        c->isa->conv_row(c->y + t * c->C, c->x + t * c->C, c->C, c->w, c->wsc, c->wsk, c->C, c->K);
}

static bool conv_supports(const g_node *nd, const be_view *out, const be_view *in) {
    (void)nd;
    return is_f32(&in[0]) && is_f32(&in[1]) && is_f32(out);
}

/* Few tokens read the weights in the file layout (row c holds the K taps of channel c) and split
 * the channels over the threads (decode: one token of a wide conv, e.g. Qwen3.5's 6144 channels);
 * many tokens first transpose the weights to (K, C) in the work buffer and split the tokens. Same
 * arithmetic either way. */
static slm_status k_conv1d(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                           const be_call *call, slm_err *e) {
    (void)nd, (void)call;
    int64_t C = in[0].ne[0], n = out->ne[1], K = in[1].ne[0];
    conv_ctx c = {cb->isa, in[0].data, in[1].data, out->data, C, K, n, K, 1, 0, false};
    if (n < 8) {
        c.split_channels = true;
        c.per_task = n * C < PAR_MIN_ELEMS / 8 ? C : ((C + 2 * cb->n_threads - 1) / (2 * cb->n_threads) + 15) / 16 * 16;
        pool_run(cb->pool, (C + c.per_task - 1) / c.per_task, conv_task, &c);
        return SLM_OK;
    }
    float *wkc = cpu_work(cb, (size_t)(K * C) * sizeof(float), e);
    if (!wkc) return SLM_ERR_NOMEM;
    const float *w = in[1].data;
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t k = 0; k < K; k++) wkc[k * C + ch] = w[ch * K + k];
    c.w = wkc;
    c.wsc = 1;
    c.wsk = C;
    c.per_task = n * C < PAR_MIN_ELEMS ? n : (n + 4 * cb->n_threads - 1) / (4 * cb->n_threads);
    pool_run(cb->pool, (n + c.per_task - 1) / c.per_task, conv_task, &c);
    return SLM_OK;
}

/* ---- causal conv step: y (C, n), new state (C, K - 1) <- state (C, K - 1), x (C, n), w (K, C) ---- */

/* xc = CONCAT(state, x) is never formed. Per block of channels, the tokens whose windows reach into
 * the state (t < K - 1) read the block's state columns and first x columns gathered into a stack
 * buffer (at most 2 (K - 1) <= CONV_STEP_COLS columns of CONV_STEP_BLOCK floats); the others read x
 * where it is. Each token is convolved with conv_row as the CONV1D node would (file-layout weights,
 * the same calls) and activated in place; the last K - 1 columns of xc are the new state, stored
 * before any y. Block starts are multiples of 16, so conv_row and vec_unary see the same vectors
 * and tails as on whole rows.
 * Tasks: ranges of channels over all tokens, the last token first, so y may be x itself (token t
 * overwrites only the column t of x, which no token before it reads); or, for long runs whose y
 * does not overlap x (a prefill), ranges of tokens over all channels, as CONV1D splits them. */
#define CONV_STEP_BLOCK 256
#define CONV_STEP_COLS 16

typedef struct conv_step_ctx {
    const cpu_isa *isa;
    const float *state, *x, *w;
    float *y, *state_new;
    int64_t C, S, n, per_task; /* S = K - 1; per_task: channels, or tokens when split_tokens */
    bool silu, split_tokens;
} conv_step_ctx;

/* Channels [c0, c1) of tokens [t0, t1) (the last first), and of the new state when with_state. */
static void conv_step_part(const conv_step_ctx *c, int64_t c0, int64_t c1, int64_t t0, int64_t t1, bool with_state) {
    _Alignas(64) float xc[CONV_STEP_COLS * CONV_STEP_BLOCK]; /* columns 0 .. S + head - 1 of CONCAT */
    int64_t C = c->C, S = c->S, K = S + 1, n = c->n, head = t1 < S ? t1 : S;
    for (int64_t b = c0; b < c1; b += CONV_STEP_BLOCK) {
        size_t nc = (size_t)(c1 - b < CONV_STEP_BLOCK ? c1 - b : CONV_STEP_BLOCK);
        bool gather = t0 < S; /* tokens below S read the state; a new state from it needs n < S, so t0 = 0 */
        for (int64_t t = 0; gather && t < S; t++)
            memcpy(xc + t * CONV_STEP_BLOCK, c->state + t * C + b, nc * sizeof(float));
        for (int64_t t = 0; gather && t < head; t++)
            memcpy(xc + (S + t) * CONV_STEP_BLOCK, c->x + t * C + b, nc * sizeof(float));
        for (int64_t j = 0; with_state && j < S; j++) /* column n + j of CONCAT */
            memcpy(c->state_new + j * C + b,
                   n + j < S ? xc + (n + j) * CONV_STEP_BLOCK : c->x + (n + j - S) * C + b, nc * sizeof(float));
        for (int64_t t = t1 - 1; t >= t0; t--) {
            float *y = c->y + t * C + b;
            if (t < S)
                c->isa->conv_row(y, xc + t * CONV_STEP_BLOCK, CONV_STEP_BLOCK, c->w + b * K, K, 1, (int64_t)nc, K);
            else
                c->isa->conv_row(y, c->x + (t - S) * C + b, C, c->w + b * K, K, 1, (int64_t)nc, K);
            if (c->silu) c->isa->vec_unary(G_OP_SILU, y, y, (int64_t)nc, 0.0f);
        }
    }
}

static void conv_step_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    const conv_step_ctx *c = vctx;
    int64_t lo = task * c->per_task, total = c->split_tokens ? c->n : c->C;
    int64_t hi = lo + c->per_task < total ? lo + c->per_task : total;
    if (c->split_tokens)
        conv_step_part(c, 0, c->C, lo, hi, task == 0);
    else
        conv_step_part(c, lo, hi, 0, c->n, true);
}

bool cpu_conv_step_takes(const be_view *out, const be_view *in) {
    for (int i = 0; i < 3; i++)
        if (!is_f32(&in[i])) return false;
    if (!is_f32(&out[0]) || !is_f32(&out[1])) return false;
    int64_t C = in[1].ne[0], n = ncols(&in[1]), S = in[0].ne[1], K = in[2].ne[0];
    return n >= 1 && S >= 1 && K == S + 1 && 2 * S <= CONV_STEP_COLS &&
           nel(&in[0]) == C * S && nel(&in[2]) == K * C && nel(&out[0]) == C * n && nel(&out[1]) == C * S;
}

slm_status cpu_conv_step(cpu_backend *cb, const be_view *out, const be_view *in, bool silu, slm_err *e) {
    (void)e;
    if (!cpu_conv_step_takes(out, in)) return SLM_ERR_UNSUPPORTED;
    int64_t C = in[1].ne[0], n = ncols(&in[1]), S = in[0].ne[1];
    conv_step_ctx c = {cb->isa, in[0].data, in[1].data, in[2].data, out[0].data, out[1].data, C, S, n, C, silu, false};
    uintptr_t x = (uintptr_t)c.x, y = (uintptr_t)c.y, bytes = (uintptr_t)(n * C) * sizeof(float);
    bool overlap = y < x + bytes && x < y + bytes;
    if (n >= 4 * CONV_STEP_COLS && !overlap) {
        c.split_tokens = true;
        c.per_task = (n + 2 * cb->n_threads - 1) / (2 * cb->n_threads);
    } else if (n * C >= PAR_MIN_ELEMS / 8) {
        c.per_task = ((C + 2 * cb->n_threads - 1) / (2 * cb->n_threads) + 15) / 16 * 16;
    }
    int64_t total = c.split_tokens ? n : C;
    pool_run(cb->pool, (total + c.per_task - 1) / c.per_task, conv_step_task, &c);
    return SLM_OK;
}

/* ---- row-wise ops: ADD, MUL, SWIGLU, unary, norms ---------------------------------------------- */

/* Tasks are runs of rows, or, for the elementwise ops with a transcendental function (SWIGLU,
 * GEGLU, SILU, SIGMOID, SOFTPLUS, EXP), runs of elements of the whole (ne0, rows) array, so that a
 * few rows (decode, verify) still split among the threads; each element's value is the same
 * however the array is cut. */
typedef struct rows_ctx {
    const cpu_isa *isa;
    const g_node *nd;
    const be_view *out, *in;
    int64_t ne0, rows, per_task; /* per_task: rows, or elements when split_elems */
    bool bcast, split_elems;
} rows_ctx;

/* Elements [e0, e1) of an elementwise op (ADD, MUL, SWIGLU, GEGLU, unary), row by row (b of a
 * broadcast is one row). */
static void elems_run(const rows_ctx *c, int64_t e0, int64_t e1) {
    const cpu_isa *isa = c->isa;
    g_op op = c->nd->op;
    for (int64_t e = e0; e < e1;) {
        int64_t col = e % c->ne0, len = e1 - e < c->ne0 - col ? e1 - e : c->ne0 - col;
        float *y = (float *)c->out->data + e;
        const float *a = (const float *)c->in[0].data + e;
        const float *b = op == G_OP_ADD || op == G_OP_MUL || op == G_OP_SWIGLU || op == G_OP_GEGLU
                             ? (const float *)c->in[1].data + (c->bcast ? col : e)
                             : NULL;
        if (op == G_OP_ADD) isa->vec_add(y, a, b, len);
        else if (op == G_OP_MUL) isa->vec_mul(y, a, b, len);
        else if (op == G_OP_SWIGLU) isa->vec_swiglu(y, a, b, len);
        else if (op == G_OP_GEGLU) isa->vec_geglu(y, a, b, len);
        else isa->vec_unary(op, y, a, len, c->nd->p.f[0]);
        e += len;
    }
}

static void rows_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    rows_ctx *c = vctx;
    const cpu_isa *isa = c->isa;
    const g_node *nd = c->nd;
    if (c->split_elems) {
        int64_t total = c->rows * c->ne0, e0 = task * c->per_task;
        elems_run(c, e0, e0 + c->per_task < total ? e0 + c->per_task : total);
        return;
    }
    int64_t r0 = task * c->per_task, r1 = r0 + c->per_task < c->rows ? r0 + c->per_task : c->rows;
    if (nd->op != G_OP_RMSNORM && nd->op != G_OP_L2NORM && nd->op != G_OP_GATED_RMSNORM) {
        elems_run(c, r0 * c->ne0, r1 * c->ne0);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        float *y = (float *)c->out->data + r * c->ne0;
        const float *a = (const float *)c->in[0].data + r * c->ne0;
        if (nd->op == G_OP_RMSNORM)
            isa->row_norm(nd->op, y, a, nd->n_in > 1 ? c->in[1].data : NULL, NULL, c->ne0, nd->p.norm.eps,
                          nd->p.norm.w_offset);
        else if (nd->op == G_OP_L2NORM)
            isa->row_norm(nd->op, y, a, NULL, NULL, c->ne0, nd->p.norm.eps, 0.0f);
        else
            isa->row_norm(nd->op, y, a, c->in[2].data, (const float *)c->in[1].data + r * c->ne0, c->ne0,
                          nd->p.norm.eps, 0.0f);
    }
}

static bool rows_supports(const g_node *nd, const be_view *out, const be_view *in) {
    for (int i = 0; i < nd->n_in; i++)
        if (!is_f32(&in[i])) return false;
    if (!is_f32(out)) return false;
    switch (nd->op) {
    case G_OP_ADD: case G_OP_MUL: case G_OP_SWIGLU: case G_OP_GEGLU:
        return nel(&in[1]) == nel(&in[0]) || nel(&in[1]) == in[0].ne[0];
    case G_OP_RMSNORM: return nd->n_in < 2 || nel(&in[1]) == in[0].ne[0];
    case G_OP_GATED_RMSNORM: return nel(&in[2]) == in[0].ne[0] && nel(&in[1]) == nel(&in[0]);
    default: return true;
    }
}

static slm_status k_rows(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                         const be_call *call, slm_err *e) {
    (void)call, (void)e;
    rows_ctx c = {cb->isa, nd, out, in, in[0].ne[0], ncols(&in[0]), 0, false, false};
    g_op op = nd->op;
    if (op == G_OP_ADD || op == G_OP_MUL || op == G_OP_SWIGLU || op == G_OP_GEGLU)
        c.bcast = nel(&in[1]) == c.ne0 && c.rows > 1;
    int64_t total = c.rows * c.ne0;
    /* a transcendental per element pays for a task from fewer elements (GATED_RMSNORM: its SiLU
     * gate, split by rows as every norm) */
    bool transcendental = op == G_OP_SWIGLU || op == G_OP_GEGLU || op == G_OP_SILU || op == G_OP_SIGMOID ||
                          op == G_OP_SOFTPLUS || op == G_OP_EXP;
    int64_t par_min = transcendental || op == G_OP_GATED_RMSNORM ? PAR_MIN_ELEMS / 8 : PAR_MIN_ELEMS;
    if (transcendental && total >= par_min) {
        c.split_elems = true;
        c.per_task = ((total + 4 * cb->n_threads - 1) / (4 * cb->n_threads) + 63) / 64 * 64;
        pool_run(cb->pool, (total + c.per_task - 1) / c.per_task, rows_task, &c);
        return SLM_OK;
    }
    c.per_task = total < par_min ? c.rows : (c.rows + 4 * cb->n_threads - 1) / (4 * cb->n_threads);
    pool_run(cb->pool, (c.rows + c.per_task - 1) / c.per_task, rows_task, &c);
    return SLM_OK;
}

/* ---- ROPE: as the reference (same expressions, so bit-identical), with cos/sin computed once per
 * (token, pair) instead of once per head; tokens split over threads. ----------------------------- */
typedef struct rope_ctx {
    const g_node *nd;
    const be_view *in, *out;
    cpu_backend *cb;
    int64_t pos, per_task;
} rope_ctx;

static void rope_task(void *vctx, int64_t task, int32_t thread) {
    rope_ctx *c = vctx;
    const g_node *nd = c->nd;
    int64_t hd = c->in->ne[0], H = c->in->ne[1], n = c->in->ne[2];
    int32_t n_rot = nd->p.rope.n_rot, half = n_rot / 2;
    float *inv_freq = cpu_scratch(c->cb, thread), *cs = inv_freq + half, *sn = cs + half;
    bool neox = nd->p.rope.style == G_ROPE_NEOX;
    for (int32_t i = 0; i < half; i++)
        inv_freq[i] = nd->p.rope.freq_scale * (1.0f / powf(nd->p.rope.base, (float)(2 * i) / (float)n_rot));
    int64_t t0 = task * c->per_task, t1 = t0 + c->per_task < n ? t0 + c->per_task : n;
    for (int64_t t = t0; t < t1; t++) {
        float p = (float)(c->pos + t);
        for (int32_t i = 0; i < half; i++) {
            float theta = p * inv_freq[i];
            cs[i] = cosf(theta);
            sn[i] = sinf(theta);
        }
        for (int64_t h = 0; h < H; h++) {
            const float *x = (const float *)c->in->data + (t * H + h) * hd;
            float *y = (float *)c->out->data + (t * H + h) * hd;
            for (int64_t i = n_rot; i < hd; i++) y[i] = x[i];
            for (int32_t i = 0; i < half; i++) {
                int32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
                float a = x[i0], b = x[i1];
                y[i0] = a * cs[i] - b * sn[i];
                y[i1] = b * cs[i] + a * sn[i];
            }
        }
    }
}

static bool rope_supports(const g_node *nd, const be_view *out, const be_view *in) {
    return is_f32(&in[0]) && is_f32(out) && nd->p.rope.n_rot >= 0 && nd->p.rope.n_rot <= in[0].ne[0];
}

static size_t rope_scratch(const cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in) {
    (void)cb, (void)out, (void)in;
    return (size_t)(3 * (nd->p.rope.n_rot / 2) + 16) * sizeof(float);
}

static slm_status k_rope(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                         const be_call *call, slm_err *e) {
    (void)e;
    int64_t n = in[0].ne[2];
    rope_ctx c = {nd, &in[0], out, cb, call->pos, 0};
    c.per_task = nel(&in[0]) < PAR_MIN_ELEMS ? n : (n + 2 * cb->n_threads - 1) / (2 * cb->n_threads);
    pool_run(cb->pool, (n + c.per_task - 1) / c.per_task, rope_task, &c);
    return SLM_OK;
}

/* ---- STATE_WRITE of f32 values into an f32, f16, Q8_0 or Q4_0 state: as the reference (f16
 * rounding to nearest even; Q8_0/Q4_0 whole rows by quant_row, ggml's rounding), converting whole
 * rows; a wrapping begin (a ring) on axes 1-3 places each row at its index modulo the ring. ------ */
static bool sw_supports(const g_node *nd, const be_view *out, const be_view *in) {
    if (kv_is_quant(out->dtype)) /* whole rows of 32-blocks, quantised as base/quant.c's quant_row */
        return is_f32(&in[0]) && in[0].ne[0] == out->ne[0] && out->ne[0] % 32 == 0 && nd->p.write.begin[0].mod == 0;
    return is_f32(&in[0]) && (out->dtype == SLM_DTYPE_F32 || out->dtype == SLM_DTYPE_F16) &&
           nd->p.write.begin[0].mod == 0; /* a wrap within rows: the reference */
}

typedef struct sw_ctx {
    const cpu_isa *isa;
    const be_view *in, *out;
    int64_t b[4], mod[4], rows, per_task; /* mod[d] > 0: axis d wraps (a ring), index (b[d] + i) mod mod[d] */
} sw_ctx;

/* Rows (axis 0 runs) [task * per_task, ...) of the value box. */
static void sw_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    sw_ctx *c = vctx;
    const int64_t *sne = c->in->ne, *dne = c->out->ne, *b = c->b, *mod = c->mod;
    bool f16 = c->out->dtype == SLM_DTYPE_F16;
    int64_t r0 = task * c->per_task, r1 = r0 + c->per_task < c->rows ? r0 + c->per_task : c->rows;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % sne[1], i2 = (r / sne[1]) % sne[2], i3 = r / (sne[1] * sne[2]);
        const float *src = (const float *)c->in->data + sne[0] * r;
        int64_t o1 = b[1] + i1, o2 = b[2] + i2, o3 = b[3] + i3;
        if (mod[1]) o1 %= mod[1];
        if (mod[2]) o2 %= mod[2];
        if (mod[3]) o3 %= mod[3];
        int64_t d = b[0] + dne[0] * (o1 + dne[1] * (o2 + dne[2] * o3));
        if (kv_is_quant(c->out->dtype))
            quant_kv_row(c->out->dtype, src, (uint8_t *)c->out->data + kv_bytes(c->out->dtype, d), sne[0]);
        else if (f16) c->isa->cvt_f16((uint16_t *)c->out->data + d, src, sne[0]);
        else memcpy((float *)c->out->data + d, src, (size_t)sne[0] * sizeof(float));
    }
}

static slm_status k_state_write(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                                const be_call *call, slm_err *e) {
    sw_ctx c = {cb->isa, &in[0], out, {0, 0, 0, 0}, {0, 0, 0, 0}, in[0].ne[1] * in[0].ne[2] * in[0].ne[3], 0};
    for (int d = 0; d < 4; d++) {
        c.b[d] = g_affine_eval(nd->p.write.begin[d], call->n, call->pos);
        c.mod[d] = nd->p.write.begin[d].mod > 0 ? nd->p.write.begin[d].mod : 0;
        bool bad = c.mod[d] ? c.mod[d] > out->ne[d] || in[0].ne[d] > c.mod[d]
                            : c.b[d] < 0 || c.b[d] + in[0].ne[d] > out->ne[d];
        if (bad) return err_set(e, SLM_ERR_BACKEND, "STATE_WRITE window outside the state on axis %d", d);
    }
    /* large writes (recurrent states: 1 MiB per layer) are split over threads */
    c.per_task = nel(&in[0]) < 4 * PAR_MIN_ELEMS ? c.rows : (c.rows + 2 * cb->n_threads - 1) / (2 * cb->n_threads);
    pool_run(cb->pool, (c.rows + c.per_task - 1) / c.per_task, sw_task, &c);
    return SLM_OK;
}

/* ---- SLICE and CONCAT (f32): row copies, split over threads when large --------------------------- */

typedef struct copy_ctx {
    const be_view *out, *in; /* in[0] (SLICE), in[0] and in[1] (CONCAT) */
    bool concat;
    int32_t axis;
    int64_t begin; /* SLICE: first element along axis */
    int64_t rows, per_task;
} copy_ctx;

/* Output row r = (i1, i2, i3) comes from one source row (CONCAT along axis 0: from two). */
static void copy_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    copy_ctx *c = vctx;
    const int64_t *ne = c->out->ne;
    int64_t r0 = task * c->per_task, r1 = r0 + c->per_task < c->rows ? r0 + c->per_task : c->rows;
    for (int64_t r = r0; r < r1; r++) {
        int64_t idx[4] = {0, r % ne[1], r / ne[1] % ne[2], r / ne[1] / ne[2]};
        float *y = (float *)c->out->data + r * ne[0];
        const be_view *src = &c->in[0];
        if (c->concat && c->axis == 0) {
            memcpy(y, (const float *)c->in[0].data + r * c->in[0].ne[0], sizeof(float) * (size_t)c->in[0].ne[0]);
            memcpy(y + c->in[0].ne[0], (const float *)c->in[1].data + r * c->in[1].ne[0],
                   sizeof(float) * (size_t)c->in[1].ne[0]);
            continue;
        }
        int64_t off0 = 0;
        if (c->concat && idx[c->axis] >= c->in[0].ne[c->axis]) {
            idx[c->axis] -= c->in[0].ne[c->axis];
            src = &c->in[1];
        } else if (!c->concat) {
            if (c->axis == 0) off0 = c->begin;
            else idx[c->axis] += c->begin;
        }
        int64_t sr = idx[1] + src->ne[1] * (idx[2] + src->ne[2] * idx[3]);
        memcpy(y, (const float *)src->data + sr * src->ne[0] + off0, sizeof(float) * (size_t)ne[0]);
    }
}

static bool copy_supports(const g_node *nd, const be_view *out, const be_view *in) {
    for (int i = 0; i < nd->n_in; i++)
        if (!is_f32(&in[i])) return false;
    return is_f32(out);
}

static slm_status k_copy(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in, const be_call *call,
                         slm_err *e) {
    copy_ctx c = {out, in, nd->op == G_OP_CONCAT, 0, 0, ncols(out), 0};
    if (c.concat) {
        c.axis = nd->p.concat.axis;
    } else {
        c.axis = nd->p.slice.axis;
        c.begin = g_affine_eval(nd->p.slice.begin, call->n, call->pos);
        if (c.begin < 0 || c.begin + out->ne[c.axis] > in[0].ne[c.axis])
            return err_set(e, SLM_ERR_BACKEND, "SLICE out of bounds: [%lld, %lld) of %lld", (long long)c.begin,
                           (long long)(c.begin + out->ne[c.axis]), (long long)in[0].ne[c.axis]);
    }
    /* large copies (LFM2 / Qwen3.5 conv states and their concatenation) are split over threads */
    c.per_task = nel(out) < PAR_MIN_ELEMS / 2 ? c.rows : (c.rows + 2 * cb->n_threads - 1) / (2 * cb->n_threads);
    pool_run(cb->pool, (c.rows + c.per_task - 1) / c.per_task, copy_task, &c);
    return SLM_OK;
}

/* ---- EMBED: (d, n) <- table (d, V), ids i32 (n) ------------------------------------------------- */

/* A table that a matmul repacked (the output head tied to the embeddings) is read from its copy on
 * huge pages: the file pages were released after repacking, and the copy holds every bit (rows
 * come back from the tiles with cpu_tile_row). Then, as in the reference kernel, dequant_row. */
typedef struct embed_ctx {
    cpu_backend *cb;
    const be_view *table, *ids, *out;
    const uint8_t *pk; /* repacked copy, or NULL: the table itself */
    bool tiles;        /* pk holds cpu_repack_tiles tiles, else plain rows */
    size_t row_bytes;
} embed_ctx;

static void embed_task(void *vctx, int64_t t, int32_t thread) {
    embed_ctx *c = vctx;
    int64_t id = ((const int32_t *)c->ids->data)[t], d = c->table->ne[0];
    float *dst = (float *)c->out->data + t * d;
    const uint8_t *row = (c->pk ? c->pk : (const uint8_t *)c->table->data) + (size_t)id * c->row_bytes;
    if (c->tiles) {
        uint8_t *bytes = cpu_scratch(c->cb, thread);
        cpu_tile_row(c->table->dtype, c->pk, c->table->ne[1], d, id, bytes);
        row = bytes;
    }
    dequant_row(c->table->dtype, row, dst, d);
}

static bool embed_supports(const g_node *nd, const be_view *out, const be_view *in) {
    (void)nd; /* F32 tables are read in place by the reference kernel */
    uint64_t rb;
    return in[0].dtype != SLM_DTYPE_F32 && in[1].dtype == SLM_DTYPE_I32 && is_f32(out) &&
           dtype_row_bytes(in[0].dtype, (uint64_t)in[0].ne[0], &rb);
}

static size_t embed_scratch(const cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in) {
    (void)cb, (void)nd, (void)out;
    uint64_t rb = 0;
    dtype_row_bytes(in[0].dtype, (uint64_t)in[0].ne[0], &rb);
    return (size_t)rb;
}

static slm_status k_embed(cpu_backend *cb, const g_node *nd, const be_view *out, const be_view *in,
                          const be_call *call, slm_err *e) {
    (void)nd, (void)call, (void)e;
    embed_ctx c = {cb, &in[0], &in[1], out, NULL, false, 0};
    uint64_t rb = 0;
    dtype_row_bytes(in[0].dtype, (uint64_t)in[0].ne[0], &rb);
    c.row_bytes = (size_t)rb;
    c.pk = cpu_wpack_find(cb, in[0].dtype, in[0].data, in[0].ne[0], in[0].ne[1]);
    bool float_copy = in[0].dtype == SLM_DTYPE_F16 || in[0].dtype == SLM_DTYPE_BF16;
    if (c.pk && !float_copy) {
        c.tiles = cb->isa->repack_tiles == cpu_repack_tiles;
        if (!c.tiles) c.pk = NULL; /* a layout this file cannot read back */
    }
    int64_t n = in[1].ne[0];
    pool_run(cb->pool, n, embed_task, &c);
    return SLM_OK;
}

/* ---- the table ----------------------------------------------------------------------------------- */

static const cpu_fast_kernel k_fast_matmul = {mm_supports, k_matmul, mm_scratch};
static const cpu_fast_kernel k_fast_attention = {attn_supports, k_attention, attn_scratch};
static const cpu_fast_kernel k_fast_state_write = {sw_supports, k_state_write, NULL};
static const cpu_fast_kernel k_fast_deltanet = {dn_supports, k_deltanet, dn_scratch};
static const cpu_fast_kernel k_fast_conv = {conv_supports, k_conv1d, NULL};
static const cpu_fast_kernel k_fast_rows = {rows_supports, k_rows, NULL};
static const cpu_fast_kernel k_fast_rope = {rope_supports, k_rope, rope_scratch};
static const cpu_fast_kernel k_fast_copy = {copy_supports, k_copy, NULL};
static const cpu_fast_kernel k_fast_embed = {embed_supports, k_embed, embed_scratch};

/* Indexed by op; ops left out (or added to the op set later) run their reference kernel. */
static const cpu_fast_kernel *const k_fast[G_OP_COUNT] = {
    [G_OP_MATMUL] = &k_fast_matmul,  [G_OP_ATTENTION] = &k_fast_attention, [G_OP_DELTANET] = &k_fast_deltanet,
    [G_OP_CONV1D] = &k_fast_conv,    [G_OP_ADD] = &k_fast_rows,            [G_OP_MUL] = &k_fast_rows,
    [G_OP_SWIGLU] = &k_fast_rows,    [G_OP_SCALE] = &k_fast_rows,          [G_OP_SILU] = &k_fast_rows,
    [G_OP_SIGMOID] = &k_fast_rows,   [G_OP_SOFTPLUS] = &k_fast_rows,       [G_OP_EXP] = &k_fast_rows,
    [G_OP_RMSNORM] = &k_fast_rows,   [G_OP_L2NORM] = &k_fast_rows,         [G_OP_GATED_RMSNORM] = &k_fast_rows,
    [G_OP_ROPE] = &k_fast_rope,      [G_OP_STATE_WRITE] = &k_fast_state_write, [G_OP_SLICE] = &k_fast_copy,
    [G_OP_CONCAT] = &k_fast_copy,    [G_OP_EMBED] = &k_fast_embed,          [G_OP_GEGLU] = &k_fast_rows,
};

const cpu_fast_kernel *cpu_fast_lookup(const g_node *nd, const be_view *out, const be_view *in) {
    if ((unsigned)nd->op >= G_OP_COUNT) return NULL;
    const cpu_fast_kernel *k = k_fast[nd->op];
    return k && k->supports(nd, out, in) ? k : NULL;
}
