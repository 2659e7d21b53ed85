//===- Passes.h - moe passes ------------------------------------*- C++ -*-===//

#ifndef MOE_PASSES_PASSES_H
#define MOE_PASSES_PASSES_H

#include "dialects/moe/IR/MoEDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace moe {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The module attribute in which moe-gpu-device-memory lists the globals
/// that no host code dereferences; moe-device-globals consumes it.
constexpr llvm::StringLiteral kDeviceGlobalsAttrName = "moe.device_globals";

/// Patterns that expand moe.layer into its parts.
void populateMoEDecomposePatterns(RewritePatternSet &patterns);

/// Patterns that lower moe ops to linalg/tensor/arith/math/scf.
void populateMoEToLinalgPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_PASSES_PASSES_H
