/* tok_load.c — slm_tokenizer_load / slm_tokenizer_free: a tokenizer of its own from a file's
 * tokenizer metadata alone, without loading the model. A GGUF file needs its tokenizer.ggml.* keys
 * and nothing else (a vocab-only file without tensors, or a model of an architecture statelm does
 * not run); a folder needs tokenizer.json (+ config.json, as slm_model_load reads it). The file is
 * closed before returning: the tokenizer copies everything it keeps. */
#include <string.h>
#include <sys/stat.h>

#include "base/params.h"
#include "text/tok_impl.h"

SLM_API slm_status slm_tokenizer_load(const char *path, const slm_model_params *params, slm_tokenizer **out,
                                      char *err, size_t err_cap) {
    if (out) *out = NULL;
    slm_err e;
    slm_model_params p = slm_model_params_default();
    slm_allocator a;
    if (params_load_begin("slm_tokenizer_load", path, out != NULL, params, &p, &a, &e, err, err_cap)) return e.status;
    struct stat sb;
    slm_status st;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        hf_config c;
        memset(&c, 0, sizeof c);
        st = hf_config_open(&c, path, &e);
        if (st == SLM_OK) {
            st = tok_from_hf(&c, &a, out, &e);
            if (st == SLM_ERR_NOT_FOUND) st = err_set(&e, SLM_ERR_NOT_FOUND, "no tokenizer.json in the folder");
        }
        hf_config_close(&c);
    } else {
        gguf_file g;
        memset(&g, 0, sizeof g);
        st = gguf_open(&g, path, &a, &e);
        if (st == SLM_OK) {
            st = tok_from_gguf(&g, &a, out, &e);
            if (st == SLM_ERR_NOT_FOUND)
                st = err_set(&e, SLM_ERR_NOT_FOUND, "the file has no tokenizer (no tokenizer.ggml.model key)");
            else if (st != SLM_OK && strncmp(e.msg, "tokenizer", 9) != 0)
                err_prefix(&e, "tokenizer: ");
        }
        gguf_close(&g);
    }
    if (st != SLM_OK) {
        if (strncmp(e.msg, path, strlen(path)) != 0) err_prefix(&e, "%s: ", path);
        err_copy_out(&e, err, err_cap);
    }
    return st;
}

SLM_API void slm_tokenizer_free(slm_tokenizer *tok) { tok_destroy(tok); }
