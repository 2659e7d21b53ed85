//===- StaticShapes.cpp - static shapes for the onnx-to-linalg lowering ---===//
//
// ONNX shape inference leaves a result dynamic wherever a shape is computed
// in the graph (Expand to Shape(x) * 1, OneHot to a capacity, ...). Once
// those computations are folded to constants the shapes follow: in program
// order, each op is folded (Constants.cpp) or its result types are refined
// (ShapeInference.cpp); then the op where a shape stops being static
// (NonZero, a shape operand that is not a constant, a dynamic function
// argument) is reported.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

//===----------------------------------------------------------------------===//
// Folding and refining in place
//===----------------------------------------------------------------------===//

/// Lets the users of `old` see `value`, whose type may be more static: onnx
/// users take it as it is, others (func.return, moe ops) through a
/// tensor.cast back to the old type. `old` may be `value` itself, retyped.
static void useRefined(OpBuilder &b, Value old, Type oldType, Value value) {
  Value cast;
  for (OpOperand &use : llvm::make_early_inc_range(old.getUses())) {
    Operation *user = use.getOwner();
    if (cast && user == cast.getDefiningOp())
      continue;
    if (isa<onnx::ONNXDialect>(user->getDialect()) ||
        oldType == value.getType()) {
      use.set(value);
      continue;
    }
    if (!cast) {
      b.setInsertionPointAfterValue(value);
      cast = tensor::CastOp::create(b, value.getLoc(), oldType, value);
    }
    use.set(cast);
  }
}

/// The type that `inferred` makes of `declared`, or null where the two
/// disagree on a static dim.
static RankedTensorType refine(RankedTensorType declared,
                               ArrayRef<int64_t> inferred) {
  if (declared.getRank() != static_cast<int64_t>(inferred.size()))
    return nullptr;
  Shape shape(declared.getShape());
  for (auto [dim, known] : llvm::zip(shape, inferred)) {
    if (ShapedType::isDynamic(known))
      continue;
    if (!ShapedType::isDynamic(dim) && dim != known)
      return nullptr;
    dim = known;
  }
  return declared.clone(shape);
}

/// An arith.constant for onnx.Constant's value attribute, or null where it
/// has none of the forms that the lowering reads.
static Value materializeConstantOp(OpBuilder &b, Operation *op) {
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type)
    return nullptr;
  Attribute value = op->getAttr("value");
  if (isa_and_nonnull<ElementsAttr>(value))
    return arith::ConstantOp::create(b, op->getLoc(), cast<TypedAttr>(value));
  ConstTensor constant{Shape(type.getShape()), type.getElementType(), {}, {}};
  if (op->hasAttr("value_float")) {
    constant.floats.push_back(floatAttr(op, "value_float", 0));
  } else if (op->hasAttr("value_int")) {
    constant.ints.push_back(intAttr(op, "value_int", 0));
  } else if (std::optional<Shape> ints = intsAttr(op, "value_ints")) {
    constant.ints = *ints;
  } else if (auto floats =
                 op->getAttrOfType<DenseF32ArrayAttr>("value_floats")) {
    for (float f : floats.asArrayRef())
      constant.floats.push_back(f);
  } else {
    return nullptr;
  }
  if (!type.hasStaticShape() ||
      constant.size() !=
          static_cast<int64_t>(constant.ints.size() + constant.floats.size()))
    return nullptr;
  return arith::ConstantOp::create(b, op->getLoc(), toAttr(constant, type));
}

