//===- Fatbin.cpp - One fatbin for every chip a program is built for ------===//
//
// gpu-module-to-binary gives a gpu.binary one object per NVVM target, and
// the offloading translation embeds only one of them (the first): a program
// built for sm_80 and sm_90 would carry sm_80 code alone, which an H100 runs
// only by compiling its PTX at load time. Here each gpu.binary's PTX objects
// become one fatbin, as nvcc's -gencode would build it: a cubin per chip
// (ptxas) and the PTX of the oldest chip, which newer GPUs compile at load
// (fatbinary). The CUDA runtime picks the image for the device it loads on.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUFATBINPASS
#include "passes/Passes.h.inc"

namespace {

class FatbinBuilder {
public:
  FatbinBuilder(Operation *op, StringRef toolkit) : op(op), toolkit(toolkit) {}
  ~FatbinBuilder() {
    for (const std::string &path : temporaries)
      llvm::sys::fs::remove(path);
  }

  /// The fatbin of `objects` (PTX, one per chip), or failure with the
  /// failing tool's message reported on `op`. `images` names what it holds:
  /// sm_NN for a cubin, compute_NN for PTX.
  FailureOr<std::string> build(ArrayRef<gpu::ObjectAttr> objects,
                               SmallVectorImpl<std::string> &images) {
    SmallVector<std::string> args = {"-64"};
    // The PTX image: the oldest chip's, which newer ones can compile (sm_90a
    // and the like run only on their own chip).
    struct Ptx {
      int number;
      std::string sm, path;
    };
    std::optional<Ptx> oldest;
    for (gpu::ObjectAttr object : objects) {
      auto target = cast<NVVM::NVVMTargetAttr>(object.getTarget());
      StringRef sm = target.getChip();
      if (!sm.consume_front("sm_"))
        return op->emitError("moe-gpu-fatbin: chip '")
               << target.getChip() << "' is not of the form sm_NN";
      FailureOr<std::string> ptx = write(object.getObject().getValue(), "ptx");
      if (failed(ptx))
        return failure();
      FailureOr<std::string> cubin = temporary("cubin");
      if (failed(cubin) ||
          failed(run("ptxas", {"-arch=sm_" + sm.str(),
                               "-O" + std::to_string(target.getO()), "-o",
                               *cubin, *ptx})))
        return failure();
      args.push_back(("--image3=kind=elf,sm=" + sm + ",file=" + *cubin).str());
      images.push_back(("sm_" + sm).str());
      int number = 0;
      if (!sm.getAsInteger(10, number) && (!oldest || number < oldest->number))
        oldest = Ptx{number, sm.str(), *ptx};
    }
    if (oldest) {
      args.push_back("--image3=kind=ptx,sm=" + oldest->sm +
                     ",file=" + oldest->path);
      images.push_back("compute_" + oldest->sm);
    }
    FailureOr<std::string> fatbin = temporary("fatbin");
    if (failed(fatbin))
      return failure();
    args.push_back("--create=" + *fatbin);
    if (failed(run("fatbinary", args)))
      return failure();
    auto buffer = llvm::MemoryBuffer::getFile(*fatbin);
    if (!buffer)
      return op->emitError("moe-gpu-fatbin: cannot read ")
             << *fatbin << ": " << buffer.getError().message();
    return (*buffer)->getBuffer().str();
  }

private:
  /// A new temporary file's path; the file goes with the builder.
  FailureOr<std::string> temporary(StringRef suffix) {
    SmallString<128> path;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("moe-gpu", suffix, path)) {
      op->emitError("moe-gpu-fatbin: cannot create a temporary file: ")
          << ec.message();
      return failure();
    }
    temporaries.push_back(path.str().str());
    return temporaries.back();
  }

  FailureOr<std::string> write(StringRef text, StringRef suffix) {
    FailureOr<std::string> file = temporary(suffix);
    if (failed(file))
      return failure();
    std::error_code ec;
    llvm::raw_fd_ostream os(*file, ec);
    if (!ec) {
      os << text;
      os.close();
      ec = os.error();
    }
    if (ec) {
      op->emitError("moe-gpu-fatbin: cannot write ")
          << *file << ": " << ec.message();
      return failure();
    }
    return file;
  }

  /// Runs the toolkit's `tool` (from its bin/, else from PATH) on `args`;
  /// its output goes to a log that a failure reports.
  LogicalResult run(StringRef tool, ArrayRef<std::string> args) {
    SmallString<128> bin(toolkit);
    llvm::sys::path::append(bin, "bin");
    llvm::ErrorOr<std::string> program =
        llvm::sys::findProgramByName(tool, {bin});
    if (!program)
      program = llvm::sys::findProgramByName(tool);
    if (!program)
      return op->emitError("moe-gpu-fatbin: no ")
             << tool << " in " << bin << " or on PATH (set the CUDA toolkit "
             << "with toolkit=)";
    FailureOr<std::string> log = temporary("log");
    if (failed(log))
      return failure();
    SmallVector<StringRef> argv = {*program};
    argv.append(args.begin(), args.end());
    std::optional<StringRef> redirects[] = {std::nullopt, StringRef(*log),
                                            StringRef(*log)};
    std::string message;
    int status = llvm::sys::ExecuteAndWait(*program, argv, std::nullopt,
                                           redirects, 0, 0, &message);
    if (status == 0)
      return success();
    auto output = llvm::MemoryBuffer::getFile(*log);
    return op->emitError("moe-gpu-fatbin: ")
           << tool << " failed" << (message.empty() ? "" : ": ") << message
           << "\n"
           << (output ? (*output)->getBuffer() : "");
  }

  Operation *op;
  StringRef toolkit;
  std::vector<std::string> temporaries;
};

struct MoEGPUFatbinPass : public impl::MoEGPUFatbinPassBase<MoEGPUFatbinPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto binary : getOperation().getOps<gpu::BinaryOp>()) {
      SmallVector<gpu::ObjectAttr> objects;
      for (Attribute attr : binary.getObjects()) {
        auto object = cast<gpu::ObjectAttr>(attr);
        if (!isa<NVVM::NVVMTargetAttr>(object.getTarget()) ||
            object.getFormat() != gpu::CompilationTarget::Assembly) {
          binary.emitError("moe-gpu-fatbin: expected PTX objects of NVVM "
                           "targets (gpu-module-to-binary format=isa)");
          return signalPassFailure();
        }
        objects.push_back(object);
      }
      SmallVector<std::string> images;
      FailureOr<std::string> fatbin =
          FatbinBuilder(binary, toolkit).build(objects, images);
      if (failed(fatbin))
        return signalPassFailure();
      // The first object's properties, and the images for readers.
      gpu::ObjectAttr first = objects.front();
      NamedAttrList properties(first.getProperties());
      Builder b(&getContext());
      properties.set("images", b.getStrArrayAttr(SmallVector<StringRef>(
                                   images.begin(), images.end())));
      auto merged = gpu::ObjectAttr::get(
          &getContext(), first.getTarget(), gpu::CompilationTarget::Fatbin,
          b.getStringAttr(*fatbin), properties.getDictionary(&getContext()),
          first.getKernels());
      binary.setObjectsAttr(ArrayAttr::get(&getContext(), {merged}));
    }
  }
};

} // namespace
} // namespace mlir::moe
