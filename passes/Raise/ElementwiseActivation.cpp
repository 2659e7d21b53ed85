//===- ElementwiseActivation.cpp - activations no kind names --------------===//

#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/Raise/Matchers.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::moe::raise {

/// Ops an activation takes at most: far more than any exporter writes.
static constexpr unsigned kMaxChainOps = 64;

/// A constant of one element, which every element of the chain reads.
static bool isScalarConstant(Value value) {
  std::optional<onnx_lowering::ConstTensor> constant =
      onnx_lowering::getConstant(skipNoOps(value));
  return constant && constant->size() == 1;
}

std::optional<ElementwiseChain> matchElementwiseChain(Value result) {
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!type)
    return std::nullopt;
  ElementwiseChain chain;
  chain.result = result;
  // An op joins the chain when it is elementwise, of the result's shape,
  // and reads values of that shape or scalar constants.
  auto joins = [&](Operation *op) {
    if (!op || !onnx::isElementwise(op) || op->getNumResults() != 1 ||
        cast<ShapedType>(op->getResult(0).getType()).getShape() !=
            type.getShape())
      return false;
    return llvm::all_of(op->getOperands(), [&](Value operand) {
      if (isa<NoneType>(operand.getType()) || isScalarConstant(operand))
        return true;
      auto operandType = dyn_cast<RankedTensorType>(operand.getType());
      return operandType && operandType.getShape() == type.getShape();
    });
  };
  llvm::SetVector<Operation *> ops;
  SmallVector<Value> work{skipNoOps(result)};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (def && ops.contains(def))
      continue;
    if (!joins(def)) {
      if (chain.source && chain.source != value)
        return std::nullopt;
      chain.source = value;
      continue;
    }
    if (ops.size() == kMaxChainOps || def->getBlock() != result.getParentBlock())
      return std::nullopt;
    ops.insert(def);
    for (Value operand : def->getOperands())
      if (!isa<NoneType>(operand.getType()) && !isScalarConstant(operand))
        work.push_back(skipNoOps(operand));
  }
  if (!chain.source || ops.empty())
    return std::nullopt;
  chain.ops.assign(ops.begin(), ops.end());
  llvm::sort(chain.ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return chain;
}

/// The scalar constant of one element `value` holds, in its element type.
static Value scalarConstant(OpBuilder &b, Location loc, Value value) {
  onnx_lowering::ConstTensor constant =
      *onnx_lowering::getConstant(skipNoOps(value));
  Type type = constant.elementType;
  if (constant.isFloat())
    return arith::ConstantOp::create(
        b, loc, b.getFloatAttr(type, constant.floats.front()));
  return arith::ConstantOp::create(b, loc,
                                   b.getIntegerAttr(type, constant.ints.front()));
}

/// Whether two bodies compute the same: their other ops alike in order,
/// each operand the argument, the same earlier result, or an equal
/// constant. Constants are compared by value, wherever they stand: the
/// rewriter hoists and merges those of a body it has visited.
static bool sameBody(func::FuncOp a, func::FuncOp b) {
  if (a.getFunctionType() != b.getFunctionType())
    return false;
  auto computing = [](func::FuncOp f) {
    SmallVector<Operation *> ops;
    for (Operation &op : f.getBody().front())
      if (!isa<arith::ConstantOp>(op))
        ops.push_back(&op);
    return ops;
  };
  SmallVector<Operation *> opsA = computing(a), opsB = computing(b);
  if (opsA.size() != opsB.size())
    return false;
  DenseMap<Value, Value> matched{
      {a.getArgument(0), b.getArgument(0)}};
  for (auto [x, y] : llvm::zip_equal(opsA, opsB)) {
    if (x->getName() != y->getName() ||
        x->getAttrDictionary() != y->getAttrDictionary() ||
        x->getNumOperands() != y->getNumOperands() ||
        x->getResultTypes() != y->getResultTypes())
      return false;
    for (auto [u, v] : llvm::zip_equal(x->getOperands(), y->getOperands())) {
      auto cu = u.getDefiningOp<arith::ConstantOp>();
      auto cv = v.getDefiningOp<arith::ConstantOp>();
      if (cu || cv) {
        if (!cu || !cv || cu.getValue() != cv.getValue())
          return false;
      } else if (matched.lookup(u) != v) {
        return false;
      }
    }
    for (auto [u, v] : llvm::zip_equal(x->getResults(), y->getResults()))
      matched[u] = v;
  }
  return true;
}

