//===- Interpreter.h - onnx ops evaluated one at a time ---------*- C++ -*-===//
//
// Internal to lib/Evaluate. What an exported MoE block computes where the
// compiler's lowering cannot take it whole: the per-expert loops of the
// legacy exporter and TorchScript select each expert's tokens with
// NonZero, whose size depends on the routing. An interpreter has no such
// limit: each onnx op is evaluated on the values of its operands, in double
// precision, each float result rounded to f32 as the op would round it.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_EVALUATE_INTERPRETER_H
#define MOE_LIB_EVALUATE_INTERPRETER_H

#include "mlir/IR/Value.h"

#include <string>
#include <vector>

namespace mlir::moe {

/// The elements of `root` (row-major), computed from the constants it is
/// built from through onnx ops; failure with why in `error` (an op the
/// interpreter does not evaluate, a constant too large to read).
FailureOr<std::vector<float>> interpretValue(Value root, std::string &error);

} // namespace mlir::moe

#endif // MOE_LIB_EVALUATE_INTERPRETER_H
