/* info.c — `statelm info -m PATH [--json] [-c N_CTX] [--kv-f32]`: architecture, hyper-parameters
 * as the builder sees them, layer kinds, tensor count and type histogram, weight bytes, tokenizer,
 * chat template, and the states a session holds at the given (default) context. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct info_opts {
    const char *model;
    bool json;
    int32_t n_ctx;
    slm_dtype kv_dtype;
} info_opts;

static void shape_str(const int64_t *ne, int32_t n_dims, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int32_t d = 0; d < n_dims && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)ne[d]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static void print_text(const slm_model *m, const info_opts *o) {
    char b1[64], b2[64];
    printf("model:        %s\n", o->model);
    printf("format:       %s\n", slm_model_get_format(m) == SLM_FORMAT_GGUF ? "gguf" : "hf");
    printf("architecture: %s\n", slm_model_arch(m));
    printf("name:         %s\n", slm_model_name(m));
    printf("hyper-parameters:\n");
    for (int32_t i = 0; i < slm_model_n_hparams(m); i++) {
        const char *name;
        double v;
        slm_model_hparam(m, i, &name, &v);
        printf("  %-18s %g\n", name, v);
    }
    printf("layers (%d):\n", slm_model_n_layer(m));
    for (int kind = SLM_LAYER_ATTENTION; kind <= SLM_LAYER_SLIDING_ATTENTION; kind++) {
        int count = 0;
        for (int32_t il = 0; il < slm_model_n_layer(m); il++) count += slm_model_layer_kind(m, il) == (slm_layer_kind)kind;
        if (!count) continue;
        printf("  %-18s %d:", slm_layer_kind_name((slm_layer_kind)kind), count);
        for (int32_t il = 0; il < slm_model_n_layer(m); il++)
            if (slm_model_layer_kind(m, il) == (slm_layer_kind)kind) printf(" %d", il);
        printf("\n");
    }
    int hist[SLM_DTYPE_COUNT] = {0};
    for (int32_t i = 0; i < slm_model_n_tensors(m); i++) {
        slm_tensor_info t;
        slm_model_tensor(m, i, &t);
        if ((int)t.dtype >= 0 && t.dtype < SLM_DTYPE_COUNT) hist[t.dtype]++;
    }
    cli_fmt_bytes(slm_model_weight_bytes(m), b1, sizeof b1);
    printf("tensors:      %d (%s)\n", slm_model_n_tensors(m), b1);
    for (int t = 0; t < SLM_DTYPE_COUNT; t++)
        if (hist[t]) printf("  %-18s %d\n", slm_dtype_name((slm_dtype)t), hist[t]);
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    if (tok) {
        printf("tokenizer:    %s (pre %s), vocab %d\n", slm_tokenizer_get_kind(tok) == SLM_TOKENIZER_BPE ? "bpe" : "spm",
               slm_tokenizer_pre_name(tok), slm_tokenizer_n_vocab(tok));
        printf("  bos %d, eos %d, eot %d, pad %d, add_bos %s\n", slm_tokenizer_bos(tok), slm_tokenizer_eos(tok),
               slm_tokenizer_eot(tok), slm_tokenizer_pad(tok), slm_tokenizer_add_bos(tok) ? "yes" : "no");
    } else {
        printf("tokenizer:    none\n");
    }
    const char *tmpl = slm_model_chat_template(m);
    const char *fam = slm_chat_template_detect(m);
    const char *calls = slm_chat_tool_format(m, NULL);
    printf("chat template: %s%s%s%s%s\n", tmpl ? "stored (runs by default)" : "none", fam ? ", like the built-in " : "",
           fam ? fam : "", calls ? ", tool calls " : "", calls ? calls : "");
    int32_t n_ctx = o->n_ctx > 0 ? o->n_ctx : slm_model_n_ctx_default(m);
    printf("states (per sequence, n_ctx %d, kv %s):\n", n_ctx, slm_dtype_name(o->kv_dtype));
    uint64_t total = 0;
    for (int32_t i = 0; i < slm_model_n_states(m); i++) {
        slm_state_info s;
        slm_model_state(m, n_ctx, o->kv_dtype, i, &s);
        shape_str(s.ne, s.n_dims, b1, sizeof b1);
        cli_fmt_bytes(s.size_bytes, b2, sizeof b2);
        printf("  %-16s %-10s %-4s %-18s %s\n", s.name, slm_state_role_name(s.role), slm_dtype_name(s.dtype), b1, b2);
        total += s.size_bytes;
    }
    cli_fmt_bytes(total, b1, sizeof b1);
    printf("  total            %s\n", b1);
}

static cJSON *shape_json(const int64_t *ne, int32_t n_dims) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t d = 0; d < n_dims; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ne[d]));
    return a;
}

/* Strings from the file or the command line may hold invalid UTF-8, which cJSON copies as is:
 * each invalid sequence becomes U+FFFD so that the output is valid JSON. */
static void add_file_string(cJSON *obj, const char *key, const char *value) {
    char *clean = cli_utf8_sanitize(value ? value : "");
    cJSON_AddStringToObject(obj, key, clean ? clean : "");
    free(clean);
}

