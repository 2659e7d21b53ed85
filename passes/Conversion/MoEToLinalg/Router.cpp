//===- Router.cpp - lower moe.router --------------------------------------===//
//
// The reference semantics of moe.router. Scores, biases, Sinkhorn scalings
// and weight fix-ups are linalg.generic maps and reductions; a top-k
// selection is a map over the rows whose every element makes k passes over
// its row, each for the pick after the last (ties to the lower index; NaN
// never picked: a slot with nothing left gets id -1 and weight 0). No
// selection carries a tensor from step to step, so on a GPU each is a
// kernel, not a host loop; Sinkhorn's iterations are a host loop of
// kernels that reads one scalar, its error, per round.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe::lowering {

namespace {
/// The chosen expert ids (i32) and their weights, both `[T, k]`.
struct Selection {
  Value ids;
  Value weights;
};
} // namespace

//===----------------------------------------------------------------------===//
// Shared selection steps
//===----------------------------------------------------------------------===//

/// A pick of a selection: its key and column, and whether there was one.
struct Pick {
  Value key, col, found;
};

/// The largest entry of row `row` of `keys [R, N]` that comes after `last`
/// in the order of keys descending, then columns ascending: the pick that
/// follows it. The strict `>` keeps the lowest column among equal keys; NaN
/// keys never come. With none left, `found` is false and the key and column
/// stay `last`'s, so that later picks find none either.
static Pick nextInRow(OpBuilder &b, Location loc, Value keys, Value row,
                      Pick last) {
  RankedTensorType type = tensorType(keys);
  int64_t columns = type.getDimSize(1);
  Value none = indexConst(b, loc, columns);
  Value init[] = {scalarConst(b, loc, type.getElementType(), kNegInf), none};
  SmallVector<Value> best = loopNest(
      b, loc, {columns}, init,
      [&](OpBuilder &nb, Location nloc, ValueRange ivs,
          ValueRange best) -> scf::ValueVector {
        Value col = ivs[0];
        Value key =
            tensor::ExtractOp::create(nb, nloc, keys, ValueRange{row, col});
        auto cmpf = [&](arith::CmpFPredicate predicate, Value lhs, Value rhs) {
          return arith::CmpFOp::create(nb, nloc, predicate, lhs, rhs);
        };
        auto cmpi = [&](arith::CmpIPredicate predicate, Value lhs, Value rhs) {
          return arith::CmpIOp::create(nb, nloc, predicate, lhs, rhs);
        };
        Value after = arith::OrIOp::create(
            nb, nloc, cmpf(arith::CmpFPredicate::OLT, key, last.key),
            arith::AndIOp::create(
                nb, nloc, cmpf(arith::CmpFPredicate::OEQ, key, last.key),
                cmpi(arith::CmpIPredicate::sgt, col, last.col)));
        Value better = arith::OrIOp::create(
            nb, nloc, cmpf(arith::CmpFPredicate::OGT, key, best[0]),
            arith::AndIOp::create(
                nb, nloc, cmpi(arith::CmpIPredicate::eq, best[1], none),
                cmpf(arith::CmpFPredicate::ORD, key, key)));
        Value take = arith::AndIOp::create(nb, nloc, after, better);
        return {arith::SelectOp::create(nb, nloc, take, key, best[0]),
                arith::SelectOp::create(nb, nloc, take, col, best[1])};
      });
  Value found = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                      best[1], none);
  return {arith::SelectOp::create(b, loc, found, best[0], last.key),
          arith::SelectOp::create(b, loc, found, best[1], last.col), found};
}

/// Where every selection starts: before all entries (+inf, column -1).
static Pick beforeAll(OpBuilder &b, Location loc, Type keyType) {
  return {scalarConst(b, loc, keyType, -kNegInf), indexConst(b, loc, -1),
          Value()};
}

