#include "kite/ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "kite/backend.h"

namespace kite::ops {

namespace {

// One operand's term: its letters, and where the ellipsis is (-1: none).
struct Term {
  std::string letters;
  int ellipsis_at = -1;  // index into letters before which the ellipsis stands
};

bool parse_term(const std::string& text, Term* term, std::string* err) {
  term->letters.clear();
  term->ellipsis_at = -1;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "...") == 0) {
      if (term->ellipsis_at >= 0) {
        *err = "equation term '" + text + "' has more than one ellipsis";
        return false;
      }
      term->ellipsis_at = static_cast<int>(term->letters.size());
      i += 3;
      continue;
    }
    const char c = text[i];
    if (!std::isalpha(static_cast<unsigned char>(c))) {
      *err = std::string("equation term '") + text + "' holds '" + c + "', expected letters and '...'";
      return false;
    }
    term->letters.push_back(c);
    ++i;
  }
  return true;
}

}  // namespace

bool resolve_einsum(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes,
                    EinsumPlan* plan, std::string* err) {
  std::string eq;
  for (char c : equation) {
    if (!std::isspace(static_cast<unsigned char>(c))) eq.push_back(c);
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    Term t;
    if (!parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), &t,
                    err)) {
      return false;
    }
    terms.push_back(t);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size()) {
    *err = "equation '" + equation + "' names " + std::to_string(terms.size()) + " operands, the node has " +
           std::to_string(shapes.size()) + " inputs";
    return false;
  }
  // Ellipsis dims per operand, and their broadcast.
  size_t ellipsis_rank = 0;
  std::vector<size_t> ell(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t rank = shapes[i].size();
    const size_t named = terms[i].letters.size();
    if (terms[i].ellipsis_at < 0 ? rank != named : rank < named) {
      *err = "operand " + std::to_string(i) + " has " + std::to_string(rank) + " dims, its equation term " +
             (terms[i].ellipsis_at < 0 ? "names " : "names at least ") + std::to_string(named);
      return false;
    }
    ell[i] = rank - named;
    ellipsis_rank = std::max(ellipsis_rank, ell[i]);
  }
  if (ellipsis_rank > KITE_MAX_RANK) {
    *err = "the ellipsis stands for too many dims";
    return false;
  }
  // Label ids: ellipsis dims 0..E-1, then letters in order of appearance.
  std::map<char, int> ids;
  std::vector<int64_t> dims(ellipsis_rank, 1);
  std::vector<int> uses_count(ellipsis_rank, 0);
  std::vector<std::vector<int>> dim_labels(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    for (size_t d = 0, letter = 0; d < shapes[i].size(); ++d) {
      int id = 0;
      const bool in_ellipsis = t.ellipsis_at >= 0 && letter == static_cast<size_t>(t.ellipsis_at) &&
                               d < static_cast<size_t>(t.ellipsis_at) + ell[i];
      if (in_ellipsis) {
        const size_t k = d - static_cast<size_t>(t.ellipsis_at);  // 0..ell[i]-1, aligned right
        id = static_cast<int>(ellipsis_rank - ell[i] + k);
      } else {
        const char c = t.letters[letter++];
        auto it = ids.find(c);
        if (it == ids.end()) {
          it = ids.emplace(c, static_cast<int>(dims.size())).first;
          dims.push_back(1);
          uses_count.push_back(0);
        }
        id = it->second;
        ++uses_count[static_cast<size_t>(id)];
      }
      const int64_t n = shapes[i][d];
      int64_t& have = dims[static_cast<size_t>(id)];
      if (n != 1 && have != 1 && n != have) {
        *err = "operand " + std::to_string(i) + " dim " + std::to_string(d) + " has size " + std::to_string(n) +
               ", but its label has size " + std::to_string(have) + " elsewhere";
        return false;
      }
      if (n != 1) have = n;
      dim_labels[i].push_back(id);
    }
  }
  // Output labels.
  std::vector<int> out;
  if (arrow == std::string::npos) {
    for (size_t e = 0; e < ellipsis_rank; ++e) out.push_back(static_cast<int>(e));
    for (const auto& [c, id] : ids) {  // std::map: sorted letters
      if (uses_count[static_cast<size_t>(id)] == 1) out.push_back(id);
    }
  } else {
    Term t;
    if (!parse_term(eq.substr(arrow + 2), &t, err)) return false;
    for (size_t k = 0; k <= t.letters.size(); ++k) {
      if (t.ellipsis_at == static_cast<int>(k)) {
        for (size_t e = 0; e < ellipsis_rank; ++e) out.push_back(static_cast<int>(e));
      }
      if (k == t.letters.size()) break;
      auto it = ids.find(t.letters[k]);
      if (it == ids.end()) {
        *err = std::string("output label '") + t.letters[k] + "' is not in any operand";
        return false;
      }
      if (std::find(out.begin(), out.end(), it->second) != out.end()) {
        *err = std::string("output label '") + t.letters[k] + "' appears twice";
        return false;
      }
      out.push_back(it->second);
    }
    if (t.ellipsis_at < 0 && ellipsis_rank > 0) {
      *err = "the operands have an ellipsis, the output does not";
      return false;
    }
  }
  if (out.size() > KITE_MAX_RANK) {
    *err = "the output has more than " + std::to_string(KITE_MAX_RANK) + " dims";
    return false;
  }
  plan->label_dims = dims;
  plan->output_labels = out;
  plan->summed_labels.clear();
  for (size_t l = 0; l < dims.size(); ++l) {
    if (std::find(out.begin(), out.end(), static_cast<int>(l)) == out.end()) {
      plan->summed_labels.push_back(static_cast<int>(l));
    }
  }
  plan->output_shape.clear();
  for (int l : out) plan->output_shape.push_back(dims[static_cast<size_t>(l)]);
  plan->operand_labels = dim_labels;
  plan->strides.assign(terms.size(), std::vector<int64_t>(dims.size(), 0));
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t stride = 1;
    for (size_t d = shapes[i].size(); d-- > 0;) {
      const int id = dim_labels[i][d];
      if (shapes[i][d] != 1) plan->strides[i][static_cast<size_t>(id)] += stride;
      stride *= shapes[i][d];
    }
  }
  return true;
}

}  // namespace kite::ops
