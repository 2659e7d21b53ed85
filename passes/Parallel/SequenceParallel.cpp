//===- SequenceParallel.cpp - dense layers on each rank's tokens ----------===//
//
// moe-partition gives each rank its block of an MoE block's tokens and
// gathers the block's result back, so everything between blocks (attention,
// norms, the LM head) runs whole on every rank. This pass runs those layers
// on the same blocks: it follows the token dimension forward from the
// blocks' results and the program's inputs through ops that keep tokens
// apart, gives each such op this rank's block, and gathers a value only
// where an op mixes tokens along it (attention's keys and values) or the
// program returns it. See MoESequenceParallelPass in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/moe/IR/MoEDialect.h"
#include "dialects/onnx/IR/ONNXBuilders.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/Parallel/ShardLayer.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOESEQUENCEPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::spmd;
using onnx_lowering::axesOf;
using onnx_lowering::getConstantInts;
using onnx_lowering::intAttr;
using onnx_lowering::normalizeAxis;
using onnx_lowering::optionalOperand;
using onnx_lowering::product;
using onnx_lowering::Shape;

namespace {

/// The axes moe-partition splits an MoE block's tokens over.
constexpr Axis kTokenAxes[] = {Axis::DP, Axis::DPShard, Axis::EP};

/// How a rewritten op takes one operand: whole, or this rank's block along
/// `dim`.
struct Need {
  static constexpr int64_t kWhole = -1;
  int64_t dim = kWhole;
};

/// How an op runs on blocks: what each operand must be and along which
/// dimension each result is split.
struct BlockForm {
  SmallVector<Need> operands;
  SmallVector<int64_t> resultDims;
};

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// The dimension of `to` that holds the block of dimension `dim` of `from`
/// when one is reshaped into the other: the same elements before it, and
/// the dimension kept, merged with inner ones, or split into an outer one
/// that `ranks` divides. -1 when the blocks do not survive the reshape.
int64_t reshapedDim(ArrayRef<int64_t> from, ArrayRef<int64_t> to, int64_t dim,
                    int64_t ranks) {
  if (product(from) != product(to))
    return -1;
  int64_t before = product(from.take_front(dim));
  int64_t size = from[dim];
  int64_t prefix = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(to.size()); ++d) {
    if (prefix == before && to[d] != 1) {
      if (to[d] % size == 0 && size % ranks == 0)
        return d; // the same dimension, or merged with inner ones
      if (size % to[d] == 0 && to[d] % ranks == 0)
        return d; // split: its outer part holds the blocks
      return -1;
    }
    if (prefix > before)
      return -1;
    prefix *= to[d];
  }
  return -1;
}


class SequenceParallel {
public:
  SequenceParallel(func::FuncOp func, PlanAttr plan, bool zigzag)
      : func(func), b(func.getContext()), x(b, plan),
        ranks(x.size(kTokenAxes)), axes(x.liveAxes(kTokenAxes)),
        zigzag(zigzag) {}

  void run();

private:
  /// This rank's block of `v` and the dimension it splits, if it has one.
  std::optional<std::pair<Value, int64_t>> blockOf(Value v) const {
    auto it = blocks.find(v);
    if (it == blocks.end())
      return std::nullopt;
    return it->second;
  }
  int64_t blockDim(Value v) const {
    auto it = blocks.find(v);
    return it == blocks.end() ? Need::kWhole : it->second.second;
  }
  bool splittable(Value v, int64_t dim) const {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() && dim >= 0 &&
           dim < type.getRank() && type.getDimSize(dim) % pieces() == 0;
  }
  /// How many pieces a split dimension is cut into.
  int64_t pieces() const { return zigzag ? 2 * ranks : ranks; }
  bool canZigzag();
  bool isTokenExchange(Operation *op, bool marked) const;
  Value reorderChunks(Location loc, Value v, int64_t dim, bool toZigzag);
  Value sliceTokens(Location loc, Value whole, int64_t dim);
  Value gatherTokens(Location loc, Value block, int64_t dim);

