//===- Lowering.h - shared pieces of convert-moe-to-linalg ------*- C++ -*-===//
//
// Internal to passes/Conversion/MoEToLinalg: one populate function per file
// and the small builders that several lowerings share.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_CONVERSION_MOETOLINALG_LOWERING_H
#define MOE_PASSES_CONVERSION_MOETOLINALG_LOWERING_H

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::moe::lowering {

void populateRouterPatterns(RewritePatternSet &patterns);
void populateDispatchPatterns(RewritePatternSet &patterns);
void populateExpertsPatterns(RewritePatternSet &patterns);
void populateLossPatterns(RewritePatternSet &patterns);

/// `index` constant.
Value indexConst(OpBuilder &b, Location loc, int64_t value);
/// Integer or float constant of a scalar type.
Value scalarConst(OpBuilder &b, Location loc, Type type, double value);
/// A tensor of `type` filled with `value` (tensor.empty + linalg.fill).
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value);
/// Row-wise scores of `logits [T, E]`: softmax over each row (max-subtracted)
/// or elementwise sigmoid.
Value scoreLogits(OpBuilder &b, Location loc, Value logits,
                  ScoringFunction scoring);
/// Sum over the last dimension of a `[T, E]` tensor: `[T]`.
Value rowSum(OpBuilder &b, Location loc, Value matrix);
/// Max over the last dimension of a `[T, E]` tensor: `[T]`.
Value rowMax(OpBuilder &b, Location loc, Value matrix);

} // namespace mlir::moe::lowering

#endif // MOE_PASSES_CONVERSION_MOETOLINALG_LOWERING_H
