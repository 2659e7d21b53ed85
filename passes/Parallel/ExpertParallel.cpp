//===- ExpertParallel.cpp - one rank's share of each MoE block ------------===//
//
// A block is router -> dispatch -> experts -> combine (+ a shared expert
// added to the result). Each rank routes its tokens, sends their rows to the
// ranks that hold their experts, runs its experts on what it receives and
// brings the results back; see MoEPartitionPass in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Parallel/Partition.h"
#include "passes/Parallel/ShardLayer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include <random>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::spmd;

namespace {

/// The ops of one MoE block.
struct MoEBlock {
  RouterOp router;
  PlaceOp place; // optional: the router's choices -> slots
  DispatchOp dispatch;
  ExpertsOp experts;
  CombineOp combine;
  SharedExpertOp shared;  // optional
  arith::AddFOp sharedAdd; // combine + shared, when `shared` is set

  Value result() {
    return sharedAdd ? sharedAdd.getResult() : combine.getOutput();
  }
};

/// The block that ends in `combine`, or the reason it is not one.
FailureOr<MoEBlock> matchBlock(CombineOp combine, std::string &why) {
  MoEBlock blk;
  blk.combine = combine;
  blk.experts = combine.getRows().getDefiningOp<ExpertsOp>();
  if (!blk.experts)
    return why = "its rows do not come from moe.experts", failure();
  blk.dispatch = blk.experts.getRows().getDefiningOp<DispatchOp>();
  if (!blk.dispatch || blk.experts.getCounts() != blk.dispatch.getCounts() ||
      combine.getSlots() != blk.dispatch.getSlots())
    return why = "moe.experts and moe.combine do not use one moe.dispatch's "
                 "rows, counts and slots",
           failure();
  Value ids = blk.dispatch.getIds();
  if ((blk.place = ids.getDefiningOp<PlaceOp>()))
    ids = blk.place.getIds();
  blk.router = ids.getDefiningOp<RouterOp>();
  if (!blk.router || combine.getWeights() != blk.router.getWeights())
    return why = "the dispatch ids and combine weights do not come from one "
                 "moe.router",
           failure();
  if (!blk.experts->hasOneUse() || !blk.dispatch.getRows().hasOneUse())
    return why = "the expert rows have other users", failure();
  if (combine->hasOneUse()) {
    if (auto add = dyn_cast<arith::AddFOp>(*combine->user_begin())) {
      Value other = add.getLhs() == combine.getOutput() ? add.getRhs()
                                                        : add.getLhs();
      auto shared = other.getDefiningOp<SharedExpertOp>();
      if (shared && shared->hasOneUse() &&
          shared.getInput() == blk.dispatch.getInput()) {
        blk.shared = shared;
        blk.sharedAdd = add;
      }
    }
  }
  return blk;
}

/// Whether fc1 stacks a concatenated SwiGLU's [gate; linear] halves, which a
/// tp split must cut separately.
bool holdsHalves(ActivationAttr act) {
  return act.getKind() == ActivationKind::SwiGLU &&
         act.getLayout() == SwiGLULayout::Concatenated;
}

/// Fisher-Yates with an explicit generator, so that every platform builds
/// the same permutation from a seed.
SmallVector<int32_t> shuffled(int64_t n, uint64_t seed) {
  SmallVector<int32_t> perm(n);
  for (int64_t i = 0; i < n; ++i)
    perm[i] = static_cast<int32_t>(i);
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[i], perm[rng() % static_cast<uint64_t>(i + 1)]);
  return perm;
}

/// Rewrites one block for one rank of the plan.
class BlockPartitioner {
public:
  BlockPartitioner(PlanAttr plan, OpBuilder &b)
      : plan(plan), b(b), x(b, plan) {}

