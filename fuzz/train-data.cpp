//===- train-data.cpp - Fuzz target: moe-train's data sets ----------------===//
//
// Any bytes as the .npy data set of a training step's inputs, read and
// checked as moe-train reads them (tools/moe-train/Data.cpp) for three
// steps: token ids with labels taken from them, token ids with the same
// file as labels, and float rows that a step takes one sample of. Of data
// that passes, every batch a step copies lies inside its data set.
//
//===----------------------------------------------------------------------===//

#include "Data.h"
#include "FuzzSupport.h"

#include <cstdlib>

using moe_run::TensorSpec;

static TensorSpec spec(const char *name, const char *type,
                       std::vector<int64_t> shape) {
  TensorSpec t;
  t.name = name;
  t.type = moert::findDType(type);
  t.shape = std::move(shape);
  return t;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static moe_fuzz::TempFile file(".npy");
  std::string path = file.write(data, size);
  struct Step {
    std::vector<TensorSpec> specs;
    std::vector<std::string> inputs;
    int64_t batchSize;
  };
  const Step steps[] = {
      {{spec("input_ids", "i64", {2, 8}), spec("labels", "i64", {2, 8})},
       {"input_ids=" + path},
       2},
      {{spec("input_ids", "i32", {1, 4}), spec("labels", "i64", {1, 4})},
       {"input_ids=" + path, "labels=" + path},
       1},
      {{spec("hidden_states", "f32", {4, 16})}, {"hidden_states=" + path}, 1},
  };
  for (const Step &step : steps) {
    llvm::Expected<moe_train::TrainingData> read =
        moe_train::readTrainingData(step.inputs, step.specs, step.batchSize,
                                    /*microbatches=*/1);
    if (!read) {
      llvm::consumeError(read.takeError());
      continue;
    }
    for (size_t i = 0; i < step.specs.size(); ++i) {
      size_t sampleBytes = read->batches[i].size() /
                           (read->wholeSamples[i] ? 1 : step.batchSize);
      if (read->samples < 1 ||
          size_t(read->samples) * sampleBytes > read->datasets[i].data.size())
        std::abort();
    }
  }
  return 0;
}
