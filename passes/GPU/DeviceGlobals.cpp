//===- DeviceGlobals.cpp - Globals that GPU kernels can read ---------------===//
//
// A model's weights and constants are globals of its shared library: host
// memory, which GPU kernels and cuBLAS cannot read. In code compiled for
// CUDA, every address of a global that host code takes becomes
// moert_cuda_global(address, bytes): a managed copy made on first use (after
// moe-run has loaded the weights into the globals) and kept for the process.
// The rewrite runs on the LLVM dialect, where a global's size is known and
// every memref.get_global has become one llvm.mlir.addressof.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEDEVICEGLOBALSPASS
#include "passes/Passes.h.inc"

namespace {

constexpr StringLiteral kCopyFunction = "moert_cuda_global";

LLVM::LLVMFuncOp copyFunction(ModuleOp module) {
  if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(kCopyFunction))
    return existing;
  MLIRContext *context = module.getContext();
  auto pointer = LLVM::LLVMPointerType::get(context);
  auto type = LLVM::LLVMFunctionType::get(
      pointer, {pointer, IntegerType::get(context, 64)});
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), kCopyFunction, type);
}

struct MoEDeviceGlobalsPass
    : public impl::MoEDeviceGlobalsPassBase<MoEDeviceGlobalsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // Host code only: kernels live in nested gpu.modules.
    SmallVector<std::pair<LLVM::AddressOfOp, LLVM::GlobalOp>> addresses;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      func.walk([&](LLVM::AddressOfOp op) {
        if (auto global = symbols.lookup<LLVM::GlobalOp>(op.getGlobalName()))
          addresses.emplace_back(op, global);
      });
    if (addresses.empty())
      return;
    LLVM::LLVMFuncOp copy = copyFunction(module);
    DataLayout layout(module);
    for (auto [address, global] : addresses) {
      OpBuilder b(address->getContext());
      b.setInsertionPointAfter(address);
      Location loc = address.getLoc();
      auto bytes = LLVM::ConstantOp::create(
          b, loc, b.getI64Type(),
          static_cast<int64_t>(layout.getTypeSize(global.getType())));
      auto call = LLVM::CallOp::create(
          b, loc, copy, ValueRange{address.getResult(), bytes.getResult()});
      address.getResult().replaceAllUsesExcept(call.getResult(), call);
    }
  }
};

} // namespace
} // namespace mlir::moe