  LogicalResult run(MoEBlock &blk);

private:
  // Tokens.
  Value shuffle(Location loc, Value rows);
  Value unshuffle(Location loc, Value rows);
  Value restoreTokens(Location loc, Value local);
  // Weights.
  LogicalResult localWeight(Operation *at, Value w, bool perExpert,
                            int64_t tpDim, bool pairedHalves, StringRef what,
                            Value &into);
  FailureOr<Value> tpSlice(Operation *at, Value w, int64_t dim,
                           bool pairedHalves, StringRef what);
  Value onFirstTpRank(Location loc, Value bias);
  Value shardOverDp(Location loc, Value w);
  Value localIds(Location loc, Value ids, int64_t localExperts);
  Value choiceOffsets(Location loc, Value ids, int64_t numExperts,
                      int64_t capacity, ArrayRef<Axis> axes);
  FailureOr<SharedExpertOp> localSharedExpert(SharedExpertOp shared,
                                              Value input);

  static constexpr Axis tokenAxes[] = {Axis::DP, Axis::DPShard, Axis::EP};
  static constexpr Axis dataAxes[] = {Axis::DP, Axis::DPShard};

  PlanAttr plan;
  OpBuilder &b;
  Exchanges x;
  // Token shuffle: this rank's permutation and its inverse.
  Value perm, inversePerm;
};

Value BlockPartitioner::shuffle(Location loc, Value rows) {
  if (!perm)
    return rows;
  return x.allToAll(loc, GatherRowsOp::create(b, loc, rows.getType(), rows, perm),
                    {Axis::EP});
}

Value BlockPartitioner::unshuffle(Location loc, Value rows) {
  if (!perm)
    return rows;
  Value back = x.allToAll(loc, rows, {Axis::EP});
  return GatherRowsOp::create(b, loc, rows.getType(), back, inversePerm);
}

Value BlockPartitioner::restoreTokens(Location loc, Value local) {
  return markTokens(x.gather(loc, unshuffle(loc, local), tokenAxes, 0));
}

FailureOr<Value> BlockPartitioner::tpSlice(Operation *at, Value w, int64_t dim,
                                           bool pairedHalves, StringRef what) {
  int64_t tp = plan.getTp();
  auto type = cast<RankedTensorType>(w.getType());
  int64_t n = type.getDimSize(dim);
  // A concatenated SwiGLU's fc1 holds [gate; linear]: each rank takes its
  // block of both halves.
  int64_t parts = pairedHalves ? 2 : 1;
  if (n % (parts * tp) != 0)
    return at->emitError() << "moe-partition: tp = " << tp
                           << " does not divide the " << n / parts
                           << " hidden units of " << what,
           failure();
  Location loc = at->getLoc();
  if (!pairedHalves)
    return x.slice(loc, w, {Axis::TP}, dim);
  SmallVector<int64_t> split(type.getShape());
  split[dim] = n / 2;
  split.insert(split.begin() + dim, 2);
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0, r = type.getRank(); i < r; ++i)
    groups.push_back(i == dim ? ReassociationIndices{i, i + 1}
                              : ReassociationIndices{i < dim ? i : i + 1});
  Value halves = tensor::ExpandShapeOp::create(b, loc, type.clone(split), w,
                                               groups);
  Value mine = x.slice(loc, halves, {Axis::TP}, dim + 1);
  return tensor::CollapseShapeOp::create(b, loc, mine, groups).getResult();
}

Value BlockPartitioner::shardOverDp(Location loc, Value w) {
  int64_t n = x.size(Axis::DPShard);
  if (n == 1)
    return w;
  auto type = cast<RankedTensorType>(w.getType());
  // Shard along the first dimension that splits evenly (FSDP flattens, but a
  // tensor dimension keeps the shards tensors); a weight with no such
  // dimension stays whole on every rank, which costs memory, not results.
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.getDimSize(d) % n == 0)
      return x.gather(loc, x.slice(loc, w, {Axis::DPShard}, d),
                      {Axis::DPShard}, d);
  return w;
}

/// This rank's share of `w` (null stays null): its experts' block when
/// `perExpert`, its hidden units along `tpDim` (none for -1), kept sharded
/// over dp_shard. Fails, with the error emitted, when tp does not divide.
LogicalResult BlockPartitioner::localWeight(Operation *at, Value w,
                                            bool perExpert, int64_t tpDim,
                                            bool pairedHalves, StringRef what,
                                            Value &into) {
  into = w;
  if (!w)
    return success();
  if (perExpert)
    into = x.slice(at->getLoc(), into, {Axis::EP}, 0);
  if (plan.getTp() > 1 && tpDim >= 0) {
    FailureOr<Value> sliced = tpSlice(at, into, tpDim, pairedHalves, what);
    if (failed(sliced))
      return failure();
    into = *sliced;
  }
  into = shardOverDp(at->getLoc(), into);
  return success();
}

