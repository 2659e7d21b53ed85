//===- Library.cpp - A bundle's model.so, checked and loaded --------------===//

#include "Library.h"

#include "moert/Runtime.h"
#ifdef MOE_RUN_HAVE_CUDA
#include "moert/moert_cuda.h"
#endif

#include "moe/Support/Input.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

using namespace llvm;
using namespace moe_run;

void moe_run::setAsideLLVMOptions() {
  for (auto [name, aside] : {std::pair{"stats", "llvm-stats"},
                             std::pair{"stats-json", "llvm-stats-json"},
                             std::pair{"threads", "llvm-threads"}})
    if (cl::Option *o = cl::getRegisteredOptions().lookup(name))
      o->setArgStr(aside);
}

void moe_run::parseCommandLine(int argc, char **argv,
                               cl::OptionCategory &category,
                               StringRef overview) {
  cl::HideUnrelatedOptions(category);
  std::string parseErrors;
  raw_string_ostream errors(parseErrors);
  bool parsed = cl::ParseCommandLineOptions(argc, argv, overview, &errors);
  StringRef tool = sys::path::filename(argv[0]);
  StringRef message = StringRef(parseErrors).trim();
  message.consume_front((tool + ": ").str());
  std::string fallback =
      ("invalid command line (see " + tool + " --help)").str();
  moert::failIfAnyRank(parsed ? "" : message.empty() ? fallback : message.str());
}

static Error failure(const Twine &message) {
  return createStringError(message);
}

static std::string inBundle(StringRef bundleDir, StringRef file) {
  SmallString<128> path(bundleDir);
  sys::path::append(path, file);
  return std::string(path);
}

/// True when [addr, addr + bytes) lies in memory that stays writable:
/// a writable PT_LOAD segment outside PT_GNU_RELRO.
static bool isWritable(const void *addr, int64_t bytes) {
  struct Query {
    uintptr_t begin, end;
    bool writable = false;
  } query{reinterpret_cast<uintptr_t>(addr),
          reinterpret_cast<uintptr_t>(addr) + bytes};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *q = static_cast<Query *>(data);
        bool inWritable = false, inRelro = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
          uintptr_t end = begin + ph.p_memsz;
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) &&
              q->begin >= begin && q->end <= end)
            inWritable = true;
          if (ph.p_type == PT_GNU_RELRO && q->begin < end && q->end > begin)
            inRelro = true;
        }
        q->writable |= inWritable && !inRelro;
        return 0;
      },
      &query);
  return query.writable;
}

Expected<std::unique_ptr<MemoryBuffer>>
moe_run::readChecked(const std::string &path, int64_t bytes, StringRef digest) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return failure("cannot read " + path + ": " + buffer.getError().message());
  int64_t size = (*buffer)->getBufferSize();
  if (size != bytes)
    return failure(formatv("{0} has {1} bytes, the manifest records {2}: the "
                           "bundle is incomplete or was edited after "
                           "compilation",
                           path, size, bytes));
  if (!digest.empty() && mlir::moe::contentDigest(arrayRefFromStringRef(
                             (*buffer)->getBuffer())) != digest)
    return failure(formatv("{0} does not have the digest that the manifest "
                           "records ({1}): it was edited after compilation",
                           path, digest));
  return std::move(*buffer);
}

/// The size of the symbol at `symbol`, or -1 when it is not one.
static int64_t symbolBytes(void *symbol) {
  Dl_info info;
  void *entry = nullptr;
  if (!symbol || !dladdr1(symbol, &info, &entry, RTLD_DL_SYMENT) || !entry)
    return -1;
  return static_cast<const ElfW(Sym) *>(entry)->st_size;
}

/// Checks model.json against the library's description of itself.
static Error checkAgainstLibrary(const Manifest &m, void *library) {
  auto *text = static_cast<const char *>(dlsym(library, "moe_manifest"));
  int64_t bytes = symbolBytes(const_cast<char *>(text));
  if (bytes <= 0 || text[bytes - 1] != '\0')
    return failure(formatv("{0} does not describe itself (no moe_manifest): "
                           "recompile the bundle with this version's "
                           "moe-compile",
                           m.library));
  std::string error = compareWithLibrary(m, StringRef(text, bytes - 1));
  return error.empty() ? Error::success() : failure(error);
}

