//===- Plan.cpp - parallel plans from options and SageMaker configs -------===//

#include "moe/Plan/Plan.h"
#include "moe/Support/Input.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mlir;
using namespace mlir::moe;
using JSONValue = llvm::json::Value;

static std::string number(double d) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", d);
  return s;
}

static llvm::Error planError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {
/// Reads the fields of one SMP parameters object.
struct SmpReader {
  llvm::StringRef name;
  PlanRequest request;

  llvm::Error fieldError(llvm::StringRef key, const llvm::Twine &what) {
    return planError(name + ": '" + key + "' " + what);
  }

  llvm::Expected<int64_t> integer(llvm::StringRef key, const JSONValue &v,
                                  int64_t min) {
    std::optional<int64_t> i = v.getAsInteger();
    if (!i)
      return fieldError(key, "must be an integer");
    if (*i < min)
      return fieldError(key, llvm::formatv("must be at least {0}, got {1}",
                                           min, *i));
    return *i;
  }

  // The SMP samples pass booleans as 0/1 integers (argparse), so both count.
  llvm::Expected<bool> boolean(llvm::StringRef key, const JSONValue &v) {
    if (std::optional<bool> b = v.getAsBoolean())
      return *b;
    std::optional<int64_t> i = v.getAsInteger();
    if (i && (*i == 0 || *i == 1))
      return *i == 1;
    return fieldError(key, "must be true or false");
  }

  llvm::Expected<double> coefficient(llvm::StringRef key, const JSONValue &v) {
    std::optional<double> d = v.getAsNumber();
    if (!d)
      return fieldError(key, "must be a number");
    if (!std::isfinite(*d) || *d < 0)
      return fieldError(key, "must be finite and not negative, got " +
                                 number(*d));
    return *d;
  }

  llvm::Error read(const llvm::json::Object &params);
};
} // namespace

llvm::Error SmpReader::read(const llvm::json::Object &params) {
  for (const auto &[keyRef, value] : params) {
    llvm::StringRef key = keyRef;
    // Degrees of the SMP core configuration.
    std::optional<int64_t> *degree =
        llvm::StringSwitch<std::optional<int64_t> *>(key)
            .Case("expert_parallel_degree", &request.ep)
            .Case("tensor_parallel_degree", &request.tp)
            .Case("pipeline_parallel_degree", &request.pp)
            .Default(nullptr);
    if (degree) {
      llvm::Expected<int64_t> d = integer(key, value, 1);
      if (!d)
        return d.takeError();
      *degree = *d;
      continue;
    }
    if (key == "hybrid_shard_degree") {
      // 0 (SMP's default) shards over every data-parallel rank.
      llvm::Expected<int64_t> d = integer(key, value, 0);
      if (!d)
        return d.takeError();
      request.dpShard = *d;
      continue;
    }
    if (key == "context_parallel_degree") {
      llvm::Expected<int64_t> d = integer(key, value, 1);
      if (!d)
        return d.takeError();
      if (*d != 1)
        return fieldError(key, llvm::formatv("is {0}, but context parallelism "
                                             "is not supported; use 1",
                                             *d));
      continue;
    }
    if (key == "random_seed") {
      llvm::Expected<int64_t> d = integer(key, value, 0);
      if (!d)
        return d.takeError();
      request.seed = *d;
      continue;
    }
    // MoEConfig fields.
    if (key == "moe_load_balancing") {
      std::optional<llvm::StringRef> s = value.getAsString();
      std::optional<LoadBalancing> lb =
          s ? symbolizeLoadBalancing(*s) : std::nullopt;
      if (!lb)
        return fieldError(key, "must be one of \"sinkhorn\", \"aux_loss\", "
                               "\"balanced\" or \"none\"");
      request.loadBalancing = *lb;
      continue;
    }
    if (key == "global_token_shuffle" || key == "moe_all_to_all_dispatcher" ||
        key == "smp_moe") {
      llvm::Expected<bool> b = boolean(key, value);
      if (!b)
        return b.takeError();
      if (key == "global_token_shuffle")
        request.tokenShuffle = *b;
      else if (key == "moe_all_to_all_dispatcher")
        request.dispatcher =
            *b ? TokenDispatcher::AllToAll : TokenDispatcher::AllGather;
      else if (!*b)
        return fieldError(key, "is false, which asks for another MoE "
                               "implementation than this one");
      continue;
    }
    if (key == "moe_aux_loss_coeff" || key == "moe_z_loss_coeff") {
      llvm::Expected<double> c = coefficient(key, value);
      if (!c)
        return c.takeError();
      (key == "moe_aux_loss_coeff" ? request.auxLossCoeff
                                   : request.zLossCoeff) = *c;
      continue;
    }
    // Training-time memory knobs of SMP: valid, and nothing to do here.
    if (llvm::is_contained({"sm_activation_offloading",
                            "activation_loading_horizon",
                            "fsdp_cache_flush_warnings", "allow_empty_shards"},
                           key))
      continue;
    return planError(name + ": unknown field '" + key + "'");
  }
  return llvm::Error::success();
}

