// Pre-packed weight forms (format 1.1, kite-convert --pack-for): the CPU
// kernels read the file's form from the mapping instead of packing at load,
// give the same bits as when they pack at load, refuse a form of the wrong
// size naming tensor and key, fall back (and say so in the placement) when
// the file has no form for this process's ISA level; the loader refuses
// malformed form tables; files of format 1.0 still load and agree.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/weight_pack.h"
#include "kite/kite.h"
#include "kite/kite_generated.h"
#include "src/pack_weights.h"
#include "test_models.h"

namespace {

using kite::ir::Model;
using kite::test::make_const;
using kite::test::make_node;
using kite::test::make_tensor;
namespace wp = kite::cpu::weight_pack;

std::vector<float> ramp(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 37 + static_cast<size_t>(seed) * 11) % 23) - 11) / 16.0f;
  }
  return v;
}

kite::ir::Attr int_attr(const std::string& name, int64_t v) {
  kite::ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_INT;
  a.i = v;
  return a;
}
kite::ir::Attr ints_attr(const std::string& name, std::vector<int64_t> v) {
  kite::ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}
kite::ir::Attr float_attr(const std::string& name, float v) {
  kite::ir::Attr a;
  a.name = name;
  a.type = KITE_ATTR_FLOAT;
  a.f = v;
  return a;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// One node y = op(x, w[, b]) with x an input and w (and b) constants.
struct OneNode {
  std::string op;
  std::vector<int64_t> x, w, b, y;
  std::vector<kite::ir::Attr> attrs;
  bool weight_first = false;  // w is input 0 (a constant A), x input 1
};

Model one_node_model(const OneNode& c) {
  Model m;
  m.source_opset = 17;
  m.producer = "kite-test";
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, c.x, kite::ir::TensorKind::Input));
  const int w = m.add_tensor(make_const("w", c.w, ramp(static_cast<size_t>(numel(c.w)), 1)));
  std::vector<int> inputs = c.weight_first ? std::vector<int>{w, x} : std::vector<int>{x, w};
  if (!c.b.empty()) inputs.push_back(m.add_tensor(make_const("b", c.b, ramp(static_cast<size_t>(numel(c.b)), 2))));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, c.y, kite::ir::TensorKind::Output));
  kite::ir::Graph g;
  g.name = "main";
  g.inputs = {x};
  g.outputs = {y};
  g.nodes = {make_node("n0", c.op, inputs, {y}, c.attrs)};
  m.graphs.push_back(g);
  return m;
}

std::vector<OneNode> sweep() {
  std::vector<OneNode> cases;
  // Conv: 3x3 pad 1, 1x1, strided and dilated, grouped, 1-D and 3-D.
  cases.push_back({"Conv", {1, 5, 7, 6}, {4, 5, 3, 3}, {4}, {1, 4, 7, 6}, {ints_attr("pads", {1, 1, 1, 1})}});
  cases.push_back({"Conv", {2, 7, 5, 5}, {9, 7, 1, 1}, {}, {2, 9, 5, 5}, {}});
  cases.push_back({"Conv", {1, 6, 9, 8}, {8, 3, 3, 2}, {8}, {1, 8, 3, 3},
                   {int_attr("group", 2), ints_attr("strides", {2, 2}), ints_attr("dilations", {2, 3})}});
  cases.push_back({"Conv", {1, 4, 11}, {7, 4, 3}, {7}, {1, 7, 9}, {}});
  cases.push_back({"Conv", {1, 3, 4, 4, 4}, {5, 3, 2, 2, 2}, {5}, {1, 5, 3, 3, 3}, {}});
  // 3x3 stride 1: Winograd, weights in layout wino43-a6 (24x24) or
  // wino23-a6 (10x10).
  cases.push_back({"Conv", {1, 4, 24, 24}, {6, 4, 3, 3}, {6}, {1, 6, 24, 24}, {ints_attr("pads", {1, 1, 1, 1})}});
  cases.push_back({"Conv", {1, 4, 10, 10}, {6, 4, 3, 3}, {6}, {1, 6, 10, 10}, {ints_attr("pads", {1, 1, 1, 1})}});
  // ConvTranspose, plain and grouped.
  cases.push_back({"ConvTranspose", {1, 4, 3, 3}, {4, 5, 3, 3}, {5}, {1, 5, 5, 5}, {}});
  cases.push_back({"ConvTranspose", {1, 6, 4, 4}, {6, 2, 2, 2}, {}, {1, 6, 8, 8},
                   {int_attr("group", 3), ints_attr("strides", {2, 2})}});
  // Gemm: B plain and transposed, a constant A (alpha 1 has a form).
  cases.push_back({"Gemm", {5, 13}, {13, 7}, {7}, {5, 7}, {}});
  cases.push_back({"Gemm", {3, 10}, {17, 10}, {17}, {3, 17}, {int_attr("transB", 1)}});
  OneNode ga{"Gemm", {6, 4}, {6, 9}, {}, {9, 4}, {int_attr("transA", 1)}};
  ga.weight_first = true;
  cases.push_back(ga);
  OneNode ga2{"Gemm", {9, 4}, {6, 9}, {}, {6, 4}, {float_attr("alpha", 0.5f)}};
  ga2.weight_first = true;
  cases.push_back(ga2);  // A's form scaled by alpha (layout gemm-a6-x3f000000)
  // MatMul: 2-D B under a batched A, a batched B, a constant A.
  cases.push_back({"MatMul", {2, 3, 11}, {11, 13}, {}, {2, 3, 13}, {}});
  cases.push_back({"MatMul", {3, 4, 5}, {3, 5, 9}, {}, {3, 4, 9}, {}});
  OneNode ma{"MatMul", {2, 8, 6}, {7, 8}, {}, {2, 7, 6}, {}};
  ma.weight_first = true;
  cases.push_back(ma);
  return cases;
}

