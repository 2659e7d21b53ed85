//===- Losses.cpp - the losses a training step differentiates -------------===//
//
// Written in onnx and moe ops after the forward, so that the rules
// differentiate them like the model (moe-training.md section 5): the main
// loss as transformers computes it, then the MoE losses of every router.
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Losses.h"

#include "passes/Autodiff/Emitter.h"
#include "passes/Autodiff/Replication.h"
#include "passes/Autodiff/Stages.h"
#include "passes/Parallel/ShardLayer.h"

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::moe::autodiff {

namespace {

/// transformers' ignore index.
constexpr int64_t kIgnoreIndex = -100;

StringRef nameOf(ArrayRef<DictionaryAttr> attrs, unsigned index) {
  if (index < attrs.size() && attrs[index])
    if (auto name = attrs[index].getAs<StringAttr>("onnx.name"))
      return name.getValue();
  return "";
}

struct LossBuilder {
  func::FuncOp func;
  const LossOptions &options;
  Emitter &e;
  func::ReturnOp terminator;
  /// Where the program is partitioned: the exchanges, and which values of
  /// the forward differ between ranks.
  spmd::Exchanges *exchanges;
  const Replication &replication;

  /// Router values where the losses can read them, with the axes they vary
  /// along (routers inside a pipeline stage: exportFromStages).
  llvm::DenseMap<Value, std::pair<Value, AxisSet>> visible{};
  Value seen(Value value) {
    auto it = visible.find(value);
    return it == visible.end() ? value : it->second.first;
  }
  AxisSet varying(Value value) {
    for (auto &[original, seenAs] : visible)
      if (seenAs.first == value)
        return seenAs.second;
    return replication.of(value);
  }

  /// Values computed in the cases of a pipeline's stage switch, made
  /// visible after it on every rank: the case that computes one yields it,
  /// the others zeros, and a sum over the stage axis gives it to all.
  void exportFromStages(ArrayRef<Value> values);

  /// The tokens (dimension 0) of `value` on every rank, where each rank
  /// holds its own part; the value itself under the local scope.
  Value allTokens(Value value) {
    AxisSet axes = varying(value);
    if (!axes || !exchanges || options.auxLossScope == "local")
      return value;
    return exchanges->gather(e.getLoc(), value, axesOf(axes), 0);
  }
  /// A router's loss made equal on every rank: under the local scope, the
  /// mean over the ranks of the losses of their own tokens.
  Value agreed(Value loss, Value logits) {
    AxisSet axes = varying(logits);
    if (!axes || !exchanges || options.auxLossScope != "local")
      return loss;
    SmallVector<spmd::Axis> list = axesOf(axes);
    Value sum = exchanges->allReduceSum(e.getLoc(), loss, list);
    return e.mul(sum, e.scalar(tensorType(loss).getElementType(),
                               1.0 / static_cast<double>(exchanges->size(list))));
  }

  /// The output named `name`, or an error listing the outputs.
  FailureOr<Value> output(StringRef name) {
    SmallVector<DictionaryAttr> attrs;
    func.getAllResultAttrs(attrs);
    std::string names;
    for (unsigned i = 0; i < terminator.getNumOperands(); ++i) {
      StringRef given = nameOf(attrs, i);
      if (given == name)
        return terminator.getOperand(i);
      names += (names.empty() ? "" : ", ") + ("'" + given + "'").str();
    }
    return func.emitError("moe-autodiff: the ")
           << options.kind << " loss reads the output '" << name
           << "', which the model does not have (its outputs: " << names
           << "); name another with --loss-output";
  }

  /// The argument named `name`, added with `type` when the model has none.
  FailureOr<Value> input(StringRef name, RankedTensorType type) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto given = func.getArgAttrOfType<StringAttr>(i, "onnx.name"))
        if (given.getValue() == name) {
          if (func.getArgument(i).getType() != type)
            return func.emitError("moe-autodiff: input '")
                   << name << "' has type " << func.getArgument(i).getType()
                   << ", the loss needs " << type;
          return func.getArgument(i);
        }
    unsigned index = func.getNumArguments();
    MLIRContext *ctx = func.getContext();
    if (failed(func.insertArgument(
            index, type,
            DictionaryAttr::get(ctx, {NamedAttribute(
                                         StringAttr::get(ctx, "onnx.name"),
                                         StringAttr::get(ctx, name))}),
            func.getLoc())))
      return failure();
    return func.getArgument(index);
  }

  /// Mean cross-entropy of `logits [..., V]` against `labels [...]` over the
  /// labels that are not -100, in f32.
  Value crossEntropy(Value logits, Value labels) {
    RankedTensorType type = tensorType(logits);
    int64_t classes = type.getShape().back();
    int64_t rows = type.getNumElements() / classes;
    Type f32 = e.builder().getF32Type();
    Type i64 = e.builder().getI64Type();
    Value z = e.reshape(e.cast(logits, f32), {rows, classes});
    Value y = e.reshape(labels, {rows});
    Value ignored = e.compare<onnx::EqualOp>(y, e.scalar(i64, kIgnoreIndex));
    Value safe = e.where(ignored, e.scalar(i64, 0), y);
    Value valid = e.cast(e.unary<onnx::NotOp>(ignored), f32);
    Value lse = e.reduceLogSumExp(z, {1}, /*keepdims=*/false);
    Value picked = e.reshape(e.gatherElements(z, e.reshape(safe, {rows, 1}), 1),
                             {rows});
    Value nll = e.mul(e.sub(lse, picked), valid);
    // No valid label: the mean is 0 / 0 = NaN, as in PyTorch.
    return e.div(e.reduceSum(nll, {0}, false), e.reduceSum(valid, {0}, false));
  }

  FailureOr<Value> mainLoss();
  FailureOr<Value> moeLosses(Type lossType);
};

