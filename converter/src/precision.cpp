#include "kite/converter/precision.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>

#include "kite/ops/half.h"
#include "passes/graph_query.h"
#include "passes/pass.h"
#include "src/const_eval.h"

namespace kite::converter {

namespace {

constexpr float kHalfMax = 65504.0f;

enum class Kind { kArith, kFollow, kFp32 };

bool in(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* o : ops) {
    if (op == o) return true;
  }
  return false;
}

// What a node may do, and when it must stay fp32, why.
Kind classify(const ir::Node& n, std::string* why) {
  const std::string& op = n.op;
  if (!n.fused_pattern.empty()) {
    if (in(op, {"FusedConv", "FusedMatMul", "FusedGemm", "Gelu"})) return Kind::kArith;
    if (op == "ChannelShuffle") return Kind::kFollow;  // moves values, as its body's ops
    *why = "fused " + op + " computes in fp32 (normalization/attention)";
    return Kind::kFp32;
  }
  if (!n.domain.empty()) {
    *why = "domain " + n.domain;
    return Kind::kFp32;
  }
  if (in(op, {"Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu",
              "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Gelu",
              "Erf", "Neg", "Abs", "Max", "Min", "Elu", "Mish", "Softplus", "MaxPool",
              "AveragePool", "Where"})) {
    return Kind::kArith;
  }
  if (in(op, {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Split",
              "Identity", "Gather", "Pad", "Resize", "Expand", "Tile", "DepthToSpace",
              "SpaceToDepth"})) {
    return Kind::kFollow;
  }
  if (in(op, {"BatchNormalization", "LayerNormalization", "InstanceNormalization",
              "GroupNormalization", "LpNormalization", "MeanVarianceNormalization"})) {
    *why = "normalization computes in fp32";
  } else if (in(op, {"Softmax", "LogSoftmax"})) {
    *why = op + " computes in fp32";
  } else if (op.rfind("Reduce", 0) == 0 || in(op, {"GlobalAveragePool", "GlobalMaxPool", "CumSum",
                                                    "ArgMax", "ArgMin", "TopK", "Einsum"})) {
    *why = "reduction computes in fp32";
  } else if (in(op, {"Exp", "Log", "Pow", "Sqrt", "Reciprocal"})) {
    *why = op + " leaves half's range easily; fp32";
  } else {
    *why = op + " runs in fp32";
  }
  return Kind::kFp32;
}

// The input slots of the node's float type T (Where's condition is bool, so
// only float tensors are ever converted anyway; Resize's roi and scales are
// float32 whatever X is).
bool is_t_slot(const ir::Node& n, size_t slot) {
  if (n.op == "Resize") return slot == 0;
  if (n.op == "Where") return slot != 0;
  return true;
}

bool is_f32(const ir::Model& m, int t) {
  return t >= 0 && m.tensors[static_cast<size_t>(t)].dtype == KITE_DTYPE_FLOAT32;
}

// Tensors read by any subgraph (If branches): their producers stay fp32, so
// that a branch never sees a type that changed under it.
std::set<int> subgraph_reads(const ir::Model& m) {
  std::set<int> reads;
  for (size_t g = 1; g < m.graphs.size(); ++g) {
    std::vector<int> r;
    passes::collect_graph_reads(m, static_cast<int>(g), &r);
    reads.insert(r.begin(), r.end());
  }
  return reads;
}

struct Plan {
  std::vector<Kind> kind;
  std::vector<std::string> why;  // for kFp32
  std::vector<bool> usable;      // may run in fp16 at all
};

Plan make_plan(const ir::Model& m) {
  const ir::Graph& g = m.main();
  const std::set<int> escaping = subgraph_reads(m);
  Plan p;
  p.kind.resize(g.nodes.size());
  p.why.resize(g.nodes.size());
  p.usable.resize(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    p.kind[i] = classify(n, &p.why[i]);
    // A lookup in a weight table (an embedding) stores the table in fp16.
    if (n.op == "Gather" && !n.inputs.empty() && is_f32(m, n.inputs[0]) &&
        m.tensors[static_cast<size_t>(n.inputs[0])].is_constant()) {
      p.kind[i] = Kind::kArith;
    }
    if (p.kind[i] == Kind::kFp32) continue;
    bool any_float = false;
    for (int o : n.outputs) any_float = any_float || is_f32(m, o);
    bool read_by_subgraph = false;
    for (int o : n.outputs) read_by_subgraph = read_by_subgraph || escaping.count(o) > 0;
    if (n.has_subgraph()) {
      p.kind[i] = Kind::kFp32;
      p.why[i] = "has a subgraph";
    } else if (!any_float) {
      p.kind[i] = Kind::kFp32;
      p.why[i] = "no float32 result";
    } else if (read_by_subgraph) {
      p.kind[i] = Kind::kFp32;
      p.why[i] = "a subgraph reads its result";
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) p.usable[i] = p.kind[i] != Kind::kFp32;
  return p;
}

// Data movement follows what it reads: fp16 when every float activation it
// reads is fp16 (and it reads one), so it never needs a cast of its own.
void settle_followers(const ir::Model& m, const Plan& p, std::vector<bool>* half) {
  const ir::Graph& g = m.main();
  std::vector<bool> half_tensor(m.tensors.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (p.kind[i] == Kind::kFollow) {
      bool reads_activation = false, all_half = true;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int t = n.inputs[k];
        if (!is_f32(m, t) || !is_t_slot(n, k) || m.tensors[static_cast<size_t>(t)].is_constant()) continue;
        reads_activation = true;
        all_half = all_half && half_tensor[static_cast<size_t>(t)];
      }
      (*half)[i] = reads_activation && all_half;
    }
    if ((*half)[i]) {
      for (int o : n.outputs) {
        if (o >= 0) half_tensor[static_cast<size_t>(o)] = true;
      }
    }
  }
}

// ---- simulation --------------------------------------------------------------

void round_to_half(std::vector<uint8_t>* bytes) {
  const size_t n = bytes->size() / sizeof(float);
  float* f = reinterpret_cast<float*>(bytes->data());
  for (size_t i = 0; i < n; ++i) f[i] = half_to_float(float_to_half(f[i]));
}

double max_abs_f32(const std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() / sizeof(float);
  const float* f = reinterpret_cast<const float*>(bytes.data());
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = std::fabs(static_cast<double>(f[i]));
    if (std::isfinite(v)) m = std::max(m, v);
  }
  return m;
}

