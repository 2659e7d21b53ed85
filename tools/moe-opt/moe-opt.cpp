//===- moe-opt.cpp - the moe optimizer driver -----------------------------===//
//
// mlir-opt with the moe dialect, the moe passes and pipelines, and the
// upstream pieces they use. The input is read with a size bound (an endless
// device is refused, not read forever) and a nesting bound (the parser
// recurses), and a pass that fails without a message gets one.
//
//===----------------------------------------------------------------------===//

#include "moe/InitAll.h"
#include "moe/Support/Input.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

int main(int argc, char **argv) {
  moe::registerAllPasses();
  DialectRegistry registry;
  moe::registerAllDialects(registry);
  moe::registerAllExtensions(registry);
  auto [inputFile, outputFile] = registerAndParseCLIOptions(
      argc, argv, "MoE-MLIR optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return asMainReturnCode(
        MlirOptMain(argc, argv, inputFile, outputFile, registry));
  // Around the pipeline that the command line asks for.
  config.setPassPipelineSetupFn([cl = config](PassManager &pm) {
    moe::reportSilentPassFailures(pm);
    return cl.setupPassPipeline(pm);
  });

  auto input = moe::readInputFile(inputFile);
  if (!input) {
    llvm::errs() << "moe-opt: error: " << llvm::toString(input.takeError())
                 << "\n";
    return 1;
  }
  if (llvm::Error nesting = moe::checkMlirNesting((*input)->getBuffer())) {
    llvm::errs() << "moe-opt: error: " << inputFile << ": "
                 << llvm::toString(std::move(nesting)) << "\n";
    return 1;
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "moe-opt: error: " << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(*input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
