// Rules of the elementwise ops: activations, arithmetic with numpy
// broadcasting, comparisons, logic, Where, Clip, Cast, softmax and Dropout.
#include <cmath>
#include <map>

#include "infer_util.h"

namespace kite::ops::detail {
namespace {

constexpr size_t kManyInputs = 1u << 16;  // variadic ops (Sum, Max, ...)

// Unary ops: the dtypes each accepts (ONNX type constraints, restricted to
// the dtypes Kite has). The output has the input's type.
const std::map<std::string, uint32_t>& unary_dtypes() {
  static const std::map<std::string, uint32_t> table = {
      {"Relu", kSigned},    {"Sigmoid", kFloat},   {"Tanh", kFloat},      {"Exp", kFloat},
      {"Log", kFloat},      {"Sqrt", kFloat},      {"Reciprocal", kFloat}, {"Erf", kFloat},
      {"Abs", kNumeric},    {"Neg", kSigned},      {"Floor", kFloat},     {"Ceil", kFloat},
      {"Round", kFloat},    {"Sin", kFloat},       {"Cos", kFloat},       {"Softplus", kFloat},
      {"Mish", kFloat},     {"Sign", kNumeric},    {"LeakyRelu", kFloat}, {"Elu", kFloat},
      {"HardSigmoid", kFloat}, {"HardSwish", kFloat}, {"Gelu", kFloat},   {"Not", kBool},
      {"Identity", kAny},
  };
  return table;
}

bool infer_unary(Ctx& c) {
  const uint32_t dtypes = unary_dtypes().at(c.node.op);
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "X", dtypes)) return false;
  const std::string& op = c.node.op;
  float f = 0;
  if (op == "LeakyRelu" || op == "Elu" || op == "HardSigmoid") {
    if (!c.attr_float("alpha", 0.01f, &f)) return false;
  }
  if (op == "HardSigmoid" && !c.attr_float("beta", 0.5f, &f)) return false;
  if (op == "Gelu") {
    std::string approximate;
    if (!c.attr_string("approximate", "none", &approximate)) return false;
    if (approximate != "none" && approximate != "tanh") {
      return c.fail("attribute 'approximate' is '" + approximate + "', expected none or tanh");
    }
  }
  return c.same_as_input(0, 0);
}

// Same-dtype binary and variadic ops with numpy broadcasting.
struct Broadcasting {
  uint32_t dtypes;
  bool bool_output;
};

const std::map<std::string, Broadcasting>& broadcasting_ops() {
  static const std::map<std::string, Broadcasting> table = {
      {"Add", {kNumeric, false}},       {"Sub", {kNumeric, false}},
      {"Mul", {kNumeric, false}},       {"Div", {kNumeric, false}},
      {"Equal", {kAny, true}},          {"Greater", {kNumeric, true}},
      {"Less", {kNumeric, true}},       {"GreaterOrEqual", {kNumeric, true}},
      {"LessOrEqual", {kNumeric, true}}, {"And", {kBool, true}},
      {"Or", {kBool, true}},            {"Xor", {kBool, true}},
      {"Max", {kNumeric, false}},       {"Min", {kNumeric, false}},
      {"Sum", {kFloat, false}},         {"Mean", {kFloat, false}},
  };
  return table;
}

bool infer_broadcasting(Ctx& c) {
  const Broadcasting& rule = broadcasting_ops().at(c.node.op);
  const bool variadic = c.node.op == "Max" || c.node.op == "Min" || c.node.op == "Sum" ||
                        c.node.op == "Mean";
  const size_t n = variadic ? c.num_inputs() : 2;
  if (!c.arity(variadic ? 1 : 2, variadic ? kManyInputs : 2, 1, 1)) return false;
  std::vector<size_t> inputs;
  std::vector<const char*> roles;
  for (size_t i = 0; i < n; ++i) {
    const char* role = variadic ? "data" : (i == 0 ? "A" : "B");
    if (!c.require(i, role)) return false;
    if (i == 0 ? !c.dtype_in(0, role, rule.dtypes) : !c.same_dtype(i, role, 0, roles[0])) {
      return false;
    }
    inputs.push_back(i);
    roles.push_back(role);
  }
  std::vector<int64_t> shape;
  if (!broadcast_inputs(c, inputs, roles.data(), &shape)) return false;
  return c.set(0, rule.bool_output ? KITE_DTYPE_BOOL : c.in(0).dtype, shape);
}

bool infer_pow(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "X", kFloat | kI32 | kI64) ||
      !c.dtype_in(1, "Y", kNumeric)) {
    return false;
  }
  static const char* const kRoles[] = {"X", "Y"};
  std::vector<int64_t> shape;
  return broadcast_inputs(c, {0, 1}, kRoles, &shape) && c.set(0, c.in(0).dtype, shape);
}

bool infer_where(Ctx& c) {
  if (!c.arity(3, 3, 1, 1) || !c.dtype_in(0, "condition", kBool) ||
      !c.dtype_in(1, "X", kAny) || !c.same_dtype(2, "Y", 1, "X")) {
    return false;
  }
  static const char* const kRoles[] = {"condition", "X", "Y"};
  std::vector<int64_t> shape;
  return broadcast_inputs(c, {0, 1, 2}, kRoles, &shape) && c.set(0, c.in(1).dtype, shape);
}

