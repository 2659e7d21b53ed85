//===- MoEOps.cpp - moe dialect op verifiers ------------------------------===//
//
// Each diagnostic here has a case in test/dialects/moe/IR/invalid.mlir and a
// line in its op's Constraints list.
//
//===----------------------------------------------------------------------===//

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include "llvm/Support/MathExtras.h"
#include <cmath>
#include <cstdint>
#include <limits>

using namespace mlir;
using namespace mlir::moe;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

/// Checks that `v` has exactly `expected` as its shape.
static LogicalResult expectShape(Operation *op, Value v, StringRef name,
                                 ArrayRef<int64_t> expected) {
  ArrayRef<int64_t> actual = tensorType(v).getShape();
  if (actual == expected)
    return success();
  return op->emitOpError() << name << " must be " << shapeStr(expected)
                           << ", got " << shapeStr(actual);
}

static LogicalResult expectElementType(Operation *op, Value v, StringRef name,
                                       Type expected) {
  Type actual = tensorType(v).getElementType();
  if (actual == expected)
    return success();
  return op->emitOpError() << name << " element type " << actual
                           << " does not match " << expected;
}

//===----------------------------------------------------------------------===//
// Size bounds
//===----------------------------------------------------------------------===//
//
// Besides BoundedBuffers (every operand and result within 2^40 bytes), the
// sizes that attributes or i32 index types imply are bounded here, with
// overflow-checked arithmetic.

/// The most experts: expert ids are i32 (-1 marks an unrouted slot).
static constexpr int64_t kMaxExperts = std::numeric_limits<int32_t>::max();
/// The most rows in a dispatch buffer: slots hold flat row indices as i32.
static constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();

static LogicalResult verifyNumExperts(Operation *op, int64_t experts) {
  if (experts > kMaxExperts)
    return op->emitOpError() << experts << " experts are more than the "
                             << kMaxExperts
                             << " (2^31 - 1) that i32 expert ids can name";
  return success();
}

/// Checks that a dispatch buffer of `blocks` x `rowsPerBlock` rows has at
/// most kMaxRows rows; `what` says where the count comes from.
static LogicalResult verifyRowCount(Operation *op, int64_t blocks,
                                    int64_t rowsPerBlock,
                                    llvm::function_ref<void(
                                        InFlightDiagnostic &)> what) {
  int64_t rows;
  if (!llvm::MulOverflow(blocks, rowsPerBlock, rows) && rows <= kMaxRows)
    return success();
  InFlightDiagnostic diag = op->emitOpError();
  what(diag);
  diag << " more than the " << kMaxRows
       << " (2^31 - 1) dispatched rows that i32 slots can index";
  return diag;
}

/// Capacity mode: `experts` blocks of `capacity` rows.
static LogicalResult verifyCapacityRows(Operation *op, int64_t experts,
                                        int64_t capacity) {
  return verifyRowCount(op, experts, capacity, [&](InFlightDiagnostic &d) {
    d << "capacity " << capacity << " for " << experts << " experts makes";
  });
}

/// Dropless mode: one row per (token, slot) pair.
static LogicalResult verifyDroplessRows(Operation *op, int64_t tokens,
                                        int64_t k) {
  return verifyRowCount(op, tokens, k, [&](InFlightDiagnostic &d) {
    d << tokens << " tokens routed to k = " << k << " experts make";
  });
}

/// A float attribute that must be finite and positive (or, with
/// `allowZero`, non-negative).
static LogicalResult verifyFiniteAttr(Operation *op, StringRef name,
                                      double value, bool allowZero) {
  if (std::isfinite(value) && (allowZero ? value >= 0.0 : value > 0.0))
    return success();
  return op->emitOpError() << name << " must be finite and "
                           << (allowZero ? "non-negative" : "positive")
                           << ", got " << value;
}

//===----------------------------------------------------------------------===//
// Routing attributes (moe.router and moe.layer)
//===----------------------------------------------------------------------===//

namespace {
/// The routing configuration as moe.router and moe.layer both carry it.
struct Routing {
  ScoringFunction scoring;
  SelectionMethod selection;
  bool normalize;
  double scalingFactor;
  std::optional<int64_t> numGroups, groupTopk;
  std::optional<GroupScore> groupScore;
  std::optional<double> maskedScore;
  std::optional<int64_t> capacity;
  double sinkhornTolerance;
  int64_t sinkhornMaxIterations;
  double jitterEps;
  bool hasBias;

  template <typename OpT>
  static std::optional<double> maskedScoreOf(OpT op) {
    if (std::optional<APFloat> score = op.getMaskedScore())
      return score->convertToDouble();
    return std::nullopt;
  }

  template <typename OpT>
  static Routing of(OpT op, bool hasBias) {
    return {op.getScoring(),          op.getSelection(),
            op.getNormalize(),        op.getScalingFactor().convertToDouble(),
            op.getNumGroups(),        op.getGroupTopk(),
            op.getGroupScore(),       maskedScoreOf(op),
            op.getCapacity(),
            op.getSinkhornTolerance().convertToDouble(),
            static_cast<int64_t>(op.getSinkhornMaxIterations()),
            op.getJitterEps().convertToDouble(), hasBias};
  }
};
} // namespace

