//===- Pipelines.h - named moe pass pipelines -------------------*- C++ -*-===//

#ifndef MOE_PIPELINES_H
#define MOE_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace moe {

struct LowerToLLVMOptions : public PassPipelineOptions<LowerToLLVMOptions> {
  PassOptions::Option<bool> decompose{
      *this, "decompose",
      llvm::cl::desc("Expand moe.layer before lowering"), llvm::cl::init(true)};
};

/// moe ops through their linalg reference lowering, bufferization and the
/// LLVM dialect: the CPU path that mlir-runner and the numeric tests run.
void buildLowerToLLVMPipeline(OpPassManager &pm,
                              const LowerToLLVMOptions &options);

/// Registers `moe-lower-to-llvm`.
void registerPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_PIPELINES_H
