//===- Tensors.cpp - ONNX types and tensors to MLIR -----------------------===//
//
// Tensor bytes come from raw_data, from the typed *_data fields, or from an
// external file. ONNX stores them little-endian, as MLIR does on the
// (little-endian) hosts this project builds for, so they are used as they
// are. Large tensors become dense resources whose blob owns the bytes (the
// moved raw_data string or the file mapping); small ones, which later passes
// read as shapes and scalars, become DenseElementsAttr.
//
//===----------------------------------------------------------------------===//

#include "Tensors.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <memory>

using namespace mlir;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::TensorProto;

/// Tensors of at most this many bytes become DenseElementsAttr.
static constexpr size_t kMaxInlineBytes = 64;

Type moe::onnx_import::getElementType(MLIRContext *context, int32_t dataType) {
  Builder b(context);
  switch (dataType) {
  case TensorProto::FLOAT:
    return b.getF32Type();
  case TensorProto::FLOAT16:
    return b.getF16Type();
  case TensorProto::BFLOAT16:
    return b.getBF16Type();
  case TensorProto::DOUBLE:
    return b.getF64Type();
  case TensorProto::INT64:
    return b.getI64Type();
  case TensorProto::INT32:
    return b.getI32Type();
  case TensorProto::INT8:
    return b.getI8Type();
  case TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case TensorProto::BOOL:
    return b.getI1Type();
  default:
    return {};
  }
}

std::string moe::onnx_import::getDataTypeName(int32_t dataType) {
  if (!TensorProto::DataType_IsValid(dataType))
    return "<" + std::to_string(dataType) + ">";
  return TensorProto::DataType_Name(
      static_cast<TensorProto::DataType>(dataType));
}

RankedTensorType moe::onnx_import::getTensorType(MLIRContext *context,
                                                 const ::ONNX_NAMESPACE::TypeProto &type,
                                                 std::string &error) {
  if (!type.has_tensor_type()) {
    error = "is not a tensor";
    return {};
  }
  const ::ONNX_NAMESPACE::TypeProto::Tensor &tensor = type.tensor_type();
  Type elementType = getElementType(context, tensor.elem_type());
  if (!elementType) {
    error =
        "has unsupported element type " + getDataTypeName(tensor.elem_type());
    return {};
  }
  if (!tensor.has_shape()) {
    error = "has an unknown rank";
    return {};
  }
  SmallVector<int64_t> shape;
  for (const auto &dim : tensor.shape().dim())
    shape.push_back(dim.has_dim_value() && dim.dim_value() >= 0
                        ? dim.dim_value()
                        : ShapedType::kDynamic);
  return RankedTensorType::get(shape, elementType);
}

/// Bytes per element of `elementType` (i1 is stored in a byte).
static size_t getElementBytes(Type elementType) {
  return llvm::divideCeil(elementType.getIntOrFloatBitWidth(), 8);
}

/// The type of `tensor` and its size in bytes; errors name the tensor.
static FailureOr<std::pair<RankedTensorType, size_t>>
getTypeAndSize(MLIRContext *context, const TensorProto &tensor, StringRef name,
               Location loc) {
  Type elementType = getElementType(context, tensor.data_type());
  if (!elementType)
    return emitError(loc) << "tensor '" << name
                          << "' has unsupported element type "
                          << getDataTypeName(tensor.data_type());
  int64_t size = getElementBytes(elementType);
  for (int64_t dim : tensor.dims())
    if (dim < 0 || llvm::MulOverflow(size, dim, size))
      return emitError(loc) << "tensor '" << name << "' has an invalid shape";
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  return std::make_pair(RankedTensorType::get(shape, elementType),
                        static_cast<size_t>(size));
}

/// Tensor bytes and what keeps them alive: null when they live in the
/// TensorProto, else the moved raw_data string, the packed typed data or
/// the external file's mapping.
struct TensorImporter::Bytes {
  ArrayRef<char> data;
  std::shared_ptr<void> owner;
};

/// The values of a typed field as little-endian elements of `elementBytes`
/// each (int32_data holds 8- and 16-bit types, fp16 and bf16 as their bits).
template <typename T>
static std::vector<char> pack(const google::protobuf::RepeatedField<T> &values,
                              size_t elementBytes) {
  std::vector<char> bytes(values.size() * elementBytes);
  for (auto [i, value] : llvm::enumerate(values))
    std::memcpy(&bytes[i * elementBytes], &value, elementBytes);
  return bytes;
}

/// The typed field of `tensor`'s data type packed into element bytes; empty
/// when that field is empty.
static std::vector<char> packTypedData(const TensorProto &tensor,
                                       size_t elementBytes) {
  switch (tensor.data_type()) {
  case TensorProto::FLOAT:
    return pack(tensor.float_data(), elementBytes);
  case TensorProto::DOUBLE:
    return pack(tensor.double_data(), elementBytes);
  case TensorProto::INT64:
    return pack(tensor.int64_data(), elementBytes);
  default:
    return pack(tensor.int32_data(), elementBytes);
  }
}

