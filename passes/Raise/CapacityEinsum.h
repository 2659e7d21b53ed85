//===- CapacityEinsum.h - the GShard/Switch einsum form ---------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_CAPACITYEINSUM_H
#define MOE_PASSES_RAISE_CAPACITYEINSUM_H

#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {

void populateCapacityEinsumPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_CAPACITYEINSUM_H
