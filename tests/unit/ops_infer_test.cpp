// Shape and dtype rules of kite::ops: inference, the errors it reports, and
// the strict check of declared outputs that backends run at prepare time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kite/ops/attr.h"
#include "kite/ops/op_node.h"
#include "kite_test_ops.h"

namespace {

using kite::ops::Attr;
using kite::ops::OpNode;
using kite::ops::TensorType;
using kite::test::absent;
using kite::test::tensor;
using Shape = std::vector<int64_t>;

constexpr kite_dtype F32 = KITE_DTYPE_FLOAT32;
constexpr kite_dtype I64 = KITE_DTYPE_INT64;
constexpr kite_dtype I32 = KITE_DTYPE_INT32;
constexpr kite_dtype BOOL = KITE_DTYPE_BOOL;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Builder for a node under test.
struct Node {
  OpNode n;
  Node(const std::string& op, const std::string& name = "n") {
    n.op = op;
    n.name = name;
  }
  Node& in(TensorType t) { n.inputs.push_back(std::move(t)); return *this; }
  Node& outputs(int k) { n.num_outputs = k; return *this; }
  Node& attr(Attr a) { n.attrs.push_back(std::move(a)); return *this; }
  Node& i(const std::string& name, int64_t v) { return attr(kite::ops::int_attr(name, v)); }
  Node& f(const std::string& name, float v) { return attr(kite::ops::float_attr(name, v)); }
  Node& s(const std::string& name, const std::string& v) { return attr(kite::ops::string_attr(name, v)); }
  Node& ints(const std::string& name, const Shape& v) { return attr(kite::ops::ints_attr(name, v)); }
};

// Infers and returns output k's shape; fails the test on error.
Shape InferShape(const Node& b, size_t k = 0) {
  std::vector<TensorType> outs;
  std::string err;
  EXPECT_TRUE(kite::ops::infer_types(b.n, &outs, &err)) << err;
  if (outs.size() <= k) return {-999};
  return outs[k].shape;
}

kite_dtype InferDtype(const Node& b, size_t k = 0) {
  std::vector<TensorType> outs;
  std::string err;
  EXPECT_TRUE(kite::ops::infer_types(b.n, &outs, &err)) << err;
  return outs.size() > k ? outs[k].dtype : KITE_DTYPE_UNDEFINED;
}

// Returns the error message; fails the test if inference succeeds.
std::string InferError(const Node& b) {
  std::vector<TensorType> outs;
  std::string err;
  EXPECT_FALSE(kite::ops::infer_types(b.n, &outs, &err)) << "unexpectedly inferred";
  return err;
}

// ---- helpers ----------------------------------------------------------------

TEST(OpsBasics, DtypeSizesAndNames) {
  EXPECT_EQ(kite::ops::dtype_size(F32), 4u);
  EXPECT_EQ(kite::ops::dtype_size(I64), 8u);
  EXPECT_EQ(kite::ops::dtype_size(BOOL), 1u);
  EXPECT_EQ(kite::ops::dtype_size(KITE_DTYPE_FLOAT16), 2u);
  EXPECT_EQ(kite::ops::dtype_size(KITE_DTYPE_UNDEFINED), 0u);
  // No out-of-range value here: kite_dtype's enumerators span 0..7, so in C++
  // a kite_dtype cannot hold 99 (converting it is undefined behaviour, which
  // clang's UBSan reports). Untrusted integers are range-checked before they
  // become a kite_dtype (verify.cpp, ops::known_dtype), as the loader tests
  // of unknown dtypes show.
  EXPECT_STREQ(kite::ops::dtype_name(I32), "int32");
  EXPECT_EQ(kite::ops::dtype_from_onnx(7), I64);
  EXPECT_EQ(kite::ops::dtype_from_onnx(11), KITE_DTYPE_UNDEFINED);  // double
}

TEST(OpsBasics, CheckedSizes) {
  int64_t n = 0;
  uint64_t bytes = 0;
  EXPECT_TRUE(kite::ops::checked_numel({2, 3, 4}, &n));
  EXPECT_EQ(n, 24);
  EXPECT_TRUE(kite::ops::checked_numel({}, &n));
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(kite::ops::checked_numel({2, -3}, &n));
  EXPECT_FALSE(kite::ops::checked_numel({kMax, 2}, &n));
  EXPECT_TRUE(kite::ops::checked_byte_size(F32, {1, 3, 224, 224}, &bytes));
  EXPECT_EQ(bytes, 4u * 3 * 224 * 224);
  EXPECT_FALSE(kite::ops::checked_byte_size(F32, {kMax / 2}, &bytes));  // numel fits, bytes don't
  EXPECT_FALSE(kite::ops::checked_byte_size(KITE_DTYPE_UNDEFINED, {1}, &bytes));
  EXPECT_EQ(kite::ops::shape_string({1, 3, 224, 224}), "1x3x224x224");
  EXPECT_EQ(kite::ops::shape_string({}), "scalar");
}

TEST(OpsBasics, BroadcastShapes) {
  Shape out;
  EXPECT_TRUE(kite::ops::broadcast_shapes({2, 1, 4}, {3, 1}, &out));
  EXPECT_EQ(out, (Shape{2, 3, 4}));
  EXPECT_TRUE(kite::ops::broadcast_shapes({}, {5}, &out));
  EXPECT_EQ(out, (Shape{5}));
  EXPECT_TRUE(kite::ops::broadcast_shapes({0, 1}, {1, 7}, &out));
  EXPECT_EQ(out, (Shape{0, 7}));
  EXPECT_FALSE(kite::ops::broadcast_shapes({2, 3}, {4}, &out));
  EXPECT_FALSE(kite::ops::broadcast_shapes({0}, {2}, &out));
}

TEST(OpsBasics, NodeAccessorsAndLabel) {
  Node b("Conv", "layer1.0.conv1");
  b.i("group", 2).f("alpha", 0.5f).s("auto_pad", "VALID").ints("strides", {2, 2});
  EXPECT_EQ(b.n.label(), "Conv 'layer1.0.conv1'");
  EXPECT_EQ(b.n.attr_int("group", 1), 2);
  EXPECT_EQ(b.n.attr_int("strides", 7), 7);  // wrong type: fallback
  EXPECT_FLOAT_EQ(b.n.attr_float("alpha", 0), 0.5f);
  EXPECT_EQ(b.n.attr_string("auto_pad", "NOTSET"), "VALID");
  EXPECT_EQ(b.n.attr_ints("strides", {}), (Shape{2, 2}));
  EXPECT_EQ(b.n.attr_ints("pads", {0}), (Shape{0}));
  EXPECT_EQ(b.n.find_attr("nope"), nullptr);
}

TEST(OpsBasics, KnownOps) {
  EXPECT_TRUE(kite::ops::is_known_op("Conv"));
  EXPECT_TRUE(kite::ops::is_known_op("Identity"));
  EXPECT_FALSE(kite::ops::is_known_op("Det"));
  const auto ops = kite::ops::known_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div",
                         "BatchNormalization", "Relu", "Sigmoid", "Clip", "MaxPool",
                         "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Concat",
                         "Softmax", "Transpose", "Identity"}) {
    EXPECT_TRUE(kite::ops::is_known_op(op)) << op;
  }
  EXPECT_NE(InferError(Node("Det").in(tensor("x", {1}))).find("not supported"),
            std::string::npos);
}

TEST(OpsBasics, FromBackendNode) {
  const int64_t x_shape[] = {1, 3, 8, 8};
  const int64_t w_shape[] = {4, 3, 3, 3};
  static float weights[4 * 3 * 3 * 3] = {};
  kite_backend_tensor x = {"x", F32, 4, x_shape, 1 * 3 * 8 * 8 * 4, nullptr, 0};
  kite_backend_tensor w = {"w", F32, 4, w_shape, sizeof(weights), weights, 1};
  const kite_backend_tensor* inputs[] = {&x, &w, nullptr};
  const int64_t y_shape[] = {1, 4, 6, 6};
  kite_backend_tensor y = {"y", F32, 4, y_shape, 1 * 4 * 6 * 6 * 4, nullptr, 0};
  const kite_backend_tensor* outputs[] = {&y};
  const int64_t strides[] = {1, 1};
  kite_backend_attr attrs[] = {{"strides", KITE_ATTR_INTS, 0, 0, nullptr, 2, strides, nullptr, nullptr},
                               {"group", KITE_ATTR_INT, 1, 0, nullptr, 0, nullptr, nullptr, nullptr}};
  kite_backend_node node = {"c1", "Conv", "", "", 3, inputs, 1, outputs, 2, attrs};

  OpNode n = kite::ops::from_backend_node(node);
  EXPECT_EQ(n.label(), "Conv 'c1'");
  ASSERT_EQ(n.inputs.size(), 3u);
  EXPECT_EQ(n.inputs[0].shape, (Shape{1, 3, 8, 8}));
  EXPECT_EQ(n.inputs[0].data, nullptr);  // not a constant
  EXPECT_EQ(n.inputs[1].data, weights);
  EXPECT_FALSE(n.inputs[2].present);
  EXPECT_FALSE(n.has_input(2));
  EXPECT_EQ(n.attr_ints("strides", {}), (Shape{1, 1}));
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(n, kite::ops::outputs_from_backend_node(node), &err))
      << err;

  // A hostile rank is caught, by the checked form and by inference.
  x.rank = 100;
  OpNode bad;
  EXPECT_FALSE(kite::ops::from_backend_node(node, &bad, &err));
  EXPECT_NE(err.find("rank 100"), std::string::npos) << err;
  EXPECT_FALSE(kite::ops::infer_types(kite::ops::from_backend_node(node), nullptr, &err));
  x.rank = 4;
  // A dtype outside the enum (written as raw bytes, as a file could hold it).
  const int bad_dtype = 42;
  std::memcpy(&x.dtype, &bad_dtype, sizeof bad_dtype);
  EXPECT_FALSE(kite::ops::from_backend_node(node, &bad, &err));
  EXPECT_NE(err.find("invalid dtype 42"), std::string::npos) << err;
  EXPECT_FALSE(kite::ops::infer_types(kite::ops::from_backend_node(node), nullptr, &err));
  x.dtype = F32;
  // A constant whose byte size disagrees with its shape is not trusted.
  w.byte_size = 12;
  EXPECT_FALSE(kite::ops::from_backend_node(node, &bad, &err));
  EXPECT_NE(err.find("12 bytes"), std::string::npos) << err;
}

