/* fuzz_tokenizer.c — libFuzzer target for the tokenizer and chat templates. Builds, once, the
 * committed tiny byte-level BPE (tests/data/tokenizer/tiny_bpe.json, NFC + llama3-style regex +
 * specials) and the SentencePiece BPE with byte fallback (spm_tiny.json, through tok_build). The
 * first input byte picks the tokenizer and the flags; the rest is the text. Checks: encode never
 * fails, ids are in range, decode(encode(x)) == NFC(x) for valid UTF-8 (BPE) and == x for SPM
 * without special parsing (unless x contains a literal "▁"), the streaming detokenizer emits only
 * valid UTF-8 and matches decode for valid input; chat_detect/chat_render/chat_tokenize (with and
 * without content ids) on the text. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uninorm.h>

#include "base/utf8.h"
#include "text/tok_impl.h"

#ifndef SLM_TEST_DATA_DIR
#define SLM_TEST_DATA_DIR "tests/data"
#endif

static slm_tokenizer *bpe, *spm;

static char *read_all(const char *rel, size_t *n) {
    char path[1024];
    const char *root = getenv("SLM_TEST_DATA_DIR");
    snprintf(path, sizeof path, "%s/%s", root ? root : SLM_TEST_DATA_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) abort();
    fclose(f);
    b[len] = 0;
    *n = (size_t)len;
    return b;
}

static void init(void) {
    size_t n;
    char *json = read_all("tokenizer/tiny_bpe.json", &n);
    if (!json || tok_from_json(json, n, NULL, NULL, NULL, &bpe, NULL) != SLM_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot build tiny_bpe (set SLM_TEST_DATA_DIR)\n");
        abort();
    }
    free(json);
    json = read_all("tokenizer/spm_tiny.json", &n);
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    if (!root) abort();
    cJSON *toks = cJSON_GetObjectItem(root, "tokens"), *scores = cJSON_GetObjectItem(root, "scores");
    cJSON *types = cJSON_GetObjectItem(root, "token_type");
    size_t nv = (size_t)cJSON_GetArraySize(toks);
    tok_str *tv = calloc(nv, sizeof *tv);
    float *sv = calloc(nv, sizeof *sv);
    uint8_t *yv = calloc(nv, 1);
    for (size_t i = 0; i < nv; i++) {
        const char *s = cJSON_GetArrayItem(toks, (int)i)->valuestring;
        tv[i] = (tok_str){s, strlen(s)};
        sv[i] = (float)cJSON_GetArrayItem(scores, (int)i)->valuedouble;
        yv[i] = (uint8_t)cJSON_GetArrayItem(types, (int)i)->valueint;
    }
    tok_spec s;
    tok_spec_init(&s);
    s.kind = SLM_TOKENIZER_SPM;
    s.n_vocab = nv;
    s.tokens = tv;
    s.scores = sv;
    s.types = yv;
    s.add_space_prefix = true;
    s.add_bos = true;
    s.bos = 1;
    s.eos = 2;
    s.unk = 0;
    if (tok_build(&s, NULL, &spm, NULL) != SLM_OK) abort();
    free(tv);
    free(sv);
    free(yv);
    cJSON_Delete(root);
    free(json);
}

static void check_detok(const slm_tokenizer *t, const int32_t *ids, size_t n, const char *want, size_t want_len,
                        bool compare) {
    slm_detokenizer *d = NULL;
    if (slm_detokenizer_create(t, &d) != SLM_OK) abort();
    char *acc = malloc(3 * want_len + 16);
    size_t na = 0;
    const char *txt;
    size_t len;
    for (size_t i = 0; i < n; i++) {
        if (slm_detokenizer_push(d, ids[i], &txt, &len) != SLM_OK) abort();
        if (!utf8_valid((const uint8_t *)txt, len)) abort();
        memcpy(acc + na, txt, len);
        na += len;
    }
    if (slm_detokenizer_flush(d, &txt, &len) != SLM_OK || !utf8_valid((const uint8_t *)txt, len)) abort();
    memcpy(acc + na, txt, len);
    na += len;
    if (compare && (na != want_len || memcmp(acc, want, na) != 0)) abort();
    free(acc);
    slm_detokenizer_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!bpe) init();
    if (size < 1 || size > 4096) return 0;
    uint8_t mode = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const slm_tokenizer *t = (mode & 1) ? spm : bpe;
    bool parse_special = (mode & 2) != 0;
    uint32_t flags = (parse_special ? SLM_TOKENIZE_PARSE_SPECIAL : 0) | ((mode & 4) ? SLM_TOKENIZE_ADD_BOS : 0);
    size_t cap = 4 * len + 8, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (slm_tokenizer_encode(t, text, len, flags, ids, cap, &n) != SLM_OK) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab) abort();
    size_t dcap = 4 * len + 64, nd = 0;
    char *dec = malloc(dcap);
    if (slm_tokenizer_decode(t, ids, n, true, dec, dcap, &nd) != SLM_OK) abort();
    bool valid = utf8_valid((const uint8_t *)text, len);
    if (t == bpe) {
        if (valid) {
            size_t nl = 0;
            uint8_t *nfc = u8_normalize(UNINORM_NFC, (const uint8_t *)text, len, NULL, &nl);
            if (!nfc && len) abort();
            if (nd != nl || (nl && memcmp(dec, nfc, nl) != 0)) abort();
            free(nfc);
        }
    } else if (!parse_special && !(mode & 4)) {
        bool has_meta = false;
        for (size_t i = 0; i + 2 < len; i++)
            if (memcmp(text + i, "\xE2\x96\x81", 3) == 0) has_meta = true;
        if (!has_meta && (nd != len || memcmp(dec, text, len) != 0)) abort();
    }
    /* The streaming detokenizer agrees with decode (without specials) on valid output. */
    size_t np = 0;
    char *plain = malloc(dcap);
    if (slm_tokenizer_decode(t, ids, n, false, plain, dcap, &np) != SLM_OK) abort();
    check_detok(t, ids, n, plain, np, utf8_valid((const uint8_t *)plain, np));
    free(plain);
    /* Chat templates on the text (NUL-terminated copy). */
    char *z = malloc(len + 1);
    memcpy(z, text, len);
    z[len] = 0;
    (void)chat_detect(z);
    static const char *const names[] = {"chatml", "smollm2", "qwen3", "qwen3-nothink", "lfm2", "llama3", "gemma"};
    slm_chat_message m[3] = {{"system", z}, {"user", z}, {(mode & 8) ? "tool" : "assistant", z}};
    char *out = NULL;
    const char *name = names[(mode >> 4) % (sizeof names / sizeof names[0])];
    if (chat_render(name, t, m, 3, true, NULL, &out, NULL) != SLM_OK) abort();
    free(out);
    /* Tokenised with the message spans: no control token from the messages, ids spliced in. */
    int32_t *cids = NULL;
    size_t n_cids = 0;
    const slm_chat_ids given[3] = {{NULL, 0}, {NULL, 0}, {ids, n < 8 ? n : 8}};
    slm_status cs = chat_tokenize(name, t, m, 3, (mode & 4) ? given : NULL, true, NULL, &cids, &n_cids, NULL);
    if (cs != SLM_OK) abort();
    for (size_t i = 0; i < n_cids; i++)
        if (cids[i] < 0 || cids[i] >= slm_tokenizer_n_vocab(t)) abort();
    free(cids);
    free(z);
    free(dec);
    free(ids);
    return 0;
}
