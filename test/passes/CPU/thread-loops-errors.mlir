// RUN: moe-opt %s --moe-thread-loops --verify-diagnostics

// Threads would add the partial sums in an order of their own.
func.func @reduction(%a: memref<1024xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{a parallel loop with reductions}}
  %sum = scf.parallel (%i) = (%c0) to (%c1024) step (%c1) init (%zero) -> f32 {
    %x = memref.load %a[%i] : memref<1024xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}
