// The C entry points of a backend whose instance is a C++ object, written
// once: argument checks, exceptions turned into statuses with a message
// (nothing thrown may cross the ABI), and the forwarding to the object's
// methods. The Vulkan and CUDA plugins share them; the CPU backend and
// devsim share the message helpers and the table header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kite/abi/status_guard.h"
#include "kite/backend.h"

namespace kite::abi {

// Copies a message into a caller's buffer, truncated and NUL-terminated;
// a NULL or empty buffer takes nothing.
void write_message(char* buffer, size_t size, const std::string& message);

// write_message, then `status`: for the early argument checks.
kite_status fail(char* err, size_t err_size, kite_status status, const std::string& message);

// Range checks of buffer transfers and copies, worded alike on every
// backend. True when [offset, offset + size) lies inside `capacity` bytes
// (no overflow for any values).
inline bool range_fits(uint64_t offset, uint64_t size, uint64_t capacity) {
  return offset <= capacity && size <= capacity - offset;
}
// "<what>: range [offset, +size) is outside its buffer of <capacity> bytes"
std::string range_outside(const std::string& what, uint64_t offset, uint64_t size, uint64_t capacity);
// "" when tensor t's bytes lie in its buffer of buffer_size bytes;
// has_buffer false: it has none. Else why, naming `what` ("upload",
// "download") and the tensor.
std::string check_tensor_range(const char* what, const kite_backend_tensor2& t, bool has_buffer,
                               uint64_t buffer_size);
// "" when copy_buffer's source and target ranges lie in their buffers.
std::string check_copy_ranges(uint64_t src_offset, uint64_t src_capacity, uint64_t dst_offset,
                              uint64_t dst_capacity, uint64_t size);

// One backend option of kite_backend_create_info (a NULL key or value
// reads as "").
struct BackendOption {
  std::string key;
  std::string value;
};
// The options of info (none when info is NULL), in order: "" or "the
// backend options are malformed" (a negative count, or options without
// their arrays).
std::string backend_options(const kite_backend_create_info* info, std::vector<BackendOption>* out);

// A backend option that takes 0 or 1: "" and *out, or
// "<backend> backend option <key>=<value>: expected 0 or 1".
std::string parse_flag_option(const char* backend, const std::string& key, const std::string& value, bool* out);

// A table with its header filled in (this build's ABI version and size, the
// name and the memory kind) and every function NULL.
kite_backend_api backend_api(const char* name, kite_backend_memory memory);

// Runs body(&message); a failing status has its message written to err. An
// exception becomes KITE_ERROR_OUT_OF_MEMORY (bad_alloc) or
// KITE_ERROR_INTERNAL, naming `what` (the entry point), by the rule every C
// entry point follows (kite/abi/status_guard.h).
template <typename F>
kite_status guarded(char* err, size_t err_size, const char* what, F body) {
  return guard_exceptions(
      what,
      [&] {
        std::string message;
        const kite_status s = body(&message);
        if (s != KITE_OK) write_message(err, err_size, message);
        return s;
      },
      [&](kite_status code, const std::string& message) { return fail(err, err_size, code, message); });
}

// For supports2: 1 when why_not() gives "", else 0 with its reason written
// to `reason`. An exception declines with "out of memory" (bad_alloc) or
// "internal error".
template <typename F>
int supported(char* reason, size_t reason_size, F why_not) {
  try {
    const std::string why = why_not();
    if (why.empty()) return 1;
    write_message(reason, reason_size, why);
  } catch (const std::bad_alloc&) {
    write_message(reason, reason_size, "out of memory");
  } catch (...) {
    write_message(reason, reason_size, "internal error");
  }
  return 0;
}

// The entry points of a device-memory plugin over its C++ classes. P names
// them and the two things that differ between plugins:
//
//   struct P {
//     using Device = ...; using Backend = ...; using Kernel = ...;
//     using Segment = ...; using Buffer = ...;   // Buffer: kite_backend_buffer_s
//     static std::string check_tables();          // "" or what is wrong
//     // "" when taken, then *note may say how (kite/backend.h, supports2:
//     // "fp16 storage, fp32 arithmetic" for a float16 node on half kernels).
//     static std::string unsupported(Backend&, const kite_backend_node2&, std::string* note);
//   };
//
// Device::open(options, &message) returns a new Device or NULL; Backend is
// constructed from (Device*, const kite_backend_create_info*) and has the
// methods each entry point forwards to (init, prepare, execute, ...), each
// reporting through a std::string*. Only the functions a plugin puts into
// its table are instantiated: import_host, begin_run and the others that
// not every plugin offers need their method only where they are used.
template <typename P>
struct DevicePlugin {
  using Device = typename P::Device;
  using Backend = typename P::Backend;
  using Kernel = typename P::Kernel;
  using Segment = typename P::Segment;
  using Buffer = typename P::Buffer;

  static Backend* as_backend(void* p) { return static_cast<Backend*>(p); }

