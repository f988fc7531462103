/* place.c — gives every node of a (legalised) Program a device for a target: the target's device
 * when its op table takes the node and no state rule is still broken there, else the fallback
 * device with the reason. Nothing falls back silently: a node off the preferred device always
 * carries a reason (plan.h invariant 3). Reads the Program, the profile and the residual findings. */
#include <stdio.h>
#include <string.h>

#include "compile/plan.h"

void place_program(const g_program *p, const tgt_profile *t, const plan_findings *residual, plan_node *nodes) {
    for (int32_t fn = 0; fn < p->n_functions; fn++) {
        const g_function *f = &p->functions[fn];
        for (int32_t i = 0; i < f->n_nodes; i++) {
            int32_t id = f->nodes[i];
            const g_node *nd = &p->nodes[id];
            plan_node *pn = &nodes[id];
            pn->device = t->device.name;
            pn->reason[0] = '\0';
            const tgt_op_rule *r = tgt_op_lookup(t, nd->op, tgt_node_dtype(p, nd));
            if (!r || r->effect != TGT_OK) {
                pn->device = t->fallback.name;
                snprintf(pn->reason, sizeof pn->reason, "%s (%s): %s", g_op_name(nd->op),
                         slm_dtype_name((slm_dtype)tgt_node_dtype(p, nd)), r ? r->why : "the target has no such op");
                continue;
            }
            /* state rules still broken after legalisation: on this node, or on a state it touches */
            int32_t state = nd->op == G_OP_STATE_WRITE ? nd->p.write.state : nd->op == G_OP_STATE_READ ? nd->p.read.state : -1;
            for (int32_t k = 0; k < residual->n; k++) {
                const plan_finding *x = &residual->v[k];
                if (x->op_rule || x->effect == TGT_OK) continue;
                if (x->node == id || (x->fn < 0 && x->state >= 0 && x->state == state)) {
                    pn->device = t->fallback.name;
                    snprintf(pn->reason, sizeof pn->reason, "%s: %s (no legalisation applies)", x->rule, x->detail);
                    break;
                }
            }
        }
    }
}
