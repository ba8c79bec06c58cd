#include "cuda_cases.h"

namespace kite::cudatest {

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{1, 3, 9, 11}, {8, 3, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true},
      {{2, 16, 13, 13}, {70, 16, 3, 3}, {aints("strides", {2, 2}), aints("pads", {1, 1, 1, 1})}, true},
      {{1, 32, 10, 10}, {32, 1, 3, 3}, {ai("group", 32), aints("pads", {1, 1, 1, 1})}, true},          // depthwise
      {{1, 24, 9, 7}, {24, 1, 5, 5}, {ai("group", 24), aints("pads", {2, 2, 2, 2}), aints("strides", {2, 1})}, false},
      {{1, 32, 12, 12}, {64, 8, 3, 3}, {ai("group", 4), aints("dilations", {2, 2})}, false},          // grouped, dilated
      {{1, 64, 7, 7}, {24, 64, 1, 1}, {}, true},                                                      // 1x1
      {{1, 8, 9, 10}, {16, 8, 3, 2}, {aints("pads", {0, 1, 2, 0}), aints("strides", {1, 2})}, true},  // asymmetric
      {{2, 6, 40}, {12, 6, 5}, {aints("pads", {2, 2})}, true},                                        // 1-D
      {{1, 130, 5, 5}, {67, 130, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true},                         // K tails
  };
  return cases;
}

void conv_graph(Graph& g, const ConvCase& c, const std::string& act) {
  const int x = g.input(c.x);
  const int w = g.weight(c.w, -0.5f, 0.5f);
  std::vector<int> in = {x, w};
  if (c.bias) in.push_back(g.weight({c.w[0]}));
  if (act.empty()) {
    g.op("Conv", in, c.attrs);
    return;
  }
  g.begin_body();
  const int y = activation(g, g.op("Conv", in, c.attrs), act);
  auto attrs = c.attrs;
  for (const auto& a : activation_attrs(act)) attrs.push_back(a);
  g.fuse("FusedConv", "Conv+" + act, in, attrs, {y});
}

const std::vector<std::pair<Shape, Shape>>& matmul_cases() {
  static const std::vector<std::pair<Shape, Shape>> cases = {
      {{70, 33}, {33, 90}},             // partial tiles
      {{1, 512}, {512, 100}},           // row vector (simple kernel)
      {{3, 7}, {7, 5}},                 // tiny (simple kernel)
      {{2, 50, 64}, {64, 48}},          // batch times shared weight (one taller product)
      {{2, 3, 20, 16}, {2, 3, 16, 24}}, // batched
      {{2, 1, 20, 16}, {1, 3, 16, 24}}, // broadcast batch dims (two levels)
      {{33}, {33, 17}},                 // 1-D left
      {{5, 33}, {33}},                  // 1-D right
  };
  return cases;
}

const std::vector<GemmCase>& gemm_cases() {
  static const std::vector<GemmCase> cases = {{false, false, {40}, 1.0f, 1.0f},    {false, true, {1, 40}, 0.5f, 2.0f},
                                              {true, false, {30, 40}, 1.0f, 0.5f}, {true, true, {30, 1}, 2.0f, 1.0f},
                                              {false, true, {}, 1.0f, 1.0f}};
  return cases;
}

void gemm_graph(Graph& g, const GemmCase& c) {
  const int a = g.input(c.ta ? Shape{50, 30} : Shape{30, 50});
  const int b = g.weight(c.tb ? Shape{40, 50} : Shape{50, 40});
  std::vector<int> in = {a, b};
  if (!c.c.empty()) in.push_back(g.weight(c.c));
  g.op("Gemm", in, {ai("transA", c.ta), ai("transB", c.tb), af("alpha", c.alpha), af("beta", c.beta)});
}

void fused_matmul_graph(Graph& g, const std::string& act) {
  const int a = g.input({1, 37, 48});
  const int b = g.weight({48, 80}, -0.3f, 0.3f);
  const int bias = g.weight({80});
  g.begin_body();
  int y = g.op("Add", {g.op("MatMul", {a, b}), bias});
  std::vector<kite::ops::Attr> attrs;
  std::string pattern = "MatMul+Add";
  if (!act.empty()) {
    y = activation(g, y, act);
    attrs = activation_attrs(act);
    pattern += "+" + act;
  }
  g.fuse("FusedMatMul", pattern, {a, b, bias}, attrs, {y});
}

