//===- Evaluate.h - small modules run natively at compile time --*- C++ -*-===//
//
// What moe-raise's translation validation runs (passes/Raise/Validation.h):
// a module's `@moe_raise_check`, lowered by the reference lowering
// (moe-lower-to-llvm without the runtime) and compiled in process with
// MLIR's ExecutionEngine.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_EVALUATE_EVALUATE_H
#define MOE_EVALUATE_EVALUATE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::moe {

/// Lowers `module` (consumed: it is rewritten) and runs its
/// `@moe_raise_check`, which takes nothing and returns f32 tensors; their
/// elements in row-major order, or failure with why in `error`.
FailureOr<std::vector<std::vector<float>>>
evaluateCheckModule(ModuleOp module, std::string &error);

/// Makes evaluateCheckModule the evaluator of moe-raise's checks.
void registerRaiseEvaluator();

} // namespace mlir::moe

#endif // MOE_EVALUATE_EVALUATE_H
