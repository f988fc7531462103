/* matcher.c — hash-consed grammar stacks, interned state sets and the lazy byte automaton over them
 * (matcher.h has the model and its invariants). Allocation failures surface as GM_NOMEM and leave
 * every table consistent (a half-built transition stays GM_UNKNOWN). */
#include <stdlib.h>
#include <string.h>

#include "grammar/matcher.h"

#define MAX_CP 0x10FFFFu

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static bool grow(const slm_allocator *a, void **p, int32_t *cap, int32_t need, size_t elem, size_t *bytes) {
    if (need <= *cap) return true;
    int32_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > INT32_MAX / 2) return false;
        c *= 2;
    }
    void *np = al_realloc(a, *p, (size_t)*cap * elem, (size_t)c * elem);
    if (!np) return false;
    *bytes += (size_t)(c - *cap) * elem;
    *p = np;
    *cap = c;
    return true;
}

/* Open-addressing table of id + 1 keyed by hash(id); rebuilt at double size when half full. */
typedef uint64_t (*hash_of_fn)(const gm *m, int32_t id);

static bool ht_rebuild(gm *m, int32_t **ht, int32_t *cap, int32_t n, hash_of_fn h) {
    int32_t c = *cap ? *cap : 256;
    while (c < 2 * (n + 1)) c *= 2;
    int32_t *t = al_calloc(m->a, (size_t)c, sizeof *t);
    if (!t) return false;
    for (int32_t id = 0; id < n; id++) {
        uint32_t i = (uint32_t)h(m, id) & (uint32_t)(c - 1);
        while (t[i]) i = (i + 1) & (uint32_t)(c - 1);
        t[i] = id + 1;
    }
    m->bytes += (size_t)(c - *cap) * sizeof *t;
    al_free(m->a, *ht);
    *ht = t;
    *cap = c;
    return true;
}

static uint64_t node_hash(int32_t pos, int32_t parent) { return mix(((uint64_t)(uint32_t)pos << 32) | (uint32_t)parent); }
static uint64_t node_hash_id(const gm *m, int32_t id) { return node_hash(m->nodes[id].pos, m->nodes[id].parent); }

