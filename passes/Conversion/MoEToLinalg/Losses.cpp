//===- Losses.cpp - lower moe.aux_loss and moe.z_loss --------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"

namespace mlir::moe::lowering {

void populateLossPatterns(RewritePatternSet &patterns) {}

} // namespace mlir::moe::lowering
