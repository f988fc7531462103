/* state.c — state as a first-class object: checkpoints of the conv and recurrent states (taken
 * every N tokens under a memory budget, thinned or spilled to disk), the undo record that makes
 * multi-call operations all-or-nothing, exact rollback (KV truncation + checkpoint restore + replay),
 * prefix reuse (sync), in-memory snapshots (restore, fork) and state files (save, load).
 *
 * Exactness rests on batch invariance of the kernels: replaying history[c, p) in any chunking
 * recomputes bit for bit what the original calls computed, so a rollback equals an uninterrupted
 * run. State file layout (little-endian):
 *   "SLMSTATE" | u32 version (2) | u32 0 | u8 fingerprint[16] | u32 n_ctx | u32 K dtype | u32 V dtype |
 *   u32 pos | u32 n_states | per state: u32 name_len, name, u32 role, u32 dtype, u32 n_dims, u64 ne[4]
 *   (allocated), u64 n_bytes, data | u32 n_history, i32 history[n_history] | u64 XXH3-64 of all
 *   preceding bytes. KV states store positions [0, pos) only (rows of whole Q8_0/Q4_0 blocks for
 *   quantised KV states). Version 1 (read too) has no V dtype: V states of the K dtype. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/fmap.h"
#include "base/params.h"
#include "base/reader.h"
#include "runtime/session.h"

/* Default interval: a power of two in [128, 256], the longer for larger checkpoints — LFM2-350M
 * (80 KiB) every 128 tokens, Qwen3.5-0.8B (20 MiB) every 256. Checkpoints split a prefill into
 * calls at their positions and each call streams every weight once, so a short interval costs
 * prefill speed (LFM2-350M pp512 at 16: -31%; at 128: a few %). */
static int32_t default_interval(size_t ckpt_bytes) {
    int32_t n = 128;
    while (n < 256 && (size_t)n * 16384 < ckpt_bytes) n *= 2;
    return n;
}
#define CKPT_DEFAULT_BUDGET_MIB 256
#define STATE_MAGIC "SLMSTATE"
#define STATE_VERSION 2u

/* ---- checkpoints ---------------------------------------------------------------------------- */

slm_status sess_ckpt_init(slm_session *s, int32_t interval, int32_t budget_mib, const char *dir, slm_err *e) {
    if (interval < -1 || budget_mib < 0) return err_set(e, SLM_ERR_INVALID_ARG, "invalid checkpoint options");
    s->ckpt_interval = interval == 0 ? default_interval(s->ckpt_bytes) : interval < 0 ? 0 : interval;
    s->ckpt_at_prefill_end = interval >= 0;
    s->ckpt_budget = (size_t)(budget_mib ? budget_mib : CKPT_DEFAULT_BUDGET_MIB) << 20;
    al_free(&s->alloc, s->ckpt_dir);
    s->ckpt_dir = NULL;
    if (dir) {
        if (access(dir, W_OK) != 0) return err_set(e, SLM_ERR_IO, "checkpoint folder %s is not writable", dir);
        if (!(s->ckpt_dir = al_strdup(&s->alloc, dir))) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    s->uid = (uint64_t)(uintptr_t)s; /* unique among live sessions of the process: names spill files */
    return SLM_OK;
}

static void ckpt_release(slm_session *s, sess_ckpt *c) {
    al_free(&s->alloc, c->data);
    if (c->path) {
        unlink(c->path);
        al_free(&s->alloc, c->path);
    }
    c->data = NULL;
    c->path = NULL;
}

static void ckpt_remove(slm_session *s, int32_t i) {
    ckpt_release(s, &s->ckpts[i]);
    memmove(&s->ckpts[i], &s->ckpts[i + 1], (size_t)(s->n_ckpt - i - 1) * sizeof(sess_ckpt));
    s->n_ckpt--;
}

void sess_ckpt_drop_after(slm_session *s, int32_t pos) {
    while (s->n_ckpt > 0 && s->ckpts[s->n_ckpt - 1].pos > pos) ckpt_remove(s, s->n_ckpt - 1);
}

void sess_ckpt_free(slm_session *s) {
    sess_ckpt_drop_after(s, -1);
    al_free(&s->alloc, s->ckpts);
    al_free(&s->alloc, s->ckpt_pos);
    al_free(&s->alloc, s->ckpt_dir);
    s->ckpts = NULL;
    s->ckpt_pos = NULL;
    s->ckpt_dir = NULL;
    s->cap_ckpt = 0;
}

/* Copies the front buffers of the double-buffered states into dst (ckpt_bytes). */
static void recurrent_save(const slm_session *s, uint8_t *dst) {
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        const sess_state *ss = &s->states[i];
        if (!sess_state_checkpointed(ss)) continue;
        memcpy(dst, ss->buf[ss->front], ss->bytes);
        dst += ss->bytes;
    }
}