llvm::Expected<PlanRequest> mlir::moe::parseSmpConfig(llvm::StringRef json,
                                                      llvm::StringRef name) {
  // Refuses repeated keys (LLVM's parser keeps the last) and nesting deep
  // enough to overflow its recursion.
  llvm::Expected<JSONValue> root = moe::parseJson(json);
  if (!root)
    return planError(name + ": not valid JSON: " +
                     llvm::toString(root.takeError()));
  const llvm::json::Object *params = root->getAsObject();
  if (!params)
    return planError(name + ": expected a JSON object");
  // The estimator's `distribution` dict wraps the parameters.
  if (const llvm::json::Object *smd = params->getObject("smdistributed")) {
    const llvm::json::Object *mp = smd->getObject("modelparallel");
    params = mp ? mp->getObject("parameters") : nullptr;
    if (!params)
      return planError(name + ": 'smdistributed' has no "
                              "'modelparallel.parameters' object");
  }
  SmpReader reader{name, {}};
  if (llvm::Error e = reader.read(*params))
    return std::move(e);
  return reader.request;
}

void mlir::moe::overridePlan(PlanRequest &request,
                             const PlanRequest &overrides) {
  auto take = [](auto &into, const auto &from) {
    if (from)
      into = from;
  };
  take(request.worldSize, overrides.worldSize);
  take(request.pp, overrides.pp);
  take(request.dp, overrides.dp);
  take(request.dpShard, overrides.dpShard);
  take(request.ep, overrides.ep);
  take(request.tp, overrides.tp);
  take(request.seed, overrides.seed);
  take(request.dispatcher, overrides.dispatcher);
  take(request.tokenShuffle, overrides.tokenShuffle);
  take(request.loadBalancing, overrides.loadBalancing);
  take(request.auxLossCoeff, overrides.auxLossCoeff);
  take(request.zLossCoeff, overrides.zLossCoeff);
}

using Degree = std::pair<llvm::StringRef, int64_t>;

/// The product of `degrees` (each at least 1), or an error naming them when
/// it overflows int64 or passes the most ranks a plan may have.
static llvm::Expected<int64_t> rankProduct(llvm::ArrayRef<Degree> degrees) {
  int64_t product = 1;
  bool tooMany = false;
  for (auto [what, d] : degrees)
    tooMany = tooMany || llvm::MulOverflow(product, d, product) ||
              product > PlanAttr::kMaxWorldSize;
  if (!tooMany)
    return product;
  std::string names, values;
  llvm::raw_string_ostream n(names), v(values);
  llvm::interleave(degrees, n, [&](const Degree &d) { n << d.first; }, " x ");
  llvm::interleave(degrees, v, [&](const Degree &d) { v << d.second; }, " x ");
  return planError(llvm::formatv("{0} = {1} is more than the {2} (2^31 - 1) "
                                 "ranks an MPI rank number can count",
                                 names, values, PlanAttr::kMaxWorldSize));
}

