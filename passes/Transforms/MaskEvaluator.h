//===- MaskEvaluator.h - attention masks read at compile time ---*- C++ -*-===//
//
// An exported attention mask is arithmetic on constants (the causal
// triangle) and on inputs (the padding). moe-causal-attention reads the
// elements that do not depend on the inputs, one at a time, to find the
// keys each query row may see.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_TRANSFORMS_MASKEVALUATOR_H
#define MOE_PASSES_TRANSFORMS_MASKEVALUATOR_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace mlir::moe {

/// The elements of a mask computation that do not depend on the program's
/// inputs, one at a time.
class MaskEvaluator {
public:
  /// The element of `v` at `index`: constants (dense and dense_resource),
  /// comparisons, logic, casts, arithmetic, Where, Expand, reshapes, Slice
  /// and Concat; none where it depends on an input.
  std::optional<double> at(Value v, ArrayRef<int64_t> index, int depth = 0);

  /// Reads the shard.all_slice ops over `group`'s grid axes as rank `rank`
  /// of them takes its block (moe-sequence-parallel's blocks of tokens).
  void setRank(shard::AllSliceOp group, int64_t rank) {
    this->group = group;
    this->rank = rank;
  }

private:
  shard::AllSliceOp group;
  int64_t rank = 0;
  std::optional<double> constantAt(Value v, ArrayRef<int64_t> index);
  struct Constant {
    ShapedType type;
    DenseElementsAttr dense;
    ArrayRef<char> bytes;
  };
  DenseMap<Value, Constant> constants;
};

} // namespace mlir::moe

#endif // MOE_PASSES_TRANSFORMS_MASKEVALUATOR_H
