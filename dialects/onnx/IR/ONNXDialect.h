//===- ONNXDialect.h - the onnx import dialect ------------------*- C++ -*-===//

#ifndef MOE_DIALECTS_ONNX_IR_ONNXDIALECT_H
#define MOE_DIALECTS_ONNX_IR_ONNXDIALECT_H

#include "dialects/Common/BufferBounds.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/onnx/IR/ONNXDialect.h.inc"

namespace mlir::moe::onnx {
/// Checks an op's input and output counts against its ONNX arity (a bound
/// of -1 is unbounded).
LogicalResult verifyArity(Operation *op, int minInputs, int maxInputs,
                          int minOutputs, int maxOutputs);
/// A Reshape whose data and result are static has one element count.
LogicalResult verifyReshape(Operation *op);
} // namespace mlir::moe::onnx

namespace mlir::moe::onnx::OpTrait {
/// An elementwise op with ONNX broadcasting (ONNX_Elementwise in
/// ONNXOps.td): no verification of its own, the operand shapes broadcast
/// only where ONNX shape inference made them so.
template <typename ConcreteType>
class Elementwise
    : public ::mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};
} // namespace mlir::moe::onnx::OpTrait

namespace mlir::moe::onnx {
/// Whether `op` is an onnx op of the ONNX_Elementwise trait.
inline bool isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>();
}
} // namespace mlir::moe::onnx

#define GET_OP_CLASSES
#include "dialects/onnx/IR/ONNXOps.h.inc"

#endif // MOE_DIALECTS_ONNX_IR_ONNXDIALECT_H
