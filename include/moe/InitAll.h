//===- InitAll.h - registration shared by every moe tool --------*- C++ -*-===//
//
// One place that says which dialects, extensions, passes and pipelines the
// tools know: the moe ones and exactly the upstream pieces our pipelines and
// tests use.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_INITALL_H
#define MOE_INITALL_H

namespace mlir {
class PassManager;
class DialectRegistry;
namespace moe {

/// The moe and onnx dialects and the upstream dialects that moe programs and their
/// lowerings contain.
void registerAllDialects(DialectRegistry &registry);

/// External interface models (bufferization, deallocation) those dialects
/// need in our pipelines.
void registerAllExtensions(DialectRegistry &registry);

/// The moe passes, the named pipelines, and the upstream passes the tests and
/// pipelines use.
void registerAllPasses();

/// Makes every pass failure in `pm` end with an error that says why: when a
/// pass fails without emitting an error of its own, one naming the pass and
/// the op it ran on is emitted for it. Every tool's pass managers use it.
void reportSilentPassFailures(PassManager &pm);

} // namespace moe
} // namespace mlir

#endif // MOE_INITALL_H
