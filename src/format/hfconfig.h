/* hfconfig.h — the JSON files of a Hugging Face model folder: config.json (required),
 * generation_config.json, tokenizer_config.json (optional). Parsed with cJSON; size-capped; broken
 * JSON is SLM_ERR_FORMAT naming the file and the byte offset where parsing stopped. Multimodal
 * configs that nest the text model under "text_config" expose that object as `text`.
 * Typed getters never crash on a wrong JSON type: they report the key and the expected type. */
#ifndef SLM_FORMAT_HFCONFIG_H
#define SLM_FORMAT_HFCONFIG_H

#include <stdbool.h>
#include <stddef.h>
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

/* Parses one JSON document from text[0..len) (not necessarily NUL-terminated). Refused with
 * SLM_ERR_FORMAT and a message "what: ... at byte offset N (line L, column C)": texts over
 * HF_MAX_JSON_BYTES, NUL bytes, invalid UTF-8, syntax errors (offset where cJSON stopped), data
 * after the value, and objects with a duplicate key (cJSON would keep both; Python keeps the last).
 * On success *out is the root (caller frees with cJSON_Delete); on failure *out is NULL.
 * Allocation inside cJSON uses cJSON's hooks (malloc by default), not an slm_allocator. */
slm_status hf_json_parse(const char *text, size_t len, const char *what, struct cJSON **out, slm_err *e);
/* As hf_json_parse for JSON embedded in a larger file: texts over max_bytes are refused and byte
 * offsets in messages are base_offset + the offset inside text. */
slm_status hf_json_parse_at(const char *text, size_t len, const char *what, uint64_t base_offset, size_t max_bytes,
                            struct cJSON **out, slm_err *e);
/* "object", "array", "string", "number", "boolean", "null" (or "invalid") for messages. */
const char *hf_json_type_name(const struct cJSON *v);
/* Loads the folder's JSON files into *c (any earlier content is overwritten, not freed).
 * config.json must exist (else the status of the failed open: SLM_ERR_NOT_FOUND or SLM_ERR_IO) and be
 * an object; generation_config.json and tokenizer_config.json are optional but, when present, must
 * parse and be objects. "text_config" must be an object or null when present. On failure *c is
 * zeroed and e names the file. Free with hf_config_close. */
slm_status hf_config_open(hf_config *c, const char *dir, slm_err *e);
/* Frees everything and zeroes *c. Accepts NULL and zeroed structs. */
void hf_config_close(hf_config *c);

/* Getters on an object: SLM_ERR_NOT_FOUND (no message) when absent or null; SLM_ERR_FORMAT with a
 * message when present with the wrong type / out of range. Integers accept JSON numbers with an
 * integral value. */
/* Details: obj NULL counts as an empty object (NOT_FOUND), obj not an object is SLM_ERR_FORMAT.
 * NOT_FOUND leaves e untouched. On any failure *out is 0 / false / NULL. hf_get_int refuses
 * non-integral numbers and values outside [-2^63, 2^63) (JSON numbers are doubles in cJSON, so
 * 9223372036854775807 reads as 2^63 and is refused; integers above 2^53 may already be rounded).
 * hf_get_num refuses non-finite values (1e999). Strings and members are borrowed from obj. */
slm_status hf_get_int(const struct cJSON *obj, const char *key, int64_t *out, slm_err *e);
slm_status hf_get_num(const struct cJSON *obj, const char *key, double *out, slm_err *e);
slm_status hf_get_bool(const struct cJSON *obj, const char *key, bool *out, slm_err *e);
slm_status hf_get_str(const struct cJSON *obj, const char *key, const char **out, slm_err *e);
/* Array or object member (borrowed). */
slm_status hf_get_array(const struct cJSON *obj, const char *key, const struct cJSON **out, slm_err *e);
slm_status hf_get_object(const struct cJSON *obj, const char *key, const struct cJSON **out, slm_err *e);

#endif
