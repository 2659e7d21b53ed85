//===- Compile.cpp - a model file to a runnable bundle --------------------===//

#include "moe/Compile/Compile.h"

#include "Bundle.h"
#include "NativeCode.h"

#include "moe/InitAll.h"
#include "dialects/moe/IR/MoEOps.h"
#include "moe/Support/Input.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::moe;

void mlir::moe::registerCompileDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
}

/// The model as a module, by the file's extension.
static OwningOpRef<ModuleOp> loadModel(MLIRContext &context,
                                       const CompileOptions &options) {
  StringRef path = options.modelPath;
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  StringRef ext = llvm::sys::path::extension(path);
  if (ext != ".onnx" && ext != ".pt" && ext != ".mlir") {
    emitError(loc) << "moe-compile: cannot tell the format of '" << path
                   << "': give a .onnx, .pt or .mlir file";
    return nullptr;
  }
  // A model file gives back its pages as its tensors are parsed (half the
  // memory of reading it whole first).
  if (ext == ".onnx" && llvm::sys::fs::is_regular_file(path))
    return importOnnxFile(path, &context, options.import);
  auto file = readInputFile(path);
  if (!file) {
    emitError(loc) << "moe-compile: " << llvm::toString(file.takeError());
    return nullptr;
  }
  if (ext == ".mlir") {
    if (llvm::Error error = checkMlirNesting((*file)->getBuffer())) {
      emitError(loc) << "moe-compile: " << llvm::toString(std::move(error));
      return nullptr;
    }
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
    return parseSourceFile<ModuleOp>(sourceMgr, &context);
  }
  if (ext == ".onnx")
    return importOnnx((*file)->getMemBufferRef(), &context, options.import);
  return importTorchScript((*file)->getMemBufferRef(), &context,
                           options.import);
}

/// Frees the bytes of every resource blob (weights) that no attribute of
/// `module` refers to any more: the context keeps a blob after the last
/// constant that used it is rewritten (raised, packed, folded), and a
/// model's weights would otherwise stay in memory beside their new forms.
static void releaseUnusedWeights(ModuleOp module) {
  llvm::DenseSet<DialectResourceBlobManager::BlobEntry *> used;
  module->walk([&](Operation *op) {
    op->getAttrDictionary().walk([&](DenseResourceElementsAttr attr) {
      used.insert(attr.getRawHandle().getResource());
    });
  });
  DialectResourceBlobManager &blobs =
      DenseResourceElementsHandle::getManagerInterface(module.getContext())
          .getBlobManager();
  SmallVector<std::string> unused;
  blobs.getBlobMap([&](const llvm::StringMap<
                       DialectResourceBlobManager::BlobEntry> &map) {
    for (const auto &entry : map)
      if (entry.second.getBlob() &&
          !used.contains(const_cast<DialectResourceBlobManager::BlobEntry *>(
              &entry.second)))
        unused.push_back(entry.first().str());
  });
  for (const std::string &name : unused)
    blobs.lookup(name)->setBlob(AsmResourceBlob());
}

/// Runs `pipeline`, a comma-separated list of passes on the module, then
/// frees the weights it left unused.
static LogicalResult runPipeline(ModuleOp module, const Twine &pipeline) {
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  reportSilentPassFailures(pm);
  std::string error;
  llvm::raw_string_ostream errorStream(error);
  if (failed(parsePassPipeline(pipeline.str(), pm, errorStream)))
    return module.emitError("moe-compile: ") << error;
  if (failed(pm.run(module)))
    return failure();
  releaseUnusedWeights(module);
  return success();
}

static LogicalResult writeOutput(StringRef path, StringRef data,
                                 Location loc) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
  if (!file)
    return emitError(loc) << "moe-compile: " << error;
  file->os() << data;
  file->keep();
  return success();
}

static LogicalResult writeModule(ModuleOp module, StringRef path) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return writeOutput(path, text, module.getLoc());
}

