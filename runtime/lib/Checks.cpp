//===- Checks.cpp - errors that compiled code finds in its inputs ---------===//
//
// Compiled programs check what their inputs decide at run time (the indices
// of gathers and scatters) and call here where a check fails: the error
// ends every rank like the runtime's own errors.
//
//===----------------------------------------------------------------------===//

#include "moert/Runtime.h"
#include "moert/moert.h"

#include <string>

void moert_index_out_of_range(const char *op, int64_t index, int64_t dim,
                              int64_t size) {
  moert::fatal(std::string(op) + ": index " + std::to_string(index) +
               " is out of range for dim " + std::to_string(dim) + " of size " +
               std::to_string(size) + " (ONNX allows [" +
               std::to_string(-size) + ", " + std::to_string(size - 1) + "])");
}