/// The routing a `given` router takes from the program: `[T, k]` ids and
/// weights of `elt`, present exactly for `given`, which takes nothing that
/// rescales or steers them.
static LogicalResult verifyGivenRouting(Operation *op, const Routing &r,
                                        Value ids, Value weights, int64_t T,
                                        int64_t k, Type elt) {
  bool given = r.selection == SelectionMethod::Given;
  if (!given && (ids || weights))
    return op->emitOpError() << "routed_ids and routed_weights are only "
                                "used by given, not "
                             << stringifySelectionMethod(r.selection);
  if (!given)
    return success();
  if (!ids || !weights)
    return op->emitOpError("given needs routed_ids and routed_weights");
  if (failed(expectShape(op, ids, "routed_ids", {T, k})) ||
      failed(expectShape(op, weights, "routed_weights", {T, k})) ||
      failed(expectElementType(op, weights, "routed_weights", elt)))
    return failure();
  if (r.normalize || r.scalingFactor != 1.0)
    return op->emitOpError("given takes its weights as they are: no "
                           "normalize, scaling_factor 1");
  return success();
}

static LogicalResult verifyRouting(Operation *op, const Routing &r, int64_t T,
                                   int64_t E, int64_t k) {
  if (failed(verifyNumExperts(op, E)))
    return failure();
  StringRef sel = stringifySelectionMethod(r.selection);
  bool grouped = r.selection == SelectionMethod::GroupedTopK;
  bool expertChoice = r.selection == SelectionMethod::ExpertChoice;
  bool sparseMixer = r.selection == SelectionMethod::SparseMixer;

  if (r.hasBias && r.selection != SelectionMethod::TopK && !grouped)
    return op->emitOpError() << "a selection bias is only used by topk and "
                                "grouped_topk, not "
                             << sel;
  bool anyGroupAttr = r.numGroups || r.groupTopk || r.groupScore;
  bool allGroupAttrs = r.numGroups && r.groupTopk && r.groupScore;
  if (grouped && !allGroupAttrs)
    return op->emitOpError(
        "grouped_topk needs num_groups, group_topk and group_score");
  if (!grouped && anyGroupAttr)
    return op->emitOpError() << "num_groups, group_topk and group_score are "
                                "only used by grouped_topk, not "
                             << sel;
  if (!grouped && r.maskedScore)
    return op->emitOpError() << "masked_score is only used by grouped_topk, "
                                "not "
                             << sel;
  // -inf: never chosen; NaN and +inf have no meaning as a score.
  if (r.maskedScore && !std::isfinite(*r.maskedScore) &&
      *r.maskedScore != -std::numeric_limits<double>::infinity())
    return op->emitOpError() << "masked_score must be finite or -inf, got "
                             << *r.maskedScore;
  if (grouped) {
    int64_t groups = *r.numGroups;
    if (groups < 1)
      return op->emitOpError() << "num_groups must be positive, got " << groups;
    if (E % groups != 0)
      return op->emitOpError() << "num_groups " << groups
                               << " does not divide the " << E << " experts";
    if (r.groupScore == GroupScore::Top2Sum && E / groups < 2)
      return op->emitOpError() << "top2_sum needs at least 2 experts per "
                                  "group, got "
                               << E / groups;
    if (*r.groupTopk < 1 || *r.groupTopk > groups)
      return op->emitOpError() << "group_topk " << *r.groupTopk
                               << " must be in [1, " << groups << "]";
    // A finite masked_score leaves the other groups' experts selectable.
    bool othersSelectable = r.maskedScore && std::isfinite(*r.maskedScore);
    int64_t reachable = *r.groupTopk * (E / groups);
    if (!othersSelectable && k > reachable)
      return op->emitOpError() << "k = " << k << " exceeds the " << reachable
                               << " experts in the " << *r.groupTopk
                               << " kept groups";
  }
  if (expertChoice) {
    if (!r.capacity)
      return op->emitOpError("expert_choice needs a capacity");
    if (*r.capacity < 1 || *r.capacity > T)
      return op->emitOpError() << "expert_choice capacity " << *r.capacity
                               << " must be in [1, " << T << "]";
    if (k != E)
      return op->emitOpError() << "expert_choice routes to all " << E
                               << " experts, so k must be " << E << ", got "
                               << k;
  } else if (k < 1 || k > E) {
    return op->emitOpError() << "k = " << k << " must be in [1, " << E << "]";
  }
  if (sparseMixer && (k != 2 || r.scoring != ScoringFunction::Softmax))
    return op->emitOpError("sparse_mixer needs k = 2 and softmax scoring");
  if (r.normalize && (expertChoice || sparseMixer))
    return op->emitOpError() << "normalize is not used with " << sel;
  if (failed(verifyFiniteAttr(op, "scaling_factor", r.scalingFactor,
                              /*allowZero=*/false)) ||
      failed(verifyFiniteAttr(op, "sinkhorn_tolerance", r.sinkhornTolerance,
                              /*allowZero=*/false)))
    return failure();
  if (r.sinkhornMaxIterations < 1)
    return op->emitOpError() << "sinkhorn_max_iterations must be at least 1, "
                                "got "
                             << r.sinkhornMaxIterations;
  return verifyFiniteAttr(op, "jitter_eps", r.jitterEps, /*allowZero=*/true);
}