/// The columns of the `k` largest entries of every row of `keys [R, N]`,
/// largest first, as i32 `[R, k]`; ties go to the lower column, and a slot
/// with no entry left (NaN keys) gets -1. One map over the rows, each
/// finding its k picks in k passes over the row (one result per slot, then
/// put side by side): rows in parallel (on a GPU, a kernel rather than a
/// host loop), with no tensor carried from pick to pick.
static Value topKIndices(OpBuilder &b, Location loc, Value keys, int64_t k) {
  RankedTensorType type = tensorType(keys);
  int64_t rows = type.getDimSize(0);
  Type i32 = b.getI32Type();
  SmallVector<Value> slots;
  for (int64_t j = 0; j < k; ++j)
    slots.push_back(tensor::EmptyOp::create(b, loc, {rows}, i32));
  SmallVector<Value> perSlot = buildGeneric(
      b, loc, ValueRange(), {}, slots, loopsTo(b, 1, {0}),
      [&](OpBuilder &nb, Location nloc, ValueRange) -> SmallVector<Value> {
        Value row = linalg::IndexOp::create(nb, nloc, 0);
        Pick pick = beforeAll(nb, nloc, type.getElementType());
        SmallVector<Value> ids;
        for (int64_t j = 0; j < k; ++j) {
          pick = nextInRow(nb, nloc, keys, row, pick);
          Value col =
              arith::IndexCastOp::create(nb, nloc, nb.getI32Type(), pick.col);
          ids.push_back(arith::SelectOp::create(
              nb, nloc, pick.found, col, scalarConst(nb, nloc, i32, -1)));
        }
        return ids;
      });
  if (k == 1)
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({rows, 1}, i32), perSlot.front(),
        ArrayRef<ReassociationIndices>{{0, 1}});
  // [R] x k -> [R, k]: slot j's column from the j-th.
  SmallVector<AffineMap> maps(k, loopsTo(b, 2, {0}));
  return mapElements(
      b, loc, RankedTensorType::get({rows, k}, i32), perSlot, maps,
      [&](OpBuilder &nb, Location nloc, ValueRange ids) -> Value {
        Value slot = linalg::IndexOp::create(nb, nloc, 1);
        Value id = ids.back();
        for (int64_t j = k - 2; j >= 0; --j)
          id = arith::SelectOp::create(
              nb, nloc,
              arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq, slot,
                                    indexConst(nb, nloc, j)),
              ids[j], id);
        return id;
      });
}

/// `values[t, ids[t, j]]` for every `[t, j]` of `ids`, and 0 where the id
/// is -1 (nothing picked).
static Value gatherColumns(OpBuilder &b, Location loc, Value values,
                           Value ids) {
  Type elementType = tensorType(values).getElementType();
  auto type = RankedTensorType::get(tensorType(ids).getShape(), elementType);
  return mapElements(
      b, loc, type, ids, {}, [&](OpBuilder &nb, Location nloc, ValueRange id) {
        Value row = linalg::IndexOp::create(nb, nloc, 0);
        Value picked =
            arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge, id[0],
                                  scalarConst(nb, nloc, nb.getI32Type(), 0));
        Value safe = arith::SelectOp::create(
            nb, nloc, picked, id[0], scalarConst(nb, nloc, nb.getI32Type(), 0));
        Value col =
            arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), safe);
        Value value =
            tensor::ExtractOp::create(nb, nloc, values, ValueRange{row, col});
        return arith::SelectOp::create(nb, nloc, picked, value,
                                       scalarConst(nb, nloc, elementType, 0));
      });
}

/// The `k` experts with the largest `keys` per token, weighted by `scores`.
static Selection topKBy(OpBuilder &b, Location loc, Value keys, Value scores,
                        int64_t k) {
  Value ids = topKIndices(b, loc, keys, k);
  return {ids, gatherColumns(b, loc, scores, ids)};
}

/// `scores + bias` with the bias broadcast over tokens: what topk and
/// grouped_topk rank by. Just `scores` without a bias.
static Value biasedScores(OpBuilder &b, Location loc, Value scores,
                          Value bias) {
  if (!bias)
    return scores;
  return mapElements(b, loc, tensorType(scores), {scores, bias},
                     {loopsTo(b, 2, {0, 1}), loopsTo(b, 2, {1})},
                     [](OpBuilder &nb, Location nloc, ValueRange args) {
                       return arith::AddFOp::create(nb, nloc, args[0], args[1]);
                     });
}

