#include "backend.h"

#include <algorithm>
#include <cstring>

#include "kernels/kernels.h"
#include "kite/abi/plugin.h"

namespace kite::vk {

struct Segment {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  std::vector<Kernel*> kernels;
  VkFence in_flight = VK_NULL_HANDLE;  // fence of its last submission until waited
};

namespace {

// Status records written by kernels (shaders/gather.comp): flag, node, value.
constexpr uint32_t kStatusWords = 4;

std::string tensor_name(const kite_backend_tensor2* t) {
  return t && t->name ? t->name : "";
}

kite_status device_lost_status() { return KITE_ERROR_DEVICE_LOST; }

}  // namespace

Backend::Backend(Device* device, const kite_backend_create_info* info)
    : device_(device), fn_(device->fn()) {
  profile_ = info && info->profile != 0 && device->limits().timestamp_period_ns > 0.0f;
  unified_ = device->physical().unified;
  lanes_ = device->physical().properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

kite_status Backend::init(const kite_backend_create_info* info, std::string* err) {
  std::vector<abi::BackendOption> options;
  *err = abi::backend_options(info, &options);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  for (const abi::BackendOption& option : options) {
    const std::string& key = option.key;
    const std::string& value = option.value;
    if (key == "kernels") {
      if (value != "tiled" && value != "lanes" && value != "auto") {
        *err = "Vulkan backend option kernels=" + value + ": expected tiled, lanes or auto";
        return KITE_ERROR_INVALID_ARGUMENT;
      }
      if (value != "auto") lanes_ = value == "lanes";
      continue;
    }
    bool on = false;
    *err = abi::parse_flag_option("Vulkan", key, value, &on);
    if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
    if (key == "unified") {
      // unified=0: the discrete-GPU path (device-local buffers, staging
      // copies) even where the memory is shared; unified=1 where it is not
      // is refused.
      if (on && !device_->physical().unified) {
        *err = "Vulkan backend option unified=1: the memory of '" + device_->physical().name +
               "' is not shared with the host";
        return KITE_ERROR_INVALID_ARGUMENT;
      }
      unified_ = on;
    } else if (key == "validation_selftest") {
      selftest_misuse_ = on;
    } else if (key == "simulate_device_lost") {
      simulate_lost_ = on;
    } else if (key == "debug_skip_barriers") {
      // Test-only mutation: no barriers between dispatches, so that a test
      // can show synchronization validation catching the hazards.
      skip_barriers_ = on;
    } else {
      *err = "unknown Vulkan backend option '" + key +
             "' (known: unified, kernels, validation_selftest, simulate_device_lost, debug_skip_barriers)";
      return KITE_ERROR_INVALID_ARGUMENT;
    }
  }
  if (info && info->external_queue) {
    *err = "the Vulkan backend does not take an external queue";
    return KITE_ERROR_UNSUPPORTED;
  }
  validation_baseline_ = device_->instance().validation_log().count.load();
  VkCommandPoolCreateInfo pool_info = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = device_->physical().queue_family;
  VkResult r = fn_.vkCreateCommandPool(device_->handle(), &pool_info, nullptr, &pool_);
  if (r != VK_SUCCESS) {
    pool_ = VK_NULL_HANDLE;
    return vk_fail(r, "vkCreateCommandPool", err);
  }
  kite_status s = create_buffer(kStatusWords * 4, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true, false, &status_, err);
  if (s != KITE_OK) return s;
  std::memset(status_->mapped, 0, kStatusWords * 4);
  if (selftest_misuse_) {
    // A deliberate misuse the validation layer reports (a buffer without a
    // usage flag: VUID-VkBufferCreateInfo-usage-requiredbitmask), so a test
    // can prove that the layer is active.
    VkBufferCreateInfo info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    info.size = 256;
    info.usage = 0;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer b = VK_NULL_HANDLE;
    if (fn_.vkCreateBuffer(device_->handle(), &info, nullptr, &b) == VK_SUCCESS) {
      fn_.vkDestroyBuffer(device_->handle(), b, nullptr);
    }
  }
  return KITE_OK;
}

Backend::~Backend() {
  std::string ignored;
  // Nothing can be waited for on a lost device; destroy what we own.
  if (fatal_.empty() && !device_->lost() && pool_) flush(true, &ignored);
  for (Segment* s : segments_) delete s;
  for (Kernel* k : kernels_) delete k;
  VkDevice dev = device_->handle();
  for (VkFence f : free_fences_) fn_.vkDestroyFence(dev, f, nullptr);
  for (const Submission& s : in_flight_) {
    if (s.fence) fn_.vkDestroyFence(dev, s.fence, nullptr);
  }
  if (query_pool_) fn_.vkDestroyQueryPool(dev, query_pool_, nullptr);
  if (descriptors_) fn_.vkDestroyDescriptorPool(dev, descriptors_, nullptr);
  if (pool_) fn_.vkDestroyCommandPool(dev, pool_, nullptr);
  buffer_free(staging_);
  buffer_free(status_);
}

kite_status Backend::vk_fail(VkResult r, const std::string& what, std::string* err) {
  if (r == VK_ERROR_DEVICE_LOST) {
    device_->mark_lost();
    fatal_ = "the Vulkan device '" + device_->physical().name + "' was lost (" + what +
             " returned VK_ERROR_DEVICE_LOST); the session cannot continue";
    *err = fatal_;
    return device_lost_status();
  }
  *err = what + " failed: " + result_name(r);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return KITE_ERROR_OUT_OF_MEMORY;
  return KITE_ERROR_BACKEND;
}

kite_status Backend::check_health(std::string* err) {
  if (!fatal_.empty()) {
    *err = fatal_;
    return device_lost_status();
  }
  if (device_->lost()) {
    fatal_ = "the Vulkan device '" + device_->physical().name + "' was lost; the session cannot continue";
    *err = fatal_;
    return device_lost_status();
  }
  ValidationLog& log = device_->instance().validation_log();
  const uint64_t count = log.count.load();
  if (count != validation_baseline_) {
    const uint64_t fresh = count - validation_baseline_;
    validation_baseline_ = count;
    std::lock_guard<std::mutex> lock(log.mutex);
    *err = "Vulkan validation layer reported " + std::to_string(fresh) + " message" +
           (fresh == 1 ? "" : "s") + "; the last: " + log.last;
    return KITE_ERROR_BACKEND;
  }
  return KITE_OK;
}

// ---------------------------------------------------------------- nodes --

std::string Backend::plan(const kite_backend_node2& node, Kernel* out, std::string* label) {
  NodeView view;
  const KernelEntry* entry = nullptr;
  const std::string why = kernels().select(node, &view, label, &entry);
  if (!why.empty()) return why;
  // Tensors must fit one descriptor range and 32-bit addressing.
  const Limits& limits = device_->limits();
  for (int32_t i = 0; i < node.num_inputs + node.num_outputs; ++i) {
    const kite_backend_tensor2* t = i < node.num_inputs ? node.inputs[i] : node.outputs[i - node.num_inputs];
    if (!t) continue;
    if (t->byte_size + limits.min_storage_offset_alignment > limits.max_storage_buffer_range) {
      return "tensor '" + tensor_name(t) + "' has " + std::to_string(t->byte_size) +
             " bytes, more than the device's maxStorageBufferRange " +
             std::to_string(limits.max_storage_buffer_range);
    }
  }
  PlanContext ctx{device_->limits(), device_->physical()};
  ctx.lanes = lanes_;
  // float16 tensors: only where the shaders have half variants, and only
  // when every float tensor of the node is float16 (a Cast has its own
  // shaders; Resize's roi and scales stay float32).
  if (entry->plan != plan_cast) {
    bool half = false;
    const std::string dtypes = view.op.op == "Resize" ? float_dtypes(view, ctx, &half, {1, 2})
                                                      : float_dtypes(view, ctx, &half);
    if (!dtypes.empty()) return dtypes;
    if (half && !half_plan(entry->plan)) {
      return "float16 " + view.op.op + " has no Vulkan kernel (it computes in float32; kite-convert keeps it so)";
    }
  }
  out->label = *label;
  out->op = view.op.op;
  out->node_index = node.index;
  return entry->plan(view, ctx, out);
}

kite_status Backend::prepare(const kite_backend_node2& node, Kernel** out, std::string* err) {
  auto kernel = std::make_unique<Kernel>();
  std::string label;
  const std::string why = plan(node, kernel.get(), &label);
  if (!why.empty()) {
    *err = (label.empty() ? std::string("node") : label) + ": " + why;
    return KITE_ERROR_UNSUPPORTED;
  }
  // Pipelines are built now (session creation), not in the first run.
  for (const Dispatch& d : kernel->dispatches) {
    std::string perr;
    if (device_->pipeline(d.shader, &perr) == VK_NULL_HANDLE) {
      *err = label + ": " + perr;
      return KITE_ERROR_BACKEND;
    }
  }
  if (!kernel->table.empty()) {
    kernel->table_offset = workspace_bytes_;
    const uint64_t align = device_->limits().min_storage_offset_alignment;
    workspace_bytes_ += (kernel->table.size() * 4 + align - 1) / align * align;
  }
  if (profile_) {
    kernel->query = queries_;
    queries_ += 2;
  }
  kernels_.push_back(kernel.get());
  *out = kernel.release();
  return KITE_OK;
}

void Backend::release(Kernel* kernel) {
  if (!kernel) return;
  kernels_.erase(std::remove(kernels_.begin(), kernels_.end(), kernel), kernels_.end());
  delete kernel;
}

kite_status Backend::bind(const kite_backend_bindings& b, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (b.struct_size < sizeof(kite_backend_bindings)) {
    *err = "bindings have an old struct_size";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  workspace_ = b.workspace;
  if (workspace_bytes_ > 0 && (!workspace_ || workspace_->size < workspace_bytes_)) {
    *err = "the workspace has " + std::to_string(workspace_ ? workspace_->size : 0) + " bytes, the kernels need " +
           std::to_string(workspace_bytes_);
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  const VkDevice dev = device_->handle();
  const Limits& limits = device_->limits();
  if (descriptors_) {
    fn_.vkDestroyDescriptorPool(dev, descriptors_, nullptr);
    descriptors_ = VK_NULL_HANDLE;
  }
  // Resolve operands; count descriptors.
  uint32_t sets = 0, descriptors = 0;
  for (Kernel* k : kernels_) {
    for (Dispatch& d : k->dispatches) {
      for (Operand& o : d.operands) {
        if (o.kind == Operand::Kind::kTable) {
          o.buffer = workspace_;
          o.begin = k->table_offset;
          o.end = k->table_offset + k->table.size() * 4;
          continue;
        }
        if (o.kind == Operand::Kind::kStatus) {
          o.buffer = status_;
          o.begin = 0;
          o.end = kStatusWords * 4;
          continue;
        }
        const kite_backend_tensor2* t = o.tensor;
        if (!t || !t->buffer) {
          *err = k->label + ": tensor '" + tensor_name(t) + "' has no device buffer at bind";
          return KITE_ERROR_INVALID_ARGUMENT;
        }
        o.buffer = t->buffer;
        const uint64_t unit = unit_bytes(t);
        if (t->offset % unit != 0 || t->offset > o.buffer->size || t->byte_size > o.buffer->size - t->offset) {
          *err = k->label + ": tensor '" + tensor_name(t) + "' at offset " + std::to_string(t->offset) + " (" +
                 std::to_string(t->byte_size) + " bytes) does not fit its buffer of " +
                 std::to_string(o.buffer->size) + " bytes or is not " + std::to_string(unit) +
                 "-byte aligned";
          return KITE_ERROR_INVALID_ARGUMENT;
        }
        o.begin = t->offset + static_cast<uint64_t>(o.extra_words) * unit;
        o.end = o.span_bytes ? o.begin + o.span_bytes : t->offset + t->byte_size;
        if (o.end > t->offset + t->byte_size || o.begin > o.end) {
          *err = k->label + ": a dispatch reaches outside tensor '" + tensor_name(t) + "'";
          return KITE_ERROR_INTERNAL;
        }
      }
      d.elided = d.elide_if_aliased && d.operands[0].buffer == d.operands[1].buffer &&
                 d.operands[0].begin == d.operands[1].begin;
      if (d.elided) continue;
      ++sets;
      descriptors += static_cast<uint32_t>(d.operands.size());
    }
  }
  if (sets > 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
    VkDescriptorPoolCreateInfo info = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    info.maxSets = sets;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    VkResult r = fn_.vkCreateDescriptorPool(dev, &info, nullptr, &descriptors_);
    if (r != VK_SUCCESS) {
      descriptors_ = VK_NULL_HANDLE;
      return vk_fail(r, "vkCreateDescriptorPool", err);
    }
  }
  const uint64_t align = limits.min_storage_offset_alignment;
  for (Kernel* k : kernels_) {
    for (Dispatch& d : k->dispatches) {
      if (d.elided) continue;
      const uint32_t count = static_cast<uint32_t>(d.operands.size());
      VkDescriptorSetLayout layout = device_->set_layout(count);
      VkDescriptorSetAllocateInfo ai = vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
      ai.descriptorPool = descriptors_;
      ai.descriptorSetCount = 1;
      ai.pSetLayouts = &layout;
      VkResult r = fn_.vkAllocateDescriptorSets(dev, &ai, &d.set);
      if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateDescriptorSets", err);
      std::vector<VkDescriptorBufferInfo> infos(count);
      std::vector<VkWriteDescriptorSet> writes(count);
      d.push.fill(0);
      for (uint32_t i = 0; i < count; ++i) {
        Operand& o = d.operands[i];
        // The bytes the binding covers: from the aligned offset at or below
        // the tensor (the shader adds the remaining words, a push constant)
        // to its end; a part with a known span (a Concat input's slice)
        // only that span.
        const bool tensor = o.kind == Operand::Kind::kTensor;
        const uint64_t base = tensor && !o.span_bytes ? o.tensor->offset : o.begin;
        const uint64_t first = base / align * align;
        const uint64_t last = o.end;
        uint64_t range = (std::max(last, first + 4) - first + 3) / 4 * 4;
        range = std::min(range, o.buffer->size - first);
        if (range > limits.max_storage_buffer_range) {
          *err = k->label + ": a binding of " + std::to_string(range) + " bytes passes maxStorageBufferRange " +
                 std::to_string(limits.max_storage_buffer_range);
          return KITE_ERROR_UNSUPPORTED;
        }
        infos[i] = {o.buffer->buffer, first, range};
        writes[i] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
        writes[i].dstSet = d.set;
        writes[i].dstBinding = i;
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
        const uint64_t words = (base - first) / (tensor ? unit_bytes(o.tensor) : 4) +
                               (tensor && !o.span_bytes ? o.extra_words : 0);
        d.push[i] = static_cast<uint32_t>(words);
        // Barriers are decided on what the binding covers (what
        // synchronization validation checks), not only the bytes used.
        o.begin = first;
        o.end = first + range;
      }
      fn_.vkUpdateDescriptorSets(dev, count, writes.data(), 0, nullptr);
      if (count + d.params.size() > d.push.size()) {
        *err = k->label + ": too many push constants";
        return KITE_ERROR_INTERNAL;
      }
      std::copy(d.params.begin(), d.params.end(), d.push.begin() + count);
    }
  }
  if (profile_ && queries_ > 0 && !query_pool_) {
    VkQueryPoolCreateInfo qi = vk_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = queries_;
    VkResult r = fn_.vkCreateQueryPool(dev, &qi, nullptr, &query_pool_);
    if (r != VK_SUCCESS) {
      query_pool_ = VK_NULL_HANDLE;
      return vk_fail(r, "vkCreateQueryPool", err);
    }
  }
  // Constant tables into the workspace, once.
  for (Kernel* k : kernels_) {
    if (k->table.empty()) continue;
    kite_backend_tensor2 t{};
    t.struct_size = sizeof(t);
    t.name = "workspace table";
    t.dtype = KITE_DTYPE_INT32;
    t.byte_size = k->table.size() * 4;
    t.buffer = workspace_;
    t.offset = k->table_offset;
    s = upload(t, k->table.data(), err);
    if (s != KITE_OK) return s;
  }
  s = flush(true, err);
  if (s != KITE_OK) return s;
  bound_ = true;
  return check_health(err);
}

// -------------------------------------------------------------- buffers --

kite_status Backend::create_buffer(uint64_t size, VkBufferUsageFlags usage, bool host_visible,
                                   bool prefer_device_local, Buffer** out, std::string* err) {
  const VkDevice dev = device_->handle();
  const Limits& limits = device_->limits();
  if (size == 0) size = 4;
  if (limits.max_memory_allocation && size > limits.max_memory_allocation) {
    *err = "a buffer of " + std::to_string(size) + " bytes passes the device's maxMemoryAllocationSize " +
           std::to_string(limits.max_memory_allocation);
    return KITE_ERROR_OUT_OF_MEMORY;
  }
  auto b = std::make_unique<Buffer>();
  b->size = size;
  VkBufferCreateInfo info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = fn_.vkCreateBuffer(dev, &info, nullptr, &b->buffer);
  if (r != VK_SUCCESS) {
    b->buffer = VK_NULL_HANDLE;
    return vk_fail(r, "vkCreateBuffer (" + std::to_string(size) + " bytes)", err);
  }
  VkMemoryRequirements req;
  fn_.vkGetBufferMemoryRequirements(dev, b->buffer, &req);
  const VkMemoryPropertyFlags required =
      host_visible ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : 0;
  const VkMemoryPropertyFlags preferred = prefer_device_local ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT : 0;
  const uint32_t type = device_->memory_type(req.memoryTypeBits, required, preferred);
  if (type == UINT32_MAX) {
    fn_.vkDestroyBuffer(dev, b->buffer, nullptr);
    *err = std::string("no ") + (host_visible ? "host-visible, coherent " : "") + "memory type for a buffer";
    return KITE_ERROR_BACKEND;
  }
  VkMemoryAllocateInfo ai = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  r = fn_.vkAllocateMemory(dev, &ai, nullptr, &b->memory);
  if (r != VK_SUCCESS) {
    b->memory = VK_NULL_HANDLE;
    fn_.vkDestroyBuffer(dev, b->buffer, nullptr);
    const kite_status st = vk_fail(r, "vkAllocateMemory", err);
    if (st == KITE_ERROR_OUT_OF_MEMORY) {
      *err = "out of Vulkan device memory allocating " + std::to_string(size) + " bytes on '" +
             device_->physical().name + "' (" + result_name(r) + ")";
    }
    return st;
  }
  r = fn_.vkBindBufferMemory(dev, b->buffer, b->memory, 0);
  if (r == VK_SUCCESS && host_visible) r = fn_.vkMapMemory(dev, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped);
  if (r != VK_SUCCESS) {
    fn_.vkFreeMemory(dev, b->memory, nullptr);
    fn_.vkDestroyBuffer(dev, b->buffer, nullptr);
    return vk_fail(r, "binding or mapping buffer memory", err);
  }
  *out = b.release();
  return KITE_OK;
}

kite_status Backend::buffer_alloc(uint64_t size, kite_buffer_usage usage, Buffer** out, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  const VkBufferUsageFlags flags = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // Unified: host-visible device memory, mapped for the runtime. Otherwise
  // device-local memory reached through staging copies.
  s = create_buffer(size, flags, unified_, true, out, err);
  if (s == KITE_OK) (*out)->usage = usage;
  return s;
}

void Backend::buffer_free(Buffer* b) {
  if (!b) return;
  // Work queued before the free may still use the buffer: finish it first
  // (on a lost device nothing runs any more).
  if ((pending_ || !in_flight_.empty()) && fatal_.empty() && !device_->lost()) {
    std::string ignored;
    flush(true, &ignored);
  }
  const VkDevice dev = device_->handle();
  if (b->mapped) fn_.vkUnmapMemory(dev, b->memory);
  if (b->buffer) fn_.vkDestroyBuffer(dev, b->buffer, nullptr);
  if (b->memory) fn_.vkFreeMemory(dev, b->memory, nullptr);
  if (b == workspace_) workspace_ = nullptr;
  delete b;
}

kite_status Backend::buffer_map(Buffer* b, void** out, std::string* err) {
  if (!unified_ || !b->mapped) {
    *err = "this Vulkan instance does not map its buffers (device memory is not unified, or unified=0)";
    return KITE_ERROR_UNSUPPORTED;
  }
  *out = b->mapped;
  return KITE_OK;
}

kite_status Backend::ensure_staging(uint64_t bytes, std::string* err) {
  if (staging_ && staging_used_ + bytes <= staging_->size) return KITE_OK;
  // Everything recorded so far reads or writes the staging buffer: finish
  // it before reusing or replacing the memory.
  kite_status s = flush(true, err);
  if (s != KITE_OK) return s;
  staging_used_ = 0;
  if (staging_ && bytes <= staging_->size) return KITE_OK;
  buffer_free(staging_);
  staging_ = nullptr;
  const uint64_t size = std::max<uint64_t>(bytes, 1u << 20);
  return create_buffer(size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, true, false,
                       &staging_, err);
}

kite_status Backend::upload(const kite_backend_tensor2& dst, const void* src, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  Buffer* b = dst.buffer;
  *err = abi::check_tensor_range("upload", dst, b != nullptr, b ? b->size : 0);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  if (dst.byte_size == 0) return KITE_OK;
  if (b->mapped) {
    // Work queued earlier may still read these bytes.
    if (pending_ || !in_flight_.empty()) {
      s = flush(true, err);
      if (s != KITE_OK) return s;
    }
    std::memcpy(static_cast<char*>(b->mapped) + dst.offset, src, dst.byte_size);
    return KITE_OK;
  }
  s = ensure_staging((dst.byte_size + 15) / 16 * 16, err);
  if (s != KITE_OK) return s;
  const uint64_t at = staging_used_;
  staging_used_ += (dst.byte_size + 15) / 16 * 16;
  std::memcpy(static_cast<char*>(staging_->mapped) + at, src, dst.byte_size);
  s = begin_pending(err);
  if (s != KITE_OK) return s;
  hazard(pending_, &pending_hazards_, {}, {{b, dst.offset, dst.offset + dst.byte_size}});
  VkBufferCopy region{at, dst.offset, dst.byte_size};
  fn_.vkCmdCopyBuffer(pending_, staging_->buffer, b->buffer, 1, &region);
  return KITE_OK;
}

kite_status Backend::download(void* dst, const kite_backend_tensor2& src, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  Buffer* b = src.buffer;
  *err = abi::check_tensor_range("download", src, b != nullptr, b ? b->size : 0);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  if (b->mapped) {
    s = flush(true, err);
    if (s != KITE_OK) return s;
    std::memcpy(dst, static_cast<const char*>(b->mapped) + src.offset, src.byte_size);
    return KITE_OK;
  }
  if (src.byte_size == 0) return flush(true, err);
  s = ensure_staging((src.byte_size + 15) / 16 * 16, err);
  if (s != KITE_OK) return s;
  const uint64_t at = staging_used_;
  staging_used_ += (src.byte_size + 15) / 16 * 16;
  s = begin_pending(err);
  if (s != KITE_OK) return s;
  hazard(pending_, &pending_hazards_, {{b, src.offset, src.offset + src.byte_size}}, {});
  VkBufferCopy region{src.offset, at, src.byte_size};
  fn_.vkCmdCopyBuffer(pending_, b->buffer, staging_->buffer, 1, &region);
  s = flush(true, err);
  if (s != KITE_OK) return s;
  std::memcpy(dst, static_cast<const char*>(staging_->mapped) + at, src.byte_size);
  return KITE_OK;
}

kite_status Backend::copy_buffer(Buffer* src, uint64_t src_offset, Buffer* dst, uint64_t dst_offset,
                                 uint64_t size, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (!src || !dst) {
    *err = "copy_buffer: a buffer is NULL";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  *err = abi::check_copy_ranges(src_offset, src->size, dst_offset, dst->size, size);
  if (!err->empty()) return KITE_ERROR_INVALID_ARGUMENT;
  if (size == 0) return KITE_OK;
  s = begin_pending(err);
  if (s != KITE_OK) return s;
  hazard(pending_, &pending_hazards_, {{src, src_offset, src_offset + size}}, {{dst, dst_offset, dst_offset + size}});
  VkBufferCopy region{src_offset, dst_offset, size};
  fn_.vkCmdCopyBuffer(pending_, src->buffer, dst->buffer, 1, &region);
  return KITE_OK;
}

// ------------------------------------------------------------ recording --

void Backend::global_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier barrier = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                          VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  fn_.vkCmdPipelineBarrier(cb,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                               VK_PIPELINE_STAGE_HOST_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                               VK_PIPELINE_STAGE_HOST_BIT,
                           0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void Backend::hazard(VkCommandBuffer cb, Hazards* h, const std::vector<Range>& reads,
                     const std::vector<Range>& writes) {
  auto overlaps = [](const Range& a, const std::vector<Range>& list) {
    for (const Range& b : list) {
      if (a.buffer == b.buffer && a.begin < b.end && b.begin < a.end) return true;
    }
    return false;
  };
  bool conflict = false;
  for (const Range& r : reads) conflict = conflict || overlaps(r, h->writes);
  for (const Range& w : writes) conflict = conflict || overlaps(w, h->writes) || overlaps(w, h->reads);
  if (conflict && !skip_barriers_) {
    global_barrier(cb);
    h->clear();
  }
  h->reads.insert(h->reads.end(), reads.begin(), reads.end());
  h->writes.insert(h->writes.end(), writes.begin(), writes.end());
}

void Backend::record_kernel(VkCommandBuffer cb, Hazards* h, Kernel* k, bool reset_queries) {
  const bool timed = profile_ && query_pool_ && k->query != UINT32_MAX;
  if (timed) {
    if (reset_queries) fn_.vkCmdResetQueryPool(cb, query_pool_, k->query, 2);
    // Kernels do not overlap while profiling, so each time is its own.
    global_barrier(cb);
    h->clear();
    fn_.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_, k->query);
  }
  for (Dispatch& d : k->dispatches) {
    if (d.elided) continue;
    std::vector<Range> reads, writes;
    for (const Operand& o : d.operands) {
      const Range r{o.buffer, o.begin, o.end};
      if (o.access == Access::kRead || o.access == Access::kReadWrite) reads.push_back(r);
      if (o.access == Access::kWrite || o.access == Access::kReadWrite) writes.push_back(r);
    }
    hazard(cb, h, reads, writes);
    std::string ignored;
    const ShaderInfo& info = shader_info(d.shader);
    fn_.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, device_->pipeline(d.shader, &ignored));
    VkPipelineLayout layout = device_->pipeline_layout(info.bindings);
    fn_.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &d.set, 0, nullptr);
    fn_.vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes, d.push.data());
    fn_.vkCmdDispatch(cb, d.groups[0], d.groups[1], d.groups[2]);
  }
  if (timed) {
    global_barrier(cb);
    h->clear();
    fn_.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_, k->query + 1);
  }
}

kite_status Backend::begin_pending(std::string* err) {
  if (pending_) return KITE_OK;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  if (!free_cbs_.empty()) {
    cb = free_cbs_.back();
    free_cbs_.pop_back();
    fn_.vkResetCommandBuffer(cb, 0);
  } else {
    VkCommandBufferAllocateInfo ai = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkResult r = fn_.vkAllocateCommandBuffers(device_->handle(), &ai, &cb);
    if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateCommandBuffers", err);
  }
  VkCommandBufferBeginInfo bi = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = fn_.vkBeginCommandBuffer(cb, &bi);
  if (r != VK_SUCCESS) {
    free_cbs_.push_back(cb);
    return vk_fail(r, "vkBeginCommandBuffer", err);
  }
  global_barrier(cb);
  pending_hazards_.clear();
  pending_ = cb;
  return KITE_OK;
}

kite_status Backend::acquire_fence(VkFence* out, std::string* err) {
  if (!free_fences_.empty()) {
    *out = free_fences_.back();
    free_fences_.pop_back();
    return KITE_OK;
  }
  VkFenceCreateInfo fi = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  VkResult r = fn_.vkCreateFence(device_->handle(), &fi, nullptr, out);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateFence", err);
  return KITE_OK;
}

kite_status Backend::submit(VkCommandBuffer extra, Segment* segment, std::string* err) {
  VkCommandBuffer cbs[2];
  uint32_t count = 0;
  VkCommandBuffer pending = pending_;
  if (pending_) {
    global_barrier(pending_);
    VkResult r = fn_.vkEndCommandBuffer(pending_);
    pending_ = VK_NULL_HANDLE;
    if (r != VK_SUCCESS) {
      free_cbs_.push_back(pending);
      return vk_fail(r, "vkEndCommandBuffer", err);
    }
    cbs[count++] = pending;
  }
  if (extra) cbs[count++] = extra;
  if (count == 0) return KITE_OK;
  VkFence fence = VK_NULL_HANDLE;
  kite_status s = acquire_fence(&fence, err);
  if (s != KITE_OK) {
    if (pending) free_cbs_.push_back(pending);
    return s;
  }
  VkSubmitInfo si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = count;
  si.pCommandBuffers = cbs;
  if (simulate_lost_) {
    simulate_lost_ = false;
    device_->mark_lost();
  }
  const VkResult r = device_->submit(si, fence);
  if (r != VK_SUCCESS) {
    free_fences_.push_back(fence);
    if (pending) free_cbs_.push_back(pending);
    return vk_fail(r, "vkQueueSubmit", err);
  }
  Submission sub;
  sub.cb = pending;
  sub.fence = fence;
  sub.segment = segment;
  if (segment) segment->in_flight = fence;
  in_flight_.push_back(sub);
  return KITE_OK;
}

kite_status Backend::wait_all(std::string* err) {
  const VkDevice dev = device_->handle();
  kite_status result = KITE_OK;
  for (const Submission& s : in_flight_) {
    if (result == KITE_OK) {
      // No timeout: a kernel that never ends is a lost device, which the
      // driver reports.
      const VkResult r = fn_.vkWaitForFences(dev, 1, &s.fence, VK_TRUE, UINT64_MAX);
      if (r != VK_SUCCESS) result = vk_fail(r, "vkWaitForFences", err);
    }
    fn_.vkResetFences(dev, 1, &s.fence);
    free_fences_.push_back(s.fence);
    if (s.cb) free_cbs_.push_back(s.cb);
    if (s.segment) s.segment->in_flight = VK_NULL_HANDLE;
  }
  in_flight_.clear();
  return result;
}

kite_status Backend::flush(bool wait, std::string* err) {
  kite_status s = submit(VK_NULL_HANDLE, nullptr, err);
  if (s != KITE_OK) return s;
  if (!wait) return KITE_OK;
  s = wait_all(err);
  if (s != KITE_OK) return s;
  staging_used_ = 0;
  return check_status_buffer(err);
}

kite_status Backend::check_status_buffer(std::string* err) {
  if (!status_) return KITE_OK;  // init did not get that far
  uint32_t* words = static_cast<uint32_t*>(status_->mapped);
  if (words[0] == 0) return KITE_OK;
  const int32_t node = static_cast<int32_t>(words[1]);
  const int64_t value = static_cast<int64_t>((static_cast<uint64_t>(words[3]) << 32) | words[2]);
  std::memset(words, 0, kStatusWords * 4);
  std::string label = "node " + std::to_string(node);
  for (Kernel* k : kernels_) {
    if (k->node_index == node && k->uses_status) label = k->label;
  }
  *err = label + ": index " + std::to_string(value) + " is out of range";
  return KITE_ERROR_INVALID_ARGUMENT;
}

// -------------------------------------------------------------- running --

kite_status Backend::execute(Kernel* k, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (!bound_) {
    *err = k->label + ": execute before bind";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  s = begin_pending(err);
  if (s != KITE_OK) return s;
  record_kernel(pending_, &pending_hazards_, k, true);
  return KITE_OK;
}

kite_status Backend::prepare_segment(const kite_backend_segment& seg, Segment** out, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (!bound_) {
    *err = "prepare_segment before bind";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  if (seg.struct_size < sizeof(kite_backend_segment) || seg.num_kernels < 0 ||
      (seg.num_kernels > 0 && !seg.kernels)) {
    *err = "the segment is malformed";
    return KITE_ERROR_INVALID_ARGUMENT;
  }
  auto segment = std::make_unique<Segment>();
  for (int32_t i = 0; i < seg.num_kernels; ++i) {
    Kernel* k = static_cast<Kernel*>(seg.kernels[i]);
    if (std::find(kernels_.begin(), kernels_.end(), k) == kernels_.end()) {
      *err = "segment kernel " + std::to_string(i) + " is not a kernel of this instance";
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    segment->kernels.push_back(k);
  }
  VkCommandBufferAllocateInfo ai = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = fn_.vkAllocateCommandBuffers(device_->handle(), &ai, &segment->cb);
  if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateCommandBuffers", err);
  VkCommandBufferBeginInfo bi = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  r = fn_.vkBeginCommandBuffer(segment->cb, &bi);
  if (r != VK_SUCCESS) {
    fn_.vkFreeCommandBuffers(device_->handle(), pool_, 1, &segment->cb);
    return vk_fail(r, "vkBeginCommandBuffer", err);
  }
  if (profile_ && query_pool_) {
    for (Kernel* k : segment->kernels) {
      if (k->query != UINT32_MAX) fn_.vkCmdResetQueryPool(segment->cb, query_pool_, k->query, 2);
    }
  }
  global_barrier(segment->cb);
  Hazards h;
  for (Kernel* k : segment->kernels) record_kernel(segment->cb, &h, k, false);
  global_barrier(segment->cb);
  r = fn_.vkEndCommandBuffer(segment->cb);
  if (r != VK_SUCCESS) {
    fn_.vkFreeCommandBuffers(device_->handle(), pool_, 1, &segment->cb);
    return vk_fail(r, "vkEndCommandBuffer", err);
  }
  segments_.push_back(segment.get());
  *out = segment.release();
  return check_health(err);
}

kite_status Backend::execute_segment(Segment* segment, std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  if (segment->in_flight) {
    // Its previous replay has not been waited for: a command buffer may not
    // be pending twice.
    s = wait_all(err);
    if (s != KITE_OK) return s;
  }
  return submit(segment->cb, segment, err);
}

void Backend::release_segment(Segment* segment) {
  if (!segment) return;
  if (segment->in_flight) {
    std::string ignored;
    wait_all(&ignored);
  }
  fn_.vkFreeCommandBuffers(device_->handle(), pool_, 1, &segment->cb);
  segments_.erase(std::remove(segments_.begin(), segments_.end(), segment), segments_.end());
  delete segment;
}

kite_status Backend::end_run(std::string* err) {
  kite_status s = check_health(err);
  if (s != KITE_OK) return s;
  return flush(false, err);
}

kite_status Backend::synchronize(std::string* err) {
  if (!fatal_.empty() || device_->lost()) return check_health(err);
  // Finish the queued work even when a validation message is waiting to be
  // reported, so nothing stays queued behind an error.
  const kite_status s = flush(true, err);
  if (s != KITE_OK) return s;
  return check_health(err);
}

kite_status Backend::kernel_time(Kernel* k, uint64_t* out_ns) {
  if (!profile_ || !query_pool_ || k->query == UINT32_MAX) return KITE_ERROR_UNSUPPORTED;
  uint64_t stamps[2] = {0, 0};
  const VkResult r = fn_.vkGetQueryPoolResults(device_->handle(), query_pool_, k->query, 2, sizeof(stamps),
                                               stamps, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
  if (r != VK_SUCCESS) return KITE_ERROR_UNSUPPORTED;  // not run since its last reset
  const uint32_t bits = device_->limits().timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
  const uint64_t ticks = ((stamps[1] & mask) - (stamps[0] & mask)) & mask;
  *out_ns = static_cast<uint64_t>(static_cast<double>(ticks) * device_->limits().timestamp_period_ns);
  return KITE_OK;
}

}  // namespace kite::vk
