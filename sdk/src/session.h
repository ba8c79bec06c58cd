// A session: the backends it uses (one instance each, on devices shared
// with the process's other sessions), one host arena (or a unified device's
// mapped arena in its place), each device backend's arena, weights buffer
// and workspace, the schedule (schedule.h) turned into prepared kernels and
// segments, and the runner that executes it. Created from a shared,
// immutable Model; running allocates nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend_instance.h"
#include "backend_registry.h"
#include "kite/abi/node.h"
#include "kite/backend.h"
#include "model.h"
#include "schedule.h"
#include "status.h"

namespace kite::rt {

struct SessionConfig {
  std::string backends = "cpu";
  std::string plugin_path;  // colon-separated folders searched first
  int threads = 0;
  bool strict = false;      // any fallback is a session-creation error
  // Cap on the bytes the session allocates for the model: host arena,
  // device arenas, weights buffers and workspaces. 0: no cap.
  uint64_t memory_limit = 0;
  bool poison = false;      // fill the arena with NaN bytes before each run
  bool profile = false;     // backends time every kernel
  uint32_t precision = 0;
  std::string cache_dir;
  kite_log_callback log = nullptr;
  void* log_user = nullptr;
  // Per backend name: key=value options in the order set (a key set again
  // replaces its value), and the device index.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> backend_options;
  std::map<std::string, int> device_index;
  std::map<std::string, void*> external_queue;  // per backend name (create_info.external_queue)
};

// What one backend of the session is and holds (kite_session_backend).
struct BackendUsage {
  std::string name;
  bool available = true;
  std::string reason;
  std::string device_name;
  int device_index = 0;
  int abi_version = 0;
  bool device_memory = false;
  bool unified = false;
  bool weights_imported = false;
  int kernels = 0;
  int segments = 0;
  int weight_uploads = 0;
  uint64_t arena_bytes = 0;
  uint64_t weights_bytes = 0;
  uint64_t workspace_bytes = 0;
};

struct RunStats {
  int segments = 0;
  int uploads = 0;
  int downloads = 0;
  int buffer_copies = 0;
  int syncs = 0;
};

struct NodeProfile {
  uint64_t runs = 0;
  uint64_t total_ns = 0;
  bool measured = false;
};

class Session : private PlacementOracle {
 public:
  static Status create(std::shared_ptr<const Model> model, const SessionConfig& config,
                       std::unique_ptr<Session>* out);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }
  uint8_t* tensor_data(int tensor) {
    return host_arena_ + model_->tensors[static_cast<size_t>(tensor)].arena_offset;
  }
  const uint8_t* tensor_data(int tensor) const {
    return host_arena_ + model_->tensors[static_cast<size_t>(tensor)].arena_offset;
  }
  const std::vector<PlacementRec>& placements() const { return schedule_.placements; }
  const std::vector<std::string>& notes() const { return schedule_.notes; }
  int transfer_count() const { return schedule_.main_transfers; }
  const RunStats& run_stats() const { return stats_; }
  std::vector<BackendUsage> backend_usage() const;
  const std::vector<NodeProfile>& profile() const { return profile_; }
  void reset_profile();

  Status run();
  Status run_async();
  Status wait();
  bool in_flight() const { return in_flight_; }

  // Binds main-graph input/output `index` to an application buffer of a
  // device backend (backend empty: unbind).
  Status bind_buffer(bool input, int index, const std::string& backend, uint64_t handle,
                     uint64_t offset);
  bool output_bound(int index) const {
    return static_cast<size_t>(index) < output_bindings_.size() &&
           output_bindings_[static_cast<size_t>(index)].backend >= 0;
  }

 private:
  Session() = default;

  struct Slot {
    std::unique_ptr<BackendInstance> instance;
    kite::abi::TensorTable tensors;  // this backend's view of every tensor
    bool device = false;
    bool shares_host = false;        // its mapped arena is the host arena
    bool weights_imported = false;
    int kernels = 0;
    int weight_uploads = 0;
    kite_backend_buffer arena = nullptr;
    kite_backend_buffer weights = nullptr;
    kite_backend_buffer workspace = nullptr;
    void* workspace_host = nullptr;  // host backends
    uint64_t arena_bytes = 0, weights_bytes = 0, workspace_bytes = 0;
  };
  struct Kernel {
    kite::abi::Node node;
    void* handle = nullptr;
    int backend = -1;
  };
  struct PreparedSegment {
    void* handle = nullptr;  // null: run kernel by kernel
    std::vector<void*> kernels;
    std::vector<const kite_backend_node2*> nodes;
  };
  struct Binding {
    int backend = -1;
    kite_backend_buffer buffer = nullptr;  // the imported application buffer
    uint64_t offset = 0;
  };

  // PlacementOracle: asks backend b's supports about a node.
  bool supports(const NodeRec& node, int backend, std::string* reason) override;

  Status start_backends(const Resolution& resolution, const SessionConfig& config);
  Status allocate_arenas(const SessionConfig& config);
  Status load_weights(const SessionConfig& config);
  Status prepare_kernels();
  Status allocate_workspaces(const SessionConfig& config);
  Status prepare_segments();
  Status replan();
  Status check_limit(const SessionConfig& config, const std::string& stage) const;
  uint64_t allocated_bytes() const;
  Status run_steps(int graph, bool defer_final_syncs);
  Status run_step(const Step& step);
  Status finish_run();
  void collect_profile();
  void abandon_run();
  kite_backend_tensor2& tensor_of(int backend, int tensor) {
    return slots_[static_cast<size_t>(backend)].tensors.at(tensor);
  }

  std::shared_ptr<const Model> model_;
  std::vector<Slot> slots_;
  std::vector<std::string> unavailable_;
  std::vector<std::string> unavailable_names_;
  std::unique_ptr<ScheduleBuilder> builder_;
  Schedule schedule_;
  std::deque<Kernel> kernels_;            // one per schedule_.kernels entry
  std::vector<PreparedSegment> segments_;  // one per schedule_.segments entry
  std::map<std::pair<const NodeRec*, int>, std::pair<bool, std::string>> supports_cache_;
  uint8_t* host_arena_ = nullptr;
  bool host_arena_owned_ = false;
  uint64_t host_arena_bytes_ = 0;
  std::vector<Binding> input_bindings_, output_bindings_;
  std::string mutation_;
  // Poison mode: the arena ranges that are not graph inputs, filled with 0xFF
  // (a NaN in float32) before each run so a read of stale data shows.
  std::vector<std::pair<uint64_t, uint64_t>> poison_ranges_;
  RunStats stats_;
  std::vector<NodeProfile> profile_;     // per placement
  std::vector<uint64_t> if_ns_;          // per placement: this run's If time
  std::vector<char> kernel_ran_;         // per kernel, this run
  bool profiling_ = false;
  bool in_flight_ = false;
  bool lost_ = false;
  std::string lost_message_;
};

}  // namespace kite::rt
