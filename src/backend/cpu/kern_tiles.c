/* kern_tiles.c — the repacked weight tiles the SIMD matmuls read (cpu.h, struct cpu_isa:
 * tile_block_bytes, repack_tiles): 16 rows interleaved so that one 64-byte vector holds 4 weight
 * bytes of each row (AVX-512 reads it as one register, AVX2 as two halves of 8 rows). Portable C,
 * compiled without ISA flags, so every tier can build them.
 *
 * 32-block types: tiles 2p and 2p+1 are a pair, interleaved block by block so that decode reads
 * one sequential stream in which every vector is 64-byte aligned and one activation broadcast
 * serves 32 rows. Block b of pair p (at (2p * nb + 2b) * tbb, tbb = cpu_tile_block_bytes) holds the
 * quants of tile 2p, those of tile 2p+1 (each 16 x 4-byte columns: Q4_0 / Q4_1 nibbles as stored,
 * so a vector's low nibbles are elements 4j.. and its high nibbles 16+4j..; Q8_0 as w ^ 0x80),
 * then the scales of 2p, those of 2p+1 (16 f16, for Q4_1 followed by 16 f16 mins). Q5_0 / Q5_1
 * tiles are Q4_0 / Q4_1 tiles whose quants are followed by one more vector, the 16 rows' 5th bits
 * (4 bytes each, regrouped by the vector that needs them: bit j of byte i is the 5th bit of element
 * 4j + i, bit 4 + j that of element 16 + 4j + i, so a per-byte shift brings the bits of quant vector
 * j's low or high nibbles to bit 4; cpu_q5_spread), and whose scales are as Q4_0's / Q4_1's. A last tile
 * without a partner (odd tile count) is alone: block b at (2p * nb + b) * tbb, quants then scales.
 * cpu_tile_sub_of() (kern_common.h) gives a tile's addressing in either case. K types (Q4_K, Q5_K,
 * Q6_K): tile after tile, each super-block in the layout kern_common.h describes.
 *
 * No layout drops a bit: cpu_tile_row gives any row's GGUF bytes back (EMBED reads a table tied to
 * the output head that way once its file pages are released).
 */
#include <string.h>

#include "backend/cpu/kern_common.h"

size_t cpu_tile_block_bytes(uint32_t wt) {
    switch (wt) {
    case SLM_DTYPE_Q4_0: return 256 + 32;
    case SLM_DTYPE_Q4_1: return 256 + 64;
    case SLM_DTYPE_Q5_0: return 320 + 32;
    case SLM_DTYPE_Q5_1: return 320 + 64;
    case SLM_DTYPE_Q8_0: return 512 + 32;
    case SLM_DTYPE_Q4_K: return KT_Q4K / 8; /* per 32 elements */
    case SLM_DTYPE_Q5_K: return KT_Q5K / 8;
    case SLM_DTYPE_Q6_K: return KT_Q6K / 8;
    default: return 0;
    }
}

/* The 256 quants of one K-quant super-block as values (Q4_K: 0..15, Q6_K: 0..63, the -32 is in
 * the arithmetic), with its scales (and Q4_K mins); Q5_K: its scales and mins only. */
static void kquant_values(uint32_t wt, const uint8_t *x, uint8_t q[256], int32_t sc[16], int32_t mn[8]) {
    if (wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K) {
        const uint8_t *s = x + 4;
        for (int j = 0; j < 8; j++) {
            sc[j] = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
            mn[j] = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        for (int c = 0; c < 4 && wt == SLM_DTYPE_Q4_K; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = x[16 + 32 * c + l] & 0x0F;
                q[64 * c + 32 + l] = x[16 + 32 * c + l] >> 4;
            }
        return;
    }
    for (int n = 0; n < 2; n++) {
        const uint8_t *L = x + 64 * n, *H = x + 128 + 32 * n;
        for (int l = 0; l < 32; l++) {
            q[128 * n + l] = (uint8_t)((L[l] & 0x0F) | ((H[l] & 3) << 4));
            q[128 * n + l + 32] = (uint8_t)((L[l + 32] & 0x0F) | (((H[l] >> 2) & 3) << 4));
            q[128 * n + l + 64] = (uint8_t)((L[l] >> 4) | (((H[l] >> 4) & 3) << 4));
            q[128 * n + l + 96] = (uint8_t)((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4));
        }
    }
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)x[192 + j];
}

