#!/usr/bin/env bash
# Builds llama.cpp's own `llama-bench` the way llama.cpp's README builds it (GGML_NATIVE=ON, Release)
# from the llama.cpp source that llama-cpp-python $LLAMA_CPP_PYTHON_VERSION vendors: the peer that
# bench/compare measures statelm against. Prints the binary's path on stdout; progress goes to stderr.
# Usage: build-llama-bench.sh [TARGET...] builds those llama.cpp targets instead (default llama-bench;
# e.g. llama-lookup, llama-speculative-simple for bench/spec_lookup.sh) and prints one path per line.
# Idempotent: the sdist is downloaded once into $cache/src, the build lives in
# $cache/llama-bench-<version>-native (STATELM_CACHE, default ~/.cache/statelm), nothing of llama.cpp
# enters the repository. The build is native, so the CPU model, its flags and the compiler are recorded
# next to the binary (cpu.txt) and it is rebuilt when they differ: a native binary from another CPU is
# not the peer as its users build it, and may not even run here (SIGILL).
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
if [ $same_cpu = 1 ] && [ $missing = 0 ]; then
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
  rm -f "$out"/llama-* "$out/cpu.txt"
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
log "configuring (GGML_NATIVE=ON, Release) in $out/build"
# Offline and minimal: no HTTPS client, no tests; examples are configured (only the targets asked
# for are built); static libraries so each binary stands alone.
cmake -S "$tree/vendor/llama.cpp" -B "$out/build" -G "Unix Makefiles" \
  -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=$server \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF >"$out/configure.log" 2>&1 || { tail -n 30 "$out/configure.log" >&2; exit 1; }
log "building ${targets[*]} with $jobs jobs (log: $out/build.log)"
cmake --build "$out/build" --target "${targets[@]}" -j "$jobs" >"$out/build.log" 2>&1 ||
  { tail -n 30 "$out/build.log" >&2; exit 1; }
for t in "${targets[@]}"; do cp "$out/build/bin/$t" "$out/$t"; done
echo "$fingerprint" >"$out/cpu.txt"
for t in "${targets[@]}"; do echo "$out/$t"; done
