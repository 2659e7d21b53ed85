//===- Lowering.h - shared pieces of convert-onnx-to-linalg -----*- C++ -*-===//
//
// Internal to passes/Conversion/ONNXToLinalg. The pass runs in two steps:
// static shapes first (StaticShapes.cpp folds shape computations on
// constants and infers the result shapes that ONNX left dynamic), then one
// conversion pattern per op, in a file per op family. The helpers that several
// files share are declared here: attributes, axes, broadcasting and reshapes
// (Common.cpp); constant operands and folding in passes/ONNXFolding.h
// (Constants.cpp). The linalg.generic builders
// come from the moe lowering (MoEToLinalg/Lowering.h).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_CONVERSION_ONNXTOLINALG_LOWERING_H
#define MOE_PASSES_CONVERSION_ONNXTOLINALG_LOWERING_H

#include "dialects/onnx/IR/ONNXDialect.h"
#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "passes/ONNXFolding.h"

#include <optional>
#include <string>

namespace mlir::moe::onnx_lowering {

using lowering::buildGeneric;
using lowering::filledTensor;
using lowering::indexConst;
using lowering::kNegInf;
using lowering::loopNest;
using lowering::loopsTo;
using lowering::mapElements;
using lowering::reduce;
using lowering::scalarConst;
using lowering::tensorType;

void populateElementwisePatterns(RewritePatternSet &patterns);
void populateLinearPatterns(RewritePatternSet &patterns);
void populateShapePatterns(RewritePatternSet &patterns);
void populateReducePatterns(RewritePatternSet &patterns);
/// `runtime`: gathers and scatters report an index out of range at run time
/// through the moert runtime instead of cf.assert (IndexChecks.cpp).
void populateIndexingPatterns(RewritePatternSet &patterns, bool runtime);
void populateEinsumPatterns(RewritePatternSet &patterns);

/// The element of an elementwise onnx op's result (of element type `type`)
/// from the elements `args` of its present operands, as its lowering builds
/// it (Elementwise.cpp); a failure for an op with no scalar form or
/// attributes the lowering refuses. moe-raise builds custom activation
/// bodies with it.
FailureOr<Value> buildElementwiseScalar(OpBuilder &b, Location loc,
                                        Operation *op, ValueRange args,
                                        Type type);

/// Fails the lowering of `op` for `reason`, which is also reported as an
/// error at the op: each op has exactly one pattern, so the conversion will
/// fail there, and the driver keeps match failures to its debug log.
LogicalResult cannotLower(RewriterBase &rewriter, Operation *op,
                          const Twine &reason);

//===----------------------------------------------------------------------===//
// Static shapes (StaticShapes.cpp, ShapeInference.cpp)
//===----------------------------------------------------------------------===//

/// Folds onnx ops whose operands are constants (the shape computations of
/// exported graphs) into arith.constant, and makes result types static where
/// operand shapes and constant operands determine them, in program order.
/// Then checks that every onnx op left has static operands and results;
/// where one does not, emits an error at the op that loses the static shape
/// and fails.
/// With `keepWeights`, an op that reads a named weight (a float resource, a
/// parameter in training) is not folded, so that the weight stays one.
LogicalResult makeShapesStatic(Operation *root, bool keepWeights = false);

/// The result shapes of `op` from its operand shapes and constant operands.
/// Fails with the reason in `why` where they are not determined statically.
LogicalResult inferShapes(Operation *op, SmallVectorImpl<Shape> &shapes,
                          std::string &why);

//===----------------------------------------------------------------------===//
// Operands and attributes (Common.cpp)
//===----------------------------------------------------------------------===//

/// Whether `value` is absent: the `none` of a missing optional input.
bool isNone(Value value);
/// Operand `index` of `op`, or null where it is missing or `none`.
Value optionalOperand(Operation *op, unsigned index);
/// The integer attribute `name` of `op`, or `otherwise`.
int64_t intAttr(Operation *op, StringRef name, int64_t otherwise);
/// The float attribute `name` of `op`, or `otherwise`.
double floatAttr(Operation *op, StringRef name, double otherwise);
/// The integer list attribute `name` of `op`, if present.
std::optional<Shape> intsAttr(Operation *op, StringRef name);
/// `axis` in `[0, rank)` from ONNX's `[-rank, rank)`.
int64_t normalizeAxis(int64_t axis, int64_t rank);
/// The product of `dims`.
int64_t product(ArrayRef<int64_t> dims);

/// The axes an op lists in its operand `operandIndex` (opset 13/18) or in
/// its attribute `axes` (older opsets); an empty list where neither is
/// given; none where the operand is not a constant.
std::optional<Shape> axesOf(Operation *op, unsigned operandIndex);

/// Per dimension of the sliced tensor: first index, step and size.
struct SliceParams {
  Shape starts, steps, sizes;
};
/// The ONNX Slice of a tensor of `shape` by the constant operands of
/// `op`; none where one is not a constant.
std::optional<SliceParams> sliceParams(Operation *op, ArrayRef<int64_t> shape);

//===----------------------------------------------------------------------===//
// Shapes, broadcasting, reshapes (Common.cpp)
//===----------------------------------------------------------------------===//

/// Whether `type` is a ranked tensor of static shape.
bool isStaticTensor(Type type);
/// The NumPy (multidirectional) broadcast of `shapes`; dynamic dims stay
/// dynamic where the others do not decide them. Fails on a mismatch.
FailureOr<Shape> broadcastShapes(ArrayRef<Shape> shapes);
/// The results of the map that reads an operand of `operandShape` broadcast
/// to `resultShape`, whose dims are loops `firstLoop...`: trailing dims
/// align, size-1 dims that the result widens read index 0.
SmallVector<AffineExpr> broadcastExprs(ArrayRef<int64_t> operandShape,
                                       ArrayRef<int64_t> resultShape,
                                       unsigned firstLoop, MLIRContext *ctx);
/// The map from the loops of `resultShape` to an operand of
/// `operandShape` broadcast to it.
AffineMap broadcastMap(ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape, MLIRContext *ctx);
/// The elementwise `body` of `inputs` broadcast to `type` (NumPy rules), as
/// one linalg.generic.
Value broadcastElements(OpBuilder &b, Location loc, RankedTensorType type,
                        ValueRange inputs, lowering::ElementBody body);
/// `value` with the static `type` of the same number of elements, through a
/// collapse to one dimension and an expansion.
Value reshapeTo(OpBuilder &b, Location loc, Value value, RankedTensorType type);
/// `value` of type `type`: itself, or a tensor.cast to it.
Value castToType(OpBuilder &b, Location loc, Value value, Type type);
/// An uninitialised tensor of the static `type`.
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type);

