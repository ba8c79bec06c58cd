// The explicit tables of Vulkan kernels: primitive ops (domain "") and the
// graph optimizer's fused ops (domain "kite", docs/FUSIONS.md), from the op
// lists the device backends share (kite/abi/kernel_table.h). Adding an op:
// its plan function in kernels/<family>.cpp and one line in that list (or here,
// for an op only Vulkan has).
#include "kernels/kernels.h"
#include "kite/abi/kernel_table.h"

namespace kite::vk {

#define KITE_KERNEL_ENTRY(op, plan) {op, plan},

const Kernels& kernels() {
  static const Kernels tables("Vulkan", {KITE_DEVICE_PRIMITIVE_KERNELS(KITE_KERNEL_ENTRY)},
                              {KITE_DEVICE_FUSED_KERNELS(KITE_KERNEL_ENTRY)});
  return tables;
}

#undef KITE_KERNEL_ENTRY

}  // namespace kite::vk