void fused_gemm_graph(Graph& g, int64_t rows) {
  const int a = g.input({rows, 64});
  const int w = g.weight({10, 64});
  const int c = g.weight({10});
  g.begin_body();
  const int y = activation(g, g.op("Gemm", {a, w, c}, {ai("transB", 1)}), "HardSwish");
  auto attrs = activation_attrs("HardSwish");
  attrs.push_back(ai("transB", 1));
  g.fuse("FusedGemm", "Gemm+HardSwish", {a, w, c}, attrs, {y});
}

const std::vector<std::pair<Shape, Shape>>& broadcast_cases() {
  static const std::vector<std::pair<Shape, Shape>> cases = {{{2, 3, 4, 5}, {2, 3, 4, 5}}, {{2, 3, 4, 5}, {5}},
                                                             {{2, 3, 4, 5}, {3, 1, 1}},    {{4, 1}, {1, 6}},
                                                             {{2, 3, 4, 5}, {}},           {{7, 1, 9}, {7, 3, 1}}};
  return cases;
}

namespace {
const char* const kPadModes[] = {"constant", "reflect", "edge"};
constexpr int kCopies = 6;  // graphs before the pads
}  // namespace

int copy_graph_count() { return kCopies + 3; }

void copy_graph(Graph& g, int i) {
  switch (i) {
    case 0: g.op("Transpose", {g.input({2, 3, 4, 5})}, {aints("perm", {0, 2, 3, 1})}); return;
    case 1: g.op("Concat", {g.input({2, 3, 5}), g.input({2, 5, 5}), g.input({2, 1, 5})}, {ai("axis", 1)}); return;
    case 2: {
      const auto parts = g.node("Split", {g.input({3, 11, 3}), g.const_i64({3}, {2, 6, 3})}, {ai("axis", 1)}, 3);
      for (int t : parts) g.output(t);
      return;
    }
    case 3: {
      const int x = g.input({6, 9, 5});
      g.op("Slice", {x, g.const_i64({2}, {5, 1}), g.const_i64({2}, {-100, 8}), g.const_i64({2}, {0, 1}),
                     g.const_i64({2}, {-2, 3})});
      return;
    }
    case 4: g.op("Expand", {g.input({3, 1, 5}), g.const_i64({4}, {2, 3, 4, 5})}); return;
    case 5: g.op("Reshape", {g.input({2, 3, 4}), g.const_i64({2}, {6, 4})}); return;
    default:
      g.op("Pad", {g.input({1, 2, 4, 5}), g.const_i64({8}, {0, 0, 2, 1, 0, 0, 1, 3}), g.const_float({}, {0.5f})},
           {as("mode", kPadModes[i - kCopies])});
      return;
  }
}

const std::vector<ResizeCase>& resize_cases() {
  static const std::vector<ResizeCase> cases = {{"nearest", "asymmetric", {1, 1, 2, 2}},
                                                {"nearest", "half_pixel", {1, 1, 1.5f, 0.5f}},
                                                {"linear", "half_pixel", {1, 1, 2, 2}},
                                                {"linear", "align_corners", {1, 1, 2.5f, 1.5f}},
                                                {"linear", "pytorch_half_pixel", {1, 1, 0.5f, 2}},
                                                {"cubic", "half_pixel", {1, 1, 2, 2}}};
  return cases;
}

void resize_graph(Graph& g, const ResizeCase& c) {
  const int x = g.input({1, 3, 6, 8});
  g.op("Resize", {x, g.const_f32({0}, {}), g.const_f32({4}, c.scales)},
       {as("mode", c.mode), as("coordinate_transformation_mode", c.ct)});
}

namespace {
// Builds one case's graph and checks it.
void one(bool half, const std::string& label, const CaseCheck& check, const std::function<void(Graph&)>& build) {
  Graph g;
  if (half) g.use_float16();
  build(g);
  check(g, label);
}
}  // namespace