FailureOr<Value> LossBuilder::mainLoss() {
  StringRef kind = options.kind;
  if (kind == "model") {
    FailureOr<Value> loss =
        output(options.output.empty() ? "loss" : options.output);
    if (failed(loss))
      return failure();
    RankedTensorType type = tensorType(*loss);
    if (!isa<FloatType>(type.getElementType()) || type.getNumElements() != 1)
      return func.emitError("moe-autodiff: the model's loss output has type ")
             << type << "; a loss is one float";
    return e.reshape(*loss, {});
  }
  if (kind == "causal-lm" || kind == "cross-entropy") {
    FailureOr<Value> logits =
        output(options.output.empty() ? "logits" : options.output);
    if (failed(logits))
      return failure();
    RankedTensorType type = tensorType(*logits);
    if (!isa<FloatType>(type.getElementType()) || type.getRank() < 2)
      return func.emitError("moe-autodiff: logits of type ")
             << type << " have no class dimension";
    auto labelsType = RankedTensorType::get(type.getShape().drop_back(),
                                            e.builder().getI64Type());
    if (kind == "causal-lm" && labelsType.getRank() != 2)
      return func.emitError("moe-autodiff: a causal LM's logits are "
                            "[batch, sequence, vocabulary], got ")
             << type;
    FailureOr<Value> labels = input("labels", labelsType);
    if (failed(labels))
      return failure();
    Value targets = *labels;
    if (kind == "causal-lm") {
      // transformers: pad with -100 on the right, then drop the first.
      int64_t batch = labelsType.getDimSize(0), length = labelsType.getDimSize(1);
      Value pad = e.splat(
          RankedTensorType::get({batch, 1}, e.builder().getI64Type()),
          kIgnoreIndex);
      targets = e.concat({e.slice(*labels, 1, 1, length), pad}, 1);
    }
    return crossEntropy(*logits, targets);
  }
  if (kind == "mse") {
    Value prediction;
    if (options.output.empty()) {
      if (terminator.getNumOperands() == 0)
        return func.emitError("moe-autodiff: the model has no output");
      prediction = terminator.getOperand(0);
    } else {
      FailureOr<Value> named = output(options.output);
      if (failed(named))
        return failure();
      prediction = *named;
    }
    FailureOr<Value> target = input("target", tensorType(prediction));
    if (failed(target))
      return failure();
    // In f32 whatever the model computes in (as the cross-entropy).
    Type f32 = e.builder().getF32Type();
    Value diff = e.sub(e.cast(prediction, f32), e.cast(*target, f32));
    int64_t rank = tensorType(diff).getRank();
    Shape axes;
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
    Value sum = e.reduceSum(e.mul(diff, diff), axes, /*keepdims=*/false);
    double n = static_cast<double>(tensorType(diff).getNumElements());
    return e.mul(sum, e.scalar(tensorType(diff).getElementType(), 1.0 / n));
  }
  return func.emitError("moe-autodiff: unknown loss '")
         << kind << "' (model, causal-lm, cross-entropy or mse)";
}

