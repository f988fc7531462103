/* test_state.c — state as a first-class object, bit for bit, on the tiny llama, lfm2 and qwen35
 * models (and the full-size random LFM2-350M shape when ~/.cache/statelm/models has it):
 *   (a) restore of a snapshot taken at p, then decoding, equals an uninterrupted run;
 *   (b) rollback to p then decoding the same tokens equals an uninterrupted run, for p on, before
 *       and between checkpoints (interval 4), with thinning and with spilled checkpoints;
 *   (c) save, load in a new process (this binary re-executed), continue equals an uninterrupted run;
 * fork, prefix reuse (sync), and every refusal reason of restore and load, each leaving the session
 * unchanged (checked by continuing and comparing with the uninterrupted run). (a)-(c) and sync also
 * run with quantised KV caches (q8_0, q4_0, K and V of different types) on the models whose head
 * dimension is a multiple of 32 (gemma3 with its rings, qwen3, qwen35): the uninterrupted run then
 * has the same KV types. A file of other KV types is refused with a message naming them; a
 * version 1 file (no V dtype) still loads. */
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "runtime/session.h" /* white box: a budget smaller than 1 MiB for the tiny models */
#include "statelm.h"

enum { N_TOK = 40, N_CTX = 64 };
static int32_t toks[N_TOK];
/* The K and V cache types of every session the checks create (SLM_KV_DEFAULT: the kv argument). */
static slm_kv_type g_kv_k, g_kv_v;

static void make_tokens(int32_t n_vocab) {
    uint32_t x = 12345;
    for (int i = 0; i < N_TOK; i++) {
        x = x * 1103515245u + 12345u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)(n_vocab - 10)) + 5;
    }
}

static slm_model *load_model(const char *path) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(path, NULL, &m, err, sizeof err) != SLM_OK) fail_msg("load %s: %s", path, err);
    make_tokens(slm_model_n_vocab(m));
    return m;
}

/* budget_ckpts > 0 sets the in-memory budget to that many checkpoints (below the API's MiB unit). */
static slm_session *new_session(const slm_model *m, int32_t n_ctx, slm_dtype kv, int32_t interval, int32_t budget_ckpts,
                                const char *dir) {
    slm_session_params p = slm_session_params_default();
    p.n_ctx = n_ctx;
    p.kv_type = kv == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
    p.kv_type_k = g_kv_k;
    p.kv_type_v = g_kv_v;
    p.n_threads = 2;
    p.checkpoint_interval = interval;
    p.checkpoint_dir = dir;
    slm_session *s = NULL;
    char err[512];
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) fail_msg("session: %s", err);
    for (int32_t i = 0; i < slm_session_n_states(s); i++) { /* the session holds the types asked for */
        slm_state_info info;
        assert_int_equal(slm_session_state(s, i, &info), SLM_OK);
        slm_kv_type want = info.role == SLM_STATE_KV_KEY ? g_kv_k : info.role == SLM_STATE_KV_VALUE ? g_kv_v : SLM_KV_DEFAULT;
        static const slm_dtype of[] = {SLM_DTYPE_F16, SLM_DTYPE_F16, SLM_DTYPE_F32, SLM_DTYPE_Q8_0, SLM_DTYPE_Q4_0};
        if (want != SLM_KV_DEFAULT && info.dtype != of[want])
            fail_msg("state %s is %s, not %s", info.name, slm_dtype_name(info.dtype), slm_dtype_name(of[want]));
    }
    if (budget_ckpts > 0) s->ckpt_budget = (size_t)budget_ckpts * s->ckpt_bytes;
    return s;
}

/* Logits after every position of toks in one uninterrupted run, one token per call (prefill(n)
 * equals n decodes bit for bit; tests/golden checks that). */
static float *uninterrupted(const slm_model *m) {
    int32_t v = slm_model_n_vocab(m);
    float *rows = malloc((size_t)N_TOK * (size_t)v * sizeof(float));
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    const float *l;
    for (int i = 0; i < N_TOK; i++) {
        assert_int_equal(slm_session_decode(s, toks[i], &l), SLM_OK);
        memcpy(rows + (size_t)i * (size_t)v, l, (size_t)v * sizeof(float));
    }
    slm_session_destroy(s);
    return rows;
}

