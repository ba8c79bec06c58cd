// What a prepared Vulkan node is: a list of dispatches (shader, operands,
// push-constant parameters, workgroup counts), planned at prepare2 without
// touching the device, resolved against the final buffers at bind
// (descriptor sets, element offsets) and recorded into command buffers.
//
// Kernels are planned by one function per op family (kernels/*.cpp), listed
// in the explicit table of kernel_table.cpp. A plan function validates the
// node fully (the kite::ops rules and its own limits) and either fills the
// kernel or returns why it declines: supports2 and prepare2 both call it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kite/abi/device_node.h"
#include "kite/abi/kernel_table.h"
#include "kite/backend.h"
#include "kite/ops/op_node.h"
#include "shaders.h"
#include "vk_device.h"

struct kite_backend_buffer_s;

namespace kite::vk {

using Buffer = kite_backend_buffer_s;

enum class Access { kRead, kWrite, kReadWrite, kUnused };

// One binding of a dispatch.
struct Operand {
  enum class Kind { kTensor, kTable, kStatus };
  Kind kind = Kind::kTensor;
  const kite_backend_tensor2* tensor = nullptr;  // kTensor
  Access access = Access::kRead;
  // Added to the tensor's offset (a slice's start), in units of its storage
  // (32-bit words; 16-bit units for float16: plan_util.h's unit_bytes).
  uint32_t extra_words = 0;
  // Bytes from the start (offset + extra) the dispatch writes or reads, when
  // it touches only part of the tensor (a Concat part); 0: to the tensor's end.
  uint64_t span_bytes = 0;
  // Resolved at bind: the bytes the dispatch may touch (for barriers).
  Buffer* buffer = nullptr;
  uint64_t begin = 0, end = 0;
};

struct Dispatch {
  ShaderId shader = kShaderCount;
  std::vector<Operand> operands;        // in binding order
  std::vector<uint32_t> params;         // push constants after the offsets
  uint32_t groups[3] = {1, 1, 1};
  // A copy (operand 0 -> operand 1) that is dropped at bind when both are the
  // same bytes: a Reshape planned in place, a Concat input the planner wrote
  // straight into its slice of the output.
  bool elide_if_aliased = false;
  // Resolved at bind.
  bool elided = false;
  VkDescriptorSet set = VK_NULL_HANDLE;
  std::array<uint32_t, kPushConstantBytes / 4> push{};
};

struct Kernel {
  std::string label;                    // "Conv 'layer1.0.conv1'"
  std::string op;
  int32_t node_index = -1;
  std::vector<Dispatch> dispatches;     // may be empty (a Reshape in place)
  // Constant words the kernel's shaders read (Resize's tap tables), written
  // once into this kernel's part of the workspace at bind.
  std::vector<uint32_t> table;
  uint64_t table_offset = 0;
  bool uses_status = false;             // may report a bad index at run time
  // Profiling: timestamps `query` (before) and `query + 1` (after).
  uint32_t query = UINT32_MAX;
};

// The node as the plan functions see it (shared by the device backends).
using abi::NodeView;

// What plan functions may ask of the device (no device calls).
struct PlanContext {
  const Limits& limits;
  const PhysicalDevice& physical;
  uint32_t status_words = 4;            // size of the status buffer's record
  // GEMM and convolution without shared memory: for devices that run
  // invocations as SIMD lanes of a CPU (lavapipe), where register tiles
  // in shared memory become gathers. Default: the device is of CPU type;
  // the backend option kernels=tiled|lanes forces one.
  bool lanes = false;
};

using PlanFn = std::string (*)(const NodeView& node, const PlanContext& ctx, Kernel* out);

using Kernels = abi::DeviceKernels<PlanFn>;
using KernelEntry = Kernels::Entry;
// The explicit tables of kernel_table.cpp.
const Kernels& kernels();

}  // namespace kite::vk
