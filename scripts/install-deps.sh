#!/usr/bin/env bash
# Installs the Debian packages statelm's build and tests need. Idempotent and non-interactive:
# runs apt-get update only when a package is missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libpcre2-dev libcjson-dev libcmocka-dev libunistring-dev libxxhash-dev
      python3 python3-venv python3-dev)
# `statelm serve` is an HTTP server on libmicrohttpd; its test also talks to it with curl
pkgs+=(libmicrohttpd-dev curl)
# statelm export --target coreml: protoc generates protobuf-c sources for Core ML's Model/MIL protos
pkgs+=(libprotobuf-c-dev protobuf-c-compiler protobuf-compiler)
# x86 hosts also test the NEON kernels: an aarch64 cross compiler and qemu-user (tests/cross)
case "$(uname -m)" in x86_64 | amd64) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;; esac
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