/* Decodes toks[from, N_TOK) on s and requires bit-identical logits to the reference rows. */
static void continue_and_compare(slm_session *s, const slm_model *m, const float *ref, int from, const char *what) {
    int32_t v = slm_model_n_vocab(m);
    assert_int_equal(slm_session_pos(s), from);
    const float *l;
    for (int i = from; i < N_TOK; i++) {
        if (slm_session_decode(s, toks[i], &l) != SLM_OK) fail_msg("%s: decode: %s", what, slm_session_errmsg(s));
        if (memcmp(l, ref + (size_t)i * (size_t)v, (size_t)v * sizeof(float)) != 0)
            fail_msg("%s: logits differ at position %d", what, i);
    }
}

/* (a) snapshot at p, run on, restore, continue; also fork. */
static void check_snapshot(const char *path) {
    slm_model *m = load_model(path);
    float *ref = uninterrupted(m);
    for (int p = 1; p < N_TOK; p += 7) {
        slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
        const float *l;
        assert_int_equal(slm_session_prefill(s, toks, (size_t)p, &l), SLM_OK);
        slm_snapshot *snap = NULL;
        assert_int_equal(slm_session_snapshot(s, &snap), SLM_OK);
        assert_int_equal(slm_snapshot_pos(snap), p);
        assert_true(slm_snapshot_bytes(snap) > 0);
        /* diverge: feed other tokens, then come back */
        assert_int_equal(slm_session_prefill(s, toks + 20, 6, &l), SLM_OK);
        assert_int_equal(slm_session_restore(s, snap), SLM_OK);
        slm_session *f = NULL;
        char err[256];
        assert_int_equal(slm_session_fork(snap, NULL, &f, err, sizeof err), SLM_OK);
        slm_snapshot_destroy(snap); /* the snapshot is independent of both sessions */
        continue_and_compare(s, m, ref, p, "restore");
        continue_and_compare(f, m, ref, p, "fork");
        slm_session_destroy(f);
        slm_session_destroy(s);
    }
    free(ref);
    slm_model_destroy(m);
}

/* (b) rollback on, before and between checkpoints (interval 4; prefill end also checkpoints). */
static void check_rollback(const char *path, int32_t budget_ckpts, const char *dir) {
    slm_model *m = load_model(path);
    float *ref = uninterrupted(m);
    for (int p = 0; p <= 30; p++) {
        slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 4, budget_ckpts, dir);
        const float *l;
        assert_int_equal(slm_session_prefill(s, toks, 9, &l), SLM_OK);
        for (int i = 9; i < 33; i++) assert_int_equal(slm_session_decode(s, toks[i], &l), SLM_OK);
        if (budget_ckpts > 0) {
            slm_checkpoint_stats st;
            slm_session_checkpoint_stats(s, &st);
            assert_true(st.n_in_memory <= budget_ckpts);
            if (dir) assert_true(st.n_on_disk > 0);
        }
        assert_int_equal(slm_session_rollback(s, p), SLM_OK);
        assert_int_equal(slm_session_pos(s), p);
        if (p == 0) {
            assert_int_equal(slm_session_prefill(s, toks, 9, &l), SLM_OK);
            continue_and_compare(s, m, ref, 9, "rollback to 0");
        } else {
            continue_and_compare(s, m, ref, p, "rollback");
        }
        slm_session_destroy(s);
    }
    /* out of range is refused and changes nothing */
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 4, budget_ckpts, dir);
    const float *l;
    assert_int_equal(slm_session_prefill(s, toks, 12, &l), SLM_OK);
    assert_int_equal(slm_session_rollback(s, 13), SLM_ERR_RANGE);
    assert_int_equal(slm_session_rollback(s, -1), SLM_ERR_RANGE);
    continue_and_compare(s, m, ref, 12, "refused rollback");
    slm_session_destroy(s);
    free(ref);
    slm_model_destroy(m);
}