/// Compiled programs take static shapes: a dynamic model input needs its
/// shape on the command line.
static LogicalResult checkStaticInputs(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func.isPublic() || func.isExternal())
      continue;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (tensor && tensor.hasStaticShape())
        continue;
      auto name = func.getArgAttrOfType<StringAttr>(i, "onnx.name");
      std::string shown = name ? name.str() : "input" + std::to_string(i);
      return func.emitError("moe-compile: input '")
             << shown << "' has type " << type
             << "; give its shape with --input-shape " << shown
             << "=D0xD1x...";
    }
  }
  return success();
}

/// What moe-raise's checks did (its `moe.raise_validation`), on stderr,
/// and the attribute dropped.
static void reportValidation(ModuleOp module) {
  auto report = module->getAttrOfType<DictionaryAttr>("moe.raise_validation");
  if (!report)
    return;
  module->removeAttr("moe.raise_validation");
  int64_t checked = cast<IntegerAttr>(report.get("checked")).getInt();
  int64_t unchecked = cast<IntegerAttr>(report.get("unchecked")).getInt();
  int64_t refused = cast<IntegerAttr>(report.get("refused")).getInt();
  if (checked + unchecked + refused == 0)
    return;
  llvm::errs() << llvm::formatv(
      "moe-compile: checked {0} raised MoE blocks against their ops on "
      "sample tokens in {1:f2} s",
      checked + refused,
      cast<FloatAttr>(report.get("seconds")).getValueAsDouble());
  if (refused)
    llvm::errs() << "; " << refused
                 << " stay unraised: they differed from their ops, or their "
                    "form is raised only where checked and the check could "
                    "not run (see the remarks)";
  if (unchecked)
    llvm::errs() << "; " << unchecked << " raised unchecked: "
                 << cast<StringAttr>(report.get("reason")).getValue();
  llvm::errs() << "\n";
}

/// What the training step trains and what it leaves (moe-autodiff's
/// `moe.param` results and `moe.frozen`), on stderr: a weight silently not
/// trained is what a user cannot see otherwise.
static void reportTraining(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr("moe.train_step"))
      continue;
    int64_t params = 0, elements = 0, bytes = 0;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      if (!func.getResultAttr(i, "moe.param"))
        continue;
      auto type = cast<ShapedType>(func.getResultTypes()[i]);
      ++params;
      elements += type.getNumElements();
      bytes += type.getNumElements() *
               llvm::divideCeil(type.getElementTypeBitWidth(), 8);
    }
    llvm::errs() << "moe-compile: training " << params << " parameters ("
                 << elements << " elements, " << bytes << " bytes on this "
                 << "rank); ";
    auto frozen = func->getAttrOfType<ArrayAttr>("moe.frozen");
    if (!frozen || frozen.empty()) {
      llvm::errs() << "no named weight frozen\n";
      continue;
    }
    llvm::errs() << frozen.size() << " named weights frozen:";
    for (Attribute name : frozen.getValue().take_front(8))
      llvm::errs() << " " << cast<StringAttr>(name).getValue();
    if (frozen.size() > 8)
      llvm::errs() << " ...";
    llvm::errs() << "\n";
  }
}

