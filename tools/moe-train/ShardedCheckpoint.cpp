//===- ShardedCheckpoint.cpp - a checkpoint written by every rank ---------===//

#include "ShardedCheckpoint.h"

#include "moert/Runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;
using namespace moe_run;
using namespace moe_train;
namespace train = moert::train;

static constexpr StringLiteral kFormat = "moe-train-sharded-checkpoint";
static constexpr int64_t kVersion = 1;
static constexpr int64_t kMaxPlanBytes = 256 << 20;

static std::string rankDir(StringRef dir, int64_t rank) {
  SmallString<128> path(dir);
  sys::path::append(path, "rank-" + std::to_string(rank));
  return std::string(path);
}

static std::string planPath(StringRef dir) {
  SmallString<128> path(dir);
  sys::path::append(path, "plan.json");
  return std::string(path);
}

bool moe_train::isSharded(const std::string &dir) {
  return sys::fs::exists(planPath(dir));
}

/// Where every piece lies, for every rank: what plan.json records.
static std::string writePlan(const std::string &path, const Manifest &m,
                             const std::vector<HeldParam> &params) {
  std::error_code ec;
  raw_fd_ostream os(path, ec);
  if (ec)
    return "cannot write " + path + ": " + ec.message();
  json::OStream j(os, 1);
  j.object([&] {
    j.attribute("format", kFormat);
    j.attribute("version", kVersion);
    j.attribute("world_size", m.worldSize);
    j.attributeObject("grid", [&] {
      j.attributeArray("axes", [&] {
        for (const std::string &axis : m.axes)
          j.value(axis);
      });
      j.attributeArray("shape", [&] {
        for (int64_t extent : m.gridShape)
          j.value(extent);
      });
    });
    j.attributeArray("params", [&] {
      for (const HeldParam &p : params)
        j.object([&] {
          Placement here = placementOf(m, *p.spec, 0);
          j.attribute("name", p.name);
          j.attributeArray("shape", [&] {
            for (int64_t d : here.wholeShape)
              j.value(d);
          });
          j.attributeArray("pieces", [&] {
            for (int64_t r = 0; r < m.worldSize; ++r) {
              Placement at = placementOf(m, *p.spec, r);
              if (!at.owner)
                continue;
              j.object([&] {
                j.attribute("rank", r);
                j.attributeArray("offsets", [&] {
                  for (int64_t o : at.offsets)
                    j.value(o);
                });
              });
            }
          });
        });
    });
  });
  os << "\n";
  os.close();
  return os.has_error() ? "cannot write " + path + ": " + os.error().message()
                        : "";
}

/// Puts `tmp` in the place of `dir`, which must be a checkpoint if it exists.
static std::string replaceDir(const std::string &tmp, const std::string &dir) {
  if (sys::fs::exists(dir)) {
    SmallString<128> single(dir);
    sys::path::append(single, "checkpoint.json");
    if (!isSharded(dir) && !sys::fs::exists(single))
      return dir + " exists and is not a checkpoint; not replacing it";
    std::string old = dir + ".old";
    if (std::error_code ec = sys::fs::remove_directories(old))
      return "cannot remove " + old + ": " + ec.message();
    if (std::error_code ec = sys::fs::rename(dir, old))
      return "cannot move " + dir + " aside: " + ec.message();
    if (std::error_code ec = sys::fs::rename(tmp, dir))
      return "cannot rename " + tmp + " to " + dir + ": " + ec.message();
    if (std::error_code ec = sys::fs::remove_directories(old))
      return "cannot remove " + old + ": " + ec.message();
    return "";
  }
  if (std::error_code ec = sys::fs::rename(tmp, dir))
    return "cannot rename " + tmp + " to " + dir + ": " + ec.message();
  return "";
}

void moe_train::saveSharded(const std::string &dir, const Manifest &m,
                                   const std::vector<HeldParam> &params,
                                   int64_t step, int64_t samplesConsumed,
                                   const train::OptimizerConfig &config,
                                   const train::Schedule &schedule) {
  int64_t rank = moert::worldRank();
  std::string tmp = dir + ".partial";
  std::string error;
  if (rank == 0) {
    // A .partial left by a killed save is ours to replace.
    if (std::error_code ec = sys::fs::remove_directories(tmp))
      error = "cannot remove " + tmp + ": " + ec.message();
    else if (std::error_code ec = sys::fs::create_directories(tmp))
      error = "cannot create " + tmp + ": " + ec.message();
  }
  moert::failIfAnyRank(error);
  std::vector<train::CheckpointParam> mine;
  for (const HeldParam &p : params)
    if (placementOf(m, *p.spec, rank).owner)
      mine.push_back({p.name, p.spec->shape, p.master.data(), p.state});
  moert::failIfAnyRank(train::saveCheckpoint(rankDir(tmp, rank), step,
                                             samplesConsumed, config,
                                             schedule, mine));
  if (rank == 0) {
    error = writePlan(planPath(tmp), m, params);
    if (error.empty())
      error = replaceDir(tmp, dir);
  }
  moert::failIfAnyRank(error.empty() ? "" : "cannot save checkpoint " + dir +
                                                ": " + error);
}

