//===- EntryPoint.cpp - one C entry point for moe-run ---------------------===//
//
// The program's function, after buffer results became out-parameters and
// functions took bare pointers, takes one pointer per input and output.
// moe-run calls every model the same way, `moe_entry(void **args)`: this
// pass adds that wrapper, which loads args[i] and calls the function, and
// makes every other function the module defines internal.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEMITENTRYPASS
#include "passes/Passes.h.inc"

namespace {

struct MoEEmitEntryPass
    : public impl::MoEEmitEntryPassBase<MoEEmitEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto callee = module.lookupSymbol<LLVM::LLVMFuncOp>(function);
    if (!callee || callee.isExternal()) {
      module.emitError("moe-emit-entry: no function @") << function
                                                        << " to call";
      return signalPassFailure();
    }
    LLVM::LLVMFunctionType type = callee.getFunctionType();
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    if (!isa<LLVM::LLVMVoidType>(type.getReturnType()) ||
        !llvm::all_of(type.getParams(), [&](Type t) { return t == ptr; })) {
      callee.emitError("moe-emit-entry: @")
          << function << " must take only pointers and return nothing "
          << "(bare-pointer memrefs, results as out-parameters)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(entry)) {
      module.emitError("moe-emit-entry: @") << entry << " already exists";
      return signalPassFailure();
    }
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = callee.getLoc();
    auto wrapper = LLVM::LLVMFuncOp::create(
        b, loc, entry,
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()),
                                    {ptr}));
    Block *body = wrapper.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> args;
    for (unsigned i = 0, e = type.getNumParams(); i < e; ++i) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, body->getArgument(0),
                                       ArrayRef<LLVM::GEPArg>{(int32_t)i});
      args.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
    }
    LLVM::CallOp::create(b, loc, callee, args);
    LLVM::ReturnOp::create(b, loc, ValueRange());
    // The entry is the library's only function: the program's own (which
    // may be called `main`, or anything else the loading process defines)
    // must not bind to the process's symbols of the same name.
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      if (func != wrapper && !func.isExternal())
        func.setLinkage(LLVM::Linkage::Internal);
  }
};

} // namespace
} // namespace mlir::moe