/* Loads the front buffers from src (NULL = zero state). */
static void recurrent_load(slm_session *s, const uint8_t *src) {
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        sess_state *ss = &s->states[i];
        if (!sess_state_checkpointed(ss)) continue;
        if (src) {
            memcpy(ss->buf[ss->front], src, ss->bytes);
            src += ss->bytes;
        } else {
            memset(ss->buf[ss->front], 0, ss->bytes);
        }
    }
}

void sess_states_save(const slm_session *s, uint8_t *dst) { recurrent_save(s, dst); }
void sess_states_load(slm_session *s, const uint8_t *src) { recurrent_load(s, src); }

static size_t ckpt_mem_used(const slm_session *s) {
    size_t n = 0;
    for (int32_t i = 0; i < s->n_ckpt; i++) n += s->ckpts[i].data ? s->ckpt_bytes : 0;
    return n;
}

static bool ckpt_spill(slm_session *s, sess_ckpt *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/slm-ckpt-%ld-%llu-%d.bin", s->ckpt_dir, (long)getpid(), (unsigned long long)s->uid,
             c->pos);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(c->data, 1, s->ckpt_bytes, f) == s->ckpt_bytes;
    ok = fclose(f) == 0 && ok;
    char *owned = ok ? al_strdup(&s->alloc, path) : NULL;
    if (!owned) {
        unlink(path);
        return false;
    }
    c->path = owned;
    al_free(&s->alloc, c->data);
    c->data = NULL;
    return true;
}

/* Keeps in-memory checkpoints within the budget: spills the oldest to the checkpoint folder, or
 * removes the one whose neighbours are closest (so the survivors stay spread out). The newest
 * checkpoint is kept unless it alone exceeds the budget. */
static void ckpt_enforce_budget(slm_session *s) {
    while (ckpt_mem_used(s) > s->ckpt_budget) {
        int32_t victim = -1;
        if (s->ckpt_dir) {
            for (int32_t i = 0; i < s->n_ckpt && victim < 0; i++)
                if (s->ckpts[i].data) victim = i;
            if (victim >= 0 && ckpt_spill(s, &s->ckpts[victim])) continue;
        }
        int64_t best = INT64_MAX;
        victim = -1;
        for (int32_t i = 0; i + 1 < s->n_ckpt; i++) {
            if (!s->ckpts[i].data) continue;
            int64_t prev = i ? s->ckpts[i - 1].pos : 0, gap = (int64_t)s->ckpts[i + 1].pos - prev;
            if (gap < best) {
                best = gap;
                victim = i;
            }
        }
        if (victim < 0) victim = s->n_ckpt - 1; /* only the newest is in memory and it is too big */
        ckpt_remove(s, victim);
    }
}

void sess_ckpt_take(slm_session *s) {
    if (!s->has_recurrent || s->pos == 0) return;
    if (s->n_ckpt && s->ckpts[s->n_ckpt - 1].pos >= s->pos) return; /* already there */
    if (s->n_ckpt == s->cap_ckpt) {
        int32_t cap = s->cap_ckpt ? s->cap_ckpt * 2 : 16;
        sess_ckpt *c = al_realloc(&s->alloc, s->ckpts, (size_t)s->cap_ckpt * sizeof *c, (size_t)cap * sizeof *c);
        if (!c) return;
        s->ckpts = c;
        int32_t *p = al_realloc(&s->alloc, s->ckpt_pos, (size_t)s->cap_ckpt * sizeof *p, (size_t)cap * sizeof *p);
        if (!p) return;
        s->ckpt_pos = p;
        s->cap_ckpt = cap;
    }
    uint8_t *data = al_malloc(&s->alloc, s->ckpt_bytes);
    if (!data) return; /* a missing checkpoint only makes a later rollback replay more */
    recurrent_save(s, data);
    s->ckpts[s->n_ckpt++] = (sess_ckpt){s->pos, data, NULL};
    ckpt_enforce_budget(s);
}