static void check_sync(const char *path) {
    slm_model *m = load_model(path);
    float *ref = uninterrupted(m);
    int32_t v = slm_model_n_vocab(m);
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 4, 0, NULL);
    const float *l;
    size_t reused = 99;
    /* history diverging from toks after 13 tokens */
    int32_t other[20];
    memcpy(other, toks, sizeof other);
    other[13] = toks[13] + 1;
    assert_int_equal(slm_session_sync(s, other, 20, &l, &reused), SLM_OK);
    assert_int_equal(reused, 0);
    assert_int_equal(slm_session_sync(s, toks, 25, &l, &reused), SLM_OK);
    assert_int_equal(reused, 13);
    assert_memory_equal(l, ref + 24 * (size_t)v, (size_t)v * sizeof(float));
    /* the same sequence again recomputes only the last token */
    assert_int_equal(slm_session_sync(s, toks, 25, &l, &reused), SLM_OK);
    assert_int_equal(reused, 24);
    assert_memory_equal(l, ref + 24 * (size_t)v, (size_t)v * sizeof(float));
    /* a shorter prefix rolls back */
    assert_int_equal(slm_session_sync(s, toks, 17, &l, &reused), SLM_OK);
    assert_int_equal(reused, 16);
    assert_memory_equal(l, ref + 16 * (size_t)v, (size_t)v * sizeof(float));
    continue_and_compare(s, m, ref, 17, "after sync");
    slm_session_destroy(s);
    free(ref);
    slm_model_destroy(m);
}

