#include "kite/ops/attention.h"

#include <cmath>

namespace kite::ops {

std::string attention_shapes(const OpNode& op, const std::string& pattern, const std::vector<TensorType>& outputs,
                             std::vector<int64_t>* scores, std::vector<int64_t>* out) {
  if (pattern != "Attention") return "pattern '" + pattern + "' is not Attention";
  if (op.inputs.size() < 3 || op.inputs.size() > 4 || !op.has_input(0) || !op.has_input(1) || !op.has_input(2)) {
    return "expects inputs q, kt, v [, mask]";
  }
  if (outputs.size() != 1) return "expects one output";
  const Attr* scale = op.find_attr("scale");
  if (!scale || scale->type != KITE_ATTR_FLOAT || !std::isfinite(scale->f)) {
    return "attribute 'scale' must be a finite float";
  }
  const Attr* guard = op.find_attr("nan_to_zero");
  if (guard && (guard->type != KITE_ATTR_INT || (guard->i != 0 && guard->i != 1))) {
    return "attribute 'nan_to_zero' must be 0 or 1";
  }
  const std::vector<int64_t>& q = op.inputs[0].shape;
  const std::vector<int64_t>& kt = op.inputs[1].shape;
  const std::vector<int64_t>& v = op.inputs[2].shape;
  const std::string shapes = " (q '" + op.inputs[0].name + "' " + shape_string(q) + ", kt '" + op.inputs[1].name +
                             "' " + shape_string(kt) + ", v '" + op.inputs[2].name + "' " + shape_string(v) + ")";
  const size_t r = q.size();
  if (r < 2 || kt.size() != r || v.size() != r) return "q, kt and v must have the same rank (at least 2)" + shapes;
  for (size_t d = 0; d + 2 < r; ++d) {
    if (kt[d] != q[d] || v[d] != q[d]) return "q, kt and v must have the same leading dims" + shapes;
  }
  if (kt[r - 2] != q[r - 1]) return "kt's rows must match q's columns" + shapes;
  if (v[r - 2] != kt[r - 1]) return "v's rows must match kt's columns" + shapes;
  scores->assign(q.begin(), q.end() - 1);
  scores->push_back(kt[r - 1]);
  out->assign(q.begin(), q.end() - 1);
  out->push_back(v[r - 1]);
  return "";
}

}  // namespace kite::ops
