//===- Dispatch.cpp - lower dispatch, combine, all_to_all -----------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"

namespace mlir::moe::lowering {

void populateDispatchPatterns(RewritePatternSet &patterns) {}

} // namespace mlir::moe::lowering
