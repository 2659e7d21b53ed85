//===- SanitizerDefaults.cpp - Sanitizer options built into each target ---===//
//
// The options every fuzz target runs with, by hand, under lit or under
// scripts/fuzz.sh: those test/lit.cfg.py gives the sanitized tools, but with
// leaks checked (the targets do not start Open MPI, whose leaks keep the
// tools' checks off). ASAN_OPTIONS, LSAN_OPTIONS and UBSAN_OPTIONS still
// override them, which is why test/fuzz sets detect_leaks=1 again.
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
