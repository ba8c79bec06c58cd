// Reading and writing NumPy .npy files, for the command-line tools.
//
// Supported: format versions 1.0 and 2.0 (read), 1.0 (write; 2.0 only if a
// header would not fit 1.0's 16-bit length), C order, little-endian dtypes
// <f4 <f2 <i8 <i4 |b1 |u1 |i1. Anything else is refused with a message that
// names the file and what is wrong; a hostile file never crashes the reader
// and never makes it allocate more than the file holds.
#ifndef KITE_APPS_COMMON_NPY_H
#define KITE_APPS_COMMON_NPY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <kite/kite.h>

namespace kite::apps {

struct NpyArray {
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  std::vector<uint8_t> data;   // C order, little-endian, element_count * itemsize bytes
};

// Reads path into *out. On failure returns false, sets *err (if not null) to
// "<path>: <what is wrong>" and leaves *out unspecified.
bool read_npy(const std::string& path, NpyArray* out, std::string* err);

// Writes array to path (format 1.0). Fails if the dtype is not supported or
// data.size() does not match the shape.
bool write_npy(const std::string& path, const NpyArray& array, std::string* err);

// Bytes per element for the dtypes .npy supports here; 0 for any other.
size_t npy_itemsize(kite_dtype dtype);

// The .npy descr string ("<f4", ...) for dtype; nullptr if unsupported.
const char* npy_descr(kite_dtype dtype);

// Product of shape (1 for a scalar). False if a dimension is negative or the
// product overflows int64.
bool npy_element_count(const std::vector<int64_t>& shape, int64_t* out_count);

}  // namespace kite::apps

#endif  // KITE_APPS_COMMON_NPY_H
