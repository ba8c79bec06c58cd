#include "kite/abi/plugin.h"

#include <cstdio>

namespace kite::abi {

void write_message(char* buffer, size_t size, const std::string& message) {
  if (!buffer || size == 0) return;
  std::snprintf(buffer, size, "%s", message.c_str());
}

kite_status fail(char* err, size_t err_size, kite_status status, const std::string& message) {
  write_message(err, err_size, message);
  return status;
}

std::string range_outside(const std::string& what, uint64_t offset, uint64_t size, uint64_t capacity) {
  return what + ": range [" + std::to_string(offset) + ", +" + std::to_string(size) + ") is outside its buffer of " +
         std::to_string(capacity) + " bytes";
}

std::string check_tensor_range(const char* what, const kite_backend_tensor2& t, bool has_buffer,
                               uint64_t buffer_size) {
  const std::string which = std::string(what) + " of '" + (t.name ? t.name : "") + "'";
  if (!has_buffer) return which + ": it has no buffer";
  return range_fits(t.offset, t.byte_size, buffer_size) ? "" : range_outside(which, t.offset, t.byte_size, buffer_size);
}

std::string check_copy_ranges(uint64_t src_offset, uint64_t src_capacity, uint64_t dst_offset,
                              uint64_t dst_capacity, uint64_t size) {
  if (!range_fits(src_offset, size, src_capacity)) {
    return range_outside("copy_buffer's source", src_offset, size, src_capacity);
  }
  if (!range_fits(dst_offset, size, dst_capacity)) {
    return range_outside("copy_buffer's target", dst_offset, size, dst_capacity);
  }
  return "";
}

std::string backend_options(const kite_backend_create_info* info, std::vector<BackendOption>* out) {
  out->clear();
  const int32_t count = info ? info->num_options : 0;
  if (count < 0 || (count > 0 && (!info->option_keys || !info->option_values))) {
    return "the backend options are malformed";
  }
  for (int32_t i = 0; i < count; ++i) {
    const char* key = info->option_keys[i];
    const char* value = info->option_values[i];
    out->push_back(BackendOption{key ? key : "", value ? value : ""});
  }
  return "";
}

std::string parse_flag_option(const char* backend, const std::string& key, const std::string& value, bool* out) {
  if (value != "0" && value != "1") {
    return std::string(backend) + " backend option " + key + "=" + value + ": expected 0 or 1";
  }
  *out = value == "1";
  return "";
}

kite_backend_api backend_api(const char* name, kite_backend_memory memory) {
  kite_backend_api api{};
  api.abi_version = KITE_BACKEND_ABI_VERSION;
  api.struct_size = sizeof(kite_backend_api);
  api.name = name;
  api.memory = memory;
  return api;
}

}  // namespace kite::abi