llvm::Expected<PlanAttr> mlir::moe::resolvePlan(MLIRContext *context,
                                                const PlanRequest &request) {
  PlanAttr defaults = PlanAttr::getDefault(context);
  // Every degree that is given is at least 1 (0 is not "not given").
  std::pair<llvm::StringRef, std::optional<int64_t>> given[] = {
      {"pp", request.pp}, {"ep", request.ep}, {"tp", request.tp},
      {"dp", request.dp}};
  for (auto [what, d] : given)
    if (d && *d < 1)
      return planError(
          llvm::formatv("{0} must be at least 1, got {1}", what, *d));
  if (request.worldSize && *request.worldSize < 1)
    return planError(llvm::formatv(
        "the world size must be at least 1, got {0}", *request.worldSize));
  if (request.worldSize && *request.worldSize > PlanAttr::kMaxWorldSize)
    return planError(llvm::formatv("the world size {0} is more than the {1} "
                                   "(2^31 - 1) ranks an MPI rank number can "
                                   "count",
                                   *request.worldSize,
                                   PlanAttr::kMaxWorldSize));
  int64_t pp = request.pp.value_or(1), ep = request.ep.value_or(1),
          tp = request.tp.value_or(1);
  // pp x ep x tp, overflow-checked: it divides the world size below.
  llvm::Expected<int64_t> ppEpTp =
      rankProduct({{"pp", pp}, {"ep", ep}, {"tp", tp}});
  if (!ppEpTp)
    return ppEpTp.takeError();
  int64_t dp = request.dp.value_or(1);
  if (request.worldSize) {
    int64_t world = *request.worldSize;
    for (auto [what, d] : {Degree{"pp", pp}, {"ep", ep}, {"tp", tp}})
      if (world % d != 0)
        return planError(llvm::formatv(
            "{0} = {1} does not divide the world size {2}", what, d, world));
    if (world % *ppEpTp != 0)
      return planError(llvm::formatv(
          "pp x ep x tp = {0} does not divide the world size {1}", *ppEpTp,
          world));
    int64_t rest = world / *ppEpTp;
    if (request.dp && *request.dp != rest) {
      int64_t ranks;
      if (llvm::MulOverflow(*request.dp, *ppEpTp, ranks))
        return planError(llvm::formatv(
            "dp = {0} with pp x ep x tp = {1} makes more ranks than int64 "
            "counts, not the world size {2}",
            *request.dp, *ppEpTp, world));
      return planError(llvm::formatv(
          "dp = {0} with pp x ep x tp = {1} makes {2} ranks, not the world "
          "size {3}",
          *request.dp, *ppEpTp, ranks, world));
    }
    dp = rest;
  }
  // The world size, overflow-checked and bounded (PlanAttr's constraint).
  if (llvm::Expected<int64_t> world =
          rankProduct({{"pp", pp}, {"dp", dp}, {"ep", ep}, {"tp", tp}});
      !world)
    return world.takeError();
  if (request.dpShard && *request.dpShard < 0)
    return planError(llvm::formatv(
        "the weight-sharding degree must not be negative, got {0}",
        *request.dpShard));
  int64_t dpShard = request.dpShard.value_or(1);
  if (dpShard == 0)
    dpShard = dp;
  if (dp % dpShard != 0)
    return planError(llvm::formatv(
        "the weight-sharding degree {0} does not divide dp = {1}", dpShard,
        dp));
  for (auto [what, c] : {std::pair<llvm::StringRef, std::optional<double>>{
                             "the aux loss coefficient", request.auxLossCoeff},
                         {"the z-loss coefficient", request.zLossCoeff}})
    if (c && (!std::isfinite(*c) || *c < 0))
      return planError(what + " must be finite and not negative, got " +
                       number(*c));
  if (request.seed && *request.seed < 0)
    return planError(
        llvm::formatv("the seed must not be negative, got {0}", *request.seed));
  return PlanAttr::get(
      context, pp, dp, dpShard, ep, tp,
      request.dispatcher.value_or(defaults.getDispatcher()),
      request.tokenShuffle.value_or(defaults.getTokenShuffle()),
      request.loadBalancing.value_or(defaults.getLoadBalancing()),
      request.auxLossCoeff ? llvm::APFloat(*request.auxLossCoeff)
                           : defaults.getAuxLossCoeff(),
      request.zLossCoeff ? llvm::APFloat(*request.zLossCoeff)
                         : defaults.getZLossCoeff(),
      request.seed.value_or(defaults.getSeed()));
}
