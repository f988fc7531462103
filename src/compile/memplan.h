/* memplan.h — activation memory planning for one function call over n tokens: every activation
 * (and the token input) gets an offset in one arena; buffers whose lifetimes do not overlap share
 * bytes. Lifetime of a tensor runs from the step producing it to the step of its last consumer,
 * where consumers of views (RESHAPE) count as consumers of the viewed tensor. The logits output
 * lives to the end. */
#ifndef SLM_COMPILE_MEMPLAN_H
#define SLM_COMPILE_MEMPLAN_H

#include <stddef.h>

#include "graph/graph.h"

#define MEMPLAN_NONE ((size_t)-1)
#define MEMPLAN_ALIGN 64

typedef struct memplan {
    int32_t fn;
    int64_t n;              /* token count the plan was made for */
    size_t arena_bytes;
    size_t *offset;         /* (program n_tensors): arena offset, or MEMPLAN_NONE */
    int32_t n_offsets;
} memplan;

/* Plans fn for n tokens. Frees/overwrites any previous contents of mp. Lifetimes count in steps:
 * step_of[i] (ascending; NULL = i) is the step that runs the node at position i, so the inputs of
 * a step stay live until it ends and its outputs never share bytes with them. Tensors with
 * not_stored[t] set (NULL = none) get no arena bytes: they live in a state buffer or only inside a
 * fused step. Tensors with keep[t] set (NULL = none) live to the end of the call (the accept
 * plan reads them after it). */
slm_status memplan_build(const g_program *p, int32_t fn, int64_t n, const int32_t *step_of, const uint8_t *not_stored,
                         const uint8_t *keep, memplan *mp, slm_err *e);
void memplan_free(const g_program *p, memplan *mp);
/* Bytes of tensor t for n tokens (activations are f32, the token input i32). */
size_t memplan_tensor_bytes(const g_tensor *t, int64_t n);

#endif
