//===- Data.cpp - moe-train's data sets, checked as they are read --------===//

#include "Data.h"
#include "Library.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>

using namespace llvm;
using namespace moe_run;
using namespace moe_train;

namespace {
Error failure(const Twine &message) { return createStringError(message); }

/// Where a data set's element `index` lies: its sample and the element in
/// the sample.
static std::string whereIs(const moert::Array &data, int64_t index) {
  int64_t perSample = 1;
  for (size_t d = 1; d < data.shape.size(); ++d)
    perSample *= data.shape[d];
  perSample = std::max<int64_t>(perSample, 1);
  return formatv("sample {0}, element {1}", index / perSample,
                 index % perSample);
}

/// Refuses data no training step may take: a float element that is NaN or
/// infinite (it would make every weight NaN from that step on), and a
/// label below 0 other than the ignore index -100 (the loss would read it
/// as a class counted from the end, where PyTorch refuses it).
static Error checkData(const TensorSpec &spec, const moert::Array &data,
                const std::string &file) {
  int64_t n = moert::numElements(data.shape);
  StringRef type = spec.type->name;
  auto bits16 = [&](int64_t i) {
    uint16_t v;
    std::memcpy(&v, data.data.data() + 2 * i, 2);
    return v;
  };
  for (int64_t i = 0; i < n; ++i) {
    bool finite = true;
    if (type == "f32") {
      float v;
      std::memcpy(&v, data.data.data() + 4 * i, 4);
      finite = std::isfinite(v);
    } else if (type == "f64") {
      double v;
      std::memcpy(&v, data.data.data() + 8 * i, 8);
      finite = std::isfinite(v);
    } else if (type == "f16") {
      finite = (bits16(i) & 0x7c00) != 0x7c00;
    } else if (type == "bf16") {
      finite = (bits16(i) & 0x7f80) != 0x7f80;
    }
    if (!finite)
      return failure(formatv("input '{0}' ({1}): {2} is not finite (NaN or "
                             "infinite); training data must be finite",
                             spec.name, file, whereIs(data, i)));
  }
  if (spec.name == "labels" && (type == "i64" || type == "i32"))
    for (int64_t i = 0; i < n; ++i) {
      int64_t label;
      if (type == "i64") {
        std::memcpy(&label, data.data.data() + 8 * i, 8);
      } else {
        int32_t v;
        std::memcpy(&v, data.data.data() + 4 * i, 4);
        label = v;
      }
      if (label < 0 && label != -100)
        return failure(formatv("input 'labels' ({0}): {1} is {2}; a label is "
                               "a class (0 or more) or the ignore index -100",
                               file, whereIs(data, i), label));
    }
  return Error::success();
}

} // namespace

Expected<TrainingData>
moe_train::readTrainingData(ArrayRef<std::string> inputs,
                            const std::vector<TensorSpec> &specs,
                            int64_t batchSize, int64_t microbatches) {
  TrainingData t;
  t.datasets.resize(specs.size());
  std::vector<std::string> files(specs.size());
  if (Error error = moe_run::readNamedInputs(inputs, specs, "step",
                                             t.datasets, files))
    return std::move(error);
  // transformers' causal LM: the labels are the input ids.
  for (size_t i = 0; i < specs.size(); ++i)
    if (files[i].empty() && specs[i].name == "labels")
      for (size_t j = 0; j < specs.size(); ++j)
        if (!files[j].empty() && specs[j].name == "input_ids" &&
            specs[j].shape == specs[i].shape) {
          moert::Array &labels = t.datasets[i];
          labels.descr = t.datasets[j].descr;
          labels.shape = t.datasets[j].shape;
          labels.data = moert::Buffer(t.datasets[j].data.size());
          std::memcpy(labels.data.data(), t.datasets[j].data.data(),
                      labels.data.size());
          files[i] = files[j];
        }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (files[i].empty())
      return failure(formatv("missing input '{0}' (pass --input "
                             "{0}=FILE.npy)",
                             specs[i].name));
    const std::vector<int64_t> &shape = t.datasets[i].shape;
    // A step input without a batch dimension (a block's [T, H]) takes one
    // sample of a data set [N, T, H] per step.
    bool whole = shape.size() == specs[i].shape.size() + 1 &&
                 std::equal(specs[i].shape.begin(), specs[i].shape.end(),
                            shape.begin() + 1);
    t.wholeSamples.push_back(whole);
    int64_t micro = batchSize / microbatches;
    if (whole && micro != 1)
      return failure(formatv("input '{0}' takes one sample of {1} per call: "
                             "--batch-size must be --microbatches ({2})",
                             specs[i].name, moert::shapeString(shape),
                             microbatches));
    std::vector<int64_t> sample(specs[i].shape.begin() + (whole ? 0 : 1),
                                specs[i].shape.end());
    if (!whole &&
        (specs[i].shape.empty() || shape.size() != specs[i].shape.size() ||
         !std::equal(sample.begin(), sample.end(), shape.begin() + 1) ||
         shape[0] < 1))
      return failure(formatv(
          "input '{0}' has shape {1}; a data set of [N, {2}] samples is "
          "expected (the step takes {3})",
          specs[i].name, moert::shapeString(shape),
          join(map_range(sample, [](int64_t d) { return std::to_string(d); }),
               ", "),
          moert::shapeString(specs[i].shape)));
    if (!whole && specs[i].shape[0] != micro)
      return failure(formatv("--batch-size {0} in {1} microbatch{2}: the "
                             "step was compiled for batches of {3} (input "
                             "'{4}')",
                             batchSize,
                             microbatches,
                             microbatches == 1 ? "" : "es",
                             specs[i].shape[0], specs[i].name));
    if (shape.empty() || shape[0] < 1)
      return failure(formatv("input '{0}' ({1}) has no samples: every input "
                             "needs at least one",
                             specs[i].name, files[i]));
    if (t.samples && shape[0] != t.samples)
      return failure(formatv("input '{0}' has {1} samples, another input {2}",
                             specs[i].name, shape[0], t.samples));
    if (Error error = checkData(specs[i], t.datasets[i], files[i]))
      return std::move(error);
    t.samples = shape[0];
    t.batches.emplace_back(specs[i].bytes());
  }
  return std::move(t);
}

