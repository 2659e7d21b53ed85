//===- DeviceMemory.cpp - Device memory for what only the GPU touches -----===//
//
// moe-managed-memory makes every buffer host-shared (CUDA managed memory),
// since before loops become kernels it is not known which code runs where.
// After kernel outlining it is: a buffer that host code never dereferences
// (its uses are kernel launches, moert_cuda_* calls, which take device
// pointers, and frees, possibly through views and raw pointers) gets device
// memory, allocated and freed in stream order. Managed memory costs page
// migrations whenever host and device take turns, and a GPU asked for more
// of it than it has free may stall rather than fail.
//
// Globals (weights, constants) are reached through copies the runtime makes
// on first use (moe-device-globals). Those that host code never reads are
// listed in the module's `moe.device_globals`, so that their copies are
// device memory too.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUDEVICEMEMORYPASS
#include "passes/Passes.h.inc"

namespace {

/// The moert_cuda_* functions that compiled code calls, with their
/// parameters that are host pointers (moert_cuda.h names them `host...`);
/// their other pointers are device pointers. A function not listed counts
/// as reading its pointers on the host, so that a new runtime call cannot
/// be handed device memory by mistake.
struct RuntimeFunction {
  StringLiteral name;
  std::initializer_list<unsigned> hostParameters;
};
constexpr RuntimeFunction kRuntimeFunctions[] = {
    {"moert_cuda_matmul", {}},
    {"moert_cuda_router", {}},
    {"moert_cuda_dispatch", {}},
    {"moert_cuda_dispatch_capacity", {}},
    {"moert_cuda_read_counts", {2}},
    {"moert_cuda_grouped_matmul", {3}},
    {"moert_cuda_grouped_matmul_pair", {3}},
    {"moert_cuda_combine", {}},
    {"moert_cuda_layer_tokens", {}},
    {"moert_cuda_layer_dropped", {}},
    {"moert_cuda_all_gather", {}},
    {"moert_cuda_all_reduce_sum", {}},
    {"moert_cuda_reduce_scatter_sum", {}},
    {"moert_cuda_all_to_all", {}},
    {"moert_cuda_ragged_all_to_all", {}},
    {"moert_cuda_exclusive_scan_sum", {}},
    {"moert_cuda_send", {}},
    {"moert_cuda_recv", {}},
    {"moert_cuda_broadcast", {}}};

/// Whether the call reads its operand `position` only on the device.
bool takesDevicePointer(func::CallOp call, unsigned position) {
  for (const RuntimeFunction &function : kRuntimeFunctions)
    if (function.name == call.getCallee())
      return !llvm::is_contained(function.hostParameters, position);
  return false;
}

/// Whether only GPU code may dereference `root`: every use, through views,
/// the base buffer and the raw address taken from it, is a kernel launch,
/// device code, a moert_cuda_* call that takes device pointers, a free, or
/// reads no memory (sizes, address comparisons). Anything else (a host
/// load or store, another call, a buffer that escapes through a region or a
/// return) may touch it on the host.
bool onlyDeviceUses(Value root) {
  SmallVector<Value> worklist = {root};
  llvm::SmallPtrSet<Value, 8> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (user->getParentOfType<gpu::LaunchOp>() ||
          isa<gpu::LaunchFuncOp, gpu::DeallocOp, gpu::MemcpyOp, gpu::MemsetOp,
              memref::DimOp, arith::CmpIOp, LLVM::ICmpOp>(user))
        continue;
      if (auto call = dyn_cast<func::CallOp>(user)) {
        if (!takesDevicePointer(call, use.getOperandNumber()))
          return false;
        continue;
      }
      if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(user)) {
        worklist.push_back(metadata.getBaseBuffer());
        continue;
      }
      if (auto view = dyn_cast<ViewLikeOpInterface>(user);
          view && view.getViewSource() == value) {
        worklist.push_back(view.getViewDest());
        continue;
      }
      // The address as an integer or pointer, and arithmetic on it.
      if (isa<memref::ExtractAlignedPointerAsIndexOp, arith::IndexCastOp,
              arith::IndexCastUIOp, arith::AddIOp, LLVM::IntToPtrOp,
              LLVM::PtrToIntOp, LLVM::GEPOp>(user)) {
        worklist.append(user->result_begin(), user->result_end());
        continue;
      }
      return false;
    }
  }
  return true;
}

/// `gpu.alloc host_shared` as device memory, allocated on a stream and
/// waited for at once (moe-gpu-stream-order chains it instead): gpu-to-llvm
/// lowers a device allocation only in its asynchronous form.
void allocateOnDevice(gpu::AllocOp alloc) {
  OpBuilder b(alloc);
  Location loc = alloc.getLoc();
  Type token = b.getType<gpu::AsyncTokenType>();
  Value stream =
      gpu::WaitOp::create(b, loc, token, ValueRange()).getAsyncToken();
  auto device = gpu::AllocOp::create(
      b, loc, alloc.getType(), token, stream, alloc.getDynamicSizes(),
      alloc.getSymbolOperands(), /*hostShared=*/false);
  gpu::WaitOp::create(b, loc, Type(), device.getAsyncToken());
  alloc.getMemref().replaceAllUsesWith(device.getMemref());
  alloc.erase();
}

struct MoEGPUDeviceMemoryPass
    : public impl::MoEGPUDeviceMemoryPassBase<MoEGPUDeviceMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::AllocOp> allocs;
    // Every host function's reads of each global: the global may live on
    // the device only if none of them dereferences it on the host.
    llvm::MapVector<StringAttr, bool> globals;
    for (auto func : module.getOps<func::FuncOp>()) {
      func.walk([&](Operation *op) {
        if (auto alloc = dyn_cast<gpu::AllocOp>(op);
            alloc && alloc.getHostShared() && !alloc.getAsyncToken() &&
            onlyDeviceUses(alloc.getMemref()))
          allocs.push_back(alloc);
        if (auto get = dyn_cast<memref::GetGlobalOp>(op)) {
          auto [it, inserted] =
              globals.try_emplace(get.getNameAttr().getAttr(), true);
          it->second &= onlyDeviceUses(get.getResult());
        }
      });
    }
    for (gpu::AllocOp alloc : allocs)
      allocateOnDevice(alloc);

    SmallVector<Attribute> deviceOnly;
    for (auto [name, device] : globals)
      if (device)
        deviceOnly.push_back(FlatSymbolRefAttr::get(name));
    if (!deviceOnly.empty())
      module->setAttr(kDeviceGlobalsAttrName,
                      ArrayAttr::get(&getContext(), deviceOnly));
  }
};

} // namespace
} // namespace mlir::moe
