//===- onnx-import.cpp - Fuzz target: ONNX model files --------------------===//
//
// Any bytes as an ONNX model file (moe-translate --import-onnx, moe-compile
// model.onnx): the importer reports what is wrong with them and never
// crashes, hangs or reads out of bounds. Mutations here are byte-level; see
// onnx-proto.cpp for mutations of the model's structure.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  moe_fuzz::importOnnxBytes(data, size);
  return 0;
}