static int print_json(const slm_model *m, const info_opts *o) {
    cJSON *root = cJSON_CreateObject();
    add_file_string(root, "model", o->model);
    cJSON_AddStringToObject(root, "format", slm_model_get_format(m) == SLM_FORMAT_GGUF ? "gguf" : "hf");
    cJSON_AddStringToObject(root, "architecture", slm_model_arch(m));
    add_file_string(root, "name", slm_model_name(m));
    cJSON *hp = cJSON_AddObjectToObject(root, "hparams");
    for (int32_t i = 0; i < slm_model_n_hparams(m); i++) {
        const char *name;
        double v;
        slm_model_hparam(m, i, &name, &v);
        cJSON_AddNumberToObject(hp, name, v);
    }
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int32_t il = 0; il < slm_model_n_layer(m); il++)
        cJSON_AddItemToArray(layers, cJSON_CreateString(slm_layer_kind_name(slm_model_layer_kind(m, il))));
    cJSON *tensors = cJSON_AddObjectToObject(root, "tensors");
    cJSON_AddNumberToObject(tensors, "count", slm_model_n_tensors(m));
    cJSON_AddNumberToObject(tensors, "bytes", (double)slm_model_weight_bytes(m));
    cJSON *types = cJSON_AddObjectToObject(tensors, "types");
    for (int32_t i = 0; i < slm_model_n_tensors(m); i++) {
        slm_tensor_info t;
        slm_model_tensor(m, i, &t);
        const char *name = slm_dtype_name(t.dtype);
        cJSON *c = cJSON_GetObjectItemCaseSensitive(types, name);
        if (c) cJSON_SetNumberValue(c, c->valuedouble + 1);
        else cJSON_AddNumberToObject(types, name, 1);
    }
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    if (tok) {
        cJSON *t = cJSON_AddObjectToObject(root, "tokenizer");
        cJSON_AddStringToObject(t, "kind", slm_tokenizer_get_kind(tok) == SLM_TOKENIZER_BPE ? "bpe" : "spm");
        add_file_string(t, "pre", slm_tokenizer_pre_name(tok));
        cJSON_AddNumberToObject(t, "vocab_size", slm_tokenizer_n_vocab(tok));
        cJSON_AddNumberToObject(t, "bos", slm_tokenizer_bos(tok));
        cJSON_AddNumberToObject(t, "eos", slm_tokenizer_eos(tok));
        cJSON_AddNumberToObject(t, "eot", slm_tokenizer_eot(tok));
        cJSON_AddNumberToObject(t, "pad", slm_tokenizer_pad(tok));
        cJSON_AddBoolToObject(t, "add_bos", slm_tokenizer_add_bos(tok));
    } else {
        cJSON_AddNullToObject(root, "tokenizer");
    }
    cJSON_AddBoolToObject(root, "chat_template", slm_model_chat_template(m) != NULL);
    const char *fam = slm_chat_template_detect(m);
    if (fam) cJSON_AddStringToObject(root, "chat_template_family", fam);
    else cJSON_AddNullToObject(root, "chat_template_family");
    const char *calls = slm_chat_tool_format(m, NULL);
    if (calls) cJSON_AddStringToObject(root, "tool_call_format", calls);
    else cJSON_AddNullToObject(root, "tool_call_format");
    int32_t n_ctx = o->n_ctx > 0 ? o->n_ctx : slm_model_n_ctx_default(m);
    cJSON_AddNumberToObject(root, "n_ctx", n_ctx);
    cJSON *states = cJSON_AddArrayToObject(root, "states");
    double total = 0;
    for (int32_t i = 0; i < slm_model_n_states(m); i++) {
        slm_state_info s;
        slm_model_state(m, n_ctx, o->kv_dtype, i, &s);
        cJSON *js = cJSON_CreateObject();
        cJSON_AddStringToObject(js, "name", s.name);
        cJSON_AddStringToObject(js, "role", slm_state_role_name(s.role));
        cJSON_AddNumberToObject(js, "layer", s.layer);
        cJSON_AddStringToObject(js, "dtype", slm_dtype_name(s.dtype));
        cJSON_AddItemToObject(js, "shape", shape_json(s.ne, s.n_dims));
        cJSON_AddNumberToObject(js, "pos_axis", s.pos_axis);
        cJSON_AddNumberToObject(js, "bytes", (double)s.size_bytes);
        cJSON_AddItemToArray(states, js);
        total += (double)s.size_bytes;
    }
    cJSON_AddNumberToObject(root, "state_bytes", total);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return cli_fail("out of memory");
    puts(text);
    free(text);
    return 0;
}

int cmd_info(int argc, char **argv) {
    info_opts o = {NULL, false, 0, SLM_DTYPE_F16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(o.model = cli_value(argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            const char *v = cli_value(argc, argv, &i);
            int64_t n;
            if (!v || !cli_parse_i64(a, v, 1, 1 << 24, &n)) return 1;
            o.n_ctx = (int32_t)n;
        } else if (!strcmp(a, "--kv-f32")) {
            o.kv_dtype = SLM_DTYPE_F32;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: statelm info -m MODEL [--json] [-c N_CTX] [--kv-f32]");
            return 0;
        } else {
            return cli_fail("info: unknown option '%s'", a);
        }
    }
    if (!o.model) return cli_fail("info: -m MODEL is required");
    slm_model *m = NULL;
    char err[512];
    slm_status st = slm_model_load(o.model, NULL, &m, err, sizeof err);
    if (st != SLM_OK) return cli_fail("%s (%s)", err, slm_status_name(st));
    if (o.n_ctx) cli_warn_ctx(m, o.n_ctx, o.kv_dtype);
    int rc = o.json ? print_json(m, &o) : (print_text(m, &o), 0);
    slm_model_destroy(m);
    return rc;
}
