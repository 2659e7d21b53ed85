//===- MoERules.cpp - vector-Jacobian products of moe ops -----------------===//
//
// The rules of moe-training.md section 4. Routing ids, slots, counts and
// capacity masks are never differentiated; the gradient reaches the logits
// only through the chosen weights (and the auxiliary losses), and the
// tokens through the rows they were dispatched as. Rules recompute what is
// cheap (scores from the logits, the experts' activations from their rows)
// and keep the rest (ids, slots, counts, rows).
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Rules.h"

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe::autodiff {

namespace {

Shape shapeOf(Value value) { return Shape(tensorType(value).getShape()); }
Type elementOf(Value value) { return tensorType(value).getElementType(); }

/// Scores of `logits [T, E]`: softmax over each row or sigmoid.
Value scores(Emitter &e, Value logits, ScoringFunction scoring) {
  return scoring == ScoringFunction::Softmax
             ? e.softmax(logits, 1)
             : e.unary<onnx::SigmoidOp>(logits);
}

/// The cotangent of the logits from that of their scores `s`.
Value scoresGrad(Emitter &e, Value s, Value ds, ScoringFunction scoring) {
  if (scoring == ScoringFunction::Softmax)
    return e.softmaxGrad(s, ds, 1);
  Value one = e.scalar(elementOf(s), 1.0);
  return e.mul(ds, e.mul(s, e.sub(one, s)));
}

/// `ids [T, k]` as i64, with unrouted (-1) entries at 0, and where they are
/// valid.
std::pair<Value, Value> safeIds(Emitter &e, Value ids) {
  Type i64 = e.builder().getI64Type();
  Value wide = e.cast(ids, i64);
  Value valid = e.compare<onnx::GreaterOrEqualOp>(wide, e.scalar(i64, 0));
  return {e.where(valid, wide, e.scalar(i64, 0)), valid};
}

/// moe.experts_grad of `rows` in `counts` groups with the weights and biases
/// fc1, fc1_bias, fc3, fc3_bias, fc2, fc2_bias (null where absent).
/// `perGroup`: a weight cotangent per group of `counts` instead of per
/// expert.
ExpertsGradOp buildExpertsGrad(Emitter &e, Value rows, Value counts, Value dy,
                               ArrayRef<Value> weights,
                               ActivationAttr activation,
                               bool perGroup = false) {
  SmallVector<Type> types{rows.getType()};
  int64_t groups = shapeOf(counts)[0];
  for (Value weight : weights) {
    if (!weight) {
      types.push_back(Type());
      continue;
    }
    Shape shape = shapeOf(weight);
    if (perGroup)
      shape[0] = groups;
    types.push_back(tensorType(weight).clone(shape));
  }
  return ExpertsGradOp::create(
      e.builder(), e.getLoc(), types[0], types[1], types[2], types[3],
      types[4], types[5], types[6], rows, counts, dy, weights[0], weights[1],
      weights[2], weights[3], weights[4], weights[5], activation,
      perGroup ? e.builder().getUnitAttr() : UnitAttr());
}

/// The slot table of experts on slots (moe-place-experts): their fc1
/// weight is a moe.slot_weights, this rank's slots of it after moe-partition.
Value slotTableOf(ExpertsOp experts) {
  if (!experts->hasAttr(kLogicalExpertsAttrName))
    return Value();
  Value w = experts.getFc1Weight();
  while (Operation *def = w.getDefiningOp()) {
    if (auto slots = dyn_cast<SlotWeightsOp>(def))
      return slots.getTable();
    if (def->getNumOperands() < 1 ||
        !isa<shard::AllSliceOp, shard::AllGatherOp, tensor::ExtractSliceOp>(
            def))
      return Value();
    w = def->getOperand(0);
  }
  return Value();
}

/// Sets the cotangents of an op's ODS operand groups.
struct MoERule {
  Emitter &e;
  spmd::Exchanges *x; // null in a module without a plan
  Operation *op;
  ArrayRef<Value> dResults;
  MutableArrayRef<Value> d;

  template <typename OpTy> void setODS(OpTy typed, unsigned index, Value v) {
    auto [start, length] = typed.getODSOperandIndexAndLength(index);
    if (length == 1 && v)
      d[start] = v;
  }
  LogicalResult unsupported(const Twine &what) {
    return op->emitError("moe-autodiff: ") << what;
  }

  LogicalResult router(RouterOp router);
  LogicalResult combine(CombineOp combine);
  LogicalResult experts(ExpertsOp experts);
  LogicalResult sharedExpert(SharedExpertOp shared);
  LogicalResult auxLoss(AuxLossOp aux);
  LogicalResult gatherRows(GatherRowsOp gather);
  LogicalResult build();
};

LogicalResult MoERule::router(RouterOp router) {
  // Recomputes the scores s from the logits, keeps the ids:
  // w = alpha * v / (sum v + 1e-20) (or alpha * v) with v = s[ids]; then
  // the gathered cotangent goes back to its experts and through the scores.
  SelectionMethod selection = router.getSelection();
  if (selection == SelectionMethod::SparseMixer)
    return unsupported("the sparse mixer samples its experts in training; "
                       "train with another selection");
  Value dWeights = dResults[1];
  if (!dWeights)
    return success();
  if (selection == SelectionMethod::Given) {
    // The weights are the program's own: their cotangent goes back to it
    // (0 for a pair whose id was out of range, which no expert took).
    auto valid = safeIds(e, router.getIds()).second;
    setODS(router, 3,
           e.where(valid, dWeights, e.scalar(elementOf(dWeights), 0.0)));
    return success();
  }
  Value logits = router.getLogits();
  Type elt = elementOf(logits);
  ScoringFunction scoring = router.getScoring();
  Value s = scores(e, logits, scoring);
  auto [ids, valid] = safeIds(e, router.getIds());
  Value zero = e.scalar(elt, 0.0);
  Value chosen = e.where(valid, e.gatherElements(s, ids, 1), zero);
  Value dw = e.mul(dWeights, e.scalar(elt, router.getScalingFactor()
                                               .convertToDouble()));
  Value dChosen = dw;
  if (router.getNormalize()) {
    Value sum = e.add(e.reduceSum(chosen, {1}, true), e.scalar(elt, 1e-20));
    Value dot = e.reduceSum(e.mul(dw, chosen), {1}, true);
    dChosen = e.sub(e.div(dw, sum), e.div(dot, e.mul(sum, sum)));
  }
  dChosen = e.where(valid, dChosen, zero);
  Value ds = e.scatterElementsAdd(e.splat(tensorType(logits), 0.0), ids,
                                  dChosen, 1);
  setODS(router, 0, scoresGrad(e, s, ds, scoring));
  return success();
}

LogicalResult MoERule::combine(CombineOp combine) {
  // Keeps rows, slots and weights. d rows[slot(t, j)] = w[t, j] dy[t];
  // d w[t, j] = <dy[t], rows[slot(t, j)]>.
  Value dy = dResults[0];
  if (!dy)
    return success();
  Value rows = combine.getRows();
  Shape rowsShape = shapeOf(rows);
  int64_t width = rowsShape.back();
  int64_t numRows = tensorType(rows).getNumElements() / width;
  Shape slotsShape = shapeOf(combine.getSlots());
  int64_t t = slotsShape[0], k = slotsShape[1];
  Value flatRows = e.reshape(rows, {numRows, width});
  Value flatSlots = e.reshape(combine.getSlots(), {t * k});
  auto gatherType = RankedTensorType::get({t * k, width}, elementOf(rows));
  Value picked = GatherRowsOp::create(e.builder(), e.getLoc(), gatherType,
                                      flatRows, flatSlots);
  Value dyRows = e.reshape(dy, {t, 1, width});
  Value dWeights = e.reduceSum(
      e.mul(e.reshape(picked, {t, k, width}), dyRows), {2}, false);
  setODS(combine, 2, dWeights);

  // Dropped pairs (slot -1) write to one extra row, cut off after.
  Type i64 = e.builder().getI64Type();
  Value slots = e.cast(flatSlots, i64);
  Value dropped = e.compare<onnx::LessOp>(slots, e.scalar(i64, 0));
  slots = e.reshape(e.where(dropped, e.scalar(i64, numRows), slots),
                    {t * k, 1});
  Value updates = e.reshape(
      e.mul(e.reshape(combine.getWeights(), {t, k, 1}), dyRows),
      {t * k, width});
  Value scattered = e.scatterNDAdd(
      e.splat(RankedTensorType::get({numRows + 1, width}, elementOf(rows)),
              0.0),
      slots, updates);
  setODS(combine, 0,
         e.reshape(e.slice(scattered, 0, 0, numRows), rowsShape));
  return success();
}

LogicalResult MoERule::experts(ExpertsOp experts) {
  // moe.experts_grad recomputes each group's activations from the rows.
  Value dy = dResults[0];
  if (!dy)
    return success();
  // Experts on slots: each group's (source rank's) part kept apart and
  // added in source order by moe.slot_grad_sum, so that replicas and any
  // placement give the bits of one copy serving every rank.
  Value table = slotTableOf(experts);
  if (experts->hasAttr(kLogicalExpertsAttrName) && !table)
    return unsupported("experts on slots whose fc1 weight does not come "
                       "from a moe.slot_weights");
  ExpertsGradOp grad = buildExpertsGrad(
      e, experts.getRows(), experts.getCounts(), dy,
      {experts.getFc1Weight(), experts.getFc1Bias(), experts.getFc3Weight(),
       experts.getFc3Bias(), experts.getFc2Weight(), experts.getFc2Bias()},
      experts.getActivation(), /*perGroup=*/static_cast<bool>(table));
  auto perSlot = [&](Value parts, Value weight) -> Value {
    if (!table || !parts)
      return parts;
    bool exchange = x && x->size(spmd::Axis::EP) > 1;
    return SlotGradSumOp::create(
        e.builder(), e.getLoc(), weight.getType(), parts, table,
        exchange ? x->grid() : FlatSymbolRefAttr(),
        e.builder().getDenseI16ArrayAttr(
            exchange ? x->liveAxes({spmd::Axis::EP}) : SmallVector<int16_t>{}));
  };
  setODS(experts, 0, grad.getDRows());
  setODS(experts, 2, perSlot(grad.getDFc1Weight(), experts.getFc1Weight()));
  setODS(experts, 3, perSlot(grad.getDFc1Bias(), experts.getFc1Bias()));
  setODS(experts, 4, perSlot(grad.getDFc3Weight(), experts.getFc3Weight()));
  setODS(experts, 5, perSlot(grad.getDFc3Bias(), experts.getFc3Bias()));
  setODS(experts, 6, perSlot(grad.getDFc2Weight(), experts.getFc2Weight()));
  setODS(experts, 7, perSlot(grad.getDFc2Bias(), experts.getFc2Bias()));
  return success();
}

LogicalResult MoERule::sharedExpert(SharedExpertOp shared) {
  // One group of T rows through moe.experts_grad, the weights viewed with a
  // leading expert dim; the gate y = sigmoid(x g^T) * M(x) recomputes M.
  Value dy = dResults[0];
  if (!dy)
    return success();
  Value x = shared.getInput();
  Type elt = elementOf(x);
  int64_t t = shapeOf(x)[0];
  Value dFFN = dy;
  Value dxGate;
  if (Value gate = shared.getGate()) {
    auto ffn = SharedExpertOp::create(
        e.builder(), e.getLoc(), shared.getType(), x, shared.getFc1Weight(),
        shared.getFc1Bias(), shared.getFc3Weight(), shared.getFc3Bias(),
        shared.getFc2Weight(), shared.getFc2Bias(), Value(),
        shared.getActivation());
    Value s = e.unary<onnx::SigmoidOp>(e.matmul(x, e.transposeLast(gate)));
    dFFN = e.mul(dy, s);
    Value one = e.scalar(elt, 1.0);
    Value dz = e.mul(e.reduceSum(e.mul(dy, ffn), {1}, true),
                     e.mul(s, e.sub(one, s)));
    setODS(shared, 7, e.matmul(e.transposeLast(dz), x));
    dxGate = e.matmul(dz, gate);
  }
  auto stacked = [&](Value weight) -> Value {
    if (!weight)
      return Value();
    Shape shape{1};
    shape.append(shapeOf(weight));
    return e.reshape(weight, shape);
  };
  SmallVector<Value> weights{
      stacked(shared.getFc1Weight()), stacked(shared.getFc1Bias()),
      stacked(shared.getFc3Weight()), stacked(shared.getFc3Bias()),
      stacked(shared.getFc2Weight()), stacked(shared.getFc2Bias())};
  auto counts = arith::ConstantOp::create(
      e.builder(), e.getLoc(),
      DenseIntElementsAttr::get(
          RankedTensorType::get({1}, e.builder().getI32Type()),
          ArrayRef<int32_t>{static_cast<int32_t>(t)}));
  ExpertsGradOp grad = buildExpertsGrad(e, x, counts, dFFN, weights,
                                        shared.getActivation());
  Value dx = grad.getDRows();
  if (dxGate)
    dx = e.add(dx, dxGate);
  setODS(shared, 0, dx);
  auto unstacked = [&](Value cotangent, Value weight) -> Value {
    return cotangent ? e.reshape(cotangent, shapeOf(weight)) : Value();
  };
  setODS(shared, 1, unstacked(grad.getDFc1Weight(), shared.getFc1Weight()));
  setODS(shared, 2, unstacked(grad.getDFc1Bias(), shared.getFc1Bias()));
  setODS(shared, 3, unstacked(grad.getDFc3Weight(), shared.getFc3Weight()));
  setODS(shared, 4, unstacked(grad.getDFc3Bias(), shared.getFc3Bias()));
  setODS(shared, 5, unstacked(grad.getDFc2Weight(), shared.getFc2Weight()));
  setODS(shared, 6, unstacked(grad.getDFc2Bias(), shared.getFc2Bias()));
  return success();
}

LogicalResult MoERule::auxLoss(AuxLossOp aux) {
  // Counts are constants: d score[t, e] = coeff E count[s, e] / (S L^2 k)
  // for token t of sequence s (L tokens each, S sequences), the same for
  // every token of a sequence.
  Value dLoss = dResults[0];
  if (!dLoss)
    return success();
  Value logits = aux.getLogits();
  Type elt = elementOf(logits);
  Shape shape = shapeOf(logits);
  int64_t t = shape[0], numExperts = shape[1];
  int64_t k = shapeOf(aux.getIds())[1];
  int64_t length = aux.getSeqLen().value_or(t);
  int64_t sequences = t / length;
  Value counts = e.reshape(e.idCounts(aux.getIds(), numExperts, elt),
                           {sequences, length, numExperts});
  Value perSequence = e.reduceSum(counts, {1}, /*keepdims=*/true);
  double factor = aux.getCoeff().convertToDouble() *
                  static_cast<double>(numExperts) /
                  (static_cast<double>(sequences) * length * length * k);
  Value dScores = e.reshape(
      e.expand(e.mul(perSequence, e.mul(dLoss, e.scalar(elt, factor))),
               {sequences, length, numExperts}),
      shape);
  ScoringFunction scoring = aux.getScoring();
  if (scoring == ScoringFunction::Softmax) {
    setODS(aux, 0, e.softmaxGrad(e.softmax(logits, 1), dScores, 1));
    return success();
  }
  // P = sigmoid(l) / sum_e sigmoid(l)
  Value s = e.unary<onnx::SigmoidOp>(logits);
  Value norm = e.reduceSum(s, {1}, true);
  Value dot = e.reduceSum(e.mul(dScores, s), {1}, true);
  Value ds = e.sub(e.div(dScores, norm), e.div(dot, e.mul(norm, norm)));
  setODS(aux, 0, scoresGrad(e, s, ds, ScoringFunction::Sigmoid));
  return success();
}

LogicalResult MoERule::gatherRows(GatherRowsOp gather) {
  // Rows added back at their indices; out-of-range indices read zeros, so
  // they write to one extra row that is cut off.
  Value dy = dResults[0];
  if (!dy)
    return success();
  Value input = gather.getInput();
  Shape shape = shapeOf(input);
  int64_t n = shapeOf(gather.getIndices())[0];
  Type i64 = e.builder().getI64Type();
  Value index = e.cast(gather.getIndices(), i64);
  Value outside = e.create<onnx::OrOp>(
      RankedTensorType::get({n}, e.builder().getI1Type()),
      {e.compare<onnx::LessOp>(index, e.scalar(i64, 0)),
       e.compare<onnx::GreaterOrEqualOp>(index, e.scalar(i64, shape[0]))});
  index = e.reshape(e.where(outside, e.scalar(i64, shape[0]), index), {n, 1});
  Value scattered = e.scatterNDAdd(
      e.splat(RankedTensorType::get({shape[0] + 1, shape[1]},
                                    elementOf(input)),
              0.0),
      index, dy);
  setODS(gather, 0, e.slice(scattered, 0, 0, shape[0]));
  return success();
}

LogicalResult MoERule::build() {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](RouterOp router) { return this->router(router); })
      .Case([&](DispatchOp dispatch) {
        // The rows went out to their slots; their cotangents come back
        // summed per token, as a combine with unit weights.
        Value dRows = dResults[0];
        if (!dRows)
          return success();
        Value input = dispatch.getInput();
        Value ones = e.splat(
            RankedTensorType::get(shapeOf(dispatch.getSlots()),
                                  elementOf(input)),
            1.0);
        auto sum = CombineOp::create(e.builder(), e.getLoc(),
                                     input.getType(), dRows,
                                     dispatch.getSlots(), ones);
        // Not a layer of its own (moe-instrument-layers).
        sum->setAttr(kBackwardAttrName, e.builder().getUnitAttr());
        setODS(dispatch, 0, sum.getResult());
        return success();
      })
      .Case([&](CombineOp combine) { return this->combine(combine); })
      .Case([&](ExpertsOp experts) { return this->experts(experts); })
      .Case([&](SharedExpertOp shared) { return sharedExpert(shared); })
      .Case([&](AuxLossOp aux) { return auxLoss(aux); })
      .Case([&](ZLossOp z) {
        // L = c mean_t lse_t^2: dl = c 2 lse_t / T softmax(l)
        Value dLoss = dResults[0];
        if (!dLoss)
          return success();
        Value logits = z.getLogits();
        Type elt = elementOf(logits);
        int64_t t = shapeOf(logits)[0];
        Value lse = e.reduceLogSumExp(logits, {1}, true);
        double factor = 2.0 * z.getCoeff().convertToDouble() /
                        static_cast<double>(t);
        Value perToken = e.mul(lse, e.mul(dLoss, e.scalar(elt, factor)));
        setODS(z, 0, e.mul(e.softmax(logits, 1), perToken));
        return success();
      })
      .Case([&](GatherRowsOp gather) { return gatherRows(gather); })
      .Case([&](AllToAllOp exchange) {
        // The reverse exchange with the forward's counts (no new count
        // exchange): rows go back to the ranks that sent them, in the
        // layout they were sent from. A uniform exchange is its own
        // transpose.
        Value dOutput = dResults[0];
        if (!dOutput)
          return success();
        SmallVector<Type> types{exchange.getInput().getType()};
        Value counts;
        if (exchange.isRagged()) {
          counts = exchange.getOutputCounts();
          types.push_back(exchange.getCounts().getType());
        }
        auto back = AllToAllOp::create(e.builder(), e.getLoc(), types, dOutput,
                                       counts, exchange.getGridAttr(),
                                       exchange.getGridAxesAttr());
        setODS(exchange, 0, back.getOutput());
        return success();
      })
      .Case([&](LayerOp) {
        return unsupported("decompose moe.layer before differentiating "
                           "(moe-decompose)");
      })
      .Default([&](Operation *) {
        return unsupported("no gradient rule for '" +
                           op->getName().getStringRef() + "'");
      });
}

} // namespace

LogicalResult buildMoEVJP(Emitter &e, spmd::Exchanges *x, Operation *op,
                          ArrayRef<Value> dResults,
                          MutableArrayRef<Value> dOperands) {
  return MoERule{e, x, op, dResults, dOperands}.build();
}

} // namespace mlir::moe::autodiff
