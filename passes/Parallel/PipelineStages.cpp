//===- PipelineStages.cpp - cut a function into pipeline stages -----------===//
//
// The ops of the function are cut into `pp` contiguous stages of balanced
// estimated cost, never where a value made by a moe op would cross (an MoE
// block stays whole). Each stage becomes `@<fn>_stage<i>(args..., received
// activations...)`; the function itself runs the stage of its rank, receives
// what the stage before sent, sends what later stages need, and the last
// stage broadcasts the results so that every rank returns them.
//
//===----------------------------------------------------------------------===//

#include "passes/Parallel/Partition.h"
#include "passes/Parallel/ShardLayer.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::spmd;

static int64_t numElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return shaped && shaped.hasStaticShape() ? shaped.getNumElements() : 1;
}

/// Estimated flops: contractions count 2 per multiply-add, the rest one per
/// result element.
static double estimateCost(Operation *op) {
  auto rowsOf = [](Value v) {
    return static_cast<double>(cast<ShapedType>(v.getType()).getDimSize(0));
  };
  if (auto experts = dyn_cast<ExpertsOp>(op)) {
    double weights = numElements(experts.getFc1Weight().getType()) +
                     numElements(experts.getFc2Weight().getType());
    if (experts.getFc3Weight())
      weights += numElements(experts.getFc3Weight().getType());
    // Capacity rows [G, C, H] hold G * C rows.
    auto rows = cast<ShapedType>(experts.getRows().getType());
    double n = rows.getRank() == 3 ? rows.getDimSize(0) * rows.getDimSize(1)
                                   : rows.getDimSize(0);
    return 2.0 * n * weights / experts.getNumExperts();
  }
  if (auto shared = dyn_cast<SharedExpertOp>(op)) {
    double weights = numElements(shared.getFc1Weight().getType()) +
                     numElements(shared.getFc2Weight().getType());
    if (shared.getFc3Weight())
      weights += numElements(shared.getFc3Weight().getType());
    return 2.0 * rowsOf(shared.getInput()) * weights;
  }
  double cost = 0;
  for (Value r : op->getResults())
    cost += numElements(r.getType());
  // Matrix products (onnx.MatMul, linalg.matmul, ...): times the shared dim.
  if (op->getName().getStringRef().ends_with("MatMul") ||
      op->getName().getStringRef().ends_with("matmul")) {
    auto lhs = dyn_cast<ShapedType>(op->getOperand(0).getType());
    if (lhs && lhs.hasRank() && !lhs.isDynamicDim(lhs.getRank() - 1))
      cost *= 2.0 * lhs.getDimSize(lhs.getRank() - 1);
  }
  return cost;
}

static bool isMoEOp(Operation *op) {
  return isa<MoEDialect>(op->getDialect());
}

