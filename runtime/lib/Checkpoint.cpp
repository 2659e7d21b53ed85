//===- Checkpoint.cpp - Training checkpoints, written atomically ----------===//
//
// A checkpoint is a directory: checkpoint.json describes it, params.bin holds
// the fp32 master weights one parameter after the other, optimizer.bin the
// states (AdamW: exp_avg then exp_avg_sq; SGD: momentum_buffer) of the
// parameters that have one, in the same order. checkpoint.json records each
// file's size and checksum, and each parameter's byte range, so that a
// reader refuses a truncated, corrupted or mismatched file instead of
// training on garbage.
//
// The runtime has no JSON library (moe-run reads model.json with LLVM's), so
// the reader below is a strict one for exactly this format: bounded in size
// and depth, no duplicate or unknown keys.
//
//===----------------------------------------------------------------------===//

#include "moert/Npy.h"
#include "moert/Train.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace moert;
using namespace moert::train;

static constexpr int kFormatVersion = 1;
static constexpr const char *kFiles[] = {"checkpoint.json", "params.bin",
                                         "optimizer.bin"};
static constexpr int64_t kMaxJsonBytes = 64 << 20;
static constexpr int kMaxDepth = 16;

static std::string sysError(const std::string &what, const std::string &path) {
  return "cannot " + what + " " + path + ": " + std::strerror(errno);
}

//===----------------------------------------------------------------------===//
// Checksum: FNV-1a over 64-bit little-endian words, then the tail bytes. Not
// cryptographic; it catches a flipped or overwritten stretch of a file.
//===----------------------------------------------------------------------===//

namespace {
class Checksum {
public:
  void update(const void *data, size_t size) {
    const auto *p = static_cast<const unsigned char *>(data);
    while (size && fill) { // complete a pending word
      pending[fill++] = *p++;
      --size;
      if (fill == 8)
        word(pending), fill = 0;
    }
    for (; size >= 8; p += 8, size -= 8)
      word(p);
    while (size--)
      pending[fill++] = *p++;
  }
  std::string hex() const {
    uint64_t h = hash;
    for (size_t i = 0; i < fill; ++i)
      h = (h ^ pending[i]) * kPrime;
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx",
                  static_cast<unsigned long long>(h));
    return text;
  }

private:
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  void word(const unsigned char *p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    hash = (hash ^ w) * kPrime;
  }
  uint64_t hash = 0xcbf29ce484222325ull;
  unsigned char pending[8];
  size_t fill = 0;
};

/// A file written through write(2) and synced before it is closed.
class Writer {
public:
  ~Writer() {
    if (fd >= 0)
      ::close(fd);
  }
  std::string open(const std::string &path) {
    this->path = path;
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd < 0 ? sysError("create", path) : "";
  }
  std::string write(const void *data, size_t size) {
    checksum.update(data, size);
    bytes += size;
    const char *p = static_cast<const char *>(data);
    while (size) {
      ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return sysError("write", path);
      p += n;
      size -= static_cast<size_t>(n);
    }
    return "";
  }
  std::string close() {
    int f = fd;
    fd = -1;
    if (::fsync(f) != 0) {
      std::string error = sysError("sync", path);
      ::close(f);
      return error;
    }
    return ::close(f) != 0 ? sysError("close", path) : "";
  }
  Checksum checksum;
  uint64_t bytes = 0;

private:
  std::string path;
  int fd = -1;
};
} // namespace

//===----------------------------------------------------------------------===//
// Directories
//===----------------------------------------------------------------------===//

static bool exists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

static std::string syncDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sysError("open", path);
  std::string error = ::fsync(fd) != 0 ? sysError("sync", path) : "";
  ::close(fd);
  return error;
}

/// Empty when `path` is a directory holding nothing but a checkpoint's files.
static std::string checkOnlyCheckpointFiles(const std::string &path) {
  DIR *d = ::opendir(path.c_str());
  if (!d)
    return sysError("open", path);
  std::string error;
  while (const dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    bool ours = false;
    for (const char *f : kFiles)
      ours |= name == f;
    if (!ours) {
      error = path + " holds " + name +
              ", which is not part of a checkpoint; not replacing it";
      break;
    }
  }
  ::closedir(d);
  return error;
}

