//===- Bundle.cpp - the manifest and weights of a compiled model ----------===//

#include "Bundle.h"

#include "dialects/moe/IR/MoEOps.h"
#include "moe/Import/Import.h"
#include "moe/Support/Input.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <vector>

using namespace mlir;
using namespace mlir::moe;
namespace json = llvm::json;

/// Pieces start at multiples of this, for aligned loads in the globals.
static constexpr size_t kPieceAlignment = 64;

static std::optional<StringRef> dtypeName(Type type) {
  if (type.isF32())
    return StringRef("f32");
  if (type.isF64())
    return StringRef("f64");
  if (type.isF16())
    return StringRef("f16");
  if (type.isBF16())
    return StringRef("bf16");
  if (type.isInteger(64))
    return StringRef("i64");
  if (type.isInteger(32))
    return StringRef("i32");
  if (type.isInteger(8))
    return StringRef("i8");
  if (type.isInteger(1))
    return StringRef("bool");
  return std::nullopt;
}

static json::Array shapeOf(ArrayRef<int64_t> shape) {
  json::Array result;
  for (int64_t d : shape)
    result.push_back(d);
  return result;
}

/// One input or output of the entry function for the manifest.
static FailureOr<json::Object> describeValue(func::FuncOp entry, Type type,
                                             DictionaryAttr attrs,
                                             StringRef fallback) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return entry.emitError("moe-compile: ")
           << fallback << " has type " << type
           << "; compiled programs take static shapes (give --input-shape)";
  std::optional<StringRef> dtype = dtypeName(tensor.getElementType());
  if (!dtype)
    return entry.emitError("moe-compile: ")
           << fallback << " has element type " << tensor.getElementType()
           << ", which .npy files do not carry";
  std::string name = fallback.str();
  if (attrs)
    if (auto given = attrs.getAs<StringAttr>("onnx.name"))
      name = given.str();
  return json::Object{{"name", name},
                      {"dtype", *dtype},
                      {"shape", shapeOf(tensor.getShape())}};
}

FailureOr<Bundle> mlir::moe::describeProgram(ModuleOp module,
                                             std::string &entryName) {
  SmallVector<func::FuncOp> entries;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      entries.push_back(func);
  if (entries.size() != 1)
    return module.emitError("moe-compile: the program must have exactly one "
                            "public function, found ")
           << entries.size();
  func::FuncOp entry = entries.front();
  entryName = entry.getSymName().str();

  Bundle bundle;
  json::Array inputs, outputs, layers;
  for (auto [i, type] : llvm::enumerate(entry.getArgumentTypes())) {
    FailureOr<json::Object> input = describeValue(
        entry, type, entry.getArgAttrDict(i), "input" + std::to_string(i));
    if (failed(input))
      return failure();
    inputs.push_back(std::move(*input));
  }
  for (auto [i, type] : llvm::enumerate(entry.getResultTypes())) {
    FailureOr<json::Object> output = describeValue(
        entry, type, entry.getResultAttrDict(i), "output" + std::to_string(i));
    if (failed(output))
      return failure();
    outputs.push_back(std::move(*output));
  }
  module.walk([&](RouterOp router) {
    layers.push_back(json::Object{
        {"experts", cast<RankedTensorType>(router.getLogits().getType())
                        .getDimSize(1)}});
  });

  SmallVector<int64_t> grid(5, 1);
  for (auto op : module.getOps<shard::GridOp>())
    grid = llvm::to_vector(op.getShape());
  int64_t world = 1;
  for (int64_t extent : grid)
    world *= extent;

  bundle.manifest = json::Object{
      // Bumped with every change of the moert_* calls that compiled code
      // makes, so that moe-run refuses bundles built for another runtime.
      {"format", 5},
      {"library", "model.so"},
      {"entry", "moe_entry"},
      {"world_size", world},
      {"grid", json::Object{{"axes", json::Array{"pp", "dp", "dp_shard", "ep",
                                                 "tp"}},
                            {"shape", shapeOf(grid)}}},
      {"inputs", std::move(inputs)},
      {"outputs", std::move(outputs)},
      {"weights_file", "weights.bin"},
      {"weights", json::Array{}},
      {"layers", std::move(layers)},
  };
  return bundle;
}

