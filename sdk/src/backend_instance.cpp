#include "backend_instance.h"

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace kite::rt {
namespace {

// Open devices of this process: (table, index) -> the device, while any
// session holds it. Opening and closing happen under the lock, so a device
// is never opened and closed concurrently.
std::recursive_mutex g_devices_mutex;
std::map<std::pair<const kite_backend_api*, int>, std::weak_ptr<Device>>& open_devices() {
  static auto* devices = new std::map<std::pair<const kite_backend_api*, int>, std::weak_ptr<Device>>();
  return *devices;
}

std::string message_or(const char* err, const char* fallback) {
  return err != nullptr && err[0] != '\0' ? std::string(err) : std::string(fallback);
}

}  // namespace

Device::~Device() {
  if (handle_ != nullptr && table_->device_close != nullptr) table_->device_close(handle_);
}

Status acquire_device(const ResolvedBackend& backend, int index,
                      const kite_backend_device_options& options, std::shared_ptr<Device>* out) {
  const kite::abi::Table table(backend.api);
  const std::string name = table.name();
  std::lock_guard<std::recursive_mutex> lock(g_devices_mutex);
  auto& devices = open_devices();
  const auto key = std::make_pair(backend.api, index);
  auto it = devices.find(key);
  if (it != devices.end()) {
    if (std::shared_ptr<Device> d = it->second.lock()) {
      *out = std::move(d);
      return Status::ok();
    }
  }
  char err[1024] = {0};
  std::shared_ptr<Device> d(new Device(), [](Device* p) {
    // The last session let go: close under the lock.
    std::lock_guard<std::recursive_mutex> guard(g_devices_mutex);
    delete p;
  });
  d->table_ = table;
  d->plugin_ = backend.plugin;
  d->index_ = index;
  d->info_.struct_size = sizeof(kite_backend_device_info);
  if (table->device_count != nullptr) {
    int32_t count = 0;
    kite_status s = table->device_count(&count, err, sizeof err);
    if (s != KITE_OK) {
      return Status(s, "backend '" + name + "' has no usable device: " + message_or(err, kite_status_string(s)));
    }
    if (index < 0 || index >= count) {
      return Status(KITE_ERROR_BACKEND, "backend '" + name + "' has " + std::to_string(count) +
                                            " device(s), no device " + std::to_string(index));
    }
    s = table->device_info(index, &d->info_, err, sizeof err);
    if (s != KITE_OK) {
      return Status(s, "backend '" + name + "' failed in device_info for device " + std::to_string(index) +
                           ": " + message_or(err, kite_status_string(s)));
    }
    d->info_.name[sizeof d->info_.name - 1] = '\0';
  } else if (index != 0) {
    return Status(KITE_ERROR_BACKEND, "backend '" + name + "' has one device, no device " + std::to_string(index));
  } else {
    std::snprintf(d->info_.name, sizeof d->info_.name, "%s", name.c_str());
  }
  if (table->device_open != nullptr) {
    kite_backend_device_options o = options;
    o.struct_size = sizeof o;
    o.device_index = index;
    err[0] = '\0';
    const kite_status s = table->device_open(&o, &d->handle_, err, sizeof err);
    if (s != KITE_OK) {
      d->handle_ = nullptr;
      return Status(s, "backend '" + name + "' failed in device_open for device " + std::to_string(index) +
                           ": " + message_or(err, kite_status_string(s)));
    }
  }
  devices[key] = d;
  *out = std::move(d);
  return Status::ok();
}

BackendInstance::~BackendInstance() {
  if (instance_ != nullptr) table_->destroy(instance_);
}

Status BackendInstance::failed(kite_status code, const std::string& call) const {
  return Status(code, "backend '" + name_ + "' failed in " + call + ": " +
                          message_or(err_, kite_status_string(code)));
}

Status BackendInstance::create(const ResolvedBackend& backend, std::shared_ptr<Device> device,
                               const InstanceConfig& config) {
  table_ = kite::abi::Table(backend.api);
  plugin_ = backend.plugin;
  device_ = std::move(device);
  name_ = table_.name();
  err_[0] = '\0';
  if (!table_.v2()) {
    if (!config.options.empty()) {
      return Status(KITE_ERROR_INVALID_ARGUMENT,
                    "backend '" + name_ + "' (ABI version 1) takes no options, got '" +
                        config.options.front().first + "'");
    }
    kite_backend_options options{};
    options.threads = config.threads;
    const kite_status s = table_->create(&options, &instance_, err_, sizeof err_);
    if (s != KITE_OK) {
      instance_ = nullptr;
      return failed(s, "create");
    }
    return Status::ok();
  }
  for (const auto& kv : config.options) {
    option_keys_.push_back(kv.first);
    option_values_.push_back(kv.second);
  }
  for (size_t i = 0; i < option_keys_.size(); ++i) {
    key_ptrs_.push_back(option_keys_[i].c_str());
    value_ptrs_.push_back(option_values_[i].c_str());
  }
  cache_dir_ = config.cache_dir;
  kite_backend_create_info info{};
  info.struct_size = sizeof info;
  info.threads = config.threads;
  info.precision = config.precision;
  info.profile = config.profile ? 1 : 0;
  info.cache_dir = cache_dir_.empty() ? nullptr : cache_dir_.c_str();
  info.num_options = static_cast<int32_t>(key_ptrs_.size());
  info.option_keys = key_ptrs_.data();
  info.option_values = value_ptrs_.data();
  info.log = config.log;
  info.log_user = config.log_user;
  info.external_queue = config.external_queue;
  const kite_status s = table_->create2(device_ ? device_->handle() : nullptr, &info, &instance_,
                                        err_, sizeof err_);
  if (s != KITE_OK) {
    instance_ = nullptr;
    return failed(s, "create2");
  }
  return Status::ok();
}

bool BackendInstance::may_be_unified() const {
  return table_.v2() && device_memory() && device_ && (device_->info().flags & KITE_DEVICE_UNIFIED) &&
         table_->buffer_map != nullptr;
}

bool BackendInstance::can_import_host() const {
  return table_.v2() && device_memory() && device_ && (device_->info().flags & KITE_DEVICE_HOST_IMPORT) &&
         table_->import_host != nullptr;
}

bool BackendInstance::can_import_external() const {
  return table_.v2() && device_memory() && table_->import_external != nullptr &&
         table_->copy_buffer != nullptr;
}

uint64_t BackendInstance::offset_alignment() const {
  const uint64_t a = device_ ? device_->info().min_offset_alignment : 0;
  return a < 64 ? 64 : a;
}

void* BackendInstance::v1_data(const kite_backend_tensor2& t) {
  if (t.buffer != nullptr) return reinterpret_cast<uint8_t*>(t.buffer) + t.offset;
  return t.data;
}

bool BackendInstance::supports(kite::abi::Node* node, std::string* reason) {
  char text[512] = {0};
  int ok = 0;
  if (table_.v2()) {
    ok = table_->supports2(instance_, node->v2(), text, sizeof text);
  } else {
    ok = table_->supports(instance_, node->v1(&BackendInstance::v1_data), text, sizeof text);
  }
  // On success the text is the backend's note on how it runs the node.
  if (reason != nullptr) *reason = ok ? std::string(text) : text[0] ? text : "not supported";
  return ok != 0;
}

Status BackendInstance::prepare(kite::abi::Node* node, void** out_kernel) {
  err_[0] = '\0';
  *out_kernel = nullptr;
  kite_status s;
  if (table_.v2()) {
    s = table_->prepare2(instance_, node->v2(), out_kernel, err_, sizeof err_);
  } else {
    s = table_->prepare(instance_, node->v1(&BackendInstance::v1_data), out_kernel, err_, sizeof err_);
  }
  if (s != KITE_OK) {
    *out_kernel = nullptr;
    const kite_backend_node2* n = node->v2();
    return failed(s, std::string(table_.v2() ? "prepare2" : "prepare") + " of " + n->op + " '" + n->name + "'");
  }
  return Status::ok();
}

Status BackendInstance::execute(void* kernel, const char* node_name) {
  err_[0] = '\0';
  const kite_status s = table_->execute(instance_, kernel, err_, sizeof err_);
  if (s != KITE_OK) return failed(s, std::string("execute of '") + node_name + "'");
  return Status::ok();
}

void BackendInstance::release(void* kernel) {
  if (kernel != nullptr) table_->release(instance_, kernel);
}

Status BackendInstance::workspace_size(uint64_t* out_bytes) {
  *out_bytes = 0;
  if (!table_.v2() || table_->workspace_size == nullptr) return Status::ok();
  err_[0] = '\0';
  const kite_status s = table_->workspace_size(instance_, out_bytes, err_, sizeof err_);
  if (s != KITE_OK) return failed(s, "workspace_size");
  return Status::ok();
}

Status BackendInstance::bind(const kite_backend_bindings& bindings) {
  if (!table_.v2() || table_->bind == nullptr) return Status::ok();
  err_[0] = '\0';
  const kite_status s = table_->bind(instance_, &bindings, err_, sizeof err_);
  if (s != KITE_OK) return failed(s, "bind");
  return Status::ok();
}

Status BackendInstance::alloc(uint64_t size, kite_buffer_usage usage, const std::string& what,
                              kite_backend_buffer* out) {
  err_[0] = '\0';
  *out = nullptr;
  if (size == 0) size = 1;
  kite_status s;
  if (table_.v2()) {
    s = table_->buffer_alloc(instance_, size, usage, out, err_, sizeof err_);
  } else {
    void* ptr = nullptr;
    s = table_->alloc(instance_, size, 256, &ptr);
    *out = static_cast<kite_backend_buffer>(ptr);
    if (s == KITE_OK && ptr == nullptr) s = KITE_ERROR_OUT_OF_MEMORY;
  }
  if (s != KITE_OK) {
    *out = nullptr;
    return failed(s, std::string(table_.v2() ? "buffer_alloc" : "alloc") + " of " + what + " (" +
                         std::to_string(size) + " bytes)");
  }
  return Status::ok();
}

void BackendInstance::free(kite_backend_buffer buffer) {
  if (buffer == nullptr) return;
  if (table_.v2()) {
    table_->buffer_free(instance_, buffer);
  } else {
    table_->free(instance_, static_cast<void*>(buffer));
  }
}

Status BackendInstance::map(kite_backend_buffer buffer, void** out_host) {
  *out_host = nullptr;
  if (!may_be_unified()) return Status(KITE_ERROR_UNSUPPORTED, "not host-visible");
  err_[0] = '\0';
  const kite_status s = table_->buffer_map(instance_, buffer, out_host, err_, sizeof err_);
  if (s == KITE_ERROR_UNSUPPORTED) return Status(s, message_or(err_, "not host-visible"));
  if (s != KITE_OK || *out_host == nullptr) {
    *out_host = nullptr;
    return failed(s == KITE_OK ? KITE_ERROR_BACKEND : s, "buffer_map of the arena");
  }
  return Status::ok();
}

Status BackendInstance::import_host(const void* host, uint64_t size, kite_backend_buffer* out) {
  *out = nullptr;
  if (!can_import_host()) return Status(KITE_ERROR_UNSUPPORTED, "cannot import host memory");
  err_[0] = '\0';
  const kite_status s = table_->import_host(instance_, host, size, out, err_, sizeof err_);
  if (s == KITE_ERROR_UNSUPPORTED) return Status(s, message_or(err_, "cannot import host memory"));
  if (s != KITE_OK) {
    *out = nullptr;
    return failed(s, "import_host of the weights (" + std::to_string(size) + " bytes)");
  }
  return Status::ok();
}

Status BackendInstance::import_external(uint64_t handle, uint64_t size, kite_backend_buffer* out) {
  *out = nullptr;
  if (!can_import_external()) {
    return Status(KITE_ERROR_UNSUPPORTED, "backend '" + name_ + "' cannot use application buffers "
                                          "(no import_external and copy_buffer)");
  }
  err_[0] = '\0';
  const kite_status s = table_->import_external(instance_, handle, size, out, err_, sizeof err_);
  if (s != KITE_OK) {
    *out = nullptr;
    return failed(s, "import_external of an application buffer");
  }
  return Status::ok();
}

Status BackendInstance::upload(const kite_backend_tensor2& dst, const void* src) {
  err_[0] = '\0';
  kite_status s;
  if (table_.v2()) {
    s = table_->upload(instance_, &dst, src, err_, sizeof err_);
  } else {
    s = table_->copy_to_device(instance_, v1_data(dst), src, dst.byte_size);
  }
  if (s != KITE_OK) return failed(s, std::string(table_.v2() ? "upload" : "copy_to_device") + " of '" + dst.name + "'");
  return Status::ok();
}

Status BackendInstance::download(void* dst, const kite_backend_tensor2& src) {
  err_[0] = '\0';
  kite_status s;
  if (table_.v2()) {
    s = table_->download(instance_, dst, &src, err_, sizeof err_);
  } else {
    s = table_->copy_to_host(instance_, dst, v1_data(src), src.byte_size);
  }
  if (s != KITE_OK) return failed(s, std::string(table_.v2() ? "download" : "copy_to_host") + " of '" + src.name + "'");
  return Status::ok();
}

Status BackendInstance::copy_buffer(kite_backend_buffer src, uint64_t src_offset, kite_backend_buffer dst,
                                    uint64_t dst_offset, uint64_t size, const char* what, const char* name) {
  err_[0] = '\0';
  const kite_status s = table_->copy_buffer(instance_, src, src_offset, dst, dst_offset, size, err_, sizeof err_);
  if (s != KITE_OK) {
    return failed(s, std::string("copy_buffer of ") + what + " '" + name + "' " +
                         (std::string(what) == "input" ? "from" : "to") + " its application buffer");
  }
  return Status::ok();
}

Status BackendInstance::synchronize() {
  err_[0] = '\0';
  kite_status s = KITE_OK;
  if (table_->synchronize2 != nullptr) {
    s = table_->synchronize2(instance_, err_, sizeof err_);
  } else if (table_->synchronize != nullptr) {
    s = table_->synchronize(instance_);
  }
  if (s != KITE_OK) return failed(s, table_->synchronize2 != nullptr ? "synchronize2" : "synchronize");
  return Status::ok();
}

Status BackendInstance::prepare_segment(const kite_backend_segment& segment, void** out) {
  *out = nullptr;
  if (!has_segments()) return Status::ok();
  err_[0] = '\0';
  const kite_status s = table_->prepare_segment(instance_, &segment, out, err_, sizeof err_);
  if (s == KITE_ERROR_UNSUPPORTED) {
    *out = nullptr;
    return Status::ok();
  }
  if (s != KITE_OK) {
    *out = nullptr;
    return failed(s, "prepare_segment (" + std::to_string(segment.num_kernels) + " kernels)");
  }
  return Status::ok();
}

Status BackendInstance::execute_segment(void* segment) {
  err_[0] = '\0';
  const kite_status s = table_->execute_segment(instance_, segment, err_, sizeof err_);
  if (s != KITE_OK) return failed(s, "execute_segment");
  return Status::ok();
}

void BackendInstance::release_segment(void* segment) {
  if (segment != nullptr) table_->release_segment(instance_, segment);
}

Status BackendInstance::begin_run() {
  if (!table_.v2() || table_->begin_run == nullptr) return Status::ok();
  err_[0] = '\0';
  const kite_status s = table_->begin_run(instance_, err_, sizeof err_);
  if (s != KITE_OK) return failed(s, "begin_run");
  return Status::ok();
}

Status BackendInstance::end_run() {
  if (!table_.v2() || table_->end_run == nullptr) return Status::ok();
  err_[0] = '\0';
  const kite_status s = table_->end_run(instance_, err_, sizeof err_);
  if (s != KITE_OK) return failed(s, "end_run");
  return Status::ok();
}

bool BackendInstance::kernel_time(void* kernel, uint64_t* out_ns) {
  if (!table_.v2() || table_->kernel_time == nullptr || kernel == nullptr) return false;
  return table_->kernel_time(instance_, kernel, out_ns) == KITE_OK;
}

}  // namespace kite::rt
