//===- IndexChecks.cpp - indices read from tensors stay in bounds ---------===//
//
// Gathers and scatters read or write at positions that an index tensor's
// values give, and ONNX makes an index outside `[-s, s-1]` (s the size of
// the dim it selects in) an error. The lowering checks each op's indices
// once, before it uses them, and never per element in its loops:
//
//  * constant indices at compile time: the first one out of range is an
//    error at the op that names it, the dim and its size;
//  * indices that their producers bound (provenRange: TopK and ArgMax
//    indices, Range, moe.router ids, moves and casts of them, ...) not at
//    all;
//  * any other at run time: one linalg reduction gives the smallest and
//    largest index (per selected dim), and where they leave the dim the
//    program ends with a message: through the runtime's
//    `moert_index_out_of_range` (message with the index, exit status 1), or
//    without the runtime (mlir-runner) through cf.assert.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/Runtime/RuntimeCalls.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <cstdlib>
#include <limits>

namespace mlir::moe::onnx_lowering {

//===----------------------------------------------------------------------===//
// Proven ranges
//===----------------------------------------------------------------------===//

namespace {
constexpr int64_t kMinInt = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();
/// How many producers deep provenRange looks.
constexpr unsigned kMaxDepth = 16;

/// The ranges that one provenRange search has found (none: not bounded),
/// and how deep it is.
struct RangeSearch {
  DenseMap<Value, std::optional<IntRange>> known;
  unsigned depth = 0;
};
} // namespace

static IntRange hull(IntRange a, IntRange b) {
  return {std::min(a.min, b.min), std::max(a.max, b.max)};
}

/// The size of dim `axis` (ONNX's, possibly negative) of `value`'s static
/// shape, if at least 1.
static std::optional<int64_t> dimSize(Value value, int64_t axis) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() || type.getRank() == 0)
    return std::nullopt;
  int64_t size = type.getDimSize(normalizeAxis(axis, type.getRank()));
  if (size < 1)
    return std::nullopt;
  return size;
}

/// `[0, size-1]`: the positions in a dim of `size`.
static std::optional<IntRange> positionsIn(std::optional<int64_t> size) {
  if (!size)
    return std::nullopt;
  return IntRange{0, *size - 1};
}

/// The elements of a constant integer tensor; `[0, 0]` for none.
static std::optional<IntRange> constantRange(Value value) {
  std::optional<ConstTensor> constant = getConstant(value);
  if (!constant || constant->isFloat())
    return std::nullopt;
  if (constant->ints.empty())
    return IntRange{0, 0};
  auto [min, max] =
      std::minmax_element(constant->ints.begin(), constant->ints.end());
  return IntRange{*min, *max};
}

/// The range of `lhs op rhs` over ranges, where no bound overflows.
static std::optional<IntRange>
combineRanges(std::optional<IntRange> lhs, std::optional<IntRange> rhs,
              function_ref<bool(int64_t, int64_t, int64_t &)> overflows) {
  if (!lhs || !rhs)
    return std::nullopt;
  std::optional<IntRange> result;
  for (int64_t x : {lhs->min, lhs->max})
    for (int64_t y : {rhs->min, rhs->max}) {
      int64_t z;
      if (overflows(x, y, z))
        return std::nullopt;
      result = result ? hull(*result, {z, z}) : IntRange{z, z};
    }
  return result;
}

/// `min(max(x, lower), upper)` over x in `x`; a missing bound is none.
static std::optional<IntRange> clampRange(std::optional<IntRange> x,
                                          std::optional<int64_t> lower,
                                          std::optional<int64_t> upper) {
  IntRange range = x.value_or(IntRange{kMinInt, kMaxInt});
  if (lower)
    range = {std::max(range.min, *lower), std::max(range.max, *lower)};
  if (upper)
    range = {std::min(range.min, *upper), std::min(range.max, *upper)};
  if (range.min == kMinInt || range.max == kMaxInt)
    return std::nullopt;
  return range;
}

/// The single value of a constant operand with all elements equal.
static std::optional<int64_t> constantSplat(Value value) {
  std::optional<IntRange> range = constantRange(value);
  if (!range || range->min != range->max)
    return std::nullopt;
  return range->min;
}

