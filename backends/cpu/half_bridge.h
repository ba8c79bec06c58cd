// fp16 storage, fp32 arithmetic: how the CPU backend runs a float16 node
// whose kernel computes in float32 only (issue 18: "the CPU backend runs an
// fp16 file correctly, converting at the boundary").
//
// A file converted with kite-convert --precision fp16|mixed holds float16
// weights and float16 activations between the nodes chosen for fp16. The
// CPU kernels (except data movement and Cast) take float32, so such a node
// runs on a float32 view of itself: every float16 tensor is replaced by a
// float32 buffer of the same shape. Constant inputs (weights) are converted
// once, at prepare, before the kernel packs them; activation inputs are
// converted before each run and float16 outputs rounded back (ties to even,
// kite/ops/half.h) after it. The result is what an fp16-storage device
// computes with fp32 arithmetic: the rounding happens only at the node's
// boundary.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel.h"
#include "kite/backend.h"

namespace kite::cpu {

// The float32 view of a node with float16 tensors, and the buffers that back
// it. Its addresses are stable: build it once, behind a unique_ptr.
class HalfBridge {
 public:
  // True if any present input or output of node is float16.
  static bool needed(const kite_backend_node& node);
  // Builds the view. with_data: allocate the float32 buffers and convert the
  // constant inputs (prepare); without: shapes and dtypes only (supports).
  explicit HalfBridge(const kite_backend_node& node, bool with_data);
  HalfBridge(const HalfBridge&) = delete;
  HalfBridge& operator=(const HalfBridge&) = delete;

  const kite_backend_node& node() const { return node_; }
  // Activation inputs float16 -> float32 (before the kernel runs).
  void widen_inputs(ThreadPool& pool);
  // float32 results -> float16 outputs (after it ran).
  void narrow_outputs(ThreadPool& pool);

 private:
  struct Converted {
    const kite_backend_tensor* half = nullptr;  // the node's float16 tensor
    std::vector<float> wide;                    // its float32 copy
    bool constant = false;
  };
  kite_backend_node node_{};
  std::vector<kite_backend_tensor> tensors_;  // inputs then outputs; sized once
  std::vector<const kite_backend_tensor*> inputs_, outputs_;
  std::vector<std::unique_ptr<Converted>> in_, out_;
};

// Wraps the kernel prepared on bridge->node().
std::unique_ptr<Kernel> bridge_kernel(std::unique_ptr<HalfBridge> bridge,
                                      std::unique_ptr<Kernel> inner);

}  // namespace kite::cpu