//===----------------------------------------------------------------------===//
// Selection methods
//===----------------------------------------------------------------------===//

/// topk: the k largest `scores + bias`, weighted by the unbiased scores.
static Selection selectTopK(OpBuilder &b, Location loc, Value scores,
                            Value bias, int64_t k) {
  return topKBy(b, loc, biasedScores(b, loc, scores, bias), scores, k);
}

/// The score of every group of `keys [T, E]`, `[T, G]`: its largest entry, or
/// the sum of its two largest; NaN keys do not count (as in the fused
/// kernel), so a group of them scores -inf.
static Value groupScores(OpBuilder &b, Location loc, Value keys,
                         int64_t numGroups, GroupScore score) {
  RankedTensorType type = tensorType(keys);
  Type elementType = type.getElementType();
  int64_t tokens = type.getDimSize(0);
  int64_t groupSize = type.getDimSize(1) / numGroups;
  // Groups are contiguous: [T, E] -> [T, G, E / G].
  auto groupedType =
      RankedTensorType::get({tokens, numGroups, groupSize}, elementType);
  Value grouped = tensor::ExpandShapeOp::create(
      b, loc, groupedType, keys, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  auto scoreType = RankedTensorType::get({tokens, numGroups}, elementType);
  AffineMap element = loopsTo(b, 3, {0, 1, 2});
  AffineMap group = loopsTo(b, 3, {0, 1});
  if (score == GroupScore::Max)
    return reduce(b, loc, grouped, element, scoreType, kNegInf, {0, 1},
                  [](OpBuilder &nb, Location nloc, ValueRange args) {
                    return arith::MaxNumFOp::create(nb, nloc, args[0],
                                                     args[1]);
                  });
  // top2_sum: carry the largest and the second largest entry.
  Value inits[] = {filledTensor(b, loc, scoreType, kNegInf),
                   filledTensor(b, loc, scoreType, kNegInf)};
  SmallVector<Value> top2 = buildGeneric(
      b, loc, grouped, element, inits, group,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value x = args[0], first = args[1], second = args[2];
        Value newFirst = arith::CmpFOp::create(
            nb, nloc, arith::CmpFPredicate::OGT, x, first);
        Value keptSecond = arith::MaxNumFOp::create(nb, nloc, x, second);
        return {arith::MaxNumFOp::create(nb, nloc, x, first),
                arith::SelectOp::create(nb, nloc, newFirst, first, keptSecond)};
      });
  return mapElements(b, loc, scoreType, top2, {},
                     [](OpBuilder &nb, Location nloc, ValueRange args) {
                       return arith::AddFOp::create(nb, nloc, args[0], args[1]);
                     });
}

/// `keys [T, E]` with `maskedScore` (-inf: never chosen) for the experts
/// outside the groups listed in `keptGroups [T, g]`: a map over [T, E]
/// whose every element looks for its group among the token's g.
static Value maskOtherGroups(OpBuilder &b, Location loc, Value keys,
                             Value keptGroups, int64_t groupSize,
                             double maskedScore) {
  RankedTensorType type = tensorType(keys);
  int64_t kept = tensorType(keptGroups).getDimSize(1);
  return mapElements(
      b, loc, type, keys, {},
      [&](OpBuilder &nb, Location nloc, ValueRange key) -> Value {
        Value token = linalg::IndexOp::create(nb, nloc, 0);
        Value group = arith::DivUIOp::create(
            nb, nloc, loopIndexI32(nb, nloc, 1),
            scalarConst(nb, nloc, nb.getI32Type(), groupSize));
        Value isKept = arith::ConstantIntOp::create(nb, nloc, 0, 1);
        for (int64_t j = 0; j < kept; ++j) {
          Value listed = tensor::ExtractOp::create(
              nb, nloc, keptGroups,
              ValueRange{token, indexConst(nb, nloc, j)});
          isKept = arith::OrIOp::create(
              nb, nloc, isKept,
              arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                    listed, group));
        }
        // A NaN key stays NaN: never chosen, masked or not.
        Value isNaN = arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::UNO,
                                            key[0], key[0]);
        return arith::SelectOp::create(
            nb, nloc, arith::OrIOp::create(nb, nloc, isKept, isNaN), key[0],
            scalarConst(nb, nloc, type.getElementType(), maskedScore));
      });
}

