// A backend as the session uses it: its table (read through kite::abi::Table,
// so v1 and v2 plugins look alike), its device (shared by every session of
// the process on that device), and the session's own instance. Every call
// that fails comes back as a Status naming the backend, the call and the
// backend's own message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend_registry.h"
#include "kite/abi/node.h"
#include "kite/abi/table.h"
#include "kite/backend.h"
#include "status.h"

namespace kite::rt {

// One open device: closed (device_close) when the last session using it
// goes. One per process, backend table and device index.
class Device {
 public:
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  void* handle() const { return handle_; }
  const kite_backend_device_info& info() const { return info_; }
  int index() const { return index_; }

 private:
  friend Status acquire_device(const ResolvedBackend&, int, const kite_backend_device_options&,
                               std::shared_ptr<Device>*);
  Device() = default;
  kite::abi::Table table_;
  std::shared_ptr<Plugin> plugin_;  // keeps the module loaded until closed
  void* handle_ = nullptr;
  int index_ = 0;
  kite_backend_device_info info_{};
};

// Opens device `index` of a backend, or shares the one already open in this
// process. A backend without device functions has one implicit device.
Status acquire_device(const ResolvedBackend& backend, int index,
                      const kite_backend_device_options& options, std::shared_ptr<Device>* out);

struct InstanceConfig {
  int threads = 0;
  uint32_t precision = 0;
  bool profile = false;
  std::string cache_dir;
  std::vector<std::pair<std::string, std::string>> options;
  kite_log_callback log = nullptr;
  void* log_user = nullptr;
  void* external_queue = nullptr;  // the application's stream/queue, or null
};

class BackendInstance {
 public:
  BackendInstance() = default;
  ~BackendInstance();
  BackendInstance(const BackendInstance&) = delete;
  BackendInstance& operator=(const BackendInstance&) = delete;

  Status create(const ResolvedBackend& backend, std::shared_ptr<Device> device,
                const InstanceConfig& config);

  const std::string& name() const { return name_; }
  const kite::abi::Table& table() const { return table_; }
  bool v2() const { return table_.v2(); }
  bool device_memory() const { return table_.device_memory(); }
  const Device* device() const { return device_.get(); }
  // The device may be host-addressable (flags UNIFIED and buffer_map).
  bool may_be_unified() const;
  bool can_import_host() const;
  bool can_import_external() const;
  uint64_t offset_alignment() const;
  // The largest single buffer the device allocates (0: no stated limit).
  uint64_t max_buffer_size() const { return device_ ? device_->info().max_buffer_size : 0; }

  // Nodes: supports, prepare, execute, release. The node's tensors live in
  // this backend's TensorTable.
  bool supports(kite::abi::Node* node, std::string* reason);
  Status prepare(kite::abi::Node* node, void** out_kernel);
  Status execute(void* kernel, const char* node_name);
  void release(void* kernel);
  Status workspace_size(uint64_t* out_bytes);
  Status bind(const kite_backend_bindings& bindings);

  // Memory (device backends). v1 device backends' pointers from alloc are
  // kept as buffer handles (v1 allows arithmetic on them).
  Status alloc(uint64_t size, kite_buffer_usage usage, const std::string& what,
               kite_backend_buffer* out);
  void free(kite_backend_buffer buffer);
  // KITE_ERROR_UNSUPPORTED: not host-visible here (use a mirror instead).
  Status map(kite_backend_buffer buffer, void** out_host);
  Status import_host(const void* host, uint64_t size, kite_backend_buffer* out);
  Status import_external(uint64_t handle, uint64_t size, kite_backend_buffer* out);
  Status upload(const kite_backend_tensor2& dst, const void* src);
  Status download(void* dst, const kite_backend_tensor2& src);
  // what: "input" or "output"; name: the tensor (messages only).
  Status copy_buffer(kite_backend_buffer src, uint64_t src_offset, kite_backend_buffer dst,
                     uint64_t dst_offset, uint64_t size, const char* what, const char* name);
  Status synchronize();

  // Segments and runs (v2, optional).
  bool has_segments() const { return table_->prepare_segment != nullptr; }
  // *out stays null when the backend declines to record it (UNSUPPORTED).
  Status prepare_segment(const kite_backend_segment& segment, void** out);
  Status execute_segment(void* segment);
  void release_segment(void* segment);
  Status begin_run();
  Status end_run();
  // false: not measured.
  bool kernel_time(void* kernel, uint64_t* out_ns);

  // The data of a v1 node's tensor: the host address, or (v1 device
  // backends) the alloc pointer plus the offset.
  static void* v1_data(const kite_backend_tensor2& tensor);

 private:
  Status failed(kite_status code, const std::string& call) const;

  kite::abi::Table table_;
  std::shared_ptr<Plugin> plugin_;
  std::shared_ptr<Device> device_;
  std::string name_;
  void* instance_ = nullptr;
  // Strings handed to create2 stay valid until destroy.
  std::vector<std::string> option_keys_, option_values_;
  std::vector<const char*> key_ptrs_, value_ptrs_;
  std::string cache_dir_;
  mutable char err_[1024] = {0};
};

}  // namespace kite::rt