/* Saves at position p in a file for the child process to load. */
static void check_save_load_new_process(const char *path) {
    slm_model *m = load_model(path);
    float *ref = uninterrupted(m);
    int32_t v = slm_model_n_vocab(m);
    char *dir = tu_temp_dir();
    char state[512], out[512];
    snprintf(state, sizeof state, "%s/session.slmstate", dir);
    snprintf(out, sizeof out, "%s/logits.f32", dir);
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    const float *l;
    assert_int_equal(slm_session_prefill(s, toks, 17, &l), SLM_OK);
    assert_int_equal(slm_session_save(s, state), SLM_OK);
    slm_session_destroy(s);
    pid_t pid = fork();
    if (pid == 0) {
        char kk[8], kv[8];
        snprintf(kk, sizeof kk, "%d", (int)g_kv_k);
        snprintf(kv, sizeof kv, "%d", (int)g_kv_v);
        execl("/proc/self/exe", "test_state", "--child", path, state, out, kk, kv, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    size_t size = 0;
    float *got = (float *)tu_read_file(out, &size);
    assert_non_null(got);
    assert_int_equal(size, (size_t)(N_TOK - 17) * (size_t)v * sizeof(float));
    for (int i = 17; i < N_TOK; i++)
        if (memcmp(got + (size_t)(i - 17) * (size_t)v, ref + (size_t)i * (size_t)v, (size_t)v * sizeof(float)) != 0)
            fail_msg("%s: after load in a new process, logits differ at position %d", path, i);
    free(got);
    unlink(state);
    unlink(out);
    rmdir(dir);
    free(dir);
    free(ref);
    slm_model_destroy(m);
}

/* The child: load the model and the state file, decode the rest, write the logits. */
static int child_main(const char *model, const char *state, const char *out, slm_kv_type kk, slm_kv_type kv) {
    slm_model *m = NULL;
    char err[512];
    if (slm_model_load(model, NULL, &m, err, sizeof err) != SLM_OK) return 2;
    make_tokens(slm_model_n_vocab(m));
    slm_session_params p = slm_session_params_default();
    p.n_ctx = N_CTX;
    p.n_threads = 2;
    p.kv_type_k = kk;
    p.kv_type_v = kv;
    slm_session *s = NULL;
    if (slm_session_create(m, &p, &s, err, sizeof err) != SLM_OK) return 3;
    if (slm_session_load(s, state) != SLM_OK) return 4;
    FILE *f = fopen(out, "wb");
    if (!f) return 5;
    const float *l;
    for (int i = slm_session_pos(s); i < N_TOK; i++) {
        if (slm_session_decode(s, toks[i], &l) != SLM_OK) return 6;
        fwrite(l, sizeof(float), (size_t)slm_model_n_vocab(m), f);
    }
    fclose(f);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return 0;
}

/* Expects slm_session_load of file to fail with SLM_ERR_STATE or IO and a message containing
 * `reason`, and the session (at position 11) to continue exactly like the uninterrupted run. */
static void expect_refused(const slm_model *m, const float *ref, slm_session *s, const char *file, slm_status want,
                           const char *reason) {
    slm_status st = slm_session_load(s, file);
    if (st != want) fail_msg("load %s: status %s, want %s (%s)", file, slm_status_name(st), slm_status_name(want),
                             slm_session_errmsg(s));
    if (!strstr(slm_session_errmsg(s), reason)) fail_msg("load: message '%s' lacks '%s'", slm_session_errmsg(s), reason);
    slm_snapshot *snap = NULL;
    assert_int_equal(slm_session_snapshot(s, &snap), SLM_OK);
    slm_session *probe = NULL;
    char err[256];
    assert_int_equal(slm_session_fork(snap, NULL, &probe, err, sizeof err), SLM_OK);
    continue_and_compare(probe, m, ref, 11, reason);
    slm_session_destroy(probe);
    slm_snapshot_destroy(snap);
}

static void write_bytes(const char *path, const uint8_t *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void refusals(void **unused) {
    (void)unused;
    slm_model *m = load_model(tu_data_path("tiny/lfm2/lfm2-f32.gguf"));
    slm_model *other = load_model(tu_data_path("tiny/qwen35/qwen35-f32.gguf"));
    make_tokens(slm_model_n_vocab(m));
    float *ref = uninterrupted(m);
    char *dir = tu_temp_dir();
    char good[512], bad[512];
    snprintf(good, sizeof good, "%s/good", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    slm_session *src = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    const float *l;
    assert_int_equal(slm_session_prefill(src, toks + 25, 6, &l), SLM_OK);
    assert_int_equal(slm_session_save(src, good), SLM_OK);
    size_t n = 0;
    uint8_t *img = tu_read_file(good, &n);
    /* the session under test sits at position 11 of toks */
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    assert_int_equal(slm_session_prefill(s, toks, 11, &l), SLM_OK);

    expect_refused(m, ref, s, "/nonexistent/state", SLM_ERR_IO, "cannot open");
    for (size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : 97)) {
        write_bytes(bad, img, cut);
        expect_refused(m, ref, s, bad, SLM_ERR_STATE, cut < 8 ? "truncated" : "truncated");
    }
    uint8_t *copy = malloc(n);
    memcpy(copy, img, n);
    copy[n / 2] ^= 0x40; /* in the state data */
    write_bytes(bad, copy, n);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "checksum");
    memcpy(copy, img, n);
    copy[0] = 'X';
    write_bytes(bad, copy, n);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "bad magic");
    memcpy(copy, img, n);
    copy[8] = 7; /* version 7 */
    write_bytes(bad, copy, n);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "unknown state file format version 7");
    memcpy(copy, img, n);
    copy[n - 1] ^= 1; /* the checksum itself */
    write_bytes(bad, copy, n);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "checksum");
    /* foreign model, other context, other KV dtype */
    slm_session *o = new_session(other, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    assert_int_equal(slm_session_prefill(o, toks, 5, &l), SLM_OK);
    assert_int_equal(slm_session_save(o, bad), SLM_OK);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "another model");
    slm_snapshot *snap = NULL;
    assert_int_equal(slm_session_snapshot(o, &snap), SLM_OK);
    assert_int_equal(slm_session_restore(s, snap), SLM_ERR_STATE);
    assert_non_null(strstr(slm_session_errmsg(s), "another model"));
    slm_snapshot_destroy(snap);
    slm_session_destroy(o);
    o = new_session(m, N_CTX / 2, SLM_DTYPE_F16, 0, 0, NULL);
    assert_int_equal(slm_session_prefill(o, toks, 5, &l), SLM_OK);
    assert_int_equal(slm_session_save(o, bad), SLM_OK);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "context size 32");
    assert_int_equal(slm_session_snapshot(o, &snap), SLM_OK);
    assert_int_equal(slm_session_restore(s, snap), SLM_ERR_STATE);
    assert_non_null(strstr(slm_session_errmsg(s), "context size"));
    slm_snapshot_destroy(snap);
    slm_session_destroy(o);
    o = new_session(m, N_CTX, SLM_DTYPE_F32, 0, 0, NULL);
    assert_int_equal(slm_session_save(o, bad), SLM_OK);
    expect_refused(m, ref, s, bad, SLM_ERR_STATE, "f32 K and f32 V states");
    slm_session_destroy(o);
    /* and the good file loads */
    assert_int_equal(slm_session_load(s, good), SLM_OK);
    assert_int_equal(slm_session_pos(s), 6);
    size_t nh;
    const int32_t *h = slm_session_history(s, &nh);
    assert_int_equal(nh, 6);
    assert_memory_equal(h, toks + 25, 6 * sizeof(int32_t));
    slm_session_destroy(s);
    slm_session_destroy(src);
    unlink(good);
    unlink(bad);
    rmdir(dir);
    free(dir);
    free(copy);
    free(img);
    free(ref);
    slm_model_destroy(other);
    slm_model_destroy(m);
}

