//===- CausalAttention.cpp - attention over the keys a query can see ------===//
//
// Exported attention computes softmax(Q K^T + M) V over every key, the
// causal mask's upper triangle included: half of its products and half of
// its exponentials are of keys that the mask removes (a score plus -3.4e38
// has an exp of exactly 0 next to any key let through). This pass evaluates
// the mask's arithmetic at compile time where it does not depend on the
// program's inputs, finds for each block of query rows the keys that the
// mask may let through, and computes the attention block by block over
// those keys only. See MoECausalAttentionPass in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/IR/ONNXDialect.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>

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

/// The element of `operand` that an elementwise op with result `shape`
/// reads at `index` (ONNX broadcasting: trailing dimensions line up); none
/// when the shapes do not broadcast.
std::optional<SmallVector<int64_t>>
broadcastIndex(Value operand, ArrayRef<int64_t> shape,
               ArrayRef<int64_t> index) {
  auto type = dyn_cast<RankedTensorType>(operand.getType());
  if (!type || type.getRank() > static_cast<int64_t>(index.size()))
    return std::nullopt;
  int64_t lead = index.size() - type.getRank();
  SmallVector<int64_t> at;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    if (size != 1 && size != shape[lead + d])
      return std::nullopt;
    at.push_back(size == 1 ? 0 : index[lead + d]);
  }
  return at;
}

/// The element of `operand` that a reshape to `shape` puts at `index`; none
/// when the element counts differ.
std::optional<SmallVector<int64_t>>
reshapedIndex(Value operand, ArrayRef<int64_t> shape, ArrayRef<int64_t> index) {
  auto type = dyn_cast<RankedTensorType>(operand.getType());
  if (!type || !type.hasStaticShape() ||
      type.getNumElements() != product(shape))
    return std::nullopt;
  int64_t linear = 0;
  for (auto [i, size] : llvm::zip(index, shape))
    linear = linear * size + i;
  ArrayRef<int64_t> from = type.getShape();
  SmallVector<int64_t> at(from.size());
  for (int64_t d = from.size() - 1; d >= 0; --d) {
    at[d] = linear % from[d];
    linear /= from[d];
  }
  return at;
}

/// The elements of a mask computation that do not depend on the program's
/// inputs, one at a time.
class MaskEvaluator {
public:
  std::optional<double> at(Value v, ArrayRef<int64_t> index, int depth = 0);

private:
  std::optional<double> constantAt(Value v, ArrayRef<int64_t> index);
  struct Constant {
    ShapedType type;
    DenseElementsAttr dense;
    ArrayRef<char> bytes;
  };
  DenseMap<Value, Constant> constants;
};

std::optional<double> MaskEvaluator::constantAt(Value v,
                                                ArrayRef<int64_t> index) {
  auto it = constants.find(v);
  if (it == constants.end()) {
    Constant c;
    Attribute attr;
    if (matchPattern(v, m_Constant(&attr))) {
      c.dense = dyn_cast<DenseElementsAttr>(attr);
      // Importers keep large constants as resources: their bytes, once.
      if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
        c.bytes = resource.getData();
        c.type = resource.getType();
      } else if (c.dense) {
        c.type = c.dense.getType();
      }
    }
    it = constants.try_emplace(v, c).first;
  }
  const Constant &c = it->second;
  ShapedType type = c.type;
  if (!type)
    return std::nullopt;
  if (!type.hasStaticShape() ||
      index.size() != static_cast<size_t>(type.getRank()))
    return std::nullopt;
  int64_t linear = 0;
  for (auto [i, size] : llvm::zip(index, type.getShape()))
    linear = linear * size + i;
  if (linear < 0 || linear >= type.getNumElements())
    return std::nullopt;
  Type element = type.getElementType();
  if (DenseElementsAttr dense = c.dense) {
    if (dense.isSplat())
      linear = 0;
    if (element.isInteger(1))
      return dense.getValues<bool>()[linear] ? 1.0 : 0.0;
    if (isa<IntegerType>(element))
      return double(dense.getValues<APInt>()[linear].getSExtValue());
    if (isa<FloatType>(element))
      return dense.getValues<APFloat>()[linear].convertToDouble();
    return std::nullopt;
  }
  ArrayRef<char> bytes = c.bytes;
  unsigned width = element.isInteger(1) ? 8 : element.getIntOrFloatBitWidth();
  size_t at = linear * (width / 8);
  if (width % 8 || at + width / 8 > bytes.size())
    return std::nullopt;
  const char *p = bytes.data() + at;
  auto read = [&](auto sample) {
    decltype(sample) x;
    std::memcpy(&x, p, sizeof x);
    return double(x);
  };
  if (element.isInteger(1) || element.isInteger(8))
    return element.isInteger(1) ? double(*p != 0) : read(int8_t());
  if (element.isInteger(32))
    return read(int32_t());
  if (element.isInteger(64))
    return read(int64_t());
  if (element.isF32())
    return read(float());
  if (element.isF64())
    return read(double());
  return std::nullopt;
}

