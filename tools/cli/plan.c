/* plan.c — `statelm plan -m MODEL --target T [--json] [--simulate] [--profile] ...`: the compute
 * plan of the model for the target: the check's findings, the rewrites legalisation applied (with
 * precision warnings), per function the nodes a session executes, in order (a fused node names its
 * pass and IR nodes; op, shapes, dtype, device, kernel, reason, bytes, FLOPs, share of the cost),
 * the arena, totals per device, the accept plan (per conv/recurrent state how a partial accept of
 * a verify rebuilds it, or why it replays), per state the logical and allocated shapes, buffers
 * and each write's window with the rules it keeps. --simulate runs the original and legalised programs on
 * the CPU and compares their greedy tokens: prints "identical" or the first differing step (exit
 * status 1). --profile runs the plan and adds each node's measured median time per call. Exit
 * status 2 on errors. Shapes are printed in ggml order (ne[0] innermost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void print_rewrites(const slm_plan *pl) {
    int32_t n = slm_plan_n_rewrites(pl);
    printf("rewrites (%d):\n", n);
    for (int32_t i = 0; i < n; i++) {
        slm_plan_rewrite r;
        slm_plan_rewrite_at(pl, i, &r);
        printf("  %-13s %s\n", r.pass, r.detail);
        if (r.warning[0]) printf("  %-13s warning: %s\n", "", r.warning);
    }
}

static void fmt_num(double v, const char *unit, char *buf, size_t cap) {
    const char *pre[] = {"", "K", "M", "G", "T"};
    int k = 0;
    while (v >= 1000.0 && k < 4) {
        v /= 1000.0;
        k++;
    }
    snprintf(buf, cap, k ? "%.2f %s%s" : "%.0f %s%s", v, pre[k], unit);
}

static void print_function(const slm_plan *pl, int32_t fn, bool measured) {
    int32_t n = slm_plan_n_nodes(pl, fn);
    char arena[32];
    cli_fmt_bytes(slm_plan_function_arena_bytes(pl, fn), arena, sizeof arena);
    printf("\nfunction %s: %d nodes executed in this order, costs for %d token(s) per call, %s of activations\n",
           slm_plan_function_name(pl, fn), n, slm_plan_function_tokens(pl, fn), arena);
    if (measured)
        printf("  measured: median %.1f us per call (kernels and the executor between them)\n",
               slm_plan_function_measured_us(pl, fn));
    int32_t n_batched = 0;
    for (int32_t i = 0; i < n; i++) {
        slm_plan_node nd;
        slm_plan_node_at(pl, fn, i, &nd);
        n_batched += nd.batched;
    }
    if (n_batched)
        printf("  batched decode (slm_session_decode_batch, one column per session): the %d nodes marked B run once "
               "for all sessions, the other %d once per session\n",
               n_batched, n - n_batched);
    printf("  %4s %-13s %-24s %5s %-6s %-5s %10s %11s %6s%s  %s\n", "#", "op", "name", "layer", "dtype", "dev", "bytes",
           "flops", "share", measured ? "  median us  share" : "", "kernel / shapes (ggml order) / reason");
    for (int32_t i = 0; i < n; i++) {
        slm_plan_node nd;
        slm_plan_node_at(pl, fn, i, &nd);
        char b[32], f[32], m[40] = "";
        fmt_num(nd.bytes, "B", b, sizeof b);
        fmt_num(nd.flops, "", f, sizeof f);
        if (measured) snprintf(m, sizeof m, "  %9.2f %5.1f%%", nd.measured_us, 100.0 * nd.measured_share);
        printf("  %4d%s%-13s %-24s %5d %-6s %-5s %10s %11s %5.1f%%%s  %s\n", i, nd.batched ? "B" : " ", nd.op, nd.name,
               nd.layer, nd.dtype, nd.device, b, f, 100.0 * nd.cost_share, m, nd.kernel[0] ? nd.kernel : nd.shapes);
        if (nd.pass) {
            printf("  %4s %-13s %s of IR nodes", "", "", nd.pass);
            for (int32_t k = 0; k < nd.n_ir_nodes; k++) printf("%s#%d", k ? ", " : " ", nd.ir_nodes[k]);
            if (nd.output_state) printf("; output in state %s", nd.output_state);
            printf("\n");
        } else if (nd.output_state) {
            printf("  %4s %-13s output computed in state %s (direct_write)\n", "", "", nd.output_state);
        }
        if (nd.reason[0]) printf("  %4s %-13s reason: %s\n", "", "", nd.reason);
    }
    for (int32_t d = 0; d < slm_plan_n_devices(pl, fn); d++) {
        slm_plan_device_total t;
        slm_plan_device_total_at(pl, fn, d, &t);
        char b[32], f[32];
        fmt_num(t.bytes, "B", b, sizeof b);
        fmt_num(t.flops, "FLOP", f, sizeof f);
        printf("  total on %-5s %5d nodes  %12s  %14s  %5.1f%% of the cost\n", t.device, t.n_nodes, b, f, 100.0 * t.cost_share);
    }
}

/* The accept plan: per conv/recurrent state, how a partial accept of a verify call rebuilds it. */
static void print_accept(const slm_plan *pl) {
    int32_t n = slm_plan_n_accept_steps(pl), n_replay = 0, max_call = slm_plan_max_call_tokens(pl);
    if (n == 0 && max_call == 0) return;
    for (int32_t i = 0; i < n; i++) {
        slm_plan_accept_step a;
        slm_plan_accept_step_at(pl, i, &a);
        n_replay += strcmp(a.how, "replay") == 0;
    }
    printf("\naccept (slm_session_accept keeps n of the k tokens of one verify call): %d steps executed in this order, "
           "%s\n",
           n, n == 0     ? "no conv or recurrent state to rebuild"
              : n_replay ? "but the kept tokens are replayed for every state: a state below cannot be rebuilt"
                         : "each state rebuilt from the states before the verify and the verify's activations");
    if (n) printf("  %4s %-16s %-12s %11s  %s\n", "#", "state", "how", "verify node", "detail");
    for (int32_t i = 0; i < n; i++) {
        slm_plan_accept_step a;
        slm_plan_accept_step_at(pl, i, &a);
        char node[16] = "-";
        if (a.node >= 0) snprintf(node, sizeof node, "#%d", a.node);
        printf("  %4d %-16s %-12s %11s  %s\n", i, a.state, a.how, node, a.detail);
    }
    if (max_call > 0)
        printf("  a verify of more than %d tokens takes several calls: its accept replays the kept tokens\n", max_call);
}

