/* half.h — IEEE binary16 and bfloat16 conversions (exact, round-to-nearest-even on narrowing). */
#ifndef SLM_BASE_HALF_H
#define SLM_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0) {
        if (man == 0) return f32_from_bits(sign);
        /* subnormal: normalise */
        int e = -1;
        do { e++; man <<= 1; } while ((man & 0x400) == 0);
        man &= 0x3FF;
        return f32_from_bits(sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13));
    }
    if (exp == 31) return f32_from_bits(sign | 0x7F800000u | (man << 13));
    return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) return (uint16_t)(sign | 0x7C00 | (absx > 0x7F800000u ? 0x200 : 0));
    if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00); /* overflow to inf */
    if (absx < 0x38800000u) {                                 /* subnormal or zero in f16 */
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7FFFFF) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = absx + 0xC8000000u; /* rebias exponent: (e - 127 + 15) << 23 */
    uint32_t lsb = (r >> 13) & 1;
    r += 0xFFF + lsb;
    return (uint16_t)(sign | (r >> 13));
}

static inline float bf16_to_f32(uint16_t b) { return f32_from_bits((uint32_t)b << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7FFF + lsb;
    return (uint16_t)(x >> 16);
}

#endif
