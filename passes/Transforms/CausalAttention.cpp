//===- CausalAttention.cpp - attention over the keys a query can see ------===//
//
// Exported attention computes softmax(Q K^T + M) V over every key, the
// causal mask's upper triangle included: half of its products and half of
// its exponentials are of keys that the mask removes (a score plus -3.4e38
// has an exp of exactly 0 next to any key let through). This pass evaluates
// the mask's arithmetic at compile time where it does not depend on the
// program's inputs, finds for each block of query rows the keys that the
// mask may let through, and computes the attention block by block over
// those keys only (MaskEvaluator.h reads the mask). Where each rank holds
// its own query rows (moe-sequence-parallel), the keys depend on the rank:
// one case of static shapes per rank. See MoECausalAttentionPass in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXBuilders.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/Passes.h"
#include "passes/Transforms/MaskEvaluator.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOECAUSALATTENTIONPASS
#include "passes/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;
using onnx_lowering::axesOf;
using onnx_lowering::intAttr;
using onnx_lowering::normalizeAxis;
using onnx_lowering::product;

namespace {

/// A mask value at or below this removes its key: exp(score + mask - max)
/// is exactly 0 beside any key with a score of ordinary size.
constexpr double kRemoved = -1e30;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// softmax(Q K^T (* or / scale) + M) V, as exported.
struct Attention {
  onnx::MatMulOp scores;
  Operation *scale = nullptr; // Mul or Div by a constant scalar
  onnx::AddOp addMask;
  unsigned maskOperand;
  onnx::SoftmaxOp softmax;
  onnx::MatMulOp output;

  Value mask() { return addMask->getOperand(maskOperand); }
};

/// The shard.all_slice ops that `mask`'s computation reads (the blocks
/// moe-sequence-parallel gives the ranks): one of them when they all slice
/// over the same grid axes, null when there are none; failure when they
/// differ or the computation is too large to follow.
FailureOr<shard::AllSliceOp> rankBlocks(Value mask) {
  SmallVector<Value> work{mask};
  DenseSet<Value> seen;
  shard::AllSliceOp found;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (seen.size() > 1024)
      return failure();
    Operation *def = v.getDefiningOp();
    if (auto slice = dyn_cast_or_null<shard::AllSliceOp>(def)) {
      if (found && (found.getGridAttr() != slice.getGridAttr() ||
                    found.getGridAxes() != slice.getGridAxes()))
        return failure();
      found = slice;
    }
    if (def && !def->hasTrait<OpTrait::ConstantLike>())
      llvm::append_range(work, def->getOperands());
  }
  return found;
}

/// The grid sizes over `slice`'s axes (the number of row blocks first), or
/// none when its grid is undeclared or dynamic.
std::optional<SmallVector<int64_t>> sliceGroup(shard::AllSliceOp slice) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      slice, slice.getGridAttr());
  if (!grid)
    return std::nullopt;
  SmallVector<int64_t> sizes{1};
  for (int16_t axis : slice.getGridAxes()) {
    int64_t size = grid.getShape()[axis];
    if (ShapedType::isDynamic(size))
      return std::nullopt;
    sizes.push_back(size);
    sizes.front() *= size;
  }
  return sizes;
}

bool isScalarConstant(Value v, double *value = nullptr) {
  DenseElementsAttr attr;
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getNumElements() != 1 ||
      !matchPattern(v, m_Constant(&attr)) ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  if (value)
    *value = (*attr.getValues<APFloat>().begin()).convertToDouble();
  return true;
}