/// The bytes of a weight constant.
static FailureOr<ArrayRef<char>> rawData(memref::GlobalOp global,
                                         ElementsAttr source) {
  if (auto dense = dyn_cast<DenseElementsAttr>(source))
    return dense.getRawData();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(source))
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      return blob->getData();
  return global.emitError("moe-compile: the data of this weight is not "
                          "available");
}

namespace {
/// One shard.all_slice step that narrows a weight: `dim` split over the
/// group of grid axes `axes`.
struct SliceStep {
  SmallVector<int16_t> axes;
  int64_t dim;
};
} // namespace

static SmallVector<SliceStep> sliceSteps(memref::GlobalOp global) {
  SmallVector<SliceStep> steps;
  if (auto attr = global->getAttrOfType<ArrayAttr>("moe.weight_slices"))
    for (auto step : attr.getAsRange<DictionaryAttr>())
      steps.push_back(
          {llvm::to_vector(
               cast<DenseI16ArrayAttr>(step.get("axes")).asArrayRef()),
           cast<IntegerAttr>(step.get("dim")).getInt()});
  return steps;
}

/// Rank `rank`'s position in the group of each step: which piece it holds.
static std::vector<int64_t> piecePositions(ArrayRef<SliceStep> steps,
                                           ArrayRef<int64_t> grid,
                                           int64_t rank) {
  std::vector<int64_t> positions;
  for (const SliceStep &step : steps) {
    int64_t position = 0;
    for (int16_t axis : step.axes) {
      int64_t stride = 1;
      for (int64_t extent : grid.drop_front(axis + 1))
        stride *= extent;
      position = position * grid[axis] + (rank / stride) % grid[axis];
    }
    positions.push_back(position);
  }
  return positions;
}

/// Appends the piece of `data` (shape `shape`) at `positions` of the steps.
/// Writes rank `positions`' piece of `data` (of `shape`) after `steps`.
static void writePiece(llvm::raw_ostream &out, ArrayRef<char> data,
                       SmallVector<int64_t> shape, int64_t elementBytes,
                       ArrayRef<SliceStep> steps, ArrayRef<int64_t> grid,
                       ArrayRef<int64_t> positions) {
  // A whole weight goes straight from its constant.
  if (steps.empty()) {
    out.write(data.data(), data.size());
    return;
  }
  std::string piece(data.begin(), data.end());
  for (auto [step, position] : llvm::zip_equal(steps, positions)) {
    int64_t groupSize = 1;
    for (int16_t axis : step.axes)
      groupSize *= grid[axis];
    int64_t outer = 1, inner = elementBytes;
    for (int64_t d = 0; d < step.dim; ++d)
      outer *= shape[d];
    for (int64_t d = step.dim + 1; d < (int64_t)shape.size(); ++d)
      inner *= shape[d];
    int64_t whole = shape[step.dim], part = whole / groupSize;
    std::string next;
    next.reserve(outer * part * inner);
    for (int64_t o = 0; o < outer; ++o)
      next.append(piece, (o * whole + position * part) * inner, part * inner);
    piece = std::move(next);
    shape[step.dim] = part;
  }
  out << piece;
}

/// The resource entry that holds a weight constant's bytes, if any.
static DialectResourceBlobManager::BlobEntry *resourceOf(ElementsAttr source) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(source);
  return resource ? resource.getRawHandle().getResource() : nullptr;
}

