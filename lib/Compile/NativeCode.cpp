//===- NativeCode.cpp - LLVM dialect to object code and a library ---------===//

#include "NativeCode.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/IPO/LoopExtractor.h"
#include "llvm/Transforms/IPO/MergeFunctions.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;

/// A target machine for this host, position independent (the code goes
/// into a shared library).
static std::unique_ptr<llvm::TargetMachine> hostMachine(unsigned optLevel,
                                                        std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::SubtargetFeatures features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.first(), feature.second);
  llvm::CodeGenOptLevel level = optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
                                : optLevel == 0 ? llvm::CodeGenOptLevel::None
                                                : llvm::CodeGenOptLevel::Default;
  llvm::TargetOptions options;
  // Constructors (the GPU modules' loads) go to .init_array, which the
  // dynamic loader runs; .ctors needs crt files the library is linked
  // without.
  options.UseInitArray = true;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(), options,
      llvm::Reloc::PIC_, std::nullopt, level));
}

FailureOr<std::string> mlir::moe::emitNativeCode(ModuleOp module,
                                                 unsigned optLevel,
                                                 bool asText) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = hostMachine(optLevel, error);
  if (!machine)
    return module.emitError("moe-compile: no code generator for this host: ")
           << error;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "moe-program");
  if (!llvmModule)
    return module.emitError("moe-compile: translation to LLVM IR failed");
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  // The entry runs every layer in one function, whose size LLVM's function
  // passes (scalar evolution, dominator walks) take superlinear time over:
  // 9.5 of 12.5 s for 64 MoE layers. Each top-level loop nest becomes a
  // function of its own that the inliner leaves alone (a call per loop
  // nest costs nothing beside its work), and identical ones, the same
  // loops of every layer, become one: each is optimized once.
  if (optLevel > 0) {
    std::vector<llvm::Function *> before;
    for (llvm::Function &f : *llvmModule)
      before.push_back(&f);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(machine.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager extract;
    extract.addPass(llvm::LoopExtractorPass());
    extract.run(*llvmModule, mam);
    for (llvm::Function &f : *llvmModule)
      if (!f.isDeclaration() && !llvm::is_contained(before, &f))
        f.addFnAttr(llvm::Attribute::NoInline);
    llvm::ModulePassManager merge;
    merge.addPass(llvm::MergeFunctionsPass());
    merge.run(*llvmModule, mam);
  }
  if (llvm::Error err = makeOptimizingTransformer(optLevel, /*sizeLevel=*/0,
                                                  machine.get())(
          llvmModule.get()))
    return module.emitError("moe-compile: LLVM optimization failed: ")
           << llvm::toString(std::move(err));

  std::string result;
  llvm::raw_string_ostream os(result);
  if (asText) {
    llvmModule->print(os, nullptr);
    return result;
  }
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream objectStream(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, objectStream, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("moe-compile: this host's code generator cannot "
                            "emit object files");
  codegen.run(*llvmModule);
  return std::string(object.begin(), object.end());
}

LogicalResult mlir::moe::linkSharedLibrary(StringRef object,
                                           StringRef library, Location loc) {
  // Debian names lld by version; the unversioned name is an alternative.
  std::string linker;
  for (StringRef name : {"ld.lld-22", "ld.lld"}) {
    if (auto found = llvm::sys::findProgramByName(name)) {
      linker = *found;
      break;
    }
    if (auto found =
            llvm::sys::findProgramByName(name, {"/usr/lib/llvm-22/bin"})) {
      linker = *found;
      break;
    }
  }
  if (linker.empty())
    return emitError(loc) << "moe-compile: no ld.lld found to link '"
                          << library << "' (install lld-22)";
  // moert_* resolve against moe-run when it loads the library. libm is
  // linked so that expf and friends bind to their current symbol versions:
  // left unbound they resolve to the oldest (expf@GLIBC_2.2.5), whose error
  // handling makes every underflow (masked softmax entries) slow.
  llvm::Triple host(llvm::sys::getProcessTriple());
  std::string multiarch =
      (host.getArchName() + "-" + host.getOSName() + "-gnu").str();
  if (host.getOS() == llvm::Triple::Linux)
    multiarch = (host.getArchName() + "-linux-gnu").str();
  std::string usrLib = "-L/usr/lib/" + multiarch, lib = "-L/lib/" + multiarch;
  SmallVector<StringRef> args{linker, "-shared", "--as-needed", "-O1",
                              "-o",   library,   object,        usrLib,
                              lib,    "-L/usr/lib", "-lm"};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 0, 0,
                                         &error);
  if (status != 0)
    return emitError(loc) << "moe-compile: linking '" << library
                          << "' failed"
                          << (error.empty() ? "" : ": " + error);
  return success();
}
