//===- Npy.cpp - .npy reading and writing ---------------------------------===//
//
// The format: "\x93NUMPY", major and minor version bytes, the header length
// (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), then a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
// with spaces and a newline, then the raw data.
//
//===----------------------------------------------------------------------===//

#include "moert/Npy.h"
#include "moert/Runtime.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

using namespace moert;

// NumPy has no bfloat16: bf16 travels in float32 files.
static const DType dtypes[] = {
    {"f32", "<f4", 4}, {"f64", "<f8", 8},  {"i32", "<i4", 4},
    {"i64", "<i8", 8}, {"i8", "|i1", 1},   {"bool", "|b1", 1},
    {"f16", "<f2", 2}, {"bf16", "<f4", 2},
};

/// float32 to bfloat16, rounded to nearest even; NaNs stay NaNs.
static uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

static float fromBF16(uint16_t half) {
  uint32_t bits = static_cast<uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

const DType *moert::findDType(const std::string &name) {
  for (const DType &t : dtypes)
    if (name == t.name)
      return &t;
  return nullptr;
}

const DType *moert::findDTypeByDescr(const std::string &descr) {
  for (const DType &t : dtypes)
    if (descr == t.descr)
      return &t;
  return nullptr;
}

int64_t moert::numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

std::string moert::shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Buffer::Buffer(int64_t bytes) : bytes(bytes) {
  // aligned_alloc wants a multiple of the alignment, and one line at least
  // so that data() is never null.
  size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  if (rounded == 0)
    rounded = 64;
  ptr.reset(static_cast<char *>(std::aligned_alloc(64, rounded)));
  if (!ptr)
    fatal("out of memory for a buffer of " + std::to_string(bytes) + " bytes");
  std::memset(ptr.get(), 0, rounded);
}

namespace {
struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

/// Reads the header dict; each parse* returns false on malformed text.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : s(text) {}

  bool parse(std::string &descr, bool &fortran, std::vector<int64_t> &shape) {
    bool seenDescr = false, seenFortran = false, seenShape = false;
    if (!consume('{'))
      return false;
    while (!consume('}')) {
      std::string key;
      if (!parseString(key) || !consume(':'))
        return false;
      if (key == "descr")
        seenDescr = parseString(descr);
      else if (key == "fortran_order")
        seenFortran = parseBool(fortran);
      else if (key == "shape")
        seenShape = parseShape(shape);
      else
        return false;
      if (!consume(',') && !peek('}'))
        return false;
    }
    return seenDescr && seenFortran && seenShape;
  }

private:
  void skipSpace() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n'))
      ++i;
  }
  bool peek(char c) {
    skipSpace();
    return i < s.size() && s[i] == c;
  }
  bool consume(char c) {
    if (!peek(c))
      return false;
    ++i;
    return true;
  }
  bool consumeWord(std::string_view w) {
    skipSpace();
    if (s.substr(i, w.size()) != w)
      return false;
    i += w.size();
    return true;
  }
  bool parseString(std::string &out) {
    skipSpace();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return false;
    size_t end = s.find(s[i], i + 1);
    if (end == std::string_view::npos)
      return false;
    out = std::string(s.substr(i + 1, end - i - 1));
    i = end + 1;
    return true;
  }
  bool parseBool(bool &out) {
    out = consumeWord("True");
    return out || consumeWord("False");
  }
  bool parseShape(std::vector<int64_t> &out) {
    if (!consume('('))
      return false;
    out.clear();
    while (!consume(')')) {
      skipSpace();
      int64_t d = 0;
      size_t start = i;
      for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i)
        if (__builtin_mul_overflow(d, 10, &d) ||
            __builtin_add_overflow(d, s[i] - '0', &d))
          return false;
      if (i == start)
        return false;
      consumeWord("L"); // Python 2 longs.
      out.push_back(d);
      if (!consume(',') && !peek(')'))
        return false;
    }
    return true;
  }

  std::string_view s;
  size_t i = 0;
};
} // namespace

/// Turns `descr` into NumPy's little-endian spelling ('<f4', '|b1') and
/// sets its element size. Returns an error message, empty on success.
static std::string normaliseDescr(std::string &descr, int64_t &size) {
  size = 0;
  bool simple =
      descr.size() >= 3 && descr.size() <= 6 && std::strchr("<>|=", descr[0]);
  for (size_t i = 2; simple && i < descr.size(); ++i) {
    simple = descr[i] >= '0' && descr[i] <= '9';
    size = size * 10 + (descr[i] - '0');
  }
  if (!simple)
    return "unsupported dtype '" + descr + "'";
  // '=' is this machine's order, which is little-endian.
  if (size > 1 && descr[0] == '>')
    return "big-endian data ('" + descr + "') is not supported";
  descr[0] = size == 1 ? '|' : '<';
  return "";
}

