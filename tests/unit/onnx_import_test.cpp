// ONNX import and shape inference: models are built here as ModelProto
// messages, serialized, and imported from bytes (or from a file, for
// external data).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "kite/converter/ir.h"
#include "kite_test_onnx.h"
#include "onnx/onnx_import.h"
#include "src/infer_shapes.h"

namespace {

using kite::converter::ImportOptions;
using kite::converter::import_onnx_bytes;
using kite::converter::import_onnx_file;
using kite::converter::infer_shapes;
namespace ir = kite::ir;

// Dims as text: "3" is a fixed dim, anything else a symbolic one.
void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem_type,
              const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto* g) : g_(g) {}
  virtual ~GraphBuilder() = default;

  void input(const std::string& name, int type, const std::vector<std::string>& dims) {
    set_type(proto()->add_input(), name, type, dims);
  }
  void output(const std::string& name, int type, const std::vector<std::string>& dims) {
    set_type(proto()->add_output(), name, type, dims);
  }
  void value_info(const std::string& name, int type, const std::vector<std::string>& dims) {
    set_type(proto()->add_value_info(), name, type, dims);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = proto()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  onnx::TensorProto* float_raw(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& values) {
    return kite::test::add_float_initializer(proto(), name, dims, values);
  }
  onnx::TensorProto* int64_typed(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<int64_t>& values) {
    onnx::TensorProto* t = proto()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return t;
  }
  // Virtual so that a ModelBuilder stays valid when copied.
  virtual onnx::GraphProto* proto() { return g_; }

 private:
  onnx::GraphProto* g_;
};

class ModelBuilder : public GraphBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) : GraphBuilder(nullptr) {
    model_.set_ir_version(8);
    model_.set_producer_name("kite-test");
    model_.set_producer_version("1.0");
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("main");
  }
  onnx::GraphProto* proto() override { return model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }

  bool import(ir::Model* out, std::string* err, const ImportOptions& options = {}) const {
    const std::string b = bytes();
    return import_onnx_bytes(b.data(), b.size(), options, out, err);
  }

 private:
  onnx::ModelProto model_;
};

const ir::Tensor& tensor(const ir::Model& m, const std::string& name) {
  const int i = m.find_tensor(name);
  EXPECT_GE(i, 0) << "no tensor " << name;
  return m.tensors.at(static_cast<size_t>(i < 0 ? 0 : i));
}

template <typename T>
std::vector<T> values(const ir::Tensor& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), v.size() * sizeof(T));
  return v;
}

size_t count_lines(const std::string& s) {
  size_t n = 1;
  for (char c : s) n += c == '\n';
  return n;
}

// A fresh temporary directory, removed with its files.
class TempDir {
 public:
  TempDir() {
    std::string pattern = testing::TempDir() + "kite_onnx_XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    const char* dir = mkdtemp(buf.data());
    path_ = dir ? dir : "";
  }
  ~TempDir() {
    for (const auto& f : files_) std::remove(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  std::string write(const std::string& name, const std::string& content) {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    files_.push_back(p);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// ---------------------------------------------------------------- import

TEST(OnnxImport, ReadsOpsetProducerInputsOutputs) {
  ModelBuilder b(13);
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"1", "3"});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"1", "3"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  EXPECT_EQ(m.source_opset, 13);
  EXPECT_EQ(m.producer, "kite-test 1.0");
  ASSERT_EQ(m.graphs.size(), 1u);
  const ir::Graph& g = m.main();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "relu");
  EXPECT_EQ(g.nodes[0].op, "Relu");
  EXPECT_EQ(g.nodes[0].domain, "");
  const ir::Tensor& x = tensor(m, "x");
  EXPECT_EQ(x.kind, ir::TensorKind::Input);
  EXPECT_EQ(x.dtype, KITE_DTYPE_FLOAT32);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(x.shape_known);
  EXPECT_EQ(tensor(m, "y").kind, ir::TensorKind::Output);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0], m.find_tensor("x"));
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0], m.find_tensor("y"));
}