std::string label(const OneNode& c) {
  std::string s = c.op + " w" + kite::ops::shape_string(c.w);
  for (const auto& a : c.attrs) s += " " + a.name;
  return s;
}

Model with_forms(Model m, const std::vector<std::string>& levels) {
  std::string err;
  EXPECT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  EXPECT_TRUE(kite::converter::add_packed_forms(&m, levels, &err)) << err;
  return m;
}

struct Session {
  kite_model* model = nullptr;
  kite_session_options* options = nullptr;
  kite_session* session = nullptr;
  std::vector<uint8_t> bytes;
  kite_status created = KITE_ERROR_INTERNAL;
  std::string error;
  explicit Session(const Model& in, const char* winograd = nullptr, int threads = 0,
                   const char* adaptive = nullptr) {
    Model m = in;
    std::string err;
    if (m.plan.offsets.size() != m.tensors.size()) kite::memory::plan_memory(&m, 256, &err);
    bytes = kite::test::serialize_or_die(m);
    if (kite_model_load_memory(bytes.data(), bytes.size(), &model) != KITE_OK) {
      error = kite_last_error();
      return;
    }
    kite_session_options_create(&options);
    kite_session_options_set_backends(options, "cpu");
    if (winograd) kite_session_options_set_backend_option(options, "cpu", "winograd", winograd);
    if (adaptive) kite_session_options_set_backend_option(options, "cpu", "adaptive", adaptive);
    if (threads > 0) {
      kite_session_options_set_threads(options, threads);
      kite_session_options_set_poison(options, 1);  // a value a run skips is NaN, not the last run's
    }
    created = kite_session_create(model, options, &session);
    if (created != KITE_OK) error = kite_last_error();
  }
  ~Session() {
    kite_session_destroy(session);
    kite_session_options_destroy(options);
    kite_model_destroy(model);
  }
  std::vector<float> run(const std::vector<float>& x, size_t out_floats) {
    std::vector<float> y(out_floats, NAN);
    EXPECT_EQ(kite_session_set_input(session, 0, x.data(), x.size() * 4), KITE_OK) << kite_last_error();
    EXPECT_EQ(kite_session_run(session), KITE_OK) << kite_last_error();
    EXPECT_EQ(kite_session_get_output(session, 0, y.data(), y.size() * 4), KITE_OK) << kite_last_error();
    return y;
  }
  std::string reasons() const {
    std::string all;
    int32_t count = 0;
    kite_session_get_node_count(session, &count);
    for (int32_t i = 0; i < count; ++i) {
      kite_node_placement p{};
      kite_session_get_node_placement(session, i, &p);
      all += std::string(p.reason ? p.reason : "") + "\n";
    }
    return all;
  }
};

