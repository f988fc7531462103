/* fuzz_gguf.c — libFuzzer target for format/gguf (and base/dtype on whatever it accepts): parses
 * the input; on failure requires a message; on success walks every kv (typed getters, every array
 * element, touching each string byte so ASan sees stray pointers), checks that every tensor's
 * data lies inside the input, dequantises the first row of each tensor whose row is at most
 * ROW_CAP elements, and closes. Seeds and crashers live in tests/data/corpus/gguf/, replayed by
 * CTest in every build. Run (the extra flags give libFuzzer coverage of the library itself, and the
 * corpus is copied so new inputs do not land in the repository):
 *   CC=clang cmake -S . -B build-fuzz -DSLM_FUZZ=ON -DSLM_TESTS=OFF
 *         -DCMAKE_C_FLAGS="-O1 -fsanitize=fuzzer-no-link,address,undefined"      (one command)
 *   cmake --build build-fuzz --target fuzz_gguf && cp -r tests/data/corpus/gguf /tmp/fzc
 *   build-fuzz/tests/fuzz/fuzz_gguf /tmp/fzc -dict=tests/fuzz/gguf.dict -max_len=16384 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "format/gguf.h"

#define ROW_CAP (1 << 16)
#define CHECK(c) do { if (!(c)) abort(); } while (0)

static volatile uint32_t g_sink;

static void touch(const char *p, uint64_t n) {
    uint32_t h = 0;
    for (uint64_t i = 0; i < n; i++) h = h * 31 + (uint8_t)p[i];
    g_sink += h;
}

static void walk_array(const gguf_value *v, int depth) {
    CHECK(v->type == GGUF_ARRAY && depth <= GGUF_MAX_ARRAY_DEPTH);
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        int64_t x;
        double f;
        gguf_str s;
        bool is_int = gguf_arr_i64(v, i, &x);
        bool is_num = gguf_arr_f64(v, i, &f);
        bool is_str = gguf_arr_str(v, i, &s);
        switch (v->v.arr.elem_type) {
        case GGUF_STRING: CHECK(is_str && !is_num); touch(s.ptr, s.len); break;
        case GGUF_ARRAY: CHECK(!is_str && !is_num && !is_int); walk_array(&v->v.arr.items[i], depth + 1); break;
        case GGUF_FLOAT32: case GGUF_FLOAT64: CHECK(is_num && !is_int && !is_str); break;
        case GGUF_BOOL: CHECK(is_int && !is_num); break;
        case GGUF_UINT64: CHECK(is_num); break; /* is_int only when <= INT64_MAX */
        default: CHECK(is_int && is_num && !is_str); break;
        }
    }
    int64_t x;
    CHECK(!gguf_arr_i64(v, v->v.arr.n, &x));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    slm_err e;
    slm_status st = gguf_parse(&g, data, size, NULL, &e);
    if (st != SLM_OK) {
        CHECK(e.status == st && e.msg[0] != '\0');
        CHECK(g.kv == NULL && g.tensors == NULL && g.n_kv == 0 && g.n_tensors == 0);
        gguf_close(&g);
        return 0;
    }
    CHECK(g.alignment >= 8 && g.alignment % 8 == 0 && g.data_start % g.alignment == 0);
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        CHECK(gguf_find(&g, kv->key) == kv); /* keys are unique */
        int64_t x;
        double f;
        gguf_str s;
        const gguf_value *arr;
        e.status = SLM_OK;
        e.msg[0] = '\0';
        (void)gguf_get_i64(&g, kv->key, &x, &e);
        (void)gguf_get_f64(&g, kv->key, &f, &e);
        if (gguf_get_str(&g, kv->key, &s, &e) == SLM_OK) touch(s.ptr, s.len);
        if (gguf_get_arr(&g, kv->key, &arr, &e) == SLM_OK) walk_array(arr, 1);
    }
    float *row = NULL;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        for (uint64_t j = 0; j < i; j++) CHECK(strcmp(g.tensors[j].name, t->name) != 0); /* names are unique */
        CHECK(t->data >= data && t->size_bytes <= size && (size_t)(t->data - data) <= size - t->size_bytes);
        const dtype_traits *tr = dtype_traits_of(t->type);
        CHECK(tr != NULL && t->ne[0] % tr->block_elems == 0);
        uint64_t row_bytes;
        CHECK(dtype_row_bytes(t->type, (uint64_t)t->ne[0], &row_bytes) && row_bytes <= t->size_bytes);
        if (!tr->can_dequant || t->ne[0] > ROW_CAP) continue;
        if (!row) row = malloc(ROW_CAP * sizeof(float));
        CHECK(row != NULL);
        CHECK(dequant_row(t->type, t->data, row, t->ne[0]));
        uint32_t bits;
        memcpy(&bits, &row[t->ne[0] - 1], 4);
        g_sink += bits;
    }
    free(row);
    gguf_close(&g);
    return 0;
}
