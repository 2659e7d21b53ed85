//===- Validation.cpp - raised blocks checked against their ops -----------===//
//
// The module evaluated for one block:
//
//   func.func @moe_raise_check() -> (tensor<TxH>, tensor<TxH>) {
//     %x = arith.constant dense<[samples]> : tensor<TxH>     // the tokens
//     %l = onnx.MatMul %x, %router ...                       // the logits
//     ... the recognised ops, and the weights they read ...
//     ... the raised op ...
//     return %original, %raised
//   }
//
// The tokens are N(0, 1) samples (a fixed seed), and the router's logits
// computed from them by the block's own ops; where they are not (another
// input), they are sampled too. Distinct samples, so that no top-k is a
// tie either side may break its own way. A dynamic dimension of the tokens
// becomes 4, and the logits' token dimension the tokens' count.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/Validation.h"
#include "dialects/moe/IR/MoEOps.h"

#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#include <cmath>

#include <chrono>
#include <mutex>
#include <random>

using namespace mlir;
using namespace mlir::moe;

namespace {
struct State {
  std::mutex mutex;
  raise::ModuleEvaluator evaluator;
  raise::ValidationCounts counts;
  /// The anchors of the blocks refused since the counts were last taken.
  DenseSet<Operation *> refused;
};
State &state() {
  static State *instance = new State(); // lives as long as the process
  return *instance;
}

/// Collects the ops `value` is computed by, back to `leaves` and constants,
/// defs before uses; failure with why when it reads anything else.
LogicalResult collect(Value value, const llvm::SetVector<Value> &leaves,
                      llvm::SetVector<Operation *> &ops, std::string &why) {
  if (leaves.contains(value))
    return success();
  Operation *def = value.getDefiningOp();
  if (!def) {
    why = "it reads a value other than its tokens and router logits";
    return failure();
  }
  if (ops.contains(def))
    return success();
  if (def->getNumRegions() != 0) {
    why = "it holds an op with regions ('" +
          def->getName().getStringRef().str() + "')";
    return failure();
  }
  for (Value operand : def->getOperands())
    if (failed(collect(operand, leaves, ops, why)))
      return failure();
  ops.insert(def);
  return success();
}

/// A static type for a sample of `type`: dynamic dimensions become
/// `dynamicSize`.
RankedTensorType sampleType(Type type, int64_t dynamicSize) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return {};
  SmallVector<int64_t> shape(tensor.getShape());
  for (int64_t &d : shape)
    if (ShapedType::isDynamic(d))
      d = dynamicSize;
  return RankedTensorType::get(shape, tensor.getElementType());
}

/// The module that returns what `original` and `replacement` compute from
/// sampled leaves; null with why when it cannot be built.
OwningOpRef<ModuleOp> buildCheck(Value original, Value replacement,
                                 ArrayRef<Value> leafValues,
                                 std::string &why) {
  llvm::SetVector<Value> leaves(leafValues.begin(), leafValues.end());
  llvm::SetVector<Operation *> ops;
  if (failed(collect(original, leaves, ops, why)) ||
      failed(collect(replacement, leaves, ops, why)))
    return nullptr;
  MLIRContext *ctx = original.getContext();
  Location loc = original.getLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(
      b, loc, "moe_raise_check",
      b.getFunctionType({}, {original.getType(), replacement.getType()}));
  b.setInsertionPointToStart(func.addEntryBlock());

  IRMapping mapping;
  std::mt19937 gen(20261128);
  std::normal_distribution<float> normal;
  int64_t tokens = -1;
  for (Value leaf : leaves) {
    // The first leaf holds the tokens; a later one's dynamic dimension
    // (the logits' rows) is their count.
    RankedTensorType type = sampleType(leaf.getType(), tokens > 0 ? tokens : 4);
    if (!type || !type.getElementType().isF32() || type.getRank() == 0) {
      why = "its inputs are not f32 tensors";
      return nullptr;
    }
    if (tokens < 0)
      tokens = type.getNumElements() / type.getShape().back();
    SmallVector<float> samples(type.getNumElements());
    for (float &v : samples)
      v = normal(gen);
    mapping.map(leaf, arith::ConstantOp::create(
                          b, loc, DenseElementsAttr::get(type,
                                                         ArrayRef(samples))));
  }
  for (Operation *op : ops) {
    b.clone(*op, mapping);
    // The body of a custom activation comes along.
    for (NamedAttribute attr : op->getAttrs())
      if (auto activation = dyn_cast<moe::ActivationAttr>(attr.getValue()))
        if (func::FuncOp body = moe::lookupActivationBody(op, activation);
            body && !module->lookupSymbol(body.getSymNameAttr())) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToEnd(module->getBody());
          b.clone(*body);
        }
  }
  func::ReturnOp::create(b, loc,
                         ValueRange{mapping.lookup(original),
                                    mapping.lookup(replacement)});
  return module;
}

