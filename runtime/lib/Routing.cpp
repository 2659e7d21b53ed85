//===- Routing.cpp - Token rows into per-expert order on the CPU ----------===//
//
// moert_dispatch: moe.dispatch without capacity as one counting sort of the
// (token, slot) pairs by expert, stable in token order, then one row copy
// per pair. The CUDA runtime's moert_cuda_dispatch has the same contract.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "moert/moert.h"

#include <cstring>
#include <vector>

using namespace moert;

int64_t detail::dtypeBytes(int32_t dtype, const char *op) {
  switch (dtype) {
  case MOERT_F32:
  case MOERT_I32:
    return 4;
  case MOERT_F64:
  case MOERT_I64:
    return 8;
  case MOERT_F16:
  case MOERT_BF16:
    return 2;
  }
  fail(op, ": unknown dtype code ", dtype);
}

void moert_dispatch(int32_t dtype, const void *x, int64_t tokens,
                    int64_t hidden, const int32_t *ids, int64_t k,
                    int64_t experts, void *rows, int32_t *slots,
                    int32_t *counts) {
  const char *op = "moert_dispatch";
  int64_t rowBytes = detail::dtypeBytes(dtype, op) * hidden;
  if (tokens < 0 || hidden < 0 || k < 0 || experts < 1)
    detail::fail(op, ": bad sizes: ", tokens, " tokens of ", hidden, ", top-",
                 k, " of ", experts, " experts");
  int64_t pairs = tokens * k;
  std::vector<int64_t> next(experts, 0);
  for (int64_t i = 0; i < pairs; ++i)
    if (ids[i] >= 0 && ids[i] < experts)
      ++next[ids[i]];
  int64_t start = 0;
  for (int64_t e = 0; e < experts; ++e) {
    counts[e] = static_cast<int32_t>(next[e]);
    int64_t count = next[e];
    next[e] = start;
    start += count;
  }
  auto *in = static_cast<const char *>(x);
  auto *out = static_cast<char *>(rows);
  for (int64_t i = 0; i < pairs; ++i) {
    int32_t e = ids[i];
    if (e < 0 || e >= experts) {
      slots[i] = -1;
      continue;
    }
    int64_t row = next[e]++;
    slots[i] = static_cast<int32_t>(row);
    std::memcpy(out + row * rowBytes, in + (i / k) * rowBytes, rowBytes);
  }
  // Rows past the last group are zero.
  std::memset(out + start * rowBytes, 0, (pairs - start) * rowBytes);
}
