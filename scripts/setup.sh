#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test MoE-MLIR.
# Idempotent: packages already present are not fetched again.
set -euo pipefail

packages=(
  cmake ninja-build ccache
  clang-22 lld-22 libclang-rt-22-dev
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libprotobuf-dev protobuf-compiler libtorch-dev python3-venv python3-pip
  python3-numpy python3-onnx python3-torch
  libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev libomp-22-dev
  libzip-dev python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The current ONNX library (Debian's stops at opset 17), built once into a
# cache outside the build tree.
"$(dirname "$0")/setup-onnx.sh" >/dev/null
