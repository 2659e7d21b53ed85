//===- Input.cpp - Reading outside data with bounds -----------------------===//

#include "moe/Support/Input.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <vector>

using namespace llvm;

static Error inputError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

Expected<std::unique_ptr<MemoryBuffer>>
mlir::moe::readInputFile(StringRef path, uint64_t maxBytes) {
  auto tooLarge = [&] {
    return inputError(formatv("{0} is larger than {1} bytes, the most a model "
                              "file or config may hold",
                              path, maxBytes));
  };
  int fd = 0;
  if (path != "-") {
    sys::fs::file_status status;
    if (std::error_code ec = sys::fs::status(path, status))
      return inputError("cannot read " + path + ": " + ec.message());
    if (status.type() == sys::fs::file_type::directory_file)
      return inputError("cannot read " + path + ": it is a directory");
    if (status.type() == sys::fs::file_type::character_file ||
        status.type() == sys::fs::file_type::block_file)
      return inputError("cannot read " + path + ": it is a device, not a "
                        "file");
    if (status.type() == sys::fs::file_type::regular_file) {
      if (status.getSize() > maxBytes)
        return tooLarge();
      auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
      if (!buffer)
        return inputError("cannot read " + path + ": " +
                          buffer.getError().message());
      return std::move(*buffer);
    }
    Expected<sys::fs::file_t> file = sys::fs::openNativeFileForRead(path);
    if (!file)
      return inputError("cannot read " + path + ": " +
                        toString(file.takeError()));
    fd = *file;
  }
  // A pipe or standard input: read in chunks, and stop past the bound.
  SmallString<0> data;
  std::vector<char> chunk(1 << 16);
  Error error = Error::success();
  while (true) {
    Expected<size_t> n = sys::fs::readNativeFile(
        fd, MutableArrayRef<char>(chunk.data(), chunk.size()));
    if (!n) {
      error = n.takeError();
      break;
    }
    if (*n == 0)
      break;
    if (data.size() + *n > maxBytes) {
      error = tooLarge();
      break;
    }
    data.append(chunk.begin(), chunk.begin() + *n);
  }
  if (path != "-")
    sys::fs::closeFile(fd);
  if (error)
    return inputError("cannot read " + path + ": " + toString(std::move(error)));
  return MemoryBuffer::getMemBufferCopy(data, path);
}

namespace {
/// Walks JSON text for what llvm::json::parse does not check: depth and
/// repeated keys. Runs before it, and on malformed text stops quietly where
/// the parser will report the error with its position.
class JsonScanner {
public:
  JsonScanner(StringRef text, unsigned maxDepth)
      : text(text), maxDepth(maxDepth) {}

  Error scan() {
    // One entry per open container: its keys when it is an object.
    struct Container {
      bool isObject;
      StringSet<> keys;
      bool expectKey = false;
    };
    std::vector<Container> open;
    while (pos < text.size()) {
      char c = text[pos];
      if (c == '{' || c == '[') {
        if (open.size() >= maxDepth)
          return inputError(formatv("nesting deeper than {0} levels at byte "
                                    "{1}",
                                    maxDepth, pos));
        open.push_back({c == '{', {}, c == '{'});
        ++pos;
      } else if (c == '}' || c == ']') {
        if (!open.empty())
          open.pop_back();
        ++pos;
      } else if (c == ',') {
        if (!open.empty() && open.back().isObject)
          open.back().expectKey = true;
        ++pos;
      } else if (c == '"') {
        size_t begin = pos;
        std::string value;
        if (!readString(value))
          return Error::success();
        if (!open.empty() && open.back().expectKey) {
          open.back().expectKey = false;
          if (!open.back().keys.insert(value).second)
            return inputError(formatv("key \"{0}\" appears twice in one "
                                      "object (byte {1})",
                                      value, begin));
        }
      } else {
        ++pos;
      }
    }
    return Error::success();
  }

private:
  /// Reads the string at `pos` (a '"'), decoding escapes only as far as
  /// keys need to compare; false when it does not end.
  bool readString(std::string &out) {
    for (++pos; pos < text.size(); ++pos) {
      char c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c == '\\') {
        if (++pos >= text.size())
          return false;
        out += '\\';
        c = text[pos];
      }
      out += c;
    }
    return false;
  }

  StringRef text;
  unsigned maxDepth;
  size_t pos = 0;
};
} // namespace

Expected<json::Value> mlir::moe::parseJson(StringRef text, unsigned maxDepth) {
  if (Error error = JsonScanner(text, maxDepth).scan())
    return std::move(error);
  return json::parse(text);
}

Error mlir::moe::checkMlirNesting(StringRef text, unsigned maxDepth) {
  unsigned depth = 0;
  size_t line = 1;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    char c = text[pos];
    if (c == '\n') {
      ++line;
    } else if (c == '"') {
      // A string literal: up to its unescaped closing quote.
      for (++pos; pos < text.size() && text[pos] != '"'; ++pos)
        if (text[pos] == '\\')
          ++pos;
        else if (text[pos] == '\n')
          ++line;
    } else if (c == '/' && text.substr(pos, 2) == "//") {
      pos = std::min(text.find('\n', pos), text.size()) - 1;
    } else if (c == '{' || c == '(' || c == '[') {
      if (++depth > maxDepth)
        return inputError(formatv("MLIR nesting deeper than {0} levels "
                                  "(brackets and regions) at line {1}",
                                  maxDepth, line));
    } else if ((c == '}' || c == ')' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return Error::success();
}

std::string mlir::moe::contentDigest(ArrayRef<uint8_t> bytes) {
  return formatv("xxh3:{0:x-16}", xxh3_64bits(bytes)).str();
}