/* Restores the conv/recurrent states of checkpoint i (or the zero state for i = -1). */
static slm_status ckpt_load(slm_session *s, int32_t i) {
    if (i < 0) {
        recurrent_load(s, NULL);
        return SLM_OK;
    }
    sess_ckpt *c = &s->ckpts[i];
    if (c->data) {
        recurrent_load(s, c->data);
        return SLM_OK;
    }
    uint8_t *tmp = al_malloc(&s->alloc, s->ckpt_bytes);
    if (!tmp) return err_set(&s->err, SLM_ERR_NOMEM, "out of memory reading checkpoint %d", c->pos);
    FILE *f = fopen(c->path, "rb");
    bool ok = f && fread(tmp, 1, s->ckpt_bytes, f) == s->ckpt_bytes;
    if (f) fclose(f);
    if (ok) recurrent_load(s, tmp);
    al_free(&s->alloc, tmp);
    return ok ? SLM_OK : err_set(&s->err, SLM_ERR_IO, "cannot read spilled checkpoint %s", c->path);
}

SLM_API void slm_session_checkpoint_stats(const slm_session *s, slm_checkpoint_stats *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!s) return;
    st->bytes_each = s->ckpt_bytes;
    for (int32_t i = 0; i < s->n_ckpt; i++) {
        if (s->ckpts[i].data) {
            st->n_in_memory++;
            st->bytes_in_memory += s->ckpt_bytes;
        } else {
            st->n_on_disk++;
            st->bytes_on_disk += s->ckpt_bytes;
        }
    }
}

SLM_API const int32_t *slm_session_checkpoints(const slm_session *s, size_t *n) {
    if (n) *n = 0;
    if (!s) return NULL;
    for (int32_t i = 0; i < s->n_ckpt; i++) s->ckpt_pos[i] = s->ckpts[i].pos;
    if (n) *n = (size_t)s->n_ckpt;
    return s->ckpt_pos;
}

/* ---- undo record ---------------------------------------------------------------------------- */

slm_status sess_undo_begin(slm_session *s, int32_t from) {
    if (s->has_recurrent && !s->undo && !(s->undo = al_malloc(&s->alloc, s->ckpt_bytes)))
        return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for the undo record");
    size_t need = (size_t)(s->pos - from) * sizeof(int32_t);
    for (int32_t i = 0; i < s->prog->n_states; i++) need += (size_t)(s->pos - from) * sess_kv_row_bytes(s, i);
    if (need > s->undo_kv_cap) {
        uint8_t *b = al_malloc(&s->alloc, need);
        if (!b) return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for the undo record");
        al_free(&s->alloc, s->undo_kv);
        s->undo_kv = b;
        s->undo_kv_cap = need;
    }
    if (s->has_recurrent) recurrent_save(s, s->undo);
    s->undo_pos = s->pos;
    s->undo_from = from;
    if (s->pos == from) return SLM_OK;
    uint8_t *p = s->undo_kv;
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        size_t row = sess_kv_row_bytes(s, i);
        if (!row) continue;
        memcpy(p, s->states[i].buf[s->states[i].front] + (size_t)from * row, (size_t)(s->pos - from) * row);
        p += (size_t)(s->pos - from) * row;
    }
    memcpy(p, s->history + from, (size_t)(s->pos - from) * sizeof(int32_t));
    return SLM_OK;
}

void sess_undo_restore(slm_session *s) {
    int32_t from = s->undo_from, n = s->undo_pos - from;
    if (s->has_recurrent) recurrent_load(s, s->undo);
    s->pos = s->undo_pos;
    s->logits_valid = false;
    if (n == 0) return;
    const uint8_t *p = s->undo_kv;
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        size_t row = sess_kv_row_bytes(s, i);
        if (!row) continue;
        memcpy(s->states[i].buf[s->states[i].front] + (size_t)from * row, p, (size_t)n * row);
        p += (size_t)n * row;
    }
    memcpy(s->history + from, p, (size_t)n * sizeof(int32_t));
}

/* ---- rollback and prefix reuse -------------------------------------------------------------- */

/* Rolls back to pos assuming the caller holds an undo record for failures. On success checkpoints
 * beyond pos are dropped. */
