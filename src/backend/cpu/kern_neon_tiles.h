/* kern_neon_tiles.h — the NEON pieces that read the repacked tiles (kern_tiles.c), shared by the
 * NEON tier (kern_neon.c, sdot) and the I8MM tier (kern_i8mm.c, SMMLA): f16 and byte loads, and the
 * unpacking of one group of 4 rows of a tile into int8 registers. Include only from aarch64 files
 * built with the dot-product extension, after <arm_neon.h>. */
#ifndef SLM_BACKEND_CPU_KERN_NEON_TILES_H
#define SLM_BACKEND_CPU_KERN_NEON_TILES_H

#include <arm_neon.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/cpu/kern_common.h"

/* Four f16 at p as f32 lanes. */
static inline float32x4_t neon_f16x4(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

/* Four bytes at p (u8 when is_unsigned, else int8) widened to int32 lanes. */
static inline int32x4_t neon_widen4(const uint8_t *p, bool is_unsigned) {
    uint8_t b[8] = {p[0], p[1], p[2], p[3], 0, 0, 0, 0};
    uint8x8_t v = vld1_u8(b);
    if (is_unsigned) return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(v))));
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(v))));
}

/* Q5 tiles: the 5th bits of elements s..s+3 (s = 4j for the low nibbles of quant vector j, 16 +
 * 4j for its high ones) at bit 4 of each lane's bytes 0..3, from the tile's regrouped bits (bit j of
 * byte i for element 4j + i, bit 4 + j for 16 + 4j + i; kern_tiles.c): one shift within the bytes. */
static inline uint8x16_t neon_q5_bits4(uint32x4_t qh, int s) {
    int j = (s & 15) / 4;
    int8x16_t sh = vdupq_n_s8((int8_t)(s < 16 ? 4 - j : -j));
    return vandq_u8(vshlq_u8(vreinterpretq_u8_u32(qh), sh), vdupq_n_u8(0x10));
}

/* Rows 4g..4g+3 of one 32-block of a 32-block type's tile, q = the block's quants + 16 g: w[j]
 * (j < 4) holds elements 4j..4j+3 of the 4 rows (4 bytes each), w[4 + j] elements 16 + 4j..: Q8_0's
 * vectors j and 4 + j back to int8 from w ^ 0x80, the nibble types' low and high nibbles of vector
 * j as non-negative int8 (Q5_0 / Q5_1 with their 5th bits). */
static inline __attribute__((always_inline)) void neon_tile_q32_rows4(uint32_t wt, const uint8_t *q, int8x16_t w[8]) {
    if (wt == SLM_DTYPE_Q8_0) {
        const uint8x16_t flip = vdupq_n_u8(0x80);
        for (int j = 0; j < 8; j++) w[j] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(q + 64 * j), flip));
        return;
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const bool q5 = wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1;
    uint32x4_t qh = q5 ? vld1q_u32((const uint32_t *)(const void *)(q + 256)) : vdupq_n_u32(0);
    for (int j = 0; j < 4; j++) {
        uint8x16_t v = vld1q_u8(q + 64 * j), lo = vandq_u8(v, m4), hi = vshrq_n_u8(v, 4);
        if (q5) {
            lo = vorrq_u8(lo, neon_q5_bits4(qh, 4 * j));
            hi = vorrq_u8(hi, neon_q5_bits4(qh, 16 + 4 * j));
        }
        w[j] = vreinterpretq_s8_u8(lo);
        w[4 + j] = vreinterpretq_s8_u8(hi);
    }
}

#endif
