//===- SharedExpert.h - fold shared experts into moe.layer ------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_SHAREDEXPERT_H
#define MOE_PASSES_RAISE_SHAREDEXPERT_H

#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {

void populateSharedExpertPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_SHAREDEXPERT_H
