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
/* Element i of a float-type weight row (F32, F16, BF16). */
float cpu_load_wf(uint32_t wt, const uint8_t *w, int64_t i);

#endif