void LossBuilder::exportFromStages(ArrayRef<Value> values) {
  llvm::MapVector<Operation *, SmallVector<Value>> byStage;
  for (Value value : values)
    if (auto stages = dyn_cast<scf::IndexSwitchOp>(
            value.getParentRegion()->getParentOp()))
      byStage[stages].push_back(value);
  for (auto &[op, inside] : byStage) {
    auto stages = cast<scf::IndexSwitchOp>(op);
    AxisSet stageAxes = replication.of(stages.getArg());
    SmallVector<Value> results = yieldFromStages(stages, inside, /*zeros=*/true);
    OpBuilder b(stages->getContext());
    b.setInsertionPointAfter(stages);
    spmd::Exchanges there(b, exchanges ? exchanges->plan() : PlanAttr());
    for (auto [value, result] : llvm::zip(inside, results))
      visible[value] = {there.allReduceSum(stages.getLoc(), result,
                                           axesOf(stageAxes)),
                        replication.of(value) & ~stageAxes};
  }
}

FailureOr<Value> LossBuilder::moeLosses(Type lossType) {
  SmallVector<RouterOp> routers;
  func.walk([&](RouterOp router) { routers.push_back(router); });
  StringRef balancing = options.loadBalancing;
  if (!llvm::is_contained({"none", "aux_loss", "balanced", "sinkhorn"},
                          balancing))
    return func.emitError("moe-autodiff: unknown load balancing '")
           << balancing << "' (aux_loss, balanced, sinkhorn or none)";
  if (options.auxLossScope != "global" && options.auxLossScope != "local")
    return func.emitError("moe-autodiff: unknown aux loss scope '")
           << options.auxLossScope << "' (global or local)";
  if (options.auxLossForm != "megatron" &&
      options.auxLossForm != "transformers")
    return func.emitError("moe-autodiff: unknown aux loss form '")
           << options.auxLossForm << "' (megatron or transformers)";
  OpBuilder &b = e.builder();
  MLIRContext *ctx = func.getContext();
  Value total = e.scalar(lossType, 0.0);
  auto addLoss = [&](Value loss) {
    total = e.add(total, e.cast(loss, lossType));
  };

  if (balancing == "sinkhorn") {
    // Megatron's sinkhorn routing in training: sigmoid scores for top-1,
    // softmax otherwise, not renormalised, no selection bias.
    for (RouterOp router : routers) {
      if (router.getSelection() == SelectionMethod::Given)
        return router.emitError(
            "moe-autodiff: sinkhorn load balancing replaces the router's "
            "selection, and this router's is the program's own (given)");
      int64_t k = tensorType(router.getIds()).getDimSize(1);
      router.setSelection(SelectionMethod::Sinkhorn);
      router.setScoring(k == 1 ? ScoringFunction::Sigmoid
                               : ScoringFunction::Softmax);
      router.setNormalize(false);
      router.getBiasMutable().clear();
      router.removeNumGroupsAttr();
      router.removeGroupTopkAttr();
      router.removeGroupScoreAttr();
      router.removeMaskedScoreAttr();
    }
  }
  double coeff = options.auxLossCoeff;
  bool aux = (balancing == "aux_loss" || balancing == "balanced") && coeff > 0;
  if (aux || options.zLossCoeff > 0) {
    SmallVector<Value> used;
    for (RouterOp router : routers)
      used.append({router.getLogits(), router.getIds()});
    exportFromStages(used);
  }
  if (aux && balancing == "aux_loss" && options.auxLossForm == "transformers") {
    // All layers' rows concatenated: E sum_e (n_e / N) (sum_rows P_e / N).
    Value counts, probabilities;
    int64_t rows = 0, experts = 0;
    if (options.auxLossScope == "local")
      return func.emitError("moe-autodiff: transformers' aux loss is over "
                            "every token of the batch; it has no local scope");
    for (RouterOp router : routers) {
      Value logits = allTokens(seen(router.getLogits()));
      RankedTensorType type = tensorType(logits);
      if (experts && type.getDimSize(1) != experts)
        return router.emitError("moe-autodiff: transformers' aux loss "
                                "concatenates routers of equal expert counts");
      experts = type.getDimSize(1);
      rows += type.getDimSize(0);
      Value p = e.reduceSum(e.softmax(logits, 1), {0}, false);
      Value n = e.reduceSum(
          e.idCounts(allTokens(seen(router.getIds())), experts, type.getElementType()),
          {0}, false);
      probabilities = probabilities ? e.add(probabilities, p) : p;
      counts = counts ? e.add(counts, n) : n;
    }
    if (counts) {
      double factor = coeff * static_cast<double>(experts) /
                      (static_cast<double>(rows) * static_cast<double>(rows));
      Value loss = e.reduceSum(e.mul(counts, probabilities), {0}, false);
      addLoss(e.mul(loss, e.scalar(tensorType(loss).getElementType(), factor)));
    }
  } else if (aux) {
    std::optional<int64_t> seqLen;
    if (balancing == "balanced") {
      // Sequences: the input's second dimension (input_ids [B, S]).
      if (func.getNumArguments() == 0 ||
          tensorType(func.getArgument(0)).getRank() < 2)
        return func.emitError("moe-autodiff: balanced load balancing needs "
                              "inputs of [batch, sequence, ...]");
      seqLen = tensorType(func.getArgument(0)).getDimSize(1);
    }
    for (RouterOp router : routers) {
      Value logits = allTokens(seen(router.getLogits()));
      RankedTensorType type = tensorType(logits);
      if (seqLen && type.getDimSize(0) % *seqLen != 0)
        return router.emitError("moe-autodiff: ")
               << type.getDimSize(0) << " tokens are not whole sequences of "
               << *seqLen;
      auto loss = AuxLossOp::create(
          b, router.getLoc(),
          RankedTensorType::get({}, type.getElementType()),
          router.getScoringAttr(), logits, allTokens(seen(router.getIds())),
          b.getF64FloatAttr(coeff),
          seqLen ? b.getI64IntegerAttr(*seqLen) : IntegerAttr());
      addLoss(agreed(loss, logits));
    }
  }
  if (options.zLossCoeff > 0)
    for (RouterOp router : routers) {
      Value logits = allTokens(seen(router.getLogits()));
      RankedTensorType type = tensorType(logits);
      addLoss(agreed(ZLossOp::create(b, router.getLoc(),
                                     RankedTensorType::get(
                                         {}, type.getElementType()),
                                     logits,
                                     b.getF64FloatAttr(options.zLossCoeff)),
                     logits));
    }
  (void)ctx;
  return total;
}

} // namespace

