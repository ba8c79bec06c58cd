// Node attributes as the converter, the runtime and the backends hold them,
// and the one set of helpers that read, build and replace them (so
// ops::OpNode, the converter's ir::Node and the passes read an attribute the
// same way).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/backend.h"

namespace kite::ops {

struct Attr {
  std::string name;
  kite_attr_type type = KITE_ATTR_UNDEFINED;
  int64_t i = 0;          // INT, GRAPH
  float f = 0.0f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
};

// The attribute named attr_name, or null.
const Attr* find_attr(const std::vector<Attr>& attrs, const std::string& attr_name);

// The value of an attribute of the expected type; the fallback when it is
// absent or has another type (infer_types checks attribute types strictly
// and reports them, so a reader does not need to).
int64_t attr_int(const std::vector<Attr>& attrs, const std::string& attr_name, int64_t fallback);
float attr_float(const std::vector<Attr>& attrs, const std::string& attr_name, float fallback);
std::string attr_string(const std::vector<Attr>& attrs, const std::string& attr_name,
                        const std::string& fallback);
std::vector<int64_t> attr_ints(const std::vector<Attr>& attrs, const std::string& attr_name,
                               const std::vector<int64_t>& fallback);

// New attributes.
Attr int_attr(const std::string& attr_name, int64_t value);
Attr float_attr(const std::string& attr_name, float value);
Attr string_attr(const std::string& attr_name, const std::string& value);
Attr ints_attr(const std::string& attr_name, const std::vector<int64_t>& value);
// A subgraph: graph is the index of the graph in the model.
Attr graph_attr(const std::string& attr_name, int64_t graph);

// Replaces the attribute of attr's name, or appends attr when there is none.
void set_attr(std::vector<Attr>* attrs, Attr attr);

}  // namespace kite::ops