void sweep_convs(bool half, const CaseCheck& check) {
  for (size_t i = 0; i < conv_cases().size(); ++i) {
    one(half, "conv case " + std::to_string(i), check, [&](Graph& g) { conv_graph(g, conv_cases()[i]); });
  }
}

void sweep_fused_convs(bool half, const CaseCheck& check) {
  const ConvCase dense = {{1, 8, 14, 14}, {20, 8, 3, 3}, {aints("pads", {1, 1, 1, 1})}, true};
  const ConvCase depthwise = {{1, 16, 9, 9}, {16, 1, 3, 3}, {ai("group", 16), aints("pads", {1, 1, 1, 1})}, true};
  for (const char* act : {"Relu", "Clip", "SiLU", "HardSwish", "Sigmoid", "LeakyRelu"}) {
    one(half, std::string("Conv+") + act, check, [&](Graph& g) { conv_graph(g, dense, act); });
    one(half, std::string("depthwise Conv+") + act, check, [&](Graph& g) { conv_graph(g, depthwise, act); });
  }
}

void sweep_matmuls(bool half, const CaseCheck& check) {
  for (const auto& c : matmul_cases()) {
    one(half, "MatMul " + std::to_string(c.first.size()) + "-D x " + std::to_string(c.second.size()) + "-D", check,
        [&](Graph& g) { g.op("MatMul", {g.input(c.first), g.input(c.second)}); });
  }
}

void sweep_gemms(bool half, const CaseCheck& check) {
  for (size_t i = 0; i < gemm_cases().size(); ++i) {
    one(half, "gemm case " + std::to_string(i), check, [&](Graph& g) { gemm_graph(g, gemm_cases()[i]); });
  }
}

void sweep_fused_products(bool half, const CaseCheck& check) {
  for (const char* act : {"", "Relu", "Gelu", "GeluTanh", "HardSwish"}) {
    one(half, std::string("FusedMatMul ") + act, check, [&](Graph& g) { fused_matmul_graph(g, act); });
  }
  for (int64_t rows : {4, 33}) {  // the simple kernel, then the tiles
    one(half, "FusedGemm rows " + std::to_string(rows), check, [&](Graph& g) { fused_gemm_graph(g, rows); });
  }
}

void sweep_binary(bool half, const CaseCheck& check) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (size_t i = 0; i < broadcast_cases().size(); ++i) {
      const auto& c = broadcast_cases()[i];
      one(half, std::string(op) + " case " + std::to_string(i), check,
          [&](Graph& g) { g.op(op, {g.input(c.first), g.input(c.second, 0.5f, 1.5f)}); });
    }
  }
}

void sweep_unary(bool half, const CaseCheck& check) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "Softplus", "Sign", "Ceil", "Floor",
                         "Round", "Sin", "Cos", "Mish", "Elu", "HardSigmoid", "HardSwish", "Gelu"}) {
    one(half, op, check, [&](Graph& g) { g.op(op, {g.input({3, 51}, -3.0f, 3.0f)}); });
  }
  for (const char* op : {"Sqrt", "Log", "Reciprocal"}) {  // positive inputs
    one(half, op, check, [&](Graph& g) { g.op(op, {g.input({70}, 0.1f, 4.0f)}); });
  }
  one(half, "LeakyRelu", check,
      [](Graph& g) { g.op("LeakyRelu", {g.input({65})}, {af("alpha", 0.2f)}); });
  one(half, "Clip", check, [](Graph& g) {
    const int x = g.input({64}, -8.0f, 8.0f);
    g.op("Clip", {x, g.const_float({}, {-1.5f}), g.const_float({}, {2.0f})});
  });
}

void sweep_copies(bool half, const CaseCheck& check) {
  for (int i = 0; i < copy_graph_count(); ++i) {
    one(half, "copy graph " + std::to_string(i), check, [&](Graph& g) { copy_graph(g, i); });
  }
}

void sweep_resizes(bool half, const CaseCheck& check) {
  for (const ResizeCase& c : resize_cases()) {
    one(half, std::string("Resize ") + c.mode + " " + c.ct, check, [&](Graph& g) { resize_graph(g, c); });
  }
}

}  // namespace kite::cudatest