// ---- input validation common to all ops ------------------------------------------

TEST(OpsValidation, RejectsHostileInputShapes) {
  EXPECT_NE(InferError(Node("Relu").in(tensor("x", {2, -1}))).find("negative"), std::string::npos);
  EXPECT_NE(InferError(Node("Relu").in(tensor("x", {kMax, kMax}))).find("overflows"), std::string::npos);
  EXPECT_NE(InferError(Node("Relu").in(tensor("x", {1, 1, 1, 1, 1, 1, 1, 1, 1}))).find("more than 8"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Relu").in(tensor("x", {2}, KITE_DTYPE_UNDEFINED))).find("invalid dtype"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Relu").in(tensor("x", {2})).in(tensor("y", {2}))).find("at most 1"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Relu").in(tensor("x", {2})).outputs(2)).find("2 outputs"),
            std::string::npos);
  OpNode other = Node("Relu").in(tensor("x", {2})).n;
  other.domain = "com.microsoft";
  std::string err;
  EXPECT_FALSE(kite::ops::infer_types(other, nullptr, &err));
  EXPECT_NE(err.find("com.microsoft"), std::string::npos);
}

// ---- Conv ---------------------------------------------------------------------------

Node Conv2d(Shape x, Shape w) {
  Node b("Conv", "layer1.0.conv1");
  b.in(tensor("x", std::move(x))).in(tensor("w", std::move(w)));
  return b;
}

TEST(OpsConv, BasicAndBias) {
  EXPECT_EQ(InferShape(Conv2d({1, 3, 224, 224}, {64, 3, 7, 7})
                           .ints("strides", {2, 2}).ints("pads", {3, 3, 3, 3})),
            (Shape{1, 64, 112, 112}));
  EXPECT_EQ(InferShape(Conv2d({2, 3, 10, 12}, {8, 3, 3, 3}).in(tensor("b", {8}))),
            (Shape{2, 8, 8, 10}));
  std::string e = InferError(Conv2d({2, 3, 10, 12}, {8, 3, 3, 3}).in(tensor("b", {7})));
  EXPECT_NE(e.find("input 'b'"), std::string::npos) << e;
}

TEST(OpsConv, WrongRankMessage) {
  EXPECT_EQ(InferError(Conv2d({3, 224, 224}, {64, 3, 7, 7})),
            "Conv 'layer1.0.conv1': input 'w' has 4 dims, expected 3");
  std::string e = InferError(Conv2d({1, 3, 224, 224, 1, 1}, {64, 3, 7, 7, 1, 1}));
  EXPECT_NE(e.find("input 'x' has 6 dims, expected 3 to 5"), std::string::npos) << e;
}

TEST(OpsConv, OneAndThreeDimensional) {
  EXPECT_EQ(InferShape(Conv2d({1, 4, 100}, {8, 4, 5}).ints("dilations", {2})),
            (Shape{1, 8, 92}));
  EXPECT_EQ(InferShape(Conv2d({1, 2, 8, 9, 10}, {4, 2, 3, 3, 3}).ints("strides", {2, 2, 2})),
            (Shape{1, 4, 3, 4, 4}));
}

TEST(OpsConv, PadsStridesDilations) {
  // out = floor((in + pb + pe - ((k-1)*d+1)) / s) + 1
  EXPECT_EQ(InferShape(Conv2d({1, 1, 10, 11}, {1, 1, 3, 3})
                           .ints("pads", {1, 0, 2, 0}).ints("strides", {3, 2})
                           .ints("dilations", {2, 3})),
            // h: (10+3-5)/3+1 = 3; w: (11-7)/2+1 = 3
            (Shape{1, 1, 3, 3}));
  EXPECT_NE(InferError(Conv2d({1, 1, 5, 5}, {1, 1, 3, 3}).ints("strides", {1, 0})).find("strides"),
            std::string::npos);
  EXPECT_NE(InferError(Conv2d({1, 1, 5, 5}, {1, 1, 3, 3}).ints("pads", {0, -1, 0, 0})).find("pads"),
            std::string::npos);
  EXPECT_NE(InferError(Conv2d({1, 1, 5, 5}, {1, 1, 3, 3}).ints("pads", {0, 0})).find("expected 4"),
            std::string::npos);
  EXPECT_NE(InferError(Conv2d({1, 1, 5, 5}, {1, 1, 3, 3}).ints("dilations", {0, 1})).find("dilations"),
            std::string::npos);
  // Kernel extent larger than the padded input.
  EXPECT_NE(InferError(Conv2d({1, 1, 2, 5}, {1, 1, 3, 3})).find("smaller than the kernel"),
            std::string::npos);
}

TEST(OpsConv, AutoPad) {
  EXPECT_EQ(InferShape(Conv2d({1, 1, 7, 8}, {1, 1, 3, 3}).s("auto_pad", "SAME_UPPER")
                           .ints("strides", {2, 2})),
            (Shape{1, 1, 4, 4}));
  EXPECT_EQ(InferShape(Conv2d({1, 1, 7, 8}, {1, 1, 3, 3}).s("auto_pad", "SAME_LOWER")),
            (Shape{1, 1, 7, 8}));
  // VALID ignores pads.
  EXPECT_EQ(InferShape(Conv2d({1, 1, 7, 8}, {1, 1, 3, 3}).s("auto_pad", "VALID")
                           .ints("pads", {1, 1, 1, 1})),
            (Shape{1, 1, 5, 6}));
  EXPECT_NE(InferError(Conv2d({1, 1, 7, 8}, {1, 1, 3, 3}).s("auto_pad", "SAME")).find("auto_pad"),
            std::string::npos);

  // The resolved pads: SAME_UPPER puts the odd pad at the end.
  kite::ops::WindowGeometry g;
  std::string err;
  ASSERT_TRUE(kite::ops::window_geometry(
      Conv2d({1, 1, 8, 8}, {1, 1, 4, 4}).s("auto_pad", "SAME_UPPER").n, &g, &err)) << err;
  EXPECT_EQ(g.pads_begin, (Shape{1, 1}));
  EXPECT_EQ(g.pads_end, (Shape{2, 2}));
  ASSERT_TRUE(kite::ops::window_geometry(
      Conv2d({1, 1, 8, 8}, {1, 1, 4, 4}).s("auto_pad", "SAME_LOWER").n, &g, &err)) << err;
  EXPECT_EQ(g.pads_begin, (Shape{2, 2}));
  EXPECT_EQ(g.pads_end, (Shape{1, 1}));
}

TEST(OpsConv, Groups) {
  // Depthwise: group = C, W has 1 input channel per group.
  EXPECT_EQ(InferShape(Conv2d({1, 32, 16, 16}, {32, 1, 3, 3}).i("group", 32)
                           .ints("pads", {1, 1, 1, 1})),
            (Shape{1, 32, 16, 16}));
  EXPECT_EQ(InferShape(Conv2d({1, 8, 4, 4}, {6, 4, 1, 1}).i("group", 2)), (Shape{1, 6, 4, 4}));
  std::string e = InferError(Conv2d({1, 30, 16, 16}, {32, 1, 3, 3}).i("group", 4));
  EXPECT_NE(e.find("30 channels, not divisible by group 4"), std::string::npos) << e;
  e = InferError(Conv2d({1, 8, 4, 4}, {6, 8, 1, 1}).i("group", 2));
  EXPECT_NE(e.find("input 'w'"), std::string::npos) << e;
  e = InferError(Conv2d({1, 8, 4, 4}, {5, 4, 1, 1}).i("group", 2));
  EXPECT_NE(e.find("5 output channels"), std::string::npos) << e;
  EXPECT_NE(InferError(Conv2d({1, 8, 4, 4}, {8, 8, 1, 1}).i("group", 0)).find("group"),
            std::string::npos);
}

