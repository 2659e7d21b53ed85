//===- VectorizableMath.cpp - float code the host compiler can vectorize --===//
//
// After linalg becomes loops, the elementwise and reduction loops (softmax,
// normalisation, activations, the router) are left to LLVM's loop
// vectorizer. Two things stop it: a reduction of floats may not be reordered
// without `reassoc`, and a call to libm's expf cannot be widened (and its
// error path is slow on the underflows of masked softmax entries). This pass
// marks float arithmetic `reassoc contract afn` and expands exp, tanh and erf
// into branch-free polynomials, which vectorize and saturate without calls.
// Infinities and NaNs keep their meaning: no `ninf`/`nnan`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEVECTORIZABLEMATHPASS
#include "passes/Passes.h.inc"

namespace {

struct MoEVectorizableMathPass
    : public impl::MoEVectorizableMathPassBase<MoEVectorizableMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) {
          return name == math::ExpOp::getOperationName() ||
                 name == math::TanhOp::getOperationName() ||
                 name == math::ErfOp::getOperationName();
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();

    auto relaxed = arith::FastMathFlags::reassoc |
                   arith::FastMathFlags::contract | arith::FastMathFlags::afn;
    getOperation()->walk([&](arith::ArithFastMathInterface op) {
      StringRef name = op.getFastMathAttrName();
      auto flags = op->getAttrOfType<arith::FastMathFlagsAttr>(name);
      arith::FastMathFlags current =
          flags ? flags.getValue() : arith::FastMathFlags::none;
      op->setAttr(name, arith::FastMathFlagsAttr::get(op->getContext(),
                                                       current | relaxed));
    });
  }
};

} // namespace
} // namespace mlir::moe
