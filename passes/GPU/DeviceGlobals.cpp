//===- DeviceGlobals.cpp - Globals that GPU kernels can read ---------------===//
//
// A model's weights and constants are globals of its shared library: host
// memory, which GPU kernels and cuBLAS cannot read. In code compiled for
// CUDA, every address of a global that host code takes becomes a runtime
// call that returns a copy made on first use (after moe-run has loaded the
// weights into the globals) and kept for the process: device memory
// (moert_cuda_device_global) for the globals that moe-gpu-device-memory
// found no host code reading, managed memory (moert_cuda_global) for the
// others. The rewrite runs on the LLVM dialect, where a global's size is
// known and every memref.get_global has become one llvm.mlir.addressof.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEDEVICEGLOBALSPASS
#include "passes/Passes.h.inc"

namespace {

/// The runtime function `name(const void *host, int64_t bytes) -> void *`.
LLVM::LLVMFuncOp copyFunction(ModuleOp module, StringRef name) {
  if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return existing;
  MLIRContext *context = module.getContext();
  auto pointer = LLVM::LLVMPointerType::get(context);
  auto type = LLVM::LLVMFunctionType::get(
      pointer, {pointer, IntegerType::get(context, 64)});
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
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
    llvm::SmallDenseSet<StringAttr> deviceOnly;
    if (auto listed = module->getAttrOfType<ArrayAttr>(kDeviceGlobalsAttrName))
      for (auto name : listed.getAsRange<FlatSymbolRefAttr>())
        deviceOnly.insert(name.getAttr());
    module->removeAttr(kDeviceGlobalsAttrName);
    DataLayout layout(module);
    for (auto [address, global] : addresses) {
      LLVM::LLVMFuncOp copy = copyFunction(
          module, deviceOnly.contains(global.getSymNameAttr())
                      ? "moert_cuda_device_global"
                      : "moert_cuda_global");
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
