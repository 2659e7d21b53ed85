//===- Evaluate.cpp - small modules run natively at compile time ----------===//
//
// The check function returns its tensors as memrefs; through its C
// interface (llvm.emit_c_interface) a function of several results writes a
// struct of their descriptors, each {allocated, aligned, offset, sizes[R],
// strides[R]}, all 8 bytes wide. The buffers are the program's and are
// left to it (a few kilobytes a check).
//
//===----------------------------------------------------------------------===//

#include "moe/Evaluate/Evaluate.h"
#include "Interpreter.h"

#include "moe/Pipelines.h"
#include "passes/Passes.h"
#include "passes/Raise/Validation.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/TargetSelect.h"

#include <cstring>
#include <mutex>

using namespace mlir;
using namespace mlir::moe;

/// Lowers `module` and runs its @moe_raise_check natively.
static FailureOr<std::vector<std::vector<float>>>
runNatively(ModuleOp module, std::string &error) {
  static std::once_flag targets;
  std::call_once(targets, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto func = module.lookupSymbol<func::FuncOp>("moe_raise_check");
  if (!func || func.getNumArguments() != 0) {
    error = "no @moe_raise_check without arguments";
    return failure();
  }
  func->setAttr("llvm.emit_c_interface", UnitAttr::get(module.getContext()));

  // The lowering's own diagnostics say why a check could not run; they are
  // kept from the user, to whom an unchecked block is a count.
  std::string diagnostics;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
    if (diagnostics.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostics = diag.str();
    return success();
  });
  // Static shapes first: the results' shapes, which the descriptors are
  // read by.
  PassManager shapes(module.getContext());
  shapes.addPass(createMoEStaticShapesPass());
  if (failed(shapes.run(module))) {
    error = "its shapes could not be made static: " + diagnostics;
    return failure();
  }
  SmallVector<RankedTensorType> resultTypes;
  for (Type type : func.getResultTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || !tensor.getElementType().isF32()) {
      error = "a result is not an f32 tensor of static shape";
      return failure();
    }
    resultTypes.push_back(tensor);
  }
  PassManager pm(module.getContext());
  LowerToLLVMOptions lowering;
  lowering.decompose = true;
  lowering.runtime = false;
  lowering.instrument = false;
  buildLowerToLLVMPipeline(pm, lowering);
  if (failed(pm.run(module))) {
    error = "its reference lowering failed: " + diagnostics;
    return failure();
  }
  ExecutionEngineOptions options;
  auto transformer = makeOptimizingTransformer(/*optLevel=*/2,
                                               /*sizeLevel=*/0, nullptr);
  options.transformer = transformer;
  llvm::Expected<std::unique_ptr<ExecutionEngine>> engine =
      ExecutionEngine::create(module, options);
  if (!engine) {
    error = "it could not be compiled: " + llvm::toString(engine.takeError());
    return failure();
  }
  // What the lowering calls outside the module: MLIR's C runner utilities
  // (a copy between buffers of other layouts).
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("memrefCopy")] = {
        llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
        llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  // One descriptor per result, side by side.
  size_t words = 0;
  for (RankedTensorType type : resultTypes)
    words += 3 + 2 * type.getRank();
  std::vector<int64_t> descriptors(words);
  void *out = descriptors.data();
  if (llvm::Error e = (*engine)->invoke("moe_raise_check", out)) {
    error = "it could not be run: " + llvm::toString(std::move(e));
    return failure();
  }
  std::vector<std::vector<float>> results;
  const int64_t *d = descriptors.data();
  for (RankedTensorType type : resultTypes) {
    int64_t rank = type.getRank();
    const float *aligned;
    std::memcpy(&aligned, &d[1], sizeof(aligned));
    int64_t offset = d[2];
    ArrayRef<int64_t> sizes(d + 3, rank), strides(d + 3 + rank, rank);
    if (sizes != type.getShape()) {
      error = "a result's shape is not its type's";
      return failure();
    }
    std::vector<float> values(type.getNumElements());
    SmallVector<int64_t> index(rank, 0);
    for (float &value : values) {
      int64_t at = offset;
      for (int64_t i = 0; i < rank; ++i)
        at += index[i] * strides[i];
      value = aligned[at];
      for (int64_t i = rank - 1; i >= 0; --i) {
        if (++index[i] < sizes[i])
          break;
        index[i] = 0;
      }
    }
    results.push_back(std::move(values));
    d += 3 + 2 * rank;
  }
  return results;
}


FailureOr<std::vector<std::vector<float>>>
moe::evaluateCheckModule(ModuleOp module, std::string &error) {
  OwningOpRef<ModuleOp> copy = module.clone();
  FailureOr<std::vector<std::vector<float>>> results =
      runNatively(module, error);
  if (succeeded(results))
    return results;
  // The recognised ops may not lower whole (an expert loop's NonZero has a
  // data-dependent size): they are interpreted, and the raised op alone
  // runs natively.
  auto func = copy->lookupSymbol<func::FuncOp>("moe_raise_check");
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ret.getNumOperands() != 2)
    return failure();
  std::string why;
  FailureOr<std::vector<float>> original =
      interpretValue(ret.getOperand(0), why);
  if (failed(original)) {
    error += "; " + why;
    return failure();
  }
  OpBuilder b(ret);
  func::ReturnOp::create(b, ret.getLoc(), ret.getOperand(1));
  Type raisedType = ret.getOperand(1).getType();
  ret.erase();
  func.setFunctionType(b.getFunctionType({}, {raisedType}));
  // The recognised ops are dead now; their data-dependent shapes must not
  // stop the raised op's lowering.
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && isPure(op))
      op->erase();
  FailureOr<std::vector<std::vector<float>>> raised =
      runNatively(*copy, why);
  if (failed(raised)) {
    error = why;
    return failure();
  }
  return std::vector<std::vector<float>>{std::move(*original),
                                         std::move((*raised)[0])};
}

void moe::registerRaiseEvaluator() {
  raise::setModuleEvaluator(evaluateCheckModule);
}