  std::optional<BlockForm> formOf(Operation *op) const;
  std::optional<BlockForm> elementwiseForm(Operation *op) const;
  std::optional<BlockForm> matmulForm(Operation *op) const;
  std::optional<BlockForm> shapeForm(Operation *op) const;
  std::optional<BlockForm> reductionForm(Operation *op) const;
  std::optional<BlockForm> indexingForm(Operation *op) const;
  std::optional<BlockForm> formFor(Operation *op, int64_t dim) const;

  Value blockOperand(Operation *at, Value v, int64_t dim);
  Value whole(Operation *at, Value v);
  bool wholeIsFree(Value v);
  void runOnBlocks(Operation *op, const BlockForm &form);

  func::FuncOp func;
  OpBuilder b;
  Exchanges x;
  int64_t ranks;
  SmallVector<int16_t> axes;
  /// Rank r holds chunks r and 2R-1-r of 2R along a split dimension rather
  /// than block r: with a causal mask, each rank's queries then see as
  /// many keys as another's.
  bool zigzag;
  /// Values that have a block on this rank: the block and its dimension.
  DenseMap<Value, std::pair<Value, int64_t>> blocks;
  DenseMap<Value, Value> gathered;
  /// Blocks taken locally from values every rank holds whole.
  DenseMap<std::pair<Value, int64_t>, Value> slices;
  DenseMap<Value, bool> freeWhole;
  SmallVector<Operation *> created;
};

std::optional<BlockForm> SequenceParallel::elementwiseForm(Operation *op) const {
  auto outType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!outType || op->getNumResults() != 1)
    return std::nullopt;
  int64_t rank = outType.getRank();
  // The output dimension of the largest operand that has a block (not a
  // bias that an input's block made).
  int64_t outDim = Need::kWhole, largest = 0;
  for (Value v : op->getOperands())
    if (int64_t d = blockDim(v); d != Need::kWhole) {
      auto type = cast<RankedTensorType>(v.getType());
      if (type.getNumElements() > largest) {
        largest = type.getNumElements();
        outDim = d + rank - type.getRank();
      }
    }
  if (outDim < 0 || outType.getDimSize(outDim) % pieces() != 0)
    return std::nullopt;
  BlockForm form;
  for (Value v : op->getOperands()) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type) { // an omitted optional input
      form.operands.push_back({Need::kWhole});
      continue;
    }
    int64_t d = outDim - (rank - type.getRank());
    // Broadcast along the split dimension: every rank takes it whole.
    bool broadcast = d < 0 || type.getDimSize(d) == 1;
    form.operands.push_back({broadcast ? Need::kWhole : d});
  }
  form.resultDims.push_back(outDim);
  return form;
}

std::optional<BlockForm> SequenceParallel::matmulForm(Operation *op) const {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  if (!isa<RankedTensorType>(lhs.getType()) ||
      !isa<RankedTensorType>(rhs.getType()))
    return std::nullopt;
  int64_t lr = shapeOf(lhs).size(), rr = shapeOf(rhs).size();
  int64_t rank = shapeOf(op->getResult(0)).size();
  BlockForm form;
  if (isa<onnx::GemmOp>(op)) {
    // Rows of A (its dimension 1 when transposed) are rows of the result.
    int64_t rowDim = intAttr(op, "transA", 0) ? 1 : 0;
    if (blockDim(lhs) != rowDim)
      return std::nullopt;
    form.operands = {{rowDim}, {Need::kWhole}};
    if (op->getNumOperands() == 3 &&
        isa<RankedTensorType>(op->getOperand(2).getType())) {
      ArrayRef<int64_t> c = shapeOf(op->getOperand(2));
      bool perRow = c.size() == 2 && c[0] != 1;
      form.operands.push_back({perRow ? 0 : Need::kWhole});
    }
    form.resultDims.push_back(0);
    return form;
  }
  if (lr < 2 || rr < 2)
    return std::nullopt;
  // Prefer A's block: its rows (M) or a batch dimension.
  if (int64_t d = blockDim(lhs); d != Need::kWhole && d != lr - 1) {
    int64_t out = d + rank - lr;
    form.operands.push_back({d});
    if (d == lr - 2) {
      form.operands.push_back({Need::kWhole});
    } else {
      int64_t rd = out - (rank - rr);
      bool broadcast = rd < 0 || shapeOf(rhs)[rd] == 1;
      form.operands.push_back({broadcast ? Need::kWhole : rd});
    }
    form.resultDims.push_back(out);
    return form;
  }
  // B's columns (N) or a batch dimension; never its contraction (K).
  if (int64_t d = blockDim(rhs); d != Need::kWhole && d != rr - 2) {
    int64_t out = d + rank - rr;
    if (d == rr - 1) {
      form.operands.push_back({Need::kWhole});
    } else {
      int64_t ld = out - (rank - lr);
      bool broadcast = ld < 0 || shapeOf(lhs)[ld] == 1;
      form.operands.push_back({broadcast ? Need::kWhole : ld});
    }
    form.operands.push_back({d});
    form.resultDims.push_back(out);
    return form;
  }
  return std::nullopt;
}

