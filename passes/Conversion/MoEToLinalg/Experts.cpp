//===- Experts.cpp - lower moe.experts and moe.shared_expert --------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"

namespace mlir::moe::lowering {

void populateExpertsPatterns(RewritePatternSet &patterns) {}

} // namespace mlir::moe::lowering
