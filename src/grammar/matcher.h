/* matcher.h — the grammar's state set and its lazy byte automaton (matcher.c).
 *
 * A parse position is a stack of element indices (grammar.h): the top is a GR_CLS element to
 * match next, each entry below it the element to continue with when the rule above returns.
 * Stacks are hash-consed nodes (pos, parent): equal stacks are the same node id, so a state set is
 * a sorted array of node ids and equal sets are the same set id. A set also records whether the
 * grammar may end here (the empty stack). Calls are expanded eagerly; a call that is the last
 * element of its alternative does not push a return entry (so right recursion, which repetitions
 * become, keeps stacks flat).
 *
 * Over this, a deterministic automaton on bytes is built lazily: a dstate is (set, a partial UTF-8
 * character: bytes so far as acc, bytes still needed, total length). Its transition on a byte is
 * computed once and kept in a 256-entry table. A partial character survives only when some code
 * point completing it (a Unicode scalar value, not overlong) is in a class at the top of a stack, so
 * every live dstate has a completion: the automaton accepts exactly the viable prefixes.
 * A partial character whose completions are all valid scalar values and on which every stack top's
 * class is constant (holds all of them or none) is uniform: its acc is GM_UNIFORM | the bit set of
 * the set's members whose class holds them, so all such prefixes (a whole CJK block in a string)
 * are one dstate, and its last byte advances those members without decoding the character.
 *
 * Context split (gm_local_start): a second matcher holds stacks cut short, whose bottom is the
 * context node (pos GM_CTX) standing for whatever the real stack had below the cut. A return into
 * it is not followed: the set records that it escaped (GM_SET_ESCAPED) instead. What such a set
 * allows without escaping is allowed by every real set it was cut from; what escapes must be
 * checked against the real set.
 *
 * Invariants:
 * 1. nodes[i].pos is a GR_CLS element (top), the GR_REF/GR_CLS element a return resumes at, or
 *    GM_CTX (a context node, only ever a parent); parent < i or -1 (the bottom).
 * 2. a set's members are sorted ascending and distinct, each a node whose pos is GR_CLS.
 * 3. trans[256 d + b] is GM_UNKNOWN, GM_DEAD or the dstate after byte b from dstate d.
 * Memory only grows until gm_flush, which keeps one dstate (renumbered) and drops the rest. */
#ifndef SLM_GRAMMAR_MATCHER_H
#define SLM_GRAMMAR_MATCHER_H

#include "grammar/grammar.h"

#define GM_DEAD (-1)
#define GM_NOMEM (-2)
#define GM_UNKNOWN (-3)
#define GM_NO_SPLIT (-4)
#define GM_CTX (-2) /* pos of a context node */
#define GM_UNIFORM 0x80000000u /* acc flag of a uniform partial character (above) */
#define GM_UNIFORM_MAX_MEMBERS 31

enum { GM_SET_ACCEPT = 1, GM_SET_ESCAPED = 2 }; /* set_flags bits */

typedef struct gm_node {
    int32_t pos, parent;
} gm_node;

typedef struct gm_dstate {
    int32_t set;
    uint32_t acc;  /* bits of the partial character so far, or GM_UNIFORM | members (above) */
    uint8_t need;  /* continuation bytes still needed (0: on a character boundary) */
    uint8_t len;   /* length of the partial character's encoding */
    uint32_t *mask; /* cached token mask (allocated by the constraint through the matcher's a, freed with the
                     * tables), or NULL */
    int32_t *esc;   /* with mask in a context-split matcher: trie nodes where a token escapes (the same) */
    int32_t n_esc;
} gm_dstate;

typedef struct gm {
    const gr_grammar *g;
    const slm_allocator *a; /* every table below, masks and esc included (NULL: malloc/free) */
    gm_node *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *node_ht; /* id + 1, 0 = empty */
    int32_t node_ht_cap;
    int32_t *set_pool; /* members of every set */
    size_t n_pool, cap_pool;
    int32_t *set_off, *set_n;
    uint8_t *set_flags; /* GM_SET_* */
    int32_t n_sets, cap_sets;
    int32_t *set_ht;
    int32_t set_ht_cap;
    gm_dstate *ds;
    int32_t n_ds, cap_ds;
    int32_t *trans; /* (cap_ds * 256) transitions, see invariant 3 */
    int32_t *ds_ht;
    int32_t ds_ht_cap;
    /* scratch of one set advance */
    int32_t *work; /* (pos, parent) pairs */
    int32_t n_work, cap_work;
    uint64_t *vis_key;
    uint32_t *vis_gen;
    int32_t vis_cap, vis_n;
    uint32_t gen;
    int32_t *out;
    int32_t n_out, cap_out;
    size_t bytes; /* memory held by tables that grow (approximate) */
} gm;

/* An empty matcher on g whose tables are allocated through a (borrowed: it must outlive m). */
void gm_init(gm *m, const gr_grammar *g, const slm_allocator *a);
void gm_deinit(gm *m);
/* The dstate before any byte; GM_NOMEM on allocation failure. */
int32_t gm_start(gm *m);
/* Transition of dstate d on byte b: a dstate id, GM_DEAD or GM_NOMEM. */
int32_t gm_step_slow(gm *m, int32_t d, uint8_t b);
static inline int32_t gm_step(gm *m, int32_t d, uint8_t b) {
    int32_t t = m->trans[(size_t)d * 256 + b];
    return t != GM_UNKNOWN ? t : gm_step_slow(m, d, b);
}
/* True when the grammar may end in dstate d (on a character boundary, empty stack in the set). */
bool gm_can_end(const gm *m, int32_t d);
/* True when nothing but the end can follow d. */
bool gm_only_end(const gm *m, int32_t d);
/* The dstate of `local` (a matcher on the same grammar whose stacks are cut, above) for the real
 * dstate d of `real`: every stack of d cut below the lowest node all of them share (the top three
 * nodes of a single stack), a context node in place of what was cut. GM_NO_SPLIT when d is inside
 * a character or nothing would be cut; GM_NOMEM. */
int32_t gm_local_start(gm *local, const gm *real, int32_t d);
/* True when the set of dstate d saw a return into a context node (at a character boundary). */
static inline bool gm_escaped(const gm *m, int32_t d) {
    return m->ds[d].need == 0 && (m->set_flags[m->ds[d].set] & GM_SET_ESCAPED);
}

/* Drops every table but what dstate *d needs; *d becomes its new id. SLM_ERR_NOMEM leaves the
 * matcher empty (gm_start and *d must be recomputed by the caller: it resets). */
slm_status gm_flush(gm *m, int32_t *d);

#endif
