/* test_hfconfig.c — format/hfconfig: the config fixtures of tests/data/hf (written by
 * gen_hf_fixtures.py: a llama config, a Qwen3.5 config with nested text_config, generation and
 * tokenizer configs), broken JSON with the byte offset where parsing stopped, and every typed
 * getter on right, wrong, absent and null values. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/hfconfig.h"

static void msg_has(const slm_err *e, const char *needle) {
    if (!strstr(e->msg, needle)) {
        print_error("message \"%s\" lacks \"%s\"\n", e->msg, needle);
        fail();
    }
}

/* The byte offset named in a message ("... at byte offset N ..."), or -1. */
static long msg_offset(const slm_err *e) {
    const char *p = strstr(e->msg, "byte offset ");
    long v = -1;
    if (p && sscanf(p + 12, "%ld", &v) != 1) v = -1;
    return v;
}

/* Opens a temp folder holding config.json = text (and optionally other files); returns the status. */
static slm_status open_cfg(const char *config, size_t len, slm_err *e) {
    char *dir = tu_temp_dir();
    assert_non_null(dir);
    tu_write_in_dir(dir, "config.json", config, len);
    hf_config c;
    err_clear(e);
    slm_status st = hf_config_open(&c, dir, e);
    if (st != SLM_OK) {
        assert_null(c.config);
        assert_null(c.generation);
        assert_null(c.tok_config);
        assert_null(c.tokenizer_json_path);
    }
    hf_config_close(&c);
    tu_rm_dir(dir);
    return st;
}

static slm_status open_cfg_text(const char *config, slm_err *e) { return open_cfg(config, strlen(config), e); }

static void write_text(const char *dir, const char *name, const char *text) {
    tu_write_in_dir(dir, name, text, strlen(text));
}

/* ---- fixtures ---- */

static void qwen35_folder(void **unused) {
    (void)unused;
    hf_config c;
    slm_err e;
    err_clear(&e);
    assert_int_equal(hf_config_open(&c, tu_data_path("hf/sharded"), &e), SLM_OK);
    assert_non_null(c.config);
    assert_true(c.text != c.config);
    int64_t i;
    double d;
    bool b;
    const char *s;
    const cJSON *o;
    assert_int_equal(hf_get_str(c.config, "model_type", &s, &e), SLM_OK);
    assert_string_equal(s, "qwen3_5");
    assert_int_equal(hf_get_str(c.text, "model_type", &s, &e), SLM_OK);
    assert_string_equal(s, "qwen3_5_text");
    assert_int_equal(hf_get_int(c.text, "hidden_size", &i, &e), SLM_OK);
    assert_int_equal(i, 1024);
    assert_int_equal(hf_get_int(c.text, "num_hidden_layers", &i, &e), SLM_OK);
    assert_int_equal(i, 24);
    assert_int_equal(hf_get_int(c.text, "vocab_size", &i, &e), SLM_OK);
    assert_int_equal(i, 248320);
    assert_int_equal(hf_get_num(c.text, "rms_norm_eps", &d, &e), SLM_OK);
    assert_true(d == 1e-6);
    assert_int_equal(hf_get_bool(c.text, "attn_output_gate", &b, &e), SLM_OK);
    assert_true(b);
    assert_int_equal(hf_get_bool(c.text, "attention_bias", &b, &e), SLM_OK);
    assert_false(b);
    assert_int_equal(hf_get_array(c.text, "layer_types", &o, &e), SLM_OK);
    assert_int_equal(cJSON_GetArraySize(o), 24);
    assert_string_equal(cJSON_GetArrayItem(o, 3)->valuestring, "full_attention");
    assert_string_equal(cJSON_GetArrayItem(o, 4)->valuestring, "linear_attention");
    assert_int_equal(hf_get_object(c.text, "rope_parameters", &o, &e), SLM_OK);
    assert_int_equal(hf_get_int(o, "rope_theta", &i, &e), SLM_OK);
    assert_int_equal(i, 10000000);
    assert_int_equal(hf_get_num(o, "partial_rotary_factor", &d, &e), SLM_OK);
    assert_true(d == 0.25);
    assert_int_equal(hf_get_array(o, "mrope_section", &o, &e), SLM_OK);
    assert_int_equal(cJSON_GetArraySize(o), 3);
    /* bos_token_id is null in text_config; the root has no hidden_size */
    assert_int_equal(hf_get_int(c.text, "bos_token_id", &i, &e), SLM_ERR_NOT_FOUND);
    assert_int_equal(hf_get_int(c.config, "hidden_size", &i, &e), SLM_ERR_NOT_FOUND);
    assert_int_equal(e.status, SLM_OK);

    assert_non_null(c.generation);
    assert_int_equal(hf_get_num(c.generation, "temperature", &d, &e), SLM_OK);
    assert_true(d == 0.6);
    assert_int_equal(hf_get_int(c.generation, "top_k", &i, &e), SLM_OK);
    assert_int_equal(i, 20);
    assert_int_equal(hf_get_array(c.generation, "eos_token_id", &o, &e), SLM_OK);
    assert_int_equal(cJSON_GetArrayItem(o, 0)->valuedouble, 248046);
    assert_int_equal(hf_get_int(c.generation, "eos_token_id", &i, &e), SLM_ERR_FORMAT);
    msg_has(&e, "\"eos_token_id\" is an array, expected an integer");
    err_clear(&e);

    assert_non_null(c.tok_config);
    assert_int_equal(hf_get_str(c.tok_config, "eos_token", &s, &e), SLM_OK);
    assert_string_equal(s, "<|im_end|>");
    assert_int_equal(hf_get_str(c.tok_config, "bos_token", &s, &e), SLM_ERR_NOT_FOUND);
    assert_null(s);
    assert_int_equal(hf_get_bool(c.tok_config, "add_bos_token", &b, &e), SLM_OK);
    assert_false(b);
    assert_int_equal(hf_get_object(c.tok_config, "added_tokens_decoder", &o, &e), SLM_OK);
    assert_int_equal(hf_get_object(o, "248046", &o, &e), SLM_OK);
    assert_int_equal(hf_get_str(o, "content", &s, &e), SLM_OK);
    assert_string_equal(s, "<|im_end|>");

    assert_non_null(c.tokenizer_json_path);
    assert_non_null(strstr(c.tokenizer_json_path, "hf/sharded/tokenizer.json"));
    assert_true(tu_file_exists(c.tokenizer_json_path));
    hf_config_close(&c);
    assert_null(c.config);
    hf_config_close(&c);
    hf_config_close(NULL);
}

