/* export.c — `statelm export -m MODEL --target coreml -o OUT.mlpackage [--ctx N] [--prefill-len P]
 * [--weights f16] [--report] [--check-only]`: the legalised `ane` plan of the model as a Core ML
 * package (slm_plan_export). --check-only prints what `check --target ane` prints and exits 1
 * when the exporter would refuse the model; --report also writes OUT's compute plan (per MIL op:
 * ANE-eligible or why not) as OUT-without-.mlpackage.compute-plan.json beside the package.
 * Exit status: 0 on success, 1 when the model cannot be exported, 2 on usage or other errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int usage(void) {
    puts("usage: statelm export -m MODEL --target coreml -o OUT.mlpackage [--ctx N] [--prefill-len P]\n"
         "         [--weights f16] [--report] [--check-only] [--kv-f32] [-ctk T] [-ctv T]\n"
         "  writes the legalised program of the model's ane plan (statelm plan --target ane) as a Core ML\n"
         "  ML Program (iOS 18 / macOS 15): functions prefill (P tokens, default 64) and decode (1 token,\n"
         "  the default) sharing weights and states; every state an f16 state input at its allocated shape.\n"
         "  --check-only  print the findings of check --target ane; exit 1 when it cannot be exported\n"
         "  --report      also write OUT's compute plan (per op: ANE-eligible or why not) as JSON beside it");
    return 0;
}

int cmd_export(int argc, char **argv) {
    plan_opts o;
    memset(&o, 0, sizeof o);
    o.kv_dtype = SLM_DTYPE_F16;
    o.n_prefill = 64;
    const char *out = NULL, *weights = "f16";
    bool check_only = false, report = false, prefill_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t iv;
#define VALUE() ((v = cli_value(argc, argv, &i)) != NULL)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!VALUE()) return 2;
            o.model = v;
        } else if (!strcmp(a, "--target")) {
            if (!VALUE()) return 2;
            o.target = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!VALUE()) return 2;
            out = v;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx") || !strcmp(a, "--ctx-size")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1 << 24, &iv)) return 2;
            o.n_ctx = (int32_t)iv;
        } else if (!strcmp(a, "--prefill-len")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1 << 24, &iv)) return 2;
            o.n_prefill = (int32_t)iv;
            prefill_given = true;
        } else if (!strcmp(a, "--weights")) {
            if (!VALUE()) return 2;
            weights = v;
        } else if (!strcmp(a, "--kv-f32")) {
            o.kv_dtype = SLM_DTYPE_F32;
        } else if ((iv = cli_kv_option(argc, argv, &i, &o.kv_k, &o.kv_v)) != 0) {
            if (iv < 0) return 2;
        } else if (!strcmp(a, "--check-only")) {
            check_only = true;
        } else if (!strcmp(a, "--report")) {
            report = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            return usage();
        } else {
            cli_fail("export: unknown option '%s'", a);
            return 2;
        }
#undef VALUE
    }
    if (!o.model) return cli_fail("export: -m MODEL is required") + 1;
    if (!o.target || strcmp(o.target, "coreml") != 0)
        return cli_fail("export: --target coreml is required (the only export target)") + 1;
    if (!check_only && !out) return cli_fail("export: -o OUT.mlpackage is required") + 1;
    slm_dtype wdt = SLM_DTYPE_F16;
    if (strcmp(weights, "f16") == 0) wdt = SLM_DTYPE_F16;
    else if (strcmp(weights, "int8") == 0) wdt = SLM_DTYPE_Q8_0;
    else if (strcmp(weights, "int4") == 0) wdt = SLM_DTYPE_Q4_0;
    else return cli_fail("export: --weights must be f16, int8 or int4, not '%s'", weights) + 1;
    const char *why = NULL;
    if (!check_only && !slm_export_available("coreml", &why)) return cli_fail("export: %s", why) + 1;

    slm_model *m = NULL;
    slm_plan *pl = NULL;
    char *report_path = NULL;
    int rc;
    o.target = "ane";
    if ((rc = cli_plan_open(&o, &m, &pl))) goto done;
    if (o.n_prefill > slm_plan_n_ctx(pl)) {
        if (prefill_given) {
            rc = cli_fail("export: --prefill-len %d exceeds the context %d", o.n_prefill, slm_plan_n_ctx(pl)) + 1;
            goto done;
        }
        o.n_prefill = slm_plan_n_ctx(pl); /* the plan's prefill is at most the context */
    }
    slm_export_params ep = slm_export_params_default();
    ep.weights = wdt;
    if (check_only) {
        printf("check: %s for target ane (Core ML export)\n", o.model);
        printf("n_ctx %d, kv %s; shapes in ggml order (ne[0] innermost)\n", slm_plan_n_ctx(pl),
               slm_dtype_name(o.kv_dtype));
        cli_print_findings(pl);
        ep.dry_run = true;
        slm_status st = slm_plan_export(pl, out ? out : "check-only.mlpackage", &ep);
        if (st == SLM_OK) {
            printf("exportable: yes\n");
            rc = 0;
        } else {
            printf("exportable: no: %s\n", slm_plan_errmsg(pl));
            rc = 1;
        }
        goto done;
    }
    if (report) {
        size_t n = strlen(out);
        while (n > 1 && out[n - 1] == '/') n--;
        const char *suffix = ".mlpackage";
        size_t ns = strlen(suffix);
        size_t stem = n >= ns && strncmp(out + n - ns, suffix, ns) == 0 ? n - ns : n;
        report_path = malloc(stem + 32);
        if (!report_path) {
            rc = cli_fail("out of memory") + 1;
            goto done;
        }
        snprintf(report_path, stem + 32, "%.*s.compute-plan.json", (int)stem, out);
        ep.report_path = report_path;
    }
    slm_status st = slm_plan_export(pl, out, &ep);
    if (st != SLM_OK) {
        rc = cli_fail("%s (%s)", slm_plan_errmsg(pl), slm_status_name(st));
        goto done;
    }
    printf("exported %s: functions prefill (%d tokens) and decode (1 token), %d states, n_ctx %d\n", out,
           o.n_prefill, slm_plan_n_states(pl), slm_plan_n_ctx(pl));
    if (report_path) printf("compute plan: %s\n", report_path);
    rc = 0;
done:
    free(report_path);
    slm_plan_destroy(pl);
    slm_model_destroy(m);
    return rc;
}