/// The largest difference between `a` and `b` against a's largest
/// magnitude, or infinity where they disagree on a NaN.
double relativeDifference(const std::vector<float> &a,
                          const std::vector<float> &b, double &scale) {
  double diff = 0;
  scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i]))
      return INFINITY;
    if (std::isnan(a[i]))
      continue;
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return diff / std::max(scale, 1e-30);
}

/// Relative error the reference lowering's sums in another order may
/// leave: far below a wrong block's (a dropped op, another routing).
constexpr double kTolerance = 1e-4;

} // namespace

/// Whether `op` or an ancestor has the unit attribute `name`.
static bool onAncestor(Operation *op, StringRef name) {
  for (; op; op = op->getParentOp())
    if (op->hasAttr(name))
      return true;
  return false;
}

bool raise::validationRequested(Operation *op) {
  return onAncestor(op, kValidateAttrName);
}

bool raise::givenRoutingRequested(Operation *op) {
  return onAncestor(op, kGivenRoutingAttrName);
}

void raise::markRefused(Operation *anchor) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().refused.insert(anchor);
}

void raise::retryRefused() {
  std::lock_guard<std::mutex> lock(state().mutex);
  --state().counts.refused;
}

bool raise::wasRefused(Operation *anchor) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().refused.contains(anchor);
}

void raise::setModuleEvaluator(ModuleEvaluator evaluator) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().evaluator = std::move(evaluator);
}

raise::ValidationCounts raise::takeValidationCounts() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().refused.clear();
  return std::exchange(state().counts, {});
}

/// Where the tokens come from: `input` back through ops that only reshape
/// or retype it, so that a block that also reads an earlier form of them
/// (a shared expert on the unflattened input) reads the same samples.
Value tokenSource(Value input) {
  while (Operation *def = input.getDefiningOp()) {
    if (!isa<onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp,
             onnx::UnsqueezeOp, onnx::CastOp, onnx::IdentityOp>(def))
      break;
    Value from = def->getOperand(0);
    if (getElementTypeOrSelf(from) != getElementTypeOrSelf(input))
      break;
    input = from;
  }
  return input;
}

LogicalResult raise::checkRaisedBlock(Value original, Value replacement,
                                      ArrayRef<Value> leaves,
                                      Operation *anchor,
                                      PatternRewriter &rewriter,
                                      bool requireCheck) {
  if (!validationRequested(anchor))
    return requireCheck
               ? rewriter.notifyMatchFailure(
                     anchor, "this block is raised only where it is checked "
                             "(moe-raise{validate=1})")
               : success();
  ModuleEvaluator evaluator;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    evaluator = state().evaluator;
  }
  auto start = std::chrono::steady_clock::now();
  auto count = [&](auto update) {
    std::lock_guard<std::mutex> lock(state().mutex);
    update(state().counts);
    state().counts.seconds += std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - start)
                                  .count();
  };
  auto unchecked = [&](const std::string &why) -> LogicalResult {
    if (requireCheck) {
      markRefused(anchor);
      count([](ValidationCounts &c) { ++c.refused; });
      return rewriter.notifyMatchFailure(
          anchor, "not raised: the block could not be checked (" + why +
                      "), and its routing is raised only where it is");
    }
    count([&](ValidationCounts &c) {
      ++c.unchecked;
      if (c.reason.empty())
        c.reason = why;
    });
    return success();
  };
  if (!evaluator)
    return unchecked("this tool evaluates no module");
  // Only the tokens are sampled where the router's logits are computed from
  // them (a block may read the logits twice, once recomputed); else the
  // logits too.
  std::string why;
  OwningOpRef<ModuleOp> module = buildCheck(
      original, replacement, {tokenSource(leaves.front())}, why);
  if (!module) {
    SmallVector<Value> sampled(leaves);
    sampled.front() = tokenSource(sampled.front());
    why.clear();
    module = buildCheck(original, replacement, sampled, why);
  }
  if (!module)
    return unchecked(why);
  FailureOr<std::vector<std::vector<float>>> results = evaluator(*module, why);
  if (failed(results) || results->size() != 2 ||
      (*results)[0].size() != (*results)[1].size())
    return unchecked(why.empty() ? "the evaluation failed" : why);
  double scale = 0;
  double difference = relativeDifference((*results)[0], (*results)[1], scale);
  if (difference <= kTolerance) {
    count([](ValidationCounts &c) { ++c.checked; });
    return success();
  }
  count([](ValidationCounts &c) { ++c.refused; });
  std::string message;
  llvm::raw_string_ostream os(message);
  os << "moe-raise: not raised"
     << (requireCheck ? " (with the program's own routing)" : "")
     << ": on sample tokens the raised block's output "
        "differs from the ops it would replace by "
     << llvm::format("%.3g", difference) << " of their largest magnitude ("
     << llvm::format("%.3g", scale) << ")";
  original.getDefiningOp()->emitRemark(message);
  markRefused(anchor);
  return rewriter.notifyMatchFailure(anchor, message);
}
