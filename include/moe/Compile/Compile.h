//===- Compile.h - a model file to a runnable bundle ------------*- C++ -*-===//
//
// What moe-compile does, as a library: import (ONNX, TorchScript or MLIR),
// raise MoE blocks, attach the parallel plan, partition into the per-rank
// program, move the weights out into per-rank pieces, lower to LLVM and
// native code, and write the bundle that moe-run loads:
//
//   OUT/model.so     the program, entry `moe_entry(void **args)`
//   OUT/weights.bin  every rank's weight pieces
//   OUT/model.json   the manifest (runtime/README.md)
//
// `emit` stops after any stage and writes that stage's text or object.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_COMPILE_COMPILE_H
#define MOE_COMPILE_COMPILE_H

#include "moe/Import/Import.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace mlir::moe {

enum class EmitStage { Import, MoE, SPMD, LLVM, Object, Library };

struct CompileOptions {
  std::string modelPath;
  std::string outputPath;
  EmitStage emit = EmitStage::Library;
  ImportOptions import;
  /// The plan as moe-set-plan options ("ep=2 dp=2 smp-config=..."); the
  /// world size is their product unless given.
  std::string planOptions;
  unsigned optLevel = 3;
  /// NVIDIA GPUs (kernels through NVVM, the CUDA runtime) instead of the CPU.
  bool cuda = false;
  /// With cuda: GPU work in stream order (moe-gpu-stream-order); off, every
  /// kernel launch and free waits for the device.
  bool streamOrder = true;
  /// Compile the training step instead of the forward: moe-autodiff's
  /// options ("loss=causal-lm load-balancing=aux_loss ..."), and the
  /// optimizer moe-train runs it with (sgd or adamw).
  bool train = false;
  std::string autodiffOptions;
  /// With --train and pipeline stages: microbatches per step, in 1F1B order.
  int64_t microbatches = 1;
  std::string optimizer = "adamw";
  /// Experts on slots whose table the runtime owns (moe-place-experts), with
  /// this many redundant slots per EP rank; -1 for the compiled placement.
  int64_t redundantPerRank = -1;
  /// Over several token ranks: the dense layers between MoE blocks on each
  /// rank's tokens too (moe-sequence-parallel).
  bool sequenceParallel = true;
  /// Checks each raised MoE block against the ops it replaces on sample
  /// tokens (moe-raise{validate}); a block that differs is not raised.
  bool validateRaising = true;
  /// moe-raise{given-routing}: every router as the program's own ops.
  bool givenRouting = false;
  /// Attention under a causal mask in blocks of this many query rows, each
  /// over the keys it may see (moe-causal-attention); 0: over every key.
  int64_t causalBlockRows = 128;
};

/// Registers the dialects and translations that compileModel uses.
void registerCompileDialects(DialectRegistry &registry);

/// Runs the whole pipeline; diagnostics go to `context`'s handler.
LogicalResult compileModel(MLIRContext &context, const CompileOptions &options);

} // namespace mlir::moe

#endif // MOE_COMPILE_COMPILE_H
