// The registered flags are spelled as in passes/Passes.td and
// lib/Pipelines (sorted as --help lists them).
// RUN: moe-opt --help | FileCheck %s

// CHECK: Available Dialects: {{.*}}moe
// CHECK: {{^ +--convert-moe-to-linalg +- }}
// CHECK: {{^ +--moe-decompose +- }}
// CHECK: {{^ +--moe-lower-to-llvm +- }}
// CHECK-NEXT: {{^ +--decompose +- }}
