// kite._kite: the Python binding of Kite's C APIs (kite/kite.h for models and
// sessions, kite/converter.h for conversion). python/kite/__init__.py is the
// public face; this file holds everything that touches memory or the GIL.
//
// Sessions: a kite_session must not be used by two threads at once (kite.h),
// so every call that touches one holds the Session's mutex. The mutex is
// taken with the GIL released (a thread waiting for it must not hold the GIL
// the holder needs to return its outputs), and kite_session_run itself runs
// with the GIL released, so other Python threads go on while a model
// computes.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kite/converter.h"
#include "kite/kite.h"

namespace nb = nanobind;

namespace {

// ---- errors -------------------------------------------------------------------

// A failed Kite call; becomes kite.Error (a RuntimeError) with .status (the
// kite_status value) and .status_name ("invalid argument", ...).
struct KiteError {
  kite_status status;
  std::string message;
};

PyObject* g_error_type = nullptr;

[[noreturn]] void raise(kite_status status, const std::string& message) {
  throw KiteError{status, std::string(kite_status_string(status)) + ": " + message};
}

// For kite.h calls: the message is the calling thread's kite_last_error().
void check(kite_status status) {
  if (status != KITE_OK) raise(status, kite_last_error());
}

// For converter calls, whose message is kite_converter_last_error().
void check_converter(kite_status status) {
  if (status != KITE_OK) raise(status, kite_converter_last_error());
}

void translate_errors(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const KiteError& e) {
    nb::object type = nb::borrow(g_error_type);
    nb::object exc = type(nb::str(e.message.c_str()));
    exc.attr("status") = static_cast<int>(e.status);
    exc.attr("status_name") = kite_status_string(e.status);
    PyErr_SetObject(g_error_type, exc.ptr());
  }
}

// ---- dtypes -------------------------------------------------------------------

struct DtypeMap {
  kite_dtype kite;
  nb::dlpack::dtype dl;
  const char* numpy_name;
};

const std::vector<DtypeMap>& dtype_table() {
  using code = nb::dlpack::dtype_code;
  static const std::vector<DtypeMap> table = {
      {KITE_DTYPE_FLOAT32, {static_cast<uint8_t>(code::Float), 32, 1}, "float32"},
      {KITE_DTYPE_FLOAT16, {static_cast<uint8_t>(code::Float), 16, 1}, "float16"},
      {KITE_DTYPE_INT64, {static_cast<uint8_t>(code::Int), 64, 1}, "int64"},
      {KITE_DTYPE_INT32, {static_cast<uint8_t>(code::Int), 32, 1}, "int32"},
      {KITE_DTYPE_INT8, {static_cast<uint8_t>(code::Int), 8, 1}, "int8"},
      {KITE_DTYPE_UINT8, {static_cast<uint8_t>(code::UInt), 8, 1}, "uint8"},
      {KITE_DTYPE_BOOL, {static_cast<uint8_t>(code::Bool), 8, 1}, "bool"},
  };
  return table;
}

const DtypeMap* find_dtype(kite_dtype d) {
  for (const DtypeMap& m : dtype_table()) {
    if (m.kite == d) return &m;
  }
  return nullptr;
}

// numpy's name for an array's dtype, also for dtypes Kite has no use for
// (float64, int16, complex64, ...), so that refusals say what was passed.
std::string dlpack_dtype_name(nb::dlpack::dtype d) {
  using code = nb::dlpack::dtype_code;
  std::string kind;
  switch (static_cast<code>(d.code)) {
    case code::Int: kind = "int"; break;
    case code::UInt: kind = "uint"; break;
    case code::Float: kind = "float"; break;
    case code::Bfloat: kind = "bfloat"; break;
    case code::Complex: kind = "complex"; break;
    case code::Bool: return "bool";
    default: kind = "dtype code " + std::to_string(d.code) + " of ";
  }
  std::string name = kind + std::to_string(d.bits);
  if (d.lanes != 1) name += "x" + std::to_string(d.lanes);
  return name;
}

// ---- tensor descriptions ------------------------------------------------------

struct TensorInfo {
  std::string name;
  kite_dtype dtype;
  std::vector<int64_t> shape;
  uint64_t byte_size;
};

TensorInfo to_info(const kite_tensor_info& c) {
  return TensorInfo{c.name, c.dtype, std::vector<int64_t>(c.shape, c.shape + c.rank), c.byte_size};
}

