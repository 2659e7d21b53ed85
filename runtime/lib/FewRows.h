//===- FewRows.h - Expert GEMMs of a few rows at memory speed ---*- C++ -*-===//
//
// Internal to runtime/lib: C [M, N] (+)= A [M, K] W^T for W [N, K], all
// contiguous, kMaxFewRows rows of A at a time (FewRows.cpp says why and
// how). Each element of C is the same sum whatever M and the other rows.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_FEWROWS_H
#define MOERT_LIB_FEWROWS_H

#include <cstdint>
#include <vector>

namespace moert::detail {

inline constexpr int64_t kMaxFewRows = 8;

struct FewRowsProblem {
  const float *A;
  const float *W;
  float *C;
  int64_t M, N, K;
  /// C += A W^T (a bias already in C), else C = A W^T.
  bool accumulate;
};

/// Runs every problem on the threads of the OpenMP pool that oneDNN uses.
void runFewRows(const std::vector<FewRowsProblem> &problems);

} // namespace moert::detail

#endif // MOERT_LIB_FEWROWS_H
