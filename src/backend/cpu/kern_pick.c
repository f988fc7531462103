/* kern_pick.c — which tier runs each shape of quantised matmul on repacked tiles. Every tier gives
 * the same bits (cpu.h's canonical arithmetic), and the x86 tiers read the same tiles
 * (kern_tiles.c), so a backend on "auto" kernels may run the matmuls of a weight type and column
 * count with any supported tier whose tiles are its own, at no cost in results: the tier that ran
 * that shape fastest on this CPU class (a static table, measured with bench/mm_cols.c). A class
 * without measurements, and a backend asked for one tier by name, run their own tier everywhere. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/kern_common.h"

/* Weight type wt and column counts [cols_lo, cols_hi] (CPU_PICK_COLS stands for that many and
 * more) run on tier level. */
typedef struct pick_rule {
    uint32_t wt;
    int32_t cols_lo, cols_hi;
    cpu_isa_level level;
} pick_rule;

/* x86-64 with AVX-512 (VNNI) and AVX-VNNI: Intel Sapphire Rapids and later Xeons. Measured on an
 * Intel Xeon with AVX-512 VNNI, AVX-VNNI and AMX (bench_mm_cols -m 65536 -k 1024, one thread,
 * avx512 against avxvnni interleaved; docs/architecture.md has the figures). Shapes not listed
 * run on the backend's own tier (avx512). */
static const pick_rule rules_avx512_avxvnni[] = {
    {SLM_DTYPE_Q8_0, 1, 1, CPU_ISA_AVX2_VNNI},
};

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

void cpu_mm_picks_fill(const cpu_isa *own, bool choose, const cpu_isa *picks[CPU_PICK_TYPES][CPU_PICK_COLS]) {
    for (int t = 0; t < CPU_PICK_TYPES; t++)
        for (int c = 0; c < CPU_PICK_COLS; c++) picks[t][c] = own;
    if (!choose) return;
    const pick_rule *rules = NULL;
    size_t n_rules = 0;
    if (own->level == CPU_ISA_AVX512 && cpu_isa_supported(CPU_ISA_AVX2_VNNI)) {
        rules = rules_avx512_avxvnni;
        n_rules = sizeof rules_avx512_avxvnni / sizeof rules_avx512_avxvnni[0];
    }
    for (size_t i = 0; i < n_rules; i++) {
        const pick_rule *r = &rules[i];
        int32_t t = cpu_pick_type_index(r->wt);
        if (t < 0 || !cpu_isa_supported(r->level)) continue;
        const cpu_isa *alt = cpu_isa_get(r->level);
        if (!reads_same_tiles(own, alt, r->wt)) continue;
        for (int32_t c = r->cols_lo; c <= r->cols_hi && c <= CPU_PICK_COLS; c++) picks[t][c - 1] = alt;
    }
}

const cpu_isa *cpu_mm_pick(const cpu_backend *cb, uint32_t wt, int64_t ncols) {
    int32_t t = cpu_pick_type_index(wt);
    if (t < 0 || ncols < 1) return cb->isa;
    return cb->mm_pick[t][ncols < CPU_PICK_COLS ? ncols - 1 : CPU_PICK_COLS - 1];
}
