//===- Autodiff.cpp - the moe-autodiff pass -------------------------------===//
//
// Turns the module's public function into its training step. In order:
// the losses are appended to the forward (Losses.cpp), the parameters are
// found (named float weights), activity analysis marks the values between
// a parameter and the loss, and the ops are visited in reverse, each active
// op's rule (OnnxRules.cpp, MoERules.cpp, ShardRules.cpp) emitting its
// operands' cotangents from its results', summed where a value has several
// uses. A partitioned program is differentiated as each rank runs it; its
// exchanges have rules of their own, and a cotangent is summed over the
// ranks that used its value alike (Replication.h). A weight that each rank
// holds a piece of (a chain of all_slice ops) is trained as that piece.
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Losses.h"
#include "passes/Autodiff/Replication.h"
#include "passes/Autodiff/Reverse.h"
#include "passes/Autodiff/Rules.h"
#include "passes/Autodiff/Stages.h"
#include "passes/Passes.h"

#include "dialects/moe/IR/MoEOps.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Regex.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEAUTODIFFPASS
#include "passes/Passes.h.inc"

namespace {

using autodiff::Emitter;
using autodiff::isFloatTensor;
using autodiff::tensorType;

/// Marks the float results that depend on an active value, in program
/// order, regions first.
void markActive(Block &block, llvm::DenseSet<Value> &active) {
  for (Operation &op : block.without_terminator()) {
    bool any = llvm::any_of(op.getOperands(),
                            [&](Value v) { return active.contains(v); });
    for (Region &region : op.getRegions())
      for (Block &inner : region) {
        markActive(inner, active);
        any |= llvm::any_of(inner.getTerminator()->getOperands(),
                            [&](Value v) { return active.contains(v); });
      }
    any |= isa<shard::RecvOp>(op);
    if (!any)
      continue;
    for (Value result : op.getResults())
      if (isFloatTensor(result))
        active.insert(result);
  }
}

/// The name of a trainable weight, or none: a float constant the importer
/// (or raising) kept as a named resource, with at least two elements.
std::optional<StringRef> parameterName(arith::ConstantOp constant) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue());
  if (!resource || !isa<FloatType>(resource.getElementType()) ||
      resource.getNumElements() < 2)
    return std::nullopt;
  return resource.getRawHandle().getKey();
}

/// Whether `op` moves or reshapes a weight without computing with it: a
/// weight is followed through such ops to the op that uses it.
bool movesWeight(Operation *op) {
  return isa<onnx::TransposeOp, onnx::ReshapeOp, onnx::SqueezeOp,
             onnx::UnsqueezeOp, onnx::FlattenOp, onnx::CastOp, onnx::SliceOp,
             onnx::SplitOp, onnx::ConcatOp, onnx::ExpandOp, onnx::IdentityOp,
             onnx::GatherOp, onnx::TileOp, tensor::ExtractSliceOp,
             tensor::CastOp, shard::AllSliceOp, SlotWeightsOp>(op);
}

/// Whether `op` multiplies its operands together (a matrix product, or an
/// MoE op's weights and biases applied to its tokens).
bool multipliesWeight(Operation *op) {
  return isa<onnx::MatMulOp, onnx::GemmOp, onnx::EinsumOp, onnx::ConvOp,
             ExpertsOp, SharedExpertOp, LayerOp>(op);
}

/// The op on the loss's path (in `lossSlice`) that multiplies by
/// `constant`'s value (followed through ops that only move it), or null.
Operation *productOnLossPath(arith::ConstantOp constant,
                             const llvm::SetVector<Operation *> &lossSlice) {
  SmallVector<Value> worklist{constant.getResult()};
  llvm::DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (movesWeight(user)) {
        llvm::append_range(worklist, user->getResults());
        continue;
      }
      if (multipliesWeight(user) && lossSlice.contains(user))
        return user;
    }
  }
  return nullptr;
}

/// A float constant that is not a parameter but may be one that the
/// exporter folded (a transposed or cast copy under a name of its own):
/// at least two elements, not all the same.
bool mayBeFoldedWeight(arith::ConstantOp constant) {
  auto type = dyn_cast<RankedTensorType>(constant.getType());
  if (!type || !isa<FloatType>(type.getElementType()) ||
      type.getNumElements() < 2)
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  return !(dense && dense.isSplat());
}