/* The node (pos, parent); -1 on allocation failure. */
static int32_t cons(gm *m, int32_t pos, int32_t parent) {
    if (2 * (m->n_nodes + 1) > m->node_ht_cap && !ht_rebuild(m, &m->node_ht, &m->node_ht_cap, m->n_nodes, node_hash_id))
        return -1;
    uint32_t mask = (uint32_t)m->node_ht_cap - 1, i = (uint32_t)node_hash(pos, parent) & mask;
    for (; m->node_ht[i]; i = (i + 1) & mask) {
        const gm_node *n = &m->nodes[m->node_ht[i] - 1];
        if (n->pos == pos && n->parent == parent) return m->node_ht[i] - 1;
    }
    if (!grow(m->a, (void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof *m->nodes, &m->bytes)) return -1;
    m->nodes[m->n_nodes] = (gm_node){pos, parent};
    m->node_ht[i] = m->n_nodes + 1;
    return m->n_nodes++;
}

static uint64_t set_hash(const int32_t *v, int32_t n, uint8_t flags) {
    uint64_t h = mix(0x9e3779b97f4a7c15ull + flags);
    for (int32_t i = 0; i < n; i++) h = mix(h ^ (uint32_t)v[i]);
    return h;
}
static uint64_t set_hash_id(const gm *m, int32_t id) {
    return set_hash(m->set_pool + m->set_off[id], m->set_n[id], m->set_flags[id]);
}

/* The set of sorted distinct members v[0, n) with flags GM_SET_*; -1 on allocation failure. */
static int32_t intern_set(gm *m, const int32_t *v, int32_t n, uint8_t flags) {
    if (2 * (m->n_sets + 1) > m->set_ht_cap && !ht_rebuild(m, &m->set_ht, &m->set_ht_cap, m->n_sets, set_hash_id))
        return -1;
    uint32_t mask = (uint32_t)m->set_ht_cap - 1, i = (uint32_t)set_hash(v, n, flags) & mask;
    for (; m->set_ht[i]; i = (i + 1) & mask) {
        int32_t s = m->set_ht[i] - 1;
        if (m->set_n[s] == n && m->set_flags[s] == flags &&
            (!n || !memcmp(m->set_pool + m->set_off[s], v, (size_t)n * sizeof *v)))
            return s;
    }
    if (m->n_pool + (size_t)n > m->cap_pool || !m->set_pool) { /* never NULL once a set exists */
        size_t c = m->cap_pool ? m->cap_pool : 1024;
        while (c < m->n_pool + (size_t)n) c *= 2;
        int32_t *np = al_realloc(m->a, m->set_pool, m->cap_pool * sizeof *np, c * sizeof *np);
        if (!np) return -1;
        m->bytes += (c - m->cap_pool) * sizeof *np;
        m->set_pool = np;
        m->cap_pool = c;
    }
    int32_t cap = m->cap_sets;
    size_t b0 = m->bytes;
    if (m->n_sets + 1 > cap) {
        int32_t c = cap ? cap * 2 : 64;
        int32_t *o = al_realloc(m->a, m->set_off, (size_t)cap * sizeof *o, (size_t)c * sizeof *o);
        if (!o) return -1;
        m->set_off = o;
        int32_t *nn = al_realloc(m->a, m->set_n, (size_t)cap * sizeof *nn, (size_t)c * sizeof *nn);
        if (!nn) return -1;
        m->set_n = nn;
        uint8_t *f = al_realloc(m->a, m->set_flags, (size_t)cap, (size_t)c);
        if (!f) return -1;
        m->set_flags = f;
        m->cap_sets = c;
        m->bytes = b0 + (size_t)(c - cap) * 9;
    }
    if (n) memcpy(m->set_pool + m->n_pool, v, (size_t)n * sizeof *v);
    m->set_off[m->n_sets] = (int32_t)m->n_pool;
    m->set_n[m->n_sets] = n;
    m->set_flags[m->n_sets] = flags;
    m->n_pool += (size_t)n;
    m->set_ht[i] = m->n_sets + 1;
    return m->n_sets++;
}

static uint64_t ds_hash(int32_t set, uint32_t acc, uint8_t need, uint8_t len) {
    return mix(((uint64_t)(uint32_t)set << 32) ^ ((uint64_t)acc << 8) ^ ((uint64_t)need << 4) ^ len);
}
static uint64_t ds_hash_id(const gm *m, int32_t id) {
    const gm_dstate *d = &m->ds[id];
    return ds_hash(d->set, d->acc, d->need, d->len);
}

static int32_t intern_ds(gm *m, int32_t set, uint32_t acc, uint8_t need, uint8_t len) {
    if (2 * (m->n_ds + 1) > m->ds_ht_cap && !ht_rebuild(m, &m->ds_ht, &m->ds_ht_cap, m->n_ds, ds_hash_id)) return GM_NOMEM;
    uint32_t mask = (uint32_t)m->ds_ht_cap - 1, i = (uint32_t)ds_hash(set, acc, need, len) & mask;
    for (; m->ds_ht[i]; i = (i + 1) & mask) {
        const gm_dstate *d = &m->ds[m->ds_ht[i] - 1];
        if (d->set == set && d->acc == acc && d->need == need && d->len == len) return m->ds_ht[i] - 1;
    }
    if (m->n_ds + 1 > m->cap_ds) {
        int32_t cap = m->cap_ds;
        if (!grow(m->a, (void **)&m->ds, &cap, m->n_ds + 1, sizeof *m->ds, &m->bytes)) return GM_NOMEM;
        int32_t *t = al_realloc(m->a, m->trans, (size_t)m->cap_ds * 256 * sizeof *t, (size_t)cap * 256 * sizeof *t);
        if (!t) return GM_NOMEM; /* ds grew, cap_ds did not: the next call retries */
        m->bytes += (size_t)(cap - m->cap_ds) * 256 * sizeof *t;
        m->trans = t;
        m->cap_ds = cap;
    }
    m->ds[m->n_ds] = (gm_dstate){set, acc, need, len, NULL, NULL, 0};
    for (size_t k = 0; k < 256; k++) m->trans[(size_t)m->n_ds * 256 + k] = GM_UNKNOWN;
    m->ds_ht[i] = m->n_ds + 1;
    return m->n_ds++;
}

static bool push_work(gm *m, int32_t pos, int32_t parent) {
    if (!grow(m->a, (void **)&m->work, &m->cap_work, m->n_work + 2, sizeof *m->work, &m->bytes)) return false;
    m->work[m->n_work++] = pos;
    m->work[m->n_work++] = parent;
    return true;
}

/* Marks (pos, parent) seen in this advance; false when it already was. *fail on allocation failure. */
static bool first_visit(gm *m, int32_t pos, int32_t parent, bool *fail) {
    if (2 * (m->vis_n + 1) > m->vis_cap) {
        int32_t c = m->vis_cap ? m->vis_cap * 2 : 256;
        uint64_t *k = al_calloc(m->a, (size_t)c, sizeof *k);
        uint32_t *gn = al_calloc(m->a, (size_t)c, sizeof *gn);
        if (!k || !gn) {
            al_free(m->a, k);
            al_free(m->a, gn);
            *fail = true;
            return false;
        }
        for (int32_t j = 0; j < m->vis_cap; j++)
            if (m->vis_gen[j] == m->gen) {
                uint32_t i = (uint32_t)mix(m->vis_key[j]) & (uint32_t)(c - 1);
                while (gn[i] == m->gen) i = (i + 1) & (uint32_t)(c - 1);
                k[i] = m->vis_key[j];
                gn[i] = m->gen;
            }
        al_free(m->a, m->vis_key);
        al_free(m->a, m->vis_gen);
        m->vis_key = k;
        m->vis_gen = gn;
        m->vis_cap = c;
    }
    uint64_t key = ((uint64_t)(uint32_t)pos << 32) | (uint32_t)parent;
    uint32_t mask = (uint32_t)m->vis_cap - 1, i = (uint32_t)mix(key) & mask;
    for (; m->vis_gen[i] == m->gen; i = (i + 1) & mask)
        if (m->vis_key[i] == key) return false;
    m->vis_key[i] = key;
    m->vis_gen[i] = m->gen;
    m->vis_n++;
    return true;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static void new_generation(gm *m) {
    m->n_work = m->n_out = m->vis_n = 0;
    if (++m->gen == 0) { /* wrapped: stale stamps could match */
        if (m->vis_gen) memset(m->vis_gen, 0, (size_t)m->vis_cap * sizeof *m->vis_gen);
        m->gen = 1;
    }
}

/* Expands the work list into the set of stacks whose tops are classes; returns the set id, GM_DEAD
 * (no stack and no end) or GM_NOMEM. */
static int32_t close_set(gm *m) {
    const gr_grammar *g = m->g;
    bool accept = false, escaped = false, fail = false;
    while (m->n_work) {
        int32_t parent = m->work[--m->n_work], pos = m->work[--m->n_work];
        if (!first_visit(m, pos, parent, &fail)) {
            if (fail) return GM_NOMEM;
            continue;
        }
        const gr_elem *e = &g->elems[pos];
        if (e->type == GR_END) {
            if (parent < 0) accept = true;
            else if (m->nodes[parent].pos == GM_CTX) escaped = true;
            else if (!push_work(m, m->nodes[parent].pos, m->nodes[parent].parent)) return GM_NOMEM;
        } else if (e->type == GR_CLS) {
            int32_t id = cons(m, pos, parent);
            if (id < 0 || !grow(m->a, (void **)&m->out, &m->cap_out, m->n_out + 1, sizeof *m->out, &m->bytes))
                return GM_NOMEM;
            m->out[m->n_out++] = id;
        } else {
            int32_t ret = parent;
            if (g->elems[pos + 1].type != GR_END && (ret = cons(m, pos + 1, parent)) < 0) return GM_NOMEM;
            const gr_rule *r = &g->rules[e->val];
            for (int32_t a = r->alt_off + r->n_alt - 1; a >= r->alt_off; a--)
                if (!push_work(m, g->alts[a], ret)) return GM_NOMEM;
        }
    }
    if (!m->n_out && !accept && !escaped) return GM_DEAD;
    if (m->n_out > 1) qsort(m->out, (size_t)m->n_out, sizeof *m->out, cmp_i32); /* distinct: (pos, parent) visited once */
    uint8_t flags = (uint8_t)((accept ? GM_SET_ACCEPT : 0) | (escaped ? GM_SET_ESCAPED : 0));
    int32_t s = intern_set(m, m->out, m->n_out, flags);
    return s < 0 ? GM_NOMEM : s;
}

/* Set after the members of set s that `takes` says match (a code point, or a uniform range). */
static int32_t advance_members(gm *m, int32_t s, uint32_t cp, uint32_t members, bool by_members) {
    new_generation(m);
    const int32_t *v = m->set_pool + m->set_off[s];
    for (int32_t i = 0; i < m->set_n[s]; i++) {
        const gm_node *n = &m->nodes[v[i]];
        bool takes = by_members ? (members >> i & 1) : gr_class_has(m->g, m->g->elems[n->pos].val, cp);
        if (takes && !push_work(m, n->pos + 1, n->parent)) return GM_NOMEM;
        v = m->set_pool + m->set_off[s];
    }
    return close_set(m);
}

/* Set after matching code point cp from set s. */
static int32_t advance(gm *m, int32_t s, uint32_t cp) { return advance_members(m, s, cp, 0, false); }

/* For completions [lo, hi] (all valid scalar values) of a partial character in set s: GM_UNIFORM |
 * the members whose class holds all of them when every member's class holds all or none and some
 * does; 0 otherwise. */
static uint32_t uniform_members(const gm *m, int32_t s, uint32_t lo, uint32_t hi) {
    if (m->set_n[s] > GM_UNIFORM_MAX_MEMBERS) return 0;
    const int32_t *v = m->set_pool + m->set_off[s];
    uint32_t bits = 0;
    for (int32_t i = 0; i < m->set_n[s]; i++) {
        int32_t c = m->g->elems[m->nodes[v[i]].pos].val;
        if (gr_class_covers(m->g, c, lo, hi)) bits |= 1u << i;
        else if (gr_class_meets(m->g, c, lo, hi)) return 0;
    }
    return bits ? GM_UNIFORM | bits : 0;
}

/* True when some stack top of set s takes a scalar value in [lo, hi]. */
static bool meets(const gm *m, int32_t s, uint32_t lo, uint32_t hi) {
    if (hi > MAX_CP) hi = MAX_CP;
    const int32_t *v = m->set_pool + m->set_off[s];
    for (int32_t i = 0; i < m->set_n[s]; i++) {
        int32_t c = m->g->elems[m->nodes[v[i]].pos].val;
        if (lo <= 0xD7FF && gr_class_meets(m->g, c, lo, hi < 0xD7FF ? hi : 0xD7FF)) return true;
        if (hi >= 0xE000 && gr_class_meets(m->g, c, lo > 0xE000 ? lo : 0xE000, hi)) return true;
    }
    return false;
}

void gm_init(gm *m, const gr_grammar *g, const slm_allocator *a) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->a = a;
}

static void drop_tables(gm *m) {
    for (int32_t d = 0; d < m->n_ds; d++) {
        al_free(m->a, m->ds[d].mask);
        al_free(m->a, m->ds[d].esc);
    }
    al_free(m->a, m->trans);
    al_free(m->a, m->nodes);
    al_free(m->a, m->node_ht);
    al_free(m->a, m->set_pool);
    al_free(m->a, m->set_off);
    al_free(m->a, m->set_n);
    al_free(m->a, m->set_flags);
    al_free(m->a, m->set_ht);
    al_free(m->a, m->ds);
    al_free(m->a, m->ds_ht);
    const gr_grammar *g = m->g;
    const slm_allocator *a = m->a;
    int32_t *work = m->work, *out = m->out, cw = m->cap_work, co = m->cap_out, vc = m->vis_cap;
    uint64_t *vk = m->vis_key;
    uint32_t *vg = m->vis_gen, gen = m->gen;
    memset(m, 0, sizeof *m);
    m->g = g;
    m->a = a;
    m->work = work;
    m->cap_work = cw;
    m->out = out;
    m->cap_out = co;
    m->vis_key = vk;
    m->vis_gen = vg;
    m->vis_cap = vc;
    m->gen = gen;
    m->bytes = (size_t)cw * 4 + (size_t)co * 4 + (size_t)vc * 12;
}

void gm_deinit(gm *m) {
    drop_tables(m);
    al_free(m->a, m->work);
    al_free(m->a, m->out);
    al_free(m->a, m->vis_key);
    al_free(m->a, m->vis_gen);
    memset(m, 0, sizeof *m);
}

int32_t gm_start(gm *m) {
    const gr_rule *r = &m->g->rules[m->g->root];
    new_generation(m);
    for (int32_t a = r->alt_off + r->n_alt - 1; a >= r->alt_off; a--)
        if (!push_work(m, m->g->alts[a], -1)) return GM_NOMEM;
    int32_t s = close_set(m);
    if (s == GM_DEAD) return GM_DEAD;
    return s < 0 ? s : intern_ds(m, s, 0, 0, 0);
}

int32_t gm_step_slow(gm *m, int32_t d, uint8_t b) {
    gm_dstate st = m->ds[d];
    int32_t t = GM_DEAD;
    uint32_t acc;
    uint8_t need, len;
    if (st.need && (st.acc & GM_UNIFORM)) { /* every continuation byte completes a member-held scalar */
        if ((b & 0xC0) != 0x80) goto done;
        if (st.need > 1) {
            t = intern_ds(m, st.set, st.acc, (uint8_t)(st.need - 1), st.len);
        } else {
            int32_t s = advance_members(m, st.set, 0, st.acc & ~GM_UNIFORM, true);
            t = s < 0 ? s : intern_ds(m, s, 0, 0, 0);
        }
        goto done;
    }
    if (st.need == 0) {
        if (b < 0x80 || b == GR_TOKEN_MARK_BYTE) { /* the mark byte: a control token's bracket (grammar.h) */
            int32_t s = advance(m, st.set, b < 0x80 ? b : GR_TOKEN_MARK);
            t = s < 0 ? s : intern_ds(m, s, 0, 0, 0);
            goto done;
        }
        if (b >= 0xC2 && b <= 0xDF) acc = b & 0x1Fu, need = 1;
        else if (b >= 0xE0 && b <= 0xEF) acc = b & 0x0Fu, need = 2;
        else if (b >= 0xF0 && b <= 0xF4) acc = b & 0x07u, need = 3;
        else goto done;
        len = (uint8_t)(need + 1);
    } else {
        if ((b & 0xC0) != 0x80) goto done;
        acc = (st.acc << 6) | (b & 0x3Fu);
        need = (uint8_t)(st.need - 1);
        len = st.len;
    }
    uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (need == 0) {
        if (acc < min || acc > MAX_CP || (acc >= 0xD800 && acc <= 0xDFFF)) goto done;
        int32_t s = advance(m, st.set, acc);
        t = s < 0 ? s : intern_ds(m, s, 0, 0, 0);
        goto done;
    }
    uint32_t lo = acc << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    uint32_t uniform = 0;
    if (lo >= min && hi <= MAX_CP && (hi < 0xD800 || lo > 0xDFFF)) uniform = uniform_members(m, st.set, lo, hi);
    if (uniform) {
        t = intern_ds(m, st.set, uniform, need, len);
        goto done;
    }
    if (lo < min) lo = min;
    if (lo > hi || lo > MAX_CP || !meets(m, st.set, lo, hi)) goto done;
    t = intern_ds(m, st.set, acc, need, len);
done:
    if (t != GM_NOMEM) m->trans[(size_t)d * 256 + b] = t;
    return t;
}

bool gm_can_end(const gm *m, int32_t d) { return m->ds[d].need == 0 && (m->set_flags[m->ds[d].set] & GM_SET_ACCEPT); }

bool gm_only_end(const gm *m, int32_t d) { return m->ds[d].need == 0 && m->set_n[m->ds[d].set] == 0; }

slm_status gm_flush(gm *m, int32_t *d) {
    gm_dstate keep = m->ds[*d];
    int32_t n = m->set_n[keep.set];
    uint8_t flags = m->set_flags[keep.set];
    /* each stack as its positions, bottom first, separated by -1 */
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t x = m->set_pool[m->set_off[keep.set] + i]; x >= 0; x = m->nodes[x].parent) total++;
    int32_t *flat = al_array(m->a, total + (size_t)n + 1, sizeof *flat);
    if (!flat) {
        drop_tables(m);
        return SLM_ERR_NOMEM;
    }
    size_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t from = k;
        for (int32_t x = m->set_pool[m->set_off[keep.set] + i]; x >= 0; x = m->nodes[x].parent) flat[k++] = m->nodes[x].pos;
        for (size_t a = from, b = k - 1; a < b; a++, b--) {
            int32_t t = flat[a];
            flat[a] = flat[b];
            flat[b] = t;
        }
        flat[k++] = -1;
    }
    drop_tables(m);
    slm_status st = SLM_ERR_NOMEM;
    int32_t *members = al_array(m->a, (size_t)n + 1, sizeof *members);
    if (!members) goto done;
    k = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t node = -1;
        for (; flat[k] >= 0; k++)
            if ((node = cons(m, flat[k], node)) < 0) goto done;
        k++;
        members[i] = node;
    }
    qsort(members, (size_t)n, sizeof *members, cmp_i32);
    int32_t s = intern_set(m, members, n, flags);
    if (s < 0) goto done;
    int32_t nd = intern_ds(m, s, keep.acc, keep.need, keep.len);
    if (nd < 0) goto done;
    *d = nd;
    st = SLM_OK;