static std::optional<IntRange> rangeOf(Value value, RangeSearch &search);

/// The hull of the ranges of `values`; none where one has none.
static std::optional<IntRange> hullOf(ValueRange values, RangeSearch &search) {
  std::optional<IntRange> result;
  for (Value value : values) {
    std::optional<IntRange> range = rangeOf(value, search);
    if (!range)
      return std::nullopt;
    result = result ? hull(*result, *range) : *range;
  }
  return result;
}

/// Range's `start + i * delta` for its static count of i, where start and
/// delta are constants.
static std::optional<IntRange> rangeOpRange(onnx::RangeOp op) {
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  std::optional<int64_t> start = constantSplat(op->getOperand(0));
  std::optional<int64_t> delta = constantSplat(op->getOperand(2));
  if (!type || !type.hasStaticShape() || !start || !delta)
    return std::nullopt;
  int64_t count = type.getNumElements();
  if (count == 0)
    return IntRange{0, 0};
  int64_t offset, last;
  if (llvm::MulOverflow(count - 1, *delta, offset) ||
      llvm::AddOverflow(*start, offset, last))
    return std::nullopt;
  return IntRange{std::min(*start, last), std::max(*start, last)};
}

/// Mod by a constant divisor d: `[0, d-1]` (or `[d+1, 0]`) with the sign of
/// the divisor, `[-(|d|-1), |d|-1]` with fmod's sign of the dividend.
static std::optional<IntRange> modRange(Operation *op) {
  std::optional<IntRange> divisors = constantRange(op->getOperand(1));
  if (!divisors || (divisors->min <= 0 && divisors->max >= 0) ||
      divisors->min == kMinInt)
    return std::nullopt;
  int64_t largest = std::max(std::abs(divisors->min), std::abs(divisors->max));
  if (intAttr(op, "fmod", 0))
    return IntRange{-(largest - 1), largest - 1};
  return divisors->min > 0 ? IntRange{0, largest - 1}
                           : IntRange{-(largest - 1), 0};
}

/// Cast between integer types keeps a range that fits the result type; a
/// bool is 0 or 1.
static std::optional<IntRange> castRange(Operation *op, RangeSearch &search) {
  Value input = op->getOperand(0);
  Type from = cast<ShapedType>(input.getType()).getElementType();
  Type to = cast<ShapedType>(op->getResult(0).getType()).getElementType();
  if (!to.isSignlessInteger() || to.getIntOrFloatBitWidth() < 2)
    return std::nullopt;
  std::optional<IntRange> range;
  if (from.isInteger(1))
    range = IntRange{0, 1};
  else if (from.isSignlessInteger())
    range = rangeOf(input, search);
  unsigned width = to.getIntOrFloatBitWidth();
  if (!range || (width < 64 && (range->min < -(int64_t(1) << (width - 1)) ||
                                range->max >= (int64_t(1) << (width - 1)))))
    return std::nullopt;
  return range;
}