TEST(PackedForms, SameBitsAsPackingAtLoadOverASweep) {
  for (const OneNode& c : sweep()) {
    SCOPED_TRACE(label(c));
    const Model plain = one_node_model(c);
    const Model packed = with_forms(plain, {wp::host_isa()});
    ASSERT_EQ(packed.packed.size(), 1u);
    const std::vector<float> x = ramp(static_cast<size_t>(numel(c.x)), 3);
    Session a(plain), b(packed);
    ASSERT_EQ(a.created, KITE_OK) << a.error;
    ASSERT_EQ(b.created, KITE_OK) << b.error;
    // The plain file says its weights are packed at load; the packed one
    // does not.
    EXPECT_NE(a.reasons().find("weights packed at load"), std::string::npos) << a.reasons();
    EXPECT_EQ(b.reasons().find("weights packed at load"), std::string::npos) << b.reasons();
    const size_t n = static_cast<size_t>(numel(c.y));
    const std::vector<float> ya = a.run(x, n), yb = b.run(x, n);
    // The same packing code and kernels either way: identical bits.
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(std::memcmp(&ya[i], &yb[i], 4), 0) << "element " << i;
  }
}

TEST(PackedForms, FusedNodesAndTheirBodiesFindTheForms) {
  const Model plain = kite::test::conv_relu_add_model(true);
  const Model packed = with_forms(plain, {wp::host_isa()});
  ASSERT_EQ(packed.packed.size(), 1u);  // the fused node and its body Conv share one
  const std::vector<float> x = ramp(100, 4);
  Session a(plain), b(packed);
  ASSERT_EQ(b.created, KITE_OK) << b.error;
  EXPECT_EQ(b.reasons().find("weights packed at load"), std::string::npos) << b.reasons();
  EXPECT_EQ(a.run(x, 100), b.run(x, 100));
}

TEST(PackedForms, TheKernelReadsTheFilesForm) {
  // A form of zeros (right size) gives a Conv whose output is its bias: the
  // kernel used the file's bytes, not a packing of its own.
  const OneNode c{"Conv", {1, 3, 4, 4}, {2, 3, 3, 3}, {2}, {1, 2, 2, 2}, {}};
  Model m = with_forms(one_node_model(c), {wp::host_isa()});
  ASSERT_EQ(m.packed.size(), 1u);
  std::fill(m.packed[0].data.begin(), m.packed[0].data.end(), 0);
  Session s(m);
  ASSERT_EQ(s.created, KITE_OK) << s.error;
  const std::vector<float> bias = ramp(2, 2);
  const std::vector<float> y = s.run(ramp(48, 5), 8);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], bias[i / 4]) << i;
}

TEST(PackedForms, WrongSizeIsRefusedNamingTensorAndKey) {
  const OneNode c{"Gemm", {2, 6}, {6, 5}, {}, {2, 5}, {}};
  Model m = with_forms(one_node_model(c), {wp::host_isa()});
  ASSERT_EQ(m.packed.size(), 1u);
  m.packed[0].data.resize(m.packed[0].data.size() - 4);
  Session s(m);
  EXPECT_EQ(s.created, KITE_ERROR_INVALID_MODEL);
  const std::string key = wp::key(wp::host_isa(), "gemm-b8");
  EXPECT_NE(s.error.find(key), std::string::npos) << s.error;
  EXPECT_NE(s.error.find("'w'"), std::string::npos) << s.error;
  EXPECT_NE(s.error.find("n0"), std::string::npos) << s.error;
}

TEST(PackedForms, AnotherLevelsFormIsNotUsedAndThePlacementSaysSo) {
  const std::string other = wp::host_isa() == "portable" ? "x86-avx2" : "portable";
  const OneNode c{"MatMul", {4, 9}, {9, 10}, {}, {4, 10}, {}};
  Model m = with_forms(one_node_model(c), {other});
  ASSERT_EQ(m.packed.size(), 1u);
  std::fill(m.packed[0].data.begin(), m.packed[0].data.end(), 0);  // would give zeros if used
  Session s(m), plain(one_node_model(c));
  ASSERT_EQ(s.created, KITE_OK) << s.error;
  EXPECT_NE(s.reasons().find("weights packed at load (the file has no " + wp::key(wp::host_isa(), "gemm-b8")),
            std::string::npos)
      << s.reasons();
  const std::vector<float> x = ramp(36, 6);
  EXPECT_EQ(s.run(x, 40), plain.run(x, 40));
}