/// Removes a checkpoint directory (only its own files, never anything else).
static std::string removeCheckpointDir(const std::string &path) {
  if (std::string error = checkOnlyCheckpointFiles(path); !error.empty())
    return error;
  for (const char *f : kFiles) {
    std::string file = path + "/" + f;
    if (::unlink(file.c_str()) != 0 && errno != ENOENT)
      return sysError("remove", file);
  }
  return ::rmdir(path.c_str()) != 0 ? sysError("remove", path) : "";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

static std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

/// The shortest text that reads back as the same double.
static std::string jsonNumber(double v) {
  char text[32];
  auto result = std::to_chars(text, text + sizeof(text), v);
  return std::string(text, result.ptr);
}

static int64_t stateFloats(const OptimizerConfig &config, size_t n) {
  return static_cast<int64_t>(n) *
         (config.kind == OptimizerKind::AdamW ? 2 : 1);
}

/// Empty when every parameter's data and state are consistent.
static std::string checkParams(const OptimizerConfig &config,
                               const std::vector<CheckpointParam> &params) {
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    const CheckpointParam &p = params[i];
    std::string what = "parameter " + std::to_string(i) + " (" + p.name + ")";
    if (p.name.empty())
      return "parameter " + std::to_string(i) + " has no name";
    if (!names.insert(p.name).second)
      return "two parameters are named " + p.name;
    int64_t n = numElements(p.shape);
    if (n < 0 || n > (int64_t(1) << 40))
      return what + ": invalid shape " + shapeString(p.shape);
    if (!p.data && n)
      return what + " has no data";
    if (!p.state || !p.state->hasBuffer)
      continue;
    const ParamState &s = *p.state;
    size_t size = static_cast<size_t>(n);
    bool ok = config.kind == OptimizerKind::AdamW
                  ? s.expAvg.size() == size && s.expAvgSq.size() == size
                  : s.momentumBuffer.size() == size;
    if (!ok)
      return what + ": its optimizer state does not have " + std::to_string(n) +
             " elements";
  }
  return "";
}

/// Writes the three files into the new directory `tmp`, each synced.
static std::string writeFiles(const std::string &tmp, int64_t step,
                              int64_t samplesConsumed,
                              const OptimizerConfig &config,
                              const Schedule &schedule,
                              const std::vector<CheckpointParam> &params) {
  Writer weights, states, meta;
  if (std::string e = weights.open(tmp + "/params.bin"); !e.empty())
    return e;
  if (std::string e = states.open(tmp + "/optimizer.bin"); !e.empty())
    return e;
  std::string entries;
  for (const CheckpointParam &p : params) {
    size_t n = static_cast<size_t>(numElements(p.shape));
    entries += entries.empty() ? "\n" : ",\n";
    entries += "    {\"name\": " + jsonString(p.name) + ", \"shape\": [";
    for (size_t i = 0; i < p.shape.size(); ++i)
      entries += (i ? ", " : "") + std::to_string(p.shape[i]);
    entries += "], \"offset\": " + std::to_string(weights.bytes) +
               ", \"bytes\": " + std::to_string(n * 4) + ", \"state\": ";
    if (std::string e = weights.write(p.data, n * 4); !e.empty())
      return e;
    if (!p.state || !p.state->hasBuffer) {
      entries += "null}";
      continue;
    }
    entries += "{\"step\": " + std::to_string(p.state->step) +
               ", \"offset\": " + std::to_string(states.bytes) +
               ", \"bytes\": " + std::to_string(stateFloats(config, n) * 4) +
               "}}";
    bool adamw = config.kind == OptimizerKind::AdamW;
    std::string e = states.write(
        adamw ? p.state->expAvg.data() : p.state->momentumBuffer.data(), n * 4);
    if (e.empty() && adamw)
      e = states.write(p.state->expAvgSq.data(), n * 4);
    if (!e.empty())
      return e;
  }
  if (std::string e = weights.close(); !e.empty())
    return e;
  if (std::string e = states.close(); !e.empty())
    return e;

  const OptimizerConfig &c = config;
  std::string json = "{\n  \"format\": \"moe-train-checkpoint\",\n";
  json += "  \"version\": " + std::to_string(kFormatVersion) + ",\n";
  json += "  \"step\": " + std::to_string(step) + ",\n";
  json += "  \"samples_consumed\": " + std::to_string(samplesConsumed) + ",\n";
  json += "  \"optimizer\": {\"kind\": \"" + std::string(name(c.kind)) +
          "\", \"lr\": " + jsonNumber(c.lr) +
          ", \"momentum\": " + jsonNumber(c.momentum) +
          ", \"dampening\": " + jsonNumber(c.dampening) +
          ", \"nesterov\": " + (c.nesterov ? "true" : "false") +
          ", \"beta1\": " + jsonNumber(c.beta1) +
          ", \"beta2\": " + jsonNumber(c.beta2) +
          ", \"eps\": " + jsonNumber(c.eps) +
          ", \"weight_decay\": " + jsonNumber(c.weightDecay) +
          ", \"sqrt\": \"" + name(c.sqrt) + "\"},\n";
  json += "  \"schedule\": {\"kind\": \"" + std::string(name(schedule.kind)) +
          "\", \"warmup_steps\": " + std::to_string(schedule.warmupSteps) +
          ", \"total_steps\": " + std::to_string(schedule.totalSteps) + "},\n";
  json += "  \"params_bin\": {\"bytes\": " + std::to_string(weights.bytes) +
          ", \"checksum\": \"" + weights.checksum.hex() + "\"},\n";
  json += "  \"optimizer_bin\": {\"bytes\": " + std::to_string(states.bytes) +
          ", \"checksum\": \"" + states.checksum.hex() + "\"},\n";
  json += "  \"params\": [" + entries + (entries.empty() ? "]\n" : "\n  ]\n");
  json += "}\n";
  if (std::string e = meta.open(tmp + "/checkpoint.json"); !e.empty())
    return e;
  if (std::string e = meta.write(json.data(), json.size()); !e.empty())
    return e;
  if (std::string e = meta.close(); !e.empty())
    return e;
  return syncDirectory(tmp);
}

