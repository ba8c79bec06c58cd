// ONNX TensorProto -> Kite constant tensor: data types, inline data (raw or
// typed fields) and external data files.
#pragma once

#include <cstdint>
#include <string>

#include <onnx/onnx_pb.h>

#include "kite/converter/ir.h"

namespace kite::converter::onnx_detail {

// kite dtype of an ONNX TensorProto::DataType, KITE_DTYPE_UNDEFINED when
// Kite has no such dtype.
kite_dtype dtype_from_onnx(int32_t onnx_type);
// "FLOAT", "DOUBLE", ... for messages ("type 42" for unknown values).
std::string onnx_dtype_name(int32_t onnx_type);
// "float32, float16, int64, int32, int8, uint8, bool"
const char* supported_dtypes_text();

// Fills out->dtype, shape (shape_known = true) and data from proto. name is
// the tensor's name in messages (a Constant node's value has no name of its
// own). model_dir is the directory external-data locations are relative to;
// empty refuses external data. Does not set out->name or out->kind.
bool tensor_from_onnx(const onnx::TensorProto& proto, const std::string& name,
                      const std::string& model_dir, ir::Tensor* out, std::string* err);

}  // namespace kite::converter::onnx_detail
