//===- GatheredExperts.h - the batched form, weights per pick --*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_GATHEREDEXPERTS_H
#define MOE_PASSES_RAISE_GATHEREDEXPERTS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::moe::raise {

void populateGatheredExpertsPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_GATHEREDEXPERTS_H