/// The range of `value` from its producer.
static std::optional<IntRange> producerRange(Value value, RangeSearch &search) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.getElementType().isSignlessInteger())
    return std::nullopt;
  if (std::optional<IntRange> range = constantRange(value))
    return range;
  Operation *op = value.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto operandRange = [&](unsigned i) {
    return rangeOf(op->getOperand(i), search);
  };
  using Range = std::optional<IntRange>;
  return TypeSwitch<Operation *, Range>(op)
      // Positions in the dim they rank or search.
      .Case([&](onnx::TopKOp topK) -> Range {
        if (value != topK->getResult(1))
          return std::nullopt;
        return positionsIn(
            dimSize(topK->getOperand(0), intAttr(topK, "axis", -1)));
      })
      .Case([&](onnx::ArgMaxOp argMax) {
        return positionsIn(
            dimSize(argMax->getOperand(0), intAttr(argMax, "axis", 0)));
      })
      // Expert ids, -1 where none was chosen.
      .Case([&](RouterOp router) -> Range {
        if (value != router.getIds())
          return std::nullopt;
        int64_t experts = router.getLogits().getType().getDimSize(1);
        return IntRange{-1, experts - 1};
      })
      .Case([&](onnx::RangeOp range) { return rangeOpRange(range); })
      .Case([&](onnx::ConstantOfShapeOp) -> Range {
        auto attr = op->getAttrOfType<DenseIntElementsAttr>("value");
        if (!attr || !attr.isSplat())
          return std::nullopt;
        int64_t element = attr.getSplatValue<APInt>().getSExtValue();
        return IntRange{element, element};
      })
      // Elements moved, repeated or picked.
      .Case<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
            onnx::FlattenOp, onnx::IdentityOp, onnx::TransposeOp,
            onnx::ExpandOp, onnx::TileOp, onnx::SliceOp, onnx::GatherOp,
            onnx::GatherElementsOp, onnx::GatherNDOp, tensor::CastOp>(
          [&](Operation *) { return operandRange(0); })
      .Case<onnx::ConcatOp, onnx::MinOp, onnx::MaxOp>(
          [&](Operation *) -> Range {
            Range all = hullOf(op->getOperands(), search);
            if (!all || isa<onnx::ConcatOp>(op))
              return all;
            // Min: no larger than the smallest maximum; Max: no smaller than
            // the largest minimum.
            bool isMin = isa<onnx::MinOp>(op);
            IntRange result = isMin ? IntRange{all->min, kMaxInt}
                                    : IntRange{kMinInt, all->max};
            for (Value operand : op->getOperands()) {
              IntRange range = *rangeOf(operand, search);
              if (isMin)
                result.max = std::min(result.max, range.max);
              else
                result.min = std::max(result.min, range.min);
            }
            return result;
          })
      .Case([&](onnx::WhereOp) {
        return hullOf(op->getOperands().drop_front(), search);
      })
      .Case([&](onnx::ClipOp) {
        auto bound = [&](unsigned i) -> std::optional<int64_t> {
          Value operand = optionalOperand(op, i);
          return operand ? constantSplat(operand) : std::nullopt;
        };
        return clampRange(operandRange(0), bound(1), bound(2));
      })
      .Case([&](onnx::CastOp) { return castRange(op, search); })
      .Case([&](onnx::AddOp) {
        return combineRanges(operandRange(0), operandRange(1),
                             [](int64_t x, int64_t y, int64_t &z) {
                               return llvm::AddOverflow(x, y, z);
                             });
      })
      .Case([&](onnx::SubOp) {
        return combineRanges(operandRange(0), operandRange(1),
                             [](int64_t x, int64_t y, int64_t &z) {
                               return llvm::SubOverflow(x, y, z);
                             });
      })
      .Case([&](onnx::MulOp) {
        return combineRanges(operandRange(0), operandRange(1),
                             [](int64_t x, int64_t y, int64_t &z) {
                               return llvm::MulOverflow(x, y, z);
                             });
      })
      .Case([&](onnx::NegOp) -> Range {
        Range range = operandRange(0);
        if (!range || range->min == kMinInt)
          return std::nullopt;
        return IntRange{-range->max, -range->min};
      })
      .Case([&](onnx::ModOp) { return modRange(op); })
      .Default([](Operation *) { return std::nullopt; });
}

/// `value`'s range, from what the search knows or its producer; none
/// deeper than kMaxDepth producers.
static std::optional<IntRange> rangeOf(Value value, RangeSearch &search) {
  auto it = search.known.find(value);
  if (it != search.known.end())
    return it->second;
  if (search.depth == kMaxDepth)
    return std::nullopt;
  ++search.depth;
  std::optional<IntRange> range = producerRange(value, search);
  --search.depth;
  search.known[value] = range;
  return range;
}