/// How a constant is named in a message: its resource name, or its type.
std::string describeConstant(arith::ConstantOp constant) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue()))
    os << "'" << resource.getRawHandle().getKey() << "' ";
  else
    os << "an inline constant ";
  os << "(" << constant.getType() << ")";
  return text;
}

struct MoEAutodiffPass : public impl::MoEAutodiffPassBase<MoEAutodiffPass> {
  using Base::Base;

  void runOnOperation() override;
  LogicalResult differentiate(func::FuncOp func);
};

LogicalResult MoEAutodiffPass::differentiate(func::FuncOp func) {
  autodiff::LossOptions options;
  options.kind = loss;
  options.output = lossOutput;
  options.loadBalancing = loadBalancing;
  options.auxLossForm = auxLossForm;
  options.auxLossScope = auxLossScope;
  options.auxLossCoeff = auxLossCoeff;
  options.zLossCoeff = zLossCoeff;
  if (fromPlan)
    autodiff::takeLossesFromPlan(getOperation(), options);
  autodiff::flattenStages(func);
  auto plan = getOperation()->getAttrOfType<PlanAttr>(spmd::kPlanAttrName);
  FailureOr<autodiff::TrainingLosses> losses =
      autodiff::buildLosses(func, options, plan);
  if (failed(losses))
    return failure();
  autodiff::Replication replication(func);
  if (replication.of(losses->total) != 0)
    return func.emitError("moe-autodiff: the loss differs between ranks "
                          "(it varies along ")
           << spmd::axisName(static_cast<int16_t>(
                  autodiff::axesOf(replication.of(losses->total)).front()))
           << ")";

  // Parameters, in program order.
  llvm::Regex frozen(freeze);
  std::string regexError;
  if (!freeze.empty() && !frozen.isValid(regexError))
    return func.emitError("moe-autodiff: --freeze '")
           << freeze << "' is not a regular expression: " << regexError;
  llvm::Regex trainable(params);
  if (!trainable.isValid(regexError))
    return func.emitError("moe-autodiff: --params '")
           << params << "' is not a regular expression: " << regexError;
  SmallVector<std::pair<Value, StringRef>> parameters;
  SmallVector<StringRef> otherNames;
  SmallVector<arith::ConstantOp> sliced;
  llvm::DenseSet<Value> active;
  func.walk([&](arith::ConstantOp constant) {
    std::optional<StringRef> name = parameterName(constant);
    if (!name)
      return;
    if (!trainable.match(*name) || (!freeze.empty() && frozen.match(*name))) {
      otherNames.push_back(*name);
      return;
    }
    // The piece this rank holds, where the weight is sliced; the rank's
    // slots, where it is laid out by slot (moe-place-experts).
    Value value = constant.getResult();
    if (constant->hasOneUse()) {
      OpOperand *use = &*constant->use_begin();
      if (auto slots = dyn_cast<SlotWeightsOp>(use->getOwner());
          slots && slots->hasOneUse())
        use = &*slots->use_begin();
      value = spmd::followWeightSlices(*use).local;
    }
    else if (llvm::any_of(constant->getUses(), [](OpOperand &use) {
               return !spmd::followWeightSlices(use).steps.empty();
             }))
      sliced.push_back(constant);
    parameters.push_back({value, *name});
    active.insert(value);
  });
  if (!sliced.empty())
    return sliced.front().emitError("moe-autodiff: parameter '")
           << *parameterName(sliced.front())
           << "' is used both whole and sliced between ranks; each rank "
              "trains one piece of a parameter";

  // Activity: float results of ops with an active operand (a stage
  // switch's, of cases that yield one), and whatever a stage receives.
  Block &body = func.getBody().front();
  markActive(body, active);
  if (!active.contains(losses->total)) {
    InFlightDiagnostic diag = func.emitError(
        "moe-autodiff: the loss does not depend on any trainable weight");
    if (!otherNames.empty()) {
      diag << "; " << otherNames.size()
           << " named weights are not parameters (--params '" << params
           << "', --freeze '" << freeze << "'), e.g.";
      for (StringRef name : ArrayRef(otherNames).take_front(3))
        diag << " '" << name << "'";
    }
    return diag;
  }

  // A float constant that the loss's path multiplies by, and that is
  // neither a parameter nor frozen by name, is most likely a parameter the
  // exporter folded under a name of its own (OnnxExporter's default writes
  // every Linear weight transposed as `val_N`): training without it would
  // leave it as exported without a word.
  if (!allowFrozenWeights) {
    llvm::SetVector<Operation *> lossSlice;
    BackwardSliceOptions sliceOptions;
    sliceOptions.omitUsesFromAbove = false;
    if (Operation *lossOp = losses->total.getDefiningOp())
      (void)getBackwardSlice(lossOp, &lossSlice, sliceOptions);
    SmallVector<std::pair<arith::ConstantOp, Operation *>> unexplained;
    func.walk([&](arith::ConstantOp constant) {
      if (!mayBeFoldedWeight(constant))
        return;
      // A torch name that --params leaves out is left out on purpose.
      static const llvm::Regex torchName(
          "^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z0-9_]+)+$");
      if (std::optional<StringRef> name = parameterName(constant))
        if (trainable.match(*name) || torchName.match(*name) ||
            (!freeze.empty() && frozen.match(*name)))
          return;
      if (Operation *product = productOnLossPath(constant, lossSlice))
        unexplained.push_back({constant, product});
    });
    if (!unexplained.empty()) {
      auto [constant, product] = unexplained.front();
      InFlightDiagnostic diag = constant.emitError("moe-autodiff: ")
                                << unexplained.size()
                                << " float constants that the loss's path "
                                   "multiplies by are not parameters, e.g. "
                                << describeConstant(constant) << " in '"
                                << product->getName() << "'";
      for (auto [other, use] : ArrayRef(unexplained).drop_front().take_front(4))
        diag << ", " << describeConstant(other);
      diag << "; they would stay as exported. Name them parameters "
              "(--params), freeze them on purpose (--freeze), or accept every "
              "such constant as frozen (--allow-frozen-weights)";
      diag.attachNote(product->getLoc()) << "used here";
      return diag;
    }
  }

  auto terminator = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder builder(terminator);
  Emitter e(builder, func.getLoc());
  autodiff::ReverseSweep reverse(builder, replication, active, plan);
  reverse.accumulate(losses->total, e.splat(tensorType(losses->total), 1.0));
  if (failed(reverse.sweep(body, /*deferred=*/0)))
    return failure();

  // The step returns the losses, then one gradient per parameter reached.
  MLIRContext *ctx = func.getContext();
  SmallVector<Value> results{losses->total, losses->aux};
  SmallVector<DictionaryAttr> resultAttrs{
      DictionaryAttr::get(ctx, {builder.getNamedAttr(
                                   "onnx.name", builder.getStringAttr("loss"))}),
      DictionaryAttr::get(
          ctx, {builder.getNamedAttr("onnx.name",
                                     builder.getStringAttr("aux_loss"))})};
  for (auto [value, name] : parameters) {
    Value grad = reverse.cotangentOf(value);
    if (!grad)
      continue;
    results.push_back(grad);
    resultAttrs.push_back(DictionaryAttr::get(
        ctx, {builder.getNamedAttr(
                  "onnx.name", builder.getStringAttr("grad:" + name.str())),
              builder.getNamedAttr("moe.param", builder.getStringAttr(name))}));
  }
  func::ReturnOp::create(builder, terminator.getLoc(), results);
  terminator.erase();
  func.setFunctionType(FunctionType::get(
      ctx, func.getArgumentTypes(), ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  func->setAttr("moe.train_step", UnitAttr::get(ctx));
  if (!otherNames.empty()) {
    SmallVector<Attribute> frozenNames;
    for (StringRef name : otherNames)
      frozenNames.push_back(builder.getStringAttr(name));
    func->setAttr("moe.frozen", builder.getArrayAttr(frozenNames));
  }
  return success();
}

void MoEAutodiffPass::runOnOperation() {
  SmallVector<func::FuncOp> entries;
  for (auto func : getOperation().getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      entries.push_back(func);
  if (entries.size() != 1) {
    getOperation().emitError("moe-autodiff: expected one public function to "
                             "differentiate, found ")
        << entries.size();
    return signalPassFailure();
  }
  if (failed(differentiate(entries.front())))
    signalPassFailure();
}

} // namespace
} // namespace mlir::moe
