//===- ModelReader.cpp - an ONNX model's protobuf, tensor by tensor -------===//

#include "ModelReader.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

using namespace mlir::moe;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

namespace {
// ONNX's field numbers (onnx.proto3): ModelProto.graph,
// GraphProto.initializer, TensorProto.raw_data.
constexpr int kModelGraph = 7;
constexpr int kGraphInitializer = 5;
constexpr int kTensorRawData = 9;
// Raw data is copied, and its pages of the file given back, this much at a
// time.
constexpr size_t kCopyChunk = 16 << 20;

/// Calls `field(number, begin, length)` for each length-delimited field of
/// the message in `data` whose number `wanted` accepts, and appends every
/// other field's bytes to `rest`. False on malformed input.
template <typename Wanted, typename Field>
bool splitFields(const char *data, size_t size, Wanted wanted, Field field,
                 std::string &rest) {
  CodedInputStream in(reinterpret_cast<const uint8_t *>(data),
                      static_cast<int>(size));
  in.SetTotalBytesLimit(INT_MAX);
  while (true) {
    int start = in.CurrentPosition();
    uint32_t tag = in.ReadTag();
    if (tag == 0)
      return static_cast<size_t>(in.CurrentPosition()) == size;
    int number = WireFormatLite::GetTagFieldNumber(tag);
    if (wanted(number) && WireFormatLite::GetTagWireType(tag) ==
                              WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length;
      if (!in.ReadVarint32(&length) ||
          length > size - static_cast<size_t>(in.CurrentPosition()))
        return false;
      int begin = in.CurrentPosition();
      if (!field(number, data + begin, static_cast<size_t>(length)) ||
          !in.Skip(static_cast<int>(length)))
        return false;
      continue;
    }
    if (!WireFormatLite::SkipField(&in, tag))
      return false;
    rest.append(data + start, in.CurrentPosition() - start);
  }
}
} // namespace

bool mlir::moe::readModel(const char *data, size_t size,
                          ::ONNX_NAMESPACE::ModelProto &model,
                          llvm::function_ref<void(const char *end)> consumed) {
  if (size > INT_MAX)
    return false;
  auto readGraph = [&](int, const char *graphData, size_t graphSize) {
    ::ONNX_NAMESPACE::GraphProto &graph = *model.mutable_graph();
    std::string rest;
    // A tensor's raw data is copied in chunks, each chunk's pages given
    // back before the next is read; its other fields are parsed as usual.
    auto initializer = [&](int, const char *tensorData, size_t tensorSize) {
      ::ONNX_NAMESPACE::TensorProto &tensor = *graph.add_initializer();
      std::string raw, rest;
      bool hasRaw = false;
      auto copyRaw = [&](int, const char *bytes, size_t length) {
        raw.assign(length, '\0');
        for (size_t at = 0; at < length; at += kCopyChunk) {
          size_t n = std::min(kCopyChunk, length - at);
          std::memcpy(raw.data() + at, bytes + at, n);
          consumed(bytes + at + n);
        }
        hasRaw = true;
        return true;
      };
      if (!splitFields(
              tensorData, tensorSize,
              [](int number) { return number == kTensorRawData; }, copyRaw,
              rest) ||
          !tensor.ParseFromString(rest))
        return false;
      if (hasRaw)
        tensor.set_raw_data(std::move(raw));
      consumed(tensorData + tensorSize);
      return true;
    };
    return splitFields(
               graphData, graphSize,
               [](int number) { return number == kGraphInitializer; },
               initializer, rest) &&
           graph.MergeFromString(rest);
  };
  std::string rest;
  return splitFields(
             data, size, [](int number) { return number == kModelGraph; },
             readGraph, rest) &&
         model.MergeFromString(rest);
}