/* Tile super-block B of tile t (layout above); rows past m are zero. */
static void repack_kquant(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t m, int64_t t, int64_t B,
                          uint8_t *out) {
    bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
    memset(out, 0, q5 ? KT_Q5K : q4 ? KT_Q4K : KT_Q6K);
    for (int r = 0; r < 16 && 16 * t + r < m; r++) {
        const uint8_t *x = w + (size_t)(16 * t + r) * row_bytes + (size_t)B * (q5 ? 176 : q4 ? 144 : 210);
        uint8_t q[256];
        int32_t sc[16], mn[8];
        kquant_values(wt, x, q, sc, mn);
        if (q4) {
            for (int v = 0; v < 32; v++) /* bytes 4g..4g+3 of chunk c = 32c + 4g: as stored */
                memcpy(out + 64 * v + 4 * r, x + (q5 ? 48 : 16) + 4 * v, 4);
            for (int g = 0; g < 8 && q5; g++) memcpy(out + KT_Q4K + 64 * g + 4 * r, x + 16 + 4 * g, 4);
            for (int s = 0; s < 8; s++) {
                out[2048 + 16 * s + r] = (uint8_t)sc[s];
                out[2176 + 16 * s + r] = (uint8_t)mn[s];
            }
            memcpy(out + 2304 + 2 * r, x, 2);
            memcpy(out + 2336 + 2 * r, x + 2, 2);
        } else {
            for (int j = 0; j < 16; j++) {
                const uint8_t *e = q + 16 * j;
                for (int i = 0; i < 4; i++) {
                    out[192 * j + 4 * r + i] = (uint8_t)((e[i] & 0x0F) | ((e[4 + i] & 0x0F) << 4));
                    out[192 * j + 64 + 4 * r + i] = (uint8_t)((e[8 + i] & 0x0F) | ((e[12 + i] & 0x0F) << 4));
                    out[192 * j + 128 + 4 * r + i] =
                        (uint8_t)((e[i] >> 4) | ((e[4 + i] >> 4) << 2) | ((e[8 + i] >> 4) << 4) | ((e[12 + i] >> 4) << 6));
                }
                out[3072 + 16 * j + r] = (uint8_t)sc[j];
            }
            memcpy(out + 3328 + 2 * r, x + 208, 2);
        }
    }
}

void cpu_repack_tiles(uint32_t wt, const uint8_t *w, size_t row_bytes, int64_t m, int64_t k, int64_t t0,
                         int64_t t1, uint8_t *dst) {
    if (cpu_wt_is_k(wt)) {
        int64_t nbk = k / CPU_QK_K;
        size_t sbb = 8 * cpu_tile_block_bytes(wt);
        for (int64_t t = t0; t < t1; t++)
            for (int64_t B = 0; B < nbk; B++) repack_kquant(wt, w, row_bytes, m, t, B, dst + ((size_t)t * (size_t)nbk + (size_t)B) * sbb);
        return;
    }
    int64_t nb = k / CPU_QK, ntiles = (m + 15) / 16;
    size_t tbb = cpu_tile_block_bytes(wt), bsz = cpu_q32_block_bytes(wt);
    int nq = wt == SLM_DTYPE_Q8_0 ? 8 : 4;
    size_t qoff = cpu_q32_quant_off(wt);
    bool q5 = wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1, mins = wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1;
    for (int64_t t = t0; t < t1; t++) {
        cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
        uint8_t *base = dst + (size_t)(t & ~(int64_t)1) * (size_t)nb * tbb;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *q = base + (size_t)b * sub.stride + sub.quants, *sc = base + (size_t)b * sub.stride + sub.scales;
            for (int r = 0; r < 16; r++) {
                int64_t row = 16 * t + r;
                if (row >= m) {
                    for (int j = 0; j < nq + q5; j++) memset(q + 64 * j + 4 * r, wt == SLM_DTYPE_Q8_0 ? 0x80 : 0, 4);
                    memset(sc + 2 * r, 0, 2);
                    if (mins) memset(sc + 32 + 2 * r, 0, 2);
                    continue;
                }
                const uint8_t *blk = w + (size_t)row * row_bytes + (size_t)b * bsz;
                for (int j = 0; j < nq; j++) {
                    uint32_t d;
                    memcpy(&d, blk + qoff + 4 * j, 4);
                    if (wt == SLM_DTYPE_Q8_0) d ^= 0x80808080u;
                    memcpy(q + 64 * j + 4 * r, &d, 4);
                }
                if (q5) {
                    uint32_t qh;
                    memcpy(&qh, blk + qoff - 4, 4);
                    qh = cpu_q5_spread(qh);
                    memcpy(q + 64 * nq + 4 * r, &qh, 4);
                }
                memcpy(sc + 2 * r, blk, 2);
                if (mins) memcpy(sc + 32 + 2 * r, blk + 2, 2);
            }
        }
    }
}

int32_t cpu_tile_group(uint32_t wt) {
    return cpu_wt_is_k(wt) ? 1 : 2;
}

/* ---- the inverse: a row's GGUF bytes back from the tiles ------------------------------------------ */

/* Q4_K's 12 bytes of 6-bit scales and mins from their values (the inverse of kquant_values). */
static void pack_q4k_scales(const int32_t sc[8], const int32_t mn[8], uint8_t s[12]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
    }
}

