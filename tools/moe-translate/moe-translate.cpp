//===- moe-translate.cpp - model files to MLIR ----------------------------===//
//
//   moe-translate --import-onnx model.onnx [--input-shape x=2x4x16] [-o OUT]
//   moe-translate --import-torchscript model.pt --input-shape x=2x4x16
//
// The model file is read whole, with a size bound (protobuf's 2 GiB), so
// that a device or endless stream is refused rather than read forever.
//
//===----------------------------------------------------------------------===//

#include "moe/Import/Import.h"
#include "moe/InitAll.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "moe/Support/Input.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Static shape of a model input, NAME=D0xD1x... (repeat "
                   "for several inputs); replaces its dynamic dimensions"),
    llvm::cl::value_desc("NAME=DIMS"));

static llvm::cl::opt<moe::OrtMoELayout> ortMoELayout(
    "ort-moe-layout",
    llvm::cl::desc("Weight layout of com.microsoft.MoE nodes"),
    llvm::cl::values(
        clEnumValN(moe::OrtMoELayout::Detect, "detect",
                   "from the shapes; an ambiguous node is an error"),
        clEnumValN(moe::OrtMoELayout::Current, "current",
                   "[E, out, in] (ONNX Runtime 1.18 and later)"),
        clEnumValN(moe::OrtMoELayout::Legacy, "legacy",
                   "[E, in, out] (earlier ONNX Runtime)")),
    llvm::cl::init(moe::OrtMoELayout::Detect));

/// Builds the importer options from the command line; null on a bad value.
static std::optional<moe::ImportOptions> importOptions(MLIRContext *context) {
  moe::ImportOptions options;
  options.ortMoELayout = ortMoELayout;
  for (const std::string &spec : inputShapes) {
    std::string error;
    if (failed(moe::addInputShape(spec, options, error))) {
      emitError(UnknownLoc::get(context)) << error;
      return std::nullopt;
    }
  }
  return options;
}

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<model file>"),
                                            llvm::cl::init("-"));

static llvm::cl::opt<std::string> outputFile("o",
                                             llvm::cl::desc("Output file"),
                                             llvm::cl::value_desc("file"),
                                             llvm::cl::init("-"));

static llvm::cl::opt<bool> importOnnxFlag("import-onnx",
                                          llvm::cl::desc("Import an ONNX model"));

static llvm::cl::opt<bool>
    importTorchScriptFlag("import-torchscript",
                          llvm::cl::desc("Import a TorchScript archive"));

/// Imports the model, verifies and prints it; every failure has printed its
/// error by the time this returns failure.
static LogicalResult translate(llvm::SourceMgr &sourceMgr,
                               MLIRContext &context) {
  std::optional<moe::ImportOptions> options = importOptions(&context);
  if (!options)
    return failure();
  llvm::MemoryBufferRef buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getMemBufferRef();
  OwningOpRef<ModuleOp> module =
      importOnnxFlag ? moe::importOnnx(buffer, &context, *options)
                     : moe::importTorchScript(buffer, &context, *options);
  if (!module || failed(verify(*module)))
    return failure();
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFile, &error);
  if (!output)
    return emitError(UnknownLoc::get(&context)) << error;
  module->print(output->os());
  output->keep();
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  llvm::cl::ParseCommandLineOptions(argc, argv, "MoE-MLIR model importer\n");
  if (importOnnxFlag == importTorchScriptFlag) {
    llvm::errs() << "moe-translate: error: give one of --import-onnx and "
                    "--import-torchscript\n";
    return 1;
  }
  // Read with a bound: an endless device is refused, not read forever.
  auto input = moe::readInputFile(inputFile);
  if (!input) {
    llvm::errs() << "moe-translate: error: "
                 << llvm::toString(input.takeError()) << "\n";
    return 1;
  }
  DialectRegistry registry;
  moe::registerAllDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  return failed(translate(sourceMgr, context)) ? 1 : 0;
}
