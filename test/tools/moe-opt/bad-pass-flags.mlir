// Unknown pass flags and bad pass options are diagnostics and a non-zero
// exit, never a crash.
// RUN: not moe-opt %s --moe-decompos 2>&1 | FileCheck %s --check-prefix=TYPO --implicit-check-not="PLEASE submit"
// TYPO: Unknown command line argument '--moe-decompos'
// TYPO: Did you mean '--moe-decompose'?

// RUN: not moe-opt %s --moe-decompose=bogus=1 2>&1 | FileCheck %s --check-prefix=OPTION --implicit-check-not="PLEASE submit"
// RUN: not moe-opt %s --pass-pipeline='builtin.module(moe-decompose{bogus=1})' 2>&1 | FileCheck %s --check-prefix=OPTION --implicit-check-not="PLEASE submit"
// OPTION: error: <Pass-Options-Parser>: no such option bogus

// RUN: not moe-opt %s --moe-lower-to-llvm=decompose=maybe 2>&1 | FileCheck %s --check-prefix=VALUE --implicit-check-not="PLEASE submit"
// VALUE: for the --decompose option: 'maybe' is invalid value for boolean argument!

// RUN: not moe-opt %s --pass-pipeline='builtin.module(moe-decompose' 2>&1 | FileCheck %s --check-prefix=PIPELINE --implicit-check-not="PLEASE submit"
// PIPELINE: error: expected pass pipeline to be wrapped with the anchor operation type

// RUN: not moe-opt %s --pass-pipeline='builtin.module(moe-decomposer)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN --implicit-check-not="PLEASE submit"
// UNKNOWN: error: 'moe-decomposer' does not refer to a registered pass or pass pipeline

func.func @f() {
  return
}
