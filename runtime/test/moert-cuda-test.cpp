//===- moert-cuda-test.cpp - The CUDA runtime's kernels against the CPU ---===//
//
// Runs every MoE kernel of moert_cuda on random inputs and compares it with a
// plain C++ reference: gating (three scorings), moe.router's and
// moe.combine's entry points, permutation (with and without capacity),
// grouped GEMM and un-permute, moe.dispatch (dropless against the CPU
// runtime's, capacity against its semantics), moe.experts' grouped
// matmul (alone and in pairs), strided matmuls in every layout, in f32, f16 and bf16, the
// exchanges of a group of one (no axes) and the device-side layer
// statistics (printed for the lit test to check). Exit
// 0 when all agree. Without a GPU it ends with the runtime's error, which
// the no-GPU lit test checks.
//
//===----------------------------------------------------------------------===//

#include "moert/Runtime.h"
#include "moert/moert.h"
#include "moert/moert_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

int failures = 0, checks = 0;

void expect(bool ok, const std::string &what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  }
}

/// Device buffer of `n` elements of T, optionally filled from the host.
template <typename T> struct Buffer {
  T *ptr = nullptr;
  size_t n;
  explicit Buffer(size_t n) : n(n) {
    if (cudaMalloc(reinterpret_cast<void **>(&ptr),
                   std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess)
      moert::fatal("cudaMalloc failed in the test");
  }
  Buffer(const std::vector<T> &host) : Buffer(host.size()) { upload(host); }
  ~Buffer() { cudaFree(ptr); }
  void upload(const std::vector<T> &host) {
    cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
    // The runtime's stream does not wait for the legacy default stream.
    cudaDeviceSynchronize();
  }
  std::vector<T> download() const {
    cudaDeviceSynchronize();
    std::vector<T> host(n);
    cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

/// Host values of one element type: rounding to it and back.
struct TypeCase {
  const char *name;
  int32_t code;
  float tolerance;
  size_t bytes;
};
const TypeCase kTypes[] = {{"f32", MOERT_F32, 1e-5f, 4},
                           {"f16", MOERT_F16, 2e-2f, 2},
                           {"bf16", MOERT_BF16, 6e-2f, 2}};

float roundTo(int32_t code, float v) {
  if (code == MOERT_F16)
    return __half2float(__float2half_rn(v));
  if (code == MOERT_BF16)
    return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

/// Raw bytes of `values` in the element type.
std::vector<char> encode(int32_t code, const std::vector<float> &values) {
  size_t bytes = code == MOERT_F32 ? 4 : 2;
  std::vector<char> out(values.size() * bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    if (code == MOERT_F16) {
      __half h = __float2half_rn(values[i]);
      std::memcpy(&out[i * 2], &h, 2);
    } else if (code == MOERT_BF16) {
      __nv_bfloat16 h = __float2bfloat16_rn(values[i]);
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      std::memcpy(&out[i * 4], &values[i], 4);
    }
  }
  return out;
}

std::vector<float> decode(int32_t code, const std::vector<char> &raw) {
  size_t bytes = code == MOERT_F32 ? 4 : 2;
  std::vector<float> out(raw.size() / bytes);
  for (size_t i = 0; i < out.size(); ++i) {
    if (code == MOERT_F16) {
      __half h;
      std::memcpy(&h, &raw[i * 2], 2);
      out[i] = __half2float(h);
    } else if (code == MOERT_BF16) {
      __nv_bfloat16 h;
      std::memcpy(&h, &raw[i * 2], 2);
      out[i] = __bfloat162float(h);
    } else {
      std::memcpy(&out[i], &raw[i * 4], 4);
    }
  }
  return out;
}

float maxRelError(const std::vector<float> &got, const std::vector<float> &want) {
  float scale = 1e-6f, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  return err / scale;
}

std::vector<float> randomValues(size_t n, std::mt19937 &rng, float scale = 1) {
  std::normal_distribution<float> dist(0, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Selection beyond plain top-k (moert_cuda_router's bias and groups).
struct Selection {
  std::vector<float> bias;
  int groups = 0, groupTopk = 0, groupScore = 0;
  float masked = -INFINITY;
};

/// The CPU reference of moert_cuda_topk_gating and moert_cuda_router.
void gatingReference(const std::vector<float> &logits, int64_t T, int64_t E,
                     int64_t k, int scoring, bool normalize,
                     std::vector<float> &weights, std::vector<int32_t> &ids,
                     const Selection &select = {}) {
  weights.assign(T * k, 0);
  ids.assign(T * k, 0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> s(logits.begin() + t * E, logits.begin() + (t + 1) * E);
    if (scoring == MOERT_CUDA_SOFTMAX_TOPK) {
      float m = *std::max_element(s.begin(), s.end()), sum = 0;
      for (float &x : s)
        sum += (x = std::exp(x - m));
      for (float &x : s)
        x /= sum;
    } else if (scoring == MOERT_CUDA_SIGMOID_TOPK) {
      for (float &x : s)
        x = 1 / (1 + std::exp(-x));
    }
    std::vector<float> keys = s;
    for (int64_t e = 0; e < E && !select.bias.empty(); ++e)
      keys[e] += select.bias[e];
    if (select.groups > 0) {
      int64_t per = E / select.groups;
      std::vector<float> groupScores(select.groups);
      for (int g = 0; g < select.groups; ++g) {
        std::vector<float> members(keys.begin() + g * per,
                                   keys.begin() + (g + 1) * per);
        std::sort(members.rbegin(), members.rend());
        groupScores[g] = members[0] + (select.groupScore == 1 ? members[1] : 0);
      }
      std::vector<int> groupOrder(select.groups);
      std::iota(groupOrder.begin(), groupOrder.end(), 0);
      std::sort(groupOrder.begin(), groupOrder.end(), [&](int a, int b) {
        return groupScores[a] > groupScores[b] ||
               (groupScores[a] == groupScores[b] && a < b);
      });
      std::vector<bool> kept(select.groups, false);
      for (int r = 0; r < select.groupTopk; ++r)
        kept[groupOrder[r]] = true;
      for (int64_t e = 0; e < E; ++e)
        if (!kept[e / per])
          keys[e] = select.masked;
    }
    std::vector<int32_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return keys[a] > keys[b] || (keys[a] == keys[b] && a < b);
    });
    float total = 0;
    for (int64_t j = 0; j < k; ++j) {
      ids[t * k + j] = order[j];
      float w = s[order[j]];
      if (scoring == MOERT_CUDA_TOPK_SOFTMAX)
        w = std::exp(w - s[order[0]]);
      weights[t * k + j] = w;
      total += w;
    }
    if (normalize || scoring == MOERT_CUDA_TOPK_SOFTMAX)
      for (int64_t j = 0; j < k; ++j)
        weights[t * k + j] /= total;
  }
}

void testGating(std::mt19937 &rng) {
  const int64_t T = 77, E = 40, k = 3;
  for (const TypeCase &type : kTypes)
    for (int scoring = 0; scoring < 3; ++scoring)
      for (bool normalize : {false, true}) {
        std::vector<float> logits = randomValues(T * E, rng);
        for (float &x : logits)
          x = roundTo(type.code, x);
        Buffer<char> dLogits(encode(type.code, logits));
        Buffer<float> dWeights(T * k);
        Buffer<int32_t> dIds(T * k);
        moert_cuda_topk_gating(dLogits.ptr, type.code, T, E, k, scoring,
                               normalize, dWeights.ptr, dIds.ptr, nullptr);
        std::vector<float> weights;
        std::vector<int32_t> ids;
        gatingReference(logits, T, E, k, scoring, normalize, weights, ids);
        std::string what = std::string("gating ") + type.name + " scoring " +
                           std::to_string(scoring) +
                           (normalize ? " normalized" : "");
        expect(dIds.download() == ids, what + ": expert ids");
        expect(maxRelError(dWeights.download(), weights) < 1e-5f,
               what + ": weights");
      }
}

/// A token whose logits are all NaN is left unrouted with weights 0 by
/// every scoring (top-k then softmax included); the other tokens route.
void testUnroutedGating() {
  const int64_t T = 2, E = 8, k = 2;
  std::vector<float> logits(T * E, NAN);
  for (int64_t e = 0; e < E; ++e)
    logits[E + e] = static_cast<float>(e);
  for (int scoring = 0; scoring < 3; ++scoring) {
    Buffer<float> dLogits(logits), dWeights(T * k);
    Buffer<int32_t> dIds(T * k);
    moert_cuda_topk_gating(dLogits.ptr, MOERT_F32, T, E, k, scoring, true,
                           dWeights.ptr, dIds.ptr, nullptr);
    std::vector<float> weights = dWeights.download();
    std::vector<int32_t> ids = dIds.download();
    std::string what = "all-NaN token, scoring " + std::to_string(scoring);
    expect(ids[0] == -1 && ids[1] == -1 && weights[0] == 0 && weights[1] == 0,
           what + ": unrouted with weights 0");
    expect(ids[2] == 7 && ids[3] == 6 &&
               std::fabs(weights[2] + weights[3] - 1) < 1e-5f,
           what + ": the next token routes");
  }
}

/// Globals reach the GPU once per address: moert_cuda_device_global as a
/// device copy, moert_cuda_global as a managed one the host reads too.
void testGlobals(std::mt19937 &rng) {
  static const std::vector<float> weight = randomValues(1000, rng);
  static const std::vector<float> table = randomValues(16, rng);
  int64_t bytes = weight.size() * sizeof(float);
  void *device = moert_cuda_device_global(weight.data(), bytes);
  expect(moert_cuda_device_global(weight.data(), bytes) == device,
         "a device global is copied once");
  cudaStreamSynchronize(static_cast<cudaStream_t>(moert_cuda_stream()));
  std::vector<float> back(weight.size());
  cudaMemcpy(back.data(), device, bytes, cudaMemcpyDeviceToHost);
  cudaPointerAttributes attributes;
  cudaPointerGetAttributes(&attributes, device);
  expect(back == weight && attributes.type == cudaMemoryTypeDevice,
         "a device global holds the host bytes in device memory");
  int64_t tableBytes = table.size() * sizeof(float);
  void *managed = moert_cuda_global(table.data(), tableBytes);
  cudaDeviceSynchronize();
  expect(std::memcmp(managed, table.data(), tableBytes) == 0,
         "a managed global holds the host bytes where the host reads them");
}

/// moe.router's entry point: the gating kernel with the weights in the
/// logits' type, times the scaling factor; plain top-k, with a selection
/// bias, then with 8 groups of 8 (DeepSeek-V3: sigmoid, a bias, top-2 sums,
/// -inf outside the 3 best groups; Hugging Face's 0.0 mask; V2's max). 64
/// experts: each lane scans two.
void testRouter(std::mt19937 &rng, const TypeCase &type) {
  const int64_t T = 45, E = 64, k = 4;
  const double scale = 2.5;
  struct Case {
    int scoring;
    bool bias;
    int groupScore;
    float masked;
    int groups;
  };
  const Case cases[] = {{MOERT_CUDA_SOFTMAX_TOPK, false, 0, 0, 0},
                        {MOERT_CUDA_SIGMOID_TOPK, false, 0, 0, 0},
                        {MOERT_CUDA_SIGMOID_TOPK, true, 0, 0, 0},
                        {MOERT_CUDA_SIGMOID_TOPK, true, 1, -INFINITY, 8},
                        {MOERT_CUDA_SIGMOID_TOPK, true, 1, 0.0f, 8},
                        {MOERT_CUDA_SOFTMAX_TOPK, false, 0, -INFINITY, 8}};
  for (const Case &c : cases)
    for (bool normalize : {false, true}) {
      std::vector<float> logits = randomValues(T * E, rng);
      for (float &x : logits)
        x = roundTo(type.code, x);
      Selection select;
      if (c.bias) {
        select.bias = randomValues(E, rng, 0.5f);
        for (float &b : select.bias)
          b = roundTo(type.code, b);
      }
      select.groups = c.groups;
      select.groupTopk = c.groups ? 3 : 0;
      select.groupScore = c.groupScore;
      select.masked = c.masked;
      Buffer<char> dLogits(encode(type.code, logits)),
          dBias(encode(type.code, select.bias));
      Buffer<char> dWeights(T * k * type.bytes);
      Buffer<int32_t> dIds(T * k);
      moert_cuda_router(type.code, dLogits.ptr, T, E, k, c.scoring, normalize,
                        scale, c.bias ? dBias.ptr : nullptr, select.groups,
                        select.groupTopk, select.groupScore, select.masked,
                        dWeights.ptr, dIds.ptr);
      std::vector<float> weights;
      std::vector<int32_t> ids;
      gatingReference(logits, T, E, k, c.scoring, normalize, weights, ids,
                      select);
      for (float &w : weights)
        w = roundTo(type.code, static_cast<float>(w * scale));
      std::string what = std::string("router ") + type.name + " scoring " +
                         std::to_string(c.scoring) +
                         (c.bias ? " biased" : "") +
                         (c.groups ? " grouped" : "") +
                         (normalize ? " normalized" : "");
      expect(dIds.download() == ids, what + ": expert ids");
      expect(maxRelError(decode(type.code, dWeights.download()), weights) <
                 type.tolerance,
             what + ": weights");
    }
}

/// moe.combine's entry point: weights in the rows' type, unrouted (-1)
/// slots contributing nothing.
void testCombine(std::mt19937 &rng, const TypeCase &type) {
  const int64_t R = 20, W = 33, T = 9, k = 3;
  std::vector<float> rows = randomValues(R * W, rng),
                     weights = randomValues(T * k, rng);
  for (std::vector<float> *v : {&rows, &weights})
    for (float &x : *v)
      x = roundTo(type.code, x);
  std::uniform_int_distribution<int32_t> pick(-1, R - 1);
  std::vector<int32_t> slots(T * k);
  for (int32_t &slot : slots)
    slot = pick(rng);
  std::vector<float> want(T * W, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < W; ++h) {
      float sum = 0;
      for (int64_t j = 0; j < k; ++j)
        if (int32_t row = slots[t * k + j]; row >= 0)
          sum += weights[t * k + j] * rows[row * W + h];
      want[t * W + h] = roundTo(type.code, sum);
    }
  Buffer<char> dRows(encode(type.code, rows)),
      dWeights(encode(type.code, weights)), dOut(T * W * type.bytes);
  Buffer<int32_t> dSlots(slots);
  moert_cuda_combine(type.code, dRows.ptr, T, W, k, dSlots.ptr, dWeights.ptr,
                     dOut.ptr);
  float err = maxRelError(decode(type.code, dOut.download()), want);
  expect(err < type.tolerance, std::string("combine ") + type.name +
                                   " (max rel error " + std::to_string(err) +
                                   ")");
}

/// Permutation, grouped GEMM and un-permute of one MoE layer, against a
/// per-token reference.
void testLayer(std::mt19937 &rng, const TypeCase &type, int64_t capacity) {
  const int64_t T = 300, E = 6, k = 2, H = 64, N = 96;
  std::vector<float> x = randomValues(T * H, rng), w = randomValues(E * H * N, rng, 0.1f);
  for (float &v : x)
    v = roundTo(type.code, v);
  for (float &v : w)
    v = roundTo(type.code, v);
  std::uniform_int_distribution<int32_t> pick(0, E - 1);
  std::vector<int32_t> ids(T * k);
  for (int64_t t = 0; t < T; ++t) {
    ids[t * k] = pick(rng);
    do
      ids[t * k + 1] = pick(rng);
    while (ids[t * k + 1] == ids[t * k]);
  }
  std::vector<float> gate(T * k);
  for (float &g : gate)
    g = std::uniform_real_distribution<float>(0, 1)(rng);

  // Reference: stable order by expert, the first `capacity` kept.
  std::vector<int64_t> offsets(E + 1, 0), count(E, 0);
  std::vector<int32_t> slot(T * k, -1);
  for (int32_t e : ids)
    ++count[e];
  for (int64_t e = 0; e < E; ++e) {
    int64_t kept = capacity > 0 ? std::min(count[e], capacity) : count[e];
    offsets[e + 1] = offsets[e] + kept;
  }
  std::vector<int64_t> seen(E, 0);
  int64_t dropped = 0;
  for (int64_t i = 0; i < T * k; ++i) {
    int32_t e = ids[i];
    if (capacity > 0 && seen[e] >= capacity) {
      ++dropped;
      continue;
    }
    slot[i] = static_cast<int32_t>(offsets[e] + seen[e]++);
  }
  std::vector<float> out(T * N, 0);
  for (int64_t i = 0; i < T * k; ++i) {
    if (slot[i] < 0)
      continue;
    int64_t t = i / k, e = ids[i];
    for (int64_t h = 0; h < N; ++h) {
      // The expert's output row, then rounded to the element type as the
      // GEMM stores it, then weighted.
      float y = 0;
      for (int64_t c = 0; c < H; ++c)
        y += x[t * H + c] * w[(e * H + c) * N + h];
      out[t * N + h] += gate[i] * roundTo(type.code, y);
    }
  }

  Buffer<char> dX(encode(type.code, x)), dW(encode(type.code, w));
  Buffer<int32_t> dIds(ids), dSlot(T * k);
  Buffer<float> dGate(gate);
  Buffer<char> dXp(T * k * H * type.bytes), dY(T * k * N * type.bytes),
      dOut(T * N * type.bytes);
  Buffer<int64_t> dOffsets(E + 1);
  std::vector<int64_t> hostOffsets(E + 1);
  int64_t gotDropped = -1;
  moert_cuda_permute(dX.ptr, type.code, T, H, dIds.ptr, k, E, capacity,
                     dXp.ptr, dSlot.ptr, dOffsets.ptr, hostOffsets.data(),
                     &gotDropped, nullptr);
  std::string what = std::string("layer ") + type.name + " capacity " +
                     std::to_string(capacity);
  expect(dSlot.download() == slot, what + ": slot rows");
  expect(hostOffsets == offsets && dOffsets.download() == offsets,
         what + ": expert offsets");
  expect(gotDropped == dropped, what + ": dropped count");
  std::vector<float> xp = decode(type.code, dXp.download());
  bool rows = true;
  for (int64_t i = 0; i < T * k; ++i)
    if (slot[i] >= 0)
      rows &= std::equal(xp.begin() + slot[i] * H, xp.begin() + (slot[i] + 1) * H,
                         x.begin() + (i / k) * H);
  expect(rows, what + ": permuted rows");

  moert_cuda_grouped_gemm(type.code, E, hostOffsets.data(), H, N, dXp.ptr,
                          dW.ptr, dY.ptr, nullptr);
  moert_cuda_unpermute(dY.ptr, type.code, T, N, k, dSlot.ptr, dGate.ptr,
                       dOut.ptr, nullptr);
  float err = maxRelError(decode(type.code, dOut.download()), out);
  expect(err < std::max(type.tolerance, 1e-4f),
         what + ": grouped GEMM and un-permute (max rel error " +
             std::to_string(err) + ")");
}

/// moert_cuda_matmul on one layout: `batch` problems of A [M, K] (or one A
/// for all, `repeatA`) and B [K, N] row-major or transposed, B broadcast
/// along K (stride 0: the plain kernel), C row-major or column-major,
/// written or accumulated.
void testMatmul(std::mt19937 &rng, const TypeCase &type, bool transA,
                bool transB, bool broadcastB, bool columnMajorC,
                bool accumulate, int64_t batch = 1, bool repeatA = false) {
  const int64_t M = 37, N = 29, K = 45;
  int64_t sAb = repeatA ? 0 : M * K, sBb = K * N, sCb = M * N;
  std::vector<float> a = randomValues((repeatA ? 1 : batch) * M * K, rng),
                     b = randomValues(batch * K * N, rng),
                     c = randomValues(batch * M * N, rng);
  for (std::vector<float> *v : {&a, &b, &c})
    for (float &x : *v)
      x = roundTo(type.code, x);
  int64_t sAm = transA ? 1 : K, sAk = transA ? M : 1;
  int64_t sBk = broadcastB ? 0 : (transB ? 1 : N), sBn = transB ? K : 1;
  int64_t sCm = columnMajorC ? 1 : N, sCn = columnMajorC ? M : 1;
  std::vector<float> want(batch * M * N);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t out = p * sCb + m * sCm + n * sCn;
        float sum = accumulate ? c[out] : 0;
        for (int64_t k = 0; k < K; ++k)
          sum += a[p * sAb + m * sAm + k * sAk] *
                 b[p * sBb + k * sBk + n * sBn];
        want[out] = sum;
      }
  Buffer<char> dA(encode(type.code, a)), dB(encode(type.code, b)),
      dC(encode(type.code, c));
  moert_cuda_matmul(type.code, batch, M, N, K, dA.ptr, sAb, sAm, sAk, dB.ptr,
                    sBb, sBk, sBn, dC.ptr, sCb, sCm, sCn, accumulate, 0);
  float err = maxRelError(decode(type.code, dC.download()), want);
  expect(err < std::max(type.tolerance, 1e-4f),
         std::string("matmul ") + type.name +
             (batch > 1 ? " batch " + std::to_string(batch) : "") +
             (repeatA ? " repeated" : "") + (transA ? " A^T" : " A") +
             (broadcastB ? " B broadcast" : transB ? " B^T" : " B") +
             (columnMajorC ? " C col-major" : " C") +
             (accumulate ? " accumulate" : "") + " (max rel error " +
             std::to_string(err) + ")");
}

/// moert_cuda_dispatch against moert_dispatch (the CPU runtime's, the
/// reference): ids of -1 and past the experts go nowhere.
void testDispatch(std::mt19937 &rng, const TypeCase &type) {
  const int64_t T = 50, k = 2, E = 5, H = 12;
  std::vector<float> x = randomValues(T * H, rng);
  std::vector<int32_t> ids(T * k);
  std::uniform_int_distribution<int32_t> pick(-1, E);
  for (int32_t &id : ids)
    id = pick(rng);
  std::vector<char> raw = encode(type.code, x);
  std::vector<char> wantRows(T * k * H * type.bytes);
  std::vector<int32_t> wantSlots(T * k), wantCounts(E);
  moert_dispatch(type.code, raw.data(), T, H, ids.data(), k, E,
                 wantRows.data(), wantSlots.data(), wantCounts.data());
  Buffer<char> dX(raw), dRows(std::vector<char>(wantRows.size(), 1));
  Buffer<int32_t> dIds(ids), dSlots(T * k), dCounts(E);
  moert_cuda_dispatch(type.code, dX.ptr, T, H, dIds.ptr, k, E, dRows.ptr,
                      dSlots.ptr, dCounts.ptr);
  std::string what = std::string("dispatch ") + type.name;
  expect(dSlots.download() == wantSlots, what + ": slots");
  expect(dCounts.download() == wantCounts, what + ": counts");
  expect(dRows.download() == wantRows, what + ": rows (zeros past the last)");
}

/// moert_cuda_dispatch_capacity against moe.dispatch's capacity semantics
/// (position policy, or choice: pairs taken slot-major), some ids
/// unrouted, rows compared byte for byte
/// (unused rows zero): 240 pairs for capacity 25; or a shard of 24 pairs
/// after earlier shards sent each expert 20 to 35 (capacity 30, rows of
/// min(30, 24) per expert).
void testCapacityDispatch(std::mt19937 &rng, const TypeCase &type,
                          bool withAfter, bool choiceMajor) {
  const int64_t T = withAfter ? 12 : 120, k = 2, E = 5, H = 24,
                C = withAfter ? 30 : 25;
  const int64_t B = withAfter ? std::min(C, T * k) : C;
  std::vector<int32_t> ids(T * k), after(E, 0);
  std::uniform_int_distribution<int32_t> pick(-1, E);
  for (int32_t &id : ids)
    id = pick(rng);
  if (withAfter)
    for (int32_t &a : after)
      a = std::uniform_int_distribution<int32_t>(20, 35)(rng);
  std::vector<char> raw = encode(type.code, randomValues(T * H, rng));
  size_t rowBytes = H * type.bytes;
  std::vector<char> wantRows(E * B * rowBytes, 0);
  std::vector<int32_t> wantSlots(T * k, -1), wantCounts(E, 0);
  int64_t wantDropped = 0;
  for (int64_t q = 0; q < T * k; ++q) {
    // Slot-major for the choice policy: pair (q % T, q / T).
    int64_t i = choiceMajor ? (q % T) * k + q / T : q;
    int32_t e = ids[i];
    if (e < 0 || e >= E)
      continue;
    if (after[e] + wantCounts[e] >= C) {
      ++wantDropped;
      continue;
    }
    int64_t row = e * B + wantCounts[e]++;
    wantSlots[i] = static_cast<int32_t>(row);
    std::memcpy(&wantRows[row * rowBytes], &raw[(i / k) * rowBytes], rowBytes);
  }
  Buffer<char> dX(raw), dRows(std::vector<char>(wantRows.size(), 1));
  Buffer<int32_t> dIds(ids), dAfter(after), dSlots(T * k), dCounts(E);
  Buffer<int64_t> dDropped(1);
  moert_cuda_dispatch_capacity(type.code, dX.ptr, T, H, dIds.ptr, k, E, C,
                               choiceMajor ? 1 : 0,
                               withAfter ? dAfter.ptr : nullptr, B, dRows.ptr,
                               dSlots.ptr, dCounts.ptr, dDropped.ptr);
  std::string what = std::string("capacity dispatch ") + type.name +
                     (withAfter ? " after earlier shards" : "") +
                     (choiceMajor ? " (choice policy)" : "");
  expect(dSlots.download() == wantSlots, what + ": slots");
  expect(dCounts.download() == wantCounts, what + ": counts");
  expect(dDropped.download()[0] == wantDropped, what + ": dropped");
  expect(dRows.download() == wantRows, what + ": rows (unused rows zero)");
}

/// moert_cuda_grouped_matmul: 6 groups of 3 experts over 40 rows (packed,
/// or every 8 rows), weights [E, N, K] read transposed, with or without
/// biases [E, N], other rows zero.
void testGroupedMatmul(std::mt19937 &rng, const TypeCase &type,
                       int64_t groupStride, bool withBias) {
  const int64_t G = 6, E = 3, R = groupStride ? G * groupStride : 40, K = 24,
                N = 20;
  std::vector<int32_t> counts = {5, 0, 8, 3, 7, 6};
  std::vector<float> a = randomValues(R * K, rng),
                     w = randomValues(E * N * K, rng, 0.2f),
                     bias = randomValues(E * N, rng);
  for (std::vector<float> *v : {&a, &w, &bias})
    for (float &x : *v)
      x = roundTo(type.code, x);
  std::vector<float> want(R * N, 0);
  int64_t begin = 0;
  for (int64_t g = 0; g < G; ++g) {
    if (groupStride)
      begin = g * groupStride;
    for (int64_t r = begin; r < begin + counts[g]; ++r)
      for (int64_t n = 0; n < N; ++n) {
        float sum = withBias ? bias[(g % E) * N + n] : 0;
        for (int64_t k = 0; k < K; ++k)
          sum += a[r * K + k] * w[((g % E) * N + n) * K + k];
        want[r * N + n] = sum;
      }
    begin += counts[g];
  }
  Buffer<char> dA(encode(type.code, a)), dW(encode(type.code, w)),
      dBias(encode(type.code, bias)),
      dC(encode(type.code, std::vector<float>(R * N, 1.0f)));
  // The counts reach the host as the compiled code brings them there.
  Buffer<int32_t> dCounts(counts);
  std::vector<int32_t> hostCounts(G, -1);
  moert_cuda_read_counts(dCounts.ptr, G, hostCounts.data());
  expect(hostCounts == counts, "counts read to the host");
  moert_cuda_grouped_matmul(type.code, G, E, hostCounts.data(), groupStride, R,
                            K, N, dA.ptr, dW.ptr,
                            withBias ? dBias.ptr : nullptr, dC.ptr);
  float err = maxRelError(decode(type.code, dC.download()), want);
  expect(err < std::max(type.tolerance, 1e-4f),
         std::string("grouped matmul ") + type.name +
             (groupStride ? " capacity" : " dropless") +
             (withBias ? " with biases" : "") + " (max rel error " +
             std::to_string(err) + ")");
}

/// moert_cuda_grouped_matmul_pair against two moert_cuda_grouped_matmul
/// calls (checked above): fc1 without a bias, fc3 with one.
void testGroupedMatmulPair(std::mt19937 &rng, const TypeCase &type,
                           int64_t groupStride) {
  const int64_t G = 6, E = 3, R = groupStride ? G * groupStride : 40, K = 24,
                N = 20;
  std::vector<int32_t> counts = {5, 0, 8, 3, 7, 6};
  auto values = [&](size_t n, float scale) {
    std::vector<float> v = randomValues(n, rng, scale);
    return Buffer<char>(encode(type.code, v));
  };
  Buffer<char> dA = values(R * K, 1), dW1 = values(E * N * K, 0.2f),
               dW3 = values(E * N * K, 0.2f), dB3 = values(E * N, 1);
  auto fresh = [&] {
    return Buffer<char>(encode(type.code, std::vector<float>(R * N, 1.0f)));
  };
  Buffer<char> c1 = fresh(), c3 = fresh(), want1 = fresh(), want3 = fresh();
  moert_cuda_grouped_matmul(type.code, G, E, counts.data(), groupStride, R, K,
                            N, dA.ptr, dW1.ptr, nullptr, want1.ptr);
  moert_cuda_grouped_matmul(type.code, G, E, counts.data(), groupStride, R, K,
                            N, dA.ptr, dW3.ptr, dB3.ptr, want3.ptr);
  moert_cuda_grouped_matmul_pair(type.code, G, E, counts.data(), groupStride,
                                 R, K, N, dA.ptr, dW1.ptr, nullptr, c1.ptr,
                                 dW3.ptr, dB3.ptr, c3.ptr);
  float err = std::max(
      maxRelError(decode(type.code, c1.download()),
                  decode(type.code, want1.download())),
      maxRelError(decode(type.code, c3.download()),
                  decode(type.code, want3.download())));
  expect(err < std::max(type.tolerance, 1e-4f),
         std::string("grouped matmul pair ") + type.name +
             (groupStride ? " capacity" : " dropless") + " (max rel error " +
             std::to_string(err) + ")");
}

/// Every exchange within a group of one (no axes) hands its input back; a
/// scan of one is zeros; a ragged exchange zeroes the rows it does not fill.
void testExchangesOfOne(std::mt19937 &rng) {
  std::vector<float> x = randomValues(1000, rng), zeros(x.size(), 0);
  int64_t bytes = x.size() * sizeof(float);
  Buffer<float> in(x), out(x.size());
  auto fresh = [&] { out.upload(std::vector<float>(x.size(), -1)); };
  fresh();
  moert_cuda_all_to_all(in.ptr, out.ptr, bytes, 0);
  expect(out.download() == x, "all_to_all of one");
  fresh();
  moert_cuda_all_gather(in.ptr, out.ptr, bytes, 0);
  expect(out.download() == x, "all_gather of one");
  fresh();
  moert_cuda_all_reduce_sum(in.ptr, out.ptr, x.size(), MOERT_F32, 0);
  expect(out.download() == x, "all_reduce of one");
  fresh();
  moert_cuda_reduce_scatter_sum(in.ptr, out.ptr, x.size(), MOERT_F32, 0);
  expect(out.download() == x, "reduce_scatter of one");
  fresh();
  moert_cuda_broadcast(in.ptr, out.ptr, bytes, 0, 0);
  expect(out.download() == x, "broadcast of one");
  fresh();
  moert_cuda_exclusive_scan_sum(in.ptr, out.ptr, x.size(), MOERT_F32, 0);
  expect(out.download() == zeros, "exclusive scan of one");
  fresh();
  moert_cuda_send(in.ptr, bytes, 0, 0);
  moert_cuda_recv(out.ptr, bytes, 0, 0);
  expect(out.download() == x, "send and receive to itself");

  // 1000 floats as 100 rows of 10 in two groups of 30 and 20 rows: 50 rows
  // move, the other 50 of the output are zeroed.
  fresh();
  Buffer<int32_t> counts(std::vector<int32_t>{30, 20}), outCounts(2);
  moert_cuda_ragged_all_to_all(in.ptr, counts.ptr, out.ptr, outCounts.ptr,
                               10 * sizeof(float), 2, 100, 0);
  std::vector<float> ragged(x.begin(), x.begin() + 500);
  ragged.resize(x.size(), 0);
  expect(out.download() == ragged &&
             outCounts.download() == std::vector<int32_t>{30, 20},
         "ragged all_to_all of one");
}

} // namespace

/// The device-side layer statistics: two calls of layer 3 in one run, ids
/// with one unrouted (-1) and one past the experts, 7 dropped each time;
/// printStats prints them (the lit test checks the line).
void testLayerStats() {
  Buffer<int32_t> ids(std::vector<int32_t>{0, 1, 1, 2, 2, 2, -1, 5});
  Buffer<int64_t> dropped(std::vector<int64_t>{7});
  moert::beginRun();
  for (int call = 0; call < 2; ++call) {
    moert_cuda_layer_begin(3);
    moert_cuda_layer_tokens(3, ids.ptr, 8, 5, 0);
    moert_cuda_layer_dropped(3, dropped.ptr, 0);
    moert_cuda_layer_end(3);
  }
  cudaDeviceSynchronize();
  moert::endRun();
  moert::printStats();
}

int main(int argc, char **argv) {
  moert::init(argc, argv);
  moert_cuda_init();
  std::mt19937 rng(7);
  testGating(rng);
  testUnroutedGating();
  testGlobals(rng);
  for (const TypeCase &type : kTypes) {
    testRouter(rng, type);
    testCombine(rng, type);
  }
  for (const TypeCase &type : kTypes)
    for (int layout = 0; layout < 16; ++layout)
      testMatmul(rng, type, layout & 1, layout & 2, false, layout & 4,
                 layout & 8);
  for (const TypeCase &type : kTypes)
    testMatmul(rng, type, false, false, true, false, true);
  // Batches (attention's heads): one strided-batched cuBLAS call, A per
  // problem or one A for all, and the plain kernel's batch.
  for (const TypeCase &type : kTypes)
    for (bool repeatA : {false, true}) {
      testMatmul(rng, type, false, true, false, false, false, 3, repeatA);
      testMatmul(rng, type, true, false, false, true, true, 3, repeatA);
      testMatmul(rng, type, false, false, true, false, true, 3, repeatA);
    }
  for (const TypeCase &type : kTypes) {
    testDispatch(rng, type);
    for (bool withAfter : {false, true})
      for (bool choiceMajor : {false, true})
        testCapacityDispatch(rng, type, withAfter, choiceMajor);
  }
  // The grouped GEMMs both ways cuBLAS runs them: one grouped call, and
  // one GEMM per group (what large groups get).
  for (int32_t strategy : {MOERT_GEMM_GROUPED, MOERT_GEMM_SEPARATE}) {
    moert_cuda_set_gemm_strategy(strategy);
    for (const TypeCase &type : kTypes)
      for (int64_t capacity : {0, 40})
        testLayer(rng, type, capacity);
    for (const TypeCase &type : kTypes)
      for (int64_t groupStride : {0, 8})
        for (bool withBias : {false, true})
          testGroupedMatmul(rng, type, groupStride, withBias);
    for (const TypeCase &type : kTypes)
      for (int64_t groupStride : {0, 8})
        testGroupedMatmulPair(rng, type, groupStride);
  }
  moert_cuda_set_gemm_strategy(MOERT_GEMM_AUTO);
  testExchangesOfOne(rng);
  testLayerStats();
  std::printf("moert-cuda-test: %d of %d checks passed\n", checks - failures,
              checks);
  moert::finalize();
  return failures ? 1 : 0;
}