/// Puts the complete directory `tmp` in the place of `dir`: an atomic
/// exchange when `dir` exists (the old checkpoint then lies at `tmp`, to be
/// removed), else a rename.
static std::string replaceDir(std::string tmp, const std::string &dir) {
  if (!exists(dir))
    return ::rename(tmp.c_str(), dir.c_str()) != 0
               ? sysError("rename " + tmp + " to", dir)
               : "";
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(),
                  RENAME_EXCHANGE) != 0) {
    // A filesystem without the exchange: two renames, with a moment without
    // `dir` (a crash there leaves `dir`.old and `dir`.partial, both whole).
    std::string old = dir + ".old";
    if (exists(old))
      if (std::string e = removeCheckpointDir(old); !e.empty())
        return e;
    if (::rename(dir.c_str(), old.c_str()) != 0)
      return sysError("move aside", dir);
    if (::rename(tmp.c_str(), dir.c_str()) != 0)
      return sysError("rename " + tmp + " to", dir);
    tmp = old;
  }
  return removeCheckpointDir(tmp);
}

std::string train::saveCheckpoint(const std::string &dirArg, int64_t step,
                                  int64_t samplesConsumed,
                                  const OptimizerConfig &config,
                                  const Schedule &schedule,
                                  const std::vector<CheckpointParam> &params) {
  std::string dir = dirArg;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  auto fail = [&](const std::string &why) {
    return "cannot save checkpoint " + dir + ": " + why;
  };
  if (dir.empty())
    return fail("no directory given");
  if (step < 0 || samplesConsumed < 0)
    return fail("negative step or sample count");
  if (std::string e = validate(config); !e.empty())
    return fail(e);
  if (std::string e = validate(schedule); !e.empty())
    return fail(e);
  if (std::string e = checkParams(config, params); !e.empty())
    return fail(e);
  if (exists(dir))
    if (std::string e = checkOnlyCheckpointFiles(dir); !e.empty())
      return fail(e);

  // A .partial left by a killed save is ours to replace.
  std::string tmp = dir + ".partial";
  if (exists(tmp))
    if (std::string e = removeCheckpointDir(tmp); !e.empty())
      return fail(e);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    return fail(sysError("create", tmp));
  if (std::string e =
          writeFiles(tmp, step, samplesConsumed, config, schedule, params);
      !e.empty()) {
    removeCheckpointDir(tmp);
    return fail(e);
  }
  if (std::string e = replaceDir(tmp, dir); !e.empty())
    return fail(e);
  size_t slash = dir.rfind('/');
  std::string parent = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : dir.substr(0, slash);
  if (std::string e = syncDirectory(parent); !e.empty())
    return fail(e);
  return "";
}

//===----------------------------------------------------------------------===//
// A strict JSON reader
//===----------------------------------------------------------------------===//

