#include "kite/ops/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace kite::ops {

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string dims(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// The activation named `name` (ONNX's list, any case); whether it takes
// alpha and beta, and their defaults.
bool parse_activation(const std::string& name, RnnAct* a, bool* takes_alpha, bool* takes_beta) {
  struct Entry {
    const char* name;
    RnnActivation kind;
    bool alpha, beta;
    float def_alpha, def_beta;
  };
  static const Entry kTable[] = {
      {"sigmoid", RnnActivation::kSigmoid, false, false, 0, 0},
      {"tanh", RnnActivation::kTanh, false, false, 0, 0},
      {"relu", RnnActivation::kRelu, false, false, 0, 0},
      {"affine", RnnActivation::kAffine, true, true, 1.0f, 0.0f},
      {"leakyrelu", RnnActivation::kLeakyRelu, true, false, 0.01f, 0},
      {"thresholdedrelu", RnnActivation::kThresholdedRelu, true, false, 1.0f, 0},
      {"scaledtanh", RnnActivation::kScaledTanh, true, true, 1.0f, 1.0f},
      {"hardsigmoid", RnnActivation::kHardSigmoid, true, true, 0.2f, 0.5f},
      {"elu", RnnActivation::kElu, true, false, 1.0f, 0},
      {"softsign", RnnActivation::kSoftsign, false, false, 0, 0},
      {"softplus", RnnActivation::kSoftplus, false, false, 0, 0},
  };
  const std::string l = lower(name);
  for (const Entry& e : kTable) {
    if (l == e.name) {
      a->kind = e.kind;
      a->alpha = e.def_alpha;
      a->beta = e.def_beta;
      *takes_alpha = e.alpha;
      *takes_beta = e.beta;
      return true;
    }
  }
  return false;
}

}  // namespace

float rnn_activate(const RnnAct& a, float x) {
  switch (a.kind) {
    case RnnActivation::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case RnnActivation::kTanh: return std::tanh(x);
    case RnnActivation::kRelu: return x > 0 ? x : 0.0f;
    case RnnActivation::kAffine: return a.alpha * x + a.beta;
    case RnnActivation::kLeakyRelu: return x >= 0 ? x : a.alpha * x;
    case RnnActivation::kThresholdedRelu: return x > a.alpha ? x : 0.0f;
    case RnnActivation::kScaledTanh: return a.alpha * std::tanh(a.beta * x);
    case RnnActivation::kHardSigmoid: return std::max(0.0f, std::min(1.0f, a.alpha * x + a.beta));
    case RnnActivation::kElu: return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0f);
    case RnnActivation::kSoftsign: return x / (1.0f + std::fabs(x));
    case RnnActivation::kSoftplus: return x > 20.0f ? x : std::log1p(std::exp(x));
  }
  return x;
}