/// The form of an op that takes its first operand's block along `dim` and
/// its other operands whole; the caller adds the results' dimensions.
BlockForm firstOperandForm(Operation *op, int64_t dim) {
  BlockForm form;
  form.operands.assign(op->getNumOperands(), {Need::kWhole});
  form.operands[0] = {dim};
  return form;
}

std::optional<BlockForm> SequenceParallel::shapeForm(Operation *op) const {
  Value in = op->getOperand(0);
  int64_t d = blockDim(in), rank = shapeOf(in).size();
  BlockForm form = firstOperandForm(op, d);
  if (auto transpose = dyn_cast<onnx::TransposeOp>(op)) {
    auto perm = op->getAttrOfType<DenseI64ArrayAttr>("perm");
    SmallVector<int64_t> order;
    if (perm)
      llvm::append_range(order, perm.asArrayRef());
    else
      for (int64_t i = rank - 1; i >= 0; --i)
        order.push_back(i);
    form.resultDims.push_back(llvm::find(order, d) - order.begin());
    return form;
  }
  if (isa<onnx::ReshapeOp, onnx::UnsqueezeOp, onnx::SqueezeOp,
          onnx::FlattenOp>(op)) {
    // Squeeze with no axes drops every 1, a block of one row included.
    if (isa<onnx::SqueezeOp>(op) && op->getNumOperands() < 2)
      return std::nullopt;
    int64_t out =
        reshapedDim(shapeOf(in), shapeOf(op->getResult(0)), d, pieces());
    if (out < 0)
      return std::nullopt;
    form.resultDims.push_back(out);
    return form;
  }
  if (isa<onnx::ExpandOp>(op)) {
    ArrayRef<int64_t> outShape = shapeOf(op->getResult(0));
    int64_t out = d + outShape.size() - rank;
    if (out < 0 || out >= static_cast<int64_t>(outShape.size()) ||
        outShape[out] != shapeOf(in)[d])
      return std::nullopt;
    form.resultDims.push_back(out);
    return form;
  }
  if (isa<onnx::SliceOp>(op)) {
    std::optional<Shape> starts = getConstantInts(op->getOperand(1));
    if (!starts)
      return std::nullopt;
    Shape sliced;
    if (Value axes = optionalOperand(op, 3)) {
      std::optional<Shape> given = getConstantInts(axes);
      if (!given)
        return std::nullopt;
      sliced = *given;
    } else {
      for (int64_t i = 0; i < static_cast<int64_t>(starts->size()); ++i)
        sliced.push_back(i);
    }
    if (llvm::any_of(sliced,
                     [&](int64_t a) { return normalizeAxis(a, rank) == d; }))
      return std::nullopt;
    form.resultDims.push_back(d);
    return form;
  }
  if (isa<onnx::ConcatOp, onnx::SplitOp>(op)) {
    if (normalizeAxis(intAttr(op, "axis", 0), rank) == d)
      return std::nullopt;
    if (isa<onnx::ConcatOp>(op))
      form.operands.assign(op->getNumOperands(), {d});
    form.resultDims.assign(op->getNumResults(), d);
    return form;
  }
  return std::nullopt;
}

