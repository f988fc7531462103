/* fuzz_safetensors.c — libFuzzer target for format/safetensors: parses the input as one image into a
 * zeroed st_set, checks every tensor record against the image bounds (reading its bytes so ASan sees
 * any stray pointer), looks each name up, parses the image again as a second shard (exercising the
 * cross-shard duplicate check and the unchanged-on-failure rule), and closes the set.
 * Seed corpus: tests/data/corpus/safetensors/ (written by tests/data/hf/gen_hf_fixtures.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/safetensors.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_set s;
    memset(&s, 0, sizeof s);
    slm_err e;
    err_clear(&e);
    slm_status st = st_parse_image(&s, data, size, 0, &e);
    FUZZ_CHECK(st == SLM_OK || (e.msg[0] != '\0' && s.n_tensors == 0));
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < s.n_tensors; i++) {
        const st_tensor *t = &s.tensors[i];
        FUZZ_CHECK(st_dtype_known(t->type));
        FUZZ_CHECK(t->n_dims <= 4);
        FUZZ_CHECK(t->data >= data + 8 && t->size_bytes <= size && t->data + t->size_bytes <= data + size);
        for (uint64_t b = 0; b < t->size_bytes; b++) sink ^= t->data[b];
        FUZZ_CHECK(st_find(&s, t->name) == t);
        if (i > 0) FUZZ_CHECK(strcmp(s.tensors[i - 1].name, t->name) < 0);
    }
    (void)sink;
    if (st == SLM_OK) {
        uint64_t n = s.n_tensors;
        err_clear(&e);
        slm_status st2 = st_parse_image(&s, data, size, 1, &e);
        FUZZ_CHECK(n == 0 ? st2 == SLM_OK : st2 != SLM_OK);
        FUZZ_CHECK(s.n_tensors == n);
    }
    st_close(&s);
    return 0;
}
