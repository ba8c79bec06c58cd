// CPU backend kernels, driven through the backend C ABI
// (kite_cpu_backend_api()) with hand-built nodes, against independent
// expectations: small hand-computed cases and naive nested-loop references
// written here (they share no code with the kernels).
//
// Tolerances. Elementwise float ops computed the same way as the reference
// must match exactly. A float32 dot product of K terms has a rounding error
// of at most about K * 2^-24 * sum|terms| (each addition rounds once), so
// sums compare against a double reference with bound
// kDotSlack * K * 2^-24 * sum|terms|; kDotSlack = 2 covers the blocked
// summation order. Transcendental functions (libm, a few ulps each) get a
// relative bound of 1e-5 plus 1e-6 absolute.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu_backend.h"
#include "kernel.h"
#include "kernels/common.h"
#include "kernels/depthwise.h"
#include "kernels/fused_common.h"
#include "kernels/sgemm.h"
#include "kernels/stem.h"
#include "kernels/transpose_tiles.h"
#include "kernels/vmath.h"
#include "kernels/winograd.h"
#include "kite/abi/node.h"
#include "kite/backend.h"
#include "kite/ops/op_node.h"
#include "run_mode.h"

namespace {

using Shape = std::vector<int64_t>;
constexpr kite_dtype F32 = KITE_DTYPE_FLOAT32;
constexpr kite_dtype I64 = KITE_DTYPE_INT64;
constexpr kite_dtype I32 = KITE_DTYPE_INT32;
constexpr kite_dtype BOOL = KITE_DTYPE_BOOL;
constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // 2^-24
constexpr double kDotSlack = 2.0;

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

size_t DtypeSize(kite_dtype d) {
  switch (d) {
    case KITE_DTYPE_FLOAT32: case KITE_DTYPE_INT32: return 4;
    case KITE_DTYPE_INT64: return 8;
    case KITE_DTYPE_FLOAT16: return 2;
    default: return 1;
  }
}

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// ---------------------------------------------------------------------------
// A node under test: owns tensors, attributes and the ABI structs.

struct TestTensor {
  std::string name;
  kite_dtype dtype = F32;
  Shape shape;
  std::vector<uint64_t> storage;  // 8-byte aligned bytes
  kite_backend_tensor abi{};

  template <typename T>
  T* data() { return reinterpret_cast<T*>(storage.data()); }
  template <typename T>
  std::vector<T> values() const {
    std::vector<T> v(static_cast<size_t>(Numel(shape)));
    if (!v.empty()) std::memcpy(v.data(), storage.data(), v.size() * sizeof(T));
    return v;
  }
};

class Node {
 public:
  explicit Node(std::string op, std::string name = "node0")
      : op_(std::move(op)), name_(std::move(name)) {}

  template <typename T>
  Node& in(kite_dtype dtype, Shape shape, const std::vector<T>& values, bool constant = false) {
    TestTensor& t = add(inputs_, "in" + std::to_string(inputs_.size()), dtype, std::move(shape));
    EXPECT_EQ(values.size() * sizeof(T), static_cast<size_t>(Numel(t.shape)) * DtypeSize(dtype))
        << "test bug: value count for input " << t.name;
    if (!values.empty()) std::memcpy(t.storage.data(), values.data(), values.size() * sizeof(T));
    t.abi.is_constant = constant ? 1 : 0;
    return *this;
  }
  Node& in(Shape shape, const std::vector<float>& values, bool constant = false) {
    return in<float>(F32, std::move(shape), values, constant);
  }
  Node& in_i64(Shape shape, const std::vector<int64_t>& values, bool constant = true) {
    return in<int64_t>(I64, std::move(shape), values, constant);
  }
  Node& in_i32(Shape shape, const std::vector<int32_t>& values, bool constant = true) {
    return in<int32_t>(I32, std::move(shape), values, constant);
  }
  Node& in_bool(Shape shape, const std::vector<uint8_t>& values, bool constant = false) {
    return in<uint8_t>(BOOL, std::move(shape), values, constant);
  }
  Node& absent() {
    inputs_.emplace_back();
    inputs_.back().name = "";
    absent_.push_back(inputs_.size() - 1);
    return *this;
  }
  Node& out(Shape shape, kite_dtype dtype = F32) {
    TestTensor& t = add(outputs_, "out" + std::to_string(outputs_.size()), dtype, std::move(shape));
    // Poison outputs so an unwritten element shows up.
    if (dtype == F32) {
      for (int64_t i = 0; i < Numel(t.shape); ++i) t.data<float>()[i] = std::nanf("");
    } else {
      std::memset(t.storage.data(), 0x5a, t.storage.size() * 8);
    }
    return *this;
  }
  Node& no_output() {
    outputs_.emplace_back();
    absent_outputs_.push_back(outputs_.size() - 1);
    return *this;
  }
  Node& i(const char* name, int64_t v) { Attr& a = attr(name, KITE_ATTR_INT); a.i = v; return *this; }
  Node& f(const char* name, float v) { Attr& a = attr(name, KITE_ATTR_FLOAT); a.f = v; return *this; }
  Node& s(const char* name, std::string v) {
    Attr& a = attr(name, KITE_ATTR_STRING);
    a.s = std::move(v);
    return *this;
  }
  Node& ints(const char* name, std::vector<int64_t> v) {
    Attr& a = attr(name, KITE_ATTR_INTS);
    a.ints = std::move(v);
    return *this;
  }
  Node& floats(const char* name, std::vector<float> v) {
    Attr& a = attr(name, KITE_ATTR_FLOATS);
    a.floats = std::move(v);
    return *this;
  }
  Node& fused(std::string pattern) { fused_ = std::move(pattern); return *this; }
  Node& domain(std::string d) { domain_ = std::move(d); return *this; }

  TestTensor& input(size_t k) { return inputs_[k]; }
  TestTensor& output(size_t k = 0) { return outputs_[k]; }
  std::vector<float> result(size_t k = 0) { return outputs_[k].values<float>(); }

  // The ABI node (built with kite/abi/node.h from the tensors' current
  // fields, abi below); pointers stay valid while this Node lives and is not
  // modified.
  const kite_backend_node2* abi() {
    tensors_.assign({});
    kite::abi::Node::Spec spec;
    spec.name = name_.c_str();
    spec.op = op_.c_str();
    spec.domain = domain_.c_str();
    spec.fused_pattern = fused_.c_str();
    auto add = [this](const TestTensor& t) {
      kite::abi::TensorDesc d;
      d.name = t.abi.name;
      d.dtype = t.abi.dtype;
      d.rank = t.abi.rank;
      d.shape = t.abi.shape;
      d.byte_size = t.abi.byte_size;
      d.is_constant = t.abi.is_constant != 0;
      d.host_data = t.abi.is_constant ? t.abi.data : nullptr;
      const int index = tensors_.add(d);
      tensors_.at(index).data = t.abi.data;
      return index;
    };
    for (size_t k = 0; k < inputs_.size(); ++k) {
      bool absent = std::find(absent_.begin(), absent_.end(), k) != absent_.end();
      spec.inputs.push_back(absent ? -1 : add(inputs_[k]));
    }
    for (size_t k = 0; k < outputs_.size(); ++k) {
      bool absent = std::find(absent_outputs_.begin(), absent_outputs_.end(), k) != absent_outputs_.end();
      spec.outputs.push_back(absent ? -1 : add(outputs_[k]));
    }
    abi_attrs_.assign(attrs_);
    spec.num_raw_attrs = abi_attrs_.count();
    spec.raw_attrs = abi_attrs_.data();
    node_.build(spec, &tensors_);
    return node_.v2();
  }

 private:
  using Attr = kite::ops::Attr;

  Attr& attr(const char* name, kite_attr_type type) {
    attrs_.emplace_back();
    attrs_.back().name = name;
    attrs_.back().type = type;
    return attrs_.back();
  }

  TestTensor& add(std::deque<TestTensor>& list, std::string name, kite_dtype dtype, Shape shape) {
    list.emplace_back();
    TestTensor& t = list.back();
    t.name = std::move(name);
    t.dtype = dtype;
    t.shape = std::move(shape);
    const size_t bytes = static_cast<size_t>(Numel(t.shape)) * DtypeSize(dtype);
    t.storage.assign((bytes + 7) / 8 + 1, 0);
    t.abi.name = t.name.c_str();
    t.abi.dtype = dtype;
    t.abi.rank = static_cast<int32_t>(t.shape.size());
    t.abi.shape = t.shape.data();
    t.abi.byte_size = bytes;
    t.abi.data = t.storage.data();
    return t;
  }

  std::string op_, name_, domain_, fused_;
  std::deque<TestTensor> inputs_, outputs_;
  std::vector<size_t> absent_, absent_outputs_;
  std::vector<Attr> attrs_;
  kite::abi::TensorTable tensors_;
  kite::abi::AttrTable abi_attrs_;  // what the node's raw_attrs point at
  kite::abi::Node node_;
};

// One backend instance (RAII).
class Backend {
 public:
  explicit Backend(int threads = 1) : api_(kite_cpu_backend_api()) {
    kite_backend_create_info info{};
    info.struct_size = sizeof info;
    info.threads = threads;
    char err[256] = "";
    status_ = api_->create2(nullptr, &info, &instance_, err, sizeof(err));
    EXPECT_EQ(status_, KITE_OK) << err;
  }
  ~Backend() {
    if (instance_) api_->destroy(instance_);
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const kite_backend_api* api() const { return api_; }
  void* instance() const { return instance_; }

  // The scratch the prepared kernels declared (workspace_size), allocated
  // here and handed over (bind), as the runtime does.
  kite_status bind_workspace(char* err, size_t err_size) {
    uint64_t bytes = 0;
    kite_status st = api_->workspace_size(instance_, &bytes, err, err_size);
    if (st != KITE_OK || (bytes <= workspace_.size() * sizeof(float) && bound_)) return st;
    workspace_.assign(static_cast<size_t>(bytes / sizeof(float) + 1), 0.0f);
    kite_backend_bindings bindings{};
    bindings.struct_size = sizeof bindings;
    bindings.workspace_host = workspace_.data();
    bindings.workspace_size = workspace_.size() * sizeof(float);
    st = api_->bind(instance_, &bindings, err, err_size);
    bound_ = st == KITE_OK;
    return st;
  }

  // supports(): empty string when supported, else the reason.
  std::string why_not(Node& n) {
    char reason[256] = "";
    const int ok = api_->supports2(instance_, n.abi(), reason, sizeof(reason));
    return ok ? std::string() : std::string("unsupported: ") + reason;
  }

  // prepare + execute (+ release); status of the first failing step.
  kite_status run(Node& n, std::string* message = nullptr, int repeats = 1) {
    char err[512] = "";
    void* kernel = nullptr;
    const kite_backend_node2* node = n.abi();
    kite_status st = api_->prepare2(instance_, node, &kernel, err, sizeof(err));
    if (st == KITE_OK) st = bind_workspace(err, sizeof(err));
    if (st == KITE_OK) {
      for (int r = 0; r < repeats && st == KITE_OK; ++r) {
        st = api_->execute(instance_, kernel, err, sizeof(err));
      }
      api_->release(instance_, kernel);
    }
    if (message) *message = err;
    return st;
  }

 private:
  const kite_backend_api* api_;
  void* instance_ = nullptr;
  kite_status status_ = KITE_OK;
  std::vector<float> workspace_;
  bool bound_ = false;
};

// Runs and expects success; returns the error text otherwise.
::testing::AssertionResult Runs(Backend& b, Node& n) {
  std::string err;
  const kite_status st = b.run(n, &err);
  if (st == KITE_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "status " << st << ": " << err;
}

void ExpectExact(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    }
  }
}

// Against a double reference: |got - want| <= rel * |want| + abs.
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double rel,
                double abs) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    const double tol = rel * std::fabs(want[i]) + abs;
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << "at " << i << ": got " << got[i] << ", want " << want[i] << " (tol " << tol
                    << ")";
      ++failures;
    }
  }
}

// A sum-of-products reference: value and sum of |terms| per element.
struct DotRef {
  std::vector<double> value, magnitude;
  int64_t terms = 0;  // K
  explicit DotRef(int64_t n) : value(static_cast<size_t>(n), 0.0), magnitude(static_cast<size_t>(n), 0.0) {}
  void add(int64_t i, double product) {
    value[i] += product;
    magnitude[i] += std::fabs(product);
  }
};

// |got - want| <= kDotSlack * (K + 1) * 2^-24 * sum|terms| (+ the bias rounding).
void ExpectDot(const std::vector<float>& got, const DotRef& ref) {
  ASSERT_EQ(got.size(), ref.value.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    const double tol = kDotSlack * static_cast<double>(ref.terms + 1) * kUnitRoundoff *
                           ref.magnitude[i] + 1e-30;
    if (!(std::fabs(got[i] - ref.value[i]) <= tol)) {
      ADD_FAILURE() << "at " << i << ": got " << got[i] << ", want " << ref.value[i] << " (tol "
                    << tol << ")";
      ++failures;
    }
  }
}

// Row-major offset of index `idx` in `shape`, reading size-1 dims as
// broadcast (numpy rules, shape right-aligned to idx).
int64_t BroadcastOffset(const Shape& shape, const Shape& idx) {
  int64_t off = 0;
  const size_t lead = idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t i = shape[d] == 1 ? 0 : idx[lead + d];
    off = off * shape[d] + i;
  }
  return off;
}

// Numpy broadcast of two shapes (assumed compatible).
Shape LocalBroadcast(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t x = d + a.size() >= r ? a[d + a.size() - r] : 1;
    const int64_t y = d + b.size() >= r ? b[d + b.size() - r] : 1;
    out[d] = x == 1 ? y : x;
  }
  return out;
}

Shape Unravel(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

std::string Str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Selects the portable SGEMM micro-kernel for its lifetime (the default is
// the best one the processor offers), so both paths get tested.
class PortableGemm {
 public:
  explicit PortableGemm(bool on) { kite::cpu::sgemm::force_portable_micro_kernel(on); }
  ~PortableGemm() { kite::cpu::sgemm::force_portable_micro_kernel(false); }
  PortableGemm(const PortableGemm&) = delete;
  PortableGemm& operator=(const PortableGemm&) = delete;
};

// ===========================================================================
// The packed SGEMM itself, every micro-kernel the processor has, against a
// double-precision reference.

// Runs the given kernel for its lifetime; ok() is false when the CPU lacks it.
class ForcedGemmKernel {
 public:
  explicit ForcedGemmKernel(kite::cpu::sgemm::MicroKernel k)
      : ok_(kite::cpu::sgemm::force_micro_kernel(k)) {}
  ~ForcedGemmKernel() { kite::cpu::sgemm::force_portable_micro_kernel(false); }
  ForcedGemmKernel(const ForcedGemmKernel&) = delete;
  ForcedGemmKernel& operator=(const ForcedGemmKernel&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_;
};

// Shapes that hit every tail: m around the 6-row panels and the kernels'
// pairs of panels (12 rows), n around the 8-column panels and the AVX-512
// blocks of 16, 32, 48 and 64 columns (full and masked), k across the k
// blocks (128 and 256). ldc is wider than n, and the columns past n must
// stay as they were. Bound per
// element: any summation order of k products plus the bias is within
// (k + 2) * 2^-24 * (sum |a_ip * b_pj| + |bias|) of the exact value
// (Higham's gamma_n), so a wrong index or a lost tail fails it by far.
TEST(Sgemm, EveryMicroKernelMatchesTheReferenceOverTails) {
  using kite::cpu::sgemm::MicroKernel;
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool pool(3);
  int kernels_run = 0;
  for (MicroKernel kernel : {MicroKernel::kPortable, MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(kernel);
    if (!forced.ok()) continue;
    ASSERT_EQ(sg::micro_kernel_in_use(), kernel);
    ++kernels_run;
    for (int64_t m : {1, 5, 6, 7, 8, 12, 13, 16, 19, 25, 32, 37}) {
      for (int64_t n : {1, 7, 8, 9, 16, 17, 24, 31, 32, 33, 47, 48, 64, 65, 100, 130}) {
        for (int64_t k : {1, 3, 127, 129, 300}) {
          const std::vector<float> a = Random(m * k, 61), b = Random(k * n, 62);
          const std::vector<float> bias = Random(m, 63), c0 = Random(m * (n + 3), 64);
          std::vector<double> exact(m * n), magnitude(m * n);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double s = 0, mag = 0;
              for (int64_t p = 0; p < k; ++p) {
                const double t = static_cast<double>(a[i * k + p]) * b[p * n + j];
                s += t;
                mag += std::fabs(t);
              }
              exact[i * n + j] = s;
              magnitude[i * n + j] = mag;
            }
          }
          std::vector<float> pa(sg::packed_a_floats(m, k)), pb(sg::packed_b_floats(k, n));
          sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
          sg::pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
          std::vector<float> b_wide(static_cast<size_t>(k * (n + 5)), std::nanf(""));
          for (int64_t q = 0; q < k; ++q) std::copy(&b[q * n], &b[q * n] + n, &b_wide[q * (n + 5)]);
          for (int mode = 0; mode < 3; ++mode) {  // plain, row bias, accumulate
            for (kite::cpu::ThreadPool* p : {static_cast<kite::cpu::ThreadPool*>(nullptr), &pool}) {
              const int64_t ldc = n + 3;
              std::vector<float> c = c0;
              sg::gemm_packed(m, n, k, pa.data(), pb.data(), c.data(), ldc,
                              mode == 1 ? bias.data() : nullptr, mode == 2, p);
              // B read in place (rows 5 floats wider than n): the same sums
              // in the same order, so the same bits, on the levels that can
              // (AVX-512, AVX2); the others refuse and touch nothing.
              std::vector<float> c_direct = c0;
              const bool direct = sg::gemm_direct_b(m, n, k, pa.data(), b_wide.data(), n + 5,
                                                    c_direct.data(), ldc, mode == 1 ? bias.data() : nullptr,
                                                    mode == 2, p);
              EXPECT_EQ(direct, kernel == MicroKernel::kAvx512 || kernel == MicroKernel::kAvx2Fma);
              if (direct) {
                EXPECT_EQ(std::memcmp(c_direct.data(), c.data(), c.size() * sizeof(float)), 0)
                    << "B in place: m " << m << " n " << n << " k " << k << " mode " << mode;
                // Rows exactly n wide (for n = 1, x contiguous: the GEMV's
                // plain loads rather than its gather).
                std::vector<float> c_tight = c0;
                ASSERT_TRUE(sg::gemm_direct_b(m, n, k, pa.data(), b.data(), n, c_tight.data(), ldc,
                                              mode == 1 ? bias.data() : nullptr, mode == 2, p));
                EXPECT_EQ(std::memcmp(c_tight.data(), c.data(), c.size() * sizeof(float)), 0)
                    << "B in place, ldb = n: m " << m << " n " << n << " k " << k << " mode " << mode;
              } else {
                EXPECT_EQ(std::memcmp(c_direct.data(), c0.data(), c0.size() * sizeof(float)), 0);
              }
              int bad = 0;
              for (int64_t i = 0; i < m && bad < 3; ++i) {
                for (int64_t j = 0; j < ldc && bad < 3; ++j) {
                  const float got = c[i * ldc + j];
                  if (j >= n) {
                    if (got != c0[i * ldc + j]) {
                      ++bad;
                      ADD_FAILURE() << "wrote past n at (" << i << "," << j << ")";
                    }
                    continue;
                  }
                  double want = exact[i * n + j], mag = magnitude[i * n + j];
                  if (mode == 1) want += bias[i], mag += std::fabs(bias[i]);
                  if (mode == 2) want += c0[i * ldc + j], mag += std::fabs(c0[i * ldc + j]);
                  const double tol = (k + 2) * std::ldexp(1.0, -24) * mag + 1e-30;
                  if (!(std::fabs(got - want) <= tol)) {
                    ++bad;
                    ADD_FAILURE() << "kernel " << static_cast<int>(kernel) << " m " << m << " n " << n
                                  << " k " << k << " mode " << mode << (p ? " pool" : "") << " at ("
                                  << i << "," << j << "): " << got << " vs " << want << " tol " << tol;
                  }
                }
              }
              if (bad) return;
            }
          }
        }
      }
    }
  }
  EXPECT_GE(kernels_run, 1);
  std::printf("[ info     ] SGEMM kernels tested on this CPU: %d of 3\n", kernels_run);
}

// The Relu / Clip epilogue applied in the GEMM's tile store, at every
// level: the same bits as the plain GEMM followed by the activation's
// formula over C (the epilogue only runs after the last k block, so k
// across the k blocks checks that a partial sum is never clamped), and
// nothing past n touched. Exact comparison: the epilogue's comparisons and
// selections do no arithmetic.
TEST(Sgemm, EpilogueMatchesGemmThenActivation) {
  using kite::cpu::sgemm::MicroKernel;
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool pool(2);
  for (MicroKernel kernel : {MicroKernel::kPortable, MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(kernel);
    if (!forced.ok()) continue;
    for (int64_t m : {1, 7, 13}) {
      for (int64_t n : {1, 9, 17, 33}) {
        for (int64_t k : {0, 3, 300}) {
          const std::vector<float> a = Random(m * k, 81), b = Random(k * n, 82);
          const std::vector<float> bias = Random(m, 83), c0 = Random(m * (n + 2), 84);
          std::vector<float> pa(sg::packed_a_floats(m, k) + 1), pb(sg::packed_b_floats(k, n) + 1);
          sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
          sg::pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
          const int64_t ldc = n + 2;
          std::vector<float> plain = c0;
          sg::gemm_packed(m, n, k, pa.data(), pb.data(), plain.data(), ldc, bias.data(), false, &pool);
          for (int kind = 1; kind <= 2; ++kind) {
            sg::Epilogue e;
            e.kind = kind == 1 ? sg::Epilogue::kRelu : sg::Epilogue::kClip;
            e.lo = -0.25f;
            e.hi = 0.5f;
            std::vector<float> got = c0;
            sg::gemm_packed(m, n, k, pa.data(), pb.data(), got.data(), ldc, bias.data(), false,
                            &pool, &e);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < ldc; ++j) {
                float want = plain[i * ldc + j];
                if (j < n) {
                  if (kind == 1) {
                    want = want > 0.0f ? want : 0.0f;
                  } else {
                    want = want < e.lo ? e.lo : want;
                    want = want > e.hi ? e.hi : want;
                  }
                }
                ASSERT_EQ(got[i * ldc + j], want)
                    << "kernel " << static_cast<int>(kernel) << " kind " << kind << " m " << m
                    << " n " << n << " k " << k << " at (" << i << "," << j << ")";
              }
            }
          }
        }
      }
    }
  }
}

// The tile hook (sgemm::Epilogue::tile, an activation too long for the
// store's registers) at every level, B packed and, on AVX-512, read in
// place: every value of C gets it exactly once and nothing past n is
// touched (a hook c -> 2c + 1, which a second application or a miss would
// show), and fused::activation_tile's SiLU / GELU / HardSwish give the bits
// of the plain GEMM followed by the vmath activation over each row: a
// value's bits do not depend on the tile it came in. Shapes: the GEMV (n =
// 1, C contiguous or a column ldc apart), lone last columns (17, 49), k = 0,
// k across two k blocks, several tasks on a pool.
// A GEMM that sums k in two halves (sgemm::k_split_at: projections whose
// C is small beside B, on small planes) gives the same
// bits on one thread, two and three, B packed or read in place, and each
// value is within the bound of any summation order of its k products,
// bias and C: (k + 3) * 2^-24 * (sum |a_ip b_pj| + |bias| + |C|) (Higham's
// gamma; the split is one more order). Shapes: a 14x14 projection, a 7x7
// one (a lone last column), odd rows with one k block a half, the AVX2
// level's tail of 9 with a second half over two k blocks; every mode
// (plain, bias, accumulate, bias + Clip, Relu) and a tile hook, which
// must run once on each value, after the halves are added. Columns past n
// (ldc > n) stay as they were. Shapes the split does not take: more rows
// than half of k, k under 256.
TEST(Sgemm, KSplitHasTheSameBitsOnAnyThreadsAndMatchesTheReference) {
  using kite::cpu::sgemm::MicroKernel;
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool two(2), three(3);
  auto twice_plus_one = [](const void*, float* c, int64_t ldc, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = 2.0f * c[i * ldc + j] + 1.0f;
    }
  };
  struct Shape {
    int64_t m, n, k, ldc;
  };
  const Shape shapes[] = {{96, 196, 576, 196}, {160, 49, 960, 49}, {25, 169, 300, 172}, {19, 41, 513, 41}};
  int levels = 0;
  for (MicroKernel kernel : {MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(kernel);
    if (!forced.ok()) continue;
    SCOPED_TRACE(kernel == MicroKernel::kAvx512 ? "avx512" : "avx2");
    ++levels;
    EXPECT_EQ(sg::k_split_at(320, 576), 0);  // more rows than k / 2
    EXPECT_EQ(sg::k_split_at(64, 240), 0);   // halves under 128
    for (const Shape& sh : shapes) {
      const int64_t m = sh.m, n = sh.n, k = sh.k, ldc = sh.ldc;
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
      const int64_t half = sg::k_split_at(m, k);
      ASSERT_GT(half, 0);
      ASSERT_EQ(half % 16, 0);
      ASSERT_EQ(sg::k_split_floats(m, n, k), m * n);
      const std::vector<float> a = Random(m * k, 191), b = Random(k * n, 192);
      const std::vector<float> bias = Random(m, 193), c0 = Random(m * ldc, 194);
      std::vector<float> pa(static_cast<size_t>(sg::packed_a_floats(m, k)));
      std::vector<float> pb(static_cast<size_t>(sg::packed_b_floats(k, n)));
      sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
      sg::pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
      for (int mode = 0; mode < 6; ++mode) {
        SCOPED_TRACE("mode " + std::to_string(mode));
        sg::Epilogue e;
        e.kind = mode == 3 ? sg::Epilogue::kClip : mode == 4 ? sg::Epilogue::kRelu : sg::Epilogue::kNone;
        e.lo = -0.5f;
        e.hi = 0.5f;
        if (mode == 5) e.tile = +twice_plus_one;
        const bool accumulate = mode == 2;
        const float* rb = mode == 1 || mode == 3 || mode == 5 ? bias.data() : nullptr;
        std::vector<float> first;
        for (int direct = 0; direct < 2; ++direct) {
          for (kite::cpu::ThreadPool* pool : {static_cast<kite::cpu::ThreadPool*>(nullptr), &two, &three}) {
            std::vector<float> c = c0, scratch(static_cast<size_t>(m * n), std::nanf(""));
            if (direct) {
              ASSERT_TRUE(sg::gemm_direct_b(m, n, k, pa.data(), b.data(), n, c.data(), ldc, rb, accumulate,
                                            pool, &e, scratch.data()));
            } else {
              sg::gemm_packed(m, n, k, pa.data(), pb.data(), c.data(), ldc, rb, accumulate, pool, &e,
                              scratch.data());
            }
            if (first.empty()) {
              first = c;
              continue;
            }
            ASSERT_EQ(std::memcmp(c.data(), first.data(), c.size() * sizeof(float)), 0)
                << "direct " << direct << ", " << (pool ? pool->size() : 1) << " threads";
          }
        }
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            const float got = first[i * ldc + j];
            if (j >= n) {
              ASSERT_EQ(got, c0[i * ldc + j]) << "past n: " << i << "," << j;
              continue;
            }
            double want = rb ? rb[i] : 0.0, mag = rb ? std::fabs(rb[i]) : 0.0;
            if (accumulate) {
              want += c0[i * ldc + j];
              mag += std::fabs(c0[i * ldc + j]);
            }
            for (int64_t p = 0; p < k; ++p) {
              const double t = static_cast<double>(a[i * k + p]) * b[p * n + j];
              want += t;
              mag += std::fabs(t);
            }
            const double tol = (k + 3) * std::ldexp(1.0, -24) * mag;
            double lo = want - tol, hi = want + tol;
            if (e.kind == sg::Epilogue::kRelu) {
              lo = std::max(lo, 0.0);
              hi = std::max(hi, 0.0);
            } else if (e.kind == sg::Epilogue::kClip) {
              lo = std::min(std::max(lo, -0.5), 0.5);
              hi = std::min(std::max(hi, -0.5), 0.5);
            } else if (mode == 5) {  // the hook, once, on the finished value
              lo = 2.0 * lo + 1.0 - 1e-6 * std::fabs(hi);
              hi = 2.0 * hi + 1.0 + 1e-6 * std::fabs(hi);
            }
            ASSERT_GE(got, lo - 1e-30) << i << "," << j;
            ASSERT_LE(got, hi + 1e-30) << i << "," << j;
          }
        }
      }
    }
  }
  if (levels == 0) GTEST_SKIP() << "the k split runs on the AVX2 and AVX-512 levels only";
}