// The main graph, run node by node with the CPU kernels on a copy of the
// model whose every tensor is a "constant" holding its current value.
class Simulator {
 public:
  explicit Simulator(const ir::Model& model) : work_(model) {
    for (ir::Tensor& t : work_.tensors) {
      if (!t.is_constant()) {
        t.kind = ir::TensorKind::Constant;
        t.data.clear();
      }
    }
    const ir::Graph& g = work_.main();
    std::vector<int> producer(work_.tensors.size(), -1);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int o : g.nodes[i].outputs) {
        if (o >= 0) producer[static_cast<size_t>(o)] = static_cast<int>(i);
      }
    }
    readers_.resize(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int t : g.nodes[i].inputs) {
        if (t >= 0 && producer[static_cast<size_t>(t)] >= 0) {
          readers_[static_cast<size_t>(producer[static_cast<size_t>(t)])].push_back(i);
        }
      }
    }
  }

  // Runs the fp32 graph on one sample; keeps every value as the baseline.
  bool run_reference(const ir::Model& model, const CalibrationSample& sample, std::string* err) {
    const ir::Graph& g = work_.main();
    for (int in : g.inputs) {
      ir::Tensor& t = work_.tensors[static_cast<size_t>(in)];
      auto it = sample.find(t.name);
      if (it == sample.end() && g.inputs.size() == 1 && sample.size() == 1) it = sample.begin();
      if (it == sample.end()) return fail(err, "no calibration value for input '" + t.name + "'");
      const CalibrationValue& v = it->second;
      const std::string what = "calibration value '" + it->first + "' for input '" + t.name + "'";
      if (v.dtype != t.dtype) {
        return fail(err, what + " is " + kite::ops::dtype_name(v.dtype) + ", the input is " +
                             kite::ops::dtype_name(t.dtype));
      }
      if (v.data.size() != model.tensors[static_cast<size_t>(in)].byte_size()) {
        return fail(err, what + " has shape " + kite::ops::shape_string(v.shape) + ", the input " +
                             kite::ops::shape_string(t.shape));
      }
      t.data = v.data;
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!evaluate(i, false, err)) return false;
    }
    baseline_.resize(work_.tensors.size());
    for (size_t t = 0; t < work_.tensors.size(); ++t) baseline_[t] = work_.tensors[t].data;
    return true;
  }

  // max|value| of node i's float32 inputs (weights too) and outputs in the
  // baseline run.
  double range_of(size_t i) const {
    const ir::Node& n = work_.main().nodes[i];
    double m = 0;
    for (int t : n.outputs) {
      if (is_f32(work_, t)) m = std::max(m, max_abs_f32(baseline_[static_cast<size_t>(t)]));
    }
    for (int t : n.inputs) {  // weights too: a weight beyond 65504 is infinite in half
      if (is_f32(work_, t)) m = std::max(m, max_abs_f32(baseline_[static_cast<size_t>(t)]));
    }
    return m;
  }

  // Runs the graph with the nodes in `half` simulated in fp16 and returns the
  // largest relative output error (inf for a non-finite output where the
  // reference is finite). Only nodes downstream of a half node are run.
  bool error_with(const std::vector<bool>& half, double* error, std::string* err) {
    const ir::Graph& g = work_.main();
    std::vector<bool> dirty(g.nodes.size(), false);
    for (size_t i = 0; i < g.nodes.size(); ++i) dirty[i] = half[i];
    std::vector<size_t> touched;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!dirty[i]) continue;
      if (!evaluate(i, half[i], err)) return false;
      for (int o : g.nodes[i].outputs) {
        if (o >= 0) touched.push_back(static_cast<size_t>(o));
      }
      for (size_t r : readers_[i]) dirty[r] = true;
    }
    *error = 0;
    for (int out : g.outputs) {
      const size_t o = static_cast<size_t>(out);
      if (!is_f32(work_, out)) continue;
      const std::vector<uint8_t>& ref = baseline_[o];
      const std::vector<uint8_t>& got = work_.tensors[o].data;
      const size_t n = ref.size() / sizeof(float);
      const float* r = reinterpret_cast<const float*>(ref.data());
      const float* s = reinterpret_cast<const float*>(got.data());
      double peak = 0, diff = 0;
      for (size_t k = 0; k < n; ++k) {
        if (!std::isfinite(r[k])) continue;
        peak = std::max(peak, std::fabs(static_cast<double>(r[k])));
        const double d = std::isfinite(s[k]) ? std::fabs(static_cast<double>(s[k]) - r[k])
                                             : std::numeric_limits<double>::infinity();
        diff = std::max(diff, d);
      }
      *error = std::max(*error, peak > 0 ? diff / peak : diff);
    }
    for (size_t t : touched) work_.tensors[t].data = baseline_[t];  // back to the reference
    return true;
  }

 private:
  static bool fail(std::string* err, const std::string& m) {
    if (err) *err = m;
    return false;
  }


  bool evaluate(size_t i, bool half, std::string* err) {
    const ir::Node& n = work_.main().nodes[i];
    std::vector<std::pair<size_t, std::vector<uint8_t>>> saved;
    if (half) {
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int t = n.inputs[k];
        if (!is_f32(work_, t) || !is_t_slot(n, k)) continue;
        std::vector<uint8_t>& data = work_.tensors[static_cast<size_t>(t)].data;
        saved.emplace_back(static_cast<size_t>(t), data);
        round_to_half(&data);
      }
      // A fused node's own constants (the GELU's 0.5, ...) round too.
      for (const ir::Node& b : n.body) {
        for (int t : b.inputs) {
          if (!is_f32(work_, t)) continue;
          ir::Tensor& bt = work_.tensors[static_cast<size_t>(t)];
          if (bt.data.empty()) continue;
          saved.emplace_back(static_cast<size_t>(t), bt.data);
          round_to_half(&bt.data);
        }
      }
    }
    // Outputs are written, not weights, while the node runs.
    for (int o : n.outputs) {
      if (o >= 0) work_.tensors[static_cast<size_t>(o)].kind = ir::TensorKind::Activation;
    }
    std::vector<std::vector<uint8_t>> outputs;
    const bool ok = evaluator_.evaluate(work_, n, &outputs, err);
    for (int o : n.outputs) {
      if (o >= 0) work_.tensors[static_cast<size_t>(o)].kind = ir::TensorKind::Constant;
    }
    // Restored newest first: a tensor read twice was saved twice.
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) work_.tensors[it->first].data = std::move(it->second);
    if (!ok) return false;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int o = n.outputs[k];
      if (o < 0) continue;
      if (half && is_f32(work_, o)) round_to_half(&outputs[k]);
      work_.tensors[static_cast<size_t>(o)].data = std::move(outputs[k]);
    }
    return true;
  }

  ir::Model work_;
  CpuEvaluator evaluator_;
  std::vector<std::vector<size_t>> readers_;
  std::vector<std::vector<uint8_t>> baseline_;
};