std::optional<BlockForm> SequenceParallel::reductionForm(Operation *op) const {
  Value in = op->getOperand(0);
  int64_t d = blockDim(in), rank = shapeOf(in).size();
  BlockForm form = firstOperandForm(op, d);
  if (isa<onnx::SoftmaxOp>(op)) {
    // Over the last dimension only: older opsets flatten from `axis` on, and
    // their default axis (1) is the last one only in two dimensions.
    int64_t axis = intAttr(op, "axis", rank == 2 ? 1 : 0);
    if (normalizeAxis(axis, rank) != rank - 1 || d == rank - 1)
      return std::nullopt;
    form.resultDims.push_back(d);
    return form;
  }
  if (isa<onnx::LayerNormalizationOp, onnx::RMSNormalizationOp>(op)) {
    if (d >= normalizeAxis(intAttr(op, "axis", -1), rank))
      return std::nullopt;
    form.resultDims.assign(op->getNumResults(), d);
    return form;
  }
  // ReduceX: the axes from the second operand (opset 18) or the attribute.
  std::optional<Shape> reduced = axesOf(op, 1);
  if (!reduced || reduced->empty())
    return std::nullopt;
  int64_t before = 0;
  for (int64_t a : *reduced) {
    a = normalizeAxis(a, rank);
    if (a == d)
      return std::nullopt;
    before += a < d;
  }
  form.resultDims.push_back(intAttr(op, "keepdims", 1) ? d : d - before);
  return form;
}

std::optional<BlockForm> SequenceParallel::indexingForm(Operation *op) const {
  Value data = op->getOperand(0), indices = op->getOperand(1);
  int64_t rank = shapeOf(data).size();
  int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
  BlockForm form;
  // Blocks of the indices pick blocks of rows (an embedding lookup).
  if (int64_t i = blockDim(indices); i != Need::kWhole) {
    form.operands = {{Need::kWhole}, {i}};
    form.resultDims.push_back(axis + i);
    return form;
  }
  int64_t d = blockDim(data);
  if (d == axis)
    return std::nullopt;
  form.operands = {{d}, {Need::kWhole}};
  form.resultDims.push_back(d < axis ? d
                                     : d + shapeOf(indices).size() - 1);
  return form;
}

std::optional<BlockForm> SequenceParallel::formOf(Operation *op) const {
  if (op->getDialect() != op->getContext()->getLoadedDialect<onnx::ONNXDialect>())
    return std::nullopt;
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto type = dyn_cast<RankedTensorType>(t); type && !type.hasStaticShape())
      return std::nullopt;
    else if (!type && !isa<NoneType>(t))
      return std::nullopt;
  std::optional<BlockForm> form;
  if (onnx::isElementwise(op))
    form = elementwiseForm(op);
  else if (isa<onnx::MatMulOp, onnx::GemmOp>(op))
    form = matmulForm(op);
  else if (isa<onnx::GatherOp>(op))
    form = indexingForm(op);
  else if (isa<onnx::SoftmaxOp, onnx::LayerNormalizationOp,
               onnx::RMSNormalizationOp, onnx::ReduceSumOp,
               onnx::ReduceMeanOp, onnx::ReduceMaxOp, onnx::ReduceMinOp>(op))
    form = blockDim(op->getOperand(0)) == Need::kWhole ? std::nullopt
                                                      : reductionForm(op);
  else if (blockDim(op->getOperand(0)) != Need::kWhole)
    form = shapeForm(op);
  if (!form)
    return std::nullopt;
  for (auto [v, need] : llvm::zip(op->getOperands(), form->operands))
    if (need.dim != Need::kWhole && !splittable(v, need.dim))
      return std::nullopt;
  for (auto [v, dim] : llvm::zip(op->getResults(), form->resultDims))
    if (!splittable(v, dim))
      return std::nullopt;
  return form;
}

