/* kern_common.h — small pieces shared by the micro-kernel files (kern_generic.c and the SIMD
 * files): the canonical 16-lane reduction and the generic routines a SIMD table reuses. */
#ifndef SLM_BACKEND_CPU_KERN_COMMON_H
#define SLM_BACKEND_CPU_KERN_COMMON_H

#include <stdint.h>

#include "backend/cpu/cpu.h"

/* The canonical reduction of 16 lanes (cpu.h): acc[l] += acc[l + s] for s = 8, 4, 2, 1. */
static inline float cpu_reduce16(float acc[16]) {
    for (int s = 8; s >= 1; s /= 2)
        for (int l = 0; l < s; l++) acc[l] += acc[l + s];
    return acc[0];
}

/* Activation quantisers in portable C (kern_generic.c). */
void cpu_quant_act_32_generic(uint32_t wt, const float *x, int64_t k, uint8_t *dst);
void cpu_quant_act_k_generic(const float *x, int64_t k, uint8_t *dst);
void cpu_cvt_f16_generic(uint16_t *y, const float *x, int64_t n);
void cpu_vec_unary_generic(g_op op, float *y, const float *x, int64_t n, float scale);
/* The portable C micro-kernels, for SIMD tables that leave an entry to them (signatures as in
 * struct cpu_isa). */
void cpu_mm_quant_generic(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const uint8_t *act,
                          size_t act_stride, int64_t ncols, float *y, int64_t ldy, void *scratch);
void cpu_mm_float_generic(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t nr, int64_t k, const float *x,
                          int64_t ncols, float *y, int64_t ldy, void *scratch);
void cpu_attn_block_generic(const float *q, int64_t qts, int64_t T, int64_t G, const void *k, const void *v,
                            uint32_t kvt, int64_t kstride, int64_t vstride, int64_t hd, int64_t hdv, int64_t nk0,
                            float scale, float *out, int64_t ots, void *scratch);
void cpu_deltanet_head_generic(float *S, const float *S_in, const float *q, const float *k, const float *v,
                               const float *g, const float *beta, float *o, int64_t n, int64_t dk, int64_t dv,
                               int64_t qk_stride, int64_t v_stride, int64_t gb_stride, const float *S_in_next);
void cpu_conv_row_generic(float *y, const float *x, const float *w, int64_t wsc, int64_t wsk, int64_t C, int64_t K);
void cpu_row_norm_generic(g_op op, float *y, const float *x, const float *w, const float *z, int64_t n, float eps,
                          float w_offset);
void cpu_vec_swiglu_generic(float *y, const float *a, const float *b, int64_t n);
void cpu_vec_add_generic(float *y, const float *a, const float *b, int64_t n);
void cpu_vec_mul_generic(float *y, const float *a, const float *b, int64_t n);
/* Element i of a float-type weight row (F32, F16, BF16). */
float cpu_load_wf(uint32_t wt, const uint8_t *w, int64_t i);

#endif