done:
    al_free(m->a, flat);
    al_free(m->a, members);
    if (st) drop_tables(m);
    return st;
}

/* Lowest common ancestor-or-self of nodes a and b (parents have lower ids), -1 when none. */
static int32_t common_node(const gm *m, int32_t a, int32_t b) {
    while (a != b && a >= 0 && b >= 0) {
        if (a > b) a = m->nodes[a].parent;
        else b = m->nodes[b].parent;
    }
    return a == b ? a : -1;
}

#define LOCAL_MAX_DEPTH 64 /* nodes kept per cut stack; deeper stacks are not split */

int32_t gm_local_start(gm *local, const gm *real, int32_t d) {
    const gm_dstate *ds = &real->ds[d];
    if (ds->need) return GM_NO_SPLIT;
    int32_t n = real->set_n[ds->set];
    const int32_t *v = real->set_pool + real->set_off[ds->set];
    if (!n) return GM_NO_SPLIT;
    int32_t cut = v[0]; /* the lowest node kept */
    if (n == 1) {
        for (int k = 0; k < 2 && real->nodes[cut].parent >= 0; k++) cut = real->nodes[cut].parent;
    } else {
        for (int32_t i = 1; i < n && cut >= 0; i++) cut = common_node(real, cut, v[i]);
    }
    if (cut < 0 || real->nodes[cut].parent < 0) return GM_NO_SPLIT;
    int32_t ctx = cons(local, GM_CTX, -1);
    if (ctx < 0) return GM_NOMEM;
    int32_t path[LOCAL_MAX_DEPTH];
    new_generation(local);
    for (int32_t i = 0; i < n; i++) {
        int32_t k = 0, x = v[i];
        for (; x != cut; x = real->nodes[x].parent) {
            if (x < 0 || k == LOCAL_MAX_DEPTH - 1) return GM_NO_SPLIT;
            path[k++] = real->nodes[x].pos;
        }
        path[k++] = real->nodes[cut].pos;
        int32_t node = ctx;
        while (k > 0)
            if ((node = cons(local, path[--k], node)) < 0) return GM_NOMEM;
        if (!grow(local->a, (void **)&local->out, &local->cap_out, local->n_out + 1, sizeof *local->out, &local->bytes))
            return GM_NOMEM;
        local->out[local->n_out++] = node;
    }
    if (local->n_out > 1) qsort(local->out, (size_t)local->n_out, sizeof *local->out, cmp_i32);
    int32_t s = intern_set(local, local->out, local->n_out, 0); /* distinct: distinct real stacks differ above the cut */
    return s < 0 ? GM_NOMEM : intern_ds(local, s, 0, 0, 0);
}
