/* logits_digest.c — prints 64-bit hashes (XXH64, seed 0) of the raw float bytes of a model's logits,
 * one line per step, so that two builds can be compared bit for bit with diff (before/after records
 * across refactors: scripts/logits_digest_all.sh). Public API only; not a test, never installed.
 * Three protocols, each in a fresh session, over the same ids:
 *   A. prefill of all ids at once, then N greedy decodes (token chosen, hash of the logits after it);
 *   B. the ids fed one at a time with slm_session_decode;
 *   C. the ids fed in uneven prefill chunks (3, 1, rest), then 4 greedy decodes.
 * Prefill and decode lines are numbered by the position reached, so A, B and C can be compared
 * where they meet; greedy lines by step. Also printed: the kernel tier of session A.
 * Default ids: a fixed English sentence encoded with the model's tokenizer (first 40 ids), else
 * 1..40 modulo n_vocab. Output is plain text with no paths or timings.
 * Usage: logits_digest -m MODEL [-t THREADS] [--kv f16|f32] [--ids 1,2,3] [-n N] [-c N_CTX]
 *                      [--kernels ref|generic|neon|i8mm|avx2|avxvnni|avx512|amx|auto] [--quantize TYPE] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "statelm.h"

#define MAX_IDS 4096
#define DEFAULT_N_IDS 40
#define CHUNKED_DECODES 4

static const char SENTENCE[] =
    "The old lighthouse keeper climbed the narrow stairs every evening, lit the lamp, and watched the "
    "ships pass safely through the fog while he wrote short letters to his daughter in the city.";

typedef struct options {
    const char *model_path;
    const char *kernels; /* NULL: leave the library's default */
    const char *quantize; /* NULL, or slm_model_params.quantize */
    int32_t n_threads;
    int32_t n_decode;
    int32_t n_ctx;       /* 0: enough for the protocols, at least 256 */
    slm_dtype kv_dtype;
    int32_t ids[MAX_IDS];
    size_t n_ids;        /* 0: default ids */
} options;

static void usage(FILE *f) {
    fprintf(f, "usage: logits_digest -m MODEL [-t THREADS] [--kv f16|f32] [--ids 1,2,3...] [-n N] [-c N_CTX]\n"
               "                     [--kernels ref|generic|neon|i8mm|avx2|avxvnni|avx512|amx|auto]\n");
}

static int fail(const char *what, slm_status st, const char *msg) {
    fflush(stdout);
    fprintf(stderr, "logits_digest: %s: %s (%s)\n", what, msg, slm_status_name(st));
    return 1;
}

static int parse_int(const char *s, long lo, long hi, int32_t *out) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = (int32_t)v;
    return 0;
}

static int parse_ids(const char *s, options *o) {
    o->n_ids = 0;
    while (*s) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || o->n_ids == MAX_IDS) return -1;
        o->ids[o->n_ids++] = (int32_t)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return o->n_ids ? 0 : -1;
}

static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!v) return -1;
        i++;
        if (!strcmp(a, "-m")) o->model_path = v;
        else if (!strcmp(a, "-t")) { if (parse_int(v, 1, 1024, &o->n_threads)) return -1; }
        else if (!strcmp(a, "-n")) { if (parse_int(v, 0, 100000, &o->n_decode)) return -1; }
        else if (!strcmp(a, "-c")) { if (parse_int(v, 1, 1 << 24, &o->n_ctx)) return -1; }
        else if (!strcmp(a, "--kernels")) o->kernels = v;
        else if (!strcmp(a, "--quantize")) o->quantize = v;
        else if (!strcmp(a, "--ids")) { if (parse_ids(v, o)) return -1; }
        else if (!strcmp(a, "--kv")) {
            if (!strcmp(v, "f16")) o->kv_dtype = SLM_DTYPE_F16;
            else if (!strcmp(v, "f32")) o->kv_dtype = SLM_DTYPE_F32;
            else return -1;
        } else return -1;
    }
    return o->model_path ? 0 : -1;
}

/* Fills o->ids from the tokenizer (or 1..40 mod n_vocab); returns the source's name. */
static const char *default_ids(const slm_model *m, options *o) {
    int32_t n_vocab = slm_model_n_vocab(m);
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    if (tok) {
        int32_t buf[MAX_IDS];
        size_t n = 0;
        slm_status st = slm_tokenizer_encode(tok, SENTENCE, strlen(SENTENCE), SLM_TOKENIZE_ADD_BOS, buf, MAX_IDS, &n);
        bool in_range = st == SLM_OK && n > 0;
        for (size_t i = 0; in_range && i < n && i < DEFAULT_N_IDS; i++) in_range = buf[i] >= 0 && buf[i] < n_vocab;
        if (in_range) {
            o->n_ids = n < DEFAULT_N_IDS ? n : DEFAULT_N_IDS;
            memcpy(o->ids, buf, o->n_ids * sizeof buf[0]);
            return "tokenizer";
        }
    }
    o->n_ids = DEFAULT_N_IDS;
    for (size_t i = 0; i < o->n_ids; i++) o->ids[i] = (int32_t)((i + 1) % (size_t)n_vocab);
    return "synthetic";
}

static uint64_t hash_logits(const float *logits, int32_t n_vocab) {
    return (uint64_t)XXH64(logits, (size_t)n_vocab * sizeof(float), 0);
}

