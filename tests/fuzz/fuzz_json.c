/* fuzz_json.c — libFuzzer target for format/hfconfig: hf_json_parse on the input, then every typed
 * getter on the keys a model builder reads, on the root and on a nested "text_config", and on
 * members of other types (arrays, strings) as the enclosing value; frees the tree.
 * Seed corpus: tests/data/corpus/json/ (llama, qwen3, lfm2 and qwen3_5 style configs plus invalid
 * documents, written by tests/data/hf/gen_hf_fixtures.py). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/hfconfig.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const k_keys[] = {"hidden_size", "vocab_size", "rms_norm_eps", "tie_word_embeddings",
                                     "model_type",  "layer_types", "rope_parameters", "eos_token_id",
                                     "text_config", "head_dim",    ""};

/* Calls every getter for every key on obj and checks the out-param / message contract. */
static void exercise(const cJSON *obj) {
    for (size_t k = 0; k < sizeof k_keys / sizeof k_keys[0]; k++) {
        const char *key = k_keys[k];
        slm_err e;
        int64_t i;
        double d;
        bool b;
        const char *s;
        const cJSON *o;
        slm_status st;
        err_clear(&e);
        st = hf_get_int(obj, key, &i, &e);
        FUZZ_CHECK(st == SLM_OK || i == 0);
        FUZZ_CHECK(st != SLM_ERR_FORMAT || e.msg[0]);
        FUZZ_CHECK(st != SLM_ERR_NOT_FOUND || !e.msg[0]);
        err_clear(&e);
        st = hf_get_num(obj, key, &d, &e);
        FUZZ_CHECK(st == SLM_OK || d == 0);
        err_clear(&e);
        st = hf_get_bool(obj, key, &b, &e);
        FUZZ_CHECK(st == SLM_OK || !b);
        err_clear(&e);
        st = hf_get_str(obj, key, &s, &e);
        FUZZ_CHECK(st == SLM_OK ? s != NULL && strlen(s) < 1u << 30 : s == NULL);
        err_clear(&e);
        st = hf_get_array(obj, key, &o, &e);
        FUZZ_CHECK(st == SLM_OK ? cJSON_IsArray(o) : o == NULL);
        if (st == SLM_OK) {
            for (const cJSON *c = o->child; c; c = c->next) {
                err_clear(&e);
                (void)hf_get_int(c, "rope_theta", &i, &e);
            }
        }
        err_clear(&e);
        st = hf_get_object(obj, key, &o, &e);
        FUZZ_CHECK(st == SLM_OK ? cJSON_IsObject(o) : o == NULL);
        if (st == SLM_OK) {
            err_clear(&e);
            (void)hf_get_num(o, "rope_theta", &d, &e);
            err_clear(&e);
            (void)hf_get_array(o, "mrope_section", &o, &e);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *root = NULL;
    slm_err e;
    err_clear(&e);
    slm_status st = hf_json_parse((const char *)data, size, "fuzz.json", &root, &e);
    FUZZ_CHECK(st == SLM_OK ? root != NULL : (root == NULL && e.msg[0] != '\0'));
    if (st != SLM_OK) return 0;
    exercise(root);
    const cJSON *text = NULL;
    err_clear(&e);
    if (hf_get_object(root, "text_config", &text, &e) == SLM_OK) exercise(text);
    for (const cJSON *c = root->child; c; c = c->next) exercise(c);
    cJSON_Delete(root);
    return 0;
}