namespace {
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  std::string text; ///< a string's value, or a number's literal
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;
};

class Parser {
public:
  explicit Parser(const std::string &s) : s(s) {}

  /// Empty on success; else where and why the text is not JSON.
  std::string parse(Json &out) {
    if (!value(out, 0))
      return "invalid JSON at byte " + std::to_string(i) + ": " + why;
    space();
    if (i != s.size())
      return "invalid JSON at byte " + std::to_string(i) +
             ": text after the value";
    return "";
  }

private:
  bool error(const char *what) {
    why = what;
    return false;
  }
  void space() {
    while (i < s.size() && s[i] && std::strchr(" \t\r\n", s[i]))
      ++i;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (s.compare(i, n, word) != 0)
      return error("unexpected character");
    i += n;
    return true;
  }
  bool value(Json &v, int depth) {
    if (depth > kMaxDepth)
      return error("nested too deeply");
    space();
    if (i >= s.size())
      return error("unexpected end");
    char c = s[i];
    if (c == '{')
      return object(v, depth);
    if (c == '[')
      return array(v, depth);
    if (c == '"')
      return v.kind = Json::String, string(v.text);
    if (c == 't' || c == 'f') {
      v.kind = Json::Bool;
      v.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return v.kind = Json::Null, literal("null");
    return v.kind = Json::Number, number(v.text);
  }
  bool object(Json &v, int depth) {
    v.kind = Json::Object;
    ++i;
    space();
    if (i < s.size() && s[i] == '}')
      return ++i, true;
    while (true) {
      space();
      std::string key;
      if (i >= s.size() || s[i] != '"' || !string(key))
        return error("expected a key");
      for (const auto &f : v.fields)
        if (f.first == key)
          return error("repeated key");
      space();
      if (i >= s.size() || s[i] != ':')
        return error("expected ':'");
      ++i;
      v.fields.emplace_back(key, Json());
      if (!value(v.fields.back().second, depth + 1))
        return false;
      space();
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == '}')
        return ++i, true;
      return error("expected ',' or '}'");
    }
  }
  bool array(Json &v, int depth) {
    v.kind = Json::Array;
    ++i;
    space();
    if (i < s.size() && s[i] == ']')
      return ++i, true;
    while (true) {
      v.items.emplace_back();
      if (!value(v.items.back(), depth + 1))
        return false;
      space();
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == ']')
        return ++i, true;
      return error("expected ',' or ']'");
    }
  }
  bool hex4(unsigned &code) {
    if (s.size() - i < 4)
      return error("truncated \\u escape");
    code = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s[i++];
      int d = std::isxdigit(static_cast<unsigned char>(c))
                  ? (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10)
                  : -1;
      if (d < 0)
        return error("invalid \\u escape");
      code = code * 16 + d;
    }
    return true;
  }
  bool string(std::string &out) {
    ++i; // the quote
    out.clear();
    while (i < s.size()) {
      unsigned char c = s[i++];
      if (c == '"')
        return true;
      if (c < 0x20)
        return error("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i >= s.size())
        break;
      char e = s[i++];
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      if (const char *p = std::strchr(from, e); p && e) {
        out += to[p - from];
        continue;
      }
      if (e != 'u')
        return error("invalid escape");
      unsigned code;
      if (!hex4(code))
        return false;
      if (code >= 0xd800 && code < 0xdc00) { // a surrogate pair
        unsigned low;
        if (s.compare(i, 2, "\\u") != 0 || (i += 2, !hex4(low)) ||
            low < 0xdc00 || low >= 0xe000)
          return error("unpaired surrogate");
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
      } else if (code >= 0xdc00 && code < 0xe000) {
        return error("unpaired surrogate");
      }
      // UTF-8.
      if (code < 0x80) {
        out += static_cast<char>(code);
      } else if (code < 0x800) {
        out += static_cast<char>(0xc0 | code >> 6);
        out += static_cast<char>(0x80 | (code & 0x3f));
      } else if (code < 0x10000) {
        out += static_cast<char>(0xe0 | code >> 12);
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
      } else {
        out += static_cast<char>(0xf0 | code >> 18);
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
      }
    }
    return error("unterminated string");
  }
  /// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  bool number(std::string &out) {
    size_t start = i;
    auto digits = [&] {
      size_t from = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9')
        ++i;
      return i > from;
    };
    if (i < s.size() && s[i] == '-')
      ++i;
    if (i < s.size() && s[i] == '0')
      ++i;
    else if (!digits())
      return error("unexpected character");
    if (i < s.size() && s[i] == '.' && (++i, !digits()))
      return error("invalid number");
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < s.size() && (s[i] == '+' || s[i] == '-'))
        ++i;
      if (!digits())
        return error("invalid number");
    }
    out = s.substr(start, i - start);
    return true;
  }

  const std::string &s;
  size_t i = 0;
  std::string why;
};

