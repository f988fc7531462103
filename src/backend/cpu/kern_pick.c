/* kern_pick.c — which tier runs each shape of quantised matmul on repacked tiles. Every tier gives
 * the same bits (cpu.h's canonical arithmetic), and the x86 tiers read the same tiles
 * (kern_tiles.c), so a backend on "auto" kernels may run the matmuls of a weight type and column
 * count with any supported tier whose tiles are its own, at no cost in results: the tier that ran
 * that shape fastest on this CPU class (a static table, measured with bench/mm_cols.c). A class
 * without measurements, and a backend asked for one tier by name, run their own tier everywhere. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"

/* This CPU's class's rules (n_rules of them; NULL when none). Measured so far:
 *  - x86-64 with AVX-512 (VNNI) and AVX-VNNI (Intel Sapphire Rapids and later Xeons), on an Intel
 *    Xeon with AVX-512 VNNI, AVX-VNNI and AMX: bench_mm_cols -c -m 65536 -k 1024 (one thread,
 *    avx512 and avxvnni interleaved, every type, 1-8 columns; docs/architecture.md), and again
 *    with bench/mm_tiers.sh -r 5 avxvnni avx2 (avx512, avxvnni and avx2 back to back in each
 *    round, paired ratios; bench/README.md): avx512 was as fast as or faster than either at every
 *    shape (no other tier won every round of any shape), so the class has no rule.
 * Not measured: AVX-512 without AVX-VNNI (AMD Zen 4, where avx2 is the alternative), aarch64 (one
 * tier). A rule reads {SLM_DTYPE_Q8_0, 1, 1, CPU_ISA_AVX2_VNNI}: Q8_0 at one column on avxvnni. */
static const cpu_pick_rule *class_rules(const cpu_isa *own, size_t *n_rules) {
    (void)own;
    *n_rules = 0;
    return NULL;
}

int32_t cpu_pick_type_index(uint32_t wt) {
    switch (wt) {
    case SLM_DTYPE_Q4_0: return 0;
    case SLM_DTYPE_Q4_1: return 1;
    case SLM_DTYPE_Q5_0: return 2;
    case SLM_DTYPE_Q5_1: return 3;
    case SLM_DTYPE_Q8_0: return 4;
    case SLM_DTYPE_Q4_K: return 5;
    case SLM_DTYPE_Q5_K: return 6;
    case SLM_DTYPE_Q6_K: return 7;
    default: return -1;
    }
}

/* True when alt runs matmuls on the tiles own makes for wt (the same layout, sizes and groups). */
static bool reads_same_tiles(const cpu_isa *own, const cpu_isa *alt, uint32_t wt) {
    if (!own->repack_tiles || !own->tile_block_bytes || !own->tile_group || !own->mm_quant_packed) return false;
    if (!alt->repack_tiles || !alt->tile_block_bytes || !alt->tile_group || !alt->mm_quant_packed) return false;
    size_t tbb = own->tile_block_bytes(wt);
    return tbb && alt->repack_tiles == own->repack_tiles && alt->tile_block_bytes(wt) == tbb &&
           alt->tile_group(wt) == own->tile_group(wt);
}

void cpu_mm_picks_apply(const cpu_isa *own, const cpu_pick_rule *rules, size_t n_rules,
                        const cpu_isa *picks[CPU_PICK_TYPES][CPU_PICK_COLS]) {
    for (size_t i = 0; i < n_rules; i++) {
        const cpu_pick_rule *r = &rules[i];
        int32_t t = cpu_pick_type_index(r->wt);
        if (t < 0 || !cpu_isa_supported(r->level)) continue;
        const cpu_isa *alt = cpu_isa_get(r->level);
        if (!reads_same_tiles(own, alt, r->wt)) continue;
        for (int32_t c = r->cols_lo < 1 ? 1 : r->cols_lo; c <= r->cols_hi && c <= CPU_PICK_COLS; c++) picks[t][c - 1] = alt;
    }
}

void cpu_mm_picks_fill(const cpu_isa *own, bool choose, const cpu_isa *picks[CPU_PICK_TYPES][CPU_PICK_COLS]) {
    for (int t = 0; t < CPU_PICK_TYPES; t++)
        for (int c = 0; c < CPU_PICK_COLS; c++) picks[t][c] = own;
    size_t n_rules = 0;
    const cpu_pick_rule *rules = choose ? class_rules(own, &n_rules) : NULL;
    if (rules) cpu_mm_picks_apply(own, rules, n_rules, picks);
}

const cpu_isa *cpu_mm_pick(const cpu_backend *cb, uint32_t wt, int64_t ncols) {
    int32_t t = cpu_pick_type_index(wt);
    if (t < 0 || ncols < 1) return cb->isa;
    return cb->mm_pick[t][ncols < CPU_PICK_COLS ? ncols - 1 : CPU_PICK_COLS - 1];
}