std::string moe_train::loadSharded(const std::string &dir,
                                   train::LoadedCheckpoint &out) {
  auto fail = [&](const Twine &why) {
    return ("cannot load checkpoint " + dir + ": " + why).str();
  };
  auto text = MemoryBuffer::getFile(planPath(dir), /*IsText=*/true);
  if (!text)
    return fail("cannot read plan.json: " + text.getError().message());
  if ((*text)->getBufferSize() > kMaxPlanBytes)
    return fail("plan.json is larger than " + Twine(kMaxPlanBytes) + " bytes");
  Expected<json::Value> plan = json::parse((*text)->getBuffer());
  if (!plan)
    return fail("plan.json: " + toString(plan.takeError()));
  const json::Object *root = plan->getAsObject();
  const json::Array *params = root ? root->getArray("params") : nullptr;
  if (!root || root->getString("format") != kFormat ||
      root->getInteger("version") != kVersion || !params)
    return fail("plan.json is not a sharded checkpoint of version " +
                Twine(kVersion));

  // Every rank's part, read once.
  std::map<int64_t, train::LoadedCheckpoint> parts;
  std::map<int64_t, std::map<std::string, size_t>> index;
  auto part = [&](int64_t rank) -> std::string {
    if (parts.count(rank))
      return "";
    train::LoadedCheckpoint &ckpt = parts[rank];
    if (std::string e = train::loadCheckpoint(rankDir(dir, rank), ckpt);
        !e.empty())
      return e;
    for (auto [i, name] : enumerate(ckpt.names))
      index[rank][name] = i;
    return "";
  };

  out = train::LoadedCheckpoint();
  for (const json::Value &entry : *params) {
    const json::Object *param = entry.getAsObject();
    std::optional<StringRef> name = param ? param->getString("name") : std::nullopt;
    const json::Array *shape = param ? param->getArray("shape") : nullptr;
    const json::Array *pieces = param ? param->getArray("pieces") : nullptr;
    if (!name || !shape || !pieces)
      return fail("plan.json: a parameter without name, shape or pieces");
    Placement whole;
    int64_t elements = 1;
    for (const json::Value &d : *shape) {
      std::optional<int64_t> extent = d.getAsInteger();
      if (!extent || *extent < 0 || *extent > (int64_t(1) << 40) ||
          (elements *= std::max<int64_t>(*extent, 1)) > (int64_t(1) << 40))
        return fail("plan.json: parameter '" + *name + "' has a bad shape");
      whole.wholeShape.push_back(*extent);
    }
    std::vector<float> weights(elements);
    train::ParamState state;
    int64_t covered = 0;
    for (const json::Value &pieceValue : *pieces) {
      const json::Object *piece = pieceValue.getAsObject();
      std::optional<int64_t> rank = piece ? piece->getInteger("rank") : std::nullopt;
      const json::Array *offsets = piece ? piece->getArray("offsets") : nullptr;
      if (!rank || !offsets || offsets->size() != whole.wholeShape.size())
        return fail("plan.json: a piece of '" + *name +
                    "' without rank or offsets");
      if (std::string e = part(*rank); !e.empty())
        return e;
      auto found = index[*rank].find(name->str());
      if (found == index[*rank].end())
        return fail("rank-" + Twine(*rank) + " holds no piece of '" + *name +
                    "'");
      train::LoadedCheckpoint &ckpt = parts[*rank];
      const std::vector<int64_t> &local = ckpt.shapes[found->second];
      Placement at = whole;
      for (auto [d, o] : enumerate(*offsets)) {
        std::optional<int64_t> offset = o.getAsInteger();
        if (!offset || *offset < 0 || d >= local.size() ||
            *offset + local[d] > whole.wholeShape[d])
          return fail("plan.json: a piece of '" + *name +
                      "' lies outside the parameter");
        at.offsets.push_back(*offset);
      }
      int64_t pieceElements = 1;
      for (int64_t d : local)
        pieceElements *= d;
      covered += pieceElements;
      placePiece(weights, ckpt.params[found->second].data(), local, at);
      const train::ParamState &kept = ckpt.states[found->second];
      auto placeState = [&](std::vector<float> &into,
                            const std::vector<float> &from) {
        if (from.empty())
          return;
        into.resize(elements);
        placePiece(into, from.data(), local, at);
      };
      placeState(state.expAvg, kept.expAvg);
      placeState(state.expAvgSq, kept.expAvgSq);
      placeState(state.momentumBuffer, kept.momentumBuffer);
      state.step = kept.step;
      state.hasBuffer = kept.hasBuffer;
      out.step = ckpt.step;
      out.samplesConsumed = ckpt.samplesConsumed;
      out.config = ckpt.config;
      out.schedule = ckpt.schedule;
    }
    if (covered != elements)
      return fail("the pieces of '" + *name + "' hold " + Twine(covered) +
                  " of its " + Twine(elements) + " elements");
    out.names.push_back(name->str());
    out.shapes.push_back(whole.wholeShape);
    out.params.push_back(std::move(weights));
    out.states.push_back(std::move(state));
  }
  return "";
}
