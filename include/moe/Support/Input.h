//===- Input.h - Reading outside data with bounds ---------------*- C++ -*-===//
//
// Every tool reads files that users, other tools or other ranks wrote: model
// files, configs, manifests. These readers bound what they take (size,
// nesting) and refuse what a plain reader would accept silently, so that bad
// input ends in one clear error rather than a hang, a stack overflow or a
// silently different meaning.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_SUPPORT_INPUT_H
#define MOE_SUPPORT_INPUT_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace mlir::moe {

/// The largest file read whole: protobuf's limit on one message, which no
/// model file or config may exceed.
constexpr uint64_t kMaxInputBytes = uint64_t(2) << 30;

/// Reads `path` ("-": standard input) whole. Refuses a directory, a device
/// (/dev/zero would never end), and a file or pipe longer than `maxBytes`: a
/// file before reading it, a pipe as soon as it passes the bound.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, uint64_t maxBytes = kMaxInputBytes);

/// The deepest JSON nesting accepted: far beyond any config or manifest, far
/// below what overflows the stack of LLVM's recursive parser.
constexpr unsigned kMaxJsonDepth = 64;

/// llvm::json::parse, which also refuses nesting deeper than `maxDepth` and
/// a key given twice in one object (where LLVM would keep the last one).
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text,
                                            unsigned maxDepth = kMaxJsonDepth);

/// The deepest bracket nesting ('{', '(', '[') accepted in MLIR text: far
/// beyond any program the tools write or read, far below what overflows the
/// stack of MLIR's recursive parser (regions inside ops inside regions).
constexpr unsigned kMaxMlirDepth = 256;

/// Refuses MLIR text whose brackets nest deeper than `maxDepth` (outside
/// string literals and comments), naming the line. Run before parsing.
llvm::Error checkMlirNesting(llvm::StringRef text,
                             unsigned maxDepth = kMaxMlirDepth);

/// "xxh3:<16 hex digits>": how bundles name the contents of their files, and
/// how ranks compare what they read.
std::string contentDigest(llvm::ArrayRef<uint8_t> bytes);

} // namespace mlir::moe

#endif // MOE_SUPPORT_INPUT_H
