/* fuzz_state.c — libFuzzer target for the state-file parser (runtime/state.c,
 * sess_parse_state_file, the step under slm_session_load). Loads, once, the tiny Qwen3.5 model
 * (tests/data/tiny/qwen35/qwen35-f32.gguf: KV, conv and recurrent states) and a session with
 * n_ctx 64 and f16 KV, the settings the seeds were saved with (scripts/gen_state_corpus.sh; a seed of
 * q8_0/q4_0 KV caches reaches the type check, a version 1 seed the old header). Each
 * input is parsed twice: as given, and with its last 8 bytes replaced by the XXH3-64 of the rest,
 * so mutations also reach the checks behind the checksum. Checks: a refusal sets no snapshot, a
 * message, and leaves the session at position 0; an accepted file restores, gives the session its
 * position and history (token ids in range), and a decode step after it succeeds. Seeds and
 * crashers live in tests/data/corpus/state/, replayed by CTest in every build. Build and run as
 * fuzz_gguf.c says, with the target fuzz_state and -max_len=65536. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/session.h"

#ifndef SLM_TEST_DATA_DIR
#define SLM_TEST_DATA_DIR "tests/data"
#endif

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define FUZZ_N_CTX 64

static slm_model *model;
static slm_session *session;

static void setup(void) {
    char path[1024], err[256];
    const char *root = getenv("SLM_TEST_DATA_DIR");
    snprintf(path, sizeof path, "%s/tiny/qwen35/qwen35-f32.gguf", root ? root : SLM_TEST_DATA_DIR);
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = 1;
    if (slm_model_load(path, &mp, &model, err, sizeof err) != SLM_OK) {
        fprintf(stderr, "fuzz_state: %s\n", err);
        abort();
    }
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = FUZZ_N_CTX;
    sp.n_threads = 1;
    if (slm_session_create(model, &sp, &session, err, sizeof err) != SLM_OK) {
        fprintf(stderr, "fuzz_state: %s\n", err);
        abort();
    }
}

static void parse_one(const uint8_t *data, size_t size) {
    slm_session *s = session;
    slm_snapshot *snap = NULL;
    slm_status st = sess_parse_state_file(s, data, size, &snap);
    if (st != SLM_OK) {
        CHECK(st < 0 && snap == NULL && slm_session_errmsg(s)[0] != '\0');
        CHECK(slm_session_pos(s) == 0);
        return;
    }
    CHECK(snap != NULL);
    int32_t pos = slm_snapshot_pos(snap);
    CHECK(pos >= 0 && pos <= FUZZ_N_CTX);
    CHECK(slm_session_restore(s, snap) == SLM_OK);
    slm_snapshot_destroy(snap);
    size_t n_hist = 0;
    const int32_t *hist = slm_session_history(s, &n_hist);
    CHECK(slm_session_pos(s) == pos && n_hist == (size_t)pos);
    for (size_t i = 0; i < n_hist; i++) CHECK(hist[i] >= 0 && hist[i] < s->n_token_ids);
    if (pos < FUZZ_N_CTX) {
        const float *logits = NULL;
        CHECK(slm_session_decode(s, 0, &logits) == SLM_OK && logits != NULL);
    }
    slm_session_reset(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!session) setup();
    parse_one(data, size);
    if (size < 8) return 0;
    uint8_t *fixed = malloc(size);
    CHECK(fixed != NULL);
    memcpy(fixed, data, size);
    uint64_t sum = XXH3_64bits(fixed, size - 8);
    for (int i = 0; i < 8; i++) fixed[size - 8 + (size_t)i] = (uint8_t)(sum >> (8 * i));
    parse_one(fixed, size);
    free(fixed);
    return 0;
}
