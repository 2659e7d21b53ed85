//===- MoEOps.h - moe dialect ops and attributes ----------------*- C++ -*-===//

#ifndef MOE_DIALECTS_MOE_IR_MOEOPS_H
#define MOE_DIALECTS_MOE_IR_MOEOPS_H

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

#endif // MOE_DIALECTS_MOE_IR_MOEOPS_H