TEST(PackedForms, OneBlobServesEveryLevel) {
  // (Five input channels: four or fewer are a stem, a layout of its own on
  // x86-avx512 and x86-avx2, below.)
  const OneNode c{"Conv", {1, 5, 5, 5}, {3, 5, 3, 3}, {3}, {1, 3, 3, 3}, {}};
  const Model m = with_forms(one_node_model(c), wp::isa_names());
  ASSERT_EQ(m.packed.size(), 1u);
  EXPECT_EQ(m.packed[0].keys.size(), wp::isa_names().size());
  Session s(m);
  ASSERT_EQ(s.created, KITE_OK) << s.error;
  EXPECT_EQ(s.reasons().find("weights packed at load"), std::string::npos) << s.reasons();
}

TEST(PackedForms, StemConvsHaveAnX86LayoutOfTheirOwn) {
  // Three input channels, 3x3 stride 2: the stem kernel on x86-avx512 and
  // x86-avx2 (stem.h) reads "stem-w8"; every other level the GEMM's panels.
  // Two forms, each under its levels' keys only.
  const OneNode c{"Conv", {1, 3, 9, 9}, {10, 3, 3, 3}, {10}, {1, 10, 5, 5},
                  {ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1})}};
  const Model plain = one_node_model(c);
  Model m = with_forms(plain, wp::isa_names());
  ASSERT_EQ(m.packed.size(), 2u);
  std::vector<std::string> stem_keys, panel_keys;
  for (const auto& f : m.packed) {
    for (const std::string& k : f.keys) (k.find("stem-w8") != std::string::npos ? stem_keys : panel_keys).push_back(k);
  }
  std::sort(stem_keys.begin(), stem_keys.end());
  EXPECT_EQ(stem_keys, (std::vector<std::string>{wp::key("x86-avx2", "stem-w8"), wp::key("x86-avx512", "stem-w8")}));
  EXPECT_EQ(panel_keys.size(), wp::isa_names().size() - 2);
  for (const std::string& k : panel_keys) EXPECT_NE(k.find("conv-a6-g1"), std::string::npos) << k;
  const std::vector<float> x = ramp(3 * 81, 3);
  Session s(m), p(plain);
  ASSERT_EQ(s.created, KITE_OK) << s.error;
  EXPECT_EQ(s.reasons().find("weights packed at load"), std::string::npos) << s.reasons();
  // The file's form and one arranged at load: the same kernel, the same bits.
  EXPECT_EQ(s.run(x, 250), p.run(x, 250));
  if (wp::host_isa() != "x86-avx512" && wp::host_isa() != "x86-avx2") return;
  EXPECT_NE(p.reasons().find("weights packed at load (the file has no " + wp::key(wp::host_isa(), "stem-w8")),
            std::string::npos)
      << p.reasons();
  // A stem form of zeros gives the bias: the kernel read the file's bytes.
  for (auto& f : m.packed) {
    if (f.keys[0].find("stem-w8") != std::string::npos) std::fill(f.data.begin(), f.data.end(), 0);
  }
  Session zeros(m);
  ASSERT_EQ(zeros.created, KITE_OK) << zeros.error;
  const std::vector<float> bias = ramp(10, 2), y = zeros.run(x, 250);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], bias[i / 25]) << i;
}