TEST(OpsConv, KernelShapeAndDtypes) {
  EXPECT_EQ(InferShape(Conv2d({1, 3, 9, 9}, {2, 3, 3, 3}).ints("kernel_shape", {3, 3})),
            (Shape{1, 2, 7, 7}));
  EXPECT_NE(InferError(Conv2d({1, 3, 9, 9}, {2, 3, 3, 3}).ints("kernel_shape", {3})).find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(InferError(Conv2d({1, 3, 9, 9}, {2, 3, 3, 3}).ints("kernel_shape", {5, 5})).find("kernel_shape"),
            std::string::npos);
  Node b("Conv", "c");
  b.in(tensor("x", {1, 3, 9, 9}, I64)).in(tensor("w", {2, 3, 3, 3}, I64));
  EXPECT_NE(InferError(b).find("dtype int64"), std::string::npos);
  Node mixed("Conv", "c");
  mixed.in(tensor("x", {1, 3, 9, 9})).in(tensor("w", {2, 3, 3, 3}, KITE_DTYPE_FLOAT16));
  EXPECT_NE(InferError(mixed).find("input 'w' has dtype float16"), std::string::npos);
  // Wrong attribute type is reported, not silently defaulted.
  EXPECT_NE(InferError(Conv2d({1, 3, 9, 9}, {2, 3, 3, 3}).f("group", 1.0f)).find("type FLOAT"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Conv", "c").in(tensor("x", {1, 3, 9, 9}))).find("missing"),
            std::string::npos);
}

TEST(OpsConv, HostileAttributesDoNotOverflow) {
  EXPECT_NE(InferError(Conv2d({1, 1, 9, 9}, {1, 1, 3, 3}).ints("dilations", {kMax, 1})).find("overflow"),
            std::string::npos);
  EXPECT_NE(InferError(Conv2d({1, 1, 9, 9}, {1, 1, 3, 3}).ints("pads", {kMax, kMax, 0, 0})).find("overflow"),
            std::string::npos);
  // Huge stride is fine: one output.
  EXPECT_EQ(InferShape(Conv2d({1, 1, 9, 9}, {1, 1, 3, 3}).ints("strides", {kMax, kMax})),
            (Shape{1, 1, 1, 1}));
  EXPECT_EQ(InferShape(Conv2d({1, 1, 9, 9}, {1, 1, 3, 3}).s("auto_pad", "SAME_UPPER")
                           .ints("strides", {kMax, kMax})),
            (Shape{1, 1, 1, 1}));
}

// ---- Gemm, MatMul ---------------------------------------------------------------------

TEST(OpsGemm, TransposesAndBias) {
  Node b("Gemm", "fc");
  b.in(tensor("a", {4, 3})).in(tensor("b", {5, 3})).in(tensor("c", {5})).i("transB", 1);
  EXPECT_EQ(InferShape(b), (Shape{4, 5}));
  Node t("Gemm", "fc");
  t.in(tensor("a", {3, 4})).in(tensor("b", {3, 5})).i("transA", 1);
  EXPECT_EQ(InferShape(t), (Shape{4, 5}));
  Node c1("Gemm", "fc");
  c1.in(tensor("a", {4, 3})).in(tensor("b", {3, 5})).in(tensor("c", {4, 1}));
  EXPECT_EQ(InferShape(c1), (Shape{4, 5}));
  Node scalar_c("Gemm", "fc");
  scalar_c.in(tensor("a", {4, 3})).in(tensor("b", {3, 5})).in(tensor("c", {}));
  EXPECT_EQ(InferShape(scalar_c), (Shape{4, 5}));
  Node absent_c("Gemm", "fc");
  absent_c.in(tensor("a", {4, 3})).in(tensor("b", {3, 5})).in(absent());
  EXPECT_EQ(InferShape(absent_c), (Shape{4, 5}));
}

TEST(OpsGemm, Errors) {
  Node k("Gemm", "fc");
  k.in(tensor("a", {4, 3})).in(tensor("b", {4, 5}));
  EXPECT_NE(InferError(k).find("K=4"), std::string::npos);
  Node c("Gemm", "fc");
  c.in(tensor("a", {4, 3})).in(tensor("b", {3, 5})).in(tensor("c", {3, 5}));
  EXPECT_NE(InferError(c).find("input 'c' has shape 3x5"), std::string::npos);
  Node c3("Gemm", "fc");
  c3.in(tensor("a", {4, 3})).in(tensor("b", {3, 5})).in(tensor("c", {1, 4, 5}));
  EXPECT_NE(InferError(c3).find("does not broadcast"), std::string::npos);
  Node r("Gemm", "fc");
  r.in(tensor("a", {2, 4, 3})).in(tensor("b", {3, 5}));
  EXPECT_NE(InferError(r).find("has 3 dims, expected 2"), std::string::npos);
  Node tr("Gemm", "fc");
  tr.in(tensor("a", {4, 3})).in(tensor("b", {3, 5})).i("transA", 2);
  EXPECT_NE(InferError(tr).find("transA"), std::string::npos);
}

TEST(OpsMatMul, NumpyRules) {
  auto mm = [](Shape a, Shape b) {
    Node n("MatMul", "mm");
    n.in(tensor("a", std::move(a))).in(tensor("b", std::move(b)));
    return n;
  };
  EXPECT_EQ(InferShape(mm({2, 3}, {3, 4})), (Shape{2, 4}));
  EXPECT_EQ(InferShape(mm({3}, {3, 4})), (Shape{4}));
  EXPECT_EQ(InferShape(mm({2, 3}, {3})), (Shape{2}));
  EXPECT_EQ(InferShape(mm({3}, {3})), (Shape{}));
  EXPECT_EQ(InferShape(mm({5, 1, 2, 3}, {4, 3, 6})), (Shape{5, 4, 2, 6}));
  EXPECT_EQ(InferShape(mm({7}, {2, 7, 4})), (Shape{2, 4}));
  EXPECT_EQ(InferShape(mm({2, 5, 7}, {7})), (Shape{2, 5}));
  EXPECT_NE(InferError(mm({2, 3}, {4, 5})).find("inner dims"), std::string::npos);
  EXPECT_NE(InferError(mm({2, 2, 3}, {3, 3, 5})).find("batch dims"), std::string::npos);
  EXPECT_NE(InferError(mm({}, {3})).find("0 dims"), std::string::npos);
  Node i("MatMul", "mm");
  i.in(tensor("a", {2, 3}, I64)).in(tensor("b", {3, 4}, I32));
  EXPECT_NE(InferError(i).find("dtype int32"), std::string::npos);
}

// ---- elementwise ----------------------------------------------------------------------

TEST(OpsElementwise, BinaryBroadcasting) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    Node b(op, "e");
    b.in(tensor("a", {8, 1, 6, 1})).in(tensor("b", {7, 1, 5}));
    EXPECT_EQ(InferShape(b), (Shape{8, 7, 6, 5})) << op;
  }
  Node s("Add", "e");
  s.in(tensor("a", {}, I64)).in(tensor("b", {3}, I64));
  EXPECT_EQ(InferShape(s), (Shape{3}));
  EXPECT_EQ(InferDtype(s), I64);
  Node i32("Mul", "e");
  i32.in(tensor("a", {2, 3}, I32)).in(tensor("b", {2, 1}, I32));
  EXPECT_EQ(InferDtype(i32), I32);
  Node bad("Add", "e");
  bad.in(tensor("a", {2, 3})).in(tensor("b", {4, 3}));
  EXPECT_EQ(InferError(bad), "Add 'e': cannot broadcast input 'a' (2x3) and input 'b' (4x3)");
  Node mixed("Add", "e");
  mixed.in(tensor("a", {3})).in(tensor("b", {3}, I64));
  EXPECT_NE(InferError(mixed).find("input 'b' has dtype int64, expected float32"), std::string::npos);
  Node boolean("Add", "e");
  boolean.in(tensor("a", {3}, BOOL)).in(tensor("b", {3}, BOOL));
  EXPECT_NE(InferError(boolean).find("dtype bool"), std::string::npos);
}

TEST(OpsElementwise, ReluSigmoidIdentity) {
  EXPECT_EQ(InferShape(Node("Relu").in(tensor("x", {2, 3}))), (Shape{2, 3}));
  EXPECT_EQ(InferDtype(Node("Relu").in(tensor("x", {2, 3}, I32))), I32);
  EXPECT_EQ(InferShape(Node("Sigmoid").in(tensor("x", {}))), (Shape{}));
  EXPECT_NE(InferError(Node("Sigmoid").in(tensor("x", {2}, I64))).find("dtype int64"), std::string::npos);
  EXPECT_EQ(InferDtype(Node("Identity").in(tensor("x", {4}, BOOL))), BOOL);
}

TEST(OpsElementwise, Clip) {
  EXPECT_EQ(InferShape(Node("Clip").in(tensor("x", {2, 3})).f("min", 0).f("max", 6)), (Shape{2, 3}));
  EXPECT_EQ(InferShape(Node("Clip").in(tensor("x", {2, 3})).in(tensor("lo", {})).in(tensor("hi", {}))),
            (Shape{2, 3}));
  EXPECT_EQ(InferShape(Node("Clip").in(tensor("x", {2, 3})).in(absent()).in(tensor("hi", {1}))),
            (Shape{2, 3}));
  EXPECT_NE(InferError(Node("Clip").in(tensor("x", {2, 3})).in(tensor("lo", {2}))).find("expected a scalar"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Clip").in(tensor("x", {2, 3})).in(tensor("lo", {}, I64))).find("dtype int64"),
            std::string::npos);
}

TEST(OpsElementwise, Softmax) {
  EXPECT_EQ(InferShape(Node("Softmax").in(tensor("x", {2, 3, 4}))), (Shape{2, 3, 4}));
  EXPECT_EQ(InferShape(Node("Softmax").in(tensor("x", {2, 3, 4})).i("axis", 1)), (Shape{2, 3, 4}));
  EXPECT_EQ(InferShape(Node("Softmax").in(tensor("x", {2, 3, 4})).i("axis", -3)), (Shape{2, 3, 4}));
  EXPECT_NE(InferError(Node("Softmax").in(tensor("x", {2, 3, 4})).i("axis", 3)).find("out of range"),
            std::string::npos);
}

// ---- BatchNormalization ---------------------------------------------------------------

Node BatchNorm(Shape x, int64_t c) {
  Node b("BatchNormalization", "bn1");
  b.in(tensor("x", std::move(x))).in(tensor("scale", {c})).in(tensor("bias", {c})).in(tensor("mean", {c}))
      .in(tensor("var", {c}));
  return b;
}

TEST(OpsBatchNorm, Inference) {
  EXPECT_EQ(InferShape(BatchNorm({2, 16, 5, 5}, 16)), (Shape{2, 16, 5, 5}));
  EXPECT_EQ(InferShape(BatchNorm({2, 16}, 16)), (Shape{2, 16}));
  std::string e = InferError(BatchNorm({2, 16, 5, 5}, 8));
  EXPECT_NE(e.find("input 'scale' has shape 8"), std::string::npos) << e;
  EXPECT_NE(InferError(BatchNorm({2, 16, 5, 5}, 16).outputs(3)).find("training-mode"),
            std::string::npos);
  EXPECT_NE(InferError(BatchNorm({2, 16, 5, 5}, 16).i("training_mode", 1)).find("training_mode"),
            std::string::npos);
  Node four("BatchNormalization", "bn1");
  four.in(tensor("x", {2, 4})).in(tensor("s", {4})).in(tensor("b", {4})).in(tensor("m", {4}));
  EXPECT_NE(InferError(four).find("missing"), std::string::npos);
}

// ---- pooling ---------------------------------------------------------------------------

Node Pool(const char* op, Shape x, Shape kernel) {
  Node b(op, "pool");
  b.in(tensor("x", std::move(x))).ints("kernel_shape", std::move(kernel));
  return b;
}

TEST(OpsPool, MaxPoolFloorAndCeil) {
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 64, 112, 112}, {3, 3}).ints("strides", {2, 2})
                           .ints("pads", {1, 1, 1, 1})),
            (Shape{1, 64, 56, 56}));
  // (6 - 3) / 2 + 1 = 2 floor, 3 with ceil_mode.
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 1, 6, 6}, {3, 3}).ints("strides", {2, 2})),
            (Shape{1, 1, 2, 2}));
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 1, 6, 6}, {3, 3}).ints("strides", {2, 2})
                           .i("ceil_mode", 1)),
            (Shape{1, 1, 3, 3}));
  // ceil_mode may not start a window in the trailing padding:
  // in 5, k 2, s 2, pads 1/1: span 5 -> ceil(5/2)+1 = 4 windows, but window 4
  // would start at 6 >= 5 + 1, so 3 windows.
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 1, 5}, {2}).ints("strides", {2}).ints("pads", {1, 1})
                           .i("ceil_mode", 1)),
            (Shape{1, 1, 3}));
  // Exact fit: ceil_mode changes nothing.
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 1, 7, 7}, {3, 3}).ints("strides", {2, 2})
                           .i("ceil_mode", 1)),
            (Shape{1, 1, 3, 3}));
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 1, 7, 7}, {2, 2}).ints("dilations", {2, 2})),
            (Shape{1, 1, 5, 5}));
  EXPECT_EQ(InferShape(Pool("MaxPool", {1, 1, 7, 7}, {3, 3}).s("auto_pad", "SAME_UPPER")
                           .ints("strides", {2, 2}).i("storage_order", 1)),
            (Shape{1, 1, 4, 4}));
}