bool resolve_recurrent(const OpNode& node, RecurrentPlan* p, std::string* err) {
  const std::string& op = node.op;
  p->gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  p->acts_per_dir = op == "LSTM" ? 3 : op == "GRU" ? 2 : 1;
  const std::string direction = node.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    *err = "attribute 'direction' is '" + direction + "', expected forward, reverse or bidirectional";
    return false;
  }
  p->directions = direction == "bidirectional" ? 2 : 1;
  p->reverse = direction == "reverse";
  p->layout = node.attr_int("layout", 0);
  if (p->layout != 0 && p->layout != 1) {
    *err = "attribute 'layout' is " + std::to_string(p->layout) + ", expected 0 or 1";
    return false;
  }
  p->linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
  p->input_forget = node.attr_int("input_forget", 0) != 0;
  p->has_clip = node.find_attr("clip") != nullptr;
  p->clip = node.attr_float("clip", 0.0f);
  if (p->has_clip && !(p->clip > 0)) {
    *err = "attribute 'clip' is " + std::to_string(p->clip) + ", expected a positive number";
    return false;
  }

  auto shape_of = [&](size_t i) -> const std::vector<int64_t>& { return node.inputs[i].shape; };
  auto label = [&](size_t i, const char* role) {
    return "input '" + (node.inputs[i].name.empty() ? std::string(role) : node.inputs[i].name) + "'";
  };
  const std::vector<int64_t>& x = shape_of(0);
  if (x.size() != 3) {
    *err = label(0, "X") + " has shape " + dims(x) + ", expected 3 dims";
    return false;
  }
  p->seq = x[p->layout == 0 ? 0 : 1];
  p->batch = x[p->layout == 0 ? 1 : 0];
  p->input = x[2];
  if (p->input <= 0) {
    *err = label(0, "X") + " has shape " + dims(x) + ": the input size (last dim) must be positive";
    return false;
  }
  const int64_t d = p->directions;
  const std::vector<int64_t>& r = shape_of(2);
  if (r.size() != 3 || r[0] != d || r[2] <= 0 || r[1] != p->gates * r[2]) {
    *err = label(2, "R") + " has shape " + dims(r) + ", expected [" + std::to_string(d) + ", " +
           std::to_string(p->gates) + "*hidden_size, hidden_size]";
    return false;
  }
  p->hidden = r[2];
  const int64_t hs = node.attr_int("hidden_size", p->hidden);
  if (hs != p->hidden) {
    *err = "attribute 'hidden_size' is " + std::to_string(hs) + " but " + label(2, "R") +
           " has shape " + dims(r);
    return false;
  }
  const int64_t gh = p->gates * p->hidden;
  auto expect = [&](size_t i, const char* role, const std::vector<int64_t>& want) {
    if (!node.has_input(i) || shape_of(i) == want) return true;
    *err = label(i, role) + " has shape " + dims(shape_of(i)) + ", expected " + dims(want);
    return false;
  };
  p->state_shape = p->layout == 0 ? std::vector<int64_t>{d, p->batch, p->hidden}
                                  : std::vector<int64_t>{p->batch, d, p->hidden};
  p->y_shape = p->layout == 0 ? std::vector<int64_t>{p->seq, d, p->batch, p->hidden}
                              : std::vector<int64_t>{p->batch, p->seq, d, p->hidden};
  if (!expect(1, "W", {d, gh, p->input}) || !expect(3, "B", {d, 2 * gh}) ||
      !expect(4, "sequence_lens", {p->batch}) || !expect(5, "initial_h", p->state_shape)) {
    return false;
  }
  if (op == "LSTM" && (!expect(6, "initial_c", p->state_shape) || !expect(7, "P", {d, 3 * p->hidden}))) {
    return false;
  }

  // Activations: acts_per_dir per direction (one direction's list is taken
  // for both, as onnxruntime does); each one that takes alpha (beta) takes
  // the next value of activation_alpha (activation_beta), else its default.
  std::vector<std::string> names;
  if (const Attr* a = node.find_attr("activations")) {
    if (a->type != KITE_ATTR_STRINGS) {
      *err = "attribute 'activations' must be a list of strings";
      return false;
    }
    names = a->strings;
  }
  if (names.empty()) {
    if (op == "RNN") names = {"Tanh"};
    if (op == "GRU") names = {"Sigmoid", "Tanh"};
    if (op == "LSTM") names = {"Sigmoid", "Tanh", "Tanh"};
  }
  if (static_cast<int64_t>(names.size()) == p->acts_per_dir && d == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (static_cast<int64_t>(names.size()) != d * p->acts_per_dir) {
    *err = "attribute 'activations' has " + std::to_string(names.size()) + " entries, expected " +
           std::to_string(d * p->acts_per_dir);
    return false;
  }
  const Attr* alphas = node.find_attr("activation_alpha");
  const Attr* betas = node.find_attr("activation_beta");
  size_t ia = 0, ib = 0;
  p->acts.clear();
  for (const std::string& n : names) {
    RnnAct act;
    bool takes_alpha = false, takes_beta = false;
    if (!parse_activation(n, &act, &takes_alpha, &takes_beta)) {
      *err = "activation '" + n + "' is not one of ONNX's (Sigmoid, Tanh, Relu, Affine, LeakyRelu, "
             "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)";
      return false;
    }
    if (takes_alpha && alphas && ia < alphas->floats.size()) act.alpha = alphas->floats[ia++];
    if (takes_beta && betas && ib < betas->floats.size()) act.beta = betas->floats[ib++];
    p->acts.push_back(act);
  }
  return true;
}

}  // namespace kite::ops
