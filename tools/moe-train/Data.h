//===- Data.h - moe-train's data sets, checked as they are read -*- C++ -*-===//
//
// Each --input NAME=FILE.npy holds a whole data set, samples along its first
// dimension. The reader refuses what no training step may take: a shape
// that is not the step's, an input with no samples or with another input's
// count, a non-finite float (it would make every weight NaN from that step
// on) and a label below 0 other than the ignore index -100.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_TRAIN_DATA_H
#define MOE_TOOLS_MOE_TRAIN_DATA_H

#include "Manifest.h"

#include "moert/Npy.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace moe_train {

struct TrainingData {
  /// Per step input: the whole data set and the batch buffer.
  std::vector<moert::Array> datasets;
  std::vector<std::vector<char>> batches;
  /// Per input: whether a step reads one whole sample (no batch dimension).
  std::vector<bool> wholeSamples;
  /// The samples of every data set.
  int64_t samples = 0;
};

/// Reads the data set of each of the step's `specs` from the --input
/// arguments `inputs` ("labels" defaults to "input_ids" of the same shape,
/// as transformers' causal LMs), for steps of `batchSize` samples in
/// `microbatches` calls, and checks it.
llvm::Expected<TrainingData>
readTrainingData(llvm::ArrayRef<std::string> inputs,
                 const std::vector<moe_run::TensorSpec> &specs,
                 int64_t batchSize, int64_t microbatches);

} // namespace moe_train

#endif // MOE_TOOLS_MOE_TRAIN_DATA_H
