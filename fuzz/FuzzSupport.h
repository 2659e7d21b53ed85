//===- FuzzSupport.h - What the libFuzzer targets share ---------*- C++ -*-===//
//
// A fresh MLIRContext per input (no state carries over from one input to the
// next, and memory does not grow over millions of runs), diagnostics dropped
// unless MOE_FUZZ_VERBOSE is set (for reading why a reproducer is rejected),
// and a temporary file for the readers that only take a path.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_FUZZ_FUZZSUPPORT_H
#define MOE_FUZZ_FUZZSUPPORT_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>

namespace moe_fuzz {

/// Whether to print the diagnostics of each input (MOE_FUZZ_VERBOSE=1).
inline bool verbose() {
  static const bool value = std::getenv("MOE_FUZZ_VERBOSE") != nullptr;
  return value;
}

/// A single-threaded context over `registry` whose diagnostics go nowhere
/// (or to stderr when verbose).
inline std::unique_ptr<mlir::MLIRContext>
makeContext(const mlir::DialectRegistry &registry) {
  auto context = std::make_unique<mlir::MLIRContext>(
      registry, mlir::MLIRContext::Threading::DISABLED);
  context->getDiagEngine().registerHandler([](mlir::Diagnostic &diag) {
    if (verbose())
      llvm::errs() << diag << "\n";
    return mlir::success();
  });
  return context;
}

/// A file that holds the current input for readers that take a path; one per
/// process, rewritten for every input and removed at exit (a crash leaves
/// it behind).
class TempFile {
public:
  explicit TempFile(const char *suffix) {
    // In memory where there is a tmpfs, whatever TMPDIR says (lit points it
    // at the test's directory): rewriting a file on disk for every input
    // costs milliseconds where a run takes microseconds.
    const char *dir = std::getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0)
      dir = "/dev/shm";
    else if (!dir || !*dir)
      dir = "/tmp";
    path = std::string(dir) + "/moe-fuzz-XXXXXX" + suffix;
    int fd = mkstemps(path.data(), static_cast<int>(std::string(suffix).size()));
    if (fd < 0) {
      std::perror("moe-fuzz: mkstemps");
      std::abort();
    }
    close(fd);
  }
  ~TempFile() { std::remove(path.c_str()); }

  /// Replaces the file's contents with `size` bytes at `data`.
  const std::string &write(const uint8_t *data, size_t size) {
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      std::perror("moe-fuzz: writing the input file");
      std::abort();
    }
    return path;
  }

private:
  std::string path;
};

} // namespace moe_fuzz

#endif // MOE_FUZZ_FUZZSUPPORT_H
