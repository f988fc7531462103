/* kern_avx2_vnni.c — kern_avx2.c compiled with AVX-VNNI (-mavxvnni, CMakeLists.txt) as the ISA level
 * CPU_ISA_AVX2_VNNI: the same kernels, with vpdpbusd for the integer dots of the tile matmuls. */
#define SLM_AVX2_VNNI 1
#include "kern_avx2.c"