TEST(PackedForms, DepthwiseConvsHaveAnAvx512LayoutOfTheirOwn) {
  // Twenty channels (a block of sixteen and a tail of four), 3x3, one
  // channel a group: on x86-avx512 and x86-avx2 the kernel runs them
  // sixteen at a time (depthwise::Channels) reading "dw-c16"; the other
  // levels read the weights as they are and have no form.
  const OneNode c{"Conv", {1, 20, 9, 9}, {20, 1, 3, 3}, {20}, {1, 20, 9, 9},
                  {int_attr("group", 20), ints_attr("pads", {1, 1, 1, 1})}};
  const Model plain = one_node_model(c);
  Model m = with_forms(plain, wp::isa_names());
  ASSERT_EQ(m.packed.size(), 1u);
  EXPECT_EQ(m.packed[0].keys,
            (std::vector<std::string>{wp::key("x86-avx512", "dw-c16"), wp::key("x86-avx2", "dw-c16")}));
  // Two blocks of sixteen lanes by nine taps.
  EXPECT_EQ(m.packed[0].data.size(), 2u * 9 * 16 * sizeof(float));
  const std::vector<float> x = ramp(20 * 81, 3);
  Session s(m), p(plain);
  ASSERT_EQ(s.created, KITE_OK) << s.error;
  ASSERT_EQ(p.created, KITE_OK) << p.error;
  EXPECT_EQ(s.reasons().find("weights packed at load"), std::string::npos) << s.reasons();
  // The file's form and one arranged at load: the same kernel, the same bits.
  EXPECT_EQ(s.run(x, 20 * 81), p.run(x, 20 * 81));
  if (wp::host_isa() != "x86-avx512" && wp::host_isa() != "x86-avx2") return;
  EXPECT_NE(p.reasons().find("weights packed at load (the file has no " + wp::key(wp::host_isa(), "dw-c16")),
            std::string::npos)
      << p.reasons();
  // A form of zeros gives the bias: the kernel read the file's bytes.
  std::fill(m.packed[0].data.begin(), m.packed[0].data.end(), 0);
  Session zeros(m);
  ASSERT_EQ(zeros.created, KITE_OK) << zeros.error;
  const std::vector<float> bias = ramp(20, 2), y = zeros.run(x, 20 * 81);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], bias[i / 81]) << i;
}

TEST(PackedForms, WinogradConvsReadTheTransformedForm) {
  // The converter writes the 3x3 weights transformed (the matrices of
  // G g G^T); a form of zeros gives the bias, so the kernel read it. With
  // the backend's winograd=0 the im2col kernel needs the plain layout, which
  // this file lacks: packed at load, and the placement says which.
  for (const int64_t size : {24, 10}) {
    const std::string layout = size == 24 ? "wino43-a6" : "wino23-a6";
    SCOPED_TRACE(layout);
    const int64_t pixels = size * size;
    // (Five input channels: four or fewer would be a stem, stem.h.)
    const OneNode c{"Conv", {1, 5, size, size}, {6, 5, 3, 3}, {6}, {1, 6, size, size},
                    {ints_attr("pads", {1, 1, 1, 1})}};
    const Model plain = one_node_model(c);
    Model m = with_forms(plain, {wp::host_isa()});
    ASSERT_EQ(m.packed.size(), 1u);
    ASSERT_EQ(m.packed[0].keys.size(), 1u);
    EXPECT_EQ(m.packed[0].keys[0], wp::key(wp::host_isa(), layout));
    const std::vector<float> x = ramp(static_cast<size_t>(5 * pixels), 7);
    const size_t out = static_cast<size_t>(6 * pixels);
    Session off(m, "0"), on(m), off_plain(plain, "0");
    ASSERT_EQ(off.created, KITE_OK) << off.error;
    EXPECT_NE(off.reasons().find("weights packed at load (the file has no " + wp::key(wp::host_isa(), "conv-a6-g1")),
              std::string::npos)
        << off.reasons();
    EXPECT_EQ(on.reasons().find("weights packed at load"), std::string::npos) << on.reasons();
    // winograd=0 is the im2col kernel whatever the file holds.
    EXPECT_EQ(off.run(x, out), off_plain.run(x, out));
    std::fill(m.packed[0].data.begin(), m.packed[0].data.end(), 0);
    Session zeros(m);
    ASSERT_EQ(zeros.created, KITE_OK) << zeros.error;
    const std::vector<float> bias = ramp(6, 2), y = zeros.run(x, out);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], bias[i / static_cast<size_t>(pixels)]) << i;
  }
}

// ---- the loader's checks of the form table ----

kite_status load_status(const std::vector<uint8_t>& bytes, std::string* message) {
  kite_model* model = nullptr;
  const kite_status s = kite_model_load_memory(bytes.data(), bytes.size(), &model);
  *message = kite_last_error();
  kite_model_destroy(model);
  return s;
}

std::vector<uint8_t> packed_gemm_bytes(std::vector<std::string> keys = {}) {
  Model m = with_forms(one_node_model({"Gemm", {2, 6}, {6, 5}, {}, {2, 5}, {}}), {wp::host_isa()});
  if (!keys.empty()) m.packed[0].keys = keys;
  return kite::test::serialize_or_die(m);
}

