/* kern_avx2.c — AVX2 + FMA + F16C micro-kernels (placeholder, filled below). */
#include "backend/cpu/cpu.h"

const cpu_isa *cpu_isa_avx2(void) { return NULL; }