//===----------------------------------------------------------------------===//
// Expert FFN weights (moe.experts, moe.shared_expert, moe.layer)
//===----------------------------------------------------------------------===//

namespace {
/// The projections of an FFN; `lead` is the expert dimension's size for
/// stacked expert weights and empty for a single FFN.
struct FFNWeights {
  Value fc1, fc1Bias, fc3, fc3Bias, fc2, fc2Bias;
  std::optional<int64_t> lead;
  StringRef prefix = "";
};
} // namespace

/// Verifies an FFN with rows of width `hidden` and element type `elt`, and
/// returns its output width M.
static FailureOr<int64_t> verifyFFN(Operation *op, const FFNWeights &w,
                                    ActivationAttr act, int64_t hidden,
                                    Type elt) {
  auto name = [&](StringRef n) { return (w.prefix + n).str(); };
  // ActivationAttr::get (as opposed to getChecked) skips the attribute's
  // verifier: check its parameters here too.
  if (failed(ActivationAttr::verify(
          [&] { return op->emitOpError() << "activation: "; }, act.getKind(),
          act.getLayout(), act.getAlpha(), act.getBeta(), act.getLimit(),
          act.getBody())))
    return failure();
  for (auto [v, n] : {std::pair{w.fc1, "fc1"}, {w.fc1Bias, "fc1_bias"},
                      {w.fc3, "fc3"}, {w.fc3Bias, "fc3_bias"},
                      {w.fc2, "fc2"}, {w.fc2Bias, "fc2_bias"}})
    if (v && failed(expectElementType(op, v, name(n), elt)))
      return failure();

  SmallVector<int64_t> lead;
  if (w.lead)
    lead.push_back(*w.lead);
  auto dims = [&](Value v) {
    return tensorType(v).getShape().drop_front(lead.size());
  };
  if (w.lead && tensorType(w.fc1).getDimSize(0) != *w.lead)
    return op->emitOpError() << name("fc1") << " has "
                             << tensorType(w.fc1).getDimSize(0)
                             << " experts, expected " << *w.lead;
  int64_t f1 = dims(w.fc1)[0];
  if (dims(w.fc1)[1] != hidden)
    return op->emitOpError() << name("fc1") << " input size "
                             << dims(w.fc1)[1]
                             << " does not match the row width " << hidden;
  bool fused = act.isFusedSwiGLU();
  if (fused && f1 % 2 != 0)
    return op->emitOpError() << "a fused swiglu needs an even " << name("fc1")
                             << " width, got " << f1;
  int64_t f = fused ? f1 / 2 : f1;
  bool separateSwiGLU = act.getKind() == ActivationKind::SwiGLU && !fused;
  if (separateSwiGLU && !w.fc3)
    return op->emitOpError() << "a separate swiglu needs " << name("fc3");
  if (fused && w.fc3)
    return op->emitOpError() << "a fused swiglu takes no " << name("fc3");
  if (w.fc3Bias && !w.fc3)
    return op->emitOpError() << name("fc3_bias") << " needs " << name("fc3");

  auto withLead = [&](ArrayRef<int64_t> tail) {
    SmallVector<int64_t> s(lead);
    s.append(tail.begin(), tail.end());
    return s;
  };
  int64_t m = dims(w.fc2)[0];
  if (failed(expectShape(op, w.fc2, name("fc2"), withLead({m, f}))))
    return failure();
  if (w.fc3 && failed(expectShape(op, w.fc3, name("fc3"), withLead({f, hidden}))))
    return failure();
  for (auto [bias, n, width] :
       {std::tuple{w.fc1Bias, "fc1_bias", f1}, {w.fc3Bias, "fc3_bias", f},
        {w.fc2Bias, "fc2_bias", m}})
    if (bias && failed(expectShape(op, bias, name(n), withLead({width}))))
      return failure();
  return m;
}

//===----------------------------------------------------------------------===//
// RouterOp
//===----------------------------------------------------------------------===//

