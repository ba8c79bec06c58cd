// What a tensor is in a model. One enum for the converter's IR
// (kite/converter/ir.h) and the runtime's loaded model (sdk/src/model.h);
// its values are those of TensorKind in schemas/kite.fbs, which the .kite
// writer checks at compile time (converter/writer/kite_writer.cpp), so
// writing and loading are plain casts.
#pragma once

#include <cstdint>

namespace kite::ops {

enum class TensorKind : int8_t { Activation = 0, Input = 1, Output = 2, Constant = 3, Scratch = 4 };

}  // namespace kite::ops
