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
  PassOptions::Option<bool> runtime{
      *this, "runtime",
      llvm::cl::desc("Target the moert runtime (what moe-compile builds): "
                     "exchanges between ranks and f32 matmuls become runtime "
                     "calls, functions take bare pointers, results become "
                     "out-parameters and `moe_entry` wraps the program"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> instrument{
      *this, "instrument",
      llvm::cl::desc("Record per-layer statistics (with runtime)"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> entry{
      *this, "entry",
      llvm::cl::desc("The program's function, wrapped by moe_entry (with "
                     "runtime)"),
      llvm::cl::init("main_graph")};
};

/// moe ops through their linalg reference lowering, bufferization and the
/// LLVM dialect: the CPU path that mlir-runner and the numeric tests run,
/// and with `runtime`, the one that moe-compile builds native code from.
void buildLowerToLLVMPipeline(OpPassManager &pm,
                              const LowerToLLVMOptions &options);

struct LowerToGPUOptions : public PassPipelineOptions<LowerToGPUOptions> {
  PassOptions::ListOption<std::string> chips{
      *this, "chips",
      llvm::cl::desc("GPU architectures to build kernels for (default "
                     "sm_80,sm_90)")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features of the kernels"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("The CUDA toolkit whose ptxas and fatbinary build the "
                     "kernels"),
      llvm::cl::init("/usr/local/cuda")};
  PassOptions::Option<int64_t> blockSize{
      *this, "block-size",
      llvm::cl::desc("Threads per block of the generated kernels"),
      llvm::cl::init(256)};
  PassOptions::Option<bool> instrument{
      *this, "instrument", llvm::cl::desc("Record per-layer statistics"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> streamOrder{
      *this, "stream-order",
      llvm::cl::desc("Launch kernels and free buffers without waiting for "
                     "the GPU; the host waits only where it touches memory "
                     "(moe-gpu-stream-order). Off: every launch waits"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> entry{
      *this, "entry", llvm::cl::desc("The program's function"),
      llvm::cl::init("main_graph")};
};

/// moe ops through linalg and bufferization; parallel loops become GPU
/// kernels (NVVM, a fatbin for each chip), buffers live on the device, or
/// host-shared where host code touches them, the host side becomes the LLVM
/// dialect with moe_entry: the --target=cuda path.
void buildLowerToGPUPipeline(OpPassManager &pm,
                             const LowerToGPUOptions &options);

/// Registers `moe-lower-to-llvm` and `moe-lower-to-gpu`.
void registerPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_PIPELINES_H
