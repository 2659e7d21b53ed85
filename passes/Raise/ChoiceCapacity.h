//===- ChoiceCapacity.h - GShard's top-k einsum form -------------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_CHOICECAPACITY_H
#define MOE_PASSES_RAISE_CHOICECAPACITY_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::moe::raise {

void populateChoiceCapacityPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_CHOICECAPACITY_H