// The input or output infos of a model or session handle, read through the C
// API's count and info getters for that kind.
template <typename Handle>
std::vector<TensorInfo> read_infos(const Handle* h, kite_status (*count_fn)(const Handle*, int32_t*),
                                   kite_status (*info_fn)(const Handle*, int32_t, kite_tensor_info*)) {
  int32_t n = 0;
  check(count_fn(h, &n));
  std::vector<TensorInfo> infos;
  for (int32_t i = 0; i < n; ++i) {
    kite_tensor_info info;
    check(info_fn(h, i, &info));
    infos.push_back(to_info(info));
  }
  return infos;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

nb::dict info_dict(const TensorInfo& t) {
  nb::dict d;
  d["name"] = t.name;
  const DtypeMap* m = find_dtype(t.dtype);
  d["dtype"] = m ? m->numpy_name : kite_dtype_name(t.dtype);
  nb::list shape;
  for (int64_t v : t.shape) shape.append(v);
  d["shape"] = nb::tuple(shape);
  d["byte_size"] = t.byte_size;
  return d;
}

// ---- models -------------------------------------------------------------------

using ModelPtr = std::shared_ptr<kite_model>;

class Model {
 public:
  explicit Model(const std::string& path) {
    kite_model* m = nullptr;
    {
      nb::gil_scoped_release release;  // mmap + full verification
      const kite_status st = kite_model_load_file(path.c_str(), &m);
      if (st != KITE_OK) raise(st, kite_last_error());
    }
    model_ = ModelPtr(m, &kite_model_destroy);
    path_ = path;
    inputs_ = read_infos(m, kite_model_get_input_count, kite_model_get_input_info);
    outputs_ = read_infos(m, kite_model_get_output_count, kite_model_get_output_info);
  }

  const ModelPtr& handle() const { return model_; }
  const std::string& path() const { return path_; }
  nb::list inputs() const { return info_list(inputs_); }
  nb::list outputs() const { return info_list(outputs_); }
  std::string producer() const { return kite_model_get_producer(model_.get()); }
  nb::tuple format_version() const {
    int32_t major = 0, minor = 0;
    check(kite_model_get_format_version(model_.get(), &major, &minor));
    return nb::make_tuple(major, minor);
  }

 private:
  static nb::list info_list(const std::vector<TensorInfo>& list) {
    nb::list out;
    for (const TensorInfo& t : list) out.append(info_dict(t));
    return out;
  }
  ModelPtr model_;
  std::string path_;
  std::vector<TensorInfo> inputs_, outputs_;
};

// ---- session options ----------------------------------------------------------

// One setter per C option; python/kite/__init__.py maps keyword arguments of
// Model.session() onto them. A new C option is one method here plus one line
// in the binding below and one in __init__.py's table.
class SessionOptions {
 public:
  SessionOptions() {
    kite_session_options* o = nullptr;
    check(kite_session_options_create(&o));
    options_.reset(o);
  }
  void set_backends(const std::string& list) {
    check(kite_session_options_set_backends(options_.get(), list.c_str()));
  }
  void set_threads(int32_t threads) {
    check(kite_session_options_set_threads(options_.get(), threads));
  }
  void set_strict(bool strict) {
    check(kite_session_options_set_strict(options_.get(), strict ? 1 : 0));
  }
  void set_backend_path(const std::string& paths) {
    check(kite_session_options_set_backend_path(options_.get(), paths.c_str()));
  }
  void set_memory_limit(uint64_t bytes) {
    check(kite_session_options_set_memory_limit(options_.get(), bytes));
  }
  void set_poison(bool poison) {
    check(kite_session_options_set_poison(options_.get(), poison ? 1 : 0));
  }
  void set_backend_option(const std::string& backend, const std::string& key,
                          const std::string& value) {
    check(kite_session_options_set_backend_option(options_.get(), backend.c_str(), key.c_str(),
                                                  value.c_str()));
  }
  void set_device_index(const std::string& backend, int32_t index) {
    check(kite_session_options_set_device_index(options_.get(), backend.c_str(), index));
  }
  void set_precision(uint32_t flags) {
    check(kite_session_options_set_precision(options_.get(), flags));
  }
  void set_cache_dir(const std::string& dir) {
    check(kite_session_options_set_cache_dir(options_.get(), dir.c_str()));
  }
  void set_profiling(bool on) {
    check(kite_session_options_set_profiling(options_.get(), on ? 1 : 0));
  }
  const kite_session_options* get() const { return options_.get(); }

 private:
  std::unique_ptr<kite_session_options, decltype(&kite_session_options_destroy)> options_{
      nullptr, &kite_session_options_destroy};
};

// ---- sessions -----------------------------------------------------------------

// Copies one numpy array (any strides) into contiguous memory at dst.
void copy_strided(const uint8_t* src, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& byte_strides, size_t elem, size_t dim,
                  uint8_t** dst) {
  if (dim == shape.size()) {
    std::memcpy(*dst, src, elem);
    *dst += elem;
    return;
  }
  if (dim + 1 == shape.size() && byte_strides[dim] == static_cast<int64_t>(elem)) {
    const size_t bytes = static_cast<size_t>(shape[dim]) * elem;
    std::memcpy(*dst, src, bytes);
    *dst += bytes;
    return;
  }
  for (int64_t i = 0; i < shape[dim]; ++i) {
    copy_strided(src + i * byte_strides[dim], shape, byte_strides, elem, dim + 1, dst);
  }
}

using InputArray = nb::ndarray<nb::ro, nb::device::cpu>;

class Session {
 public:
  Session(const Model& model, const SessionOptions* options) : model_(model.handle()) {
    kite_session* s = nullptr;
    {
      // Plans placement, loads plugins, prepares kernels and allocates the
      // arena: no Python objects involved.
      nb::gil_scoped_release release;
      const kite_status st = kite_session_create(model_.get(), options ? options->get() : nullptr, &s);
      if (st != KITE_OK) raise(st, kite_last_error());
    }
    session_.reset(s);
    inputs_ = read_infos(s, kite_session_get_input_count, kite_session_get_input_info);
    outputs_ = read_infos(s, kite_session_get_output_count, kite_session_get_output_info);
  }

  nb::dict run(nb::dict feeds) {
    // 1. Match every feed to an input and check it, before touching the
    //    session: a refused call changes nothing.
    std::vector<InputArray> arrays(inputs_.size());
    std::vector<bool> given(inputs_.size(), false);
    for (auto item : feeds) {
      if (!nb::isinstance<nb::str>(item.first)) {
        raise(KITE_ERROR_INVALID_ARGUMENT, "input names must be strings, got " +
                                               std::string(nb::str(nb::handle(item.first).type()).c_str()));
      }
      const std::string name = nb::cast<std::string>(item.first);
      const size_t index = find_input(name);
      arrays[index] = to_input_array(inputs_[index], item.second);
      given[index] = true;
    }
    std::string missing;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!given[i]) {
        missing += (missing.empty() ? "'" : ", '") + inputs_[i].name + "' " +
                   shape_text(inputs_[i].shape) + " " + dtype_text(inputs_[i].dtype);
      }
    }
    if (!missing.empty()) {
      raise(KITE_ERROR_INVALID_ARGUMENT, "Session.run: missing input(s) " + missing);
    }

    // 2. One run at a time per session; wait for it without holding the GIL.
    std::unique_lock<std::mutex> lock = lock_session();

    // 3. Copy each input once, straight into the session's arena (with the
    //    GIL held: the arrays belong to Python).
    for (size_t i = 0; i < inputs_.size(); ++i) {
      void* dst = nullptr;
      check(kite_session_get_input_pointer(session_.get(), static_cast<int32_t>(i), &dst));
      copy_input(arrays[i], inputs_[i], static_cast<uint8_t*>(dst));
    }

    // 4. Compute without the GIL.
    kite_status st;
    std::string err;
    {
      nb::gil_scoped_release release;
      st = kite_session_run(session_.get());
      if (st != KITE_OK) err = kite_last_error();
    }
    if (st != KITE_OK) raise(st, err);

    // 5. Outputs: new numpy arrays the caller owns (the arena is reused by
    //    the next run).
    nb::dict result;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const void* src = nullptr;
      check(kite_session_get_output_pointer(session_.get(), static_cast<int32_t>(i), &src));
      result[outputs_[i].name.c_str()] = make_output(outputs_[i], src);
    }
    return result;
  }

  nb::list placement() const {
    return per_node([](int32_t, const kite_node_placement& p, nb::dict& d) {
      d["fused"] = p.fused != 0;
      d["decomposed"] = p.decomposed != 0;
      d["reason"] = p.reason;
    });
  }

  // Per node: {"node", "op", "backend", "runs", "mean_ns", "total_ns", "measured"}.
  nb::list profile() const {
    return per_node([this](int32_t i, const kite_node_placement&, nb::dict& d) {
      kite_node_profile prof;
      check(kite_session_get_node_profile(session_.get(), i, &prof));
      d["runs"] = prof.runs;
      d["total_ns"] = prof.total_ns;
      d["mean_ns"] = prof.mean_ns;
      d["measured"] = prof.measured != 0;
    });
  }

  int32_t transfer_count() const {
    int32_t n = 0;
    check(kite_session_get_transfer_count(session_.get(), &n));
    return n;
  }

  nb::list inputs() const {
    nb::list out;
    for (const TensorInfo& t : inputs_) out.append(info_dict(t));
    return out;
  }
  nb::list outputs() const {
    nb::list out;
    for (const TensorInfo& t : outputs_) out.append(info_dict(t));
    return out;
  }

 private:
  static std::string dtype_text(kite_dtype d) {
    const DtypeMap* m = find_dtype(d);
    return m ? m->numpy_name : kite_dtype_name(d);
  }

  size_t find_input(const std::string& name) const {
    std::string names;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].name == name) return i;
      names += (names.empty() ? "'" : ", '") + inputs_[i].name + "'";
    }
    raise(KITE_ERROR_NOT_FOUND,
          "Session.run: the model has no input '" + name + "' (its inputs: " + names + ")");
  }

  // The feed as an array of exactly the input's dtype and shape; anything
  // else is refused with a message naming the input and what it expects.
  static InputArray to_input_array(const TensorInfo& info, nb::handle value) {
    const std::string expected = "expected " + dtype_text(info.dtype) + " of shape " +
                                 shape_text(info.shape);
    InputArray array;
    if (!nb::try_cast(value, array, /*convert=*/false)) {
      PyErr_Clear();  // a failed buffer request may leave an error set
      if (nb::hasattr(value, "dtype")) {
        // An array nanobind cannot view, e.g. non-native byte order.
        const nb::object dtype_object = value.attr("dtype");
        const std::string dtype = nb::str(nb::handle(dtype_object.ptr())).c_str();
        raise(KITE_ERROR_INVALID_ARGUMENT,
              "input '" + info.name + "': " + expected + ", got an array of dtype " + dtype +
                  " that cannot be read in place (non-native byte order?); pass "
                  "numpy.ascontiguousarray(x, dtype=numpy." + dtype_text(info.dtype) + ")");
      }
      raise(KITE_ERROR_INVALID_ARGUMENT,
            "input '" + info.name + "': " + expected + ", got an object of type " +
                std::string(nb::str(value.type().attr("__name__")).c_str()) +
                " (pass a numpy array, e.g. numpy.asarray(x, dtype=numpy." +
                dtype_text(info.dtype) + "))");
    }
    const DtypeMap* want = find_dtype(info.dtype);
    if (want == nullptr || array.dtype() != want->dl) {
      raise(KITE_ERROR_INVALID_ARGUMENT, "input '" + info.name + "': " + expected + ", got " +
                                             dlpack_dtype_name(array.dtype()) +
                                             " (Kite does not convert dtypes; use astype)");
    }
    std::vector<int64_t> shape(array.ndim());
    for (size_t d = 0; d < array.ndim(); ++d) shape[d] = static_cast<int64_t>(array.shape(d));
    if (shape != info.shape) {
      raise(KITE_ERROR_INVALID_ARGUMENT, "input '" + info.name + "': " + expected +
                                             ", got shape " + shape_text(shape) +
                                             " (the shape is fixed when converting; see "
                                             "kite.convert(input_shapes=...))");
    }
    return array;
  }

  static void copy_input(const InputArray& array, const TensorInfo& info, uint8_t* dst) {
    const size_t elem = kite_dtype_size(info.dtype);
    if (info.byte_size == 0) return;
    std::vector<int64_t> byte_strides(array.ndim());
    bool contiguous = true;
    int64_t expect = static_cast<int64_t>(elem);
    for (size_t d = array.ndim(); d-- > 0;) {
      byte_strides[d] = array.stride(d) * static_cast<int64_t>(elem);
      if (array.shape(d) != 1 && byte_strides[d] != expect) contiguous = false;
      expect *= static_cast<int64_t>(array.shape(d));
    }
    const uint8_t* src = static_cast<const uint8_t*>(array.data());
    if (contiguous) {
      std::memcpy(dst, src, static_cast<size_t>(info.byte_size));
    } else {
      uint8_t* out = dst;
      copy_strided(src, info.shape, byte_strides, elem, 0, &out);
    }
  }

  static nb::object make_output(const TensorInfo& info, const void* src) {
    const DtypeMap* m = find_dtype(info.dtype);
    if (m == nullptr) {
      raise(KITE_ERROR_UNSUPPORTED, "output '" + info.name + "' has dtype " +
                                        kite_dtype_name(info.dtype) + ", which numpy cannot hold");
    }
    const size_t bytes = static_cast<size_t>(info.byte_size);
    void* buf = std::malloc(bytes ? bytes : 1);
    if (buf == nullptr) {
      raise(KITE_ERROR_OUT_OF_MEMORY, "output '" + info.name + "': cannot allocate " +
                                          std::to_string(bytes) + " bytes");
    }
    if (bytes) std::memcpy(buf, src, bytes);
    nb::capsule owner(buf, [](void* p) noexcept { std::free(p); });
    std::vector<size_t> shape(info.shape.begin(), info.shape.end());
    nb::ndarray<nb::numpy> array(buf, shape.size(), shape.data(), owner, nullptr, m->dl);
    return array.cast();
  }

  ModelPtr model_;  // the C session keeps the model alive too; this keeps the handle
  std::unique_ptr<kite_session, decltype(&kite_session_destroy)> session_{nullptr,
                                                                          &kite_session_destroy};
  std::vector<TensorInfo> inputs_, outputs_;
  // Runs of one session are serialized; waiting for the lock releases the
  // GIL so another Python thread's run can finish meanwhile.
  std::unique_lock<std::mutex> lock_session() const {
    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    nb::gil_scoped_release release;
    lock.lock();
    return lock;
  }

  // One dict per node with "node", "op" and "backend", completed by `fill`.
  template <typename Fill>
  nb::list per_node(Fill fill) const {
    std::unique_lock<std::mutex> lock = lock_session();
    int32_t n = 0;
    check(kite_session_get_node_count(session_.get(), &n));
    nb::list out;
    for (int32_t i = 0; i < n; ++i) {
      kite_node_placement p;
      check(kite_session_get_node_placement(session_.get(), i, &p));
      nb::dict d;
      d["node"] = p.node_name;
      d["op"] = p.op;
      d["backend"] = p.backend;
      fill(i, p, d);
      out.append(d);
    }
    return out;
  }

  mutable std::mutex mutex_;
};

