//===- Device.cpp - Device start, errors and the mgpu* functions ----------===//
//
// Everything goes through the CUDA runtime API, linked statically: it loads
// the driver itself, so a machine without one gets cudaErrorInsufficientDriver
// or cudaErrorNoDevice here, and a clear message, instead of a loader error.
// Modules that MLIR's GPU lowering embeds are loaded with cudaLibraryLoadData;
// their kernels (cudaKernel_t) launch through cudaLaunchKernel.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "../BlockCache.h"

#include "moert/moert_cuda.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

using namespace moert;
using namespace moert::cuda;

/// The process's index among the ranks of its node, as the launcher says.
static int localRank() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                          "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char *value = std::getenv(var))
      return std::atoi(value);
  return worldRank();
}

Device &cuda::device() {
  static Device &dev = *new Device([] {
    Device d;
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaErrorInsufficientDriver)
      detail::fail("the CUDA driver is missing or older than this build's "
                   "CUDA runtime (",
                   CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10,
                   "); code compiled with --target=cuda needs an NVIDIA GPU "
                   "and its driver");
    if (status == cudaErrorNoDevice || (status == cudaSuccess && count == 0))
      detail::fail("no CUDA device found; code compiled with --target=cuda "
                   "runs on NVIDIA GPUs (compile with --target=cpu to run "
                   "here)");
    check(status, "cudaGetDeviceCount");
    d.index = localRank() % count;
    check(cudaSetDevice(d.index), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    // Stream-ordered allocations freed by one call are kept in the pool for
    // the next, not returned to the driver at every synchronization.
    // (Out of memory, releaseCachedMemory gives them back.)
    check(cudaDeviceGetDefaultMemPool(&d.pool, d.index),
          "cudaDeviceGetDefaultMemPool");
    uint64_t keepAll = UINT64_MAX;
    check(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold,
                                  &keepAll),
          "cudaMemPoolSetAttribute");
    check(cublasCreate(&d.blas), "cublasCreate");
    check(cublasSetStream(d.blas, d.stream), "cublasSetStream");
    return d;
  }());
  return dev;
}

cudaStream_t cuda::streamOr(void *stream) {
  return stream ? static_cast<cudaStream_t>(stream) : device().stream;
}

size_t cuda::elementBytes(int32_t dtype, const char *op) {
  switch (dtype) {
  case MOERT_F32:
    return 4;
  case MOERT_F16:
  case MOERT_BF16:
    return 2;
  }
  detail::fail(op, ": unknown element type code ", dtype);
}

cudaDataType_t cuda::blasType(int32_t dtype) {
  switch (dtype) {
  case MOERT_F16:
    return CUDA_R_16F;
  case MOERT_BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

void moert_cuda_init() { device(); }

void *moert_cuda_stream() { return device().stream; }

//===----------------------------------------------------------------------===//
// mgpu*: what gpu-to-llvm emits
//===----------------------------------------------------------------------===//

// Generated kernels, cuBLAS calls and exchanges all run on the runtime's
// stream, in program order; a stream per launch would cost a create and a
// destroy each and order nothing better.
void *mgpuStreamCreate() { return device().stream; }

void mgpuStreamDestroy(void *stream) {
  if (stream != device().stream)
    check(cudaStreamDestroy(static_cast<cudaStream_t>(stream)),
          "cudaStreamDestroy");
}

void mgpuStreamSynchronize(void *stream) {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
        "cudaStreamSynchronize");
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                            static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
}

void *mgpuEventCreate() {
  device();
  cudaEvent_t event;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
        "cudaEventCreate");
  return event;
}

void mgpuEventDestroy(void *event) {
  check(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
}

void mgpuEventSynchronize(void *event) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)),
        "cudaEventSynchronize");
}

void mgpuEventRecord(void *event, void *stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event),
                        static_cast<cudaStream_t>(stream)),
        "cudaEventRecord");
}

/// Moves managed pages to the device ahead of the kernels that touch them:
/// a hint, which devices without concurrent managed access refuse.
static void prefetchToDevice(void *ptr, size_t bytes) {
  Device &dev = device();
  cudaMemLocation location{cudaMemLocationTypeDevice, dev.index};
  if (cudaMemPrefetchAsync(ptr, bytes, location, 0, dev.stream) != cudaSuccess)
    cudaGetLastError();
}

/// Managed memory of `bytes` on the device, or null when the GPU has less
/// free: managed memory may exceed the device's, and a GPU asked for more
/// than it has free can stall instead of failing.
static void *tryManagedAlloc(size_t bytes) {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  if (bytes > free)
    return nullptr;
  void *ptr = nullptr;
  check(cudaMallocManaged(&ptr, bytes), "cudaMallocManaged");
  return ptr;
}