/// grouped_topk: topk among the experts of the `groupTopK` best groups.
static Selection selectGroupedTopK(OpBuilder &b, Location loc, Value scores,
                                   Value bias, int64_t k, int64_t numGroups,
                                   int64_t groupTopK, GroupScore score,
                                   double maskedScore) {
  Value keys = biasedScores(b, loc, scores, bias);
  int64_t groupSize = tensorType(keys).getDimSize(1) / numGroups;
  Value keptGroups = topKIndices(
      b, loc, groupScores(b, loc, keys, numGroups, score), groupTopK);
  return topKBy(
      b, loc,
      maskOtherGroups(b, loc, keys, keptGroups, groupSize, maskedScore),
      scores, k);
}

/// One Megatron Sinkhorn scaling of dimension `dim` of `cost [T, E]` from the
/// other dimension's scaling `other`:
///   (1 / n) / (sum over the other dimension of other * cost + 1e-8),
/// with n the size of `dim`: d0 for `dim` 0, d1 for `dim` 1.
static Value sinkhornScaling(OpBuilder &b, Location loc, Value cost,
                             Value other, unsigned dim) {
  RankedTensorType type = tensorType(cost);
  Type elementType = type.getElementType();
  int64_t n = type.getDimSize(dim);
  auto vectorType = RankedTensorType::get({n}, elementType);
  Value sums =
      reduce(b, loc, {cost, other},
             {loopsTo(b, 2, {0, 1}), loopsTo(b, 2, {1 - dim})}, vectorType, 0.0,
             {dim}, [](OpBuilder &nb, Location nloc, ValueRange args) {
               Value product =
                   arith::MulFOp::create(nb, nloc, args[1], args[0]);
               return arith::AddFOp::create(nb, nloc, args[2], product);
             });
  Value share = scalarConst(b, loc, elementType, 1.0 / n);
  Value eps = scalarConst(b, loc, elementType, 1e-8);
  return mapElements(b, loc, vectorType, sums, {},
                     [&](OpBuilder &nb, Location nloc, ValueRange sum) {
                       Value den = arith::AddFOp::create(nb, nloc, sum[0], eps);
                       return arith::DivFOp::create(nb, nloc, share, den);
                     });
}

/// `mean_i |lhs_i - rhs_i|` of two vectors, as a scalar.
static Value meanAbsDifference(OpBuilder &b, Location loc, Value lhs,
                               Value rhs) {
  RankedTensorType type = tensorType(lhs);
  Type elementType = type.getElementType();
  // A sum into one element (loops (one, e)): on a GPU one thread's kernel,
  // where a sum into a scalar would be a host loop over both vectors.
  AffineMap element = loopsTo(b, 2, {1});
  Value total =
      reduce(b, loc, {lhs, rhs}, {element, element},
             RankedTensorType::get({1}, elementType), 0.0, {0},
             [](OpBuilder &nb, Location nloc, ValueRange args) {
               Value diff = arith::SubFOp::create(nb, nloc, args[0], args[1]);
               Value abs = math::AbsFOp::create(nb, nloc, diff);
               return arith::AddFOp::create(nb, nloc, args[2], abs);
             });
  Value sum =
      tensor::ExtractOp::create(b, loc, total, ValueRange{indexConst(b, loc, 0)});
  return arith::DivFOp::create(
      b, loc, sum, scalarConst(b, loc, elementType, type.getDimSize(0)));
}

