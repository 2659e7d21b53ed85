//===- ONNXBuilders.h - onnx ops that passes create -------------*- C++ -*-===//
//
// Passes that rewrite an imported program in place keep it in the onnx
// dialect, so that the later passes and the lowering see one form.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECTS_ONNX_IR_ONNXBUILDERS_H
#define MOE_DIALECTS_ONNX_IR_ONNXBUILDERS_H

#include "mlir/IR/Builders.h"

namespace mlir::moe::onnx {

/// Elements [begin, end) of `value` along `axis` (static bounds), as an
/// onnx.Slice; `value` itself when that is all of it.
Value createSlice(OpBuilder &b, Location loc, Value value, int64_t axis,
                  int64_t begin, int64_t end);

/// `parts` (ranked, static along `axis`) joined along `axis`, as an
/// onnx.Concat; the part itself when there is one.
Value createConcat(OpBuilder &b, Location loc, ArrayRef<Value> parts,
                   int64_t axis);

} // namespace mlir::moe::onnx

#endif // MOE_DIALECTS_ONNX_IR_ONNXBUILDERS_H
