//===- Manifest.cpp - Reading and checking model.json ---------------------===//

#include "Manifest.h"

#include <limits>

#include "moe/Support/Input.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <limits>
#include <set>

using namespace llvm;
using namespace moe_run;

namespace moe_run {
static bool fromJSON(const json::Value &v, TensorSpec::Slice &s, json::Path p) {
  json::ObjectMapper o(v, p);
  return o && o.map("axes", s.axes) && o.map("dim", s.dim);
}
} // namespace moe_run

/// An input, output (keyed by "name") or weight (by "symbol", with offsets).
static bool mapTensor(const json::Value &v, TensorSpec &t, json::Path p,
                      bool weight) {
  json::ObjectMapper o(v, p);
  std::string dtype;
  if (!o || !(weight ? o.map("symbol", t.name) : o.map("name", t.name)) ||
      !o.map("dtype", dtype) || !o.map("shape", t.shape) ||
      (weight && (!o.map("offsets", t.offsets) ||
                  !o.mapOptional("param", t.param) ||
                  !o.mapOptional("slices", t.slices) ||
                  !o.mapOptional("torch_permutation", t.torchPermutation) ||
                  !o.mapOptional("slot_layer", t.slotLayer))))
    return false;
  if (weight)
    if (const json::Value *table = v.getAsObject()->get("slot_table")) {
      json::ObjectMapper to(*table, p.field("slot_table"));
      if (!to || !to.map("layer", t.slotTableLayer) ||
          !to.map("experts", t.slotTableExperts))
        return false;
    }
  std::vector<int64_t> sorted = t.torchPermutation;
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i) ||
        sorted.size() != t.shape.size()) {
      p.field("torch_permutation").report("expected a permutation of the "
                                          "weight's dimensions");
      return false;
    }
  if (!(t.type = moert::findDType(dtype))) {
    p.field("dtype").report("expected f32, f64, i32, i64, i8, bool, f16 or bf16");
    return false;
  }
  // bytes() multiplies by the element size: that too must fit.
  int64_t elements = moert::numElements(t.shape);
  if (elements < 0 ||
      elements > std::numeric_limits<int64_t>::max() / t.type->size) {
    p.field("shape").report("negative extent or too many elements");
    return false;
  }
  return true;
}

namespace moe_run {
struct Grid {
  std::vector<std::string> axes;
  std::vector<int64_t> shape;
};

static bool fromJSON(const json::Value &v, Grid &g, json::Path p) {
  json::ObjectMapper o(v, p);
  return o && o.map("axes", g.axes) && o.map("shape", g.shape);
}

static bool fromJSON(const json::Value &v, TensorSpec &t, json::Path p) {
  return mapTensor(v, t, p, /*weight=*/false);
}

static bool fromJSON(const json::Value &v, Manifest &m, json::Path p) {
  json::ObjectMapper o(v, p);
  int64_t format = 0;
  if (!o || !o.map("format", format))
    return false;
  if (format != 5) {
    // Format 1 called moert_matmul_f32 without its accumulate flag, format
    // 2 without a batch; format 3 libraries did not describe themselves;
    // format 4 had no moert_grouped_matmul_few_rows.
    p.field("format").report("moe-run reads format 5; recompile the bundle "
                             "with this version's moe-compile");
    return false;
  }
  Grid grid;
  if (!o.map("library", m.library) || !o.map("entry", m.entry) ||
      !o.map("world_size", m.worldSize) || !o.map("grid", grid) ||
      !o.map("inputs", m.inputs) || !o.map("outputs", m.outputs) ||
      !o.mapOptional("weights_file", m.weightsFile) ||
      !o.mapOptional("target", m.target) ||
      !o.map("library_bytes", m.libraryBytes) ||
      !o.map("library_digest", m.libraryDigest) ||
      !o.map("weights_bytes", m.weightsBytes) ||
      !o.map("weights_digest", m.weightsDigest))
    return false;
  if (m.target != "cpu" && m.target != "cuda") {
    p.field("target").report("expected \"cpu\" or \"cuda\"");
    return false;
  }
  m.axes = std::move(grid.axes);
  m.gridShape = std::move(grid.shape);
  if (const json::Value *training = v.getAsObject()->get("training")) {
    json::ObjectMapper t(*training, p.field("training"));
    if (!t || !t.map("optimizer", m.optimizer))
      return false;
    if (m.optimizer != "sgd" && m.optimizer != "adamw") {
      p.field("training").field("optimizer").report("expected sgd or adamw");
      return false;
    }
  }
  if (const json::Array *weights = v.getAsObject()->getArray("weights")) {
    json::Path weightsPath = p.field("weights");
    for (size_t i = 0; i < weights->size(); ++i)
      if (!mapTensor((*weights)[i], m.weights.emplace_back(),
                     weightsPath.index(i), /*weight=*/true))
        return false;
  }
  return true;
}
} // namespace moe_run

