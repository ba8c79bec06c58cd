// A session: one arena, one instance of each chosen backend, and the node
// schedule. Created from a shared, immutable Model; running allocates nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "model.h"
#include "status.h"

namespace kite::rt {

struct SessionConfig {
  std::string backends = "cpu";
  int threads = 0;
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
  uint8_t* tensor_data(int tensor) { return arena_ + model_->tensors[tensor].arena_offset; }
  const uint8_t* tensor_data(int tensor) const {
    return arena_ + model_->tensors[tensor].arena_offset;
  }
  const std::vector<PlacementRec>& placements() const { return placements_; }
  Status run();

 private:
  Session() = default;

  struct BackendSlot {
    const kite_backend_api* api = nullptr;
    void* instance = nullptr;
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
  // One entry of a graph's schedule: a kernel, or an If handled here.
  struct Step {
    PreparedNode* kernel = nullptr;
    const NodeRec* if_node = nullptr;
    int then_graph = -1;
    int else_graph = -1;
  };

  Status schedule_graph(int graph_index, bool record_placement);
  Status place_node(const NodeRec& node, int graph_index, std::vector<Step>* steps,
                    bool record_placement);
  Status prepare_on(const NodeRec& node, int backend, std::vector<Step>* steps);
  Status run_graph(int graph_index);

  std::shared_ptr<const Model> model_;
  std::vector<BackendSlot> backends_;
  uint8_t* arena_ = nullptr;
  std::vector<kite_backend_tensor> tensors_;
  std::deque<PreparedNode> prepared_;
  std::vector<std::vector<Step>> steps_;  // per graph
  std::vector<PlacementRec> placements_;  // per node of the main graph
  char error_[512] = {0};
};

}  // namespace kite::rt
