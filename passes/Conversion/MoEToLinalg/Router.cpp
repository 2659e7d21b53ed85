//===- Router.cpp - lower moe.router --------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"

namespace mlir::moe::lowering {

void populateRouterPatterns(RewritePatternSet &patterns) {}

} // namespace mlir::moe::lowering
