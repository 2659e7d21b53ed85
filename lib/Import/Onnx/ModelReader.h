//===- ModelReader.h - an ONNX model's protobuf, tensor by tensor -*- C++ -*-===//
//
// Internal to lib/Import/Onnx. Protobuf parses a bytes field longer than
// 50 MB from a stream by appending, so a large tensor's string doubles its
// way up (a transient copy of the largest weight); parsed from one flat
// buffer it is allocated once, but the buffer (the model file) is then
// resident beside every tensor parsed from it. The reader parses the
// graph's initializers one at a time from the file's mapping, each with
// one exact allocation, and gives back each range of the file once it is
// parsed: the model is in memory once.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_MODELREADER_H
#define MOE_LIB_IMPORT_ONNX_MODELREADER_H

#include "llvm/ADT/STLFunctionalExtras.h"

#include <onnx/onnx_pb.h>

#include <cstddef>

namespace mlir::moe {

/// Parses `size` bytes at `data` as an ONNX ModelProto into `model`. After
/// each of the graph's initializers, `consumed(end)` says that the bytes
/// before `end` are no longer read. False when the bytes are not a valid
/// protobuf.
bool readModel(const char *data, size_t size,
               ::ONNX_NAMESPACE::ModelProto &model,
               llvm::function_ref<void(const char *end)> consumed);

} // namespace mlir::moe

#endif // MOE_LIB_IMPORT_ONNX_MODELREADER_H
