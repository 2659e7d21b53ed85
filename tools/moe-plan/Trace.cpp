//===- Trace.cpp - Expert-load traces for moe-plan ------------------------===//

#include "Trace.h"

#include "moe/Support/Input.h"
#include "moert/Npy.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>
#include <zip.h>

using namespace moe_plan;

static llvm::Error traceError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {
struct ZipCloser {
  void operator()(zip_t *z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t *f) const { zip_fclose(f); }
};
using Zip = std::unique_ptr<zip_t, ZipCloser>;
using ZipFile = std::unique_ptr<zip_file_t, ZipFileCloser>;

/// An .npz member is at most this large uncompressed (the SmartMoE trace's
/// counts take 49 MB): a larger one is refused before it is inflated.
constexpr zip_uint64_t maxMemberBytes = zip_uint64_t{1} << 32;

/// Reads and parses member `name` of `archive`; `found` is false (and no
/// error) when there is no such member.
llvm::Error readMember(zip_t *archive, const std::string &path,
                       const char *name, moert::Array &array, bool &found) {
  zip_int64_t index = zip_name_locate(archive, name, 0);
  found = index >= 0;
  if (!found)
    return llvm::Error::success();
  std::string where = path + ":" + name;
  zip_stat_t stat;
  if (zip_stat_index(archive, index, 0, &stat) != 0 ||
      !(stat.valid & ZIP_STAT_SIZE))
    return traceError(where + ": " + zip_strerror(archive));
  if (stat.size > maxMemberBytes)
    return traceError(llvm::formatv("{0}: {1} bytes uncompressed, more than "
                                    "the {2} a trace may have",
                                    where, stat.size, maxMemberBytes));
  ZipFile file(zip_fopen_index(archive, index, 0));
  if (!file)
    return traceError(where + ": " + zip_strerror(archive));
  // Grown as the data inflates, not sized by the header: a header may
  // claim gigabytes that the member does not hold.
  std::string contents;
  std::vector<char> chunk(1 << 20);
  for (;;) {
    zip_int64_t got = zip_fread(file.get(), chunk.data(), chunk.size());
    if (got < 0)
      return traceError(where + ": cannot inflate: " +
                        zip_file_strerror(file.get()));
    if (got == 0)
      break;
    if (contents.size() + static_cast<zip_uint64_t>(got) > stat.size)
      return traceError(where + ": inflates past the size its header gives");
    contents.append(chunk.data(), static_cast<size_t>(got));
  }
  if (contents.size() != stat.size)
    return traceError(llvm::formatv("{0}: inflates to {1} bytes, its header "
                                    "gives {2}",
                                    where, contents.size(), stat.size));
  std::string error = moert::readNpy(contents, where, array);
  return error.empty() ? llvm::Error::success() : traceError(error);
}

/// Element `i` of a NumPy array of integers or floats, as a double.
template <typename T> double element(const moert::Array &a, int64_t i) {
  T value;
  std::memcpy(&value, a.data.data() + i * sizeof(T), sizeof(T));
  return static_cast<double>(value);
}

using ElementReader = double (*)(const moert::Array &, int64_t);

/// How to read `a`'s elements as token counts.
llvm::Expected<ElementReader> elementReader(const moert::Array &a,
                                            const std::string &where) {
  struct Kind {
    const char *descr;
    ElementReader read;
  };
  static const Kind kinds[] = {
      {"|u1", element<uint8_t>},  {"<u2", element<uint16_t>},
      {"<u4", element<uint32_t>}, {"<u8", element<uint64_t>},
      {"|i1", element<int8_t>},   {"<i2", element<int16_t>},
      {"<i4", element<int32_t>},  {"<i8", element<int64_t>},
      {"<f4", element<float>},    {"<f8", element<double>},
  };
  for (const Kind &k : kinds)
    if (a.descr == k.descr)
      return k.read;
  return traceError(where + ": elements of type '" + a.descr +
                    "' are not token counts (integers or floats)");
}

llvm::Error checkCount(double tokens, const std::string &where) {
  if (std::isfinite(tokens) && tokens >= 0)
    return llvm::Error::success();
  return traceError(where + ": token counts must be finite and not "
                            "negative, got " +
                    std::to_string(tokens));
}

llvm::Expected<LoadTrace> readNpz(const std::string &path) {
  int code = 0;
  Zip archive(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (!archive) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    std::string message = path + ": not a readable .npz (zip) file: " +
                          zip_error_strerror(&error);
    zip_error_fini(&error);
    return traceError(message);
  }
  moert::Array counts, iterations;
  bool found = false;
  if (llvm::Error e =
          readMember(archive.get(), path, "counts.npy", counts, found))
    return std::move(e);
  if (!found)
    return traceError(path + ": no 'counts' array (SmartMoE's trace holds "
                             "counts [iterations, ranks, layers, "
                             "microbatches, experts])");
  const std::vector<int64_t> &shape = counts.shape;
  if (shape.size() != 5)
    return traceError(path + ":counts.npy: shape " +
                      moert::shapeString(shape) +
                      ", expected [iterations, ranks, layers, microbatches, "
                      "experts]");
  for (int64_t d : shape)
    if (d == 0)
      return traceError(path + ":counts.npy: shape " +
                        moert::shapeString(shape) + " holds no counts");
  auto read = elementReader(counts, path + ":counts.npy");
  if (!read)
    return read.takeError();

  LoadTrace trace;
  trace.records = shape[0];
  trace.layers = shape[2];
  trace.experts = shape[4];
  int64_t ranks = shape[1], microbatches = shape[3];
  trace.tokens.assign(trace.records * trace.layers * trace.experts, 0.0);
  // [t, r, l, m, e] summed over r and m into [t, l, e].
  int64_t i = 0;
  for (int64_t t = 0; t < trace.records; ++t)
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t l = 0; l < trace.layers; ++l) {
        double *out = trace.tokens.data() +
                      (t * trace.layers + l) * trace.experts;
        for (int64_t m = 0; m < microbatches; ++m)
          for (int64_t e = 0; e < trace.experts; ++e, ++i) {
            double tokens = (*read)(counts, i);
            if (llvm::Error err = checkCount(tokens, path + ":counts.npy"))
              return std::move(err);
            out[e] += tokens;
          }
      }

  if (llvm::Error e = readMember(archive.get(), path, "iterations.npy",
                                 iterations, found))
    return std::move(e);
  if (found) {
    auto readStep = elementReader(iterations, path + ":iterations.npy");
    if (!readStep)
      return readStep.takeError();
    if (moert::numElements(iterations.shape) != trace.records)
      return traceError(llvm::formatv(
          "{0}:iterations.npy: {1} entries for {2} records", path,
          moert::numElements(iterations.shape), trace.records));
    // Records taken every N steps: each stands for N of them.
    if (trace.records >= 2) {
      double every = (*readStep)(iterations, 1) - (*readStep)(iterations, 0);
      if (every >= 1 && every < 1e9)
        trace.stepsPerRecord = static_cast<int64_t>(every);
    }
  }
  return trace;
}