bool SequenceParallel::wholeIsFree(Value v) {
  if (auto it = freeWhole.find(v); it != freeWhole.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  bool free;
  if (!def || def->hasTrait<OpTrait::ConstantLike>() ||
      isa<shard::AllGatherOp>(def)) {
    free = true;
  } else if (def->getDialect() !=
                 def->getContext()->getLoadedDialect<onnx::ONNXDialect>() ||
             isa<onnx::MatMulOp, onnx::GemmOp, onnx::EinsumOp, onnx::ConvOp>(
                 def)) {
    free = false; // computing it whole again costs what this pass saves
  } else {
    free = llvm::all_of(def->getOperands(),
                        [&](Value operand) { return wholeIsFree(operand); });
  }
  return freeWhole[v] = free;
}

/// Ops that move or scale a value without mixing its elements: whole, they
/// cost a copy, so a value they make is better gathered before them (the
/// keys before attention repeats their heads, say).
bool movesData(Operation *op) {
  if (isa<onnx::ReshapeOp, onnx::TransposeOp, onnx::UnsqueezeOp,
          onnx::SqueezeOp, onnx::FlattenOp, onnx::ExpandOp, onnx::IdentityOp,
          onnx::CastOp, onnx::NegOp>(op))
    return true;
  // Scaled by a constant scalar.
  return isa<onnx::MulOp, onnx::DivOp>(op) &&
         llvm::all_of(op->getOperands().drop_front(), [](Value v) {
           auto type = dyn_cast<RankedTensorType>(v.getType());
           return type && type.hasStaticShape() && type.getNumElements() == 1 &&
                  matchPattern(v, m_Constant());
         });
}

Value SequenceParallel::whole(Operation *at, Value v) {
  std::optional<std::pair<Value, int64_t>> block = blockOf(v);
  if (!block || wholeIsFree(v))
    return v;
  if (Value g = gathered.lookup(v))
    return g;
  Operation *def = v.getDefiningOp();
  Value result;
  if (def && movesData(def) && def->getNumResults() == 1) {
    // Gather what it moves, and move that whole.
    IRMapping wholes;
    for (Value operand : def->getOperands())
      wholes.map(operand, whole(at, operand));
    b.setInsertionPoint(at);
    Operation *copy = b.clone(*def, wholes);
    created.push_back(copy);
    result = copy->getResult(0);
  } else {
    b.setInsertionPoint(at);
    result = gatherTokens(at->getLoc(), block->first, block->second);
  }
  gathered[v] = result;
  return result;
}

/// `v` with the 2R chunks of `dim` from their order in the program into
/// the zigzag order [0, 2R-1, 1, 2R-2, ...] (`toZigzag`), or back.
Value SequenceParallel::reorderChunks(Location loc, Value v, int64_t dim,
                                      bool toZigzag) {
  int64_t n = pieces(), chunk = shapeOf(v)[dim] / n;
  SmallVector<int64_t> order;
  for (int64_t r = 0; r < ranks; ++r)
    order.append({r, n - 1 - r});
  if (!toZigzag) {
    SmallVector<int64_t> inverse(n);
    for (auto [position, c] : llvm::enumerate(order))
      inverse[c] = position;
    order = inverse;
  }
  SmallVector<Value> parts;
  for (int64_t c : order)
    parts.push_back(
        onnx::createSlice(b, loc, v, dim, c * chunk, (c + 1) * chunk));
  Value result = onnx::createConcat(b, loc, parts, dim);
  for (Value part : parts)
    created.push_back(part.getDefiningOp());
  created.push_back(result.getDefiningOp());
  return result;
}

/// This rank's block of `whole` along `dim`.
Value SequenceParallel::sliceTokens(Location loc, Value whole, int64_t dim) {
  if (zigzag)
    whole = reorderChunks(loc, whole, dim, /*toZigzag=*/true);
  Value slice = x.slice(loc, whole, kTokenAxes, dim);
  created.push_back(slice.getDefiningOp());
  return slice;
}

/// Every rank's `block` along `dim`, in the program's order.
Value SequenceParallel::gatherTokens(Location loc, Value block, int64_t dim) {
  Value gathered = x.gather(loc, block, kTokenAxes, dim);
  created.push_back(gathered.getDefiningOp());
  return zigzag ? reorderChunks(loc, gathered, dim, /*toZigzag=*/false)
                : gathered;
}

/// Whether `op` is an MoE block's exchange of tokens over the token axes.
bool SequenceParallel::isTokenExchange(Operation *op, bool marked) const {
  if (auto gather = dyn_cast<shard::AllGatherOp>(op))
    return gather.getGridAxes() == ArrayRef<int16_t>(axes) &&
           (!marked || op->hasAttr(kTokensAttrName));
  if (auto slice = dyn_cast<shard::AllSliceOp>(op))
    return slice.getGridAxes() == ArrayRef<int16_t>(axes) &&
           (!marked || op->hasAttr(kTokensAttrName));
  return false;
}

/// Whether every MoE block's tokens cut into 2R chunks, and no MoE block
/// keeps tokens by their order (a capacity drops the last ones).
bool SequenceParallel::canZigzag() {
  bool can = true;
  func.walk([&](Operation *op) {
    if (isTokenExchange(op, /*marked=*/true)) {
      auto gather = dyn_cast<shard::AllGatherOp>(op);
      auto slice = dyn_cast<shard::AllSliceOp>(op);
      int64_t size =
          gather ? shapeOf(gather.getResult())[gather.getGatherAxis()
                                                   .getSExtValue()]
                 : shapeOf(slice.getInput())[slice.getSliceAxis()
                                                 .getSExtValue()];
      can &= size % (2 * ranks) == 0;
    } else if (isa<MoEDialect>(op->getDialect()) && op->hasAttr("capacity")) {
      can = false;
    }
  });
  return can;
}

/// How `op`, which computes a value every rank could have whole at no cost,
/// gives this rank's block of its result along `dim` from blocks of its
/// operands: elementwise ops and reductions over other dimensions.
std::optional<BlockForm> SequenceParallel::formFor(Operation *op,
                                                   int64_t dim) const {
  if (op->getNumResults() != 1 || !splittable(op->getResult(0), dim))
    return std::nullopt;
  int64_t rank = shapeOf(op->getResult(0)).size();
  BlockForm form;
  form.resultDims.push_back(dim);
  if (onnx::isElementwise(op)) {
    for (Value v : op->getOperands()) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      int64_t d = type ? dim - (rank - type.getRank()) : Need::kWhole;
      bool broadcast = d < 0 || type.getDimSize(d) == 1;
      if (!broadcast && !splittable(v, d))
        return std::nullopt;
      form.operands.push_back({broadcast ? Need::kWhole : d});
    }
    return form;
  }
  if (isa<onnx::ReduceSumOp, onnx::ReduceMeanOp, onnx::ReduceMaxOp,
          onnx::ReduceMinOp>(op) &&
      intAttr(op, "keepdims", 1)) {
    std::optional<Shape> reduced = axesOf(op, 1);
    if (!reduced || reduced->empty() ||
        llvm::any_of(*reduced, [&](int64_t a) {
          return normalizeAxis(a, rank) == dim;
        }))
      return std::nullopt;
    form.operands = firstOperandForm(op, dim).operands;
    return form;
  }
  return std::nullopt;
}

