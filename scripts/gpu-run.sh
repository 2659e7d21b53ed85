#!/bin/bash
# On a machine with an NVIDIA GPU, runs what scripts/gpu-pack.sh packed: the
# CUDA runtime's kernel test, every packed corpus bundle (each checked
# against its reference as test/e2e does), the kernel benchmark, then the
# Mixtral block against PyTorch eager (bench/gpu_bench.py). Needs python3
# with numpy and PyTorch for CUDA, and the CUDA libraries cuBLAS and NCCL
# (found where the CUDA toolkit or PyTorch's wheels put them). Logs go to $OUT when it is set; PYTHON names the python.
# ONNX Runtime's CUDA MoE is timed where onnxruntime has the CUDA provider:
# the one scripts/gpu-ort-unpack.sh unpacked (MOE_ORT_SITE, default
# /tmp/moe-ort/site) comes first.
#
#   ./scripts/gpu-run.sh [DIR]       (default: .gpu)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=${1:-$ROOT/.gpu}
LOGS=${OUT:-$PACK/logs}
mkdir -p "$LOGS"

cuda_dirs=""
for name in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name "$name" 2>/dev/null | head -1)
  [ -n "$found" ] || { echo "gpu-run: $name not found" >&2; exit 1; }
  cuda_dirs="$cuda_dirs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$PACK/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# onnxruntime-gpu as scripts/gpu-ort-unpack.sh left it, ahead of any other.
ORT_SITE=${MOE_ORT_SITE:-/tmp/moe-ort/site}
[ -d "$ORT_SITE/onnxruntime" ] && export PYTHONPATH="$ORT_SITE${PYTHONPATH:+:$PYTHONPATH}"

status=0
nvidia-smi -L | tee "$LOGS/device.txt"
"$PACK/bin/moert-cuda-test" 2>&1 | tee "$LOGS/moert-cuda-test.txt" || status=1
for bundle in "$PACK"/bundles/*; do
  entry=$(basename "$bundle") # MODEL or MODEL.DTYPE
  model=${entry%%.*}; dtype=${entry#"$model"}; dtype=${dtype#.}
  "${PYTHON:-python3}" "$ROOT/test/e2e/run_corpus.py" --bin "$PACK/bin" --corpus "$ROOT/test/corpus" \
    --work "$bundle" --target cuda --run-only --plans one --dtype "${dtype:-f32}" "$model" 2>&1 \
    | tee "$LOGS/$entry.txt" || status=1
done
"$PACK/bin/moert-cuda-bench" 2>&1 | tee "$LOGS/moert-cuda-bench.txt" || status=1
for block in "$PACK"/bench/*; do
  [ -d "$block" ] || continue
  PYTHONUNBUFFERED=1 "${PYTHON:-python3}" "$ROOT/bench/gpu_bench.py" run "$block" --bin "$PACK/bin" \
    2>&1 | tee "$LOGS/gpu_bench_$(basename "$block").txt" || status=1
done
exit $status
