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
// seconds: an input is loaded in a child process first (LoaderChild), and
// one that crashes libtorch there, or that libtorch refuses, is skipped. Those crashes are libtorch's;
// the importer survives them by loading in a child process
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



#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <fcntl.h>
#include <new>
#include <poll.h>
#include <sys/wait.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

extern char **environ;

using namespace mlir;

namespace {
/// The variable that makes this program the loader child ("IN,OUT": the
/// file descriptors of its requests and replies).
constexpr const char *kLoaderVariable = "MOE_FUZZ_TORCHSCRIPT_LOADER";

/// The largest allocation the fuzzer allows (its -malloc_limit_mb, else
/// -rss_limit_mb, else 2048 MB, as libFuzzer takes them), in bytes.
size_t mallocLimit = size_t(2048) << 20;

/// In the loader child: an allocation past the fuzzer's limit ends it, as
/// a crash does, so that the archive is skipped (libtorch reserves what an
/// archive's length fields claim). libFuzzer's own hook, which would have
/// reported it as this target's finding, is not installed there.
void endOnLargeMalloc(const volatile void *, size_t size) {
  if (size > mallocLimit)
    _exit(3);
}
void ignoreFree(const volatile void *) {}

/// The loader child's loop: loads each archive it is sent and answers one
/// byte, 'y' if it loaded and 'n' if libtorch refused it. Its crashes must
/// end it quietly, not as the fuzzer's findings.
[[noreturn]] void serveLoads(int in, int out) {
  __sanitizer_install_malloc_and_free_hooks(endOnLargeMalloc, ignoreFree);
  int null = open("/dev/null", O_WRONLY);
  dup2(null, STDOUT_FILENO);
  dup2(null, STDERR_FILENO);
  std::string archive;
  for (;;) {
    uint64_t size = 0;
    if (read(in, &size, sizeof(size)) != sizeof(size))
      _exit(0);
    archive.resize(size);
    for (size_t done = 0; done < size;) {
      ssize_t n = read(in, archive.data() + done, size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        _exit(0);
      done += static_cast<size_t>(n);
    }
    char answer = 'y';
    try {
      // As the importer loads it (its newer operators registered), so
      // that the child gets as far into libtorch as the importer will.
      moe::loadTorchScriptArchive(
          llvm::MemoryBufferRef(archive, "/nonexistent/moe-fuzz/model.pt"));
    } catch (const std::exception &error) {
      answer = 'n';
      // The importer prints the error: formatting some of libtorch's
      // (torch::jit::ErrorReport's source highlighting) throws out of its
      // noexcept what() and ends the process, which the importer's loader
      // child survives as a crash. Done here too, such archives are skipped.
      (void)error.what();
    } catch (...) {
      answer = 'n';
    }
    if (write(out, &answer, 1) != 1)
      _exit(0);
  }
}

/// A child process, started once, that loads each archive it is sent with
/// libtorch's loader and answers whether it loaded; one that dies on an
/// archive is replaced for the next. Forking a sanitized process per input (copying
/// its shadow mappings) took a third of the target's time. The child
/// execs this program afresh (LLVMFuzzerInitialize serves before libFuzzer
/// starts): a bare fork would keep libFuzzer's malloc limit hook, which
/// wrote the child's large allocations as oom-* findings of an empty input.
class LoaderChild {
public:
  enum class Load { Loaded, Refused, Crashed };

  /// What libtorch's loader does with `archive`: loads it, refuses it (an
  /// exception), or crashes, exits or takes more than a few seconds
  /// (libFuzzer's own timeout would count libtorch's hang as ours).
  Load load(llvm::StringRef archive) {
    if (pid <= 0 && !spawn())
      return Load::Crashed;
    uint64_t size = archive.size();
    char reply = 0;
    if (writeAll(&size, sizeof(size)) && writeAll(archive.data(), size) &&
        answer(reply))
      return reply == 'y' ? Load::Loaded : Load::Refused;
    reap();
    return Load::Crashed;
  }

private:
  bool spawn() {
    int request[2], reply[2];
    if (pipe(request) != 0 || pipe(reply) != 0) {
      std::perror("moe-fuzz-torchscript: pipe");
      std::abort();
    }
    // Everything the child needs is made before fork: between fork and
    // exec only async-signal-safe calls.
    std::vector<std::string> variables;
    std::string asanOptions = "ASAN_OPTIONS=";
    for (char **v = environ; *v; ++v) {
      llvm::StringRef variable(*v);
      if (variable.starts_with(asanOptions))
        asanOptions = variable.str() + ":";
      else if (!variable.starts_with(std::string(kLoaderVariable) + "="))
        variables.push_back(*v);
    }
    // What AddressSanitizer finds in the child is libtorch's and skipped:
    // no quarantine, heap poisoning or leak check (half the child's time).
    variables.push_back(asanOptions +
                        "quarantine_size_mb=0:poison_heap=0:detect_leaks=0:"
                        "max_malloc_fill_size=0");
    variables.push_back(std::string(kLoaderVariable) + "=" +
                        std::to_string(request[0]) + "," +
                        std::to_string(reply[1]) + "," +
                        std::to_string(mallocLimit));
    std::vector<char *> envp;
    for (std::string &v : variables)
      envp.push_back(v.data());
    envp.push_back(nullptr);
    char name[] = "moe-fuzz-torchscript-loader";
    char *argv[] = {name, nullptr};
    std::signal(SIGPIPE, SIG_IGN);
    pid = fork();
    if (pid < 0) {
      std::perror("moe-fuzz-torchscript: fork");
      std::abort();
    }
    if (pid == 0) {
      close(request[1]);
      close(reply[0]);
      execve("/proc/self/exe", argv, envp.data());
      _exit(127);
    }
    close(request[0]);
    close(reply[1]);
    toChild = request[1];
    fromChild = reply[0];
    return true;
  }

  /// All `size` bytes at `data` through `io` (read or write) on `fd`.
  template <typename IO, typename Bytes>
  static bool transfer(IO io, int fd, Bytes *data, size_t size) {
    auto *bytes = reinterpret_cast<std::conditional_t<
        std::is_const_v<Bytes>, const char, char> *>(data);
    while (size > 0) {
      ssize_t n = io(fd, bytes, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      bytes += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  bool writeAll(const void *data, size_t size) {
    return transfer(::write, toChild, data, size);
  }

  /// Whether the child answers within kLoadSeconds; its answer in `reply`.
  bool answer(char &reply) {
    constexpr int kLoadSeconds = 4;
    pollfd ready{fromChild, POLLIN, 0};
    int n;
    while ((n = poll(&ready, 1, kLoadSeconds * 1000)) < 0 && errno == EINTR)
      ;
    return n == 1 && read(fromChild, &reply, 1) == 1;
  }

  /// Ends the child, which crashed, exited or hangs.
  void reap() {
    kill(pid, SIGKILL);
    close(toChild);
    close(fromChild);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    pid = -1;
  }

  pid_t pid = -1;
  int toChild = -1, fromChild = -1;
};
} // namespace

// The global allocation functions of this target. libtorch's unpickler
// reserves what an archive's length fields claim (26 GB for one fuzzed
// archive), and it reads uninitialized memory, so an archive the loader
// child got through may still claim more here. In the importer such an
// allocation fails in its memory-bounded loader child, as std::bad_alloc;
// here too, past the fuzzer's limit, instead of AddressSanitizer's report
// (its operator new never throws). Memory comes from malloc, which
// AddressSanitizer still checks; only new/delete mismatches go unseen.
static void *allocate(size_t size) {
  if (size > mallocLimit)
    throw std::bad_alloc();
  void *memory = std::malloc(size ? size : 1);
  if (!memory)
    throw std::bad_alloc();
  return memory;
}
static void *allocate(size_t size, std::align_val_t align) {
  if (size > mallocLimit)
    throw std::bad_alloc();
  void *memory = nullptr;
  size_t alignment = std::max(static_cast<size_t>(align), sizeof(void *));
  if (posix_memalign(&memory, alignment, size ? size : 1) != 0)
    throw std::bad_alloc();
  return memory;
}
void *operator new(size_t size) { return allocate(size); }
void *operator new[](size_t size) { return allocate(size); }
void *operator new(size_t size, std::align_val_t align) {
  return allocate(size, align);
}
void *operator new[](size_t size, std::align_val_t align) {
  return allocate(size, align);
}
void *operator new(size_t size, const std::nothrow_t &) noexcept {
  return size > mallocLimit ? nullptr : std::malloc(size ? size : 1);
}
void *operator new[](size_t size, const std::nothrow_t &tag) noexcept {
  return operator new(size, tag);
}
void *operator new(size_t size, std::align_val_t align,
                   const std::nothrow_t &) noexcept {
  try {
    return allocate(size, align);
  } catch (const std::bad_alloc &) {
    return nullptr;
  }
}
void *operator new[](size_t size, std::align_val_t align,
                     const std::nothrow_t &tag) noexcept {
  return operator new(size, align, tag);
}
void operator delete(void *memory) noexcept { std::free(memory); }
void operator delete[](void *memory) noexcept { std::free(memory); }
void operator delete(void *memory, size_t) noexcept { std::free(memory); }
void operator delete[](void *memory, size_t) noexcept { std::free(memory); }
void operator delete(void *memory, const std::nothrow_t &) noexcept {
  std::free(memory);
}
void operator delete[](void *memory, const std::nothrow_t &) noexcept {
  std::free(memory);
}
void operator delete(void *memory, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete[](void *memory, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete(void *memory, size_t, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete[](void *memory, size_t, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete(void *memory, std::align_val_t,
                     const std::nothrow_t &) noexcept {
  std::free(memory);
}
void operator delete[](void *memory, std::align_val_t,
                       const std::nothrow_t &) noexcept {
  std::free(memory);
}

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  if (const char *fds = std::getenv(kLoaderVariable)) {
    int in = -1, out = -1;
    unsigned long long limit = 0;
    if (std::sscanf(fds, "%d,%d,%llu", &in, &out, &limit) != 3)
      _exit(2);
    mallocLimit = limit;
    serveLoads(in, out);
  }
  // The fuzzer's limit, for the loader child.
  long long rss = -1, malloc = -1;
  for (int i = 1; i < *argc; ++i) {
    std::sscanf((*argv)[i], "-rss_limit_mb=%lld", &rss);
    std::sscanf((*argv)[i], "-malloc_limit_mb=%lld", &malloc);
  }
  long long mb = malloc > 0 ? malloc : rss > 0 ? rss : 2048;
  mallocLimit = size_t(mb) << 20;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    r.insert<moe::MoEDialect, moe::onnx::ONNXDialect>();
    return r;
  }();
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  moe::ImportOptions options;
  // In this process, where the coverage is counted: LoaderChild has
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
  // Archives that libtorch refuses end the import in libtorch, before any
  // of the importer's own code: loading them again here (most mutated
  // archives; a load is mostly small allocations, slow under
  // AddressSanitizer) would teach the fuzzer nothing.
  static LoaderChild loader;
  LoaderChild::Load load = loader.load(input);
  if (load != LoaderChild::Load::Loaded) {
    if (moe_fuzz::verbose())
      llvm::errs() << (load == LoaderChild::Load::Crashed
                           ? "libtorch's loader crashes on this archive"
                           : "libtorch's loader refuses this archive")
                   << "; skipped\n";
    return 0;
  }
  std::unique_ptr<MLIRContext> context = moe_fuzz::makeContext(registry);
  llvm::MemoryBufferRef buffer(input, "/nonexistent/moe-fuzz/model.pt");
  (void)moe::importTorchScript(buffer, context.get(), options);
  return 0;
}
