// Thin C++17 RAII wrapper over kite.h. It adds no behaviour: every method is
// one C call, and a failed call throws kite::Error carrying the status and
// kite_last_error().
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kite/kite.h"

namespace kite {

class Error : public std::runtime_error {
 public:
  Error(kite_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  kite_status status() const { return status_; }

 private:
  kite_status status_;
};

inline void check(kite_status status) {
  if (status != KITE_OK) {
    throw Error(status, std::string(kite_status_string(status)) + ": " + kite_last_error());
  }
}

struct TensorInfo {
  std::string name;
  kite_dtype dtype;
  std::vector<int64_t> shape;
  uint64_t byte_size;
};

inline TensorInfo to_info(const kite_tensor_info& c) {
  return TensorInfo{c.name, c.dtype, std::vector<int64_t>(c.shape, c.shape + c.rank), c.byte_size};
}

class Model {
 public:
  static Model load_file(const std::string& path) {
    kite_model* m = nullptr;
    check(kite_model_load_file(path.c_str(), &m));
    return Model(m);
  }
  static Model load_memory(const void* data, size_t size) {
    kite_model* m = nullptr;
    check(kite_model_load_memory(data, size, &m));
    return Model(m);
  }
  kite_model* get() const { return handle_.get(); }
  std::string producer() const { return kite_model_get_producer(handle_.get()); }

 private:
  explicit Model(kite_model* m) : handle_(m, &kite_model_destroy) {}
  std::unique_ptr<kite_model, decltype(&kite_model_destroy)> handle_;
};

class SessionOptions {
 public:
  SessionOptions() : handle_(nullptr, &kite_session_options_destroy) {
    kite_session_options* o = nullptr;
    check(kite_session_options_create(&o));
    handle_.reset(o);
  }
  SessionOptions& backends(const std::string& list) {
    check(kite_session_options_set_backends(handle_.get(), list.c_str()));
    return *this;
  }
  SessionOptions& threads(int32_t n) {
    check(kite_session_options_set_threads(handle_.get(), n));
    return *this;
  }
  SessionOptions& backend_path(const std::string& paths) {
    check(kite_session_options_set_backend_path(handle_.get(), paths.c_str()));
    return *this;
  }
  SessionOptions& backend_option(const std::string& backend, const std::string& key,
                                 const std::string& value) {
    check(kite_session_options_set_backend_option(handle_.get(), backend.c_str(), key.c_str(),
                                                  value.c_str()));
    return *this;
  }
  SessionOptions& device_index(const std::string& backend, int32_t index) {
    check(kite_session_options_set_device_index(handle_.get(), backend.c_str(), index));
    return *this;
  }
  SessionOptions& external_queue(const std::string& backend, void* queue) {
    check(kite_session_options_set_external_queue(handle_.get(), backend.c_str(), queue));
    return *this;
  }
  SessionOptions& precision(uint32_t flags) {
    check(kite_session_options_set_precision(handle_.get(), flags));
    return *this;
  }
  SessionOptions& cache_dir(const std::string& dir) {
    check(kite_session_options_set_cache_dir(handle_.get(), dir.c_str()));
    return *this;
  }
  SessionOptions& profiling(bool on) {
    check(kite_session_options_set_profiling(handle_.get(), on ? 1 : 0));
    return *this;
  }
  const kite_session_options* get() const { return handle_.get(); }

 private:
  std::unique_ptr<kite_session_options, decltype(&kite_session_options_destroy)> handle_;
};

class Session {
 public:
  explicit Session(const Model& model, const SessionOptions* options = nullptr)
      : handle_(nullptr, &kite_session_destroy) {
    kite_session* s = nullptr;
    check(kite_session_create(model.get(), options ? options->get() : nullptr, &s));
    handle_.reset(s);
  }
  int32_t input_count() const {
    int32_t n = 0;
    check(kite_session_get_input_count(handle_.get(), &n));
    return n;
  }
  int32_t output_count() const {
    int32_t n = 0;
    check(kite_session_get_output_count(handle_.get(), &n));
    return n;
  }
  TensorInfo input_info(int32_t index) const {
    kite_tensor_info info;
    check(kite_session_get_input_info(handle_.get(), index, &info));
    return to_info(info);
  }
  TensorInfo output_info(int32_t index) const {
    kite_tensor_info info;
    check(kite_session_get_output_info(handle_.get(), index, &info));
    return to_info(info);
  }
  void set_input(const std::string& name, const void* data, size_t size) {
    check(kite_session_set_input_by_name(handle_.get(), name.c_str(), data, size));
  }
  template <typename T>
  void set_input(const std::string& name, const std::vector<T>& values) {
    set_input(name, values.data(), values.size() * sizeof(T));
  }
  void run() { check(kite_session_run(handle_.get())); }
  void run_async() { check(kite_session_run_async(handle_.get())); }
  void wait() { check(kite_session_wait(handle_.get())); }
  template <typename T>
  std::vector<T> output(const std::string& name) const {
    int32_t index = -1;
    check(kite_session_find_output(handle_.get(), name.c_str(), &index));
    const TensorInfo info = output_info(index);
    std::vector<T> values(static_cast<size_t>(info.byte_size / sizeof(T)));
    check(kite_session_get_output(handle_.get(), index, values.data(), values.size() * sizeof(T)));
    return values;
  }
  kite_session* get() const { return handle_.get(); }

 private:
  std::unique_ptr<kite_session, decltype(&kite_session_destroy)> handle_;
};

}  // namespace kite
