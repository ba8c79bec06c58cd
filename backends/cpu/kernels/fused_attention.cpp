// Attention: out = softmax(q kt * scale + mask) v, per leading index and
// query row, without materialising the scores: each row's scores live in a
// per-thread buffer of length T allocated at prepare. q [..., S, D],
// kt [..., D, T], v [..., T, Dv], mask broadcasting to [..., S, T].
// Softmax as the Softmax kernel computes it (max-shifted, float sums).
// nan_to_zero = 1 (Hugging Face's Where(IsNaN(p), 0, p) guard, fused with
// it): a NaN probability (a row masked with -inf throughout) counts as 0.
#include <cmath>
#include <limits>

#include "fused_common.h"
#include "kernels.h"
#include "kite/abi/device_node.h"
#include "kite/ops/attention.h"
#include "sgemm.h"
#include "softmax_neon.h"
#include "vmath.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KITE_ATTENTION_AVX512 1
#include <immintrin.h>
#endif

namespace kite::cpu {

namespace {

#ifdef KITE_ATTENTION_AVX512
inline __mmask16 lanes_left(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// row_times_matrix at sixteen lanes (AVX-512F, chosen at prepare as the GEMM
// level is): up to four vectors of columns at a time in registers, depth
// outermost, one FMA per product. The portable loops ran four lanes at
// best (SSE at the x86-64 baseline): the text transformer's and the ViT's
// attention (T = 32 and 17, D = 16) took three times their matrix
// products' time (Zen 4).
__attribute__((target("avx512f,fma"))) void row_times_matrix_avx512(const float* a, const float* b,
                                                                    int64_t depth, int64_t n,
                                                                    float scale, float* y) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    __mmask16 m[4];
    for (int v = 0; v < 4; ++v) m[v] = j0 + 16 * v < n ? lanes_left(n - j0 - 16 * v) : 0;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const float* col = b + j0;
    for (int64_t k = 0; k < depth; ++k, col += n) {
      const __m512 ak = _mm512_set1_ps(a[k]);
      for (int v = 0; v < 4; ++v) {
        if (m[v]) acc[v] = _mm512_fmadd_ps(ak, _mm512_maskz_loadu_ps(m[v], col + 16 * v), acc[v]);
      }
    }
    for (int v = 0; v < 4; ++v) {
      if (!m[v]) break;
      const __m512 r = scale != 1.0f ? _mm512_mul_ps(acc[v], _mm512_set1_ps(scale)) : acc[v];
      _mm512_mask_storeu_ps(y + j0 + 16 * v, m[v], r);
    }
  }
}

// The same at eight lanes (AVX2 and FMA): up to four vectors of columns,
// tails by masked loads and stores.
__attribute__((target("avx2,fma"))) void row_times_matrix_avx2(const float* a, const float* b,
                                                               int64_t depth, int64_t n, float scale,
                                                               float* y) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t j0 = 0; j0 < n; j0 += 32) {
    __m256i m[4];
    int vectors = 0;
    for (int v = 0; v < 4; ++v) {
      const int64_t left = n - j0 - 8 * v;
      m[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left >= 8 ? 8 : left < 0 ? 0 : left)), index);
      if (left > 0) vectors = v + 1;
    }
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const float* col = b + j0;
    for (int64_t k = 0; k < depth; ++k, col += n) {
      const __m256 ak = _mm256_broadcast_ss(a + k);
      for (int v = 0; v < 4; ++v) {
        if (v < vectors) acc[v] = _mm256_fmadd_ps(ak, _mm256_maskload_ps(col + 8 * v, m[v]), acc[v]);
      }
    }
    for (int v = 0; v < vectors; ++v) {
      const __m256 r = scale != 1.0f ? _mm256_mul_ps(acc[v], _mm256_set1_ps(scale)) : acc[v];
      _mm256_maskstore_ps(y + j0 + 8 * v, m[v], r);
    }
  }
}
#endif

// y[0 .. n) = scale * sum over k < depth of a[k] * b[k * n + (0 .. n)]: a
// row of q kt (a = q, b = kt, n = T, the attention's scale) and of p v (a =
// p, b = v, n = Dv, scale 1: no multiply). level: the GEMM level's.
void row_times_matrix(sgemm::MicroKernel level, const float* a, const float* b, int64_t depth, int64_t n,
                      float scale, float* y) {
#ifdef KITE_ATTENTION_AVX512
  if (level == sgemm::MicroKernel::kAvx512) return row_times_matrix_avx512(a, b, depth, n, scale, y);
  if (level == sgemm::MicroKernel::kAvx2Fma) return row_times_matrix_avx2(a, b, depth, n, scale, y);
#else
  (void)level;
#endif
  for (int64_t j = 0; j < n; ++j) y[j] = 0.0f;
  for (int64_t k = 0; k < depth; ++k) {
    const float ak = a[k];
    const float* row = b + k * n;
    for (int64_t j = 0; j < n; ++j) y[j] += ak * row[j];
  }
  if (scale != 1.0f) {
    for (int64_t j = 0; j < n; ++j) y[j] *= scale;
  }
}