/// Reads the fields of one object by name, each once; `done` then names
/// the first field it did not expect. Errors name the JSON path.
class Fields {
public:
  Fields(const Json &v, std::string path, std::string &error)
      : v(v), path(std::move(path)), error(error) {
    if (v.kind != Json::Object)
      fail(this->path, "not an object");
  }
  const Json *get(const std::string &key) {
    used.push_back(key);
    for (const auto &f : v.fields)
      if (f.first == key)
        return &f.second;
    fail(path + "." + key, "missing");
    return nullptr;
  }
  void integer(const std::string &key, int64_t &out, int64_t min = 0) {
    const Json *j = get(key);
    if (!j)
      return;
    const std::string &t = j->text;
    auto r = std::from_chars(t.data(), t.data() + t.size(), out);
    if (j->kind != Json::Number || r.ec != std::errc() ||
        r.ptr != t.data() + t.size() || out < min)
      fail(path + "." + key, "not an integer >= " + std::to_string(min));
  }
  void number(const std::string &key, double &out) {
    const Json *j = get(key);
    if (!j)
      return;
    const std::string &t = j->text;
    auto r = std::from_chars(t.data(), t.data() + t.size(), out);
    if (j->kind != Json::Number || r.ec != std::errc() || !std::isfinite(out))
      fail(path + "." + key, "not a finite number");
  }
  void boolean(const std::string &key, bool &out) {
    const Json *j = get(key);
    if (j && j->kind != Json::Bool)
      fail(path + "." + key, "not true or false");
    else if (j)
      out = j->boolean;
  }
  void string(const std::string &key, std::string &out) {
    const Json *j = get(key);
    if (j && j->kind != Json::String)
      fail(path + "." + key, "not a string");
    else if (j)
      out = j->text;
  }
  template <typename Kind> void name(const std::string &key, Kind &out) {
    std::string text;
    string(key, text);
    if (error.empty() && !parse(text, out))
      fail(path + "." + key, "unknown value \"" + text + "\"");
  }
  void done() {
    for (const auto &f : v.fields)
      if (error.empty() &&
          std::find(used.begin(), used.end(), f.first) == used.end())
        fail(path + "." + f.first, "not a field of this format");
  }
  void fail(const std::string &where, const std::string &why) {
    if (error.empty())
      error = where + ": " + why;
  }

private:
  const Json &v;
  std::string path;
  std::string &error;
  std::vector<std::string> used;
};
} // namespace

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Reads a whole file of at most `maxBytes` bytes.
static std::string readFile(const std::string &path, int64_t maxBytes,
                            std::string &out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sysError("open", path);
  struct stat st;
  std::string error;
  if (::fstat(fd, &st) != 0)
    error = sysError("stat", path);
  else if (st.st_size > maxBytes)
    error = path + " is " + std::to_string(st.st_size) +
            " bytes, more than a checkpoint.json may be";
  out.clear();
  char chunk[1 << 16];
  while (error.empty()) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      error = sysError("read", path);
    if (n <= 0)
      break;
    out.append(chunk, static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > maxBytes)
      error = path + " grew while it was read";
  }
  ::close(fd);
  return error;
}

namespace {
/// What checkpoint.json says of one parameter.
struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, bytes = 0;
  bool hasState = false;
  int64_t step = 0, stateOffset = 0, stateBytes = 0;
};

/// What it says of params.bin or optimizer.bin.
struct BinFile {
  int64_t bytes = 0;
  std::string checksum;
};
} // namespace

static void readBinFile(Fields &top, const char *key, BinFile &out,
                        std::string &error) {
  if (const Json *j = top.get(key)) {
    Fields f(*j, std::string("checkpoint.json.") + key, error);
    f.integer("bytes", out.bytes);
    f.string("checksum", out.checksum);
    f.done();
  }
}

