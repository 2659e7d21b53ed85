#!/bin/bash
# Packs what a GPU machine without the compiler needs to run the CUDA
# backend: moe-run, moert-cuda-test and moert-cuda-bench, the libraries they load that a bare
# CUDA machine lacks (MPI, oneDNN, OpenMP; not glibc, libstdc++ or the CUDA
# libraries, which it has), every corpus model compiled with --target=cuda
# for one rank (ort_moe also in f16 and bf16), and the Mixtral block of
# bench/gpu_bench.py in f32 and bf16 (its weights are rebuilt there).
# scripts/gpu-run.sh runs them there.
#
#   ./scripts/gpu-pack.sh [DIR]      (default: .gpu, ignored by git)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MOE_BUILD_DIR:-$ROOT/build}
PACK=${1:-$ROOT/.gpu}
MODELS="mixtral mixtral_bf16 ort_moe ort_moe_legacy switch qwen2_moe deepseek_v3 decoder_layer"

for tool in moe-compile moe-run moert-cuda-test moert-cuda-bench; do
  [ -x "$BUILD/bin/$tool" ] || { echo "gpu-pack: $BUILD/bin/$tool is missing; build with the CUDA toolkit and NCCL installed (./scripts/build.sh)" >&2; exit 1; }
done
rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/bundles"
cp "$BUILD/bin/moe-run" "$BUILD/bin/moert-cuda-test" "$BUILD/bin/moert-cuda-bench" "$PACK/bin/"
for lib in $(ldd "$BUILD/bin/moe-run" "$BUILD/bin/moert-cuda-test" | awk '/=> \// {print $3}'); do
  case $(basename "$lib") in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|libpthread*|libdl.so*|librt.so*|ld-linux*|libz.so*) ;;
    libcublas*|libcudart*|libnccl*) ;;
    # The first of a name wins: moe-run's libgomp.so.1 is LLVM's libomp.
    *) [ -e "$PACK/lib/$(basename "$lib")" ] || cp -L "$lib" "$PACK/lib/" ;;
  esac
done
# MODEL or MODEL.DTYPE (its floats converted: run_corpus.py --dtype).
for entry in $MODELS ort_moe.f16 ort_moe.bf16; do
  model=${entry%%.*}; dtype=${entry#"$model"}; dtype=${dtype#.}
  /usr/bin/python3 "$ROOT/test/e2e/run_corpus.py" --bin "$BUILD/bin" --corpus "$ROOT/test/corpus" \
    --work "$PACK/bundles/$entry" --target cuda --build-only --plans one --dtype "${dtype:-f32}" "$model"
done
/usr/bin/python3 "$ROOT/bench/gpu_bench.py" pack --build "$BUILD" "$PACK/bench/mixtral_block"
/usr/bin/python3 "$ROOT/bench/gpu_bench.py" pack --build "$BUILD" --dtype bf16 "$PACK/bench/mixtral_block_bf16"
du -sh "$PACK"
