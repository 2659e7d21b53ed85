//===- Lowering.h - shared pieces of convert-moe-to-linalg ------*- C++ -*-===//
//
// Internal to passes/: one populate function per file of
// passes/Conversion/MoEToLinalg and the builders that several lowerings
// share (defined in Builders.cpp; applyActivation in Experts.cpp and the
// activations in Activation.cpp, which convert-moe-to-runtime uses too).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_CONVERSION_MOETOLINALG_LOWERING_H
#define MOE_PASSES_CONVERSION_MOETOLINALG_LOWERING_H

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace mlir::moe::lowering {

void populateRouterPatterns(RewritePatternSet &patterns);
void populateDispatchPatterns(RewritePatternSet &patterns);
void populateExpertsPatterns(RewritePatternSet &patterns);
void populateLossPatterns(RewritePatternSet &patterns);
void populateExpertsGradPatterns(RewritePatternSet &patterns);
void populatePlacementPatterns(RewritePatternSet &patterns);

/// An FFN's activation ready to be built element by element
/// (Activation.cpp): a named kind, or a custom one's body.
struct ScalarActivation {
  ActivationAttr attr;
  func::FuncOp body; // custom only

  /// `attr` with its body looked up from `from`, the op being lowered
  /// (before any region is built: a region under construction is not yet
  /// in the module).
  static ScalarActivation resolve(Operation *from, ActivationAttr attr);
  ActivationKind kind() const { return attr.getKind(); }
  /// `act(x)` of the scalar x (not SwiGLU, which takes two halves).
  Value apply(OpBuilder &b, Location loc, Value x) const;
  /// `d act(x) / dx` of the scalar x (not SwiGLU).
  Value derivative(OpBuilder &b, Location loc, Value x) const;
};

/// `act(h1 [, h3]) [n, F]` for moe.experts and moe.shared_expert: the
/// activation of h1, gated by h3 when given, or the SwiGLU of the halves of
/// h1 that the layout names.
Value applyActivation(OpBuilder &b, Location loc, Value h1, Value h3,
                      const ScalarActivation &activation, int64_t width);

/// `x W^T + bias` for `x [n, in]`, `W [out, in]` and an optional `[out]`
/// bias (null for none): `[n, out]`.
Value linear(OpBuilder &b, Location loc, Value x, Value weight, Value bias);
/// Expert `expert`'s slice `[out, in]` (or `[out]`) of a stacked weight
/// `[E, out, in]` (or bias `[E, out]`); null for a null `stacked`.
Value expertSlice(OpBuilder &b, Location loc, Value stacked, Value expert);

/// Where group `group` of moe.experts' (or moe.experts_grad's) row buffer
/// lies, after the checks on its count that `op` (the op's name) reports:
/// dropless rows `[R, W]` hold the groups one after the other from row
/// `begin`; capacity rows `[G, C, W]` hold group g in block g. `zero` is
/// the loop's index 0.
struct GroupRows {
  Value count;
  /// The row after the group's last (dropless: the next group's `begin`).
  Value end;
  SmallVector<OpFoldResult> offsets, sizes, strides;

  /// The group's rows of `buffer` (of the row buffer's layout) as `[n, W]`.
  Value slice(OpBuilder &b, Location loc, Value buffer) const;
  /// `rows [n, W]` written into `buffer` at the group's place.
  Value insert(OpBuilder &b, Location loc, Value rows, Value buffer) const;
};
GroupRows groupRows(OpBuilder &b, Location loc, StringRef op, Value counts,
                    Value group, Value begin, Value zero,
                    RankedTensorType rowsType);

/// For moe.dispatch's `probs` policy, how many pairs routed to the same
/// expert outrank each pair of `ids [T, k]`, i32 `[T, k]`: those with a
/// larger weight, or an equal one earlier in (token, slot) order. A pair is
/// kept iff fewer than the capacity outrank it.
Value probsRanks(OpBuilder &b, Location loc, Value ids, Value weights);

/// The start of a max, and the mask that takes an entry out of an arg-max.
inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// Types, maps, constants
//===----------------------------------------------------------------------===//

/// The type of `value`, which the lowerings only see ranked.
RankedTensorType tensorType(Value value);
/// The map from `numLoops` loop dims to the loop dims `targets`.
AffineMap loopsTo(OpBuilder &b, unsigned numLoops, ArrayRef<unsigned> targets);
/// `index` constant.
Value indexConst(OpBuilder &b, Location loc, int64_t value);
/// Integer or float constant of a scalar type.
Value scalarConst(OpBuilder &b, Location loc, Type type, double value);
/// A tensor of `type` filled with `value` (tensor.empty + linalg.fill).
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value);

//===----------------------------------------------------------------------===//
// linalg.generic and scf.for builders
//===----------------------------------------------------------------------===//

/// Builds one result element of a linalg.generic from its block arguments.
using ElementBody = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// A linalg.generic that reads `inputs` through `inputMaps` and accumulates
/// into `inits` through `initMap`; the loop dims `initMap` drops are
/// reductions. `body` gets the input elements, then the accumulators, and
/// returns the new accumulators.
SmallVector<Value> buildGeneric(
    OpBuilder &b, Location loc, ValueRange inputs,
    ArrayRef<AffineMap> inputMaps, ValueRange inits, AffineMap initMap,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body);
/// `buildGeneric` with one accumulator: a tensor of `type` filled with
/// `init`, written through the loop dims `resultDims` (the other loops
/// reduce). `body` gets the input elements, then the accumulator.
Value reduce(OpBuilder &b, Location loc, ValueRange inputs,
             ArrayRef<AffineMap> inputMaps, RankedTensorType type, double init,
             ArrayRef<unsigned> resultDims, ElementBody body);
/// An all-parallel `buildGeneric` into `init` (a tensor.empty, possibly
/// dynamic): every element is `body` of the elements of `inputs`, read
/// through `inputMaps` (identities when empty).
Value mapElements(OpBuilder &b, Location loc, Value init, ValueRange inputs,
                  ArrayRef<AffineMap> inputMaps, ElementBody body);
/// The same into a new tensor of the static `type`.
Value mapElements(OpBuilder &b, Location loc, RankedTensorType type,
                  ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                  ElementBody body);
/// Nested scf.for loops over `[0, bound)` for every bound, carrying
/// `iterArgs`; `body` gets the induction variables and the carried values
/// and returns their updates.
SmallVector<Value>
loopNest(OpBuilder &b, Location loc, ArrayRef<int64_t> bounds,
         ValueRange iterArgs,
         function_ref<scf::ValueVector(OpBuilder &, Location, ValueRange,
                                       ValueRange)>
             body);

//===----------------------------------------------------------------------===//
// Scalar pieces of loop bodies
//===----------------------------------------------------------------------===//

/// `1 / (1 + exp(-x))`.
Value sigmoid(OpBuilder &b, Location loc, Value x);
/// `acc + 1` where the i1 `cond` holds, `acc` elsewhere (integer `acc`).
Value countIf(OpBuilder &b, Location loc, Value cond, Value acc);
/// The i32 value of linalg loop dim `dim`.
Value loopIndexI32(OpBuilder &b, Location loc, int64_t dim);

//===----------------------------------------------------------------------===//
// Computations on `[T, E]` logits
//===----------------------------------------------------------------------===//

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
