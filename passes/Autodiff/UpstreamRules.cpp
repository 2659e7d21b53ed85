//===- UpstreamRules.cpp - vector-Jacobian products of upstream ops -------===//

#include "passes/Autodiff/Rules.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::moe::autodiff {

/// The cotangents of upstream ops: elementwise arith on tensors (the shared
/// expert's sum after moe-decompose), and the reshapes and the per-rank
/// choice (a bias added on one rank of a tensor-parallel group) that
/// partitioning puts around a weight.
LogicalResult buildUpstreamVJP(Emitter &e, Operation *op,
                               ArrayRef<Value> dResults,
                               MutableArrayRef<Value> d) {
  Value g = dResults[0];
  if (isa<arith::AddFOp>(op)) {
    d[0] = d[1] = g;
  } else if (isa<arith::SubFOp>(op)) {
    d[0] = g;
    d[1] = e.neg(g);
  } else if (isa<arith::MulFOp>(op)) {
    d[0] = e.mul(g, op->getOperand(1));
    d[1] = e.mul(g, op->getOperand(0));
  } else if (isa<arith::NegFOp>(op)) {
    d[0] = e.neg(g);
  } else if (auto select = dyn_cast<arith::SelectOp>(op)) {
    Value zero = e.splat(tensorType(g), 0.0);
    OpBuilder &b = e.builder();
    d[1] = arith::SelectOp::create(b, e.getLoc(), select.getCondition(), g, zero);
    d[2] = arith::SelectOp::create(b, e.getLoc(), select.getCondition(), zero, g);
  } else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)) {
    d[0] = e.reshape(g, tensorType(op->getOperand(0)).getShape());
  } else {
    return op->emitError("moe-autodiff: no gradient rule for '")
           << op->getName() << "'";
  }
  return success();
}

} // namespace mlir::moe::autodiff