/// Asks for transparent huge pages under the whole 2 MiB pages of a weight
/// before its first touch: a decode step streams every expert weight once,
/// and on 4 KiB pages that is a TLB miss per 4 KiB read (the library's
/// weight symbols are anonymous memory, which the kernel gives huge pages
/// only where asked when THP is `madvise`). Advice only: nothing fails.
static void adviseHugePages(void *symbol, int64_t bytes) {
  constexpr uintptr_t kHuge = 2u << 20;
  auto begin = (reinterpret_cast<uintptr_t>(symbol) + kHuge - 1) & ~(kHuge - 1);
  auto end = (reinterpret_cast<uintptr_t>(symbol) + bytes) & ~(kHuge - 1);
  if (end > begin)
    (void)::madvise(reinterpret_cast<void *>(begin), end - begin,
                    MADV_HUGEPAGE);
}

/// Copies this rank's piece of every weight into its symbol, after checking
/// that the symbol has exactly the piece's size and may be written.
Expected<std::vector<char *>>
moe_run::loadWeights(const Manifest &m, void *library, StringRef bundleDir,
                     StringRef weightsOverride, std::string *overrideDigest) {
  std::vector<char *> symbols;
  if (m.weights.empty())
    return symbols;
  Expected<std::unique_ptr<MemoryBuffer>> file =
      weightsOverride.empty()
          ? readChecked(inBundle(bundleDir, m.weightsFile), m.weightsBytes,
                        m.weightsDigest)
          : readChecked(weightsOverride.str(), m.weightsBytes, "");
  if (!file)
    return file.takeError();
  if (!weightsOverride.empty() && overrideDigest)
    *overrideDigest = mlir::moe::contentDigest(
        arrayRefFromStringRef((*file)->getBuffer()));
  for (const TensorSpec &w : m.weights) {
    // The manifest's check bounds every piece by the file's size.
    int64_t bytes = w.bytes(), offset = w.offsets[moert::worldRank()];
    void *symbol = dlsym(library, w.name.c_str());
    int64_t size = symbolBytes(symbol);
    if (size < 0)
      return failure(
          formatv("{0} has no weight symbol '{1}'", m.library, w.name));
    if (size != bytes)
      return failure(formatv("weight '{0}' of {1} has {2} bytes, its "
                             "manifest shape {3} of {4} needs {5}",
                             w.name, m.library, size,
                             moert::shapeString(w.shape), w.type->name, bytes));
    if (!isWritable(symbol, bytes))
      return failure(
          formatv("weight '{0}' of {1} is read-only data", w.name, m.library));
    adviseHugePages(symbol, bytes);
    std::memcpy(symbol, (*file)->getBufferStart() + offset, bytes);
    symbols.push_back(static_cast<char *>(symbol));
  }
  return symbols;
}

Error moe_run::readNamedInputs(ArrayRef<std::string> args,
                               const std::vector<TensorSpec> &specs,
                               StringRef what,
                               std::vector<moert::Array> &arrays,
                               std::vector<std::string> &files) {
  for (StringRef arg : args) {
    StringRef name, file;
    std::tie(name, file) = arg.split('=');
    if (file.empty())
      return failure("--input " + arg + ": expected NAME=FILE.npy");
    auto spec =
        find_if(specs, [&](const TensorSpec &t) { return t.name == name; });
    if (spec == specs.end()) {
      std::vector<std::string> names;
      for (const TensorSpec &t : specs)
        names.push_back(t.name);
      return failure(formatv("unknown input '{0}'; the {1}'s inputs: {2}",
                             name, what, join(names, ", ")));
    }
    size_t i = spec - specs.begin();
    if (!files[i].empty())
      return failure(formatv("input '{0}' given twice", name));
    files[i] = file.str();
    moert::Array &array = arrays[i];
    if (std::string error = moert::readNpy(file.str(), array); !error.empty())
      return failure(formatv("input '{0}': {1}", name, error));
    if (!moert::convertToModelType(array, *spec->type)) {
      const moert::DType *type = moert::findDTypeByDescr(array.descr);
      return failure(formatv("input '{0}': {1} holds {2} data, the {3} "
                             "expects {4}",
                             name, file, type ? type->name : array.descr, what,
                             spec->type->name));
    }
  }
  return Error::success();
}

