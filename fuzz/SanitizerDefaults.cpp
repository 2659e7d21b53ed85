//===- SanitizerDefaults.cpp - Sanitizer options built into each target ---===//
//
// What test/lit.cfg.py sets for the sanitized tools, compiled into every
// fuzz target so that one run by hand behaves as under lit and
// scripts/fuzz.sh; ASAN_OPTIONS and LSAN_OPTIONS still override it.
//
//===----------------------------------------------------------------------===//

extern "C" {
// LLVM's BumpPtrAllocator poisons its free space in instrumented code only;
// the uninstrumented libMLIR allocates from the same allocators (an
// MLIRContext's) without unpoisoning, a false use-after-poison.
const char *__asan_default_options() {
  return "allow_user_poisoning=0:detect_leaks=1";
}

// fuzz/lsan.supp, the leaks of libraries we do not build.
const char *__lsan_default_options() {
  return "suppressions=" MOE_LSAN_SUPPRESSIONS ":print_suppressions=0";
}

const char *__ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}
}
