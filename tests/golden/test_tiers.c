/* test_tiers.c — end to end, every CPU kernel tier gives the same bits: each tiny model
 * (tests/data/tiny: llama, qwen3, lfm2, qwen35, as F32 and Q8_0 GGUF; attention, conv, DeltaNet,
 * gated RMSNorm, the activations and the quantised matmuls) is fed its golden ids (the prompt as one
 * prefill, then one decode per id; then all ids as one prefill) in a session per tier this CPU has
 * (cpu_isa_supported), selected with slm_session_params.kernels, and every step's logits must equal
 * those of the generic tier bit for bit.
 * slm_session_kernels must name the tier. KV in f16 for the Q8_0 files, f32 for the F32 ones. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "statelm.h"

static const cpu_isa_level tiers[] = {CPU_ISA_GENERIC, CPU_ISA_NEON,   CPU_ISA_AVX2,
                                      CPU_ISA_AVX2_VNNI, CPU_ISA_AVX512, CPU_ISA_AMX, CPU_ISA_I8MM};
#define N_TIERS ((int)(sizeof tiers / sizeof tiers[0]))

static slm_session *tier_session(const slm_model *m, const char *tier, uint32_t kv_dtype) {
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = 64;
    sp.kv_type = kv_dtype == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
    sp.n_threads = 2;
    sp.kernels = tier;
    slm_session *s = NULL;
    char err[512];
    slm_status st = slm_session_create(m, &sp, &s, err, sizeof err);
    if (st != SLM_OK) fail_msg("session with kernels=%s: %s", tier, err);
    assert_string_equal(slm_session_kernels(s), tier);
    return s;
}

/* The logits (n_ids + 1, n_vocab) of the golden ids of arch with the kernels of tier: rows
 * [n_prompt - 1, n_ids) from the prompt's prefill and one decode per id, row n_ids the last
 * position's from one prefill of all n_ids ids (a many-column matmul: the AMX tier's tile products
 * take 16 columns and more). */
static float *run_tier(const slm_model *m, const char *tier, uint32_t kv_dtype, const int32_t *ids, int32_t n_prompt,
                       int32_t n_ids, int32_t n_vocab) {
    slm_session *s = tier_session(m, tier, kv_dtype);
    float *rows = calloc((size_t)(n_ids + 1) * (size_t)n_vocab, sizeof(float));
    assert_non_null(rows);
    const float *logits = NULL;
    assert_int_equal(slm_session_prefill(s, ids, (size_t)n_prompt, &logits), SLM_OK);
    memcpy(rows + (size_t)(n_prompt - 1) * (size_t)n_vocab, logits, (size_t)n_vocab * sizeof(float));
    for (int32_t pos = n_prompt; pos < n_ids; pos++) {
        if (slm_session_decode(s, ids[pos], &logits) != SLM_OK) fail_msg("%s decode: %s", tier, slm_session_errmsg(s));
        memcpy(rows + (size_t)pos * (size_t)n_vocab, logits, (size_t)n_vocab * sizeof(float));
    }
    slm_session_destroy(s);
    s = tier_session(m, tier, kv_dtype);
    assert_int_equal(slm_session_prefill(s, ids, (size_t)n_ids, &logits), SLM_OK);
    memcpy(rows + (size_t)n_ids * (size_t)n_vocab, logits, (size_t)n_vocab * sizeof(float));
    slm_session_destroy(s);
    return rows;
}

static slm_model *load(const char *rel) {
    slm_model *m = NULL;
    char err[512];
    slm_model_params mp = slm_model_params_default();
    if (slm_model_load(tu_data_path(rel), &mp, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", rel, err);
    return m;
}

static void check_arch(const char *arch, const char *form) {
    char rel[256];
    snprintf(rel, sizeof rel, "tiny/%s/golden/manifest.json", arch);
    char *text = (char *)tu_read_file(tu_data_path(rel), NULL);
    assert_non_null(text);
    cJSON *man = cJSON_Parse(text);
    assert_non_null(man);
    int32_t n_prompt = cJSON_GetObjectItem(man, "n_prompt")->valueint;
    int32_t n_ids = n_prompt + cJSON_GetObjectItem(man, "n_decode")->valueint;
    cJSON_Delete(man);
    free(text);
    size_t size = 0;
    snprintf(rel, sizeof rel, "tiny/%s/golden/ids.i32", arch);
    int32_t *ids = (int32_t *)tu_read_file(tu_data_path(rel), &size);
    assert_non_null(ids);
    assert_int_equal(size, (size_t)n_ids * 4);

    snprintf(rel, sizeof rel, "tiny/%s/%s-%s.gguf", arch, arch, form);
    slm_model *m = load(rel);
    int32_t n_vocab = slm_model_n_vocab(m);
    uint32_t kv = strcmp(form, "f32") == 0 ? SLM_DTYPE_F32 : SLM_DTYPE_F16;
    float *gen = run_tier(m, "generic", kv, ids, n_prompt, n_ids, n_vocab);
    int n_run = 0;
    for (int t = 1; t < N_TIERS; t++) {
        if (!cpu_isa_supported(tiers[t])) {
            if (tiers[t] == CPU_ISA_AMX) printf("%s %s: amx skipped: no AMX (%s)\n", arch, form, cpu_isa_missing(CPU_ISA_AMX));
            continue;
        }
        const char *tier = cpu_isa_name(tiers[t]);
        /* a model of its own: the repacked weights a model keeps are one tier's (the first to ask) */
        slm_model *mt = load(rel);
        float *rows = run_tier(mt, tier, kv, ids, n_prompt, n_ids, n_vocab);
        slm_model_destroy(mt);
        for (int32_t pos = n_prompt - 1; pos <= n_ids; pos++) { /* pos n_ids: the whole-sequence prefill */
            const float *a = rows + (size_t)pos * (size_t)n_vocab, *b = gen + (size_t)pos * (size_t)n_vocab;
            if (memcmp(a, b, (size_t)n_vocab * sizeof(float)) != 0) {
                int32_t i = 0;
                while (memcmp(a + i, b + i, sizeof(float)) == 0) i++;
                fail_msg("%s %s: %s logits at position %d differ from generic (token %d: %.9g vs %.9g)", arch, form,
                         tier, pos, i, (double)a[i], (double)b[i]);
            }
        }
        free(rows);
        n_run++;
    }
    printf("%s %s: %d tier(s) equal to generic over %d steps\n", arch, form, n_run, n_ids - n_prompt + 1);
    free(gen);
    free(ids);
    slm_model_destroy(m);
}

static void llama(void **u) { (void)u, check_arch("llama", "f32"), check_arch("llama", "q8_0"); }
static void qwen3(void **u) { (void)u, check_arch("qwen3", "f32"), check_arch("qwen3", "q8_0"); }
static void lfm2(void **u) { (void)u, check_arch("lfm2", "f32"), check_arch("lfm2", "q8_0"); }
static void qwen35(void **u) { (void)u, check_arch("qwen35", "f32"), check_arch("qwen35", "q8_0"); }
static void gemma3(void **u) { (void)u, check_arch("gemma3", "f32"), check_arch("gemma3", "q8_0"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama),
        cmocka_unit_test(qwen3),
        cmocka_unit_test(lfm2),
        cmocka_unit_test(qwen35),
        cmocka_unit_test(gemma3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