//===----------------------------------------------------------------------===//
// Scalars (Common.cpp)
//===----------------------------------------------------------------------===//

/// The scalar `value` converted to `type` with ONNX Cast semantics: floats
/// round, floats to integers truncate, to bool is `!= 0`, bool extends
/// unsigned, other integers sign-extend or truncate.
Value convertScalar(OpBuilder &b, Location loc, Value value, Type type);
/// An integer scalar as `index`.
Value toIndex(OpBuilder &b, Location loc, Value value);
/// `index` where it is non-negative, `index + size` otherwise (ONNX's
/// negative indices count from the end).
Value wrapIndex(OpBuilder &b, Location loc, Value index, int64_t size);
/// The lowest value of an element type: -inf or the signed minimum.
Value lowestValue(OpBuilder &b, Location loc, Type type);
/// `lhs + rhs`, `lhs * rhs` for float or integer scalars.
Value addScalars(OpBuilder &b, Location loc, Value lhs, Value rhs);
Value mulScalars(OpBuilder &b, Location loc, Value lhs, Value rhs);
/// `lhs > rhs` (float: ordered), or `>=` where `orEqual`.
Value greaterThan(OpBuilder &b, Location loc, Value lhs, Value rhs,
                  bool orEqual = false);

//===----------------------------------------------------------------------===//
// Index checks (IndexChecks.cpp)
//===----------------------------------------------------------------------===//

