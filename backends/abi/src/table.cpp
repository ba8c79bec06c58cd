#include "kite/abi/table.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace kite::abi {

Table::Table(const kite_backend_api* api) : original_(api) {
  if (api == nullptr) return;
  const size_t n = std::min<size_t>(api->struct_size, sizeof(kite_backend_api));
  std::memcpy(&api_, api, n);
  if (n < sizeof(kite_backend_api)) {
    std::memset(reinterpret_cast<unsigned char*>(&api_) + n, 0, sizeof(kite_backend_api) - n);
  }
}

namespace {

constexpr size_t end_of_release = offsetof(kite_backend_api, release) + sizeof(void*);
constexpr size_t end_of_v1_copies = offsetof(kite_backend_api, copy_to_host) + sizeof(void*);
constexpr size_t end_of_prepare2 = offsetof(kite_backend_api, prepare2) + sizeof(void*);

bool plain_name(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 64) return false;
  for (const char* p = name; *p; ++p) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string check_table(const kite_backend_api* raw) {
  if (raw == nullptr) return "backend table is NULL";
  if (raw->abi_version < 1 || raw->abi_version > KITE_BACKEND_ABI_VERSION) {
    return "backend ABI version " + std::to_string(raw->abi_version) +
           " is not supported (this runtime knows versions 1 to " +
           std::to_string(KITE_BACKEND_ABI_VERSION) + ")";
  }
  const size_t minimum = raw->abi_version == 1 ? end_of_release : end_of_prepare2;
  if (raw->struct_size < minimum) {
    return "backend table is " + std::to_string(raw->struct_size) +
           " bytes, smaller than the " + std::to_string(minimum) + " that ABI version " +
           std::to_string(raw->abi_version) + " requires";
  }
  int memory_kind = 0;  // read as an int: a hostile value is not a valid enum
  std::memcpy(&memory_kind, reinterpret_cast<const unsigned char*>(raw) +
                                offsetof(kite_backend_api, memory), sizeof(memory_kind));
  if (memory_kind != KITE_BACKEND_MEMORY_HOST && memory_kind != KITE_BACKEND_MEMORY_DEVICE) {
    return "backend table has unknown memory kind " + std::to_string(memory_kind);
  }
  const Table t(raw);
  if (!plain_name(t->name)) return "backend table has no name or a name that is not [A-Za-z0-9_-]";
  std::string missing;
  auto need = [&missing](const void* member, const char* name) {
    if (member == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  auto fn = [](auto f) { return reinterpret_cast<const void*>(f); };
  need(fn(t->destroy), "destroy");
  need(fn(t->execute), "execute");
  need(fn(t->release), "release");
  if (t.v2()) {
    need(fn(t->create2), "create2");
    need(fn(t->supports2), "supports2");
    need(fn(t->prepare2), "prepare2");
    if (t.device_memory()) {
      need(fn(t->buffer_alloc), "buffer_alloc");
      need(fn(t->buffer_free), "buffer_free");
      need(fn(t->upload), "upload");
      need(fn(t->download), "download");
      if (t->synchronize2 == nullptr && t->synchronize == nullptr) need(nullptr, "synchronize2");
    }
    if ((t->device_count == nullptr) != (t->device_info == nullptr)) {
      need(fn(t->device_count), "device_count");
      need(fn(t->device_info), "device_info");
    }
    if (t->device_open != nullptr && t->device_close == nullptr) need(nullptr, "device_close");
    if (t->prepare_segment != nullptr) {
      need(fn(t->execute_segment), "execute_segment");
      need(fn(t->release_segment), "release_segment");
    }
  } else {
    need(fn(t->create), "create");
    need(fn(t->supports), "supports");
    need(fn(t->prepare), "prepare");
    if (t.device_memory()) {
      if (raw->struct_size < end_of_v1_copies) {
        return "a v1 device-memory backend's table must reach copy_to_host (it is " +
               std::to_string(raw->struct_size) + " bytes)";
      }
      need(fn(t->alloc), "alloc");
      need(fn(t->free), "free");
      need(fn(t->copy_to_device), "copy_to_device");
      need(fn(t->copy_to_host), "copy_to_host");
    }
  }
  if (!missing.empty()) {
    return "backend table (ABI version " + std::to_string(raw->abi_version) +
           ") lacks mandatory member(s): " + missing;
  }
  return "";
}

}  // namespace kite::abi
