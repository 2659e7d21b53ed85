//===- Kernels.cuh - Helpers of the runtime's CUDA kernels ------*- CUDA -*-===//
//
// Internal to runtime/lib/cuda: element conversions (math in f32 for f16
// and bf16), dispatch from a moert_cuda_dtype to its C++ type, and launch
// helpers shared by the .cu files.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_CUDA_KERNELS_CUH
#define MOERT_LIB_CUDA_KERNELS_CUH

#include "Device.h"

#include "moert/moert_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace moert::cuda {

constexpr int kWarp = 32;
constexpr int kBlock = 256;

__device__ inline float toFloat(float v) { return v; }
__device__ inline float toFloat(__half v) { return __half2float(v); }
__device__ inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ inline T fromFloat(float v);
template <> __device__ inline float fromFloat<float>(float v) { return v; }
template <> __device__ inline __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Calls `fn` with a null pointer of the element type `dtype` names.
template <typename Fn> void dispatchType(int32_t dtype, const char *op, Fn fn) {
  switch (dtype) {
  case MOERT_F32:
    return fn(static_cast<float *>(nullptr));
  case MOERT_F16:
    return fn(static_cast<__half *>(nullptr));
  case MOERT_BF16:
    return fn(static_cast<__nv_bfloat16 *>(nullptr));
  }
  detail::fail(op, ": unknown element type code ", dtype);
}

inline int blocksFor(int64_t n, int per) {
  return static_cast<int>((n + per - 1) / per);
}

inline void checkLaunch(const char *kernel) {
  check(cudaGetLastError(), kernel);
}

} // namespace moert::cuda

#endif // MOERT_LIB_CUDA_KERNELS_CUH