FailureOr<TensorImporter::Bytes>
TensorImporter::readBytes(const TensorProto &tensor, std::string *rawToMove,
                          RankedTensorType type, size_t size, StringRef name,
                          Location loc) {
  Bytes bytes;
  if (tensor.data_location() == TensorProto::EXTERNAL) {
    FailureOr<Bytes> external = readExternal(tensor, size, name, loc);
    if (failed(external))
      return failure();
    bytes = std::move(*external);
  } else if (tensor.has_raw_data()) {
    if (rawToMove) {
      auto raw = std::make_shared<std::string>(std::move(*rawToMove));
      bytes.data = ArrayRef<char>(raw->data(), raw->size());
      bytes.owner = std::move(raw);
    } else {
      bytes.data =
          ArrayRef<char>(tensor.raw_data().data(), tensor.raw_data().size());
    }
  } else {
    auto packed = std::make_shared<std::vector<char>>(
        packTypedData(tensor, getElementBytes(type.getElementType())));
    bytes.data = *packed;
    bytes.owner = std::move(packed);
  }
  if (bytes.data.size() != size)
    return emitError(loc) << "tensor '" << name << "' has " << bytes.data.size()
                          << " bytes of data, expected " << size << " for "
                          << type;
  return bytes;
}

FailureOr<TensorImporter::Bytes>
TensorImporter::readExternal(const TensorProto &tensor, size_t size,
                             StringRef name, Location loc) {
  auto error = [&]() { return emitError(loc) << "tensor '" << name << "': "; };
  StringRef location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const ::ONNX_NAMESPACE::StringStringEntryProto &entry : tensor.external_data()) {
    StringRef key = entry.key(), value = entry.value();
    if (key == "location")
      location = value;
    else if ((key == "offset" && value.getAsInteger(10, offset)) ||
             (key == "length" && value.getAsInteger(10, length.emplace())))
      return error() << "external data " << key << " '" << value
                     << "' is not a number";
  }
  // Like the ONNX checker, only files under the model's directory.
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(llvm::make_range(llvm::sys::path::begin(location),
                                          llvm::sys::path::end(location)),
                         ".."))
    return error() << "external data location '" << location
                   << "' is not a path inside the model's directory";
  if (length && *length != size)
    return error() << "external data length " << *length << " does not match "
                   << "the " << size << " bytes of its type";

  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  uint64_t fileSize;
  if (std::error_code ec = llvm::sys::fs::file_size(path, fileSize))
    return error() << "cannot read external data file '" << path
                   << "': " << ec.message();
  // Mapping past the end of the file would fault on access.
  if (offset > fileSize || size > fileSize - offset)
    return error() << "external data file '" << path << "' is too short: "
                   << "the tensor needs bytes " << offset << " to "
                   << offset + size << ", the file has " << fileSize;
  if (size == 0)
    return Bytes();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileSlice(path, size, offset);
  if (!buffer)
    return error() << "cannot read external data file '" << path
                   << "': " << buffer.getError().message();
  Bytes bytes;
  bytes.data = ArrayRef<char>((*buffer)->getBufferStart(), size);
  bytes.owner = std::shared_ptr<llvm::MemoryBuffer>(std::move(*buffer));
  return bytes;
}

/// `bytes` as a DenseElementsAttr of `type` (a copy).
static DenseElementsAttr makeDense(RankedTensorType type,
                                   ArrayRef<char> bytes) {
  // DenseElementsAttr packs i1 bits; ONNX stores a byte per bool.
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> values(
        llvm::map_range(bytes, [](char c) { return c != 0; }));
    return DenseElementsAttr::get(type, values);
  }
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}

/// A resource key from a tensor name: a bare identifier.
static std::string getResourceKey(StringRef name) {
  std::string key = name.empty() ? "tensor" : name.str();
  for (char &c : key)
    if (!llvm::isAlnum(c) && c != '_' && c != '.')
      c = '_';
  if (llvm::isDigit(key.front()))
    key.insert(0, "_");
  return key;
}

FailureOr<ElementsAttr> TensorImporter::importWeight(TensorProto &tensor,
                                                     StringRef name,
                                                     Location loc,
                                                     bool keepNamed) {
  FailureOr<std::pair<RankedTensorType, size_t>> typeAndSize =
      getTypeAndSize(context, tensor, name, loc);
  if (failed(typeAndSize))
    return failure();
  auto [type, size] = *typeAndSize;
  bool named = keepNamed && isa<FloatType>(type.getElementType()) &&
               type.getNumElements() > 1;
  bool small = (size <= kMaxInlineBytes && !named) ||
               type.getElementType().isInteger(1);
  std::string *raw =
      !small && tensor.has_raw_data() ? tensor.mutable_raw_data() : nullptr;
  FailureOr<Bytes> bytes = readBytes(tensor, raw, type, size, name, loc);
  if (failed(bytes))
    return failure();
  if (small)
    return cast<ElementsAttr>(makeDense(type, bytes->data));

  // A blob must be aligned to its elements; moved strings and mappings of
  // aligned offsets are, anything else is copied.
  size_t alignment = getElementBytes(type.getElementType());
  AsmResourceBlob blob;
  if (reinterpret_cast<uintptr_t>(bytes->data.data()) % alignment == 0)
    blob = AsmResourceBlob(
        bytes->data, alignment,
        [owner = std::move(bytes->owner)](void *, size_t, size_t) mutable {
          owner.reset();
        },
        /*dataIsMutable=*/false);
  else
    blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        bytes->data, alignment, /*dataIsMutable=*/false);
  return cast<ElementsAttr>(DenseResourceElementsAttr::get(
      type, getResourceKey(name), std::move(blob)));
}

FailureOr<DenseElementsAttr>
TensorImporter::importInline(const TensorProto &tensor, StringRef name,
                             Location loc) {
  FailureOr<std::pair<RankedTensorType, size_t>> typeAndSize =
      getTypeAndSize(context, tensor, name, loc);
  if (failed(typeAndSize))
    return failure();
  auto [type, size] = *typeAndSize;
  FailureOr<Bytes> bytes =
      readBytes(tensor, /*rawToMove=*/nullptr, type, size, name, loc);
  if (failed(bytes))
    return failure();
  return makeDense(type, bytes->data);
}
