/* ggml_quant_ref.c — llama.cpp's own reference quantisers (ggml/src/ggml-quants.c, compiled from a
 * llama.cpp source tree by scripts/gen_quant_golden.py) as a filter: reads n rows of k float32
 * from IN, writes them quantised to TYPE with quantize_row_<type>_ref (the path llama-quantize
 * takes without an importance matrix) to OUT. Not part of the build; golden data only.
 *   usage: ggml_quant_ref TYPE K IN OUT    TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 q4_K q5_K q6_K */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-quants.h"

/* The few ggml.c symbols ggml-quants.c references outside the reference quantisers. */
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt);
    abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }
const char *ggml_type_name(enum ggml_type type) { (void)type; return "?"; }

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    const char *type = argv[1];
    long k = atol(argv[2]);
    FILE *f = fopen(argv[3], "rb");
    if (!f || k <= 0) return 2;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)bytes);
    if (fread(x, 1, (size_t)bytes, f) != (size_t)bytes) return 2;
    fclose(f);
    long n = bytes / 4;
    unsigned char *y = calloc((size_t)n, 2); /* every type is under 2 bytes per element */
    size_t out = 0;
    if (!strcmp(type, "q4_0")) quantize_row_q4_0_ref(x, (block_q4_0 *)y, n), out = (size_t)n / 32 * sizeof(block_q4_0);
    else if (!strcmp(type, "q4_1")) quantize_row_q4_1_ref(x, (block_q4_1 *)y, n), out = (size_t)n / 32 * sizeof(block_q4_1);
    else if (!strcmp(type, "q5_0")) quantize_row_q5_0_ref(x, (block_q5_0 *)y, n), out = (size_t)n / 32 * sizeof(block_q5_0);
    else if (!strcmp(type, "q5_1")) quantize_row_q5_1_ref(x, (block_q5_1 *)y, n), out = (size_t)n / 32 * sizeof(block_q5_1);
    else if (!strcmp(type, "q8_0")) quantize_row_q8_0_ref(x, (block_q8_0 *)y, n), out = (size_t)n / 32 * sizeof(block_q8_0);
    else if (!strcmp(type, "q4_K")) quantize_row_q4_K_ref(x, (block_q4_K *)y, n), out = (size_t)n / 256 * sizeof(block_q4_K);
    else if (!strcmp(type, "q5_K")) quantize_row_q5_K_ref(x, (block_q5_K *)y, n), out = (size_t)n / 256 * sizeof(block_q5_K);
    else if (!strcmp(type, "q6_K")) quantize_row_q6_K_ref(x, (block_q6_K *)y, n), out = (size_t)n / 256 * sizeof(block_q6_K);
    else return 2;
    f = fopen(argv[4], "wb");
    if (!f || fwrite(y, 1, out, f) != out || fclose(f) != 0) return 1;
    return 0;
}