// Where C's rows are line-aligned the threads split its columns in shares
// of whole panel pairs, each in column blocks that end on the shares'
// edges (sgemm.cpp, share_edge). Every column of C written, once, with
// one thread's bits, on 2, 3 and 4 threads: planes of 28x28, 56x56 and
// 208 columns (26 panels), rows in one panel pair and in many, k small
// (more blocks a share) and large, B in place and packed; C starts past
// NaN-filled padding so that a lost or doubled column shows.
TEST(Sgemm, ColumnSharesCoverEveryColumnWithOneThreadsBits) {
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool p2(2), p3(3), p4(4);
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{192, 784, 32}, {32, 784, 192}, {12, 3136, 24}, {64, 208, 300}};
  for (const Shape& sh : shapes) {
    const int64_t m = sh.m, n = sh.n, k = sh.k, ldc = n;
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    ASSERT_TRUE(sg::splits_columns_by_thread(ldc));
    const std::vector<float> a = Random(m * k, 201), b = Random(k * n, 202), bias = Random(m, 203);
    std::vector<float> pa(static_cast<size_t>(sg::packed_a_floats(m, k)));
    std::vector<float> pb(static_cast<size_t>(sg::packed_b_floats(k, n)));
    sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
    sg::pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
    for (int direct = 0; direct < 2; ++direct) {
      std::vector<float> want;
      for (kite::cpu::ThreadPool* pool : {static_cast<kite::cpu::ThreadPool*>(nullptr), &p2, &p3, &p4}) {
        std::vector<float> c(static_cast<size_t>(m * ldc), std::nanf(""));
        if (!direct) {
          sg::gemm_packed(m, n, k, pa.data(), pb.data(), c.data(), ldc, bias.data(), false, pool);
        } else if (!sg::gemm_direct_b(m, n, k, pa.data(), b.data(), n, c.data(), ldc, bias.data(), false, pool)) {
          continue;  // a level that packs B
        }
        for (size_t i = 0; i < c.size(); ++i) ASSERT_FALSE(std::isnan(c[i])) << "not written: " << i;
        if (want.empty()) {
          want = c;
          continue;
        }
        ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)), 0)
            << "direct " << direct << ", " << pool->size() << " threads";
      }
      if (want.empty()) continue;  // B in place: not on this level
      // One value per row against the sum, so that a wrong column shows too.
      for (int64_t i = 0; i < m; i += 7) {
        const int64_t j = (i * 131) % n;
        double s = bias[i], mag = std::fabs(bias[i]);
        for (int64_t p = 0; p < k; ++p) {
          s += static_cast<double>(a[i * k + p]) * b[p * n + j];
          mag += std::fabs(static_cast<double>(a[i * k + p]) * b[p * n + j]);
        }
        ASSERT_NEAR(want[i * ldc + j], s, (k + 2) * std::ldexp(1.0, -24) * mag) << i << "," << j;
      }
    }
  }
}

// A GEMM under sgemm's kMinSplitFlops (1.5 MFLOP) runs on the calling
// thread even with a pool; a larger one shares its tasks. The tile hook
// records the threads that finish tiles; on the caller's first tile it
// waits (up to 2 s) for another thread to finish one, so a split GEMM's
// worker shows whatever the timing (under load the worker may take every
// task), and an unsplit one costs that wait.
// Values against the one-thread product, bit for bit.
TEST(Sgemm, SmallProductsRunOnTheCallingThread) {
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool pool(2);
  struct Seen {
    std::thread::id caller;
    std::mutex mu;
    std::vector<std::thread::id> ids;
    bool waited = false;
  };
  auto record = [](const void* ctx, float*, int64_t, int64_t, int64_t) {
    Seen& seen = *static_cast<Seen*>(const_cast<void*>(ctx));
    const std::thread::id me = std::this_thread::get_id();
    bool wait = false;
    {
      std::lock_guard<std::mutex> lock(seen.mu);
      if (std::find(seen.ids.begin(), seen.ids.end(), me) == seen.ids.end()) seen.ids.push_back(me);
      wait = me == seen.caller && !seen.waited;
      seen.waited = seen.waited || wait;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (wait && std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(seen.mu);
        if (seen.ids.size() > 1) break;
      }
      std::this_thread::yield();
    }
  };
  struct Shape {
    int64_t m, n, k;
    bool split;
  };
  // The transformers' MLP layer (32 tokens, 256 -> 64: 1.05 MFLOP) and a
  // 56x56 pointwise layer (38.5 MFLOP).
  for (const Shape sh : {Shape{32, 64, 256, false}, Shape{96, 3136, 64, true}}) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    ASSERT_EQ(2.0 * m * n * k >= 1.5e6, sh.split);
    const std::vector<float> a = Random(m * k, 211), b = Random(k * n, 212);
    std::vector<float> pa(static_cast<size_t>(sg::packed_a_floats(m, k)));
    std::vector<float> pb(static_cast<size_t>(sg::packed_b_floats(k, n)));
    sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
    sg::pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
    std::vector<float> one(static_cast<size_t>(m * n)), two(one.size());
    sg::gemm_packed(m, n, k, pa.data(), pb.data(), one.data(), n, nullptr, false, nullptr);
    Seen seen;
    seen.caller = std::this_thread::get_id();
    sg::Epilogue e;
    e.tile = record;
    e.tile_ctx = &seen;
    sg::gemm_packed(m, n, k, pa.data(), pb.data(), two.data(), n, nullptr, false, &pool, &e);
    ExpectExact(two, one);
    // Split: a worker finished a tile (all of them, when the caller was
    // descheduled meanwhile). Not split: only the caller did.
    ASSERT_FALSE(seen.ids.empty());
    const bool worker = std::any_of(seen.ids.begin(), seen.ids.end(),
                                    [&](std::thread::id id) { return id != seen.caller; });
    EXPECT_EQ(worker, sh.split);
  }
}

TEST(Sgemm, TileHookRunsOnceOnEveryValueWithTheActivationsBits) {
  using kite::cpu::sgemm::MicroKernel;
  namespace sg = kite::cpu::sgemm;
  namespace fu = kite::cpu::fused;
  kite::cpu::ThreadPool pool(2);
  auto twice_plus_one = [](const void*, float* c, int64_t ldc, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = 2.0f * c[i * ldc + j] + 1.0f;
    }
  };
  fu::Activation acts[3];
  acts[0].kind = fu::Activation::kSiLU;
  acts[1].kind = fu::Activation::kGelu;
  acts[2].kind = fu::Activation::kHardSwish;
  acts[2].alpha = 1.0f / 6.0f;
  acts[2].beta = 0.5f;
  int levels = 0;
  for (MicroKernel kernel : {MicroKernel::kPortable, MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(kernel);
    if (!forced.ok()) continue;
    ++levels;
    for (int64_t m : {1, 13, 100}) {
      for (int64_t n : {1, 17, 49, 300}) {
        for (int64_t k : {0, 3, 300}) {
          const std::vector<float> a = Random(m * k, 181), b = Random(k * (n + 3), 182);
          const std::vector<float> bias = Random(m, 183), c0 = Random(m * (n + 2), 184);
          std::vector<float> pa(sg::packed_a_floats(m, k) + 1), pb(sg::packed_b_floats(k, n) + 1);
          sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
          sg::pack_b(b.data(), n + 3, 1, k, n, pb.data(), nullptr);
          for (int64_t ldc : {n + 2, n}) {
            std::vector<float> plain = c0;
            sg::gemm_packed(m, n, k, pa.data(), pb.data(), plain.data(), ldc, bias.data(), false, &pool);
            for (int hook = 0; hook < 4; ++hook) {
              sg::Epilogue e;
              if (hook == 0) {
                e.tile = twice_plus_one;
              } else {
                ASSERT_TRUE(fu::activation_into_epilogue(acts[hook - 1], true, &e));
              }
              std::vector<float> want = plain;
              for (int64_t i = 0; i < m; ++i) {
                float* row = want.data() + i * ldc;
                if (hook == 0) {
                  for (int64_t j = 0; j < n; ++j) row[j] = 2.0f * row[j] + 1.0f;
                } else if (hook == 1) {
                  kite::cpu::vmath::sigmoid(row, row, n, true);
                } else if (hook == 2) {
                  kite::cpu::vmath::gelu(row, row, n);
                } else {
                  kite::cpu::vmath::hard_sigmoid(row, row, n, 1.0f / 6.0f, 0.5f, true);
                }
              }
              for (int in_place = 0; in_place < 2; ++in_place) {
                std::vector<float> got = c0;
                if (in_place == 0) {
                  sg::gemm_packed(m, n, k, pa.data(), pb.data(), got.data(), ldc, bias.data(), false, &pool, &e);
                } else if (!sg::gemm_direct_b(m, n, k, pa.data(), b.data(), n + 3, got.data(), ldc,
                                              bias.data(), false, &pool, &e)) {
                  continue;  // B read in place: the AVX-512 level only
                }
                for (int64_t i = 0; i < m; ++i) {
                  for (int64_t j = 0; j < ldc; ++j) {
                    const float w = j < n ? want[i * ldc + j] : c0[i * ldc + j];
                    ASSERT_EQ(std::memcmp(&got[i * ldc + j], &w, sizeof(float)), 0)
                        << "kernel " << static_cast<int>(kernel) << " hook " << hook << " m " << m
                        << " n " << n << " k " << k << " ldc " << ldc << " in place " << in_place
                        << " at (" << i << "," << j << "): " << got[i * ldc + j] << " vs " << w;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GE(levels, 1);
}

TEST(Depthwise, ArrangedWeightsHaveTheGatheredBits) {
  // Constant weights are arranged one vector a tap at prepare
  // (depthwise::arrange_channel_weights; offline, "dw-c16", when the file
  // has the form); computed ones are gathered by each task. Both must give
  // the same bits: channel tails (20 = 16 + 4), with and without a bias.
  const std::vector<float> x = Random(2 * 20 * 9 * 11, 91), w = Random(20 * 9, 92), b = Random(20, 93);
  for (bool with_bias : {true, false}) {
    std::vector<std::vector<float>> got;
    for (bool constant : {true, false}) {
      SCOPED_TRACE(std::string(with_bias ? "bias" : "no bias") + (constant ? ", constant W" : ", computed W"));
      Backend be(2);
      Node n("Conv");
      n.in({2, 20, 9, 11}, x).in({20, 1, 3, 3}, w, constant);
      if (with_bias) n.in({20}, b, true);
      n.out({2, 20, 9, 11}).ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}).i("group", 20);
      ASSERT_TRUE(Runs(be, n));
      got.push_back(n.result());
    }
    ExpectExact(got[0], got[1]);
  }
}

// The 3x3 planes that go by planes on AVX-512 (stride 2: s2k3, stride 1:
// s1k3) give the channel blocks' bits: the same taps in the same order,
// each an FMA. Sixteen and twenty channels (a block and a tail), bias,
// Relu and Clip, odd and even sizes, one to five vectors a row.
TEST(Depthwise, WidePlanesHaveTheChannelBlocksBits) {
  using kite::cpu::sgemm::MicroKernel;
  namespace dw = kite::cpu::depthwise;
  const ForcedGemmKernel forced(MicroKernel::kAvx512);
  if (!forced.ok()) GTEST_SKIP() << "no AVX-512 here";
  struct Size {
    int64_t h, w;
  };
  for (int64_t stride : {1, 2}) {
    for (const Size sz : {Size{56, 56}, Size{13, 65}, Size{30, 57}, Size{1, 9}, Size{2, 80}}) {
      for (int64_t count : {16, 20}) {
        const int64_t oh = (sz.h - 1) / stride + 1, ow = (sz.w - 1) / stride + 1;
        const std::vector<float> x = Random(count * sz.h * sz.w, 95), w = Random(count * 9, 96),
                                 b = Random(count, 97);
        for (int variant = 0; variant < 3; ++variant) {
          SCOPED_TRACE("stride " + std::to_string(stride) + ", " + std::to_string(count) + " channels " +
                       std::to_string(sz.h) + "x" + std::to_string(sz.w) + " variant " + std::to_string(variant));
          const dw::Plane::Act act =
              variant == 1 ? dw::Plane::kRelu : variant == 2 ? dw::Plane::kClip : dw::Plane::kNone;
          std::vector<float> by_planes(static_cast<size_t>(count * oh * ow), -7.0f), by_blocks = by_planes;
          for (int64_t m = 0; m < count; ++m) {
            dw::Plane p{x.data() + m * sz.h * sz.w, sz.h, sz.w, by_planes.data() + m * oh * ow, oh, ow,
                        w.data() + m * 9, 3, 3, stride, stride, 1, 1, 1, b[static_cast<size_t>(m)]};
            p.act = act;
            p.lo = -0.25f;
            p.hi = 0.5f;
            std::vector<float> scratch(static_cast<size_t>(dw::scratch_floats(p)));
            dw::run_plane(p, scratch.data());
          }
          for (int64_t c0 = 0; c0 < count; c0 += dw::kChannelLanes) {
            dw::Channels c{};
            c.in = x.data() + c0 * sz.h * sz.w;
            c.in_stride = sz.h * sz.w;
            c.h = sz.h, c.w = sz.w;
            c.out = by_blocks.data() + c0 * oh * ow;
            c.out_stride = oh * ow;
            c.oh = oh, c.ow = ow;
            c.weights = w.data() + c0 * 9;
            c.kh = 3, c.kw = 3, c.stride_h = stride, c.stride_w = stride, c.pad_h = 1, c.pad_w = 1;
            c.bias = b.data() + c0;
            c.count = std::min<int64_t>(dw::kChannelLanes, count - c0);
            c.act = act;
            c.lo = -0.25f;
            c.hi = 0.5f;
            std::vector<float> scratch(static_cast<size_t>(
                dw::channel_scratch_floats(sz.h, sz.w, oh, ow, 3, 3, stride, stride, 1, 1)));
            ASSERT_TRUE(dw::run_channels(c, scratch.data()));
          }
          ExpectExact(by_planes, by_blocks);
        }
      }
    }
  }
}

// The vectorised depthwise plane at every ISA level the CPU has, against a
// double reference: widths around the 4/8/16 lanes, strides 1 and 2 (the
// stride-2 loads read one float past the window), pads wider than the
// kernel, row dilation, tall kernels. Input and scratch are exact-size
// allocations, so a read past them is a heap overflow under ASan; the
// scratch starts as garbage (1e30), so padding it fails to zero shows. Bound: (taps + 1) * 2^-24 * (sum |w x| + |bias|).
TEST(Depthwise, EveryLevelMatchesTheReference) {
  using kite::cpu::sgemm::MicroKernel;
  namespace dw = kite::cpu::depthwise;
  struct Case {
    int64_t h, w, kh, kw, sh, sw, ph, pw, dh;
  };
  const Case cases[] = {
      {7, 1, 3, 3, 1, 1, 1, 1, 1},      {9, 5, 3, 3, 1, 1, 1, 1, 1},
      {8, 16, 3, 3, 1, 1, 1, 1, 1},     {11, 17, 3, 3, 2, 2, 1, 1, 1},
      {14, 33, 3, 3, 2, 2, 0, 0, 1},    {12, 56, 3, 3, 1, 1, 1, 1, 1},
      {10, 57, 5, 5, 2, 2, 2, 2, 1},    {9, 64, 7, 7, 1, 1, 3, 3, 1},
      {6, 40, 3, 5, 1, 2, 0, 4, 2},     {20, 35, 18, 3, 1, 1, 2, 1, 1},
      {5, 31, 1, 1, 1, 1, 0, 0, 1},     {4, 3, 5, 5, 1, 1, 4, 4, 1},
      {3, 100, 2, 9, 2, 1, 1, 0, 1},    {16, 29, 3, 4, 2, 2, 1, 2, 3},
      // 3x3 stride 2, padding 1 (AVX-512: depthwise.cpp's s2k3): one, two,
      // three vectors of outputs a row, even and odd widths and heights.
      {1, 1, 3, 3, 2, 2, 1, 1, 1},      {2, 31, 3, 3, 2, 2, 1, 1, 1},
      {12, 56, 3, 3, 2, 2, 1, 1, 1},    {13, 65, 3, 3, 2, 2, 1, 1, 1},
      {57, 112, 3, 3, 2, 2, 1, 1, 1},
  };
  int levels = 0;
  for (MicroKernel level : {MicroKernel::kPortable, MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(level);
    if (!forced.ok()) continue;
    ++levels;
    for (const Case& c : cases) {
      for (int variant = 0; variant < 4; ++variant) {
        // 0: no bias, 1: bias, 2: bias + Relu, 3: bias + Clip(-0.25, 0.5)
        // (the fused activation applied in the plane's store).
        const bool with_bias = variant > 0;
        const int64_t oh = (c.h + 2 * c.ph - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
        const int64_t ow = (c.w + 2 * c.pw - c.kw) / c.sw + 1;
        ASSERT_GT(oh, 0);
        ASSERT_GT(ow, 0);
        const std::vector<float> x = Random(c.h * c.w, 71), w = Random(c.kh * c.kw, 72);
        const float bias = with_bias ? 0.375f : 0.0f;
        std::vector<float> y(static_cast<size_t>(oh * ow), -7.0f);
        dw::Plane plane{x.data(), c.h, c.w, y.data(), oh, ow, w.data(), c.kh, c.kw, c.sh,
                        c.sw, c.ph, c.pw, c.dh, bias};
        plane.act = variant == 2 ? dw::Plane::kRelu : variant == 3 ? dw::Plane::kClip : dw::Plane::kNone;
        plane.lo = -0.25f;
        plane.hi = 0.5f;
        std::vector<float> scratch(static_cast<size_t>(dw::scratch_floats(plane)), 1e30f);
        dw::run_plane(plane, scratch.data());
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) {
            double want = bias, mag = std::fabs(bias);
            for (int64_t r = 0; r < c.kh; ++r) {
              const int64_t iy = oy * c.sh - c.ph + r * c.dh;
              for (int64_t t = 0; t < c.kw; ++t) {
                const int64_t ix = ox * c.sw - c.pw + t;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                const double v = static_cast<double>(w[r * c.kw + t]) * x[iy * c.w + ix];
                want += v;
                mag += std::fabs(v);
              }
            }
            const double tol = (c.kh * c.kw + 1) * std::ldexp(1.0, -24) * mag + 1e-30;
            if (variant == 2) want = want > 0.0 ? want : 0.0;
            if (variant == 3) want = std::min(0.5, std::max(-0.25, want));
            const float got = y[oy * ow + ox];
            ASSERT_LE(std::fabs(got - want), tol)
                << "level " << static_cast<int>(level) << " case h" << c.h << " w" << c.w << " k"
                << c.kh << "x" << c.kw << " s" << c.sh << "," << c.sw << " p" << c.ph << ","
                << c.pw << " d" << c.dh << " at (" << oy << "," << ox << ")";
          }
        }
      }
    }
  }
  EXPECT_GE(levels, 1);
}

// vmath::sigmoid against double precision: every float step of 2^-10 over
// [-100, 100] and the special values. The stated bound (kSigmoidRelError,
// relative, where the exact value is a normal float) must hold; the
// measured maximum is printed. SiLU adds one rounding (x * s). Each element
// gets the same bits wherever it sits (tails go through the same lanes).
// On every level the processor has (4 lanes; 16 where the SGEMM level is
// AVX-512).
// Runs check(level name) with vmath (and the GEMM) forced to each ISA level
// the processor has, then back to the best; at least one level runs.
void on_every_level(void (*check)(const char*)) {
  namespace sg = kite::cpu::sgemm;
  const std::pair<sg::MicroKernel, const char*> levels[] = {{sg::MicroKernel::kPortable, "portable"},
                                                           {sg::MicroKernel::kAvx2Fma, "avx2"},
                                                           {sg::MicroKernel::kAvx512, "avx512"},
                                                           {sg::MicroKernel::kNeon, "neon"}};
  int ran = 0;
  for (const auto& level : levels) {
    if (!sg::force_micro_kernel(level.first)) continue;
    SCOPED_TRACE(level.second);
    check(level.second);
    ++ran;
  }
  sg::force_portable_micro_kernel(false);
  EXPECT_GE(ran, 1);
}

void check_sigmoid_bound(const char* level);

TEST(Vmath, SigmoidWithinItsStatedBound) {
  on_every_level(check_sigmoid_bound);
}

void check_sigmoid_bound(const char* level) {
  namespace vm = kite::cpu::vmath;
  std::vector<float> x;
  for (int64_t i = -102400; i <= 102400; ++i) x.push_back(static_cast<float>(i) / 1024.0f);
  x.push_back(1e-30f);
  x.push_back(-1e-30f);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> s(x.size()), silu(x.size());
  vm::sigmoid(x.data(), s.data(), static_cast<int64_t>(x.size()), false);
  vm::sigmoid(x.data(), silu.data(), static_cast<int64_t>(x.size()), true);
  double worst = 0, worst_silu = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(s[i]));
      EXPECT_TRUE(std::isnan(silu[i]));
      continue;
    }
    const double exact = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    if (exact < std::numeric_limits<float>::min()) {
      EXPECT_LE(s[i], 2e-38f) << x[i];
      EXPECT_GE(s[i], 0.0f) << x[i];
      continue;
    }
    const double rel = std::fabs(s[i] - exact) / exact;
    worst = std::max(worst, rel);
    ASSERT_LE(rel, vm::kSigmoidRelError) << "sigmoid(" << x[i] << ") = " << s[i] << ", exact " << exact;
    if (std::isfinite(x[i]) && x[i] != 0.0f) {
      const double exact_silu = static_cast<double>(x[i]) * exact;
      const double rel_silu = std::fabs(silu[i] - exact_silu) / std::fabs(exact_silu);
      worst_silu = std::max(worst_silu, rel_silu);
      ASSERT_LE(rel_silu, vm::kSigmoidRelError + std::ldexp(1.0, -24)) << "silu(" << x[i] << ")";
    }
  }
  std::printf("[ info     ] %s: sigmoid max relative error %.3g, silu %.3g (bound %.3g)\n", level, worst,
              worst_silu, vm::kSigmoidRelError);
  for (size_t i = 0; i < 64; ++i) {
    float one = 0;
    vm::sigmoid(&x[i * 997], &one, 1, false);
    EXPECT_EQ(std::memcmp(&one, &s[i * 997], sizeof one), 0) << x[i * 997];
  }
}

// vmath::gelu against double precision 0.5 x (1 + erf(x / sqrt 2)) at every
// float step of 2^-12 over [-12, 12] plus large and special values, on each
// level: |error| <= kGeluAbsError * max(1, |x|) (A&S 7.1.26's 1.5e-7 on erf
// times 0.5 |x|, plus roundings). Tails give the same bits as full vectors.
void check_gelu_bound(const char* level) {
  namespace vm = kite::cpu::vmath;
  std::vector<float> x;
  for (int64_t i = -49152; i <= 49152; ++i) x.push_back(static_cast<float>(i) / 4096.0f);
  for (float v : {1e-30f, -1e-30f, 30.0f, -30.0f, 1e4f, -1e4f}) x.push_back(v);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> g(x.size());
  vm::gelu(x.data(), g.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    if (std::isnan(xd)) {
      EXPECT_TRUE(std::isnan(g[i]));
      continue;
    }
    if (std::isinf(xd)) {
      EXPECT_EQ(g[i], std::numeric_limits<float>::infinity());
      continue;
    }
    const double exact = 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)));
    const double err = std::fabs(g[i] - exact) / std::max(1.0, std::fabs(xd));
    worst = std::max(worst, err);
    ASSERT_LE(err, vm::kGeluAbsError) << "gelu(" << x[i] << ") = " << g[i] << ", exact " << exact;
    // x's sign or zero: erf stays within [-1, 1] (a rational fit can pass 1
    // by an ulp or two near |z| = 4, which made gelu of -5.5 positive).
    ASSERT_FALSE((xd < 0 && g[i] > 0) || (xd > 0 && g[i] < 0)) << "gelu(" << x[i] << ") = " << g[i];
  }
  std::printf("[ info     ] %s: gelu max error / max(1, |x|) %.3g (bound %.3g)\n", level, worst,
              vm::kGeluAbsError);
  for (size_t i = 0; i < 64; ++i) {
    float one = 0;
    vm::gelu(&x[i * 1531], &one, 1);
    EXPECT_EQ(std::memcmp(&one, &g[i * 1531], sizeof one), 0) << x[i * 1531];
  }
}

// vmath::softmax against double precision on rows of many lengths (tails of
// every size, values over a wide range, a -inf entry), on each level.
void check_softmax_bound(const char* level) {
  namespace vm = kite::cpu::vmath;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  double worst = 0;
  for (int64_t n : {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 32, 33, 100, 1000, 4099}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();
    std::vector<float> y(x.size());
    vm::softmax(x.data(), y.data(), n);
    double max = -INFINITY;
    for (float v : x) max = std::max(max, static_cast<double>(v));
    // Exact softmax of the float differences x - max the kernel (like the
    // scalar loops) works from: that subtraction rounds, |x - max| 2^-24 in
    // the exponent, before any approximation.
    const float fmax = static_cast<float>(max);
    double sum = 0;
    for (float v : x) sum += std::exp(static_cast<double>(v - fmax));
    for (int64_t j = 0; j < n; ++j) {
      const double exact = std::exp(static_cast<double>(x[j] - fmax)) / sum;
      if (exact < std::numeric_limits<float>::min()) {
        EXPECT_LE(y[j], 1e-37f) << "n " << n << " j " << j;
        continue;
      }
      const double rel = std::fabs(y[j] - exact) / exact;
      worst = std::max(worst, rel);
      ASSERT_LE(rel, vm::kSoftmaxRelError) << "n " << n << " j " << j << ": " << y[j] << " vs " << exact;
    }
    vm::softmax(x.data(), x.data(), n);  // in place: the same bits
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << n;
  }
  std::printf("[ info     ] %s: softmax max relative error %.3g (bound %.3g)\n", level, worst,
              vm::kSoftmaxRelError);
}

TEST(Vmath, SoftmaxWithinItsStatedBound) {
  on_every_level(check_softmax_bound);
}

TEST(Vmath, GeluWithinItsStatedBound) {
  on_every_level(check_gelu_bound);
}

// The normalisations' row statistics and scaling (common.h: scalar, NEON
// or AVX-512 by level) against double references: the mean and 1 /
// sqrt(var + eps) are double computations rounded to float once, so within
// 1 ulp of the reference's float (the summation order moves the double
// result by ~n 2^-53, far below a float ulp, except at a rounding tie);
// normalize_row is (x - mean) * inv * scale + bias with a rounding per
// operation (a fused multiply-add on NEON), within 3 float ulps of |y| plus
// the cancellation of (x - mean) * inv * scale against bias, bounded by
// 2^-23 (|bias| + |(x - mean) inv scale|). Lengths around the 4- and
// 16-lane steps, a shifted mean (cancellation in the variance), y = x.
void check_norm_rows(const char*) {
  for (int64_t n : {1, 3, 15, 16, 17, 33, 96, 100}) {
    std::vector<float> x = Random(n, static_cast<uint32_t>(n) + 300, 99.0f, 101.0f);
    const std::vector<float> scale = Random(n, 401), bias = Random(n, 402);
    double mean = 0.0, sq = 0.0;
    for (float v : x) mean += v;
    mean /= static_cast<double>(n);
    for (float v : x) sq += (v - mean) * (v - mean);
    const float eps = 1e-5f;
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
    float got_mean = 0.0f, got_inv = 0.0f;
    kite::cpu::moments(x.data(), n, eps, &got_mean, &got_inv);
    EXPECT_LE(std::fabs(got_mean - static_cast<float>(mean)), std::ldexp(std::fabs(mean), -23)) << "n " << n;
    EXPECT_LE(std::fabs(got_inv - static_cast<float>(inv)), std::ldexp(inv, -23)) << "n " << n;
    std::vector<float> y = x;
    kite::cpu::normalize_row(y.data(), n, got_mean, got_inv, scale.data(), bias.data(), y.data());
    for (int64_t i = 0; i < n; ++i) {
      const double t = (static_cast<double>(x[i]) - got_mean) * got_inv * scale[i];
      const double want = t + bias[i];
      const double tol = std::ldexp(3.0 * std::fabs(want) + std::fabs(t) + std::fabs(bias[i]), -23) + 1e-30;
      ASSERT_LE(std::fabs(y[i] - want), tol) << "n " << n << " at " << i;
    }
  }
}

TEST(NormRows, MomentsAndScalingMatchDoubleReferences) {
  on_every_level(check_norm_rows);
}

// vmath::hard_sigmoid has the scalar formula's bits on every level
// (max(0, min(1, alpha x + beta)), times x for HardSwish): over a sweep with
// both clamps, signed zeros, infinities and NaN, lengths with every tail.
void check_hard_sigmoid(const char* level) {
  namespace vm = kite::cpu::vmath;
  std::vector<float> x;
  for (int64_t i = -3000; i <= 3000; ++i) x.push_back(static_cast<float>(i) / 500.0f);
  for (float v : {0.0f, -0.0f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  for (const bool times_x : {false, true}) {
    const float alpha = times_x ? 1.0f / 6.0f : 0.2f, beta = 0.5f;
    for (const size_t n : {x.size(), size_t{1}, size_t{15}, size_t{17}}) {
      std::vector<float> y(n);
      vm::hard_sigmoid(x.data() + x.size() - n, y.data(), static_cast<int64_t>(n), alpha, beta, times_x);
      for (size_t i = 0; i < n; ++i) {
        const float xi = x[x.size() - n + i];
        const float v = std::max(0.0f, std::min(1.0f, alpha * xi + beta));
        const float want = times_x ? xi * v : v;
        ASSERT_EQ(std::memcmp(&want, &y[i], sizeof want), 0)
            << level << (times_x ? " hard_swish(" : " hard_sigmoid(") << xi << ") = " << y[i] << ", want " << want;
      }
    }
  }
}

TEST(Vmath, HardSigmoidHasTheScalarBits) {
  on_every_level(check_hard_sigmoid);
}

// ===========================================================================
// The thread pool.

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 5}) {
    kite::cpu::ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 100003}) {
      for (int64_t min_chunk : {1, 3, 1000}) {
        std::vector<int> hits(static_cast<size_t>(n), 0);
        pool.parallel_for(n, min_chunk, [&](int64_t b, int64_t e) {
          EXPECT_LE(0, b);
          EXPECT_LT(b, e);
          EXPECT_LE(e, n);
          for (int64_t i = b; i < e; ++i) ++hits[i];
        });
        EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), n) << threads << " " << n;
      }
    }
  }
}