static void llama_folder(void **unused) {
    (void)unused;
    hf_config c;
    slm_err e;
    err_clear(&e);
    assert_int_equal(hf_config_open(&c, tu_data_path("hf/single"), &e), SLM_OK);
    assert_true(c.text == c.config);
    int64_t i;
    double d;
    const cJSON *o;
    assert_int_equal(hf_get_int(c.text, "vocab_size", &i, &e), SLM_OK);
    assert_int_equal(i, 49152);
    assert_int_equal(hf_get_int(c.text, "num_key_value_heads", &i, &e), SLM_OK);
    assert_int_equal(i, 3);
    assert_int_equal(hf_get_num(c.text, "rms_norm_eps", &d, &e), SLM_OK);
    assert_true(d == 1e-5);
    assert_int_equal(hf_get_num(c.text, "rope_theta", &d, &e), SLM_OK); /* an integer read as a number */
    assert_true(d == 100000.0);
    assert_int_equal(hf_get_object(c.text, "rope_scaling", &o, &e), SLM_ERR_NOT_FOUND); /* null */
    assert_null(o);
    assert_non_null(c.generation);
    assert_int_equal(hf_get_int(c.generation, "eos_token_id", &i, &e), SLM_OK);
    assert_int_equal(i, 0);
    assert_null(c.tok_config);
    assert_null(c.tokenizer_json_path);
    assert_int_equal(hf_get_int(c.tok_config, "x", &i, &e), SLM_ERR_NOT_FOUND); /* NULL object */
    assert_int_equal(e.status, SLM_OK);
    hf_config_close(&c);
}

/* ---- broken files ---- */

