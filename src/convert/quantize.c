/* quantize.c — slm_quantize: GGUF in, GGUF out with weights quantised (docs/quantize.md). The
 * types come from format/quantize.h's rules (quantize_plan), in llama.cpp's order, which is also
 * the order of the output file; write.c writes it a slice of rows at a time, dropping each slice's
 * source pages once written. Metadata is copied byte for byte except general.quantization_version
 * and general.file_type, which are set as llama-quantize sets them. A Hugging Face folder as input
 * goes to slm_convert (hf.c), which plans as if from the folder's f32 conversion. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/params.h"
#include "convert/convert.h"
#include "format/quantize.h"

static bool is_replaced_key(const char *k) {
    return strcmp(k, "general.quantization_version") == 0 || strcmp(k, "general.file_type") == 0;
}

SLM_API slm_status slm_quantize(const char *in_path, const char *out_path, const char *type,
                                const slm_quantize_params *params, char *err, size_t err_cap) {
    slm_err e;
    err_clear(&e);
    slm_quantize_params p = slm_quantize_params_default();
    params_read(&p, sizeof p, params);
    const slm_allocator *a = &al_default;
    gguf_file g;
    memset(&g, 0, sizeof g);
    cv_kv kv = {buf_make(a), 0};
    const gguf_tensor **order = NULL;
    uint32_t *types = NULL, file_type = 0;
    slm_status st = SLM_OK;

    if (!in_path || !out_path || !type) {
        st = err_set(&e, SLM_ERR_INVALID_ARG, "slm_quantize: NULL argument");
        goto done;
    }
    /* the names first, so a typo is reported before the file is read */
    if ((st = quantize_check_type(type, &p, &e)) != SLM_OK) goto done;
    struct stat sb;
    if (stat(in_path, &sb) == 0 && S_ISDIR(sb.st_mode)) return slm_convert(in_path, out_path, type, &p, err, err_cap);
    if ((st = gguf_open(&g, in_path, a, &e)) != SLM_OK) goto done;
    if (g.n_tensors == 0) {
        st = err_set(&e, SLM_ERR_FORMAT, "%s holds no tensors", in_path);
        goto done;
    }
    order = al_array(a, (size_t)g.n_tensors, sizeof *order);
    types = al_array(a, (size_t)g.n_tensors, sizeof *types);
    if (!order || !types) {
        st = err_set(&e, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    char arch[64] = "", key[128];
    gguf_str arch_str = {0};
    int64_t n_layer = 0, n_expert = 0;
    if (gguf_get_str(&g, "general.architecture", &arch_str, NULL) == SLM_OK && arch_str.len < sizeof arch) {
        snprintf(arch, sizeof arch, "%.*s", (int)arch_str.len, arch_str.ptr);
        snprintf(key, sizeof key, "%s.block_count", arch);
        if (gguf_get_i64(&g, key, &n_layer, NULL) != SLM_OK) n_layer = 0;
        snprintf(key, sizeof key, "%s.expert_count", arch);
        if (gguf_get_i64(&g, key, &n_expert, NULL) != SLM_OK) n_expert = 0;
    }
    if ((st = quantize_plan(type, &p, arch, n_layer, n_expert, g.tensors, g.n_tensors, order, types, &file_type, &e)) !=
        SLM_OK)
        goto done;
    /* the source's pairs as they lie in the file, then the two replaced ones */
    for (uint64_t i = 0; i < g.n_kv; i++) {
        uint64_t end = i + 1 < g.n_kv ? g.kv[i + 1].offset : g.tensors[0].info_offset;
        if (is_replaced_key(g.kv[i].key)) continue;
        cv_put(&kv, g.map.data + g.kv[i].offset, (size_t)(end - g.kv[i].offset));
        kv.count++;
    }
    cv_kv_u32(&kv, "general.quantization_version", CV_QNT_VERSION);
    cv_kv_u32(&kv, "general.file_type", file_type);
    cv_output o = {.path = out_path, .force = p.force, .kv = &kv, .tensors = order, .types = types,
                   .n_tensors = g.n_tensors, .alignment = g.alignment, .map = &g.map, .n_threads = p.n_threads,
                   .a = a, .log = {p.log_fn, p.log_user_data}};
    st = cv_write_gguf(&o, &e);
done:
    buf_free(&kv.b);
    al_free(a, order);
    al_free(a, types);
    gguf_close(&g);
    if (st != SLM_OK) err_copy_out(&e, err, err_cap);
    else if (err && err_cap) err[0] = '\0';
    return st;
}
