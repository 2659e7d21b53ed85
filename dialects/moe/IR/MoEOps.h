//===- MoEOps.h - moe dialect ops and attributes ----------------*- C++ -*-===//

#ifndef MOE_DIALECTS_MOE_IR_MOEOPS_H
#define MOE_DIALECTS_MOE_IR_MOEOPS_H

#include "dialects/Common/BufferBounds.h"
#include "dialects/moe/IR/MoEDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/moe/IR/MoEEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/moe/IR/MoEAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/moe/IR/MoEOps.h.inc"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace mlir::moe {
/// Whether `op` may stand in a custom activation's body: a scalar
/// arithmetic or math op whose derivative moe-to-linalg builds (the
/// backward), a comparison or select, a float cast, or the return.
bool isActivationBodyOp(Operation *op);

/// The `func.func` a custom activation names, looked up from `from`; null
/// for a named kind or a missing body.
func::FuncOp lookupActivationBody(Operation *from, ActivationAttr activation);

/// Discardable unit attribute on the functions moe-raise writes as custom
/// activation bodies, so that the ones no op names any more can be erased.
inline constexpr StringLiteral kActivationBodyAttrName = "moe.activation_body";

/// Erases the activation bodies in `symbolTable` (an op with the SymbolTable
/// trait; others are left alone) that no op names.
void eraseUnusedActivationBodies(Operation *symbolTable);

/// Ranks in the group spanned by `axes` of the `shard.grid` named `grid`, or
/// 0 when the grid cannot be found, an axis is out of range or dynamic, or
/// the product overflows.
int64_t getGroupSize(Operation *op, FlatSymbolRefAttr grid,
                     ArrayRef<int16_t> axes);

/// Discardable attribute (DenseI16ArrayAttr) that moe-partition puts on
/// routers and dispatches: the grid axes over which ranks hold copies of the
/// same data, so that statistics count each token once.
inline constexpr StringLiteral kReplicasAttrName = "moe.replicas";
/// On moe.experts whose groups are slots (moe-place-experts): the layer's
/// logical expert count, which the lowering's choices go by.
inline constexpr StringLiteral kLogicalExpertsAttrName = "moe.logical_experts";

/// Discardable unit attribute that moe-autodiff puts on the moe ops of a
/// backward program that are not a layer's forward (the combine that sums
/// a dispatch's cotangents), so that per-layer statistics skip them.
inline constexpr StringLiteral kBackwardAttrName = "moe.backward";
} // namespace mlir::moe

#endif // MOE_DIALECTS_MOE_IR_MOEOPS_H
