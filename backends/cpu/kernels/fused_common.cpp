#include "fused_common.h"

#include <limits>

namespace kite::cpu::fused {

namespace {

struct KindName {
  const char* name;
  Activation::Kind kind;
};

constexpr KindName kKinds[] = {
    {"Relu", Activation::kRelu},           {"Clip", Activation::kClip},
    {"Sigmoid", Activation::kSigmoid},     {"SiLU", Activation::kSiLU},
    {"HardSigmoid", Activation::kHardSigmoid}, {"HardSwish", Activation::kHardSwish},
    {"LeakyRelu", Activation::kLeakyRelu}, {"Tanh", Activation::kTanh},
    {"Gelu", Activation::kGelu},           {"GeluTanh", Activation::kGeluTanh},
};

bool is_activation_attr(const std::string& name) {
  return name == "activation" || name == "activation_alpha" || name == "activation_beta";
}

inline float sigmoid(float x) {
  return x >= 0.0f ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
}

template <typename F>
void apply(float* y, int64_t rows, int64_t n, const float* bias, ThreadPool& pool, F f) {
  if (bias == nullptr) {
    pool.parallel_for(rows * n, 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] = f(y[i]);
    });
    return;
  }
  pool.parallel_for(rows, rows_per_chunk(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * n;
      for (int64_t j = 0; j < n; ++j) row[j] = f(row[j] + bias[j]);
    }
  });
}

}  // namespace

