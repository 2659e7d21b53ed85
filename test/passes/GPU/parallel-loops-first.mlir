// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-parallel-loops-first))' | FileCheck %s

// A column sum (reduction over rows first) becomes parallel over columns
// first; the maps and linalg.index follow the loops.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @column_sum
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
// CHECK:   %[[ROW:.*]] = linalg.index 1
// CHECK:   arith.index_cast %[[ROW]]
func.func @column_sum(%m: memref<8x4xf32>, %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, e) -> (t, e)>, affine_map<(t, e) -> (e)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%m : memref<8x4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %row = linalg.index 0 : index
    %i = arith.index_cast %row : index to i32
    %f = arith.sitofp %i : i32 to f32
    %y = arith.mulf %x, %f : f32
    %r = arith.addf %acc, %y : f32
    linalg.yield %r : f32
  }
  return
}

// Parallel loops already first: left alone.
// CHECK-LABEL: func.func @row_sum
// CHECK: iterator_types = ["parallel", "reduction"]
func.func @row_sum(%m: memref<8x4xf32>, %s: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, e) -> (t, e)>, affine_map<(t, e) -> (t)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%m : memref<8x4xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  }
  return
}