/// The constant that `op` folds to, or null.
static Value foldToConstant(OpBuilder &b, Operation *op) {
  b.setInsertionPoint(op);
  if (isa<onnx::ConstantOp>(op))
    return materializeConstantOp(b, op);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  // A splat of any size: nothing is materialised but the value.
  if (isa<onnx::ConstantOfShapeOp>(op)) {
    std::optional<Shape> shape = getConstantInts(op->getOperand(0));
    if (!shape)
      return nullptr;
    RankedTensorType splatType = refine(type, *shape);
    if (!splatType)
      return nullptr;
    TypedAttr element = b.getZeroAttr(type.getElementType());
    if (auto value = op->getAttrOfType<DenseElementsAttr>("value"))
      element = value.getSplatValue<TypedAttr>();
    return arith::ConstantOp::create(
        b, op->getLoc(), DenseElementsAttr::get(splatType, element));
  }
  std::optional<ConstTensor> folded = foldOp(op);
  if (!folded)
    return nullptr;
  RankedTensorType foldedType = refine(type, folded->shape);
  if (!foldedType)
    return nullptr;
  return arith::ConstantOp::create(b, op->getLoc(),
                                   toAttr(*folded, foldedType));
}

/// Emits why `op` has no static shape where it is where shapes stop being
/// static: its operands are static (or come from outside the onnx ops).
static LogicalResult
checkStatic(Operation *op, const DenseMap<Operation *, std::string> &why) {
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (isNone(operand) || isStaticTensor(operand.getType()))
      continue;
    Operation *producer = operand.getDefiningOp();
    if (producer && isa<onnx::ONNXDialect>(producer->getDialect()))
      continue; // Reported at the producer.
    return op->emitError()
           << op->getName() << " operand #" << i << " has the type "
           << operand.getType()
           << "; the lowering needs static shapes (give the function "
              "static argument types)";
  }
  bool operandsStatic = llvm::all_of(op->getOperands(), [](Value operand) {
    return isNone(operand) || isStaticTensor(operand.getType());
  });
  if (!operandsStatic)
    return success();
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    if (isStaticTensor(result.getType()))
      continue;
    InFlightDiagnostic diag = op->emitError() << op->getName() << " ";
    auto reason = why.find(op);
    if (isa<onnx::NonZeroOp>(op) || reason == why.end())
      return diag << (reason == why.end() ? "has a dynamic result shape"
                                          : reason->second);
    return diag << "result #" << i << " has the dynamic type "
                << result.getType() << ": " << reason->second;
  }
  return success();
}

/// Whether `op` reads a float constant kept by name (a weight).
static bool readsNamedWeight(Operation *op) {
  return llvm::any_of(op->getOperands(), [](Value operand) {
    auto constant = operand.getDefiningOp<arith::ConstantOp>();
    auto resource =
        constant ? dyn_cast<DenseResourceElementsAttr>(constant.getValue())
                 : nullptr;
    return resource && isa<FloatType>(resource.getElementType());
  });
}

LogicalResult makeShapesStatic(Operation *root, bool keepWeights) {
  SmallVector<Operation *> ops;
  root->walk([&](Operation *op) {
    if (isa<onnx::ONNXDialect>(op->getDialect()) && !isa<onnx::NoneOp>(op))
      ops.push_back(op);
  });
  OpBuilder b(root->getContext());
  DenseMap<Operation *, std::string> why;
  SmallVector<Operation *> remaining;
  for (Operation *op : ops) {
    if (op->getNumResults() == 1 && !(keepWeights && readsNamedWeight(op))) {
      if (Value constant = foldToConstant(b, op)) {
        useRefined(b, op->getResult(0), op->getResult(0).getType(), constant);
        op->erase();
        continue;
      }
    }
    remaining.push_back(op);
    if (llvm::all_of(op->getResultTypes(), isStaticTensor))
      continue;
    SmallVector<Shape> shapes;
    std::string reason;
    if (failed(inferShapes(op, shapes, reason))) {
      why[op] = reason;
      continue;
    }
    for (auto [result, shape] : llvm::zip(op->getResults(), shapes)) {
      auto declared = cast<RankedTensorType>(result.getType());
      RankedTensorType refined = refine(declared, shape);
      if (!refined) {
        why[op] = "the inferred shape conflicts with the declared type";
        break;
      }
      if (refined == declared)
        continue;
      result.setType(refined);
      useRefined(b, result, declared, result);
    }
  }
  for (Operation *op : remaining)
    if (failed(checkStatic(op, why)))
      return failure();
  return success();
}

} // namespace mlir::moe::onnx_lowering
