/* bench_isa.h — the kernel table of one CPU tier, for the bench programs that time micro-kernels
 * directly (include after backend/cpu/cpu.h). The generic tier for GENERIC and any level not
 * built in. */
#ifndef SLM_BENCH_ISA_H
#define SLM_BENCH_ISA_H

static inline const cpu_isa *bench_isa_of(cpu_isa_level level) {
    switch (level) {
    case CPU_ISA_AMX: return cpu_isa_amx();
    case CPU_ISA_AVX512: return cpu_isa_avx512();
    case CPU_ISA_AVX2_VNNI: return cpu_isa_avx2_vnni();
    case CPU_ISA_AVX2: return cpu_isa_avx2();
    case CPU_ISA_NEON: return cpu_isa_neon();
    default: return cpu_isa_generic();
    }
}

#endif
