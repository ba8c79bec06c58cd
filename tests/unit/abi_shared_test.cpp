// The rules and helpers the backends share through backends/abi and ops/
// (kite/abi/device_rules.h, kite/abi/plugin.h, kite/ops/attention.h): axis
// merging, the device backends' Resize rule, buffer range checks, 0/1
// options and the fused Attention's shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <cstring>
#include <string>
#include <vector>

#include "kite/abi/device_node.h"
#include "kite/abi/device_rules.h"
#include "kite/abi/plan_helpers.h"
#include "kite/abi/plugin.h"
#include "kite/ops/attention.h"
#include "kite/ops/attr.h"
#include "kite_test_ops.h"

namespace {

using Shape = std::vector<int64_t>;
using kite::ops::Attr;
using kite::ops::float_attr;
using kite::ops::OpNode;
using kite::ops::string_attr;
using kite::ops::TensorType;
using kite::test::absent;
using kite::test::tensor;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ------------------------------------------------------------ merge_axes --

TEST(AbiMergeAxes, MergesContiguousAxesOfBothWalks) {
  // A contiguous [2, 3, 4] read by both walks is one axis of 24.
  const kite::abi::MergedAxes m = kite::abi::merge_axes({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  EXPECT_EQ(m.dims, Shape({24}));
  EXPECT_EQ(m.a, Shape({1}));
  EXPECT_EQ(m.b, Shape({1}));
}

TEST(AbiMergeAxes, DropsUnitAxesAndKeepsBroadcastBoundaries) {
  // b broadcasts over axis 1 (stride 0): axes 0 and 1 cannot merge for b,
  // but 1 and 2 cannot either; the unit axis 3 goes.
  const Shape out = {2, 3, 4, 1};
  const Shape a = kite::abi::broadcast_strides({2, 3, 4, 1}, out);
  const Shape b = kite::abi::broadcast_strides({2, 1, 4, 1}, out);
  const kite::abi::MergedAxes m = kite::abi::merge_axes(out, a, b);
  EXPECT_EQ(m.dims, Shape({2, 3, 4}));
  EXPECT_EQ(m.a, Shape({12, 4, 1}));
  EXPECT_EQ(m.b, Shape({4, 0, 1}));
}

TEST(AbiMergeAxes, MergesAxesBroadcastOnBothSides) {
  // Two leading axes broadcast (stride 0) in b merge with each other.
  const kite::abi::MergedAxes m = kite::abi::merge_axes({2, 3, 5}, {15, 5, 1}, {0, 0, 1});
  EXPECT_EQ(m.dims, Shape({6, 5}));
  EXPECT_EQ(m.a, Shape({5, 1}));
  EXPECT_EQ(m.b, Shape({0, 1}));
}

TEST(AbiMergeAxes, EmptyAndAllUnitSpaces) {
  EXPECT_TRUE(kite::abi::merge_axes({}, {}, {}).dims.empty());
  const kite::abi::MergedAxes m = kite::abi::merge_axes({1, 1}, {1, 1}, {1, 1});
  EXPECT_TRUE(m.dims.empty());
  EXPECT_TRUE(m.a.empty());
  EXPECT_TRUE(m.b.empty());
}

TEST(AbiMergeAxes, TransposedWalkDoesNotMerge) {
  // b walks a transposed [3, 2]: no two axes continue each other.
  const kite::abi::MergedAxes m = kite::abi::merge_axes({3, 2}, {2, 1}, {1, 3});
  EXPECT_EQ(m.dims, Shape({3, 2}));
  EXPECT_EQ(m.b, Shape({1, 3}));
}

// ------------------------------------------------------- inner_resize_of --

// A Resize node over x of `in` to `out`; with scales when given (a
// constant input 2), else with sizes (the declared output gives them).
kite::abi::NodeView ResizeNode(const Shape& in, const Shape& out, const std::vector<float>* scales,
                               std::vector<Attr> attrs = {}) {
  kite::abi::NodeView v;
  v.op.name = "up";
  v.op.op = "Resize";
  v.op.inputs.push_back(tensor("x", in));
  v.op.inputs.push_back(absent());
  if (scales) {
    v.op.inputs.push_back(tensor("scales", {static_cast<int64_t>(scales->size())}, KITE_DTYPE_FLOAT32, scales->data()));
  } else {
    v.op.inputs.push_back(absent());
    v.op.inputs.push_back(tensor("sizes", {static_cast<int64_t>(out.size())}, KITE_DTYPE_INT64));
  }
  v.op.attrs = std::move(attrs);
  v.outputs.push_back(tensor("y", out));
  return v;
}

TEST(AbiInnerResize, ResizesTheTwoInnermostAxes) {
  const std::vector<float> scales = {1.0f, 1.0f, 2.0f, 3.0f};
  const kite::abi::NodeView v = ResizeNode({1, 3, 4, 5}, {1, 3, 8, 15}, &scales, {string_attr("mode", "linear")});
  kite::abi::InnerResize r;
  ASSERT_EQ(kite::abi::inner_resize_of(v, "Vulkan", &r), "");
  EXPECT_EQ(r.sampling.mode, kite::ops::ResizeMode::kLinear);
  EXPECT_EQ(r.in_h, 4);
  EXPECT_EQ(r.in_w, 5);
  EXPECT_EQ(r.out_h, 8);
  EXPECT_EQ(r.out_w, 15);
  EXPECT_FLOAT_EQ(r.scale_h, 2.0f);
  EXPECT_FLOAT_EQ(r.scale_w, 3.0f);
}

TEST(AbiInnerResize, Float16OnlyWhenTheBackendSaysSo) {
  const std::vector<float> scales = {1.0f, 1.0f, 2.0f, 2.0f};
  kite::abi::NodeView v = ResizeNode({1, 3, 4, 5}, {1, 3, 8, 10}, &scales);
  v.op.inputs[0].dtype = KITE_DTYPE_FLOAT16;  // roi and scales stay float32
  kite::abi::InnerResize r;
  EXPECT_TRUE(Contains(kite::abi::inner_resize_of(v, "Vulkan", &r), "float16")) << "float32 kernels only";
  ASSERT_EQ(kite::abi::inner_resize_of(v, "CUDA", &r, true), "");
  EXPECT_EQ(r.out_w, 10);
}

TEST(AbiInnerResize, SizesGiveTheScalesOfTheDeclaredOutput) {
  const kite::abi::NodeView v = ResizeNode({2, 4, 6}, {2, 2, 9}, nullptr);
  kite::abi::InnerResize r;
  ASSERT_EQ(kite::abi::inner_resize_of(v, "CUDA", &r), "");
  EXPECT_FLOAT_EQ(r.scale_h, 0.5f);
  EXPECT_FLOAT_EQ(r.scale_w, 1.5f);
}

// The rule the CUDA backend (rank >= 2) and the Vulkan backend (rank >= 1)
// disagreed on: ONNX Resize takes any rank >= 1, and a rank-1 input
// resizes its one axis with a unit h axis at scale 1.
TEST(AbiInnerResize, RankOneResizesItsOnlyAxis) {
  const std::vector<float> scales = {2.0f};
  const kite::abi::NodeView v = ResizeNode({5}, {10}, &scales);
  kite::abi::InnerResize r;
  r.in_h = 7;  // stale values are overwritten
  ASSERT_EQ(kite::abi::inner_resize_of(v, "CUDA", &r), "");
  EXPECT_EQ(r.in_h, 1);
  EXPECT_EQ(r.out_h, 1);
  EXPECT_FLOAT_EQ(r.scale_h, 1.0f);
  EXPECT_EQ(r.in_w, 5);
  EXPECT_EQ(r.out_w, 10);
  EXPECT_FLOAT_EQ(r.scale_w, 2.0f);
}

TEST(AbiInnerResize, RankZeroIsRefusedNamingTheInput) {
  const kite::abi::NodeView v = ResizeNode({}, {}, nullptr);
  kite::abi::InnerResize r;
  const std::string why = kite::abi::inner_resize_of(v, "CUDA", &r);
  EXPECT_TRUE(Contains(why, "input 0 'x' has 0 dims")) << why;
  EXPECT_TRUE(Contains(why, "rank >= 1")) << why;
}

TEST(AbiInnerResize, LeadingAxisResizeIsRefusedNamingTheBackend) {
  const std::vector<float> scales = {2.0f, 1.0f, 1.0f};
  const kite::abi::NodeView v = ResizeNode({2, 3, 4}, {4, 3, 4}, &scales);
  kite::abi::InnerResize r;
  const std::string why = kite::abi::inner_resize_of(v, "Vulkan", &r);
  EXPECT_TRUE(Contains(why, "resizing axis 0")) << why;
  EXPECT_TRUE(Contains(why, "Vulkan")) << why;
}

TEST(AbiInnerResize, BadScalesAndAttributesAreRefused) {
  kite::abi::InnerResize r;
  const std::vector<float> three = {1.0f, 2.0f, 2.0f};
  const std::string count = kite::abi::inner_resize_of(ResizeNode({1, 4, 4, 4}, {1, 4, 8, 8}, &three), "CUDA", &r);
  EXPECT_TRUE(Contains(count, "input 2 'scales'")) << count;
  EXPECT_TRUE(Contains(count, "3 values for 4 axes")) << count;

  const std::vector<float> negative = {1.0f, -2.0f};
  const std::string neg = kite::abi::inner_resize_of(ResizeNode({4, 4}, {4, 8}, &negative), "CUDA", &r);
  EXPECT_TRUE(Contains(neg, "scale")) << neg;

  const std::vector<float> two = {2.0f, 2.0f};
  const std::string policy = kite::abi::inner_resize_of(
      ResizeNode({4, 4}, {8, 8}, &two, {string_attr("keep_aspect_ratio_policy", "not_larger")}), "CUDA", &r);
  EXPECT_EQ(policy, "keep_aspect_ratio_policy 'not_larger' is not supported on CUDA");

  const std::string mismatch = kite::abi::inner_resize_of(ResizeNode({4, 4}, {8, 9}, &two), "CUDA", &r);
  EXPECT_TRUE(Contains(mismatch, "output 'y'")) << mismatch;

  kite::abi::NodeView not_float = ResizeNode({4, 4}, {8, 8}, &two);
  not_float.op.inputs[0].dtype = KITE_DTYPE_INT64;
  const std::string dtype = kite::abi::inner_resize_of(not_float, "Vulkan", &r);
  EXPECT_TRUE(Contains(dtype, "input 0 'x' has dtype")) << dtype;

  kite::abi::NodeView not_constant = ResizeNode({4, 4}, {8, 8}, &two);
  not_constant.op.inputs[2].data = nullptr;
  const std::string constant = kite::abi::inner_resize_of(not_constant, "Vulkan", &r);
  EXPECT_TRUE(Contains(constant, "must be a constant on Vulkan")) << constant;
}

// ---------------------------------------------------------- range checks --

TEST(AbiRanges, RangeFitsWithoutOverflow) {
  EXPECT_TRUE(kite::abi::range_fits(0, 16, 16));
  EXPECT_TRUE(kite::abi::range_fits(16, 0, 16));
  EXPECT_FALSE(kite::abi::range_fits(17, 0, 16));
  EXPECT_FALSE(kite::abi::range_fits(8, 9, 16));
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_FALSE(kite::abi::range_fits(8, max, 16));  // offset + size wraps
  EXPECT_FALSE(kite::abi::range_fits(max, 2, 16));
}

TEST(AbiRanges, TensorRangeNamesTheTensorAndTheValues) {
  kite_backend_tensor2 t{};
  t.name = "logits";
  t.offset = 8;
  t.byte_size = 16;
  EXPECT_EQ(kite::abi::check_tensor_range("download", t, true, 24), "");
  EXPECT_EQ(kite::abi::check_tensor_range("download", t, true, 20),
            "download of 'logits': range [8, +16) is outside its buffer of 20 bytes");
  EXPECT_EQ(kite::abi::check_tensor_range("upload", t, false, 0), "upload of 'logits': it has no buffer");
}

TEST(AbiRanges, CopyRangesSaySourceOrTarget) {
  EXPECT_EQ(kite::abi::check_copy_ranges(0, 16, 4, 20, 16), "");
  EXPECT_EQ(kite::abi::check_copy_ranges(4, 16, 0, 20, 16),
            "copy_buffer's source: range [4, +16) is outside its buffer of 16 bytes");
  EXPECT_EQ(kite::abi::check_copy_ranges(0, 16, 8, 20, 16),
            "copy_buffer's target: range [8, +16) is outside its buffer of 20 bytes");
}

// --------------------------------------------------------------- options --

TEST(AbiOptions, FlagTakesZeroOrOne) {
  bool on = false;
  EXPECT_EQ(kite::abi::parse_flag_option("CUDA", "lean", "1", &on), "");
  EXPECT_TRUE(on);
  EXPECT_EQ(kite::abi::parse_flag_option("CUDA", "lean", "0", &on), "");
  EXPECT_FALSE(on);
  on = true;
  EXPECT_EQ(kite::abi::parse_flag_option("devsim", "unified", "yes", &on),
            "devsim backend option unified=yes: expected 0 or 1");
  EXPECT_TRUE(on);  // untouched on failure
  EXPECT_EQ(kite::abi::parse_flag_option("CUDA", "graphs", "", &on), "CUDA backend option graphs=: expected 0 or 1");
}

// ------------------------------------------------------- fused Attention --

OpNode AttentionNode(const Shape& q, const Shape& kt, const Shape& v) {
  OpNode op;
  op.name = "attn";
  op.op = "Attention";
  op.domain = "kite";
  op.inputs = {tensor("q", q), tensor("kt", kt), tensor("v", v)};
  op.attrs.push_back(float_attr("scale", 0.125f));
  return op;
}

TEST(OpsAttentionShapes, ScoresAndOutput) {
  const std::vector<TensorType> outputs = {tensor("o", {2, 4, 5, 16})};
  Shape scores, out;
  ASSERT_EQ(kite::ops::attention_shapes(AttentionNode({2, 4, 5, 8}, {2, 4, 8, 7}, {2, 4, 7, 16}), "Attention", outputs,
                                        &scores, &out),
            "");
  EXPECT_EQ(scores, Shape({2, 4, 5, 7}));
  EXPECT_EQ(out, Shape({2, 4, 5, 16}));
}

TEST(OpsAttentionShapes, RankTwoHasNoLeadingDims) {
  const std::vector<TensorType> outputs = {tensor("o", {3, 2})};
  Shape scores, out;
  ASSERT_EQ(kite::ops::attention_shapes(AttentionNode({3, 4}, {4, 6}, {6, 2}), "Attention", outputs, &scores, &out), "");
  EXPECT_EQ(scores, Shape({3, 6}));
  EXPECT_EQ(out, Shape({3, 2}));
}

TEST(OpsAttentionShapes, MismatchesNameTheTensorsAndShapes) {
  const std::vector<TensorType> outputs = {tensor("o", {1, 5, 16})};
  Shape scores, out;
  const std::string rows =
      kite::ops::attention_shapes(AttentionNode({1, 5, 8}, {1, 9, 7}, {1, 7, 16}), "Attention", outputs, &scores, &out);
  EXPECT_TRUE(Contains(rows, "kt's rows must match q's columns")) << rows;
  EXPECT_TRUE(Contains(rows, "q 'q' 1x5x8")) << rows;
  EXPECT_TRUE(Contains(rows, "kt 'kt' 1x9x7")) << rows;

  const std::string vrows =
      kite::ops::attention_shapes(AttentionNode({1, 5, 8}, {1, 8, 7}, {1, 6, 16}), "Attention", outputs, &scores, &out);
  EXPECT_TRUE(Contains(vrows, "v's rows must match kt's columns")) << vrows;

  const std::string lead =
      kite::ops::attention_shapes(AttentionNode({2, 5, 8}, {1, 8, 7}, {2, 7, 16}), "Attention", outputs, &scores, &out);
  EXPECT_TRUE(Contains(lead, "same leading dims")) << lead;

  const std::string rank =
      kite::ops::attention_shapes(AttentionNode({8}, {8}, {8}), "Attention", outputs, &scores, &out);
  EXPECT_TRUE(Contains(rank, "same rank (at least 2)")) << rank;
}

TEST(OpsAttentionShapes, PatternInputsOutputsAndScale) {
  const std::vector<TensorType> outputs = {tensor("o", {5, 16})};
  Shape scores, out;
  OpNode op = AttentionNode({5, 8}, {8, 7}, {7, 16});
  EXPECT_EQ(kite::ops::attention_shapes(op, "MatMul+Softmax", outputs, &scores, &out),
            "pattern 'MatMul+Softmax' is not Attention");
  EXPECT_EQ(kite::ops::attention_shapes(op, "Attention", {}, &scores, &out), "expects one output");
  OpNode two = op;
  two.inputs.pop_back();
  EXPECT_EQ(kite::ops::attention_shapes(two, "Attention", outputs, &scores, &out), "expects inputs q, kt, v [, mask]");
  OpNode inf = op;
  inf.attrs[0].f = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kite::ops::attention_shapes(inf, "Attention", outputs, &scores, &out),
            "attribute 'scale' must be a finite float");
  // The NaN guard is a flag: 0 and 1 only, for the CPU and the devices alike.
  OpNode guard = op;
  guard.attrs.push_back(kite::ops::int_attr("nan_to_zero", 1));
  EXPECT_EQ(kite::ops::attention_shapes(guard, "Attention", outputs, &scores, &out), "");
  guard.attrs.back().i = 2;
  EXPECT_EQ(kite::ops::attention_shapes(guard, "Attention", outputs, &scores, &out),
            "attribute 'nan_to_zero' must be 0 or 1");
  guard.attrs.back() = kite::ops::float_attr("nan_to_zero", 1.0f);
  EXPECT_EQ(kite::ops::attention_shapes(guard, "Attention", outputs, &scores, &out),
            "attribute 'nan_to_zero' must be 0 or 1");
  OpNode none = op;
  none.attrs.clear();
  EXPECT_EQ(kite::ops::attention_shapes(none, "Attention", outputs, &scores, &out),
            "attribute 'scale' must be a finite float");
}

}  // namespace

namespace {

kite::abi::NodeView DeviceAttention(kite_dtype v_dtype, int64_t nan_to_zero) {
  kite::abi::NodeView n;
  n.op = AttentionNode({1, 5, 8}, {1, 8, 7}, {1, 7, 16});
  n.op.inputs[2].dtype = v_dtype;
  n.op.attrs.push_back(kite::ops::int_attr("nan_to_zero", nan_to_zero));
  n.pattern = "Attention";
  n.outputs = {tensor("o", {1, 5, 16})};
  return n;
}

TEST(AbiDeviceAttention, FloatWithOrWithoutTheNanGuard) {
  Shape scores, out;
  EXPECT_EQ(kite::abi::device_attention_of(DeviceAttention(KITE_DTYPE_FLOAT32, 0), "CUDA", &scores, &out), "");
  EXPECT_EQ(scores, Shape({1, 5, 7}));
  EXPECT_EQ(out, Shape({1, 5, 16}));
  // The device kernels run Hugging Face's NaN guard; only 0 and 1 mean one.
  EXPECT_EQ(kite::abi::device_attention_of(DeviceAttention(KITE_DTYPE_FLOAT32, 1), "Vulkan", &scores, &out), "");
  EXPECT_EQ(kite::abi::device_attention_of(DeviceAttention(KITE_DTYPE_FLOAT32, 2), "Vulkan", &scores, &out),
            "attribute 'nan_to_zero' must be 0 or 1");
  const std::string dtype =
      kite::abi::device_attention_of(DeviceAttention(KITE_DTYPE_FLOAT16, 0), "CUDA", &scores, &out);
  EXPECT_TRUE(Contains(dtype, "input 2 'v' has dtype")) << dtype;
  kite::abi::NodeView wrong_out = DeviceAttention(KITE_DTYPE_FLOAT32, 0);
  wrong_out.outputs[0].shape = {1, 5, 8};
  const std::string output = kite::abi::device_attention_of(wrong_out, "CUDA", &scores, &out);
  EXPECT_TRUE(Contains(output, "output 'o'")) << output;
}

}  // namespace

namespace {

Attr IntsAttr(const std::string& name, std::vector<int64_t> ints) {
  return Attr{name, KITE_ATTR_INTS, 0, 0.0f, {}, std::move(ints), {}, {}};
}

// ---------------------------------------------------------------- perm_of --

TEST(AbiPermOf, ReversedWhenAbsentElseAPermutation) {
  kite::abi::NodeView v;
  v.op.name = "t";
  v.op.op = "Transpose";
  v.op.inputs.push_back(tensor("x", {2, 3, 4}));
  Shape perm;
  ASSERT_EQ(kite::abi::perm_of(v, &perm), "");
  EXPECT_EQ(perm, Shape({2, 1, 0}));
  v.op.attrs = {IntsAttr("perm", {1, 2, 0})};
  ASSERT_EQ(kite::abi::perm_of(v, &perm), "");
  EXPECT_EQ(perm, Shape({1, 2, 0}));
  v.op.attrs[0].ints = {1, 1, 0};
  const std::string twice = kite::abi::perm_of(v, &perm);
  EXPECT_TRUE(Contains(twice, "is not a permutation of 0..2")) << twice;
  v.op.attrs[0].ints = {1, 0};
  const std::string short_perm = kite::abi::perm_of(v, &perm);
  EXPECT_TRUE(Contains(short_perm, "has 2 values, the input has 3 dims")) << short_perm;
}

// -------------------------------------------------------------- slice_of --

// A Slice (opset 10+) over x of `in`: starts, ends and, when not empty,
// axes and steps as int64 constants (the vectors must outlive the node).
kite::abi::NodeView SliceNode(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                              const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  kite::abi::NodeView v;
  v.op.name = "cut";
  v.op.op = "Slice";
  v.op.inputs.push_back(tensor("x", in));
  auto ints = [](const char* name, const std::vector<int64_t>& values) {
    return tensor(name, {static_cast<int64_t>(values.size())}, KITE_DTYPE_INT64, values.data());
  };
  v.op.inputs.push_back(ints("starts", starts));
  v.op.inputs.push_back(ints("ends", ends));
  v.op.inputs.push_back(axes.empty() ? absent() : ints("axes", axes));
  v.op.inputs.push_back(steps.empty() ? absent() : ints("steps", steps));
  return v;
}

void ExpectAxis(const kite::ops::SliceAxis& a, int64_t start, int64_t step, int64_t count) {
  EXPECT_EQ(a.start, start);
  EXPECT_EQ(a.step, step);
  EXPECT_EQ(a.count, count);
}

TEST(AbiSliceOf, InputsCountFromTheEndAndClamp) {
  // [4, 10]: axis 0 [1, 3) -> 1, 2; axis 1 from -3 (7) to 100 (clamped to
  // 10) -> 7, 8, 9.
  const std::vector<int64_t> starts = {1, -3}, ends = {3, 100};
  std::vector<kite::ops::SliceAxis> axes;
  ASSERT_EQ(kite::abi::slice_of(SliceNode({4, 10}, starts, ends, {}, {}), "CUDA", &axes), "");
  ASSERT_EQ(axes.size(), 2u);
  ExpectAxis(axes[0], 1, 1, 2);
  ExpectAxis(axes[1], 7, 1, 3);
}

TEST(AbiSliceOf, NegativeStepWalksBackwards) {
  // [5] from -1 (4) down to -6 (-1 after clamping) by -2 -> 4, 2, 0.
  const std::vector<int64_t> starts = {-1}, ends = {-6}, steps = {-2};
  std::vector<kite::ops::SliceAxis> axes;
  ASSERT_EQ(kite::abi::slice_of(SliceNode({5}, starts, ends, {}, steps), "Vulkan", &axes), "");
  ASSERT_EQ(axes.size(), 1u);
  ExpectAxis(axes[0], 4, -2, 3);
}

TEST(AbiSliceOf, AttributesBeforeOpset10NameSomeAxes) {
  // [3, 4], axes [-1] (1): [2, 3) -> one element (its step is 1); axis 0
  // is taken whole.
  kite::abi::NodeView v;
  v.op.name = "cut";
  v.op.op = "Slice";
  v.op.inputs.push_back(tensor("x", {3, 4}));
  v.op.attrs = {IntsAttr("starts", {2}), IntsAttr("ends", {3}), IntsAttr("axes", {-1})};
  std::vector<kite::ops::SliceAxis> axes;
  ASSERT_EQ(kite::abi::slice_of(v, "CUDA", &axes), "");
  ASSERT_EQ(axes.size(), 2u);
  ExpectAxis(axes[0], 0, 1, 3);
  ExpectAxis(axes[1], 2, 1, 1);
}

TEST(AbiSliceOf, RefusesZeroStepsMismatchesAndComputedInputs) {
  std::vector<kite::ops::SliceAxis> axes;
  const std::vector<int64_t> one = {0}, two = {0, 1}, zero = {0};
  const std::string step = kite::abi::slice_of(SliceNode({4}, one, one, {}, zero), "CUDA", &axes);
  EXPECT_TRUE(Contains(step, "0 step")) << step;
  EXPECT_EQ(kite::abi::slice_of(SliceNode({4, 4}, one, two, {}, {}), "CUDA", &axes),
            "starts, ends, axes and steps differ in length");
  kite::abi::NodeView computed = SliceNode({4}, one, one, {}, {});
  computed.op.inputs[2].data = nullptr;
  const std::string constant = kite::abi::slice_of(computed, "Vulkan", &axes);
  EXPECT_TRUE(Contains(constant, "ends")) << constant;
  EXPECT_TRUE(Contains(constant, "must be a constant on Vulkan")) << constant;
}

// ------------------------------------------------- check_skip_layer_norm --

kite::abi::NodeView SkipLayerNorm(const Shape& a, const Shape& b, bool sum_output) {
  kite::abi::NodeView v;
  v.op.name = "ln";
  v.op.op = "FusedSkipLayerNorm";
  v.pattern = "Add+LayerNormalization";
  v.op.inputs = {tensor("a", a), tensor("b", b), tensor("scale", {a.back()})};
  v.outputs = {tensor("y", a)};
  if (sum_output) v.outputs.push_back(tensor("sum", a));
  return v;
}

TEST(AbiSkipLayerNorm, AcceptsMatchingFloatInputsAndOutputs) {
  EXPECT_EQ(kite::abi::check_skip_layer_norm(SkipLayerNorm({2, 8}, {2, 8}, false), "CUDA"), "");
  EXPECT_EQ(kite::abi::check_skip_layer_norm(SkipLayerNorm({2, 8}, {2, 8}, true), "Vulkan"), "");
  kite::abi::NodeView absent_sum = SkipLayerNorm({2, 8}, {2, 8}, true);
  absent_sum.outputs[1] = absent();
  EXPECT_EQ(kite::abi::check_skip_layer_norm(absent_sum, "CUDA"), "");
}

TEST(AbiSkipLayerNorm, RefusesWhatTheKernelsCannotRun) {
  EXPECT_EQ(kite::abi::check_skip_layer_norm(SkipLayerNorm({2, 8}, {1, 8}, false), "CUDA"),
            "input 1 'b' must have the shape of input 0 'a'");
  kite::abi::NodeView half = SkipLayerNorm({2, 8}, {2, 8}, false);
  half.op.inputs[1].dtype = KITE_DTYPE_FLOAT16;
  const std::string dtype = kite::abi::check_skip_layer_norm(half, "Vulkan");
  EXPECT_TRUE(Contains(dtype, "input 1 'b' has dtype")) << dtype;
  EXPECT_TRUE(Contains(dtype, "Vulkan")) << dtype;
  kite::abi::NodeView no_a = SkipLayerNorm({2, 8}, {2, 8}, false);
  no_a.op.inputs[0] = absent();
  EXPECT_EQ(kite::abi::check_skip_layer_norm(no_a, "CUDA"), "expects inputs a, b, scale [, bias]");
  kite::abi::NodeView wrong_y = SkipLayerNorm({2, 8}, {2, 8}, true);
  wrong_y.outputs[0].shape = {2, 4};
  const std::string output = kite::abi::check_skip_layer_norm(wrong_y, "CUDA");
  EXPECT_TRUE(Contains(output, "output 'y'")) << output;
  kite::abi::NodeView other = SkipLayerNorm({2, 8}, {2, 8}, false);
  other.pattern = "LayerNormalization";
  EXPECT_EQ(kite::abi::check_skip_layer_norm(other, "CUDA"), "pattern 'LayerNormalization' is not Add+LayerNormalization");
}

// --------------------------------------------------- check_instance_norm --

kite::abi::NodeView InstanceNorm(const Shape& x, const Shape& scale, const Shape& b) {
  kite::abi::NodeView v;
  v.op.name = "in";
  v.op.op = "InstanceNormalization";
  v.op.inputs = {tensor("x", x), tensor("scale", scale), tensor("B", b)};
  v.outputs = {tensor("y", x)};
  return v;
}

TEST(AbiInstanceNorm, AcceptsPerChannelScaleAndBias) {
  EXPECT_EQ(kite::abi::check_instance_norm(InstanceNorm({2, 3, 5}, {3}, {3}), "CUDA"), "");
  EXPECT_EQ(kite::abi::check_instance_norm(InstanceNorm({1, 4, 2, 2, 2}, {4}, {4}), "Vulkan"), "");
}

TEST(AbiInstanceNorm, RefusesWhatTheOpRuleRefuses) {
  // Three values but not of shape [C]: CUDA refused it and Vulkan took it
  // before the two shared this check.
  EXPECT_EQ(kite::abi::check_instance_norm(InstanceNorm({2, 3, 5}, {3, 1}, {3}), "Vulkan"),
            "input 1 'scale' must have shape [C] = [3]");
  EXPECT_EQ(kite::abi::check_instance_norm(InstanceNorm({2, 3, 5}, {3}, {4}), "CUDA"),
            "input 2 'B' must have shape [C] = [3]");
  EXPECT_EQ(kite::abi::check_instance_norm(InstanceNorm({2, 3}, {3}, {3}), "CUDA"), "input 0 'x' needs rank >= 3");
  kite::abi::NodeView half = InstanceNorm({2, 3, 5}, {3}, {3});
  half.op.inputs[2].dtype = KITE_DTYPE_FLOAT16;
  const std::string dtype = kite::abi::check_instance_norm(half, "Vulkan");
  EXPECT_TRUE(Contains(dtype, "input 2 'B' has dtype")) << dtype;
  kite::abi::NodeView two = InstanceNorm({2, 3, 5}, {3}, {3});
  two.op.inputs.pop_back();
  EXPECT_EQ(kite::abi::check_instance_norm(two, "CUDA"), "expects inputs x, scale, B and one output");
}

// ------------------------------------------------------------- window_2d --

kite::ops::WindowGeometry Geometry(Shape input, Shape output, Shape kernel, Shape strides, Shape dilations,
                                   Shape pads_begin, Shape pads_end) {
  kite::ops::WindowGeometry g;
  g.input = std::move(input);
  g.output = std::move(output);
  g.kernel = std::move(kernel);
  g.strides = std::move(strides);
  g.dilations = std::move(dilations);
  g.pads_begin = std::move(pads_begin);
  g.pads_end = std::move(pads_end);
  return g;
}

// The fields of a window: h, w, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw,
// ph_end, pw_end.
Shape Fields(const kite::abi::plan::Window2d& w) {
  return {w.h, w.w, w.oh, w.ow, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.ph, w.pw, w.ph_end, w.pw_end};
}

TEST(AbiWindow2d, TwoDimensionalWindowKeepsItsAxes) {
  kite::abi::plan::Window2d w;
  ASSERT_TRUE(kite::abi::plan::window_2d(Geometry({7, 9}, {4, 3}, {3, 2}, {2, 3}, {1, 2}, {1, 0}, {2, 1}), &w));
  EXPECT_EQ(Fields(w), Shape({7, 9, 4, 3, 3, 2, 2, 3, 1, 2, 1, 0, 2, 1}));
}

TEST(AbiWindow2d, OneDimensionalWindowIsOneRowHigh) {
  // Height 1: input, output, kernel, stride and dilation 1, no pads.
  kite::abi::plan::Window2d w;
  ASSERT_TRUE(kite::abi::plan::window_2d(Geometry({10}, {4}, {3}, {2}, {2}, {1}, {0}), &w));
  EXPECT_EQ(Fields(w), Shape({1, 10, 1, 4, 1, 3, 1, 2, 1, 2, 0, 1, 0, 0}));
}

TEST(AbiWindow2d, OtherRanksAreRefused) {
  kite::abi::plan::Window2d w;
  EXPECT_FALSE(kite::abi::plan::window_2d(Geometry({2, 3, 4}, {2, 3, 4}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1},
                                                   {0, 0, 0}, {0, 0, 0}),
                                          &w));
  EXPECT_FALSE(kite::abi::plan::window_2d(kite::ops::WindowGeometry{}, &w));
}

// ------------------------------------------------------- backend_options --

TEST(AbiOptions, ReadsKeysAndValuesInOrder) {
  const char* keys[] = {"lean", nullptr, "conv"};
  const char* values[] = {"1", "x", nullptr};
  kite_backend_create_info info{};
  info.num_options = 3;
  info.option_keys = keys;
  info.option_values = values;
  std::vector<kite::abi::BackendOption> options;
  ASSERT_EQ(kite::abi::backend_options(&info, &options), "");
  ASSERT_EQ(options.size(), 3u);
  EXPECT_EQ(options[0].key, "lean");
  EXPECT_EQ(options[0].value, "1");
  EXPECT_EQ(options[1].key, "");
  EXPECT_EQ(options[1].value, "x");
  EXPECT_EQ(options[2].key, "conv");
  EXPECT_EQ(options[2].value, "");
  EXPECT_EQ(kite::abi::backend_options(nullptr, &options), "");
  EXPECT_TRUE(options.empty());
}

TEST(AbiOptions, MalformedOptionsAreRefused) {
  std::vector<kite::abi::BackendOption> options;
  kite_backend_create_info negative{};
  negative.num_options = -1;
  EXPECT_EQ(kite::abi::backend_options(&negative, &options), "the backend options are malformed");
  kite_backend_create_info no_arrays{};
  no_arrays.num_options = 1;
  EXPECT_EQ(kite::abi::backend_options(&no_arrays, &options), "the backend options are malformed");
}

}  // namespace

