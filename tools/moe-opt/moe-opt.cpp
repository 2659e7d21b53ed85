//===- moe-opt.cpp - the moe optimizer driver -----------------------------===//
//
// mlir-opt with the moe dialect, the moe passes and pipelines, and the
// upstream pieces they use.
//
//===----------------------------------------------------------------------===//

#include "moe/InitAll.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::moe::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::moe::registerAllDialects(registry);
  mlir::moe::registerAllExtensions(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "MoE-MLIR optimizer driver\n", registry));
}
