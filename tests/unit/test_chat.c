/* test_chat.c — text/chat.c: every renderer against jinja2 renderings of the real stored templates
 * (tests/data/chat/golden.json, scripts/gen-chat-golden.py), template detection, bad arguments. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

static void golden_renderings(void **unused) {
    (void)unused;
    size_t n = 0;
    uint8_t *text = tu_read_file(tu_data_path("chat/golden.json"), &n);
    assert_non_null(text);
    cJSON *root = cJSON_Parse((const char *)text);
    free(text);
    assert_non_null(root);
    int n_cases = 0, bad = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        const char *name = cJSON_GetObjectItem(c, "template")->valuestring;
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        size_t nm = (size_t)cJSON_GetArraySize(msgs);
        slm_chat_message m[16];
        assert_true(nm <= 16);
        for (size_t i = 0; i < nm; i++) {
            const cJSON *x = cJSON_GetArrayItem(msgs, (int)i);
            m[i].role = cJSON_GetObjectItem(x, "role")->valuestring;
            m[i].content = cJSON_GetObjectItem(x, "content")->valuestring;
        }
        bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        const cJSON *expected = cJSON_GetObjectItem(c, "expected");
        char *out = NULL;
        slm_err e;
        err_clear(&e);
        if (cJSON_IsNull(expected)) { /* the template raises: a status, a message, nothing rendered */
            assert_int_equal(chat_render(name, NULL, m, nm, gen, NULL, &out, &e), SLM_ERR_INVALID_ARG);
            assert_null(out);
            assert_true(strlen(e.msg) > 0);
            n_cases++;
            continue;
        }
        const char *want = expected->valuestring;
        assert_int_equal(chat_render(name, NULL, m, nm, gen, NULL, &out, &e), SLM_OK);
        if (strcmp(out, want) != 0) {
            if (bad++ < 5) fprintf(stderr, "%s case %d:\n--- ours\n%s\n--- jinja2\n%s\n", name, n_cases, out, want);
        }
        al_free(NULL, out);
        n_cases++;
    }
    cJSON_Delete(root);
    fprintf(stderr, "%d renderings, %d differ\n", n_cases, bad);
    assert_true(n_cases >= 100);
    assert_int_equal(bad, 0);
}

static void detection(void **unused) {
    (void)unused;
    assert_null(chat_detect(NULL));
    assert_null(chat_detect("{{ messages }}"));
    assert_string_equal(chat_detect("{{'<|im_start|>' + m.role}}"), "chatml");
    assert_string_equal(chat_detect("{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by "
                                    "Hugging Face<|im_end|>\\n' }}"),
                        "smollm2");
    assert_string_equal(chat_detect("{{'<|im_start|>assistant\\n'}}{% if enable_thinking is defined %}<think>"), "qwen3");
    assert_string_equal(chat_detect("{{- bos_token -}}{{'<|im_start|>'}}List of tools: <|tool_list_start|>["), "lfm2");
    assert_string_equal(chat_detect("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"), "llama3");
    assert_string_equal(chat_detect("{{ bos_token }}{{ '<start_of_turn>' + role + '\\n' }}"), "gemma");
}

static void bad_arguments(void **unused) {
    (void)unused;
    char *out = (char *)1;
    slm_err e;
    err_clear(&e);
    slm_chat_message m = {"user", NULL};
    assert_int_equal(chat_render("chatml", NULL, &m, 1, true, NULL, &out, &e), SLM_ERR_INVALID_ARG);
    assert_null(out);
    assert_true(strlen(e.msg) > 0);
    err_clear(&e);
    m.content = "x";
    assert_int_equal(chat_render("nope", NULL, &m, 1, true, NULL, &out, &e), SLM_ERR_NOT_FOUND);
    assert_null(out);
    assert_int_equal(chat_render("chatml", NULL, NULL, 1, true, NULL, &out, &e), SLM_ERR_INVALID_ARG);
    assert_int_equal(chat_render("chatml", NULL, NULL, 0, true, NULL, &out, &e), SLM_OK);
    assert_string_equal(out, "<|im_start|>assistant\n");
    al_free(NULL, out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_renderings),
        cmocka_unit_test(detection),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
