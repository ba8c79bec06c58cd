// kite/ops/resolve.h, the resolved parameters that the op rules and the
// kernels share, against references written here from the ONNX operator
// definitions: Slice enumerates the selected indices one by one in 128-bit
// arithmetic (so it cannot overflow where the code under test must not),
// Pad builds the padded axis by cropping and then padding, element by
// element. Run under the asan preset, these also show that no int64
// arithmetic overflows for extreme values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kite/ops/attr.h"
#include "kite/ops/fused.h"
#include "kite/ops/op_node.h"
#include "kite/ops/resolve.h"

namespace {

using kite::ops::PadAxis;
using kite::ops::PadMode;
using kite::ops::SliceAxis;
using Indices = std::vector<int64_t>;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// ONNX Slice, one axis: negative start/end add dim; start clamps to
// [0, dim] (step > 0) or [0, dim - 1] (step < 0), end to [0, dim] or
// [-1, dim - 1]; then start, start + step, ... while before end.
Indices ReferenceSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  __int128 s = start, e = end;
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  Indices out;
  if (step > 0) {
    s = s < 0 ? 0 : s > dim ? dim : s;
    e = e < 0 ? 0 : e > dim ? dim : e;
    for (__int128 i = s; i < e; i += step) out.push_back(static_cast<int64_t>(i));
  } else {
    if (dim == 0) return out;
    s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    for (__int128 i = s; i > e; i += step) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

Indices Enumerate(const SliceAxis& a) {
  Indices out;
  for (int64_t k = 0; k < a.count; ++k) out.push_back(a.start + k * a.step);
  return out;
}

TEST(ResolveSlice, AxisMatchesTheDefinitionForExtremeValues) {
  const int64_t steps[] = {1, 2, 3, 7, -1, -2, -3, -7, kMax, kMax - 1, kMax / 2, kMin, kMin + 1,
                           kMin / 2};
  std::vector<int64_t> bounds = {kMin, kMin + 1, kMax, kMax - 1, kMin / 2, kMax / 2};
  for (int64_t v = -9; v <= 9; ++v) bounds.push_back(v);
  int cases = 0;
  for (int64_t dim = 0; dim <= 6; ++dim) {
    for (int64_t start : bounds) {
      for (int64_t end : bounds) {
        for (int64_t step : steps) {
          const SliceAxis a = kite::ops::slice_axis(dim, start, end, step);
          const Indices want = ReferenceSlice(dim, start, end, step);
          ASSERT_EQ(Enumerate(a), want)
              << "dim " << dim << " start " << start << " end " << end << " step " << step;
          // What the kernels rely on: offsets stay inside the axis and the
          // stride |step| * (count - 1) does not overflow.
          if (a.count > 1) {
            ASSERT_LT(static_cast<__int128>(a.count - 1) * (a.step < 0 ? -static_cast<__int128>(a.step) : a.step),
                      static_cast<__int128>(dim));
          } else {
            ASSERT_EQ(a.step, 1);
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 30000);
}

TEST(ResolveSlice, AxesStepsAndErrors) {
  const int64_t dims[] = {4, 0, 10};
  SliceAxis out[3];
  kite::ops::RuleError err;
  // Negative axes; an empty dim reversed; a step of INT64_MIN.
  const int64_t starts[] = {-1, -1, 0}, ends[] = {kMin, kMin, kMax}, axes[] = {-3, -2, -1},
                steps[] = {kMin, -1, kMax};
  kite::ops::SliceSpec spec;
  spec.starts = starts;
  spec.ends = ends;
  spec.axes = axes;
  spec.steps = steps;
  spec.count = 3;
  ASSERT_TRUE(kite::ops::resolve_slice(dims, 3, spec, out, &err)) << err.message;
  EXPECT_EQ(Enumerate(out[0]), (Indices{3}));
  EXPECT_EQ(Enumerate(out[1]), (Indices{}));
  EXPECT_EQ(Enumerate(out[2]), (Indices{0}));
  // Axes default to 0..count-1, steps to 1; unnamed dims are taken whole.
  spec.axes = nullptr;
  spec.steps = nullptr;
  spec.count = 1;
  ASSERT_TRUE(kite::ops::resolve_slice(dims, 3, spec, out, &err)) << err.message;
  EXPECT_EQ(Enumerate(out[0]), (Indices{}));  // forward from 3 to INT64_MIN: nothing
  EXPECT_EQ(out[1].count, 0);
  EXPECT_EQ(out[2].count, 10);
  EXPECT_EQ(out[2].start, 0);
  EXPECT_EQ(out[2].step, 1);
  // Errors: a 0 step, an axis twice, an axis out of range, too many values.
  const int64_t zero_step[] = {0};
  spec.steps = zero_step;
  EXPECT_FALSE(kite::ops::resolve_slice(dims, 3, spec, out, &err));
  EXPECT_NE(std::string(err.message).find("0 step"), std::string::npos) << err.message;
  const int64_t twice[] = {0, -3}, two[] = {0, 0};
  spec = {};
  spec.starts = two;
  spec.ends = two;
  spec.axes = twice;
  spec.count = 2;
  EXPECT_FALSE(kite::ops::resolve_slice(dims, 3, spec, out, &err));
  EXPECT_NE(std::string(err.message).find("twice"), std::string::npos) << err.message;
  const int64_t far[] = {3};
  spec.axes = far;
  spec.count = 1;
  EXPECT_FALSE(kite::ops::resolve_slice(dims, 3, spec, out, &err));
  EXPECT_NE(std::string(err.message).find("out of range"), std::string::npos) << err.message;
  spec.axes = nullptr;
  spec.count = 4;
  const int64_t four[] = {0, 0, 0, 0};
  spec.starts = four;
  spec.ends = four;
  EXPECT_FALSE(kite::ops::resolve_slice(dims, 3, spec, out, &err));
}

// ONNX Runtime's Pad: negative pads crop first, then the mode pads the
// kept elements.
std::vector<int> ReferencePad(const std::vector<int>& x, int64_t pb, int64_t pe, PadMode mode) {
  std::vector<int> kept(x.begin() + (pb < 0 ? -pb : 0), x.end() - (pe < 0 ? -pe : 0));
  const int64_t n = static_cast<int64_t>(kept.size());
  std::vector<int> out;
  auto at = [&](int64_t i) -> int {  // i outside [0, n): by mode
    if (i >= 0 && i < n) return kept[i];
    switch (mode) {
      case PadMode::kConstant: return -1;
      case PadMode::kEdge: return kept[i < 0 ? 0 : n - 1];
      case PadMode::kWrap: return kept[((i % n) + n) % n];
      case PadMode::kReflect: {
        // Mirror without repeating the edge, as many times as needed.
        while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
        return kept[i];
      }
    }
    return 0;
  };
  for (int64_t i = -(pb > 0 ? pb : 0); i < n + (pe > 0 ? pe : 0); ++i) out.push_back(at(i));
  return out;
}

TEST(ResolvePad, EveryModeMatchesCropThenPad) {
  const std::vector<int> x = {10, 11, 12, 13, 14};
  const int64_t dim = 5;
  for (PadMode mode : {PadMode::kConstant, PadMode::kEdge, PadMode::kReflect, PadMode::kWrap}) {
    for (int64_t pb = -5; pb <= 6; ++pb) {
      for (int64_t pe = -5; pe <= 6; ++pe) {
        const int64_t pads[] = {pb, pe};
        PadAxis a;
        kite::ops::RuleError err;
        const bool ok = kite::ops::resolve_pad(&dim, 1, mode, pads, 2, nullptr, 0, &a, &err);
        const int64_t kept = dim + (pb < 0 ? pb : 0) + (pe < 0 ? pe : 0);
        const int64_t grow = std::max<int64_t>({pb, pe, 0});
        bool valid = kept >= 0;
        if (valid && grow > 0 && mode != PadMode::kConstant) {
          valid = kept >= 1 && (mode != PadMode::kReflect || grow < kept) &&
                  (mode != PadMode::kWrap || grow <= kept);
        }
        ASSERT_EQ(ok, valid) << kite::ops::pad_mode_name(mode) << " " << pb << " " << pe << ": "
                             << err.message;
        if (!ok) continue;
        std::vector<int> got;
        for (int64_t o = 0; o < a.out; ++o) {
          const int64_t i = kite::ops::pad_source(a, mode, o);
          got.push_back(i < 0 ? -1 : x[i]);
        }
        ASSERT_EQ(got, ReferencePad(x, pb, pe, mode))
            << kite::ops::pad_mode_name(mode) << " " << pb << " " << pe;
      }
    }
  }
  // Extreme pads: overflow is an error, not undefined behaviour.
  const int64_t huge[] = {kMax, 1};
  const int64_t crop_all[] = {kMin, 0};
  PadAxis a;
  kite::ops::RuleError err;
  EXPECT_FALSE(kite::ops::resolve_pad(&dim, 1, PadMode::kConstant, huge, 2, nullptr, 0, &a, &err));
  EXPECT_NE(std::string(err.message).find("overflows"), std::string::npos) << err.message;
  EXPECT_FALSE(kite::ops::resolve_pad(&dim, 1, PadMode::kConstant, crop_all, 2, nullptr, 0, &a, &err));
  EXPECT_NE(std::string(err.message).find("remove more"), std::string::npos) << err.message;
}

TEST(ResolveShapes, ReshapeSqueezeUnsqueezeTileExpandSplitPerm) {
  const int64_t in[] = {2, 1, 3};
  int64_t out[16];
  int64_t rank = 0;
  kite::ops::RuleError err;
  const int64_t target[] = {0, -1};
  ASSERT_TRUE(kite::ops::resolve_reshape(in, 3, target, 2, false, out, &err)) << err.message;
  EXPECT_EQ(Indices(out, out + 2), (Indices{2, 3}));
  const int64_t two_infer[] = {-1, -1};
  EXPECT_FALSE(kite::ops::resolve_reshape(in, 3, two_infer, 2, false, out, &err));
  const int64_t overflow[] = {kMax, 2, 0};
  EXPECT_FALSE(kite::ops::resolve_reshape(in, 3, overflow, 3, true, out, &err));
  EXPECT_NE(std::string(err.message).find("overflows"), std::string::npos) << err.message;

  const int64_t squeeze_axes[] = {-2};
  ASSERT_TRUE(kite::ops::resolve_squeeze(in, 3, squeeze_axes, 1, true, out, &rank, &err)) << err.message;
  EXPECT_EQ(Indices(out, out + rank), (Indices{2, 3}));
  const int64_t not_one[] = {0};
  EXPECT_FALSE(kite::ops::resolve_squeeze(in, 3, not_one, 1, true, out, &rank, &err));
  const int64_t unsqueeze_axes[] = {0, -1};
  ASSERT_TRUE(kite::ops::resolve_unsqueeze(in, 3, unsqueeze_axes, 2, out, &rank, &err)) << err.message;
  EXPECT_EQ(Indices(out, out + rank), (Indices{1, 2, 1, 3, 1}));

  const int64_t repeats[] = {2, kMax, 1};
  EXPECT_TRUE(kite::ops::resolve_tile(in, 3, repeats, out, &err)) << err.message;  // 1 * kMax fits
  const int64_t repeats_overflow[] = {kMax, 1, 1};
  EXPECT_FALSE(kite::ops::resolve_tile(in, 3, repeats_overflow, out, &err));
  const int64_t negative[] = {1, -1, 1};
  EXPECT_FALSE(kite::ops::resolve_tile(in, 3, negative, out, &err));

  const int64_t shape[] = {4, 2, 5, 3};
  ASSERT_TRUE(kite::ops::resolve_expand(in, 3, shape, 4, out, &rank, &err)) << err.message;
  EXPECT_EQ(Indices(out, out + rank), (Indices{4, 2, 5, 3}));
  const int64_t bad_shape[] = {3, 3, 3};
  EXPECT_FALSE(kite::ops::resolve_expand(in, 3, bad_shape, 3, out, &rank, &err));

  const int64_t sizes[] = {kMax, kMax};
  EXPECT_FALSE(kite::ops::resolve_split(6, 2, sizes, false, out, &err));
  EXPECT_NE(std::string(err.message).find("overflows"), std::string::npos) << err.message;
  ASSERT_TRUE(kite::ops::resolve_split(7, 3, nullptr, true, out, &err)) << err.message;
  EXPECT_EQ(Indices(out, out + 3), (Indices{3, 3, 1}));
  EXPECT_FALSE(kite::ops::resolve_split(7, 3, nullptr, false, out, &err));

  const int64_t perm[] = {2, 0, 1}, not_perm[] = {2, 2, 1};
  ASSERT_TRUE(kite::ops::resolve_perm(3, perm, 3, out, &err));
  EXPECT_EQ(Indices(out, out + 3), (Indices{2, 0, 1}));
  EXPECT_FALSE(kite::ops::resolve_perm(3, not_perm, 3, out, &err));
  ASSERT_TRUE(kite::ops::resolve_perm(3, nullptr, 0, out, &err));
  EXPECT_EQ(Indices(out, out + 3), (Indices{2, 1, 0}));
}

TEST(ResolveRange, ExactForInt64AndFloat32AsOnnxRuntime) {
  int64_t n = -1;
  kite::ops::RuleError err;
  ASSERT_TRUE(kite::ops::range_length(int64_t{kMin}, int64_t{kMax}, int64_t{kMax}, &n, &err));
  EXPECT_EQ(n, 3);  // kMin, -1, kMax - 1
  EXPECT_FALSE(kite::ops::range_length(int64_t{kMin}, int64_t{kMax}, int64_t{1}, &n, &err));
  ASSERT_TRUE(kite::ops::range_length(int64_t{kMax}, int64_t{kMin}, int64_t{kMin}, &n, &err));
  EXPECT_EQ(n, 2);  // kMax, -1
  // 2^53 + 1 elements: a double computation would round the distance.
  ASSERT_TRUE(kite::ops::range_length(int64_t{0}, (int64_t{1} << 53) + 1, int64_t{1}, &n, &err));
  EXPECT_EQ(n, (int64_t{1} << 53) + 1);
  EXPECT_FALSE(kite::ops::range_length(int64_t{0}, int64_t{5}, int64_t{0}, &n, &err));
  ASSERT_TRUE(kite::ops::range_length(0.0f, 1.0f, 0.3f, &n, &err));
  EXPECT_EQ(n, 4);
  EXPECT_FALSE(kite::ops::range_length(0.0f, std::numeric_limits<float>::infinity(), 1.0f, &n, &err));
}

TEST(ResolveReduce, AxesAndNoop) {
  bool reduced[4];
  bool identity = false;
  kite::ops::RuleError err;
  const int64_t axes[] = {-1, 0};
  ASSERT_TRUE(kite::ops::resolve_reduce_axes("ReduceSum", axes, 2, 3, false, reduced, &identity, &err));
  EXPECT_FALSE(identity);
  EXPECT_TRUE(reduced[0] && !reduced[1] && reduced[2]);
  ASSERT_TRUE(kite::ops::resolve_reduce_axes("ReduceSum", nullptr, 0, 3, false, reduced, &identity, &err));
  EXPECT_TRUE(reduced[0] && reduced[1] && reduced[2]);
  ASSERT_TRUE(kite::ops::resolve_reduce_axes("ReduceSum", nullptr, 0, 3, true, reduced, &identity, &err));
  EXPECT_TRUE(identity);
  EXPECT_FALSE(reduced[0] || reduced[1] || reduced[2]);
  const int64_t twice[] = {1, -2};
  EXPECT_FALSE(kite::ops::resolve_reduce_axes("ReduceSum", twice, 2, 3, false, reduced, &identity, &err));
  EXPECT_NE(std::string(err.message).find("ReduceSum axes [1, -2] names axis 1 twice"),
            std::string::npos)
      << err.message;
}

TEST(ResolveScalar, EncodeIsDefinedForEveryValue) {
  unsigned char bytes[8];
  int64_t i64 = 0;
  ASSERT_TRUE(kite::ops::encode_scalar(KITE_DTYPE_INT64, 1e30f, 0, false, bytes));
  std::memcpy(&i64, bytes, 8);
  EXPECT_EQ(i64, kMax);
  ASSERT_TRUE(kite::ops::encode_scalar(KITE_DTYPE_INT64, -std::numeric_limits<float>::infinity(), 0, false, bytes));
  std::memcpy(&i64, bytes, 8);
  EXPECT_EQ(i64, kMin);
  ASSERT_TRUE(kite::ops::encode_scalar(KITE_DTYPE_INT64, std::numeric_limits<float>::quiet_NaN(), 0, false, bytes));
  std::memcpy(&i64, bytes, 8);
  EXPECT_EQ(i64, 0);
  uint16_t h = 0;
  ASSERT_TRUE(kite::ops::encode_scalar(KITE_DTYPE_FLOAT16, 0.0f, 65520, true, bytes));
  std::memcpy(&h, bytes, 2);
  EXPECT_EQ(h, 0x7c00u);
  EXPECT_FALSE(kite::ops::encode_scalar(KITE_DTYPE_UNDEFINED, 0.0f, 0, false, bytes));
}

// Resize's sampling (kite::ops::resize_tap), which the CPU, Vulkan and CUDA
// backends all build their tap tables from. Expected taps are worked out by
// hand from the ONNX Resize definition; weights are compared with a
// tolerance of 1e-6 (a few float ulps of values <= 1).
kite::ops::ResizeSampling sampling(const char* mode, const char* coordinate, const char* nearest = "round_prefer_floor",
                                   bool exclude_outside = false) {
  kite::ops::ResizeSampling s;
  kite::ops::RuleError err;
  EXPECT_TRUE(kite::ops::parse_resize_sampling(mode, coordinate, nearest, -0.75f, exclude_outside, &s, &err))
      << err.message;
  return s;
}

TEST(ResolveResize, SamplingNamesAreCheckedInAttributeOrder) {
  kite::ops::ResizeSampling s;
  kite::ops::RuleError err;
  EXPECT_FALSE(kite::ops::parse_resize_sampling("area", "bogus", "bogus", -0.75f, false, &s, &err));
  EXPECT_STREQ(err.message, "mode 'area' is not supported");
  EXPECT_FALSE(kite::ops::parse_resize_sampling("linear", "tf_crop_and_resize", "floor", -0.75f, false, &s, &err));
  EXPECT_STREQ(err.message, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  EXPECT_FALSE(kite::ops::parse_resize_sampling("nearest", "asymmetric", "up", -0.75f, false, &s, &err));
  EXPECT_STREQ(err.message, "nearest_mode 'up' is not supported");
}

TEST(ResolveResize, TapsFollowTheOnnxFormulas) {
  int64_t idx[4];
  float w[4];
  // An axis that keeps its size at scale 1 maps each index to itself,
  // whatever the mode.
  const kite::ops::ResizeSampling cubic = sampling("cubic", "half_pixel");
  EXPECT_EQ(kite::ops::resize_taps(cubic, 5, 5, 1.0f), 1);
  kite::ops::resize_tap(cubic, 5, 5, 1.0f, 3, idx, w);
  EXPECT_EQ(idx[0], 3);
  EXPECT_EQ(w[0], 1.0f);
  // Nearest, asymmetric, 4 -> 2: x = o / 0.5.
  const kite::ops::ResizeSampling nearest = sampling("nearest", "asymmetric");
  EXPECT_EQ(kite::ops::resize_taps(nearest, 4, 2, 0.5f), 1);
  kite::ops::resize_tap(nearest, 4, 2, 0.5f, 1, idx, w);
  EXPECT_EQ(idx[0], 2);
  // Ties: x = 0.5 at o = 1 of 2 -> 4 asymmetric (x = o / 2).
  kite::ops::resize_tap(sampling("nearest", "asymmetric", "round_prefer_ceil"), 2, 4, 2.0f, 1, idx, w);
  EXPECT_EQ(idx[0], 1);
  kite::ops::resize_tap(sampling("nearest", "asymmetric", "round_prefer_floor"), 2, 4, 2.0f, 1, idx, w);
  EXPECT_EQ(idx[0], 0);
  // Linear, half_pixel, 2 -> 4: x = (o + 0.5) / 2 - 0.5, clamped to [0, 1].
  const kite::ops::ResizeSampling linear = sampling("linear", "half_pixel");
  EXPECT_EQ(kite::ops::resize_taps(linear, 2, 4, 2.0f), 2);
  const int64_t want_idx[4][2] = {{0, 1}, {0, 1}, {0, 1}, {1, 1}};
  const float want_w[4][2] = {{1.0f, 0.0f}, {0.75f, 0.25f}, {0.25f, 0.75f}, {1.0f, 0.0f}};
  for (int64_t o = 0; o < 4; ++o) {
    kite::ops::resize_tap(linear, 2, 4, 2.0f, o, idx, w);
    for (int t = 0; t < 2; ++t) {
      EXPECT_EQ(idx[t], want_idx[o][t]) << "o=" << o << " t=" << t;
      EXPECT_NEAR(w[t], want_w[o][t], 1e-6f) << "o=" << o << " t=" << t;
    }
  }
  // align_corners, 3 -> 5: x = o * 2 / 4.
  kite::ops::resize_tap(sampling("linear", "align_corners"), 3, 5, 5.0f / 3.0f, 1, idx, w);
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(idx[1], 1);
  EXPECT_NEAR(w[1], 0.5f, 1e-6f);
  // Cubic (Keys, a = -0.75): four taps whose weights sum to 1; with
  // exclude_outside the taps outside the input are dropped and the rest
  // renormalised. 4 -> 8 half_pixel, o = 0: x = -0.25, taps at -2..1.
  EXPECT_EQ(kite::ops::resize_taps(cubic, 4, 8, 2.0f), 4);
  for (bool exclude : {false, true}) {
    kite::ops::resize_tap(sampling("cubic", "half_pixel", "round_prefer_floor", exclude), 4, 8, 2.0f, 0, idx, w);
    EXPECT_NEAR(w[0] + w[1] + w[2] + w[3], 1.0f, 1e-6f);
    EXPECT_EQ(idx[0], 0);  // clamped from -2
    EXPECT_EQ(idx[3], 1);
    if (exclude) {
      EXPECT_EQ(w[0], 0.0f);
      EXPECT_EQ(w[1], 0.0f);
    }
  }
}

kite::ops::OpNode fused_node(const std::string& activation, std::vector<kite::ops::Attr> extra = {}) {
  kite::ops::OpNode n;
  n.op = "FusedConv";
  n.name = "c";
  n.attrs.push_back(kite::ops::string_attr("activation", activation));
  n.attrs.push_back(kite::ops::ints_attr("strides", {1, 1}));
  for (kite::ops::Attr& a : extra) n.attrs.push_back(a);
  return n;
}

TEST(FusedRules, ActivationDefaultsAndRefusals) {
  kite::ops::FusedActivation a;
  EXPECT_EQ(kite::ops::parse_fused_activation(fused_node("HardSigmoid"), "Conv+HardSigmoid", false, &a), "");
  EXPECT_EQ(a.kind, kite::ops::FusedActivation::kHardSigmoid);
  EXPECT_FLOAT_EQ(a.alpha, 0.2f);
  EXPECT_FLOAT_EQ(a.beta, 0.5f);
  EXPECT_EQ(kite::ops::parse_fused_activation(fused_node("Clip", {kite::ops::float_attr("activation_beta", 6.0f)}),
                                              "Conv+Clip", false, &a),
            "");
  EXPECT_EQ(a.alpha, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(a.beta, 6.0f);
  EXPECT_EQ(kite::ops::parse_fused_activation(fused_node("Relu"), "Conv+Clip", false, &a),
            "pattern 'Conv+Clip' does not end with activation Relu");
  EXPECT_EQ(kite::ops::parse_fused_activation(fused_node("Swish"), "Conv+Swish", false, &a),
            "activation 'Swish' is not supported");
  kite::ops::OpNode plain;
  EXPECT_EQ(kite::ops::parse_fused_activation(plain, "MatMul+Add", true, &a), "");
  EXPECT_EQ(a.kind, kite::ops::FusedActivation::kNone);
  EXPECT_EQ(kite::ops::parse_fused_activation(plain, "Conv+Relu", false, &a), "attribute 'activation' is missing");
}

TEST(FusedRules, PrimitiveDropsTheActivationAttributes) {
  kite::ops::OpNode fused = fused_node("LeakyRelu", {kite::ops::float_attr("activation_alpha", 0.1f)});
  fused.inputs.resize(3);
  const kite::ops::OpNode p = kite::ops::fused_primitive(fused, "Conv", 2);
  EXPECT_EQ(p.op, "Conv");
  EXPECT_EQ(p.inputs.size(), 2u);
  ASSERT_EQ(p.attrs.size(), 1u);
  EXPECT_EQ(p.attrs[0].name, "strides");
  EXPECT_EQ(p.num_outputs, 1);
}

}  // namespace