  // Runs a method that makes an object of type T, handing it out as a void*
  // or kite_backend_buffer through *out only when it succeeds.
  template <typename T, typename Out, typename F>
  static kite_status make(char* err, size_t err_size, const char* what, Out* out, F body) {
    *out = nullptr;
    return guarded(err, err_size, what, [&](std::string* message) {
      T* made = nullptr;
      const kite_status s = body(&made, message);
      if (s == KITE_OK) *out = made;
      return s;
    });
  }

  static kite_status device_open(const kite_backend_device_options* options, void** out_device, char* err,
                                 size_t err_size) {
    if (!options || !out_device || options->struct_size < sizeof(kite_backend_device_options)) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "options or out_device is NULL, or options are old");
    }
    *out_device = nullptr;
    return guarded(err, err_size, "device_open", [&](std::string* message) {
      Device* device = Device::open(*options, message);
      if (!device) return KITE_ERROR_BACKEND;
      *out_device = device;
      return KITE_OK;
    });
  }

  static void device_close(void* device) {
    try {
      delete static_cast<Device*>(device);
    } catch (...) {
    }
  }

  static kite_status create2(void* device, const kite_backend_create_info* info, void** out_backend, char* err,
                             size_t err_size) {
    if (!device || !out_backend) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "device or out_backend is NULL");
    }
    if (info && info->struct_size < sizeof(kite_backend_create_info)) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "create info has an old struct_size");
    }
    *out_backend = nullptr;
    return guarded(err, err_size, "create2", [&](std::string* message) {
      const std::string table = P::check_tables();
      if (!table.empty()) {
        *message = table;
        return KITE_ERROR_INTERNAL;
      }
      auto backend = std::make_unique<Backend>(static_cast<Device*>(device), info);
      const kite_status s = backend->init(info, message);
      if (s != KITE_OK) return s;
      *out_backend = backend.release();
      return KITE_OK;
    });
  }

  static void destroy(void* backend) {
    try {
      delete as_backend(backend);
    } catch (...) {
    }
  }

  static int supports2(void* backend, const kite_backend_node2* node, char* reason, size_t reason_size) {
    if (!backend || !node) {
      write_message(reason, reason_size, "backend or node is NULL");
      return 0;
    }
    std::string note;
    const int ok = supported(reason, reason_size, [&] { return P::unsupported(*as_backend(backend), *node, &note); });
    if (ok && !note.empty()) write_message(reason, reason_size, note);
    return ok;
  }

  static kite_status prepare2(void* backend, const kite_backend_node2* node, void** out_kernel, char* err,
                              size_t err_size) {
    if (!backend || !node || !out_kernel) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, node or out_kernel is NULL");
    }
    return make<Kernel>(err, err_size, "prepare2", out_kernel, [&](Kernel** k, std::string* message) {
      return as_backend(backend)->prepare(*node, k, message);
    });
  }

  static kite_status execute(void* backend, void* kernel, char* err, size_t err_size) {
    if (!backend || !kernel) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or kernel is NULL");
    return guarded(err, err_size, "execute", [&](std::string* message) {
      return as_backend(backend)->execute(static_cast<Kernel*>(kernel), message);
    });
  }

  static void release(void* backend, void* kernel) {
    if (!backend) return;
    try {
      as_backend(backend)->release(static_cast<Kernel*>(kernel));
    } catch (...) {
    }
  }

  static kite_status synchronize_v1(void* backend) {
    char ignored[8];
    if (!backend) return KITE_ERROR_INVALID_ARGUMENT;
    return guarded(ignored, sizeof ignored, "synchronize",
                   [&](std::string* message) { return as_backend(backend)->synchronize(message); });
  }

  static kite_status workspace_size(void* backend, uint64_t* out_bytes, char* err, size_t err_size) {
    if (!backend || !out_bytes) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or out_bytes is NULL");
    }
    *out_bytes = as_backend(backend)->workspace_bytes();
    return KITE_OK;
  }

  static kite_status bind(void* backend, const kite_backend_bindings* bindings, char* err, size_t err_size) {
    if (!backend || !bindings) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or bindings is NULL");
    }
    return guarded(err, err_size, "bind",
                   [&](std::string* message) { return as_backend(backend)->bind(*bindings, message); });
  }

  static kite_status buffer_alloc(void* backend, uint64_t size, kite_buffer_usage usage, kite_backend_buffer* out,
                                  char* err, size_t err_size) {
    if (!backend || !out) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or out_buffer is NULL");
    return make<Buffer>(err, err_size, "buffer_alloc", out, [&](Buffer** b, std::string* message) {
      return as_backend(backend)->buffer_alloc(size, usage, b, message);
    });
  }

  static void buffer_free(void* backend, kite_backend_buffer buffer) {
    if (!backend) return;
    try {
      as_backend(backend)->buffer_free(buffer);
    } catch (...) {
    }
  }

  static kite_status buffer_map(void* backend, kite_backend_buffer buffer, void** out, char* err, size_t err_size) {
    if (!backend || !buffer || !out) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, buffer or out is NULL");
    }
    return guarded(err, err_size, "buffer_map",
                   [&](std::string* message) { return as_backend(backend)->buffer_map(buffer, out, message); });
  }

  static kite_status import_host(void* backend, const void* host, uint64_t size, kite_backend_buffer* out,
                                 char* err, size_t err_size) {
    if (!backend || !host || !out) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, host or out is NULL");
    }
    return make<Buffer>(err, err_size, "import_host", out, [&](Buffer** b, std::string* message) {
      return as_backend(backend)->import_host(host, size, b, message);
    });
  }

  static kite_status import_external(void* backend, uint64_t handle, uint64_t size, kite_backend_buffer* out,
                                     char* err, size_t err_size) {
    if (!backend || !out) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or out is NULL");
    return make<Buffer>(err, err_size, "import_external", out, [&](Buffer** b, std::string* message) {
      return as_backend(backend)->import_external(handle, size, b, message);
    });
  }

  static kite_status upload(void* backend, const kite_backend_tensor2* dst, const void* src, char* err,
                            size_t err_size) {
    if (!backend || !dst || (!src && dst->byte_size > 0)) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, dst or src is NULL");
    }
    return guarded(err, err_size, "upload",
                   [&](std::string* message) { return as_backend(backend)->upload(*dst, src, message); });
  }

  static kite_status download(void* backend, void* dst, const kite_backend_tensor2* src, char* err,
                              size_t err_size) {
    if (!backend || !src || (!dst && src->byte_size > 0)) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, dst or src is NULL");
    }
    return guarded(err, err_size, "download",
                   [&](std::string* message) { return as_backend(backend)->download(dst, *src, message); });
  }

  static kite_status copy_buffer(void* backend, kite_backend_buffer src, uint64_t src_offset,
                                 kite_backend_buffer dst, uint64_t dst_offset, uint64_t size, char* err,
                                 size_t err_size) {
    if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
    return guarded(err, err_size, "copy_buffer", [&](std::string* message) {
      return as_backend(backend)->copy_buffer(src, src_offset, dst, dst_offset, size, message);
    });
  }

  static kite_status synchronize2(void* backend, char* err, size_t err_size) {
    if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
    return guarded(err, err_size, "synchronize",
                   [&](std::string* message) { return as_backend(backend)->synchronize(message); });
  }

  static kite_status prepare_segment(void* backend, const kite_backend_segment* segment, void** out, char* err,
                                     size_t err_size) {
    if (!backend || !segment || !out) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend, segment or out is NULL");
    }
    return make<Segment>(err, err_size, "prepare_segment", out, [&](Segment** s, std::string* message) {
      return as_backend(backend)->prepare_segment(*segment, s, message);
    });
  }

  static kite_status execute_segment(void* backend, void* segment, char* err, size_t err_size) {
    if (!backend || !segment) {
      return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend or segment is NULL");
    }
    return guarded(err, err_size, "execute_segment", [&](std::string* message) {
      return as_backend(backend)->execute_segment(static_cast<Segment*>(segment), message);
    });
  }

  static void release_segment(void* backend, void* segment) {
    if (!backend) return;
    try {
      as_backend(backend)->release_segment(static_cast<Segment*>(segment));
    } catch (...) {
    }
  }

  static kite_status begin_run(void* backend, char* err, size_t err_size) {
    if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
    return guarded(err, err_size, "begin_run",
                   [&](std::string* message) { return as_backend(backend)->begin_run(message); });
  }

  static kite_status end_run(void* backend, char* err, size_t err_size) {
    if (!backend) return fail(err, err_size, KITE_ERROR_INVALID_ARGUMENT, "backend is NULL");
    return guarded(err, err_size, "end_run",
                   [&](std::string* message) { return as_backend(backend)->end_run(message); });
  }

  static kite_status kernel_time(void* backend, void* kernel, uint64_t* out_ns) {
    if (!backend || !kernel || !out_ns) return KITE_ERROR_INVALID_ARGUMENT;
    try {
      return as_backend(backend)->kernel_time(static_cast<Kernel*>(kernel), out_ns);
    } catch (...) {
      return KITE_ERROR_INTERNAL;
    }
  }

  // The table with every entry point that both GPU plugins offer; the
  // plugin adds device_count and device_info (its own) and the optional
  // ones it implements (import_host, begin_run, end_run, ...).
  static kite_backend_api api(const char* name) {
    kite_backend_api api = backend_api(name, KITE_BACKEND_MEMORY_DEVICE);
    api.destroy = destroy;
    api.execute = execute;
    api.release = release;
    api.synchronize = synchronize_v1;
    api.device_open = device_open;
    api.device_close = device_close;
    api.create2 = create2;
    api.supports2 = supports2;
    api.prepare2 = prepare2;
    api.workspace_size = workspace_size;
    api.bind = bind;
    api.buffer_alloc = buffer_alloc;
    api.buffer_free = buffer_free;
    api.buffer_map = buffer_map;
    api.upload = upload;
    api.download = download;
    api.copy_buffer = copy_buffer;
    api.synchronize2 = synchronize2;
    api.prepare_segment = prepare_segment;
    api.execute_segment = execute_segment;
    api.release_segment = release_segment;
    api.kernel_time = kernel_time;
    return api;
  }
};

}  // namespace kite::abi
