// RUN: moe-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(moe-gpu-stream-order))' | FileCheck %s

// Launches chain on one stream; a stream-ordered runtime call, an
// allocation and index arithmetic leave the chain pending; a free joins it
// (its own stream and wait go); the host load waits for everything, once;
// the return has nothing left to wait for.
// CHECK-LABEL: func.func @chain
// CHECK: %[[S:.*]] = gpu.wait async
// CHECK-NEXT: %[[T1:.*]] = gpu.launch_func async [%[[S]]] @kernels::@fill
// CHECK-NEXT: %[[T2:.*]] = gpu.launch_func async [%[[T1]]] @kernels::@fill
// CHECK-NEXT: call @moert_cuda_combine
// CHECK-NEXT: %[[B:.*]] = gpu.alloc host_shared
// CHECK-NEXT: arith.addi
// CHECK-NEXT: %[[F:.*]] = gpu.dealloc async [%[[T2]]] %[[B]]
// CHECK-NEXT: gpu.wait [%[[F]]]
// CHECK-NEXT: memref.load
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func private @moert_cuda_combine(memref<16xf32>)
  func.func @chain(%m: memref<16xf32>, %n: index) -> f32 {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    call @moert_cuda_combine(%m) : (memref<16xf32>) -> ()
    %b = gpu.alloc host_shared () : memref<16xf32>
    %i = arith.addi %n, %c1 : index
    %s = gpu.wait async
    %f = gpu.dealloc async [%s] %b : memref<16xf32>
    gpu.wait [%f]
    %v = memref.load %m[%i] : memref<16xf32>
    return %v : f32
  }
}

// -----

// Other calls wait first; a free with nothing pending keeps its stream.
// The function ends with its work done.
// CHECK-LABEL: func.func @host_calls
// CHECK: %[[T:.*]] = gpu.launch_func async
// CHECK-NEXT: gpu.wait [%[[T]]]
// CHECK-NEXT: call @host_work
// CHECK-NEXT: %[[S:.*]] = gpu.wait async
// CHECK-NEXT: %[[F:.*]] = gpu.dealloc async [%[[S]]]
// CHECK-NEXT: gpu.wait [%[[F]]]
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func private @host_work(memref<16xf32>)
  func.func @host_calls(%m: memref<16xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    call @host_work(%m) : (memref<16xf32>) -> ()
    %s = gpu.wait async
    %f = gpu.dealloc async [%s] %m : memref<16xf32>
    gpu.wait [%f]
    return
  }
}

// -----

// A loop waits for what came before it; its body chains on its own and
// waits before it yields.
// CHECK-LABEL: func.func @loop
// CHECK: %[[T:.*]] = gpu.launch_func async
// CHECK-NEXT: gpu.wait [%[[T]]]
// CHECK-NEXT: scf.for
// CHECK-NEXT: %[[S:.*]] = gpu.wait async
// CHECK-NEXT: %[[A:.*]] = gpu.launch_func async [%[[S]]]
// CHECK-NEXT: %[[B:.*]] = gpu.launch_func async [%[[A]]]
// CHECK-NEXT: gpu.wait [%[[B]]]
// CHECK-NEXT: }
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func @loop(%m: memref<16xf32>, %n: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    scf.for %i = %c0 to %n step %c1 {
      gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
      gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    }
    return
  }
}

// -----

// Async work from elsewhere (a block argument's token) is not the chain's:
// the host waits for the chain before it, and the op is left as it is.
// CHECK-LABEL: func.func @foreign
// CHECK: %[[T:.*]] = gpu.launch_func async
// CHECK-NEXT: gpu.wait [%[[T]]]
// CHECK-NEXT: gpu.wait [%arg1]
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func @foreign(%m: memref<16xf32>, %t: !gpu.async.token) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    gpu.wait [%t]
    return
  }
}

// -----

// A device allocation joins the chain as a free does (its own stream and
// wait go), and the kernel that uses it follows it on the stream.
// CHECK-LABEL: func.func @device_alloc
// CHECK: %[[T:.*]] = gpu.launch_func async
// CHECK-NEXT: %[[B:.*]], %[[A:.*]] = gpu.alloc async [%[[T]]] () : memref<16xf32>
// CHECK-NEXT: %[[U:.*]] = gpu.launch_func async [%[[A]]] {{.*}} args(%[[B]] : memref<16xf32>)
// CHECK-NEXT: gpu.wait [%[[U]]]
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func @device_alloc(%m: memref<16xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    %s = gpu.wait async
    %b, %t = gpu.alloc async [%s] () : memref<16xf32>
    gpu.wait [%t]
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%b : memref<16xf32>)
    return
  }
}

// -----

// The rank query touches no memory, and a loop of nothing but stream-ordered
// calls (an outer batch dim's matmuls) needs no wait either: the chain
// stays pending through both, and the host waits once, at the end.
// CHECK-LABEL: func.func @no_wait
// CHECK: %[[T:.*]] = gpu.launch_func async
// CHECK-NEXT: call @moert_rank
// CHECK-NEXT: scf.for
// CHECK-NEXT: call @moert_cuda_matmul
// CHECK-NEXT: }
// CHECK-NEXT: gpu.wait [%[[T]]]
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func private @moert_rank() -> i64
  func.func private @moert_cuda_matmul(index)
  func.func @no_wait(%m: memref<16xf32>, %n: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    %rank = call @moert_rank() : () -> i64
    scf.for %i = %c0 to %n step %c1 {
      func.call @moert_cuda_matmul(%i) : (index) -> ()
    }
    return
  }
}

// -----

// An op with regions whose own effects are not its body's (a linalg op on
// the host reads and writes its operands) waits, whatever its body holds.
// CHECK-LABEL: func.func @host_linalg
// CHECK: %[[T:.*]] = gpu.launch_func async
// CHECK-NEXT: gpu.wait [%[[T]]]
// CHECK-NEXT: linalg.generic
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%m: memref<16xf32>) kernel { gpu.return }
  }
  func.func @host_linalg(%m: memref<16xf32>, %n: memref<16xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        ins(%m : memref<16xf32>) outs(%n : memref<16xf32>) {
    ^bb0(%x: f32, %y: f32):
      linalg.yield %x : f32
    }
    return
  }
}