/// An activation body of `module` other than `body` that computes the same.
static func::FuncOp findEqualBody(ModuleOp module, func::FuncOp body) {
  for (auto other : module.getOps<func::FuncOp>())
    if (other != body && other->hasAttr(kActivationBodyAttrName) &&
        sameBody(other, body))
      return other;
  return {};
}

FailureOr<ActivationAttr> customActivation(const ElementwiseChain &chain,
                                           Operation *anchor,
                                           PatternRewriter &rewriter) {
  auto module = anchor->getParentOfType<ModuleOp>();
  if (!module || !module->hasAttr(kRaiseModuleAttrName))
    return rewriter.notifyMatchFailure(
        anchor, "an activation no kind names is raised only where moe-raise "
                "runs on the module");
  Type elt = getElementTypeOrSelf(chain.source.getType());
  if (!isa<FloatType>(elt) || getElementTypeOrSelf(chain.result.getType()) != elt)
    return rewriter.notifyMatchFailure(
        anchor, "the activation changes the element type");

  Location loc = chain.result.getLoc();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  std::string name = "moe_activation";
  for (int i = 0; module.lookupSymbol(name); ++i)
    name = "moe_activation_" + std::to_string(i);
  auto body = func::FuncOp::create(rewriter, loc, name,
                                   rewriter.getFunctionType({elt}, {elt}));
  body.setPrivate();
  Block *block = body.addEntryBlock();
  rewriter.setInsertionPointToStart(block);

  auto refuse = [&](const Twine &why) -> FailureOr<ActivationAttr> {
    rewriter.eraseOp(body);
    return rewriter.notifyMatchFailure(anchor, why);
  };
  DenseMap<Value, Value> scalars{{chain.source, block->getArgument(0)}};
  for (Operation *op : chain.ops) {
    SmallVector<Value> args;
    for (Value operand : op->getOperands()) {
      if (isa<NoneType>(operand.getType()))
        continue;
      Value scalar = scalars.lookup(skipNoOps(operand));
      args.push_back(scalar ? scalar
                            : scalarConstant(rewriter, op->getLoc(), operand));
    }
    FailureOr<Value> element = onnx_lowering::buildElementwiseScalar(
        rewriter, op->getLoc(), op, args,
        getElementTypeOrSelf(op->getResult(0).getType()));
    if (failed(element))
      return refuse("the activation's '" + op->getName().getStringRef() +
                    "' has no scalar form");
    scalars[op->getResult(0)] = *element;
  }
  func::ReturnOp::create(rewriter, loc,
                         scalars.lookup(skipNoOps(chain.result)));
  for (Operation &op : *block)
    if (!isActivationBodyOp(&op))
      return refuse("the activation's scalar form holds '" +
                    op.getName().getStringRef() +
                    "', which the backward does not differentiate");
  if (func::FuncOp equal = findEqualBody(module, body)) {
    rewriter.eraseOp(body);
    body = equal;
  } else {
    body->setAttr(kActivationBodyAttrName, rewriter.getUnitAttr());
  }
  return ActivationAttr::get(rewriter.getContext(),
                             FlatSymbolRefAttr::get(body.getSymNameAttr()));
}

std::optional<ActivationAttr> matchCustomActivation(Value activated, Value up,
                                                    Operation *anchor,
                                                    PatternRewriter &rewriter) {
  std::optional<ElementwiseChain> chain = matchElementwiseChain(activated);
  if (!chain || chain->source != skipNoOps(up))
    return std::nullopt;
  FailureOr<ActivationAttr> custom = customActivation(*chain, anchor, rewriter);
  if (failed(custom))
    return std::nullopt;
  return *custom;
}

} // namespace mlir::moe::raise
