/* hfconfig.h — the JSON files of a Hugging Face model folder: config.json (required),
 * generation_config.json, tokenizer_config.json (optional). Parsed with cJSON; size-capped; broken
 * JSON is SLM_ERR_FORMAT naming the file and the byte offset where parsing stopped. Multimodal
 * configs that nest the text model under "text_config" expose that object as `text`.
 * Typed getters never crash on a wrong JSON type: they report the key and the expected type. */
#ifndef SLM_FORMAT_HFCONFIG_H
#define SLM_FORMAT_HFCONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct cJSON;

#define HF_MAX_JSON_BYTES (64u << 20)

typedef struct hf_config {
    struct cJSON *config;      /* config.json root (owned) */
    const struct cJSON *text;  /* config["text_config"] if present, else config (borrowed) */
    struct cJSON *generation;  /* generation_config.json or NULL */
    struct cJSON *tok_config;  /* tokenizer_config.json or NULL */
    char *tokenizer_json_path; /* dir/tokenizer.json if the file exists, else NULL */
} hf_config;

/* Parses a JSON document from memory; `what` names it in messages. */
slm_status hf_json_parse(const char *text, size_t len, const char *what, struct cJSON **out, slm_err *e);
/* Loads the folder's JSON files. config.json must exist and be an object. */
slm_status hf_config_open(hf_config *c, const char *dir, slm_err *e);
void hf_config_close(hf_config *c);

/* Getters on an object: SLM_ERR_NOT_FOUND (no message) when absent or null; SLM_ERR_FORMAT with a
 * message when present with the wrong type / out of range. Integers accept JSON numbers with an
 * integral value. */
slm_status hf_get_int(const struct cJSON *obj, const char *key, int64_t *out, slm_err *e);
slm_status hf_get_num(const struct cJSON *obj, const char *key, double *out, slm_err *e);
slm_status hf_get_bool(const struct cJSON *obj, const char *key, bool *out, slm_err *e);
slm_status hf_get_str(const struct cJSON *obj, const char *key, const char **out, slm_err *e);
/* Array or object member (borrowed). */
slm_status hf_get_array(const struct cJSON *obj, const char *key, const struct cJSON **out, slm_err *e);
slm_status hf_get_object(const struct cJSON *obj, const char *key, const struct cJSON **out, slm_err *e);

#endif
