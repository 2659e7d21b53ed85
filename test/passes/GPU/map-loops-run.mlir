// The loop nests moe-gpu-map-loops gives the GPU, run on the CPU: each
// outermost parallel loop collapsed and tiled into blocks of threads (here
// 4 and 3, which divide neither 35 elements nor 7 rows) still computes
// every element once. The mapping only annotates the loops, so the system
// mlir-opt (with the moe passes loaded) lowers them to sequential loops.
// RUN: mlir-opt %s --load-dialect-plugin=%moe_plugin --load-pass-plugin=%moe_plugin \
// RUN:   --pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries},func.func(convert-linalg-to-parallel-loops,moe-gpu-map-loops{block-size=4}))' \
// RUN: | FileCheck %s --check-prefix=MAPPED
// RUN: mlir-opt %s --load-dialect-plugin=%moe_plugin --load-pass-plugin=%moe_plugin \
// RUN:   --pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries},func.func(convert-linalg-to-parallel-loops,moe-gpu-map-loops{block-size=4}),convert-scf-to-cf,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-arith-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' \
// RUN: | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: mlir-opt %s --load-dialect-plugin=%moe_plugin --load-pass-plugin=%moe_plugin \
// RUN:   --pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries},func.func(convert-linalg-to-parallel-loops,moe-gpu-map-loops{block-size=3}),convert-scf-to-cf,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-arith-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' \
// RUN: | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// MAPPED-COUNT-4: mapping = [#gpu.loop_dim_map<processor = block_x

// The transpose of a [5, 7] matrix, doubled and added to 100: a [7, 5] loop
// nest collapsed into 35 elements (one computed twice would show twice the
// addition).
// CHECK:      [102,   116,   130,   144,   158]
// CHECK-NEXT: [104,   118,   132,   146,   160]
// CHECK-NEXT: [106,   120,   134,   148,   162]
// CHECK-NEXT: [108,   122,   136,   150,   164]
// CHECK-NEXT: [110,   124,   138,   152,   166]
// CHECK-NEXT: [112,   126,   140,   154,   168]
// CHECK-NEXT: [114,   128,   142,   156,   170]
// Its row sums: 7 rows in blocks, the reduction sequential in each thread.
// CHECK:      [650,  660,  670,  680,  690,  700,  710]

func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %a = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                             [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0],
                             [15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0],
                             [22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0],
                             [29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0]]> : tensor<5x7xf32>
  %hundred = arith.constant 100.0 : f32
  %e0 = tensor.empty() : tensor<7x5xf32>
  %e = linalg.fill ins(%hundred : f32) outs(%e0 : tensor<7x5xf32>) -> tensor<7x5xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<5x7xf32>) outs(%e : tensor<7x5xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    %z = arith.addf %o, %y : f32
    linalg.yield %z : f32
  } -> tensor<7x5xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<7xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<7xf32>) -> tensor<7xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<7x5xf32>) outs(%f : tensor<7xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %o : f32
    linalg.yield %y : f32
  } -> tensor<7xf32>
  %tu = tensor.cast %t : tensor<7x5xf32> to tensor<*xf32>
  call @printMemrefF32(%tu) : (tensor<*xf32>) -> ()
  %su = tensor.cast %s : tensor<7xf32> to tensor<*xf32>
  call @printMemrefF32(%su) : (tensor<*xf32>) -> ()
  return
}