LogicalResult RouterOp::verify() {
  RankedTensorType logits = getLogits().getType();
  int64_t T = logits.getDimSize(0), E = logits.getDimSize(1);
  int64_t k = getIds().getType().getDimSize(1);
  if (failed(expectShape(*this, getIds(), "ids", {T, k})) ||
      failed(expectShape(*this, getWeights(), "weights", {T, k})) ||
      failed(expectElementType(*this, getWeights(), "weights",
                               logits.getElementType())))
    return failure();
  if (getBias() &&
      (failed(expectShape(*this, getBias(), "bias", {E})) ||
       failed(expectElementType(*this, getBias(), "bias",
                                logits.getElementType()))))
    return failure();
  if (getCapacity() && getSelection() != SelectionMethod::ExpertChoice)
    return emitOpError("capacity is only used by expert_choice");
  Routing routing = Routing::of(*this, getBias() != nullptr);
  if (failed(verifyGivenRouting(*this, routing, getRoutedIds(),
                                getRoutedWeights(), T, k,
                                logits.getElementType())))
    return failure();
  return verifyRouting(*this, routing, T, E, k);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult verifyLoss(Operation *op, Value logits, Value loss,
                                double coeff) {
  if (failed(expectElementType(op, loss, "loss",
                               tensorType(logits).getElementType())))
    return failure();
  return verifyFiniteAttr(op, "coeff", coeff, /*allowZero=*/true);
}

/// A loss whose coefficient is 0 is the constant 0.
static OpFoldResult foldZeroCoeffLoss(Value loss, double coeff) {
  if (coeff != 0.0)
    return {};
  auto type = cast<ShapedType>(loss.getType());
  return DenseElementsAttr::get(
      type, FloatAttr::get(type.getElementType(), 0.0).getValue());
}

LogicalResult AuxLossOp::verify() {
  int64_t T = getLogits().getType().getDimSize(0);
  if (failed(verifyNumExperts(*this, getLogits().getType().getDimSize(1))))
    return failure();
  if (getIds().getType().getDimSize(0) != T)
    return emitOpError() << "ids has " << getIds().getType().getDimSize(0)
                         << " rows, expected " << T;
  if (std::optional<int64_t> len = getSeqLen()) {
    if (*len < 1)
      return emitOpError() << "seq_len must be positive, got " << *len;
    if (T % *len != 0)
      return emitOpError() << "seq_len " << *len << " does not divide the "
                           << T << " tokens";
  }
  return verifyLoss(*this, getLogits(), getLoss(),
                    getCoeff().convertToDouble());
}

OpFoldResult AuxLossOp::fold(FoldAdaptor) {
  return foldZeroCoeffLoss(getLoss(), getCoeff().convertToDouble());
}

LogicalResult ZLossOp::verify() {
  return verifyLoss(*this, getLogits(), getLoss(),
                    getCoeff().convertToDouble());
}

OpFoldResult ZLossOp::fold(FoldAdaptor) {
  return foldZeroCoeffLoss(getLoss(), getCoeff().convertToDouble());
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

LogicalResult DispatchOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t T = input.getDimSize(0), H = input.getDimSize(1);
  int64_t k = getIds().getType().getDimSize(1);
  int64_t E = getNumExperts();
  if (failed(expectShape(*this, getIds(), "ids", {T, k})) ||
      failed(expectShape(*this, getSlots(), "slots", {T, k})) ||
      failed(expectElementType(*this, getRows(), "rows",
                               input.getElementType())))
    return failure();
  if (E < 1)
    return emitOpError("counts must have at least one expert");
  if (failed(verifyNumExperts(*this, E)))
    return failure();

  std::optional<int64_t> capacity = getCapacity();
  std::optional<DropPolicy> policy = getDropPolicy();
  if (capacity) {
    if (!policy)
      return emitOpError("a capacity needs a drop_policy");
    if (*capacity < 1)
      return emitOpError() << "capacity must be at least 1, got " << *capacity;
    // T * k cannot overflow: [T, k] is a bounded buffer.
    int64_t rowsPerExpert =
        getOffsets() ? std::min(*capacity, T * k) : *capacity;
    if (failed(verifyCapacityRows(*this, E, rowsPerExpert)) ||
        failed(expectShape(*this, getRows(), "rows", {E, rowsPerExpert, H})))
      return failure();
    if (getOffsets() &&
        (policy == DropPolicy::Probs ||
         getOffsets().getType() != getCounts().getType()))
      return emitOpError("offsets need the position or choice drop policy "
                         "and the type of counts");
  } else {
    if (getOffsets())
      return emitOpError("offsets need a capacity");
    if (policy)
      return emitOpError("a drop_policy needs a capacity");
    if (failed(verifyDroplessRows(*this, T, k)) ||
        failed(expectShape(*this, getRows(), "rows", {T * k, H})))
      return failure();
  }
  bool byProbs = policy == DropPolicy::Probs;
  if (byProbs && !getWeights())
    return emitOpError("the probs drop policy needs weights");
  if (!byProbs && getWeights())
    return emitOpError("weights are only used by the probs drop policy");
  if (getWeights() &&
      (failed(expectShape(*this, getWeights(), "weights", {T, k})) ||
       failed(expectElementType(*this, getWeights(), "weights",
                                input.getElementType()))))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// ExpertsOp / SharedExpertOp
//===----------------------------------------------------------------------===//

/// Verifies the operands of moe.experts (and of its VJP) and returns the
/// shape of the op's output rows.
static FailureOr<SmallVector<int64_t>>
verifyExpertsOperands(Operation *op, RankedTensorType rows, Value counts,
                      const FFNWeights &weights, ActivationAttr activation) {
  int64_t E = *weights.lead;
  int64_t G = tensorType(counts).getDimSize(0);
  if (E < 1)
    return op->emitOpError("fc1 must have at least one expert");
  if (failed(verifyNumExperts(op, E)))
    return failure();
  if (G % E != 0)
    return op->emitOpError() << "counts has " << G
                             << " groups, not a multiple of the " << E
                             << " experts";
  if (rows.getRank() == 3 && rows.getDimSize(0) != G)
    return op->emitOpError() << "capacity rows have " << rows.getDimSize(0)
                             << " blocks for " << G << " groups";
  FailureOr<int64_t> m = verifyFFN(op, weights, activation,
                                   rows.getShape().back(),
                                   rows.getElementType());
  if (failed(m))
    return failure();
  SmallVector<int64_t> expected(rows.getShape());
  expected.back() = *m;
  return expected;
}

/// Verifies the operands of `op` (moe.experts or its VJP) and that
/// `output`, called `name`, has the rows of the experts' outputs.
template <typename OpTy>
static LogicalResult verifyExpertsRows(OpTy op, Value output, StringRef name) {
  RankedTensorType rows = op.getRows().getType();
  FailureOr<SmallVector<int64_t>> expected = verifyExpertsOperands(
      op, rows, op.getCounts(),
      {op.getFc1Weight(), op.getFc1Bias(), op.getFc3Weight(), op.getFc3Bias(),
       op.getFc2Weight(), op.getFc2Bias(), op.getNumExperts()},
      op.getActivation());
  if (failed(expected) || failed(expectShape(op, output, name, *expected)) ||
      failed(expectElementType(op, output, name, rows.getElementType())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Custom activation bodies
//===----------------------------------------------------------------------===//

bool mlir::moe::isActivationBodyOp(Operation *op) {
  // A constant is a scalar (a float, or a bool for a select).
  if (auto constant = dyn_cast<arith::ConstantOp>(op))
    return isa<FloatType>(constant.getType()) ||
           constant.getType().isInteger(1);
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp,
             arith::MaxNumFOp, arith::MinNumFOp, arith::CmpFOp,
             arith::SelectOp, arith::AndIOp, arith::OrIOp, arith::XOrIOp,
             arith::ExtFOp, arith::TruncFOp, math::ExpOp, math::ExpM1Op,
             math::LogOp, math::Log1pOp, math::TanhOp, math::ErfOp,
             math::SqrtOp, math::RsqrtOp, math::PowFOp, math::AbsFOp,
             math::SinOp, math::CosOp, func::ReturnOp>(op);
}

func::FuncOp mlir::moe::lookupActivationBody(Operation *from,
                                             ActivationAttr activation) {
  if (!activation.getBody())
    return {};
  return SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      from, activation.getBody());
}

void mlir::moe::eraseUnusedActivationBodies(Operation *symbolTable) {
  if (!symbolTable->hasTrait<OpTrait::SymbolTable>())
    return;
  for (Operation &op : llvm::make_early_inc_range(
           symbolTable->getRegion(0).front()))
    if (auto body = dyn_cast<func::FuncOp>(op);
        body && body->hasAttr(kActivationBodyAttrName) &&
        SymbolTable::symbolKnownUseEmpty(body, symbolTable))
      body.erase();
}

/// A custom activation's body is a scalar `(elt) -> elt` function of one
/// block of the ops isActivationBodyOp allows.
static LogicalResult verifyActivationBody(Operation *op,
                                          ActivationAttr activation, Type elt,
                                          SymbolTableCollection &symbols) {
  FlatSymbolRefAttr name = activation.getBody();
  if (!name)
    return success();
  auto body = symbols.lookupNearestSymbolFrom<func::FuncOp>(op, name);
  if (!body)
    return op->emitOpError() << "activation body " << name
                             << " is not a func.func of the module";
  FunctionType type = body.getFunctionType();
  if (type.getNumInputs() != 1 || type.getNumResults() != 1 ||
      type.getInput(0) != elt || type.getResult(0) != elt)
    return op->emitOpError()
           << "activation body " << name << " must map one " << elt
           << " to one, not " << type;
  if (body.isExternal() || !body.getBody().hasOneBlock())
    return op->emitOpError() << "activation body " << name
                             << " must be one block of arith and math ops";
  for (Operation &inner : body.getBody().front())
    if (!isActivationBodyOp(&inner))
      return op->emitOpError()
             << "activation body " << name << " holds '" << inner.getName()
             << "', which is not a scalar arith or math op an activation "
                "may use (one the backward differentiates)";
  return success();
}

LogicalResult ExpertsOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyActivationBody(*this, getActivation(),
                              getRows().getType().getElementType(), symbols);
}

LogicalResult ExpertsGradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyActivationBody(*this, getActivation(),
                              getRows().getType().getElementType(), symbols);
}

LogicalResult SharedExpertOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyActivationBody(*this, getActivation(),
                              getInput().getType().getElementType(), symbols);
}

LogicalResult LayerOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyActivationBody(*this, getActivation(),
                              getInput().getType().getElementType(), symbols);
}

