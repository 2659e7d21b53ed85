//===- MoEAttrs.cpp - moe dialect enums and attributes ---------------------===//

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::moe;


//===----------------------------------------------------------------------===//
// ActivationAttr: `<kind (, layout)? (, alpha = f)? (, beta = f)? (, limit = f)?>`
// or `<custom @body>`
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
  if (*kind == ActivationKind::Custom) {
    if (succeeded(parser.parseOptionalGreater())) {
      parser.emitError(kindLoc,
                       "a custom activation names its body (`<custom @f>`)");
      return {};
    }
    FlatSymbolRefAttr body;
    if (parser.parseAttribute(body) || parser.parseGreater())
      return {};
    return getChecked([&] { return parser.emitError(kindLoc); },
                      parser.getContext(), *kind, SwiGLULayout::Separate,
                      APFloat(1.0), APFloat(0.0), std::optional<APFloat>(),
                      body);
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
                    APFloat(beta), limitValue, FlatSymbolRefAttr());
}

void ActivationAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyActivationKind(getKind());
  if (getBody())
    printer << ' ' << getBody();
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
                       std::optional<APFloat> limit, FlatSymbolRefAttr body) {
  if ((kind == ActivationKind::Custom) != static_cast<bool>(body))
    return emitError() << (body ? "only a custom activation names a body"
                                : "a custom activation names its body "
                                  "(`<custom @f>`)");
  bool isSwiGLU = kind == ActivationKind::SwiGLU;
  if (!isSwiGLU &&
      (layout != SwiGLULayout::Separate || alpha.convertToDouble() != 1.0 ||
       beta.convertToDouble() != 0.0 || limit))
    return emitError() << "a layout, alpha, beta or limit is only valid for "
                          "swiglu, not "
                       << stringifyActivationKind(kind);
  for (auto [name, value] :
       {std::pair<StringRef, const APFloat &>{"alpha", alpha}, {"beta", beta}})
    if (!value.isFinite())
      return emitError() << "swiglu " << name << " must be finite, got "
                         << value.convertToDouble();
  // No limit is written by leaving it out, not as an infinite one.
  if (limit && !(limit->isFinite() && limit->convertToDouble() > 0.0))
    return emitError() << "swiglu limit must be finite and positive, got "
                       << limit->convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// PlanAttr: `<key = value, ...>`
//===----------------------------------------------------------------------===//

PlanAttr PlanAttr::getDefault(MLIRContext *context) {
  // SageMaker MoEConfig's defaults, on one rank.
  return get(context, 1, 1, 1, 1, 1, TokenDispatcher::AllToAll, false,
             LoadBalancing::Sinkhorn, APFloat(1e-3), APFloat(1e-3), 12345);
}

Attribute PlanAttr::parse(AsmParser &parser, Type) {
  PlanAttr defaults = getDefault(parser.getContext());
  int64_t pp = defaults.getPp(), dp = defaults.getDp(),
          dpShard = defaults.getDpShard(), ep = defaults.getEp(),
          tp = defaults.getTp(), seed = defaults.getSeed();
  TokenDispatcher dispatcher = defaults.getDispatcher();
  bool tokenShuffle = defaults.getTokenShuffle();
  LoadBalancing balancing = defaults.getLoadBalancing();
  double aux = defaults.getAuxLossCoeff().convertToDouble(),
         z = defaults.getZLossCoeff().convertToDouble();
  llvm::SmallSet<StringRef, 12> seen;
  SMLoc start = parser.getCurrentLocation();

  auto parseField = [&]() -> ParseResult {
    StringRef key;
    SMLoc keyLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(keyLoc) << "plan field '" << key
                                      << "' is given twice";
    int64_t *degree = llvm::StringSwitch<int64_t *>(key)
                          .Case("pp", &pp).Case("dp", &dp)
                          .Case("dp_shard", &dpShard).Case("ep", &ep)
                          .Case("tp", &tp).Case("seed", &seed)
                          .Default(nullptr);
    if (degree)
      return parser.parseInteger(*degree);
    if (key == "aux_loss_coeff" || key == "z_loss_coeff")
      return parser.parseFloat(key == "z_loss_coeff" ? z : aux);
    StringRef word;
    SMLoc wordLoc = parser.getCurrentLocation();
    if (key == "token_shuffle") {
      if (parser.parseKeyword(&word))
        return failure();
      if (word != "true" && word != "false")
        return parser.emitError(wordLoc, "expected true or false");
      tokenShuffle = word == "true";
      return success();
    }
    if (key == "dispatcher" || key == "load_balancing") {
      if (parser.parseKeyword(&word))
        return failure();
      if (key == "dispatcher") {
        if (auto value = symbolizeTokenDispatcher(word)) {
          dispatcher = *value;
          return success();
        }
      } else if (auto value = symbolizeLoadBalancing(word)) {
        balancing = *value;
        return success();
      }
      return parser.emitError(wordLoc)
             << "unknown " << key << " '" << word << "'";
    }
    return parser.emitError(keyLoc) << "unknown plan field '" << key << "'";
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseField))
    return {};
  return getChecked([&] { return parser.emitError(start); },
                    parser.getContext(), pp, dp, dpShard, ep, tp, dispatcher,
                    tokenShuffle, balancing, APFloat(aux), APFloat(z), seed);
}

void PlanAttr::print(AsmPrinter &printer) const {
  printer << "<pp = " << getPp() << ", dp = " << getDp()
          << ", dp_shard = " << getDpShard() << ", ep = " << getEp()
          << ", tp = " << getTp()
          << ", dispatcher = " << stringifyTokenDispatcher(getDispatcher())
          << ", token_shuffle = " << (getTokenShuffle() ? "true" : "false")
          << ", load_balancing = "
          << stringifyLoadBalancing(getLoadBalancing())
          << ", aux_loss_coeff = ";
  printer.printFloat(getAuxLossCoeff());
  printer << ", z_loss_coeff = ";
  printer.printFloat(getZLossCoeff());
  printer << ", seed = " << getSeed() << '>';
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t pp, int64_t dp, int64_t dpShard,
                               int64_t ep, int64_t tp, TokenDispatcher,
                               bool, LoadBalancing, APFloat aux, APFloat z,
                               int64_t) {
  std::pair<StringRef, int64_t> degrees[] = {
      {"pp", pp}, {"dp", dp}, {"dp_shard", dpShard}, {"ep", ep}, {"tp", tp}};
  for (auto [name, value] : degrees)
    if (value < 1)
      return emitError() << "plan degree " << name
                         << " must be at least 1, got " << value;
  // getWorldSize() multiplies the degrees: bound the product, overflow-checked.
  int64_t world = 1;
  for (int64_t degree : {pp, dp, ep, tp})
    if (llvm::MulOverflow(world, degree, world) || world > kMaxWorldSize)
      return emitError() << "plan world size pp x dp x ep x tp = " << pp
                         << " x " << dp << " x " << ep << " x " << tp
                         << " is more than the " << kMaxWorldSize
                         << " (2^31 - 1) ranks an MPI rank number can count";
  if (dp % dpShard != 0)
    return emitError() << "plan dp_shard " << dpShard
                       << " does not divide dp " << dp;
  for (auto [name, value] : {std::pair<StringRef, APFloat>{"aux_loss_coeff", aux},
                             {"z_loss_coeff", z}})
    if (!value.isFinite() || value.isNegative())
      return emitError() << "plan " << name
                         << " must be finite and not negative, got "
                         << value.convertToDouble();
  return success();
}
