/* check.c — `statelm check -m MODEL --target T [--json] [-c N_CTX] [--kv-f32]`: before anything is
 * compiled, every node and state write the target rejects or would run elsewhere, with the rule,
 * the node (function, position, layer, op) and the fix statelm applies (statelm plan applies it).
 * Exit status: 0 when the model is clean for the target, 1 when it is not, 2 on errors.
 * Also `statelm plan` (plan.c shares the option parsing through cli_plan_open). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_plan_open(const plan_opts *o, slm_model **m, slm_plan **pl) {
    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = o->n_threads;
    slm_status st = slm_model_load(o->model, &mp, m, err, sizeof err);
    if (st != SLM_OK) {
        cli_fail("%s (%s)", err, slm_status_name(st));
        return 2;
    }
    if (o->n_ctx) cli_warn_ctx(*m, o->n_ctx, o->kv_dtype);
    slm_plan_params pp = slm_plan_params_default();
    pp.target = o->target;
    pp.n_ctx = o->n_ctx;
    pp.kv_type = o->kv_dtype == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
    pp.kv_type_k = o->kv_k;
    pp.kv_type_v = o->kv_v;
    pp.n_prefill = o->n_prefill;
    cli_apply_env(NULL, &pp);
    if ((st = slm_plan_create(*m, &pp, pl, err, sizeof err)) != SLM_OK) {
        cli_name_env(err, sizeof err);
        cli_fail("%s (%s)", err, slm_status_name(st));
        return 2;
    }
    return 0;
}

int cli_plan_parse(int argc, char **argv, plan_opts *o, bool is_plan) {
    memset(o, 0, sizeof o[0]);
    o->kv_dtype = SLM_DTYPE_F16;
    o->target = "cpu";
    o->n_steps = 64;
    const char *cmd = is_plan ? "plan" : "check";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t iv;
#define VALUE() ((v = cli_value(argc, argv, &i)) != NULL)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!VALUE()) return 2;
            o->model = v;
        } else if (!strcmp(a, "--target")) {
            if (!VALUE()) return 2;
            o->target = v;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1 << 24, &iv)) return 2;
            o->n_ctx = (int32_t)iv;
        } else if (!strcmp(a, "--kv-f32")) {
            o->kv_dtype = SLM_DTYPE_F32;
        } else if ((iv = cli_kv_option(argc, argv, &i, &o->kv_k, &o->kv_v)) != 0) {
            if (iv < 0) return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1024, &iv)) return 2;
            o->n_threads = (int32_t)iv;
        } else if (!strcmp(a, "--force-threads")) {
            o->force_threads = true;
        } else if (is_plan && !strcmp(a, "--simulate")) {
            o->simulate = true;
        } else if (is_plan && !strcmp(a, "--profile")) {
            o->profile = true;
        } else if (is_plan && (!strcmp(a, "-r") || !strcmp(a, "--reps"))) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1000, &iv)) return 2;
            o->reps = (int32_t)iv;
        } else if (is_plan && (!strcmp(a, "-n") || !strcmp(a, "--steps"))) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1 << 20, &iv)) return 2;
            o->n_steps = (int32_t)iv;
        } else if (is_plan && !strcmp(a, "--prefill")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1 << 24, &iv)) return 2;
            o->n_prefill = (int32_t)iv;
        } else if (is_plan && (!strcmp(a, "-p") || !strcmp(a, "--prompt"))) {
            if (!VALUE()) return 2;
            o->prompt = v;
        } else if (is_plan && !strcmp(a, "--prompt-ids")) {
            if (!VALUE()) return 2;
            o->prompt_ids = v;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (is_plan)
                puts("usage: statelm plan -m MODEL [--target cpu|cuda|ane] [--json] [--simulate [-n STEPS]\n"
                     "         [-p TEXT | --prompt-ids 1,2,3]] [-c N_CTX] [--kv-f32] [-ctk T] [-ctv T] [--prefill N]\n"
                     "         [--profile [-p P] [-n N] [-r REPS]] [-t N [--force-threads]]\n"
                     "  the compute plan: the nodes a session executes, in order (a fused node names its pass\n"
                     "  and the IR nodes it runs), per node op/shapes/dtype/device/kernel/bytes/FLOPs/share,\n"
                     "  the activation arena per function, per state logical and allocated shape, buffers and\n"
                     "  every write's window, totals per device, the rewrites legalisation applied.\n"
                     "  --simulate runs the original and the legalised program on the CPU and compares their\n"
                     "  greedy tokens over STEPS (default 64): prints 'identical' or the first differing step\n"
                     "  (exit status 1). For a target computing in f16 (ane) it also runs the legalised program\n"
                     "  at that precision (activations and weights rounded to f16) and prints its largest logit\n"
                     "  difference from the original and its greedy-token agreement (a report, not an error).\n"
                     "  --profile runs the plan here: REPS (default 3) prefills of P tokens (default 128, the\n"
                     "  --prompt-ids when given) and N greedy decode steps (default 64), after a warm-up call\n"
                     "  of each; every node gets its median time per call and share, next to the estimate.\n"
                     "  With --profile, -p is the prefill length (as in statelm bench), not a text.\n"
                     "  Environment: SLM_KERNELS selects the CPU kernels the plan is compiled for.\n"
                     "  Shapes are in ggml order (ne[0] innermost).");
            else
                puts("usage: statelm check -m MODEL [--target cpu|cuda|ane] [--json] [-c N_CTX] [--kv-f32] [-ctk T] [-ctv T]\n"
                     "  every node and state write the target rejects or runs elsewhere, with the rule and the\n"
                     "  fix statelm applies. Exit status 0 when clean, 1 when not, 2 on errors.");
            return 0;
        } else {
            cli_fail("%s: unknown option '%s'", cmd, a);
            return 2;
        }
#undef VALUE
    }
    if (!o->model) {
        cli_fail("%s: -m MODEL is required", cmd);
        return 2;
    }
    if (o->profile) {
        o->n_profile_prompt = 128;
        if (o->prompt) {
            int64_t iv;
            if (!cli_parse_i64("-p", o->prompt, 2, 1 << 24, &iv)) return 2;
            o->n_profile_prompt = (int32_t)iv;
            o->prompt = NULL;
        }
        if (!o->reps) o->reps = 3;
        if (!o->n_prefill) o->n_prefill = o->n_profile_prompt;
    } else if (o->reps) {
        cli_fail("plan: -r REPS needs --profile");
        return 2;
    }
    if (o->prompt && o->prompt_ids) {
        cli_fail("plan: give at most one of -p TEXT and --prompt-ids");
        return 2;
    }
    o->n_threads = cli_cap_threads(o->n_threads, o->force_threads);
    return -1;
}

static void print_finding_group(const slm_plan_finding *f, int32_t n) {
    const slm_plan_finding *h = &f[0];
    if (h->function) {
        printf("  %-8s #%-4d", h->function, h->node);
        if (h->layer >= 0) printf(" layer %-3d", h->layer);
        else printf("          ");
        printf(" %s%s%s\n", h->op, h->state ? " " : "", h->state ? h->state : "");
    } else {
        printf("  %s\n", h->state);
    }
    for (int32_t k = 0; k < n; k++) {
        printf("      rule   %s (%s): %s [%s]\n", f[k].rule, slm_plan_effect_name(f[k].effect), f[k].rule_text, f[k].source);
        printf("      found  %s\n", f[k].detail);
        bool op_rule = strncmp(f[k].rule, "op.", 3) == 0;
        printf("      fix    %s%s\n", f[k].fix, f[k].fixed || op_rule ? "" : "  (NOT applied: the rule stays broken)");
    }
}

/* Prints the findings of pl grouped by node, then by state; returns the number of findings. */
int cli_print_findings(const slm_plan *pl) {
    int32_t n = slm_plan_n_findings(pl);
    slm_plan_finding *f = calloc((size_t)n + 1, sizeof *f);
    if (!f) return cli_fail("out of memory");
    int32_t n_nodes = 0, n_states = 0, n_reject = 0, n_unfixed = 0;
    for (int32_t i = 0; i < n; i++) {
        slm_plan_finding_at(pl, i, &f[i]);
        n_reject += f[i].effect == SLM_PLAN_REJECT;
        n_unfixed += !f[i].fixed;
    }
    for (int pass = 0; pass < 2; pass++) {
        bool any = false;
        for (int32_t i = 0; i < n;) {
            int32_t j = i + 1;
            while (j < n && f[j].function == f[i].function && f[j].node == f[i].node &&
                   (f[i].function || (f[j].state && f[i].state && !strcmp(f[j].state, f[i].state))))
                j++;
            if ((f[i].function != NULL) == (pass == 0)) {
                if (!any) printf(pass == 0 ? "nodes the target rejects or runs elsewhere:\n" : "states:\n");
                any = true;
                print_finding_group(&f[i], j - i);
                if (pass == 0) n_nodes++;
                else n_states++;
            }
            i = j;
        }
    }
    if (n == 0) printf("clean: no node or state breaks a rule of target %s\n", slm_plan_target(pl));
    else
        printf("summary: %d findings (%d reject, %d fallback) on %d nodes and %d states; %s\n", n, n_reject, n - n_reject,
               n_nodes, n_states,
               n_unfixed ? "some are not fixed by legalisation (see NOT applied / runs on)"
                         : "legalisation fixes all of them (statelm plan applies it)");
    free(f);
    return n;
}

int cmd_check(int argc, char **argv) {
    plan_opts o;
    int rc = cli_plan_parse(argc, argv, &o, false);
    if (rc >= 0) return rc;
    slm_model *m = NULL;
    slm_plan *pl = NULL;
    if ((rc = cli_plan_open(&o, &m, &pl))) goto done;
    if (o.json) {
        char *text = NULL;
        if (slm_plan_json(pl, true, &text) != SLM_OK) {
            rc = cli_fail("out of memory") + 1;
            goto done;
        }
        puts(text);
        slm_free(text);
        rc = slm_plan_n_findings(pl) ? 1 : 0;
    } else {
        printf("check: %s for target %s: %s\n", o.model, slm_plan_target(pl), slm_plan_executable(pl) ? "executable here" : "not executable here");
        printf("n_ctx %d, kv %s; shapes in ggml order (ne[0] innermost)\n", slm_plan_n_ctx(pl),
               slm_dtype_name(o.kv_dtype));
        rc = cli_print_findings(pl) ? 1 : 0;
    }
done:
    slm_plan_destroy(pl);
    slm_model_destroy(m);
    return rc;
}