Value BlockPartitioner::onFirstTpRank(Location loc, Value bias) {
  if (!bias || plan.getTp() == 1)
    return bias;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      x.index(loc, Axis::TP), zero);
  Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(bias.getType()));
  return arith::SelectOp::create(b, loc, first, bias, zeros);
}

/// Global expert ids -> ids of this rank's experts, -1 for the others.
Value BlockPartitioner::localIds(Location loc, Value ids,
                                 int64_t localExperts) {
  auto type = cast<RankedTensorType>(ids.getType());
  Value rank = x.index(loc, Axis::EP);
  Value base = arith::MulIOp::create(
      b, loc, rank, arith::ConstantIndexOp::create(b, loc, localExperts));
  base = arith::IndexCastOp::create(b, loc, b.getI32Type(), base);
  auto splat = [&](Value scalar) -> Value {
    return tensor::SplatOp::create(b, loc, type, scalar);
  };
  auto constant = [&](int32_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getI32IntegerAttr(v)));
  };
  Value shifted = arith::SubIOp::create(b, loc, ids, splat(base));
  Value atLeast0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                         shifted, constant(0));
  Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      shifted, constant(localExperts));
  Value mine = arith::AndIOp::create(b, loc, atLeast0, below);
  return arith::SelectOp::create(b, loc, mine, shifted, constant(-1));
}