Value SequenceParallel::blockOperand(Operation *at, Value v, int64_t dim) {
  std::optional<std::pair<Value, int64_t>> block = blockOf(v);
  if (block && block->second == dim)
    return block->first;
  if (Value slice = slices.lookup({v, dim}))
    return slice;
  // A value every rank could compute whole (the attention mask): each
  // computes its own rows of it instead.
  if (Operation *def = v.getDefiningOp();
      !block && def && wholeIsFree(v) &&
      def->getDialect() == def->getContext()->getLoadedDialect<onnx::ONNXDialect>())
    if (std::optional<BlockForm> form = formFor(def, dim)) {
      runOnBlocks(def, *form);
      return blocks[v].first;
    }
  Value w = whole(at, v);
  b.setInsertionPoint(at);
  Value slice = sliceTokens(at->getLoc(), w, dim);
  return slices[{v, dim}] = slice;
}

void SequenceParallel::runOnBlocks(Operation *op, const BlockForm &form) {
  SmallVector<Value> operands;
  for (auto [v, need] : llvm::zip(op->getOperands(), form.operands))
    operands.push_back(need.dim == Need::kWhole ? whole(op, v)
                                                : blockOperand(op, v, need.dim));
  SmallVector<Type> types;
  for (auto [r, dim] : llvm::zip(op->getResults(), form.resultDims)) {
    auto type = cast<RankedTensorType>(r.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] /= ranks;
    types.push_back(type.clone(shape));
  }
  b.setInsertionPoint(op);
  // Reshape and Expand name their result's shape: this rank's block's.
  if (isa<onnx::ReshapeOp, onnx::ExpandOp>(op)) {
    auto shape = cast<RankedTensorType>(types.front()).getShape();
    auto shapeType = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                           b.getI64Type());
    operands[1] = arith::ConstantOp::create(
        b, op->getLoc(), DenseIntElementsAttr::get(shapeType, shape));
  }
  OperationState state(op->getLoc(), op->getName(), operands, types,
                       op->getAttrs());
  Operation *local = b.create(state);
  created.push_back(local);
  for (auto [r, l, dim] :
       llvm::zip(op->getResults(), local->getResults(), form.resultDims))
    blocks[r] = {l, dim};
}

