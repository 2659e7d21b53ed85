#!/usr/bin/env bash
# Configures (once) and builds MoE-MLIR in ./build with clang-22, lld and ccache.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_BUILD_DIR:-$root/build}

# MOE_CMAKE_ARGS: more cmake arguments for the first configure of the build
# directory (scripts/test-sanitized.sh passes the sanitizer options).
read -r -a extra_args <<<"${MOE_CMAKE_ARGS:-}"

# The ONNX library that scripts/setup-onnx.sh built (it only prints the
# prefix when the library is there).
onnx_prefix=$("$root/scripts/setup-onnx.sh")

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld-22 \
    -DONNX_DIR="$onnx_prefix/lib/cmake/ONNX" \
    "${extra_args[@]}"
elif ! grep -qxF "ONNX_DIR:UNINITIALIZED=$onnx_prefix/lib/cmake/ONNX" "$build/CMakeCache.txt" &&
     ! grep -qxF "ONNX_DIR:PATH=$onnx_prefix/lib/cmake/ONNX" "$build/CMakeCache.txt"; then
  # A new ONNX install (setup-onnx.sh's version or patch level changed).
  cmake -S "$root" -B "$build" -DONNX_DIR="$onnx_prefix/lib/cmake/ONNX" >/dev/null
fi
# Paths relative to the checkout, so that another clone or build folder at
# the same depth reuses the compiled objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
ninja -C "$build" "$@"
