#!/bin/bash
# Packs what a GPU machine without the compiler needs to run the CUDA
# backend: moe-run, moert-cuda-test and moert-cuda-bench, the libraries they load that a bare
# CUDA machine lacks (MPI, oneDNN, OpenMP; not glibc, libstdc++ or the CUDA
# libraries, which it has), every corpus model compiled with --target=cuda
# for one rank (ort_moe also in f16 and bf16), whole transformers CausalLMs
# of the corpus (OnnxExporter's Mixtral, Qwen3-MoE and DeepSeek-V3), the
# training steps of test/e2e/train (SGD and AdamW; the bf16 block with fp32
# masters beside its f32 twin), moe-train, and the Mixtral block of
# bench/gpu_bench.py in f32 and bf16 (its weights are rebuilt there).
# scripts/gpu-run.sh runs them there.
#
# The binaries go to bin/real/; bin/NAME is a wrapper that starts
# bin/real/NAME with the packed libraries and the cuBLAS and NCCL that
# gpu-run.sh found (MOE_GPU_CUDA_LIBS) on LD_LIBRARY_PATH, so that only
# these programs see them, not python and PyTorch.
#
#   ./scripts/gpu-pack.sh [DIR]      (default: .gpu, ignored by git, and
#                                     DIR.tar.xz, the same compressed)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MOE_BUILD_DIR:-$ROOT/build}
PACK=${1:-$ROOT/.gpu}
MODELS="mixtral mixtral_bf16 ort_moe ort_moe_legacy switch qwen2_moe deepseek_v3 decoder_layer"
# Whole CausalLMs (test/corpus/hf), and the models test/e2e/train trains.
WHOLE_MODELS="mixtral qwen3_moe deepseek_v3"
TRAIN_MODELS="mixtral qwen2_moe deepseek_v3 gpt_oss"
BINARIES="moe-run moe-train moert-cuda-test moert-cuda-bench"

# The pack must match the checkout: bring the tools up to date first
# (build.sh configures the build directory if it has none).
MOE_BUILD_DIR=$BUILD "$ROOT/scripts/build.sh" moe-compile $BINARIES || {
  echo "gpu-pack: building moe-compile $BINARIES in $BUILD failed; moert-cuda-* exist only where CMake found the CUDA toolkit and NCCL" >&2
  exit 1
}
for tool in moe-compile $BINARIES; do
  [ -x "$BUILD/bin/$tool" ] || { echo "gpu-pack: $BUILD/bin/$tool is missing; build with the CUDA toolkit and NCCL installed (./scripts/build.sh)" >&2; exit 1; }
done
rm -rf "$PACK"
mkdir -p "$PACK/bin/real" "$PACK/lib" "$PACK/bundles"
for tool in $BINARIES; do
  cp "$BUILD/bin/$tool" "$PACK/bin/real/"
  # exec: the wrapper's pid is the program's, so a timeout kills the program.
  cat > "$PACK/bin/$tool" <<WRAPPER
#!/bin/sh
# Written by scripts/gpu-pack.sh: runs real/$tool with the packed libraries
# and MOE_GPU_CUDA_LIBS (cuBLAS and NCCL, which scripts/gpu-run.sh finds)
# on LD_LIBRARY_PATH, for this program alone.
bin=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$bin/../lib\${MOE_GPU_CUDA_LIBS:+:\$MOE_GPU_CUDA_LIBS}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
  exec "\$bin/real/$tool" "\$@"
WRAPPER
  chmod +x "$PACK/bin/$tool"
done
for lib in $(for tool in $BINARIES; do ldd "$BUILD/bin/$tool"; done | awk '/=> \// {print $3}'); do
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
for model in $WHOLE_MODELS; do
  /usr/bin/python3 "$ROOT/test/e2e/run_corpus.py" --bin "$BUILD/bin" --corpus "$ROOT/test/corpus/hf" \
    --work "$PACK/models/$model.model.exporter" --target cuda --build-only --plans one \
    "$model.model.exporter"
done
/usr/bin/python3 "$ROOT/test/e2e/train/run_training.py" --bin "$BUILD/bin" --work "$PACK/train" \
  --target cuda --build-only $TRAIN_MODELS
# bf16 weights with fp32 masters, and the same block in f32 (bf16.test).
for dtype in bf16 f32; do
  model=mixtral; [ "$dtype" = f32 ] || model=mixtral_bf16
  "$BUILD/bin/moe-compile" "$ROOT/test/corpus/$model.onnx" --target=cuda --train --loss=mse \
    --optimizer=adamw '--params=.*' -o "$PACK/train-bf16/$dtype"
done
# Re-placement on the device (moert_cuda_migrate_slots, the table's device
# copy): Qwen2-MoE with a redundant slot, re-placed after every call by
# EPLB, which gives the slot to the hottest expert (a copy on the device).
mkdir -p "$PACK/placement"
"$BUILD/bin/moe-compile" "$ROOT/test/corpus/qwen2_moe.onnx" --target=cuda \
  --redundant-per-rank 1 -o "$PACK/placement/qwen2_moe"
/usr/bin/python3 "$ROOT/bench/gpu_bench.py" pack --build "$BUILD" "$PACK/bench/mixtral_block"
/usr/bin/python3 "$ROOT/bench/gpu_bench.py" pack --build "$BUILD" --dtype bf16 "$PACK/bench/mixtral_block_bf16"
# The pack and the checkout together are over the 64 MiB a device call
# carries; compressed, the pack goes with it (gpu-run.sh's callers unpack).
tar -C "$(dirname "$PACK")" -cf - "$(basename "$PACK")" | xz -T2 -6 > "$PACK.tar.xz"
du -sh "$PACK" "$PACK.tar.xz"