TEST(OpsPool, MaxPoolErrors) {
  EXPECT_NE(InferError(Pool("MaxPool", {1, 1, 6, 6}, {3, 3}).outputs(2)).find("Indices"),
            std::string::npos);
  EXPECT_NE(InferError(Node("MaxPool").in(tensor("x", {1, 1, 6, 6}))).find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(InferError(Pool("MaxPool", {1, 1, 6, 6}, {3})).find("kernel_shape"), std::string::npos);
  EXPECT_NE(InferError(Pool("MaxPool", {1, 1, 6, 6}, {3, 0})).find("kernel_shape"), std::string::npos);
  EXPECT_NE(InferError(Pool("MaxPool", {1, 1, 6, 6}, {3, 3}).ints("pads", {3, 0, 0, 0})).find("smaller than kernel"),
            std::string::npos);
  EXPECT_NE(InferError(Pool("MaxPool", {1, 1, 6, 6}, {3, 3}).i("ceil_mode", 2)).find("ceil_mode"),
            std::string::npos);
  EXPECT_NE(InferError(Pool("MaxPool", {6, 6}, {3, 3})).find("input 'x' has 2 dims"),
            std::string::npos);
}

TEST(OpsPool, AveragePool) {
  EXPECT_EQ(InferShape(Pool("AveragePool", {1, 8, 7, 7}, {7, 7})), (Shape{1, 8, 1, 1}));
  EXPECT_EQ(InferShape(Pool("AveragePool", {1, 8, 6, 6}, {3, 3}).ints("strides", {2, 2})
                           .ints("pads", {1, 1, 1, 1}).i("count_include_pad", 1).i("ceil_mode", 1)),
            (Shape{1, 8, 4, 4}));  // span 5 -> ceil(5/2)+1 = 4; last starts at 6 < 7
  EXPECT_NE(InferError(Pool("AveragePool", {1, 8, 6, 6}, {3, 3}).i("count_include_pad", 5)).find("count_include_pad"),
            std::string::npos);
  EXPECT_EQ(InferShape(Node("GlobalAveragePool").in(tensor("x", {2, 8, 7, 5}))), (Shape{2, 8, 1, 1}));
  EXPECT_EQ(InferShape(Node("GlobalAveragePool").in(tensor("x", {2, 8, 7}))), (Shape{2, 8, 1}));
  EXPECT_NE(InferError(Node("GlobalAveragePool").in(tensor("x", {2, 8}))).find("2 dims"), std::string::npos);
  EXPECT_NE(InferError(Node("GlobalAveragePool").in(tensor("x", {2, 8, 0, 3}))).find("empty"),
            std::string::npos);
}

// ---- shape ops -------------------------------------------------------------------------

TEST(OpsShape, Flatten) {
  EXPECT_EQ(InferShape(Node("Flatten").in(tensor("x", {2, 3, 4, 5}))), (Shape{2, 60}));
  EXPECT_EQ(InferShape(Node("Flatten").in(tensor("x", {2, 3, 4, 5})).i("axis", 0)), (Shape{1, 120}));
  EXPECT_EQ(InferShape(Node("Flatten").in(tensor("x", {2, 3, 4, 5})).i("axis", 4)), (Shape{120, 1}));
  EXPECT_EQ(InferShape(Node("Flatten").in(tensor("x", {2, 3, 4, 5})).i("axis", -1)), (Shape{24, 5}));
  EXPECT_NE(InferError(Node("Flatten").in(tensor("x", {2, 3})).i("axis", 3)).find("out of range"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Flatten").in(tensor("x", {2, 3})).i("axis", -3)).find("out of range"),
            std::string::npos);
}

Node Reshape(Shape x, const std::vector<int64_t>& target) {
  Node b("Reshape", "r");
  b.in(tensor("x", std::move(x))).in(tensor("shape", {static_cast<int64_t>(target.size())}, I64,
                                     target.data()));
  return b;
}

TEST(OpsShape, Reshape) {
  const std::vector<int64_t> a = {0, -1};
  EXPECT_EQ(InferShape(Reshape({2, 3, 4}, a)), (Shape{2, 12}));
  const std::vector<int64_t> b = {-1, 4, 1};
  EXPECT_EQ(InferShape(Reshape({2, 3, 4}, b)), (Shape{6, 4, 1}));
  const std::vector<int64_t> c = {4, 0, 2};
  EXPECT_EQ(InferShape(Reshape({2, 3, 4}, c)), (Shape{4, 3, 2}));
  // allowzero: 0 is a real zero.
  const std::vector<int64_t> z = {0, 5};
  EXPECT_EQ(InferShape(Reshape({0, 5}, z).i("allowzero", 1)), (Shape{0, 5}));
  const std::vector<int64_t> scalar = {};
  EXPECT_EQ(InferShape(Reshape({1, 1}, scalar)), (Shape{}));

  const std::vector<int64_t> two = {-1, -1};
  EXPECT_NE(InferError(Reshape({2, 3}, two)).find("more than one -1"), std::string::npos);
  const std::vector<int64_t> uneven = {-1, 5};
  EXPECT_NE(InferError(Reshape({2, 3}, uneven)).find("does not fit"), std::string::npos);
  const std::vector<int64_t> wrong = {7};
  EXPECT_NE(InferError(Reshape({2, 3}, wrong)).find("has 7 elements"), std::string::npos);
  const std::vector<int64_t> neg = {-2, 3};
  EXPECT_NE(InferError(Reshape({2, 3}, neg)).find("invalid dim -2"), std::string::npos);
  const std::vector<int64_t> copy_past_end = {6, 0, 0};
  EXPECT_NE(InferError(Reshape({6}, copy_past_end)).find("copies dim 1"), std::string::npos);
  const std::vector<int64_t> huge = {kMax, kMax, -1};
  EXPECT_NE(InferError(Reshape({6}, huge)).find("overflows"), std::string::npos);
  const std::vector<int64_t> zero_infer = {0, -1};
  EXPECT_NE(InferError(Reshape({0, 4}, zero_infer).i("allowzero", 1)).find("cannot be inferred"),
            std::string::npos);
}

TEST(OpsShape, ReshapeUnknownShapeValue) {
  Node b("Reshape", "r");
  b.in(tensor("x", {2, 3, 4})).in(tensor("shape", {2}, I64));
  EXPECT_EQ(InferError(b),
            "Reshape 'r': input 'shape' value must be known at convert time (a constant)");
  std::string err;
  // Fallback: same element count and the rank the shape input implies.
  EXPECT_TRUE(kite::ops::check_declared_outputs(b.n, {tensor("y", {6, 4})}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(b.n, {tensor("y", {6, 5})}, &err));
  EXPECT_NE(err.find("24 elements"), std::string::npos) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(b.n, {tensor("y", {24})}, &err));
  EXPECT_FALSE(kite::ops::check_declared_outputs(b.n, {tensor("y", {6, 4}, I64)}, &err));
  EXPECT_NE(err.find("dtype int64"), std::string::npos) << err;
}

TEST(OpsShape, Concat) {
  Node b("Concat", "cat");
  b.in(tensor("a", {2, 3, 4})).in(tensor("b", {2, 5, 4})).in(tensor("c", {2, 1, 4})).i("axis", 1);
  EXPECT_EQ(InferShape(b), (Shape{2, 9, 4}));
  Node neg("Concat", "cat");
  neg.in(tensor("a", {2, 3})).in(tensor("b", {2, 5})).i("axis", -1);
  EXPECT_EQ(InferShape(neg), (Shape{2, 8}));
  Node mismatch("Concat", "cat");
  mismatch.in(tensor("a", {2, 3})).in(tensor("b", {3, 5})).i("axis", 1);
  EXPECT_NE(InferError(mismatch).find("input 'b' has shape 3x5: dim 0 is 3, expected 2"),
            std::string::npos);
  Node rank("Concat", "cat");
  rank.in(tensor("a", {2, 3})).in(tensor("b", {2, 3, 1})).i("axis", 0);
  EXPECT_NE(InferError(rank).find("3 dims, expected 2"), std::string::npos);
  Node no_axis("Concat", "cat");
  no_axis.in(tensor("a", {2, 3}));
  EXPECT_NE(InferError(no_axis).find("'axis' is required"), std::string::npos);
  Node huge("Concat", "cat");
  huge.in(tensor("a", {kMax / 4}, BOOL)).in(tensor("b", {kMax / 4}, BOOL)).in(tensor("c", {kMax / 4}, BOOL))
      .in(tensor("d", {kMax / 4}, BOOL)).in(tensor("e", {kMax / 4}, BOOL)).i("axis", 0);
  EXPECT_NE(InferError(huge).find("overflows"), std::string::npos);
}

TEST(OpsShape, Transpose) {
  EXPECT_EQ(InferShape(Node("Transpose").in(tensor("x", {2, 3, 4}))), (Shape{4, 3, 2}));
  EXPECT_EQ(InferShape(Node("Transpose").in(tensor("x", {2, 3, 4})).ints("perm", {0, 2, 1})),
            (Shape{2, 4, 3}));
  EXPECT_NE(InferError(Node("Transpose").in(tensor("x", {2, 3, 4})).ints("perm", {0, 0, 1})).find("permutation"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Transpose").in(tensor("x", {2, 3, 4})).ints("perm", {0, 1})).find("perm"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Transpose").in(tensor("x", {2, 3})).ints("perm", {0, 2})).find("permutation"),
            std::string::npos);
}

// ---- check_declared_outputs ------------------------------------------------------------

TEST(OpsCheckDeclared, AcceptsExactAndRejectsWrong) {
  Node conv = Conv2d({1, 3, 8, 8}, {4, 3, 3, 3});
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(conv.n, {tensor("y", {1, 4, 6, 6})}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(conv.n, {tensor("y", {1, 4, 8, 8})}, &err));
  EXPECT_EQ(err, "Conv 'layer1.0.conv1': output 'y' has shape 1x4x8x8, expected 1x4x6x6");
  EXPECT_FALSE(kite::ops::check_declared_outputs(conv.n, {tensor("y", {1, 4, 36})}, &err));
  EXPECT_FALSE(kite::ops::check_declared_outputs(conv.n, {tensor("y", {1, 4, 6, 6}, I32)}, &err));
  EXPECT_NE(err.find("dtype int32, expected float32"), std::string::npos) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(conv.n, {tensor("y", {1, 4, 6, -6})}, &err));
  EXPECT_FALSE(kite::ops::check_declared_outputs(conv.n, {}, &err));
  EXPECT_NE(err.find("declares 0 outputs"), std::string::npos) << err;
  // Invalid inputs are rejected even if the declared output looks plausible.
  Node bad = Conv2d({1, 3, 8}, {4, 3, 3, 3});
  EXPECT_FALSE(kite::ops::check_declared_outputs(bad.n, {tensor("y", {1, 4, 6})}, &err));
}

