//===- Stats.cu - Per-layer statistics kept on the device -----------------===//
//
// The moert_layer_* hooks of the CPU runtime read the routed ids and the
// dropped count on the host, which for device buffers means waiting for the
// GPU and pulling their pages over. These count on the runtime's stream
// into device counters and time each layer with a pair of events; the
// counters and times reach the CPU runtime's tables only when moe-run
// prints them.
//
//===----------------------------------------------------------------------===//

#include "Kernels.cuh"

#include <algorithm>
#include <map>

using namespace moert;
using namespace moert::cuda;

namespace {

/// Experts whose counts a block keeps in shared memory first.
constexpr int kSharedExperts = 4096;

/// tokens[e] += the ids equal to e.
__global__ void countIds(const int32_t *ids, int64_t n, int experts,
                         unsigned long long *tokens) {
  extern __shared__ unsigned int local[];
  bool shared = experts <= kSharedExperts;
  if (shared) {
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
      local[e] = 0;
    __syncthreads();
  }
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int e = ids[i];
    if (e < 0 || e >= experts)
      continue;
    if (shared)
      atomicAdd(&local[e], 1u);
    else
      atomicAdd(&tokens[e], 1ull);
  }
  if (!shared)
    return;
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x)
    if (local[e])
      atomicAdd(&tokens[e], static_cast<unsigned long long>(local[e]));
}

__global__ void addDropped(const int64_t *dropped, long long *total) {
  *total += *dropped;
}

struct Span {
  int64_t run;
  cudaEvent_t begin, end;
};

struct Layer {
  unsigned long long *tokens = nullptr; ///< per expert, device
  int64_t experts = 0;
  long long *dropped = nullptr; ///< device
  cudaEvent_t begin = nullptr;  ///< of the span under way
  std::vector<Span> spans;
};

std::map<int64_t, Layer> layers;

/// Sums and times into the CPU runtime's tables, once the device is done.
void collect() {
  cudaStream_t s = device().stream;
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  for (auto &[id, l] : layers) {
    if (l.experts > 0) {
      std::vector<int64_t> tokens(l.experts);
      check(cudaMemcpy(tokens.data(), l.tokens, sizeof(int64_t) * l.experts,
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      detail::addLayerTokens(id, tokens);
      // On the stream: the legacy stream's would not order later kernels.
      check(cudaMemsetAsync(l.tokens, 0, sizeof(int64_t) * l.experts, s),
            "cudaMemsetAsync");
    }
    if (l.dropped) {
      long long dropped = 0;
      check(cudaMemcpy(&dropped, l.dropped, sizeof dropped,
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      detail::addLayerDropped(id, dropped);
      check(cudaMemsetAsync(l.dropped, 0, sizeof dropped, s),
            "cudaMemsetAsync");
    }
    for (const Span &span : l.spans) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, span.begin, span.end),
            "cudaEventElapsedTime");
      detail::addLayerSeconds(id, span.run, ms * 1e-3);
      cudaEventDestroy(span.begin);
      cudaEventDestroy(span.end);
    }
    l.spans.clear();
  }
}

Layer &layer(int64_t id, const char *op) {
  static bool registered = false;
  if (!registered) {
    detail::beforePrintStats(collect);
    registered = true;
  }
  detail::checkLayer(id, op);
  return layers[id];
}

cudaEvent_t recordEvent() {
  cudaEvent_t event;
  check(cudaEventCreate(&event), "cudaEventCreate");
  check(cudaEventRecord(event, device().stream), "cudaEventRecord");
  return event;
}

} // namespace

void moert_cuda_layer_begin(int64_t id) {
  Layer &l = layer(id, "moert_cuda_layer_begin");
  if (l.begin)
    cudaEventDestroy(l.begin);
  l.begin = recordEvent();
}

void moert_cuda_layer_end(int64_t id) {
  const char *op = "moert_cuda_layer_end";
  Layer &l = layer(id, op);
  if (!l.begin)
    detail::fail(op, ": layer ", id, " ends before it begins");
  l.spans.push_back({detail::currentRun(), l.begin, recordEvent()});
  l.begin = nullptr;
}

void moert_cuda_layer_tokens(int64_t id, const int32_t *ids, int64_t numIds,
                             int64_t numExperts, int64_t replicaAxes) {
  const char *op = "moert_cuda_layer_tokens";
  Layer &l = layer(id, op);
  if (numExperts < 0 || numExperts > (1 << 24) || numIds < 0)
    detail::fail(op, ": ", numIds, " ids of ", numExperts, " experts");
  cudaStream_t s = device().stream;
  // Sized on every rank, as on the CPU, so that all agree on the extents.
  if (l.experts < numExperts) {
    // Rare (a layer called with more experts later): keep what was counted.
    auto *grown = static_cast<unsigned long long *>(
        deviceAlloc(sizeof(int64_t) * numExperts, s));
    check(cudaMemsetAsync(grown, 0, sizeof(int64_t) * numExperts, s),
          "cudaMemsetAsync");
    if (l.tokens) {
      check(cudaMemcpyAsync(grown, l.tokens, sizeof(int64_t) * l.experts,
                            cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync");
      check(cudaFreeAsync(l.tokens, s), "cudaFreeAsync");
    }
    l.tokens = grown;
    l.experts = numExperts;
  }
  if (detail::position(replicaAxes, op) != 0 || numIds == 0 ||
      numExperts == 0)
    return;
  int experts = static_cast<int>(numExperts);
  size_t shared = experts <= kSharedExperts ? sizeof(unsigned) * experts : 0;
  int blocks = std::min(blocksFor(numIds, kBlock), 1024);
  countIds<<<blocks, kBlock, shared, s>>>(ids, numIds, experts, l.tokens);
  checkLaunch("token count kernel");
}

void moert_cuda_layer_dropped(int64_t id, const int64_t *dropped,
                              int64_t replicaAxes) {
  const char *op = "moert_cuda_layer_dropped";
  Layer &l = layer(id, op);
  if (detail::position(replicaAxes, op) != 0)
    return;
  cudaStream_t s = device().stream;
  if (!l.dropped) {
    l.dropped = static_cast<long long *>(deviceAlloc(sizeof(long long), s));
    check(cudaMemsetAsync(l.dropped, 0, sizeof(long long), s),
          "cudaMemsetAsync");
  }
  addDropped<<<1, 1, 0, s>>>(dropped, l.dropped);
  checkLaunch("dropped count kernel");
}
