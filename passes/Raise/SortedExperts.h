//===- SortedExperts.h - the grouped form of MoE blocks ---------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_SORTEDEXPERTS_H
#define MOE_PASSES_RAISE_SORTEDEXPERTS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::moe::raise {

void populateSortedExpertsPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_SORTEDEXPERTS_H