TEST(OnnxImport, InitializersRawAndTyped) {
  ModelBuilder b;
  b.float_raw("w_raw", {2, 2}, {1.f, 2.f, 3.f, 4.f});
  onnx::TensorProto* wf = b.proto()->add_initializer();
  wf->set_name("w_float");
  wf->set_data_type(onnx::TensorProto_DataType_FLOAT);
  wf->add_dims(3);
  for (float v : {0.5f, -1.f, 2.f}) wf->add_float_data(v);
  b.int64_typed("w_i64", {2}, {-7, 1LL << 40});
  onnx::TensorProto* w8 = b.proto()->add_initializer();
  w8->set_name("w_i8");
  w8->set_data_type(onnx::TensorProto_DataType_INT8);
  w8->add_dims(3);
  for (int v : {-128, 0, 127}) w8->add_int32_data(v);
  onnx::TensorProto* wb = b.proto()->add_initializer();
  wb->set_name("w_bool");
  wb->set_data_type(onnx::TensorProto_DataType_BOOL);
  wb->add_dims(2);
  wb->add_int32_data(1);
  wb->add_int32_data(0);
  onnx::TensorProto* wh = b.proto()->add_initializer();
  wh->set_name("w_f16");
  wh->set_data_type(onnx::TensorProto_DataType_FLOAT16);
  wh->add_int32_data(0x3c00);  // 1.0, scalar
  onnx::TensorProto* wi = b.proto()->add_initializer();
  wi->set_name("w_i32_raw");
  wi->set_data_type(onnx::TensorProto_DataType_INT32);
  wi->add_dims(1);
  const int32_t i32 = -5;
  wi->set_raw_data(std::string(reinterpret_cast<const char*>(&i32), 4));
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2", "2"});
  b.node("Add", {"x", "w_raw"}, {"y"});
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2", "2"});

  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const ir::Tensor& raw = tensor(m, "w_raw");
  EXPECT_TRUE(raw.is_constant());
  EXPECT_TRUE(raw.shape_known);
  EXPECT_EQ(raw.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(raw.byte_size(), 16u);
  EXPECT_EQ(values<float>(raw), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(values<float>(tensor(m, "w_float")), (std::vector<float>{0.5f, -1.f, 2.f}));
  EXPECT_EQ(values<int64_t>(tensor(m, "w_i64")), (std::vector<int64_t>{-7, 1LL << 40}));
  EXPECT_EQ(tensor(m, "w_i8").dtype, KITE_DTYPE_INT8);
  EXPECT_EQ(values<int8_t>(tensor(m, "w_i8")), (std::vector<int8_t>{-128, 0, 127}));
  EXPECT_EQ(tensor(m, "w_bool").dtype, KITE_DTYPE_BOOL);
  EXPECT_EQ(values<uint8_t>(tensor(m, "w_bool")), (std::vector<uint8_t>{1, 0}));
  const ir::Tensor& h = tensor(m, "w_f16");
  EXPECT_EQ(h.dtype, KITE_DTYPE_FLOAT16);
  EXPECT_TRUE(h.shape.empty());
  EXPECT_EQ(values<uint16_t>(h), (std::vector<uint16_t>{0x3c00}));
  EXPECT_EQ(values<int32_t>(tensor(m, "w_i32_raw")), (std::vector<int32_t>{-5}));
  // The Add reads the raw initializer by index.
  ASSERT_EQ(m.main().nodes.size(), 1u);
  EXPECT_EQ(m.main().nodes[0].inputs[1], m.find_tensor("w_raw"));
}

TEST(OnnxImport, RejectsBadInitializers) {
  {
    ModelBuilder b;
    onnx::TensorProto* t = b.proto()->add_initializer();
    t->set_name("w_double");
    t->set_data_type(onnx::TensorProto_DataType_DOUBLE);
    t->add_dims(1);
    t->add_double_data(1.0);
    ir::Model m;
    std::string err;
    EXPECT_FALSE(b.import(&m, &err));
    EXPECT_NE(err.find("'w_double'"), std::string::npos) << err;
    EXPECT_NE(err.find("DOUBLE"), std::string::npos) << err;
  }
  {
    ModelBuilder b;
    b.float_raw("w_short", {4}, {1.f, 2.f});  // 8 bytes for 4 floats
    ir::Model m;
    std::string err;
    EXPECT_FALSE(b.import(&m, &err));
    EXPECT_NE(err.find("'w_short'"), std::string::npos) << err;
    EXPECT_NE(err.find("expected 16"), std::string::npos) << err;
  }
  {
    ModelBuilder b;
    b.int64_typed("w_count", {3}, {1, 2});
    ir::Model m;
    std::string err;
    EXPECT_FALSE(b.import(&m, &err));
    EXPECT_NE(err.find("'w_count'"), std::string::npos) << err;
  }
}

TEST(OnnxImport, ConstantNodesBecomeConstants) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"3"});
  onnx::NodeProto* c1 = b.node("Constant", {}, {"c_tensor"});
  auto* a1 = c1->add_attribute();
  a1->set_name("value");
  a1->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  a1->mutable_t()->set_data_type(onnx::TensorProto_DataType_FLOAT);
  a1->mutable_t()->add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) a1->mutable_t()->add_float_data(v);
  onnx::NodeProto* c2 = b.node("Constant", {}, {"c_float"});
  auto* a2 = c2->add_attribute();
  a2->set_name("value_float");
  a2->set_type(onnx::AttributeProto_AttributeType_FLOAT);
  a2->set_f(2.5f);
  onnx::NodeProto* c3 = b.node("Constant", {}, {"c_ints"});
  auto* a3 = c3->add_attribute();
  a3->set_name("value_ints");
  a3->set_type(onnx::AttributeProto_AttributeType_INTS);
  a3->add_ints(4);
  a3->add_ints(-1);
  onnx::NodeProto* c4 = b.node("Constant", {}, {"c_int"});
  auto* a4 = c4->add_attribute();
  a4->set_name("value_int");
  a4->set_type(onnx::AttributeProto_AttributeType_INT);
  a4->set_i(9);
  b.node("Add", {"x", "c_tensor"}, {"y"});
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"3"});

  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  ASSERT_EQ(m.main().nodes.size(), 1u);  // Constant nodes are not graph nodes
  EXPECT_EQ(m.main().nodes[0].op, "Add");
  const ir::Tensor& ct = tensor(m, "c_tensor");
  EXPECT_TRUE(ct.is_constant());
  EXPECT_EQ(values<float>(ct), (std::vector<float>{1.f, 2.f, 3.f}));
  const ir::Tensor& cf = tensor(m, "c_float");
  EXPECT_EQ(cf.dtype, KITE_DTYPE_FLOAT32);
  EXPECT_TRUE(cf.shape.empty());
  EXPECT_EQ(values<float>(cf), (std::vector<float>{2.5f}));
  const ir::Tensor& ci = tensor(m, "c_ints");
  EXPECT_EQ(ci.dtype, KITE_DTYPE_INT64);
  EXPECT_EQ(ci.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(values<int64_t>(ci), (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(values<int64_t>(tensor(m, "c_int")), (std::vector<int64_t>{9}));
  EXPECT_TRUE(tensor(m, "c_int").shape.empty());
}

TEST(OnnxImport, InputThatIsAlsoInitializerIsConstant) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2"});
  b.input("bias", onnx::TensorProto_DataType_FLOAT, {"2"});
  b.float_raw("bias", {2}, {1.f, 2.f});
  b.node("Add", {"x", "bias"}, {"y"});
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  EXPECT_TRUE(tensor(m, "bias").is_constant());
  EXPECT_EQ(values<float>(tensor(m, "bias")), (std::vector<float>{1.f, 2.f}));
  ASSERT_EQ(m.main().inputs.size(), 1u);
  EXPECT_EQ(m.main().inputs[0], m.find_tensor("x"));
}

TEST(OnnxImport, SymbolicDimNeedsInputShape) {
  ModelBuilder b;
  b.input("images", onnx::TensorProto_DataType_FLOAT, {"batch", "3", "224", "224"});
  b.node("Relu", {"images"}, {"y"});
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"batch", "3", "224", "224"});

  ir::Model m;
  std::string err;
  EXPECT_FALSE(b.import(&m, &err));
  EXPECT_NE(err.find("'images'"), std::string::npos) << err;
  EXPECT_NE(err.find("--input-shape images="), std::string::npos) << err;
  EXPECT_NE(err.find("batchx3x224x224"), std::string::npos) << err;

  ImportOptions options;
  options.input_shapes["images"] = {2, 3, 224, 224};
  ASSERT_TRUE(b.import(&m, &err, options)) << err;
  const ir::Tensor& x = tensor(m, "images");
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 3, 224, 224}));
  EXPECT_TRUE(x.shape_known);

  // The option must agree with the dims the model fixes, and name an input.
  options.input_shapes["images"] = {2, 4, 224, 224};
  EXPECT_FALSE(b.import(&m, &err, options));
  EXPECT_NE(err.find("dim 1"), std::string::npos) << err;
  options.input_shapes["images"] = {2, 3, 224};
  EXPECT_FALSE(b.import(&m, &err, options));
  EXPECT_NE(err.find("has 3 dims"), std::string::npos) << err;
  options.input_shapes = {{"images", {1, 3, 224, 224}}, {"imgs", {1}}};
  EXPECT_FALSE(b.import(&m, &err, options));
  EXPECT_NE(err.find("'imgs'"), std::string::npos) << err;
  EXPECT_NE(err.find("images"), std::string::npos) << err;
}