/* Greedy choice: the largest logit, the lowest id on ties; NaNs are never chosen. */
static int32_t argmax(const float *logits, int32_t n_vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best] || logits[best] != logits[best]) best = i;
    return best;
}

static void print_step(const char *proto, const char *what, long k, const float *logits, int32_t n_vocab) {
    printf("%s %s %ld hash=%016llx argmax=%d\n", proto, what, k, (unsigned long long)hash_logits(logits, n_vocab),
           argmax(logits, n_vocab));
}

static int new_session(const slm_model *m, const options *o, slm_session **out) {
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = o->n_ctx;
    sp.kv_type = o->kv_dtype == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
    sp.n_threads = o->n_threads;
    sp.kernels = o->kernels;
    char err[512] = "";
    slm_status st = slm_session_create(m, &sp, out, err, sizeof err);
    return st == SLM_OK ? 0 : fail("session", st, err);
}

/* N greedy decodes after `logits`, one line each. */
static int greedy(slm_session *s, const char *proto, const float *logits, int32_t n_vocab, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        int32_t token = argmax(logits, n_vocab);
        slm_status st = slm_session_decode(s, token, &logits);
        if (st) return fail("decode", st, slm_session_errmsg(s));
        printf("%s greedy %d token=%d hash=%016llx\n", proto, k, token,
               (unsigned long long)hash_logits(logits, n_vocab));
    }
    return 0;
}

static int protocol_prefill(const slm_model *m, const options *o, int32_t n_vocab) {
    slm_session *s = NULL;
    if (new_session(m, o, &s)) return 1;
    printf("kernels %s\n", slm_session_kernels(s));
    const float *logits = NULL;
    slm_status st = slm_session_prefill(s, o->ids, o->n_ids, &logits);
    int rc = st ? fail("prefill", st, slm_session_errmsg(s)) : 0;
    if (!rc) {
        print_step("A", "prefill", (long)o->n_ids, logits, n_vocab);
        rc = greedy(s, "A", logits, n_vocab, o->n_decode);
    }
    slm_session_destroy(s);
    return rc;
}

static int protocol_decode(const slm_model *m, const options *o, int32_t n_vocab) {
    slm_session *s = NULL;
    if (new_session(m, o, &s)) return 1;
    int rc = 0;
    for (size_t i = 0; i < o->n_ids && !rc; i++) {
        const float *logits = NULL;
        slm_status st = slm_session_decode(s, o->ids[i], &logits);
        if (st) rc = fail("decode", st, slm_session_errmsg(s));
        else print_step("B", "decode", (long)i + 1, logits, n_vocab);
    }
    slm_session_destroy(s);
    return rc;
}

static int protocol_chunks(const slm_model *m, const options *o, int32_t n_vocab) {
    slm_session *s = NULL;
    if (new_session(m, o, &s)) return 1;
    const size_t chunks[3] = {3, 1, MAX_IDS};
    const float *logits = NULL;
    int rc = 0;
    size_t done = 0;
    for (int c = 0; c < 3 && done < o->n_ids && !rc; c++) {
        size_t n = o->n_ids - done < chunks[c] ? o->n_ids - done : chunks[c];
        slm_status st = slm_session_prefill(s, o->ids + done, n, &logits);
        if (st) rc = fail("prefill", st, slm_session_errmsg(s));
        done += n;
        if (!rc) print_step("C", "chunk", (long)done, logits, n_vocab);
    }
    if (!rc) rc = greedy(s, "C", logits, n_vocab, CHUNKED_DECODES);
    slm_session_destroy(s);
    return rc;
}

int main(int argc, char **argv) {
    static options o; /* ids are large for the stack */
    o.n_threads = 2;
    o.n_decode = 8;
    o.kv_dtype = SLM_DTYPE_F16;
    if (parse_args(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = o.n_threads;
    mp.quantize = o.quantize;
    slm_model *m = NULL;
    char err[512] = "";
    slm_status st = slm_model_load(o.model_path, &mp, &m, err, sizeof err);
    if (st) return fail("load", st, err);
    int32_t n_vocab = slm_model_n_vocab(m);
    const char *source = o.n_ids ? "given" : default_ids(m, &o);
    int32_t need = (int32_t)o.n_ids + (o.n_decode > CHUNKED_DECODES ? o.n_decode : CHUNKED_DECODES) + 1;
    if (!o.n_ctx) o.n_ctx = need > 256 ? need : 256;

    printf("model arch=%s n_vocab=%d n_layer=%d weight_bytes=%llu\n", slm_model_arch(m), n_vocab,
           slm_model_n_layer(m), (unsigned long long)slm_model_weight_bytes(m));
    printf("settings threads=%d kv=%s n_ctx=%d n_decode=%d\n", o.n_threads, slm_dtype_name(o.kv_dtype), o.n_ctx,
           o.n_decode);
    printf("ids source=%s n=%zu:", source, o.n_ids);
    for (size_t i = 0; i < o.n_ids; i++) printf("%s%d", i ? "," : " ", o.ids[i]);
    printf("\n");
    int rc = protocol_prefill(m, &o, n_vocab);
    if (!rc) rc = protocol_decode(m, &o, n_vocab);
    if (!rc) rc = protocol_chunks(m, &o, n_vocab);
    slm_model_destroy(m);
    return rc;
}