static void print_states(const slm_plan *pl) {
    int32_t n = slm_plan_n_states(pl);
    printf("\nstates (%d): logical -> allocated shape (ggml order), dtype, bytes, writes\n", n);
    for (int32_t i = 0; i < n; i++) {
        slm_plan_state s;
        slm_plan_state_at(pl, i, &s);
        char lo[64], al[64], by[32];
        size_t o1 = 0, o2 = 0;
        for (int32_t d = 0; d < s.n_dims; d++) {
            o1 += (size_t)snprintf(lo + o1, sizeof lo - o1, "%s%lld", d ? ", " : "(", (long long)s.ne[d]);
            o2 += (size_t)snprintf(al + o2, sizeof al - o2, "%s%lld", d ? ", " : "(", (long long)s.alloc_ne[d]);
        }
        snprintf(lo + o1, sizeof lo - o1, ")");
        snprintf(al + o2, sizeof al - o2, ")");
        cli_fmt_bytes(s.size_bytes, by, sizeof by);
        char dt[32];
        if (s.dtype != s.orig_dtype) snprintf(dt, sizeof dt, "%s->%s", slm_dtype_name(s.orig_dtype), slm_dtype_name(s.dtype));
        else snprintf(dt, sizeof dt, "%s", slm_dtype_name(s.dtype));
        printf("  %-16s %-10s %-18s -> %-18s %-8s %s%s\n", s.name, slm_state_role_name(s.role), lo, al, dt, by,
               s.n_buffers == 2 ? " x 2 (double-buffered)" : "");
        for (int32_t k = 0; k < s.n_writes; k++) {
            slm_plan_write w;
            slm_plan_state_write_at(pl, i, k, &w);
            printf("      write %-8s #%-4d window %s\n", w.function, w.node, w.window);
            printf("      %-19s keeps %s\n", "", w.rules);
        }
    }
}

/* The prompt of the simulation: --prompt-ids, -p TEXT (with BOS), or a fixed default text. */
static int simulation_prompt(const slm_model *m, const plan_opts *o, int32_t **ids, size_t *n) {
    if (o->prompt_ids) return cli_parse_ids(o->prompt_ids, slm_model_n_vocab(m), ids, n) ? 0 : 2;
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    const char *text = o->prompt ? o->prompt : "The state of a model is first-class.";
    size_t cap = strlen(text) + 16;
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    if (!*ids) return cli_fail("out of memory") + 1;
    if (!tok) {
        if (o->prompt) return cli_fail("plan: the model has no tokenizer: use --prompt-ids") + 1;
        (*ids)[(*n)++] = 0;
        return 0;
    }
    slm_status st = slm_tokenizer_encode(tok, text, strlen(text), SLM_TOKENIZE_ADD_BOS, *ids, cap, n);
    if (st != SLM_OK || *n == 0) return cli_fail("cannot tokenize the simulation prompt (%s)", slm_status_name(st)) + 1;
    return 0;
}

