// One Vulkan backend instance (the ABI's create2 .. destroy: one per
// session) on a shared Device: its kernels, buffers, command buffers,
// descriptor sets, staging memory, timestamp queries and the status buffer
// through which kernels report bad values (a Gather index out of range).
//
// Work is recorded, not run, when the runtime calls execute/upload: it goes
// into a pending command buffer that is submitted at the next
// execute_segment, end_run, download or synchronize. A segment is recorded
// once (prepare_segment) and replayed with one submit per run. Barriers are
// placed only where a dispatch reads or writes bytes that an earlier
// dispatch of the same command buffer wrote (or writes bytes an earlier one
// read); every command buffer starts and ends with one global barrier.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel.h"
#include "vk_device.h"

// The ABI's opaque buffer handle.
struct kite_backend_buffer_s {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t size = 0;
  void* mapped = nullptr;          // host address when host-visible (unified, staging)
  kite_buffer_usage usage = KITE_BUFFER_ARENA;
};

namespace kite::vk {

struct Segment;

class Backend {
 public:
  Backend(Device* device, const kite_backend_create_info* info);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Reads the backend options (unified=0|1, validation_selftest=1,
  // simulate_device_lost=1) and creates the instance's own objects.
  kite_status init(const kite_backend_create_info* info, std::string* err);
  Device& device() { return *device_; }

  // Nodes.
  std::string plan(const kite_backend_node2& node, Kernel* out, std::string* label);
  kite_status prepare(const kite_backend_node2& node, Kernel** out, std::string* err);
  void release(Kernel* kernel);
  uint64_t workspace_bytes() const { return workspace_bytes_; }
  kite_status bind(const kite_backend_bindings& bindings, std::string* err);

  // Buffers and copies.
  kite_status buffer_alloc(uint64_t size, kite_buffer_usage usage, Buffer** out, std::string* err);
  void buffer_free(Buffer* buffer);
  kite_status buffer_map(Buffer* buffer, void** out, std::string* err);
  kite_status upload(const kite_backend_tensor2& dst, const void* src, std::string* err);
  kite_status download(void* dst, const kite_backend_tensor2& src, std::string* err);
  kite_status copy_buffer(Buffer* src, uint64_t src_offset, Buffer* dst, uint64_t dst_offset,
                          uint64_t size, std::string* err);

  // Running.
  kite_status execute(Kernel* kernel, std::string* err);
  kite_status prepare_segment(const kite_backend_segment& segment, Segment** out, std::string* err);
  kite_status execute_segment(Segment* segment, std::string* err);
  void release_segment(Segment* segment);
  kite_status end_run(std::string* err);
  kite_status synchronize(std::string* err);
  kite_status kernel_time(Kernel* kernel, uint64_t* out_ns);

  bool unified() const { return unified_; }

 private:
  struct Range {
    const Buffer* buffer;
    uint64_t begin, end;
  };
  // Reads and writes recorded since the last barrier of a command buffer.
  struct Hazards {
    std::vector<Range> reads, writes;
    void clear() {
      reads.clear();
      writes.clear();
    }
  };
  struct Submission {
    VkCommandBuffer cb = VK_NULL_HANDLE;  // pending-type buffer to recycle, or null
    VkFence fence = VK_NULL_HANDLE;
    Segment* segment = nullptr;
  };

  kite_status check_health(std::string* err);
  kite_status vk_fail(VkResult r, const std::string& what, std::string* err);
  kite_status begin_pending(std::string* err);
  kite_status flush(bool wait, std::string* err);
  kite_status submit(VkCommandBuffer extra, Segment* segment, std::string* err);
  kite_status wait_all(std::string* err);
  kite_status check_status_buffer(std::string* err);
  kite_status acquire_fence(VkFence* out, std::string* err);
  kite_status ensure_staging(uint64_t bytes, std::string* err);
  kite_status create_buffer(uint64_t size, VkBufferUsageFlags usage, bool host_visible,
                            bool prefer_device_local, Buffer** out, std::string* err);

  void global_barrier(VkCommandBuffer cb);
  // Barrier if (reads, writes) conflict with what the buffer recorded since
  // its last barrier; then notes them.
  void hazard(VkCommandBuffer cb, Hazards* h, const std::vector<Range>& reads,
              const std::vector<Range>& writes);
  void record_kernel(VkCommandBuffer cb, Hazards* h, Kernel* kernel, bool reset_queries);

  Device* device_;
  const Functions& fn_;
  bool profile_ = false;
  bool unified_ = false;              // device unified and not turned off by unified=0
  bool selftest_misuse_ = false;      // validation_selftest=1
  bool simulate_lost_ = false;        // simulate_device_lost=1
  bool skip_barriers_ = false;        // debug_skip_barriers=1 (tests only)
  bool lanes_ = false;                // kernels=lanes (default on CPU-type devices)
  uint64_t validation_baseline_ = 0;
  std::string fatal_;                 // set once the device is lost

  std::vector<Kernel*> kernels_;
  uint64_t workspace_bytes_ = 0;
  uint32_t queries_ = 0;
  bool bound_ = false;
  Buffer* workspace_ = nullptr;

  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptors_ = VK_NULL_HANDLE;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> free_cbs_;
  std::vector<VkFence> free_fences_;
  std::vector<Submission> in_flight_;
  VkCommandBuffer pending_ = VK_NULL_HANDLE;
  Hazards pending_hazards_;

  Buffer* staging_ = nullptr;          // host-visible, for unified=0 copies
  uint64_t staging_used_ = 0;
  Buffer* status_ = nullptr;           // host-visible: kernels' run-time errors
  std::vector<Segment*> segments_;
};

}  // namespace kite::vk