TEST(OpsCheckDeclared, BroadcastOutput) {
  Node add("Add", "e");
  add.in(tensor("a", {4, 1})).in(tensor("b", {3}));
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(add.n, {tensor("y", {4, 3})}, &err)) << err;
  // A smaller declared output would make the kernel write out of bounds.
  EXPECT_FALSE(kite::ops::check_declared_outputs(add.n, {tensor("y", {4, 1})}, &err));
  EXPECT_FALSE(kite::ops::check_declared_outputs(add.n, {tensor("y", {1, 4, 3})}, &err));
}

TEST(OpsCheckDeclared, UnusedOptionalOutputs) {
  // MaxPool with an unused Indices slot (ONNX "" output, ABI NULL entry).
  Node pool = Pool("MaxPool", {1, 1, 6, 6}, {2, 2});
  pool.outputs(2);
  pool.n.outputs_used = {true, false};
  std::vector<TensorType> outs;
  std::string err;
  ASSERT_TRUE(kite::ops::infer_types(pool.n, &outs, &err)) << err;
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(outs[0].present);
  EXPECT_FALSE(outs[1].present);
  EXPECT_TRUE(kite::ops::check_declared_outputs(pool.n, {tensor("y", {1, 1, 5, 5}), absent()}, &err)) << err;
  pool.n.outputs_used = {true, true};
  EXPECT_NE(InferError(pool).find("Indices"), std::string::npos);

  Node bn = BatchNorm({2, 4, 3, 3}, 4);
  bn.outputs(3);
  bn.n.outputs_used = {true, false, false};
  EXPECT_EQ(InferShape(bn), (Shape{2, 4, 3, 3}));
}

// ---- priority 2 --------------------------------------------------------------------

TEST(OpsConvTranspose, Shapes) {
  auto ct = [](Shape x, Shape w) {
    Node b("ConvTranspose", "up");
    b.in(tensor("x", std::move(x))).in(tensor("w", std::move(w)));
    return b;
  };
  // out = s*(in-1) + output_padding + ((k-1)*d+1) - pads
  EXPECT_EQ(InferShape(ct({1, 8, 4, 4}, {8, 3, 4, 4}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1})),
            (Shape{1, 3, 8, 8}));
  EXPECT_EQ(InferShape(ct({1, 8, 4, 4}, {8, 3, 3, 3}).ints("strides", {2, 2})
                           .ints("output_padding", {1, 0})),
            (Shape{1, 3, 10, 9}));
  EXPECT_EQ(InferShape(ct({1, 8, 5}, {8, 2, 3}).i("group", 4)), (Shape{1, 8, 7}));
  EXPECT_EQ(InferShape(ct({1, 8, 4, 4}, {8, 3, 3, 3}).ints("strides", {2, 2})
                           .s("auto_pad", "SAME_UPPER")),
            (Shape{1, 3, 8, 8}));
  EXPECT_EQ(InferShape(ct({1, 8, 4, 4}, {8, 3, 3, 3}).ints("strides", {2, 2})
                           .ints("output_shape", {9, 8})),
            (Shape{1, 3, 9, 8}));
  // Larger than the full result: zero-padded at the end, as onnxruntime does
  // (ONNX's test_convtranspose_output_shape).
  EXPECT_EQ(InferShape(ct({1, 8, 4, 4}, {8, 3, 3, 3}).ints("output_shape", {20, 8})),
            (Shape{1, 3, 20, 8}));
  EXPECT_NE(InferError(ct({1, 8, 4, 4}, {4, 3, 3, 3})).find("input 'w'"), std::string::npos);
  EXPECT_NE(InferError(ct({1, 8, 4, 4}, {8, 3, 3, 3}).ints("output_padding", {1, 1})).find("output_padding"),
            std::string::npos);
  EXPECT_NE(InferError(ct({1, 8, 2, 2}, {8, 3, 3, 3}).ints("pads", {3, 3, 3, 3})).find("exceed"),
            std::string::npos);
}

TEST(OpsNorm, LayerAndInstance) {
  Node ln("LayerNormalization", "ln");
  ln.in(tensor("x", {2, 5, 8})).in(tensor("g", {8})).in(tensor("b", {8})).outputs(3);
  EXPECT_EQ(InferShape(ln, 0), (Shape{2, 5, 8}));
  EXPECT_EQ(InferShape(ln, 1), (Shape{2, 5, 1}));
  EXPECT_EQ(InferDtype(ln, 2), F32);
  Node ln1("LayerNormalization", "ln");
  ln1.in(tensor("x", {2, 5, 8})).in(tensor("g", {5, 8})).i("axis", 1);
  EXPECT_EQ(InferShape(ln1), (Shape{2, 5, 8}));
  Node bad("LayerNormalization", "ln");
  bad.in(tensor("x", {2, 5, 8})).in(tensor("g", {5}));
  EXPECT_NE(InferError(bad).find("input 'g' has shape 5"), std::string::npos);
  Node small("LayerNormalization", "ln");  // broadcastable but fewer elements: rejected
  small.in(tensor("x", {2, 5, 8})).in(tensor("g", {1, 8})).i("axis", 1);
  EXPECT_NE(InferError(small).find("normalized shape 5x8"), std::string::npos);

  Node in("InstanceNormalization", "in");
  in.in(tensor("x", {2, 3, 4, 4})).in(tensor("s", {3})).in(tensor("b", {3}));
  EXPECT_EQ(InferShape(in), (Shape{2, 3, 4, 4}));
  Node in_bad("InstanceNormalization", "in");
  in_bad.in(tensor("x", {2, 3, 4, 4})).in(tensor("s", {3})).in(tensor("b", {2}));
  EXPECT_NE(InferError(in_bad).find("input 'b'"), std::string::npos);
}

TEST(OpsElementwise, ActivationsAndMore) {
  for (const char* op : {"Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Tanh", "HardSwish",
                         "LogSoftmax"}) {
    EXPECT_EQ(InferShape(Node(op).in(tensor("x", {2, 3}))), (Shape{2, 3})) << op;
  }
  EXPECT_EQ(InferDtype(Node("Abs").in(tensor("x", {2}, I64))), I64);
  EXPECT_EQ(InferDtype(Node("Neg").in(tensor("x", {2}, I32))), I32);
  EXPECT_EQ(InferShape(Node("LeakyRelu").in(tensor("x", {2})).f("alpha", 0.2f)), (Shape{2}));
  EXPECT_NE(InferError(Node("LeakyRelu").in(tensor("x", {2})).i("alpha", 1)).find("type INT"),
            std::string::npos);
  EXPECT_EQ(InferShape(Node("Gelu").in(tensor("x", {2})).s("approximate", "tanh")), (Shape{2}));
  EXPECT_NE(InferError(Node("Gelu").in(tensor("x", {2})).s("approximate", "fast")).find("approximate"),
            std::string::npos);
  EXPECT_EQ(InferShape(Node("HardSigmoid").in(tensor("x", {2})).f("alpha", 0.2f).f("beta", 0.5f)),
            (Shape{2}));
  EXPECT_EQ(InferShape(Node("Elu").in(tensor("x", {3}))), (Shape{3}));

  Node prelu("PRelu", "p");
  prelu.in(tensor("x", {1, 8, 4, 4})).in(tensor("slope", {8, 1, 1}));
  EXPECT_EQ(InferShape(prelu), (Shape{1, 8, 4, 4}));
  Node prelu_bad("PRelu", "p");
  prelu_bad.in(tensor("x", {1, 8, 4, 4})).in(tensor("slope", {2, 8, 1, 1}));
  EXPECT_NE(InferError(prelu_bad).find("does not broadcast"), std::string::npos);

  Node pow("Pow", "p");
  pow.in(tensor("x", {2, 3})).in(tensor("y", {}, I64));
  EXPECT_EQ(InferShape(pow), (Shape{2, 3}));
  EXPECT_EQ(InferDtype(pow), F32);
}

