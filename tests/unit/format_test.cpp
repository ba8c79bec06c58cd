// Format round trip: write a model with every kind of field, load it through
// the runtime's verifier, and compare every field.
#include <gtest/gtest.h>

#include "model.h"
#include "test_models.h"

namespace {

using kite::ir::TensorKind;

kite::ir::Model rich_model() {
  using kite::test::make_const;
  using kite::test::make_tensor;
  kite::ir::Model m;
  m.source_opset = 17;
  m.producer = "round-trip";
  const int x = m.add_tensor(make_tensor("x", KITE_DTYPE_FLOAT32, {1, 2, 3}, TensorKind::Input));
  const int cond = m.add_tensor(make_tensor("cond", KITE_DTYPE_BOOL, {}, TensorKind::Input));
  const int w = m.add_tensor(make_const("w", {3}, {1.5f, -2.0f, 0.25f}));
  const int i64 = m.add_tensor(make_tensor("shape", KITE_DTYPE_INT64, {2}, TensorKind::Constant));
  m.tensors[static_cast<size_t>(i64)].data.resize(16);
  int64_t dims[2] = {2, 3};
  std::memcpy(m.tensors[static_cast<size_t>(i64)].data.data(), dims, 16);
  const int s = m.add_tensor(make_tensor("scratch", KITE_DTYPE_FLOAT32, {1, 2, 3}, TensorKind::Scratch));
  const int y = m.add_tensor(make_tensor("y", KITE_DTYPE_FLOAT32, {1, 2, 3}, TensorKind::Output));
  const int z = m.add_tensor(make_tensor("z", KITE_DTYPE_FLOAT32, {1, 2, 3}, TensorKind::Output));
  const int t_out = m.add_tensor(make_tensor("then_out", KITE_DTYPE_FLOAT32, {1, 2, 3}, TensorKind::Activation));
  const int e_out = m.add_tensor(make_tensor("else_out", KITE_DTYPE_FLOAT32, {1, 2, 3}, TensorKind::Activation));

  kite::ir::Node fused;
  fused.name = "fused0";
  fused.op = "FusedAddRelu";
  fused.domain = "kite";
  fused.fused_pattern = "add_relu";
  fused.inputs = {x, w, -1};
  fused.outputs = {y};
  kite::ir::Attr ai;
  ai.name = "axis"; ai.type = KITE_ATTR_INT; ai.i = -1;
  kite::ir::Attr af;
  af.name = "alpha"; af.type = KITE_ATTR_FLOAT; af.f = 0.5f;
  kite::ir::Attr as;
  as.name = "mode"; as.type = KITE_ATTR_STRING; as.s = "linear";
  kite::ir::Attr ais;
  ais.name = "pads"; ais.type = KITE_ATTR_INTS; ais.ints = {0, 1, 2, 3};
  kite::ir::Attr afs;
  afs.name = "scales"; afs.type = KITE_ATTR_FLOATS; afs.floats = {1.0f, 2.5f};
  kite::ir::Attr ass;
  ass.name = "names"; ass.type = KITE_ATTR_STRINGS; ass.strings = {"a", "bc"};
  fused.attrs = {ai, af, as, ais, afs, ass};
  kite::ir::Node b0;
  b0.name = "fused0/add"; b0.op = "Add"; b0.inputs = {x, w}; b0.outputs = {s};
  kite::ir::Node b1;
  b1.name = "fused0/relu"; b1.op = "Relu"; b1.inputs = {s}; b1.outputs = {y};
  fused.body = {b0, b1};

  kite::ir::Node iff;
  iff.name = "if0"; iff.op = "If"; iff.inputs = {cond}; iff.outputs = {z};
  kite::ir::Attr then_b;
  then_b.name = "then_branch"; then_b.type = KITE_ATTR_GRAPH; then_b.i = 1;
  kite::ir::Attr else_b;
  else_b.name = "else_branch"; else_b.type = KITE_ATTR_GRAPH; else_b.i = 2;
  iff.attrs = {then_b, else_b};

  kite::ir::Graph main;
  main.name = "main";
  main.inputs = {x, cond};
  main.outputs = {y, z};
  main.nodes = {fused, iff};
  kite::ir::Graph then_g;
  then_g.name = "then";
  then_g.outputs = {t_out};
  kite::ir::Node tn; tn.name = "then/relu"; tn.op = "Relu"; tn.inputs = {y}; tn.outputs = {t_out};
  then_g.nodes = {tn};
  kite::ir::Graph else_g;
  else_g.name = "else";
  else_g.outputs = {e_out};
  kite::ir::Node en; en.name = "else/neg"; en.op = "Neg"; en.inputs = {y}; en.outputs = {e_out};
  else_g.nodes = {en};
  m.graphs = {main, then_g, else_g};
  std::string err;
  EXPECT_TRUE(kite::memory::plan_memory(&m, 256, &err)) << err;
  return m;
}

void expect_same_node(const kite::ir::Node& a, const kite::rt::NodeRec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.domain, b.domain);
  EXPECT_EQ(a.fused_pattern, b.fused_pattern);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.attrs.size(), b.attrs.size());
  for (size_t k = 0; k < a.attrs.size(); ++k) {
    const auto& x = a.attrs[k];
    const auto& y = b.attrs[k];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.i, y.i);
    EXPECT_EQ(x.f, y.f);
    EXPECT_EQ(x.s, y.s);
    EXPECT_EQ(x.ints, y.ints);
    EXPECT_EQ(x.floats, y.floats);
    EXPECT_EQ(x.strings, y.strings);
    // The ABI view points at the same values.
    EXPECT_STREQ(b.abi_attrs[k].name, x.name.c_str());
    EXPECT_EQ(b.abi_attrs[k].type, x.type);
  }
  ASSERT_EQ(a.body.size(), b.body.size());
  for (size_t k = 0; k < a.body.size(); ++k) expect_same_node(a.body[k], b.body[k]);
}