FailureOr<SmallVector<func::FuncOp>>
spmd::splitPipelineStages(func::FuncOp func, PlanAttr plan) {
  int64_t pp = plan.getPp();
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "moe-partition: pipeline stages need a "
                               "function of one block",
           failure();
  mlir::Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!op.hasTrait<OpTrait::ConstantLike>())
      ops.push_back(&op);
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;

  // A cut before ops[i] is allowed when no value made by a moe op, and no
  // value of dynamic shape (a receiver sizes its buffer statically), crosses.
  int64_t n = ops.size();
  SmallVector<bool> allowed(n + 1, true);
  auto mustNotCross = [&](Value v) {
    auto shaped = dyn_cast<ShapedType>(v.getType());
    return isMoEOp(v.getDefiningOp()) || !shaped || !shaped.hasStaticShape();
  };
  for (auto [i, op] : llvm::enumerate(ops)) {
    int64_t lastUse = i;
    for (Value r : op->getResults()) {
      if (!mustNotCross(r))
        continue;
      for (Operation *user : r.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        lastUse = std::max(lastUse, top == terminator
                                        ? n
                                        : position.lookup(top));
      }
    }
    for (int64_t c = i + 1; c <= lastUse; ++c)
      allowed[c] = false;
  }

  // Balanced cuts: the allowed place nearest to each share of the cost,
  // leaving at least one op to every later stage.
  SmallVector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + estimateCost(ops[i]);
  SmallVector<int64_t> cuts{0};
  for (int64_t s = 1; s < pp; ++s) {
    double target = prefix[n] * s / pp;
    int64_t best = -1;
    for (int64_t c = cuts.back() + 1; c <= n - (pp - s); ++c)
      if (allowed[c] &&
          (best < 0 ||
           std::abs(prefix[c] - target) < std::abs(prefix[best] - target)))
        best = c;
    if (best < 0)
      return func.emitError()
                 << "moe-partition: pp = " << pp << " stages, but "
                 << func.getName() << " has too few places to cut (an MoE "
                 << "block, or a value of dynamic shape, is never cut)",
             failure();
    cuts.push_back(best);
  }
  cuts.push_back(n);

  auto stageOf = [&](Operation *op) -> int64_t {
    int64_t i = position.lookup(op);
    return std::upper_bound(cuts.begin(), cuts.end(), i) - cuts.begin() - 1;
  };
  // live[s]: values made before stage s (not constants) that stage s or a
  // later one, or the return, uses.
  SmallVector<llvm::SetVector<Value>> live(pp + 1);
  auto noteUse = [&](Value v, int64_t userStage) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body ||
        def->hasTrait<OpTrait::ConstantLike>())
      return;
    for (int64_t s = stageOf(def) + 1; s <= userStage; ++s)
      live[s].insert(v);
  };
  for (Operation *op : ops)
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        noteUse(v, stageOf(op));
    });
  for (Value v : terminator->getOperands())
    noteUse(v, pp - 1);

  // Outline each stage.
  OpBuilder b(func);
  MLIRContext *ctx = func.getContext();
  SmallVector<func::FuncOp> stages;
  TypeRange argTypes = func.getArgumentTypes();
  for (int64_t s = 0; s < pp; ++s) {
    SmallVector<Type> inputs(argTypes);
    for (Value v : live[s])
      inputs.push_back(v.getType());
    SmallVector<Value> outputs = s + 1 < pp
                                     ? llvm::to_vector(live[s + 1])
                                     : llvm::to_vector(terminator->getOperands());
    auto stage = func::FuncOp::create(
        b, func.getLoc(), (func.getName() + "_stage" + Twine(s)).str(),
        FunctionType::get(ctx, inputs, ValueRange(outputs).getTypes()));
    stage.setPrivate();
    mlir::Block *entry = stage.addEntryBlock();
    IRMapping map;
    for (auto [from, to] : llvm::zip(func.getArguments(), entry->getArguments()))
      map.map(from, to);
    for (auto [from, to] : llvm::zip(
             live[s], entry->getArguments().drop_front(argTypes.size())))
      map.map(from, to);
    OpBuilder sb = OpBuilder::atBlockEnd(entry);
    for (int64_t i = cuts[s]; i < cuts[s + 1]; ++i) {
      // Constants are made again where they are used, so each stage's ranks
      // hold only that stage's weights.
      ops[i]->walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (Operation *def = v.getDefiningOp())
            if (def->getBlock() == &body &&
                def->hasTrait<OpTrait::ConstantLike>() && !map.contains(v))
              sb.clone(*def, map);
      });
      sb.clone(*ops[i], map);
    }
    SmallVector<Value> results;
    for (Value v : outputs) {
      if (Operation *def = v.getDefiningOp();
          def && def->hasTrait<OpTrait::ConstantLike>() && !map.contains(v))
        sb.clone(*def, map);
      results.push_back(map.lookup(v));
    }
    func::ReturnOp::create(sb, func.getLoc(), results);
    stages.push_back(stage);
  }

  // The function runs its rank's stage.
  SmallVector<SmallVector<Type>> liveTypes;
  for (const llvm::SetVector<Value> &values : live)
    liveTypes.push_back(llvm::to_vector(ValueRange(values.getArrayRef()).getTypes()));
  SmallVector<Value> args(func.getArguments());
  TypeRange resultTypes = func.getResultTypes();
  terminator->erase();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    op.erase();
  b.setInsertionPointToEnd(&body);
  Location loc = func.getLoc();
  Exchanges x(b, plan);
  auto placeholders = [&](OpBuilder &ob) {
    // Stages other than the last return nothing real; the broadcast below
    // overwrites these.
    SmallVector<Value> values;
    for (Type t : resultTypes) {
      auto type = cast<RankedTensorType>(t);
      SmallVector<int64_t> shape;
      for (int64_t d : type.getShape())
        shape.push_back(ShapedType::isDynamic(d) ? 0 : d);
      Value empty = tensor::EmptyOp::create(ob, loc, shape,
                                            type.getElementType());
      values.push_back(empty.getType() == t
                           ? empty
                           : tensor::CastOp::create(ob, loc, t, empty));
    }
    return values;
  };
  SmallVector<int64_t> caseValues;
  for (int64_t s = 0; s < pp; ++s)
    caseValues.push_back(s);
  auto stageSwitch = scf::IndexSwitchOp::create(
      b, loc, resultTypes, x.index(loc, Axis::PP), caseValues, pp);
  for (int64_t s = 0; s < pp; ++s) {
    mlir::Block &caseBlock = stageSwitch.getCaseRegions()[s].emplaceBlock();
    OpBuilder cb = OpBuilder::atBlockEnd(&caseBlock);
    Exchanges cx(cb, plan);
    SmallVector<Value> operands(args);
    for (Type t : liveTypes[s])
      operands.push_back(cx.recv(loc, t, Axis::PP, s - 1));
    auto call = func::CallOp::create(cb, loc, stages[s], operands);
    if (s + 1 < pp) {
      for (Value v : call.getResults())
        cx.send(loc, v, Axis::PP, s + 1);
      scf::YieldOp::create(cb, loc, placeholders(cb));
    } else {
      scf::YieldOp::create(cb, loc, call.getResults());
    }
  }
  OpBuilder db = OpBuilder::atBlockEnd(
      &stageSwitch.getDefaultRegion().emplaceBlock());
  scf::YieldOp::create(db, loc, placeholders(db));
  SmallVector<Value> results;
  for (Value r : stageSwitch.getResults())
    results.push_back(x.broadcast(loc, r, Axis::PP, pp - 1));
  func::ReturnOp::create(b, loc, results);
  return stages;
}