TEST(OnnxImport, UnsupportedOpsAreListedTogether) {
  ModelBuilder b;
  auto* custom = b.model().add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(3);
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"4"});
  b.node("KiteNoSuchOpA", {"x"}, {"a"}, "first");
  b.node("Relu", {"a"}, {"r"}, "fine");
  b.node("KiteNoSuchOpB", {"r"}, {"c"});  // unnamed: gets "KiteNoSuchOpB_2"
  onnx::NodeProto* n = b.node("Relu", {"c"}, {"y"}, "custom");
  n->set_domain("com.example");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"4"});

  ir::Model m;
  std::string err;
  ASSERT_FALSE(b.import(&m, &err));
  EXPECT_NE(err.find("node 'first': op 'KiteNoSuchOpA' (domain 'ai.onnx', opset 17) is not "
                     "supported"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("node 'KiteNoSuchOpB_2': op 'KiteNoSuchOpB' (domain 'ai.onnx', opset 17) "
                     "is not supported"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("node 'custom': op 'Relu' (domain 'com.example', opset 3) is not "
                     "supported"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("'fine'"), std::string::npos) << err;
  EXPECT_EQ(count_lines(err), 4u) << err;  // a header and one line per node
}

TEST(OnnxImport, UnparsableBytes) {
  const std::string garbage = "\xff\xff\xff\xff this is not an ONNX model";
  ir::Model m;
  std::string err;
  EXPECT_FALSE(import_onnx_bytes(garbage.data(), garbage.size(), {}, &m, &err));
  EXPECT_NE(err.find("cannot parse"), std::string::npos) << err;

  TempDir dir;
  const std::string path = dir.write("broken.onnx", garbage);
  EXPECT_FALSE(import_onnx_file(path, {}, &m, &err));
  EXPECT_NE(err.find("cannot parse"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;

  EXPECT_FALSE(import_onnx_file(dir.path() + "/missing.onnx", {}, &m, &err));
  EXPECT_NE(err.find("missing.onnx"), std::string::npos) << err;
}

TEST(OnnxImport, CycleIsReported) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2"});
  b.node("Add", {"x", "d"}, {"c"}, "add_a");
  b.node("Relu", {"c"}, {"d"}, "relu_b");
  b.node("Relu", {"d"}, {"y"}, "after");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2"});
  ir::Model m;
  std::string err;
  ASSERT_FALSE(b.import(&m, &err));
  EXPECT_NE(err.find("cycle"), std::string::npos) << err;
  EXPECT_NE(err.find("'add_a'"), std::string::npos) << err;
  EXPECT_NE(err.find("'relu_b'"), std::string::npos) << err;
  EXPECT_EQ(err.find("'after'"), std::string::npos) << err;  // downstream, not on the cycle
}

TEST(OnnxImport, MissingProducerIsReported) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2"});
  b.node("Add", {"x", "nowhere"}, {"y"}, "adder");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2"});
  ir::Model m;
  std::string err;
  ASSERT_FALSE(b.import(&m, &err));
  EXPECT_NE(err.find("'adder'"), std::string::npos) << err;
  EXPECT_NE(err.find("'nowhere'"), std::string::npos) << err;
}

TEST(OnnxImport, SortsNodesAndNamesUnnamedOnes) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2"});
  b.node("Relu", {"b"}, {"y"});        // unnamed, listed first but runs last
  b.node("Relu", {"x"}, {"a"}, "Relu_1");  // explicit name a generated one must avoid
  b.node("Relu", {"a"}, {"b"});        // unnamed
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const auto& nodes = m.main().nodes;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "Relu_1");
  EXPECT_EQ(nodes[0].outputs[0], m.find_tensor("a"));
  EXPECT_EQ(nodes[1].outputs[0], m.find_tensor("b"));
  EXPECT_EQ(nodes[2].outputs[0], m.find_tensor("y"));
  EXPECT_EQ(nodes[2].name, "Relu_0");
  EXPECT_FALSE(nodes[1].name.empty());
  EXPECT_NE(nodes[1].name, "Relu_1");
  EXPECT_NE(nodes[1].name, "Relu_0");
}

