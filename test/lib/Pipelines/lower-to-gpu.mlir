// The --target=cuda lowering: an elementwise loop nest becomes a kernel in
// one fatbin for every chip, launched in blocks of 256 threads over the
// collapsed 64 x 32 elements; the matmul becomes a cuBLAS call that writes
// the result in the caller's output buffer (no copy kernel after it);
// buffers that only the GPU touches are device memory and the host side is
// bare-pointer LLVM with moe_entry. Needs the CUDA toolkit's ptxas and
// fatbinary.
// REQUIRES: cuda
// RUN: moe-opt %s --moe-lower-to-gpu | FileCheck %s
// The kernels take what the host passes: bare pointers.
// RUN: moe-opt %s --moe-lower-to-gpu --mlir-print-ir-before=moe-gpu-fatbin 2>&1 >/dev/null | FileCheck %s --check-prefix=KERNEL
// The same program in bf16 and f16: the kernel computes in that type, the
// matmul goes to cuBLAS with the type's code (5 and 4).
// RUN: sed 's/f32/bf16/g' %s | moe-opt --moe-lower-to-gpu | FileCheck %s --check-prefix=BF16
// RUN: sed 's/f32/f16/g' %s | moe-opt --moe-lower-to-gpu | FileCheck %s --check-prefix=F16
// Without stream order, each launch waits for the device (at translation)
// and so does each free.
// RUN: moe-opt %s --moe-lower-to-gpu=stream-order=0 | FileCheck %s --check-prefix=SYNC

// CHECK: llvm.func internal @main_graph(
// CHECK-DAG: %[[THREADS:.*]] = llvm.mlir.constant(256 : index) : i64
// CHECK-DAG: %[[BLOCKS:.*]] = llvm.mlir.constant(8 : index) : i64
// Allocations, kernels, the cuBLAS call and the frees run in order on the
// runtime's stream; the host waits for it once, before it returns. The
// buffers are device memory (host-shared: false).
// CHECK: %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK: %[[DEVICE:.*]] = llvm.mlir.constant(0 : i8) : i8
// CHECK-NEXT: llvm.call @mgpuMemAlloc(%{{.*}}, %[[STREAM]], %[[DEVICE]])
// Each buffer goes to the kernel as one pointer, after six sizes.
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @main_graph_kernel::@main_graph_kernel blocks in (%[[BLOCKS]], %[[ONE:.*]], %[[ONE]]) threads in (%[[THREADS]], %[[ONE]], %[[ONE]]) : i64 args({{(%[0-9]+ : i64, ){6}(%[0-9]+ : !llvm.ptr, ){2}%[0-9]+ : !llvm.ptr}})
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: llvm.call @moert_cuda_matmul(
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: llvm.call @mgpuMemFree({{.*}}, %[[STREAM]])
// CHECK: llvm.call @mgpuStreamSynchronize(%[[STREAM]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[STREAM]])
// CHECK-NEXT: llvm.return
// One fatbin object per module, with a cubin for each chip and the oldest
// chip's PTX.
// CHECK: gpu.binary @main_graph_kernel  [#gpu.object<#nvvm.target<chip = "sm_80", features = "+ptx80">
// CHECK-SAME: images = ["sm_80", "sm_90", "compute_80"]}, "P\EDU\BA
// CHECK-NOT: chip = "sm_90"
// CHECK: llvm.func @moe_entry(

// KERNEL: gpu.binary @main_graph_kernel
// KERNEL-SAME: #nvvm.target<chip = "sm_80", features = "+ptx80">
// KERNEL-SAME: .target sm_80
// KERNEL-SAME: .param .u64 main_graph_kernel_param_5,\0A\09.param .u64 .ptr .align 1 main_graph_kernel_param_6,\0A\09.param .u64 .ptr .align 1 main_graph_kernel_param_7,\0A\09.param .u64 .ptr .align 1 main_graph_kernel_param_8\0A)
// KERNEL-SAME: #nvvm.target<chip = "sm_90", features = "+ptx80">
// KERNEL-SAME: .target sm_90

// SYNC: llvm.func internal @main_graph(
// SYNC: gpu.launch_func {{ *}}@main_graph_kernel::@main_graph_kernel
// SYNC: llvm.call @moert_cuda_matmul(
// SYNC-NOT: gpu.launch_func
// SYNC: llvm.call @mgpuMemFree(
// SYNC-NEXT: llvm.call @mgpuStreamSynchronize(
// SYNC: llvm.return

// BF16: llvm.func internal @main_graph(
// BF16: %[[CODE:.*]] = llvm.mlir.constant(5 : i32) : i32
// BF16: gpu.launch_func
// BF16: llvm.call @moert_cuda_matmul(%[[CODE]],
// BF16: gpu.binary @main_graph_kernel
// F16: llvm.func internal @main_graph(
// F16: %[[CODE:.*]] = llvm.mlir.constant(4 : i32) : i32
// F16: gpu.launch_func
// F16: llvm.call @moert_cuda_matmul(%[[CODE]],
// F16: gpu.binary @main_graph_kernel
func.func @main_graph(%a: tensor<64x32xf32>, %b: tensor<64x32xf32>, %w: tensor<32x16xf32>) -> tensor<64x16xf32> {
  %e = tensor.empty() : tensor<64x32xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = math.exp %s : f32
    linalg.yield %t : f32
  } -> tensor<64x32xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<64x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x16xf32>) -> tensor<64x16xf32>
  %1 = linalg.matmul ins(%0, %w : tensor<64x32xf32>, tensor<32x16xf32>) outs(%f : tensor<64x16xf32>) -> tensor<64x16xf32>
  return %1 : tensor<64x16xf32>
}
