//===- MoEAttrs.cpp - moe dialect enums and attributes ---------------------===//

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;


//===----------------------------------------------------------------------===//
// ActivationAttr: `<kind (, layout)? (, alpha = f)? (, beta = f)? (, limit = f)?>`
//===----------------------------------------------------------------------===//

Attribute ActivationAttr::parse(AsmParser &parser, Type) {
  StringRef kindName;
  SMLoc kindLoc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<ActivationKind> kind = symbolizeActivationKind(kindName);
  if (!kind) {
    parser.emitError(kindLoc, "unknown activation '") << kindName << "'";
    return {};
  }
  SwiGLULayout layout = SwiGLULayout::Separate;
  double alpha = 1.0, beta = 0.0;
  std::optional<double> limit;
  llvm::SmallSet<StringRef, 4> seen;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc keyLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&key))
      return {};
    std::optional<SwiGLULayout> l = symbolizeSwiGLULayout(key);
    if (!l && key != "alpha" && key != "beta" && key != "limit") {
      parser.emitError(keyLoc, "expected a SwiGLU layout, 'alpha', 'beta' or "
                               "'limit', got '")
          << key << "'";
      return {};
    }
    // Also checked by verify(), but only here can a parameter spelled with
    // its default value (`<silu, alpha = 1.0>`) be told from an absent one.
    if (*kind != ActivationKind::SwiGLU) {
      parser.emitError(keyLoc, "a layout, alpha, beta or limit is only valid "
                               "for swiglu, not ")
          << kindName;
      return {};
    }
    if (!seen.insert(l ? StringRef("layout") : key).second) {
      parser.emitError(keyLoc)
          << (l ? StringRef("the swiglu layout") : key) << " is given twice";
      return {};
    }
    if (l) {
      layout = *l;
      continue;
    }
    double value;
    if (parser.parseEqual() || parser.parseFloat(value))
      return {};
    (key == "alpha" ? alpha : key == "beta" ? beta : limit.emplace()) = value;
  }
  if (parser.parseGreater())
    return {};
  std::optional<APFloat> limitValue;
  if (limit)
    limitValue = APFloat(*limit);
  return getChecked([&] { return parser.emitError(kindLoc); },
                    parser.getContext(), *kind, layout, APFloat(alpha),
                    APFloat(beta), limitValue);
}

void ActivationAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyActivationKind(getKind());
  if (getLayout() != SwiGLULayout::Separate)
    printer << ", " << stringifySwiGLULayout(getLayout());
  if (getAlpha().convertToDouble() != 1.0) {
    printer << ", alpha = ";
    printer.printFloat(getAlpha());
  }
  if (getBeta().convertToDouble() != 0.0) {
    printer << ", beta = ";
    printer.printFloat(getBeta());
  }
  if (getLimit()) {
    printer << ", limit = ";
    printer.printFloat(*getLimit());
  }
  printer << '>';
}

LogicalResult
ActivationAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ActivationKind kind, SwiGLULayout layout,
                       APFloat alpha, APFloat beta,
                       std::optional<APFloat> limit) {
  bool isSwiGLU = kind == ActivationKind::SwiGLU;
  if (!isSwiGLU &&
      (layout != SwiGLULayout::Separate || alpha.convertToDouble() != 1.0 ||
       beta.convertToDouble() != 0.0 || limit))
    return emitError() << "a layout, alpha, beta or limit is only valid for "
                          "swiglu, not "
                       << stringifyActivationKind(kind);
  if (limit && !(limit->convertToDouble() > 0.0))
    return emitError() << "swiglu limit must be positive, got "
                       << limit->convertToDouble();
  return success();
}
