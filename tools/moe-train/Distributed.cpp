//===- Distributed.cpp - moe-train on several ranks -----------------------===//

#include "Distributed.h"

#include "moert/Runtime.h"
#include "moert/moert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace moe_run;
using namespace moe_train;

/// The runtime's code for the group of every grid axis: the world, with
/// positions in rank order.
static int64_t worldAxes(const Manifest &m) {
  int64_t code = 0;
  for (size_t axis = 0; axis < m.gridShape.size(); ++axis)
    code |= static_cast<int64_t>(axis + 1) << (4 * axis);
  return code;
}

Placement moe_train::placementOf(const Manifest &m, const TensorSpec &spec,
                                 int64_t rank) {
  Placement p;
  p.wholeShape = spec.shape;
  p.offsets.assign(spec.shape.size(), 0);
  // Rank r's coordinates on the grid, row-major.
  std::vector<int64_t> coords(m.gridShape.size());
  for (int64_t axis = static_cast<int64_t>(m.gridShape.size()) - 1, rest = rank;
       axis >= 0; --axis) {
    coords[axis] = rest % m.gridShape[axis];
    rest /= m.gridShape[axis];
  }
  // As moe-compile cut the pieces (lib/Compile/Bundle.cpp): each step splits
  // the current block along `dim` into as many parts as its group has
  // ranks, and the rank keeps the part at its position in the group.
  auto group = [&](const TensorSpec::Slice &slice) {
    int64_t size = 1, position = 0;
    for (int64_t axis : slice.axes) {
      size *= m.gridShape[axis];
      position = position * m.gridShape[axis] + coords[axis];
    }
    return std::pair{size, position};
  };
  for (const TensorSpec::Slice &slice : spec.slices) {
    p.wholeShape[slice.dim] *= group(slice).first;
    p.sliced |= group(slice).first > 1;
  }
  std::vector<int64_t> block = p.wholeShape;
  for (const TensorSpec::Slice &slice : spec.slices) {
    auto [size, position] = group(slice);
    block[slice.dim] /= size;
    p.offsets[slice.dim] += position * block[slice.dim];
  }
  for (int64_t r = 0; r < rank; ++r)
    if (spec.offsets[r] == spec.offsets[rank])
      p.owner = false;
  return p;
}

void moe_train::combineNorms(std::vector<float> &norms,
                             const std::vector<bool> &owner,
                             const Manifest &m) {
  if (m.worldSize == 1)
    return;
  std::vector<float> squares(norms.size()), sums(norms.size());
  for (size_t i = 0; i < norms.size(); ++i)
    squares[i] = owner[i] ? norms[i] * norms[i] : 0.0f;
  moert_all_reduce_sum(squares.data(), sums.data(),
                       static_cast<int64_t>(sums.size()), MOERT_F32,
                       worldAxes(m));
  for (size_t i = 0; i < norms.size(); ++i)
    norms[i] = std::sqrt(sums[i]);
}

/// Calls `copy(pieceOffset, wholeOffset, length)` for each row (last
/// dimension) of a piece of shape `localShape` at `at` in the whole.
template <typename Copy>
static void forEachRow(const std::vector<int64_t> &localShape,
                       const Placement &at, Copy copy) {
  size_t rank = localShape.size();
  int64_t row = rank ? localShape[rank - 1] : 1;
  int64_t elements = 1;
  for (int64_t d : localShape)
    elements *= d;
  std::vector<int64_t> index(rank, 0);
  for (int64_t start = 0; start < elements; start += row) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d)
      offset = offset * at.wholeShape[d] + at.offsets[d] + index[d];
    copy(start, offset, row);
    // The next row: the index over every dimension but the last.
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++index[d] < localShape[d])
        break;
      index[d] = 0;
    }
  }
}

std::vector<float> moe_train::gatherWhole(const Manifest &m,
                                          const TensorSpec &spec,
                                          const std::vector<float> &piece) {
  if (m.worldSize == 1)
    return piece;
  std::vector<float> pieces(piece.size() * m.worldSize);
  moert_all_gather(piece.data(), pieces.data(),
                   static_cast<int64_t>(piece.size() * sizeof(float)),
                   worldAxes(m));
  if (moert::worldRank() != 0)
    return {};
  Placement whole = placementOf(m, spec, 0);
  int64_t elements = 1;
  for (int64_t d : whole.wholeShape)
    elements *= d;
  std::vector<float> result(elements);
  for (int64_t r = 0; r < m.worldSize; ++r) {
    const float *from = pieces.data() + r * piece.size();
    forEachRow(spec.shape, placementOf(m, spec, r),
               [&](int64_t local, int64_t global, int64_t n) {
                 std::memcpy(result.data() + global, from + local,
                             n * sizeof(float));
               });
  }
  return result;
}

std::vector<float> moe_train::cutPiece(const std::vector<float> &whole,
                                       const std::vector<int64_t> &localShape,
                                       const Placement &placement) {
  int64_t elements = 1;
  for (int64_t d : localShape)
    elements *= d;
  std::vector<float> piece(elements);
  forEachRow(localShape, placement,
             [&](int64_t local, int64_t global, int64_t n) {
               std::memcpy(piece.data() + local, whole.data() + global,
                           n * sizeof(float));
             });
  return piece;
}