/* Concurrent saves to one path (issue 13, defect 3): N_SAVERS threads, each with its own session
 * at its own position, save at once, for many rounds. Every save succeeds, the file then loads
 * cleanly and is one of the written states (position and history agree), and the directory holds
 * nothing but the file (no temporary files left). */
enum { N_SAVERS = 8, N_ROUNDS = 40 };
typedef struct saver {
    slm_session *s;
    const char *path;
    pthread_barrier_t *go;
    slm_status st;
} saver;

static void *saver_main(void *arg) {
    saver *sv = arg;
    pthread_barrier_wait(sv->go);
    sv->st = slm_session_save(sv->s, sv->path);
    return NULL;
}

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void concurrent_saves(void **unused) {
    (void)unused;
    slm_model *m = load_model(tu_data_path("tiny/llama/llama-f32.gguf"));
    char *dir = tu_temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/cache", dir);
    saver sv[N_SAVERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N_SAVERS);
    const float *l;
    for (int i = 0; i < N_SAVERS; i++) {
        sv[i].s = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
        assert_int_equal(slm_session_prefill(sv[i].s, toks, (size_t)(3 + 4 * i), &l), SLM_OK);
        sv[i].path = path;
        sv[i].go = &go;
    }
    slm_session *probe = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    for (int round = 0; round < N_ROUNDS; round++) {
        pthread_t th[N_SAVERS];
        for (int i = 0; i < N_SAVERS; i++) assert_int_equal(pthread_create(&th[i], NULL, saver_main, &sv[i]), 0);
        for (int i = 0; i < N_SAVERS; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < N_SAVERS; i++)
            if (sv[i].st != SLM_OK)
                fail_msg("round %d: save %d: %s (%s)", round, i, slm_status_name(sv[i].st), slm_session_errmsg(sv[i].s));
        if (slm_session_load(probe, path) != SLM_OK)
            fail_msg("round %d: the saved file does not load: %s", round, slm_session_errmsg(probe));
        int32_t pos = slm_session_pos(probe);
        if (pos < 3 || (pos - 3) % 4 != 0 || (pos - 3) / 4 >= N_SAVERS)
            fail_msg("round %d: loaded position %d was never saved", round, pos);
        size_t nh;
        const int32_t *h = slm_session_history(probe, &nh);
        assert_int_equal(nh, (size_t)pos);
        assert_memory_equal(h, toks, (size_t)pos * sizeof(int32_t));
        if (dir_entries(dir) != 1) fail_msg("round %d: %d files in the directory, want only the saved one", round,
                                            dir_entries(dir));
    }
    pthread_barrier_destroy(&go);
    for (int i = 0; i < N_SAVERS; i++) slm_session_destroy(sv[i].s);
    slm_session_destroy(probe);
    tu_rm_dir(dir);
    slm_model_destroy(m);
}

/* Thinning keeps the checkpoints spread and within budget; the newest stays. */
static void checkpoint_budget(void **unused) {
    (void)unused;
    slm_model *m = load_model(tu_data_path("tiny/qwen35/qwen35-f32.gguf"));
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 1, 6, NULL);
    const float *l;
    for (int i = 0; i < N_TOK; i++) assert_int_equal(slm_session_decode(s, toks[i], &l), SLM_OK);
    slm_checkpoint_stats st;
    slm_session_checkpoint_stats(s, &st);
    assert_true(st.bytes_each > 0);
    assert_int_equal(st.n_in_memory, 6);
    assert_int_equal(st.bytes_in_memory, 6 * st.bytes_each);
    size_t n_pos;
    const int32_t *pos = slm_session_checkpoints(s, &n_pos);
    assert_int_equal(n_pos, 6);
    assert_int_equal(pos[n_pos - 1], N_TOK); /* the newest stays */
    /* spread over the history (position 0 is implicit): no gap more than twice the even spacing */
    int32_t prev = 0;
    for (size_t i = 0; i < n_pos; i++) {
        if (pos[i] - prev > 2 * N_TOK / 6 + 1) fail_msg("checkpoint gap %d..%d too wide", prev, pos[i]);
        prev = pos[i];
    }
    slm_session_destroy(s);
    slm_model_destroy(m);
}

