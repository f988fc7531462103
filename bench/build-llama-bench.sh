#!/usr/bin/env bash
# Builds llama.cpp's own `llama-bench` the way llama.cpp's README builds it (GGML_NATIVE=ON, Release)
# from the llama.cpp source that llama-cpp-python $LLAMA_CPP_PYTHON_VERSION vendors: the peer that
# bench/compare measures statelm against. Prints the binary's path on stdout; progress goes to stderr.
# Usage: build-llama-bench.sh [TARGET...] builds those llama.cpp targets instead (default llama-bench;
# e.g. llama-lookup, llama-speculative-simple for bench/spec_lookup.sh, llama-quantize for
# bench/quantize_compare.sh) and prints one path per line.
# Idempotent: the sdist is downloaded once into $cache/src, the build lives in
# $cache/llama-bench-<version>-native (STATELM_CACHE, default ~/.cache/statelm), nothing of llama.cpp
# enters the repository. The build is native, so the CPU model, its flags and the compiler are recorded
# next to the binary (cpu.txt) and it is rebuilt when they differ: a native binary from another CPU is
# not the peer as its users build it, and may not even run here (SIGILL).
# AMX CPUs: llama.cpp's native build dies in its AMX matmul (ggml_backend_amx_mul_mat /
# tinygemm_kernel_amx, an upstream bug: SIGILL or SIGSEGV) on any prompt of a few tokens of a
# Q4_0/Q4_1/Q8_0/K-quant file (one-token decode runs). After building, a llama-bench run of an 8-token
# prompt and one generated token on a small Q4_0 GGUF ($LLAMA_BENCH_PROBE_MODEL, else the smallest
# *q4_0*.gguf in $cache/models) checks for that; if it dies by a signal, the targets are rebuilt with
# -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 added to the native flags (what llama.cpp's users on such
# CPUs must do until the fix lands), which is said on stderr and recorded in $out/flags.txt (the
# decision is kept in the build folder, so an interrupted rebuild resumes with it).
set -euo pipefail
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${STATELM_CACHE:-$HOME/.cache/statelm}"
jobs="${JOBS:-$(nproc)}"
src_dir="$cache/src"
out="$cache/llama-bench-$version-native"
sdist="$src_dir/llama_cpp_python-$version.tar.gz"
log() { echo "build-llama-bench: $*" >&2; }

cpu_fingerprint() {
  {
    grep -m1 -E '^(model name|Model name|CPU part|Hardware)' /proc/cpuinfo || true
    grep -m1 -E '^(flags|Features)' /proc/cpuinfo || true
    uname -m
    "${CXX:-c++}" --version | head -n1
  } | sed 's/[[:space:]]\+/ /g'
}
fingerprint="$(cpu_fingerprint)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(llama-bench)
same_cpu=0
[ -f "$out/cpu.txt" ] && [ "$(cat "$out/cpu.txt")" = "$fingerprint" ] && same_cpu=1
missing=0
for t in "${targets[@]}"; do [ -x "$out/$t" ] || missing=1; done
if [ $same_cpu = 1 ] && [ $missing = 0 ] && [ -f "$out/flags.txt" ]; then # flags.txt: the probe passed
  for t in "${targets[@]}"; do echo "$out/$t"; done
  exit 0
fi

mkdir -p "$src_dir"
if [ ! -s "$sdist" ]; then
  log "downloading llama-cpp-python==$version (sdist)"
  tmp="$(mktemp -d)"
  python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
    "llama-cpp-python==$version" -d "$tmp" >&2
  mv "$tmp/llama_cpp_python-$version.tar.gz" "$sdist"
  rm -rf "$tmp"
fi
tree="$src_dir/llama_cpp_python-$version"
if [ ! -f "$tree/vendor/llama.cpp/CMakeLists.txt" ]; then
  log "unpacking $sdist"
  rm -rf "$tree"
  tar xzf "$sdist" -C "$src_dir"
fi

