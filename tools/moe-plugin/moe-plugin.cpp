//===- moe-plugin.cpp - the moe dialect and passes for mlir-opt -----------===//
//
// Loads into Debian's mlir-opt (which links the same libMLIR.so):
//   mlir-opt --load-dialect-plugin=MoEPlugin.so --load-pass-plugin=MoEPlugin.so
//
//===----------------------------------------------------------------------===//

#include "dialects/moe/IR/MoEDialect.h"
#include "passes/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "MoE", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<mlir::moe::MoEDialect>();
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "MoE", LLVM_VERSION_STRING,
          []() { mlir::moe::registerMoEPasses(); }};
}