LogicalResult ExpertsOp::verify() {
  return verifyExpertsRows(*this, getOutput(), "output");
}

LogicalResult ExpertsGradOp::verify() {
  if (failed(verifyExpertsRows(*this, getDOutput(), "d_output")))
    return failure();
  for (auto [value, cotangent, name] :
       {std::tuple{getRows(), getDRows(), "rows"},
        {getFc1Weight(), getDFc1Weight(), "fc1"},
        {getFc1Bias(), getDFc1Bias(), "fc1_bias"},
        {getFc3Weight(), getDFc3Weight(), "fc3"},
        {getFc3Bias(), getDFc3Bias(), "fc3_bias"},
        {getFc2Weight(), getDFc2Weight(), "fc2"},
        {getFc2Bias(), getDFc2Bias(), "fc2_bias"}}) {
    if (!value != !cotangent)
      return emitOpError() << "has " << (value ? "no" : "a")
                           << " cotangent result for " << name
                           << (value ? ", which is given" : ", which is not");
    if (!value)
      continue;
    // Per group: a cotangent row per group where the weight has one per
    // expert (not the rows, which have no expert dimension).
    Type expected = value.getType();
    if (getPerGroup() && value != getRows()) {
      auto type = cast<RankedTensorType>(expected);
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = getCounts().getType().getDimSize(0);
      expected = type.clone(shape);
    }
    if (expected != cotangent.getType())
      return emitOpError() << "cotangent of " << name << " has type "
                           << cotangent.getType() << ", expected "
                           << expected;
  }
  return success();
}

