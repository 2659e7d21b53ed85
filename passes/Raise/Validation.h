//===- Validation.h - raised blocks checked against their ops ---*- C++ -*-===//
//
// Translation validation of moe-raise: before a pattern puts a raised op in
// place of the ops it recognised, both are evaluated on the same sample
// tokens (a module of their own, lowered by the reference lowering and run
// natively, or interpreted), and a block whose results differ is left as
// it was. The evaluation itself lives outside the passes
// (lib/Evaluate, which the tools register): the passes only build the
// module to evaluate.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_RAISE_VALIDATION_H
#define MOE_PASSES_RAISE_VALIDATION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::moe::raise {

/// Runs a module's `@moe_raise_check` (no arguments, f32 results of static
/// shapes after `moe-static-shapes`) and returns each result's elements in
/// row-major order; failure with why in `error`.
using ModuleEvaluator = std::function<FailureOr<std::vector<std::vector<float>>>(
    ModuleOp module, std::string &error)>;

/// Installs the evaluator the checks use (lib/Evaluate's, from the tools'
/// registration); without one, blocks are raised unchecked.
void setModuleEvaluator(ModuleEvaluator evaluator);

/// Discardable unit attribute that moe-raise{validate} puts on the op it
/// runs on while it runs: the patterns then check what they raise.
inline constexpr StringLiteral kValidateAttrName = "moe.validate_raising";

/// The counts moe-raise{validate} leaves on the module it ran on, for the
/// tools to report: a dictionary of `checked`, `unchecked` and `refused`
/// (i64), `seconds` (f64) and `reason` (why the first unchecked block was
/// not checked).
inline constexpr StringLiteral kValidationReportAttrName =
    "moe.raise_validation";

/// Checks that `replacement` (built, not yet in use) computes what
/// `original` computes from the same `leaves` (the block's tokens, then its
/// router logits, sampled where the block does not compute them from the
/// tokens): success when they agree, or when the check cannot run
/// (counted as unchecked) unless `requireCheck`; a match failure naming the
/// difference, with a remark at `original`, when they differ. Does nothing
/// unless the pass asked for checks (kValidateAttrName on an ancestor of
/// `anchor`), and then fails where `requireCheck`.
LogicalResult checkRaisedBlock(Value original, Value replacement,
                               ArrayRef<Value> leaves, Operation *anchor,
                               PatternRewriter &rewriter,
                               bool requireCheck = false);

/// Discardable unit attribute that moe-raise{given-routing} puts on the op
/// it runs on while it runs: every router is then raised as `given`.
inline constexpr StringLiteral kGivenRoutingAttrName = "moe.given_routing";

/// Whether the pass asked for checks (kValidateAttrName on an ancestor).
bool validationRequested(Operation *op);
/// Whether the pass asked for given routing everywhere.
bool givenRoutingRequested(Operation *op);

/// A block refused at `anchor` (its results differed, or it had to be
/// checked and could not be) is not matched again in the same run: the
/// patterns build weights before the check, and a retry would build them
/// again forever. takeValidationCounts forgets the refusals.
void markRefused(Operation *anchor);
bool wasRefused(Operation *anchor);
/// The last refusal is not counted: the block is tried again another way.
void retryRefused();

/// Counters of the checks made since the last call, moved out.
struct ValidationCounts {
  int64_t checked = 0, unchecked = 0, refused = 0;
  double seconds = 0;
  std::string reason;
};
ValidationCounts takeValidationCounts();

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_VALIDATION_H