void SequenceParallel::run() {
  Block &body = func.getBody().front();
  // Seeds: the MoE blocks' gathered results, and the program's inputs along
  // their first dimension of more than one element.
  // In zigzag order only the exchanges moe-partition marks as of tokens
  // are: EP slices experts over the same axis.
  zigzag = zigzag && canZigzag();
  SmallVector<shard::AllGatherOp> seeds;
  func.walk([&](shard::AllGatherOp gather) {
    if (isTokenExchange(gather, /*marked=*/zigzag))
      seeds.push_back(gather);
  });
  if (seeds.empty())
    return;
  for (shard::AllGatherOp gather : seeds) {
    int64_t dim = gather.getGatherAxis().getSExtValue();
    Value result = gather.getResult();
    if (zigzag) {
      // The block's rows in the program's order.
      b.setInsertionPointAfter(gather);
      result = reorderChunks(gather.getLoc(), result, dim, /*toZigzag=*/false);
      gather.getResult().replaceUsesWithIf(result, [&](OpOperand &use) {
        return !llvm::is_contained(created, use.getOwner());
      });
    }
    blocks[result] = {gather.getInput(), dim};
  }
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      continue;
    auto dim = llvm::find_if(type.getShape(), [](int64_t d) { return d > 1; });
    if (dim == type.getShape().end() || *dim % pieces() != 0)
      continue;
    b.setInsertionPointToStart(&body);
    int64_t d = dim - type.getShape().begin();
    blocks[arg] = {sliceTokens(arg.getLoc(), arg, d), d};
  }

  SmallVector<Operation *> ops;
  for (Operation &op : body)
    if (!llvm::is_contained(created, &op))
      ops.push_back(&op);
  for (Operation *op : ops) {
    // An MoE block's token slice of a value that has that block already.
    if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
      std::optional<std::pair<Value, int64_t>> block = blockOf(slice.getInput());
      if (isTokenExchange(slice, /*marked=*/zigzag)) {
        int64_t dim = slice.getSliceAxis().getSExtValue();
        if (block && block->second == dim) {
          slice.getResult().replaceAllUsesWith(block->first);
          continue;
        }
        // Every token slice takes the same chunks as the blocks.
        if (zigzag) {
          Value input = whole(slice, slice.getInput());
          b.setInsertionPoint(slice);
          slice.getResult().replaceAllUsesWith(
              sliceTokens(slice.getLoc(), input, dim));
          continue;
        }
      }
    }
    if (!llvm::any_of(op->getOperands(),
                      [&](Value v) { return blocks.count(v); }))
      continue;
    if (std::optional<BlockForm> form = formOf(op)) {
      runOnBlocks(op, *form);
      continue;
    }
    for (OpOperand &use : op->getOpOperands())
      use.set(whole(op, use.get()));
  }
  // What every rank computed whole and nothing uses any more.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (op.use_empty() && isPure(&op) && !op.hasTrait<OpTrait::IsTerminator>())
      op.erase();
}

struct MoESequenceParallelPass
    : public moe::impl::MoESequenceParallelPassBase<MoESequenceParallelPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto plan = module->getAttrOfType<PlanAttr>(kPlanAttrName);
    if (!plan)
      return;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.getBody().hasOneBlock() ||
          func->hasAttr(kActivationBodyAttrName))
        continue;
      SequenceParallel(func, plan, zigzag).run();
    }
  }
};

} // namespace