/// Megatron's `sinkhorn(logits)`: `d1 * exp(l) * d0[:, None]`, with the row
/// and column scalings d0 and d1 alternately updated until the mean change
/// of d1 is at most `tolerance` or `maxIterations` rounds have run.
static Value sinkhorn(OpBuilder &b, Location loc, Value logits,
                      double tolerance, int64_t maxIterations) {
  RankedTensorType type = tensorType(logits);
  Type elementType = type.getElementType();
  Value cost = mapElements(b, loc, type, logits, {},
                           [](OpBuilder &nb, Location nloc, ValueRange l) {
                             return math::ExpOp::create(nb, nloc, l[0]);
                           });
  auto vector = [&](int64_t n) {
    return RankedTensorType::get({n}, elementType);
  };
  Value init[] = {filledTensor(b, loc, vector(type.getDimSize(0)), 1.0),
                  filledTensor(b, loc, vector(type.getDimSize(1)), 1.0),
                  scalarConst(b, loc, elementType, 1e9), indexConst(b, loc, 0)};
  Value tol = scalarConst(b, loc, elementType, tolerance);
  Value limit = indexConst(b, loc, maxIterations);
  // Carries (d0, d1, error, iteration).
  auto loop = scf::WhileOp::create(
      b, loc, ValueRange(init).getTypes(), init,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value unconverged = arith::CmpFOp::create(
            nb, nloc, arith::CmpFPredicate::OGT, args[2], tol);
        Value roundsLeft = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::slt, args[3], limit);
        Value more = arith::AndIOp::create(nb, nloc, unconverged, roundsLeft);
        scf::ConditionOp::create(nb, nloc, more, args);
      },
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value oldD1 = args[1];
        Value d0 = sinkhornScaling(nb, nloc, cost, oldD1, 0);
        Value d1 = sinkhornScaling(nb, nloc, cost, d0, 1);
        Value error = meanAbsDifference(nb, nloc, oldD1, d1);
        Value next =
            arith::AddIOp::create(nb, nloc, args[3], indexConst(nb, nloc, 1));
        // One-shot bufferization (without allow-return-allocs-from-loops)
        // needs the loop to yield its own buffers: copy the new scalings in.
        auto copyInto = [&](Value value, Value carried) {
          return linalg::CopyOp::create(nb, nloc, value, carried)->getResult(0);
        };
        scf::YieldOp::create(nb, nloc,
                             ValueRange{copyInto(d0, args[0]),
                                        copyInto(d1, oldD1), error, next});
      });
  return mapElements(
      b, loc, type, {cost, loop.getResult(0), loop.getResult(1)},
      {loopsTo(b, 2, {0, 1}), loopsTo(b, 2, {0}), loopsTo(b, 2, {1})},
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        Value scaled = arith::MulFOp::create(nb, nloc, args[2], args[0]);
        return arith::MulFOp::create(nb, nloc, scaled, args[1]);
      });
}

/// sinkhorn: the k largest entries of the balanced matrix, weighted by the
/// scores.
static Selection selectSinkhorn(OpBuilder &b, Location loc, Value logits,
                                Value scores, int64_t k, double tolerance,
                                int64_t maxIterations) {
  return topKBy(b, loc, sinkhorn(b, loc, logits, tolerance, maxIterations),
                scores, k);
}