static slm_status rollback_inner(slm_session *s, int32_t pos) {
    if (pos == s->pos) return SLM_OK;
    if (!s->has_recurrent) {
        s->pos = pos;
        s->logits_valid = false;
        return SLM_OK;
    }
    int32_t c = -1;
    for (int32_t i = 0; i < s->n_ckpt; i++)
        if (s->ckpts[i].pos <= pos) c = i;
    slm_status st = ckpt_load(s, c);
    if (st) return st;
    int32_t from = c < 0 ? 0 : s->ckpts[c].pos;
    int32_t old_pos = s->pos;
    s->pos = from;
    if (pos > from && (st = sess_feed(s, s->history + from, pos - from, false))) {
        s->pos = old_pos;
        return st;
    }
    s->logits_valid = pos == from ? false : s->logits_valid;
    sess_ckpt_drop_after(s, pos);
    return SLM_OK;
}

SLM_API slm_status slm_session_rollback(slm_session *s, int32_t pos) {
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    if (pos < 0 || pos > s->pos)
        return err_set(&s->err, SLM_ERR_RANGE, "cannot roll back to position %d: the session is at %d", pos, s->pos);
    if (pos == s->pos) return SLM_OK;
    slm_status st = SLM_OK;
    s->verify_k = 0;
    if (s->has_recurrent && (st = sess_undo_begin(s, s->pos))) return st;
    if ((st = rollback_inner(s, pos))) {
        if (s->has_recurrent) sess_undo_restore(s);
        return st;
    }
    s->logits_valid = false;
    return SLM_OK;
}