std::optional<IntRange> provenRange(Value value) {
  RangeSearch search;
  return rangeOf(value, search);
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

/// Whether ONNX allows `index` in a dim of `size`: `[-size, size-1]`.
static bool allowed(int64_t index, int64_t size) {
  return index >= -size && index < size;
}

std::optional<IndexUse> getIndexUse(Operation *op) {
  if (!isa<onnx::GatherOp, onnx::GatherElementsOp, onnx::ScatterElementsOp,
           onnx::GatherNDOp, onnx::ScatterNDOp>(op) ||
      op->getNumOperands() < 2 ||
      !isStaticTensor(op->getOperand(0).getType()) ||
      !isStaticTensor(op->getOperand(1).getType()))
    return std::nullopt;
  ArrayRef<int64_t> shape = tensorType(op->getOperand(0)).getShape();
  IndexUse use;
  use.indices = op->getOperand(1);
  auto rank = static_cast<int64_t>(shape.size());
  if (!isa<onnx::GatherNDOp, onnx::ScatterNDOp>(op)) {
    if (rank == 0)
      return std::nullopt;
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
    use.dims.push_back(axis);
    use.sizes.push_back(shape[axis]);
    return use;
  }
  ArrayRef<int64_t> indexShape = tensorType(use.indices).getShape();
  if (indexShape.empty())
    return std::nullopt;
  // GatherND's tuples start after the batch dims.
  int64_t first = isa<onnx::GatherNDOp>(op) ? intAttr(op, "batch_dims", 0) : 0;
  if (first < 0 || first + indexShape.back() > rank)
    return std::nullopt;
  use.lastDimSelects = true;
  for (int64_t c = 0; c < indexShape.back(); ++c) {
    use.dims.push_back(first + c);
    use.sizes.push_back(shape[first + c]);
  }
  return use;
}

/// How many dims the indices select in: one, or the size of the last dim.
static int64_t numComponents(const IndexUse &use) {
  return use.lastDimSelects ? tensorType(use.indices).getShape().back() : 1;
}

/// Emits an error at `op` where one of its constant indices is out of
/// range and fails; succeeds where all are in range or none is a constant.
static LogicalResult checkConstant(Operation *op, const IndexUse &use) {
  std::optional<ConstTensor> constant = getConstant(use.indices);
  if (!constant)
    return success();
  int64_t components = numComponents(use);
  for (int64_t i = 0, e = constant->size(); i < e; ++i) {
    int64_t index = constant->asInt(i), c = i % components;
    int64_t size = use.sizes[c];
    if (allowed(index, size))
      continue;
    return op->emitOpError()
           << "index " << index << " is out of range for dim " << use.dims[c]
           << " of size " << size << " (ONNX allows [" << -size << ", "
           << size - 1 << "])";
  }
  return success();
}

LogicalResult checkConstantIndices(Operation *root) {
  bool failed = false;
  root->walk([&](Operation *op) {
    if (std::optional<IndexUse> use = getIndexUse(op))
      failed |= mlir::failed(checkConstant(op, *use));
  });
  return failure(failed);
}

/// The address of a C string that holds `op`'s name, a constant global of
/// the module.
static Value opNameString(OpBuilder &b, Location loc, Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  std::string text = op->getName().getStringRef().str();
  std::string symbol = "moe.op_name." + text;
  auto global = module.lookupSymbol<LLVM::GlobalOp>(symbol);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    text.push_back('\0');
    global = LLVM::GlobalOp::create(
        b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), text.size()),
        /*isConstant=*/true, LLVM::Linkage::Internal, symbol,
        b.getStringAttr(text));
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

/// An integer (or float) index as i64.
static Value toI64(OpBuilder &b, Location loc, Value value) {
  Type type = value.getType(), i64 = b.getI64Type();
  if (isa<FloatType>(type))
    return arith::FPToSIOp::create(b, loc, i64, value);
  if (type.isIndex())
    return arith::IndexCastOp::create(b, loc, i64, value);
  if (type.getIntOrFloatBitWidth() < 64)
    return arith::ExtSIOp::create(b, loc, i64, value);
  return value;
}

/// An i64 `[size]` filled with `value`.
static Value filledI64(OpBuilder &b, Location loc, int64_t size,
                       int64_t value) {
  Value element = arith::ConstantIntOp::create(b, loc, value, 64);
  Value empty =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{size}, b.getI64Type());
  return linalg::FillOp::create(b, loc, element, empty).getResult(0);
}

