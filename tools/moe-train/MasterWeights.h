//===- MasterWeights.h - A parameter's fp32 master weights -------*- C++ -*-===//
//
// Where the model computes a parameter in f32, its masters are the model's
// own weights (the first symbol of model.so that holds it): the optimizer
// updates them in place, and a step copies nothing. For f16 and bf16
// weights they are a vector of their own, narrowed into the model's copies
// after every step.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TRAIN_MASTERWEIGHTS_H
#define MOE_TRAIN_MASTERWEIGHTS_H

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <cassert>
#include <vector>

namespace moe_train {

class MasterWeights {
public:
  /// The masters are the n floats at `weights`, which the caller keeps.
  void alias(float *weights, size_t n) {
    owned.clear();
    view = weights;
    count = n;
  }
  /// The masters are n floats of their own, zero.
  void own(size_t n) {
    owned.assign(n, 0.0f);
    view = owned.data();
    count = n;
  }
  bool isAlias(const void *weights) const {
    return owned.empty() && count && view == weights;
  }
  /// Overwrites the masters with `values`, of their size.
  void assign(llvm::ArrayRef<float> values) {
    assert(values.size() == count && "masters keep their size");
    std::copy(values.begin(), values.end(), view);
  }

  float *data() { return view; }
  const float *data() const { return view; }
  size_t size() const { return count; }
  operator llvm::ArrayRef<float>() const { return {view, count}; }

private:
  std::vector<float> owned;
  float *view = nullptr;
  size_t count = 0;
};

} // namespace moe_train

#endif // MOE_TRAIN_MASTERWEIGHTS_H