LogicalResult mlir::moe::packWeights(ModuleOp module, Bundle &bundle,
                                     StringRef weightsPath) {
  int64_t world = *bundle.manifest.getInteger("world_size");
  json::Array &weights = *bundle.manifest.getArray("weights");
  std::error_code ec;
  llvm::raw_fd_ostream out(weightsPath, ec);
  if (ec)
    return module.emitError("moe-compile: cannot write '")
           << weightsPath << "': " << ec.message();
  bundle.weightsPath = weightsPath.str();
  uint64_t written = 0;
  // How many globals read each constant's blob: freed after the last.
  llvm::DenseMap<void *, int64_t> readers;
  for (auto global : module.getOps<memref::GlobalOp>())
    if (auto source = global->getAttrOfType<ElementsAttr>("moe.weight_source"))
      if (auto *entry = resourceOf(source))
        ++readers[entry];
  for (auto global : module.getOps<memref::GlobalOp>()) {
    auto source = global->getAttrOfType<ElementsAttr>("moe.weight_source");
    if (!source)
      continue;
    FailureOr<ArrayRef<char>> data = rawData(global, source);
    if (failed(data))
      return failure();
    SmallVector<SliceStep> steps = sliceSteps(global);
    auto gridAttr = global->getAttrOfType<DenseI64ArrayAttr>("moe.weight_grid");
    ArrayRef<int64_t> grid = gridAttr ? gridAttr.asArrayRef() : ArrayRef<int64_t>();
    MemRefType type = global.getType();
    int64_t elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
    std::optional<StringRef> dtype = dtypeName(type.getElementType());
    if (!dtype)
      return global.emitError("moe-compile: weights of element type ")
             << type.getElementType() << " are not supported";
    auto sourceShape = llvm::to_vector(
        cast<ShapedType>(source.getType()).getShape());
    if ((int64_t)data->size() !=
        cast<ShapedType>(source.getType()).getNumElements() * elementBytes)
      return global.emitError("moe-compile: the weight holds ")
             << data->size() << " bytes, not what its type says";
    // Laid out by slot: slot p's rows are those of its initial expert.
    std::string bySlot;
    auto slotTable =
        global->getAttrOfType<DenseI32ArrayAttr>("moe.weight_slot_table");
    if (slotTable) {
      int64_t rowBytes = data->size() / sourceShape[0];
      bySlot.reserve(rowBytes * slotTable.size());
      for (int32_t expert : slotTable.asArrayRef()) {
        if (expert < 0 || expert >= sourceShape[0])
          return global.emitError("moe-compile: a slot holds expert ")
                 << expert << " of " << sourceShape[0];
        bySlot.append(data->data() + expert * rowBytes, rowBytes);
      }
      data = ArrayRef<char>(bySlot.data(), bySlot.size());
      sourceShape[0] = slotTable.size();
    }

    // Ranks at the same positions (all of them for a replicated weight)
    // share one stored piece.
    std::map<std::vector<int64_t>, int64_t> stored;
    json::Array offsets;
    for (int64_t rank = 0; rank < world; ++rank) {
      std::vector<int64_t> positions = piecePositions(steps, grid, rank);
      auto [it, inserted] = stored.try_emplace(positions, 0);
      if (inserted) {
        out.write_zeros(llvm::alignTo(written, kPieceAlignment) - written);
        it->second = static_cast<int64_t>(out.tell());
        writePiece(out, *data, sourceShape, elementBytes, steps, grid,
                   positions);
        written = out.tell();
      }
      offsets.push_back(it->second);
    }
    if (auto *entry = resourceOf(source); entry && --readers[entry] == 0)
      entry->setBlob(AsmResourceBlob());
    json::Object weight{{"symbol", global.getSymName()},
                        {"dtype", *dtype},
                        {"shape", shapeOf(type.getShape())},
                        {"offsets", std::move(offsets)}};
    // What moe-run re-places: each layer's table, and the weights that
    // move with it (rows by local slot).
    if (auto table = global->getAttrOfType<DictionaryAttr>("moe.slot_table"))
      weight["slot_table"] = json::Object{
          {"layer", cast<IntegerAttr>(table.get("layer")).getInt()},
          {"experts", cast<IntegerAttr>(table.get("experts")).getInt()}};
    if (auto layer = global->getAttrOfType<IntegerAttr>("moe.weight_slot_layer"))
      weight["slot_layer"] = layer.getInt();
    // What moe-train updates: the weights its gradients are named after,
    // and how each rank's piece lies in the whole (to gather it).
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(source);
        resource && bundle.manifest.getObject("training")) {
      StringRef param = resource.getRawHandle().getKey();
      weight["param"] = param;
      // A parameter the exporter folded in another layout: how moe-train
      // turns it back into torch's.
      if (auto layouts = module->getAttrOfType<DictionaryAttr>(
              kTorchLayoutsAttrName))
        if (auto perm = layouts.getAs<DenseI64ArrayAttr>(param))
          weight["torch_permutation"] = json::Array(perm.asArrayRef());
      json::Array slices;
      for (const SliceStep &step : steps)
        slices.push_back(json::Object{
            {"axes", json::Array(llvm::map_range(
                         step.axes, [](int16_t a) { return int64_t(a); }))},
            {"dim", step.dim}});
      if (!slices.empty())
        weight["slices"] = std::move(slices);
    }
    weights.push_back(std::move(weight));
    global->removeAttr("moe.weight_source");
    global->removeAttr("moe.weight_slices");
    global->removeAttr("moe.weight_grid");
    global->removeAttr("moe.weight_slot_table");
    global->removeAttr("moe.weight_slot_layer");
    global->removeAttr("moe.slot_table");
  }
  out.close();
  if (out.has_error()) {
    std::error_code error = out.error();
    // Reported here: a stream destroyed with its error set aborts.
    out.clear_error();
    return module.emitError("moe-compile: cannot write '")
           << weightsPath << "': " << error.message();
  }
  // The digest from the file as written, mapped: by now every constant's
  // bytes are freed.
  auto file = llvm::MemoryBuffer::getFile(weightsPath, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return module.emitError("moe-compile: cannot read back '")
           << weightsPath << "': " << file.getError().message();
  bundle.manifest["weights_bytes"] =
      static_cast<int64_t>((*file)->getBufferSize());
  bundle.manifest["weights_digest"] =
      contentDigest(llvm::arrayRefFromStringRef((*file)->getBuffer()));
  return success();
}