/// Parses the magic string and header at the start of `contents`: sets
/// `array`'s descr and shape, `dataStart` (where the data begins) and
/// `bytes` (how many data bytes the header says follow). `headerOnly`: the
/// contents may end anywhere after the header.
static std::string parseHeader(std::string_view contents,
                               const std::string &name, moert::Array &array,
                               size_t &dataStart, int64_t &bytes) {
  using namespace moert;
  auto bad = [&](const std::string &why) {
    return name + " is not a valid .npy file: " + why;
  };

  if (contents.size() < 8 || contents.substr(0, 6) != "\x93NUMPY")
    return bad("no NumPy magic string");
  int major = static_cast<unsigned char>(contents[6]);
  if (major < 1 || major > 3)
    return bad("unknown format version " + std::to_string(major));
  size_t lenBytes = major == 1 ? 2 : 4;
  if (contents.size() < 8 + lenBytes)
    return bad("truncated header");
  uint32_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= uint32_t(static_cast<unsigned char>(contents[8 + i]))
                 << (8 * i);
  if (headerLen > (1u << 24))
    return bad("header of " + std::to_string(headerLen) + " bytes");
  dataStart = 8 + lenBytes + headerLen;
  if (contents.size() < dataStart)
    return bad("truncated header");
  std::string header(contents.substr(8 + lenBytes, headerLen));

  std::string descr;
  bool fortran = false;
  if (!HeaderParser(header).parse(descr, fortran, array.shape)) {
    header.erase(header.find_last_not_of(" \n") + 1);
    return bad("malformed header " + header);
  }
  if (fortran)
    return name + ": Fortran-order arrays are not supported; save a C-order "
                  "array (numpy.ascontiguousarray)";
  int64_t size;
  array.descr = descr;
  if (std::string error = normaliseDescr(array.descr, size); !error.empty())
    return name + ": " + error;

  int64_t count = numElements(array.shape);
  if (count < 0 || __builtin_mul_overflow(count, size, &bytes))
    return bad("shape " + shapeString(array.shape) + " is too large");
  return "";
}

std::string moert::readNpy(std::string_view contents, const std::string &name,
                           Array &array) {
  size_t dataStart;
  int64_t bytes;
  if (std::string error = parseHeader(contents, name, array, dataStart, bytes);
      !error.empty())
    return error;
  size_t dataBytes = contents.size() - dataStart;
  if (dataBytes != static_cast<uint64_t>(bytes))
    return name + " is not a valid .npy file: shape " +
           shapeString(array.shape) + " of " + array.descr + " needs " +
           std::to_string(bytes) + " data bytes, the file has " +
           std::to_string(dataBytes);
  array.data = Buffer(bytes);
  std::memcpy(array.data.data(), contents.data() + dataStart, dataBytes);
  return "";
}

/// Reads up to `n` more bytes of `f` onto `contents`; false on a read
/// error.
static bool readMore(std::FILE *f, std::string &contents, size_t n) {
  char chunk[1 << 16];
  while (n > 0) {
    size_t got = std::fread(chunk, 1, std::min(n, sizeof(chunk)), f);
    if (got == 0)
      break;
    contents.append(chunk, got);
    n -= got;
  }
  return !std::ferror(f);
}

std::string moert::readNpy(const std::string &path, Array &array) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f)
    return "cannot open " + path + ": " + std::strerror(errno);
  // What the header says and no more: a device or pipe (/dev/zero) is read
  // no further than a file of that shape would be.
  std::string contents;
  auto cannotRead = [&] {
    return "cannot read " + path + ": " + std::strerror(errno);
  };
  if (!readMore(f.get(), contents, 12))
    return cannotRead();
  size_t dataStart = 0;
  int64_t bytes = 0;
  // The header's length is in the first 12 bytes (formats 1 to 3).
  if (contents.size() >= 12 && contents.compare(0, 6, "\x93NUMPY") == 0) {
    bool v1 = contents[6] == 1;
    uint32_t headerLen = 0;
    for (size_t i = 0; i < (v1 ? 2u : 4u); ++i)
      headerLen |= uint32_t(static_cast<unsigned char>(contents[8 + i]))
                   << (8 * i);
    size_t end = (v1 ? 10 : 12) + std::min<uint32_t>(headerLen, 1u << 24);
    if (end > contents.size() &&
        !readMore(f.get(), contents, end - contents.size()))
      return cannotRead();
  }
  if (std::string error = parseHeader(contents, path, array, dataStart, bytes);
      !error.empty())
    return error;
  // The data, and one byte more to tell a longer file.
  if (!readMore(f.get(), contents,
                dataStart + static_cast<size_t>(bytes) + 1 - contents.size()))
    return cannotRead();
  return readNpy(contents, path, array);
}