SLM_API slm_status slm_session_sync(slm_session *s, const int32_t *tokens, size_t n, const float **logits,
                                    size_t *n_reused) {
    if (logits) *logits = NULL;
    if (n_reused) *n_reused = 0;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    if (!tokens || n == 0) return err_set(&s->err, SLM_ERR_INVALID_ARG, "no tokens given");
    if (n > (size_t)s->n_ctx)
        return err_set(&s->err, SLM_ERR_CONTEXT_FULL, "%zu tokens do not fit a %d-token context", n, s->n_ctx);
    size_t common = 0;
    while (common < n && common < (size_t)s->pos && s->history[common] == tokens[common]) common++;
    if (common == n) common = n - 1; /* recompute the last token so its logits exist */
    slm_status st;
    int32_t keep = s->pos;
    s->pos = (int32_t)common; /* validate the tail as if fed at the common prefix */
    st = sess_check_tokens(s, tokens + common, n - common);
    s->pos = keep;
    if (st) return st;
    if (common == (size_t)s->pos) {
        st = sess_feed(s, tokens + common, (int32_t)(n - common), true);
    } else {
        if ((st = sess_undo_begin(s, (int32_t)common))) return st;
        st = rollback_inner(s, (int32_t)common);
        if (!st) st = sess_feed(s, tokens + common, (int32_t)(n - common), false);
        if (st) {
            sess_undo_restore(s);
            sess_ckpt_drop_after(s, (int32_t)common);
        }
    }
    if (st) return st;
    if (logits) *logits = s->logits;
    if (n_reused) *n_reused = common;
    return SLM_OK;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

typedef struct snap_state {
    char name[G_NAME_CAP];
    slm_state_role role;
    uint32_t dtype;
    int32_t n_dims;
    int64_t ne[4];     /* allocated shape */
    size_t bytes;      /* stored bytes (KV: pos rows) */
    uint8_t *data;
} snap_state;

struct slm_snapshot {
    slm_allocator alloc;
    const slm_model *model;
    uint8_t fingerprint[16];
    int32_t n_ctx;
    slm_dtype kv_dtype;   /* K states */
    slm_dtype kv_dtype_v; /* V states */
    int32_t pos;
    int32_t n_states;
    snap_state *states;
    int32_t *history;   /* (pos) */
    uint64_t total_bytes;
};

SLM_API void slm_snapshot_destroy(slm_snapshot *snap) {
    if (!snap) return;
    slm_allocator a = snap->alloc;
    for (int32_t i = 0; snap->states && i < snap->n_states; i++) al_free(&a, snap->states[i].data);
    al_free(&a, snap->states);
    al_free(&a, snap->history);
    al_free(&a, snap);
}

SLM_API int32_t slm_snapshot_pos(const slm_snapshot *snap) { return snap ? snap->pos : 0; }
SLM_API uint64_t slm_snapshot_bytes(const slm_snapshot *snap) { return snap ? snap->total_bytes : 0; }

static void session_fingerprint(const slm_session *s, uint8_t out[16]) {
    if (s->model) slm_model_fingerprint(s->model, out);
    else memset(out, 0, 16);
}

/* Bytes of state i stored for position pos. */
static size_t stored_bytes(const slm_session *s, int32_t i, int32_t pos) {
    size_t row = sess_kv_row_bytes(s, i);
    return row ? (size_t)pos * row : s->states[i].bytes;
}

static slm_snapshot *snapshot_alloc(const slm_allocator *a, int32_t n_states, int32_t pos) {
    slm_snapshot *snap = al_calloc(a, 1, sizeof *snap);
    if (!snap) return NULL;
    snap->alloc = *a;
    snap->n_states = n_states;
    snap->pos = pos;
    snap->states = al_calloc(a, (size_t)n_states + 1, sizeof(snap_state));
    snap->history = al_calloc(a, (size_t)pos + 1, sizeof(int32_t));
    if (!snap->states || !snap->history) {
        slm_snapshot_destroy(snap);
        return NULL;
    }
    return snap;
}

SLM_API slm_status slm_session_snapshot(slm_session *s, slm_snapshot **out) {
    if (!out) return SLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    slm_snapshot *snap = snapshot_alloc(&s->alloc, s->prog->n_states, s->pos);
    if (!snap) return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for a snapshot");
    snap->model = s->model;
    session_fingerprint(s, snap->fingerprint);
    snap->n_ctx = s->n_ctx;
    snap->kv_dtype = s->kv_dtype;
    snap->kv_dtype_v = s->kv_dtype_v;
    memcpy(snap->history, s->history, (size_t)s->pos * sizeof(int32_t));
    snap->total_bytes = (uint64_t)s->pos * sizeof(int32_t);
    for (int32_t i = 0; i < s->prog->n_states; i++) {
        const g_state *gs = &s->prog->states[i];
        snap_state *ss = &snap->states[i];
        memcpy(ss->name, gs->name, sizeof ss->name);
        ss->role = gs->role;
        ss->dtype = gs->dtype;
        ss->n_dims = gs->n_dims;
        memcpy(ss->ne, gs->alloc_ne, sizeof ss->ne);
        ss->bytes = stored_bytes(s, i, s->pos);
        if (!(ss->data = al_malloc(&s->alloc, ss->bytes))) {
            slm_snapshot_destroy(snap);
            return err_set(&s->err, SLM_ERR_NOMEM, "out of memory for a snapshot");
        }
        memcpy(ss->data, s->states[i].buf[s->states[i].front], ss->bytes);
        snap->total_bytes += ss->bytes;
    }
    *out = snap;
    return SLM_OK;
}

/* Checks that snap can be restored into s; message on the session. */
static slm_status snapshot_compatible(slm_session *s, const slm_snapshot *snap, const char *what) {
    uint8_t fp[16];
    session_fingerprint(s, fp);
    if (memcmp(fp, snap->fingerprint, 16) != 0)
        return err_set(&s->err, SLM_ERR_STATE, "%s comes from another model (fingerprint differs)", what);
    if (snap->n_ctx != s->n_ctx)
        return err_set(&s->err, SLM_ERR_STATE, "%s has context size %d, the session %d", what, snap->n_ctx, s->n_ctx);
    if (snap->kv_dtype != s->kv_dtype || snap->kv_dtype_v != s->kv_dtype_v)
        return err_set(&s->err, SLM_ERR_STATE, "%s has %s K and %s V states, the session %s and %s", what,
                       slm_dtype_name(snap->kv_dtype), slm_dtype_name(snap->kv_dtype_v), slm_dtype_name(s->kv_dtype),
                       slm_dtype_name(s->kv_dtype_v));
    if (snap->n_states != s->prog->n_states)
        return err_set(&s->err, SLM_ERR_STATE, "%s has %d states, the session %d", what, snap->n_states, s->prog->n_states);
    if (snap->pos < 0 || snap->pos > s->n_ctx)
        return err_set(&s->err, SLM_ERR_STATE, "%s is at position %d, beyond the context", what, snap->pos);
    for (int32_t i = 0; i < snap->n_states; i++) {
        const g_state *gs = &s->prog->states[i];
        const snap_state *ss = &snap->states[i];
        if (strcmp(ss->name, gs->name) != 0 || ss->dtype != gs->dtype || ss->n_dims != gs->n_dims ||
            memcmp(ss->ne, gs->alloc_ne, sizeof ss->ne) != 0 || ss->bytes != stored_bytes(s, i, snap->pos))
            return err_set(&s->err, SLM_ERR_STATE, "%s: state %d (%s) does not match the session's %s", what, i,
                           ss->name, gs->name);
    }
    return SLM_OK;
}

/* Checkpoints stay valid up to the common prefix of the old and the restored history. */
static void snapshot_apply(slm_session *s, const slm_snapshot *snap) {
    int32_t common = 0;
    while (common < s->pos && common < snap->pos && s->history[common] == snap->history[common]) common++;
    for (int32_t i = 0; i < snap->n_states; i++)
        memcpy(s->states[i].buf[s->states[i].front], snap->states[i].data, snap->states[i].bytes);
    memcpy(s->history, snap->history, (size_t)snap->pos * sizeof(int32_t));
    s->pos = snap->pos;
    s->logits_valid = false;
    s->verify_k = 0;
    sess_ckpt_drop_after(s, common);
    sess_ckpt_take(s); /* rolling back to the restored position stays cheap */
}

SLM_API slm_status slm_session_restore(slm_session *s, const slm_snapshot *snap) {
    if (!s || !snap) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    slm_status st = snapshot_compatible(s, snap, "the snapshot");
    if (st) return st;
    snapshot_apply(s, snap);
    return SLM_OK;
}

SLM_API slm_status slm_session_fork(const slm_snapshot *snap, const slm_session_params *params, slm_session **out,
                                    char *err, size_t err_cap) {
    if (out) *out = NULL;
    if (!snap || !out || !snap->model) {
        if (err && err_cap) snprintf(err, err_cap, "slm_session_fork: a snapshot of a model session is required");
        return SLM_ERR_INVALID_ARG;
    }
    slm_session_params p = slm_session_params_default();
    params_read(&p, sizeof p, params);
    p.n_ctx = snap->n_ctx;
    p.kv_type = params_kv_type(snap->kv_dtype);
    p.kv_type_k = params_kv_type(snap->kv_dtype);
    p.kv_type_v = params_kv_type(snap->kv_dtype_v);
    slm_session *s = NULL;
    slm_status st = slm_session_create(snap->model, &p, &s, err, err_cap);
    if (st) return st;
    if ((st = slm_session_restore(s, snap))) {
        if (err && err_cap) snprintf(err, err_cap, "%s", slm_session_errmsg(s));
        slm_session_destroy(s);
        return st;
    }
    *out = s;
    return SLM_OK;
}

/* ---- state files ---------------------------------------------------------------------------- */

static bool put(FILE *f, XXH3_state_t *h, const void *p, size_t n) {
    XXH3_64bits_update(h, p, n);
    return fwrite(p, 1, n, f) == n;
}

static bool put_u32(FILE *f, XXH3_state_t *h, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(f, h, b, 4);
}

static bool put_u64(FILE *f, XXH3_state_t *h, uint64_t v) {
    return put_u32(f, h, (uint32_t)v) && put_u32(f, h, (uint32_t)(v >> 32));
}

/* Writes the state file image of s to f (see the layout at the top). False on a write error. */
static bool write_state(slm_session *s, FILE *f, XXH3_state_t *h) {
    XXH3_64bits_reset(h);
    uint8_t fp[16];
    session_fingerprint(s, fp);
    bool ok = put(f, h, STATE_MAGIC, 8) && put_u32(f, h, STATE_VERSION) && put_u32(f, h, 0) && put(f, h, fp, 16) &&
              put_u32(f, h, (uint32_t)s->n_ctx) && put_u32(f, h, (uint32_t)s->kv_dtype) &&
              put_u32(f, h, (uint32_t)s->kv_dtype_v) &&
              put_u32(f, h, (uint32_t)s->pos) && put_u32(f, h, (uint32_t)s->prog->n_states);
    for (int32_t i = 0; ok && i < s->prog->n_states; i++) {
        const g_state *gs = &s->prog->states[i];
        uint32_t name_len = (uint32_t)strlen(gs->name);
        ok = put_u32(f, h, name_len) && put(f, h, gs->name, name_len) && put_u32(f, h, (uint32_t)gs->role) &&
             put_u32(f, h, gs->dtype) && put_u32(f, h, (uint32_t)gs->n_dims);
        for (int d = 0; ok && d < 4; d++) ok = put_u64(f, h, (uint64_t)gs->alloc_ne[d]);
        size_t bytes = stored_bytes(s, i, s->pos);
        ok = ok && put_u64(f, h, bytes) && put(f, h, s->states[i].buf[s->states[i].front], bytes);
    }
    ok = ok && put_u32(f, h, (uint32_t)s->pos);
    for (int32_t i = 0; ok && i < s->pos; i++) ok = put_u32(f, h, (uint32_t)s->history[i]);
    uint64_t sum = XXH3_64bits_digest(h);
    uint8_t b[8];
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(sum >> (8 * k));
    return ok && fwrite(b, 1, 8, f) == 8 && fflush(f) == 0;
}

/* The file is written to a fresh temporary file beside path (path.XXXXXX, mkstemp), flushed to
 * disk and renamed over path, so concurrent savers and crashes leave either the old or one whole
 * new file, never a mix; on failure the temporary file is removed and path is untouched. */
SLM_API slm_status slm_session_save(slm_session *s, const char *path) {
    if (!s) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    if (!path) return err_set(&s->err, SLM_ERR_INVALID_ARG, "slm_session_save: path is NULL");
    size_t path_len = strlen(path);
    char *tmp = al_malloc(&s->alloc, path_len + 8);
    XXH3_state_t *h = XXH3_createState();
    if (!tmp || !h) {
        al_free(&s->alloc, tmp);
        XXH3_freeState(h);
        return err_set(&s->err, SLM_ERR_NOMEM, "out of memory");
    }
    memcpy(tmp, path, path_len);
    memcpy(tmp + path_len, ".XXXXXX", 8);
    slm_status st = SLM_OK;
    FILE *f = NULL;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = err_set(&s->err, SLM_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    struct stat old;
    if (stat(path, &old) == 0) (void)fchmod(fd, old.st_mode & 07777); /* keep the replaced file's mode */
    if (!(f = fdopen(fd, "wb"))) {
        st = err_set(&s->err, SLM_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        goto fail;
    }
    bool ok = write_state(s, f, h) && fsync(fd) == 0;
    int en = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) ok = false, en = errno;
    if (ok && rename(tmp, path) != 0) ok = false, en = errno;
    if (!ok) {
        st = err_set(&s->err, SLM_ERR_IO, "cannot write %s: %s", path, strerror(en ? en : EIO));
        goto fail;
    }
    goto done;
fail:
    unlink(tmp);
done:
    XXH3_freeState(h);
    al_free(&s->alloc, tmp);
    return st;
}

/* Replaces a reader error ("truncated: field at byte offset ...") with a state-file message: a field
 * that runs past the end is a cut file or a damaged size before it (the checksum comes after). */
static slm_status truncated(slm_err *e) {
    char inner[SLM_ERR_MSG_CAP];
    snprintf(inner, sizeof inner, "%s", e->msg);
    err_clear(e);
    return err_set(e, SLM_ERR_STATE, "damaged or truncated state file (%s)", inner);
}

/* Parses a state file image into a snapshot, checking in order: magic, version, structure
 * (truncation), checksum (damage), then compatibility with s (model, context, dtype, states).
 * Messages name the reason; nothing of s changes. */
slm_status sess_parse_state_file(slm_session *s, const uint8_t *data, size_t size, slm_snapshot **out) {
    slm_err *e = &s->err;
    *out = NULL;
    if (size >= 8 && memcmp(data, STATE_MAGIC, 8) != 0)
        return err_set(e, SLM_ERR_STATE, "not a statelm state file (bad magic)");
    rd r;
    rd_init(&r, data, size, e);
    const uint8_t *magic, *fp, *hist, *sum;
    uint32_t version, reserved, n_ctx, kv_dtype, kv_dtype_v, pos, n_states, n_hist;
    if (rd_bytes(&r, "magic", 8, &magic) || rd_u32(&r, "version", &version)) return truncated(e);
    if (version != STATE_VERSION && version != 1)
        return err_set(e, SLM_ERR_STATE, "unknown state file format version %u (this statelm reads 1 and %u)", version,
                       STATE_VERSION);
    if (rd_u32(&r, "reserved", &reserved) || rd_bytes(&r, "model fingerprint", 16, &fp) ||
        rd_u32(&r, "n_ctx", &n_ctx) || rd_u32(&r, "K dtype", &kv_dtype))
        return truncated(e);
    kv_dtype_v = kv_dtype;
    if ((version >= 2 && rd_u32(&r, "V dtype", &kv_dtype_v)) || rd_u32(&r, "position", &pos) ||
        rd_u32(&r, "state count", &n_states))
        return truncated(e);
    if (n_states > (uint32_t)rd_left(&r) / 56) /* each state takes at least 56 bytes */
        return err_set(e, SLM_ERR_STATE, "damaged or truncated state file: %u states cannot fit", n_states);
    if (pos > (uint32_t)rd_left(&r) / 4)
        return err_set(e, SLM_ERR_STATE, "damaged or truncated state file: position %u cannot fit", pos);
    slm_snapshot *snap = snapshot_alloc(&s->alloc, (int32_t)n_states, (int32_t)pos);
    if (!snap) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    slm_status st = SLM_OK;
    snap->model = s->model;
    memcpy(snap->fingerprint, fp, 16);
    snap->n_ctx = (int32_t)(n_ctx > INT32_MAX ? INT32_MAX : n_ctx);
    snap->kv_dtype = (slm_dtype)kv_dtype;
    snap->kv_dtype_v = (slm_dtype)kv_dtype_v;
    for (uint32_t i = 0; i < n_states && !st; i++) {
        snap_state *ss = &snap->states[i];
        uint32_t name_len, role, dtype, n_dims;
        const uint8_t *name, *bytes;
        uint64_t ne, n_bytes = 0;
        if (rd_u32(&r, "state name length", &name_len)) {
            st = truncated(e);
            break;
        }
        if (name_len >= sizeof ss->name) {
            st = err_set(e, SLM_ERR_STATE, "damaged state file: state %u has a %u-byte name", i, name_len);
            break;
        }
        if (rd_bytes(&r, "state name", name_len, &name) || rd_u32(&r, "state role", &role) ||
            rd_u32(&r, "state dtype", &dtype) || rd_u32(&r, "state dims", &n_dims)) {
            st = truncated(e);
            break;
        }
        memcpy(ss->name, name, name_len);
        ss->role = (slm_state_role)role;
        ss->dtype = dtype;
        ss->n_dims = (int32_t)(n_dims > 4 ? 5 : n_dims);
        for (int d = 0; d < 4 && !st; d++) {
            if (rd_u64(&r, "state shape", &ne)) st = truncated(e);
            ss->ne[d] = (int64_t)(ne > (uint64_t)INT64_MAX ? INT64_MAX : ne);
        }
        if (st) break;
        if (rd_u64(&r, "state byte count", &n_bytes) || rd_bytes(&r, "state data", (size_t)n_bytes, &bytes)) {
            st = truncated(e);
            break;
        }
        ss->bytes = (size_t)n_bytes;
        if (!(ss->data = al_malloc(&s->alloc, ss->bytes))) {
            st = err_set(e, SLM_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(ss->data, bytes, ss->bytes);
    }
    if (!st && (rd_u32(&r, "history length", &n_hist) || rd_bytes(&r, "history", (size_t)pos * 4, &hist) ||
                rd_bytes(&r, "checksum", 8, &sum)))
        st = truncated(e);
    if (!st && n_hist != pos)
        st = err_set(e, SLM_ERR_STATE, "damaged state file: history of %u tokens at position %u", n_hist, pos);
    if (!st && rd_left(&r) != 0)
        st = err_set(e, SLM_ERR_STATE, "damaged state file: %zu unexpected bytes at the end", rd_left(&r));
    if (!st && XXH3_64bits(data, size - 8) != ld_u64(sum))
        st = err_set(e, SLM_ERR_STATE, "damaged state file: checksum mismatch");
    if (!st) {
        for (uint32_t i = 0; i < pos; i++) snap->history[i] = (int32_t)ld_u32(hist + 4 * i);
        st = snapshot_compatible(s, snap, "the state file");
    }
    for (uint32_t i = 0; !st && i < pos; i++)
        if (snap->history[i] < 0 || snap->history[i] >= s->n_token_ids)
            st = err_set(e, SLM_ERR_STATE, "damaged state file: token %d at history index %u", snap->history[i], i);
    if (st) {
        slm_snapshot_destroy(snap);
        return st;
    }
    *out = snap;
    return SLM_OK;
}

SLM_API slm_status slm_session_load(slm_session *s, const char *path) {
    if (!s || !path) return SLM_ERR_INVALID_ARG;
    err_clear(&s->err);
    fmap m;
    slm_status st = fmap_open(&m, path, &s->err);
    if (st) return st;
    slm_snapshot *snap = NULL;
    st = sess_parse_state_file(s, m.data, m.size, &snap);
    fmap_close(&m);
    if (st) {
        err_prefix(&s->err, "%s: ", path);
        return st;
    }
    snapshot_apply(s, snap);
    slm_snapshot_destroy(snap);
    return SLM_OK;
}