/// Gives the stream-ordered pool's free blocks back to the driver, for
/// allocations the pool does not serve (managed memory, cudaMalloc, NCCL
/// and cuBLAS workspaces) or that its free blocks are too small for.
static void trimPool() {
  Device &dev = device();
  // Frees still queued on the stream release their blocks first.
  check(cudaStreamSynchronize(dev.stream), "cudaStreamSynchronize");
  check(cudaMemPoolTrimTo(dev.pool, 0), "cudaMemPoolTrimTo");
}

/// The program's managed buffers, kept across calls (BlockCache.h): a new
/// one costs a device synchronization to allocate and to free. They are
/// not prefetched: host code touches them (moe-gpu-device-memory gives the
/// others device memory), often first (moe-run's inputs). Out of memory,
/// the cache releases its own free blocks and tries again.
static auto &managedBuffers() {
  auto release = [](void *block) { check(cudaFree(block), "cudaFree"); };
  static auto *blocks =
      new BlockCache<decltype(&tryManagedAlloc), decltype(release)>(
          256, &tryManagedAlloc, release);
  return *blocks;
}

void cuda::releaseCachedMemory() {
  managedBuffers().trim();
  trimPool();
}

/// Managed memory of `bytes`, after releaseCachedMemory if the GPU has too
/// little free; null if it still has.
static void *managedAlloc(size_t bytes) {
  void *ptr = tryManagedAlloc(bytes);
  if (!ptr) {
    releaseCachedMemory();
    ptr = tryManagedAlloc(bytes);
  }
  return ptr;
}

[[noreturn]] static void outOfMemory(uint64_t bytes, const char *kind,
                                     const char *what) {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  detail::fail(what, ": ", bytes, " bytes of ", kind, " memory asked for, "
               "but the GPU has ", free, " of ", total, " bytes free");
}

/// `allocate()`'s status, retried once after releaseCachedMemory when it
/// is out of memory.
template <typename AllocateFn>
static cudaError_t withRetry(AllocateFn allocate) {
  cudaError_t status = allocate();
  if (status != cudaErrorMemoryAllocation)
    return status;
  cudaGetLastError();
  releaseCachedMemory();
  return allocate();
}

void *cuda::deviceAlloc(size_t bytes, cudaStream_t stream) {
  void *ptr = nullptr;
  check(withRetry([&] { return cudaMallocAsync(&ptr, bytes, stream); }),
        "cudaMallocAsync");
  return ptr;
}

void *mgpuMemAlloc(uint64_t bytes, void *stream, bool isHostShared) {
  device();
  void *ptr = nullptr;
  if (bytes == 0)
    return ptr;
  if (isHostShared) {
    // Then the pool's free blocks go too.
    if (!(ptr = managedBuffers().take(bytes))) {
      trimPool();
      ptr = managedBuffers().take(bytes);
    }
    if (!ptr)
      outOfMemory(bytes, "managed", "a buffer of the program");
  } else {
    ptr = deviceAlloc(bytes, streamOr(stream));
  }
  return ptr;
}

void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr || managedBuffers().give(ptr))
    return;
  cudaPointerAttributes attributes;
  check(cudaPointerGetAttributes(&attributes, ptr), "cudaPointerGetAttributes");
  if (attributes.type == cudaMemoryTypeManaged)
    check(cudaFree(ptr), "cudaFree");
  else
    check(cudaFreeAsync(ptr, streamOr(stream)), "cudaFreeAsync");
}

/// The device copies of the globals, by host address. Never destroyed, as
/// the other tables here: the bundle's destructors run at exit after the
/// program's static objects are gone, and must still find them.
static std::unordered_map<const void *, void *> &globalCopies() {
  static auto *copies = new std::unordered_map<const void *, void *>();
  return *copies;
}

/// The copy of the global at `host`, made by `copy` on the first call for
/// that address; later calls find it by the address.
template <typename CopyFn>
static void *globalCopy(const void *host, int64_t bytes, CopyFn copy) {
  auto [it, inserted] = globalCopies().try_emplace(host, nullptr);
  if (!inserted)
    return it->second;
  if (bytes <= 0)
    return it->second = const_cast<void *>(host);
  device();
  return it->second = copy(static_cast<size_t>(bytes));
}

void *moert::cuda::globalCopyOf(const void *host) {
  auto it = globalCopies().find(host);
  return it == globalCopies().end() ? nullptr : it->second;
}