// Jobs back to back whose chunk counts go up and down, each over a fresh
// stack frame: a worker late from one job must never run a chunk of it after
// the caller returned, nor a chunk past its end (the job's lambda would then
// read a dead frame). Every index of every job is covered exactly once.
TEST(ThreadPool, BackToBackJobsOfChangingSizes) {
  for (int threads : {2, 3}) {
    kite::cpu::ThreadPool pool(threads);
    const int64_t sizes[] = {2, 64, 3, 17, 8, 1, 40};
    for (int job = 0; job < 100000; ++job) {
      const int64_t n = sizes[job % 7];
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      const int expected_job = job;
      std::atomic<int> bad{0};
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
        if (expected_job != job || b < 0 || e > n || b >= e) bad.fetch_add(1);
        for (int64_t i = b; i < e && i < n; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      ASSERT_EQ(bad.load(), 0) << "job " << job;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << job << " index " << i;
    }
  }
}

// for_each_task: every task once, on at most `slices` threads, and slice s
// is always the same thread (the caller is slice 0), so a slice's scratch
// is never used by two threads at once, and thread s's share of a job is
// the same from one job to the next.
TEST(ThreadPool, ForEachTaskSlicesAreThreads) {
  for (int threads : {1, 2, 4}) {
    kite::cpu::ThreadPool pool(threads);
    std::mutex m;
    std::map<int64_t, std::thread::id> owner;
    for (int64_t slices : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{8}}) {
      for (int64_t tasks : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{64}, int64_t{70000}}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
        std::vector<std::atomic<int>> busy(static_cast<size_t>(threads));
        std::atomic<int> bad{0};
        pool.for_each_task(slices, tasks, [&](int64_t s, int64_t t) {
          if (s < 0 || s >= std::min<int64_t>(slices, threads) || t < 0 || t >= tasks) {
            bad.fetch_add(1);
            return;
          }
          if (busy[static_cast<size_t>(s)].fetch_add(1) != 0) bad.fetch_add(1);  // two threads on one slice
          hits[static_cast<size_t>(t)].fetch_add(1);
          if (t % 97 == 0) {
            std::lock_guard<std::mutex> lock(m);
            auto it = owner.emplace(s, std::this_thread::get_id()).first;
            if (it->second != std::this_thread::get_id()) bad.fetch_add(1);
          }
          busy[static_cast<size_t>(s)].fetch_sub(1);
        });
        ASSERT_EQ(bad.load(), 0) << threads << " threads, " << slices << " slices, " << tasks << " tasks";
        for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(hits[static_cast<size_t>(t)].load(), 1) << t;
      }
    }
    EXPECT_EQ(owner.count(0) ? owner[0] : std::this_thread::get_id(), std::this_thread::get_id());
  }
}

// The order for_each_task runs tasks in, made deterministic by tasks that
// wait on each other (5 s at most, then the test fails rather than hangs):
// each thread starts at the front of its own share (6 tasks on 2 threads:
// the caller 0, the worker 3), and a thread done with its share takes the
// others' from the back: with the worker held in task 3 until the caller
// has run five tasks, the caller runs 0, 1, 2, then 5, then 4.
TEST(ThreadPool, ForEachTaskRunsOwnShareThenStealsFromTheBack) {
  kite::cpu::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::mutex m;
  std::vector<int64_t> by_caller, by_worker;
  std::atomic<int> caller_done{0};
  std::atomic<bool> timed_out{false};
  auto wait_for = [&](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out = true;
        return;
      }
      std::this_thread::yield();
    }
  };
  pool.for_each_task(2, 6, [&](int64_t s, int64_t t) {
    const bool on_caller = std::this_thread::get_id() == caller;
    EXPECT_EQ(s, on_caller ? 0 : 1);
    {
      std::lock_guard<std::mutex> lock(m);
      (on_caller ? by_caller : by_worker).push_back(t);
    }
    // Task 0 waits until the worker has started (so the caller cannot take
    // the worker's share before it comes); task 3 until the caller has run
    // five tasks (so the caller must take 5 and 4 from the worker's share).
    if (t == 0) {
      wait_for([&] {
        std::lock_guard<std::mutex> lock(m);
        return !by_worker.empty();
      });
    }
    if (t == 3 && !on_caller) wait_for([&] { return caller_done.load() >= 5; });
    if (on_caller) caller_done.fetch_add(1);
  });
  ASSERT_FALSE(timed_out.load());
  EXPECT_EQ(by_caller, (std::vector<int64_t>{0, 1, 2, 5, 4}));
  EXPECT_EQ(by_worker, (std::vector<int64_t>{3}));
}

// The sleeping paths: a worker idle past ThreadPool::kSpin sleeps and the
// next job wakes it (task 0 waits, 5 s at most, for the worker to start task
// 1); a caller whose worker holds a chunk past kSpin sleeps and the worker
// wakes it when done (task 1 sleeps 3 ms on the worker). Lost wake-ups
// would time out the first and hang the second.
TEST(ThreadPool, SleepingWorkerAndSleepingCallerAreWoken) {
  kite::cpu::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 2 == 0 ? 5 : 0));
    std::atomic<bool> worker_started{false}, timed_out{false}, on_caller_1{false};
    std::atomic<int> ran{0};
    const auto start = std::chrono::steady_clock::now();
    pool.for_each_task(2, 2, [&](int64_t, int64_t t) {
      if (t == 1) {
        on_caller_1 = std::this_thread::get_id() == caller;
        worker_started = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      } else {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!worker_started.load()) {
          if (std::chrono::steady_clock::now() > deadline) {
            timed_out = true;
            break;
          }
          std::this_thread::yield();
        }
      }
      ran.fetch_add(1);
    });
    ASSERT_FALSE(timed_out.load()) << "round " << round << ": the worker was not woken";
    EXPECT_FALSE(on_caller_1.load()) << "round " << round;
    EXPECT_EQ(ran.load(), 2);
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(3));
  }
}

// How many threads ran chunks of up to 50 jobs of slow chunks (stops at 2).
size_t threads_that_ran(kite::cpu::ThreadPool& pool) {
  std::mutex m;
  std::vector<std::thread::id> seen;
  for (int round = 0; round < 50 && seen.size() < 2; ++round) {
    pool.parallel_for(64, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(m);
      if (std::find(seen.begin(), seen.end(), std::this_thread::get_id()) == seen.end()) {
        seen.push_back(std::this_thread::get_id());
      }
    });
  }
  return seen.size();
}

TEST(ThreadPool, UsesWorkersAndSingleThreadRunsInline) {
  kite::cpu::ThreadPool one(1);
  const auto caller = std::this_thread::get_id();
  one.parallel_for(1000, 1, [&](int64_t, int64_t) { EXPECT_EQ(std::this_thread::get_id(), caller); });
  kite::cpu::ThreadPool four(4);
  EXPECT_GE(threads_that_ran(four), 2u);
}

// set_inline: every job on the caller, one call over the whole range (slice
// 0 for every task), size() unchanged; cleared, the workers take chunks
// again.
TEST(ThreadPool, InlineRunsEveryJobOnTheCaller) {
  kite::cpu::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  pool.set_inline(true);
  EXPECT_TRUE(pool.is_inline());
  EXPECT_EQ(pool.size(), 2);
  int calls = 0;
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  std::vector<int> tasks(37, 0);
  pool.for_each_task(2, 37, [&](int64_t slice, int64_t t) {
    EXPECT_EQ(slice, 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++tasks[static_cast<size_t>(t)];
  });
  EXPECT_EQ(std::count(tasks.begin(), tasks.end(), 1), 37);
  pool.set_inline(false);
  EXPECT_EQ(threads_that_ran(pool), 2u);
}

// RunModeChooser's schedule, fed made-up run times: spread for the first
// kWarmNs; then the faster way, with blocks the other way now and then; the
// runs just after a change of way not counted; a slow start not taken for
// the steady state; long spread runs settle on spread for good, one long run
// does not.
TEST(RunModeChooser, KeepsTheFasterWayAndProbesTheOther) {
  using kite::cpu::RunModeChooser;
  // cost(way, ns since start, ns and runs since the last change of way): a
  // run's time. Returns the ways of the runs over total_ns of runs.
  auto schedule = [](int64_t total_ns, auto cost) {
    RunModeChooser c;
    std::vector<bool> ways;
    int64_t now = 0, changed_at = -total_ns, runs_since = 1000;  // no change before the first run
    while (now < total_ns) {
      const bool way = c.next_inline();
      if (!ways.empty() && ways.back() != way) {
        changed_at = now;
        runs_since = 0;
      }
      ways.push_back(way);
      const int64_t ns = cost(way, now, now - changed_at, runs_since++);
      c.record(ns);
      now += ns;
    }
    return ways;
  };
  // The share of inline runs among ways[from, to).
  auto inline_share = [](const std::vector<bool>& ways, size_t from, size_t to) {
    return static_cast<double>(std::count(ways.begin() + static_cast<std::ptrdiff_t>(from),
                                          ways.begin() + static_cast<std::ptrdiff_t>(to), true)) /
           static_cast<double>(to - from);
  };
  // A change of way costs: the first run after it 10 times its time when
  // spread, twice when on the caller, then the spread runs in the 3 ms
  // after it twice theirs (a core waking).
  auto switching = [](int64_t spread_ns, int64_t inline_ns) {
    return [=](bool way, int64_t /*now*/, int64_t since_ns, int64_t since_runs) {
      const int64_t base = way ? inline_ns : spread_ns;
      if (since_runs == 0) return (way ? 2 : 10) * base;
      if (!way && since_ns < 3000000) return 2 * base;
      return base;
    };
  };
  const int64_t second = 1000000000;

  // The caller alone faster (far placement): spread through the warm-up,
  // then inline but for the probes, which keep coming.
  std::vector<bool> w = schedule(2 * second, switching(200000, 120000));
  size_t warm = 0;
  for (int64_t ns = 0; ns < RunModeChooser::kWarmNs; ns += 200000) EXPECT_FALSE(w[warm++]) << warm;
  EXPECT_GT(inline_share(w, warm + 100, w.size()), 0.9);
  EXPECT_LT(inline_share(w, w.size() - 2000, w.size()), 1.0);  // a probe in the last 0.24 s
  // Spread faster (near placement): spread but for the probes.
  w = schedule(2 * second, switching(95000, 110000));
  EXPECT_LT(inline_share(w, warm, w.size()), 0.1);
  EXPECT_GT(inline_share(w, w.size() - 4000, w.size()), 0.0);
  // A slow start: spread runs take 0.4 ms for the first 40 ms (the other
  // core coming up to speed), 0.12 after; the caller alone 0.22. Spread
  // from early on, in the last second but for probes.
  w = schedule(2 * second, [](bool way, int64_t now, int64_t, int64_t) -> int64_t {
    return way ? 220000 : now < 40000000 ? 400000 : 120000;
  });
  EXPECT_LT(inline_share(w, w.size() / 2, w.size()), 0.1);
  // Spread runs over kMaxSpreadNs: spread always, the trials cut short;
  // one such run among short ones does not settle it.
  RunModeChooser big;
  for (int r = 0; r < 200; ++r) {
    EXPECT_FALSE(big.next_inline()) << r;
    big.record(RunModeChooser::kMaxSpreadNs + 1);
  }
  EXPECT_TRUE(big.settled_spread());
  RunModeChooser small;
  for (int r = 0; r < 200; ++r) small.record(r == 50 ? 10 * RunModeChooser::kMaxSpreadNs : 100000);
  EXPECT_FALSE(small.settled_spread());
}

// ===========================================================================
// The backend itself.

// The architecture's micro-kernel is the one that runs (NEON on AArch64,
// where the emulated CI run checks it), and it agrees with the portable
// kernel on tiles cut at every edge (m, n not multiples of 6 and 8; k across
// the 256-value blocks). Tolerance: both sum the same k products in the same
// order; they differ by FMA rounding (one rounding instead of two per step),
// at most ~k * 2^-24 * sum|a*b| relative; inputs in [-1, 1] give sum|a*b|
// <= k, so 1e-5 * k absolute is ample and still catches a wrong element.
// One column (n = 1) with enough rows that the GEMV splits its panels over
// the pool's threads: every row is one thread's whole sum, so the pool's
// result has the bits of the single-threaded one, and both are within the
// reference test's bound of the exact products.
TEST(Sgemm, OneColumnSplitOverThreadsMatchesOneThread) {
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool pool(3);
  const int64_t m = 8999, k = 129;  // 1500 panels, two chunks of the 1 MFLOP grain
  const std::vector<float> a = Random(m * k, 81), x = Random(k, 82), bias = Random(m, 83);
  std::vector<float> pa(static_cast<size_t>(sg::packed_a_floats(m, k)));
  sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
  std::vector<float> pb(static_cast<size_t>(sg::packed_b_floats(k, 1)));
  sg::pack_b(x.data(), 1, 1, k, 1, pb.data(), nullptr);
  std::vector<float> one(static_cast<size_t>(m)), many(one.size());
  sg::gemm_packed(m, 1, k, pa.data(), pb.data(), one.data(), 1, bias.data(), false, nullptr);
  sg::gemm_packed(m, 1, k, pa.data(), pb.data(), many.data(), 1, bias.data(), false, &pool);
  ASSERT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0);
  for (int64_t i = 0; i < m; ++i) {
    double want = bias[i], mag = std::fabs(bias[i]);
    for (int64_t p = 0; p < k; ++p) {
      want += static_cast<double>(a[i * k + p]) * x[p];
      mag += std::fabs(static_cast<double>(a[i * k + p]) * x[p]);
    }
    ASSERT_LE(std::fabs(one[i] - want), (k + 2) * std::ldexp(1.0, -24) * mag) << "row " << i;
  }
}

// A GEMM's first n columns (each n of ns) against the same columns of the
// whole GEMM (wide columns, where every strip is whole), bit for bit, on
// the AVX2 and AVX-512 levels: with B read in place (rows wide floats
// apart, and exactly n apart, so the last strip's whole-vector reads stop
// at B's end) and packed; k across two and three k blocks, every mode
// (plain, bias, accumulate, bias + Clip, Relu), one thread and a pool.
// Returns the levels run. The memory budget splits convolutions by columns
// and requires identical outputs, so a column's value must not depend on
// the tile the GEMM's width puts it in.
int ColumnsHaveTheWholeGemmsBits(int64_t m, int64_t wide, std::initializer_list<int64_t> ns, uint32_t seed) {
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool pool(2);
  int levels = 0;
  for (sg::MicroKernel kernel : {sg::MicroKernel::kAvx2Fma, sg::MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(kernel);
    if (!forced.ok()) continue;
    SCOPED_TRACE(kernel == sg::MicroKernel::kAvx512 ? "avx512" : "avx2");
    ++levels;
    for (int64_t k : {300, 513}) {
      const std::vector<float> a = Random(m * k, seed), b = Random(k * wide, seed + 1);
      const std::vector<float> bias = Random(m, seed + 2), c0 = Random(m * wide, seed + 3);
      std::vector<float> pa(static_cast<size_t>(sg::packed_a_floats(m, k)));
      sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
      for (int64_t n : ns) {
        std::vector<float> tight(static_cast<size_t>(k * n));
        for (int64_t p = 0; p < k; ++p) std::copy(&b[p * wide], &b[p * wide] + n, &tight[p * n]);
        std::vector<float> pb(static_cast<size_t>(sg::packed_b_floats(k, n)));
        sg::pack_b(b.data(), wide, 1, k, n, pb.data(), nullptr);
        for (int mode = 0; mode < 5; ++mode) {
          sg::Epilogue e;
          e.kind = mode == 3 ? sg::Epilogue::kClip : mode == 4 ? sg::Epilogue::kRelu : sg::Epilogue::kNone;
          e.lo = -0.5f;
          e.hi = 0.5f;
          const float* rb = mode == 1 || mode == 3 ? bias.data() : nullptr;
          for (kite::cpu::ThreadPool* p : {static_cast<kite::cpu::ThreadPool*>(nullptr), &pool}) {
            std::vector<float> ref = c0, got = c0, got_tight = c0, packed = c0;
            EXPECT_TRUE(sg::gemm_direct_b(m, wide, k, pa.data(), b.data(), wide, ref.data(), wide, rb, mode == 2,
                                          p, &e));
            EXPECT_TRUE(sg::gemm_direct_b(m, n, k, pa.data(), b.data(), wide, got.data(), wide, rb, mode == 2, p,
                                          &e));
            EXPECT_TRUE(sg::gemm_direct_b(m, n, k, pa.data(), tight.data(), n, got_tight.data(), wide, rb,
                                          mode == 2, p, &e));
            sg::gemm_packed(m, n, k, pa.data(), pb.data(), packed.data(), wide, rb, mode == 2, p, &e);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < wide; ++j) {
                const float want = j < n ? ref[i * wide + j] : c0[i * wide + j];
                for (const std::vector<float>* v : {&got, &got_tight, &packed}) {
                  if (std::memcmp(&(*v)[i * wide + j], &want, sizeof(float)) == 0) continue;
                  ADD_FAILURE() << (v == &got ? "in place" : v == &got_tight ? "in place, ldb = n" : "packed")
                                << ": k " << k << " n " << n << " mode " << mode << (p ? " pool" : "") << " at ("
                                << i << "," << j << "): " << (*v)[i * wide + j] << " vs " << want;
                  return levels;
                }
              }
            }
          }
        }
      }
    }
  }
  return levels;
}

// A last column alone in its 16-lane vector (n = 17, 49 = 32 + 16 + 1) is
// computed apart on AVX-512 and AVX2 (column_avx512, column_avx2) with the
// block kernel's arithmetic; on AVX2 also the last of 9 (25 = 16 + 9, 41 =
// 32 + 9), the 8 before it in a 12x8 tile.
TEST(Sgemm, LoneLastColumnHasTheBlockKernelsBits) {
  if (ColumnsHaveTheWholeGemmsBits(19, 64, {17, 25, 41, 49}, 95) == 0) {
    GTEST_SKIP() << "a lone column is computed apart on AVX2 and AVX-512 only";
  }
}

// A last strip of 1-8 columns under a pair of A panels goes to the AVX2
// level's 12x8 tile (tile12x8) with the 6x16 tile's arithmetic: tails of 4
// and 8 columns (196 and 200 = 6 x 32 + 8; m = 25, so a lone last row in
// the 2x32 tile beside them).
TEST(Sgemm, NarrowLastStripHasTheWideTilesBits) {
  if (ColumnsHaveTheWholeGemmsBits(25, 208, {196, 200}, 171) == 0) {
    GTEST_SKIP() << "the AVX2 and AVX-512 levels only";
  }
}

// On AVX-512 the last 1-8 columns of a strip of 16 (up to 4 where k is
// under 128) go to column_avx512, up to eight side by side sharing the A
// loads, with the block kernel's arithmetic: every tail from 1 to 8 (193
// .. 200 = 12 x 16 + 1 .. 8) under 11 A panels (m = 61: a step of eight
// panels, then three, the last vector with one panel), so each column's
// bits are those of the same column in a wider GEMM.
TEST(Sgemm, FewLastColumnsHaveTheBlockKernelsBits) {
  if (ColumnsHaveTheWholeGemmsBits(61, 208, {193, 194, 195, 196, 197, 198, 199, 200}, 211) == 0) {
    GTEST_SKIP() << "the AVX2 and AVX-512 levels only";
  }
}

// One row (m = 1, a fully connected layer at batch 1) from packed B goes
// to row_avx512 on AVX-512 (row_avx2 on AVX2), with the block kernel's
// arithmetic: its bits
// are those of the same row computed among seven (where the block kernel
// runs). k within one k block and across two and three, column tails
// inside a panel, a pair and a group of 64, every mode (plain, row bias,
// accumulate, Relu, Clip), one thread and a pool; nothing past n touched.
TEST(Sgemm, OneRowHasTheBlockKernelsBits) {
  namespace sg = kite::cpu::sgemm;
  kite::cpu::ThreadPool pool(2);
  const int64_t rows = 7;
  for (int64_t k : {3, 300, 513}) {
    for (int64_t n : {5, 17, 64, 71, 1000}) {
      const std::vector<float> a = Random(rows * k, 191), b = Random(k * n, 192), bias = Random(rows, 193);
      const std::vector<float> c0 = Random(rows * (n + 3), 194);
      std::vector<float> pa1(sg::packed_a_floats(1, k)), pa7(sg::packed_a_floats(rows, k));
      std::vector<float> pb(sg::packed_b_floats(k, n));
      sg::pack_a(a.data(), k, 1, 1, k, 1.0f, pa1.data(), nullptr);
      sg::pack_a(a.data(), k, 1, rows, k, 1.0f, pa7.data(), nullptr);
      sg::pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
      const int64_t ldc = n + 3;
      for (int mode = 0; mode < 5; ++mode) {  // plain, bias, accumulate, Relu, Clip
        sg::Epilogue e;
        e.kind = mode == 3 ? sg::Epilogue::kRelu : mode == 4 ? sg::Epilogue::kClip : sg::Epilogue::kNone;
        e.lo = -0.5f;
        e.hi = 0.5f;
        const float* rb = mode == 1 || mode == 4 ? bias.data() : nullptr;
        for (kite::cpu::ThreadPool* p : {static_cast<kite::cpu::ThreadPool*>(nullptr), &pool}) {
          std::vector<float> ref = c0, got = c0;
          sg::gemm_packed(rows, n, k, pa7.data(), pb.data(), ref.data(), ldc, rb, mode == 2, p, &e);
          sg::gemm_packed(1, n, k, pa1.data(), pb.data(), got.data(), ldc, rb, mode == 2, p, &e);
          for (int64_t j = 0; j < ldc; ++j) {
            const float want = j < n ? ref[j] : c0[j];
            ASSERT_EQ(std::memcmp(&got[j], &want, sizeof(float)), 0)
                << "k " << k << " n " << n << " mode " << mode << (p ? " pool" : "") << " at " << j << ": "
                << got[j] << " vs " << want;
          }
        }
      }
    }
  }
}

// One column (n = 1) from B packed (x every 8 floats) or read in place with
// rows 3 floats apart: the GEMV copies x contiguous when k <= 4096 and
// gathers it when longer; both sides of that limit against the reference
// test's bound of the exact products (then clipped, which only brings a
// value closer to its clipped exact value).
TEST(Sgemm, OneColumnOnEitherSideOfTheCopyLimit) {
  namespace sg = kite::cpu::sgemm;
  for (int64_t k : {4096, 4097}) {
    const int64_t m = 13, ldb = 3;
    const std::vector<float> a = Random(m * k, 91), b = Random(k * ldb, 92), bias = Random(m, 93);
    std::vector<float> pa(static_cast<size_t>(sg::packed_a_floats(m, k)));
    std::vector<float> pb(static_cast<size_t>(sg::packed_b_floats(k, 1)));
    sg::pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
    sg::pack_b(b.data(), ldb, 1, k, 1, pb.data(), nullptr);
    sg::Epilogue clip;
    clip.kind = sg::Epilogue::kClip;
    clip.lo = -4.0f;
    clip.hi = 4.0f;
    std::vector<float> packed(static_cast<size_t>(m)), direct(packed.size());
    sg::gemm_packed(m, 1, k, pa.data(), pb.data(), packed.data(), 1, bias.data(), false, nullptr, &clip);
    if (sg::gemm_direct_b(m, 1, k, pa.data(), b.data(), ldb, direct.data(), 1, bias.data(), false, nullptr,
                          &clip)) {
      ASSERT_EQ(std::memcmp(direct.data(), packed.data(), packed.size() * sizeof(float)), 0) << "k " << k;
    }
    for (int64_t i = 0; i < m; ++i) {
      double want = bias[i], mag = std::fabs(bias[i]);
      for (int64_t p = 0; p < k; ++p) {
        const double t = static_cast<double>(a[i * k + p]) * b[p * ldb];
        want += t;
        mag += std::fabs(t);
      }
      const double tol = (k + 2) * std::ldexp(1.0, -24) * mag;
      want = std::min<double>(std::max<double>(want, clip.lo), clip.hi);
      ASSERT_LE(std::fabs(packed[i] - want), tol) << "k " << k << " row " << i;
    }
  }
}

