#!/bin/bash
# Packs onnxruntime-gpu (ONNX Runtime with its CUDA execution provider) for a
# GPU machine that cannot reach PyPI and takes at most 64 MiB per transfer:
# downloads the wheel for the machine's Python, keeps what `import
# onnxruntime` and the CUDA provider need, compresses it (xz, which Python's
# lzma module reads everywhere) and splits it into parts of at most 32 MiB (one goes with the 28 MiB checkout),
# with a manifest, in .gpu-ort (ignored by git). scripts/gpu-ort-unpack.sh
# gathers the parts there, one transfer at a time, and unpacks them once all
# have arrived; bench/gpu_bench.py then finds the package through
# MOE_ORT_SITE.
#
# The device machines' python3 is 3.12 (/opt/torch/.venv, KINDS.md), hence
# the default; gpu-ort-unpack.sh refuses a pack for another Python at the
# first part.
#
#   ./scripts/gpu-ort-pack.sh [PYTHON_VERSION [ORT_VERSION]]   (default 3.12, the newest)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYVER=${1:-3.12}
ORTVER=${2:-}
OUTDIR=$ROOT/.gpu-ort
PIP=${PIP:-$ROOT/bench/.venv/bin/pip}
[ -x "$PIP" ] || { echo "gpu-ort-pack: $PIP is missing; run bench/setup.sh" >&2; exit 1; }
[[ $PYVER =~ ^3\.[0-9]+$ ]] || { echo "gpu-ort-pack: PYTHON_VERSION must look like 3.12, not '$PYVER'" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PIP" download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" \
  --platform manylinux_2_28_x86_64 -d "$work" "onnxruntime-gpu${ORTVER:+==$ORTVER}"
wheel=$(ls "$work"/onnxruntime_gpu-*.whl)
mkdir "$work/site"
# The package without its offline tools and the TensorRT provider.
(cd "$work/site" && unzip -q "$wheel" 'onnxruntime/*' \
  -x 'onnxruntime/transformers/*' 'onnxruntime/quantization/*' 'onnxruntime/tools/*' \
     'onnxruntime/capi/libonnxruntime_providers_tensorrt.so')
tar -C "$work/site" -cf - onnxruntime | xz -T2 -6 > "$work/ort.tar.xz"
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"
split -b 32M -d -a 2 "$work/ort.tar.xz" "$OUTDIR/part-"
parts=$(ls "$OUTDIR"/part-* | wc -l)
{
  echo "wheel=$(basename "$wheel")"
  echo "python=$PYVER"
  echo "parts=$parts"
  echo "sha256=$(sha256sum "$work/ort.tar.xz" | cut -d' ' -f1)"
} > "$OUTDIR/manifest"
cat "$OUTDIR/manifest"
echo "gpu-ort-pack: carry .gpu-ort/manifest and one .gpu-ort/part-NN per call, each call running"
echo "  ./scripts/gpu-ort-unpack.sh"
echo "back to back: a machine idle for 30 s is given back, and the parts with it."
