// RUN: moe-opt %s --moe-emit-entry=function=forward --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: llvm.func @moe_entry(%arg0: !llvm.ptr)
// CHECK: %[[P0:.*]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[A0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[A1:.*]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @forward(%[[A0]], %[[A1]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.return
llvm.func @forward(%in: !llvm.ptr, %out: !llvm.ptr) {
  llvm.return
}

// -----

// expected-error @+1 {{must take only pointers and return nothing}}
llvm.func @forward(%in: !llvm.ptr) -> i32 {
  %0 = llvm.mlir.constant(0 : i32) : i32
  llvm.return %0 : i32
}
