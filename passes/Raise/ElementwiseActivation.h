//===- ElementwiseActivation.h - activations no kind names ------*- C++ -*-===//
//
// Internal to passes/Raise. An expert's activation that is none of the
// named kinds (Nemotron-H's squared ReLU, a clamp, a shifted sigmoid) is
// still elementwise onnx ops on the up projection alone; the FFN matchers
// take it as a custom activation, whose scalar body is built from those ops
// by the onnx lowering's own scalar forms.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_RAISE_ELEMENTWISEACTIVATION_H
#define MOE_PASSES_RAISE_ELEMENTWISEACTIVATION_H

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::moe::raise {

/// Elementwise onnx ops that compute `result` from one value, `source`, and
/// one-element constants, every value of `result`'s shape.
struct ElementwiseChain {
  Value source, result;
  SmallVector<Operation *> ops; // defs before uses
};

/// The chain computing `result`; the source is the one value it reads that
/// is not computed that way (an op of another kind, or one reading a
/// constant of more than one element, such as a bias). Nullopt when it
/// reads two such values, or when `result` is one.
std::optional<ElementwiseChain> matchElementwiseChain(Value result);

/// `chain` as `#moe.activation<custom @f>`: `@f` a scalar function written
/// into the module that holds `anchor` (one function per distinct body),
/// built from each op's scalar form. A match failure, at `anchor`, where an
/// op has none, the backward could not differentiate it, or moe-raise does
/// not run on the module.
FailureOr<ActivationAttr> customActivation(const ElementwiseChain &chain,
                                           Operation *anchor,
                                           PatternRewriter &rewriter);

/// The custom activation of `activated` where it is a chain on `up` (as
/// both are read, through no-ops); nullopt otherwise.
std::optional<ActivationAttr> matchCustomActivation(Value activated, Value up,
                                                    Operation *anchor,
                                                    PatternRewriter &rewriter);

/// Discardable unit attribute that moe-raise puts on the module it runs on
/// while it runs: only then may a pattern add activation bodies to it.
inline constexpr StringLiteral kRaiseModuleAttrName = "moe.raise_module";

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_ELEMENTWISEACTIVATION_H