TEST(OnnxImport, OptionalInputsAndAttributes) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2"});
  onnx::NodeProto* n = b.node("Relu", {"x", ""}, {"y"}, "r");
  auto* ai = n->add_attribute();
  ai->set_name("an_int");
  ai->set_type(onnx::AttributeProto_AttributeType_INT);
  ai->set_i(-3);
  auto* af = n->add_attribute();
  af->set_name("floats");
  af->set_type(onnx::AttributeProto_AttributeType_FLOATS);
  af->add_floats(0.25f);
  af->add_floats(4.f);
  auto* as = n->add_attribute();
  as->set_name("mode");
  as->set_type(onnx::AttributeProto_AttributeType_STRING);
  as->set_s("nearest");
  auto* ass = n->add_attribute();
  ass->set_name("names");
  ass->set_type(onnx::AttributeProto_AttributeType_STRINGS);
  ass->add_strings("a");
  ass->add_strings("b");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const ir::Node& node = m.main().nodes.at(0);
  EXPECT_EQ(node.inputs, (std::vector<int>{m.find_tensor("x"), -1}));
  ASSERT_NE(node.find_attr("an_int"), nullptr);
  EXPECT_EQ(node.find_attr("an_int")->type, KITE_ATTR_INT);
  EXPECT_EQ(node.find_attr("an_int")->i, -3);
  EXPECT_EQ(node.find_attr("floats")->floats, (std::vector<float>{0.25f, 4.f}));
  EXPECT_EQ(node.find_attr("mode")->s, "nearest");
  EXPECT_EQ(node.find_attr("names")->strings, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(node.find_attr("absent"), nullptr);

  // to_op_node: absent input, and constant inputs carry their data.
  const kite::ops::OpNode op = ir::to_op_node(m, node);
  ASSERT_EQ(op.inputs.size(), 2u);
  EXPECT_TRUE(op.inputs[0].present);
  EXPECT_EQ(op.inputs[0].data, nullptr);
  EXPECT_FALSE(op.inputs[1].present);
  EXPECT_EQ(op.num_outputs, 1);
}

TEST(OnnxImport, ToOpNodeKeepsConstantData) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2"});
  b.float_raw("w", {2}, {3.f, 4.f});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const kite::ops::OpNode op = ir::to_op_node(m, m.main().nodes.at(0));
  EXPECT_EQ(op.name, "add");
  EXPECT_EQ(op.inputs[1].name, "w");
  EXPECT_EQ(op.inputs[1].shape, (std::vector<int64_t>{2}));
  ASSERT_NE(op.inputs[1].data, nullptr);
  EXPECT_EQ(static_cast<const float*>(op.inputs[1].data)[1], 4.f);
}