// transpose_tiles against its definition, exactly (it moves bytes): every
// element size, rows and columns around the 16-wide tiles (full tiles,
// tails, fewer than one tile), a batch with a stride wider than a matrix,
// input columns wider than rows, on one thread and on a pool, with the
// AVX-512 and AVX2 float tiles and without (the portable GEMM level turns
// them off).
TEST(TransposeTiles, MatchTheirDefinition) {
  using kite::cpu::sgemm::MicroKernel;
  kite::cpu::ThreadPool one(1), pool(3);
  for (MicroKernel level : {MicroKernel::kPortable, MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(level);
    if (!forced.ok()) continue;
    for (size_t size : {1, 2, 4, 8}) {
      for (int64_t rows : {5, 16, 17, 49}) {
        for (int64_t cols : {3, 16, 33}) {
          for (int64_t batch : {1, 2}) {
            const int64_t col_stride = rows + 3, batch_stride = cols * col_stride + 5;
            std::vector<uint8_t> in(static_cast<size_t>(batch * batch_stride) * size);
            for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 131 + 7);
            for (kite::cpu::ThreadPool* p : {&one, &pool}) {
              std::vector<uint8_t> out(static_cast<size_t>(batch * rows * cols) * size, 0xEE);
              ASSERT_TRUE(kite::cpu::transpose_tiles(in.data(), out.data(), size, batch, batch_stride,
                                                     rows, cols, col_stride, *p));
              for (int64_t b = 0; b < batch; ++b) {
                for (int64_t r = 0; r < rows; ++r) {
                  for (int64_t c = 0; c < cols; ++c) {
                    const size_t o = static_cast<size_t>((b * rows + r) * cols + c) * size;
                    const size_t i = static_cast<size_t>(b * batch_stride + r + c * col_stride) * size;
                    ASSERT_EQ(std::memcmp(&out[o], &in[i], size), 0)
                        << "size " << size << " rows " << rows << " cols " << cols << " batch " << batch
                        << " at (" << b << "," << r << "," << c << ")";
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_FALSE(kite::cpu::transpose_tiles(nullptr, nullptr, 3, 1, 0, 1, 1, 1, one));
}

// pack_a at every level against its definition, bit for bit: panel ip,
// column p, row r holds a[(6 ip + r) * row_stride + p * col_stride] * alpha,
// 0 past m. Rows wider than k (row_stride > k), k with and without a tail
// past a multiple of 16 and of 8 (the AVX-512 permutes take 16 columns a
// step, the AVX2 transpose 8), a last panel of fewer rows, alpha 1 and not,
// and a transposed A (col_stride > 1, the portable loop at every level).
TEST(Sgemm, PackAMatchesItsDefinitionAtEveryLevel) {
  using kite::cpu::sgemm::MicroKernel;
  namespace sg = kite::cpu::sgemm;
  for (MicroKernel kernel : {MicroKernel::kPortable, MicroKernel::kAvx2Fma, MicroKernel::kAvx512}) {
    const ForcedGemmKernel forced(kernel);
    if (!forced.ok()) continue;
    for (int64_t m : {1, 6, 13, 24}) {
      for (int64_t k : {1, 15, 16, 37, 96}) {
        for (float alpha : {1.0f, -0.75f}) {
          for (bool transposed : {false, true}) {
            const int64_t rs = transposed ? 1 : k + 3, cs = transposed ? m : 1;
            const std::vector<float> a = Random((transposed ? k * m : m * (k + 3)), 71);
            std::vector<float> packed(static_cast<size_t>(sg::packed_a_floats(m, k)), 99.0f);
            sg::pack_a(a.data(), rs, cs, m, k, alpha, packed.data(), nullptr);
            for (int64_t i = 0; i < m + (6 - m % 6) % 6; ++i) {
              for (int64_t p = 0; p < k; ++p) {
                const float want = i < m ? a[i * rs + p * cs] * alpha : 0.0f;
                const float got = packed[(i / 6) * k * 6 + p * 6 + i % 6];
                ASSERT_EQ(std::memcmp(&want, &got, sizeof got), 0)
                    << "m=" << m << " k=" << k << " alpha=" << alpha << " transposed=" << transposed
                    << " row " << i << " column " << p << ": " << got << " for " << want;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Sgemm, ArchMicroKernelSelectedAndMatchesPortable) {
  using namespace kite::cpu::sgemm;
#if defined(__aarch64__)
  EXPECT_EQ(micro_kernel_in_use(), MicroKernel::kNeon);
#else
  EXPECT_NE(micro_kernel_in_use(), MicroKernel::kNeon);
#endif
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t sizes[][3] = {{1, 1, 1}, {6, 8, 5}, {13, 17, 300}, {25, 9, 513}, {12, 16, 256}};
  for (const auto& sz : sizes) {
    const int64_t m = sz[0], n = sz[1], k = sz[2];
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> pa(static_cast<size_t>(packed_a_floats(m, k)));
    std::vector<float> pb(static_cast<size_t>(packed_b_floats(k, n)));
    pack_a(a.data(), k, 1, m, k, 1.0f, pa.data(), nullptr);
    pack_b(b.data(), n, 1, k, n, pb.data(), nullptr);
    std::vector<float> best(static_cast<size_t>(m * n)), portable(best.size());
    gemm_packed(m, n, k, pa.data(), pb.data(), best.data(), n, nullptr, false, nullptr);
    {
      const PortableGemm force(true);
      gemm_packed(m, n, k, pa.data(), pb.data(), portable.data(), n, nullptr, false, nullptr);
    }
    for (size_t i = 0; i < best.size(); ++i) {
      ASSERT_NEAR(best[i], portable[i], 1e-5 * static_cast<double>(k))
          << "m=" << m << " n=" << n << " k=" << k << " element " << i;
    }
  }
}

TEST(CpuBackend, ApiTable) {
  const kite_backend_api* api = kite_cpu_backend_api();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->abi_version, static_cast<uint32_t>(KITE_BACKEND_ABI_VERSION));
  EXPECT_EQ(api->struct_size, sizeof(kite_backend_api));
  EXPECT_STREQ(api->name, "cpu");
  EXPECT_EQ(api->memory, KITE_BACKEND_MEMORY_HOST);
  // ABI v2: the v1 entry points are left NULL (the header's rule).
  EXPECT_EQ(api->create, nullptr);
  EXPECT_EQ(api->supports, nullptr);
  EXPECT_EQ(api->prepare, nullptr);
  EXPECT_NE(api->create2, nullptr);
  EXPECT_NE(api->supports2, nullptr);
  EXPECT_NE(api->prepare2, nullptr);
  EXPECT_NE(api->workspace_size, nullptr);
  EXPECT_NE(api->bind, nullptr);
  EXPECT_NE(api->execute, nullptr);
  EXPECT_NE(api->release, nullptr);
  EXPECT_NE(api->kernel_time, nullptr);
  EXPECT_EQ(api->buffer_alloc, nullptr);
}

TEST(CpuBackend, DeviceNameSaysTheIsaLevelInUse) {
  // The level is the one the GEMM runs at (and the packed-form key's); on
  // AArch64 the Armv8.2 fp16 / dot-product extensions as found at run time.
  const kite_backend_api* api = kite_cpu_backend_api();
  kite_backend_device_info info{};
  info.struct_size = sizeof info;
  char err[256] = {};
  ASSERT_EQ(api->device_info(0, &info, err, sizeof err), KITE_OK) << err;
  const std::string name = info.name;
  const kite::cpu::sgemm::MicroKernel level = kite::cpu::sgemm::micro_kernel_in_use();
  const char* expected = level == kite::cpu::sgemm::MicroKernel::kAvx512  ? "(x86-avx512"
                         : level == kite::cpu::sgemm::MicroKernel::kAvx2Fma ? "(x86-avx2"
                         : level == kite::cpu::sgemm::MicroKernel::kNeon    ? "(arm64-neon; "
                                                                             : "(portable";
  EXPECT_NE(name.find(expected), std::string::npos) << name;
#if defined(__aarch64__)
  const kite::cpu::sgemm::detail::ArmFeatures f = kite::cpu::sgemm::detail::arm_features();
  EXPECT_EQ(name.find("fp16 arithmetic") != std::string::npos, f.fp16_arithmetic) << name;
  EXPECT_EQ(name.find("dot product") != std::string::npos && name.find("no Armv8.2") == std::string::npos,
            f.dot_product)
      << name;
#endif
}

TEST(CpuBackend, CreateRejectsNegativeThreads) {
  const kite_backend_api* api = kite_cpu_backend_api();
  kite_backend_create_info info{};
  info.struct_size = sizeof info;
  info.threads = -2;
  void* b = nullptr;
  char err[128] = "";
  EXPECT_EQ(api->create2(nullptr, &info, &b, err, sizeof(err)), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("threads"), std::string::npos);
  info.threads = 1 << 20;  // refused before any thread starts
  EXPECT_EQ(api->create2(nullptr, &info, &b, err, sizeof(err)), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("1048576"), std::string::npos) << err;
  // Default options (NULL) pick the number of cores.
  ASSERT_EQ(api->create2(nullptr, nullptr, &b, err, sizeof(err)), KITE_OK) << err;
  api->destroy(b);
}

TEST(CpuBackend, KernelTableHasNoDuplicatesAndOnlyKnownOps) {
  EXPECT_EQ(kite::cpu::validate_kernel_table(), "");
  for (const kite::cpu::KernelEntry& e : kite::cpu::kernel_table()) {
    EXPECT_TRUE(kite::ops::is_known_op(e.op)) << e.op << " has no shape rules";
    EXPECT_EQ(kite::cpu::find_kernel(e.op), &e);
  }
  EXPECT_EQ(kite::cpu::find_kernel("NoSuchOp"), nullptr);
}

TEST(CpuBackend, SupportsGivesReasons) {
  Backend b;
  Node unknown("FrobnicateTensor", "weird");
  unknown.in({2}, {1, 2}).out({2});
  const std::string why = b.why_not(unknown);
  EXPECT_NE(why.find("FrobnicateTensor"), std::string::npos) << why;

  Node fused("Conv", "fused0");
  fused.fused("ConvAddRelu").in({1, 1, 3, 3}, Random(9, 1)).in({1, 1, 1, 1}, {1}, true).out({1, 1, 3, 3});
  EXPECT_NE(b.why_not(fused).find("no fused kernel for pattern ConvAddRelu"), std::string::npos);

  Node domain("Relu");
  domain.domain("com.microsoft").in({2}, {1, 2}).out({2});
  EXPECT_NE(b.why_not(domain).find("com.microsoft"), std::string::npos);

  Node int_conv("Conv");
  int_conv.in_i64({1, 1, 2, 2}, {1, 2, 3, 4}, false).in_i64({1, 1, 1, 1}, {1}).out({1, 1, 2, 2}, I64);
  EXPECT_NE(b.why_not(int_conv).find("int64"), std::string::npos) << b.why_not(int_conv);

  Node ok("Relu");
  ok.in({2}, {1, -2}).out({2});
  EXPECT_EQ(b.why_not(ok), "");

  // A tiny reason buffer is truncated, not overrun.
  char tiny[8];
  std::memset(tiny, 'x', sizeof(tiny));
  EXPECT_EQ(b.api()->supports2(b.instance(), unknown.abi(), tiny, 5), 0);
  EXPECT_EQ(std::strlen(tiny), 4u);
  EXPECT_EQ(tiny[5], 'x');
}

TEST(CpuBackend, FusedNodesGoToTheFusedTable) {
  EXPECT_NE(kite::cpu::find_fused_kernel("FusedConv"), nullptr);
  EXPECT_EQ(kite::cpu::find_fused_kernel("Conv"), nullptr);
  Backend b;
  // Conv+Relu as the optimizer writes it: op FusedConv in domain "kite".
  const std::vector<float> x = {1, -2, 3, -4, 5, -6, 7, -8, 9};
  Node fused("FusedConv", "fc");
  fused.domain("kite").fused("Conv+Relu").in({1, 1, 3, 3}, x).in({1, 1, 1, 1}, {2.0f}, true)
      .in({1}, {-1.0f}, true).out({1, 1, 3, 3}).s("activation", "Relu");
  EXPECT_EQ(b.why_not(fused), "");
  ASSERT_TRUE(Runs(b, fused));
  ExpectExact(fused.result(), {1, 0, 5, 0, 9, 0, 13, 0, 17});
  // A fused op in the wrong domain, or one without a kernel, is declined.
  Node wrong_domain("FusedConv");
  wrong_domain.fused("Conv+Relu").in({1, 1, 3, 3}, x).in({1, 1, 1, 1}, {2.0f}, true).out({1, 1, 3, 3})
      .s("activation", "Relu");
  EXPECT_NE(b.why_not(wrong_domain).find("no fused kernel for pattern Conv+Relu"), std::string::npos);
  Node unknown("FusedTeleport");
  unknown.domain("kite").fused("Beam+Me+Up").in({1}, {1}).out({1});
  EXPECT_NE(b.why_not(unknown).find("no fused kernel for pattern Beam+Me+Up"), std::string::npos);
  std::string err;
  EXPECT_EQ(b.run(unknown, &err), KITE_ERROR_UNSUPPORTED);
}

TEST(CpuBackend, PrepareRejectsWrongDeclaredOutput) {
  Backend b;
  Node n("Add", "the_adder");
  n.in({2, 3}, Random(6, 1)).in({3}, Random(3, 2)).out({3, 2});
  std::string err;
  EXPECT_NE(b.run(n, &err), KITE_OK);
  EXPECT_NE(err.find("the_adder"), std::string::npos) << err;

  Node conv("Conv", "conv_bad");
  conv.in({1, 1, 4, 4}, Random(16, 1)).in({2, 1, 3, 3}, Random(18, 2), true).out({1, 2, 4, 4});
  EXPECT_NE(b.run(conv, &err), KITE_OK);
  EXPECT_NE(err.find("conv_bad"), std::string::npos) << err;

  Node dtype("Relu", "relu_bad");
  dtype.in({2}, {1, 2}).out({2}, I64);
  EXPECT_NE(b.run(dtype, &err), KITE_OK);
  EXPECT_NE(err.find("relu_bad"), std::string::npos) << err;
}

TEST(CpuBackend, PrepareRejectsShortBuffers) {
  Backend b;
  Node n("Relu", "short");
  n.in({4}, {1, 2, 3, 4}).out({4});
  n.abi();
  n.output().abi.byte_size = 8;  // less than 4 floats
  std::string err;
  EXPECT_EQ(b.run(n, &err), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(err.find("short"), std::string::npos) << err;
}

TEST(CpuBackend, ErrorBufferIsTruncatedSafely) {
  Backend b;
  Node n("Add", "a_node_with_a_rather_long_name_to_overflow_small_buffers");
  n.in({2, 3}, Random(6, 1)).in({3}, Random(3, 2)).out({7});
  char err[16];
  std::memset(err, 'x', sizeof(err));
  void* kernel = nullptr;
  EXPECT_NE(b.api()->prepare2(b.instance(), n.abi(), &kernel, err, 10), KITE_OK);
  EXPECT_EQ(std::strlen(err), 9u);
  EXPECT_EQ(err[10], 'x');
}

// ===========================================================================
// Elementwise with broadcasting.

std::vector<float> RefBinary(const Shape& a_shape, const std::vector<float>& a, const Shape& b_shape,
                             const std::vector<float>& b, const Shape& out_shape,
                             const std::function<float(float, float)>& f) {
  std::vector<float> out(static_cast<size_t>(Numel(out_shape)));
  for (int64_t i = 0; i < Numel(out_shape); ++i) {
    const Shape idx = Unravel(i, out_shape);
    out[i] = f(a[BroadcastOffset(a_shape, idx)], b[BroadcastOffset(b_shape, idx)]);
  }
  return out;
}

struct BroadcastCase {
  Shape a, b, out;
};

void PrintTo(const BroadcastCase& c, std::ostream* os) {
  *os << Str(c.a) << " op " << Str(c.b) << " -> " << Str(c.out);
}

class BinaryBroadcast : public ::testing::TestWithParam<BroadcastCase> {};

TEST_P(BinaryBroadcast, MatchesReference) {
  const BroadcastCase& c = GetParam();
  const std::vector<float> a = Random(Numel(c.a), 11), b0 = Random(Numel(c.b), 12);
  std::vector<float> b = b0;
  for (float& x : b) x = x >= 0 ? x + 0.5f : x - 0.5f;  // keep divisors away from 0
  const std::pair<const char*, std::function<float(float, float)>> ops[] = {
      {"Add", [](float x, float y) { return x + y; }},
      {"Sub", [](float x, float y) { return x - y; }},
      {"Mul", [](float x, float y) { return x * y; }},
      {"Div", [](float x, float y) { return x / y; }},
  };
  for (int threads : {1, 3}) {
    Backend be(threads);
    for (const auto& [op, f] : ops) {
      SCOPED_TRACE(std::string(op) + " threads " + std::to_string(threads));
      Node n(op);
      n.in(c.a, a).in(c.b, b).out(c.out);
      ASSERT_TRUE(Runs(be, n));
      ExpectExact(n.result(), RefBinary(c.a, a, c.b, b, c.out, f));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BinaryBroadcast,
    ::testing::Values(BroadcastCase{{2, 3, 1}, {1, 4}, {2, 3, 4}},
                      BroadcastCase{{}, {3, 5}, {3, 5}},        // scalar
                      BroadcastCase{{3, 5}, {}, {3, 5}},
                      BroadcastCase{{1}, {7}, {7}},
                      BroadcastCase{{4, 1, 3}, {5, 1}, {4, 5, 3}},
                      BroadcastCase{{2, 1, 3, 1}, {1, 4, 1, 5}, {2, 4, 3, 5}},
                      BroadcastCase{{6, 7}, {6, 7}, {6, 7}},
                      BroadcastCase{{1, 1}, {1, 1}, {1, 1}},
                      BroadcastCase{{3, 1, 1}, {1, 1, 1}, {3, 1, 1}},
                      BroadcastCase{{2, 64, 33}, {64, 1}, {2, 64, 33}},
                      // A value a channel times its plane (squeeze-and-
                      // excitation), both orders: 16-lane steps and a tail.
                      BroadcastCase{{1, 5, 7, 9}, {1, 5, 1, 1}, {1, 5, 7, 9}},
                      BroadcastCase{{1, 5, 1, 1}, {1, 5, 7, 9}, {1, 5, 7, 9}},
                      // Fewer rows than twice the threads, longer than a
                      // piece (16384): rows split into pieces.
                      BroadcastCase{{1, 3, 40001}, {1, 1, 40001}, {1, 3, 40001}},
                      BroadcastCase{{40001}, {}, {40001}},
                      BroadcastCase{{0, 3}, {3}, {0, 3}}));  // zero-size

TEST(Elementwise, LargeSameShapeAddThreaded) {
  const int64_t n = 300001;
  const std::vector<float> a = Random(n, 1), b = Random(n, 2);
  Backend be(4);
  Node add("Add");
  add.in({n}, a).in({n}, b).out({n});
  ASSERT_TRUE(Runs(be, add));
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  ExpectExact(add.result(), want);
}

TEST(Elementwise, IntegerArithmetic) {
  Backend be;
  // int32 with broadcasting; division truncates toward zero; x / 0 gives 0
  // (undefined in ONNX; the kernel must not trap).
  Node div("Div");
  div.in_i32({2, 3}, {7, -7, 9, INT32_MIN, 5, 0}, false).in_i32({3}, {2, 2, -1}, false).out({2, 3}, I32);
  ASSERT_TRUE(Runs(be, div));
  EXPECT_EQ(div.output().values<int32_t>(),
            (std::vector<int32_t>{3, -3, -9, INT32_MIN / 2, 2, 0}));
  Node div0("Div");
  div0.in_i64({3}, {5, -5, INT64_MIN}, false).in_i64({3}, {0, 3, -1}, false).out({3}, I64);
  ASSERT_TRUE(Runs(be, div0));
  EXPECT_EQ(div0.output().values<int64_t>(), (std::vector<int64_t>{0, -1, INT64_MIN}));

  Node add("Add");
  add.in_i64({2, 1}, {10, 20}, false).in_i64({3}, {1, 2, 3}, false).out({2, 3}, I64);
  ASSERT_TRUE(Runs(be, add));
  EXPECT_EQ(add.output().values<int64_t>(), (std::vector<int64_t>{11, 12, 13, 21, 22, 23}));
  Node mul("Mul");
  mul.in_i32({2}, {INT32_MAX, -3}, false).in_i32({}, {2}, false).out({2}, I32);
  ASSERT_TRUE(Runs(be, mul));
  EXPECT_EQ(mul.output().values<int32_t>(), (std::vector<int32_t>{-2, -6}));  // wraps
  Node sub("Sub");
  sub.in_i32({3}, {1, 2, 3}, false).in_i32({1}, {5}, false).out({3}, I32);
  ASSERT_TRUE(Runs(be, sub));
  EXPECT_EQ(sub.output().values<int32_t>(), (std::vector<int32_t>{-4, -3, -2}));
}

TEST(Elementwise, AddInPlace) {
  // The memory plan may give an elementwise output its dying input's buffer.
  Backend be(2);
  Node n("Add");
  const std::vector<float> a = Random(1000, 3), b = Random(1000, 4);
  n.in({10, 100}, a).in({100}, std::vector<float>(b.begin(), b.begin() + 100)).out({10, 100});
  n.abi();
  n.output().abi.data = n.input(0).abi.data;
  ASSERT_TRUE(Runs(be, n));
  const std::vector<float> got = n.input(0).values<float>();
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(got[i], a[i] + b[i % 100]);
}

TEST(Elementwise, ReluSigmoidClip) {
  Backend be(2);
  const std::vector<float> x = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f, 7.5f, -100.0f, 100.0f};
  Node relu("Relu");
  relu.in({8}, x).out({8});
  ASSERT_TRUE(Runs(be, relu));
  ExpectExact(relu.result(), {0, 0, 0, 0.25f, 2, 7.5f, 0, 100});

  Node sig("Sigmoid");
  sig.in({2, 4}, x).out({2, 4});
  ASSERT_TRUE(Runs(be, sig));
  std::vector<double> want;
  for (float v : x) want.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
  ExpectNear(sig.result(), want, 1e-5, 1e-6);

  Node clip("Clip");  // opset 11+: bounds as inputs
  clip.in({8}, x).in({}, {-1.0f}, true).in({}, {2.5f}, true).out({8});
  ASSERT_TRUE(Runs(be, clip));
  ExpectExact(clip.result(), {-1, -0.5f, 0, 0.25f, 2, 2.5f, -1, 2.5f});

  Node clip_max_only("Clip");
  clip_max_only.in({8}, x).absent().in({}, {0.1f}, false).out({8});
  ASSERT_TRUE(Runs(be, clip_max_only));
  ExpectExact(clip_max_only.result(), {-3, -0.5f, 0, 0.1f, 0.1f, 0.1f, -100, 0.1f});

  Node clip_none("Clip");
  clip_none.in({8}, x).out({8});
  ASSERT_TRUE(Runs(be, clip_none));
  ExpectExact(clip_none.result(), x);
}

// ===========================================================================
// Convolution.

struct ConvCase {
  int64_t n, c, m, group;
  Shape in;  // spatial
  Shape kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad;  // "" = NOTSET with explicit pads
  bool bias;
};

// Output size along one axis (ONNX Conv).
int64_t ConvOut(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  return (in + pb + pe - (d * (k - 1) + 1)) / s + 1;
}

// Naive Conv, any number of spatial dims, from the ONNX definition.
DotRef RefConv(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w,
               const std::vector<float>& bias, const Shape& pads_begin, const Shape& out_sp) {
  const size_t r = c.in.size();
  const int64_t cg = c.c / c.group, mg = c.m / c.group;
  const int64_t out_pixels = Numel(out_sp), in_pixels = Numel(c.in), taps = Numel(c.kernel);
  DotRef ref(c.n * c.m * out_pixels);
  ref.terms = cg * taps;
  for (int64_t n = 0; n < c.n; ++n) {
    for (int64_t m = 0; m < c.m; ++m) {
      const int64_t g = m / mg;
      for (int64_t o = 0; o < out_pixels; ++o) {
        const int64_t oi = (n * c.m + m) * out_pixels + o;
        if (c.bias) ref.add(oi, bias[m]);
        const Shape op = Unravel(o, out_sp);
        for (int64_t ci = 0; ci < cg; ++ci) {
          for (int64_t t = 0; t < taps; ++t) {
            const Shape kp = Unravel(t, c.kernel);
            int64_t in_off = 0;
            bool inside = true;
            for (size_t a = 0; a < r; ++a) {
              const int64_t pos = op[a] * c.strides[a] - pads_begin[a] + kp[a] * c.dilations[a];
              if (pos < 0 || pos >= c.in[a]) inside = false;
              in_off = in_off * c.in[a] + pos;
            }
            if (!inside) continue;
            const float xv = x[(n * c.c + g * cg + ci) * in_pixels + in_off];
            const float wv = w[(m * cg + ci) * taps + t];
            ref.add(oi, static_cast<double>(xv) * wv);
          }
        }
      }
    }
  }
  return ref;
}

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "n" << c.n << " c" << c.c << " m" << c.m << " g" << c.group << " in" << Str(c.in) << " k"
      << Str(c.kernel) << " s" << Str(c.strides) << " d" << Str(c.dilations) << " p" << Str(c.pads)
      << " " << c.auto_pad << (c.bias ? " bias" : "");
}

class ConvSweep : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvSweep, MatchesReference) {
  const ConvCase& c = GetParam();
  const size_t r = c.in.size();
  Shape pads_begin(r), pads_end(r), out_sp(r);
  for (size_t a = 0; a < r; ++a) {
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out_sp[a] = (c.in[a] + c.strides[a] - 1) / c.strides[a];
      const int64_t total = std::max<int64_t>(
          0, (out_sp[a] - 1) * c.strides[a] + c.dilations[a] * (c.kernel[a] - 1) + 1 - c.in[a]);
      pads_begin[a] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads_end[a] = total - pads_begin[a];
    } else if (c.auto_pad == "VALID") {
      out_sp[a] = ConvOut(c.in[a], c.kernel[a], c.strides[a], c.dilations[a], 0, 0);
    } else {
      pads_begin[a] = c.pads[a];
      pads_end[a] = c.pads[r + a];
      out_sp[a] = ConvOut(c.in[a], c.kernel[a], c.strides[a], c.dilations[a], pads_begin[a], pads_end[a]);
    }
  }
  Shape x_shape = {c.n, c.c}, w_shape = {c.m, c.c / c.group}, y_shape = {c.n, c.m};
  x_shape.insert(x_shape.end(), c.in.begin(), c.in.end());
  w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
  y_shape.insert(y_shape.end(), out_sp.begin(), out_sp.end());
  const std::vector<float> x = Random(Numel(x_shape), 21), w = Random(Numel(w_shape), 22),
                           bias = Random(c.m, 23);
  const DotRef ref = RefConv(c, x, w, bias, pads_begin, out_sp);
  for (int threads : {1, 3}) {
    for (bool constant_w : {true, false}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (constant_w ? " constant W" : " computed W"));
      // Computed weights go through the portable micro-kernel.
      const PortableGemm portable(!constant_w);
      Backend be(threads);
      Node n("Conv", "conv");
      n.in(x_shape, x).in(w_shape, w, constant_w);
      if (c.bias) n.in({c.m}, bias, true);
      n.out(y_shape).i("group", c.group).ints("strides", c.strides).ints("dilations", c.dilations);
      if (c.auto_pad.empty()) n.ints("pads", c.pads); else n.s("auto_pad", c.auto_pad);
      if (threads == 1) n.ints("kernel_shape", c.kernel);
      ASSERT_TRUE(Runs(be, n));
      ExpectDot(n.result(), ref);
    }
  }
  // Where the best level is AVX-512, the AVX2 level's own paths too (its
  // block and column kernels, the depthwise channel halves), forced.
  using kite::cpu::sgemm::MicroKernel;
  if (kite::cpu::sgemm::micro_kernel_in_use() == MicroKernel::kAvx512) {
    const ForcedGemmKernel avx2(MicroKernel::kAvx2Fma);
    ASSERT_TRUE(avx2.ok());
    SCOPED_TRACE("forced avx2, 2 threads, constant W");
    Backend be(2);
    Node n("Conv", "conv");
    n.in(x_shape, x).in(w_shape, w, true);
    if (c.bias) n.in({c.m}, bias, true);
    n.out(y_shape).i("group", c.group).ints("strides", c.strides).ints("dilations", c.dilations);
    if (c.auto_pad.empty()) n.ints("pads", c.pads); else n.s("auto_pad", c.auto_pad);
    ASSERT_TRUE(Runs(be, n));
    ExpectDot(n.result(), ref);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvSweep,
    ::testing::Values(
        // n, c, m, group, in, kernel, strides, dilations, pads, auto_pad, bias
        ConvCase{1, 3, 4, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{2, 5, 6, 1, {11, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 1}, "", true},
        ConvCase{1, 4, 8, 1, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", false},   // 1x1
        ConvCase{1, 4, 8, 1, {6, 7}, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, "", true},    // 1x1 s2
        ConvCase{1, 6, 6, 6, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},    // depthwise
        ConvCase{2, 4, 8, 4, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, "", false},   // depthwise x2
        ConvCase{1, 8, 6, 2, {6, 5}, {3, 2}, {1, 2}, {1, 1}, {2, 0, 1, 1}, "", true},    // groups
        ConvCase{1, 3, 5, 1, {13, 12}, {3, 3}, {1, 1}, {2, 3}, {2, 3, 2, 3}, "", true},  // dilations
        ConvCase{1, 2, 3, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {}, "SAME_UPPER", true},
        ConvCase{1, 2, 3, 1, {8, 7}, {4, 4}, {3, 2}, {1, 1}, {}, "SAME_LOWER", true},
        ConvCase{1, 2, 3, 1, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {}, "VALID", false},
        ConvCase{1, 1, 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", false},  // 1x1 image
        ConvCase{1, 3, 2, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},   // all padding
        ConvCase{1, 3, 4, 1, {5, 5}, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", true},   // full window
        ConvCase{1, 70, 13, 1, {6, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true}, // K > one block
        ConvCase{1, 300, 7, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", true}, // K > 256
        // Output rows of 8 and 16 (whole im2col panels) touching the padding.
        ConvCase{1, 3, 4, 1, {8, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{1, 2, 3, 1, {9, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{1, 2, 3, 1, {4, 8}, {3, 5}, {1, 1}, {1, 1}, {0, 2, 0, 2}, "", false},
        ConvCase{1, 3, 4, 1, {17}, {5}, {2}, {1}, {2, 1}, "", true},                    // 1-D
        ConvCase{2, 4, 4, 4, {15}, {3}, {1}, {2}, {2, 2}, "", true},                    // 1-D depthwise
        ConvCase{1, 2, 3, 1, {5, 6, 4}, {3, 2, 3}, {2, 1, 1}, {1, 1, 1}, {1, 0, 1, 1, 1, 1}, "", true},  // 3-D
        ConvCase{1, 2, 2, 2, {4, 5, 6}, {3, 3, 3}, {1, 2, 1}, {1, 1, 2}, {1, 1, 1, 1, 1, 1}, "", false},  // 3-D depthwise
        // Enough pixels for column blocks (run_blocked: at least two blocks
        // per thread, blocks of ~64K floats of packed B), with tails.
        ConvCase{1, 64, 5, 1, {26, 26}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{2, 300, 7, 1, {37, 35}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", true},  // pointwise
        ConvCase{1, 40, 6, 1, {70, 67}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, "", false},  // strided
        // A stem: the im2col matrix far past L2, small weights, more output
        // channels than the few-rows rule takes: column blocks too.
        // (On AVX-512, with its three input channels, the stem kernel.)
        ConvCase{1, 3, 40, 1, {120, 117}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, "", true},
        // More stems (stem.h): one input channel, stride 1; four, uneven pads.
        ConvCase{1, 1, 9, 1, {23, 37}, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, "", true},
        ConvCase{2, 4, 16, 1, {31, 100}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}, "", false},
        // Depthwise sixteen channels a task on AVX-512 and AVX2 (depthwise::Channels,
        // bands of output rows within kChannelBandFloats): channel
        // tails, rows of 8 outputs and row tails of 1 to 7, stride 2 and
        // mixed strides, 5x5 and 7x7 kernels, uneven pads, planes whose
        // pixel count is not a multiple of 16 (the transposes' tails).
        ConvCase{2, 40, 40, 40, {13, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{1, 20, 20, 20, {15, 16}, {5, 5}, {2, 2}, {1, 1}, {2, 1, 2, 2}, "", false},
        ConvCase{1, 17, 17, 17, {16, 16}, {3, 3}, {2, 1}, {1, 1}, {0, 1, 1, 1}, "", true},
        ConvCase{1, 18, 18, 18, {7, 7}, {7, 7}, {1, 1}, {1, 1}, {3, 3, 3, 3}, "", true},
        ConvCase{1, 33, 33, 33, {29, 30}, {7, 7}, {1, 1}, {1, 1}, {3, 3, 3, 3}, "", false},
        ConvCase{1, 24, 24, 24, {57, 55}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 1, 1}, "", true},
        // Nine bands of 16 output rows and a last one of 2 (band_rows).
        ConvCase{1, 5, 5, 5, {130, 121}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
        // Rows so wide that one row's band is past the limit: the
        // per-plane kernel.
        ConvCase{1, 3, 3, 3, {4, 1500}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true}
        ));

// ---------------------------------------------------------------------------
// Winograd F(4x4, 3x3) and F(2x2, 3x3) against the direct sum in double
// precision, every case with both tile sizes.
//
// The error bound, to first order in u = 2^-24, from the steps of the
// computation (the transform matrices of winograd_impl.inc: B^T, G, A^T;
// the counts are F(4x4)'s, F(2x2)'s are smaller):
//   U = G g G^T, rounded once from double:          |dU| <= u |U|
//   V = B^T d B in float, at most 9 roundings deep:  |dV| <= 10u (|B^T| |d| |B|)
//   M = sum over c of U V (the GEMM):                |dM| <= (C + 12) u sum_c |U| (|B^T||d||B|)
//   y = A^T M A in float, at most 8 roundings deep, then the bias: 10u more,
// so |y - exact| <= (C + 22) u S with S = sum over the 36 points of
// |A^T|_i |A^T|_j sum_c |U| (|B^T| |d| |B|) over the points, computed here
// in double from the absolute values of the matrices, and times kDotSlack as
// for the direct sums.
// Relu and Clip are 1-Lipschitz: the same bound holds after them. A bug (a
// wrong pad, tile or lane) is an error the size of the outputs, thousands of
// times this bound.
struct WinogradCase {
  int64_t c, m, h, w;
  int64_t pt, pl, pb, pr;  // pads: top, left, bottom, right
  int threads;
  kite::cpu::sgemm::Epilogue::Kind act;
  bool bias;
};

void check_winograd(const char* /*level*/) {
  namespace wg = kite::cpu::winograd;
  static const double BT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                   {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static const double G4[6][3] = {{0.25, 0, 0},          {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  static const double AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0},
                                   {0, 1, -1, 8, -8, 1}};
  static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const double AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  using K = kite::cpu::sgemm::Epilogue;
  const WinogradCase cases[] = {
      {3, 5, 16, 16, 1, 1, 1, 1, 1, K::kRelu, true},     // 4 tiles a row: 4 rows per 16 lanes
      {8, 12, 17, 23, 1, 1, 1, 1, 2, K::kNone, true},    // partial tiles at the right and bottom
      {16, 7, 30, 70, 0, 2, 1, 1, 3, K::kClip, false},   // uneven pads, 2 tile rows per 16 lanes
      {4, 6, 40, 10, 1, 1, 1, 1, 1, K::kNone, true},     // 3 tiles a row: the scalar gather
      {8, 8, 128, 96, 1, 1, 1, 1, 2, K::kRelu, true},    // a block per thread
      {64, 64, 20, 20, 1, 1, 1, 1, 2, K::kNone, true},   // F(4x4): a share of the channels a thread
      {24, 50, 16, 16, 1, 1, 1, 1, 2, K::kRelu, true},   // shares of 2 and 3 panel pairs, the last partial
      {16, 40, 12, 12, 1, 1, 1, 1, 3, K::kClip, true},   // three channel shares
      {64, 20, 20, 20, 1, 1, 1, 1, 3, K::kNone, true},   // F(4x4): 2 panel pairs, 3 threads: share each step
      {80, 30, 12, 12, 1, 1, 1, 1, 2, K::kRelu, true},   // shares of 1 and 2 panel pairs, the last partial
      {32, 128, 27, 27, 1, 1, 1, 1, 2, K::kRelu, true},  // F(4x4): blocks enough, but U over the budget: shares
      {70, 20, 40, 40, 1, 1, 1, 1, 1, K::kNone, false},  // channels past one GEMM panel block
      {3, 4, 12, 12, 2, 2, 2, 2, 2, K::kClip, true},     // pads of 2: output larger than input
  };
  for (const int64_t T : {4, 2}) {
  const int A = static_cast<int>(T + 2), P = A * A;
  auto BT = [&](int a, int i) { return T == 4 ? BT4[a][i] : BT2[a][i]; };
  auto G = [&](int a, int i) { return T == 4 ? G4[a][i] : G2[a][i]; };
  auto AT = [&](int a, int i) { return T == 4 ? AT4[a][i] : AT2[a][i]; };
  for (const WinogradCase& k : cases) {
    SCOPED_TRACE("F(" + std::to_string(T) + "x" + std::to_string(T) + ") c" + std::to_string(k.c) +
                 " m" + std::to_string(k.m) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) +
                 " threads " + std::to_string(k.threads));
    const int64_t oh = k.h + k.pt + k.pb - 2, ow = k.w + k.pl + k.pr - 2;
    kite::ops::WindowGeometry g;
    g.input = {k.h, k.w};
    g.output = {oh, ow};
    g.kernel = {3, 3};
    g.strides = {1, 1};
    g.dilations = {1, 1};
    g.pads_begin = {k.pt, k.pl};
    g.pads_end = {k.pb, k.pr};
    EXPECT_NE(wg::tile_for(g, k.c, k.m), 0);
    const std::vector<float> x = Random(k.c * k.h * k.w, 31), w = Random(k.m * k.c * 9, 32, -0.5f, 0.5f),
                             bias = Random(k.m, 33);
    std::vector<float> u(static_cast<size_t>(wg::packed_weight_floats(T, k.m, k.c)));
    wg::pack_weights(T, w.data(), k.m, k.c, u.data());
    const wg::Conv conv(T, k.c, k.m, k.h, k.w, oh, ow, k.pt, k.pl);
    std::vector<float> ws(static_cast<size_t>(conv.workspace_floats(k.threads)));
    std::vector<float> y(static_cast<size_t>(k.m * oh * ow), std::numeric_limits<float>::quiet_NaN());
    K epi;
    epi.kind = k.act;
    epi.lo = -0.5f;
    epi.hi = 0.75f;
    kite::cpu::ThreadPool pool(k.threads);
    conv.run(x.data(), u.data(), k.bias ? bias.data() : nullptr, epi, y.data(), ws.data(), k.threads, pool);

    // |U| per (m, c, point) and |B^T| |d| |B| per (c, tile, point), in double.
    const int64_t th = (oh + T - 1) / T, tw = (ow + T - 1) / T;
    std::vector<double> ua(static_cast<size_t>(k.m * k.c * P)), va(static_cast<size_t>(k.c * th * tw * P));
    for (int64_t mc = 0; mc < k.m * k.c; ++mc) {
      for (int a = 0; a < A; ++a) {
        for (int b = 0; b < A; ++b) {
          double s = 0;
          for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) s += std::fabs(G(a, i) * G(b, j) * w[mc * 9 + i * 3 + j]);
          }
          ua[mc * P + a * A + b] = s;
        }
      }
    }
    auto in_at = [&](int64_t c, int64_t yy, int64_t xx) -> double {
      return yy >= 0 && yy < k.h && xx >= 0 && xx < k.w ? x[(c * k.h + yy) * k.w + xx] : 0.0;
    };
    for (int64_t c = 0; c < k.c; ++c) {
      for (int64_t t = 0; t < th * tw; ++t) {
        const int64_t y0 = t / tw * T - k.pt, x0 = t % tw * T - k.pl;
        for (int a = 0; a < A; ++a) {
          for (int b = 0; b < A; ++b) {
            double s = 0;
            for (int i = 0; i < A; ++i) {
              for (int j = 0; j < A; ++j) s += std::fabs(BT(a, i) * BT(b, j) * in_at(c, y0 + i, x0 + j));
            }
            va[(c * th * tw + t) * P + a * A + b] = s;
          }
        }
      }
    }
    int failures = 0;
    double worst = 0;
    for (int64_t m = 0; m < k.m && failures < 10; ++m) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double exact = k.bias ? bias[m] : 0.0;
          for (int64_t c = 0; c < k.c; ++c) {
            for (int i = 0; i < 3; ++i) {
              for (int j = 0; j < 3; ++j) {
                exact += in_at(c, oy - k.pt + i, ox - k.pl + j) * w[((m * k.c + c) * 3 + i) * 3 + j];
              }
            }
          }
          if (k.act == K::kRelu) exact = exact > 0 ? exact : 0;
          if (k.act == K::kClip) exact = std::min<double>(std::max<double>(exact, epi.lo), epi.hi);
          const int64_t t = oy / T * tw + ox / T;
          const int i = static_cast<int>(oy % T), j = static_cast<int>(ox % T);
          double s = 0;
          for (int p = 0; p < P; ++p) {
            double sum_c = 0;
            for (int64_t c = 0; c < k.c; ++c) sum_c += ua[(m * k.c + c) * P + p] * va[(c * th * tw + t) * P + p];
            s += std::fabs(AT(i, p / A) * AT(j, p % A)) * sum_c;
          }
          const double tol = kDotSlack * static_cast<double>(k.c + 22) * kUnitRoundoff * (s + std::fabs(exact));
          const float got = y[(m * oh + oy) * ow + ox];
          const double err = std::fabs(got - exact);
          worst = std::max(worst, s > 0 ? err / (kDotSlack * (k.c + 22) * kUnitRoundoff * s) : 0.0);
          if (!(err <= tol) && failures++ < 10) {
            ADD_FAILURE() << "m " << m << " at (" << oy << ", " << ox << "): got " << got << ", want "
                          << exact << " (tol " << tol << ")";
          }
        }
      }
    }
    std::printf("    winograd F(%lldx%lld) c%lld m%lld %lldx%lld: largest error %.3f of the bound\n",
                static_cast<long long>(T), static_cast<long long>(T), static_cast<long long>(k.c),
                static_cast<long long>(k.m), static_cast<long long>(oh), static_cast<long long>(ow), worst);
  }
  }
}

TEST(Winograd, WithinItsErrorBoundOnEveryLevel) {
  on_every_level(check_winograd);
}

TEST(Winograd, TileBySizeAndOnly3x3Stride1) {
  namespace wg = kite::cpu::winograd;
  kite::ops::WindowGeometry g;
  g.input = {24, 24};
  g.output = {24, 24};
  g.kernel = {3, 3};
  g.strides = {1, 1};
  g.dilations = {1, 1};
  g.pads_begin = {1, 1};
  g.pads_end = {1, 1};
  EXPECT_EQ(wg::tile_for(g, 8, 8), 4);  // 36 tiles of 4x4
  EXPECT_EQ(wg::tile_for(g, 1, 8), 0);  // one input channel: the direct loop
  kite::ops::WindowGeometry fourteen = g;
  fourteen.input = fourteen.output = {14, 14};  // 16 tiles of 4x4 (kMinTiles4)
  EXPECT_EQ(wg::tile_for(fourteen, 8, 8), 4);
  kite::ops::WindowGeometry mid = g;
  mid.input = mid.output = {12, 12};  // 9 tiles of 4x4, 36 of 2x2
  EXPECT_EQ(wg::tile_for(mid, 8, 8), 2);
  kite::ops::WindowGeometry seven = g;
  seven.input = seven.output = {7, 7};  // 16 tiles of 2x2
  EXPECT_EQ(wg::tile_for(seven, 8, 8), 2);
  kite::ops::WindowGeometry small = g;
  small.input = small.output = {6, 6};  // 9 tiles of 2x2
  EXPECT_EQ(wg::tile_for(small, 8, 8), 0);
  kite::ops::WindowGeometry strided = g;
  strided.strides = {2, 2};
  strided.output = {12, 12};
  EXPECT_EQ(wg::tile_for(strided, 8, 8), 0);
  kite::ops::WindowGeometry dilated = g;
  dilated.dilations = {2, 2};
  EXPECT_EQ(wg::tile_for(dilated, 8, 8), 0);
  kite::ops::WindowGeometry grouped = g;
  grouped.group = 2;
  EXPECT_EQ(wg::tile_for(grouped, 8, 8), 0);
  kite::ops::WindowGeometry five = g;
  five.kernel = {5, 5};
  EXPECT_EQ(wg::tile_for(five, 8, 8), 0);
}

// The stem kernel (stem.h) at each level it has (AVX-512 and AVX2 vectors,
// and the scalar loop the other levels fall back to) against the direct sum
// in double: channel blocks with tails (m not a multiple of 8 or of 4),
// rows with 1, 2 and 3 vectors of outputs (of 16 lanes, of 8) and partial
// last vectors, strides 1 and 2 (AVX-512 and AVX2 read a stride-2 row split in even
// and odd columns: even and odd kernel widths),
// uneven pads, kernels from 2x2 to 11x11, 1 to 4 input channels, Relu and
// Clip. Bound: a sum of K = c * kh * kw products in any order, then the
// bias: (K + 1) * 2^-24 * (sum |terms| + |bias|), times kDotSlack; Relu
// and Clip are 1-Lipschitz.
TEST(Stem, EveryLevelMatchesTheDirectSum) {
  namespace st = kite::cpu::stem;
  using kite::cpu::sgemm::Epilogue;
  using kite::cpu::sgemm::MicroKernel;
  struct Case {
    int64_t c, h, w, m, kh, kw, stride, pt, pl, pb, pr;
    Epilogue::Kind act;
  };
  const Case cases[] = {
      {3, 23, 37, 9, 3, 3, 2, 1, 1, 1, 1, Epilogue::kRelu},    // ow 19: one partial vector
      {1, 20, 40, 16, 5, 5, 1, 2, 2, 2, 2, Epilogue::kNone},   // ow 40: three, the last partial
      {2, 17, 141, 3, 2, 2, 2, 0, 1, 1, 0, Epilogue::kClip},   // ow 71: 48 then two partial
      {4, 30, 30, 12, 11, 11, 2, 5, 5, 5, 5, Epilogue::kNone}, // 11x11
      {3, 9, 100, 8, 7, 7, 2, 3, 3, 3, 3, Epilogue::kRelu},    // ow 50: 48 then one of 2
  };
  kite::cpu::ThreadPool pool(3);
  int levels = 0;
  for (MicroKernel level : {MicroKernel::kAvx512, MicroKernel::kAvx2Fma, MicroKernel::kPortable}) {
    const ForcedGemmKernel forced(level);
    if (!forced.ok()) continue;
    ++levels;
    for (const Case& k : cases) {
      st::Geometry g;
      g.c = k.c, g.h = k.h, g.w = k.w, g.m = k.m, g.kh = k.kh, g.kw = k.kw, g.stride = k.stride;
      g.pad_top = k.pt, g.pad_left = k.pl;
      g.oh = (k.h + k.pt + k.pb - k.kh) / k.stride + 1;
      g.ow = (k.w + k.pl + k.pr - k.kw) / k.stride + 1;
      const std::vector<float> x = Random(k.c * k.h * k.w, 91), w = Random(k.m * k.c * k.kh * k.kw, 92);
      const std::vector<float> bias = Random(k.m, 93);
      std::vector<float> arranged(static_cast<size_t>(st::weight_floats(g)));
      st::arrange_weights(g, w.data(), arranged.data());
      std::vector<float> scratch(static_cast<size_t>(st::scratch_floats(g)), std::nanf(""));
      const Epilogue e{k.act, -0.5f, 0.75f};
      std::vector<float> y(static_cast<size_t>(k.m * g.oh * g.ow), std::nanf(""));
      st::run(g, x.data(), arranged.data(), bias.data(), e, y.data(), scratch.data(), pool);
      int bad = 0;
      for (int64_t m = 0; m < k.m && bad < 3; ++m) {
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            double sum = bias[m], mag = std::fabs(bias[m]);
            for (int64_t c = 0; c < k.c; ++c) {
              for (int64_t ky = 0; ky < k.kh; ++ky) {
                for (int64_t kx = 0; kx < k.kw; ++kx) {
                  const int64_t iy = oy * k.stride - k.pt + ky, ix = ox * k.stride - k.pl + kx;
                  if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                  const double t = static_cast<double>(w[((m * k.c + c) * k.kh + ky) * k.kw + kx]) *
                                   x[(c * k.h + iy) * k.w + ix];
                  sum += t;
                  mag += std::fabs(t);
                }
              }
            }
            if (k.act == Epilogue::kRelu) sum = std::max(sum, 0.0);
            if (k.act == Epilogue::kClip) sum = std::min(std::max(sum, -0.5), 0.75);
            const double tol = kDotSlack * (k.c * k.kh * k.kw + 1) * kUnitRoundoff * mag;
            const float got = y[(m * g.oh + oy) * g.ow + ox];
            if (!(std::fabs(got - sum) <= tol)) {
              ++bad;
              ADD_FAILURE() << "level " << static_cast<int>(level) << " c " << k.c << " " << k.kh << "x"
                            << k.kw << " s" << k.stride << " at m " << m << " (" << oy << "," << ox
                            << "): " << got << " vs " << sum << " tol " << tol;
            }
          }
        }
      }
    }
  }
  EXPECT_GE(levels, 1);
}

// The unfused path's activation named name ("" none; Clip between -0.25
// and 0.5, HardSwish with ONNX's 1/6 and 1/2) on n floats in place: the
// formula for Relu / Clip, vmath for the others, as the unary kernels and
// apply_activation compute them. The fused-activation tests' reference.
void UnfusedActivation(const std::string& name, float* v, int64_t n) {
  if (name == "Relu") {
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0.0f ? v[i] : 0.0f;
  } else if (name == "Clip") {
    for (int64_t i = 0; i < n; ++i) {
      v[i] = v[i] < -0.25f ? -0.25f : v[i];
      v[i] = v[i] > 0.5f ? 0.5f : v[i];
    }
  } else if (name == "Sigmoid" || name == "SiLU") {
    kite::cpu::vmath::sigmoid(v, v, n, name == "SiLU");
  } else if (name == "HardSwish") {
    kite::cpu::vmath::hard_sigmoid(v, v, n, 1.0f / 6.0f, 0.5f, true);
  } else if (name == "Gelu") {
    kite::cpu::vmath::gelu(v, v, n);
  }
}

// FusedConv on the depthwise paths (sixteen channels a task in bands, a
// 16-channel block split by rows across threads, the per-plane kernel of
// a wide plane, and that kernel again where a forced level has no channel
// path), on the pointwise GEMM and on the stem kernel: Relu / Clip in the
// store, sigmoid, SiLU, HardSwish and GELU by the tile hook on each band,
// plane, block or row.
// Each gives the bits of the Conv followed by the activation over the
// whole output (the formula for Relu / Clip, vmath for the others, as the
// unfused path computes them).
TEST(Conv, FusedActivationsHaveTheUnfusedBits) {
  using kite::cpu::sgemm::MicroKernel;
  struct Shape4 {
    int64_t c, m, h, w, k, group;
  };
  // (The last: three input channels, the stem kernel on AVX-512 and AVX2,
  // the GEMM at the portable level.)
  const Shape4 shapes[] = {{24, 24, 9, 10, 3, 24}, {16, 16, 20, 7, 3, 16}, {3, 3, 4, 1500, 3, 3},
                           {40, 56, 9, 13, 1, 1}, {3, 20, 23, 37, 3, 1}};
  for (MicroKernel level : {MicroKernel::kAvx512, MicroKernel::kAvx2Fma, MicroKernel::kPortable}) {
    const ForcedGemmKernel forced(level);
    if (!forced.ok()) continue;
    for (const Shape4& sh : shapes) {
      const int64_t pad = sh.k / 2;
      const std::vector<float> x = Random(sh.c * sh.h * sh.w, 71), wt = Random(sh.m * sh.c / sh.group * sh.k * sh.k, 72),
                               bias = Random(sh.m, 73);
      for (const char* act : {"Relu", "Clip", "Sigmoid", "SiLU", "HardSwish", "Gelu"}) {
        const std::string a = act;
        SCOPED_TRACE(a + " level " + std::to_string(static_cast<int>(level)) + " c " + std::to_string(sh.c) +
                     " " + std::to_string(sh.h) + "x" + std::to_string(sh.w));
        Backend be(2);
        Node plain("Conv", "conv");
        plain.in({1, sh.c, sh.h, sh.w}, x).in({sh.m, sh.c / sh.group, sh.k, sh.k}, wt, true).in({sh.m}, bias, true)
            .out({1, sh.m, sh.h, sh.w}).i("group", sh.group).ints("pads", {pad, pad, pad, pad});
        ASSERT_TRUE(Runs(be, plain));
        std::vector<float> want = plain.result();
        UnfusedActivation(a, want.data(), static_cast<int64_t>(want.size()));
        Node fused("FusedConv", "conv_act");
        fused.domain("kite").fused("Conv+" + a).in({1, sh.c, sh.h, sh.w}, x)
            .in({sh.m, sh.c / sh.group, sh.k, sh.k}, wt, true).in({sh.m}, bias, true).out({1, sh.m, sh.h, sh.w})
            .i("group", sh.group).ints("pads", {pad, pad, pad, pad}).s("activation", a);
        if (a == "Clip") fused.f("activation_alpha", -0.25f).f("activation_beta", 0.5f);
        ASSERT_TRUE(Runs(be, fused));
        ExpectExact(fused.result(), want);
      }
    }
  }
}

// FusedConv with a residual (Conv+Add, Conv+Add+<activation>): the
// residual added by the convolution's tile hook on the GEMM paths
// (pointwise, im2col, the stem kernel, Winograd's runs of tiles, the
// depthwise planes) or, where the kernel takes no hook (the depthwise
// channel blocks), in a pass after it; either way the bits of the plain
// Conv, then vmath::add of the residual, then the activation. With and
// without the bias input; two threads.
TEST(Conv, FusedResidualHasTheUnfusedBits) {
  using kite::cpu::sgemm::MicroKernel;
  struct Shape4 {
    int64_t c, m, h, w, k, group;
  };
  const Shape4 shapes[] = {{24, 24, 9, 10, 3, 24},   {3, 3, 4, 1500, 3, 3}, {40, 56, 9, 13, 1, 1},
                           {3, 20, 23, 37, 3, 1},    {32, 32, 14, 14, 3, 1}, {64, 64, 28, 28, 3, 1},
                           {64, 128, 17, 19, 3, 1}};
  for (MicroKernel level : {MicroKernel::kAvx512, MicroKernel::kAvx2Fma, MicroKernel::kPortable}) {
    const ForcedGemmKernel forced(level);
    if (!forced.ok()) continue;
    for (const Shape4& sh : shapes) {
      const int64_t pad = sh.k / 2;
      const Shape xs = {1, sh.c, sh.h, sh.w}, ws = {sh.m, sh.c / sh.group, sh.k, sh.k}, ys = {1, sh.m, sh.h, sh.w};
      const std::vector<float> x = Random(Numel(xs), 91), wt = Random(Numel(ws), 92), bias = Random(sh.m, 93),
                               r = Random(Numel(ys), 94);
      for (bool with_bias : {true, false}) {
        Backend be(2);
        Node plain("Conv", "conv");
        plain.in(xs, x).in(ws, wt, true);
        if (with_bias) plain.in({sh.m}, bias, true);
        plain.out(ys).i("group", sh.group).ints("pads", {pad, pad, pad, pad});
        ASSERT_TRUE(Runs(be, plain));
        std::vector<float> sum = plain.result();
        kite::cpu::vmath::add(sum.data(), r.data(), sum.data(), static_cast<int64_t>(sum.size()));
        for (const char* act : {"", "Relu", "SiLU"}) {
          const std::string a = act;
          SCOPED_TRACE("act '" + a + "' level " + std::to_string(static_cast<int>(level)) + " c " +
                       std::to_string(sh.c) + " m " + std::to_string(sh.m) + " " + std::to_string(sh.h) + "x" +
                       std::to_string(sh.w) + (with_bias ? " bias" : ""));
          std::vector<float> want = sum;
          if (!a.empty()) UnfusedActivation(a, want.data(), static_cast<int64_t>(want.size()));
          Node fused("FusedConv", "conv_add");
          fused.domain("kite").fused(a.empty() ? "Conv+Add" : "Conv+Add+" + a).in(xs, x).in(ws, wt, true);
          if (with_bias) {
            fused.in({sh.m}, bias, true);
          } else {
            fused.absent();
          }
          fused.in(ys, r).out(ys).i("group", sh.group).ints("pads", {pad, pad, pad, pad});
          if (!a.empty()) fused.s("activation", a);
          ASSERT_TRUE(Runs(be, fused));
          ExpectExact(fused.result(), want);
        }
      }
    }
  }
}

// FusedMatMul (bias along the last axis, then an activation) by the
// MatMul's tile hook on each finished block, and FusedGemm's activation in
// the GEMM's store or hook: the bits of the unfused MatMul / Gemm followed
// by vmath::add of the bias row and the activation over the whole output.
// Shapes: batched rows, one row (the row kernel), one column (the GEMV),
// K across k blocks; two threads.
TEST(MatMul, FusedBiasAndActivationHaveTheUnfusedBits) {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{2, 5, 37}, {37, 70}}, {{1, 300}, {300, 1000}}, {{40, 37}, {37, 1}}, {{13, 513}, {513, 33}}};
  for (const Case& k : cases) {
    const int64_t n = k.b[1], kk = k.b[0];
    Shape out = k.a;
    out.back() = n;
    const std::vector<float> a = Random(Numel(k.a), 81), b = Random(Numel(k.b), 82), bias = Random(n, 83);
    for (const char* act : {"", "Relu", "Clip", "SiLU", "Gelu"}) {
      const std::string name = act;
      SCOPED_TRACE("act '" + name + "' k " + std::to_string(kk) + " n " + std::to_string(n));
      Backend be(2);
      Node plain("MatMul", "mm");
      plain.in(k.a, a).in(k.b, b, true).out(out);
      ASSERT_TRUE(Runs(be, plain));
      std::vector<float> want = plain.result();
      const int64_t rows = static_cast<int64_t>(want.size()) / n;
      for (int64_t r = 0; r < rows; ++r) {
        float* row = want.data() + r * n;
        kite::cpu::vmath::add(row, bias.data(), row, n);
        UnfusedActivation(name, row, n);
      }
      Node fused("FusedMatMul", "fmm");
      fused.domain("kite").fused("MatMul+Add" + (name.empty() ? std::string() : "+" + name)).in(k.a, a)
          .in(k.b, b, true).in({n}, bias, true).out(out);
      if (!name.empty()) fused.s("activation", name);
      if (name == "Clip") fused.f("activation_alpha", -0.25f).f("activation_beta", 0.5f);
      ASSERT_TRUE(Runs(be, fused));
      ExpectExact(fused.result(), want);
      if (name.empty() || k.a.size() != 2) continue;
      // FusedGemm: A x B + C, then the activation (C the bias row).
      Node gemm("Gemm", "g");
      gemm.in(k.a, a).in(k.b, b, true).in({n}, bias, true).out(out);
      ASSERT_TRUE(Runs(be, gemm));
      std::vector<float> gwant = gemm.result();
      UnfusedActivation(name, gwant.data(), static_cast<int64_t>(gwant.size()));
      Node fg("FusedGemm", "fg");
      fg.domain("kite").fused("Gemm+" + name).in(k.a, a).in(k.b, b, true).in({n}, bias, true).out(out)
          .s("activation", name);
      if (name == "Clip") fg.f("activation_alpha", -0.25f).f("activation_beta", 0.5f);
      ASSERT_TRUE(Runs(be, fg));
      ExpectExact(fg.result(), gwant);
    }
  }
}

TEST(Conv, Handcomputed) {
  // 1x1x3x3 input, 2x2 kernel of ones, stride 1, no padding, bias 0.5.
  Backend be;
  Node n("Conv");
  n.in({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})
      .in({1, 1, 2, 2}, {1, 1, 1, 1}, true)
      .in({1}, {0.5f}, true)
      .out({1, 1, 2, 2});
  ASSERT_TRUE(Runs(be, n));
  ExpectExact(n.result(), {12.5f, 16.5f, 24.5f, 28.5f});
}

TEST(ConvTranspose, Handcomputed) {
  // 1x1x2x2 input, kernel 2x2 of ones, stride 2: each input spreads to a
  // 2x2 block.
  Backend be;
  Node n("ConvTranspose");
  n.in({1, 1, 2, 2}, {1, 2, 3, 4}).in({1, 1, 2, 2}, {1, 1, 1, 1}, true).out({1, 1, 4, 4})
      .ints("strides", {2, 2});
  ASSERT_TRUE(Runs(be, n));
  ExpectExact(n.result(), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

struct ConvTransposeCase {
  int64_t n, c, m, group;
  Shape in, kernel, strides, dilations, pads, output_padding;
  bool bias;
};

void PrintTo(const ConvTransposeCase& c, std::ostream* os) {
  *os << "n" << c.n << " c" << c.c << " m" << c.m << " g" << c.group << " in" << Str(c.in) << " k"
      << Str(c.kernel) << " s" << Str(c.strides) << " d" << Str(c.dilations) << " p" << Str(c.pads)
      << " op" << Str(c.output_padding);
}

class ConvTransposeSweep : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(ConvTransposeSweep, MatchesReference) {
  const ConvTransposeCase& c = GetParam();
  const size_t r = c.in.size();
  Shape out_sp(r);
  for (size_t a = 0; a < r; ++a) {
    out_sp[a] = c.strides[a] * (c.in[a] - 1) + c.output_padding[a] +
                ((c.kernel[a] - 1) * c.dilations[a] + 1) - c.pads[a] - c.pads[r + a];
  }
  const int64_t cg = c.c / c.group, mg = c.m / c.group;
  Shape x_shape = {c.n, c.c}, w_shape = {c.c, mg}, y_shape = {c.n, c.m};
  x_shape.insert(x_shape.end(), c.in.begin(), c.in.end());
  w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
  y_shape.insert(y_shape.end(), out_sp.begin(), out_sp.end());
  const std::vector<float> x = Random(Numel(x_shape), 31), w = Random(Numel(w_shape), 32),
                           bias = Random(c.m, 33);
  // Scatter definition: y[n, g*mg+m, i*s - p + k*d] += x[n, g*cg+ci, i] * w[g*cg+ci, m, k].
  const int64_t in_pixels = Numel(c.in), out_pixels = Numel(out_sp), taps = Numel(c.kernel);
  DotRef ref(Numel(y_shape));
  ref.terms = cg * taps;
  for (int64_t n = 0; n < c.n; ++n) {
    for (int64_t oc = 0; oc < c.m; ++oc) {
      for (int64_t o = 0; o < out_pixels; ++o) {
        if (c.bias) ref.add((n * c.m + oc) * out_pixels + o, bias[oc]);
      }
    }
    for (int64_t ic = 0; ic < c.c; ++ic) {
      const int64_t g = ic / cg;
      for (int64_t i = 0; i < in_pixels; ++i) {
        const Shape ip = Unravel(i, c.in);
        for (int64_t m = 0; m < mg; ++m) {
          for (int64_t t = 0; t < taps; ++t) {
            const Shape kp = Unravel(t, c.kernel);
            int64_t off = 0;
            bool inside = true;
            for (size_t a = 0; a < r; ++a) {
              const int64_t pos = ip[a] * c.strides[a] - c.pads[a] + kp[a] * c.dilations[a];
              if (pos < 0 || pos >= out_sp[a]) inside = false;
              off = off * out_sp[a] + pos;
            }
            if (!inside) continue;
            ref.add((n * c.m + g * mg + m) * out_pixels + off,
                    static_cast<double>(x[(n * c.c + ic) * in_pixels + i]) * w[(ic * mg + m) * taps + t]);
          }
        }
      }
    }
  }
  Backend be(2);
  Node node("ConvTranspose");
  node.in(x_shape, x).in(w_shape, w, true);
  if (c.bias) node.in({c.m}, bias, true);
  node.out(y_shape).i("group", c.group).ints("strides", c.strides).ints("dilations", c.dilations)
      .ints("pads", c.pads).ints("output_padding", c.output_padding);
  ASSERT_TRUE(Runs(be, node));
  ExpectDot(node.result(), ref);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvTransposeSweep,
    ::testing::Values(
        ConvTransposeCase{1, 3, 2, 1, {4, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 0}, true},
        ConvTransposeCase{2, 4, 6, 2, {3, 3}, {2, 3}, {1, 2}, {2, 1}, {0, 1, 0, 1}, {0, 1}, false},
        ConvTransposeCase{1, 2, 2, 1, {7}, {4}, {3}, {1}, {1, 2}, {2}, true},
        ConvTransposeCase{1, 1, 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, false}));

// ===========================================================================
// Gemm and MatMul.

struct GemmCase {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  Shape c_shape;  // empty vector with has_c false: no C
  bool has_c;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << "m" << c.m << " n" << c.n << " k" << c.k << (c.trans_a ? " tA" : "") << (c.trans_b ? " tB" : "")
      << " alpha " << c.alpha << " beta " << c.beta << (c.has_c ? " C" + Str(c.c_shape) : "");
}

class GemmSweep : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmSweep, MatchesReference) {
  const GemmCase& c = GetParam();
  const Shape a_shape = c.trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k};
  const Shape b_shape = c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n};
  const std::vector<float> a = Random(Numel(a_shape), 41), b = Random(Numel(b_shape), 42),
                           cv = Random(c.has_c ? Numel(c.c_shape) : 0, 43);
  DotRef ref(c.m * c.n);
  ref.terms = c.k + 1;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      for (int64_t p = 0; p < c.k; ++p) {
        const float av = c.trans_a ? a[p * c.m + i] : a[i * c.k + p];
        const float bv = c.trans_b ? b[j * c.k + p] : b[p * c.n + j];
        ref.add(i * c.n + j, static_cast<double>(c.alpha) * av * bv);
      }
      if (c.has_c) ref.add(i * c.n + j, static_cast<double>(c.beta) * cv[BroadcastOffset(c.c_shape, {i, j})]);
    }
  }
  for (int threads : {1, 4}) {
    for (bool constant_b : {true, false}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (constant_b ? " constant B" : ""));
      const PortableGemm portable(constant_b);
      Backend be(threads);
      Node n("Gemm");
      n.in(a_shape, a).in(b_shape, b, constant_b);
      if (c.has_c) n.in(c.c_shape, cv, true);
      n.out({c.m, c.n}).i("transA", c.trans_a).i("transB", c.trans_b).f("alpha", c.alpha).f("beta", c.beta);
      ASSERT_TRUE(Runs(be, n));
      ExpectDot(n.result(), ref);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GemmSweep,
    ::testing::Values(GemmCase{3, 4, 5, false, false, 1.0f, 1.0f, {}, false},
                      GemmCase{7, 9, 13, true, false, 0.5f, 2.0f, {9}, true},
                      GemmCase{7, 9, 13, false, true, 1.0f, 1.0f, {7, 1}, true},
                      GemmCase{6, 8, 300, true, true, -1.5f, 0.25f, {7 - 1, 8}, true},
                      GemmCase{1, 1000, 512, false, true, 1.0f, 1.0f, {1000}, true},  // classifier
                      GemmCase{1, 1, 1, false, false, 2.0f, 3.0f, {}, true},          // scalar C
                      GemmCase{13, 17, 0, false, false, 1.0f, 1.0f, {1, 17}, true},   // K = 0
                      GemmCase{50, 70, 40, false, false, 1.0f, 0.0f, {50, 70}, true}));

struct MatMulCase {
  Shape a, b, out;
};

void PrintTo(const MatMulCase& c, std::ostream* os) {
  *os << Str(c.a) << " x " << Str(c.b) << " -> " << Str(c.out);
}

class MatMulSweep : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(MatMulSweep, MatchesReference) {
  const MatMulCase& c = GetParam();
  Shape a = c.a, b = c.b;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  Shape batch = LocalBroadcast(a_batch, b_batch);
  const std::vector<float> av = Random(Numel(c.a), 51), bv = Random(Numel(c.b), 52);
  DotRef ref(Numel(batch) * m * n);
  ref.terms = k;
  for (int64_t t = 0; t < Numel(batch); ++t) {
    const Shape idx = Unravel(t, batch);
    const int64_t ao = BroadcastOffset(a_batch, idx) * m * k, bo = BroadcastOffset(b_batch, idx) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) {
          ref.add((t * m + i) * n + j, static_cast<double>(av[ao + i * k + p]) * bv[bo + p * n + j]);
        }
      }
    }
  }
  for (int threads : {1, 3}) {
    for (bool constant_b : {false, true}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (constant_b ? " constant B" : ""));
      const PortableGemm portable(threads == 1);
      Backend be(threads);
      Node node("MatMul");
      node.in(c.a, av).in(c.b, bv, constant_b).out(c.out);
      ASSERT_TRUE(Runs(be, node));
      ExpectDot(node.result(), ref);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MatMulSweep,
    ::testing::Values(MatMulCase{{3, 4}, {4, 5}, {3, 5}},
                      MatMulCase{{4}, {4, 5}, {5}},            // 1-D A
                      MatMulCase{{3, 4}, {4}, {3}},            // 1-D B
                      MatMulCase{{4}, {4}, {}},                // dot product
                      MatMulCase{{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},
                      MatMulCase{{6, 7, 8}, {8, 9}, {6, 7, 9}},
                      MatMulCase{{8}, {3, 8, 2}, {3, 2}},       // 1-D A, batched B
                      MatMulCase{{2, 3, 5, 8}, {8}, {2, 3, 5}},
                      MatMulCase{{12, 16, 33}, {12, 33, 16}, {12, 16, 16}},  // lanes
                      MatMulCase{{0, 3, 4}, {4, 2}, {0, 3, 2}},  // zero batch
                      MatMulCase{{3, 0}, {0, 2}, {3, 2}},        // K = 0
                      // Batches of one row against a 2-D B: one GEMM of 32 rows.
                      MatMulCase{{32, 1, 64}, {64, 48}, {32, 1, 48}},
                      MatMulCase{{2, 3, 7, 5}, {5, 9}, {2, 3, 7, 9}}));

// ===========================================================================
// Pooling.

struct PoolCase {
  std::string op;
  Shape x;  // N, C, spatial
  Shape kernel, strides, pads, dilations;
  int64_t ceil_mode, count_include_pad;
  Shape out;  // expected output shape, computed by hand
};

void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << c.op << " " << Str(c.x) << " k" << Str(c.kernel) << " s" << Str(c.strides) << " p"
      << Str(c.pads) << " d" << Str(c.dilations) << " ceil " << c.ceil_mode << " incl "
      << c.count_include_pad;
}

class PoolSweep : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolSweep, MatchesReference) {
  const PoolCase& c = GetParam();
  const size_t r = c.kernel.size();
  const Shape in_sp(c.x.begin() + 2, c.x.end()), out_sp(c.out.begin() + 2, c.out.end());
  const std::vector<float> x = Random(Numel(c.x), 61);
  const bool is_max = c.op == "MaxPool";
  const int64_t planes = c.x[0] * c.x[1];
  std::vector<double> want;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t o = 0; o < Numel(out_sp); ++o) {
      const Shape op = Unravel(o, out_sp);
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      int64_t valid = 0, padded = 0;
      for (int64_t t = 0; t < Numel(c.kernel); ++t) {
        const Shape kp = Unravel(t, c.kernel);
        bool inside = true, in_padded = true;
        int64_t off = 0;
        for (size_t a = 0; a < r; ++a) {
          const int64_t pos = op[a] * c.strides[a] - c.pads[a] + kp[a] * c.dilations[a];
          if (pos < 0 || pos >= in_sp[a]) inside = false;
          if (pos < -c.pads[a] || pos >= in_sp[a] + c.pads[r + a]) in_padded = false;
          off = off * in_sp[a] + pos;
        }
        if (in_padded) ++padded;
        if (!inside) continue;
        ++valid;
        const double v = x[p * Numel(in_sp) + off];
        best = std::max(best, v);
        sum += v;
      }
      want.push_back(is_max ? best : sum / static_cast<double>(c.count_include_pad ? padded : valid));
    }
  }
  // Every level this processor has: MaxPool's separable path has AVX-512
  // and AVX2 loops of its own.
  using kite::cpu::sgemm::MicroKernel;
  for (MicroKernel level : {MicroKernel::kAvx512, MicroKernel::kAvx2Fma, MicroKernel::kPortable}) {
    const ForcedGemmKernel forced(level);
    if (!forced.ok()) continue;
    SCOPED_TRACE("level " + std::to_string(static_cast<int>(level)));
    Backend be(3);
    Node n(c.op);
    n.in(c.x, x).out(c.out).ints("kernel_shape", c.kernel).ints("strides", c.strides)
        .ints("pads", c.pads).i("ceil_mode", c.ceil_mode);
    if (is_max) n.ints("dilations", c.dilations); else n.i("count_include_pad", c.count_include_pad);
    ASSERT_TRUE(Runs(be, n));
    // Max is exact; an average of up to 27 values rounds at most ~27 times.
    ExpectNear(n.result(), want, is_max ? 0.0 : 64 * kUnitRoundoff, is_max ? 0.0 : 1e-7);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PoolSweep,
    ::testing::Values(
        PoolCase{"MaxPool", {1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0, {1, 2, 4, 4}},
        PoolCase{"MaxPool", {2, 3, 6, 5}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, {2, 3, 3, 3}},
        PoolCase{"MaxPool", {1, 1, 8, 9}, {3, 2}, {1, 2}, {1, 0, 1, 1}, {2, 1}, 0, 0, {1, 1, 6, 5}},
        PoolCase{"MaxPool", {1, 2, 9}, {3}, {2}, {1, 1}, {1}, 1, 0, {1, 2, 5}},
        PoolCase{"MaxPool", {1, 1, 4, 4, 4}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, 0, 0, {1, 1, 2, 2, 2}},
        PoolCase{"AveragePool", {1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0, {1, 2, 4, 4}},
        PoolCase{"AveragePool", {1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 1, {1, 2, 4, 4}},
        PoolCase{"AveragePool", {1, 1, 6, 6}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, {1, 1, 3, 3}},
        PoolCase{"AveragePool", {1, 1, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, 1, {1, 1, 4, 4}},
        PoolCase{"AveragePool", {2, 1, 5, 4}, {2, 3}, {1, 1}, {0, 1, 1, 1}, {1, 1}, 0, 1, {2, 1, 5, 4}},
        PoolCase{"AveragePool", {1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0, 0, {1, 1, 1, 1}},
        // Stride 2 rows wide enough for the vector loop (four outputs per
        // step), with tails, padding and ceil_mode.
        PoolCase{"MaxPool", {1, 3, 13, 29}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0, {1, 3, 7, 15}},
        PoolCase{"MaxPool", {1, 2, 11, 30}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, {1, 2, 5, 15}},
        PoolCase{"MaxPool", {1, 1, 5, 40}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0, {1, 1, 2, 20}},
        // The separable 2-D path (max down the rows, then across): its
        // 3-wide stride-2 vectors with ceil_mode windows past the edge, its
        // stride-1 vectors, and the scalar across-loop (width 5, stride 3).
        PoolCase{"MaxPool", {1, 4, 37, 41}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, {1, 4, 18, 20}},
        PoolCase{"MaxPool", {1, 2, 17, 23}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 0, {1, 2, 17, 23}},
        PoolCase{"MaxPool", {1, 1, 9, 31}, {2, 5}, {3, 2}, {0, 1, 0, 2}, {1, 1}, 0, 0, {1, 1, 3, 15}},
        // squeezenet's 55x55 and 27x27 pools (ceil_mode, no padding): on
        // AVX-512 and AVX2 more output rows than one batch of eight, a
        // partial last step across (and down: 55 and 27 are not multiples
        // of 8); stride 1 with a 5-wide window and 18 outputs a row (a last
        // step of two), padding on the left.
        PoolCase{"MaxPool", {1, 3, 55, 55}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, {1, 3, 27, 27}},
        PoolCase{"MaxPool", {1, 5, 27, 27}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, {1, 5, 13, 13}},
        PoolCase{"MaxPool", {1, 2, 19, 18}, {4, 5}, {1, 1}, {2, 2, 1, 2}, {1, 1}, 0, 0, {1, 2, 19, 18}}));

TEST(Pool, MaxPoolSkipsNaNSamples) {
  // A NaN sample never wins a window (the fold m = m < v ? v : m from
  // -inf), on every path: 3x3 stride 2 (the separable path's permutes) and
  // stride 1, with a NaN in every fifth input.
  for (int64_t stride : {2, 1}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const int64_t h = 27, oh = stride == 2 ? 13 : 25;
    std::vector<float> x = Random(2 * h * h, 63);
    for (size_t i = 0; i < x.size(); i += 5) x[i] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> want;
    for (int64_t p = 0; p < 2; ++p) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < oh; ++ox) {
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const float v = x[(p * h + oy * stride + ky) * h + ox * stride + kx];
              if (v > best) best = v;
            }
          }
          want.push_back(best);
        }
      }
    }
    using kite::cpu::sgemm::MicroKernel;
    for (MicroKernel level : {MicroKernel::kAvx512, MicroKernel::kAvx2Fma, MicroKernel::kPortable}) {
      const ForcedGemmKernel forced(level);
      if (!forced.ok()) continue;
      SCOPED_TRACE("level " + std::to_string(static_cast<int>(level)));
      Backend be(2);
      Node n("MaxPool");
      n.in({1, 2, h, h}, x).out({1, 2, oh, oh}).ints("kernel_shape", {3, 3})
          .ints("strides", {stride, stride});
      ASSERT_TRUE(Runs(be, n));
      ExpectExact(n.result(), want);
    }
  }
}

TEST(Pool, MaxPoolHandcomputedCeilMode) {
  // 1x1x3x3, kernel 2, stride 2, ceil_mode: windows {0,1}x{0,1}, {0,1}x{2},
  // {2}x{0,1}, {2}x{2}.
  Backend be;
  Node n("MaxPool");
  n.in({1, 1, 3, 3}, {1, 5, 2, 7, 3, 9, 4, 8, 6}).out({1, 1, 2, 2})
      .ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("ceil_mode", 1);
  ASSERT_TRUE(Runs(be, n));
  ExpectExact(n.result(), {7, 9, 8, 6});
  Node avg("AveragePool");
  avg.in({1, 1, 3, 3}, {1, 5, 2, 7, 3, 9, 4, 8, 6}).out({1, 1, 2, 2})
      .ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("ceil_mode", 1);
  ASSERT_TRUE(Runs(be, avg));
  ExpectExact(avg.result(), {4, 5.5f, 6, 6});
}

TEST(Pool, GlobalAveragePool) {
  Backend be(2);
  const std::vector<float> x = Random(2 * 3 * 5 * 7, 71);
  Node n("GlobalAveragePool");
  n.in({2, 3, 5, 7}, x).out({2, 3, 1, 1});
  ASSERT_TRUE(Runs(be, n));
  std::vector<double> want(6, 0.0);
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t i = 0; i < 35; ++i) want[p] += x[p * 35 + i] / 35.0;
  }
  // 35 float additions and one division: ~36 roundings of the sum.
  ExpectNear(n.result(), want, 0.0, 40 * kUnitRoundoff);
}

TEST(Pool, GlobalPoolsOverLargePlanes) {
  // Planes of 3 x 37 x 41 (1517 values: the 16-lane loops and a tail), a NaN
  // in one plane (GlobalMaxPool skips it, as std::max does; the average is
  // NaN) and the maximum in the tail of another.
  Backend be(2);
  std::vector<float> x = Random(3 * 1517, 72);
  x[1517 + 100] = std::numeric_limits<float>::quiet_NaN();
  x[2 * 1517 + 1516] = 50.0f;
  Node avg("GlobalAveragePool"), mx("GlobalMaxPool");
  avg.in({1, 3, 37, 41}, x).out({1, 3, 1, 1});
  mx.in({1, 3, 37, 41}, x).out({1, 3, 1, 1});
  ASSERT_TRUE(Runs(be, avg));
  ASSERT_TRUE(Runs(be, mx));
  std::vector<double> mean(3, 0.0);
  std::vector<float> best(3, -std::numeric_limits<float>::infinity());
  for (int64_t p = 0; p < 3; ++p) {
    for (int64_t i = 0; i < 1517; ++i) {
      mean[p] += x[p * 1517 + i] / 1517.0;
      best[p] = std::max(best[p], x[p * 1517 + i]);
    }
  }
  const std::vector<float> a = avg.result(), m = mx.result();
  // Each lane's sum sees ~1517/16 + 6 roundings of partial sums below ~50
  // (|x| <= 1): under 100 x 50 x 2^-24 = 3e-4 on the sum, 2e-7 on the mean.
  EXPECT_NEAR(a[0], mean[0], 1e-6);
  EXPECT_TRUE(std::isnan(a[1]));
  EXPECT_NEAR(a[2], mean[2], 1e-6);
  EXPECT_EQ(m, best);
  EXPECT_EQ(m[2], 50.0f);
}

// ===========================================================================
// Normalisation and Softmax.

TEST(Norm, BatchNormalization) {
  Backend be(2);
  const Shape x_shape = {2, 3, 4, 5};
  const std::vector<float> x = Random(Numel(x_shape), 81), scale = Random(3, 82),
                           bias = Random(3, 83), mean = Random(3, 84),
                           var = Random(3, 85, 0.1f, 2.0f);
  const float eps = 1e-3f;
  Node n("BatchNormalization");
  n.in(x_shape, x).in({3}, scale, true).in({3}, bias, true).in({3}, mean, true).in({3}, var, true)
      .out(x_shape).f("epsilon", eps);
  ASSERT_TRUE(Runs(be, n));
  std::vector<double> want;
  for (int64_t i = 0; i < Numel(x_shape); ++i) {
    const int64_t c = (i / 20) % 3;
    want.push_back((x[i] - static_cast<double>(mean[c])) / std::sqrt(static_cast<double>(var[c]) + eps) *
                       scale[c] + bias[c]);
  }
  // Folded into y = x*m + a in float: a handful of roundings of values <~ 10.
  ExpectNear(n.result(), want, 1e-5, 1e-5);
}

std::vector<double> RefSoftmax(const Shape& s, const std::vector<float>& x, int64_t axis, bool log) {
  const int64_t outer = Numel(Shape(s.begin(), s.begin() + axis)), len = s[axis],
                inner = Numel(Shape(s.begin() + axis + 1, s.end()));
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += std::exp(static_cast<double>(x[(o * len + j) * inner + i]));
      for (int64_t j = 0; j < len; ++j) {
        const int64_t at = (o * len + j) * inner + i;
        y[at] = log ? x[at] - std::log(sum) : std::exp(static_cast<double>(x[at])) / sum;
      }
    }
  }
  return y;
}

TEST(Softmax, Axes) {
  const Shape s = {2, 3, 4};
  const std::vector<float> x = Random(24, 91, -4.0f, 4.0f);
  Backend be(2);
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      Node n(op);
      n.in(s, x).out(s).i("axis", axis);
      ASSERT_TRUE(Runs(be, n));
      // exp and log: a few ulps; the sum over <= 4 terms a few more.
      ExpectNear(n.result(), RefSoftmax(s, x, axis < 0 ? axis + 3 : axis, op[0] == 'L'), 1e-5, 1e-6);
    }
  }
  Node def("Softmax");  // default axis -1
  def.in(s, x).out(s);
  ASSERT_TRUE(Runs(be, def));
  ExpectNear(def.result(), RefSoftmax(s, x, 2, false), 1e-5, 1e-6);
  Node big("Softmax");  // large logits must not overflow
  big.in({3}, {1000.0f, 1001.0f, 1002.0f}).out({3});
  ASSERT_TRUE(Runs(be, big));
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  ExpectNear(big.result(), {e2 / z, e1 / z, 1 / z}, 1e-5, 1e-6);
}

// Rows of every length modulo 4 and long ones: the NEON path (AArch64)
// handles 4 lanes and a scalar tail, and its exp is a polynomial. Logits in
// [-30, 30]: shifted values down to -60 exercise the range reduction far
// from 0. Tolerance: float rounding of x - max (|x - max| <= 60: ~4e-6
// relative in exp, as in the scalar loop) and ~1e-7 of the polynomial;
// the sum over up to 1000 terms adds ~1000 * 6e-8 relative at worst.
TEST(Softmax, LongRowsAndTails) {
  Backend be(2);
  for (int64_t len : {1, 3, 4, 5, 7, 8, 33, 1000}) {
    const Shape s = {3, len};
    const std::vector<float> x = Random(3 * len, 17 + static_cast<unsigned>(len), -30.0f, 30.0f);
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      SCOPED_TRACE(std::string(op) + " len " + std::to_string(len));
      Node n(op);
      n.in(s, x).out(s);
      ASSERT_TRUE(Runs(be, n));
      ExpectNear(n.result(), RefSoftmax(s, x, 1, op[0] == 'L'), 1e-4, 1e-6);
    }
  }
}

// ===========================================================================
// Data movement.

TEST(Shape, FlattenReshapeIdentityCopy) {
  Backend be;
  const std::vector<float> x = Random(24, 101);
  Node flat("Flatten");
  flat.in({2, 3, 4}, x).out({2, 12}).i("axis", 1);
  ASSERT_TRUE(Runs(be, flat));
  ExpectExact(flat.result(), x);
  Node reshape("Reshape");
  reshape.in({2, 3, 4}, x).in_i64({3}, {4, -1, 2}).out({4, 3, 2});
  ASSERT_TRUE(Runs(be, reshape));
  ExpectExact(reshape.result(), x);
  Node id("Identity");
  id.in_i64({3}, {1, -2, 3}, false).out({3}, I64);
  ASSERT_TRUE(Runs(be, id));
  EXPECT_EQ(id.output().values<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
  Node inplace("Reshape");
  inplace.in({2, 3, 4}, x).in_i64({2}, {6, 4}).out({6, 4});
  inplace.abi();
  inplace.output().abi.data = inplace.input(0).abi.data;
  ASSERT_TRUE(Runs(be, inplace));
  ExpectExact(inplace.input(0).values<float>(), x);
}

TEST(Shape, ReshapeComputedShapeIsCheckedAtRun) {
  Backend be;
  Node ok("Reshape", "rs");
  ok.in({2, 6}, Random(12, 1)).in_i64({2}, {3, 0}, false).out({3, 4});
  // 0 copies the input dim (6), so the declared 3x4 is wrong for this value.
  std::string err;
  const kite_status st = be.run(ok, &err);
  EXPECT_NE(st, KITE_OK);
  EXPECT_NE(err.find("rs"), std::string::npos) << err;
  Node good("Reshape", "rs2");
  good.in({2, 6}, Random(12, 1)).in_i64({2}, {-1, 4}, false).out({3, 4});
  EXPECT_TRUE(Runs(be, good));
}

TEST(Shape, Concat) {
  Backend be(3);
  const std::vector<float> a = Random(2 * 3 * 4, 111), b = Random(2 * 1 * 4, 112),
                           c = Random(2 * 5 * 4, 113);
  Node n("Concat");
  n.in({2, 3, 4}, a).in({2, 1, 4}, b).in({2, 5, 4}, c).out({2, 9, 4}).i("axis", 1);
  ASSERT_TRUE(Runs(be, n));
  std::vector<float> want;
  for (int64_t o = 0; o < 2; ++o) {
    want.insert(want.end(), a.begin() + o * 12, a.begin() + o * 12 + 12);
    want.insert(want.end(), b.begin() + o * 4, b.begin() + o * 4 + 4);
    want.insert(want.end(), c.begin() + o * 20, c.begin() + o * 20 + 20);
  }
  ExpectExact(n.result(), want);
  Node ints("Concat");
  ints.in_i64({2}, {1, 2}, false).in_i64({0}, {}, false).in_i64({1}, {3}, false).out({3}, I64).i("axis", -1);
  ASSERT_TRUE(Runs(be, ints));
  EXPECT_EQ(ints.output().values<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Shape, Transpose) {
  Backend be(2);
  const Shape s = {2, 3, 4, 5};
  const std::vector<float> x = Random(Numel(s), 121);
  const std::vector<Shape> perms = {{0, 2, 3, 1}, {3, 2, 1, 0}, {0, 1, 2, 3}, {1, 0, 2, 3}, {2, 0, 3, 1}};
  for (const Shape& perm : perms) {
    Shape out(4);
    for (int d = 0; d < 4; ++d) out[d] = s[perm[d]];
    Node n("Transpose");
    n.in(s, x).out(out).ints("perm", perm);
    ASSERT_TRUE(Runs(be, n));
    std::vector<float> want(x.size());
    for (int64_t i = 0; i < Numel(out); ++i) {
      const Shape oi = Unravel(i, out);
      Shape ii(4);
      for (int d = 0; d < 4; ++d) ii[perm[d]] = oi[d];
      want[i] = x[((ii[0] * 3 + ii[1]) * 4 + ii[2]) * 5 + ii[3]];
    }
    ExpectExact(n.result(), want);
  }
  Node def("Transpose");  // default: reverse
  def.in_i32({2, 3}, {1, 2, 3, 4, 5, 6}, false).out({3, 2}, I32);
  ASSERT_TRUE(Runs(be, def));
  EXPECT_EQ(def.output().values<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
}

TEST(ZeroSize, KernelsDoNothing) {
  Backend be(2);
  Node relu("Relu");
  relu.in({0, 4}, {}).out({0, 4});
  EXPECT_TRUE(Runs(be, relu));
  Node t("Transpose");
  t.in({3, 0}, {}).out({0, 3});
  EXPECT_TRUE(Runs(be, t));
  Node sm("Softmax");
  sm.in({0, 5}, {}).out({0, 5});
  EXPECT_TRUE(Runs(be, sm));
  Node cat("Concat");
  cat.in({0, 2}, {}).in({0, 3}, {}).out({0, 5}).i("axis", 1);
  EXPECT_TRUE(Runs(be, cat));
  Node mm("MatMul");
  mm.in({2, 0}, {}).in({0, 3}, {}).out({2, 3});
  ASSERT_TRUE(Runs(be, mm));
  ExpectExact(mm.result(), std::vector<float>(6, 0.0f));  // empty sum
}

// ===========================================================================
// Priority-2 ops.

TEST(Unary, MathFunctions) {
  const std::vector<float> x = {-2.5f, -1.0f, -0.3f, 0.0f, 0.4f, 1.0f, 3.0f};
  const std::vector<float> pos = {0.1f, 0.5f, 1.0f, 2.0f, 9.0f, 100.0f, 1e-3f};
  struct U {
    const char* op;
    const std::vector<float>* in;
    std::function<double(double)> f;
  };
  const U cases[] = {
      {"Sqrt", &pos, [](double v) { return std::sqrt(v); }},
      {"Reciprocal", &pos, [](double v) { return 1.0 / v; }},
      {"Exp", &x, [](double v) { return std::exp(v); }},
      {"Log", &pos, [](double v) { return std::log(v); }},
      {"Abs", &x, [](double v) { return std::fabs(v); }},
      {"Neg", &x, [](double v) { return -v; }},
      {"Erf", &x, [](double v) { return std::erf(v); }},
      {"Tanh", &x, [](double v) { return std::tanh(v); }},
      {"HardSwish", &x, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
      {"Gelu", &x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
  };
  Backend be;
  for (const U& u : cases) {
    SCOPED_TRACE(u.op);
    Node n(u.op);
    n.in({7}, *u.in).out({7});
    ASSERT_TRUE(Runs(be, n));
    std::vector<double> want;
    for (float v : *u.in) want.push_back(u.f(v));
    ExpectNear(n.result(), want, 1e-5, 1e-6);
  }
  Node leaky("LeakyRelu");
  leaky.in({7}, x).out({7}).f("alpha", 0.1f);
  ASSERT_TRUE(Runs(be, leaky));
  ExpectNear(leaky.result(), {-0.25, -0.1, -0.03, 0, 0.4, 1, 3}, 1e-6, 0);
  Node elu("Elu");
  elu.in({7}, x).out({7}).f("alpha", 2.0f);
  ASSERT_TRUE(Runs(be, elu));
  std::vector<double> want;
  for (float v : x) want.push_back(v > 0 ? v : 2.0 * (std::exp(static_cast<double>(v)) - 1));
  ExpectNear(elu.result(), want, 1e-5, 1e-6);
  Node hs("HardSigmoid");
  hs.in({7}, x).out({7}).f("alpha", 0.5f).f("beta", 0.6f);
  ASSERT_TRUE(Runs(be, hs));
  ExpectNear(hs.result(), {0, 0.1, 0.45, 0.6, 0.8, 1, 1}, 1e-6, 1e-7);
  Node gelu_tanh("Gelu");
  gelu_tanh.in({7}, x).out({7}).s("approximate", "tanh");
  ASSERT_TRUE(Runs(be, gelu_tanh));
  want.clear();
  for (float v : x) {
    const double d = v;
    want.push_back(0.5 * d * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (d + 0.044715 * d * d * d))));
  }
  ExpectNear(gelu_tanh.result(), want, 1e-5, 1e-6);
  Node abs_i("Abs");
  abs_i.in_i64({3}, {-5, 0, INT64_MIN}, false).out({3}, I64);
  ASSERT_TRUE(Runs(be, abs_i));
  EXPECT_EQ(abs_i.output().values<int64_t>(), (std::vector<int64_t>{5, 0, INT64_MIN}));
  Node no("Not");
  no.in_bool({3}, {0, 1, 0}).out({3}, BOOL);
  ASSERT_TRUE(Runs(be, no));
  EXPECT_EQ(no.output().values<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
}

TEST(Binary, PowPReluComparisonsLogic) {
  Backend be;
  Node pow("Pow");
  pow.in({2, 2}, {2, 3, 4, 9}).in({2}, {2.0f, 0.5f}).out({2, 2});
  ASSERT_TRUE(Runs(be, pow));
  ExpectNear(pow.result(), {4, std::sqrt(3.0), 16, 3}, 1e-6, 0);
  Node powi("Pow");
  powi.in({3}, {2, -3, 0.5f}).in_i64({}, {3}, false).out({3});
  ASSERT_TRUE(Runs(be, powi));
  ExpectNear(powi.result(), {8, -27, 0.125}, 1e-6, 0);
  Node prelu("PRelu");
  prelu.in({2, 2, 2}, {-1, 2, -3, 4, -5, 6, -7, 8}).in({2, 1, 1}, {0.5f, 0.25f}, true).out({2, 2, 2});
  ASSERT_TRUE(Runs(be, prelu));
  ExpectExact(prelu.result(), {-0.5f, 2, -1.5f, 4, -1.25f, 6, -1.75f, 8});
  Node eq("Equal");
  eq.in_i64({2, 2}, {1, 2, 3, 4}, false).in_i64({2}, {1, 4}, false).out({2, 2}, BOOL);
  ASSERT_TRUE(Runs(be, eq));
  EXPECT_EQ(eq.output().values<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 1}));
  Node gt("Greater");
  gt.in({3}, {1, 2, 3}).in({}, {2}).out({3}, BOOL);
  ASSERT_TRUE(Runs(be, gt));
  EXPECT_EQ(gt.output().values<uint8_t>(), (std::vector<uint8_t>{0, 0, 1}));
  Node lt("Less");
  lt.in_i32({3}, {1, 2, 3}, false).in_i32({3}, {3, 2, 1}, false).out({3}, BOOL);
  ASSERT_TRUE(Runs(be, lt));
  EXPECT_EQ(lt.output().values<uint8_t>(), (std::vector<uint8_t>{1, 0, 0}));
  Node land("And");
  land.in_bool({2, 2}, {0, 1, 0, 1}).in_bool({2, 1}, {1, 0}).out({2, 2}, BOOL);
  ASSERT_TRUE(Runs(be, land));
  EXPECT_EQ(land.output().values<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 0}));
  Node lor("Or");
  lor.in_bool({2, 2}, {0, 1, 0, 1}).in_bool({2, 1}, {1, 0}).out({2, 2}, BOOL);
  ASSERT_TRUE(Runs(be, lor));
  EXPECT_EQ(lor.output().values<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 1}));
  Node where("Where");
  where.in_bool({2, 1}, {1, 0}).in({3}, {1, 2, 3}).in({}, {-1}).out({2, 3});
  ASSERT_TRUE(Runs(be, where));
  ExpectExact(where.result(), {1, 2, 3, -1, -1, -1});
}

TEST(Shape, SliceGatherSplit) {
  Backend be(2);
  std::vector<float> x(4 * 5);
  for (int i = 0; i < 20; ++i) x[i] = static_cast<float>(i);
  Node sl("Slice");  // rows 1..3, columns 4, 2, 0 (negative step)
  sl.in({4, 5}, x).in_i64({2}, {1, -1}).in_i64({2}, {3, -100}).in_i64({2}, {0, 1}).in_i64({2}, {1, -2})
      .out({2, 3});
  ASSERT_TRUE(Runs(be, sl));
  ExpectExact(sl.result(), {9, 7, 5, 14, 12, 10});
  Node sl_end("Slice");  // ends beyond the dim clamp; axes default
  sl_end.in({4, 5}, x).in_i64({1}, {2}).in_i64({1}, {INT64_MAX}).out({2, 5});
  ASSERT_TRUE(Runs(be, sl_end));
  ExpectExact(sl_end.result(), std::vector<float>(x.begin() + 10, x.end()));
  Node sl_dyn("Slice", "dyn");  // computed starts: checked at run
  sl_dyn.in({4, 5}, x).in_i64({1}, {1}, false).in_i64({1}, {3}, false).out({2, 5});
  ASSERT_TRUE(Runs(be, sl_dyn));
  ExpectExact(sl_dyn.result(), std::vector<float>(x.begin() + 5, x.begin() + 15));

  Node g("Gather");
  g.in({4, 5}, x).in_i64({2, 2}, {3, -4, 0, 1}, false).out({4, 2, 2}).i("axis", 1);
  ASSERT_TRUE(Runs(be, g));
  std::vector<float> want;
  for (int r = 0; r < 4; ++r) {
    for (int j : {3, 1, 0, 1}) want.push_back(x[r * 5 + j]);
  }
  ExpectExact(g.result(), want);
  Node bad("Gather", "g_oob");
  bad.in({4, 5}, x).in_i64({1}, {4}, false).out({1, 5});
  std::string err;
  EXPECT_EQ(be.run(bad, &err), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("g_oob"), std::string::npos) << err;
  EXPECT_NE(err.find("out of range"), std::string::npos) << err;

  Node sp("Split");
  sp.in({4, 5}, x).in_i64({2}, {2, 3}).out({4, 2}).out({4, 3}).i("axis", 1);
  ASSERT_TRUE(Runs(be, sp));
  ExpectExact(sp.result(0), {0, 1, 5, 6, 10, 11, 15, 16});
  ExpectExact(sp.result(1), {2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19});
}

// Slice at the edges of int64 and of shapes, against a reference that
// lists the selected indices of each axis in 128-bit arithmetic, straight
// from the ONNX definition. Every case runs with constant parameters
// (resolved at prepare) and with computed ones (resolved at run).
std::vector<int64_t> SliceIndices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  __int128 s = start, e = end;
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  std::vector<int64_t> out;
  if (step > 0) {
    s = std::clamp<__int128>(s, 0, dim);
    e = std::clamp<__int128>(e, 0, dim);
    for (__int128 i = s; i < e; i += step) out.push_back(static_cast<int64_t>(i));
  } else if (dim > 0) {
    s = std::clamp<__int128>(s, 0, dim - 1);
    e = std::clamp<__int128>(e, -1, dim - 1);
    for (__int128 i = s; i > e; i += step) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

TEST(Shape, SliceExtremeStepsEmptyDimsNegativeAxes) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Case {
    const char* what;
    Shape dims;
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case cases[] = {
      {"step INT64_MIN", {5, 7}, {-1}, {kMin}, {1}, {kMin}},
      {"step INT64_MIN + 1", {5, 7}, {4}, {-100}, {0}, {kMin + 1}},
      {"step INT64_MAX", {5, 7}, {0, 2}, {kMax, kMax}, {0, 1}, {kMax, kMax}},
      {"step INT64_MAX - 1", {5, 7}, {1}, {5}, {1}, {kMax - 1}},
      {"steps near the limits", {5, 7}, {kMin, kMax}, {kMax, kMin}, {0, 1}, {kMax / 2, kMin / 2}},
      {"starts and ends beyond the limits", {5, 7}, {kMin, kMax}, {kMax, kMin}, {0, 1}, {3, -2}},
      {"start past the end", {5, 7}, {kMax, kMin}, {kMax, kMin}, {0, 1}, {1, -1}},
      {"negative axes", {3, 4, 5}, {1, -2}, {kMax, 0}, {-1, -3}, {2, -1}},
      {"empty dim reversed", {0, 3}, {-1}, {kMin}, {0}, {-1}},
      {"empty dim reversed from INT64_MAX", {3, 0}, {kMax}, {kMin}, {-1}, {kMin}},
      {"empty dim forward", {3, 0, 2}, {kMin, 0}, {kMax, 1}, {1, 2}, {kMax, 1}},
      {"reverse of one element", {1, 4}, {kMax, -1}, {kMin, kMin}, {0, 1}, {-1, kMin}},
      // Whole trailing axes copied as one run with the axis before them.
      {"channel split (whole trailing axes)", {2, 6, 3, 4}, {1}, {4}, {1}, {1}},
      {"whole trailing axes after a strided axis", {2, 6, 3, 4}, {0}, {6}, {1}, {2}},
      {"a partial axis before a whole last one", {2, 3, 4, 5}, {1}, {3}, {2}, {1}},
      {"everything whole", {2, 3, 4}, {0}, {kMax}, {0}, {1}},
      {"whole last axis reversed", {3, 4}, {-1}, {kMin}, {1}, {-1}},
  };
  Backend be;
  for (const Case& c : cases) {
    for (bool constant : {true, false}) {
      SCOPED_TRACE(std::string(c.what) + (constant ? ", constant" : ", computed"));
      // Expected: the product of the per-axis index lists.
      std::vector<std::vector<int64_t>> picked(c.dims.size());
      for (size_t d = 0; d < c.dims.size(); ++d) {
        for (int64_t i = 0; i < c.dims[d]; ++i) picked[d].push_back(i);
      }
      for (size_t k = 0; k < c.starts.size(); ++k) {
        const int64_t rank = static_cast<int64_t>(c.dims.size());
        const size_t a = static_cast<size_t>(c.axes[k] < 0 ? c.axes[k] + rank : c.axes[k]);
        picked[a] = SliceIndices(c.dims[a], c.starts[k], c.ends[k], c.steps[k]);
      }
      Shape out_shape;
      for (const auto& p : picked) out_shape.push_back(static_cast<int64_t>(p.size()));
      std::vector<float> x(static_cast<size_t>(Numel(c.dims)));
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
      std::vector<float> want;
      const Shape strides = [&] {
        Shape st(c.dims.size(), 1);
        for (size_t d = c.dims.size(); d-- > 1;) st[d - 1] = st[d] * c.dims[d];
        return st;
      }();
      for (int64_t o = 0; o < Numel(out_shape); ++o) {
        int64_t rest = o, offset = 0;
        for (size_t d = out_shape.size(); d-- > 0;) {
          offset += picked[d][static_cast<size_t>(rest % out_shape[d])] * strides[d];
          rest /= out_shape[d];
        }
        want.push_back(x[static_cast<size_t>(offset)]);
      }
      const int64_t n = static_cast<int64_t>(c.starts.size());
      Node sl("Slice", "edge_slice");
      sl.in(c.dims, x).in_i64({n}, c.starts, constant).in_i64({n}, c.ends, constant)
          .in_i64({n}, c.axes, constant).in_i64({n}, c.steps, constant).out(out_shape);
      const ::testing::AssertionResult ran = Runs(be, sl);  // every case reports, not just the first
      EXPECT_TRUE(ran);
      if (ran) ExpectExact(sl.result(), want);
    }
  }
  // A computed value that disagrees with the declared shape is a run error
  // naming the node, not a read out of bounds.
  Node wrong("Slice", "wrong_slice");
  wrong.in({5, 7}, std::vector<float>(35, 1.0f)).in_i64({1}, {-1}, false).in_i64({1}, {kMin}, false)
      .in_i64({1}, {1}, false).in_i64({1}, {kMin}, false).out({5, 2});
  std::string err;
  EXPECT_EQ(be.run(wrong, &err), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("wrong_slice"), std::string::npos) << err;
  EXPECT_NE(err.find("gives shape 5x1, the declared output is 5x2"), std::string::npos) << err;
}

TEST(Shape, SqueezeUnsqueezeExpandTileShape) {
  Backend be;
  const std::vector<float> x = {1, 2, 3};
  Node sq("Squeeze");
  sq.in({1, 3, 1}, x).in_i64({2}, {0, -1}).out({3});
  ASSERT_TRUE(Runs(be, sq));
  ExpectExact(sq.result(), x);
  Node usq("Unsqueeze");
  usq.in({3}, x).in_i64({2}, {0, 2}).out({1, 3, 1});
  ASSERT_TRUE(Runs(be, usq));
  ExpectExact(usq.result(), x);
  Node ex("Expand");
  ex.in({3, 1}, x).in_i64({3}, {2, 1, 2}).out({2, 3, 2});
  ASSERT_TRUE(Runs(be, ex));
  ExpectExact(ex.result(), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  Node tile("Tile");
  tile.in({1, 3}, x).in_i64({2}, {2, 2}).out({2, 6});
  ASSERT_TRUE(Runs(be, tile));
  ExpectExact(tile.result(), {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  Node shape("Shape");
  shape.in({2, 3, 4}, Random(24, 1)).out({3}, I64);
  ASSERT_TRUE(Runs(be, shape));
  EXPECT_EQ(shape.output().values<int64_t>(), (std::vector<int64_t>{2, 3, 4}));
  Node shape_part("Shape");
  shape_part.in({2, 3, 4}, Random(24, 1)).out({2}, I64).i("start", -2);
  ASSERT_TRUE(Runs(be, shape_part));
  EXPECT_EQ(shape_part.output().values<int64_t>(), (std::vector<int64_t>{3, 4}));
}

TEST(Shape, PadModes) {
  Backend be;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // 2x3
  struct P {
    const char* mode;
    std::vector<float> want;
  };
  // pads: begin (1, 2), end (0, 1) -> 3x6.
  const P cases[] = {
      {"constant", {9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9}},
      {"edge", {1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6}},
      {"reflect", {6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}},
  };
  for (const P& p : cases) {
    SCOPED_TRACE(p.mode);
    Node n("Pad");
    n.in({2, 3}, x).in_i64({4}, {1, 2, 0, 1}).in({}, {9.0f}, true).out({3, 6}).s("mode", p.mode);
    ASSERT_TRUE(Runs(be, n));
    ExpectExact(n.result(), p.want);
  }
  Node crop("Pad");  // negative pads crop
  crop.in({2, 3}, x).in_i64({4}, {0, -1, 0, 0}).out({2, 2});
  ASSERT_TRUE(Runs(be, crop));
  ExpectExact(crop.result(), {2, 3, 5, 6});
}

// Values computed at run go through the op rules' arithmetic
// (kite/ops/resolve.h): Pad crops before it wraps, Tile's in * repeats is
// overflow-checked, Range's int64 length is exact.
TEST(Shape, ComputedValuesFollowTheRules) {
  Backend be;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (bool constant : {true, false}) {
    SCOPED_TRACE(constant ? "constant" : "computed");
    // [10 11 12 13 14] cropped by 1 at the start, then wrapped by 2 at the
    // end: the wrap reads the kept elements [11 .. 14].
    Node wrap("Pad");
    wrap.in({5}, {10, 11, 12, 13, 14}).in_i64({2}, {-1, 2}, constant).out({6}).s("mode", "wrap");
    ASSERT_TRUE(Runs(be, wrap));
    ExpectExact(wrap.result(), {11, 12, 13, 14, 11, 12});
    // 0 .. 2^53 + 1 by 2^53: two elements (double arithmetic finds one).
    Node range("Range");
    range.in_i64({}, {0}, constant).in_i64({}, {(int64_t{1} << 53) + 1}, constant)
        .in_i64({}, {int64_t{1} << 53}, constant).out({2}, I64);
    ASSERT_TRUE(Runs(be, range));
    EXPECT_EQ(range.output().values<int64_t>(), (std::vector<int64_t>{0, int64_t{1} << 53}));
  }
  Node tile("Tile", "huge_tile");
  tile.in({3, 4}, Random(12, 3)).in_i64({2}, {kMax, 1}, false).out({3, 4});
  std::string err;
  EXPECT_EQ(be.run(tile, &err), KITE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("huge_tile"), std::string::npos) << err;
  EXPECT_NE(err.find("overflows"), std::string::npos) << err;
}

TEST(Misc, ConstantOfShapeRangeCast) {
  Backend be;
  Node cos("ConstantOfShape");
  cos.in_i64({2}, {2, 3}).out({2, 3}, I64).ints("value", {7}).i("value_dtype", I64);
  ASSERT_TRUE(Runs(be, cos));
  EXPECT_EQ(cos.output().values<int64_t>(), std::vector<int64_t>(6, 7));
  Node cosf("ConstantOfShape");
  cosf.in_i64({1}, {4}).out({4}).floats("value", {0.5f});
  ASSERT_TRUE(Runs(be, cosf));
  ExpectExact(cosf.result(), std::vector<float>(4, 0.5f));
  Node range("Range");
  range.in_i64({}, {10}).in_i64({}, {1}).in_i64({}, {-3}).out({3}, I64);
  ASSERT_TRUE(Runs(be, range));
  EXPECT_EQ(range.output().values<int64_t>(), (std::vector<int64_t>{10, 7, 4}));
  Node rangef("Range");
  rangef.in({}, {0.5f}, true).in({}, {2.0f}, true).in({}, {0.5f}, true).out({3});
  ASSERT_TRUE(Runs(be, rangef));
  ExpectExact(rangef.result(), {0.5f, 1.0f, 1.5f});
  Node cast("Cast");
  cast.in({5}, {1.9f, -1.9f, 0.0f, 3e10f, std::nanf("")}).out({5}, I32).i("to", 6);  // ONNX TensorProto INT32
  ASSERT_TRUE(Runs(be, cast));
  EXPECT_EQ(cast.output().values<int32_t>(), (std::vector<int32_t>{1, -1, 0, INT32_MAX, 0}));
  Node castb("Cast");
  castb.in_i64({3}, {0, 5, -1}, false).out({3}, BOOL).i("to", 9);  // BOOL
  ASSERT_TRUE(Runs(be, castb));
  EXPECT_EQ(castb.output().values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  Node casth("Cast");  // through float16 and back: exact for these values
  casth.in({4}, {1.0f, -2.5f, 65504.0f, 0.000061035156f}).out({4}, KITE_DTYPE_FLOAT16).i("to", 10);  // FLOAT16
  ASSERT_TRUE(Runs(be, casth));
  EXPECT_EQ(casth.output().values<uint16_t>(), (std::vector<uint16_t>{0x3c00, 0xc100, 0x7bff, 0x0400}));
}

TEST(Reduce, SumMeanMaxMinArgMax) {
  Backend be(2);
  const Shape s = {2, 3, 4};
  const std::vector<float> x = Random(24, 131);
  auto ref = [&](const std::vector<bool>& reduce, int kind) {  // 0 sum 1 mean 2 max 3 min
    std::vector<double> acc;
    std::vector<int64_t> count;
    std::vector<int64_t> keys;
    for (int64_t i = 0; i < 24; ++i) {
      const Shape idx = Unravel(i, s);
      int64_t key = 0;
      for (int d = 0; d < 3; ++d) key = key * s[d] + (reduce[d] ? 0 : idx[d]);
      auto it = std::find(keys.begin(), keys.end(), key);
      size_t k = it - keys.begin();
      if (it == keys.end()) {
        keys.push_back(key);
        acc.push_back(kind == 2 ? -1e30 : kind == 3 ? 1e30 : 0.0);
        count.push_back(0);
      }
      acc[k] = kind == 2 ? std::max<double>(acc[k], x[i]) : kind == 3 ? std::min<double>(acc[k], x[i]) : acc[k] + x[i];
      ++count[k];
    }
    if (kind == 1) for (size_t k = 0; k < acc.size(); ++k) acc[k] /= count[k];
    return acc;
  };
  struct R {
    const char* op;
    int kind;
  };
  for (const R& r : {R{"ReduceSum", 0}, R{"ReduceMean", 1}, R{"ReduceMax", 2}, R{"ReduceMin", 3}}) {
    SCOPED_TRACE(r.op);
    Node n(r.op);  // axes as an input (opset 18), keepdims
    n.in(s, x).in_i64({2}, {0, 2}).out({1, 3, 1});
    ASSERT_TRUE(Runs(be, n));
    ExpectNear(n.result(), ref({true, false, true}, r.kind), 1e-6, 1e-6);
    Node m(r.op);  // axes as an attribute, no keepdims
    m.in(s, x).out({2, 4}).ints("axes", {1}).i("keepdims", 0);
    ASSERT_TRUE(Runs(be, m));
    ExpectNear(m.result(), ref({false, true, false}, r.kind), 1e-6, 1e-6);
    Node all(r.op);  // no axes: all
    all.in(s, x).out({1, 1, 1});
    ASSERT_TRUE(Runs(be, all));
    ExpectNear(all.result(), ref({true, true, true}, r.kind), 1e-6, 1e-6);
  }
  Node am("ArgMax");
  am.in({2, 3}, {1, 5, 5, 7, 2, 7}).out({2}, I64).i("axis", 1).i("keepdims", 0);
  ASSERT_TRUE(Runs(be, am));
  EXPECT_EQ(am.output().values<int64_t>(), (std::vector<int64_t>{1, 0}));
  Node am_last("ArgMax");
  am_last.in({2, 3}, {1, 5, 5, 7, 2, 7}).out({2, 1}, I64).i("axis", 1).i("select_last_index", 1);
  ASSERT_TRUE(Runs(be, am_last));
  EXPECT_EQ(am_last.output().values<int64_t>(), (std::vector<int64_t>{2, 2}));
}

// ArgMin against a nested-loop reference: every axis given both ways
// (negative and positive), keepdims on and off, select_last_index on and
// off, float32 data full of ties (small integers) and int32/int64 data with
// their extreme values, threads 1 and 3. Indices must match exactly.
template <typename T>
std::vector<int64_t> ArgMinReference(const std::vector<T>& x, const Shape& shape, int64_t axis,
                                     bool last) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[static_cast<size_t>(axis)];
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < len; ++k) {
        const T v = x[static_cast<size_t>((o * len + k) * inner + i)];
        const T b = x[static_cast<size_t>((o * len + best) * inner + i)];
        if (v < b || (last && v == b)) best = k;
      }
      out.push_back(best);
    }
  }
  return out;
}

template <typename T>
void CheckArgMinEverywhere(Backend& be, kite_dtype dtype, const Shape& shape, const std::vector<T>& x) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  int cases = 0, ties_that_matter = 0;
  for (int64_t axis = -rank; axis < rank; ++axis) {
    const int64_t a = axis < 0 ? axis + rank : axis;
    for (int keepdims = 0; keepdims <= 1; ++keepdims) {
      for (int last = 0; last <= 1; ++last) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " keepdims " + std::to_string(keepdims) +
                     " select_last_index " + std::to_string(last));
        Shape out_shape = shape;
        if (keepdims) out_shape[static_cast<size_t>(a)] = 1;
        else out_shape.erase(out_shape.begin() + a);
        Node n("ArgMin");
        n.in<T>(dtype, shape, x).out(out_shape, I64).i("axis", axis).i("keepdims", keepdims);
        if (last || axis % 2 == 0) n.i("select_last_index", last);  // absent means 0
        ASSERT_TRUE(Runs(be, n));
        const std::vector<int64_t> want = ArgMinReference(x, shape, a, last != 0);
        EXPECT_EQ(n.output().values<int64_t>(), want);
        if (last && want != ArgMinReference(x, shape, a, false)) ++ties_that_matter;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, static_cast<int>(rank) * 2 * 4);
  // The data must make select_last_index matter, or the ties are untested.
  EXPECT_GT(ties_that_matter, 0);
}

TEST(Reduce, ArgMin) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    Backend be(threads);
    const Shape s = {3, 4, 5};
    std::mt19937 rng(977);
    std::uniform_int_distribution<int> small(-2, 2);
    std::vector<float> xf(60);
    for (float& v : xf) v = static_cast<float>(small(rng));
    CheckArgMinEverywhere<float>(be, F32, s, xf);

    std::vector<int32_t> xi(60);
    for (int32_t& v : xi) v = small(rng);
    xi[7] = std::numeric_limits<int32_t>::min();
    xi[27] = std::numeric_limits<int32_t>::min();
    xi[40] = std::numeric_limits<int32_t>::max();
    CheckArgMinEverywhere<int32_t>(be, I32, s, xi);

    std::vector<int64_t> xl(60);
    for (int64_t& v : xl) v = small(rng);
    xl[3] = std::numeric_limits<int64_t>::min();
    xl[23] = std::numeric_limits<int64_t>::min();
    xl[59] = std::numeric_limits<int64_t>::max();
    CheckArgMinEverywhere<int64_t>(be, I64, s, xl);

    // Hand-checked: row minima 1 at {0, 2} and 2 at {1, 2}.
    Node hand("ArgMin");
    hand.in({2, 3}, {1, 5, 1, 7, 2, 2}).out({2}, I64).i("axis", -1).i("keepdims", 0);
    ASSERT_TRUE(Runs(be, hand));
    EXPECT_EQ(hand.output().values<int64_t>(), (std::vector<int64_t>{0, 1}));
    Node hand_last("ArgMin");
    hand_last.in({2, 3}, {1, 5, 1, 7, 2, 2}).out({2, 1}, I64).i("axis", 1).i("select_last_index", 1);
    ASSERT_TRUE(Runs(be, hand_last));
    EXPECT_EQ(hand_last.output().values<int64_t>(), (std::vector<int64_t>{2, 2}));
    // An axis of length 1: index 0 whatever the flags.
    Node one("ArgMin");
    one.in({2, 1, 3}, Random(6, 978)).out({2, 3}, I64).i("axis", 1).i("keepdims", 0)
        .i("select_last_index", 1);
    ASSERT_TRUE(Runs(be, one));
    EXPECT_EQ(one.output().values<int64_t>(), std::vector<int64_t>(6, 0));
  }
}

TEST(Norm, LayerAndInstanceNormalization) {
  Backend be(2);
  const Shape s = {2, 3, 4};
  const std::vector<float> x = Random(24, 141), scale = Random(4, 142), bias = Random(4, 143);
  Node ln("LayerNormalization");
  ln.in(s, x).in({4}, scale, true).in({4}, bias, true).out(s).out({2, 3, 1}).out({2, 3, 1}).f("epsilon", 1e-5f);
  ASSERT_TRUE(Runs(be, ln));
  std::vector<double> want, means, invs;
  for (int r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 4; ++i) m += x[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) v += (x[r * 4 + i] - m) * (x[r * 4 + i] - m) / 4.0;
    const double inv = 1 / std::sqrt(v + 1e-5);
    for (int i = 0; i < 4; ++i) want.push_back((x[r * 4 + i] - m) * inv * scale[i] + bias[i]);
    means.push_back(m);
    invs.push_back(inv);
  }
  // A few float roundings of values around 1, amplified by inv (<= ~1e2 here).
  ExpectNear(ln.result(0), want, 1e-4, 1e-5);
  ExpectNear(ln.result(1), means, 1e-6, 1e-7);
  ExpectNear(ln.result(2), invs, 1e-5, 0);

  Node in("InstanceNormalization");
  const std::vector<float> sc = {1.0f, 2.0f, -1.0f}, bi = {0.0f, 0.5f, 1.0f};
  in.in(s, x).in({3}, sc, true).in({3}, bi, true).out(s);
  ASSERT_TRUE(Runs(be, in));
  want.clear();
  for (int p = 0; p < 6; ++p) {
    double m = 0, v = 0;
    for (int i = 0; i < 4; ++i) m += x[p * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) v += (x[p * 4 + i] - m) * (x[p * 4 + i] - m) / 4.0;
    for (int i = 0; i < 4; ++i) want.push_back((x[p * 4 + i] - m) / std::sqrt(v + 1e-5) * sc[p % 3] + bi[p % 3]);
  }
  ExpectNear(in.result(), want, 1e-4, 1e-5);
}

