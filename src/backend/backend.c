/* backend.c — the one place that maps a backend kind to its implementation (its vtable), and the
 * backend-neutral calls runtime/ makes. A new backend adds its kind to backend_kind (backend.h)
 * and its vtable to the table below; nothing in runtime/ changes. */
#include "backend/backend.h"

#include <string.h>

static const backend_vtable *const vtables[BACKEND_KIND_COUNT] = {
    [BACKEND_CPU] = &backend_vtable_cpu,
};

int32_t backend_kind_find(const char *name) {
    for (int32_t k = 0; name && k < BACKEND_KIND_COUNT; k++)
        if (vtables[k] && strcmp(vtables[k]->name, name) == 0) return k;
    return -1;
}

slm_status backend_create(const slm_allocator *a, const backend_params *p, backend **out, slm_err *e) {
    *out = NULL;
    if ((unsigned)p->kind >= BACKEND_KIND_COUNT || !vtables[p->kind])
        return err_set(e, SLM_ERR_INVALID_ARG, "backend kind %d is not in this build", (int)p->kind);
    return vtables[p->kind]->create(a, p, out, e);
}

void backend_cache_destroy(be_model_cache *c) {
    if (c) c->vt->cache_destroy(c);
}
