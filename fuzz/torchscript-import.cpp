//===- torchscript-import.cpp - Fuzz target: TorchScript archives ---------===//
//
// An input is an optional first line of input shapes, as --input-shape takes
// them ("hidden_states=2x4x16,mask=2x4"), then the bytes of a .pt archive
// (a zip: it starts with "PK"; with no shapes line, the whole input is the
// archive). TorchScript archives do not record input shapes, so without them
// the import stops before translating a single node.
//
// libtorch itself is not instrumented: what the fuzzer learns comes from the
// translation to ONNX and the ONNX import after it. Its loader, given
// archives that a mutation broke, crashes often enough (libtorch 1.13 reads
// uninitialized memory in ScriptTypeParser::parseClassConstant when one byte
// of a code file's compressed data changes) to end every run within
// seconds: an input is loaded in a child process first, and one that
// crashes libtorch there is skipped. Those crashes are libtorch's; the
// importer survives them by loading in a child process
// (ImportOptions::isolateTorchScript;
// test/fuzz/torchscript-libtorch-crash.test keeps the first one found),
// which is off here so that the translation runs where its coverage is
// counted.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "dialects/moe/IR/MoEDialect.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "moe/Import/Import.h"

#include "llvm/ADT/StringRef.h"

#include <torch/csrc/jit/serialization/import.h>

#include <cerrno>
#include <fcntl.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

using namespace mlir;

/// Whether libtorch's own loader gets through `archive` without crashing
/// (succeeding or throwing), in a child process with its output discarded.
static bool libtorchSurvives(llvm::StringRef archive) {
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("moe-fuzz-torchscript: fork");
    std::abort();
  }
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    try {
      std::istringstream in(archive.str());
      torch::jit::load(in, c10::Device(c10::kCPU));
    } catch (...) {
    }
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    r.insert<moe::MoEDialect, moe::onnx::ONNXDialect>();
    return r;
  }();
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  moe::ImportOptions options;
  // In this process, where the coverage is counted: libtorchSurvives has
  // already kept out the archives that crash the loader.
  options.isolateTorchScript = false;
  if (!input.starts_with("PK")) {
    auto [shapes, archive] = input.split('\n');
    input = archive;
    llvm::SmallVector<llvm::StringRef> specs;
    shapes.split(specs, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
    std::string error;
    for (llvm::StringRef spec : specs)
      if (failed(moe::addInputShape(spec, options, error)))
        return 0;
    // Shapes come from the command line, not the file: a user who asks for
    // a 2^40-element input gets what they asked for. Small ones only here.
    for (const auto &entry : options.inputShapes) {
      int64_t elements = 1;
      for (int64_t dim : entry.getValue())
        if (dim > 4096 || (elements *= std::max<int64_t>(dim, 1)) > (1 << 20))
          return 0;
    }
  }
  if (!libtorchSurvives(input)) {
    if (moe_fuzz::verbose())
      llvm::errs() << "libtorch's loader crashes on this archive; skipped\n";
    return 0;
  }
  std::unique_ptr<MLIRContext> context = moe_fuzz::makeContext(registry);
  llvm::MemoryBufferRef buffer(input, "/nonexistent/moe-fuzz/model.pt");
  (void)moe::importTorchScript(buffer, context.get(), options);
  return 0;
}
