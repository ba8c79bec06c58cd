// One CUDA backend instance (the ABI's create2 .. destroy: one per session)
// on a shared Device: its stream (its own, or the application's through
// create_info.external_queue), kernels, buffers, pinned staging memory,
// CUDA graphs of its segments and profiling events.
//
// Everything is queued on the stream: execute and execute_segment launch
// and return; upload copies through pinned staging with an async copy;
// download and synchronize wait for the stream. A segment is captured once
// into a CUDA graph (prepare_segment) and replayed with one cuGraphLaunch.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device.h"
#include "kernel.h"

// The ABI's opaque buffer handle.
struct kite_backend_buffer_s {
  enum class Kind { kDevice, kMappedHost, kRegistered, kExternal };
  Kind kind = Kind::kDevice;
  CUdeviceptr ptr = 0;
  void* host = nullptr;              // kMappedHost, kRegistered: the host address
  uint64_t size = 0;
  kite_buffer_usage usage = KITE_BUFFER_ARENA;
};

namespace kite::cuda {

struct Segment {
  std::vector<Kernel*> kernels;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
};

struct Options {
  int unified = -1;                  // -1: the device's default (integrated GPUs)
  bool lean = false;                 // no cuDNN
  std::string conv = "auto";         // auto | cudnn | own
  std::string gemm = "auto";         // auto | cublaslt | own
  bool graphs = true;                // capture segments into CUDA graphs
  std::string memory_report;         // JSON file written at bind
};

class Backend {
 public:
  Backend(Device* device, const kite_backend_create_info* info);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  kite_status init(const kite_backend_create_info* info, std::string* err);
  Device& device() { return *device_; }
  const Driver& drv() const { return drv_; }

  // Nodes.
  std::string plan(const kite_backend_node2& node, Kernel* out, std::string* label, bool preparing);
  kite_status prepare(const kite_backend_node2& node, Kernel** out, std::string* err);
  void release(Kernel* kernel);
  uint64_t workspace_bytes() const;
  kite_status bind(const kite_backend_bindings& bindings, std::string* err);

  // Buffers and copies.
  kite_status buffer_alloc(uint64_t size, kite_buffer_usage usage, Buffer** out, std::string* err);
  void buffer_free(Buffer* buffer);
  kite_status buffer_map(Buffer* buffer, void** out, std::string* err);
  kite_status import_host(const void* host, uint64_t size, Buffer** out, std::string* err);
  kite_status import_external(uint64_t handle, uint64_t size, Buffer** out, std::string* err);
  kite_status upload(const kite_backend_tensor2& dst, const void* src, std::string* err);
  kite_status download(void* dst, const kite_backend_tensor2& src, std::string* err);
  kite_status copy_buffer(Buffer* src, uint64_t src_offset, Buffer* dst, uint64_t dst_offset, uint64_t size,
                          std::string* err);

  // Running.
  kite_status execute(Kernel* kernel, std::string* err);
  kite_status prepare_segment(const kite_backend_segment& segment, Segment** out, std::string* err);
  kite_status execute_segment(Segment* segment, std::string* err);
  void release_segment(Segment* segment);
  kite_status begin_run(std::string* err);
  kite_status synchronize(std::string* err);
  kite_status kernel_time(Kernel* kernel, uint64_t* out_ns);

  // For library calls and tests.
  CUdeviceptr address(const Operand& o) const;
  CUdeviceptr scratch() const { return workspace_ ? workspace_->ptr + scratch_offset_ : 0; }
  kite_status cuda_fail(CUresult r, const std::string& call, std::string* err);
  kite_status check_health(std::string* err);
  bool unified() const { return unified_; }
  bool allow_tf32() const { return allow_tf32_; }
  const Options& options() const { return options_; }
  // Temporary device memory for an algorithm search at prepare (freed by
  // the caller with cuMemFree); 0 when it cannot be had.
  CUdeviceptr temp_alloc(uint64_t bytes);
  // Times `steps` (own kernels; operands resolved now) over a few launches
  // on the stream: milliseconds per launch, or a negative value when they
  // could not be timed. For choosing between implementations at prepare.
  float measure(std::vector<Step> steps, const std::function<bool()>& extra = nullptr);
  CUstream stream() const { return stream_; }
  void log(int level, const std::string& message) const;

 private:
  kite_status run_steps(Kernel* kernel, std::string* err);
  kite_status stage(uint64_t bytes, uint8_t** host, std::string* err);
  kite_status check_status_words(std::string* err);
  void write_memory_report();

  Device* device_;
  const Driver& drv_;
  Options options_;
  bool unified_ = false;
  bool allow_tf32_ = false;
  bool profile_ = false;
  bool use_cudnn_ = false, use_cublaslt_ = false;
  kite_log_fn log_ = nullptr;
  void* log_user_ = nullptr;
  std::string fatal_;                // set once the device is lost

  CUstream stream_ = nullptr;
  bool own_stream_ = true;

  std::vector<Kernel*> kernels_;
  std::vector<Segment*> segments_;
  uint64_t tables_bytes_ = 0;        // after the status words
  uint64_t scratch_bytes_ = 0;       // largest library workspace
  uint64_t scratch_offset_ = 0;
  bool uses_status_ = false;
  bool bound_ = false;
  Buffer* workspace_ = nullptr;

  // Pinned staging for copies between the host and device memory.
  uint8_t* staging_ = nullptr;
  uint64_t staging_size_ = 0;
  uint64_t staging_used_ = 0;

  // What this instance allocated, for the memory report.
  uint64_t arena_bytes_ = 0, weights_bytes_ = 0, workspace_alloc_bytes_ = 0, imported_bytes_ = 0;
};

}  // namespace kite::cuda
