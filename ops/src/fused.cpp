#include "kite/ops/fused.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace kite::ops {
namespace {

struct KindName {
  const char* name;
  FusedActivation::Kind kind;
};

constexpr KindName kKinds[] = {
    {"Relu", FusedActivation::kRelu},           {"Clip", FusedActivation::kClip},
    {"Sigmoid", FusedActivation::kSigmoid},     {"SiLU", FusedActivation::kSiLU},
    {"HardSigmoid", FusedActivation::kHardSigmoid}, {"HardSwish", FusedActivation::kHardSwish},
    {"LeakyRelu", FusedActivation::kLeakyRelu}, {"Tanh", FusedActivation::kTanh},
    {"Gelu", FusedActivation::kGelu},           {"GeluTanh", FusedActivation::kGeluTanh},
};

bool is_activation_attr(const std::string& name) {
  return name == "activation" || name == "activation_alpha" || name == "activation_beta";
}

}  // namespace

std::string parse_fused_activation(const OpNode& op, const std::string& pattern, bool optional,
                                   FusedActivation* out) {
  *out = FusedActivation();
  const Attr* a = op.find_attr("activation");
  if (a == nullptr) return optional ? "" : "attribute 'activation' is missing";
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
  const Attr* alpha = op.find_attr("activation_alpha");
  const Attr* beta = op.find_attr("activation_beta");
  if ((alpha && alpha->type != KITE_ATTR_FLOAT) || (beta && beta->type != KITE_ATTR_FLOAT)) {
    return "activation_alpha and activation_beta must be floats";
  }
  const float inf = std::numeric_limits<float>::infinity();
  switch (out->kind) {
    case FusedActivation::kClip:
      out->alpha = alpha ? alpha->f : -inf;
      out->beta = beta ? beta->f : inf;
      break;
    case FusedActivation::kLeakyRelu:
      out->alpha = alpha ? alpha->f : 0.01f;
      break;
    case FusedActivation::kHardSigmoid:
      out->alpha = alpha ? alpha->f : 0.2f;
      out->beta = beta ? beta->f : 0.5f;
      break;
    case FusedActivation::kHardSwish:
      out->alpha = alpha ? alpha->f : 1.0f / 6.0f;
      out->beta = beta ? beta->f : 0.5f;
      break;
    default:
      break;
  }
  return "";
}

OpNode fused_primitive(const OpNode& fused, const char* op_type, size_t num_inputs) {
  OpNode p;
  p.name = fused.name;
  p.op = op_type;
  const size_t count = std::min(num_inputs, fused.inputs.size());
  p.inputs.assign(fused.inputs.begin(), fused.inputs.begin() + static_cast<std::ptrdiff_t>(count));
  for (const Attr& a : fused.attrs) {
    if (!is_activation_attr(a.name)) p.attrs.push_back(a);
  }
  p.num_outputs = 1;
  return p;
}

std::string expect_declared_output(const std::vector<TensorType>& outputs, size_t k, kite_dtype dtype,
                                   const std::vector<int64_t>& shape) {
  if (k >= outputs.size() || !outputs[k].present) return "output " + std::to_string(k) + " is missing";
  const TensorType& t = outputs[k];
  if (t.dtype != dtype || t.shape != shape) {
    return "output '" + t.name + "' is " + dtype_name(t.dtype) + " " + shape_string(t.shape) + ", expected " +
           dtype_name(dtype) + " " + shape_string(shape);
  }
  return "";
}

std::string check_primitive_output(const OpNode& primitive_op, const std::vector<TensorType>& outputs, size_t k) {
  std::vector<TensorType> inferred;
  std::string err;
  if (!infer_types(primitive_op, &inferred, &err)) return err;
  if (inferred.empty()) return "no output inferred";
  return expect_declared_output(outputs, k, inferred[0].dtype, inferred[0].shape);
}

}  // namespace kite::ops
