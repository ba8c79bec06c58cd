// The session's resources (backends, arenas, weights, workspaces, prepared
// kernels and segments) and its runner. Where nodes run and which copies and
// waits a run needs is decided by the schedule builder (schedule.h).
#include "session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>

namespace kite::rt {
namespace {

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

constexpr uint64_t kPage = 4096;

}  // namespace

Session::~Session() {
  if (in_flight_) abandon_run();
  for (size_t s = 0; s < segments_.size(); ++s) {
    if (segments_[s].handle != nullptr) {
      slots_[static_cast<size_t>(schedule_.segments[s].backend)].instance->release_segment(segments_[s].handle);
    }
  }
  for (Kernel& k : kernels_) {
    if (k.handle != nullptr) slots_[static_cast<size_t>(k.backend)].instance->release(k.handle);
  }
  for (auto* bindings : {&input_bindings_, &output_bindings_}) {
    for (Binding& b : *bindings) {
      if (b.buffer != nullptr) slots_[static_cast<size_t>(b.backend)].instance->free(b.buffer);
    }
  }
  for (Slot& slot : slots_) {
    if (!slot.instance) continue;
    slot.instance->free(slot.workspace);
    slot.instance->free(slot.weights);
    slot.instance->free(slot.arena);
    std::free(slot.workspace_host);
  }
  if (host_arena_owned_) std::free(host_arena_);
  slots_.clear();  // destroys the instances, then lets go of the devices
}

// ---- creation ----------------------------------------------------------------

Status Session::create(std::shared_ptr<const Model> model, const SessionConfig& config,
                       std::unique_ptr<Session>* out) {
  std::unique_ptr<Session> s(new (std::nothrow) Session());
  if (!s) return Status(KITE_ERROR_OUT_OF_MEMORY, "cannot allocate a session");
  s->model_ = std::move(model);
  const Model& m = *s->model_;

  // Options must name a backend of the preference list (or the CPU).
  const std::vector<std::string> names = split_backend_list(config.backends);
  auto listed = [&names](const std::string& n) {
    return n == "cpu" || std::find(names.begin(), names.end(), n) != names.end();
  };
  for (const auto& kv : config.backend_options) {
    if (!listed(kv.first)) {
      return Status(KITE_ERROR_INVALID_ARGUMENT, "options for backend '" + kv.first +
                                                     "', which is not in the backend list '" +
                                                     config.backends + "'");
    }
  }
  for (const auto& kv : config.external_queue) {
    if (!listed(kv.first)) {
      return Status(KITE_ERROR_INVALID_ARGUMENT, "an external queue for backend '" + kv.first +
                                                     "', which is not in the backend list '" +
                                                     config.backends + "'");
    }
  }
  for (const auto& kv : config.device_index) {
    if (!listed(kv.first)) {
      return Status(KITE_ERROR_INVALID_ARGUMENT, "a device index for backend '" + kv.first +
                                                     "', which is not in the backend list '" +
                                                     config.backends + "'");
    }
  }

  Resolution resolution;
  Status st = resolve_backends(config.backends, config.plugin_path, config.strict, &resolution);
  if (!st.is_ok()) return st;
  s->unavailable_ = resolution.unavailable;
  s->unavailable_names_ = resolution.unavailable_names;
  st = s->start_backends(resolution, config);
  if (!st.is_ok()) return st;

  // Rules 1 and 3 of the schedule builder: placement and segments.
  std::vector<BackendTraits> traits;
  for (const Slot& slot : s->slots_) {
    BackendTraits t;
    t.name = slot.instance->name();
    t.device = slot.device;
    traits.push_back(t);
  }
  s->builder_ = std::make_unique<ScheduleBuilder>(m, traits, s->unavailable_,
                                                  static_cast<PlacementOracle*>(s.get()));
  st = s->builder_->place(&s->schedule_);
  if (!st.is_ok()) return st;
  for (const KernelRec& k : s->schedule_.kernels) ++s->slots_[static_cast<size_t>(k.backend)].kernels;

  st = s->allocate_arenas(config);
  if (!st.is_ok()) return st;
  // Rule 2 needs to know which devices share the host's memory.
  for (size_t b = 0; b < s->slots_.size(); ++b) {
    BackendTraits t = traits[b];
    t.shares_host = s->slots_[b].shares_host;
    s->builder_->set_traits(static_cast<int>(b), t);
  }
  if (!config.strict) s->builder_->avoid_ping_pong(&s->schedule_);
  for (Slot& slot : s->slots_) slot.kernels = 0;
  for (const KernelRec& k : s->schedule_.kernels) ++s->slots_[static_cast<size_t>(k.backend)].kernels;

  st = s->load_weights(config);
  if (!st.is_ok()) return st;
  st = s->prepare_kernels();
  if (!st.is_ok()) return st;
  st = s->allocate_workspaces(config);
  if (!st.is_ok()) return st;
  st = s->prepare_segments();
  if (!st.is_ok()) return st;

  s->input_bindings_.assign(m.main_graph().inputs.size(), Binding{});
  s->output_bindings_.assign(m.main_graph().outputs.size(), Binding{});
  if (const char* mutation = std::getenv("KITE_TEST_MUTATION")) s->mutation_ = mutation;
  st = s->replan();
  if (!st.is_ok()) return st;

  if (config.poison || std::getenv("KITE_POISON_ARENA") != nullptr) {
    // Everything but the bytes of the main graph's inputs (set by the
    // application before the run).
    std::vector<std::pair<uint64_t, uint64_t>> keep;
    for (int t : m.main_graph().inputs) {
      const TensorRec& in = m.tensors[static_cast<size_t>(t)];
      keep.emplace_back(in.arena_offset, in.arena_offset + in.byte_size);
    }
    std::sort(keep.begin(), keep.end());
    uint64_t cursor = 0;
    for (const auto& k : keep) {
      if (k.first > cursor) s->poison_ranges_.emplace_back(cursor, k.first);
      cursor = std::max(cursor, k.second);
    }
    if (cursor < m.plan.arena_size) s->poison_ranges_.emplace_back(cursor, m.plan.arena_size);
  }
  if (config.strict && !s->schedule_.fallbacks.empty()) {
    std::string list;
    for (const std::string& f : s->schedule_.fallbacks) list += "\n  " + f;
    return Status(KITE_ERROR_UNSUPPORTED, "strict mode: " + std::to_string(s->schedule_.fallbacks.size()) +
                                              " node(s) would not run as placed first:" + list);
  }
  s->profiling_ = config.profile;
  s->profile_.assign(s->schedule_.placements.size(), NodeProfile{});
  s->if_ns_.assign(s->schedule_.placements.size(), 0);
  s->kernel_ran_.assign(s->kernels_.size(), 0);
  *out = std::move(s);
  return Status::ok();
}

Status Session::start_backends(const Resolution& resolution, const SessionConfig& config) {
  const Model& m = *model_;
  std::vector<kite::abi::TensorDesc> descs(m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorRec& t = m.tensors[i];
    kite::abi::TensorDesc& d = descs[i];
    d.name = t.name.c_str();
    d.dtype = t.dtype;
    d.rank = static_cast<int32_t>(t.shape.size());
    d.shape = t.shape.data();
    d.byte_size = t.byte_size;
    d.is_constant = t.is_constant();
    d.host_data = t.const_data;
    d.num_packed = static_cast<int32_t>(t.packed_abi.size());
    d.packed = t.packed_abi.empty() ? nullptr : t.packed_abi.data();
  }
  slots_.reserve(resolution.backends.size());
  for (const ResolvedBackend& rb : resolution.backends) {
    slots_.emplace_back();
    Slot& slot = slots_.back();
    const kite::abi::Table table(rb.api);
    const std::string name = table.name();
    std::shared_ptr<Device> device;
    if (table.v2()) {
      kite_backend_device_options device_options{};
      device_options.struct_size = sizeof device_options;
      device_options.cache_dir = config.cache_dir.empty() ? nullptr : config.cache_dir.c_str();
      device_options.log = config.log;
      device_options.log_user = config.log_user;
      auto it = config.device_index.find(name);
      const int index = it == config.device_index.end() ? 0 : it->second;
      Status st = acquire_device(rb, index, device_options, &device);
      if (!st.is_ok()) {
        slots_.pop_back();
        // A backend whose library or device is missing is unavailable, like
        // one not found (strict: an error).
        if (config.strict || st.code() == KITE_ERROR_OUT_OF_MEMORY || name == "cpu") return st;
        unavailable_.push_back(name + ": " + st.message());
        unavailable_names_.push_back(name);
        continue;
      }
    } else if (config.device_index.count(name) && config.device_index.at(name) != 0) {
      return Status(KITE_ERROR_INVALID_ARGUMENT, "backend '" + name +
                                                     "' (ABI version 1) has one device, no device " +
                                                     std::to_string(config.device_index.at(name)));
    }
    InstanceConfig ic;
    ic.threads = config.threads;
    ic.precision = config.precision;
    ic.profile = config.profile;
    ic.cache_dir = config.cache_dir;
    ic.log = config.log;
    ic.log_user = config.log_user;
    auto opt = config.backend_options.find(name);
    if (opt != config.backend_options.end()) ic.options = opt->second;
    auto queue = config.external_queue.find(name);
    if (queue != config.external_queue.end()) ic.external_queue = queue->second;
    slot.instance = std::make_unique<BackendInstance>();
    Status st = slot.instance->create(rb, std::move(device), ic);
    if (!st.is_ok()) return st;
    slot.device = slot.instance->device_memory();
    slot.tensors.assign(descs);
    if (slot.device && slot.instance->v2()) {
      // Device backends see buffers, never host addresses.
      for (size_t i = 0; i < m.tensors.size(); ++i) slot.tensors.at(static_cast<int>(i)).data = nullptr;
    }
  }
  if (slots_.size() > 62) return Status(KITE_ERROR_BACKEND, "too many backends in one session");
  return Status::ok();
}

bool Session::supports(const NodeRec& node, int backend, std::string* reason) {
  const auto key = std::make_pair(&node, backend);
  auto it = supports_cache_.find(key);
  if (it == supports_cache_.end()) {
    Slot& slot = slots_[static_cast<size_t>(backend)];
    kite::abi::Node probe;
    kite::abi::Node::Spec spec;
    spec.name = node.name.c_str();
    spec.op = node.op.c_str();
    spec.domain = node.domain.c_str();
    spec.fused_pattern = node.fused_pattern.c_str();
    spec.inputs = node.inputs;
    spec.outputs = node.outputs;
    spec.attrs = &node.abi_attrs;
    probe.build(spec, &slot.tensors);
    std::string why;
    const bool ok = slot.instance->supports(&probe, &why);
    it = supports_cache_.emplace(key, std::make_pair(ok, why)).first;
  }
  if (reason != nullptr) *reason = it->second.second;  // on success: the backend's note
  return it->second.first;
}

uint64_t Session::allocated_bytes() const {
  uint64_t total = host_arena_owned_ ? host_arena_bytes_ : 0;
  for (const Slot& slot : slots_) {
    total += slot.arena_bytes + (slot.weights_imported ? 0 : slot.weights_bytes) + slot.workspace_bytes;
  }
  return total;
}

// The memory limit against what is allocated so far plus what `stage` is
// about to allocate (already entered in the slots and host_arena_bytes_).
Status Session::check_limit(const SessionConfig& config, const std::string& stage) const {
  if (config.memory_limit == 0) return Status::ok();
  const uint64_t needed = allocated_bytes();
  if (needed <= config.memory_limit) return Status::ok();
  std::string parts = "host arena " + std::to_string(host_arena_owned_ ? host_arena_bytes_ : 0);
  for (const Slot& slot : slots_) {
    std::string part;
    if (slot.arena_bytes) part += " arena " + std::to_string(slot.arena_bytes);
    if (slot.weights_bytes && !slot.weights_imported) part += " weights " + std::to_string(slot.weights_bytes);
    if (slot.workspace_bytes) part += " workspace " + std::to_string(slot.workspace_bytes);
    if (!part.empty()) parts += "; backend '" + slot.instance->name() + "':" + part;
  }
  return Status(KITE_ERROR_OUT_OF_MEMORY,
                "memory limit: the session needs " + std::to_string(needed) + " bytes (" + parts +
                    ") by its " + stage + ", the limit allows " + std::to_string(config.memory_limit) +
                    " bytes");
}

Status Session::allocate_arenas(const SessionConfig& config) {
  const Model& m = *model_;
  const uint64_t alignment = m.plan.alignment < 64 ? 64 : m.plan.alignment;
  const uint64_t arena_bytes = round_up(m.plan.arena_size == 0 ? 1 : m.plan.arena_size, alignment);
  if (m.plan.arena_size > arena_bytes || arena_bytes > SIZE_MAX / 2) {
    return Status(KITE_ERROR_OUT_OF_MEMORY, "arena of " + std::to_string(m.plan.arena_size) +
                                                " bytes cannot be allocated");
  }
  // Device arenas first: a unified device's mapped arena becomes the host
  // arena.
  for (Slot& slot : slots_) {
    if (!slot.device || slot.kernels == 0) continue;
    if (slot.instance->offset_alignment() > alignment) {
      return Status(KITE_ERROR_BACKEND, "backend '" + slot.instance->name() + "' needs tensor offsets aligned to " +
                                            std::to_string(slot.instance->offset_alignment()) +
                                            " bytes; this model's memory plan aligns them to " +
                                            std::to_string(alignment));
    }
    const uint64_t largest = slot.instance->max_buffer_size();
    if (largest != 0 && arena_bytes > largest) {
      return Status(KITE_ERROR_OUT_OF_MEMORY, "backend '" + slot.instance->name() + "': the arena of " +
                                                  std::to_string(arena_bytes) + " bytes is larger than device '" +
                                                  slot.instance->device()->info().name + "' allocates in one buffer (" +
                                                  std::to_string(largest) + " bytes)");
    }
    slot.arena_bytes = arena_bytes;
    Status st = check_limit(config, "device arenas");
    if (!st.is_ok()) return st;
    st = slot.instance->alloc(arena_bytes, KITE_BUFFER_ARENA, "the arena", &slot.arena);
    if (!st.is_ok()) {
      slot.arena_bytes = 0;
      return st;
    }
    if (host_arena_ == nullptr && slot.instance->may_be_unified()) {
      void* mapped = nullptr;
      st = slot.instance->map(slot.arena, &mapped);
      if (st.is_ok() && reinterpret_cast<uintptr_t>(mapped) % alignment == 0) {
        host_arena_ = static_cast<uint8_t*>(mapped);
        slot.shares_host = true;
      } else if (!st.is_ok() && st.code() != KITE_ERROR_UNSUPPORTED) {
        return st;
      }
    }
  }
  if (host_arena_ == nullptr) {
    host_arena_bytes_ = arena_bytes;
    host_arena_owned_ = true;
    Status st = check_limit(config, "host arena");
    if (!st.is_ok()) {
      host_arena_owned_ = false;
      return st;
    }
    // An arena larger than the machine's RAM is refused up front: with
    // memory overcommit the allocation could succeed and touching it get
    // the process killed.
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0 &&
        arena_bytes / static_cast<uint64_t>(page_size) > static_cast<uint64_t>(pages)) {
      host_arena_owned_ = false;
      return Status(KITE_ERROR_OUT_OF_MEMORY,
                    "arena of " + std::to_string(arena_bytes) +
                        " bytes is larger than this machine's physical memory (" +
                        std::to_string(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)) +
                        " bytes)");
    }
    host_arena_ = static_cast<uint8_t*>(std::aligned_alloc(static_cast<size_t>(alignment),
                                                           static_cast<size_t>(arena_bytes)));
    if (host_arena_ == nullptr) {
      host_arena_owned_ = false;
      return Status(KITE_ERROR_OUT_OF_MEMORY,
                    "cannot allocate the arena of " + std::to_string(m.plan.arena_size) + " bytes");
    }
    std::memset(host_arena_, 0, static_cast<size_t>(arena_bytes));
  }
  // Every backend's view of the non-constant tensors: host addresses for
  // host backends (and v1 device backends' data is computed from buffer +
  // offset), buffer and offset for device backends.
  for (Slot& slot : slots_) {
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const TensorRec& t = m.tensors[i];
      if (t.is_constant()) continue;
      kite_backend_tensor2& bt = slot.tensors.at(static_cast<int>(i));
      if (slot.device) {
        bt.buffer = slot.arena;
        bt.offset = t.arena_offset;
        bt.data = nullptr;
      } else {
        bt.data = host_arena_ + t.arena_offset;
      }
    }
  }
  return Status::ok();
}