/// The smallest and largest of `indices`, i64 `[n]`: `n` is 1, or, where
/// `lastDimSelects`, the size of the last dim (element c: the indices at
/// position c of it). One linalg.generic; on a GPU a kernel.
static std::pair<Value, Value> indexBounds(OpBuilder &b, Location loc,
                                           Value indices, bool lastDimSelects) {
  RankedTensorType type = tensorType(indices);
  unsigned rank = type.getRank();
  // Loops: the indices' dims, after a leading one of size 1 into which
  // all of them reduce unless the last dim selects.
  unsigned first = lastDimSelects ? 0 : 1, numLoops = rank + first;
  AffineMap input =
      loopsTo(b, numLoops, llvm::to_vector(llvm::seq(first, numLoops)));
  AffineMap bound = loopsTo(b, numLoops, {lastDimSelects ? rank - 1 : 0});
  int64_t n = lastDimSelects ? type.getShape().back() : 1;
  SmallVector<Value> bounds = lowering::buildGeneric(
      b, loc, indices, input,
      {filledI64(b, loc, n, kMaxInt), filledI64(b, loc, n, kMinInt)}, bound,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value index = toI64(nb, nloc, args[0]);
        return {arith::MinSIOp::create(nb, nloc, index, args[1]),
                arith::MaxSIOp::create(nb, nloc, index, args[2])};
      });
  return {bounds[0], bounds[1]};
}

/// Ends the program where `[min, max]` (i64) leaves `[-size, size-1]`.
static void reportOutside(OpBuilder &b, Location loc, Operation *op, Value min,
                          Value max, int64_t dim, int64_t size,
                          bool useRuntime) {
  auto i64 = [&](int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 64);
  };
  Value below =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, min, i64(-size));
  Value above = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, max,
                                      i64(size - 1));
  Value outside = arith::OrIOp::create(b, loc, below, above);
  if (!useRuntime) {
    Value inside = arith::XOrIOp::create(
        b, loc, outside, arith::ConstantIntOp::create(b, loc, 1, 1));
    cf::AssertOp::create(b, loc, inside,
                         (op->getName().getStringRef() +
                          ": an index is out of range for dim " + Twine(dim) +
                          " of size " + Twine(size) + " (ONNX allows [" +
                          Twine(-size) + ", " + Twine(size - 1) + "])")
                             .str());
    return;
  }
  // Built in place: runtime::call finds the module from the block.
  auto ifOp = scf::IfOp::create(b, loc, outside, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  // The largest where it is too large, else the smallest.
  Value index = arith::SelectOp::create(b, loc, above, max, min);
  runtime::call(b, loc, "moert_index_out_of_range",
                {opNameString(b, loc, op), index, i64(dim), i64(size)});
}

LogicalResult checkIndices(RewriterBase &rewriter, Operation *op, Value lowered,
                           bool runtime) {
  std::optional<IndexUse> use = getIndexUse(op);
  if (!use)
    return cannotLower(rewriter, op,
                       "the dims that the indices select in are unknown");
  int64_t components = numComponents(*use);
  if (components == 0 || tensorType(use->indices).getNumElements() == 0)
    return success();
  if (getConstant(use->indices)) {
    if (failed(checkConstant(op, *use)))
      return rewriter.notifyMatchFailure(op,
                                         "a constant index is out of range");
    return success();
  }
  if (std::optional<IntRange> range = provenRange(use->indices)) {
    auto holds = [&](int64_t c) {
      return allowed(range->min, use->sizes[c]) &&
             allowed(range->max, use->sizes[c]);
    };
    if (llvm::all_of(llvm::seq<int64_t>(0, components), holds))
      return success();
  }

  Location loc = op->getLoc();
  auto [mins, maxs] = indexBounds(rewriter, loc, lowered, use->lastDimSelects);
  for (int64_t c = 0; c < components; ++c) {
    Value at = indexConst(rewriter, loc, c);
    Value min = tensor::ExtractOp::create(rewriter, loc, mins, at);
    Value max = tensor::ExtractOp::create(rewriter, loc, maxs, at);
    reportOutside(rewriter, loc, op, min, max, use->dims[c], use->sizes[c],
                  runtime);
  }
  return success();
}

} // namespace mlir::moe::onnx_lowering