std::string parse_activation(const OpNode& op, const std::string& pattern, bool optional,
                             Activation* out) {
  *out = Activation();
  const kite::ops::Attr* a = op.find_attr("activation");
  if (a == nullptr) {
    if (optional) return "";
    return "attribute 'activation' is missing";
  }
  if (a->type != KITE_ATTR_STRING) return "attribute 'activation' must be a string";
  bool known = false;
  for (const KindName& k : kKinds) {
    if (a->s == k.name) {
      out->kind = k.kind;
      known = true;
    }
  }
  if (!known) return "activation '" + a->s + "' is not supported";
  const std::string suffix = "+" + a->s;
  if (pattern.size() < suffix.size() ||
      pattern.compare(pattern.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return "pattern '" + pattern + "' does not end with activation " + a->s;
  }
  const kite::ops::Attr* alpha = op.find_attr("activation_alpha");
  const kite::ops::Attr* beta = op.find_attr("activation_beta");
  if ((alpha && alpha->type != KITE_ATTR_FLOAT) || (beta && beta->type != KITE_ATTR_FLOAT)) {
    return "activation_alpha and activation_beta must be floats";
  }
  switch (out->kind) {
    case Activation::kClip:
      out->alpha = alpha ? alpha->f : -std::numeric_limits<float>::infinity();
      out->beta = beta ? beta->f : std::numeric_limits<float>::infinity();
      break;
    case Activation::kLeakyRelu:
      out->alpha = alpha ? alpha->f : 0.01f;
      break;
    case Activation::kHardSigmoid:
      out->alpha = alpha ? alpha->f : 0.2f;
      out->beta = beta ? beta->f : 0.5f;
      break;
    case Activation::kHardSwish:
      out->alpha = alpha ? alpha->f : 1.0f / 6.0f;
      out->beta = beta ? beta->f : 0.5f;
      break;
    default:
      break;
  }
  return "";
}

void apply_activation(const Activation& act, float* y, int64_t rows, int64_t n, const float* bias,
                      ThreadPool& pool) {
  const float alpha = act.alpha, beta = act.beta;
  switch (act.kind) {
    case Activation::kNone:
      if (bias) apply(y, rows, n, bias, pool, [](float x) { return x; });
      return;
    case Activation::kRelu:
      return apply(y, rows, n, bias, pool, [](float x) { return x > 0.0f ? x : 0.0f; });
    case Activation::kClip:
      // min then max, as ONNX Clip (NaN passes).
      return apply(y, rows, n, bias, pool, [alpha, beta](float x) {
        const float v = x < alpha ? alpha : x;
        return v > beta ? beta : v;
      });
    case Activation::kSigmoid:
      return apply(y, rows, n, bias, pool, [](float x) { return sigmoid(x); });
    case Activation::kSiLU:
      return apply(y, rows, n, bias, pool, [](float x) { return x * sigmoid(x); });
    case Activation::kHardSigmoid:
      return apply(y, rows, n, bias, pool, [alpha, beta](float x) {
        return std::max(0.0f, std::min(1.0f, alpha * x + beta));
      });
    case Activation::kHardSwish:
      return apply(y, rows, n, bias, pool, [alpha, beta](float x) {
        return x * std::max(0.0f, std::min(1.0f, alpha * x + beta));
      });
    case Activation::kLeakyRelu:
      return apply(y, rows, n, bias, pool, [alpha](float x) { return x >= 0.0f ? x : alpha * x; });
    case Activation::kTanh:
      return apply(y, rows, n, bias, pool, [](float x) { return std::tanh(x); });
    case Activation::kGelu:
      return apply(y, rows, n, bias, pool, [](float x) {
        return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
      });
    case Activation::kGeluTanh:
      return apply(y, rows, n, bias, pool, [](float x) {
        return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      });
  }
}

OpNode primitive(const OpNode& fused, const char* op_type, size_t num_inputs) {
  OpNode p;
  p.name = fused.name;
  p.op = op_type;
  p.inputs.assign(fused.inputs.begin(),
                  fused.inputs.begin() + static_cast<std::ptrdiff_t>(std::min(num_inputs, fused.inputs.size())));
  for (const kite::ops::Attr& a : fused.attrs) {
    if (!is_activation_attr(a.name)) p.attrs.push_back(a);
  }
  p.num_outputs = 1;
  return p;
}

std::string expect_output(const OpNode& op, const std::vector<TensorType>& outputs, size_t k,
                          kite_dtype dtype, const Shape& shape) {
  if (k >= outputs.size() || !outputs[k].present) {
    return "output " + std::to_string(k) + " is missing";
  }
  const TensorType& t = outputs[k];
  if (t.dtype != dtype || t.shape != shape) {
    return "output '" + t.name + "' is " + kite::ops::dtype_name(t.dtype) + " " +
           kite::ops::shape_string(t.shape) + ", expected " + kite::ops::dtype_name(dtype) + " " +
           kite::ops::shape_string(shape);
  }
  (void)op;
  return "";
}

std::string check_primitive_output(const OpNode& fused, const OpNode& primitive_op,
                                   const std::vector<TensorType>& outputs, size_t k) {
  std::vector<TensorType> inferred;
  std::string err;
  if (!kite::ops::infer_types(primitive_op, &inferred, &err)) return err;
  if (inferred.empty()) return "no output inferred";
  return expect_output(fused, outputs, k, inferred[0].dtype, inferred[0].shape);
}

SubNode::SubNode(const kite_backend_node& fused, const char* op_type,
                 const std::vector<kite::ops::Attr>& attrs, const std::vector<int>& input_slots,
                 int output_slot)
    : op_type_(op_type), attr_values_(attrs) {
  for (int slot : input_slots) {
    inputs_.push_back(slot >= 0 && slot < fused.num_inputs ? fused.inputs[slot] : nullptr);
  }
  outputs_.push_back(output_slot >= 0 && output_slot < fused.num_outputs ? fused.outputs[output_slot]
                                                                         : nullptr);
  strings_.resize(attr_values_.size());
  for (size_t k = 0; k < attr_values_.size(); ++k) {
    const kite::ops::Attr& a = attr_values_[k];
    kite_backend_attr c{};
    c.name = a.name.c_str();
    c.type = a.type;
    c.i = a.i;
    c.f = a.f;
    c.s = a.s.c_str();
    if (a.type == KITE_ATTR_INTS) {
      c.count = static_cast<int32_t>(a.ints.size());
      c.ints = a.ints.data();
    } else if (a.type == KITE_ATTR_FLOATS) {
      c.count = static_cast<int32_t>(a.floats.size());
      c.floats = a.floats.data();
    } else if (a.type == KITE_ATTR_STRINGS) {
      for (const std::string& s : a.strings) strings_[k].push_back(s.c_str());
      c.count = static_cast<int32_t>(a.strings.size());
      c.strings = strings_[k].data();
    }
    attrs_.push_back(c);
  }
  node_.name = fused.name;
  node_.op = op_type_.c_str();
  node_.domain = "";
  node_.fused_pattern = "";
  node_.num_inputs = static_cast<int32_t>(inputs_.size());
  node_.inputs = inputs_.data();
  node_.num_outputs = static_cast<int32_t>(outputs_.size());
  node_.outputs = outputs_.data();
  node_.num_attrs = static_cast<int32_t>(attrs_.size());
  node_.attrs = attrs_.data();
}

std::unique_ptr<Kernel> SubNode::prepare(PrepareFn fn, int threads, std::string* err,
                                         Workspace* workspace) {
  if (outputs_[0] == nullptr) {
    if (err) *err = op_type_ + ": the fused node lacks the output";
    return nullptr;
  }
  if (!kite::ops::from_backend_node(node_, &op_, err, true)) return nullptr;
  if (!kite::ops::check_declared_outputs(op_, kite::ops::outputs_from_backend_node(node_), err)) {
    return nullptr;
  }
  KernelArgs args{&node_, &op_, threads};
  args.workspace = workspace;
  return fn(args, err);
}

}  // namespace kite::cpu::fused
