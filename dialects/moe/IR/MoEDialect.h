//===- MoEDialect.h - moe dialect -------------------------------*- C++ -*-===//

#ifndef MOE_DIALECTS_MOE_IR_MOEDIALECT_H
#define MOE_DIALECTS_MOE_IR_MOEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/moe/IR/MoEDialect.h.inc"

#endif // MOE_DIALECTS_MOE_IR_MOEDIALECT_H
