// RUN: moe-opt %s --moe-copies --split-input-file | FileCheck %s

// A gradient summed in a loop into a buffer of its own, then copied into the
// output argument: summed in the output argument.
// CHECK-LABEL: func.func @result_out_of_loop
// CHECK-SAME: %{{[a-z0-9]+}}: memref<8x4xf32>, %[[OUT:[a-z0-9]+]]: memref<8x4xf32>
// CHECK-NOT: memref.alloc
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : memref<8x4xf32>)
// CHECK: scf.for
// CHECK: memref.subview %[[OUT]]
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @result_out_of_loop(%x: memref<8x4xf32>, %out: memref<8x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() {alignment = 64 : i64} : memref<8x4xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<8x4xf32>)
  scf.for %i = %c0 to %c8 step %c1 {
    %row = memref.subview %acc[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<4xf32, strided<[1], offset: ?>>
    %in = memref.subview %x[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.add ins(%row, %in : memref<4xf32, strided<[1], offset: ?>>, memref<4xf32, strided<[1], offset: ?>>) outs(%row : memref<4xf32, strided<[1], offset: ?>>)
  }
  memref.copy %acc, %out : memref<8x4xf32> to memref<8x4xf32>
  memref.dealloc %acc : memref<8x4xf32>
  return
}

// -----

// The buffer read after the copy (its pointer passed on, used later), or an
// argument also read: the copy stays.
// CHECK-LABEL: func.func @used_after
// CHECK: memref.alloc
// CHECK: memref.copy
// CHECK-LABEL: func.func @argument_read
// CHECK: memref.alloc
// CHECK: memref.copy
func.func private @consume(index)
func.func @used_after(%out: memref<4xf32>) {
  %zero = arith.constant 1.0 : f32
  %buf = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%buf : memref<4xf32>)
  %p = memref.extract_aligned_pointer_as_index %buf : memref<4xf32> -> index
  memref.copy %buf, %out : memref<4xf32> to memref<4xf32>
  func.call @consume(%p) : (index) -> ()
  memref.dealloc %buf : memref<4xf32>
  return
}
func.func @argument_read(%out: memref<4xf32>, %sum: memref<f32>) {
  %zero = arith.constant 1.0 : f32
  %buf = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%buf : memref<4xf32>)
  linalg.reduce ins(%out : memref<4xf32>) outs(%sum : memref<f32>) dimensions = [0]
    (%a: f32, %b: f32) { %s = arith.addf %a, %b : f32
      linalg.yield %s : f32 }
  memref.copy %buf, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %buf : memref<4xf32>
  return
}

// -----

// A copy of a zero constant: a fill; the constant goes. One of ones too.
// CHECK-NOT: memref.global "private" constant @__constant_4x4xf32
// CHECK-LABEL: func.func @zeros
// CHECK-DAG: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[O:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.fill ins(%[[Z]] : f32) outs(%{{.*}} : memref<4x4xf32>)
// CHECK: linalg.fill ins(%[[O]] : f32)
// CHECK-NOT: memref.get_global
memref.global "private" constant @__constant_4x4xf32 : memref<4x4xf32> = dense<0.0>
memref.global "private" constant @ones : memref<2xf32> = dense<1.0>
func.func @zeros(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<2xf32>) {
  %g = memref.get_global @__constant_4x4xf32 : memref<4x4xf32>
  %buf = memref.alloc() : memref<4x4xf32>
  memref.copy %g, %buf : memref<4x4xf32> to memref<4x4xf32>
  linalg.add ins(%buf, %a : memref<4x4xf32>, memref<4x4xf32>) outs(%b : memref<4x4xf32>)
  memref.dealloc %buf : memref<4x4xf32>
  %h = memref.get_global @ones : memref<2xf32>
  %buf2 = memref.alloc() : memref<2xf32>
  memref.copy %h, %buf2 : memref<2xf32> to memref<2xf32>
  linalg.add ins(%buf2, %buf2 : memref<2xf32>, memref<2xf32>) outs(%c : memref<2xf32>)
  memref.dealloc %buf2 : memref<2xf32>
  return
}

// -----

// A constant of several values is copied.
// CHECK-LABEL: func.func @not_splat
// CHECK: memref.copy
memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
func.func @not_splat(%a: memref<2xf32>) {
  %g = memref.get_global @table : memref<2xf32>
  %buf = memref.alloc() : memref<2xf32>
  memref.copy %g, %buf : memref<2xf32> to memref<2xf32>
  linalg.add ins(%buf, %buf : memref<2xf32>, memref<2xf32>) outs(%a : memref<2xf32>)
  memref.dealloc %buf : memref<2xf32>
  return
}

// -----

// The copies below are into arguments, but of arguments (no buffer of the
// function's own): a half of a wider buffer's columns, and rotary embedding's halves: loops.
// CHECK-LABEL: func.func @into_columns
// CHECK: linalg.copy ins(%arg0 : memref<?x896xf32>) outs(%arg1 : memref<?x896xf32, strided<[1792, 1], offset: 896>>)
// CHECK-NOT: memref.copy
func.func @into_columns(%a: memref<?x896xf32>, %b: memref<?x896xf32, strided<[1792, 1], offset: 896>>) {
  memref.copy %a, %b : memref<?x896xf32> to memref<?x896xf32, strided<[1792, 1], offset: 896>>
  return
}

// CHECK-LABEL: func.func @between_slices
// CHECK: linalg.copy
func.func @between_slices(%a: memref<4x2x128x32xf32, strided<[16384, 8192, 64, 1]>>, %b: memref<4x2x128x32xf32, strided<[16384, 8192, 64, 1], offset: 32>>) {
  memref.copy %a, %b : memref<4x2x128x32xf32, strided<[16384, 8192, 64, 1]>> to memref<4x2x128x32xf32, strided<[16384, 8192, 64, 1], offset: 32>>
  return
}

// -----

// Contiguous on both sides (dynamic shapes with the identity layout, or a
// static slice that is contiguous): one memcpy, left alone.
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %arg0, %arg1 : memref<?x256xf32> to memref<?x256xf32>
// CHECK: memref.copy %arg2, %arg3 : memref<2x256xf32, strided<[256, 1], offset: 512>> to memref<2x256xf32>
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<?x256xf32>, %b: memref<?x256xf32>, %c: memref<2x256xf32, strided<[256, 1], offset: 512>>, %d: memref<2x256xf32>) {
  memref.copy %a, %b : memref<?x256xf32> to memref<?x256xf32>
  memref.copy %c, %d : memref<2x256xf32, strided<[256, 1], offset: 512>> to memref<2x256xf32>
  return
}

// -----

// A scalar stays a copy.
// CHECK-LABEL: func.func @scalar
// CHECK: memref.copy
func.func @scalar(%a: memref<f32, strided<[], offset: 3>>, %b: memref<f32>) {
  memref.copy %a, %b : memref<f32, strided<[], offset: 3>> to memref<f32>
  return
}
