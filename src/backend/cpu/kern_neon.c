/* kern_neon.c — NEON micro-kernels (placeholder). */
#include "backend/cpu/cpu.h"

const cpu_isa *cpu_isa_neon(void) { return NULL; }
