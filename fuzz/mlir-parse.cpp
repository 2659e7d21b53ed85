//===- mlir-parse.cpp - Fuzz target: MLIR text ----------------------------===//
//
// Any text as an MLIR file (moe-opt, moe-compile model.mlir) with the
// dialects the tools register: parsed, verified, and printed back when it
// verifies. The moe and onnx dialects' custom syntax, attributes and
// verifiers are the code under test; MLIR's own parser (Debian's libMLIR)
// is not instrumented. Text nested deeper than the tools accept is
// refused first, as they refuse it.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "moe/InitAll.h"
#include "moe/Support/Input.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    moe::registerAllDialects(r);
    return r;
  }();
  std::unique_ptr<MLIRContext> context = moe_fuzz::makeContext(registry);
  // Parse and verify apart, as the tools do (--verify-diagnostics aside).
  ParserConfig config(context.get(), /*verifyAfterParse=*/false);
  std::string text(reinterpret_cast<const char *>(data), size);
  // The tools refuse deeper nesting before parsing (the parser recurses).
  if (llvm::Error error = moe::checkMlirNesting(text)) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, config, "fuzz.mlir");
  if (!module || failed(verify(*module)))
    return 0;
  std::string printed;
  llvm::raw_string_ostream os(printed);
  module->print(os);
  module->print(os, OpPrintingFlags().printGenericOpForm());
  return 0;
}