static void snapshot_llama(void **u) { (void)u, check_snapshot(tu_data_path("tiny/llama/llama-f32.gguf")); }
static void snapshot_lfm2(void **u) { (void)u, check_snapshot(tu_data_path("tiny/lfm2/lfm2-f32.gguf")); }
static void snapshot_qwen35(void **u) { (void)u, check_snapshot(tu_data_path("tiny/qwen35/qwen35-f32.gguf")); }
static void rollback_llama(void **u) { (void)u, check_rollback(tu_data_path("tiny/llama/llama-f32.gguf"), 0, NULL); }
static void rollback_lfm2(void **u) { (void)u, check_rollback(tu_data_path("tiny/lfm2/lfm2-f32.gguf"), 0, NULL); }
static void rollback_qwen35(void **u) { (void)u, check_rollback(tu_data_path("tiny/qwen35/qwen35-f32.gguf"), 0, NULL); }
static void rollback_thinned(void **u) { (void)u, check_rollback(tu_data_path("tiny/qwen35/qwen35-f32.gguf"), 2, NULL); }
static void rollback_spilled(void **u) {
    (void)u;
    char *dir = tu_temp_dir();
    check_rollback(tu_data_path("tiny/lfm2/lfm2-f32.gguf"), 2, dir);
    assert_int_equal(rmdir(dir), 0); /* every spill file was removed with its session */
    free(dir);
}
static void sync_lfm2(void **u) { (void)u, check_sync(tu_data_path("tiny/lfm2/lfm2-f32.gguf")); }
static void sync_qwen35(void **u) { (void)u, check_sync(tu_data_path("tiny/qwen35/qwen35-f32.gguf")); }
static void newproc_llama(void **u) { (void)u, check_save_load_new_process(tu_data_path("tiny/llama/llama-f32.gguf")); }
static void newproc_lfm2(void **u) { (void)u, check_save_load_new_process(tu_data_path("tiny/lfm2/lfm2-f32.gguf")); }
static void newproc_qwen35(void **u) { (void)u, check_save_load_new_process(tu_data_path("tiny/qwen35/qwen35-f32.gguf")); }
/* gemma3: sliding layers hold KV rings of 16 rows (window 8) at this context; N_TOK = 40 wraps them */
static void snapshot_gemma3(void **u) { (void)u, check_snapshot(tu_data_path("tiny/gemma3/gemma3-f32.gguf")); }
static void rollback_gemma3(void **u) { (void)u, check_rollback(tu_data_path("tiny/gemma3/gemma3-f32.gguf"), 0, NULL); }
static void rollback_gemma3_thinned(void **u) {
    (void)u, check_rollback(tu_data_path("tiny/gemma3/gemma3-f32.gguf"), 2, NULL);
}
static void sync_gemma3(void **u) { (void)u, check_sync(tu_data_path("tiny/gemma3/gemma3-f32.gguf")); }
static void newproc_gemma3(void **u) { (void)u, check_save_load_new_process(tu_data_path("tiny/gemma3/gemma3-f32.gguf")); }

/* Quantised KV caches: every check above with K and V of these types. */
static void with_kv(slm_kv_type k, slm_kv_type v, const char *rel) {
    g_kv_k = k, g_kv_v = v;
    const char *path = tu_data_path(rel);
    check_snapshot(path);
    check_rollback(path, 0, NULL);
    check_sync(path);
    check_save_load_new_process(path);
    g_kv_k = g_kv_v = SLM_KV_DEFAULT;
}
static void kvq8_gemma3(void **u) { (void)u, with_kv(SLM_KV_Q8_0, SLM_KV_Q8_0, "tiny/gemma3/gemma3-f32.gguf"); }
static void kvq4_gemma3(void **u) { (void)u, with_kv(SLM_KV_Q4_0, SLM_KV_Q4_0, "tiny/gemma3/gemma3-f32.gguf"); }
static void kvq8_qwen35(void **u) { (void)u, with_kv(SLM_KV_Q8_0, SLM_KV_Q8_0, "tiny/qwen35/qwen35-f32.gguf"); }
static void kvmix_qwen3(void **u) { (void)u, with_kv(SLM_KV_Q8_0, SLM_KV_F16, "tiny/qwen3/qwen3-f32.gguf"); }
static void kvmix_gemma3(void **u) { (void)u, with_kv(SLM_KV_F32, SLM_KV_Q4_0, "tiny/gemma3/gemma3-q8_0.gguf"); }