TEST(OnnxImport, ConstantOfShapeValueBecomesAttributes) {
  ModelBuilder b;
  b.int64_typed("shape", {2}, {2, 3});
  onnx::NodeProto* n = b.node("ConstantOfShape", {"shape"}, {"y"}, "fill");
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto_DataType_INT64);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int64_data(7);
  b.node("ConstantOfShape", {"shape"}, {"z"}, "zeros");
  b.output("y", onnx::TensorProto_DataType_INT64, {"2", "3"});
  b.output("z", onnx::TensorProto_DataType_FLOAT, {"2", "3"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const ir::Node* fill = nullptr;
  const ir::Node* zeros = nullptr;
  for (const auto& node : m.main().nodes) (node.name == "fill" ? fill : zeros) = &node;
  ASSERT_TRUE(fill && zeros);
  ASSERT_NE(fill->find_attr("value"), nullptr);
  EXPECT_EQ(fill->find_attr("value")->type, KITE_ATTR_INTS);
  EXPECT_EQ(fill->find_attr("value")->ints, (std::vector<int64_t>{7}));
  EXPECT_EQ(fill->find_attr("value_dtype")->i, KITE_DTYPE_INT64);
  EXPECT_EQ(zeros->find_attr("value")->floats, (std::vector<float>{0.f}));
  EXPECT_EQ(zeros->find_attr("value_dtype")->i, KITE_DTYPE_FLOAT32);
}

TEST(OnnxImport, ExternalData) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  // 8 bytes of padding, then 4 floats.
  const std::vector<float> w = {1.5f, -2.f, 3.25f, 8.f};
  std::string blob(8, 'x');
  blob.append(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  dir.write("weights.bin", blob);

  auto make = [&](const std::string& location, const std::string& offset,
                  const std::string& length) {
    ModelBuilder b;
    b.input("x", onnx::TensorProto_DataType_FLOAT, {"4"});
    onnx::TensorProto* t = b.proto()->add_initializer();
    t->set_name("w_ext");
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", offset);
    add("length", length);
    b.node("Add", {"x", "w_ext"}, {"y"}, "add");
    b.output("y", onnx::TensorProto_DataType_FLOAT, {"4"});
    return b.bytes();
  };

  ir::Model m;
  std::string err;
  const std::string good = dir.write("good.onnx", make("weights.bin", "8", "16"));
  ASSERT_TRUE(import_onnx_file(good, {}, &m, &err)) << err;
  EXPECT_EQ(values<float>(tensor(m, "w_ext")), w);

  // Bytes with an explicit model_dir; no length means "to the end of file".
  const std::string no_length = make("weights.bin", "8", "");
  ImportOptions options;
  options.model_dir = dir.path();
  ASSERT_TRUE(import_onnx_bytes(no_length.data(), no_length.size(), options, &m, &err)) << err;
  EXPECT_EQ(values<float>(tensor(m, "w_ext")), w);
  // Without model_dir, bytes cannot find the file.
  EXPECT_FALSE(import_onnx_bytes(no_length.data(), no_length.size(), {}, &m, &err));
  EXPECT_NE(err.find("'w_ext'"), std::string::npos) << err;

  const std::string escape = dir.write("escape.onnx", make("../weights.bin", "0", "16"));
  EXPECT_FALSE(import_onnx_file(escape, {}, &m, &err));
  EXPECT_NE(err.find("'w_ext'"), std::string::npos) << err;
  EXPECT_NE(err.find(".."), std::string::npos) << err;

  const std::string nested = dir.write("nested.onnx", make("sub/../../weights.bin", "0", "16"));
  EXPECT_FALSE(import_onnx_file(nested, {}, &m, &err));
  EXPECT_NE(err.find(".."), std::string::npos) << err;

  const std::string absolute =
      dir.write("absolute.onnx", make(dir.path() + "/weights.bin", "8", "16"));
  EXPECT_FALSE(import_onnx_file(absolute, {}, &m, &err));
  EXPECT_NE(err.find("absolute"), std::string::npos) << err;

  const std::string past_end = dir.write("past_end.onnx", make("weights.bin", "16", "16"));
  EXPECT_FALSE(import_onnx_file(past_end, {}, &m, &err));
  EXPECT_NE(err.find("outside"), std::string::npos) << err;

  const std::string wrong_size = dir.write("wrong_size.onnx", make("weights.bin", "0", "12"));
  EXPECT_FALSE(import_onnx_file(wrong_size, {}, &m, &err));
  EXPECT_NE(err.find("expected 16"), std::string::npos) << err;

  const std::string missing = dir.write("missing.onnx", make("nothere.bin", "0", "16"));
  EXPECT_FALSE(import_onnx_file(missing, {}, &m, &err));
  EXPECT_NE(err.find("nothere.bin"), std::string::npos) << err;
}

// cond ? x + one : relu(x) + shift, with x and `one` from the outer scope.
// constant_cond: -1 makes `cond` a graph input, 0/1 a constant.
ModelBuilder if_model(const std::vector<std::string>& else_dims,
                      const std::vector<int64_t>& shift_dims = {1}, int constant_cond = -1) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"3"});
  if (constant_cond < 0) {
    b.input("cond", onnx::TensorProto_DataType_BOOL, {});
  } else {
    onnx::TensorProto* c = b.proto()->add_initializer();
    c->set_name("cond");
    c->set_data_type(onnx::TensorProto_DataType_BOOL);
    c->add_int32_data(constant_cond);
  }
  b.float_raw("one", {1}, {1.f});
  onnx::NodeProto* n = b.node("If", {"cond"}, {"y"}, "branch");
  auto* then_attr = n->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto_AttributeType_GRAPH);
  GraphBuilder then_g(then_attr->mutable_g());
  then_g.proto()->set_name("then_g");
  then_g.node("Add", {"x", "one"}, {"t_out"}, "then_add");
  then_g.output("t_out", onnx::TensorProto_DataType_FLOAT, {"3"});
  auto* else_attr = n->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto_AttributeType_GRAPH);
  GraphBuilder else_g(else_attr->mutable_g());
  else_g.proto()->set_name("else_g");
  int64_t shift_numel = 1;
  for (int64_t d : shift_dims) shift_numel *= d;
  else_g.float_raw("shift", shift_dims, std::vector<float>(static_cast<size_t>(shift_numel), 2.f));
  else_g.node("Relu", {"x"}, {"e_relu"}, "else_relu");
  else_g.node("Add", {"e_relu", "shift"}, {"e_out"}, "else_add");
  else_g.output("e_out", onnx::TensorProto_DataType_FLOAT, else_dims);
  b.node("Relu", {"y"}, {"z"}, "after_if");
  b.output("z", onnx::TensorProto_DataType_FLOAT, {"3"});
  return b;
}

