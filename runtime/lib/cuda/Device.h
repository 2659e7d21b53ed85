//===- Device.h - State and checks shared by the CUDA runtime ---*- C++ -*-===//
//
// Internal to runtime/lib/cuda: the device state that moert_cuda_init makes
// once, and checks that turn a failed CUDA, cuBLAS or NCCL call into an
// error that ends every rank and names the call.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_CUDA_DEVICE_H
#define MOERT_LIB_CUDA_DEVICE_H

#include "../Process.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace moert::cuda {

struct Device {
  int index = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  /// The pool of stream-ordered allocations (cudaMallocAsync).
  cudaMemPool_t pool = nullptr;
};

/// The device, initialised on first use.
Device &device();

/// `stream`, or the runtime's stream when null.
cudaStream_t streamOr(void *stream);

/// Device memory of `bytes` on `stream` (cudaMallocAsync). When the device
/// is out of memory, the memory kept for later calls (managed buffers, the
/// pool's free blocks) is released first and the allocation tried again;
/// then a failure ends every rank.
void *deviceAlloc(size_t bytes, cudaStream_t stream);

/// The device's copy of the global at `host` (moert_cuda_global,
/// moert_cuda_device_global), or null when none was made.
void *globalCopyOf(const void *host);

/// Gives back what the runtime keeps for later calls (the cached managed
/// buffers, the stream-ordered pool's free blocks), for allocations that
/// are not the pool's: NCCL's, cuBLAS's, managed and cudaMalloc'ed ones.
void releaseCachedMemory();

inline void check(cudaError_t status, const char *call) {
  if (status != cudaSuccess)
    detail::fail(call, " failed: ", cudaGetErrorName(status), " (",
                 cudaGetErrorString(status), ")");
}

inline void check(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    detail::fail(call, " failed: ", cublasGetStatusName(status), " (",
                 cublasGetStatusString(status), ")");
}

/// Bytes of one element of a moert_cuda_dtype; ends the process on others.
size_t elementBytes(int32_t dtype, const char *op);

/// cuBLAS's name for a moert_cuda_dtype (checked by elementBytes).
cudaDataType_t blasType(int32_t dtype);

} // namespace moert::cuda

#endif // MOERT_LIB_CUDA_DEVICE_H
