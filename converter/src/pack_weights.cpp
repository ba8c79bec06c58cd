#include "src/pack_weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "kernels/weight_pack.h"
#include "kite/converter/convert.h"

namespace kite::converter {
namespace {

namespace wp = kite::cpu::weight_pack;

void collect(ir::Model* model, const ir::Node& node, const std::vector<std::string>& levels,
             std::map<std::pair<int, std::string>, size_t>* seen) {
  const kite::ops::OpNode op = ir::to_op_node(*model, node);
  // Each level's layouts: one form per (tensor, layout), under the key of
  // every level that reads that layout (the 6x8 panels are the same on all
  // of them; the stem kernel's layout is x86-avx512's alone).
  for (const std::string& level_name : levels) {
    kite::cpu::sgemm::MicroKernel level{};
    if (!wp::level_of(level_name, &level)) continue;
    for (const wp::Layout& l : wp::layouts(op, true, level)) {
      const int tensor = node.inputs[static_cast<size_t>(l.input)];
      const auto id = std::make_pair(tensor, l.name);
      const std::string key = wp::key(level_name, l.name);
      const auto found = seen->find(id);
      if (found != seen->end()) {
        std::vector<std::string>& keys = model->packed[found->second].keys;
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
        continue;
      }
      std::vector<float> packed(static_cast<size_t>(l.floats), 0.0f);
      wp::pack(op, l, packed.data());
      ir::PackedForm form;
      form.tensor = tensor;
      form.keys.push_back(key);
      form.data.resize(packed.size() * sizeof(float));
      if (!packed.empty()) std::memcpy(form.data.data(), packed.data(), form.data.size());
      (*seen)[id] = model->packed.size();
      model->packed.push_back(std::move(form));
    }
  }
  for (const ir::Node& b : node.body) collect(model, b, levels, seen);
}

}  // namespace

bool resolve_pack_for(const std::vector<std::string>& requested, std::vector<std::string>* levels,
                      std::string* err) {
  levels->clear();
  for (const std::string& r : requested) {
    if (r == "none") continue;
    const std::string level = r == "host" ? wp::host_isa() : r;
    if (!wp::is_isa_name(level)) {
      std::string known;
      for (const std::string& n : wp::isa_names()) known += n + ", ";
      if (err) *err = "unknown packing target '" + r + "' (known: " + known + "host, none)";
      return false;
    }
    if (std::find(levels->begin(), levels->end(), level) == levels->end()) levels->push_back(level);
  }
  return true;
}

bool parse_pack_for(const std::string& list, std::vector<std::string>* requested, std::string* err) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (items.empty()) {
    if (err) *err = "empty packing target list '" + list + "'";
    return false;
  }
  std::vector<std::string> levels;
  if (!resolve_pack_for(items, &levels, err)) return false;
  *requested = items;
  return true;
}

bool add_packed_forms(ir::Model* model, const std::vector<std::string>& levels, std::string* err) {
  model->packed.clear();
  if (levels.empty()) return true;
  std::map<std::pair<int, std::string>, size_t> seen;
  for (const ir::Graph& g : model->graphs) {
    for (const ir::Node& n : g.nodes) {
      for (int t : n.inputs) {
        if (t >= static_cast<int>(model->tensors.size())) {
          if (err) *err = n.label() + ": input tensor " + std::to_string(t) + " out of range";
          return false;
        }
      }
      collect(model, n, levels, &seen);
    }
  }
  return true;
}

}  // namespace kite::converter