Status Session::load_weights(const SessionConfig& config) {
  const Model& m = *model_;
  std::vector<std::set<int>> used(slots_.size());
  for (const KernelRec& k : schedule_.kernels) {
    for (int t : k.node->inputs) {
      if (t >= 0 && m.tensors[static_cast<size_t>(t)].is_constant()) used[static_cast<size_t>(k.backend)].insert(t);
    }
  }
  for (size_t b = 0; b < slots_.size(); ++b) {
    Slot& slot = slots_[b];
    if (!slot.device || used[b].empty()) continue;
    const uint64_t alignment = slot.instance->offset_alignment();
    // Zero-copy first: wrap the mapped file's pages that hold these
    // constants, when the device can import host memory and every constant
    // sits at an offset it can address.
    if (slot.instance->can_import_host() && m.file_data() != nullptr) {
      uintptr_t lo = UINTPTR_MAX, hi = 0;
      for (int t : used[b]) {
        const TensorRec& r = m.tensors[static_cast<size_t>(t)];
        lo = std::min(lo, reinterpret_cast<uintptr_t>(r.const_data));
        hi = std::max(hi, reinterpret_cast<uintptr_t>(r.const_data) + static_cast<uintptr_t>(r.byte_size));
      }
      const uintptr_t base = lo / kPage * kPage;
      const uintptr_t end = round_up(hi, kPage);
      const uintptr_t file_begin = reinterpret_cast<uintptr_t>(m.file_data());
      bool addressable = base >= file_begin && end <= round_up(file_begin + m.file_size(), kPage);
      for (int t : used[b]) {
        addressable = addressable &&
                      (reinterpret_cast<uintptr_t>(m.tensors[static_cast<size_t>(t)].const_data) - base) % alignment == 0;
      }
      if (addressable) {
        kite_backend_buffer imported = nullptr;
        Status st = slot.instance->import_host(reinterpret_cast<const void*>(base), end - base, &imported);
        if (st.is_ok()) {
          slot.weights = imported;
          slot.weights_imported = true;
          slot.weights_bytes = end - base;
          for (int t : used[b]) {
            kite_backend_tensor2& bt = slot.tensors.at(t);
            bt.buffer = imported;
            bt.offset = reinterpret_cast<uintptr_t>(m.tensors[static_cast<size_t>(t)].const_data) - base;
          }
          continue;
        }
        if (st.code() != KITE_ERROR_UNSUPPORTED) return st;
      }
    }
    // One weights buffer holding exactly these constants, uploaded once.
    uint64_t size = 0;
    for (int t : used[b]) size = round_up(size, alignment) + m.tensors[static_cast<size_t>(t)].byte_size;
    slot.weights_bytes = size == 0 ? 1 : size;
    const uint64_t largest = slot.instance->max_buffer_size();
    if (largest != 0 && slot.weights_bytes > largest) {
      return Status(KITE_ERROR_OUT_OF_MEMORY, "backend '" + slot.instance->name() + "': its weights (" +
                                                  std::to_string(slot.weights_bytes) + " bytes) are larger than device '" +
                                                  slot.instance->device()->info().name + "' allocates in one buffer (" +
                                                  std::to_string(largest) + " bytes)");
    }
    Status st = check_limit(config, "weights");
    if (!st.is_ok()) return st;
    st = slot.instance->alloc(slot.weights_bytes, KITE_BUFFER_WEIGHTS, "the weights", &slot.weights);
    if (!st.is_ok()) {
      slot.weights_bytes = 0;
      return st;
    }
    uint64_t offset = 0;
    for (int t : used[b]) {
      const TensorRec& r = m.tensors[static_cast<size_t>(t)];
      offset = round_up(offset, alignment);
      kite_backend_tensor2& bt = slot.tensors.at(t);
      bt.buffer = slot.weights;
      bt.offset = offset;
      bt.data = nullptr;
      offset += r.byte_size;
      if (r.byte_size == 0) continue;
      st = slot.instance->upload(bt, r.const_data);
      if (!st.is_ok()) return st;
      ++slot.weight_uploads;
    }
  }
  return Status::ok();
}

