//===- moert-cuda-bench.cpp - MoE kernels against their dense bounds ------===//
//
// The two GPU figures the CUDA backend is held to, on the expert shapes of a
// Mixtral-8x7B block in bf16 (T tokens, top-2 of 8 experts, H 4096, F
// 14336; T from the command line, default 8192):
//   * grouped GEMM (moert_cuda_grouped_gemm over the experts' row ranges,
//     random routing) against one dense cuBLAS GEMM of the same FLOPs;
//     target: 80% or more;
//   * permutation by expert (moert_cuda_dispatch, what compiled moe.dispatch
//     calls, all on the device: T * k rows read and written) against a
//     device-to-device copy of the same bytes.
// Medians of 20 timed runs after 3 warm-ups, with CUDA events, on random
// tokens and weights (GEMMs on zeros run faster than on real data).
//
//   moert-cuda-bench [TOKENS]
//
//===----------------------------------------------------------------------===//

#include "moert/Runtime.h"
#include "moert/moert_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    moert::fatal(std::string(what) + ": " + cudaGetErrorString(status));
}

void *deviceBuffer(size_t bytes) {
  void *ptr = nullptr;
  check(cudaMalloc(&ptr, bytes), "cudaMalloc");
  check(cudaMemset(ptr, 0, bytes), "cudaMemset");
  return ptr;
}

/// Uniform values in [-1, 1) as bf16 in all `count` elements of `dst`: a
/// block of random values made on the host (16 Mi elements at most, so
/// that the 0.9 GB of weights take no time to fill) copied over it again
/// and again.
void fillRandomBf16(void *dst, size_t count, std::mt19937 &rng) {
  const size_t block = std::min<size_t>(count, size_t(1) << 24);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<uint16_t> host(block);
  for (uint16_t &h : host) {
    float f = value(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    h = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
  }
  for (size_t done = 0; done < count; done += block)
    check(cudaMemcpy(static_cast<uint16_t *>(dst) + done, host.data(),
                     std::min(block, count - done) * sizeof(uint16_t),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
}

/// Median milliseconds of `run` on the runtime's stream.
double medianMs(const std::function<void()> &run) {
  auto stream = static_cast<cudaStream_t>(moert_cuda_stream());
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    run();
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  moert::init(argc, argv);
  moert_cuda_init();
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int64_t E = 8, k = 2, H = 4096, F = 14336, R = T * k;
  const size_t bf16 = 2;
  if (T < 1)
    moert::fatal("moert-cuda-bench: TOKENS must be positive");
  auto stream = static_cast<cudaStream_t>(moert_cuda_stream());

  // Random top-2 routing to distinct experts.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> pick(0, E - 1);
  std::vector<int32_t> ids(R);
  for (int64_t t = 0; t < T; ++t) {
    ids[t * k] = pick(rng);
    do
      ids[t * k + 1] = pick(rng);
    while (ids[t * k + 1] == ids[t * k]);
  }
  void *x = deviceBuffer(T * H * bf16), *xp = deviceBuffer(R * H * bf16);
  void *w = deviceBuffer(E * H * F * bf16), *y = deviceBuffer(R * F * bf16);
  // xp is x permuted (below), so random too.
  fillRandomBf16(x, T * H, rng);
  fillRandomBf16(w, E * H * F, rng);
  auto *dIds = static_cast<int32_t *>(deviceBuffer(R * sizeof(int32_t)));
  auto *slotRow = static_cast<int32_t *>(deviceBuffer(R * sizeof(int32_t)));
  auto *offsets = static_cast<int64_t *>(deviceBuffer((E + 1) * sizeof(int64_t)));
  check(cudaMemcpy(dIds, ids.data(), R * sizeof(int32_t), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  // The fills and copies went to the legacy stream, which the runtime's
  // stream need not wait for.
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<int64_t> hostOffsets(E + 1);
  int64_t dropped = 0;
  moert_cuda_permute(x, MOERT_BF16, T, H, dIds, k, E, 0, xp, slotRow, offsets,
                     hostOffsets.data(), &dropped, nullptr);

  auto *counts = static_cast<int32_t *>(deviceBuffer(E * sizeof(int32_t)));
  double permuteMs = medianMs([&] {
    moert_cuda_dispatch(MOERT_BF16, x, T, H, dIds, k, E, xp, slotRow, counts);
  });
  double copyMs = medianMs([&] {
    check(cudaMemcpyAsync(xp, x, std::min(T, R) * H * bf16,
                          cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
  });
  // Bytes read and written: the permutation moves R rows, the copy T rows.
  double permuteGBs = 2.0 * R * H * bf16 / (permuteMs * 1e6);
  double copyGBs = 2.0 * std::min(T, R) * H * bf16 / (copyMs * 1e6);

  double flops = 2.0 * R * H * F;
  // The runtime's choice, then each of the two ways it chooses between.
  auto groupedGemmMs = [&](int32_t strategy) {
    moert_cuda_set_gemm_strategy(strategy);
    return medianMs([&] {
      moert_cuda_grouped_gemm(MOERT_BF16, E, hostOffsets.data(), H, F, xp, w,
                              y, nullptr);
    });
  };
  double groupedMs = groupedGemmMs(MOERT_GEMM_AUTO);
  double oneCallMs = groupedGemmMs(MOERT_GEMM_GROUPED);
  double perGroupMs = groupedGemmMs(MOERT_GEMM_SEPARATE);
  moert_cuda_set_gemm_strategy(MOERT_GEMM_AUTO);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS)
    moert::fatal("moert-cuda-bench: cublasCreate failed");
  float alpha = 1, beta = 0;
  double denseMs = medianMs([&] {
    // Row-major y [R, F] = xp [R, H] x W_0 [H, F], column-major y^T = W^T xp^T.
    if (cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, F, R, H, &alpha, w,
                     CUDA_R_16BF, F, xp, CUDA_R_16BF, H, &beta, y, CUDA_R_16BF,
                     F, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      moert::fatal("moert-cuda-bench: cublasGemmEx failed");
  });
  double groupedTF = flops / (groupedMs * 1e9), denseTF = flops / (denseMs * 1e9);

  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s\n", prop.name);
  std::printf("shapes: T=%lld E=%lld k=%lld H=%lld F=%lld, bf16, rows per "
              "expert %lld..%lld\n",
              (long long)T, (long long)E, (long long)k, (long long)H,
              (long long)F, (long long)(hostOffsets[1] - hostOffsets[0]),
              (long long)(hostOffsets[E] - hostOffsets[E - 1]));
  std::printf("grouped GEMM: %.3f ms, %.1f TFLOP/s; dense cuBLAS GEMM of the "
              "same FLOPs: %.3f ms, %.1f TFLOP/s; ratio %.2f (target >= "
              "0.80)\n",
              groupedMs, groupedTF, denseMs, denseTF, groupedTF / denseTF);
  std::printf("  of which: cuBLAS's grouped call %.3f ms (ratio %.2f), a "
              "GEMM per expert %.3f ms (ratio %.2f)\n",
              oneCallMs, denseMs / oneCallMs, perGroupMs, denseMs / perGroupMs);
  std::printf("permute: %.3f ms, %.0f GB/s; device copy: %.3f ms, %.0f GB/s; "
              "ratio %.2f\n",
              permuteMs, permuteGBs, copyMs, copyGBs, permuteGBs / copyGBs);
  cublasDestroy(blas);
  moert::finalize();
  return 0;
}
