// llama_logits.cpp — a one-off probe of llama.cpp (its C API, llama.h) for golden files, built by
// scripts/build-llama-logits.sh against the native llama.cpp build in ~/.cache/statelm.
//
//   llama-logits -m MODEL (--text TEXT | --ids 1,2,3) [--gen N] [--fa auto|on|off] [--kv-f32]
//                [--top K] [-t N] [-c N_CTX]
//
// Token ids: --ids as given, or llama.cpp's tokenisation of --text (special tokens parsed; BOS added
// when the model's add_bos_token says so). --gen N appends N greedy tokens (argmax, one decode per
// token, not stopped at end-of-generation), generated with the same context settings. The whole
// sequence is then run teacher-forced in one batch with logits at every position, on a fresh
// context. Prints one JSON object:
//   {"n_prompt":P, "ids":[...], "flash_attn":"...", "kv":"f16|f32",
//    "positions":[{"argmax":ID, "margin":TOP1-TOP2 (raw logits), "top":[[ID,LOGPROB],...]}, ...]}
// where positions[t] are the logits after ids[0..t] (so positions[t].argmax predicts ids[t+1]).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int usage(const char *why) {
    fprintf(stderr, "llama-logits: %s\nusage: llama-logits -m MODEL (--text TEXT | --ids 1,2,3) [--gen N] "
                    "[--fa auto|on|off] [--kv-f32] [--top K] [-t N] [-c N_CTX]\n", why);
    return 2;
}

static llama_context *new_context(llama_model *model, int n_ctx, int n_threads, llama_flash_attn_type fa,
                                  bool kv_f32) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_ctx;
    cp.n_ubatch = (uint32_t)n_ctx;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.flash_attn_type = fa;
    if (kv_f32) {
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
    }
    return llama_init_from_model(model, cp);
}

static bool decode(llama_context *ctx, const std::vector<llama_token> &ids, size_t first, size_t n, bool all_logits) {
    llama_batch b = llama_batch_init((int32_t)n, 0, 1);
    for (size_t i = 0; i < n; i++) {
        b.token[i] = ids[first + i];
        b.pos[i] = (llama_pos)(first + i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all_logits || i + 1 == n;
    }
    b.n_tokens = (int32_t)n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc == 0;
}

static llama_token argmax(const float *row, int n_vocab) {
    return (llama_token)(std::max_element(row, row + n_vocab) - row);
}

int main(int argc, char **argv) {
    const char *model_path = nullptr, *text = nullptr, *ids_arg = nullptr;
    int n_gen = 0, top_k = 5, n_threads = 2, n_ctx = 512;
    llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
    bool kv_f32 = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (a == "--kv-f32") {
            kv_f32 = true;
            continue;
        }
        if (!has_value) return usage(("missing value after " + a).c_str());
        const char *v = argv[++i];
        if (a == "-m") model_path = v;
        else if (a == "--text") text = v;
        else if (a == "--ids") ids_arg = v;
        else if (a == "--gen") n_gen = atoi(v);
        else if (a == "--top") top_k = atoi(v);
        else if (a == "-t") n_threads = atoi(v);
        else if (a == "-c") n_ctx = atoi(v);
        else if (a == "--fa") {
            std::string s = v;
            if (s == "auto") fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
            else if (s == "on") fa = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            else if (s == "off") fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            else return usage("--fa takes auto, on or off");
        } else return usage(("unknown option " + a).c_str());
    }
    if (!model_path || (!text == !ids_arg)) return usage("-m and exactly one of --text, --ids are required");
    if (top_k < 1 || n_gen < 0 || n_threads < 1 || n_ctx < 1) return usage("bad number");

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(model_path, llama_model_default_params());
    if (!model) return usage("cannot load the model");
    const llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<llama_token> ids;
    if (text) {
        int len = (int)strlen(text);
        ids.resize((size_t)len + 8);
        int n = llama_tokenize(vocab, text, len, ids.data(), (int32_t)ids.size(), true, true);
        if (n < 0) return usage("tokenisation failed");
        ids.resize((size_t)n);
    } else {
        for (const char *p = ids_arg; *p;) {
            char *end;
            long id = strtol(p, &end, 10);
            if (end == p || id < 0 || id >= n_vocab) return usage("bad --ids");
            ids.push_back((llama_token)id);
            p = end + (*end == ',' || *end == ' ');
        }
    }
    const size_t n_prompt = ids.size();
    if (n_prompt == 0 || n_prompt + (size_t)n_gen > (size_t)n_ctx) return usage("sequence empty or longer than -c");

    if (n_gen > 0) {
        llama_context *ctx = new_context(model, n_ctx, n_threads, fa, kv_f32);
        if (!ctx || !decode(ctx, ids, 0, n_prompt, false)) return usage("decode failed");
        for (int g = 0; g < n_gen; g++) {
            ids.push_back(argmax(llama_get_logits_ith(ctx, -1), n_vocab));
            if (g + 1 < n_gen && !decode(ctx, ids, ids.size() - 1, 1, false)) return usage("decode failed");
        }
        llama_free(ctx);
    }

    llama_context *ctx = new_context(model, n_ctx, n_threads, fa, kv_f32);
    if (!ctx || !decode(ctx, ids, 0, ids.size(), true)) return usage("decode failed");
    printf("{\"n_prompt\":%zu,\"flash_attn\":\"%s\",\"kv\":\"%s\",\"ids\":[", n_prompt, llama_flash_attn_type_name(fa),
           kv_f32 ? "f32" : "f16");
    for (size_t i = 0; i < ids.size(); i++) printf("%s%d", i ? "," : "", ids[i]);
    printf("],\n\"positions\":[\n");
    std::vector<int> order((size_t)n_vocab);
    for (size_t t = 0; t < ids.size(); t++) {
        const float *row = llama_get_logits_ith(ctx, (int32_t)t);
        for (int v = 0; v < n_vocab; v++) order[(size_t)v] = v;
        std::partial_sort(order.begin(), order.begin() + std::max(top_k, 2), order.end(),
                          [row](int x, int y) { return row[x] > row[y] || (row[x] == row[y] && x < y); });
        double mx = row[order[0]], sum = 0;
        for (int v = 0; v < n_vocab; v++) sum += exp((double)row[v] - mx);
        double lse = mx + log(sum);
        printf("{\"argmax\":%d,\"margin\":%.9g,\"top\":[", order[0], (double)row[order[0]] - row[order[1]]);
        for (int k = 0; k < top_k; k++) printf("%s[%d,%.9g]", k ? "," : "", order[(size_t)k], row[order[(size_t)k]] - lse);
        printf("]}%s\n", t + 1 < ids.size() ? "," : "");
    }
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