# A stale binary (other CPU or compiler) must not survive a failed rebuild, and objects compiled with
# -march=native for another CPU must not be relinked: the build folder is kept only to resume a build
# interrupted on this same CPU.
# Binaries from this same CPU (cpu.txt matches) stay when only other targets are added.
if [ $same_cpu = 0 ]; then
  rm -f "$out"/llama-* "$out/cpu.txt" "$out/flags.txt"
  if [ ! -f "$out/build/statelm-cpu.txt" ] || [ "$(cat "$out/build/statelm-cpu.txt")" != "$fingerprint" ]; then
    rm -rf "$out/build"
  fi
fi
mkdir -p "$out/build"
echo "$fingerprint" >"$out/build/statelm-cpu.txt"
# llama-server (bench/serve_compare.py's peer) is configured only when asked for, with its embedded UI
# off (nothing downloaded).
server=OFF
for t in "${targets[@]}"; do [ "$t" = llama-server ] && server=ON; done

# configure_build EXTRA_FLAGS: configures and builds the targets (llama-bench too, for the probe)
# with EXTRA_FLAGS added to the native C and C++ flags.
configure_build() {
  log "configuring (GGML_NATIVE=ON, Release${1:+, $1}) in $out/build"
  # Offline and minimal: no HTTPS client, no tests; examples are configured (only the targets asked
  # for are built); static libraries so each binary stands alone.
  cmake -S "$tree/vendor/llama.cpp" -B "$out/build" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_C_FLAGS="$1" -DCMAKE_CXX_FLAGS="$1" \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=$server \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF >"$out/configure.log" 2>&1 || { tail -n 30 "$out/configure.log" >&2; exit 1; }
  log "building ${build_targets[*]} with $jobs jobs (log: $out/build.log)"
  cmake --build "$out/build" --target "${build_targets[@]}" -j "$jobs" >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log" >&2; exit 1; }
}

# probe_crash: 0 when llama-bench (an 8-token prompt, then one token) dies by a signal; 1 when it runs,
# fails otherwise or no probe model is at hand (then said on stderr).
probe_crash() {
  local model="${LLAMA_BENCH_PROBE_MODEL:-}"
  [ -n "$model" ] || model=$(ls -S -r "$cache"/models/*[qQ]4_0*.gguf 2>/dev/null | head -n1 || true)
  if [ -z "$model" ] || [ ! -s "$model" ]; then
    log "no Q4_0 GGUF to probe llama-bench with (LLAMA_BENCH_PROBE_MODEL): crash check skipped"
    return 1
  fi
  local rc=0
  "$out/build/bin/llama-bench" -m "$model" -p 8 -n 1 -r 1 -t 1 >"$out/probe.log" 2>&1 || rc=$?
  [ $rc -gt 128 ] && [ $rc -lt 160 ] && probe_signal=$((rc - 128))
}

build_targets=("${targets[@]}")
[[ " ${targets[*]} " == *" llama-bench "* ]] || build_targets+=(llama-bench)
extra="$(cat "$out/build/statelm-flags.txt" 2>/dev/null || true)" # this build folder's earlier decision
configure_build "$extra"
probe_signal=0
if probe_crash; then
  if [ -n "$extra" ]; then
    log "llama-bench dies with signal $probe_signal even with $extra (see $out/probe.log)"
    exit 1
  fi
  extra="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  log "llama-bench dies with signal $probe_signal on this CPU (llama.cpp's AMX matmul, an upstream bug):" \
    "rebuilding with $extra added to -march=native"
  rm -rf "$out/build"
  mkdir -p "$out/build"
  echo "$fingerprint" >"$out/build/statelm-cpu.txt"
  echo "$extra" >"$out/build/statelm-flags.txt"
  configure_build "$extra"
  if probe_crash; then
    log "llama-bench dies with signal $probe_signal even with $extra (see $out/probe.log)"
    exit 1
  fi
fi
echo "$extra" >"$out/flags.txt"
for t in "${targets[@]}"; do cp "$out/build/bin/$t" "$out/$t"; done
echo "$fingerprint" >"$out/cpu.txt"
for t in "${targets[@]}"; do echo "$out/$t"; done