/// moe.dispatch's `after` counts for the `choice` policy on this rank's
/// `ids` [T, k] (E experts), the batch split over `axes`: C less the pairs
/// this rank keeps. Pair (t, j) of expert e stands at
/// `G_j[e] + its place among this rank's choice-j pairs` in the batch's
/// choice order, with G_j the choice-j pairs of earlier ranks plus every
/// rank's pairs of lower choices; the rank keeps `clamp(C - G_j, 0, n_j)`
/// of its n_j choice-j pairs, and takes them in its own choice order (a
/// choice's pairs are kept only if every pair of the choices before it is).
Value BlockPartitioner::choiceOffsets(Location loc, Value ids,
                                      int64_t numExperts, int64_t capacity,
                                      ArrayRef<Axis> axes) {
  auto idsType = cast<RankedTensorType>(ids.getType());
  int64_t T = idsType.getDimSize(0), k = idsType.getDimSize(1);
  Type i32 = b.getI32Type();
  auto splat = [&](RankedTensorType type, int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getI32IntegerAttr(v)));
  };
  // Choice j's pairs counted as "expert" j * E + e: all choices in one
  // count vector, one prefix sum and one sum over the ranks.
  SmallVector<int32_t> shift;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j)
      shift.push_back(static_cast<int32_t>(j * numExperts));
  Value shifts = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(idsType, ArrayRef<int32_t>(shift)));
  Value valid = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, ids,
                            splat(idsType, 0)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, ids,
                            splat(idsType, numExperts)));
  Value perChoiceIds = arith::SelectOp::create(
      b, loc, valid, arith::AddIOp::create(b, loc, ids, shifts),
      splat(idsType, -1));
  auto allType = RankedTensorType::get({k * numExperts}, i32);
  Value local = ExpertCountsOp::create(b, loc, allType, perChoiceIds);
  Value before = x.prefixSum(loc, local, axes);
  Value total = x.allReduceSum(loc, local, axes);

  auto countsType = RankedTensorType::get({numExperts}, i32);
  auto choice = [&](Value counts, int64_t j) -> Value {
    return tensor::ExtractSliceOp::create(
        b, loc, countsType, counts,
        ArrayRef<OpFoldResult>{b.getIndexAttr(j * numExperts)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(numExperts)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  };
  auto sum = [&](Value a, Value c) -> Value {
    return a ? arith::AddIOp::create(b, loc, a, c) : c;
  };
  Value slots = splat(countsType, capacity), zero = splat(countsType, 0);
  Value lowerChoices, kept;
  for (int64_t j = 0; j < k; ++j) {
    Value ahead = sum(lowerChoices, choice(before, j));
    Value left = arith::SubIOp::create(b, loc, slots, ahead);
    kept = sum(kept, arith::MinSIOp::create(
                         b, loc, arith::MaxSIOp::create(b, loc, left, zero),
                         choice(local, j)));
    if (j + 1 < k)
      lowerChoices = sum(lowerChoices, choice(total, j));
  }
  return arith::SubIOp::create(b, loc, slots, kept);
}

FailureOr<SharedExpertOp>
BlockPartitioner::localSharedExpert(SharedExpertOp shared, Value input) {
  Operation *at = shared;
  Location loc = shared.getLoc();
  bool paired = holdsHalves(shared.getActivation());
  Value fc1, fc1b, fc3, fc3b, fc2;
  if (failed(localWeight(at, shared.getFc1Weight(), false, 0, paired,
                         "the shared expert's fc1", fc1)) ||
      failed(localWeight(at, shared.getFc1Bias(), false, 0, paired,
                         "the shared expert's fc1 bias", fc1b)) ||
      failed(localWeight(at, shared.getFc3Weight(), false, 0, false,
                         "the shared expert's fc3", fc3)) ||
      failed(localWeight(at, shared.getFc3Bias(), false, 0, false,
                         "the shared expert's fc3 bias", fc3b)) ||
      failed(localWeight(at, shared.getFc2Weight(), false, 1, false,
                         "the shared expert's fc2", fc2)))
    return failure();
  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = shared.getOutput().getType().clone(
      {inType.getDimSize(0), shared.getOutput().getType().getDimSize(1)});
  return SharedExpertOp::create(
      b, loc, outType, input, fc1, fc1b, fc3, fc3b, fc2,
      onFirstTpRank(loc, shared.getFc2Bias()), shared.getGate(),
      shared.getActivationAttr());
}

LogicalResult BlockPartitioner::run(MoEBlock &blk) {
  DispatchOp dispatch = blk.dispatch;
  RouterOp router = blk.router;
  Location loc = blk.combine.getLoc();
  Value input = dispatch.getInput();
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t T = inputType.getDimSize(0), H = inputType.getDimSize(1);
  int64_t k = dispatch.getIds().getType().getDimSize(1);
  int64_t E = dispatch.getNumExperts();
  int64_t M = blk.combine.getOutput().getType().getDimSize(1);
  int64_t ep = plan.getEp(), numTokenRanks = x.size(tokenAxes);
  Type elt = inputType.getElementType();
  auto error = [&](Operation *op) {
    return op->emitError() << "moe-partition: ";
  };

  if (E % ep != 0)
    return error(dispatch) << "ep = " << ep << " does not divide the " << E
                           << " experts of this block";
  if (T % numTokenRanks != 0)
    return error(dispatch) << "the " << T
                           << " tokens do not split evenly over dp x ep = "
                           << numTokenRanks << " ranks";
  int64_t localTokens = T / numTokenRanks, localExperts = E / ep;
  bool shuffleTokens = plan.getTokenShuffle() && ep > 1;
  if (shuffleTokens && localTokens % ep != 0)
    return error(dispatch) << "token shuffle exchanges equal blocks, but the "
                           << localTokens << " tokens of a rank do not split "
                           << "over ep = " << ep;
  bool allGather =
      plan.getDispatcher() == TokenDispatcher::AllGather && ep > 1;
  std::optional<int64_t> capacity = dispatch.getCapacity();
  // Shuffled tokens lose other pairs to the capacity than the model's
  // order does; weights that the program computes from its own drops
  // (given routing) would no longer match the pairs kept.
  if (shuffleTokens && capacity &&
      router.getSelection() == SelectionMethod::Given)
    return error(dispatch)
           << "token shuffle changes which pairs the capacity of " << *capacity
           << " drops, but this block's routing weights are the program's, "
              "computed from the drops in token order; leave --token-shuffle "
              "off";
  // Ranks whose tokens share one capacity and must agree on the order.
  int64_t orderedRanks = allGather ? x.size(dataAxes) : numTokenRanks;
  if (dispatch.getDropPolicy() == DropPolicy::Probs && orderedRanks > 1)
    return error(dispatch)
           << "the probs drop policy keeps each expert's most probable "
              "tokens of the whole batch, which is split over "
           << orderedRanks << " ranks here; use the position policy or "
                              "dropless dispatch";
  if (dispatch.getOffsets())
    return error(dispatch) << "this dispatch is already partitioned";

  // Insert after the router and everything the block reads are defined.
  Operation *after = router;
  SmallVector<Value> reads{input};
  if (blk.place)
    reads.push_back(blk.place.getTable());
  llvm::append_range(reads, blk.experts->getOperands());
  if (blk.shared)
    llvm::append_range(reads, blk.shared->getOperands());
  for (Value v : reads)
    if (Operation *def = v.getDefiningOp())
      if (def != dispatch && def->getBlock() == after->getBlock() &&
          after->isBeforeInBlock(def))
        after = def;
  b.setInsertionPointAfter(after);

  // This rank's tokens, shuffled within the EP group when asked.
  if (shuffleTokens) {
    SmallVector<int32_t> table, inverse;
    for (int64_t r = 0; r < ep; ++r) {
      SmallVector<int32_t> p = shuffled(localTokens, plan.getSeed() + r);
      SmallVector<int32_t> inv(localTokens);
      for (int64_t i = 0; i < localTokens; ++i)
        inv[p[i]] = static_cast<int32_t>(i);
      llvm::append_range(table, p);
      llvm::append_range(inverse, inv);
    }
    auto tableType = RankedTensorType::get({ep, localTokens}, b.getI32Type());
    auto mine = [&](ArrayRef<int32_t> values) -> Value {
      Value all = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(tableType, values));
      Value row = x.slice(loc, all, {Axis::EP}, 0);
      return tensor::CollapseShapeOp::create(
          b, loc, row, ArrayRef<ReassociationIndices>{{0, 1}});
    };
    perm = mine(table);
    inversePerm = mine(inverse);
  }
  Value tokens = shuffle(loc, markTokens(x.slice(loc, input, tokenAxes, 0)));
  Value logits = shuffle(
      loc, markTokens(x.slice(loc, router.getLogits(), tokenAxes, 0)));

  // Route. Sinkhorn and expert choice balance over the whole batch, so they
  // see every rank's logits (small: [T, E]) and keep this rank's rows.
  SelectionMethod selection = router.getSelection();
  bool batchWide = selection == SelectionMethod::Sinkhorn ||
                   selection == SelectionMethod::ExpertChoice;
  bool gathered = batchWide && numTokenRanks > 1;
  IRMapping routerInputs;
  routerInputs.map(router.getLogits(),
                   gathered ? markTokens(x.gather(loc, logits, tokenAxes, 0))
                            : logits);
  // A given router's ids and weights are per token too: this rank's rows.
  for (Value routed : {router.getRoutedIds(), router.getRoutedWeights()})
    if (routed)
      routerInputs.map(routed, shuffle(loc, markTokens(x.slice(
                                                loc, routed, tokenAxes, 0))));
  auto newRouter = cast<RouterOp>(b.clone(*router, routerInputs));
  // Each token's choice is computed on every TP rank, and on every token
  // rank too when the router sees the gathered batch.
  SmallVector<Axis> routerCopies{Axis::TP};
  if (gathered)
    llvm::append_range(routerCopies, tokenAxes);
  newRouter->setAttr(kReplicasAttrName,
                     b.getDenseI16ArrayAttr(x.liveAxes(routerCopies)));
  Value ids, weights;
  if (gathered) {
    ids = markTokens(x.slice(loc, newRouter.getIds(), tokenAxes, 0));
    weights = markTokens(x.slice(loc, newRouter.getWeights(), tokenAxes, 0));
  } else {
    newRouter.getIds().setType(
        router.getIds().getType().clone({localTokens, k}));
    newRouter.getWeights().setType(
        router.getWeights().getType().clone({localTokens, k}));
    ids = newRouter.getIds();
    weights = newRouter.getWeights();
  }
  // Each routing choice to one of its expert's slots: this rank's choices
  // by the replica rule for its position among the EP ranks.
  Value routerIds = ids;
  if (blk.place) {
    Value source = ep > 1 ? x.index(blk.place.getLoc(), Axis::EP) : Value();
    ids = PlaceOp::create(b, blk.place.getLoc(), ids.getType(), ids,
                          blk.place.getTable(), source, ep);
  }

  // This rank's experts.
  ExpertsOp experts = blk.experts;
  bool paired = holdsHalves(experts.getActivation());
  Value fc1, fc1b, fc3, fc3b, fc2, fc2b;
  if (failed(localWeight(experts, experts.getFc1Weight(), true, 1, paired,
                         "fc1", fc1)) ||
      failed(localWeight(experts, experts.getFc1Bias(), true, 1, paired,
                         "the fc1 bias", fc1b)) ||
      failed(localWeight(experts, experts.getFc3Weight(), true, 1, false,
                         "fc3", fc3)) ||
      failed(localWeight(experts, experts.getFc3Bias(), true, 1, false,
                         "the fc3 bias", fc3b)) ||
      failed(localWeight(experts, experts.getFc2Weight(), true, 2, false,
                         "fc2", fc2)) ||
      failed(localWeight(experts, experts.getFc2Bias(), true, -1, false,
                         "the fc2 bias", fc2b)))
    return failure();
  Value fc2Bias = onFirstTpRank(loc, fc2b);

  // Dispatch: with the all-gather dispatcher over the EP group's tokens and
  // this rank's experts, otherwise over this rank's tokens and every expert.
  Value dispatchTokens = tokens, dispatchIds = ids, combineWeights = weights;
  int64_t dispatchExperts = E;
  if (allGather) {
    dispatchTokens = x.gather(loc, tokens, {Axis::EP}, 0);
    combineWeights = x.gather(loc, weights, {Axis::EP}, 0);
    dispatchIds = localIds(loc, x.gather(loc, ids, {Axis::EP}, 0),
                           localExperts);
    dispatchExperts = localExperts;
  }
  int64_t batch = cast<RankedTensorType>(dispatchTokens.getType()).getDimSize(0);
  auto i32 = b.getI32Type();
  auto countsType = RankedTensorType::get({dispatchExperts}, i32);
  Value offsets;
  int64_t rowsPerExpert = 0;
  if (capacity) {
    rowsPerExpert = *capacity;
    if (orderedRanks > 1) {
      ArrayRef<Axis> orderAxes =
          allGather ? ArrayRef<Axis>(dataAxes) : ArrayRef<Axis>(tokenAxes);
      if (dispatch.getDropPolicy() == DropPolicy::Choice) {
        offsets = choiceOffsets(loc, dispatchIds, dispatchExperts, *capacity,
                                orderAxes);
      } else {
        Value routed = ExpertCountsOp::create(b, loc, countsType, dispatchIds);
        offsets = x.prefixSum(loc, routed, orderAxes);
      }
      rowsPerExpert = std::min(*capacity, batch * k);
    }
  }
  RankedTensorType rowsType =
      capacity ? RankedTensorType::get({dispatchExperts, rowsPerExpert, H}, elt)
               : RankedTensorType::get({batch * k, H}, elt);
  auto localDispatch = DispatchOp::create(
      b, dispatch.getLoc(), rowsType, RankedTensorType::get({batch, k}, i32),
      countsType, dispatch.getDropped().getType(), dispatchTokens, dispatchIds,
      dispatch.getWeights() ? combineWeights : Value(), offsets,
      dispatch.getCapacityAttr(), dispatch.getDropPolicyAttr());
  localDispatch->setAttr(kReplicasAttrName,
                         b.getDenseI16ArrayAttr(x.liveAxes({Axis::TP})));

  // Exchange rows, run the experts, bring the results back.
  Value rows = localDispatch.getRows(), counts = localDispatch.getCounts();
  Value received = rows, receivedCounts = counts;
  bool ragged = !capacity && !allGather && ep > 1;
  if (ragged) {
    std::tie(received, receivedCounts) =
        x.raggedAllToAll(loc, rows, counts, {Axis::EP}, ep * batch * k);
  } else if (!allGather) {
    received = x.allToAll(loc, rows, {Axis::EP});
    receivedCounts = x.allToAll(loc, counts, {Axis::EP});
  }
  auto receivedType = cast<RankedTensorType>(received.getType());
  SmallVector<int64_t> outShape(receivedType.getShape());
  outShape.back() = M;
  auto rankExperts = ExpertsOp::create(
      b, experts.getLoc(), receivedType.clone(outShape), received,
      receivedCounts, fc1, fc1b, fc3, fc3b, fc2, fc2Bias,
      experts.getActivationAttr());
  rankExperts->setDiscardableAttrs(experts->getDiscardableAttrDictionary());
  Value expertOut = rankExperts;
  Value back = expertOut;
  if (ragged) {
    back = x.raggedAllToAll(loc, expertOut, receivedCounts, {Axis::EP},
                            batch * k)
               .first;
  } else if (!allGather) {
    back = x.allToAll(loc, expertOut, {Axis::EP});
  }
  Value out = CombineOp::create(
      b, blk.combine.getLoc(), RankedTensorType::get({batch, M}, elt), back,
      localDispatch.getSlots(), combineWeights);
  if (allGather)
    out = x.reduceScatterSum(loc, out, {Axis::EP});

  if (blk.shared) {
    FailureOr<SharedExpertOp> shared = localSharedExpert(blk.shared, tokens);
    if (failed(shared))
      return failure();
    out = arith::AddFOp::create(b, blk.sharedAdd.getLoc(), out,
                                shared->getOutput());
  }
  // Tensor-parallel partial sums (expert and shared expert together).
  out = x.allReduceSum(loc, out, {Axis::TP});
  Value result = restoreTokens(loc, out);

  // What else reads the dispatch or the router sees whole-batch values; they
  // are built before any old op goes, while the insertion point is valid.
  auto usedOutside = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      return user != experts && user != blk.combine &&
             user != dispatch.getOperation() &&
             user != blk.place.getOperation();
    });
  };
  Value dropped, keptCounts, allIds, allWeights;
  if (!dispatch.getDropped().use_empty())
    dropped = x.allReduceSum(loc, localDispatch.getDropped(), tokenAxes);
  if (usedOutside(dispatch.getCounts()))
    keptCounts = allGather ? x.allReduceSum(
                                 loc, x.gather(loc, counts, {Axis::EP}, 0),
                                 dataAxes)
                           : x.allReduceSum(loc, counts, tokenAxes);
  // A batch-wide router already holds every token's choice.
  bool whole = gathered && !perm;
  if (usedOutside(router.getIds()))
    allIds = whole ? newRouter.getIds() : restoreTokens(loc, routerIds);
  if (usedOutside(router.getWeights()))
    allWeights = whole ? newRouter.getWeights() : restoreTokens(loc, weights);

  blk.result().replaceAllUsesWith(result);
  if (blk.sharedAdd) {
    blk.sharedAdd->erase();
    blk.shared->erase();
  }
  blk.combine->erase();
  experts->erase();
  if (dropped)
    dispatch.getDropped().replaceAllUsesWith(dropped);
  if (keptCounts)
    dispatch.getCounts().replaceAllUsesWith(keptCounts);
  dispatch->erase();
  if (blk.place)
    blk.place->erase();
  if (allIds)
    router.getIds().replaceAllUsesWith(allIds);
  if (allWeights)
    router.getWeights().replaceAllUsesWith(allWeights);
  router->erase();
  return success();
}

} // namespace

LogicalResult spmd::partitionMoEBlocks(func::FuncOp func, PlanAttr plan) {
  SmallVector<CombineOp> combines;
  func.walk([&](CombineOp op) { combines.push_back(op); });
  OpBuilder b(func.getContext());
  for (CombineOp combine : combines) {
    std::string why;
    FailureOr<MoEBlock> blk = matchBlock(combine, why);
    if (failed(blk))
      return combine.emitError() << "moe-partition: cannot partition this "
                                    "block: "
                                 << why;
    if (failed(BlockPartitioner(plan, b).run(*blk)))
      return failure();
  }
  return success();
}