std::vector<CalibrationSample> random_samples(const ir::Model& m, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<CalibrationSample> samples(static_cast<size_t>(std::max(count, 1)));
  for (CalibrationSample& s : samples) {
    for (int in : m.main().inputs) {
      const ir::Tensor& t = m.tensors[static_cast<size_t>(in)];
      CalibrationValue v;
      v.dtype = t.dtype;
      v.shape = t.shape;
      v.data.assign(static_cast<size_t>(t.byte_size()), 0);
      if (t.dtype == KITE_DTYPE_FLOAT32) {
        float* f = reinterpret_cast<float*>(v.data.data());
        for (size_t k = 0; k < v.data.size() / sizeof(float); ++k) f[k] = uniform(rng);
      }
      s[t.name] = std::move(v);
    }
  }
  return samples;
}

std::string format_error(double e) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", e);
  return buf;
}

// ---- rewriting ---------------------------------------------------------------

std::vector<uint8_t> to_half_bytes(const std::vector<uint8_t>& f32) {
  const size_t n = f32.size() / sizeof(float);
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, f32.data() + i * 4, 4);
    const uint16_t h = float_to_half(f);
    std::memcpy(out.data() + i * 2, &h, 2);
  }
  return out;
}

class Rewriter {
 public:
  explicit Rewriter(ir::Model* m) : m_(m) {}

