// Needs the CUDA toolkit's ptxas and fatbinary.
// REQUIRES: cuda
// RUN: moe-opt %s --split-input-file --moe-gpu-fatbin --verify-diagnostics | FileCheck %s

// The PTX of each chip becomes one fatbin (its magic first): a cubin per
// chip and the PTX of the oldest plain chip (sm_90a code runs on sm_90a
// alone), on the first object's target.
// CHECK-LABEL: gpu.binary @kernels
// CHECK-SAME: [#gpu.object<#nvvm.target<chip = "sm_80">, properties = {O = 2 : i32, images = ["sm_80", "sm_90a", "sm_90", "compute_80"]}, "P\EDU\BA
// CHECK-NOT: #gpu.object
gpu.binary @kernels [
  #gpu.object<#nvvm.target<chip = "sm_80">, properties = {O = 2 : i32}, assembly = ".version 8.0\0A.target sm_80\0A.address_size 64\0A.visible .entry k()\0A{\0A\09ret;\0A}\0A">,
  #gpu.object<#nvvm.target<chip = "sm_90a">, properties = {O = 2 : i32}, assembly = ".version 8.0\0A.target sm_90a\0A.address_size 64\0A.visible .entry k()\0A{\0A\09ret;\0A}\0A">,
  #gpu.object<#nvvm.target<chip = "sm_90">, properties = {O = 2 : i32}, assembly = ".version 8.0\0A.target sm_90\0A.address_size 64\0A.visible .entry k()\0A{\0A\09ret;\0A}\0A">
]

// -----

// Objects that are not PTX are not the pass's to merge.
// expected-error @+1 {{moe-gpu-fatbin: expected PTX objects of NVVM targets (gpu-module-to-binary format=isa)}}
gpu.binary @cubins [
  #gpu.object<#nvvm.target<chip = "sm_80">, bin = "\00">
]

// -----

// A tool's failure is an error that carries its output.
// expected-error @+1 {{moe-gpu-fatbin: ptxas failed}}
gpu.binary @broken [
  #gpu.object<#nvvm.target<chip = "sm_80">, assembly = "this is not PTX">
]
