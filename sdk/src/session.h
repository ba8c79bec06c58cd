// A session: one host arena (plus a mirror arena on each device-memory
// backend), one instance of each chosen backend, and a static schedule of
// kernels, control flow and transfers. Created from a shared, immutable
// Model; running allocates nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend_registry.h"
#include "kite/backend.h"
#include "model.h"
#include "status.h"

namespace kite::rt {

struct SessionConfig {
  std::string backends = "cpu";
  std::string plugin_path;  // colon-separated folders searched first
  int threads = 0;
  bool strict = false;      // any fallback is a session-creation error
  // Cap on the bytes the session allocates for the model: the host arena,
  // plus each device backend's arena and constant copies. 0: no cap.
  uint64_t memory_limit = 0;
  bool poison = false;      // fill the arena with NaN bytes before each run
};

struct PlacementRec {
  std::string node_name;
  std::string op;
  std::string backend;
  bool fused = false;
  bool decomposed = false;
  std::string reason;
};

class Session {
 public:
  static Status create(std::shared_ptr<const Model> model, const SessionConfig& config,
                       std::unique_ptr<Session>* out);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }
  uint8_t* tensor_data(int tensor) { return arena_ + model_->tensors[static_cast<size_t>(tensor)].arena_offset; }
  const uint8_t* tensor_data(int tensor) const {
    return arena_ + model_->tensors[static_cast<size_t>(tensor)].arena_offset;
  }
  const std::vector<PlacementRec>& placements() const { return placements_; }
  int transfer_count() const { return transfer_count_; }
  Status run();

 private:
  Session() = default;

  struct BackendSlot {
    const kite_backend_api* api = nullptr;
    void* instance = nullptr;
    std::shared_ptr<Plugin> plugin;  // keeps the module loaded
    bool device = false;
    void* device_arena = nullptr;
    std::vector<void*> device_constants;
    std::vector<kite_backend_tensor> tensors;  // this backend's view of every tensor
  };
  // A node as handed to a backend, with storage that stays put.
  struct PreparedNode {
    const NodeRec* node = nullptr;
    int backend = -1;
    void* kernel = nullptr;
    std::vector<const kite_backend_tensor*> inputs;
    std::vector<const kite_backend_tensor*> outputs;
    kite_backend_node abi{};
  };
  enum class StepKind { Kernel, If, ToHost, ToDevice };
  struct Step {
    StepKind kind = StepKind::Kernel;
    PreparedNode* kernel = nullptr;
    const NodeRec* if_node = nullptr;
    int then_graph = -1;
    int else_graph = -1;
    int tensor = -1;   // transfers
    int backend = -1;  // transfers: the device backend copied from / to
  };
  // Where each tensor's current value lives while building a schedule:
  // bit 0 = host, bit (1 + b) = device backend b.
  using Residency = std::vector<uint32_t>;

  Status start_backends(const Resolution& resolution, const SessionConfig& config);
  Status schedule_graph(int graph_index, bool record_placement, Residency* where);
  Status place_node(const NodeRec& node, int graph_index, bool record_placement,
                    Residency* where, std::vector<Step>* steps);
  Status prepare_on(const NodeRec& node, int backend, Residency* where, std::vector<Step>* steps);
  PreparedNode& describe(const NodeRec& node, int backend);
  void make_resident(int tensor, int backend, Residency* where, std::vector<Step>* steps);
  void make_host_resident(int tensor, Residency* where, std::vector<Step>* steps);
  Status run_graph(int graph_index);
  uint32_t space_bit(int backend) const;

  std::shared_ptr<const Model> model_;
  std::vector<BackendSlot> backends_;
  std::vector<std::string> unavailable_;
  uint8_t* arena_ = nullptr;
  std::vector<kite_backend_tensor> host_tensors_;
  std::deque<PreparedNode> prepared_;
  std::vector<std::vector<Step>> steps_;  // per graph
  std::vector<PlacementRec> placements_;  // per node of the main graph
  std::vector<std::string> fallbacks_;    // for strict mode
  int transfer_count_ = 0;
  // Poison mode: the arena ranges that are not graph inputs, filled with 0xFF
  // (a NaN in float32) before each run so a read of stale data shows.
  std::vector<std::pair<uint64_t, uint64_t>> poison_ranges_;
  char error_[512] = {0};
};

}  // namespace kite::rt
