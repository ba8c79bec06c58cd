// What a prepared CUDA node is: a list of steps (kernel launches with their
// parameter structs, device-to-device copies, cuDNN and cuBLASLt calls),
// planned at supports2/prepare2 from the node alone and resolved against
// the final buffers at bind (device addresses written into the parameter
// structs). execute runs the steps on the instance's stream; a segment
// captures them once into a CUDA graph.
//
// Planning is one function per op family (plan_*.cpp), listed in the
// explicit table of kernel_table.cpp. A plan function validates the node
// (the shared kite::ops rules and its own limits) and either fills the
// kernel or returns why it declines; supports2 and prepare2 both call it.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstring>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../kernels/params.h"
#include "device.h"
#include "kernel_ids.h"
#include "kite/abi/device_node.h"
#include "kite/abi/kernel_table.h"
#include "kite/backend.h"
#include "kite/ops/op_node.h"

struct kite_backend_buffer_s;

namespace kite::cuda {

using Buffer = kite_backend_buffer_s;

// Where a parameter's device address comes from: a tensor (plus a byte
// offset into it), or the instance's workspace (plus an offset).
struct Operand {
  const kite_backend_tensor2* tensor = nullptr;
  uint64_t extra = 0;
  bool workspace = false;
  int table = -1;  // planned as an offset into the kernel's table `table`; made a workspace offset at prepare
};

struct Fixup {
  uint32_t at = 0;  // byte offset of a pointer field in the parameter struct
  Operand operand;
};

class Backend;

// A library call (cuDNN convolution, cuBLASLt matmul): set up at prepare
// (descriptors, algorithm, workspace size), resolved at bind, run per run.
class LibraryCall {
 public:
  virtual ~LibraryCall() = default;
  virtual uint64_t workspace_bytes() const = 0;
  // Device addresses are final (workspace: its base).
  virtual kite_status resolve(Backend& backend, std::string* err) = 0;
  virtual kite_status run(Backend& backend, CUstream stream, std::string* err) = 0;
  virtual const char* what() const = 0;  // "cuDNN convolution"
};

struct Step {
  enum class Kind { kLaunch, kCopy, kLibrary };
  Kind kind = Kind::kLaunch;
  // kLaunch
  KernelId fn = KernelId::kite_unary;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  std::vector<uint8_t> params;     // the parameter struct, pointers filled at bind
  std::vector<Fixup> fixups;
  // kCopy: bytes from src to dst; dropped at bind when both are the same
  // bytes (a Reshape in place, a Concat input written into its slice).
  Operand src, dst;
  uint64_t bytes = 0;
  bool elided = false;
  CUdeviceptr src_ptr = 0, dst_ptr = 0;
  // kLibrary
  std::shared_ptr<LibraryCall> call;
};

// Constant data a kernel reads (Resize's tap tables), placed in the
// workspace and written once at bind.
struct Table {
  std::vector<uint8_t> bytes;
  uint64_t offset = 0;  // in the workspace
};

struct Kernel {
  std::string label;                // "Conv 'layer1.0.conv1'"
  std::string op;
  std::string how;                  // "cuDNN conv + bias/ReLU", "own implicit GEMM", ...
  int32_t node_index = -1;
  std::vector<Step> steps;
  std::vector<Table> tables;
  bool uses_status = false;         // may report a bad run-time value
  CUevent start = nullptr, stop = nullptr;  // profiling
  bool timed = false;
};

// The node as the plan functions see it (shared by the device backends).
using abi::NodeView;

// What plan functions may use: the device's properties, which libraries
// this instance uses, and (at prepare only) the device to set up library
// calls on.
struct PlanContext {
  const DeviceProps& props;
  bool use_cudnn = false;           // cuDNN loaded and allowed (not lean, conv=auto|cudnn)
  bool use_cublaslt = false;        // cuBLASLt loaded and allowed (gemm=auto|cublaslt)
  bool force_own_conv = false;      // conv=own
  bool allow_tf32 = false;
  Backend* backend = nullptr;       // set at prepare2 (library setup); null in supports2
};

using PlanFn = std::string (*)(const NodeView& node, const PlanContext& ctx, Kernel* out);

using Kernels = abi::DeviceKernels<PlanFn>;
using KernelEntry = Kernels::Entry;
// The explicit tables of kernel_table.cpp.
const Kernels& kernels();

// ---- building steps -------------------------------------------------------

inline Operand tensor_operand(const kite_backend_tensor2* t, uint64_t extra = 0) {
  Operand o;
  o.tensor = t;
  o.extra = extra;
  return o;
}
inline Operand workspace_operand(uint64_t offset) {
  Operand o;
  o.workspace = true;
  o.extra = offset;
  return o;
}
// Bytes `offset` into the kernel's table `index` (Kernel::tables).
inline Operand table_operand(int index, uint64_t offset) {
  Operand o;
  o.table = index;
  o.extra = offset;
  return o;
}

struct Bind {
  size_t at;
  Operand operand;
};

// Appends a launch of `fn` with parameters `p` (pointer fields filled at
// bind from `binds`).
template <typename P>
Step& add_launch(Kernel* k, KernelId fn, const P& p, std::initializer_list<Bind> binds,
                 uint64_t grid_x, uint32_t grid_y, uint32_t grid_z, uint32_t block) {
  Step s;
  s.kind = Step::Kind::kLaunch;
  s.fn = fn;
  s.grid[0] = static_cast<uint32_t>(grid_x);
  s.grid[1] = grid_y;
  s.grid[2] = grid_z;
  s.block[0] = block;
  s.params.resize(sizeof(P));
  std::memcpy(s.params.data(), &p, sizeof(P));
  for (const Bind& b : binds) s.fixups.push_back(Fixup{static_cast<uint32_t>(b.at), b.operand});
  k->steps.push_back(std::move(s));
  return k->steps.back();
}

// Blocks of 256 threads for n elements in a grid-stride loop (at most 2^20
// blocks; the loop covers the rest).
inline uint64_t blocks_for(int64_t n, uint32_t block = kite_cuda::kBlock) {
  if (n <= 0) return 1;
  const uint64_t b = (static_cast<uint64_t>(n) + block - 1) / block;
  return b > (1u << 20) ? (1u << 20) : b;
}

}  // namespace kite::cuda