TEST(OnnxImport, IfSubgraphsAreImported) {
  ModelBuilder b = if_model({"3"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  ASSERT_EQ(m.graphs.size(), 3u);
  const ir::Node& if_node = m.main().nodes.at(0);
  EXPECT_EQ(if_node.op, "If");
  const ir::Attr* then_attr = if_node.find_attr("then_branch");
  const ir::Attr* else_attr = if_node.find_attr("else_branch");
  ASSERT_TRUE(then_attr && else_attr);
  EXPECT_EQ(then_attr->type, KITE_ATTR_GRAPH);
  EXPECT_EQ(else_attr->type, KITE_ATTR_GRAPH);
  ASSERT_GE(then_attr->i, 1);
  ASSERT_GE(else_attr->i, 1);
  EXPECT_NE(then_attr->i, else_attr->i);
  const ir::Graph& then_g = m.graphs.at(static_cast<size_t>(then_attr->i));
  const ir::Graph& else_g = m.graphs.at(static_cast<size_t>(else_attr->i));
  EXPECT_EQ(then_g.name, "then_g");
  ASSERT_EQ(then_g.nodes.size(), 1u);
  // The branch reads the outer tensors by index.
  EXPECT_EQ(then_g.nodes[0].inputs,
            (std::vector<int>{m.find_tensor("x"), m.find_tensor("one")}));
  ASSERT_EQ(then_g.outputs.size(), 1u);
  EXPECT_EQ(then_g.outputs[0], m.find_tensor("t_out"));
  ASSERT_EQ(else_g.nodes.size(), 2u);
  EXPECT_EQ(else_g.nodes[0].name, "else_relu");
  EXPECT_TRUE(tensor(m, "shift").is_constant());
  EXPECT_EQ(tensor(m, "t_out").kind, ir::TensorKind::Activation);
  EXPECT_EQ(tensor(m, "z").kind, ir::TensorKind::Output);
}

TEST(OnnxImport, SubgraphMissingOuterValueIsReported) {
  ModelBuilder b = if_model({"3"});
  auto* then_g = b.proto()->mutable_node(0)->mutable_attribute(0)->mutable_g();
  then_g->mutable_node(0)->set_input(1, "not_defined");
  ir::Model m;
  std::string err;
  ASSERT_FALSE(b.import(&m, &err));
  EXPECT_NE(err.find("'then_add'"), std::string::npos) << err;
  EXPECT_NE(err.find("'not_defined'"), std::string::npos) << err;
}

TEST(OnnxImport, IfIsSortedAfterOuterValuesItsBranchesUse) {
  ModelBuilder b = if_model({"3"});
  // The then branch now reads `h`, produced by a node listed after the If.
  auto* then_g = b.proto()->mutable_node(0)->mutable_attribute(0)->mutable_g();
  then_g->mutable_node(0)->set_input(0, "h");
  b.node("Relu", {"x"}, {"h"}, "late_producer");
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const auto& nodes = m.main().nodes;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "late_producer");
  EXPECT_EQ(nodes[1].op, "If");
  EXPECT_EQ(nodes[2].name, "after_if");
}

TEST(OnnxImport, SubgraphNameThatRepeatsAnOuterNameIsMadeUnique) {
  ModelBuilder b = if_model({"3"});
  // The else branch defines its own `z`, which the main graph also defines.
  auto* else_g = b.proto()->mutable_node(0)->mutable_attribute(1)->mutable_g();
  else_g->mutable_node(1)->set_output(0, "z");
  else_g->mutable_output(0)->set_name("z");
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  const ir::Graph& else_graph =
      m.graphs.at(static_cast<size_t>(m.main().nodes.at(0).find_attr("else_branch")->i));
  const int inner = else_graph.outputs.at(0);
  const int outer = m.main().outputs.at(0);
  EXPECT_NE(inner, outer);
  EXPECT_EQ(m.tensors.at(static_cast<size_t>(outer)).name, "z");
  EXPECT_NE(m.tensors.at(static_cast<size_t>(inner)).name, "z");
  EXPECT_EQ(else_graph.nodes.at(1).outputs.at(0), inner);
}

// ---------------------------------------------------------- shape inference

TEST(InferShapes, FillsShapesAndFoldsShapeChains) {
  // y = Reshape(x, Concat(Gather(Shape(x), [0]), [-1])): 2x3x4 -> 2x12.
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2", "3", "4"});
  b.int64_typed("idx", {1}, {0});
  b.int64_typed("minus_one", {1}, {-1});
  b.node("Shape", {"x"}, {"s"}, "shape");
  b.node("Gather", {"s", "idx"}, {"s0"}, "gather");
  auto* axis = b.node("Concat", {"s0", "minus_one"}, {"target"}, "concat")->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto_AttributeType_INT);
  axis->set_i(0);
  b.node("Reshape", {"x", "target"}, {"r"}, "reshape");
  b.node("Relu", {"r"}, {"y"}, "relu");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2", "?"});

  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  ASSERT_TRUE(infer_shapes(&m, &err)) << err;
  const ir::Tensor& target = tensor(m, "target");
  EXPECT_TRUE(target.is_constant());
  EXPECT_EQ(values<int64_t>(target), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(values<int64_t>(tensor(m, "s")), (std::vector<int64_t>{2, 3, 4}));
  const ir::Tensor& r = tensor(m, "r");
  EXPECT_TRUE(r.shape_known);
  EXPECT_EQ(r.dtype, KITE_DTYPE_FLOAT32);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 12}));
  const ir::Tensor& y = tensor(m, "y");
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(y.kind, ir::TensorKind::Output);
  // Shape, Gather and Concat were folded away.
  ASSERT_EQ(m.main().nodes.size(), 2u);
  EXPECT_EQ(m.main().nodes[0].op, "Reshape");
  EXPECT_EQ(m.main().nodes[1].op, "Relu");
}

