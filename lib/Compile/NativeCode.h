//===- NativeCode.h - LLVM dialect to object code and a library -*- C++ -*-===//
//
// Internal to lib/Compile.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_COMPILE_NATIVECODE_H
#define MOE_LIB_COMPILE_NATIVECODE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::moe {

/// Translates an LLVM dialect module, optimizes it at `optLevel` for the
/// host CPU and returns LLVM IR text (`asText`) or an ELF object.
FailureOr<std::string> emitNativeCode(ModuleOp module, unsigned optLevel,
                                      bool asText);

/// Links `object` into the shared library `library` with lld.
LogicalResult linkSharedLibrary(StringRef object, StringRef library,
                                Location loc);

} // namespace mlir::moe

#endif // MOE_LIB_COMPILE_NATIVECODE_H