static void missing_and_not_object(void **unused) {
    (void)unused;
    hf_config c;
    slm_err e;
    char *dir = tu_temp_dir();
    err_clear(&e);
    assert_int_equal(hf_config_open(&c, dir, &e), SLM_ERR_NOT_FOUND);
    msg_has(&e, "config.json");
    assert_null(c.config);
    tu_rm_dir(dir);

    assert_int_equal(open_cfg_text("[1, 2]", &e), SLM_ERR_FORMAT);
    msg_has(&e, "config.json: top-level JSON value is an array, expected an object");
    assert_int_equal(open_cfg_text("\"cfg\"", &e), SLM_ERR_FORMAT);
    msg_has(&e, "string");
    assert_int_equal(open_cfg_text("", &e), SLM_ERR_FORMAT);
    msg_has(&e, "empty JSON text at byte offset 0");
    assert_int_equal(open_cfg_text("{\"text_config\": [1]}", &e), SLM_ERR_FORMAT);
    msg_has(&e, "\"text_config\" is an array");
    assert_int_equal(open_cfg_text("{\"text_config\": null, \"a\": 1}", &e), SLM_OK);
}

static void truncated_config(void **unused) {
    (void)unused;
    size_t len = 0;
    char *full = (char *)tu_read_file(tu_data_path("hf/sharded/config.json"), &len);
    assert_non_null(full);
    slm_err e;
    assert_int_equal(open_cfg(full, len, &e), SLM_OK);
    /* The file ends in "}\n": every cut that drops the closing brace must fail, naming the file and
     * an offset inside the prefix. */
    const size_t cuts[] = {1, 2, 17, 100, len / 3, len / 2, len - 50, len - 2};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        assert_int_equal(open_cfg(full, cuts[k], &e), SLM_ERR_FORMAT);
        msg_has(&e, "/config.json: invalid JSON at byte offset");
        msg_has(&e, "line ");
        long off = msg_offset(&e);
        if (off < 0 || (size_t)off >= cuts[k]) {
            print_error("cut %zu: offset %ld in \"%s\"\n", cuts[k], off, e.msg);
            fail();
        }
    }
    free(full);
    /* Offsets at the offending character, known by construction. */
    const char *t1 = "{\"a\": 1,\n \"b\": ]}";
    assert_int_equal(open_cfg(t1, strlen(t1), &e), SLM_ERR_FORMAT);
    msg_has(&e, "byte offset 15 (line 2, column 7)");
    const char *t2 = "{\"a\" 1}";
    assert_int_equal(open_cfg(t2, strlen(t2), &e), SLM_ERR_FORMAT);
    msg_has(&e, "byte offset 5 (line 1, column 6)");
    const char *t3 = "{\"a\": 1}\n\n  {\"b\": 2}";
    assert_int_equal(open_cfg(t3, strlen(t3), &e), SLM_ERR_FORMAT);
    msg_has(&e, "unexpected data after the JSON value at byte offset 12 (line 3, column 3)");
    const char t4[] = "{\"a\": \"\xff\"}";
    assert_int_equal(open_cfg(t4, sizeof t4 - 1, &e), SLM_ERR_FORMAT);
    msg_has(&e, "invalid UTF-8 at byte offset 7");
    const char t5[] = "{\"a\": \"x\0y\"}";
    assert_int_equal(open_cfg(t5, sizeof t5 - 1, &e), SLM_ERR_FORMAT);
    msg_has(&e, "NUL byte at byte offset 8");
    const char *t6 = "{\"hidden_size\": 1, \"hidden_size\": 2}";
    assert_int_equal(open_cfg(t6, strlen(t6), &e), SLM_ERR_FORMAT);
    msg_has(&e, "duplicate key \"hidden_size\" in the top-level object");
    const char *t7 = "{\"text_config\": {\"a\": 1, \"b\": 2, \"a\": 3}}";
    assert_int_equal(open_cfg(t7, strlen(t7), &e), SLM_ERR_FORMAT);
    msg_has(&e, "duplicate key \"a\" in object \"text_config\"");
    const char *t8 = "{\"x\": [{\"k\": 1}, {\"k\": 1, \"k\": 2}]}";
    assert_int_equal(open_cfg(t8, strlen(t8), &e), SLM_ERR_FORMAT);
    msg_has(&e, "duplicate key \"k\" in an object inside an array");
}