/// What JSON typing cannot say; empty when the manifest is consistent.
static std::string check(const Manifest &m) {
  if (m.worldSize < 1)
    return formatv("world_size {0} is not positive", m.worldSize);
  if (m.axes.size() != m.gridShape.size())
    return formatv("grid has {0} axes and {1} extents", m.axes.size(),
                   m.gridShape.size());
  if (moert::numElements(m.gridShape) != m.worldSize)
    return formatv("grid shape {0} does not match world_size {1}",
                   moert::shapeString(m.gridShape), m.worldSize);
  std::set<std::string> names;
  for (const auto *list : {&m.inputs, &m.outputs})
    for (const TensorSpec &t : *list)
      if (!names.insert(t.name).second)
        return formatv("two inputs or outputs named '{0}'", t.name);
  if (!m.weights.empty() && m.weightsFile.empty())
    return "weights without a weights_file";
  if (m.libraryBytes < 0 || m.weightsBytes < 0)
    return "a negative file size";
  std::set<std::string> symbols;
  for (const TensorSpec &w : m.weights) {
    if (!symbols.insert(w.name).second)
      return formatv("weight '{0}' is listed twice", w.name);
    if (static_cast<int64_t>(w.offsets.size()) != m.worldSize)
      return formatv("weight '{0}' has {1} offsets, world_size is {2}", w.name,
                     w.offsets.size(), m.worldSize);
    for (const TensorSpec::Slice &slice : w.slices) {
      if (slice.dim < 0 || slice.dim >= static_cast<int64_t>(w.shape.size()))
        return formatv("weight '{0}' is sliced along dimension {1} of {2}",
                       w.name, slice.dim, w.shape.size());
      if (slice.axes.empty())
        return formatv("weight '{0}' is sliced over no grid axis", w.name);
      for (int64_t axis : slice.axes)
        if (axis < 0 || axis >= static_cast<int64_t>(m.gridShape.size()))
          return formatv("weight '{0}' is sliced over grid axis {1}, the "
                         "grid has {2}",
                         w.name, axis, m.gridShape.size());
    }
    for (int64_t offset : w.offsets)
      if (offset < 0 || offset > m.weightsBytes ||
          w.bytes() > m.weightsBytes - offset)
        return formatv("a piece of weight '{0}' at byte {1} ({2} bytes) lies "
                       "outside the {3} bytes of the weights file",
                       w.name, offset, w.bytes(), m.weightsBytes);
  }
  return "";
}

Expected<Manifest> moe_run::parseManifest(StringRef text, StringRef name) {
  Expected<json::Value> value = mlir::moe::parseJson(text);
  if (!value)
    return createStringError(name + ": " + toString(value.takeError()));
  Manifest m;
  json::Path::Root root(name);
  if (!fromJSON(*value, m, root))
    return createStringError(name + ": " + toString(root.getError()));
  if (std::string error = check(m); !error.empty())
    return createStringError(name + ": " + error);
  m.json = std::move(*value->getAsObject());
  return m;
}

Expected<Manifest> moe_run::readManifest(const std::string &path) {
  // A manifest of a million weights is some 100 MB.
  auto text = mlir::moe::readInputFile(path, uint64_t(1) << 30);
  if (!text)
    return text.takeError();
  return parseManifest((*text)->getBuffer(), path);
}

/// The first place where `a` (the manifest's) and `b` (the library's)
/// differ, as a JSON path; empty when equal.
static std::string firstDifference(const json::Value &a, const json::Value &b,
                                   const std::string &path) {
  const json::Object *ao = a.getAsObject(), *bo = b.getAsObject();
  if (ao && bo) {
    for (const auto &[key, value] : *ao) {
      const json::Value *other = bo->get(key);
      if (!other)
        return path + "." + key.str();
      if (std::string d = firstDifference(value, *other, path + "." + key.str());
          !d.empty())
        return d;
    }
    for (const auto &entry : *bo)
      if (!ao->get(entry.first))
        return path + "." + entry.first.str();
    return "";
  }
  const json::Array *aa = a.getAsArray(), *ba = b.getAsArray();
  if (aa && ba) {
    for (size_t i = 0; i < std::min(aa->size(), ba->size()); ++i)
      if (std::string d = firstDifference((*aa)[i], (*ba)[i],
                                          formatv("{0}[{1}]", path, i));
          !d.empty())
        return d;
    return aa->size() == ba->size() ? "" : path;
  }
  return a == b ? "" : path;
}

std::string moe_run::compareWithLibrary(const Manifest &m,
                                        StringRef embedded) {
  Expected<json::Value> library = mlir::moe::parseJson(embedded);
  if (!library || !library->getAsObject()) {
    consumeError(library.takeError());
    return "the library's description of itself is not valid JSON";
  }
  json::Object manifest = m.json;
  manifest.erase("library_bytes");
  manifest.erase("library_digest");
  std::string where =
      firstDifference(json::Value(std::move(manifest)), *library, "");
  if (where.empty())
    return "";
  return formatv("model.json disagrees with the library on '{0}': the "
                 "manifest was edited, or belongs to another model",
                 StringRef(where).drop_front());
}
