#!/usr/bin/env bash
# run_neon.sh SRC_DIR OUT_DIR — builds tests/cross/neon_kernels.c with the NEON and portable C
# kernels for aarch64 (ARMv8.2 + dot product, UBSan on) and runs it under qemu-user, so the NEON
# tier is tested on this x86 CI; then once more with the I8MM tier's packed matmuls (kern_i8mm.c). Exit 77 (CTest: skipped, never passed) when the cross compiler or
# qemu-aarch64 is missing (scripts/install-deps.sh installs both).
set -euo pipefail
src=$1
out=$2
cc=${SLM_AARCH64_CC:-aarch64-linux-gnu-gcc}
sysroot=${SLM_AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
if ! command -v "$cc" >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  echo "run_neon.sh: $cc or qemu-aarch64 not found: NEON kernels NOT tested" >&2
  exit 77
fi
mkdir -p "$out"
"$cc" -std=c11 -O2 -ffp-contract=off -march=armv8.2-a+dotprod -Wall -Wextra -Werror -fsanitize=undefined -fno-sanitize-recover=all \
  -I"$src/src" -I"$src/include" "$src/tests/cross/neon_kernels.c" "$src/src/backend/cpu/kern_neon.c" \
  "$src/src/backend/cpu/kern_generic.c" "$src/src/backend/cpu/kern_tiles.c" -lm -o "$out/neon_kernels"
qemu-aarch64 -cpu max -L "$sysroot" "$out/neon_kernels"
# The I8MM tier (ARMv8.6 SMMLA; qemu's "max" CPU has it): the same checks on its packed matmuls.
"$cc" -std=c11 -O2 -ffp-contract=off -march=armv8.2-a+dotprod+i8mm -Wall -Wextra -Werror -fsanitize=undefined -fno-sanitize-recover=all \
  -DSLM_CROSS_I8MM -I"$src/src" -I"$src/include" "$src/tests/cross/neon_kernels.c" "$src/src/backend/cpu/kern_neon.c" \
  "$src/src/backend/cpu/kern_i8mm.c" "$src/src/backend/cpu/kern_generic.c" "$src/src/backend/cpu/kern_tiles.c" -lm \
  -o "$out/i8mm_kernels"
qemu-aarch64 -cpu max -L "$sysroot" "$out/i8mm_kernels"