LogicalResult SharedExpertOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t T = input.getDimSize(0), H = input.getDimSize(1);
  FailureOr<int64_t> m = verifyFFN(
      *this,
      {getFc1Weight(), getFc1Bias(), getFc3Weight(), getFc3Bias(),
       getFc2Weight(), getFc2Bias(), std::nullopt},
      getActivation(), H, input.getElementType());
  if (failed(m))
    return failure();
  if (getGate() &&
      (failed(expectShape(*this, getGate(), "gate", {1, H})) ||
       failed(expectElementType(*this, getGate(), "gate",
                                input.getElementType()))))
    return failure();
  if (failed(expectShape(*this, getOutput(), "output", {T, *m})) ||
      failed(expectElementType(*this, getOutput(), "output",
                               input.getElementType())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// CombineOp
//===----------------------------------------------------------------------===//

LogicalResult CombineOp::verify() {
  RankedTensorType rows = getRows().getType();
  ArrayRef<int64_t> slots = getSlots().getType().getShape();
  if (failed(expectShape(*this, getWeights(), "weights", slots)) ||
      failed(expectElementType(*this, getWeights(), "weights",
                               rows.getElementType())) ||
      failed(expectShape(*this, getOutput(), "output",
                         {slots[0], rows.getShape().back()})) ||
      failed(expectElementType(*this, getOutput(), "output",
                               rows.getElementType())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AllToAllOp
//===----------------------------------------------------------------------===//

/// Checks `axes` against the `shard.grid` named `gridName` and returns the
/// number of ranks they span.
static FailureOr<int64_t> verifyGridAxes(Operation *op,
                                         FlatSymbolRefAttr gridName,
                                         ArrayRef<int16_t> axes,
                                         SymbolTableCollection &symbols) {
  auto grid = symbols.lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  if (!grid)
    return op->emitOpError() << "no shard.grid named " << gridName;
  ArrayRef<int64_t> shape = grid.getShape();
  llvm::SmallSet<int16_t, 4> seen;
  int64_t groupSize = 1;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
      return op->emitOpError() << "grid axis " << axis
                               << " is out of range for a grid of rank "
                               << shape.size();
    if (!seen.insert(axis).second)
      return op->emitOpError() << "grid axis " << axis << " is repeated";
    if (ShapedType::isDynamic(shape[axis]))
      return op->emitOpError() << "grid axis " << axis << " has a dynamic size";
    // A size-0 axis has no ranks to exchange with (and would divide by 0).
    if (shape[axis] < 1)
      return op->emitOpError() << "grid axis " << axis << " has size "
                               << shape[axis];
    if (llvm::MulOverflow(groupSize, shape[axis], groupSize))
      return op->emitOpError("grid_axes span more than 2^63 - 1 ranks");
  }
  return groupSize;
}

int64_t mlir::moe::getGroupSize(Operation *op, FlatSymbolRefAttr gridName,
                                ArrayRef<int16_t> axes) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  if (!grid)
    return 0;
  ArrayRef<int64_t> shape = grid.getShape();
  int64_t size = 1;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
        ShapedType::isDynamic(shape[axis]) ||
        llvm::MulOverflow(size, shape[axis], size))
      return 0;
  }
  return size;
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> groupSize =
      verifyGridAxes(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(groupSize))
    return failure();
  if (isRagged()) {
    int64_t numCounts = getCounts().getType().getDimSize(0);
    if (numCounts % *groupSize != 0)
      return emitOpError() << "the " << numCounts
                           << " counts do not split over " << *groupSize
                           << " ranks";
    return success();
  }
  int64_t blocks = getInput().getType().getDimSize(0);
  if (blocks % *groupSize != 0)
    return emitOpError() << "dimension 0 (" << blocks
                         << ") does not split over " << *groupSize << " ranks";
  return success();
}

int64_t AllToAllOp::getGroupSize() {
  return moe::getGroupSize(*this, getGridAttr(), getGridAxes());
}

//===----------------------------------------------------------------------===//
// ExpertCountsOp / PrefixSumOp / GatherRowsOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertCountsOp::verify() {
  int64_t E = getCounts().getType().getDimSize(0);
  if (E < 1)
    return emitOpError("counts must have at least one expert");
  return verifyNumExperts(*this, E);
}

