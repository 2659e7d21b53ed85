//===- checkpoint.cpp - Fuzz target: training checkpoints -----------------===//
//
// Any bytes as a checkpoint directory that `moe-train --resume` reads
// (runtime/lib/Checkpoint.cpp): checkpoint.json up to the first 0 byte,
// then params.bin and optimizer.bin, the rest split at a 4-byte
// little-endian length that follows the 0 (fuzz/seeds/checkpoint holds one
// that saveCheckpoint wrote). Of a checkpoint that passes, every parameter
// holds the elements of its shape and every optimizer state one per
// element.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "moert/Train.h"

#include <cstdlib>
#include <cstring>

namespace {
/// A directory for the three files, removed at exit.
class TempDir {
public:
  TempDir() {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = std::string(base) + "/moe-fuzz-ckpt-XXXXXX";
    if (!mkdtemp(path.data())) {
      std::perror("moe-fuzz: mkdtemp");
      std::abort();
    }
  }
  ~TempDir() {
    for (const char *name : kFiles)
      std::remove((path + "/" + name).c_str());
    rmdir(path.c_str());
  }
  void write(const char *name, const uint8_t *data, size_t size) {
    std::FILE *f = std::fopen((path + "/" + name).c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) ||
        std::fclose(f) != 0) {
      std::perror("moe-fuzz: writing a checkpoint file");
      std::abort();
    }
  }
  static constexpr const char *kFiles[] = {"checkpoint.json", "params.bin",
                                           "optimizer.bin"};
  std::string path;
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static TempDir dir;
  const uint8_t *end = data + size;
  const uint8_t *zero =
      static_cast<const uint8_t *>(std::memchr(data, 0, size));
  const uint8_t *jsonEnd = zero ? zero : end;
  dir.write("checkpoint.json", data, jsonEnd - data);
  const uint8_t *rest = zero ? zero + 1 : end;
  uint32_t paramsBytes = 0;
  if (end - rest >= 4) {
    std::memcpy(&paramsBytes, rest, 4);
    rest += 4;
  }
  size_t params = std::min<size_t>(paramsBytes, end - rest);
  dir.write("params.bin", rest, params);
  dir.write("optimizer.bin", rest + params, end - rest - params);

  moert::train::LoadedCheckpoint loaded;
  if (!moert::train::loadCheckpoint(dir.path, loaded).empty())
    return 0;
  if (loaded.params.size() != loaded.names.size() ||
      loaded.shapes.size() != loaded.names.size())
    std::abort();
  for (size_t i = 0; i < loaded.params.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : loaded.shapes[i])
      n *= d;
    if (int64_t(loaded.params[i].size()) != n)
      std::abort();
    if (i < loaded.states.size())
      for (const std::vector<float> *state :
           {&loaded.states[i].expAvg, &loaded.states[i].expAvgSq,
            &loaded.states[i].momentumBuffer})
        if (!state->empty() && int64_t(state->size()) != n)
          std::abort();
  }
  return 0;
}
