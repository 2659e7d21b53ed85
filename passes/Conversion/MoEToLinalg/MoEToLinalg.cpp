//===- MoEToLinalg.cpp - the convert-moe-to-linalg pass -------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "passes/Passes.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETOLINALGPASS
#include "passes/Passes.h.inc"

namespace {

struct ConvertMoEToLinalgPass
    : public impl::ConvertMoEToLinalgPassBase<ConvertMoEToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // Say what is missing instead of a bare "failed to legalize".
    WalkResult unsupported = getOperation()->walk([](Operation *op) {
      if (isa<LayerOp>(op)) {
        op->emitOpError("must be decomposed first (run moe-decompose)");
        return WalkResult::interrupt();
      }
      if (auto exchange = dyn_cast<AllToAllOp>(op)) {
        int64_t ranks = exchange.getGroupSize();
        if (ranks != 1) {
          exchange.emitOpError()
              << "exchanges rows between " << ranks
              << " ranks; only the communication lowering handles that";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<MoEDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    populateMoEToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // The lowerings inlined the custom activations' bodies.
    eraseUnusedActivationBodies(getOperation());
  }
};

} // namespace

void populateMoEToLinalgPatterns(RewritePatternSet &patterns) {
  lowering::populateRouterPatterns(patterns);
  lowering::populateDispatchPatterns(patterns);
  lowering::populateExpertsPatterns(patterns);
  lowering::populateLossPatterns(patterns);
  lowering::populateExpertsGradPatterns(patterns);
  lowering::populatePlacementPatterns(patterns);
}

} // namespace mlir::moe