/// expert_choice: every expert takes the `capacity` tokens with the largest
/// scores in its column: `ids [T, E]` holds e where expert e took token t and
/// -1 elsewhere; the weight is the score or 0. Each expert's last pick is
/// found by `capacity` passes over its column (a map over the experts);
/// then expert e took token t where t comes no later than that pick in the
/// selection's order (score descending, then token), a map over [T, E]. A
/// column with fewer scores that are not NaN takes them all.
static Selection selectExpertChoice(OpBuilder &b, Location loc, Value scores,
                                    int64_t capacity) {
  RankedTensorType type = tensorType(scores);
  Type elementType = type.getElementType();
  int64_t tokens = type.getDimSize(0), experts = type.getDimSize(1);
  Value transposed =
      tensor::EmptyOp::create(b, loc, {experts, tokens}, elementType);
  Value perExpert = linalg::TransposeOp::create(b, loc, scores, transposed,
                                                ArrayRef<int64_t>{1, 0})
                        ->getResult(0);
  Value lastPicks[] = {
      tensor::EmptyOp::create(b, loc, {experts}, elementType),
      tensor::EmptyOp::create(b, loc, {experts}, b.getIndexType())};
  SmallVector<Value> last = buildGeneric(
      b, loc, ValueRange(), {}, lastPicks, loopsTo(b, 1, {0}),
      [&](OpBuilder &nb, Location nloc, ValueRange) -> SmallVector<Value> {
        Value expert = linalg::IndexOp::create(nb, nloc, 0);
        Pick start = beforeAll(nb, nloc, elementType);
        auto loop = scf::ForOp::create(
            nb, nloc, indexConst(nb, nloc, 0), indexConst(nb, nloc, capacity),
            indexConst(nb, nloc, 1), ValueRange{start.key, start.col},
            [&](OpBuilder &lb, Location lloc, Value, ValueRange after) {
              Pick pick = nextInRow(lb, lloc, perExpert, expert,
                                    {after[0], after[1], Value()});
              scf::YieldOp::create(lb, lloc, ValueRange{pick.key, pick.col});
            });
        return {loop.getResult(0), loop.getResult(1)};
      });
  auto idsType = RankedTensorType::get(type.getShape(), b.getI32Type());
  AffineMap element = loopsTo(b, 2, {0, 1}), ofExpert = loopsTo(b, 2, {1});
  Value ids = mapElements(
      b, loc, idsType, {scores, last[0], last[1]},
      {element, ofExpert, ofExpert},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
        Value score = args[0], threshold = args[1], lastToken = args[2];
        Value token = linalg::IndexOp::create(nb, nloc, 0);
        Value above = arith::CmpFOp::create(
            nb, nloc, arith::CmpFPredicate::OGT, score, threshold);
        Value tied = arith::AndIOp::create(
            nb, nloc,
            arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OEQ, score,
                                  threshold),
            arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sle, token,
                                  lastToken));
        Value took = arith::OrIOp::create(nb, nloc, above, tied);
        return arith::SelectOp::create(
            nb, nloc, took, loopIndexI32(nb, nloc, 1),
            scalarConst(nb, nloc, nb.getI32Type(), -1));
      });
  Value zero = scalarConst(b, loc, elementType, 0.0);
  Value weights = mapElements(
      b, loc, type, {ids, scores}, {},
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value chosen =
            arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge, args[0],
                                  scalarConst(nb, nloc, nb.getI32Type(), 0));
        return arith::SelectOp::create(nb, nloc, chosen, args[1], zero);
      });
  return {ids, weights};
}

/// sparse_mixer: Phi-3.5-MoE's inference sparsemixer on the raw logits `x`: e1
/// is the arg-max and e2 the arg-max of the rest (the top 2), m_j = x[e_j], and
///   w_j = exp(x[e_j] - m_j) / sum_{e not masked_j} exp(x[e] - m_j)
///       = 1 / sum_{e not masked_j} exp(x[e] - m_j),
/// where masked_j(e) = (m_j - x[e]) > 2 eps max(|x[e]|, m_j), or e = e1 for
/// the second slot.
static Selection selectSparseMixer(OpBuilder &b, Location loc, Value logits,
                                   double jitterEps) {
  RankedTensorType type = tensorType(logits);
  Type elementType = type.getElementType();
  Value ids = topKIndices(b, loc, logits, 2);
  Value maxima = gatherColumns(b, loc, logits, ids);
  auto pairType = RankedTensorType::get({type.getDimSize(0), 2}, elementType);
  Value twoEps = scalarConst(b, loc, elementType, 2.0 * jitterEps);
  Value zero = scalarConst(b, loc, elementType, 0.0);
  // Loops (t, j, e); the first choice e1 is ids[t, 0].
  AffineMap firstChoice =
      AffineMap::get(3, 0, {b.getAffineDimExpr(0), b.getAffineConstantExpr(0)},
                     b.getContext());
  Value denominators = reduce(
      b, loc, {logits, maxima, ids},
      {loopsTo(b, 3, {0, 2}), loopsTo(b, 3, {0, 1}), firstChoice}, pairType,
      0.0, {0, 1}, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value x = args[0], m = args[1], e1 = args[2], sum = args[3];
        Value gap = arith::SubFOp::create(nb, nloc, m, x);
        Value magnitude = arith::MaximumFOp::create(
            nb, nloc, math::AbsFOp::create(nb, nloc, x), m);
        Value threshold = arith::MulFOp::create(nb, nloc, twoEps, magnitude);
        // Far below the slot's maximum, or NaN: left out.
        Value belowThreshold = arith::CmpFOp::create(
            nb, nloc, arith::CmpFPredicate::UGT, gap, threshold);
        Value slot = linalg::IndexOp::create(nb, nloc, 1);
        Value secondSlot = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::ne, slot, indexConst(nb, nloc, 0));
        Value isFirst = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::eq, loopIndexI32(nb, nloc, 2), e1);
        Value masked = arith::OrIOp::create(
            nb, nloc, belowThreshold,
            arith::AndIOp::create(nb, nloc, secondSlot, isFirst));
        Value term = math::ExpOp::create(nb, nloc,
                                         arith::SubFOp::create(nb, nloc, x, m));
        Value kept = arith::SelectOp::create(nb, nloc, masked, zero, term);
        return arith::AddFOp::create(nb, nloc, sum, kept);
      });
  Value one = scalarConst(b, loc, elementType, 1.0);
  // A slot with nothing picked (NaN logits) weighs 0.
  Value weights = mapElements(
      b, loc, pairType, {denominators, ids}, {},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
        Value picked =
            arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge, args[1],
                                  scalarConst(nb, nloc, nb.getI32Type(), 0));
        return arith::SelectOp::create(
            nb, nloc, picked, arith::DivFOp::create(nb, nloc, one, args[0]),
            zero);
      });
  return {ids, weights};
}