bool infer_prelu(Ctx& c) {
  if (!c.arity(2, 2, 1, 1) || !c.dtype_in(0, "X", kFloat | kI32 | kI64) ||
      !c.same_dtype(1, "slope", 0, "X")) {
    return false;
  }
  if (!broadcasts_to(c.shape(1), c.shape(0))) {
    return c.fail(c.input_label(1, "slope") + " has shape " + shape_string(c.shape(1)) +
                  ", which does not broadcast to " + c.input_label(0, "X") + " of shape " +
                  shape_string(c.shape(0)));
  }
  return c.same_as_input(0, 0);
}

// Clip: bounds as attributes (opset < 11) or optional scalar inputs.
bool infer_clip(Ctx& c) {
  if (!c.arity(1, 3, 1, 1) || !c.dtype_in(0, "input", kNumeric)) return false;
  static const char* const kRoles[] = {"input", "min", "max"};
  for (size_t i = 1; i <= 2; ++i) {
    if (!c.has(i)) continue;
    if (!c.same_dtype(i, kRoles[i], 0, "input")) return false;
    // ONNX asks for a scalar; exporters also write shape [1].
    if (c.rank(i) > 1 || c.in(i).numel() != 1) {
      return c.fail(c.input_label(i, kRoles[i]) + " has shape " + shape_string(c.shape(i)) +
                    ", expected a scalar");
    }
  }
  float bound_min = 0, bound_max = 0;
  if (!c.attr_float("min", -INFINITY, &bound_min) || !c.attr_float("max", INFINITY, &bound_max)) {
    return false;
  }
  if ((c.has_attr("min") || c.has_attr("max")) && (c.has(1) || c.has(2))) {
    return c.fail("bounds given both as attributes and as inputs");
  }
  return c.same_as_input(0, 0);
}

// Softmax, LogSoftmax, Hardmax. Before opset 13 the input is coerced to 2-D
// at `axis` (default 1), from 13 on the op runs along one axis (default -1);
// the output shape is the input's either way, so only the range is checked.
bool infer_softmax(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "input", kFloat) ||
      !c.rank_between(0, "input", 1, KITE_MAX_RANK)) {
    return false;
  }
  int64_t axis = 0;
  if (!c.attr_int("axis", -1, &axis) || !c.axis("attribute 'axis'", axis, c.rank(0), &axis)) {
    return false;
  }
  return c.same_as_input(0, 0);
}

bool infer_cast(Ctx& c) {
  if (!c.arity(1, 1, 1, 1) || !c.dtype_in(0, "input", kAny)) return false;
  if (!c.has_attr("to")) return c.fail("attribute 'to' is required");
  int64_t to = 0;
  if (!c.attr_int("to", 0, &to)) return false;
  const kite_dtype dtype = dtype_from_onnx(to);
  if (dtype == KITE_DTYPE_UNDEFINED) {
    return c.fail("attribute 'to' is ONNX type " + std::to_string(to) +
                  ", which Kite does not support");
  }
  return c.set(0, dtype, c.shape(0));
}

// Dropout at inference: output 0 is the input, output 1 (mask) is all true.
bool infer_dropout(Ctx& c) {
  if (!c.arity(1, 3, 1, 2) || !c.dtype_in(0, "data", kFloat)) return false;
  float ratio = 0.5f;
  if (!c.attr_float("ratio", 0.5f, &ratio)) return false;
  if (c.has(1)) {
    if (!c.dtype_in(1, "ratio", kFloat)) return false;
    if (c.rank(1) != 0 && !(c.rank(1) == 1 && c.shape(1)[0] == 1)) {
      return c.fail(c.input_label(1, "ratio") + " has shape " + shape_string(c.shape(1)) +
                    ", expected a scalar");
    }
  }
  if (!(ratio >= 0 && ratio < 1)) return c.fail("attribute 'ratio' is not in [0, 1)");
  c.set_dtype(0, c.in(0).dtype);
  c.set_dtype(1, KITE_DTYPE_BOOL);
  if (c.has(2)) {
    const std::vector<int64_t> data_shape = c.shape(0);
    c.consistency = [data_shape](const std::vector<TensorType>& declared) -> std::string {
      for (size_t k = 0; k < declared.size(); ++k) {
        if (declared[k].present && declared[k].shape != data_shape) {
          return out_label(declared, k) + " has shape " + shape_string(declared[k].shape) +
                 ", expected " + shape_string(data_shape);
        }
      }
      return "";
    };
    if (!c.dtype_in(2, "training_mode", kBool)) return false;
    double training = 0;
    if (!c.read_scalar(2, "training_mode", &training)) return false;
    if (training != 0) return c.fail("training_mode is true; only inference is supported");
  }
  return c.same_as_input(0, 0) && c.set(1, KITE_DTYPE_BOOL, c.shape(0));
}

}  // namespace

const std::vector<OpRule>& elementwise_rules() {
  static const std::vector<OpRule> rules = [] {
    std::vector<OpRule> r;
    for (const auto& entry : unary_dtypes()) r.push_back({entry.first.c_str(), infer_unary});
    for (const auto& entry : broadcasting_ops()) {
      r.push_back({entry.first.c_str(), infer_broadcasting});
    }
    r.push_back({"Pow", infer_pow});
    r.push_back({"Where", infer_where});
    r.push_back({"PRelu", infer_prelu});
    r.push_back({"Clip", infer_clip});
    r.push_back({"Softmax", infer_softmax});
    r.push_back({"LogSoftmax", infer_softmax});
    r.push_back({"Hardmax", infer_softmax});
    r.push_back({"Cast", infer_cast});
    r.push_back({"Dropout", infer_dropout});
    return r;
  }();
  return rules;
}

}  // namespace kite::ops::detail