TEST(PackedFormsLoader, RefusesABadTensorIndexANonConstantAndABadBlob) {
  std::string msg;
  auto bytes = packed_gemm_bytes();
  auto* form = kite::fb::GetMutableModel(bytes.data())->mutable_packed()->GetMutableObject(0);
  ASSERT_TRUE(form->mutate_tensor(77));
  EXPECT_EQ(load_status(bytes, &msg), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(msg.find("names tensor 77, out of range"), std::string::npos) << msg;
  ASSERT_TRUE(form->mutate_tensor(0));  // x, the graph input
  EXPECT_EQ(load_status(bytes, &msg), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(msg.find("tensor 0 'x': the tensor is not a constant"), std::string::npos) << msg;
  ASSERT_TRUE(form->mutate_tensor(1));
  ASSERT_TRUE(form->mutate_blob(9));
  EXPECT_EQ(load_status(bytes, &msg), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(msg.find("blob index 9 out of range"), std::string::npos) << msg;
  ASSERT_TRUE(form->mutate_blob(1));
  EXPECT_EQ(load_status(bytes, &msg), KITE_OK) << msg;
}

TEST(PackedFormsLoader, RefusesDuplicateAndUnprintableKeys) {
  std::string msg;
  EXPECT_EQ(load_status(packed_gemm_bytes({"cpu/a/b", "cpu/a/b"}), &msg), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(msg.find("two forms with this key"), std::string::npos) << msg;
  EXPECT_EQ(load_status(packed_gemm_bytes({"cpu/a b"}), &msg), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(msg.find("not printable ASCII"), std::string::npos) << msg;
  EXPECT_EQ(load_status(packed_gemm_bytes({""}), &msg), KITE_ERROR_INVALID_MODEL);
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
}

// ---- files of every earlier minor version ----

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream f(std::string(KITE_SOURCE_DIR) + "/tests/data/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A 2-thread session's small runs go spread over the threads or all on the
// caller, whichever its timings say is faster (cpu_backend.cpp, run_mode.h),
// so both ways must give the bits of a 1-thread session, run after run:
// kernels whose chunks are cut by pixels, by channels, by Winograd blocks or
// channel shares, by depthwise channel blocks, by halves of k, and a MatMul. Spread:
// adaptive=0; on the caller: adaptive=inline; and the chooser itself for
// 60 ms of runs (its first trials on the caller come after kWarmNs, 5 ms).
TEST(ThreadCount, TwoThreadRunsEitherWayHaveOneThreadsBits) {
  std::vector<OneNode> cases;
  const kite::ir::Attr pads = ints_attr("pads", {1, 1, 1, 1});
  cases.push_back({"Conv", {1, 16, 56, 56}, {32, 16, 3, 3}, {32}, {1, 32, 56, 56}, {pads}});
  cases.push_back({"Conv", {1, 64, 13, 13}, {64, 64, 3, 3}, {64}, {1, 64, 13, 13}, {pads}});
  cases.push_back({"Conv", {1, 32, 27, 27}, {128, 32, 3, 3}, {128}, {1, 128, 27, 27}, {pads}});
  cases.push_back({"Conv", {1, 64, 28, 28}, {64, 64, 1, 1}, {64}, {1, 64, 28, 28}, {}});
  cases.push_back({"Conv", {1, 64, 14, 14}, {96, 64, 1, 1}, {96}, {1, 96, 14, 14}, {}});
  // Projections whose k is summed in two halves (sgemm::k_split_at): B
  // read in place on 14x14, packed on 7x7 (a lone last column).
  cases.push_back({"Conv", {1, 576, 14, 14}, {96, 576, 1, 1}, {96}, {1, 96, 14, 14}, {}});
  cases.push_back({"Conv", {1, 960, 7, 7}, {160, 960, 1, 1}, {160}, {1, 160, 7, 7}, {}});
  cases.push_back({"Conv", {1, 96, 28, 28}, {96, 1, 3, 3}, {96}, {1, 96, 28, 28}, {pads, int_attr("group", 96)}});
  cases.push_back({"MatMul", {1, 197, 96}, {96, 64}, {}, {1, 197, 64}, {}});
  for (const OneNode& c : cases) {
    SCOPED_TRACE(label(c));
    const Model m = one_node_model(c);
    Session one(m, nullptr, 1);
    ASSERT_EQ(one.created, KITE_OK) << one.error;
    // Inputs of full 24-bit mantissas: with ramp's sixteenths every
    // product and sum of these GEMMs is exact, and a summation order that
    // changed with the threads would go unseen.
    std::vector<float> x(static_cast<size_t>(numel(c.x)));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.1));
    const size_t out = static_cast<size_t>(numel(c.y));
    const std::vector<float> want = one.run(x, out);
    for (const char* adaptive : {"0", "inline", "1"}) {
      SCOPED_TRACE(std::string("adaptive=") + adaptive);
      Session two(m, nullptr, 2, adaptive);
      ASSERT_EQ(two.created, KITE_OK) << two.error;
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < 10 || (adaptive[0] == '1' && std::chrono::steady_clock::now() - start <
                                                          std::chrono::milliseconds(60));
           ++r) {
        const std::vector<float> got = two.run(x, out);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), out * sizeof(float)), 0) << "run " << r;
      }
    }
  }
}