/* The prefill of --profile: --prompt-ids, else n ids spread over the vocabulary. */
static int profile_prompt(const slm_model *m, const plan_opts *o, int32_t **ids, size_t *n) {
    if (o->prompt_ids) return cli_parse_ids(o->prompt_ids, slm_model_n_vocab(m), ids, n) ? 0 : 2;
    *n = (size_t)o->n_profile_prompt;
    if (!(*ids = malloc(*n * sizeof **ids))) return cli_fail("out of memory") + 1;
    int64_t vocab = slm_model_n_vocab(m);
    for (size_t i = 0; i < *n; i++) (*ids)[i] = (int32_t)((1 + (int64_t)i * 7919) % vocab);
    return 0;
}

int cmd_plan(int argc, char **argv) {
    plan_opts o;
    int rc = cli_plan_parse(argc, argv, &o, true);
    if (rc >= 0) return rc;
    slm_model *m = NULL;
    slm_plan *pl = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    if ((rc = cli_plan_open(&o, &m, &pl))) goto done;
    bool identical = true;
    int32_t first_diff = -1;
    if (o.simulate) {
        if ((rc = simulation_prompt(m, &o, &prompt, &n_prompt))) goto done;
        slm_status st = slm_plan_simulate(pl, prompt, n_prompt, o.n_steps, o.n_threads, &identical, &first_diff);
        if (st != SLM_OK) {
            rc = cli_fail("simulation failed: %s (%s)", slm_plan_errmsg(pl), slm_status_name(st)) + 1;
            goto done;
        }
    }
    if (o.profile) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if ((rc = profile_prompt(m, &o, &ids, &n_ids))) goto done;
        slm_status st = slm_plan_profile(pl, ids, n_ids, o.n_steps, o.reps, o.n_threads);
        free(ids);
        if (st != SLM_OK) {
            rc = cli_fail("profile failed: %s (%s)", slm_plan_errmsg(pl), slm_status_name(st)) + 1;
            goto done;
        }
    }
    if (o.json) {
        char *text = NULL;
        if (slm_plan_json(pl, false, &text) != SLM_OK) {
            rc = cli_fail("out of memory") + 1;
            goto done;
        }
        puts(text);
        slm_free(text);
    } else {
        printf("plan: %s for target %s (device %s, falls back to %s; %s)\n", o.model, slm_plan_target(pl),
               slm_plan_device(pl), slm_plan_fallback_device(pl),
               slm_plan_executable(pl) ? "executable here" : "not executable here: simulate it on the CPU");
        printf("n_ctx %d, kv %s; shapes in ggml order (ne[0] innermost); costs are estimates per call at a full\n"
               "context with nominal device figures (bytes: weights + activations + state; share: of the call)\n\n",
               slm_plan_n_ctx(pl), slm_dtype_name(o.kv_dtype));
        cli_print_findings(pl);
        printf("\n");
        print_rewrites(pl);
        if (slm_plan_kernels(pl)[0]) printf("\nkernels: %s\n", slm_plan_kernels(pl));
        for (int32_t fn = 0; fn < slm_plan_n_functions(pl); fn++) print_function(pl, fn, o.profile);
        print_accept(pl);
        print_states(pl);
    }
    if (o.simulate) {
        FILE *f = o.json ? stderr : stdout;
        fprintf(f, "%ssimulate on cpu: %d greedy tokens after a %zu-token prompt, original vs legalised program: ",
                o.json ? "" : "\n", o.n_steps, n_prompt);
        if (identical) fprintf(f, "identical\n");
        else fprintf(f, "first difference at step %d\n", first_diff);
        slm_dtype cdt;
        double diff;
        int32_t agree, steps;
        if (slm_plan_simulation_device(pl, &cdt, &diff, &agree, &steps) == SLM_OK)
            fprintf(f, "simulate at the device's precision (%s activations, f16 weights), fed the original's tokens: "
                    "max |logit diff| vs original %.6g, greedy tokens agree at %d of %d steps\n",
                    slm_dtype_name(cdt), diff, agree, steps);
        if (!identical) rc = 1;
    }
done:
    free(prompt);
    slm_plan_destroy(pl);
    slm_model_destroy(m);
    return rc;
}