std::optional<double> MaskEvaluator::at(Value v, ArrayRef<int64_t> index,
                                        int depth) {
  if (std::optional<double> c = constantAt(v, index))
    return c;
  Operation *def = v.getDefiningOp();
  if (!def || depth > 32 ||
      def->getDialect() !=
          def->getContext()->getLoadedDialect<onnx::ONNXDialect>())
    return std::nullopt;
  ArrayRef<int64_t> shape = shapeOf(v);
  auto operand = [&](unsigned i) -> std::optional<double> {
    std::optional<SmallVector<int64_t>> where =
        broadcastIndex(def->getOperand(i), shape, index);
    return where ? at(def->getOperand(i), *where, depth + 1) : std::nullopt;
  };
  auto both = [&](auto fn) -> std::optional<double> {
    std::optional<double> a = operand(0), b;
    if (a)
      b = operand(1);
    if (!a || !b)
      return std::nullopt;
    return fn(*a, *b);
  };
  return llvm::TypeSwitch<Operation *, std::optional<double>>(def)
      .Case([&](onnx::AndOp) -> std::optional<double> {
        // False either way decides it, whatever the other side holds.
        std::optional<double> a = operand(0);
        if (a && *a == 0)
          return 0.0;
        std::optional<double> b = operand(1);
        if (b && *b == 0)
          return 0.0;
        return a && b ? std::optional<double>(1.0) : std::nullopt;
      })
      .Case([&](onnx::OrOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        if (a && *a != 0)
          return 1.0;
        std::optional<double> b = operand(1);
        if (b && *b != 0)
          return 1.0;
        return a && b ? std::optional<double>(0.0) : std::nullopt;
      })
      .Case([&](onnx::NotOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        return a ? std::optional<double>(*a == 0 ? 1.0 : 0.0) : std::nullopt;
      })
      .Case([&](onnx::NegOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        return a ? std::optional<double>(-*a) : std::nullopt;
      })
      .Case([&](onnx::CastOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        Type to = cast<RankedTensorType>(v.getType()).getElementType();
        if (!a)
          return std::nullopt;
        if (to.isInteger(1))
          return *a != 0 ? 1.0 : 0.0;
        if (isa<IntegerType>(to))
          return std::trunc(*a);
        return *a;
      })
      .Case([&](onnx::LessOp) { return both([](double a, double b) { return double(a < b); }); })
      .Case([&](onnx::LessOrEqualOp) { return both([](double a, double b) { return double(a <= b); }); })
      .Case([&](onnx::GreaterOp) { return both([](double a, double b) { return double(a > b); }); })
      .Case([&](onnx::GreaterOrEqualOp) { return both([](double a, double b) { return double(a >= b); }); })
      .Case([&](onnx::EqualOp) { return both([](double a, double b) { return double(a == b); }); })
      .Case([&](onnx::AddOp) { return both([](double a, double b) { return a + b; }); })
      .Case([&](onnx::SubOp) { return both([](double a, double b) { return a - b; }); })
      .Case([&](onnx::MulOp) { return both([](double a, double b) { return a * b; }); })
      .Case([&](onnx::WhereOp) -> std::optional<double> {
        std::optional<double> c = operand(0);
        if (c)
          return operand(*c != 0 ? 1 : 2);
        std::optional<double> a = operand(1), b = operand(2);
        return a && b && *a == *b ? a : std::nullopt;
      })
      .Case([&](onnx::ExpandOp) { return operand(0); })
      .Case<onnx::ReshapeOp, onnx::UnsqueezeOp, onnx::SqueezeOp,
            onnx::FlattenOp>([&](Operation *) -> std::optional<double> {
        Value in = def->getOperand(0);
        std::optional<SmallVector<int64_t>> where =
            reshapedIndex(in, shape, index);
        return where ? at(in, *where, depth + 1) : std::nullopt;
      })
      .Default([](Operation *) { return std::nullopt; });
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
  auto mul = att.mask().getDefiningOp<onnx::MulOp>();
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
  /// for each of its rows, the keys [0, needed) that may pass (over every
  /// leading index), and whether each row has a key known to pass.
  struct MaskKeys {
    bool readable = false;
    SmallVector<int64_t> needed;
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
    if (!type.hasStaticShape() || type.getNumElements() > maxMaskElements)
      return keys;
    int64_t rows = shape[shape.size() - 2], columns = shape.back();
    keys.needed.assign(rows, 0);
    forEachLead(shape, [&](SmallVector<int64_t> &index) {
      for (int64_t i = 0; i < rows; ++i) {
        index[shape.size() - 2] = i;
        // The keys after the last one that may pass are removed.
        int64_t j = columns;
        for (; j > keys.needed[i]; --j) {
          index.back() = j - 1;
          std::optional<double> m = evaluator.at(mask, index);
          if (!m || *m > kRemoved)
            break;
        }
        keys.needed[i] = std::max(keys.needed[i], j);
      }
    });
    keys.readable = true;
    return keys;
  }

  /// Whether each row of `mask` has a key known to pass.
  bool everyRowSeesAKey(Value mask, MaskKeys &keys, MaskEvaluator &evaluator) {
    if (keys.everyRowSeesAKey)
      return *keys.everyRowSeesAKey;
    ArrayRef<int64_t> shape = shapeOf(mask);
    bool all = true;
    forEachLead(shape, [&](SmallVector<int64_t> &index) {
      for (int64_t i = 0; i < shape[shape.size() - 2] && all; ++i) {
        index[shape.size() - 2] = i;
        bool passes = false;
        for (int64_t k = 0; k < keys.needed[i] && !passes; ++k) {
          index.back() = k;
          std::optional<double> m = evaluator.at(mask, index);
          passes = m && *m > kRemoved;
        }
        all = passes;
      }
    });
    keys.everyRowSeesAKey = all;
    return all;
  }

  /// The keys each block of query rows needs, or none when the mask does
  /// not let the pass skip any (or cannot be read).
  std::optional<SmallVector<int64_t>> keysPerBlock(Attention &att,
                                                   MaskEvaluator &evaluator) {
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
    bool perRow = keys.needed.size() != 1;
    SmallVector<int64_t> blocks;
    bool skips = false;
    for (int64_t r0 = 0; r0 < rows; r0 += blockRows) {
      int64_t end = 1;
      for (int64_t i = r0; i < std::min(rows, r0 + blockRows); ++i)
        end = std::max(end, keys.needed[perRow ? i : 0]);
      skips |= end < columns;
      blocks.push_back(end);
    }
    if (!skips)
      return std::nullopt;
    return blocks;
  }

  static Value slice(OpBuilder &b, Location loc, Value v, int64_t axis,
                     int64_t begin, int64_t end) {
    auto type = cast<RankedTensorType>(v.getType());
    if (begin == 0 && end == type.getDimSize(axis))
      return v;
    auto one = RankedTensorType::get({1}, b.getI64Type());
    auto constant = [&](int64_t x) -> Value {
      return arith::ConstantOp::create(b, loc,
                                       DenseIntElementsAttr::get(one, {x}));
    };
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = end - begin;
    return onnx::SliceOp::create(
               b, loc, TypeRange{type.clone(shape)},
               ValueRange{v, constant(begin), constant(end), constant(axis)})
        ->getResult(0);
  }

  static Value like(OpBuilder &b, Operation *op, ValueRange operands,
                    Type type) {
    OperationState state(op->getLoc(), op->getName(), operands, type,
                         op->getAttrs());
    return b.create(state)->getResult(0);
  }

  DenseMap<Value, MaskKeys> masks;

  void rewrite(Attention &att, MaskEvaluator &evaluator) {
    std::optional<SmallVector<int64_t>> blocks = keysPerBlock(att, evaluator);
    if (!blocks)
      return;
    OpBuilder b(att.output);
    Location loc = att.output->getLoc();
    Value q = att.scores->getOperand(0), kt = att.scores->getOperand(1);
    Value v = att.output->getOperand(1), mask = att.mask();
    auto scoresType = cast<RankedTensorType>(att.softmax->getResult(0).getType());
    auto outType = cast<RankedTensorType>(att.output->getResult(0).getType());
    int64_t rank = scoresType.getRank(), rows = scoresType.getDimSize(rank - 2);
    int64_t maskRank = shapeOf(mask).size();
    bool maskPerRow = shapeOf(mask)[maskRank - 2] != 1;
    SmallVector<Value> parts;
    for (auto [n, keys] : llvm::enumerate(*blocks)) {
      int64_t r0 = n * blockRows, r1 = std::min(rows, r0 + blockRows);
      SmallVector<int64_t> shape(scoresType.getShape());
      shape[rank - 2] = r1 - r0;
      shape[rank - 1] = keys;
      auto blockType = scoresType.clone(shape);
      Value s = like(b, att.scores,
                     {slice(b, loc, q, rank - 2, r0, r1),
                      slice(b, loc, kt, rank - 1, 0, keys)},
                     blockType);
      if (att.scale)
        s = like(b, att.scale, {s, att.scale->getOperand(1)}, blockType);
      Value m = slice(b, loc, mask, maskRank - 1, 0, keys);
      if (maskPerRow)
        m = slice(b, loc, m, maskRank - 2, r0, r1);
      SmallVector<Value> sum{s, s};
      sum[att.maskOperand] = m;
      Value p = like(b, att.softmax, {like(b, att.addMask, sum, blockType)},
                     blockType);
      SmallVector<int64_t> outShape(outType.getShape());
      outShape[rank - 2] = r1 - r0;
      parts.push_back(like(b, att.output,
                           {p, slice(b, loc, v, rank - 2, 0, keys)},
                           outType.clone(outShape)));
    }
    Value result =
        parts.size() == 1
            ? parts.front()
            : onnx::ConcatOp::create(
                  b, loc, TypeRange{outType}, ValueRange(parts),
                  {b.getNamedAttr("axis", b.getI64IntegerAttr(rank - 2))})
                  ->getResult(0);
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