// ---- conversion ---------------------------------------------------------------

// Returns the report as JSON text (or None when report is false);
// kite.convert() parses it.
nb::object convert(const std::string& onnx_path, const std::string& kite_path, nb::dict input_shapes,
                   int32_t opt_level, bool report, uint64_t memory_budget,
                   double memory_budget_ratio, bool inplace,
                   std::vector<std::string> disabled_passes, const std::string& precision,
                   double fp16_tolerance, const std::string& pack_for) {
  std::unique_ptr<kite_convert_options, decltype(&kite_convert_options_destroy)> options(
      nullptr, &kite_convert_options_destroy);
  kite_convert_options* o = nullptr;
  check_converter(kite_convert_options_create(&o));
  options.reset(o);
  for (auto item : input_shapes) {
    if (!nb::isinstance<nb::str>(item.first)) {
      raise(KITE_ERROR_INVALID_ARGUMENT, "input_shapes: keys must be input names (str)");
    }
    const std::string name = nb::cast<std::string>(item.first);
    std::vector<int64_t> dims;
    if (!nb::try_cast(item.second, dims)) {
      raise(KITE_ERROR_INVALID_ARGUMENT,
            "input_shapes['" + name + "']: expected a sequence of ints, e.g. (1, 3, 224, 224)");
    }
    check_converter(kite_convert_options_set_input_shape(o, name.c_str(), dims.data(),
                                                         static_cast<int32_t>(dims.size())));
  }
  check_converter(kite_convert_options_set_opt_level(o, opt_level));
  if (memory_budget_ratio > 0) {
    check_converter(kite_convert_options_set_memory_budget_ratio(o, memory_budget_ratio));
  } else {
    check_converter(kite_convert_options_set_memory_budget(o, memory_budget));
  }
  check_converter(kite_convert_options_set_inplace(o, inplace ? 1 : 0));
  check_converter(kite_convert_options_set_precision(o, precision.c_str(), fp16_tolerance));
  check_converter(kite_convert_options_set_pack_for(o, pack_for.c_str()));
  for (const std::string& pass : disabled_passes) {
    check_converter(kite_convert_options_disable_pass(o, pass.c_str()));
  }
  char* json = nullptr;
  kite_status st;
  std::string err;
  {
    nb::gil_scoped_release release;  // conversion takes seconds on big models
    st = kite_convert_file(onnx_path.c_str(), kite_path.c_str(), o, report ? &json : nullptr);
    if (st != KITE_OK) err = kite_converter_last_error();
  }
  if (st != KITE_OK) raise(st, err);
  if (json == nullptr) return nb::none();
  nb::str text(json);
  kite_converter_free_string(json);
  return text;
}

}  // namespace

