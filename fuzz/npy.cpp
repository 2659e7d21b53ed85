//===- npy.cpp - Fuzz target: .npy files ----------------------------------===//
//
// Any bytes as a .npy file, as moe-run reads its inputs: an array comes
// back or a message, and an array converts to the model's element type as
// moe-run would convert it.
//
//===----------------------------------------------------------------------===//

#include "moert/Npy.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  moert::Array array;
  std::string error = moert::readNpy(
      std::string_view(reinterpret_cast<const char *>(data), size),
      "input.npy", array);
  if (!error.empty())
    return 0;
  // What moe-run does next with an input: check it against each type.
  for (const char *name : {"f32", "f64", "i32", "i64", "i8", "bool", "f16", "bf16"}) {
    moert::Array copy;
    copy.descr = array.descr;
    copy.shape = array.shape;
    copy.data = moert::Buffer(array.data.size());
    std::copy(array.data.data(), array.data.data() + array.data.size(),
              copy.data.data());
    (void)moert::convertToModelType(copy, *moert::findDType(name));
  }
  return 0;
}