/// Empty when `path` has the size that checkpoint.json records.
static std::string checkSize(const std::string &path, const BinFile &file) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return sysError("open", path);
  if (st.st_size == file.bytes)
    return "";
  return path + " is " + std::to_string(st.st_size) +
         " bytes, checkpoint.json says " + std::to_string(file.bytes) +
         (st.st_size < file.bytes ? " (truncated)" : "");
}

/// Reads the whole file `path` into `parts`, one after the other, checking
/// it against the checksum that checkpoint.json records.
static std::string
readBinary(const std::string &path, const BinFile &file,
           const std::vector<std::pair<void *, int64_t>> &parts) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sysError("open", path);
  Checksum sum;
  std::string error;
  for (const auto &[dst, size] : parts) {
    char *p = static_cast<char *>(dst);
    for (int64_t left = size; left > 0 && error.empty();) {
      ssize_t n = ::read(fd, p, static_cast<size_t>(left));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        error = sysError("read", path);
      else if (n == 0)
        error = path + " ended early (truncated while it was read)";
      else
        p += n, left -= n;
    }
    if (!error.empty())
      break;
    sum.update(dst, static_cast<size_t>(size));
  }
  ::close(fd);
  if (error.empty() && sum.hex() != file.checksum)
    error = path + " does not match its checksum in checkpoint.json "
                   "(corrupted, or from another checkpoint)";
  return error;
}