TEST(Resize, NearestAndLinear) {
  Backend be;
  const std::vector<float> x = {1, 2, 3, 4};  // 1x1x2x2
  Node near("Resize");  // asymmetric + floor: each pixel becomes a 2x2 block
  near.in({1, 1, 2, 2}, x).absent().in({4}, {1, 1, 2, 2}, true).out({1, 1, 4, 4})
      .s("mode", "nearest").s("coordinate_transformation_mode", "asymmetric").s("nearest_mode", "floor");
  ASSERT_TRUE(Runs(be, near));
  ExpectExact(near.result(), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});

  Node lin("Resize");  // half_pixel bilinear x2 (the PyTorch align_corners=False result)
  lin.in({1, 1, 2, 2}, x).absent().in({4}, {1, 1, 2, 2}, true).out({1, 1, 4, 4}).s("mode", "linear");
  ASSERT_TRUE(Runs(be, lin));
  ExpectNear(lin.result(),
             {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
             1e-6, 1e-6);

  Node ac("Resize");  // align_corners, from sizes
  ac.in({1, 1, 2, 2}, x).absent().absent().in_i64({4}, {1, 1, 3, 3}).out({1, 1, 3, 3})
      .s("mode", "linear").s("coordinate_transformation_mode", "align_corners");
  ASSERT_TRUE(Runs(be, ac));
  ExpectNear(ac.result(), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}, 1e-6, 1e-6);

  Node down("Resize");  // nearest downsampling, half_pixel, round_prefer_ceil
  std::vector<float> y(16);
  for (int i = 0; i < 16; ++i) y[i] = static_cast<float>(i);
  down.in({1, 1, 4, 4}, y).absent().in({4}, {1, 1, 0.5f, 0.5f}, true).out({1, 1, 2, 2})
      .s("nearest_mode", "round_prefer_ceil");
  ASSERT_TRUE(Runs(be, down));
  // x_orig = (o + 0.5) * 2 - 0.5 = 0.5, 2.5 -> ceil on ties: 1, 3.
  ExpectExact(down.result(), {5, 7, 13, 15});
}

