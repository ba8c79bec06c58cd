#include "onnx/onnx_tensor.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <cerrno>
#include <vector>

#include <sys/stat.h>

#include "kite/ops/op_node.h"

// Constant bytes are stored little-endian, and ONNX raw_data is
// little-endian: on a little-endian host both are plain copies.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX importer assumes a little-endian host"
#endif

namespace kite::converter::onnx_detail {

namespace {

bool fail(std::string* err, const std::string& message) {
  if (err) *err = message;
  return false;
}

// Strict unsigned decimal, as ONNX writes offset/length.
bool parse_u64(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

// A location must stay inside the model's directory: relative, and without
// any ".." component (either separator, since files travel between systems).
bool location_is_safe(const std::string& location, std::string* why) {
  if (location.empty()) {
    *why = "is empty";
    return false;
  }
  if (location[0] == '/' || location[0] == '\\' ||
      (location.size() >= 2 && location[1] == ':')) {
    *why = "is an absolute path; it must be relative to the model's directory";
    return false;
  }
  if (location.find('\0') != std::string::npos) {
    *why = "contains a NUL character";
    return false;
  }
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find_first_of("/\\", start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2) {
      *why = "contains '..'; it must stay inside the model's directory";
      return false;
    }
    start = end + 1;
  }
  return true;
}

bool read_external(const onnx::TensorProto& proto, const std::string& name,
                   const std::string& model_dir, uint64_t expected_bytes,
                   std::vector<uint8_t>* data, std::string* err) {
  std::string location;
  std::string offset_text;
  std::string length_text;
  bool has_offset = false;
  bool has_length = false;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      offset_text = entry.value();
      has_offset = true;
    } else if (entry.key() == "length") {
      length_text = entry.value();
      has_length = true;
    }
  }
  const std::string label = "tensor '" + name + "'";
  if (location.empty()) {
    return fail(err, label + " stores its data externally but has no 'location'");
  }
  std::string why;
  if (!location_is_safe(location, &why)) {
    return fail(err, label + ": external data location '" + location + "' " + why);
  }
  if (model_dir.empty()) {
    return fail(err, label + " stores its data in external file '" + location +
                         "', but the model's directory is unknown (import from a file, or set "
                         "ImportOptions::model_dir)");
  }
  uint64_t offset = 0;
  uint64_t length = 0;
  if (has_offset && !parse_u64(offset_text, &offset)) {
    return fail(err, label + ": external data offset '" + offset_text + "' is not a number");
  }
  if (has_length && !parse_u64(length_text, &length)) {
    return fail(err, label + ": external data length '" + length_text + "' is not a number");
  }

  const std::string path = model_dir + "/" + location;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return fail(err, label + ": cannot open external data file '" + path +
                         "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(err, label + ": external data file '" + path + "' is not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size) {
    return fail(err, label + ": external data offset " + std::to_string(offset) +
                         " is past the end of '" + location + "' (" +
                         std::to_string(file_size) + " bytes)");
  }
  if (!has_length) length = file_size - offset;
  if (length > file_size - offset) {
    return fail(err, label + ": external data [" + std::to_string(offset) + ", " +
                         std::to_string(offset) + "+" + std::to_string(length) +
                         ") lies outside '" + location + "' (" + std::to_string(file_size) +
                         " bytes)");
  }
  if (length != expected_bytes) {
    return fail(err, label + ": external data is " + std::to_string(length) +
                         " bytes, expected " + std::to_string(expected_bytes));
  }
  if (length > static_cast<uint64_t>(std::numeric_limits<std::streamsize>::max()) ||
      length > data->max_size()) {
    return fail(err, label + ": external data of " + std::to_string(length) +
                         " bytes is too large for this host");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(err, label + ": cannot open external data file '" + path + "'");
  }
  data->resize(static_cast<size_t>(length));
  in.seekg(static_cast<std::streamoff>(offset));
  if (length > 0) {
    in.read(reinterpret_cast<char*>(data->data()), static_cast<std::streamsize>(length));
  }
  if (!in) {
    return fail(err, label + ": cannot read " + std::to_string(length) + " bytes at offset " +
                         std::to_string(offset) + " of '" + path + "'");
  }
  return true;
}

template <typename Dst, typename Field>
void copy_converted(const Field& field, std::vector<uint8_t>* data) {
  data->resize(static_cast<size_t>(field.size()) * sizeof(Dst));
  uint8_t* dst = data->data();
  for (const auto& v : field) {
    const Dst converted = static_cast<Dst>(v);
    std::memcpy(dst, &converted, sizeof(Dst));
    dst += sizeof(Dst);
  }
}

}  // namespace

