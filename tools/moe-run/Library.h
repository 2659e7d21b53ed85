//===- Library.h - A bundle's model.so, checked and loaded ------*- C++ -*-===//
//
// What moe-run and moe-train share: model.so is loaded only after its size
// and digest match the manifest, the manifest must say what the library
// says of itself, and each weight is copied into its symbol only after the
// symbol proves to have the weight's size and to be writable.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUN_LIBRARY_H
#define MOE_RUN_LIBRARY_H

#include "Manifest.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>
#include <vector>

namespace moe_run {

/// Moves libLLVM.so's own --stats, --stats-json and --threads aside (to
/// --llvm-stats, --llvm-stats-json and --llvm-threads), so that a runner's
/// options of those names can be made.
void setAsideLLVMOptions();

/// Parses the command line of a runner whose options are in `category`; a
/// bad one ends every rank with cl's message (once, without its program
/// name, which the runtime's errors carry already).
void parseCommandLine(int argc, char **argv, llvm::cl::OptionCategory &category,
                      llvm::StringRef overview);

/// The compiled entry: inputs, then outputs, as pointers.
using Entry = void (*)(void **);

/// Calls `entry` on `args`. The compiled code has no UBSan function-type
/// prologue; the check would read the 8 bytes before the entry, which
/// faults where the entry begins the library's first page of code.
void callEntry(Entry entry, void **args);

struct LoadedLibrary {
  void *handle = nullptr;
  Entry entry = nullptr;
};

/// The contents of `path`, after checking that it has the size and (unless
/// `digest` is empty) the digest that the manifest records.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readChecked(const std::string &path, int64_t bytes, llvm::StringRef digest);

/// Where the world the bundle was compiled for (`m`) is not the one this
/// process runs in: the error, saying how to start it.
llvm::Error checkWorldSize(const Manifest &m, llvm::StringRef what);

/// Reads each `--input NAME=FILE.npy` of `args` into the array of the
/// input of `specs` that it names, converted to the input's type, and
/// records FILE in `files` (both sized as `specs`; an input not given keeps
/// an empty name). `what` names the program in the messages ("model",
/// "step"); shapes are the caller's to check.
llvm::Error readNamedInputs(llvm::ArrayRef<std::string> args,
                            const std::vector<TensorSpec> &specs,
                            llvm::StringRef what,
                            std::vector<moert::Array> &arrays,
                            std::vector<std::string> &files);

/// --stats-json: the tokens each MoE layer's experts received, one record
/// per call (moe-run) or step (moe-train), in the format moe-plan reads
/// (tools/moe-plan/Trace.h). Every rank records (a collective); rank 0
/// holds the records and writes the file.
class ExpertLoadLog {
public:
  explicit ExpertLoadLog(std::string path) : path(std::move(path)) {}
  bool enabled() const { return !path.empty(); }
  /// Collective: the counts since the last record, as record `step`.
  void record(int64_t step);
  /// Rank 0 writes the file; the error if it cannot.
  llvm::Error write() const;

private:
  std::string path;
  llvm::json::Array records;
};

/// Loads the model.so of the bundle in `bundleDir` (initializing the device
/// first for a CUDA bundle) and finds its entry.
llvm::Expected<LoadedLibrary> loadLibrary(const Manifest &m,
                                          llvm::StringRef bundleDir);

/// Copies this rank's piece of every weight into its symbol, from the
/// bundle's weights file or from `weightsOverride` (size checked, not the
/// digest, whose own digest goes to `overrideDigest`). Returns each weight's
/// symbol, in manifest order.
llvm::Expected<std::vector<char *>>
loadWeights(const Manifest &m, void *library, llvm::StringRef bundleDir,
            llvm::StringRef weightsOverride, std::string *overrideDigest);

/// The buffers the entry is called with: inputs, then outputs. A CUDA
/// bundle's kernels read the inputs and write the outputs, so those live in
/// managed memory during the calls: the host buffers are copied in (the
/// outputs' zeros too) and the outputs copied back when asked.
class CallArguments {
public:
  explicit CallArguments(bool device) : device(device) {}
  CallArguments(const CallArguments &) = delete;
  ~CallArguments();

  /// Adds the host buffer `data` of `bytes` bytes.
  void add(char *data, int64_t bytes, bool isOutput);
  void **data() { return pointers.data(); }
  /// Copies the host inputs to where the call reads them (after the host
  /// changed them; a CPU call reads the host buffers themselves).
  void copyInputsIn() const;
  /// Waits for the device after a call, so that its time is counted.
  void finishRun() const;
  /// Copies the outputs back to the host buffers.
  void copyOutputsBack() const;

private:
  struct Host {
    char *data;
    int64_t bytes;
    bool isOutput;
  };
  bool device;
  std::vector<Host> hosts;
  std::vector<void *> pointers;
};

} // namespace moe_run

#endif // MOE_RUN_LIBRARY_H