std::optional<Attention> matchAttention(onnx::SoftmaxOp softmax) {
  Attention att;
  att.softmax = softmax;
  Value p = softmax->getResult(0);
  auto type = dyn_cast<RankedTensorType>(p.getType());
  if (!type || !type.hasStaticShape() || type.getRank() < 2)
    return std::nullopt;
  int64_t rank = type.getRank();
  // Older opsets' default axis (1) is the last one only in two dimensions.
  int64_t axis = intAttr(softmax, "axis", rank == 2 ? 1 : 0);
  if (normalizeAxis(axis, rank) != rank - 1 || !p.hasOneUse())
    return std::nullopt;
  att.output = dyn_cast<onnx::MatMulOp>(*p.user_begin());
  att.addMask = softmax->getOperand(0).getDefiningOp<onnx::AddOp>();
  if (!att.output || att.output->getOperand(0) != p || !att.addMask ||
      !att.addMask->hasOneUse())
    return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    Value s = att.addMask->getOperand(i);
    Operation *def = s.getDefiningOp();
    if (def && isa<onnx::MulOp, onnx::DivOp>(def) && def->hasOneUse() &&
        isScalarConstant(def->getOperand(1))) {
      att.scale = def;
      s = def->getOperand(0);
    }
    att.scores = s.getDefiningOp<onnx::MatMulOp>();
    if (att.scores && att.scores->hasOneUse() &&
        s.getType() == p.getType()) {
      att.maskOperand = 1 - i;
      break;
    }
    att.scale = nullptr;
    att.scores = {};
  }
  if (!att.scores)
    return std::nullopt;
  for (Value v : llvm::concat<Value>(att.scores->getOperands(),
                                     att.output->getOperands(),
                                     att.output->getResults()))
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        !t || !t.hasStaticShape() || t.getRank() != rank)
      return std::nullopt;
  // Q [.., rows, d] K^T [.., d, keys], V [.., keys, e]; the mask holds a
  // value per key (not one for all of a row's keys) and per row or for all.
  int64_t rows = type.getDimSize(rank - 2), keys = type.getDimSize(rank - 1);
  if (shapeOf(att.scores->getOperand(0))[rank - 2] != rows ||
      shapeOf(att.scores->getOperand(1))[rank - 1] != keys ||
      shapeOf(att.output->getOperand(1))[rank - 2] != keys ||
      shapeOf(att.output->getResult(0))[rank - 2] != rows)
    return std::nullopt;
  auto maskType = dyn_cast<RankedTensorType>(att.mask().getType());
  if (!maskType || !maskType.hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> mask = maskType.getShape();
  if (mask.size() > static_cast<size_t>(rank) || mask.size() < 2 ||
      mask.back() != keys ||
      (mask[mask.size() - 2] != 1 && mask[mask.size() - 2] != rows))
    return std::nullopt;
  return att;
}

/// Whether the graph zeroes the rows of `att` that its mask removes every
/// key of, as transformers' export does: Where(ReduceSum(Cast(B)) < t, 0,
/// attention) with 0 < t <= 1, where the mask is Cast(Not(B)) * c.
bool zeroesRemovedRows(Attention &att) {
  Value mask = att.mask();
  Value o = att.output->getResult(0);
  if (!o.hasOneUse())
    return false;
  auto where = dyn_cast<onnx::WhereOp>(*o.user_begin());
  double zero, threshold, fill;
  if (!where || where->getOperand(2) != o ||
      !isScalarConstant(where->getOperand(1), &zero) || zero != 0)
    return false;
  auto less = where->getOperand(0).getDefiningOp<onnx::LessOp>();
  if (!less || !isScalarConstant(less->getOperand(1), &threshold) ||
      threshold <= 0 || threshold > 1)
    return false;
  auto sum = less->getOperand(0).getDefiningOp<onnx::ReduceSumOp>();
  if (!sum || shapeOf(sum->getResult(0)).back() != 1)
    return false;
  int64_t sumRank = shapeOf(sum->getOperand(0)).size();
  std::optional<onnx_lowering::Shape> axes = axesOf(sum, 1);
  if (!axes || axes->size() != 1 ||
      normalizeAxis(axes->front(), sumRank) != sumRank - 1)
    return false;
  auto allowed = sum->getOperand(0).getDefiningOp<onnx::CastOp>();
  auto mul = mask.getDefiningOp<onnx::MulOp>();
  if (!allowed || !mul)
    return false;
  for (unsigned i = 0; i < 2; ++i) {
    auto removed = mul->getOperand(i).getDefiningOp<onnx::CastOp>();
    auto negated = removed ? removed->getOperand(0).getDefiningOp<onnx::NotOp>()
                           : onnx::NotOp();
    if (negated && negated->getOperand(0) == allowed->getOperand(0) &&
        isScalarConstant(mul->getOperand(1 - i), &fill) && fill <= kRemoved)
      return true;
  }
  return false;
}

