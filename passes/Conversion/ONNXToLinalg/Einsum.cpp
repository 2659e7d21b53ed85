//===- Einsum.cpp - lower onnx.Einsum -------------------------------------===//
//
// An Einsum equation is a linalg.generic spelled in letters: one loop per
// letter (and per dim of the ellipsis, broadcast NumPy-style), each operand
// read through the loops of its term, the letters missing from the output
// reduced. Implicit outputs (no `->`) are the ellipsis, then the letters
// that appear once, in alphabetical order.
//
//===----------------------------------------------------------------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

namespace {
/// A term of an equation: its letters, and where its ellipsis is (-1: none).
struct Term {
  std::string letters;
  int64_t ellipsisAt = -1;
};
} // namespace

/// Parses one term (no spaces); fails on other characters or two ellipses.
static FailureOr<Term> parseTerm(StringRef text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("...")) {
      if (term.ellipsisAt >= 0)
        return failure();
      term.ellipsisAt = term.letters.size();
      i += 2;
    } else if (llvm::isAlpha(text[i])) {
      term.letters.push_back(text[i]);
    } else {
      return failure();
    }
  }
  return term;
}

FailureOr<EinsumSpec> parseEinsum(StringRef equation, ArrayRef<Shape> shapes,
                                  MLIRContext *ctx, std::string &why) {
  std::string compact;
  for (char c : equation)
    if (!llvm::isSpace(c))
      compact.push_back(c);
  auto [lhs, rhs] = StringRef(compact).split("->");
  bool explicitOutput = StringRef(compact).contains("->");
  SmallVector<StringRef> texts;
  lhs.split(texts, ',');
  if (texts.size() != shapes.size()) {
    why = "the equation has " + std::to_string(texts.size()) +
          " inputs, the op " + std::to_string(shapes.size());
    return failure();
  }
  SmallVector<Term> terms;
  for (StringRef text : texts) {
    FailureOr<Term> term = parseTerm(text);
    if (failed(term)) {
      why = "cannot parse the term '" + text.str() + "'";
      return failure();
    }
    terms.push_back(*term);
  }
  // The ellipsis dims: NumPy-broadcast over the operands that have them.
  SmallVector<Shape> ellipsisShapes;
  for (auto [term, shape] : llvm::zip(terms, shapes)) {
    int64_t extra = shape.size() - term.letters.size();
    if (extra < 0 || (term.ellipsisAt < 0 && extra != 0)) {
      why = "a term does not match its operand's rank";
      return failure();
    }
    ellipsisShapes.push_back(
        term.ellipsisAt < 0
            ? Shape()
            : Shape(ArrayRef(shape).slice(term.ellipsisAt, extra)));
  }
  FailureOr<Shape> ellipsis = broadcastShapes(ellipsisShapes);
  if (failed(ellipsis)) {
    why = "the ellipsis dims do not broadcast";
    return failure();
  }
  EinsumSpec spec;
  spec.loopSizes = *ellipsis;
  int64_t ellipsisRank = ellipsis->size();
  // One loop per letter, in order of first appearance.
  llvm::StringMap<unsigned> loopOf;
  llvm::StringMap<unsigned> count;
  for (auto [term, shape] : llvm::zip(terms, shapes)) {
    for (auto [i, letter] : llvm::enumerate(term.letters)) {
      std::string key(1, letter);
      int64_t dim = shape[i + (term.ellipsisAt >= 0 && static_cast<int64_t>(
                                                           i) >= term.ellipsisAt
                                   ? shape.size() - term.letters.size()
                                   : 0)];
      ++count[key];
      auto [it, inserted] = loopOf.try_emplace(key, spec.loopSizes.size());
      if (inserted)
        spec.loopSizes.push_back(dim);
      else if (spec.loopSizes[it->second] != dim) {
        why = "letter '" + key + "' has sizes " +
              std::to_string(spec.loopSizes[it->second]) + " and " +
              std::to_string(dim);
        return failure();
      }
    }
  }
  spec.numLoops = spec.loopSizes.size();
  // Operand maps.
  for (auto [term, shape, own] : llvm::zip(terms, shapes, ellipsisShapes)) {
    SmallVector<AffineExpr> exprs;
    for (auto [i, letter] : llvm::enumerate(term.letters)) {
      if (static_cast<int64_t>(i) == term.ellipsisAt)
        llvm::append_range(exprs, broadcastExprs(own, *ellipsis, 0, ctx));
      exprs.push_back(getAffineDimExpr(loopOf[std::string(1, letter)], ctx));
    }
    if (term.ellipsisAt == static_cast<int64_t>(term.letters.size()))
      llvm::append_range(exprs, broadcastExprs(own, *ellipsis, 0, ctx));
    spec.operandExprs.push_back(exprs);
  }
  // Output loops.
  auto ellipsisLoops = llvm::seq<unsigned>(0, ellipsisRank);
  if (!explicitOutput) {
    llvm::append_range(spec.outputLoops, ellipsisLoops);
    std::string once;
    for (auto &entry : count)
      if (entry.second == 1)
        once += entry.first().str();
    llvm::sort(once);
    for (char letter : once)
      spec.outputLoops.push_back(loopOf[std::string(1, letter)]);
    return spec;
  }
  FailureOr<Term> output = parseTerm(rhs);
  if (failed(output)) {
    why = "cannot parse the output term '" + rhs.str() + "'";
    return failure();
  }
  for (auto [i, letter] : llvm::enumerate(output->letters)) {
    if (static_cast<int64_t>(i) == output->ellipsisAt)
      llvm::append_range(spec.outputLoops, ellipsisLoops);
    auto it = loopOf.find(std::string(1, letter));
    if (it == loopOf.end() ||
        llvm::is_contained(spec.outputLoops, it->second)) {
      why = "output letter '" + std::string(1, letter) +
            "' is not an input letter or repeats";
      return failure();
    }
    spec.outputLoops.push_back(it->second);
  }
  if (output->ellipsisAt == static_cast<int64_t>(output->letters.size()))
    llvm::append_range(spec.outputLoops, ellipsisLoops);
  return spec;
}