LogicalResult PrefixSumOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGridAxes(*this, getGridAttr(), getGridAxes(), symbols);
}

LogicalResult GatherRowsOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(expectShape(*this, getOutput(), "result",
                         {getIndices().getType().getDimSize(0),
                          input.getDimSize(1)})) ||
      failed(expectElementType(*this, getOutput(), "result",
                               input.getElementType())))
    return failure();
  return success();
}

LogicalResult AllToAllOp::verify() {
  RankedTensorType in = getInput().getType(), out = getOutput().getType();
  if (!isRagged()) {
    if (getOutputCounts())
      return emitOpError("output_counts needs input counts");
    if (in != out)
      return emitOpError() << "a uniform exchange keeps its type, got " << in
                           << " -> " << out;
    return success();
  }
  if (!getOutputCounts())
    return emitOpError("a ragged exchange returns output_counts");
  if (getOutputCounts().getType() != getCounts().getType())
    return emitOpError("output_counts must have the type of counts");
  if (in.getRank() != out.getRank() ||
      in.getShape().drop_front() != out.getShape().drop_front() ||
      in.getElementType() != out.getElementType())
    return emitOpError() << "a ragged exchange keeps the row shape and "
                            "element type, got "
                         << in << " -> " << out;
  return success();
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

LogicalResult LayerOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t T = input.getDimSize(0), H = input.getDimSize(1);
  RankedTensorType logits = getLogits().getType();
  int64_t E = logits.getDimSize(1);
  Type elt = input.getElementType();
  if (logits.getDimSize(0) != T)
    return emitOpError() << "logits has " << logits.getDimSize(0)
                         << " rows for " << T << " tokens";
  if (failed(expectElementType(*this, getLogits(), "logits", elt)))
    return failure();
  if (getSelectionBias() &&
      (failed(expectShape(*this, getSelectionBias(), "selection_bias", {E})) ||
       failed(expectElementType(*this, getSelectionBias(), "selection_bias",
                                elt))))
    return failure();
  Routing routing = Routing::of(*this, getSelectionBias() != nullptr);
  if (failed(verifyGivenRouting(*this, routing, getRoutedIds(),
                                getRoutedWeights(), T, getK(), elt)) ||
      failed(verifyRouting(*this, routing, T, E, getK())))
    return failure();
  if (getSelection() == SelectionMethod::ExpertChoice) {
    if (getDropPolicy())
      return emitOpError("expert_choice drops no tokens, so takes no "
                         "drop_policy");
  } else if (getCapacity().has_value() != getDropPolicy().has_value()) {
    return emitOpError("capacity and drop_policy must be given together");
  } else if (std::optional<int64_t> capacity = getCapacity();
             capacity && *capacity < 1) {
    // The I64Attr getter is unsigned: compare the signed value.
    return emitOpError() << "capacity must be at least 1, got " << *capacity;
  }
  // The row buffer that moe-decompose's moe.dispatch fills: [E, C, H] with
  // a capacity (expert_choice's C is at most T), [T*k, H] without.
  SmallVector<int64_t> rowsShape;
  if (std::optional<int64_t> capacity = getCapacity()) {
    if (failed(verifyCapacityRows(*this, E, *capacity)))
      return failure();
    rowsShape = {E, *capacity, H};
  } else {
    if (failed(verifyDroplessRows(*this, T, getK())))
      return failure();
    rowsShape = {T * static_cast<int64_t>(getK()), H};
  }
  if (failed(verifyBufferSize(*this, "the dispatched rows " + shapeStr(rowsShape),
                              rowsShape, elt)))
    return failure();

  FailureOr<int64_t> m =
      verifyFFN(*this,
                {getFc1Weight(), getFc1Bias(), getFc3Weight(), getFc3Bias(),
                 getFc2Weight(), getFc2Bias(), E},
                getActivation(), H, elt);
  if (failed(m))
    return failure();
  rowsShape.back() = *m;
  if (failed(verifyBufferSize(*this,
                              "the experts' output rows " + shapeStr(rowsShape),
                              rowsShape, elt)))
    return failure();
  if (getSharedFc1().operator bool() != getSharedFc2().operator bool())
    return emitOpError("shared_fc1 and shared_fc2 must be given together");
  if ((getSharedFc3() || getSharedGate()) && !getSharedFc1())
    return emitOpError("shared_fc3 and shared_gate need shared_fc1");
  if (getSharedFc1()) {
    FFNWeights shared{getSharedFc1(), {}, getSharedFc3(), {}, getSharedFc2(),
                      {},             std::nullopt, "shared_"};
    FailureOr<int64_t> sharedM =
        verifyFFN(*this, shared, getActivation(), H, elt);
    if (failed(sharedM))
      return failure();
    if (*sharedM != *m)
      return emitOpError() << "the shared expert's output width " << *sharedM
                           << " differs from the experts' " << *m;
    if (getSharedGate() &&
        (failed(expectShape(*this, getSharedGate(), "shared_gate", {1, H})) ||
         failed(expectElementType(*this, getSharedGate(), "shared_gate", elt))))
      return failure();
  }
  if (failed(expectShape(*this, getOutput(), "output", {T, *m})) ||
      failed(expectElementType(*this, getOutput(), "output", elt)))
    return failure();
  return success();
}

