//===- moe-translate.cpp - model files to MLIR ----------------------------===//
//
//   moe-translate --import-onnx model.onnx [--input-shape x=2x4x16]
//   moe-translate --import-torchscript model.pt --input-shape x=2x4x16
//
//===----------------------------------------------------------------------===//

#include "moe/Import/Import.h"
#include "moe/InitAll.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

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

using Importer = OwningOpRef<ModuleOp> (*)(llvm::MemoryBufferRef,
                                           MLIRContext *,
                                           const moe::ImportOptions &);

static void registerImport(StringRef flag, StringRef description,
                           Importer importer) {
  TranslateToMLIRRegistration(
      flag, description,
      [importer](llvm::SourceMgr &sourceMgr,
                 MLIRContext *context) -> OwningOpRef<Operation *> {
        std::optional<moe::ImportOptions> options = importOptions(context);
        if (!options)
          return {};
        llvm::MemoryBufferRef buffer =
            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                ->getMemBufferRef();
        return importer(buffer, context, *options);
      },
      [](DialectRegistry &registry) {
        moe::registerAllDialects(registry);
      });
}

int main(int argc, char **argv) {
  registerImport("import-onnx", "Import an ONNX model", moe::importOnnx);
  registerImport("import-torchscript", "Import a TorchScript archive",
                 moe::importTorchScript);
  return failed(mlirTranslateMain(argc, argv, "MoE-MLIR model importer"));
}