TEST(Resize, NearestUpsamplingRunsAndRowCopies) {
  // Integer factors on the last axis (copied by runs of each column, two
  // at a time for x2), with rows that repeat the row above (copied), odd
  // widths and tails, and a factor that is not whole (the gather), each
  // against the nearest formula (asymmetric, floor: input i = floor(o / s)),
  // at 1 and 3 threads.
  struct Case {
    Shape in;
    float sh, sw;
  };
  for (const Case& c : {Case{{2, 3, 5, 7}, 2, 2}, Case{{1, 2, 4, 9}, 3, 3}, Case{{1, 1, 3, 11}, 1, 2},
                        Case{{1, 2, 6, 5}, 2, 1.5f}}) {
    const int64_t h = c.in[2], w = c.in[3];
    const int64_t oh = static_cast<int64_t>(std::floor(h * c.sh)), ow = static_cast<int64_t>(std::floor(w * c.sw));
    const Shape out = {c.in[0], c.in[1], oh, ow};
    const std::vector<float> x = Random(Numel(c.in), 81);
    std::vector<float> want;
    for (int64_t p = 0; p < c.in[0] * c.in[1]; ++p) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t iy = std::min(h - 1, static_cast<int64_t>(std::floor(oy / c.sh)));
          const int64_t ix = std::min(w - 1, static_cast<int64_t>(std::floor(ox / c.sw)));
          want.push_back(x[(p * h + iy) * w + ix]);
        }
      }
    }
    for (int threads : {1, 3}) {
      SCOPED_TRACE(Str(c.in) + " x" + std::to_string(c.sh) + "," + std::to_string(c.sw) + " threads " +
                   std::to_string(threads));
      Backend be(threads);
      Node n("Resize");
      n.in(c.in, x).absent().in({4}, {1, 1, c.sh, c.sw}, true).out(out)
          .s("mode", "nearest").s("coordinate_transformation_mode", "asymmetric").s("nearest_mode", "floor");
      ASSERT_TRUE(Runs(be, n));
      ExpectExact(n.result(), want);
    }
  }
}

