// RUN: moe-opt %s --moe-gpu-map-loops=block-size=128 --cse --split-input-file | FileCheck %s
// RUN: not moe-opt %s --moe-gpu-map-loops=block-size=2048 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: moe-gpu-map-loops: block-size must be in [1, 1024], got 2048

// A 2-D loop nest becomes one dimension of n * 300 iterations, the second
// loop the fastest, in blocks of 128 threads with a bounds check.
// CHECK-LABEL: func.func @copy
//      CHECK:    %[[N:.*]] = memref.dim
//      CHECK:    %[[C300:.*]] = arith.constant 300 : index
//      CHECK:    %[[ROWS:.*]] = arith.muli %{{.*}}, %[[N]]
//      CHECK:    %[[TOTAL:.*]] = arith.muli %[[ROWS]], %[[C300]]
//      CHECK:    %[[C128:.*]] = arith.constant 128 : index
//      CHECK:    %[[BS:.*]] = arith.muli %{{.*}}, %[[C128]]
//      CHECK:    scf.parallel (%[[BLOCK:.*]]) = (%{{.*}}) to (%[[TOTAL]]) step (%[[BS]])
//      CHECK:      scf.parallel (%[[THREAD:.*]]) = (%{{.*}}) to (%[[BS]])
//      CHECK:        %[[I:.*]] = arith.addi %[[THREAD]], %[[BLOCK]]
//      CHECK:        arith.cmpi ult, %{{.*}}, %[[TOTAL]]
//      CHECK:        scf.if
//  CHECK-DAG:          %[[COL:.*]] = arith.remsi %[[I]], %[[C300]]
//  CHECK-DAG:          %[[ROW:.*]] = arith.divsi %[[I]], %[[C300]]
//      CHECK:          memref.load %{{.*}}[%[[ROW]], %[[COL]]]
//      CHECK:      } {mapping = [#gpu.loop_dim_map<processor = thread_x
//      CHECK:    } {mapping = [#gpu.loop_dim_map<processor = block_x
func.func @copy(%a: memref<?x300xf32>, %b: memref<?x300xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c300 = arith.constant 300 : index
  %n = memref.dim %a, %c0 : memref<?x300xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c300) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<?x300xf32>
    memref.store %x, %b[%i, %j] : memref<?x300xf32>
  }
  return
}

// -----

// A 1-D loop is tiled as it is; a parallel loop inside a mapped one runs
// sequentially in its thread, and a loop already mapped is left alone.
// CHECK-LABEL: func.func @nested
//      CHECK:    scf.parallel
//      CHECK:      scf.parallel
//      CHECK:        scf.parallel
//      CHECK:        } {mapping = [#gpu.loop_dim_map<processor = sequential
//      CHECK:      } {mapping = [#gpu.loop_dim_map<processor = thread_x
//      CHECK:    } {mapping = [#gpu.loop_dim_map<processor = block_x
//      CHECK:    scf.parallel
//      CHECK:    } {mapping = [#gpu.loop_dim_map<processor = block_y
func.func @nested(%a: memref<1000x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c1000 = arith.constant 1000 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c1000) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      memref.store %zero, %a[%i, %j] : memref<1000x8xf32>
    }
  }
  scf.parallel (%i) = (%c0) to (%c1000) step (%c1) {
    memref.store %zero, %a[%i, %c0] : memref<1000x8xf32>
  } {mapping = [#gpu.loop_dim_map<processor = block_y, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}