/* Writes the version 1 layout of state file image img (version 2 less its V dtype; V = K). */
static void write_v1(const char *path, const uint8_t *img, size_t n) {
    uint8_t *v1 = malloc(n - 4);
    memcpy(v1, img, 40); /* magic, version, 0, fingerprint, n_ctx, K dtype */
    memcpy(v1 + 40, img + 44, n - 44);
    v1[8] = 1;
    uint64_t sum = XXH3_64bits(v1, n - 12);
    for (int k = 0; k < 8; k++) v1[n - 12 + (size_t)k] = (uint8_t)(sum >> (8 * k));
    write_bytes(path, v1, n - 4);
    free(v1);
}

/* A state file or snapshot of other KV types is refused, naming them; a version 1 file loads. */
static void kv_type_refusals(void **unused) {
    (void)unused;
    slm_model *m = load_model(tu_data_path("tiny/gemma3/gemma3-f32.gguf"));
    float *ref = uninterrupted(m); /* f16 K and V */
    char *dir = tu_temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/state", dir);
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    const float *l;
    assert_int_equal(slm_session_prefill(s, toks, 11, &l), SLM_OK);
    const slm_kv_type kinds[][2] = {{SLM_KV_Q8_0, SLM_KV_Q8_0}, {SLM_KV_Q4_0, SLM_KV_Q4_0}, {SLM_KV_F16, SLM_KV_Q8_0}};
    const char *want[] = {"q8_0 K and q8_0 V states, the session f16 and f16", "q4_0 K and q4_0 V states",
                          "f16 K and q8_0 V states"};
    for (int i = 0; i < 3; i++) {
        g_kv_k = kinds[i][0], g_kv_v = kinds[i][1];
        slm_session *o = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
        g_kv_k = g_kv_v = SLM_KV_DEFAULT;
        assert_int_equal(slm_session_prefill(o, toks, 5, &l), SLM_OK);
        assert_int_equal(slm_session_save(o, path), SLM_OK);
        expect_refused(m, ref, s, path, SLM_ERR_STATE, want[i]);
        slm_snapshot *snap = NULL;
        assert_int_equal(slm_session_snapshot(o, &snap), SLM_OK);
        assert_int_equal(slm_session_restore(s, snap), SLM_ERR_STATE);
        assert_non_null(strstr(slm_session_errmsg(s), want[i]));
        slm_snapshot_destroy(snap);
        slm_session_destroy(o);
    }
    continue_and_compare(s, m, ref, 11, "after the refusals");
    /* the version 1 layout of an f16 file loads and continues exactly */
    slm_session *o = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    assert_int_equal(slm_session_prefill(o, toks, 13, &l), SLM_OK);
    assert_int_equal(slm_session_save(o, path), SLM_OK);
    size_t n = 0;
    uint8_t *img = tu_read_file(path, &n);
    assert_non_null(img);
    write_v1(path, img, n);
    slm_session *f = new_session(m, N_CTX, SLM_DTYPE_F16, 0, 0, NULL);
    if (slm_session_load(f, path) != SLM_OK) fail_msg("version 1 file: %s", slm_session_errmsg(f));
    continue_and_compare(f, m, ref, 13, "version 1 file");
    free(img);
    slm_session_destroy(f);
    slm_session_destroy(o);
    slm_session_destroy(s);
    unlink(path);
    rmdir(dir);
    free(dir);
    free(ref);
    slm_model_destroy(m);
}