TEST(Misc, DropoutAndGlobalMaxPool) {
  Backend be;
  Node d("Dropout");
  d.in({2, 2}, {1, 2, 3, 4}).out({2, 2}).out({2, 2}, BOOL);
  ASSERT_TRUE(Runs(be, d));
  ExpectExact(d.result(), {1, 2, 3, 4});
  EXPECT_EQ(d.output(1).values<uint8_t>(), std::vector<uint8_t>(4, 1));
  Node g("GlobalMaxPool");
  g.in({1, 2, 2, 2}, {1, 5, 3, 2, -1, -4, -2, -3}).out({1, 2, 1, 1});
  ASSERT_TRUE(Runs(be, g));
  ExpectExact(g.result(), {5, -1});
}

TEST(Unary, RoundingSignTrigSoftplusMish) {
  Backend be;
  const std::vector<float> x = {-2.5f, -1.5f, -0.5f, 0.0f, 0.5f, 1.5f, 2.7f};
  Node round("Round");  // halves to even
  round.in({7}, x).out({7});
  ASSERT_TRUE(Runs(be, round));
  ExpectExact(round.result(), {-2, -2, -0.0f, 0, 0, 2, 3});
  Node ceil("Ceil");
  ceil.in({7}, x).out({7});
  ASSERT_TRUE(Runs(be, ceil));
  ExpectExact(ceil.result(), {-2, -1, -0.0f, 0, 1, 2, 3});
  Node floor("Floor");
  floor.in({7}, x).out({7});
  ASSERT_TRUE(Runs(be, floor));
  ExpectExact(floor.result(), {-3, -2, -1, 0, 0, 1, 2});
  Node sign("Sign");
  sign.in_i32({4}, {-7, 0, 3, INT32_MIN}, false).out({4}, I32);
  ASSERT_TRUE(Runs(be, sign));
  EXPECT_EQ(sign.output().values<int32_t>(), (std::vector<int32_t>{-1, 0, 1, -1}));
  struct U {
    const char* op;
    std::function<double(double)> f;
  };
  const U cases[] = {
      {"Sin", [](double v) { return std::sin(v); }},
      {"Cos", [](double v) { return std::cos(v); }},
      {"Softplus", [](double v) { return std::log(1 + std::exp(v)); }},
      {"Mish", [](double v) { return v * std::tanh(std::log(1 + std::exp(v))); }},
  };
  const std::vector<float> y = {-30.0f, -2.0f, -0.1f, 0.0f, 0.7f, 3.0f, 40.0f};
  for (const U& u : cases) {
    SCOPED_TRACE(u.op);
    Node n(u.op);
    n.in({7}, y).out({7});
    ASSERT_TRUE(Runs(be, n));
    std::vector<double> want;
    for (float v : y) want.push_back(u.f(v));
    ExpectNear(n.result(), want, 1e-5, 1e-6);
  }
}