  int casts = 0;

  void run(const std::vector<bool>& half) {
    ir::Graph& g = m_->main();
    std::vector<bool> is_output(m_->tensors.size(), false);
    for (int o : g.outputs) is_output[static_cast<size_t>(o)] = true;
    std::vector<ir::Node> nodes;
    nodes.reserve(g.nodes.size() * 2);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      ir::Node n = std::move(g.nodes[i]);
      std::map<int, int> remap;  // this node's view of tensors it reads or writes
      std::vector<ir::Node> after;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int t = n.inputs[k];
        if (t < 0 || !is_t_slot(n, k) || !was_f32(t)) continue;
        const int to = half[i] ? half_of(t, &nodes) : float_of(t, &nodes);
        remap[t] = to;
        n.inputs[k] = to;
      }
      if (half[i]) {
        for (int& o : n.outputs) {
          if (o < 0 || !was_f32(o)) continue;
          if (is_output[static_cast<size_t>(o)]) {
            // The graph's outputs keep float32: the node writes a float16
            // twin, cast into the output.
            const int h = add_like(o, KITE_DTYPE_FLOAT16, "_fp16");
            after.push_back(cast(h, o, KITE_DTYPE_FLOAT32));
            half_twin_[o] = h;
            remap[o] = h;
            o = h;
          } else {
            m_->tensors[static_cast<size_t>(o)].dtype = KITE_DTYPE_FLOAT16;
            flipped_.insert(o);
          }
        }
      }
      // A fused node's body reads what the node reads (a cast's result
      // now); in fp16 its own constants and scratch values are float16 too.
      for (ir::Node& b : n.body) {
        for (int& t : b.inputs) {
          if (t < 0) continue;
          const auto it = remap.find(t);
          if (it != remap.end()) t = it->second;
          else if (half[i] && was_f32(t) && m_->tensors[static_cast<size_t>(t)].is_constant()) t = half_constant(t);
        }
        for (int& t : b.outputs) {
          const auto it = remap.find(t);
          if (it != remap.end()) {
            t = it->second;
          } else if (half[i] && t >= 0 && m_->tensors[static_cast<size_t>(t)].dtype == KITE_DTYPE_FLOAT32) {
            m_->tensors[static_cast<size_t>(t)].dtype = KITE_DTYPE_FLOAT16;  // a scratch value
          }
        }
      }
      nodes.push_back(std::move(n));
      for (ir::Node& c : after) nodes.push_back(std::move(c));
    }
    g.nodes = std::move(nodes);
  }

 private:
  bool was_f32(int t) const {
    return m_->tensors[static_cast<size_t>(t)].dtype == KITE_DTYPE_FLOAT32 || flipped_.count(t) > 0;
  }

  int add_like(int t, kite_dtype dtype, const std::string& suffix) {
    ir::Tensor copy;
    const ir::Tensor& src = m_->tensors[static_cast<size_t>(t)];
    copy.name = m_->unused_tensor_name(src.name + suffix);
    copy.dtype = dtype;
    copy.shape = src.shape;
    copy.shape_known = true;
    copy.kind = ir::TensorKind::Activation;
    return m_->add_tensor(std::move(copy));
  }

  ir::Node cast(int from, int to, kite_dtype dtype) {
    ++casts;
    ir::Node c;
    c.name = m_->tensors[static_cast<size_t>(to)].name + "__cast";
    c.op = "Cast";
    c.inputs = {from};
    c.outputs = {to};
    c.attrs.push_back(kite::ops::int_attr("to", kite::ops::dtype_to_onnx(dtype)));
    return c;
  }

  int half_constant(int t) {
    const auto it = half_const_.find(t);
    if (it != half_const_.end()) return it->second;
    const ir::Tensor& src = m_->tensors[static_cast<size_t>(t)];
    ir::Tensor h;
    h.name = m_->unused_tensor_name(src.name + "_fp16");
    h.dtype = KITE_DTYPE_FLOAT16;
    h.shape = src.shape;
    h.shape_known = true;
    h.kind = ir::TensorKind::Constant;
    h.data = to_half_bytes(src.data);
    const int index = m_->add_tensor(std::move(h));
    half_const_[t] = index;
    return index;
  }

  // The float16 form of float32 tensor t for a reader in fp16.
  int half_of(int t, std::vector<ir::Node>* nodes) {
    if (m_->tensors[static_cast<size_t>(t)].is_constant()) return half_constant(t);
    if (flipped_.count(t)) return t;
    return cast_twin(t, KITE_DTYPE_FLOAT16, "_fp16", &half_twin_, nodes);
  }

  // The float32 form of t for a reader in fp32.
  int float_of(int t, std::vector<ir::Node>* nodes) {
    if (!flipped_.count(t)) return t;
    return cast_twin(t, KITE_DTYPE_FLOAT32, "_fp32", &float_twin_, nodes);
  }

  // t cast to dtype: one Cast (added to nodes) the first time, remembered
  // in twins for the readers after.
  int cast_twin(int t, kite_dtype dtype, const std::string& suffix, std::map<int, int>* twins,
                std::vector<ir::Node>* nodes) {
    const auto it = twins->find(t);
    if (it != twins->end()) return it->second;
    const int twin = add_like(t, dtype, suffix);
    nodes->push_back(cast(t, twin, dtype));
    (*twins)[t] = twin;
    return twin;
  }

  ir::Model* m_;
  std::set<int> flipped_;            // float32 activations now float16 in place
  std::map<int, int> half_twin_;     // float32 tensor -> its float16 cast
  std::map<int, int> float_twin_;    // flipped tensor -> its float32 cast
  std::map<int, int> half_const_;    // float32 constant -> float16 copy
};

