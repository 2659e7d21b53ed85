// The --target=cuda lowering of an elementwise program: the loop nest becomes
// a kernel in a fatbin for each chip, buffers are host-shared and the host
// side is bare-pointer LLVM with moe_entry. Needs the CUDA toolkit's ptxas.
// REQUIRES: cuda
// RUN: moe-opt %s --moe-lower-to-gpu | FileCheck %s

// CHECK: llvm.func @main_graph(
// CHECK: llvm.call @mgpuMemAlloc
// CHECK: gpu.launch_func
// CHECK: gpu.binary @main_graph_kernel
// CHECK-SAME: #nvvm.target<chip = "sm_80", features = "+ptx80">
// CHECK-SAME: #nvvm.target<chip = "sm_90", features = "+ptx80">
// CHECK: llvm.func @moe_entry(
func.func @main_graph(%a: tensor<64x32xf32>, %b: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = tensor.empty() : tensor<64x32xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = math.exp %s : f32
    linalg.yield %t : f32
  } -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}