void *moert_cuda_global(const void *host, int64_t bytes) {
  return globalCopy(host, bytes, [host](size_t size) {
    void *copy = managedAlloc(size);
    if (!copy)
      outOfMemory(size, "managed", "a weight or constant of the program");
    std::memcpy(copy, host, size);
    prefetchToDevice(copy, size);
    return copy;
  });
}

void *moert_cuda_device_global(const void *host, int64_t bytes) {
  return globalCopy(host, bytes, [host](size_t size) {
    Device &dev = device();
    void *copy = nullptr;
    cudaError_t status = withRetry([&] { return cudaMalloc(&copy, size); });
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      outOfMemory(size, "device", "a weight or constant of the program");
    }
    check(status, "cudaMalloc");
    // Pageable: the copy has read the host bytes when it returns, and the
    // stream orders it before every use.
    check(cudaMemcpyAsync(copy, host, size, cudaMemcpyHostToDevice,
                          dev.stream),
          "cudaMemcpyAsync");
    return copy;
  });
}

void moert_cuda_update_global(const void *host, int64_t bytes) {
  auto it = globalCopies().find(host);
  if (it == globalCopies().end() || it->second == host || bytes <= 0)
    return;
  // Ordered on the stream before the next call's kernels read it.
  check(cudaMemcpyAsync(it->second, host, static_cast<size_t>(bytes),
                        cudaMemcpyDefault, device().stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(device().stream), "cudaStreamSynchronize");
}

void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, streamOr(stream)),
        "cudaMemcpyAsync");
}

void *mgpuModuleLoad(void *data, size_t /*bytes*/) {
  device();
  cudaLibrary_t library;
  check(cudaLibraryLoadData(&library, data, nullptr, nullptr, 0, nullptr,
                            nullptr, 0),
        "cudaLibraryLoadData (the bundle's GPU code; was it built for this "
        "GPU's architecture?)");
  return library;
}

void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  return mgpuModuleLoad(data, 0);
}

/// The kernels looked up so far, by module and name: generated code looks
/// a kernel up at every launch, with its name's constant.
static std::map<std::pair<void *, const char *>, cudaKernel_t> &kernels() {
  static auto *found =
      new std::map<std::pair<void *, const char *>, cudaKernel_t>();
  return *found;
}

void mgpuModuleUnload(void *module) {
  auto &found = kernels();
  for (auto it = found.begin(); it != found.end();)
    it = it->first.first == module ? found.erase(it) : std::next(it);
  // The bundle's destructors call this at exit, when the CUDA runtime may
  // be shutting down already (cudaErrorCudartUnloading); the driver frees
  // the module with its context in any case.
  if (module && cudaLibraryUnload(static_cast<cudaLibrary_t>(module)) !=
                    cudaSuccess)
    cudaGetLastError();
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  if (!module)
    detail::fail("the bundle's GPU code was not loaded (its library's "
                 "constructors did not run) when kernel '",
                 name, "' was launched");
  auto [it, inserted] = kernels().try_emplace({module, name}, nullptr);
  if (!inserted)
    return it->second;
  cudaError_t status = cudaLibraryGetKernel(
      &it->second, static_cast<cudaLibrary_t>(module), name);
  if (status == cudaErrorSymbolNotFound)
    detail::fail("the bundle's GPU code has no kernel '", name, "'");
  check(status, "cudaLibraryGetKernel (was the bundle built for this GPU's "
                "architecture?)");
  return it->second;
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void ** /*extra*/, size_t /*count*/) {
  // A loop nest with an empty dimension launches nothing.
  if (gridX == 0 || gridY == 0 || gridZ == 0 || blockX == 0 || blockY == 0 ||
      blockZ == 0)
    return;
  for (intptr_t size : {gridX, gridY, gridZ, blockX, blockY, blockZ})
    if (size < 0 || size > UINT32_MAX)
      detail::fail("a kernel launch of ", gridX, "x", gridY, "x", gridZ,
                   " blocks of ", blockX, "x", blockY, "x", blockZ,
                   " threads is beyond CUDA's limits");
  dim3 grid(gridX, gridY, gridZ), block(blockX, blockY, blockZ);
  check(cudaLaunchKernel(function, grid, block, params, sharedBytes,
                         streamOr(stream)),
        "cudaLaunchKernel");
}

void mgpuSetDefaultDevice(int32_t index) {
  // The runtime's stream and handles live on the rank's device.
  if (index != device().index)
    detail::fail("the program asks for GPU ", index, ", but this rank runs "
                 "on GPU ", device().index, " (its local rank modulo the "
                 "GPU count)");
}