#define GET_OP_CLASSES
#include "dialects/moe/IR/MoEOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Placement
//===----------------------------------------------------------------------===//

LogicalResult SlotTableOp::verify() {
  // I64Attr's getters are unsigned.
  int64_t E = getExpertsAttr().getInt(), layer = getLayerAttr().getInt();
  if (layer < 0)
    return emitOpError("layer must be at least 0, got ") << layer;
  if (E < 1)
    return emitOpError("experts must be at least 1, got ") << E;
  if (failed(verifyNumExperts(*this, E)))
    return failure();
  ArrayRef<int32_t> initial = getInitial();
  int64_t P = getTable().getType().getDimSize(0);
  if (static_cast<int64_t>(initial.size()) != P)
    return emitOpError("initial has ")
           << initial.size() << " entries for " << P << " slots";
  llvm::BitVector placed(E);
  for (auto [slot, expert] : llvm::enumerate(initial)) {
    if (expert < 0 || expert >= E)
      return emitOpError("slot ") << slot << " holds expert " << expert
                                  << ", not one of the " << E << " experts";
    placed.set(expert);
  }
  if (int missing = placed.find_first_unset(); missing >= 0)
    return emitOpError("expert ") << missing << " has no slot";
  return success();
}

/// Whether `table` is a constant `table[p] = p`.
static bool isIdentityTable(Value table) {
  DenseIntElementsAttr values;
  if (!matchPattern(table, m_Constant(&values)))
    return false;
  int64_t p = 0;
  for (const APInt &v : values)
    if (v.getSExtValue() != p++)
      return false;
  return true;
}

LogicalResult PlaceOp::verify() {
  // I64Attr's getter is unsigned.
  int64_t ranks = getRanksAttr().getInt();
  int64_t P = getTable().getType().getDimSize(0);
  if (ranks < 1)
    return emitOpError("ranks must be at least 1, got ") << ranks;
  if (P % ranks != 0)
    return emitOpError() << "the " << P << " slots do not split over " << ranks
                         << " ranks";
  if ((ranks > 1) != static_cast<bool>(getSource()))
    return emitOpError("takes a source rank exactly when ranks > 1");
  return success();
}

OpFoldResult PlaceOp::fold(FoldAdaptor) {
  return isIdentityTable(getTable()) ? getIds() : Value();
}

LogicalResult SlotGradSumOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!getGrid()) {
    if (!getGridAxes().empty())
      return emitOpError("grid_axes need a grid");
    return success();
  }
  FailureOr<int64_t> groupSize =
      verifyGridAxes(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(groupSize))
    return failure();
  int64_t P = getTable().getType().getDimSize(0);
  if (P % *groupSize != 0)
    return emitOpError() << "the " << P << " slots do not split over "
                         << *groupSize << " ranks";
  int64_t S = P / *groupSize;
  if (getPartials().getType().getDimSize(0) != P ||
      getOutput().getType().getDimSize(0) != S)
    return emitOpError() << "over " << *groupSize << " ranks takes " << P
                         << " rows (one per source and local slot) and "
                            "returns "
                         << S << ", got " << getPartials().getType() << " -> "
                         << getOutput().getType();
  return success();
}

LogicalResult SlotGradSumOp::verify() {
  RankedTensorType in = getPartials().getType(), out = getOutput().getType();
  if (in.getShape().drop_front() != out.getShape().drop_front() ||
      in.getElementType() != out.getElementType() ||
      in.getRank() != out.getRank())
    return emitOpError() << "keeps the row shape and element type, got " << in
                         << " -> " << out;
  // Without a grid one rank holds every slot; the group size needs the
  // symbol table (verifySymbolUses).
  if (!getGrid()) {
    int64_t P = getTable().getType().getDimSize(0);
    if (in.getDimSize(0) != P || out.getDimSize(0) != P)
      return emitOpError() << "on one rank takes and returns a row per slot ("
                           << P << "), got " << in << " -> " << out;
  }
  return success();
}

int64_t SlotGradSumOp::getGroupSize() {
  if (!getGrid())
    return 1;
  return moe::getGroupSize(*this, getGridAttr(), getGridAxes());
}

LogicalResult SlotWeightsOp::verify() {
  RankedTensorType input = getInput().getType();
  SmallVector<int64_t> shape(input.getShape());
  shape[0] = getTable().getType().getDimSize(0);
  if (failed(expectShape(*this, getOutput(), "result", shape)) ||
      failed(expectElementType(*this, getOutput(), "result",
                               input.getElementType())))
    return failure();
  return success();
}

OpFoldResult SlotWeightsOp::fold(FoldAdaptor) {
  if (getInput().getType() == getOutput().getType() &&
      isIdentityTable(getTable()))
    return getInput();
  return {};
}