TEST(Binary, OrderedComparisonsAndXor) {
  Backend be;
  Node ge("GreaterOrEqual");
  ge.in({3}, {1, 2, 3}).in({}, {2}).out({3}, BOOL);
  ASSERT_TRUE(Runs(be, ge));
  EXPECT_EQ(ge.output().values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  Node le("LessOrEqual");
  le.in_i64({3}, {1, 2, 3}, false).in_i64({1}, {2}, false).out({3}, BOOL);
  ASSERT_TRUE(Runs(be, le));
  EXPECT_EQ(le.output().values<uint8_t>(), (std::vector<uint8_t>{1, 1, 0}));
  Node x("Xor");
  x.in_bool({2, 2}, {0, 1, 0, 1}).in_bool({2, 1}, {1, 0}).out({2, 2}, BOOL);
  ASSERT_TRUE(Runs(be, x));
  EXPECT_EQ(x.output().values<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(Variadic, MaxMinSumMeanBroadcast) {
  Backend be(2);
  const Shape a_shape = {2, 1, 3}, b_shape = {4, 1}, c_shape = {};
  const std::vector<float> a = Random(6, 151), b = Random(4, 152), c = {0.125f};
  const Shape out = {2, 4, 3};
  struct V {
    const char* op;
    std::function<float(float, float, float)> f;
  };
  const V cases[] = {
      {"Max", [](float p, float q, float r) { return std::max(std::max(p, q), r); }},
      {"Min", [](float p, float q, float r) { return std::min(std::min(p, q), r); }},
      {"Sum", [](float p, float q, float r) { return (p + q) + r; }},
      {"Mean", [](float p, float q, float r) { return ((p + q) + r) * (1.0f / 3.0f); }},
  };
  for (const V& v : cases) {
    SCOPED_TRACE(v.op);
    Node n(v.op);
    n.in(a_shape, a).in(b_shape, b).in(c_shape, c).out(out);
    ASSERT_TRUE(Runs(be, n));
    std::vector<float> want;
    for (int64_t i = 0; i < Numel(out); ++i) {
      const Shape idx = Unravel(i, out);
      want.push_back(v.f(a[BroadcastOffset(a_shape, idx)], b[BroadcastOffset(b_shape, idx)], c[0]));
    }
    ExpectExact(n.result(), want);
  }
  // In place over the second input: it must be read before it is written.
  Node inplace("Sum");
  const std::vector<float> p = Random(6, 153), q = Random(6, 154);
  inplace.in({6}, p).in({6}, q).out({6});
  inplace.abi();
  inplace.output().abi.data = inplace.input(1).abi.data;
  ASSERT_TRUE(Runs(be, inplace));
  const std::vector<float> got = inplace.input(1).values<float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], q[i] + p[i]);
  Node ints("Max");
  ints.in_i64({2}, {1, 9}, false).in_i64({2}, {5, -3}, false).out({2}, I64);
  ASSERT_TRUE(Runs(be, ints));
  EXPECT_EQ(ints.output().values<int64_t>(), (std::vector<int64_t>{5, 9}));
}

TEST(Binary, IntegerPow) {
  Backend be;
  Node p("Pow");  // exact integer powers; a negative exponent truncates toward zero
  p.in_i64({5}, {3, -2, 2, 1, -1}, false).in_i64({5}, {4, 3, -1, -5, -3}, false).out({5}, I64);
  ASSERT_TRUE(Runs(be, p));
  EXPECT_EQ(p.output().values<int64_t>(), (std::vector<int64_t>{81, -8, 0, 1, -1}));
  Node pf("Pow");
  pf.in_i32({2}, {9, 2}, false).in({2}, {0.5f, 3.0f}).out({2}, I32);
  ASSERT_TRUE(Runs(be, pf));
  EXPECT_EQ(pf.output().values<int32_t>(), (std::vector<int32_t>{3, 8}));
}

TEST(Reduce, BoolMaxMinAreAnyAll) {
  Backend be;
  Node any("ReduceMax");
  any.in_bool({2, 3}, {0, 1, 0, 0, 0, 0}).in_i64({1}, {1}).out({2}, BOOL).i("keepdims", 0);
  ASSERT_TRUE(Runs(be, any));
  EXPECT_EQ(any.output().values<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  Node all("ReduceMin");
  all.in_bool({2, 3}, {1, 1, 1, 1, 0, 1}).in_i64({1}, {1}).out({2}, BOOL).i("keepdims", 0);
  ASSERT_TRUE(Runs(be, all));
  EXPECT_EQ(all.output().values<uint8_t>(), (std::vector<uint8_t>{1, 0}));
}

TEST(Misc, HardmaxAndSize) {
  Backend be;
  Node h("Hardmax");
  h.in({2, 3}, {1, 3, 3, -1, -2, -0.5f}).out({2, 3});
  ASSERT_TRUE(Runs(be, h));
  ExpectExact(h.result(), {0, 1, 0, 0, 0, 1});
  Node h0("Hardmax");
  h0.in({2, 3}, {1, 3, 3, -1, -2, -0.5f}).out({2, 3}).i("axis", 0);
  ASSERT_TRUE(Runs(be, h0));
  ExpectExact(h0.result(), {1, 1, 1, 0, 0, 0});
  Node size("Size");
  size.in({2, 3, 4}, Random(24, 1)).out({}, I64);
  ASSERT_TRUE(Runs(be, size));
  EXPECT_EQ(size.output().values<int64_t>(), (std::vector<int64_t>{24}));
}

TEST(Reduce, ProdL1L2SumSquareLogSumExp) {
  Backend be;
  const std::vector<float> x = {1, -2, 3, 0.5f, -1, 4};  // 2x3, reduce axis 1
  struct R {
    const char* op;
    std::vector<double> want;
  };
  const R cases[] = {
      {"ReduceProd", {-6, -2}},
      {"ReduceL1", {6, 5.5}},
      {"ReduceL2", {std::sqrt(14.0), std::sqrt(17.25)}},
      {"ReduceSumSquare", {14, 17.25}},
      {"ReduceLogSumExp", {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0)),
                           std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(4.0))}},
  };
  for (const R& r : cases) {
    SCOPED_TRACE(r.op);
    Node n(r.op);
    n.in({2, 3}, x).in_i64({1}, {1}).out({2, 1});
    ASSERT_TRUE(Runs(be, n));
    ExpectNear(n.result(), r.want, 1e-6, 1e-6);
  }
  Node ip("ReduceProd");
  ip.in_i64({2, 2}, {3, -4, 5, 6}, false).in_i64({1}, {0}).out({2}, I64).i("keepdims", 0);
  ASSERT_TRUE(Runs(be, ip));
  EXPECT_EQ(ip.output().values<int64_t>(), (std::vector<int64_t>{15, -24}));
}

// ===========================================================================
// Speed: a ResNet-18 forward pass at 1x3x224x224 (random weights, BatchNorm
// folded as a converter would). Run with --gtest_also_run_disabled_tests.

TEST(CpuSpeed, DISABLED_ResNet18) {
  const int threads = [] {
    const char* env = std::getenv("KITE_TEST_THREADS");
    return env ? std::atoi(env) : 2;
  }();
  Backend be(threads);
  std::deque<Node> nodes;
  std::deque<std::vector<float>> acts;
  auto act = [&](int64_t n) -> float* {
    acts.emplace_back(static_cast<size_t>(n), 0.0f);
    return acts.back().data();
  };
  struct T {
    float* data;
    Shape shape;
  };
  uint32_t seed = 1000;
  auto wire = [](Node& n, std::vector<T> ins, const T& out) {
    n.abi();
    for (size_t k = 0; k < ins.size(); ++k) n.input(k).abi.data = ins[k].data;
    n.output().abi.data = out.data;
  };
  auto conv = [&](const T& x, int64_t m, int64_t k, int64_t s, int64_t p, bool relu) {
    const int64_t oh = (x.shape[2] + 2 * p - k) / s + 1, ow = (x.shape[3] + 2 * p - k) / s + 1;
    T y{act(m * oh * ow), {1, m, oh, ow}};
    const float scale = std::sqrt(2.0f / static_cast<float>(x.shape[1] * k * k));
    const uint32_t w_seed = ++seed, b_seed = ++seed;
    nodes.emplace_back("Conv", "conv" + std::to_string(nodes.size()));
    Node& n = nodes.back();
    n.in(x.shape, std::vector<float>(static_cast<size_t>(Numel(x.shape))))
        .in({m, x.shape[1], k, k}, Random(m * x.shape[1] * k * k, w_seed, -scale, scale), true)
        .in({m}, Random(m, b_seed, -0.1f, 0.1f), true)
        .out(y.shape).ints("strides", {s, s}).ints("pads", {p, p, p, p});
    wire(n, {x}, y);
    if (!relu) return y;
    nodes.emplace_back("Relu");
    Node& r = nodes.back();
    r.in(y.shape, std::vector<float>(static_cast<size_t>(Numel(y.shape)))).out(y.shape);
    wire(r, {y}, y);  // in place
    return y;
  };
  auto add_relu = [&](const T& a, const T& b) {
    nodes.emplace_back("Add");
    nodes.back().in(a.shape, std::vector<float>(static_cast<size_t>(Numel(a.shape))))
        .in(b.shape, std::vector<float>(static_cast<size_t>(Numel(b.shape)))).out(a.shape);
    wire(nodes.back(), {a, b}, a);
    nodes.emplace_back("Relu");
    nodes.back().in(a.shape, std::vector<float>(static_cast<size_t>(Numel(a.shape)))).out(a.shape);
    wire(nodes.back(), {a}, a);
    return a;
  };
  T x{act(3 * 224 * 224), {1, 3, 224, 224}};
  const std::vector<float> input = Random(3 * 224 * 224, 7);
  std::copy(input.begin(), input.end(), x.data);
  T h = conv(x, 64, 7, 2, 3, true);
  T pooled{act(64 * 56 * 56), {1, 64, 56, 56}};
  nodes.emplace_back("MaxPool");
  nodes.back().in(h.shape, std::vector<float>(static_cast<size_t>(Numel(h.shape)))).out(pooled.shape)
      .ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1});
  wire(nodes.back(), {h}, pooled);
  h = pooled;
  int64_t channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t m = 64 << stage;
    for (int block = 0; block < 2; ++block) {
      const int64_t s = (stage > 0 && block == 0) ? 2 : 1;
      T a = conv(h, m, 3, s, 1, true);
      T b = conv(a, m, 3, 1, 1, false);
      T shortcut = (s != 1 || channels != m) ? conv(h, m, 1, s, 0, false) : h;
      h = add_relu(b, shortcut);
      channels = m;
    }
  }
  T gap{act(512), {1, 512, 1, 1}};
  nodes.emplace_back("GlobalAveragePool");
  nodes.back().in(h.shape, std::vector<float>(static_cast<size_t>(Numel(h.shape)))).out(gap.shape);
  wire(nodes.back(), {h}, gap);
  T flat{gap.data, {1, 512}};
  T logits{act(1000), {1, 1000}};
  nodes.emplace_back("Gemm");
  nodes.back().in({1, 512}, std::vector<float>(512)).in({1000, 512}, Random(512000, 9, -0.05f, 0.05f), true)
      .in({1000}, Random(1000, 10), true).out(logits.shape).i("transB", 1);
  wire(nodes.back(), {flat}, logits);

  std::vector<void*> kernels;
  for (Node& n : nodes) {
    char err[256] = "";
    void* k = nullptr;
    ASSERT_EQ(be.api()->prepare2(be.instance(), n.abi(), &k, err, sizeof(err)), KITE_OK) << err;
    kernels.push_back(k);
  }
  {
    char err[256] = "";
    ASSERT_EQ(be.bind_workspace(err, sizeof(err)), KITE_OK) << err;
  }
  auto forward = [&] {
    for (void* k : kernels) {
      char err[256] = "";
      ASSERT_EQ(be.api()->execute(be.instance(), k, err, sizeof(err)), KITE_OK) << err;
    }
  };
  forward();  // warm-up
  if (std::getenv("KITE_TEST_PROFILE")) {  // CPU time per op type (meaningful with 1 thread)
    std::vector<std::pair<std::string, double>> per_op;
    for (size_t i = 0; i < kernels.size(); ++i) {
      timespec t0, t1;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      char err[256] = "";
      ASSERT_EQ(be.api()->execute(be.instance(), kernels[i], err, sizeof(err)), KITE_OK) << err;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
      const double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
      const std::string op = nodes[i].abi()->op;
      auto it = std::find_if(per_op.begin(), per_op.end(), [&](const auto& p) { return p.first == op; });
      if (it == per_op.end()) per_op.emplace_back(op, ms); else it->second += ms;
    }
    for (const auto& [op, ms] : per_op) std::printf("  %-18s %8.2f ms\n", op.c_str(), ms);
  }
  double best = 1e9, total = 0;
  const int runs = 5;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ms);
    total += ms;
  }
  std::printf("resnet18 1x3x224x224, %d threads: best %.1f ms, mean %.1f ms over %d runs\n", threads,
              best, total / runs, runs);
  for (float v : std::vector<float>(logits.data, logits.data + 1000)) ASSERT_TRUE(std::isfinite(v));
  for (void* k : kernels) be.api()->release(be.instance(), k);
  EXPECT_LT(best, 1000.0);
}

// ---- LSTM / GRU / RNN --------------------------------------------------------------

// RNN (tanh), 3 steps, batch 2, input 2, hidden 2, against the recurrence
// written out in double; then sequence_lens computed at run: the full
// length runs, a shorter one is a run error naming the node.
TEST(Recurrent, RnnMatchesTheRecurrenceAndRefusesShortSequences) {
  const int64_t S = 3, B = 2, I = 2, H = 2;
  const std::vector<float> x = Random(S * B * I, 71);
  const std::vector<float> w = Random(H * I, 72);
  const std::vector<float> r = Random(H * H, 73);
  const std::vector<float> bias = Random(2 * H, 74);
  auto make = [&](Node& n, const std::vector<int32_t>& lens) {
    n.in({S, B, I}, x).in({1, H, I}, w, true).in({1, H, H}, r, true).in({1, 2 * H}, bias, true);
    n.in_i32({B}, lens, false);
    n.out({S, 1, B, H}).out({1, B, H}).i("hidden_size", H);
  };
  Backend b;
  Node ok("RNN", "rnn0");
  make(ok, {3, 3});
  ASSERT_TRUE(Runs(b, ok));
  std::vector<double> h(static_cast<size_t>(B * H), 0.0), want;
  for (int64_t t = 0; t < S; ++t) {
    std::vector<double> next(h.size());
    for (int64_t bb = 0; bb < B; ++bb) {
      for (int64_t j = 0; j < H; ++j) {
        double a = bias[j] + bias[H + j];
        for (int64_t k = 0; k < I; ++k) a += double(x[(t * B + bb) * I + k]) * w[j * I + k];
        for (int64_t k = 0; k < H; ++k) a += h[bb * H + k] * r[j * H + k];
        next[bb * H + j] = std::tanh(a);
      }
    }
    h = next;
    want.insert(want.end(), h.begin(), h.end());
  }
  // Per step a float sum of 6 terms in [-1, 1] and tanh: <= ~5e-7; a state
  // error passes through R (row sums of |r| <= 2, |tanh'| <= 1), so after
  // 3 steps <= 5e-7 * (1 + 2 + 4) = 3.5e-6 worst case: abs 1e-5.
  ExpectNear(ok.result(0), want, 0, 1e-5);
  ExpectNear(ok.result(1), std::vector<double>(want.end() - B * H, want.end()), 0, 1e-5);

  Node ragged("RNN", "rnn0");
  make(ragged, {3, 2});
  std::string err;
  EXPECT_NE(b.run(ragged, &err), KITE_OK);
  EXPECT_NE(err.find("RNN 'rnn0'"), std::string::npos) << err;
  EXPECT_NE(err.find("sequence_lens holds 2 for batch entry 1"), std::string::npos) << err;
}

}  // namespace
