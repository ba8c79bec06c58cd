// Pre-packed weight forms (format 1.1): the CPU kernels' layouts of the
// model's constant weights, written into the file so that the runtime uses
// them from the mapping instead of packing a copy at load.
#pragma once

#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

// Replaces model->packed with the forms the CPU kernels read for every node
// of every graph (fused nodes and their bodies too: a backend that declines
// a fused node runs its body), one blob per (tensor, layout) stored under
// each level's key. levels: resolved level names (resolve_pack_for); empty
// writes none.
bool add_packed_forms(ir::Model* model, const std::vector<std::string>& levels, std::string* err);

}  // namespace kite::converter