llvm::Expected<LoadTrace> readStatsJson(const std::string &path,
                                        llvm::StringRef text) {
  // parseJson bounds the nesting: LLVM's parser recurses once per level.
  llvm::Expected<llvm::json::Value> parsed = mlir::moe::parseJson(text);
  if (!parsed)
    return traceError(path + ": not an .npz, and not JSON: " +
                      llvm::toString(parsed.takeError()));
  auto bad = [&](const llvm::Twine &what) {
    return traceError(path + ": " + what);
  };
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root || root->getInteger("moe_expert_load") != 1)
    return bad("not an expert-load stats file (an object with "
               "\"moe_expert_load\": 1)");
  LoadTrace trace;
  if (const llvm::json::Value *s = root->get("steps_per_record")) {
    std::optional<int64_t> steps = s->getAsInteger();
    if (!steps || *steps < 1)
      return bad("\"steps_per_record\" must be a positive integer");
    trace.stepsPerRecord = *steps;
  }
  const llvm::json::Array *records = root->getArray("records");
  if (!records || records->empty())
    return bad("\"records\" must be a non-empty list");
  trace.records = static_cast<int64_t>(records->size());
  for (int64_t t = 0; t < trace.records; ++t) {
    const llvm::json::Object *record = (*records)[t].getAsObject();
    const llvm::json::Array *layers =
        record ? record->getArray("tokens") : nullptr;
    if (!layers || layers->empty())
      return bad(llvm::formatv("record {0}: \"tokens\" must be a non-empty "
                               "list of layers",
                               t));
    if (t == 0)
      trace.layers = static_cast<int64_t>(layers->size());
    if (static_cast<int64_t>(layers->size()) != trace.layers)
      return bad(llvm::formatv("record {0} has {1} layers, record 0 {2}", t,
                               layers->size(), trace.layers));
    for (int64_t l = 0; l < trace.layers; ++l) {
      const llvm::json::Array *experts = (*layers)[l].getAsArray();
      if (!experts || experts->empty())
        return bad(llvm::formatv("record {0} layer {1}: expected a "
                                 "non-empty list of tokens per expert",
                                 t, l));
      if (t == 0 && l == 0)
        trace.experts = static_cast<int64_t>(experts->size());
      if (static_cast<int64_t>(experts->size()) != trace.experts)
        return bad(llvm::formatv("record {0} layer {1} has {2} experts, "
                                 "record 0 layer 0 {3}",
                                 t, l, experts->size(), trace.experts));
      for (const llvm::json::Value &v : *experts) {
        std::optional<double> tokens = v.getAsNumber();
        if (!tokens)
          return bad(llvm::formatv("record {0} layer {1}: token counts "
                                   "must be numbers",
                                   t, l));
        if (llvm::Error e = checkCount(*tokens, path))
          return std::move(e);
        trace.tokens.push_back(*tokens);
      }
    }
  }
  return trace;
}
} // namespace

llvm::Expected<LoadTrace> moe_plan::readLoadTrace(const std::string &path) {
  // Bounded: a device (/dev/zero) or an endless pipe is refused, not read
  // until memory runs out.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> file =
      mlir::moe::readInputFile(path);
  if (!file)
    return traceError("cannot read trace " + path + ": " +
                      llvm::toString(file.takeError()));
  llvm::StringRef text = (*file)->getBuffer();
  // Zip archives (.npz) begin with a local file header, "PK\3\4".
  if (text.starts_with("PK\x03\x04")) {
    file->reset();
    return readNpz(path);
  }
  return readStatsJson(path, text);
}
