#include "backend.h"

#include <algorithm>
#include <cstring>

#include "kite/abi/plugin.h"

namespace kite::cuda {

namespace {

constexpr uint64_t kStatusBytes = 256;  // the status words, at the workspace's start
constexpr uint64_t kAlign = 256;

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string tensor_name(const kite_backend_tensor2* t) { return t && t->name ? t->name : ""; }

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

Backend::Backend(Device* device, const kite_backend_create_info* info)
    : device_(device), drv_(device->drv()) {
  if (info) {
    log_ = info->log;
    log_user_ = info->log_user;
    profile_ = info->profile != 0;
    allow_tf32_ = (info->precision & KITE_PRECISION_TF32) != 0;
  }
}

void Backend::log(int level, const std::string& message) const {
  if (log_) log_(log_user_, level, KITE_CUDA_BACKEND_NAME, message.c_str());
}

kite_status Backend::init(const kite_backend_create_info* info, std::string* err) {
  std::vector<abi::BackendOption> options;
  *err = abi::backend_options(info, &options);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  for (const abi::BackendOption& option : options) {
    const std::string& key = option.key;
    const std::string& value = option.value;
    auto flag = [&](bool* out) {
      *err = abi::parse_flag_option("CUDA", key, value, out);
      return err->empty();
    };
    bool b = false;
    if (key == "unified") {
      if (!flag(&b)) return KITE_ERROR_INVALID_ARGUMENT;
      options_.unified = b ? 1 : 0;
    } else if (key == "lean") {
      if (!flag(&options_.lean)) return KITE_ERROR_INVALID_ARGUMENT;
    } else if (key == "graphs") {
      if (!flag(&options_.graphs)) return KITE_ERROR_INVALID_ARGUMENT;
    } else if (key == "conv") {
      if (value != "auto" && value != "cudnn" && value != "own") {
        *err = "CUDA backend option conv=" + value + ": expected auto, cudnn or own";
        return KITE_ERROR_INVALID_ARGUMENT;
      }
      options_.conv = value;
    } else if (key == "gemm") {
      if (value != "auto" && value != "cublaslt" && value != "own") {
        *err = "CUDA backend option gemm=" + value + ": expected auto, cublaslt or own";
        return KITE_ERROR_INVALID_ARGUMENT;
      }
      options_.gemm = value;
    } else if (key == "memory_report") {
      options_.memory_report = value;
    } else {
      *err = "unknown CUDA backend option '" + key +
             "' (known: unified, lean, conv, gemm, graphs, memory_report)";
      return KITE_ERROR_INVALID_ARGUMENT;
    }
  }
  if (options_.lean && options_.conv == "cudnn") {
    *err = "CUDA backend options lean=1 and conv=cudnn contradict each other (lean mode loads no cuDNN)";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  const DeviceProps& props = device_->props();
  unified_ = options_.unified < 0 ? (props.integrated && props.can_map_host) : options_.unified == 1;
  if (unified_ && !props.can_map_host) {
    *err = "CUDA backend option unified=1: device '" + props.name + "' cannot map host memory";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ContextScope scope(*device_);
  if (!scope.ok()) {
    *err = "cuCtxPushCurrent_v2 failed: the CUDA context of '" + props.name + "' is not usable";
    return KITE_ERROR_BACKEND;
  }
  if (info && info->external_queue) {
    stream_ = static_cast<CUstream>(info->external_queue);
    own_stream_ = false;
  } else {
    const CUresult r = drv_.StreamCreate(&stream_, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
      stream_ = nullptr;
      return cuda_fail(r, "cuStreamCreate", err);
    }
  }
  // Libraries: cuDNN unless lean or conv=own, cuBLASLt unless gemm=own. A
  // library that cannot be had leaves its nodes to Kite's own kernels
  // (said in the log), unless the option asked for it by name.
  if (!options_.lean && options_.conv != "own") {
    std::string why;
    use_cudnn_ = device_->cudnn(nullptr, &why) != nullptr;
    if (!use_cudnn_) {
      if (options_.conv == "cudnn") {
        *err = "CUDA backend option conv=cudnn: " + why;
        return KITE_ERROR_BACKEND;
      }
      log(KITE_LOG_WARNING, "no cuDNN (" + why + "); convolutions run on Kite's own kernels");
    }
  }
  if (options_.gemm != "own") {
    std::string why;
    use_cublaslt_ = device_->cublaslt(nullptr, &why) != nullptr;
    if (!use_cublaslt_) {
      if (options_.gemm == "cublaslt") {
        *err = "CUDA backend option gemm=cublaslt: " + why;
        return KITE_ERROR_BACKEND;
      }
      log(KITE_LOG_WARNING, "no cuBLASLt (" + why + "); matrix products run on Kite's own kernels");
    }
  }
  log(KITE_LOG_INFO, std::string("instance on '") + props.name + "': " +
                         (unified_ ? "unified memory (mapped pinned arena, no copies)" : "device memory, pinned staging copies") +
                         (use_cudnn_ ? ", cuDNN" : "") + (use_cublaslt_ ? ", cuBLASLt" : "") +
                         (options_.lean ? ", lean" : "") + (own_stream_ ? "" : ", application stream"));
  return KITE_OK;
}

Backend::~Backend() {
  ContextScope scope(*device_);
  if (stream_ && fatal_.empty() && !device_->lost()) drv_.StreamSynchronize(stream_);
  for (Segment* s : segments_) release_segment(s);
  for (Kernel* k : kernels_) {
    if (k->start) drv_.EventDestroy(k->start);
    if (k->stop) drv_.EventDestroy(k->stop);
    delete k;
  }
  if (staging_) drv_.MemFreeHost(staging_);
  if (stream_ && own_stream_) drv_.StreamDestroy(stream_);
}

kite_status Backend::cuda_fail(CUresult r, const std::string& call, std::string* err) {
  if (is_sticky(r) || device_->lost()) {
    device_->mark_lost();
    if (fatal_.empty()) {
      fatal_ = drv_.describe(r, call) + "; the CUDA context of '" + device_->props().name +
               "' is unusable from now on (a sticky error): the session cannot continue";
    }
    *err = fatal_;
    return KITE_ERROR_DEVICE_LOST;
  }
  *err = drv_.describe(r, call);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    *err += " on '" + device_->props().name + "'";
    return KITE_ERROR_OUT_OF_MEMORY;
  }
  return KITE_ERROR_BACKEND;
}

kite_status Backend::check_health(std::string* err) {
  if (!fatal_.empty()) {
    *err = fatal_;
    return KITE_ERROR_DEVICE_LOST;
  }
  if (device_->lost()) {
    fatal_ = "the CUDA context of '" + device_->props().name +
             "' met a sticky error in another session; this session cannot continue";
    *err = fatal_;
    return KITE_ERROR_DEVICE_LOST;
  }
  return KITE_OK;
}

// ---------------------------------------------------------------- nodes --

std::string Backend::plan(const kite_backend_node2& node, Kernel* out, std::string* label, bool preparing) {
  NodeView view;
  const KernelEntry* entry = nullptr;
  const std::string why = kernels().select(node, &view, label, &entry);
  if (!why.empty()) return why;
  // The kernels index with 32-bit integers.
  for (int32_t i = 0; i < node.num_inputs + node.num_outputs; ++i) {
    const kite_backend_tensor2* t = i < node.num_inputs ? node.inputs[i] : node.outputs[i - node.num_inputs];
    if (!t) continue;
    int64_t count = 1;
    for (int32_t d = 0; d < t->rank; ++d) count *= t->shape[d];
    if (count >= (int64_t{1} << 31) || t->byte_size >= (uint64_t{1} << 34)) {
      return "tensor '" + tensor_name(t) + "' has " + std::to_string(count) +
             " elements; the CUDA kernels index up to 2^31";
    }
  }
  PlanContext ctx{device_->props()};
  ctx.use_cudnn = use_cudnn_ && options_.conv != "own";
  ctx.use_cublaslt = use_cublaslt_ && options_.gemm != "own";
  ctx.force_own_conv = options_.conv == "own" || options_.lean;
  ctx.allow_tf32 = allow_tf32_;
  ctx.backend = preparing ? this : nullptr;
  out->label = *label;
  out->op = view.op.op;
  out->node_index = node.index;
  return entry->plan(view, ctx, out);
}

kite_status Backend::prepare(const kite_backend_node2& node, Kernel** out, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  ContextScope scope(*device_);
  auto kernel = std::make_unique<Kernel>();
  std::string label;
  const std::string why = plan(node, kernel.get(), &label, true);
  if (!why.empty()) {
    *err = (label.empty() ? std::string("node") : label) + ": " + why;
    // A library call that failed for a reason other than the node (out of
    // memory in an algorithm search) says so in its message.
    return device_->lost() ? KITE_ERROR_DEVICE_LOST : KITE_ERROR_UNSUPPORTED;
  }
  for (Table& t : kernel->tables) {
    t.offset = kStatusBytes + tables_bytes_;
    tables_bytes_ += round_up(t.bytes.size(), kAlign);
  }
  for (Step& st : kernel->steps) {
    for (Fixup& f : st.fixups) {
      if (f.operand.table < 0) continue;
      if (static_cast<size_t>(f.operand.table) >= kernel->tables.size()) {
        *err = label + ": internal error: a launch refers to a table the kernel lacks";
        return KITE_ERROR_INTERNAL;
      }
      f.operand.workspace = true;
      f.operand.extra += kernel->tables[static_cast<size_t>(f.operand.table)].offset;
      f.operand.table = -1;
    }
  }
  for (const Step& st : kernel->steps) {
    if (st.kind == Step::Kind::kLibrary) scratch_bytes_ = std::max(scratch_bytes_, st.call->workspace_bytes());
  }
  uses_status_ = uses_status_ || kernel->uses_status;
  if (profile_) {
    CUresult r = drv_.EventCreate(&kernel->start, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = drv_.EventCreate(&kernel->stop, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
      if (kernel->start) drv_.EventDestroy(kernel->start);
      return cuda_fail(r, "cuEventCreate", err);
    }
  }
  kernels_.push_back(kernel.get());
  *out = kernel.release();
  return KITE_OK;
}

void Backend::release(Kernel* kernel) {
  if (!kernel) return;
  ContextScope scope(*device_);
  kernels_.erase(std::remove(kernels_.begin(), kernels_.end(), kernel), kernels_.end());
  if (kernel->start) drv_.EventDestroy(kernel->start);
  if (kernel->stop) drv_.EventDestroy(kernel->stop);
  delete kernel;
}

uint64_t Backend::workspace_bytes() const {
  if (kernels_.empty()) return 0;  // every node declined: bind gets no workspace
  const uint64_t tables = kStatusBytes + tables_bytes_;
  return scratch_bytes_ > 0 ? round_up(tables, kAlign) + scratch_bytes_ : tables;
}

CUdeviceptr Backend::address(const Operand& o) const {
  if (o.workspace) return workspace_ ? workspace_->ptr + o.extra : 0;
  if (!o.tensor || !o.tensor->buffer) return 0;
  return o.tensor->buffer->ptr + o.tensor->offset + o.extra;
}

kite_status Backend::bind(const kite_backend_bindings& b, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (b.struct_size < sizeof(kite_backend_bindings)) {
    *err = "bindings have an old struct_size";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ContextScope scope(*device_);
  workspace_ = b.workspace;
  const uint64_t need = workspace_bytes();
  if (need == 0) {
    bound_ = true;
    return KITE_OK;
  }
  if (!workspace_ || workspace_->size < need) {
    *err = "the workspace has " + std::to_string(workspace_ ? workspace_->size : 0) + " bytes, the kernels need " +
           std::to_string(need);
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  scratch_offset_ = round_up(kStatusBytes + tables_bytes_, kAlign);
  for (Kernel* k : kernels_) {
    for (Step& st : k->steps) {
      switch (st.kind) {
        case Step::Kind::kLaunch:
          for (const Fixup& f : st.fixups) {
            const CUdeviceptr p = f.operand.tensor || f.operand.workspace ? address(f.operand) : 0;
            if ((f.operand.tensor || f.operand.workspace) && p == 0) {
              *err = k->label + ": a tensor of the node has no device buffer at bind";
              return KITE_ERROR_INVALID_ARGUMENT;
            }
            std::memcpy(st.params.data() + f.at, &p, sizeof p);
          }
          break;
        case Step::Kind::kCopy:
          st.src_ptr = address(st.src);
          st.dst_ptr = address(st.dst);
          st.elided = st.src_ptr == st.dst_ptr;
          break;
        case Step::Kind::kLibrary:
          s = st.call->resolve(*this, err);
          if (s != KITE_OK) {
            *err = k->label + ": " + *err;
            return s;
          }
          break;
      }
    }
    for (const Table& t : k->tables) {
      const CUresult r = drv_.MemcpyHtoD(workspace_->ptr + t.offset, t.bytes.data(), t.bytes.size());
      if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyHtoD_v2 (" + k->label + "'s tables)", err);
    }
  }
  // The status words start at zero.
  CUresult r = drv_.MemsetD8Async(workspace_->ptr, 0, kStatusBytes, stream_);
  if (r == CUDA_SUCCESS) r = drv_.StreamSynchronize(stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemsetD8Async (status words)", err);
  bound_ = true;
  write_memory_report();
  return KITE_OK;
}

void Backend::write_memory_report() {
  const DeviceMemory dm = device_->memory();
  const uint64_t ws = workspace_ ? workspace_->size : 0;
  log(KITE_LOG_INFO, "device memory: arena " + mib(arena_bytes_) + (unified_ ? " (mapped pinned host memory)" : "") +
                         ", weights " + mib(weights_bytes_) + (imported_bytes_ ? ", imported " + mib(imported_bytes_) : "") +
                         ", workspace " + mib(ws) + " (library scratch " + mib(scratch_bytes_) + "), module " +
                         mib(dm.module) + ", cuDNN handle " + mib(dm.cudnn_handle) + ", cuBLASLt handle " +
                         mib(dm.cublaslt_handle) + "; in use when the context was made: " + mib(dm.in_use_at_context));
  if (options_.memory_report.empty()) return;
  std::FILE* f = std::fopen(options_.memory_report.c_str(), "w");
  if (!f) {
    log(KITE_LOG_WARNING, "cannot write the memory report " + options_.memory_report);
    return;
  }
  std::fprintf(f,
               "{\"device\": \"%s\", \"unified\": %d, \"lean\": %d, \"cudnn\": %d, \"cublaslt\": %d,\n"
               " \"arena_bytes\": %llu, \"weights_bytes\": %llu, \"imported_weights_bytes\": %llu,\n"
               " \"workspace_bytes\": %llu, \"library_scratch_bytes\": %llu, \"staging_bytes\": %llu,\n"
               " \"module_bytes\": %llu, \"cudnn_handle_bytes\": %llu, \"cublaslt_handle_bytes\": %llu,\n"
               " \"in_use_at_context_bytes\": %llu}\n",
               device_->props().name.c_str(), unified_ ? 1 : 0, options_.lean ? 1 : 0, use_cudnn_ ? 1 : 0,
               use_cublaslt_ ? 1 : 0, (unsigned long long)arena_bytes_, (unsigned long long)weights_bytes_,
               (unsigned long long)imported_bytes_, (unsigned long long)ws, (unsigned long long)scratch_bytes_,
               (unsigned long long)staging_size_, (unsigned long long)dm.module,
               (unsigned long long)dm.cudnn_handle, (unsigned long long)dm.cublaslt_handle,
               (unsigned long long)dm.in_use_at_context);
  std::fclose(f);
}

CUdeviceptr Backend::temp_alloc(uint64_t bytes) {
  CUdeviceptr p = 0;
  if (bytes == 0 || drv_.MemAlloc(&p, bytes) != CUDA_SUCCESS) return 0;
  return p;
}

float Backend::measure(std::vector<Step> steps, const std::function<bool()>& extra) {
  for (Step& st : steps) {
    if (st.kind != Step::Kind::kLaunch) return -1.0f;
    for (const Fixup& f : st.fixups) {
      if (f.operand.workspace || f.operand.table >= 0) return -1.0f;
      const CUdeviceptr p = address(f.operand);
      if (p == 0) return -1.0f;
      std::memcpy(st.params.data() + f.at, &p, sizeof p);
    }
  }
  CUevent start = nullptr, stop = nullptr;
  if (drv_.EventCreate(&start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return -1.0f;
  if (drv_.EventCreate(&stop, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    drv_.EventDestroy(start);
    return -1.0f;
  }
  constexpr int kReps = 5;
  float ms = -1.0f;
  bool ok = true;
  for (int rep = 0; rep <= kReps && ok; ++rep) {
    if (rep == 1) ok = drv_.EventRecord(start, stream_) == CUDA_SUCCESS;  // the first launch warms up
    for (Step& st : steps) {
      void* args[] = {st.params.data()};
      ok = ok && drv_.LaunchKernel(device_->function(st.fn), st.grid[0], st.grid[1], st.grid[2], st.block[0],
                                   st.block[1], st.block[2], 0, stream_, args, nullptr) == CUDA_SUCCESS;
    }
    if (extra && ok) ok = extra();
  }
  if (ok && drv_.EventRecord(stop, stream_) == CUDA_SUCCESS && drv_.StreamSynchronize(stream_) == CUDA_SUCCESS &&
      drv_.EventElapsedTime(&ms, start, stop) == CUDA_SUCCESS) {
    ms /= kReps;
  } else {
    ms = -1.0f;
  }
  drv_.EventDestroy(start);
  drv_.EventDestroy(stop);
  return ms;
}

// ---------------------------------------------------------------- buffers --

kite_status Backend::buffer_alloc(uint64_t size, kite_buffer_usage usage, Buffer** out, std::string* err) {
  if (size == 0) {
    *err = "buffer of 0 bytes";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  ContextScope scope(*device_);
  auto b = std::make_unique<Buffer>();
  b->size = size;
  b->usage = usage;
  const char* what = usage == KITE_BUFFER_ARENA ? "the arena" : usage == KITE_BUFFER_WEIGHTS ? "the weights" : "the workspace";
  if (usage == KITE_BUFFER_ARENA && unified_) {
    // Jetson: the arena in pinned host memory mapped into the device's
    // address space; the runtime uses the same bytes as its host arena.
    CUresult r = drv_.MemHostAlloc(&b->host, size, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemHostAlloc of " + std::string(what) + " (" + std::to_string(size) + " bytes)", err);
    r = drv_.MemHostGetDevicePointer(&b->ptr, b->host, 0);
    if (r != CUDA_SUCCESS) {
      drv_.MemFreeHost(b->host);
      return cuda_fail(r, "cuMemHostGetDevicePointer_v2", err);
    }
    b->kind = Buffer::Kind::kMappedHost;
  } else {
    const CUresult r = drv_.MemAlloc(&b->ptr, size);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemAlloc_v2 of " + std::string(what) + " (" + std::to_string(size) + " bytes)", err);
    b->kind = Buffer::Kind::kDevice;
  }
  if (usage == KITE_BUFFER_ARENA) arena_bytes_ += size;
  if (usage == KITE_BUFFER_WEIGHTS) weights_bytes_ += size;
  if (usage == KITE_BUFFER_WORKSPACE) workspace_alloc_bytes_ += size;
  *out = b.release();
  return KITE_OK;
}

void Backend::buffer_free(Buffer* b) {
  if (!b) return;
  ContextScope scope(*device_);
  // Queued work may still use it.
  if (stream_ && fatal_.empty() && !device_->lost()) drv_.StreamSynchronize(stream_);
  switch (b->kind) {
    case Buffer::Kind::kDevice: drv_.MemFree(b->ptr); break;
    case Buffer::Kind::kMappedHost: drv_.MemFreeHost(b->host); break;
    case Buffer::Kind::kRegistered: drv_.MemHostUnregister(b->host); break;
    case Buffer::Kind::kExternal: break;
  }
  if (b == workspace_) workspace_ = nullptr;
  delete b;
}

kite_status Backend::buffer_map(Buffer* b, void** out, std::string* err) {
  if (b->kind != Buffer::Kind::kMappedHost) {
    *err = unified_ ? "only the arena is mapped" : "the CUDA backend keeps this buffer in device memory (unified=0)";
    return KITE_ERROR_UNSUPPORTED;
  }
  *out = b->host;
  return KITE_OK;
}

kite_status Backend::import_host(const void* host, uint64_t size, Buffer** out, std::string* err) {
  const DeviceProps& p = device_->props();
  if (!unified_) {
    // On a discrete GPU every read of imported weights would cross PCIe.
    *err = "the CUDA backend imports host memory only with unified memory";
    return KITE_ERROR_UNSUPPORTED;
  }
  if (!p.host_register || !p.read_only_register) {
    *err = "device '" + p.name + "' cannot register read-only host memory";
    return KITE_ERROR_UNSUPPORTED;
  }
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  ContextScope scope(*device_);
  void* h = const_cast<void*>(host);
  CUresult r = drv_.MemHostRegister(h, size, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY);
  if (r != CUDA_SUCCESS) {
    // Not every mapping can be registered (some file systems): copy instead.
    *err = drv_.describe(r, "cuMemHostRegister_v2");
    return KITE_ERROR_UNSUPPORTED;
  }
  auto b = std::make_unique<Buffer>();
  r = drv_.MemHostGetDevicePointer(&b->ptr, h, 0);
  if (r != CUDA_SUCCESS) {
    drv_.MemHostUnregister(h);
    return cuda_fail(r, "cuMemHostGetDevicePointer_v2 (imported weights)", err);
  }
  b->kind = Buffer::Kind::kRegistered;
  b->host = h;
  b->size = size;
  b->usage = KITE_BUFFER_WEIGHTS;
  imported_bytes_ += size;
  *out = b.release();
  return KITE_OK;
}

kite_status Backend::import_external(uint64_t handle, uint64_t size, Buffer** out, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (handle == 0) {
    *err = "import_external: the CUdeviceptr is 0";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ContextScope scope(*device_);
  // The pointer must be device memory of this context, with `size` bytes
  // from it inside its allocation.
  CUdeviceptr start = 0;
  size_t range = 0;
  CUresult r = drv_.PointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, handle);
  if (r == CUDA_SUCCESS) r = drv_.PointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, handle);
  if (r != CUDA_SUCCESS) {
    *err = drv_.describe(r, "cuPointerGetAttribute") + ": 0x" + [&] {
      char t[32];
      std::snprintf(t, sizeof t, "%llx", static_cast<unsigned long long>(handle));
      return std::string(t);
    }() + " is not CUDA memory of this process";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  if (handle - start + size > range) {
    *err = "import_external: " + std::to_string(size) + " bytes from the pointer run past its allocation of " +
           std::to_string(range) + " bytes";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  auto b = std::make_unique<Buffer>();
  b->kind = Buffer::Kind::kExternal;
  b->ptr = handle;
  b->size = size;
  *out = b.release();
  return KITE_OK;
}

// Room for `bytes` in the pinned staging memory, valid until the next
// synchronize. When it is full, waits for the queued copies and starts over
// (growing it if one copy needs more): after the first run the size is
// stable and runs allocate nothing.
kite_status Backend::stage(uint64_t bytes, uint8_t** host, std::string* err) {
  const uint64_t need = round_up(bytes, kAlign);
  if (staging_used_ + need > staging_size_) {
    CUresult r = drv_.StreamSynchronize(stream_);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuStreamSynchronize (staging)", err);
    staging_used_ = 0;
    if (need > staging_size_) {
      if (staging_) drv_.MemFreeHost(staging_);
      staging_ = nullptr;
      const uint64_t size = std::max<uint64_t>(round_up(need, 1 << 20), staging_size_ * 2);
      void* p = nullptr;
      r = drv_.MemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
      if (r != CUDA_SUCCESS) {
        staging_size_ = 0;
        return cuda_fail(r, "cuMemHostAlloc of pinned staging (" + std::to_string(size) + " bytes)", err);
      }
      staging_ = static_cast<uint8_t*>(p);
      staging_size_ = size;
    }
  }
  *host = staging_ + staging_used_;
  staging_used_ += need;
  return KITE_OK;
}

kite_status Backend::upload(const kite_backend_tensor2& dst, const void* src, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  Buffer* b = dst.buffer;
  *err = abi::check_tensor_range("upload", dst, b != nullptr, b ? b->size : 0);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  if (dst.byte_size == 0) return KITE_OK;
  ContextScope scope(*device_);
  const CUdeviceptr to = b->ptr + dst.offset;
  if (b->kind == Buffer::Kind::kMappedHost) {
    CUresult r = drv_.StreamSynchronize(stream_);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuStreamSynchronize (upload)", err);
    std::memcpy(static_cast<uint8_t*>(b->host) + dst.offset, src, dst.byte_size);
    return KITE_OK;
  }
  if (b->usage == KITE_BUFFER_WEIGHTS) {
    // Once, at session creation: straight from the mapped file.
    const CUresult r = drv_.MemcpyHtoD(to, src, dst.byte_size);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyHtoD_v2 of weight '" + tensor_name(&dst) + "'", err);
    return KITE_OK;
  }
  uint8_t* host = nullptr;
  s = stage(dst.byte_size, &host, err);
  if (s != KITE_OK) return s;
  std::memcpy(host, src, dst.byte_size);
  const CUresult r = drv_.MemcpyHtoDAsync(to, host, dst.byte_size, stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyHtoDAsync_v2 of '" + tensor_name(&dst) + "'", err);
  return KITE_OK;
}

kite_status Backend::download(void* dst, const kite_backend_tensor2& src, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  Buffer* b = src.buffer;
  *err = abi::check_tensor_range("download", src, b != nullptr, b ? b->size : 0);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  if (src.byte_size == 0) return KITE_OK;
  ContextScope scope(*device_);
  if (b->kind == Buffer::Kind::kMappedHost || b->kind == Buffer::Kind::kRegistered) {
    s = synchronize(err);
    if (s != KITE_OK) return s;
    std::memcpy(dst, static_cast<uint8_t*>(b->host) + src.offset, src.byte_size);
    return KITE_OK;
  }
  uint8_t* host = nullptr;
  s = stage(src.byte_size, &host, err);
  if (s != KITE_OK) return s;
  CUresult r = drv_.MemcpyDtoHAsync(host, b->ptr + src.offset, src.byte_size, stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyDtoHAsync_v2 of '" + tensor_name(&src) + "'", err);
  s = synchronize(err);
  if (s != KITE_OK) return s;
  std::memcpy(dst, host, src.byte_size);
  return KITE_OK;
}

kite_status Backend::copy_buffer(Buffer* src, uint64_t src_offset, Buffer* dst, uint64_t dst_offset, uint64_t size,
                                 std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (!src || !dst) {
    *err = "copy_buffer: a buffer is NULL";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  *err = abi::check_copy_ranges(src_offset, src->size, dst_offset, dst->size, size);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  if (size == 0) return KITE_OK;
  ContextScope scope(*device_);
  const CUresult r = drv_.MemcpyDtoDAsync(dst->ptr + dst_offset, src->ptr + src_offset, size, stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyDtoDAsync_v2", err);
  return KITE_OK;
}

// ---------------------------------------------------------------- running --

kite_status Backend::run_steps(Kernel* k, std::string* err) {
  for (Step& st : k->steps) {
    CUresult r = CUDA_SUCCESS;
    switch (st.kind) {
      case Step::Kind::kLaunch: {
        void* args[] = {st.params.data()};
        r = drv_.LaunchKernel(device_->function(st.fn), st.grid[0], st.grid[1], st.grid[2], st.block[0],
                              st.block[1], st.block[2], 0, stream_, args, nullptr);
        if (r != CUDA_SUCCESS) {
          return cuda_fail(r, std::string("cuLaunchKernel(") + kernel_name(st.fn) + ") of " + k->label, err);
        }
        break;
      }
      case Step::Kind::kCopy:
        if (st.elided || st.bytes == 0) break;
        r = drv_.MemcpyDtoDAsync(st.dst_ptr, st.src_ptr, st.bytes, stream_);
        if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyDtoDAsync_v2 of " + k->label, err);
        break;
      case Step::Kind::kLibrary: {
        const kite_status s = st.call->run(*this, stream_, err);
        if (s != KITE_OK) {
          *err = k->label + ": " + *err;
          return s;
        }
        break;
      }
    }
  }
  return KITE_OK;
}

kite_status Backend::execute(Kernel* k, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (!bound_) {
    *err = "execute before bind";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ContextScope scope(*device_);
  if (k->start) {
    const CUresult r = drv_.EventRecord(k->start, stream_);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuEventRecord", err);
  }
  s = run_steps(k, err);
  if (s != KITE_OK) return s;
  if (k->stop) {
    const CUresult r = drv_.EventRecord(k->stop, stream_);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuEventRecord", err);
    k->timed = true;
  }
  return KITE_OK;
}

kite_status Backend::prepare_segment(const kite_backend_segment& segment, Segment** out, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (profile_ || !options_.graphs) {
    // Profiling times every kernel with its own events: kernels run one by one.
    *err = profile_ ? "profiling runs kernels one by one" : "CUDA graphs are off (graphs=0)";
    return KITE_ERROR_UNSUPPORTED;
  }
  if (segment.num_kernels <= 0 || !segment.kernels) {
    *err = "empty segment";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  ContextScope scope(*device_);
  auto seg = std::make_unique<Segment>();
  for (int32_t i = 0; i < segment.num_kernels; ++i) seg->kernels.push_back(static_cast<Kernel*>(segment.kernels[i]));
  // Capture on the instance's stream: nothing runs, every launch and copy
  // becomes a node of the graph, in stream order.
  CUresult r = drv_.StreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuStreamBeginCapture_v2", err);
  std::string step_err;
  kite_status captured = KITE_OK;
  for (Kernel* k : seg->kernels) {
    captured = run_steps(k, &step_err);
    if (captured != KITE_OK) break;
  }
  CUgraph graph = nullptr;
  r = drv_.StreamEndCapture(stream_, &graph);
  if (captured != KITE_OK || r != CUDA_SUCCESS) {
    if (graph) drv_.GraphDestroy(graph);
    if (captured == KITE_ERROR_DEVICE_LOST) {
      *err = step_err;
      return captured;
    }
    // A step that cannot be captured (a library call that synchronises):
    // the runtime runs this segment's kernels one by one instead.
    const std::string why = captured != KITE_OK ? step_err : drv_.describe(r, "cuStreamEndCapture");
    log(KITE_LOG_WARNING, "segment of " + std::to_string(segment.num_kernels) + " kernels not captured: " + why);
    *err = why;
    return KITE_ERROR_UNSUPPORTED;
  }
  seg->graph = graph;
  r = drv_.GraphInstantiate(&seg->exec, graph, 0);
  if (r != CUDA_SUCCESS) {
    seg->exec = nullptr;
    drv_.GraphDestroy(graph);
    seg->graph = nullptr;
    return cuda_fail(r, "cuGraphInstantiateWithFlags", err);
  }
  segments_.push_back(seg.get());
  *out = seg.release();
  return KITE_OK;
}

kite_status Backend::execute_segment(Segment* seg, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  ContextScope scope(*device_);
  const CUresult r = drv_.GraphLaunch(seg->exec, stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuGraphLaunch", err);
  return KITE_OK;
}

void Backend::release_segment(Segment* seg) {
  if (!seg) return;
  ContextScope scope(*device_);
  segments_.erase(std::remove(segments_.begin(), segments_.end(), seg), segments_.end());
  if (seg->exec) drv_.GraphExecDestroy(seg->exec);
  if (seg->graph) drv_.GraphDestroy(seg->graph);
  delete seg;
}

kite_status Backend::begin_run(std::string* err) { return check_health(err); }

kite_status Backend::check_status_words(std::string* err) {
  int32_t words[kite_cuda::kStatusWords] = {0};
  CUresult r = drv_.MemcpyDtoHAsync(words, workspace_->ptr, sizeof words, stream_);
  if (r == CUDA_SUCCESS) r = drv_.StreamSynchronize(stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemcpyDtoHAsync_v2 (status words)", err);
  if (words[0] == 0) return KITE_OK;
  std::string node = "node " + std::to_string(words[0] - 1);
  for (const Kernel* k : kernels_) {
    if (k->node_index == words[0] - 1) node = k->label;
  }
  *err = node + ": index " + std::to_string(words[1]) + " is out of range";
  r = drv_.MemsetD8Async(workspace_->ptr, 0, kStatusBytes, stream_);
  if (r == CUDA_SUCCESS) r = drv_.StreamSynchronize(stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemsetD8Async (status words)", err);
  return KITE_ERROR_INVALID_ARGUMENT;
}

kite_status Backend::synchronize(std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  ContextScope scope(*device_);
  const CUresult r = drv_.StreamSynchronize(stream_);
  if (r != CUDA_SUCCESS) return cuda_fail(r, "cuStreamSynchronize", err);
  staging_used_ = 0;
  if (uses_status_ && workspace_) return check_status_words(err);
  return KITE_OK;
}

kite_status Backend::kernel_time(Kernel* k, uint64_t* out_ns) {
  if (!k->timed || !k->start || !k->stop) return KITE_ERROR_UNSUPPORTED;
  ContextScope scope(*device_);
  float ms = 0.0f;
  if (drv_.EventElapsedTime(&ms, k->start, k->stop) != CUDA_SUCCESS) return KITE_ERROR_UNSUPPORTED;
  *out_ns = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
  return KITE_OK;
}

}  // namespace kite::cuda
