// CPU backend kernel interface. Each op has one entry in the explicit table of
// kernel_table.cpp (no self-registration). A kernel's prepare step validates
// the node completely (dtypes, shapes via kite::ops, attributes), captures the
// tensor pointers (stable for the session) and precomputes what it can; its
// run step only computes: no allocation, no validation, no logging.
//
// One home for every rule: prepare runs only after the backend (cpu_prepare,
// or fused::SubNode::prepare for a fused kernel's parts) has checked the
// declared outputs with kite::ops::check_declared_outputs, so a kernel takes
// the output shapes as the op rule's and does not re-derive them. The
// numbers it iterates with (slice starts/steps, pads, perm, axes, ...) come
// from the same kite/ops/resolve.h functions the rules use; a value input
// computed at run is resolved at run with them and checked against the
// declared output (that check is the kernel's run_error).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kite/backend.h"
#include "kite/ops/fused.h"
#include "kite/ops/op_node.h"
#include "kernels/sgemm.h"
#include "thread_pool.h"

namespace kite::cpu {

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(ThreadPool& pool) = 0;
  // After run: null when it succeeded, else why an input value that prepare
  // could not check (a non-constant shape input, a Gather index) is invalid.
  // The message lives in the kernel (formatted without allocating).
  virtual const char* run_error() const { return nullptr; }
  // A fused kernel offers its activation to the kernel it wraps, after
  // prepare: true when run will apply it itself (in its own store, e.g.
  // the GEMM's epilogue), so the wrapper must not apply it again.
  virtual bool take_activation(const kite::ops::FusedActivation& /*act*/) { return false; }
  // A fused kernel offers a hook for each finished block of the output
  // (rows x cols floats at c, ld apart, c inside the output: a hook may
  // find other tensors' values by the block's place), to run while the
  // block is in cache instead of in a pass over the whole output
  // afterwards (MatMul's bias and activation, Conv's residual): true when
  // run will call it on every output value exactly once
  // (sgemm::Epilogue::tile's contract).
  virtual bool take_tile_hook(sgemm::TileHook /*hook*/, const void* /*ctx*/) { return false; }
};

// Scratch memory shared by the kernels of one backend instance. Kernels run
// one at a time, so each reserves at prepare the most it needs and asks for
// the pointer at run (a later node's prepare may have moved it). One shared
// buffer instead of one per kernel keeps e.g. im2col scratch at the largest
// Conv's size instead of the sum over all Convs.
//
// A backend instance's workspace is external: reserve only records the need,
// which the backend declares through the ABI's workspace_size, and the host
// (the runtime, counting it against the session's memory limit) allocates it
// and hands it over at bind. A kernel built outside a backend instance keeps
// its own (external = false): reserve allocates.
class Workspace {
 public:
  explicit Workspace(bool external = false) : external_(external) {}
  void reserve(size_t floats) {
    if (floats > need_) need_ = floats;
    if (!external_ && floats > buffer_.size()) buffer_.resize(floats);
  }
  // External workspaces: the memory the host allocated (floats >= need()).
  void bind(float* data, size_t floats) {
    bound_ = data;
    bound_floats_ = floats;
  }
  size_t need() const { return need_; }
  bool ready() const { return !external_ || bound_floats_ >= need_; }
  float* data() { return external_ ? bound_ : buffer_.data(); }
  size_t size() const { return external_ ? bound_floats_ : buffer_.size(); }

 private:
  bool external_;
  size_t need_ = 0;
  std::vector<float> buffer_;
  float* bound_ = nullptr;
  size_t bound_floats_ = 0;
};

// The pre-packed forms of a node's constants that the model file carries
// (format 1.1; kernels/weight_pack.h). The backend implements it over the
// ABI's kite_backend_tensor2::packed; the tensor is one of the node's (or a
// fused kernel's sub-node's, which shares them).
class PackedForms {
 public:
  virtual ~PackedForms() = default;
  // Tensor t's form under key, or null; *bytes gets its size.
  virtual const void* find(const kite_backend_tensor* t, const std::string& key,
                           uint64_t* bytes) const = 0;
};

// How a node's packed weights were obtained (weight_pack::acquire counts).
struct PackStats {
  int from_file = 0;    // used in place from the file's mapping
  int at_prepare = 0;   // packed into memory of the kernel's own
  bool malformed = false;  // a form of the wrong size: the file is invalid
};

// What prepare gets: the ABI node (data pointers, valid until release) and
// the same node as a kite::ops::OpNode (names, shapes, attributes).
struct KernelArgs {
  const kite_backend_node* node;
  const kite::ops::OpNode* op;
  int threads = 1;  // size of the pool that run will get (for per-thread scratch)
  // Whether Conv may run as Winograd F(4x4, 3x3) (the option winograd=0|1).
  bool winograd = true;
  // The backend's shared scratch; null when a kernel is built outside a
  // backend instance (inside a fused kernel): it then keeps its own.
  Workspace* workspace = nullptr;
  // The file's packed weight forms (null: none, e.g. a kernel built in a
  // test) and where to count how weights were packed (may be null).
  const PackedForms* packed = nullptr;
  PackStats* pack_stats = nullptr;

  void* input_data(int i) const { return node->inputs[i] ? node->inputs[i]->data : nullptr; }
  void* output_data(int i) const { return node->outputs[i]->data; }
};

// Returns "" when the kernel runs this node, else a short reason
// ("dtype int64 not supported"). Must not read tensor data.
using CheckFn = std::string (*)(const kite::ops::OpNode& op);
// Builds the kernel, or returns null with a message naming node and tensor.
using PrepareFn = std::unique_ptr<Kernel> (*)(const KernelArgs& args, std::string* err);

struct KernelEntry {
  const char* op;
  CheckFn check;
  PrepareFn prepare;
};

// The explicit table of the CPU backend's kernels, keyed by op type.
const std::vector<KernelEntry>& kernel_table();
// Fused ops (domain "kite", with a fused_pattern) have their own table;
// FusedKernelEntry is in kernels/fused_kernels.h.
struct FusedKernelEntry;
const std::vector<FusedKernelEntry>& fused_kernel_table();
const FusedKernelEntry* find_fused_kernel(const std::string& op);

// "" when both tables are well formed, else what is wrong (an op listed
// twice). The backend checks it once, when an instance is created.
std::string validate_kernel_table();
const KernelEntry* find_kernel(const std::string& op);

}  // namespace kite::cpu
