/* hfconfig.c — JSON documents of a Hugging Face model folder (config.json, generation_config.json,
 * tokenizer_config.json) and typed getters over cJSON objects.
 * Owns: the strict front end to cJSON (size cap, NUL/UTF-8 check, trailing data, duplicate keys,
 * error offsets) that safetensors.c also uses for its header. Does not interpret any field (model/
 * does) and does not parse tokenizer.json (text/ does; it only records the path).
 * References: RFC 8259 (JSON), cJSON 1.7 (numbers are doubles, duplicate keys are kept). */
#include "format/hfconfig.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/fmap.h"
#include "base/utf8.h"

const char *hf_json_type_name(const cJSON *v) {
    if (!v) return "invalid";
    switch (v->type & 0xFF) {
    case cJSON_False:
    case cJSON_True: return "boolean";
    case cJSON_NULL: return "null";
    case cJSON_Number: return "number";
    case cJSON_String: return "string";
    case cJSON_Array: return "array";
    case cJSON_Object: return "object";
    default: return "invalid";
    }
}

/* 1-based line and column (in bytes) of text[pos]. */
static void line_col(const char *text, size_t pos, size_t *line, size_t *col) {
    size_t l = 1, start = 0;
    for (size_t i = 0; i < pos; i++)
        if (text[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *col = pos - start + 1;
}

static slm_status fail_at(slm_err *e, const char *what, const char *text, size_t pos, uint64_t base, const char *why) {
    size_t line, col;
    line_col(text, pos, &line, &col);
    return err_set(e, SLM_ERR_FORMAT, "%s: %s at byte offset %llu (line %zu, column %zu)", what, why,
                   (unsigned long long)(base + pos), line, col);
}

/* Scratch list of keys reused across objects while checking for duplicates. */
typedef struct keybuf {
    const char **keys; /* (cap) */
    size_t cap;
} keybuf;

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Refuses an object anywhere under node that holds a key twice. Depth is bounded by cJSON's nesting
 * limit (CJSON_NESTING_LIMIT). */
static slm_status check_dups(const cJSON *node, bool is_root, keybuf *kb, const char *what, slm_err *e) {
    if (cJSON_IsObject(node)) {
        size_t n = 0;
        for (const cJSON *c = node->child; c; c = c->next) n++;
        if (n >= 2) {
            if (n > kb->cap) {
                const char **k = al_array(&al_default, n, sizeof *k);
                if (!k) return err_set(e, SLM_ERR_NOMEM, "%s: out of memory checking keys", what);
                al_free(&al_default, kb->keys);
                kb->keys = k;
                kb->cap = n;
            }
            size_t i = 0;
            for (const cJSON *c = node->child; c; c = c->next) kb->keys[i++] = c->string ? c->string : "";
            qsort(kb->keys, n, sizeof *kb->keys, cmp_key);
            for (i = 1; i < n; i++) {
                if (strcmp(kb->keys[i - 1], kb->keys[i]) != 0) continue;
                if (is_root)
                    return err_set(e, SLM_ERR_FORMAT, "%s: duplicate key \"%.200s\" in the top-level object", what,
                                   kb->keys[i]);
                if (node->string)
                    return err_set(e, SLM_ERR_FORMAT, "%s: duplicate key \"%.200s\" in object \"%.200s\"", what,
                                   kb->keys[i], node->string);
                return err_set(e, SLM_ERR_FORMAT, "%s: duplicate key \"%.200s\" in an object inside an array", what,
                               kb->keys[i]);
            }
        }
    }
    if (cJSON_IsObject(node) || cJSON_IsArray(node)) {
        for (const cJSON *c = node->child; c; c = c->next) {
            if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
            slm_status st = check_dups(c, false, kb, what, e);
            if (st != SLM_OK) return st;
        }
    }
    return SLM_OK;
}

static bool is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

slm_status hf_json_parse_at(const char *text, size_t len, const char *what, uint64_t base_offset, size_t max_bytes,
                            cJSON **out, slm_err *e) {
    *out = NULL;
    if (!what) what = "JSON";
    if (len > max_bytes)
        return err_set(e, SLM_ERR_FORMAT, "%s: JSON text is %zu bytes, over the limit of %zu", what, len, max_bytes);
    if (len > 0 && !text) return err_set(e, SLM_ERR_INVALID_ARG, "%s: NULL text", what);
    const uint8_t *u = (const uint8_t *)text;
    for (size_t i = 0; i < len;) {
        if (u[i] == 0) return fail_at(e, what, text, i, base_offset, "NUL byte");
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = utf8_decode(u + i, len - i, NULL);
        if (n == 0) return fail_at(e, what, text, i, base_offset, "invalid UTF-8");
        i += n;
    }
    /* A NUL-terminated copy: cJSON then never reads past our bytes even on a parser bug. */
    char *buf = al_malloc(&al_default, len + 1);
    if (!buf) return err_set(e, SLM_ERR_NOMEM, "%s: out of memory for %zu bytes of JSON", what, len);
    if (len) memcpy(buf, text, len);
    buf[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    slm_status st = SLM_OK;
    if (!root) {
        size_t pos = (end && end >= buf && end <= buf + len) ? (size_t)(end - buf) : 0;
        st = fail_at(e, what, text, pos, base_offset, len ? "invalid JSON" : "empty JSON text");
        goto done;
    }
    size_t pos = (end && end >= buf && end <= buf + len) ? (size_t)(end - buf) : len;
    while (pos < len && is_ws(buf[pos])) pos++;
    if (pos < len) {
        st = fail_at(e, what, text, pos, base_offset, "unexpected data after the JSON value");
        goto done;
    }
    keybuf kb = {NULL, 0};
    st = check_dups(root, true, &kb, what, e);
    al_free(&al_default, kb.keys);
done:
    al_free(&al_default, buf);
    if (st != SLM_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return SLM_OK;
}

slm_status hf_json_parse(const char *text, size_t len, const char *what, cJSON **out, slm_err *e) {
    return hf_json_parse_at(text, len, what, 0, HF_MAX_JSON_BYTES, out, e);
}

/* dir + "/" + name, or NULL when out of memory. */
static char *path_join(const char *dir, const char *name) {
    size_t dl = strlen(dir), nl = strlen(name), total;
    if (!size_add_ok(dl, nl, &total) || !size_add_ok(total, 2, &total)) return NULL;
    char *p = al_malloc(&al_default, total);
    if (!p) return NULL;
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl);
    p[dl + 1 + nl] = '\0';
    return p;
}

/* Reads and parses dir/name into *out, which must be an object. With optional, a missing file
 * leaves *out NULL and returns SLM_OK. */
static slm_status load_json_file(const char *dir, const char *name, bool optional, cJSON **out, slm_err *e) {
    *out = NULL;
    char *path = path_join(dir, name);
    if (!path) return err_set(e, SLM_ERR_NOMEM, "out of memory for the path of %s", name);
    char *text = NULL;
    size_t len = 0;
    slm_err local;
    err_clear(&local);
    slm_status st = file_read_all(path, HF_MAX_JSON_BYTES, &text, &len, &local);
    if (st != SLM_OK) {
        if (!(optional && st == SLM_ERR_NOT_FOUND)) err_set(e, st, "%s", local.msg);
        else st = SLM_OK;
        goto done;
    }
    st = hf_json_parse(text, len, path, out, e);
    if (st == SLM_OK && !cJSON_IsObject(*out)) {
        st = err_set(e, SLM_ERR_FORMAT, "%s: top-level JSON value is a%s %s, expected an object", path,
                     cJSON_IsArray(*out) ? "n" : "", hf_json_type_name(*out));
        cJSON_Delete(*out);
        *out = NULL;
    }
done:
    free(text);
    al_free(&al_default, path);
    return st;
}

slm_status hf_config_open(hf_config *c, const char *dir, slm_err *e) {
    memset(c, 0, sizeof *c);
    if (!dir) return err_set(e, SLM_ERR_INVALID_ARG, "hf_config_open: NULL folder");
    slm_status st = load_json_file(dir, "config.json", false, &c->config, e);
    if (st != SLM_OK) goto fail;
    c->text = c->config;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->config, "text_config");
    if (cJSON_IsObject(tc)) {
        c->text = tc;
    } else if (tc && !cJSON_IsNull(tc)) {
        st = err_set(e, SLM_ERR_FORMAT, "%s/config.json: key \"text_config\" is a%s %s, expected an object", dir,
                     cJSON_IsArray(tc) ? "n" : "", hf_json_type_name(tc));
        goto fail;
    }
    st = load_json_file(dir, "generation_config.json", true, &c->generation, e);
    if (st != SLM_OK) goto fail;
    st = load_json_file(dir, "tokenizer_config.json", true, &c->tok_config, e);
    if (st != SLM_OK) goto fail;
    char *tj = path_join(dir, "tokenizer.json");
    if (!tj) {
        st = err_set(e, SLM_ERR_NOMEM, "out of memory for the path of tokenizer.json");
        goto fail;
    }
    struct stat sb;
    if (stat(tj, &sb) == 0 && S_ISREG(sb.st_mode)) c->tokenizer_json_path = tj;
    else al_free(&al_default, tj);
    return SLM_OK;
fail:
    hf_config_close(c);
    return st;
}

void hf_config_close(hf_config *c) {
    if (!c) return;
    cJSON_Delete(c->config);
    cJSON_Delete(c->generation);
    cJSON_Delete(c->tok_config);
    al_free(&al_default, c->tokenizer_json_path);
    memset(c, 0, sizeof *c);
}

/* ---- typed getters ---- */

/* Finds obj[key]: SLM_OK with *item set, SLM_ERR_NOT_FOUND (no message) for absent/null/NULL obj,
 * SLM_ERR_FORMAT when obj is not an object. */
static slm_status lookup(const cJSON *obj, const char *key, const cJSON **item, slm_err *e) {
    *item = NULL;
    if (!obj || !key) return SLM_ERR_NOT_FOUND;
    if (!cJSON_IsObject(obj))
        return err_set(e, SLM_ERR_FORMAT, "cannot read key \"%.200s\": the enclosing JSON value is a %s, not an object",
                       key, hf_json_type_name(obj));
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) return SLM_ERR_NOT_FOUND;
    *item = it;
    return SLM_OK;
}

/* Message for a present key of the wrong type, naming "parent.key" when obj is a named member. */
static slm_status wrong_type(const cJSON *obj, const char *key, const cJSON *it, const char *want, slm_err *e) {
    const char *parent = obj->string;
    return err_set(e, SLM_ERR_FORMAT, "key \"%.200s%s%.200s\" is a%s %s, expected %s", parent ? parent : "",
                   parent ? "." : "", key, (cJSON_IsArray(it) || cJSON_IsObject(it)) ? "n" : "", hf_json_type_name(it),
                   want);
}

slm_status hf_get_int(const cJSON *obj, const char *key, int64_t *out, slm_err *e) {
    *out = 0;
    const cJSON *it;
    slm_status st = lookup(obj, key, &it, e);
    if (st != SLM_OK) return st;
    if (!cJSON_IsNumber(it)) return wrong_type(obj, key, it, "an integer", e);
    double d = it->valuedouble;
    const char *parent = obj->string;
    if (!(d >= -0x1p63 && d < 0x1p63))
        return err_set(e, SLM_ERR_FORMAT, "key \"%.200s%s%.200s\" = %g is outside the int64 range", parent ? parent : "",
                       parent ? "." : "", key, d);
    int64_t v = (int64_t)d;
    if ((double)v != d)
        return err_set(e, SLM_ERR_FORMAT, "key \"%.200s%s%.200s\" = %.17g is not an integer", parent ? parent : "",
                       parent ? "." : "", key, d);
    *out = v;
    return SLM_OK;
}

slm_status hf_get_num(const cJSON *obj, const char *key, double *out, slm_err *e) {
    *out = 0;
    const cJSON *it;
    slm_status st = lookup(obj, key, &it, e);
    if (st != SLM_OK) return st;
    if (!cJSON_IsNumber(it)) return wrong_type(obj, key, it, "a number", e);
    if (!isfinite(it->valuedouble)) {
        const char *parent = obj->string;
        return err_set(e, SLM_ERR_FORMAT, "key \"%.200s%s%.200s\" is not a finite number", parent ? parent : "",
                       parent ? "." : "", key);
    }
    *out = it->valuedouble;
    return SLM_OK;
}

slm_status hf_get_bool(const cJSON *obj, const char *key, bool *out, slm_err *e) {
    *out = false;
    const cJSON *it;
    slm_status st = lookup(obj, key, &it, e);
    if (st != SLM_OK) return st;
    if (!cJSON_IsBool(it)) return wrong_type(obj, key, it, "a boolean", e);
    *out = cJSON_IsTrue(it);
    return SLM_OK;
}

slm_status hf_get_str(const cJSON *obj, const char *key, const char **out, slm_err *e) {
    *out = NULL;
    const cJSON *it;
    slm_status st = lookup(obj, key, &it, e);
    if (st != SLM_OK) return st;
    if (!cJSON_IsString(it) || !it->valuestring) return wrong_type(obj, key, it, "a string", e);
    *out = it->valuestring;
    return SLM_OK;
}

slm_status hf_get_array(const cJSON *obj, const char *key, const cJSON **out, slm_err *e) {
    *out = NULL;
    const cJSON *it;
    slm_status st = lookup(obj, key, &it, e);
    if (st != SLM_OK) return st;
    if (!cJSON_IsArray(it)) return wrong_type(obj, key, it, "an array", e);
    *out = it;
    return SLM_OK;
}

slm_status hf_get_object(const cJSON *obj, const char *key, const cJSON **out, slm_err *e) {
    *out = NULL;
    const cJSON *it;
    slm_status st = lookup(obj, key, &it, e);
    if (st != SLM_OK) return st;
    if (!cJSON_IsObject(it)) return wrong_type(obj, key, it, "an object", e);
    *out = it;
    return SLM_OK;
}
