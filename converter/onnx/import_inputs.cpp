// The main graph's inputs (their static shapes, from the model or from
// ImportOptions::input_shapes) and the types a model declares for values.
#include <utility>

#include "kite/ops/op_node.h"
#include "onnx/onnx_importer.h"
#include "onnx/onnx_tensor.h"

namespace kite::converter::onnx_detail {

namespace {

// "batchx3x224x224" from a declared ONNX shape ('?' for an unnamed unknown dim).
std::string declared_shape_text(const onnx::TensorShapeProto& shape) {
  if (shape.dim_size() == 0) return "scalar";
  std::string out;
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (i) out += "x";
    const auto& d = shape.dim(i);
    if (d.has_dim_value() && d.dim_value() >= 0) {
      out += std::to_string(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      out += d.dim_param();
    } else {
      out += "?";
    }
  }
  return out;
}

// Declared dims, -1 where unknown.
std::vector<int64_t> declared_dims(const onnx::TensorShapeProto& shape) {
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) {
    dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
  }
  return dims;
}

}  // namespace

void Importer::apply_declared_type(const onnx::TypeProto& type, ir::Tensor* tensor) {
  if (!type.has_tensor_type()) return;
  const auto& tt = type.tensor_type();
  const kite_dtype dtype = dtype_from_onnx(tt.elem_type());
  if (dtype != KITE_DTYPE_UNDEFINED) tensor->dtype = dtype;
  if (tt.has_shape()) tensor->shape = declared_dims(tt.shape());
}

bool Importer::import_main_input(const onnx::ValueInfoProto& input, ir::Tensor* tensor) {
  const std::string& name = input.name();
  const std::string label = "graph input '" + name + "'";
  if (!input.type().has_tensor_type()) {
    return fail(label + " is not a tensor (sequence, map or optional inputs are not supported)");
  }
  const auto& tt = input.type().tensor_type();
  tensor->dtype = dtype_from_onnx(tt.elem_type());
  if (tensor->dtype == KITE_DTYPE_UNDEFINED) {
    return fail(label + " has data type " + onnx_dtype_name(tt.elem_type()) +
                ", which Kite does not support (supported: " +
                onnx_detail::supported_dtypes_text() + ")");
  }
  const bool declared = tt.has_shape();
  std::vector<int64_t> dims = declared ? declared_dims(tt.shape()) : std::vector<int64_t>{};
  const std::string declared_text = declared ? declared_shape_text(tt.shape()) : "";

  auto opt = options_.input_shapes.find(name);
  if (opt != options_.input_shapes.end()) {
    const std::vector<int64_t>& given = opt->second;
    for (int64_t d : given) {
      if (d < 0) {
        return fail("--input-shape " + name + "=" + ir::declared_shape_string(given) +
                    ": dims must be non-negative");
      }
    }
    if (declared && given.size() != dims.size()) {
      return fail("--input-shape " + name + "=" + ir::declared_shape_string(given) + " has " +
                  std::to_string(given.size()) + " dims, but the model declares " + label +
                  " with " + std::to_string(dims.size()) + " (" + declared_text + ")");
    }
    if (declared) {
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] >= 0 && dims[i] != given[i]) {
          return fail("--input-shape " + name + "=" + ir::declared_shape_string(given) + " disagrees with " +
                      label + " (" + declared_text + ") at dim " + std::to_string(i));
        }
      }
    }
    dims = given;
  } else if (!declared) {
    return fail(label + " has no shape in the model; pass --input-shape " + name +
                "=AxBxC with its full shape");
  } else {
    bool unknown = false;
    std::vector<int64_t> example = dims;
    for (int64_t& d : example) {
      if (d < 0) {
        unknown = true;
        d = 1;
      }
    }
    if (unknown) {
      return fail(label + " has unknown dims (" + declared_text + "); Kite needs static " +
                  "shapes: pass --input-shape " + name + "=AxBxC with every dim, e.g. " +
                  "--input-shape " + name + "=" + ir::declared_shape_string(example));
    }
  }
  if (dims.size() > KITE_MAX_RANK) {
    return fail(label + " has " + std::to_string(dims.size()) + " dims; Kite supports at most " +
                std::to_string(KITE_MAX_RANK));
  }
  uint64_t bytes = 0;
  if (!kite::ops::checked_byte_size(tensor->dtype, dims, &bytes)) {
    return fail(label + " is too large (" + ir::declared_shape_string(dims) + ")");
  }
  tensor->shape = std::move(dims);
  tensor->shape_known = true;
  tensor->kind = ir::TensorKind::Input;
  return true;
}

bool Importer::check_input_shape_options() {
  for (const auto& entry : options_.input_shapes) {
    if (!main_input_names_.count(entry.first)) {
      std::vector<std::string> names(main_input_names_.begin(), main_input_names_.end());
      return fail("--input-shape names '" + entry.first +
                  "', which is not an input of the model (inputs: " +
                  (names.empty() ? std::string("none") : join(names, ", ")) + ")");
    }
  }
  return true;
}

}  // namespace kite::converter::onnx_detail