TEST(Format, RoundTripEveryField) {
  const kite::ir::Model m = rich_model();
  std::vector<uint8_t> bytes;
  std::string err;
  ASSERT_TRUE(kite::writer::serialize(m, &bytes, &err)) << err;
  std::shared_ptr<kite::rt::Model> loaded;
  kite::rt::Status s = kite::rt::Model::load_memory(bytes.data(), bytes.size(), &loaded);
  ASSERT_TRUE(s.is_ok()) << s.message();

  EXPECT_EQ(loaded->format_major, KITE_FORMAT_MAJOR);
  EXPECT_EQ(loaded->format_minor, KITE_FORMAT_MINOR);
  EXPECT_EQ(loaded->producer, "round-trip");
  EXPECT_EQ(loaded->source_opset, 17);
  ASSERT_EQ(loaded->tensors.size(), m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const auto& a = m.tensors[i];
    const auto& b = loaded->tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(static_cast<int>(a.kind), static_cast<int>(b.kind));
    EXPECT_EQ(a.byte_size(), b.byte_size);
    if (a.is_constant()) {
      ASSERT_NE(b.const_data, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.const_data) % 64, 0u) << a.name;
      EXPECT_EQ(std::memcmp(a.data.data(), b.const_data, a.data.size()), 0) << a.name;
    } else {
      EXPECT_EQ(m.plan.offsets[i], b.arena_offset) << a.name;
    }
  }
  ASSERT_EQ(loaded->graphs.size(), m.graphs.size());
  for (size_t g = 0; g < m.graphs.size(); ++g) {
    EXPECT_EQ(m.graphs[g].name, loaded->graphs[g].name);
    EXPECT_EQ(m.graphs[g].inputs, loaded->graphs[g].inputs);
    EXPECT_EQ(m.graphs[g].outputs, loaded->graphs[g].outputs);
    ASSERT_EQ(m.graphs[g].nodes.size(), loaded->graphs[g].nodes.size());
    for (size_t n = 0; n < m.graphs[g].nodes.size(); ++n) {
      expect_same_node(m.graphs[g].nodes[n], loaded->graphs[g].nodes[n]);
    }
  }
  EXPECT_EQ(loaded->plan.arena_size, m.plan.arena_size);
  EXPECT_EQ(loaded->plan.alignment, 256u);
  EXPECT_EQ(loaded->plan.lower_bound, m.plan.lower_bound);
  EXPECT_EQ(loaded->plan.naive_size, m.plan.naive_size);
  EXPECT_EQ(loaded->plan.strategy, m.plan.strategy);
}

TEST(Format, SerializationIsDeterministic) {
  const kite::ir::Model m = rich_model();
  EXPECT_EQ(kite::test::serialize_or_die(m), kite::test::serialize_or_die(m));
}

TEST(Format, WriterRefusesConstantWithWrongByteCount) {
  kite::ir::Model m = kite::test::add_relu_model();
  m.tensors[1].data.resize(4);
  std::vector<uint8_t> bytes;
  std::string err;
  EXPECT_FALSE(kite::writer::serialize(m, &bytes, &err));
  EXPECT_NE(err.find("'bias'"), std::string::npos) << err;
}

}  // namespace