namespace {

// ----------------------------------------------------------------- pad_of --

kite::abi::NodeView PadNode(const Shape& x, const std::vector<int64_t>& pads, const Shape& y,
                            const char* mode = "constant") {
  static std::vector<std::vector<int64_t>> keep;  // constant data outlives the view
  keep.push_back(pads);
  kite::abi::NodeView v;
  v.op.name = "pad";
  v.op.op = "Pad";
  v.op.attrs.push_back(kite::ops::string_attr("mode", mode));
  v.op.inputs = {tensor("x", x),
                 tensor("pads", {static_cast<int64_t>(pads.size())}, KITE_DTYPE_INT64, keep.back().data())};
  v.outputs = {tensor("y", y)};
  return v;
}

TEST(AbiPad, ResolvesBeginsAndOutputDims) {
  kite::abi::PadSpec pad;
  // [1,2,5,6] padded by begins (0,0,2,1) and ends (0,0,1,3): [1,2,8,10].
  ASSERT_EQ(kite::abi::pad_of(PadNode({1, 2, 5, 6}, {0, 0, 2, 1, 0, 0, 1, 3}, {1, 2, 8, 10}, "reflect"), "CUDA", &pad),
            "");
  EXPECT_EQ(pad.mode, kite::ops::PadMode::kReflect);
  ASSERT_EQ(pad.axes.size(), 4u);
  EXPECT_EQ(pad.axes[2].begin, 2);
  EXPECT_EQ(pad.axes[2].end, 1);
  EXPECT_EQ(pad.axes[3].begin, 1);
  EXPECT_EQ(pad.axes[3].out, 10);
  EXPECT_EQ(pad.value_bits, 0u);
  // constant_value 1.5 (input 2) arrives as its bits.
  kite::abi::NodeView c = PadNode({2, 3}, {1, 0, 0, 2}, {3, 5});
  static const float v = 1.5f;
  c.op.inputs.push_back(tensor("v", {}, KITE_DTYPE_FLOAT32, &v));
  ASSERT_EQ(kite::abi::pad_of(c, "Vulkan", &pad), "");
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  EXPECT_EQ(pad.value_bits, bits);
}

TEST(AbiPad, Float16ConstantArrivesAsFloat32Bits) {
  // A float16 Pad (a backend with fp16-storage kernels): its constant_value
  // is one half, widened exactly.
  kite::abi::NodeView c = PadNode({2, 3}, {1, 0, 0, 2}, {3, 5});
  c.op.inputs[0].dtype = KITE_DTYPE_FLOAT16;
  static const uint16_t minus_2_5 = 0xc100;  // -2.5
  c.op.inputs.push_back(tensor("v", {}, KITE_DTYPE_FLOAT16, &minus_2_5));
  kite::abi::PadSpec pad;
  ASSERT_EQ(kite::abi::pad_of(c, "CUDA", &pad), "");
  const float want = -2.5f;
  uint32_t bits;
  std::memcpy(&bits, &want, 4);
  EXPECT_EQ(pad.value_bits, bits);
}

TEST(AbiPad, RefusesWhatTheDeviceKernelsCannotRun) {
  kite::abi::PadSpec pad;
  EXPECT_EQ(kite::abi::pad_of(PadNode({4}, {1, 1}, {6}, "wrap"), "CUDA", &pad), "Pad mode 'wrap' is not supported on CUDA");
  EXPECT_EQ(kite::abi::pad_of(PadNode({4}, {-1, 1}, {4}), "Vulkan", &pad),
            "negative pads (cropping) are not supported on Vulkan");
  EXPECT_EQ(kite::abi::pad_of(PadNode({4}, {1, 1}, {7}), "CUDA", &pad),
            "the pads give another output shape than the declared one");
  // Reflect cannot grow an empty axis (the op rule's check).
  EXPECT_NE(kite::abi::pad_of(PadNode({0}, {1, 1}, {2}, "reflect"), "CUDA", &pad), "");
  kite::abi::NodeView wrong = PadNode({2, 3}, {1, 0, 0, 2}, {3, 5});
  static const int64_t i = 7;
  wrong.op.inputs.push_back(tensor("v", {}, KITE_DTYPE_INT64, &i));
  EXPECT_EQ(kite::abi::pad_of(wrong, "CUDA", &pad), "input 2 'v' must be one value of the input's dtype");
}

}  // namespace