std::string train::loadCheckpoint(const std::string &dir,
                                  LoadedCheckpoint &out) {
  auto fail = [&](const std::string &why) {
    return "cannot load checkpoint " + dir + ": " + why;
  };
  std::string jsonPath = dir + "/checkpoint.json", text;
  if (std::string e = readFile(jsonPath, kMaxJsonBytes, text); !e.empty())
    return fail(e);
  Json root;
  if (std::string e = Parser(text).parse(root); !e.empty())
    return fail("checkpoint.json: " + e);

  std::string error;
  Fields top(root, "checkpoint.json", error);
  std::string format;
  int64_t version = 0;
  top.string("format", format);
  top.integer("version", version);
  if (error.empty() && format != "moe-train-checkpoint")
    return fail("checkpoint.json is not a training checkpoint");
  if (error.empty() && version != kFormatVersion)
    return fail("checkpoint.json has format version " +
                std::to_string(version) + "; this build reads version " +
                std::to_string(kFormatVersion));
  top.integer("step", out.step);
  top.integer("samples_consumed", out.samplesConsumed);
  if (const Json *j = top.get("optimizer")) {
    Fields f(*j, "checkpoint.json.optimizer", error);
    OptimizerConfig &c = out.config;
    f.name("kind", c.kind);
    f.number("lr", c.lr);
    f.number("momentum", c.momentum);
    f.number("dampening", c.dampening);
    f.boolean("nesterov", c.nesterov);
    f.number("beta1", c.beta1);
    f.number("beta2", c.beta2);
    f.number("eps", c.eps);
    f.number("weight_decay", c.weightDecay);
    f.name("sqrt", c.sqrt);
    f.done();
  }
  if (const Json *j = top.get("schedule")) {
    Fields f(*j, "checkpoint.json.schedule", error);
    f.name("kind", out.schedule.kind);
    f.integer("warmup_steps", out.schedule.warmupSteps);
    f.integer("total_steps", out.schedule.totalSteps);
    f.done();
  }
  BinFile weightsFile, statesFile;
  readBinFile(top, "params_bin", weightsFile, error);
  readBinFile(top, "optimizer_bin", statesFile, error);
  std::vector<Entry> entries;
  if (const Json *j = top.get("params")) {
    if (j->kind != Json::Array)
      top.fail("checkpoint.json.params", "not an array");
    for (size_t i = 0; i < j->items.size() && error.empty(); ++i) {
      std::string path = "checkpoint.json.params[" + std::to_string(i) + "]";
      Fields f(j->items[i], path, error);
      Entry e;
      f.string("name", e.name);
      if (const Json *shape = f.get("shape")) {
        bool ok = shape->kind == Json::Array && shape->items.size() <= 64;
        for (size_t k = 0; ok && k < shape->items.size(); ++k) {
          const Json &d = shape->items[k];
          const char *end = d.text.data() + d.text.size();
          int64_t v = -1;
          auto r = std::from_chars(d.text.data(), end, v);
          ok = d.kind == Json::Number && r.ec == std::errc() && r.ptr == end &&
               v >= 0;
          e.shape.push_back(v);
        }
        if (!ok)
          f.fail(path + ".shape", "not a list of sizes");
      }
      f.integer("offset", e.offset);
      f.integer("bytes", e.bytes);
      if (const Json *state = f.get("state");
          state && state->kind != Json::Null) {
        Fields s(*state, path + ".state", error);
        e.hasState = true;
        s.integer("step", e.step);
        s.integer("offset", e.stateOffset);
        s.integer("bytes", e.stateBytes);
        s.done();
      }
      f.done();
      entries.push_back(std::move(e));
    }
  }
  top.done();
  if (error.empty())
    error = validate(out.config);
  if (error.empty())
    error = validate(out.schedule);
  if (!error.empty())
    return fail(error);

  // Every byte range must be the parameter's size, and the ranges must
  // tile each file in order.
  int64_t weightsEnd = 0, statesEnd = 0;
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry &e = entries[i];
    std::string what =
        "checkpoint.json.params[" + std::to_string(i) + "] (" + e.name + "): ";
    int64_t n = numElements(e.shape);
    if (n < 0 || n > (int64_t(1) << 40))
      return fail(what + "invalid shape " + shapeString(e.shape));
    if (!names.insert(e.name).second)
      return fail(what + "a second parameter of that name");
    if (e.offset != weightsEnd || e.bytes != n * 4)
      return fail(what + "its bytes in params.bin are not " +
                  std::to_string(n * 4) + " bytes at " +
                  std::to_string(weightsEnd));
    weightsEnd += e.bytes;
    if (!e.hasState)
      continue;
    int64_t stateBytes = stateFloats(out.config, static_cast<size_t>(n)) * 4;
    if (e.stateOffset != statesEnd || e.stateBytes != stateBytes)
      return fail(what + "its state in optimizer.bin is not " +
                  std::to_string(stateBytes) + " bytes at " +
                  std::to_string(statesEnd));
    if (out.config.kind == OptimizerKind::AdamW && e.step < 1)
      return fail(what + "an AdamW state with step " + std::to_string(e.step));
    // A parameter takes at most one optimizer step per training step (none
    // where the loss did not reach it or the step was skipped): a state
    // ahead of the checkpoint's step would repeat steps on updated weights.
    if (out.config.kind == OptimizerKind::AdamW && e.step > out.step)
      return fail(what + "its AdamW state has taken " +
                  std::to_string(e.step) + " steps, more than the " +
                  std::to_string(out.step) +
                  " of the checkpoint's step (an edited checkpoint.json?)");
    statesEnd += e.stateBytes;
  }
  if (weightsEnd != weightsFile.bytes || statesEnd != statesFile.bytes)
    return fail("checkpoint.json: the parameters' byte ranges do not add up "
                "to the files' sizes");

  // The files must be as large as recorded before anything is allocated
  // for them.
  std::string weightsPath = dir + "/params.bin";
  std::string statesPath = dir + "/optimizer.bin";
  if (std::string e = checkSize(weightsPath, weightsFile); !e.empty())
    return fail(e);
  if (std::string e = checkSize(statesPath, statesFile); !e.empty())
    return fail(e);

  size_t count = entries.size();
  out.names.assign(count, "");
  out.shapes.assign(count, {});
  out.params.assign(count, {});
  out.states.assign(count, ParamState());
  std::vector<std::pair<void *, int64_t>> weightParts, stateParts;
  for (size_t i = 0; i < count; ++i) {
    Entry &e = entries[i];
    size_t n = static_cast<size_t>(numElements(e.shape));
    out.names[i] = std::move(e.name);
    out.shapes[i] = std::move(e.shape);
    out.params[i].resize(n);
    weightParts.emplace_back(out.params[i].data(), n * 4);
    if (!e.hasState)
      continue;
    ParamState &s = out.states[i];
    s.hasBuffer = true;
    s.step = e.step;
    if (out.config.kind == OptimizerKind::AdamW) {
      s.expAvg.resize(n);
      s.expAvgSq.resize(n);
      stateParts.emplace_back(s.expAvg.data(), n * 4);
      stateParts.emplace_back(s.expAvgSq.data(), n * 4);
    } else {
      s.momentumBuffer.resize(n);
      stateParts.emplace_back(s.momentumBuffer.data(), n * 4);
    }
  }
  if (std::string e = readBinary(weightsPath, weightsFile, weightParts);
      !e.empty())
    return fail(e);
  if (std::string e = readBinary(statesPath, statesFile, stateParts);
      !e.empty())
    return fail(e);
  return "";
}
