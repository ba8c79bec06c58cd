#include "npy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

// .npy data is little-endian; we copy it byte for byte.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "apps/common/npy.cpp assumes a little-endian host"
#endif

namespace kite::apps {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// A header is a short dict; numpy itself refuses headers over 10000 bytes by
// default. We allow more, but never let a length field drive a huge read.
constexpr uint64_t kMaxHeaderSize = 1u << 20;
constexpr size_t kMaxRank = 64;  // numpy's NPY_MAXDIMS
constexpr size_t kHeaderAlignment = 64;

struct DtypeEntry {
  kite_dtype dtype;
  const char* descr;  // what we write
  size_t itemsize;
};

constexpr DtypeEntry kDtypes[] = {
    {KITE_DTYPE_FLOAT32, "<f4", 4}, {KITE_DTYPE_FLOAT16, "<f2", 2},
    {KITE_DTYPE_INT64, "<i8", 8},   {KITE_DTYPE_INT32, "<i4", 4},
    {KITE_DTYPE_BOOL, "|b1", 1},    {KITE_DTYPE_UINT8, "|u1", 1},
    {KITE_DTYPE_INT8, "|i1", 1},
};

const DtypeEntry* find_dtype(kite_dtype dtype) {
  for (const DtypeEntry& e : kDtypes)
    if (e.dtype == dtype) return &e;
  return nullptr;
}

// Maps a descr to a dtype. Single-byte types have no byte order, so numpy
// writes '|', but '<', '>' and '=' mean the same for them.
bool parse_descr(const std::string& descr, kite_dtype* out, std::string* why) {
  if (descr.size() < 3) {
    *why = "dtype '" + descr + "' is not a simple dtype";
    return false;
  }
  const char order = descr[0];
  const std::string kind = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    *why = "dtype '" + descr +
           "' is not a simple dtype (structured and object arrays are not supported)";
    return false;
  }
  for (const DtypeEntry& e : kDtypes) {
    if (kind != e.descr + 1) continue;
    if (e.itemsize > 1 && order != '<') {
      *why = "dtype '" + descr + "' is not little-endian ('<" + kind + "' is supported)";
      return false;
    }
    *out = e.dtype;
    return true;
  }
  *why = "unsupported dtype '" + descr + "' (supported: <f4, <f2, <i8, <i4, |b1, |u1, |i1)";
  return false;
}