static void optional_files(void **unused) {
    (void)unused;
    hf_config c;
    slm_err e;
    char *dir = tu_temp_dir();
    write_text(dir, "config.json", "{}");
    write_text(dir, "generation_config.json", "{\"eos_token_id\": 2,");
    err_clear(&e);
    assert_int_equal(hf_config_open(&c, dir, &e), SLM_ERR_FORMAT);
    msg_has(&e, "generation_config.json: invalid JSON at byte offset");
    assert_null(c.config);
    write_text(dir, "generation_config.json", "{\"eos_token_id\": 2}");
    write_text(dir, "tokenizer_config.json", "[]");
    err_clear(&e);
    assert_int_equal(hf_config_open(&c, dir, &e), SLM_ERR_FORMAT);
    msg_has(&e, "tokenizer_config.json: top-level JSON value is an array");
    write_text(dir, "tokenizer_config.json", "{}");
    write_text(dir, "tokenizer.json", "{}");
    err_clear(&e);
    assert_int_equal(hf_config_open(&c, dir, &e), SLM_OK);
    assert_non_null(c.generation);
    assert_non_null(c.tok_config);
    assert_non_null(c.tokenizer_json_path);
    hf_config_close(&c);
    tu_rm_dir(dir);
}

static void parse_limits(void **unused) {
    (void)unused;
    cJSON *j = (cJSON *)1;
    slm_err e;
    err_clear(&e);
    assert_int_equal(hf_json_parse_at("{\"a\": 1}", 8, "small", 0, 4, &j, &e), SLM_ERR_FORMAT);
    msg_has(&e, "small: JSON text is 8 bytes, over the limit of 4");
    assert_null(j);
    err_clear(&e);
    assert_int_equal(hf_json_parse_at("{\"a\" 1}", 7, "hdr", 8, 100, &j, &e), SLM_ERR_FORMAT);
    msg_has(&e, "hdr: invalid JSON at byte offset 13");
    err_clear(&e);
    assert_int_equal(hf_json_parse("   \n ", 5, "ws", &j, &e), SLM_ERR_FORMAT);
    /* nesting deeper than cJSON's limit is refused, not a stack overflow */
    char deep[4001];
    memset(deep, '[', 2000);
    memset(deep + 2000, ']', 2000);
    deep[4000] = '\0';
    err_clear(&e);
    assert_int_equal(hf_json_parse(deep, 4000, "deep", &j, &e), SLM_ERR_FORMAT);
    err_clear(&e);
    assert_int_equal(hf_json_parse(deep + 1500, 1000, "ok", &j, &e), SLM_OK);
    assert_true(cJSON_IsArray(j));
    cJSON_Delete(j);
    /* not NUL-terminated: only len bytes are read */
    const char buf[4] = {'[', '1', ']', '!'};
    err_clear(&e);
    assert_int_equal(hf_json_parse(buf, 3, "buf", &j, &e), SLM_OK);
    cJSON_Delete(j);
}

/* ---- getters ---- */

static const char *GETTERS_JSON =
    "{\"i\": 3, \"neg\": -5, \"two\": 2.0, \"half\": 1.5, \"big\": 1e30, \"inf\": 1e999,"
    " \"min\": -9223372036854775808, \"max\": 9223372036854775807, \"t\": true, \"f\": false,"
    " \"s\": \"text\", \"snum\": \"3\", \"a\": [1, 2], \"o\": {\"k\": 7, \"bad\": \"x\"}, \"n\": null}";

static void not_found_untouched(slm_status st, const slm_err *e) {
    assert_int_equal(st, SLM_ERR_NOT_FOUND);
    assert_int_equal(e->status, SLM_OK);
    assert_string_equal(e->msg, "");
}

static void wrong(slm_status st, slm_err *e, const char *n1, const char *n2) {
    assert_int_equal(st, SLM_ERR_FORMAT);
    msg_has(e, n1);
    msg_has(e, n2);
    err_clear(e);
}

