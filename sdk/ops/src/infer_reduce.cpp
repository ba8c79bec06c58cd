// Rules of the reductions: ReduceSum/Mean/Max/Min/Prod, ArgMax, ArgMin.
#include "infer_util.h"

namespace kite::ops::detail {

const std::vector<OpRule>& reduce_rules() {
  static const std::vector<OpRule> rules = {};
  return rules;
}

}  // namespace kite::ops::detail