void ExpertLoadLog::record(int64_t step) {
  if (!enabled())
    return;
  std::vector<std::vector<int64_t>> layers = moert::takeLayerTokens();
  if (moert::worldRank() != 0)
    return;
  json::Array tokens;
  for (const std::vector<int64_t> &experts : layers)
    tokens.push_back(json::Array(experts));
  records.push_back(json::Object{{"step", step}, {"tokens", std::move(tokens)}});
}

Error ExpertLoadLog::write() const {
  if (!enabled() || moert::worldRank() != 0)
    return Error::success();
  std::error_code ec;
  raw_fd_ostream out(path, ec);
  if (ec)
    return failure("--stats-json: cannot write " + path + ": " + ec.message());
  out << formatv("{0}", json::Value(json::Object{
                              {"moe_expert_load", 1},
                              {"steps_per_record", 1},
                              {"records", json::Array(records)}}))
      << "\n";
  return Error::success();
}

Error moe_run::checkWorldSize(const Manifest &m, StringRef what) {
  int64_t ranks = m.worldSize;
  if (ranks == moert::worldSize())
    return Error::success();
  return createStringError(formatv(
      "{0} compiled for {1} rank{2} but started on {3}; run it {4}", what,
      ranks, ranks == 1 ? "" : "s", moert::worldSize(),
      ranks == 1 ? std::string("without mpirun")
                 : formatv("with mpirun -np {0}", ranks).str()));
}

Expected<LoadedLibrary> moe_run::loadLibrary(const Manifest &m,
                                             StringRef bundleDir) {
  // The device first: model.so's constructors load its GPU modules.
  if (m.target == "cuda") {
#ifdef MOE_RUN_HAVE_CUDA
    moert_cuda_init();
#else
    return failure("the bundle was compiled with --target=cuda, but this "
                   "moe-run was built without the CUDA backend (no CUDA "
                   "toolkit or NCCL at build time)");
#endif
  }
  // Optional: only programs that copy strided buffers call memrefCopy, and
  // dlopen names it if one does and it is missing.
  dlopen(MOE_RUN_C_RUNNER_UTILS, RTLD_NOW | RTLD_GLOBAL);
  // Checked first: a truncated library would fault inside dlopen.
  if (Expected<std::unique_ptr<MemoryBuffer>> code =
          readChecked(inBundle(bundleDir, m.library), m.libraryBytes, m.libraryDigest);
      !code)
    return code.takeError();
  // RTLD_NOW: a missing moert_* symbol is an error here, not mid-run.
  void *library = dlopen(inBundle(bundleDir, m.library).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return failure(Twine("cannot load the model: ") + dlerror());
  if (Error error = checkAgainstLibrary(m, library))
    return std::move(error);
  auto entry = reinterpret_cast<Entry>(dlsym(library, m.entry.c_str()));
  if (!entry)
    return failure(formatv("{0} has no entry '{1}'", m.library, m.entry));
  return LoadedLibrary{library, entry};
}


#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
void moe_run::callEntry(Entry entry, void **args) {
  entry(args);
}

CallArguments::~CallArguments() {
#ifdef MOE_RUN_HAVE_CUDA
  for (size_t i = 0; i < pointers.size(); ++i)
    if (pointers[i] != hosts[i].data)
      mgpuMemFree(pointers[i], nullptr);
#endif
}

void CallArguments::add(char *data, int64_t bytes, bool isOutput) {
  hosts.push_back({data, bytes, isOutput});
  void *pointer = data;
#ifdef MOE_RUN_HAVE_CUDA
  if (device && bytes > 0) {
    pointer = mgpuMemAlloc(bytes, nullptr, /*isHostShared=*/true);
    std::memcpy(pointer, data, bytes);
  }
#endif
  pointers.push_back(pointer);
}

void CallArguments::copyInputsIn() const {
  for (size_t i = 0; i < pointers.size(); ++i)
    if (!hosts[i].isOutput && pointers[i] != hosts[i].data)
      std::memcpy(pointers[i], hosts[i].data, hosts[i].bytes);
}

void CallArguments::finishRun() const {
#ifdef MOE_RUN_HAVE_CUDA
  if (device)
    mgpuStreamSynchronize(moert_cuda_stream());
#endif
}

void CallArguments::copyOutputsBack() const {
  for (size_t i = 0; i < pointers.size(); ++i)
    if (hosts[i].isOutput && pointers[i] != hosts[i].data)
      std::memcpy(hosts[i].data, pointers[i], hosts[i].bytes);
}