class AttentionKernel : public Kernel {
 public:
  AttentionKernel(int64_t batches, int64_t s, int64_t d, int64_t t, int64_t dv, float scale,
                  const float* q, const float* kt, const float* v, const float* mask,
                  Shape lead_dims, Shape mask_lead_strides, int64_t mask_row_stride,
                  int64_t mask_col_stride, float* out, int threads, bool nan_to_zero)
      : batches_(batches), s_(s), d_(d), t_(t), dv_(dv), scale_(scale), q_(q), kt_(kt), v_(v),
        mask_(mask), lead_dims_(std::move(lead_dims)), mask_lead_strides_(std::move(mask_lead_strides)),
        mask_row_stride_(mask_row_stride), mask_col_stride_(mask_col_stride), out_(out),
        nan_to_zero_(nan_to_zero),
        scores_(static_cast<size_t>(std::max(threads, 1)) * static_cast<size_t>(t)) {}

  void run(ThreadPool& pool) override {
    // Rows are split into one contiguous chunk per thread at most, so each
    // chunk owns the scores buffer of its chunk index.
    const int64_t rows = batches_ * s_;
    const int64_t slots = static_cast<int64_t>(scores_.size()) / std::max<int64_t>(t_, 1);
    const int64_t chunk = std::max<int64_t>(1, (rows + slots - 1) / std::max<int64_t>(slots, 1));
    const int64_t chunks = rows == 0 ? 0 : (rows + chunk - 1) / chunk;
    pool.parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        float* scores = scores_.data() + c * t_;
        const int64_t last = std::min(rows, (c + 1) * chunk);
        for (int64_t r = c * chunk; r < last; ++r) row(r, scores);
      }
    });
  }

 private:
  void row(int64_t r, float* scores) const {
    const int64_t b = r / s_, i = r % s_;
    const float* q = q_ + (b * s_ + i) * d_;
    const float* kt = kt_ + b * d_ * t_;
    const float* v = v_ + b * t_ * dv_;
    float* out = out_ + (b * s_ + i) * dv_;
    row_times_matrix(level_, q, kt, d_, t_, scale_, scores);
    if (mask_) {
      int64_t offset = i * mask_row_stride_, rest = b;
      for (size_t dim = lead_dims_.size(); dim-- > 0;) {
        offset += (rest % lead_dims_[dim]) * mask_lead_strides_[dim];
        rest /= lead_dims_[dim];
      }
      for (int64_t j = 0; j < t_; ++j) scores[j] += mask_[offset + j * mask_col_stride_];
    }
    // Scores become probabilities in place, by the Softmax kernel's row
    // (NEON on arm64, softmax_neon.h; vectorised exp elsewhere, vmath.h).
#if defined(__aarch64__)
    neon::softmax_contiguous(scores, scores, t_, false);
#else
    vmath::softmax(scores, scores, t_);
#endif
    if (nan_to_zero_) {
      for (int64_t j = 0; j < t_; ++j) {
        if (std::isnan(scores[j])) scores[j] = 0.0f;
      }
    }
    row_times_matrix(level_, scores, v, t_, dv_, 1.0f, out);
  }

  int64_t batches_, s_, d_, t_, dv_;
  float scale_;
  const float *q_, *kt_, *v_, *mask_;
  Shape lead_dims_, mask_lead_strides_;
  int64_t mask_row_stride_, mask_col_stride_;
  float* out_;
  bool nan_to_zero_;
  // The products' level (fixed at prepare: a test that forces another
  // level afterwards still gets a correct kernel).
  sgemm::MicroKernel level_ = sgemm::micro_kernel_in_use();
  std::vector<float> scores_;
};

}  // namespace

std::string check_fused_attention(const OpNode& op, const std::string& pattern,
                                  const std::vector<TensorType>& outputs) {
  Shape scores, out;
  std::string why = kite::ops::attention_shapes(op, pattern, outputs, &scores, &out);
  if (why.empty()) why = expect_dtypes(op, 0, op.inputs.size(), {KITE_DTYPE_FLOAT32});
  if (!why.empty()) return why;
  const size_t r = scores.size();
  if (op.has_input(3)) {
    Shape joined;
    if (op.inputs[3].shape.size() > r || !kite::ops::broadcast_shapes(op.inputs[3].shape, scores, &joined) ||
        joined != scores) {
      return input_label(op, 3) + " does not broadcast to the scores " + kite::ops::shape_string(scores);
    }
  }
  return fused::expect_output(op, outputs, 0, KITE_DTYPE_FLOAT32, out);
}

std::unique_ptr<Kernel> prepare_fused_attention(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& q = op.inputs[0].shape;
  const Shape& kt = op.inputs[1].shape;
  const Shape& v = op.inputs[2].shape;
  const size_t r = q.size();
  if (r < 2 || kt.size() != r || v.size() != r) return prepare_error(err, op, "bad ranks");
  const Shape lead(q.begin(), q.end() - 2);
  const int64_t batches = shape_numel(lead);
  Shape scores(q.begin(), q.end() - 1);
  scores.push_back(kt[r - 1]);
  Shape mask_strides(r, 0);
  const float* mask = nullptr;
  if (op.has_input(3)) {
    mask = static_cast<const float*>(args.input_data(3));
    mask_strides = kite::abi::broadcast_strides(op.inputs[3].shape, scores);
  }
  const Shape lead_strides(mask_strides.begin(), mask_strides.end() - 2);
  auto in = [&](int i) { return static_cast<const float*>(args.input_data(i)); };
  return std::make_unique<AttentionKernel>(batches, q[r - 2], q[r - 1], kt[r - 1], v[r - 1],
                                           op.attr_float("scale", 1.0f), in(0), in(1), in(2), mask,
                                           lead, lead_strides, mask_strides[r - 2], mask_strides[r - 1],
                                           static_cast<float*>(args.output_data(0)), args.threads,
                                           op.attr_int("nan_to_zero", 0) != 0);
}

}  // namespace kite::cpu