struct MoECausalAttentionPass
    : public moe::impl::MoECausalAttentionPassBase<MoECausalAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<onnx::SoftmaxOp> softmaxes;
    getOperation()->walk([&](onnx::SoftmaxOp op) { softmaxes.push_back(op); });
    MaskEvaluator evaluator;
    masks.clear();
    for (onnx::SoftmaxOp softmax : softmaxes)
      if (std::optional<Attention> att = matchAttention(softmax))
        rewrite(*att, evaluator);
  }

  /// What a mask lets through, read once for all the layers that share it:
  /// for each rank of `group` (the row blocks moe-sequence-parallel gives
  /// the ranks; one rank without it) and each of its rows, the keys
  /// [0, needed) that may pass (over every leading index), and whether each
  /// row has a key known to pass.
  struct MaskKeys {
    bool readable = false;
    shard::AllSliceOp group;
    int64_t ranks = 1;
    SmallVector<int64_t> needed; // [ranks][rows]
    std::optional<bool> everyRowSeesAKey;
  };

  /// Calls `fn(index)` with `index` at each leading index of `shape` (its
  /// last two entries are the caller's).
  static void forEachLead(ArrayRef<int64_t> shape,
                          function_ref<void(SmallVector<int64_t> &)> fn) {
    SmallVector<int64_t> index(shape.size());
    for (int64_t l = 0, lead = product(shape.drop_back(2)); l < lead; ++l) {
      for (int64_t d = shape.size() - 3, rest = l; d >= 0; --d) {
        index[d] = rest % shape[d];
        rest /= shape[d];
      }
      fn(index);
    }
  }

  MaskKeys &readMask(Value mask, MaskEvaluator &evaluator) {
    auto [it, fresh] = masks.try_emplace(mask);
    MaskKeys &keys = it->second;
    if (!fresh)
      return keys;
    ArrayRef<int64_t> shape = shapeOf(mask);
    auto type = cast<RankedTensorType>(mask.getType());
    FailureOr<shard::AllSliceOp> group = rankBlocks(mask);
    if (!type.hasStaticShape() || failed(group))
      return keys;
    if (*group) {
      std::optional<SmallVector<int64_t>> sizes = sliceGroup(*group);
      if (!sizes)
        return keys;
      keys.group = *group;
      keys.ranks = sizes->front();
    }
    if (type.getNumElements() * keys.ranks > maxMaskElements)
      return keys;
    int64_t rows = shape[shape.size() - 2], columns = shape.back();
    keys.needed.assign(keys.ranks * rows, 0);
    for (int64_t r = 0; r < keys.ranks; ++r) {
      evaluator.setRank(keys.group, r);
      forEachLead(shape, [&](SmallVector<int64_t> &index) {
        for (int64_t i = 0; i < rows; ++i) {
          index[shape.size() - 2] = i;
          // The keys after the last one that may pass are removed.
          int64_t &needed = keys.needed[r * rows + i];
          int64_t j = columns;
          for (; j > needed; --j) {
            index.back() = j - 1;
            std::optional<double> m = evaluator.at(mask, index);
            if (!m || *m > kRemoved)
              break;
          }
          needed = std::max(needed, j);
        }
      });
    }
    keys.readable = true;
    return keys;
  }

  /// Whether each row of `mask` has a key known to pass, on every rank.
  bool everyRowSeesAKey(Value mask, MaskKeys &keys, MaskEvaluator &evaluator) {
    if (keys.everyRowSeesAKey)
      return *keys.everyRowSeesAKey;
    ArrayRef<int64_t> shape = shapeOf(mask);
    int64_t rows = shape[shape.size() - 2];
    bool all = true;
    for (int64_t r = 0; r < keys.ranks && all; ++r) {
      evaluator.setRank(keys.group, r);
      forEachLead(shape, [&](SmallVector<int64_t> &index) {
        for (int64_t i = 0; i < rows && all; ++i) {
          index[shape.size() - 2] = i;
          bool passes = false;
          for (int64_t k = 0; k < keys.needed[r * rows + i] && !passes; ++k) {
            index.back() = k;
            std::optional<double> m = evaluator.at(mask, index);
            passes = m && *m > kRemoved;
          }
          all = passes;
        }
      });
    }
    keys.everyRowSeesAKey = all;
    return all;
  }

  /// Query rows [begin, end) over keys [0, keys).
  struct QueryBlock {
    int64_t begin, end, keys;
    bool operator==(const QueryBlock &other) const {
      return begin == other.begin && end == other.end && keys == other.keys;
    }
  };

  /// The blocks of query rows and the keys each needs, for each rank of
  /// the mask's row blocks (one rank when the mask takes none), or none
  /// when the mask does not let the pass skip any key (or cannot be read).
  std::optional<SmallVector<SmallVector<QueryBlock>>>
  keysPerBlock(Attention &att, MaskEvaluator &evaluator) {
    Value mask = att.mask();
    MaskKeys &keys = readMask(mask, evaluator);
    if (!keys.readable)
      return std::nullopt;
    // A row that could lose every key gets a uniform softmax over all keys
    // in the exported graph, but over fewer after the rewrite: it must have
    // a key known to pass, or the graph must zero it.
    if (!zeroesRemovedRows(att) && !everyRowSeesAKey(mask, keys, evaluator))
      return std::nullopt;
    ArrayRef<int64_t> scores = shapeOf(att.softmax->getResult(0));
    int64_t rows = scores[scores.size() - 2], columns = scores.back();
    int64_t ranks = keys.ranks, maskRows = shapeOf(mask).drop_back().back();
    SmallVector<SmallVector<QueryBlock>> blocks(ranks);
    bool skips = false;
    for (int64_t r = 0; r < ranks; ++r) {
      auto needed = [&](int64_t i) {
        return std::max<int64_t>(
            1, keys.needed[r * maskRows + (maskRows == 1 ? 0 : i)]);
      };
      for (int64_t i = 0; i < rows; ++i) {
        // A new block after blockRows rows, or where the keys jump by more
        // than a block (the next chunk of a zigzag order).
        if (blocks[r].empty() ||
            i - blocks[r].back().begin == blockRows ||
            needed(i) > needed(i - 1) + blockRows)
          blocks[r].push_back({i, i, 1});
        QueryBlock &block = blocks[r].back();
        block.end = i + 1;
        block.keys = std::max(block.keys, needed(i));
      }
      for (const QueryBlock &block : blocks[r])
        skips |= block.keys < columns;
    }
    if (!skips)
      return std::nullopt;
    return blocks;
  }

  static Value like(OpBuilder &b, Operation *op, ValueRange operands,
                    Type type) {
    OperationState state(op->getLoc(), op->getName(), operands, type,
                         op->getAttrs());
    return b.create(state)->getResult(0);
  }

  DenseMap<Value, MaskKeys> masks;

  /// The attention of `att` in `blocks` of query rows.
  Value blockedAttention(OpBuilder &b, Attention &att,
                         ArrayRef<QueryBlock> blocks) {
    Location loc = att.output->getLoc();
    Value q = att.scores->getOperand(0), kt = att.scores->getOperand(1);
    Value v = att.output->getOperand(1), mask = att.mask();
    auto scoresType = cast<RankedTensorType>(att.softmax->getResult(0).getType());
    auto outType = cast<RankedTensorType>(att.output->getResult(0).getType());
    int64_t rank = scoresType.getRank();
    int64_t maskRank = shapeOf(mask).size();
    bool maskPerRow = shapeOf(mask)[maskRank - 2] != 1;
    SmallVector<Value> parts;
    for (auto [r0, r1, keys] : blocks) {
      SmallVector<int64_t> shape(scoresType.getShape());
      shape[rank - 2] = r1 - r0;
      shape[rank - 1] = keys;
      auto blockType = scoresType.clone(shape);
      Value s = like(b, att.scores,
                     {onnx::createSlice(b, loc, q, rank - 2, r0, r1),
                      onnx::createSlice(b, loc, kt, rank - 1, 0, keys)},
                     blockType);
      if (att.scale)
        s = like(b, att.scale, {s, att.scale->getOperand(1)}, blockType);
      Value m = onnx::createSlice(b, loc, mask, maskRank - 1, 0, keys);
      if (maskPerRow)
        m = onnx::createSlice(b, loc, m, maskRank - 2, r0, r1);
      SmallVector<Value> sum{s, s};
      sum[att.maskOperand] = m;
      Value p = like(b, att.softmax, {like(b, att.addMask, sum, blockType)},
                     blockType);
      SmallVector<int64_t> outShape(outType.getShape());
      outShape[rank - 2] = r1 - r0;
      parts.push_back(like(b, att.output,
                           {p, onnx::createSlice(b, loc, v, rank - 2, 0, keys)},
                           outType.clone(outShape)));
    }
    return onnx::createConcat(b, loc, parts, rank - 2);
  }

  /// This rank's position among the row blocks of `rows` (last grid axis
  /// fastest, as shard.all_slice takes them).
  static Value rowBlockIndex(OpBuilder &b, Location loc,
                             shard::AllSliceOp rows, ArrayRef<int64_t> sizes) {
    auto coordinates = shard::ProcessMultiIndexOp::create(
        b, loc, rows.getGrid(), rows.getGridAxes());
    Value position;
    for (auto [size, coordinate] :
         llvm::zip_equal(sizes.drop_front(), coordinates.getResults()))
      position = !position
                     ? Value(coordinate)
                     : arith::AddIOp::create(
                           b, loc,
                           arith::MulIOp::create(
                               b, loc, position,
                               arith::ConstantIndexOp::create(b, loc, size)),
                           coordinate);
    return position;
  }

  void rewrite(Attention &att, MaskEvaluator &evaluator) {
    std::optional<SmallVector<SmallVector<QueryBlock>>> blocks =
        keysPerBlock(att, evaluator);
    if (!blocks)
      return;
    OpBuilder b(att.output);
    Location loc = att.output->getLoc();
    Value result;
    if (llvm::all_equal(*blocks)) {
      result = blockedAttention(b, att, blocks->front());
    } else {
      // The keys depend on which rows this rank holds: one case per rank,
      // the last rank's as the default.
      shard::AllSliceOp rows = masks[att.mask()].group;
      SmallVector<int64_t> sizes = *sliceGroup(rows);
      int64_t ranks = blocks->size();
      auto byRank = scf::IndexSwitchOp::create(
          b, loc, att.output->getResultTypes(),
          rowBlockIndex(b, loc, rows, sizes),
          llvm::to_vector(llvm::seq<int64_t>(0, ranks - 1)), ranks - 1);
      for (int64_t r = 0; r < ranks; ++r) {
        Region &region = r + 1 < ranks ? byRank.getCaseRegions()[r]
                                       : byRank.getDefaultRegion();
        OpBuilder cb = OpBuilder::atBlockEnd(&region.emplaceBlock());
        scf::YieldOp::create(cb, loc,
                             blockedAttention(cb, att, (*blocks)[r]));
      }
      result = byRank.getResult(0);
    }
    att.output->getResult(0).replaceAllUsesWith(result);
    att.output->erase();
    att.softmax->erase();
    att.addMask->erase();
    if (att.scale)
      att.scale->erase();
    att.scores->erase();
  }
};

} // namespace
