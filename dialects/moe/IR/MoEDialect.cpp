//===- MoEDialect.cpp - moe dialect registration --------------------------===//

#include "dialects/moe/IR/MoEDialect.h"
#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

#include "dialects/moe/IR/MoEDialect.cpp.inc"
#include "dialects/moe/IR/MoEEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/moe/IR/MoEAttrs.cpp.inc"

void MoEDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/moe/IR/MoEAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/moe/IR/MoEOps.cpp.inc"
      >();
}

Operation *MoEDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}
