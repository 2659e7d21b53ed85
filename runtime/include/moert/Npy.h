//===- Npy.h - Element types, aligned buffers and .npy files ----*- C++ -*-===//
//
// The arrays that moe-run hands to compiled code: its inputs and outputs as
// NumPy .npy files (C order, little-endian) and the element types that the
// bundle manifest names.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_NPY_H
#define MOERT_NPY_H

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moert {

/// An element type: manifest name ("f32"), the NumPy descr of the .npy
/// files that carry it ("<f4"; bf16, which NumPy lacks, travels as float32),
/// bytes in memory.
struct DType {
  const char *name;
  const char *descr;
  int64_t size;
};

/// The types of the manifest ("f32", "f64", "i32", "i64", "i8", "bool",
/// "f16", "bf16"); null for any other name.
const DType *findDType(const std::string &name);
/// The type whose NumPy descr is `descr`; null when there is none.
const DType *findDTypeByDescr(const std::string &descr);

/// Number of elements of `shape`, or -1 for a negative extent or overflow.
int64_t numElements(const std::vector<int64_t> &shape);
/// "[2, 4, 16]".
std::string shapeString(const std::vector<int64_t> &shape);

/// Zeroed heap memory aligned to 64 bytes, whatever the size, so that
/// compiled code may use aligned vector loads on every buffer it is given.
class Buffer {
public:
  Buffer() = default;
  explicit Buffer(int64_t bytes);
  char *data() const { return ptr.get(); }
  int64_t size() const { return bytes; }

private:
  struct Free {
    void operator()(char *p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> ptr;
  int64_t bytes = 0;
};

/// The contents of a .npy file. `descr` is normalised to NumPy's
/// little-endian spelling: '|' for one-byte types, '<' otherwise.
struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  Buffer data;
};

/// Reads a .npy file of format 1.0, 2.0 or 3.0 holding a C-order,
/// little-endian array. Returns an error message, empty on success.
std::string readNpy(const std::string &path, Array &array);
/// The same from the file's contents in memory; `name` names the file in
/// messages.
std::string readNpy(std::string_view contents, const std::string &name,
                    Array &array);

/// Makes `array`, read from a .npy file, hold elements of `type`: float32
/// data given for f16 or bf16 is rounded to nearest even (bf16 always comes
/// so). False, leaving `array` alone, when its data is of another type.
/// Called once per array: a converted bf16 array keeps the file's descr.
bool convertToModelType(Array &array, const DType &type);

/// `count` elements of the float type `type` (f32, f16 or bf16) at `data`
/// as float32, exactly; false for another type.
bool widenToFloat(const DType &type, const void *data, float *out,
                  int64_t count);
/// float32 `values` rounded to nearest even into `count` elements of the
/// float type `type` (f32, f16 or bf16) at `out`; false for another type.
bool narrowFromFloat(const DType &type, const float *values, void *out,
                     int64_t count);

/// Writes `data` (numElements(shape) elements of `type`) as a .npy file;
/// bf16 is written as float32.
/// Returns an error message, empty on success.
std::string writeNpy(const std::string &path, const DType &type,
                     const std::vector<int64_t> &shape, const void *data);

} // namespace moert

#endif // MOERT_NPY_H