//===----------------------------------------------------------------------===//
// Weight post-processing
//===----------------------------------------------------------------------===//

/// Divides every row of `weights [T, k]` by its sum plus 1e-20.
static Value normalizeRows(OpBuilder &b, Location loc, Value weights) {
  RankedTensorType type = tensorType(weights);
  Value sums = rowSum(b, loc, weights);
  Value tiny = scalarConst(b, loc, type.getElementType(), 1e-20);
  return mapElements(b, loc, type, {weights, sums},
                     {loopsTo(b, 2, {0, 1}), loopsTo(b, 2, {0})},
                     [&](OpBuilder &nb, Location nloc, ValueRange args) {
                       Value den =
                           arith::AddFOp::create(nb, nloc, args[1], tiny);
                       return arith::DivFOp::create(nb, nloc, args[0], den);
                     });
}

static Value scaleWeights(OpBuilder &b, Location loc, Value weights,
                          double factor) {
  RankedTensorType type = tensorType(weights);
  Value scale = scalarConst(b, loc, type.getElementType(), factor);
  return mapElements(b, loc, type, weights, {},
                     [&](OpBuilder &nb, Location nloc, ValueRange w) {
                       return arith::MulFOp::create(nb, nloc, w[0], scale);
                     });
}

//===----------------------------------------------------------------------===//
// Given routing
//===----------------------------------------------------------------------===//

/// The program's own ids and weights: ids as i32, an id outside `[0, E)`
/// as -1 (no expert: the pair is dropped, and counted) with weight 0.
static Selection selectGiven(OpBuilder &b, Location loc, Value ids,
                             Value weights, int64_t numExperts,
                             FloatType weightType) {
  RankedTensorType idsType = tensorType(ids);
  Type i32 = b.getI32Type();
  auto inRange = [&](OpBuilder &nb, Location nloc, Value id) {
    Type type = id.getType();
    auto constant = [&](int64_t v) {
      return arith::ConstantOp::create(nb, nloc, nb.getIntegerAttr(type, v));
    };
    Value low = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge, id,
                                      constant(0));
    Value high = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt, id,
                                       constant(numExperts));
    return arith::AndIOp::create(nb, nloc, low, high).getResult();
  };
  Selection selection;
  selection.ids = mapElements(
      b, loc, idsType.clone(i32), ids, {},
      [&](OpBuilder &nb, Location nloc, ValueRange x) -> Value {
        Value id = x[0];
        if (id.getType() != i32)
          id = arith::TruncIOp::create(nb, nloc, i32, id);
        Value none = arith::ConstantOp::create(nb, nloc, nb.getI32IntegerAttr(-1));
        return arith::SelectOp::create(nb, nloc, inRange(nb, nloc, x[0]), id,
                                       none);
      });
  selection.weights = mapElements(
      b, loc, idsType.clone(weightType), ValueRange{weights, ids}, {},
      [&](OpBuilder &nb, Location nloc, ValueRange x) -> Value {
        Value w = x[0];
        if (w.getType() != weightType)
          w = arith::ExtFOp::create(nb, nloc, weightType, w);
        Value zero = arith::ConstantOp::create(nb, nloc,
                                               nb.getFloatAttr(weightType, 0.0));
        return arith::SelectOp::create(nb, nloc, inRange(nb, nloc, x[1]), w,
                                       zero);
      });
  return selection;
}

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

