//===- Raise.cpp - the moe-raise pass -------------------------------------===//

#include "passes/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/CapacityEinsum.h"
#include "passes/Raise/ChoiceCapacity.h"
#include "passes/Raise/DenseExperts.h"
#include "passes/Raise/ExpertLoop.h"
#include "passes/Raise/GatheredExperts.h"
#include "passes/Raise/SharedExpert.h"
#include "passes/Raise/SortedExperts.h"
#include "passes/Raise/Validation.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOERAISEPASS
#include "passes/Passes.h.inc"

namespace {

/// Reports the loop-form blocks that kept only some of their experts; true
/// when there was one.
static bool reportIncompleteBlocks(Operation *root) {
  bool found = false;
  PatternRewriter rewriter(root->getContext());
  root->walk([&](onnx::TopKOp topk) {
    // The experts the loop holds: mask rows of a one-hot, or `ids == e`.
    int64_t experts = 0;
    SmallVector<std::optional<int64_t>> held;
    FailureOr<raise::ExpertMaskMatch> match =
        raise::matchExpertMask(topk, rewriter);
    if (succeeded(match)) {
      if (match->isComplete())
        return;
      experts = match->router.numExperts;
      held = match->indices;
    } else if (FailureOr<raise::RouterMatch> router =
                   raise::matchRouter(topk, rewriter);
               succeeded(router)) {
      auto masks = raise::matchWhereMasks(*router, topk, rewriter);
      if (failed(masks) ||
          static_cast<int64_t>(masks->size()) == router->numExperts)
        return;
      experts = router->numExperts;
      for (auto &[expert, mask] : *masks)
        held.push_back(expert);
      llvm::sort(held);
    } else {
      return;
    }
    found = true;
    InFlightDiagnostic diag = topk.emitError()
                              << "the MoE block routes to " << experts
                              << " experts but the graph holds "
                              << held.size() << " expert FFN"
                              << (held.size() == 1 ? "" : "s");
    if (llvm::all_of(held,
                     [](std::optional<int64_t> index) { return index; })) {
      diag << " (";
      llvm::interleaveComma(held, diag, [&](std::optional<int64_t> index) {
        diag << *index;
      });
      diag << ")";
    }
    diag << ": a traced export keeps only the experts its sample input "
            "reached; export with a loop over every expert";
  });
  return found;
}

/// Turns the patterns' match-failure reasons into remarks (once per place
/// and reason: the driver retries patterns).
struct ExplainListener : public RewriterBase::Listener {
  void notifyMatchFailure(
      Location loc, function_ref<void(Diagnostic &)> reasonCallback) override {
    Diagnostic reason(loc, DiagnosticSeverity::Remark);
    reasonCallback(reason);
    std::string key;
    llvm::raw_string_ostream os(key);
    os << loc << reason.str();
    if (seen.insert(key).second)
      emitRemark(loc) << "not raised: " << reason.str();
  }
  llvm::StringSet<> seen;
};

/// The keys of the dense_resource data that `root`'s attributes hold,
/// inherent and discardable, however deep.
llvm::StringSet<> resourceKeys(Operation *root) {
  llvm::StringSet<> keys;
  auto collect = [&](DenseResourceElementsAttr resource) {
    keys.insert(resource.getRawHandle().getKey());
  };
  root->walk([&](Operation *op) {
    op->getRawDictionaryAttrs().walk(collect);
    if (Attribute properties = op->getPropertiesAsAttribute())
      properties.walk(collect);
  });
  return keys;
}

/// Frees the data of the weights that raising replaced (each expert's,
/// now packed into one weight for all experts): nothing refers to them any
/// more, and the context would keep them, a second copy of a model's
/// experts, until it ends.
void releaseReplacedWeights(MLIRContext *context,
                            const llvm::StringSet<> &before,
                            const llvm::StringSet<> &after) {
  DialectResourceBlobManager &blobs =
      DenseResourceElementsHandle::getManagerInterface(context)
          .getBlobManager();
  for (const auto &key : before)
    if (!after.contains(key.getKey()))
      blobs.update(key.getKey(), AsmResourceBlob());
}

/// Leaves the checks' counts on `root` for the tools to report (and on a
/// module that holds some, adds to them).
void reportValidation(Operation *root, const raise::ValidationCounts &counts) {
  MLIRContext *ctx = root->getContext();
  Builder b(ctx);
  int64_t checked = counts.checked, unchecked = counts.unchecked,
          refused = counts.refused;
  double seconds = counts.seconds;
  std::string reason = counts.reason;
  if (auto old = root->getAttrOfType<DictionaryAttr>(
          raise::kValidationReportAttrName)) {
    checked += cast<IntegerAttr>(old.get("checked")).getInt();
    unchecked += cast<IntegerAttr>(old.get("unchecked")).getInt();
    refused += cast<IntegerAttr>(old.get("refused")).getInt();
    seconds += cast<FloatAttr>(old.get("seconds")).getValueAsDouble();
    if (auto r = old.getAs<StringAttr>("reason"); r && !r.empty())
      reason = r.str();
  }
  root->setAttr(raise::kValidationReportAttrName,
                b.getDictionaryAttr({
                    b.getNamedAttr("checked", b.getI64IntegerAttr(checked)),
                    b.getNamedAttr("unchecked", b.getI64IntegerAttr(unchecked)),
                    b.getNamedAttr("refused", b.getI64IntegerAttr(refused)),
                    b.getNamedAttr("seconds", b.getF64FloatAttr(seconds)),
                    b.getNamedAttr("reason", b.getStringAttr(reason)),
                }));
}

struct MoERaisePass : public impl::MoERaisePassBase<MoERaisePass> {
  using Base::Base;

