//===- Builders.cpp - builders shared by the moe-to-linalg lowerings ------===//
//
// The lowerings build everything out of a few shapes: constants and filled
// tensors, linalg.generic maps and reductions, and scf.for nests. They live
// here once; Lowering.h documents them.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"

namespace mlir::moe::lowering {

//===----------------------------------------------------------------------===//
// Types, maps, constants
//===----------------------------------------------------------------------===//

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

AffineMap loopsTo(OpBuilder &b, unsigned numLoops, ArrayRef<unsigned> targets) {
  return AffineMap::getMultiDimMapWithTargets(numLoops, targets,
                                              b.getContext());
}

Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value scalarConst(OpBuilder &b, Location loc, Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, type,
                                     b.getFloatAttr(floatType, value));
  return arith::ConstantOp::create(
      b, loc, type, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value) {
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value scalar = scalarConst(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

//===----------------------------------------------------------------------===//
// linalg.generic and scf.for builders
//===----------------------------------------------------------------------===//

SmallVector<Value> buildGeneric(
    OpBuilder &b, Location loc, ValueRange inputs,
    ArrayRef<AffineMap> inputMaps, ValueRange inits, AffineMap initMap,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<utils::IteratorType> iterators(initMap.getNumDims(),
                                             utils::IteratorType::reduction);
  for (AffineExpr expr : initMap.getResults())
    iterators[cast<AffineDimExpr>(expr).getPosition()] =
        utils::IteratorType::parallel;
  SmallVector<AffineMap> maps(inputMaps);
  maps.append(inits.size(), initMap);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(inits), inputs, inits, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return llvm::to_vector_of<Value>(generic.getResults());
}

Value reduce(OpBuilder &b, Location loc, ValueRange inputs,
             ArrayRef<AffineMap> inputMaps, RankedTensorType type, double init,
             ArrayRef<unsigned> resultDims, ElementBody body) {
  AffineMap resultMap = loopsTo(b, inputMaps.front().getNumDims(), resultDims);
  return buildGeneric(b, loc, inputs, inputMaps,
                      filledTensor(b, loc, type, init), resultMap,
                      [&](OpBuilder &nb, Location nloc,
                          ValueRange args) -> SmallVector<Value> {
                        return {body(nb, nloc, args)};
                      })
      .front();
}

Value mapElements(OpBuilder &b, Location loc, Value init, ValueRange inputs,
                  ArrayRef<AffineMap> inputMaps, ElementBody body) {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(
      tensorType(init).getRank(), b.getContext());
  SmallVector<AffineMap> maps(inputMaps);
  if (maps.empty())
    maps.assign(inputs.size(), identity);
  return buildGeneric(b, loc, inputs, maps, init, identity,
                      [&](OpBuilder &nb, Location nloc,
                          ValueRange args) -> SmallVector<Value> {
                        // Leave out the (unread) output element.
                        return {body(nb, nloc, args.drop_back())};
                      })
      .front();
}

Value mapElements(OpBuilder &b, Location loc, RankedTensorType type,
                  ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                  ElementBody body) {
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  return mapElements(b, loc, init, inputs, inputMaps, body);
}

SmallVector<Value>
loopNest(OpBuilder &b, Location loc, ArrayRef<int64_t> bounds,
         ValueRange iterArgs,
         function_ref<scf::ValueVector(OpBuilder &, Location, ValueRange,
                                       ValueRange)>
             body) {
  // One 0 and one 1 serve every loop.
  SmallVector<Value> lbs(bounds.size(), indexConst(b, loc, 0));
  SmallVector<Value> steps(bounds.size(), indexConst(b, loc, 1));
  SmallVector<Value> ubs;
  for (int64_t bound : bounds)
    ubs.push_back(indexConst(b, loc, bound));
  return scf::buildLoopNest(b, loc, lbs, ubs, steps, iterArgs, body).results;
}

//===----------------------------------------------------------------------===//
// Scalar pieces of loop bodies
//===----------------------------------------------------------------------===//

Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Value one = scalarConst(b, loc, x.getType(), 1.0);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one,
                               arith::AddFOp::create(b, loc, one, e));
}

Value countIf(OpBuilder &b, Location loc, Value cond, Value acc) {
  Value one = arith::ExtUIOp::create(b, loc, acc.getType(), cond);
  return arith::AddIOp::create(b, loc, acc, one);
}

Value loopIndexI32(OpBuilder &b, Location loc, int64_t dim) {
  Value index = linalg::IndexOp::create(b, loc, dim);
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

//===----------------------------------------------------------------------===//
// Computations on `[T, E]` logits
//===----------------------------------------------------------------------===//

/// Reduces `matrix [T, E]` over its columns into `[T]` with `combine`, from
/// `init`.
static Value rowReduce(OpBuilder &b, Location loc, Value matrix, double init,
                       ElementBody combine) {
  RankedTensorType type = tensorType(matrix);
  auto rowType =
      RankedTensorType::get({type.getDimSize(0)}, type.getElementType());
  return reduce(b, loc, matrix, loopsTo(b, 2, {0, 1}), rowType, init, {0},
                combine);
}

Value rowSum(OpBuilder &b, Location loc, Value matrix) {
  return rowReduce(b, loc, matrix, 0.0,
                   [](OpBuilder &nb, Location nloc, ValueRange args) {
                     return arith::AddFOp::create(nb, nloc, args[0], args[1]);
                   });
}

Value rowMax(OpBuilder &b, Location loc, Value matrix) {
  return rowReduce(b, loc, matrix, kNegInf,
                   [](OpBuilder &nb, Location nloc, ValueRange args) {
                     return arith::MaximumFOp::create(nb, nloc, args[0],
                                                      args[1]);
                   });
}

Value scoreLogits(OpBuilder &b, Location loc, Value logits,
                  ScoringFunction scoring) {
  RankedTensorType type = tensorType(logits);
  if (scoring == ScoringFunction::Sigmoid)
    return mapElements(b, loc, type, logits, {},
                       [](OpBuilder &nb, Location nloc, ValueRange x) {
                         return sigmoid(nb, nloc, x[0]);
                       });
  // Softmax; subtracting the row max keeps exp from overflowing.
  AffineMap element = loopsTo(b, 2, {0, 1}), row = loopsTo(b, 2, {0});
  Value max = rowMax(b, loc, logits);
  Value exps =
      mapElements(b, loc, type, {logits, max}, {element, row},
                  [](OpBuilder &nb, Location nloc, ValueRange args) {
                    Value d = arith::SubFOp::create(nb, nloc, args[0], args[1]);
                    return math::ExpOp::create(nb, nloc, d);
                  });
  Value sum = rowSum(b, loc, exps);
  return mapElements(b, loc, type, {exps, sum}, {element, row},
                     [](OpBuilder &nb, Location nloc, ValueRange args) {
                       return arith::DivFOp::create(nb, nloc, args[0], args[1]);
                     });
}

} // namespace mlir::moe::lowering