namespace {

/// Einsum: a linalg.generic of the parsed equation that sums products.
struct EinsumLowering : OpConversionPattern<onnx::EinsumOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::EinsumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto equation = op->getAttrOfType<StringAttr>("equation");
    if (!equation)
      return cannotLower(rewriter, op, "has no equation attribute");
    SmallVector<Shape> shapes;
    for (Value input : adaptor.getInputs())
      shapes.push_back(Shape(tensorType(input).getShape()));
    std::string why;
    MLIRContext *ctx = op.getContext();
    FailureOr<EinsumSpec> spec =
        parseEinsum(equation.getValue(), shapes, ctx, why);
    if (failed(spec))
      return cannotLower(rewriter, op,
                         "equation '" + equation.getValue() + "': " + why);
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<AffineMap> maps;
    for (ArrayRef<AffineExpr> exprs : spec->operandExprs)
      maps.push_back(AffineMap::get(spec->numLoops, 0, exprs, ctx));
    Value result =
        buildGeneric(rewriter, loc, adaptor.getInputs(), maps,
                     filledTensor(rewriter, loc, type, 0.0),
                     loopsTo(rewriter, spec->numLoops, spec->outputLoops),
                     [](OpBuilder &b, Location loc,
                        ValueRange args) -> SmallVector<Value> {
                       Value term = args.front();
                       for (Value factor : args.drop_front().drop_back())
                         term = mulScalars(b, loc, term, factor);
                       return {addScalars(b, loc, args.back(), term)};
                     })
            .front();
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void populateEinsumPatterns(RewritePatternSet &patterns) {
  patterns.add<EinsumLowering>(patterns.getContext());
}

} // namespace mlir::moe::onnx_lowering
