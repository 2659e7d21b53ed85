//===- DenseExperts.h - the dense fallback form -----------------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_DENSEEXPERTS_H
#define MOE_PASSES_RAISE_DENSEEXPERTS_H

#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {

void populateDenseExpertsPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_DENSEEXPERTS_H