void mlir::moe::embedManifest(ModuleOp module, Bundle &bundle,
                              StringRef target) {
  bundle.manifest["target"] = target;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(json::Object(bundle.manifest));
  text.push_back('\0');

  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto bytes = RankedTensorType::get({static_cast<int64_t>(text.size())},
                                     b.getI8Type());
  memref::GlobalOp::create(
      b, module.getLoc(), kManifestSymbol, /*sym_visibility=*/nullptr,
      MemRefType::get(bytes.getShape(), bytes.getElementType()),
      DenseElementsAttr::getFromRawBuffer(
          bytes, ArrayRef<char>(text.data(), text.size())),
      /*constant=*/true, /*alignment=*/nullptr);
}

LogicalResult mlir::moe::writeBundle(Bundle &bundle, StringRef directory,
                                     Location loc) {
  SmallString<256> library(directory);
  llvm::sys::path::append(library, "model.so");
  auto code = llvm::MemoryBuffer::getFile(library, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!code)
    return emitError(loc) << "moe-compile: cannot read '" << library
                          << "': " << code.getError().message();
  bundle.manifest["library_bytes"] =
      static_cast<int64_t>((*code)->getBufferSize());
  bundle.manifest["library_digest"] =
      contentDigest(llvm::arrayRefFromStringRef((*code)->getBuffer()));

  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return emitError(loc) << "moe-compile: cannot create '" << directory
                          << "': " << ec.message();
  auto write = [&](StringRef name, auto &&emit) -> LogicalResult {
    SmallString<256> path(directory);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return emitError(loc) << "moe-compile: cannot write '" << path
                            << "': " << ec.message();
    emit(os);
    os.close();
    if (os.has_error()) {
      std::error_code error = os.error();
      os.clear_error();
      return emitError(loc) << "moe-compile: cannot write '" << path
                            << "': " << error.message();
    }
    return success();
  };
  SmallString<256> weightsBin(directory);
  llvm::sys::path::append(weightsBin, "weights.bin");
  if (std::error_code ec = llvm::sys::fs::rename(bundle.weightsPath, weightsBin))
    return emitError(loc) << "moe-compile: cannot move '" << bundle.weightsPath
                          << "' to '" << weightsBin << "': " << ec.message();
  return write("model.json", [&](llvm::raw_ostream &os) {
    os << llvm::formatv("{0:2}", json::Value(json::Object(bundle.manifest)))
       << "\n";
  });
}