NB_MODULE(_kite, m) {
  m.doc() = "Kite's C APIs for Python (use the kite package, not this module)";

  g_error_type = PyErr_NewExceptionWithDoc(
      "kite.Error",
      "A failed Kite call. str(e) is Kite's message; e.status is the kite_status value "
      "and e.status_name its name.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::borrow(g_error_type);
  nb::register_exception_translator(translate_errors);

  m.attr("VERSION_STRING") = KITE_VERSION_STRING;  // of the headers this was built with
  m.def("version_string", [] { return std::string(kite_version_string()); });
  m.def("version_number", [] { return kite_version_number(); });
  m.def("converter_version_number", [] { return kite_converter_version_number(); });
  m.attr("PRECISION_FP16_STORAGE") = static_cast<uint32_t>(KITE_PRECISION_FP16_STORAGE);
  m.attr("PRECISION_FP16_COMPUTE") = static_cast<uint32_t>(KITE_PRECISION_FP16_COMPUTE);
  m.attr("PRECISION_TF32") = static_cast<uint32_t>(KITE_PRECISION_TF32);
  m.attr("FORMAT_MAJOR") = KITE_FORMAT_MAJOR;
  m.attr("FORMAT_MINOR") = KITE_FORMAT_MINOR;

  m.def("convert", &convert, nb::arg("onnx_path"), nb::arg("kite_path"), nb::arg("input_shapes"),
        nb::arg("opt_level"), nb::arg("report"), nb::arg("memory_budget"),
        nb::arg("memory_budget_ratio"), nb::arg("inplace"), nb::arg("disabled_passes"),
        nb::arg("precision"), nb::arg("fp16_tolerance"), nb::arg("pack_for"));

  nb::class_<Model>(m, "Model")
      .def(nb::init<const std::string&>(), nb::arg("path"))
      .def_prop_ro("path", &Model::path)
      .def_prop_ro("inputs", &Model::inputs)
      .def_prop_ro("outputs", &Model::outputs)
      .def_prop_ro("producer", &Model::producer)
      .def_prop_ro("format_version", &Model::format_version);

  nb::class_<SessionOptions>(m, "SessionOptions")
      .def(nb::init<>())
      .def("set_backends", &SessionOptions::set_backends)
      .def("set_threads", &SessionOptions::set_threads)
      .def("set_strict", &SessionOptions::set_strict)
      .def("set_backend_path", &SessionOptions::set_backend_path)
      .def("set_memory_limit", &SessionOptions::set_memory_limit)
      .def("set_poison", &SessionOptions::set_poison)
      .def("set_backend_option", &SessionOptions::set_backend_option)
      .def("set_device_index", &SessionOptions::set_device_index)
      .def("set_precision", &SessionOptions::set_precision)
      .def("set_cache_dir", &SessionOptions::set_cache_dir)
      .def("set_profiling", &SessionOptions::set_profiling);

  nb::class_<Session>(m, "Session")
      .def(nb::init<const Model&, const SessionOptions*>(), nb::arg("model"),
           nb::arg("options").none())
      .def("run", &Session::run, nb::arg("feeds"))
      .def("placement", &Session::placement)
      .def("profile", &Session::profile)
      .def_prop_ro("transfer_count", &Session::transfer_count)
      .def_prop_ro("inputs", &Session::inputs)
      .def_prop_ro("outputs", &Session::outputs);
}