uint64_t constant_bytes(const ir::Model& m) {
  uint64_t b = 0;
  for (const ir::Tensor& t : m.tensors) {
    if (t.is_constant()) b += t.data.size();
  }
  return b;
}

}  // namespace

bool parse_precision(const std::string& text, Precision* out) {
  if (text == "fp32") *out = Precision::kFp32;
  else if (text == "fp16") *out = Precision::kFp16;
  else if (text == "mixed") *out = Precision::kMixed;
  else return false;
  return true;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp16: return "fp16";
    case Precision::kMixed: return "mixed";
    default: return "fp32";
  }
}

bool apply_precision(ir::Model* model, const PrecisionOptions& options, PrecisionReport* report,
                     std::string* err) {
  report->precision = options.precision;
  report->tolerance = options.tolerance;
  report->weight_bytes_before = report->weight_bytes_after = constant_bytes(*model);
  const ir::Graph& g = model->main();
  const Plan plan = make_plan(*model);
  std::vector<bool> half(g.nodes.size(), false);
  report->nodes.resize(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    report->nodes[i].name = g.nodes[i].name;
    report->nodes[i].op = g.nodes[i].op;
    report->nodes[i].reason = plan.kind[i] == Kind::kFp32 ? plan.why[i] : "--precision fp32";
  }
  if (options.precision == Precision::kFp32) {
    report->fp32_nodes = static_cast<int>(g.nodes.size());
    return true;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (plan.kind[i] == Kind::kArith) half[i] = true;
  }
  if (options.precision == Precision::kMixed) {
    // The measurement runs single nodes; a branch taken at run time cannot
    // be simulated here.
    for (const ir::Node& n : g.nodes) {
      if (n.has_subgraph()) {
        if (err) {
          *err = "--precision mixed: " + n.label() +
                 " has subgraphs, which the measurement cannot run; use --precision fp16 or fp32";
        }
        return false;
      }
    }
    std::vector<CalibrationSample> samples = options.samples;
    if (samples.empty()) {
      samples = random_samples(*model, options.random_samples, options.seed);
      report->inputs = "random (" + std::to_string(samples.size()) + " sample(s), uniform in [-1, 1], seed " +
                       std::to_string(options.seed) + ")";
    } else {
      report->inputs = "calibration (" + std::to_string(samples.size()) + " sample(s))";
    }
    std::vector<double> own(g.nodes.size(), 0.0);
    std::vector<std::string> why(g.nodes.size());
    std::vector<std::unique_ptr<Simulator>> sims;
    std::string sim_err;
    for (const CalibrationSample& sample : samples) {
      sims.push_back(std::make_unique<Simulator>(*model));
      if (!sims.back()->run_reference(*model, sample, &sim_err)) {
        if (err) *err = "--precision mixed: the fp32 reference run failed: " + sim_err;
        return false;
      }
    }
    for (const auto& sim : sims) {
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        if (plan.kind[i] != Kind::kArith || !half[i]) continue;
        const double range = sim->range_of(i);
        if (range > kHalfMax) {
          half[i] = false;
          why[i] = "overflow: its fp32 values reach " + format_error(range) + ", beyond half's 65504";
          own[i] = std::numeric_limits<double>::infinity();
          continue;
        }
        std::vector<bool> only(g.nodes.size(), false);
        only[i] = true;
        double e = 0;
        if (!sim->error_with(only, &e, &sim_err)) {
          if (err) *err = "--precision mixed: " + sim_err;
          return false;
        }
        own[i] = std::max(own[i], e);
        if (!(e <= options.tolerance)) {
          half[i] = false;
          why[i] = "error " + format_error(e) + " x max|ref| at the outputs in fp16 exceeds the tolerance " +
                   format_error(options.tolerance);
        }
      }
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) report->nodes[i].error = plan.kind[i] == Kind::kArith ? own[i] : -1;
    // The whole chosen graph once more: per-node errors compound.
    for (;;) {
      settle_followers(*model, plan, &half);
      double worst = 0;
      for (const auto& sim : sims) {
        double e = 0;
        if (!sim->error_with(half, &e, &sim_err)) {
          if (err) *err = "--precision mixed: " + sim_err;
          return false;
        }
        worst = std::max(worst, e);
      }
      report->final_error = worst;
      if (worst <= options.tolerance) break;
      int pick = -1;
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        if (plan.kind[i] == Kind::kArith && half[i] && (pick < 0 || own[i] > own[static_cast<size_t>(pick)])) {
          pick = static_cast<int>(i);
        }
      }
      if (pick < 0) break;
      half[static_cast<size_t>(pick)] = false;
      why[static_cast<size_t>(pick)] = "the whole graph in fp16 gave error " + format_error(worst) +
                                       " > tolerance; this node had the largest own error (" +
                                       format_error(own[static_cast<size_t>(pick)]) + ")";
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (plan.kind[i] == Kind::kArith) {
        report->nodes[i].reason = half[i] ? "measured: error " + format_error(own[i]) + " within tolerance" : why[i];
      }
    }
  } else {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (plan.kind[i] == Kind::kArith) report->nodes[i].reason = "--precision fp16";
    }
  }
  settle_followers(*model, plan, &half);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    report->nodes[i].fp16 = half[i];
    if (plan.kind[i] == Kind::kFollow) {
      report->nodes[i].reason = half[i] ? "data movement on fp16 values" : "data movement on fp32 values";
    }
    if (half[i]) ++report->fp16_nodes;
    else ++report->fp32_nodes;
  }
  Rewriter rewriter(model);
  rewriter.run(half);
  report->casts = rewriter.casts;
  passes::compact_model(model);  // drops the float32 constants no node reads now
  report->weight_bytes_after = constant_bytes(*model);
  return true;
}

}  // namespace kite::converter
