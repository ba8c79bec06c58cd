// Attribute lookup and construction, shared by every holder of attributes.
#include "kite/ops/attr.h"

#include <utility>

namespace kite::ops {

const Attr* find_attr(const std::vector<Attr>& attrs, const std::string& attr_name) {
  for (const Attr& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

int64_t attr_int(const std::vector<Attr>& attrs, const std::string& attr_name, int64_t fallback) {
  const Attr* a = find_attr(attrs, attr_name);
  return a && a->type == KITE_ATTR_INT ? a->i : fallback;
}

float attr_float(const std::vector<Attr>& attrs, const std::string& attr_name, float fallback) {
  const Attr* a = find_attr(attrs, attr_name);
  return a && a->type == KITE_ATTR_FLOAT ? a->f : fallback;
}

std::string attr_string(const std::vector<Attr>& attrs, const std::string& attr_name,
                        const std::string& fallback) {
  const Attr* a = find_attr(attrs, attr_name);
  return a && a->type == KITE_ATTR_STRING ? a->s : fallback;
}

std::vector<int64_t> attr_ints(const std::vector<Attr>& attrs, const std::string& attr_name,
                               const std::vector<int64_t>& fallback) {
  const Attr* a = find_attr(attrs, attr_name);
  return a && a->type == KITE_ATTR_INTS ? a->ints : fallback;
}

namespace {

Attr named(const std::string& attr_name, kite_attr_type type) {
  Attr a;
  a.name = attr_name;
  a.type = type;
  return a;
}

}  // namespace

Attr int_attr(const std::string& attr_name, int64_t value) {
  Attr a = named(attr_name, KITE_ATTR_INT);
  a.i = value;
  return a;
}

Attr float_attr(const std::string& attr_name, float value) {
  Attr a = named(attr_name, KITE_ATTR_FLOAT);
  a.f = value;
  return a;
}

Attr string_attr(const std::string& attr_name, const std::string& value) {
  Attr a = named(attr_name, KITE_ATTR_STRING);
  a.s = value;
  return a;
}

Attr ints_attr(const std::string& attr_name, const std::vector<int64_t>& value) {
  Attr a = named(attr_name, KITE_ATTR_INTS);
  a.ints = value;
  return a;
}

Attr graph_attr(const std::string& attr_name, int64_t graph) {
  Attr a = int_attr(attr_name, graph);  // a subgraph's index is held as an INT's value
  a.type = KITE_ATTR_GRAPH;
  return a;
}

void set_attr(std::vector<Attr>* attrs, Attr attr) {
  for (Attr& a : *attrs) {
    if (a.name == attr.name) {
      a = std::move(attr);
      return;
    }
  }
  attrs->push_back(std::move(attr));
}

}  // namespace kite::ops