  void runOnOperation() override {
    // Exporters repeat computations (a Reshape of the input per use); the
    // matchers compare values, so merge the repeats first.
    IRRewriter cseRewriter(&getContext());
    eliminateCommonSubExpressions(cseRewriter, getAnalysis<DominanceInfo>(),
                                  getOperation());
    RewritePatternSet patterns(&getContext());
    raise::populateDenseExpertsPatterns(patterns);
    raise::populateExpertLoopPatterns(patterns);
    raise::populateCapacityEinsumPatterns(patterns);
    raise::populateChoiceCapacityPatterns(patterns);
    raise::populateSortedExpertsPatterns(patterns);
    raise::populateGatheredExpertsPatterns(patterns);
    raise::populateSharedExpertPatterns(patterns);
    Operation *root = getOperation();
    if (keepWeights)
      root->setAttr(raise::kKeepWeightsAttrName, UnitAttr::get(&getContext()));
    if (validate)
      root->setAttr(raise::kValidateAttrName, UnitAttr::get(&getContext()));
    if (givenRouting)
      root->setAttr(raise::kGivenRoutingAttrName, UnitAttr::get(&getContext()));
    // Custom activations add their bodies to the module: only a pass on the
    // whole module may.
    if (isa<ModuleOp>(root))
      root->setAttr(raise::kRaiseModuleAttrName, UnitAttr::get(&getContext()));
    llvm::scope_exit restore([&] {
      root->removeAttr(raise::kRaiseModuleAttrName);
      root->removeAttr(raise::kKeepWeightsAttrName);
      root->removeAttr(raise::kValidateAttrName);
      root->removeAttr(raise::kGivenRoutingAttrName);
    });
    (void)raise::takeValidationCounts();
    ExplainListener listener;
    GreedyRewriteConfig config;
    if (explain)
      config.setListener(&listener);
    llvm::StringSet<> weightsBefore;
    if (isa<ModuleOp>(root))
      weightsBefore = resourceKeys(root);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      return signalPassFailure();
    // Only a whole module sees every use of its weights, and every use of
    // the activation bodies that blocks not raised after all left behind.
    if (isa<ModuleOp>(root)) {
      releaseReplacedWeights(&getContext(), weightsBefore, resourceKeys(root));
      eraseUnusedActivationBodies(root);
    }
    if (reportIncompleteBlocks(getOperation()))
      return signalPassFailure();
    if (validate)
      reportValidation(root, raise::takeValidationCounts());
  }
};

} // namespace
} // namespace mlir::moe