TEST(OpsElementwise, ComparisonsLogicWhereCast) {
  Node eq("Equal", "e");
  eq.in(tensor("a", {2, 3}, I64)).in(tensor("b", {3}, I64));
  EXPECT_EQ(InferShape(eq), (Shape{2, 3}));
  EXPECT_EQ(InferDtype(eq), BOOL);
  Node gt("Greater", "g");
  gt.in(tensor("a", {2, 1})).in(tensor("b", {1, 4}));
  EXPECT_EQ(InferShape(gt), (Shape{2, 4}));
  Node gt_bool("Less", "l");
  gt_bool.in(tensor("a", {2}, BOOL)).in(tensor("b", {2}, BOOL));
  EXPECT_NE(InferError(gt_bool).find("dtype bool"), std::string::npos);
  Node both("And", "a");
  both.in(tensor("a", {2}, BOOL)).in(tensor("b", {2}, BOOL));
  EXPECT_EQ(InferDtype(both), BOOL);
  Node or_f("Or", "o");
  or_f.in(tensor("a", {2})).in(tensor("b", {2}));
  EXPECT_NE(InferError(or_f).find("expected bool"), std::string::npos);
  EXPECT_EQ(InferDtype(Node("Not").in(tensor("x", {2}, BOOL))), BOOL);

  Node where("Where", "w");
  where.in(tensor("c", {2, 1}, BOOL)).in(tensor("x", {1, 3}, I64)).in(tensor("y", {}, I64));
  EXPECT_EQ(InferShape(where), (Shape{2, 3}));
  EXPECT_EQ(InferDtype(where), I64);
  Node where_bad("Where", "w");
  where_bad.in(tensor("c", {2}, BOOL)).in(tensor("x", {2}, I64)).in(tensor("y", {2}));
  EXPECT_NE(InferError(where_bad).find("input 'y' has dtype float32"), std::string::npos);

  EXPECT_EQ(InferDtype(Node("Cast").in(tensor("x", {2})).i("to", 7)), I64);   // ONNX INT64
  EXPECT_EQ(InferDtype(Node("Cast").in(tensor("x", {2})).i("to", 9)), BOOL);  // ONNX BOOL
  EXPECT_NE(InferError(Node("Cast").in(tensor("x", {2})).i("to", 11)).find("ONNX type 11"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Cast").in(tensor("x", {2}))).find("'to' is required"), std::string::npos);
}

TEST(OpsElementwise, Dropout) {
  EXPECT_EQ(InferShape(Node("Dropout").in(tensor("x", {2, 3}))), (Shape{2, 3}));
  Node two("Dropout", "d");
  two.in(tensor("x", {2, 3})).outputs(2);
  EXPECT_EQ(InferDtype(two, 1), BOOL);
  EXPECT_EQ(InferShape(two, 1), (Shape{2, 3}));
  const uint8_t yes = 1, no = 0;
  Node training("Dropout", "d");
  training.in(tensor("x", {2})).in(absent()).in(tensor("t", {}, BOOL, &yes));
  EXPECT_NE(InferError(training).find("only inference"), std::string::npos);
  Node inference("Dropout", "d");
  inference.in(tensor("x", {2})).in(absent()).in(tensor("t", {}, BOOL, &no));
  EXPECT_EQ(InferShape(inference), (Shape{2}));
}

TEST(OpsShape, Split) {
  Node even("Split", "s");
  even.in(tensor("x", {2, 6})).i("axis", 1).outputs(3);
  EXPECT_EQ(InferShape(even, 2), (Shape{2, 2}));
  Node uneven("Split", "s");
  uneven.in(tensor("x", {7})).outputs(3);
  EXPECT_NE(InferError(uneven).find("not divisible"), std::string::npos);
  uneven.i("num_outputs", 3);  // opset 18: last chunk smaller
  EXPECT_EQ(InferShape(uneven, 0), (Shape{3}));
  EXPECT_EQ(InferShape(uneven, 2), (Shape{1}));
  const std::vector<int64_t> sizes = {1, 5};
  Node input("Split", "s");
  input.in(tensor("x", {6, 2})).in(tensor("split", {2}, I64, sizes.data())).outputs(2);
  EXPECT_EQ(InferShape(input, 1), (Shape{5, 2}));
  Node attr("Split", "s");
  attr.in(tensor("x", {6, 2})).ints("split", {2, 3}).outputs(2);
  EXPECT_NE(InferError(attr).find("adds up to 5"), std::string::npos);
  Node negative("Split", "s");
  negative.in(tensor("x", {6, 2})).ints("split", {7, -1}).outputs(2);
  EXPECT_NE(InferError(negative).find("negative"), std::string::npos);
  // Unknown split sizes: declared parts must tile the input along the axis.
  Node unknown("Split", "s");
  unknown.in(tensor("x", {6, 2})).in(tensor("split", {2}, I64)).outputs(2);
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(unknown.n, {tensor("a", {4, 2}), tensor("b", {2, 2})}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(unknown.n, {tensor("a", {4, 2}), tensor("b", {3, 2})}, &err));
  EXPECT_FALSE(kite::ops::check_declared_outputs(unknown.n, {tensor("a", {4, 2}), tensor("b", {2, 3})}, &err));
}

Node Slice(Shape x, std::vector<int64_t>* starts, std::vector<int64_t>* ends,
           std::vector<int64_t>* axes = nullptr, std::vector<int64_t>* steps = nullptr) {
  Node b("Slice", "sl");
  const int64_t n = static_cast<int64_t>(starts->size());
  b.in(tensor("x", std::move(x))).in(tensor("starts", {n}, I64, starts->data()))
      .in(tensor("ends", {n}, I64, ends->data()));
  if (axes || steps) b.in(axes ? tensor("axes", {n}, I64, axes->data()) : absent());
  if (steps) b.in(tensor("steps", {n}, I64, steps->data()));
  return b;
}

TEST(OpsShape, Slice) {
  std::vector<int64_t> s1 = {1, 0}, e1 = {3, -1};
  EXPECT_EQ(InferShape(Slice({4, 10}, &s1, &e1)), (Shape{2, 9}));
  std::vector<int64_t> s2 = {0}, e2 = {kMax}, a2 = {-1}, st2 = {3};
  EXPECT_EQ(InferShape(Slice({4, 10}, &s2, &e2, &a2, &st2)), (Shape{4, 4}));
  // Reverse: start clamps to dim-1, end INT64_MIN clamps to -1.
  std::vector<int64_t> s3 = {-1}, e3 = {std::numeric_limits<int64_t>::min()}, a3 = {1},
                       st3 = {-1};
  EXPECT_EQ(InferShape(Slice({4, 10}, &s3, &e3, &a3, &st3)), (Shape{4, 10}));
  std::vector<int64_t> st4 = {std::numeric_limits<int64_t>::min()};
  EXPECT_EQ(InferShape(Slice({4, 10}, &s3, &e3, &a3, &st4)), (Shape{4, 1}));
  std::vector<int64_t> s5 = {5}, e5 = {2};
  EXPECT_EQ(InferShape(Slice({10}, &s5, &e5)), (Shape{0}));
  std::vector<int64_t> st0 = {0};
  EXPECT_NE(InferError(Slice({10}, &s5, &e5, nullptr, &st0)).find("0 step"), std::string::npos);
  std::vector<int64_t> dup_s = {0, 0}, dup_e = {1, 1}, dup_a = {1, -1};
  EXPECT_NE(InferError(Slice({4, 10}, &dup_s, &dup_e, &dup_a)).find("twice"), std::string::npos);
  std::vector<int64_t> bad_a = {2};
  EXPECT_NE(InferError(Slice({4, 10}, &s5, &e5, &bad_a)).find("out of range"), std::string::npos);

  Node unknown("Slice", "sl");
  unknown.in(tensor("x", {4, 10})).in(tensor("starts", {1}, I64)).in(tensor("ends", {1}, I64));
  EXPECT_NE(InferError(unknown).find("input 'starts' value must be known"), std::string::npos);
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(unknown.n, {tensor("y", {4, 3})}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(unknown.n, {tensor("y", {4, 11})}, &err));
}

TEST(OpsShape, GatherSqueezeUnsqueeze) {
  Node g("Gather", "g");
  g.in(tensor("data", {5, 4, 3})).in(tensor("idx", {2, 6}, I64)).i("axis", 1);
  EXPECT_EQ(InferShape(g), (Shape{5, 2, 6, 3}));
  const int32_t scalar_index = -5;
  Node gs("Gather", "g");
  gs.in(tensor("data", {5, 4})).in(tensor("idx", {}, I32, &scalar_index));
  EXPECT_EQ(InferShape(gs), (Shape{4}));
  const int64_t out_of_range[] = {0, 5};
  Node gb("Gather", "g");
  gb.in(tensor("data", {5, 4})).in(tensor("idx", {2}, I64, out_of_range));
  EXPECT_NE(InferError(gb).find("holds 5 at position 1"), std::string::npos);
  Node gf("Gather", "g");
  gf.in(tensor("data", {5, 4})).in(tensor("idx", {2}));
  EXPECT_NE(InferError(gf).find("dtype float32"), std::string::npos);

  EXPECT_EQ(InferShape(Node("Squeeze").in(tensor("x", {1, 3, 1, 2}))), (Shape{3, 2}));
  EXPECT_EQ(InferShape(Node("Squeeze").in(tensor("x", {1, 3, 1, 2})).ints("axes", {-2})),
            (Shape{1, 3, 2}));
  const int64_t axes0[] = {0};
  EXPECT_EQ(InferShape(Node("Squeeze").in(tensor("x", {1, 3})).in(tensor("axes", {1}, I64, axes0))),
            (Shape{3}));
  EXPECT_NE(InferError(Node("Squeeze").in(tensor("x", {1, 3})).ints("axes", {1})).find("dim 1 is 3"),
            std::string::npos);

  const int64_t axes_u[] = {0, 3};
  EXPECT_EQ(InferShape(Node("Unsqueeze").in(tensor("x", {3, 4})).in(tensor("axes", {2}, I64, axes_u))),
            (Shape{1, 3, 4, 1}));
  EXPECT_EQ(InferShape(Node("Unsqueeze").in(tensor("x", {3, 4})).ints("axes", {-1})), (Shape{3, 4, 1}));
  EXPECT_EQ(InferShape(Node("Unsqueeze").in(tensor("x", {})).ints("axes", {0})), (Shape{1}));
  EXPECT_NE(InferError(Node("Unsqueeze").in(tensor("x", {3})).ints("axes", {0, 0})).find("twice"),
            std::string::npos);
  EXPECT_NE(InferError(Node("Unsqueeze").in(tensor("x", {3}))).find("required"), std::string::npos);
  Node unknown("Unsqueeze", "u");
  unknown.in(tensor("x", {3, 4})).in(tensor("axes", {1}, I64));
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(unknown.n, {tensor("y", {3, 1, 4})}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(unknown.n, {tensor("y", {3, 4})}, &err));
}

TEST(OpsShape, ExpandTileShapeConstantOfShapeRange) {
  const int64_t target[] = {2, 1, 6};
  Node ex("Expand", "e");
  ex.in(tensor("x", {3, 1})).in(tensor("shape", {3}, I64, target));
  EXPECT_EQ(InferShape(ex), (Shape{2, 3, 6}));
  const int64_t bad_target[] = {4, 2};
  Node exb("Expand", "e");
  exb.in(tensor("x", {3, 1})).in(tensor("shape", {2}, I64, bad_target));
  EXPECT_NE(InferError(exb).find("cannot be expanded"), std::string::npos);

  const int64_t reps[] = {2, 3};
  Node tile("Tile", "t");
  tile.in(tensor("x", {3, 4})).in(tensor("repeats", {2}, I64, reps));
  EXPECT_EQ(InferShape(tile), (Shape{6, 12}));
  const int64_t huge[] = {kMax, 1};
  Node tile_huge("Tile", "t");
  tile_huge.in(tensor("x", {3, 4})).in(tensor("repeats", {2}, I64, huge));
  EXPECT_NE(InferError(tile_huge).find("overflows"), std::string::npos);
  Node tile_rank("Tile", "t");
  tile_rank.in(tensor("x", {3, 4})).in(tensor("repeats", {3}, I64));
  EXPECT_NE(InferError(tile_rank).find("one per input dim"), std::string::npos);

  EXPECT_EQ(InferShape(Node("Shape").in(tensor("x", {2, 3, 4}))), (Shape{3}));
  EXPECT_EQ(InferShape(Node("Shape").in(tensor("x", {2, 3, 4})).i("start", -2)), (Shape{2}));
  EXPECT_EQ(InferShape(Node("Shape").in(tensor("x", {2, 3, 4})).i("start", 5)), (Shape{0}));
  EXPECT_EQ(InferDtype(Node("Shape").in(tensor("x", {2}))), I64);

  const int64_t dims[] = {2, 5};
  Node cos("ConstantOfShape", "c");
  cos.in(tensor("shape", {2}, I64, dims)).i("value_dtype", KITE_DTYPE_INT32);
  Attr value;
  value.name = "value";
  value.type = KITE_ATTR_INTS;
  value.ints = {7};
  cos.n.attrs.push_back(value);
  EXPECT_EQ(InferShape(cos), (Shape{2, 5}));
  EXPECT_EQ(InferDtype(cos), I32);
  EXPECT_EQ(InferDtype(Node("ConstantOfShape").in(tensor("shape", {2}, I64, dims))), F32);
  const int64_t negative_dims[] = {2, -5};
  EXPECT_NE(InferError(Node("ConstantOfShape").in(tensor("shape", {2}, I64, negative_dims))).find("negative"),
            std::string::npos);

  auto range = [](kite_dtype dtype, const void* a, const void* b, const void* d) {
    Node r("Range", "r");
    r.in(tensor("start", {}, dtype, a)).in(tensor("limit", {}, dtype, b)).in(tensor("delta", {}, dtype, d));
    return r;
  };
  const float f0 = 0.0f, f1 = 1.0f, f_step = 0.3f, f_zero = 0.0f;
  EXPECT_EQ(InferShape(range(F32, &f0, &f1, &f_step)), (Shape{4}));
  EXPECT_NE(InferError(range(F32, &f0, &f1, &f_zero)).find("is 0"), std::string::npos);
  const int64_t i10 = 10, i0 = 0, im3 = -3;
  EXPECT_EQ(InferShape(range(I64, &i10, &i0, &im3)), (Shape{4}));
  EXPECT_EQ(InferShape(range(I64, &i0, &i10, &im3)), (Shape{0}));
  const int64_t lo = std::numeric_limits<int64_t>::min(), one = 1;
  const int64_t big_step = kMax;
  EXPECT_EQ(InferShape(range(I64, &lo, &big_step, &big_step)), (Shape{3}));
  EXPECT_NE(InferError(range(I64, &lo, &big_step, &one)).find("overflows"), std::string::npos);
  const int32_t a32 = 1, b32 = 7, d32 = 2;
  EXPECT_EQ(InferShape(range(I32, &a32, &b32, &d32)), (Shape{3}));
  Node range_unknown("Range", "r");
  range_unknown.in(tensor("start", {}, I64)).in(tensor("limit", {}, I64)).in(tensor("delta", {}, I64));
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(range_unknown.n, {tensor("y", {17}, I64)}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(range_unknown.n, {tensor("y", {17}, F32)}, &err));
}

TEST(OpsReduce, AxesKeepdimsArgMax) {
  EXPECT_EQ(InferShape(Node("ReduceMean").in(tensor("x", {2, 3, 4})).ints("axes", {1})),
            (Shape{2, 1, 4}));
  EXPECT_EQ(InferShape(Node("ReduceMax").in(tensor("x", {2, 3, 4})).ints("axes", {-1, 0}).i("keepdims", 0)),
            (Shape{3}));
  EXPECT_EQ(InferShape(Node("ReduceSum").in(tensor("x", {2, 3, 4})).i("keepdims", 0)), (Shape{}));
  const int64_t axes[] = {2};
  EXPECT_EQ(InferShape(Node("ReduceSum").in(tensor("x", {2, 3, 4})).in(tensor("axes", {1}, I64, axes))),
            (Shape{2, 3, 1}));
  EXPECT_EQ(InferShape(Node("ReduceSum").in(tensor("x", {2, 3})).in(tensor("axes", {0}, I64))
                           .i("noop_with_empty_axes", 1)),
            (Shape{2, 3}));
  EXPECT_NE(InferError(Node("ReduceMin").in(tensor("x", {2, 3})).ints("axes", {2})).find("out of range"),
            std::string::npos);
  Node unknown("ReduceSum", "r");
  unknown.in(tensor("x", {2, 3, 4})).in(tensor("axes", {1}, I64));
  std::string err;
  EXPECT_TRUE(kite::ops::check_declared_outputs(unknown.n, {tensor("y", {2, 1, 4})}, &err)) << err;
  EXPECT_FALSE(kite::ops::check_declared_outputs(unknown.n, {tensor("y", {2, 2, 4})}, &err));

  Node arg("ArgMax", "a");
  arg.in(tensor("x", {2, 3, 4})).i("axis", 1);
  EXPECT_EQ(InferShape(arg), (Shape{2, 1, 4}));
  EXPECT_EQ(InferDtype(arg), I64);
  EXPECT_EQ(InferShape(Node("ArgMax").in(tensor("x", {2, 3, 4})).i("axis", -1).i("keepdims", 0)
                           .i("select_last_index", 1)),
            (Shape{2, 3}));
  EXPECT_NE(InferError(Node("ArgMax").in(tensor("x", {2, 0}))  .i("axis", 1)).find("empty"),
            std::string::npos);
}

TEST(OpsShape, Resize) {
  const float scales[] = {1, 1, 2, 1.5f};
  Node r("Resize", "up");
  r.in(tensor("x", {1, 3, 10, 10})).in(absent()).in(tensor("scales", {4}, F32, scales));
  EXPECT_EQ(InferShape(r), (Shape{1, 3, 20, 15}));
  const int64_t sizes[] = {1, 3, 7, 9};
  Node rs("Resize", "up");
  rs.in(tensor("x", {1, 3, 10, 10})).in(tensor("roi", {0})).in(tensor("scales", {0}))
      .in(tensor("sizes", {4}, I64, sizes));
  EXPECT_EQ(InferShape(rs), (Shape{1, 3, 7, 9}));
  const int64_t sizes2[] = {20, 30};
  Node keep("Resize", "up");
  keep.in(tensor("x", {1, 3, 10, 10})).in(absent()).in(absent()).in(tensor("sizes", {2}, I64, sizes2))
      .ints("axes", {2, 3}).s("keep_aspect_ratio_policy", "not_larger");
  EXPECT_EQ(InferShape(keep), (Shape{1, 3, 20, 20}));
  Node both("Resize", "up");
  both.in(tensor("x", {1, 3, 10, 10})).in(absent()).in(tensor("scales", {4}, F32, scales))
      .in(tensor("sizes", {4}, I64, sizes));
  EXPECT_NE(InferError(both).find("exactly one"), std::string::npos);
  const float bad_scales[] = {1, 1, -2, 1};
  Node neg("Resize", "up");
  neg.in(tensor("x", {1, 3, 10, 10})).in(absent()).in(tensor("scales", {4}, F32, bad_scales));
  EXPECT_NE(InferError(neg).find("invalid size"), std::string::npos);
  Node mode("Resize", "up");
  mode.in(tensor("x", {1, 3, 10, 10})).in(absent()).in(tensor("scales", {4}, F32, scales)).s("mode", "area");
  EXPECT_NE(InferError(mode).find("'mode'"), std::string::npos);
}

TEST(OpsShape, Pad) {
  const int64_t pads[] = {0, 1, 2, 0, 3, -1};
  Node p("Pad", "p");
  p.in(tensor("x", {2, 4, 5})).in(tensor("pads", {6}, I64, pads));
  EXPECT_EQ(InferShape(p), (Shape{2, 8, 6}));
  const int64_t axis_pads[] = {1, 2};
  const int64_t axes[] = {-1};
  Node pa("Pad", "p");
  pa.in(tensor("x", {2, 4, 5})).in(tensor("pads", {2}, I64, axis_pads)).in(tensor("v", {}))
      .in(tensor("axes", {1}, I64, axes));
  EXPECT_EQ(InferShape(pa), (Shape{2, 4, 8}));
  const int64_t big[] = {0, 5, 0, 0};
  Node reflect("Pad", "p");
  reflect.in(tensor("x", {2, 5})).in(tensor("pads", {4}, I64, big)).s("mode", "reflect");
  EXPECT_NE(InferError(reflect).find("reflect pads must be smaller"), std::string::npos);
  Node edge("Pad", "p");
  edge.in(tensor("x", {2, 5})).in(tensor("pads", {4}, I64, big)).s("mode", "edge");
  EXPECT_EQ(InferShape(edge), (Shape{2, 10}));
  const int64_t crop[] = {0, -6, 0, 0};
  Node too_much("Pad", "p");
  too_much.in(tensor("x", {2, 5})).in(tensor("pads", {4}, I64, crop));
  EXPECT_NE(InferError(too_much).find("remove more"), std::string::npos);
  EXPECT_EQ(InferShape(Node("Pad").in(tensor("x", {2, 5})).ints("pads", {1, 1, 1, 1})), (Shape{4, 7}));
  Node wrong_len("Pad", "p");
  wrong_len.in(tensor("x", {2, 5})).in(tensor("pads", {2}, I64, big));
  EXPECT_NE(InferError(wrong_len).find("expected 4"), std::string::npos);
}

TEST(OpsRecurrent, ShapesAndRefusals) {
  // LSTM, bidirectional, seq 5, batch 2, input 4, hidden 3.
  auto lstm = [](int64_t layout, const void* lens) {
    Node n("LSTM", "enc");
    const Shape x = layout == 0 ? Shape{5, 2, 4} : Shape{2, 5, 4};
    n.in(tensor("x", x)).in(tensor("w", {2, 12, 4})).in(tensor("r", {2, 12, 3})).in(absent());
    n.in(lens ? tensor("lens", {2}, I32, lens) : absent());
    n.s("direction", "bidirectional").i("hidden_size", 3).i("layout", layout).outputs(3);
    return n;
  };
  EXPECT_EQ(InferShape(lstm(0, nullptr), 0), (Shape{5, 2, 2, 3}));
  EXPECT_EQ(InferShape(lstm(0, nullptr), 2), (Shape{2, 2, 3}));
  EXPECT_EQ(InferShape(lstm(1, nullptr), 0), (Shape{2, 5, 2, 3}));
  EXPECT_EQ(InferShape(lstm(1, nullptr), 1), (Shape{2, 2, 3}));
  const int32_t full[] = {5, 5};
  EXPECT_EQ(InferShape(lstm(0, full), 0), (Shape{5, 2, 2, 3}));
  // Shorter sequences are refused, naming the node and the input.
  const int32_t ragged[] = {5, 3};
  const std::string err = InferError(lstm(0, ragged));
  EXPECT_NE(err.find("LSTM 'enc'"), std::string::npos) << err;
  EXPECT_NE(err.find("'lens' holds 3 for batch entry 1"), std::string::npos) << err;
  // R's gate count must match the op; hidden_size must match R.
  Node gru("GRU", "g");
  gru.in(tensor("x", {5, 2, 4})).in(tensor("w", {1, 12, 4})).in(tensor("r", {1, 12, 3})).outputs(2);
  EXPECT_NE(InferError(gru).find("input 'r' has shape"), std::string::npos) << InferError(gru);
  Node rnn("RNN", "r");
  rnn.in(tensor("x", {5, 2, 4})).in(tensor("w", {1, 3, 4})).in(tensor("r", {1, 3, 3})).i("hidden_size", 4);
  EXPECT_NE(InferError(rnn).find("'hidden_size' is 4"), std::string::npos) << InferError(rnn);
  Node act("RNN", "r");
  act.in(tensor("x", {5, 2, 4})).in(tensor("w", {1, 3, 4})).in(tensor("r", {1, 3, 3}));
  Attr a;
  a.name = "activations";
  a.type = KITE_ATTR_STRINGS;
  a.strings = {"Gelu"};
  act.n.attrs.push_back(a);
  EXPECT_NE(InferError(act).find("activation 'Gelu'"), std::string::npos) << InferError(act);
}

TEST(OpsRecurrent, GridSample) {
  Node n("GridSample", "gs");
  n.in(tensor("x", {2, 3, 5, 7})).in(tensor("grid", {2, 4, 6, 2}));
  EXPECT_EQ(InferShape(n), (Shape{2, 3, 4, 6}));
  Node bad("GridSample", "gs");
  bad.in(tensor("x", {1, 1, 3, 2, 2})).in(tensor("grid", {1, 2, 2, 2, 3}));
  EXPECT_NE(InferError(bad).find("4-D inputs"), std::string::npos) << InferError(bad);
  Node mode("GridSample", "gs");
  mode.in(tensor("x", {2, 3, 5, 7})).in(tensor("grid", {2, 4, 6, 2})).s("mode", "area");
  EXPECT_NE(InferError(mode).find("'mode' is 'area'"), std::string::npos) << InferError(mode);
}

TEST(OpsShape, IfIsLeftToTheConverter) {
  Node n("If", "branch");
  n.in(tensor("cond", {}, BOOL));
  EXPECT_NE(InferError(n).find("then_branch"), std::string::npos);
}

// ---- randomized hostile nodes ---------------------------------------------------------

// Random nodes for every known op, with hostile dims, dtypes, attribute types
// and values. Properties: nothing crashes (run under the sanitizers), and
// whatever infer_types accepts, check_declared_outputs accepts too, with
// outputs whose byte size fits. Fixed seed, so failures reproduce.
TEST(OpsRandomized, HostileNodesNeverCrashAndAgree) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  auto pick = [&next](uint64_t n) { return static_cast<int64_t>(next() % n); };
  const int64_t dim_values[] = {0, 1, 1, 2, 3, 4, 5, 7, 8, -1, kMax, kMax / 3, 1 << 20};
  const int64_t int_values[] = {-3, -2, -1, 0, 0, 1, 1, 2, 3, 4, 7, kMax,
                                std::numeric_limits<int64_t>::min()};
  const kite_dtype dtypes[] = {F32, F32, F32, I64, I64, I32, BOOL, KITE_DTYPE_FLOAT16,
                               KITE_DTYPE_INT8, KITE_DTYPE_UINT8, KITE_DTYPE_UNDEFINED};
  const char* attr_names[] = {"axis", "axes", "perm", "group", "strides", "pads", "dilations",
                              "kernel_shape", "auto_pad", "ceil_mode", "keepdims", "split",
                              "starts", "ends", "transA", "transB", "allowzero", "to", "mode",
                              "output_padding", "output_shape", "num_outputs", "value_dtype",
                              "value", "start", "end", "noop_with_empty_axes", "epsilon"};
  const char* strings[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant",
                           "reflect", "edge", "nearest", "linear", "bogus"};
  std::vector<std::vector<uint8_t>> buffers;
  int inferred = 0;
  for (int iteration = 0; iteration < 40000; ++iteration) {
    const auto ops = kite::ops::known_ops();
    Node b(ops[static_cast<size_t>(pick(ops.size()))], "r");
    b.outputs(pick(3) ? 1 : static_cast<int>(pick(4)));
    const int64_t num_inputs = pick(6);
    const kite_dtype node_dtype = dtypes[pick(4)];  // mostly one dtype per node
    buffers.clear();
    buffers.reserve(8);
    for (int64_t i = 0; i < num_inputs; ++i) {
      if (pick(8) == 0) {
        b.in(absent());
        continue;
      }
      Shape shape;
      const int64_t rank = pick(10) < 8 ? pick(5) : pick(10);
      for (int64_t k = 0; k < rank; ++k) shape.push_back(dim_values[pick(13) < 9 ? pick(9) : pick(13)]);
      const kite_dtype dtype = pick(4) ? node_dtype : dtypes[pick(11)];
      TensorType t = tensor("in" + std::to_string(i), shape, dtype);
      int64_t numel = 0;
      if (pick(2) == 0 && kite::ops::checked_numel(shape, &numel) && numel <= 64 &&
          kite::ops::dtype_size(dtype) > 0) {
        std::vector<uint8_t> bytes(static_cast<size_t>(numel) * kite::ops::dtype_size(dtype) + 1);
        for (size_t k = 0; k + 8 <= bytes.size(); k += 8) {
          const int64_t v = int_values[pick(13)];
          std::memcpy(&bytes[k], &v, 8);
        }
        if (dtype == I32) {
          for (size_t k = 0; k + 4 <= bytes.size(); k += 4) {
            const int32_t v = static_cast<int32_t>(int_values[pick(10)]);
            std::memcpy(&bytes[k], &v, 4);
          }
        }
        buffers.push_back(std::move(bytes));
        t.data = buffers.back().data();
      }
      b.in(t);
    }
    const int64_t num_attrs = pick(5);
    for (int64_t a = 0; a < num_attrs; ++a) {
      const std::string name = attr_names[pick(28)];
      switch (pick(4)) {
        case 0: b.i(name, int_values[pick(13)]); break;
        case 1: b.f(name, pick(2) ? 0.5f : -1.0f); break;
        case 2: b.s(name, strings[pick(10)]); break;
        default: {
          Shape v;
          const int64_t n = pick(7);
          for (int64_t k = 0; k < n; ++k) v.push_back(int_values[pick(13) < 11 ? pick(11) : pick(13)]);
          b.ints(name, v);
        }
      }
    }
    std::vector<TensorType> outs;
    std::string err;
    if (!kite::ops::infer_types(b.n, &outs, &err)) {
      EXPECT_FALSE(err.empty());
      EXPECT_EQ(err.rfind(b.n.label(), 0), 0u) << err;
      continue;
    }
    ++inferred;
    for (const TensorType& o : outs) {
      uint64_t bytes = 0;
      EXPECT_TRUE(kite::ops::checked_byte_size(o.dtype, o.shape, &bytes))
          << b.n.op << " inferred " << kite::ops::shape_string(o.shape);
      EXPECT_LE(o.rank(), KITE_MAX_RANK);
    }
    EXPECT_TRUE(kite::ops::check_declared_outputs(b.n, outs, &err)) << err;
  }
  // The generator must reach the success path often enough to mean something.
  EXPECT_GT(inferred, 500);
}

}  // namespace