void cpu_tile_row(uint32_t wt, const uint8_t *pk, int64_t m, int64_t k, int64_t row, uint8_t *dst) {
    int64_t t = row / 16, ntiles = (m + 15) / 16;
    int r = (int)(row % 16);
    if (cpu_wt_is_k(wt)) {
        bool q4 = wt == SLM_DTYPE_Q4_K || wt == SLM_DTYPE_Q5_K, q5 = wt == SLM_DTYPE_Q5_K;
        int64_t nbk = k / CPU_QK_K;
        size_t sbb = 8 * cpu_tile_block_bytes(wt), bsz = q5 ? 176 : q4 ? 144 : 210;
        for (int64_t B = 0; B < nbk; B++) {
            const uint8_t *in = pk + ((size_t)t * (size_t)nbk + (size_t)B) * sbb;
            uint8_t *x = dst + (size_t)B * bsz;
            if (q4) {
                int32_t sc[8], mn[8];
                for (int s = 0; s < 8; s++) sc[s] = in[2048 + 16 * s + r], mn[s] = in[2176 + 16 * s + r];
                memcpy(x, in + 2304 + 2 * r, 2);
                memcpy(x + 2, in + 2336 + 2 * r, 2);
                pack_q4k_scales(sc, mn, x + 4);
                for (int v = 0; v < 32; v++) memcpy(x + (q5 ? 48 : 16) + 4 * v, in + 64 * v + 4 * r, 4);
                for (int g = 0; g < 8 && q5; g++) memcpy(x + 16 + 4 * g, in + KT_Q4K + 64 * g + 4 * r, 4);
                continue;
            }
            uint8_t q[256];
            for (int j = 0; j < 16; j++) {
                uint8_t *e = q + 16 * j;
                for (int i = 0; i < 4; i++) {
                    uint8_t n0 = in[192 * j + 4 * r + i], n1 = in[192 * j + 64 + 4 * r + i];
                    uint8_t hb = in[192 * j + 128 + 4 * r + i];
                    e[i] = (uint8_t)((n0 & 0x0F) | ((hb & 3) << 4));
                    e[4 + i] = (uint8_t)((n0 >> 4) | (((hb >> 2) & 3) << 4));
                    e[8 + i] = (uint8_t)((n1 & 0x0F) | (((hb >> 4) & 3) << 4));
                    e[12 + i] = (uint8_t)((n1 >> 4) | (((hb >> 6) & 3) << 4));
                }
                x[192 + j] = in[3072 + 16 * j + r];
            }
            for (int n = 0; n < 2; n++) {
                uint8_t *L = x + 64 * n, *H = x + 128 + 32 * n;
                const uint8_t *qn = q + 128 * n;
                for (int l = 0; l < 32; l++) {
                    L[l] = (uint8_t)((qn[l] & 0x0F) | ((qn[l + 64] & 0x0F) << 4));
                    L[l + 32] = (uint8_t)((qn[l + 32] & 0x0F) | ((qn[l + 96] & 0x0F) << 4));
                    H[l] = (uint8_t)((qn[l] >> 4) | ((qn[l + 32] >> 4) << 2) | ((qn[l + 64] >> 4) << 4) |
                                     ((qn[l + 96] >> 4) << 6));
                }
            }
            memcpy(x + 208, in + 3328 + 2 * r, 2);
        }
        return;
    }
    int64_t nb = k / CPU_QK;
    size_t tbb = cpu_tile_block_bytes(wt), bsz = cpu_q32_block_bytes(wt);
    int nq = wt == SLM_DTYPE_Q8_0 ? 8 : 4;
    size_t qoff = cpu_q32_quant_off(wt);
    bool q5 = wt == SLM_DTYPE_Q5_0 || wt == SLM_DTYPE_Q5_1;
    cpu_tile_sub sub = cpu_tile_sub_of(wt, t, ntiles);
    const uint8_t *base = pk + (size_t)(t & ~(int64_t)1) * (size_t)nb * tbb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = base + (size_t)b * sub.stride + sub.quants, *sc = base + (size_t)b * sub.stride + sub.scales;
        uint8_t *blk = dst + (size_t)b * bsz;
        memcpy(blk, sc + 2 * r, 2);
        if (wt == SLM_DTYPE_Q4_1 || wt == SLM_DTYPE_Q5_1) memcpy(blk + 2, sc + 32 + 2 * r, 2);
        if (q5) {
            uint32_t qh;
            memcpy(&qh, q + 64 * nq + 4 * r, 4);
            qh = cpu_q5_gather(qh);
            memcpy(blk + qoff - 4, &qh, 4);
        }
        for (int j = 0; j < nq; j++) {
            uint32_t d;
            memcpy(&d, q + 64 * j + 4 * r, 4);
            if (wt == SLM_DTYPE_Q8_0) d ^= 0x80808080u;
            memcpy(blk + qoff + 4 * j, &d, 4);
        }
    }
}
