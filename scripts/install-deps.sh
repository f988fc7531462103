#!/usr/bin/env bash
# Installs the Debian packages statelm needs. Idempotent and non-interactive: runs apt-get update
# only when a package is missing.
#   install-deps.sh           what building and running statelm needs (the main job)
#   install-deps.sh --tests   that, plus what the tests add (scripts/test.sh)
set -euo pipefail
# Build and run: compiler, CMake, the libraries libstatelm and the CLI link (PCRE2, cJSON,
# libunistring, xxHash; libmicrohttpd for `statelm serve`; protobuf-c for `statelm export`, whose
# sources protoc-c generates at build time), Python with pip for fetching models from PyPI, and
# Python's headers for the statelm package's extension (`pip install .`, python/).
pkgs=(build-essential cmake pkg-config libpcre2-dev libcjson-dev libunistring-dev libxxhash-dev
      libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler python3 python3-pip python3-dev)
case "${1:-}" in
  "") ;;
  --tests)
    # cmocka (unit tests), clang (libFuzzer targets), curl (the server test), python3-venv (the test
    # venv of scripts/requirements-test.txt), and on x86 hosts an aarch64 cross compiler and
    # qemu-user to run the NEON kernels (tests/cross)
    pkgs+=(libcmocka-dev clang curl python3-venv)
    case "$(uname -m)" in x86_64 | amd64) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;; esac
    ;;
  *) echo "usage: install-deps.sh [--tests]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
