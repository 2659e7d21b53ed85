//===- ONNXDialect.cpp - the onnx import dialect --------------------------===//

#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::moe::onnx;

#include "dialects/onnx/IR/ONNXDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/onnx/IR/ONNXOps.cpp.inc"
      >();
}

static LogicalResult checkCount(Operation *op, StringRef what, int count,
                                int min, int max) {
  if (count >= min && (max < 0 || count <= max))
    return success();
  InFlightDiagnostic diag = op->emitOpError() << "expects ";
  if (max < 0)
    diag << "at least " << min;
  else if (min == max)
    diag << min;
  else
    diag << min << " to " << max;
  return diag << " " << what << ", got " << count;
}

LogicalResult mlir::moe::onnx::verifyArity(Operation *op, int minInputs,
                                           int maxInputs, int minOutputs,
                                           int maxOutputs) {
  if (failed(checkCount(op, "inputs", op->getNumOperands(), minInputs,
                        maxInputs)) ||
      failed(checkCount(op, "outputs", op->getNumResults(), minOutputs,
                        maxOutputs)))
    return failure();
  for (Type type : op->getResultTypes())
    if (!isa<RankedTensorType>(type))
      return op->emitOpError() << "outputs must be ranked tensors, got "
                               << type;
  return success();
}

LogicalResult mlir::moe::onnx::verifyReshape(Operation *op) {
  auto data = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (data && data.hasStaticShape() && result.hasStaticShape() &&
      data.getNumElements() != result.getNumElements())
    return op->emitOpError()
           << "reshapes " << data.getNumElements() << " elements (" << data
           << ") into " << result.getNumElements() << " (" << result << ")";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/onnx/IR/ONNXOps.cpp.inc"