/// `value` with its elements converted to `to` (extf or truncf).
static Value convertFloats(OpBuilder &b, Location loc, Value value,
                           FloatType to) {
  RankedTensorType type = tensorType(value);
  bool widen = to.getWidth() > type.getElementTypeBitWidth();
  return mapElements(b, loc, type.clone(to), value, {},
                     [&](OpBuilder &nb, Location nloc, ValueRange x) -> Value {
                       if (widen)
                         return arith::ExtFOp::create(nb, nloc, to, x[0]);
                       return arith::TruncFOp::create(nb, nloc, to, x[0]);
                     });
}

namespace {
struct RouterOpLowering final : OpConversionPattern<RouterOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RouterOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = adaptor.getLogits();
    Value bias = adaptor.getBias();
    int64_t k = op.getIds().getType().getDimSize(1);
    // Narrower logits route in f32; only the weights are rounded back.
    auto narrow = cast<FloatType>(tensorType(logits).getElementType());
    bool widen = narrow.getWidth() < 32;
    if (widen) {
      logits = convertFloats(rewriter, loc, logits, rewriter.getF32Type());
      if (bias)
        bias = convertFloats(rewriter, loc, bias, rewriter.getF32Type());
    }

    // Sparse mixer works on the raw logits; the others on the scores.
    auto scores = [&] {
      return scoreLogits(rewriter, loc, logits, op.getScoring());
    };
    Selection selection;
    switch (op.getSelection()) {
    case SelectionMethod::TopK:
      selection = selectTopK(rewriter, loc, scores(), bias, k);
      break;
    case SelectionMethod::GroupedTopK:
      selection = selectGroupedTopK(rewriter, loc, scores(), bias,
                                    k, *op.getNumGroups(), *op.getGroupTopk(),
                                    *op.getGroupScore(),
                                    op.getMaskedScore()
                                        ? op.getMaskedScore()->convertToDouble()
                                        : kNegInf);
      break;
    case SelectionMethod::Sinkhorn:
      selection =
          selectSinkhorn(rewriter, loc, logits, scores(), k,
                         op.getSinkhornTolerance().convertToDouble(),
                         static_cast<int64_t>(op.getSinkhornMaxIterations()));
      break;
    case SelectionMethod::ExpertChoice:
      selection =
          selectExpertChoice(rewriter, loc, scores(), *op.getCapacity());
      break;
    case SelectionMethod::SparseMixer:
      selection = selectSparseMixer(rewriter, loc, logits,
                                    op.getJitterEps().convertToDouble());
      break;
    case SelectionMethod::Given:
      selection = selectGiven(
          rewriter, loc, adaptor.getRoutedIds(), adaptor.getRoutedWeights(),
          tensorType(logits).getDimSize(1),
          widen ? rewriter.getF32Type() : narrow);
      break;
    }

    Value weights = selection.weights;
    if (op.getNormalize())
      weights = normalizeRows(rewriter, loc, weights);
    // The default factor 1 would only add a multiplication by one.
    double factor = op.getScalingFactor().convertToDouble();
    if (factor != 1.0)
      weights = scaleWeights(rewriter, loc, weights, factor);
    if (widen)
      weights = convertFloats(rewriter, loc, weights, narrow);
    rewriter.replaceOp(op, {selection.ids, weights});
    return success();
  }
};
} // namespace

void populateRouterPatterns(RewritePatternSet &patterns) {
  patterns.add<RouterOpLowering>(patterns.getContext());
}

} // namespace mlir::moe::lowering