static void getters(void **unused) {
    (void)unused;
    cJSON *j = NULL;
    slm_err e;
    err_clear(&e);
    assert_int_equal(hf_json_parse(GETTERS_JSON, strlen(GETTERS_JSON), "getters", &j, &e), SLM_OK);
    int64_t i = 99;
    double d = 99;
    bool b = true;
    const char *s = "x";
    const cJSON *o = j;

    assert_int_equal(hf_get_int(j, "i", &i, &e), SLM_OK);
    assert_int_equal(i, 3);
    assert_int_equal(hf_get_int(j, "neg", &i, &e), SLM_OK);
    assert_int_equal(i, -5);
    assert_int_equal(hf_get_int(j, "two", &i, &e), SLM_OK);
    assert_int_equal(i, 2);
    assert_int_equal(hf_get_int(j, "min", &i, &e), SLM_OK);
    assert_true(i == INT64_MIN);
    wrong(hf_get_int(j, "half", &i, &e), &e, "\"half\"", "not an integer");
    assert_int_equal(i, 0);
    wrong(hf_get_int(j, "big", &i, &e), &e, "\"big\"", "outside the int64 range");
    wrong(hf_get_int(j, "inf", &i, &e), &e, "\"inf\"", "outside the int64 range");
    wrong(hf_get_int(j, "max", &i, &e), &e, "\"max\"", "outside the int64 range"); /* reads as 2^63 */
    wrong(hf_get_int(j, "snum", &i, &e), &e, "\"snum\" is a string", "expected an integer");
    wrong(hf_get_int(j, "t", &i, &e), &e, "\"t\" is a boolean", "expected an integer");
    wrong(hf_get_int(j, "o", &i, &e), &e, "\"o\" is an object", "expected an integer");
    not_found_untouched(hf_get_int(j, "absent", &i, &e), &e);
    not_found_untouched(hf_get_int(j, "n", &i, &e), &e);
    not_found_untouched(hf_get_int(NULL, "i", &i, &e), &e);

    assert_int_equal(hf_get_num(j, "half", &d, &e), SLM_OK);
    assert_true(d == 1.5);
    assert_int_equal(hf_get_num(j, "i", &d, &e), SLM_OK);
    assert_true(d == 3.0);
    assert_int_equal(hf_get_num(j, "big", &d, &e), SLM_OK);
    assert_true(d == 1e30);
    wrong(hf_get_num(j, "inf", &d, &e), &e, "\"inf\"", "not a finite number");
    assert_true(d == 0);
    wrong(hf_get_num(j, "s", &d, &e), &e, "\"s\" is a string", "expected a number");
    not_found_untouched(hf_get_num(j, "n", &d, &e), &e);

    assert_int_equal(hf_get_bool(j, "t", &b, &e), SLM_OK);
    assert_true(b);
    assert_int_equal(hf_get_bool(j, "f", &b, &e), SLM_OK);
    assert_false(b);
    b = true;
    wrong(hf_get_bool(j, "i", &b, &e), &e, "\"i\" is a number", "expected a boolean");
    assert_false(b);
    not_found_untouched(hf_get_bool(j, "absent", &b, &e), &e);

    assert_int_equal(hf_get_str(j, "s", &s, &e), SLM_OK);
    assert_string_equal(s, "text");
    wrong(hf_get_str(j, "a", &s, &e), &e, "\"a\" is an array", "expected a string");
    assert_null(s);
    not_found_untouched(hf_get_str(j, "n", &s, &e), &e);

    assert_int_equal(hf_get_array(j, "a", &o, &e), SLM_OK);
    assert_int_equal(cJSON_GetArraySize(o), 2);
    wrong(hf_get_array(j, "o", &o, &e), &e, "\"o\" is an object", "expected an array");
    assert_null(o);
    not_found_untouched(hf_get_array(j, "absent", &o, &e), &e);

    assert_int_equal(hf_get_object(j, "o", &o, &e), SLM_OK);
    const cJSON *inner = o;
    assert_int_equal(hf_get_int(inner, "k", &i, &e), SLM_OK);
    assert_int_equal(i, 7);
    /* a nested key is named with its parent */
    wrong(hf_get_int(inner, "bad", &i, &e), &e, "\"o.bad\" is a string", "expected an integer");
    wrong(hf_get_object(j, "a", &o, &e), &e, "\"a\" is an array", "expected an object");
    not_found_untouched(hf_get_object(j, "n", &o, &e), &e);

    /* the enclosing value is not an object */
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "a");
    wrong(hf_get_int(arr, "i", &i, &e), &e, "\"i\"", "not an object");
    wrong(hf_get_str(cJSON_GetObjectItemCaseSensitive(j, "s"), "i", &s, &e), &e, "\"i\"", "not an object");
    cJSON_Delete(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(qwen35_folder),  cmocka_unit_test(llama_folder), cmocka_unit_test(missing_and_not_object),
        cmocka_unit_test(truncated_config), cmocka_unit_test(optional_files), cmocka_unit_test(parse_limits),
        cmocka_unit_test(getters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