Status Session::prepare_kernels() {
  for (size_t i = 0; i < schedule_.kernels.size(); ++i) {
    const KernelRec& k = schedule_.kernels[i];
    kernels_.emplace_back();
    Kernel& kernel = kernels_.back();
    kernel.backend = k.backend;
    Slot& slot = slots_[static_cast<size_t>(k.backend)];
    kite::abi::Node::Spec spec;
    spec.name = k.node->name.c_str();
    spec.op = k.node->op.c_str();
    spec.domain = k.node->domain.c_str();
    spec.fused_pattern = k.node->fused_pattern.c_str();
    spec.index = static_cast<int32_t>(i);
    spec.inputs = k.node->inputs;
    spec.outputs = k.node->outputs;
    spec.attrs = &k.node->abi_attrs;
    kernel.node.build(spec, &slot.tensors);
    Status st = slot.instance->prepare(&kernel.node, &kernel.handle);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

Status Session::allocate_workspaces(const SessionConfig& config) {
  for (Slot& slot : slots_) {
    uint64_t bytes = 0;
    if (slot.kernels > 0) {
      Status st = slot.instance->workspace_size(&bytes);
      if (!st.is_ok()) return st;
    }
    slot.workspace_bytes = bytes;
    Status st = check_limit(config, "workspaces");
    if (!st.is_ok()) return st;
    kite_backend_bindings bindings{};
    bindings.struct_size = sizeof bindings;
    if (bytes > 0) {
      if (slot.device) {
        st = slot.instance->alloc(bytes, KITE_BUFFER_WORKSPACE, "the workspace", &slot.workspace);
        if (!st.is_ok()) {
          slot.workspace_bytes = 0;
          return st;
        }
      } else {
        slot.workspace_host = std::aligned_alloc(64, static_cast<size_t>(round_up(bytes, 64)));
        if (slot.workspace_host == nullptr) {
          slot.workspace_bytes = 0;
          return Status(KITE_ERROR_OUT_OF_MEMORY, "cannot allocate the workspace of " +
                                                      std::to_string(bytes) + " bytes for backend '" +
                                                      slot.instance->name() + "'");
        }
      }
    }
    bindings.arena = slot.device ? slot.arena : nullptr;
    bindings.weights = slot.device ? slot.weights : nullptr;
    bindings.workspace = slot.workspace;
    bindings.workspace_host = slot.workspace_host;
    bindings.workspace_size = bytes;
    st = slot.instance->bind(bindings);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

Status Session::prepare_segments() {
  segments_.assign(schedule_.segments.size(), PreparedSegment{});
  for (size_t s = 0; s < schedule_.segments.size(); ++s) {
    const SegmentRec& seg = schedule_.segments[s];
    PreparedSegment& p = segments_[s];
    for (int k = seg.first; k < seg.first + seg.count; ++k) {
      p.kernels.push_back(kernels_[static_cast<size_t>(k)].handle);
      p.nodes.push_back(kernels_[static_cast<size_t>(k)].node.v2());
    }
    BackendInstance& instance = *slots_[static_cast<size_t>(seg.backend)].instance;
    if (!instance.has_segments()) continue;
    kite_backend_segment abi{};
    abi.struct_size = sizeof abi;
    abi.num_kernels = seg.count;
    abi.kernels = p.kernels.data();
    abi.nodes = p.nodes.data();
    Status st = instance.prepare_segment(abi, &p.handle);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

Status Session::replan() {
  Boundary boundary;
  for (const Binding& b : input_bindings_) boundary.inputs.push_back(b.backend);
  for (const Binding& b : output_bindings_) boundary.outputs.push_back(b.backend);
  Status st = builder_->plan_steps(boundary, &schedule_);
  if (!st.is_ok()) return st;
  if (!mutation_.empty()) ScheduleBuilder::apply_test_mutation(mutation_, &schedule_);
  return Status::ok();
}

Status Session::bind_buffer(bool input, int index, const std::string& backend, uint64_t handle,
                            uint64_t offset) {
  if (in_flight_) return Status(KITE_ERROR_INVALID_ARGUMENT, "a run is in flight: call kite_session_wait first");
  std::vector<Binding>& bindings = input ? input_bindings_ : output_bindings_;
  const std::vector<int>& tensors = input ? model_->main_graph().inputs : model_->main_graph().outputs;
  Binding& binding = bindings[static_cast<size_t>(index)];
  const TensorRec& t = model_->tensors[static_cast<size_t>(tensors[static_cast<size_t>(index)])];
  Binding fresh;
  if (!backend.empty()) {
    int found = -1;
    for (size_t b = 0; b < slots_.size(); ++b) {
      if (slots_[b].instance->name() == backend) found = static_cast<int>(b);
    }
    if (found < 0) {
      return Status(KITE_ERROR_NOT_FOUND, "backend '" + backend + "' is not one of this session's backends");
    }
    Slot& slot = slots_[static_cast<size_t>(found)];
    if (!slot.device || !slot.instance->can_import_external()) {
      return Status(KITE_ERROR_UNSUPPORTED, "backend '" + backend +
                                                "' cannot use application buffers (it has no "
                                                "import_external and copy_buffer)");
    }
    if (slot.arena == nullptr) {
      return Status(KITE_ERROR_INVALID_ARGUMENT, "backend '" + backend +
                                                     "' runs no node of this model, so it has no arena "
                                                     "to copy '" + t.name + "' into or out of");
    }
    if (offset > UINT64_MAX - t.byte_size) {
      return Status(KITE_ERROR_INVALID_ARGUMENT, "offset " + std::to_string(offset) + " overflows");
    }
    Status st = slot.instance->import_external(handle, offset + t.byte_size, &fresh.buffer);
    if (!st.is_ok()) return st;
    fresh.backend = found;
    fresh.offset = offset;
  }
  if (binding.buffer != nullptr) slots_[static_cast<size_t>(binding.backend)].instance->free(binding.buffer);
  binding = fresh;
  return replan();
}

// ---- running ------------------------------------------------------------------

Status Session::run_step(const Step& step) {
  const Model& m = *model_;
  switch (step.kind) {
    case StepKind::Segment: {
      ++stats_.segments;
      const SegmentRec& seg = schedule_.segments[static_cast<size_t>(step.segment)];
      BackendInstance& instance = *slots_[static_cast<size_t>(seg.backend)].instance;
      PreparedSegment& p = segments_[static_cast<size_t>(step.segment)];
      for (int k = seg.first; k < seg.first + seg.count; ++k) kernel_ran_[static_cast<size_t>(k)] = 1;
      if (p.handle != nullptr) return instance.execute_segment(p.handle);
      for (int k = seg.first; k < seg.first + seg.count; ++k) {
        Status st = instance.execute(p.kernels[static_cast<size_t>(k - seg.first)],
                                     schedule_.kernels[static_cast<size_t>(k)].node->name.c_str());
        if (!st.is_ok()) return st;
      }
      return Status::ok();
    }
    case StepKind::Upload: {
      ++stats_.uploads;
      return slots_[static_cast<size_t>(step.backend)].instance->upload(tensor_of(step.backend, step.tensor),
                                                                          tensor_data(step.tensor));
    }
    case StepKind::Download: {
      ++stats_.downloads;
      return slots_[static_cast<size_t>(step.backend)].instance->download(tensor_data(step.tensor),
                                                                            tensor_of(step.backend, step.tensor));
    }
    case StepKind::Sync:
      ++stats_.syncs;
      return slots_[static_cast<size_t>(step.backend)].instance->synchronize();
    case StepKind::BufferIn:
    case StepKind::BufferOut: {
      ++stats_.buffer_copies;
      const bool in = step.kind == StepKind::BufferIn;
      const std::vector<int>& list = in ? m.main_graph().inputs : m.main_graph().outputs;
      const std::vector<Binding>& bindings = in ? input_bindings_ : output_bindings_;
      size_t index = 0;
      while (index < list.size() && list[index] != step.tensor) ++index;
      const Binding& b = bindings[index];
      Slot& slot = slots_[static_cast<size_t>(step.backend)];
      const TensorRec& t = m.tensors[static_cast<size_t>(step.tensor)];
      if (in) {
        return slot.instance->copy_buffer(b.buffer, b.offset, slot.arena, t.arena_offset, t.byte_size, "input",
                                          t.name.c_str());
      }
      return slot.instance->copy_buffer(slot.arena, t.arena_offset, b.buffer, b.offset, t.byte_size, "output",
                                        t.name.c_str());
    }
    case StepKind::If: {
      const auto start = std::chrono::steady_clock::now();
      const NodeRec& node = *step.if_node;
      // A constant's value is in the file, anything else in the host arena.
      auto value = [&](int t) -> const uint8_t* {
        const TensorRec& r = m.tensors[static_cast<size_t>(t)];
        return r.is_constant() ? r.const_data : tensor_data(t);
      };
      const uint8_t cond = *value(node.inputs[0]);
      const int branch = cond != 0 ? step.then_graph : step.else_graph;
      Status st = run_steps(branch, false);
      if (!st.is_ok()) return st;
      const GraphRec& bg = m.graphs[static_cast<size_t>(branch)];
      for (size_t k = 0; k < bg.outputs.size(); ++k) {
        const uint8_t* src = value(bg.outputs[k]);
        uint8_t* dst = tensor_data(node.outputs[k]);
        const uint64_t bytes = m.tensors[static_cast<size_t>(node.outputs[k])].byte_size;
        if (src != dst && bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
      }
      if (step.placement >= 0) {
        if_ns_[static_cast<size_t>(step.placement)] += static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
      }
      return Status::ok();
    }
  }
  return Status(KITE_ERROR_INTERNAL, "unknown schedule step");
}

Status Session::run_steps(int graph, bool defer_final_syncs) {
  for (const Step& step : schedule_.steps[static_cast<size_t>(graph)]) {
    if (step.final_sync) {
      if (defer_final_syncs) continue;
      break;  // the run's end: finish_run does these after end_run
    }
    Status st = run_step(step);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

Status Session::finish_run() {
  Status first;
  for (Slot& slot : slots_) {
    if (slot.kernels == 0) continue;
    Status st = slot.instance->end_run();
    if (!st.is_ok() && first.is_ok()) first = st;
  }
  if (first.is_ok()) {
    for (const Step& step : schedule_.steps[0]) {
      if (!step.final_sync) continue;
      Status st = run_step(step);
      if (!st.is_ok()) {
        first = st;
        break;
      }
    }
  }
  in_flight_ = false;
  if (!first.is_ok()) {
    abandon_run();
    return first;
  }
  if (profiling_) collect_profile();
  return Status::ok();
}

// After a failed step: waits for whatever is still queued, ignoring errors,
// so that nothing the devices still do touches memory freed afterwards.
void Session::abandon_run() {
  in_flight_ = false;
  for (Slot& slot : slots_) {
    if (slot.device && slot.kernels > 0) (void)slot.instance->synchronize();
  }
}

Status Session::run() {
  Status st = run_async();
  if (!st.is_ok()) return st;
  return wait();
}

Status Session::run_async() {
  if (lost_) return Status(KITE_ERROR_DEVICE_LOST, "the session's device was lost earlier: " + lost_message_);
  if (in_flight_) return Status(KITE_ERROR_INVALID_ARGUMENT, "a run is already in flight: call kite_session_wait first");
  stats_ = RunStats{};
  std::fill(kernel_ran_.begin(), kernel_ran_.end(), 0);
  std::fill(if_ns_.begin(), if_ns_.end(), 0);
  for (const auto& r : poison_ranges_) {
    std::memset(host_arena_ + r.first, 0xFF, static_cast<size_t>(r.second - r.first));
  }
  in_flight_ = true;
  Status st;
  for (Slot& slot : slots_) {
    if (slot.kernels == 0) continue;
    st = slot.instance->begin_run();
    if (!st.is_ok()) break;
  }
  if (st.is_ok()) st = run_steps(0, false);
  if (!st.is_ok()) {
    if (st.code() == KITE_ERROR_DEVICE_LOST) {
      lost_ = true;
      lost_message_ = st.message();
    }
    abandon_run();
    return st;
  }
  return Status::ok();
}

Status Session::wait() {
  if (!in_flight_) return Status::ok();
  Status st = finish_run();
  if (st.code() == KITE_ERROR_DEVICE_LOST) {
    lost_ = true;
    lost_message_ = st.message();
  }
  return st;
}

void Session::collect_profile() {
  std::vector<uint64_t> ns(profile_.size(), 0);
  std::vector<char> measured(profile_.size(), 0);
  for (size_t k = 0; k < kernels_.size(); ++k) {
    const int p = schedule_.kernels[k].placement;
    if (p < 0 || !kernel_ran_[k]) continue;
    uint64_t t = 0;
    if (slots_[static_cast<size_t>(kernels_[k].backend)].instance->kernel_time(kernels_[k].handle, &t)) {
      ns[static_cast<size_t>(p)] += t;
      measured[static_cast<size_t>(p)] = 1;
    }
  }
  for (size_t p = 0; p < profile_.size(); ++p) {
    if (schedule_.placements[p].backend == "session") {
      ns[p] = if_ns_[p];
      measured[p] = 1;
    }
    if (!measured[p]) continue;
    profile_[p].measured = true;
    profile_[p].runs += 1;
    profile_[p].total_ns += ns[p];
  }
}

void Session::reset_profile() { profile_.assign(profile_.size(), NodeProfile{}); }

std::vector<BackendUsage> Session::backend_usage() const {
  std::vector<BackendUsage> out;
  std::vector<int> segments(slots_.size(), 0);
  for (const SegmentRec& s : schedule_.segments) ++segments[static_cast<size_t>(s.backend)];
  for (size_t b = 0; b < slots_.size(); ++b) {
    const Slot& slot = slots_[b];
    BackendUsage u;
    u.name = slot.instance->name();
    u.device_name = slot.instance->device() ? slot.instance->device()->info().name : "";
    u.device_index = slot.instance->device() ? slot.instance->device()->index() : 0;
    u.abi_version = static_cast<int>(slot.instance->table().version());
    u.device_memory = slot.device;
    u.unified = slot.shares_host;
    u.weights_imported = slot.weights_imported;
    u.kernels = slot.kernels;
    u.segments = segments[b];
    u.weight_uploads = slot.weight_uploads;
    u.arena_bytes = slot.arena_bytes;
    u.weights_bytes = slot.weights_bytes;
    u.workspace_bytes = slot.workspace_bytes;
    out.push_back(u);
  }
  for (size_t i = 0; i < unavailable_names_.size(); ++i) {
    BackendUsage u;
    u.name = unavailable_names_[i];
    u.available = false;
    u.reason = unavailable_[i];
    out.push_back(u);
  }
  return out;
}

}  // namespace kite::rt