// A value the option does not take fails the session, naming it.
TEST(ThreadCount, AdaptiveOptionNamesAValueItDoesNotTake) {
  const Model m = one_node_model({"Conv", {1, 8, 8, 8}, {8, 8, 1, 1}, {8}, {1, 8, 8, 8}, {}});
  Session s(m, nullptr, 2, "sometimes");
  EXPECT_NE(s.created, KITE_OK);
  EXPECT_NE(s.error.find("adaptive=sometimes: expected 0, 1 or inline"), std::string::npos) << s.error;
}

TEST(FormatVersions, Format10And11FilesLoadAndAgree) {
  // The digits CNN (batch 1) as kite-convert wrote it at format 1.0 and at
  // 1.1 with forms for every level.
  struct Loaded {
    std::vector<uint8_t> bytes;
    kite_model* model = nullptr;
  } files[2];
  files[0].bytes = read_file("format_1_0_digits.kite");
  files[1].bytes = read_file("format_1_1_digits.kite");
  std::vector<float> outputs[2];
  const std::vector<float> image = ramp(64, 7);
  for (int v = 0; v < 2; ++v) {
    ASSERT_FALSE(files[v].bytes.empty());
    kite_model* model = nullptr;
    ASSERT_EQ(kite_model_load_memory(files[v].bytes.data(), files[v].bytes.size(), &model), KITE_OK)
        << kite_last_error();
    int32_t major = 0, minor = -1;
    kite_model_get_format_version(model, &major, &minor);
    EXPECT_EQ(major, 1);
    EXPECT_EQ(minor, v);
    kite_session* session = nullptr;
    ASSERT_EQ(kite_session_create(model, nullptr, &session), KITE_OK) << kite_last_error();
    int32_t count = 0;
    kite_session_get_node_count(session, &count);
    std::string reasons;
    for (int32_t i = 0; i < count; ++i) {
      kite_node_placement p{};
      kite_session_get_node_placement(session, i, &p);
      reasons += std::string(p.reason ? p.reason : "") + "\n";
    }
    // 1.0 has no forms: the CPU packs at load and says so; 1.1 has them,
    // except the stem layout (x86-avx512's "stem-w8" and x86-avx2's, added
    // after this file was written): its convolution with one input channel
    // says so.
    std::string others = reasons;
    for (const char* isa : {"x86-avx512", "x86-avx2"}) {
      const std::string stem_note = std::string("weights packed at load (the file has no cpu/") + isa + "/stem-w8)";
      for (size_t at; (at = others.find(stem_note)) != std::string::npos;) others.erase(at, stem_note.size());
    }
    EXPECT_EQ(others.find("weights packed at load") != std::string::npos, v == 0) << reasons;
    outputs[v].assign(10, NAN);
    ASSERT_EQ(kite_session_set_input(session, 0, image.data(), image.size() * 4), KITE_OK) << kite_last_error();
    ASSERT_EQ(kite_session_run(session), KITE_OK) << kite_last_error();
    ASSERT_EQ(kite_session_get_output(session, 0, outputs[v].data(), 40), KITE_OK) << kite_last_error();
    kite_session_destroy(session);
    kite_model_destroy(model);
  }
  // Same graph, same kernels, same packing: identical bits.
  EXPECT_EQ(outputs[0], outputs[1]);
}

}  // namespace