TEST(InferShapes, DeclaredShapeMustAgree) {
  ModelBuilder b;
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"2", "3"});
  b.node("Relu", {"x"}, {"h"}, "relu");
  b.node("Relu", {"h"}, {"y"}, "relu2");
  b.value_info("h", onnx::TensorProto_DataType_FLOAT, {"2", "5"});
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"2", "3"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  ASSERT_FALSE(infer_shapes(&m, &err));
  EXPECT_NE(err.find("inconsistent shapes"), std::string::npos) << err;
  EXPECT_NE(err.find("'h'"), std::string::npos) << err;
  EXPECT_NE(err.find("2x5"), std::string::npos) << err;
  EXPECT_NE(err.find("2x3"), std::string::npos) << err;
}

TEST(InferShapes, IfOutputsFromBranches) {
  {
    ModelBuilder b = if_model({"3"});
    ir::Model m;
    std::string err;
    ASSERT_TRUE(b.import(&m, &err)) << err;
    ASSERT_TRUE(infer_shapes(&m, &err)) << err;
    EXPECT_EQ(tensor(m, "y").shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(tensor(m, "y").dtype, KITE_DTYPE_FLOAT32);
    EXPECT_EQ(tensor(m, "e_relu").shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(tensor(m, "z").shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(m.main().nodes.size(), 2u);  // If is kept
  }
  {
    // A declared branch output that disagrees with the branch is caught.
    ModelBuilder b = if_model({"4"});
    ir::Model m;
    std::string err;
    ASSERT_TRUE(b.import(&m, &err)) << err;
    ASSERT_FALSE(infer_shapes(&m, &err));
    EXPECT_NE(err.find("'e_out'"), std::string::npos) << err;
    EXPECT_NE(err.find("inconsistent shapes"), std::string::npos) << err;
  }
  {
    // Branches of different shapes: fine only with a constant condition.
    ModelBuilder b = if_model({"2", "3"}, {2, 3});
    b.proto()->mutable_output(0)->mutable_type()->clear_tensor_type();
    ir::Model m;
    std::string err;
    ASSERT_TRUE(b.import(&m, &err)) << err;
    ASSERT_FALSE(infer_shapes(&m, &err));
    EXPECT_NE(err.find("'branch'"), std::string::npos) << err;
    EXPECT_NE(err.find("then_branch"), std::string::npos) << err;
    EXPECT_NE(err.find("2x3"), std::string::npos) << err;
  }
  for (int cond : {0, 1}) {
    ModelBuilder b = if_model({"2", "3"}, {2, 3}, cond);
    b.proto()->mutable_output(0)->mutable_type()->clear_tensor_type();
    ir::Model m;
    std::string err;
    ASSERT_TRUE(b.import(&m, &err)) << err;
    ASSERT_TRUE(infer_shapes(&m, &err)) << err;
    const std::vector<int64_t> expected =
        cond ? std::vector<int64_t>{3} : std::vector<int64_t>{2, 3};
    EXPECT_EQ(tensor(m, "y").shape, expected);
  }
}

TEST(InferShapes, DeadBranchOfConstantIfMayBeInvalid) {
  // else: relu(x) + shift with x 3 and shift 2: cannot broadcast, but the
  // condition is a constant true, so the else branch never runs.
  ModelBuilder b = if_model({"?"}, {2}, 1);
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  ASSERT_TRUE(infer_shapes(&m, &err)) << err;
  EXPECT_EQ(tensor(m, "y").shape, (std::vector<int64_t>{3}));
  EXPECT_TRUE(tensor(m, "e_relu").shape_known);
  EXPECT_FALSE(tensor(m, "e_out").shape_known);

  // With the condition false, the invalid branch is the taken one.
  ModelBuilder bad = if_model({"?"}, {2}, 0);
  ASSERT_TRUE(bad.import(&m, &err)) << err;
  EXPECT_FALSE(infer_shapes(&m, &err));
  EXPECT_NE(err.find("else_add"), std::string::npos) << err;
}

TEST(InferShapes, SoftmaxBeforeOpset13IsRewrittenTo2d) {
  for (int64_t axis : {1, 2, -1}) {
    ModelBuilder b(11);
    b.input("x", onnx::TensorProto_DataType_FLOAT, {"2", "3", "4"});
    onnx::NodeProto* n = b.node("Softmax", {"x"}, {"y"}, "softmax");
    if (axis != 1) {  // 1 is the default before opset 13
      auto* a = n->add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto_AttributeType_INT);
      a->set_i(axis);
    }
    b.output("y", onnx::TensorProto_DataType_FLOAT, {"2", "3", "4"});
    ir::Model m;
    std::string err;
    ASSERT_TRUE(b.import(&m, &err)) << err;
    ASSERT_TRUE(infer_shapes(&m, &err)) << err;
    const auto& nodes = m.main().nodes;
    EXPECT_EQ(tensor(m, "y").shape, (std::vector<int64_t>{2, 3, 4}));
    if (axis == 1) {
      // 2-D coercion at axis 1: softmax over 3x4 = 12 elements per row.
      ASSERT_EQ(nodes.size(), 3u);
      EXPECT_EQ(nodes[0].op, "Flatten");
      EXPECT_EQ(nodes[0].find_attr("axis")->i, 1);
      EXPECT_EQ(nodes[1].op, "Softmax");
      EXPECT_EQ(nodes[1].find_attr("axis")->i, 1);
      EXPECT_EQ(m.tensors.at(static_cast<size_t>(nodes[1].inputs.at(0))).shape,
                (std::vector<int64_t>{2, 12}));
      EXPECT_EQ(nodes[2].op, "Reshape");
      EXPECT_EQ(nodes[2].outputs.at(0), m.find_tensor("y"));
    } else {
      // Along the last axis both meanings agree: the node stays, with the
      // axis explicit.
      ASSERT_EQ(nodes.size(), 1u);
      EXPECT_EQ(nodes[0].op, "Softmax");
      EXPECT_EQ(nodes[0].find_attr("axis")->i, axis);
    }
  }
}

TEST(InferShapes, Resize10BecomesResizeWithoutRoi) {
  ModelBuilder b(10);
  b.input("x", onnx::TensorProto_DataType_FLOAT, {"1", "1", "2", "2"});
  b.float_raw("scales", {4}, {1.f, 1.f, 2.f, 2.f});
  b.node("Resize", {"x", "scales"}, {"y"}, "resize");
  b.output("y", onnx::TensorProto_DataType_FLOAT, {"1", "1", "4", "4"});
  ir::Model m;
  std::string err;
  ASSERT_TRUE(b.import(&m, &err)) << err;
  ASSERT_TRUE(infer_shapes(&m, &err)) << err;
  const ir::Node& n = m.main().nodes.at(0);
  EXPECT_EQ(n.inputs, (std::vector<int>{m.find_tensor("x"), -1, m.find_tensor("scales")}));
  ASSERT_NE(n.find_attr("coordinate_transformation_mode"), nullptr);
  EXPECT_EQ(n.find_attr("coordinate_transformation_mode")->s, "asymmetric");
  ASSERT_NE(n.find_attr("nearest_mode"), nullptr);
  EXPECT_EQ(n.find_attr("nearest_mode")->s, "floor");
  EXPECT_EQ(tensor(m, "y").shape, (std::vector<int64_t>{1, 1, 4, 4}));
}

}  // namespace