/// A closed range `[min, max]` of integers.
struct IntRange {
  int64_t min, max;
};

/// A range that every element of the integer tensor `value` provably lies
/// in, from the ops that compute it; none where they do not bound it. Knows:
/// constants (their elements); TopK's indices and ArgMax over a dim of size
/// n ([0, n-1]); Range with constant start and delta (its first and last
/// element); moe.router's ids over E experts ([-1, E-1]); ConstantOfShape;
/// and through the ops that only move or pick elements (Reshape, Squeeze,
/// Unsqueeze, Flatten, Identity, Transpose, Expand, Tile, Slice, the data
/// of Gather, GatherElements and GatherND, tensor.cast), take the hull of
/// their inputs (Concat, Where, Min, Max), clamp (Clip) or compute from
/// bounded operands (Cast between integers, Add, Sub, Mul, Neg, Mod by a
/// constant). Function arguments and other values are not bounded.
std::optional<IntRange> provenRange(Value value);

/// Where an op reads or writes at positions from an index tensor: the
/// operand that holds the indices, and the dims they select in: every
/// element in `dims[0]` (Gather, GatherElements, ScatterElements), or,
/// where `lastDimSelects`, the element at position c of the last dim in
/// `dims[c]` (GatherND, ScatterND). `sizes` are the dims' sizes.
struct IndexUse {
  Value indices;
  SmallVector<int64_t> dims, sizes;
  bool lastDimSelects = false;
};
/// `op`'s use of an index tensor, where it has one and static shapes.
std::optional<IndexUse> getIndexUse(Operation *op);

/// Emits an error at every op under `root` whose constant indices leave
/// ONNX's `[-s, s-1]`, naming the op, the index, the dim and its size; fails
/// where there is one.
LogicalResult checkConstantIndices(Operation *root);

/// Checks the indices of `op` before they are used, `lowered` being the
/// value that its lowering reads: constants here (an error at `op` and
/// failure where one is out of range), none where provenRange bounds them
/// within the dims, any other at run time (emitted at the rewriter's
/// insertion point): one min/max reduction over them and, where they leave
/// a dim, a call to `moert_index_out_of_range` (`runtime`) or a failing
/// cf.assert.
LogicalResult checkIndices(RewriterBase &rewriter, Operation *op, Value lowered,
                           bool runtime);

//===----------------------------------------------------------------------===//
// Convolutions (Linear.cpp)
//===----------------------------------------------------------------------===//

/// The attributes of a 1-D onnx.Conv (input [N, C, L], weight [M, C/group,
/// K]).
struct Conv1DParams {
  int64_t group, stride, dilation, padBegin, padEnd;
};
/// `op`'s parameters; fails with the reason in `why` for what the lowering
/// does not support (2-D and higher, auto_pad SAME_*).
FailureOr<Conv1DParams> conv1DParams(Operation *op, std::string &why);

//===----------------------------------------------------------------------===//
// Einsum equations (Einsum.cpp)
//===----------------------------------------------------------------------===//

/// A parsed Einsum equation for operands of known ranks: one loop per
/// letter (and per ellipsis dim), the loops each operand and the output
/// read, and the loop sizes.
struct EinsumSpec {
  unsigned numLoops = 0;
  SmallVector<SmallVector<AffineExpr>> operandExprs;
  SmallVector<unsigned> outputLoops;
  Shape loopSizes;
};
/// Parses `equation` for operands of `shapes`; fails with the reason in
/// `why`.
FailureOr<EinsumSpec> parseEinsum(StringRef equation, ArrayRef<Shape> shapes,
                                  MLIRContext *ctx, std::string &why);

} // namespace mlir::moe::onnx_lowering

#endif // MOE_PASSES_CONVERSION_ONNXTOLINALG_LOWERING_H