// Parses the header dict, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// It accepts exactly the Python literal syntax numpy writes (either quote
// style, optional trailing commas, any whitespace) and nothing else.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  bool parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape,
             std::string* why) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    if (!expect('{', "'{' at the start of the header dict", why)) return false;
    skip_ws();
    while (!at('}')) {
      std::string key;
      if (!parse_string(&key, "a quoted key", why)) return false;
      skip_ws();
      if (!expect(':', "':' after key '" + key + "'", why)) return false;
      skip_ws();
      if (key == "descr") {
        if (have_descr) return fail("duplicate key 'descr'", why);
        if (!parse_string(descr, "a quoted string for 'descr'", why)) return false;
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) return fail("duplicate key 'fortran_order'", why);
        if (!parse_bool(fortran_order, why)) return false;
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) return fail("duplicate key 'shape'", why);
        if (!parse_shape(shape, why)) return false;
        have_shape = true;
      } else {
        return fail("unexpected key '" + key + "'", why);
      }
      skip_ws();
      if (at(',')) {
        ++pos_;
        skip_ws();
      } else if (!at('}')) {
        return fail(std::string("expected ',' or '}' after the value of '") + key + "'" +
                        found(),
                    why);
      }
    }
    ++pos_;  // '}'
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict" + found(), why);
    if (!have_descr) return fail("missing key 'descr'", why);
    if (!have_order) return fail("missing key 'fortran_order'", why);
    if (!have_shape) return fail("missing key 'shape'", why);
    return true;
  }

 private:
  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  std::string found() const {
    if (pos_ >= s_.size()) return " (header ends)";
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    std::string shown = (c >= 0x20 && c < 0x7f) ? std::string("'") + s_[pos_] + "'"
                                                 : "byte " + std::to_string(c);
    return " at offset " + std::to_string(pos_) + " (found " + shown + ")";
  }

  bool fail(const std::string& what, std::string* why) const {
    *why = "bad header: " + what;
    return false;
  }

  bool expect(char c, const std::string& what, std::string* why) {
    if (!at(c)) return fail("expected " + what + found(), why);
    ++pos_;
    return true;
  }

  bool parse_string(std::string* out, const std::string& what, std::string* why) {
    if (!at('\'') && !at('"')) return fail("expected " + what + found(), why);
    const char quote = s_[pos_++];
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      // Keys and descrs are plain ASCII; escapes never occur in them.
      if (c == '\\' || c < 0x20 || c >= 0x7f)
        return fail("unexpected character in a string" + found(), why);
      ++pos_;
    }
    if (pos_ >= s_.size()) return fail("unterminated string", why);
    *out = s_.substr(start, pos_ - start);
    ++pos_;
    return true;
  }

  bool parse_bool(bool* out, std::string* why) {
    if (s_.compare(pos_, 4, "True") == 0) {
      *out = true;
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      *out = false;
      pos_ += 5;
      return true;
    }
    return fail("expected True or False for 'fortran_order'" + found(), why);
  }

  bool parse_dim(int64_t* out, std::string* why) {
    if (at('-')) return fail("negative dimension in 'shape'" + found(), why);
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
      return fail("expected a dimension in 'shape'" + found(), why);
    int64_t value = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        return fail("dimension in 'shape' does not fit in 64 bits", why);
      value = value * 10 + digit;
      ++pos_;
    }
    *out = value;
    return true;
  }

  // Python tuple syntax: (), (3,), (2, 3) or (2, 3,). "(3)" is an int in
  // Python, not a tuple, and numpy refuses it too.
  bool parse_shape(std::vector<int64_t>* out, std::string* why) {
    out->clear();
    if (!expect('(', "a tuple for 'shape'", why)) return false;
    skip_ws();
    bool trailing_comma = false;
    while (!at(')')) {
      if (out->size() == kMaxRank)
        return fail("'shape' has more than " + std::to_string(kMaxRank) + " dimensions", why);
      int64_t dim = 0;
      if (!parse_dim(&dim, why)) return false;
      out->push_back(dim);
      skip_ws();
      trailing_comma = at(',');
      if (trailing_comma) {
        ++pos_;
        skip_ws();
      } else if (!at(')')) {
        return fail("expected ',' or ')' in 'shape'" + found(), why);
      }
    }
    if (out->size() == 1 && !trailing_comma)
      return fail("'shape' is not a tuple (a 1-d shape is written '(n,)')", why);
    ++pos_;  // ')'
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

uint32_t read_le(const unsigned char* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

// Fails with "<path>: <what>".
bool fail(const std::string& path, const std::string& what, std::string* err) {
  if (err) *err = path + ": " + what;
  return false;
}

bool data_byte_size(const std::vector<int64_t>& shape, size_t itemsize, uint64_t* out) {
  int64_t count = 0;
  if (!npy_element_count(shape, &count)) return false;
  const uint64_t n = static_cast<uint64_t>(count);
  if (itemsize != 0 && n > std::numeric_limits<uint64_t>::max() / itemsize) return false;
  *out = n * itemsize;
  return true;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

size_t npy_itemsize(kite_dtype dtype) {
  const DtypeEntry* e = find_dtype(dtype);
  return e ? e->itemsize : 0;
}

const char* npy_descr(kite_dtype dtype) {
  const DtypeEntry* e = find_dtype(dtype);
  return e ? e->descr : nullptr;
}

bool npy_element_count(const std::vector<int64_t>& shape, int64_t* out_count) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return false;
    count *= d;
  }
  *out_count = count;
  return true;
}

bool read_npy(const std::string& path, NpyArray* out, std::string* err) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    return fail(path, "cannot open: " + (ec ? ec.message() : std::string("no such file")), err);
  if (!std::filesystem::is_regular_file(st)) return fail(path, "not a regular file", err);
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return fail(path, "cannot read size: " + ec.message(), err);

  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open for reading", err);

  // Preamble: magic, major, minor, header length (2 bytes in 1.0, 4 in 2.0).
  unsigned char pre[12] = {};
  const size_t have = static_cast<size_t>(std::min<uint64_t>(file_size, sizeof(pre)));
  if (!in.read(reinterpret_cast<char*>(pre), static_cast<std::streamsize>(have)))
    return fail(path, "read error", err);
  if (have < kMagicSize || std::memcmp(pre, kMagic, kMagicSize) != 0)
    return fail(path, "not a .npy file (bad magic; expected \\x93NUMPY)", err);
  if (have < kMagicSize + 2) return fail(path, "file ends inside the version bytes", err);
  const int major = pre[6], minor = pre[7];
  size_t len_bytes = 0;
  if (major == 1 && minor == 0) {
    len_bytes = 2;
  } else if (major == 2 && minor == 0) {
    len_bytes = 4;
  } else {
    return fail(path, "unsupported .npy format version " + std::to_string(major) + "." +
                          std::to_string(minor) + " (supported: 1.0, 2.0)",
                err);
  }
  const uint64_t preamble = kMagicSize + 2 + len_bytes;
  if (file_size < preamble) return fail(path, "file ends inside the header length field", err);
  const uint64_t header_len = read_le(pre + 8, len_bytes);
  if (header_len > file_size - preamble)
    return fail(path, "header length " + std::to_string(header_len) +
                          " runs past the end of the file (" + std::to_string(file_size) +
                          " bytes)",
                err);
  if (header_len > kMaxHeaderSize)
    return fail(path, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                          std::to_string(kMaxHeaderSize) + " bytes",
                err);

  std::string header(static_cast<size_t>(header_len), '\0');
  in.seekg(static_cast<std::streamoff>(preamble));
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len)))
    return fail(path, "read error in header", err);

  std::string descr, why;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  if (!HeaderParser(header).parse(&descr, &fortran_order, &shape, &why))
    return fail(path, why, err);
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  if (!parse_descr(descr, &dtype, &why)) return fail(path, why, err);
  if (fortran_order)
    return fail(path, "fortran_order is True; only C-order arrays are supported "
                      "(save with np.ascontiguousarray)",
                err);

  uint64_t data_size = 0;
  if (!data_byte_size(shape, npy_itemsize(dtype), &data_size))
    return fail(path, "shape " + shape_text(shape) + " has too many elements (overflow)", err);
  const uint64_t data_offset = preamble + header_len;
  const uint64_t available = file_size - data_offset;
  if (available != data_size)
    return fail(path, "shape " + shape_text(shape) + " of " + descr + " needs " +
                          std::to_string(data_size) + " data bytes, file has " +
                          std::to_string(available) +
                          (available < data_size ? " (truncated)" : " (trailing bytes)"),
                err);
  if (data_size > std::numeric_limits<size_t>::max())
    return fail(path, "data does not fit in memory", err);

  std::vector<uint8_t> data;
  try {
    data.resize(static_cast<size_t>(data_size));
  } catch (const std::bad_alloc&) {
    return fail(path, "out of memory for " + std::to_string(data_size) + " data bytes", err);
  }
  if (data_size != 0 &&
      !in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data_size)))
    return fail(path, "read error in data (file changed while reading?)", err);

  if (dtype == KITE_DTYPE_BOOL) {
    for (size_t i = 0; i < data.size(); ++i)
      if (data[i] > 1)
        return fail(path, "bool element " + std::to_string(i) + " has byte value " +
                              std::to_string(data[i]) + " (expected 0 or 1)",
                    err);
  }

  out->dtype = dtype;
  out->shape = std::move(shape);
  out->data = std::move(data);
  return true;
}