void takeLossesFromPlan(ModuleOp module, LossOptions &options) {
  auto plan = module->getAttrOfType<PlanAttr>(spmd::kPlanAttrName);
  if (!plan)
    return;
  options.loadBalancing = stringifyLoadBalancing(plan.getLoadBalancing()).str();
  options.auxLossCoeff = plan.getAuxLossCoeff().convertToDouble();
  options.zLossCoeff = plan.getZLossCoeff().convertToDouble();
}

FailureOr<TrainingLosses> buildLosses(func::FuncOp func,
                                      const LossOptions &options,
                                      PlanAttr plan) {
  auto terminator = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder builder(terminator);
  Emitter e(builder, func.getLoc());
  std::optional<spmd::Exchanges> exchanges;
  if (plan)
    exchanges.emplace(builder, plan);
  Replication replication(func);
  LossBuilder losses{func, options, e, terminator,
                     exchanges ? &*exchanges : nullptr, replication};
  FailureOr<Value> main = losses.mainLoss();
  if (failed(main))
    return failure();
  Type lossType = tensorType(*main).getElementType();
  FailureOr<Value> aux = losses.moeLosses(lossType);
  if (failed(aux))
    return failure();
  return TrainingLosses{e.add(*main, *aux), *aux};
}

} // namespace mlir::moe::autodiff