bool moert::convertToModelType(Array &array, const DType &type) {
  bool bf16 = std::strcmp(type.name, "bf16") == 0;
  if (!bf16 && array.descr == type.descr)
    return true;
  if (!(bf16 || std::strcmp(type.name, "f16") == 0) || array.descr != "<f4")
    return false;
  int64_t count = numElements(array.shape);
  Buffer converted(count * 2);
  const auto *in = reinterpret_cast<const float *>(array.data.data());
  auto *out = reinterpret_cast<uint16_t *>(converted.data());
  for (int64_t i = 0; i < count; ++i) {
    if (bf16) {
      out[i] = toBF16(in[i]);
    } else {
      _Float16 h = static_cast<_Float16>(in[i]);
      std::memcpy(&out[i], &h, 2);
    }
  }
  array.data = std::move(converted);
  array.descr = type.descr;
  return true;
}

bool moert::widenToFloat(const DType &type, const void *data, float *out,
                         int64_t count) {
  std::string name = type.name;
  if (name == "f32") {
    std::memcpy(out, data, count * sizeof(float));
    return true;
  }
  const auto *halves = static_cast<const uint16_t *>(data);
  if (name == "bf16") {
    for (int64_t i = 0; i < count; ++i)
      out[i] = fromBF16(halves[i]);
    return true;
  }
  if (name == "f16") {
    for (int64_t i = 0; i < count; ++i) {
      _Float16 h;
      std::memcpy(&h, &halves[i], 2);
      out[i] = static_cast<float>(h);
    }
    return true;
  }
  return false;
}

bool moert::narrowFromFloat(const DType &type, const float *values, void *out,
                            int64_t count) {
  std::string name = type.name;
  if (name == "f32") {
    std::memcpy(out, values, count * sizeof(float));
    return true;
  }
  auto *halves = static_cast<uint16_t *>(out);
  if (name == "bf16") {
    for (int64_t i = 0; i < count; ++i)
      halves[i] = toBF16(values[i]);
    return true;
  }
  if (name == "f16") {
    for (int64_t i = 0; i < count; ++i) {
      _Float16 h = static_cast<_Float16>(values[i]);
      std::memcpy(&halves[i], &h, 2);
    }
    return true;
  }
  return false;
}

std::string moert::writeNpy(const std::string &path, const DType &type,
                            const std::vector<int64_t> &shape,
                            const void *data) {
  // bf16 is written widened to the float32 that carries it.
  std::vector<float> widened;
  if (std::strcmp(type.name, "bf16") == 0) {
    widened.resize(numElements(shape));
    const auto *halves = static_cast<const uint16_t *>(data);
    for (size_t i = 0; i < widened.size(); ++i)
      widened[i] = fromBF16(halves[i]);
    static const DType f32{"f32", "<f4", 4};
    return writeNpy(path, f32, shape, widened.data());
  }
  std::string dict = std::string("{'descr': '") + type.descr +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  // Version 1.0 unless the header needs the 4-byte length; NumPy pads the
  // whole preamble to a multiple of 64 bytes.
  bool v2 = dict.size() + 12 > 65535;
  size_t preamble = 6 + 2 + (v2 ? 4 : 2);
  size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';

  std::string head = "\x93NUMPY";
  head += static_cast<char>(v2 ? 2 : 1);
  head += '\0';
  for (size_t i = 0, n = v2 ? 4 : 2; i < n; ++i)
    head += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  head += dict;

  size_t bytes = static_cast<size_t>(numElements(shape) * type.size);
  File f(std::fopen(path.c_str(), "wb"));
  if (!f || std::fwrite(head.data(), 1, head.size(), f.get()) != head.size() ||
      std::fwrite(data, 1, bytes, f.get()) != bytes ||
      std::fflush(f.get()) != 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  return "";
}
