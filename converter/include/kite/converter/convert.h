// The converter's top level: ONNX in, planned ir::Model out, .kite written.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

struct ConvertOptions {
  std::map<std::string, std::vector<int64_t>> input_shapes;
  uint64_t arena_alignment = 256;
};

struct ConvertReport {
  size_t onnx_nodes = 0;
  size_t nodes = 0;          // main-graph nodes written
  size_t tensors = 0;
  size_t constants = 0;
  uint64_t weight_bytes = 0;
  uint64_t file_bytes = 0;
  std::map<std::string, int> op_counts;
};

// Imports, infers shapes, plans memory. On failure err names what is wrong.
bool convert_onnx_file(const std::string& onnx_path, const ConvertOptions& options,
                       ir::Model* out, ConvertReport* report, std::string* err);

// Makes graph outputs real arena tensors: an output that is a constant or a
// graph input gets an Identity node copying it.
void materialize_outputs(ir::Model* model);

}  // namespace kite::converter
