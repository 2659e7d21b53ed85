//===- Distributed.cpp - moe-train on several ranks -----------------------===//

#include "Distributed.h"

#include "moert/Runtime.h"
#include "moert/moert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace moe_run;
using namespace moe_train;

/// The runtime's code for the group of grid axes `axes` (positions
/// row-major over them, in this order), as moe-compile encodes it.
static int64_t axesCode(const std::vector<int64_t> &axes) {
  int64_t code = 0;
  for (size_t i = 0; i < axes.size(); ++i)
    code |= (axes[i] + 1) << (4 * i);
  return code;
}

/// Rank `rank`'s coordinates on the grid, row-major.
static std::vector<int64_t> coordinates(const Manifest &m, int64_t rank) {
  std::vector<int64_t> coords(m.gridShape.size());
  for (int64_t axis = static_cast<int64_t>(m.gridShape.size()) - 1; axis >= 0;
       --axis) {
    coords[axis] = rank % m.gridShape[axis];
    rank /= m.gridShape[axis];
  }
  return coords;
}

/// The group of every grid axis: the world, with positions in rank order.
static int64_t worldAxes(const Manifest &m) {
  std::vector<int64_t> all(m.gridShape.size());
  for (size_t axis = 0; axis < all.size(); ++axis)
    all[axis] = static_cast<int64_t>(axis);
  return axesCode(all);
}

Placement moe_train::placementOf(const Manifest &m, const TensorSpec &spec,
                                 int64_t rank) {
  Placement p;
  p.wholeShape = spec.shape;
  p.offsets.assign(spec.shape.size(), 0);
  std::vector<int64_t> coords = coordinates(m, rank);
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

void moe_train::sumOverWorld(std::vector<float> &values, const Manifest &m) {
  if (m.worldSize == 1)
    return;
  std::vector<float> sums(values.size());
  moert_all_reduce_sum(values.data(), sums.data(),
                       static_cast<int64_t>(values.size()), MOERT_F32,
                       worldAxes(m));
  values = std::move(sums);
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
                                          llvm::ArrayRef<float> piece) {
  if (m.worldSize == 1)
    return piece.vec();
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
  for (int64_t r = 0; r < m.worldSize; ++r)
    placePiece(result, pieces.data() + r * piece.size(), spec.shape,
               placementOf(m, spec, r));
  return result;
}

void moe_train::placePiece(std::vector<float> &whole, const float *piece,
                           const std::vector<int64_t> &localShape,
                           const Placement &placement) {
  forEachRow(localShape, placement,
             [&](int64_t local, int64_t global, int64_t n) {
               std::memcpy(whole.data() + global, piece + local,
                           n * sizeof(float));
             });
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

Replicas moe_train::replicasOf(const Manifest &m, const TensorSpec &spec,
                               int64_t rank) {
  // Ranks that differ only along axes no slice step uses hold the same
  // piece.
  std::vector<bool> cut(m.gridShape.size());
  for (const TensorSpec::Slice &slice : spec.slices)
    for (int64_t axis : slice.axes)
      cut[axis] = true;
  std::vector<int64_t> coords = coordinates(m, rank), axes;
  Replicas r;
  for (size_t axis = 0; axis < cut.size(); ++axis)
    if (!cut[axis] && m.gridShape[axis] > 1) {
      axes.push_back(static_cast<int64_t>(axis));
      r.count *= m.gridShape[axis];
      r.position = r.position * m.gridShape[axis] + coords[axis];
    }
  r.axes = axesCode(axes);
  return r;
}

std::pair<size_t, size_t> Replicas::chunk(size_t n) const {
  size_t size = (n + count - 1) / count;
  size_t begin = std::min(n, size * position);
  return {begin, std::min(n, begin + size)};
}

void moe_train::gatherChunks(float *piece, size_t n, const Replicas &replicas) {
  if (replicas.count == 1)
    return;
  // Equal blocks for the all-gather: the last chunk padded.
  size_t size = (n + replicas.count - 1) / replicas.count;
  auto [begin, end] = replicas.chunk(n);
  std::vector<float> mine(size, 0.0f), all(size * replicas.count);
  std::copy(piece + begin, piece + end, mine.begin());
  moert_all_gather(mine.data(), all.data(),
                   static_cast<int64_t>(size * sizeof(float)), replicas.axes);
  std::copy(all.begin(), all.begin() + n, piece);
}