bool write_npy(const std::string& path, const NpyArray& array, std::string* err) {
  const char* descr = npy_descr(array.dtype);
  if (!descr)
    return fail(path, "cannot write dtype " + std::to_string(static_cast<int>(array.dtype)) +
                          " to .npy (unsupported)",
                err);
  if (array.shape.size() > kMaxRank)
    return fail(path, "rank " + std::to_string(array.shape.size()) + " exceeds " +
                          std::to_string(kMaxRank),
                err);
  uint64_t data_size = 0;
  if (!data_byte_size(array.shape, npy_itemsize(array.dtype), &data_size))
    return fail(path, "shape " + shape_text(array.shape) + " is invalid or overflows", err);
  if (data_size != array.data.size())
    return fail(path, "shape " + shape_text(array.shape) + " of " + descr + " needs " +
                          std::to_string(data_size) + " bytes, array holds " +
                          std::to_string(array.data.size()),
                err);

  // Same text numpy writes, padded with spaces and ended by '\n' so that the
  // data starts on a 64-byte boundary.
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape_text(array.shape) +
                       ", }";
  unsigned char major = 1;
  size_t preamble = kMagicSize + 2 + 2;
  size_t total = preamble + header.size() + 1;
  size_t padded = (total + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment;
  if (padded - preamble > 0xffff) {  // cannot happen for rank <= 64; kept for safety
    major = 2;
    preamble += 2;
    total += 2;
    padded = (total + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment;
  }
  header.append(padded - total, ' ');
  header.push_back('\n');
  const uint32_t header_len = static_cast<uint32_t>(header.size());

  std::string pre(kMagic, kMagicSize);
  pre.push_back(static_cast<char>(major));
  pre.push_back('\0');
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    pre.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail(path, std::string("cannot open for writing: ") + std::strerror(errno), err);
  out.write(pre.data(), static_cast<std::streamsize>(pre.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (!array.data.empty())
    out.write(reinterpret_cast<const char*>(array.data.data()),
              static_cast<std::streamsize>(array.data.size()));
  out.close();
  if (!out) return fail(path, "write error", err);
  return true;
}

}  // namespace kite::apps