LogicalResult mlir::moe::compileModel(MLIRContext &context,
                                      const CompileOptions &options) {
  OwningOpRef<ModuleOp> owned = loadModel(context, options);
  if (!owned)
    return failure();
  ModuleOp module = *owned;
  StringRef out = options.outputPath;
  if (options.emit == EmitStage::Import)
    return writeModule(module, out);
  if (failed(checkStaticInputs(module)))
    return failure();

  std::string raise = std::string("moe-raise{") +
                      (options.train ? "keep-weights=1 " : "") + "validate=" +
                      (options.validateRaising ? "1" : "0") +
                      (options.givenRouting ? " given-routing=1" : "") +
                      "},canonicalize";
  if (failed(runPipeline(module, raise)))
    return failure();
  reportValidation(module);
  if (options.emit == EmitStage::MoE)
    return writeModule(module, out);

  if (failed(runPipeline(module, std::string(options.train
                                                 ? "moe-static-shapes{keep-weights=1}"
                                                 : "moe-static-shapes") +
                                     ",moe-set-plan{" + options.planOptions +
                                     "}")))
    return failure();
  std::string placeExperts =
      options.redundantPerRank >= 0
          ? "moe-place-experts{redundant-per-rank=" +
                std::to_string(options.redundantPerRank) + "},"
          : "";
  // What each rank runs, its dense layers on its own tokens; for inference
  // with causal blocks, in zigzag order, so that each rank's queries see as
  // many keys as another's.
  bool zigzag = !options.train && options.causalBlockRows > 0;
  std::string partition =
      placeExperts + "moe-partition," +
      (options.sequenceParallel
           ? std::string("moe-sequence-parallel") +
                 (zigzag ? "{zigzag=1}," : ",")
           : std::string());
  if (options.train) {
    if (options.optimizer != "sgd" && options.optimizer != "adamw")
      return module.emitError("moe-compile: unknown --optimizer '")
             << options.optimizer << "' (sgd or adamw)";
    // Differentiated as each rank runs it: partitioned first.
    if (failed(runPipeline(
            module, "moe-decompose," + partition + "moe-autodiff{" +
                        options.autodiffOptions +
                        "},moe-pipeline-schedule{microbatches=" +
                        std::to_string(options.microbatches) +
                        "},canonicalize")))
      return failure();
  } else {
    std::string causal =
        options.causalBlockRows > 0
            ? "moe-causal-attention{block-rows=" +
                  std::to_string(options.causalBlockRows) + "},"
            : "";
    if (failed(runPipeline(module, partition + causal + "canonicalize")))
      return failure();
  }
  if (options.train)
    reportTraining(module);
  if (options.emit == EmitStage::SPMD)
    return writeModule(module, out);

  std::string entry;
  FailureOr<Bundle> bundle = describeProgram(module, entry);
  if (failed(bundle))
    return failure();
  // The manifest holds the names now; LLVM has no use for them.
  for (auto func : module.getOps<func::FuncOp>()) {
    func.removeArgAttrsAttr();
    func.removeResAttrsAttr();
  }
  if (options.train)
    bundle->manifest["training"] = llvm::json::Object{
        {"optimizer", options.optimizer}};
  // The weights go straight to a file: the bundle's, moved into place
  // once it is complete, or a temporary one when only code is emitted.
  SmallString<256> weightsPath;
  if (options.emit == EmitStage::Library) {
    if (std::error_code ec = llvm::sys::fs::create_directories(out))
      return module.emitError("moe-compile: cannot create '")
             << out << "': " << ec.message();
    weightsPath = out;
    llvm::sys::path::append(weightsPath, "weights.bin.partial");
  } else if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
                 "moe-compile-weights", "bin", weightsPath)) {
    return module.emitError("moe-compile: cannot create a temporary file: ")
           << ec.message();
  }
  llvm::FileRemover removeWeights(weightsPath);
  // A training step updates every parameter between calls, however small.
  if (failed(runPipeline(module, options.train
                                     ? "moe-externalize-weights{min-elements=2}"
                                     : "moe-externalize-weights")) ||
      failed(packWeights(module, *bundle, weightsPath)))
    return failure();
  embedManifest(module, *bundle, options.cuda ? "cuda" : "cpu");
  if (failed(runPipeline(module,
                         (options.cuda
                              ? std::string("moe-lower-to-gpu{instrument=1 ") +
                                    (options.streamOrder ? "" : "stream-order=0 ") +
                                    "entry="
                              : "moe-lower-to-llvm{runtime=1 instrument=1 entry=") +
                             entry + "}")))
    return failure();

  bool text = options.emit == EmitStage::LLVM;
  FailureOr<std::string> code =
      emitNativeCode(module, options.optLevel, text);
  if (failed(code))
    return failure();
  if (options.emit != EmitStage::Library)
    return writeOutput(out, *code, module.getLoc());

  // The bundle directory: the library, its weights and the manifest.
  SmallString<256> object(out), library(out);
  llvm::sys::path::append(object, "model.o");
  llvm::sys::path::append(library, "model.so");
  if (failed(writeOutput(object, *code, module.getLoc())) ||
      failed(linkSharedLibrary(object, library, module.getLoc())))
    return failure();
  llvm::sys::fs::remove(object);
  return writeBundle(*bundle, out, module.getLoc());
}
