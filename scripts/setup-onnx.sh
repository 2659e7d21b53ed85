#!/usr/bin/env bash
# Builds the current ONNX C++ library (parser, checker, shape inference for
# every opset it defines) once, from its source distribution on PyPI,
# against Debian's protobuf, and installs it into a cache outside the build
# tree. Debian 12's libonnx (1.12) stops at opset 17, while transformers'
# exporter writes opset 20 and later.
#
# The library is built static, position independent and in its own C++
# and protobuf namespace (onnx_moe): Debian's libtorch links Debian's
# libonnx.so.1 (namespace onnx), and two ONNX libraries in one namespace
# would clash in symbols and in protobuf's descriptor pool.
#
# Idempotent: an existing install of the pinned version is reused, so a
# second set-up costs nothing. Prints the install prefix on its last line.
set -euo pipefail

version=1.23.2
# Our changes to its source (below); a new one makes a new install.
patchlevel=1
namespace=onnx_moe
cache=${MOE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moe-mlir}
prefix=$cache/onnx-$version-p$patchlevel
stamp=$prefix/.installed

if [ -f "$stamp" ]; then
  echo "$prefix"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/onnx-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ONNX needs CMake >= 3.26; Debian 12 has 3.25. PyPI's cmake goes into a
# venv in the cache, reused by later set-ups.
tools=$cache/cmake-venv
if [ ! -x "$tools/bin/cmake" ]; then
  echo "setup-onnx: installing CMake from PyPI into $tools" >&2
  /usr/bin/python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check 'cmake>=3.26,<4'
fi

echo "setup-onnx: building ONNX $version (namespace $namespace) into $prefix" >&2
# pip fetches the sdist by name (reading its metadata needs no compiler);
# the archive is unpacked and built here.
"$tools/bin/pip" download -q --disable-pip-version-check --no-deps \
  --no-binary onnx "onnx==$version" -d "$work" >"$work/download.log" 2>&1 ||
  tail -20 "$work/download.log" >&2
archive=$(ls "$work"/onnx-"$version".tar.gz 2>/dev/null || true)
if [ -z "$archive" ]; then
  echo "setup-onnx: could not download onnx==$version's source distribution from PyPI" >&2
  exit 1
fi
tar -xzf "$archive" -C "$work"

# Data propagation stands for a 1-D tensor of static length N by N unknown
# values, one protobuf message each: a model that declares N = 2^62 (the
# onnx-proto fuzz target's test/fuzz/Inputs/onnx-proto/oom-data-propagation-
# length) makes shape inference allocate until memory runs out. Values that
# stand for shapes have one entry per axis; past 1024 the values are left
# unknown, as for any tensor whose length is unknown.
propagation=$work/onnx-$version/onnx/shape_inference/implementation.h
sed -i 's/if ((shape.dim_size() == 1) \&\& (shape.dim(0).has_dim_value())) {/if ((shape.dim_size() == 1) \&\& (shape.dim(0).has_dim_value()) \&\& shape.dim(0).dim_value() <= 1024) {/' "$propagation"
grep -q 'shape.dim(0).dim_value() <= 1024' "$propagation" || {
  echo "setup-onnx: could not bound data propagation in $propagation (has ONNX $version changed?)" >&2
  exit 1
}

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_C_COMPILER_LAUNCHER=ccache)
"$tools/bin/cmake" -G Ninja -S "$work/onnx-$version" -B "$work/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  "${launcher[@]}" \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DBUILD_SHARED_LIBS=OFF \
  -DONNX_NAMESPACE=$namespace \
  -DONNX_ML=ON \
  -DONNX_BUILD_TESTS=OFF -DONNX_BUILD_PYTHON=OFF \
  -DONNX_GEN_PB_TYPE_STUBS=OFF \
  -DONNX_USE_PROTOBUF_SHARED_LIBS=ON \
  -DPython3_EXECUTABLE=/usr/bin/python3 >"$work/configure.log" 2>&1 || {
    tail -30 "$work/configure.log" >&2
    echo "setup-onnx: configuring ONNX $version failed" >&2
    exit 1
  }
"$tools/bin/cmake" --build "$work/build" --target install >"$work/build.log" 2>&1 || {
    tail -30 "$work/build.log" >&2
    echo "setup-onnx: building ONNX $version failed" >&2
    exit 1
  }
touch "$stamp"
echo "$prefix"