/* The full-size random LFM2-350M shape, where generated (scripts/gen_tiny_models.py --full). */
static const char *full_lfm2(void) {
    static char path[1024];
    const char *cache = getenv("STATELM_CACHE");
    const char *home = getenv("HOME");
    if (cache) snprintf(path, sizeof path, "%s/models/random-lfm2-350m-q8_0.gguf", cache);
    else snprintf(path, sizeof path, "%s/.cache/statelm/models/random-lfm2-350m-q8_0.gguf", home ? home : "");
    return tu_file_exists(path) ? path : NULL;
}
static void full_size_lfm2(void **u) {
    (void)u;
    const char *p = full_lfm2();
    if (!p || !getenv("SLM_LONG_TESTS")) TU_SKIP("full-size LFM2-350M test needs the random model and SLM_LONG_TESTS=1");
    check_snapshot(p);
    check_save_load_new_process(p);
    check_rollback(p, 0, NULL);
}

/* White box: in the session's plan, every conv state's step (CONCAT, SLICE into the state, the
 * state write, CONV1D [, SILU]) is one CONV_STEP made by the conv_step pass in every function
 * (prefill, decode, verify; LFM2 without an activation, Qwen3.5 with SiLU): the CPU backend takes
 * conv steps of any number of tokens; llama has none. That the fused job gives the nodes' bits is
 * test_kern_fast's; that decode then equals prefill and an uninterrupted run, the tests above. */
static void check_conv_steps(const char *rel, int32_t span) {
    slm_model *m = load_model(tu_data_path(rel));
    slm_session *s = new_session(m, N_CTX, SLM_DTYPE_F32, 0, 0, NULL);
    int32_t conv_states = 0;
    for (int32_t i = 0; i < slm_session_n_states(s); i++) {
        slm_state_info info;
        assert_int_equal(slm_session_state(s, i, &info), SLM_OK);
        conv_states += info.role == SLM_STATE_CONV;
    }
    for (int32_t f = 0; f < s->prog->n_functions; f++) {
        const plan_fn_exec *x = &s->plan->exec[f];
        int32_t fused = 0;
        for (int32_t i = 0; i < x->n_steps; i++) {
            if (x->steps[i].kind != PLAN_STEP_CONV_STEP) continue;
            assert_int_equal(x->steps[i].n_nodes, span);
            assert_string_equal(x->steps[i].pass, "conv_step");
            fused++;
        }
        int32_t want = conv_states;
        if (fused != want)
            fail_msg("%s %s: %d conv steps fused, want %d", rel, s->prog->functions[f].name, fused, want);
    }
    slm_session_destroy(s);
    slm_model_destroy(m);
}
static void conv_steps(void **u) {
    (void)u;
    check_conv_steps("tiny/lfm2/lfm2-f32.gguf", 4);
    check_conv_steps("tiny/qwen35/qwen35-f32.gguf", 5);
    check_conv_steps("tiny/llama/llama-f32.gguf", 0);
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4], (slm_kv_type)atoi(argv[5]), (slm_kv_type)atoi(argv[6]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(snapshot_llama),   cmocka_unit_test(snapshot_lfm2),    cmocka_unit_test(snapshot_qwen35),
        cmocka_unit_test(rollback_llama),   cmocka_unit_test(rollback_lfm2),    cmocka_unit_test(rollback_qwen35),
        cmocka_unit_test(rollback_thinned), cmocka_unit_test(rollback_spilled), cmocka_unit_test(sync_lfm2),
        cmocka_unit_test(sync_qwen35),      cmocka_unit_test(newproc_llama),    cmocka_unit_test(newproc_lfm2),
        cmocka_unit_test(newproc_qwen35),   cmocka_unit_test(refusals),         cmocka_unit_test(checkpoint_budget),
        cmocka_unit_test(conv_steps),       cmocka_unit_test(full_size_lfm2),
        cmocka_unit_test(snapshot_gemma3),  cmocka_unit_test(rollback_gemma3),  cmocka_unit_test(rollback_gemma3_thinned),
        cmocka_unit_test(sync_gemma3),      cmocka_unit_test(newproc_gemma3),
        cmocka_unit_test(concurrent_saves),
        cmocka_unit_test(kvq8_gemma3),      cmocka_unit_test(kvq4_gemma3),      cmocka_unit_test(kvq8_qwen35),
        cmocka_unit_test(kvmix_qwen3),      cmocka_unit_test(kvmix_gemma3),     cmocka_unit_test(kv_type_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