kite_dtype dtype_from_onnx(int32_t onnx_type) { return kite::ops::dtype_from_onnx(onnx_type); }

std::string onnx_dtype_name(int32_t onnx_type) {
  if (onnx::TensorProto_DataType_IsValid(onnx_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type));
  }
  return "type " + std::to_string(onnx_type);
}

const char* supported_dtypes_text() { return "float32, float16, int64, int32, int8, uint8, bool"; }

bool tensor_from_onnx(const onnx::TensorProto& proto, const std::string& name,
                      const std::string& model_dir, ir::Tensor* out, std::string* err) {
  const std::string label = "tensor '" + name + "'";
  const kite_dtype dtype = dtype_from_onnx(proto.data_type());
  if (dtype == KITE_DTYPE_UNDEFINED) {
    return fail(err, label + " has data type " + onnx_dtype_name(proto.data_type()) +
                         ", which Kite does not support (supported: " +
                         supported_dtypes_text() + ")");
  }
  if (proto.has_segment()) {
    return fail(err, label + " is split into segments, which Kite does not support");
  }
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape) {
    if (d < 0) {
      return fail(err, label + " has a negative dim (" + std::to_string(d) + ")");
    }
  }
  if (shape.size() > KITE_MAX_RANK) {
    return fail(err, label + " has " + std::to_string(shape.size()) +
                         " dims; Kite supports at most " + std::to_string(KITE_MAX_RANK));
  }
  uint64_t bytes = 0;
  int64_t numel = 0;
  if (!kite::ops::checked_numel(shape, &numel) ||
      !kite::ops::checked_byte_size(dtype, shape, &bytes)) {
    return fail(err, label + " is too large (shape " + kite::ops::shape_string(shape) + ")");
  }
  const std::string shape_text =
      std::string(kite::ops::dtype_name(dtype)) + " " + kite::ops::shape_string(shape);

  std::vector<uint8_t> data;
  if (proto.has_data_location() &&
      proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    if (!read_external(proto, name, model_dir, bytes, &data, err)) return false;
  } else if (!proto.raw_data().empty()) {
    if (proto.raw_data().size() != bytes) {
      return fail(err, label + " has " + std::to_string(proto.raw_data().size()) +
                           " bytes of raw data, expected " + std::to_string(bytes) + " for " +
                           shape_text);
    }
    data.assign(proto.raw_data().begin(), proto.raw_data().end());
  } else {
    int64_t count = 0;
    switch (dtype) {
      case KITE_DTYPE_FLOAT32:
        count = proto.float_data_size();
        if (count == numel) copy_converted<float>(proto.float_data(), &data);
        break;
      case KITE_DTYPE_INT64:
        count = proto.int64_data_size();
        if (count == numel) copy_converted<int64_t>(proto.int64_data(), &data);
        break;
      case KITE_DTYPE_INT32:
        count = proto.int32_data_size();
        if (count == numel) copy_converted<int32_t>(proto.int32_data(), &data);
        break;
      case KITE_DTYPE_INT8:
        count = proto.int32_data_size();
        if (count == numel) copy_converted<int8_t>(proto.int32_data(), &data);
        break;
      case KITE_DTYPE_UINT8:
        count = proto.int32_data_size();
        if (count == numel) copy_converted<uint8_t>(proto.int32_data(), &data);
        break;
      case KITE_DTYPE_FLOAT16:
        // int32_data holds the IEEE half bit patterns.
        count = proto.int32_data_size();
        if (count == numel) copy_converted<uint16_t>(proto.int32_data(), &data);
        break;
      case KITE_DTYPE_BOOL:
        count = proto.int32_data_size();
        if (count == numel) {
          data.resize(static_cast<size_t>(count));
          for (int i = 0; i < proto.int32_data_size(); ++i) {
            data[static_cast<size_t>(i)] = proto.int32_data(i) != 0 ? 1 : 0;
          }
        }
        break;
      default:
        break;
    }
    if (count != numel) {
      return fail(err, label + " has " + std::to_string(count) + " values, expected " +
                           std::to_string(numel) + " for " + shape_text);
    }
  }
  out->dtype = dtype;
  out->shape = std::move(shape);
  out->shape_known = true;
  out->data = std::move(data);
  return true;
}

}  // namespace kite::converter::onnx_detail
