// The explicit tables of CUDA kernels: primitive ops (domain "") and the
// graph optimizer's fused ops (domain "kite", docs/FUSIONS.md), from the op
// lists the device backends share (kite/abi/kernel_table.h). Adding an op:
// its plan function in plan_<family>.cpp and one line in that list (or here,
// for an op only CUDA has).
#include "plan_util.h"
#include "kite/abi/kernel_table.h"

namespace kite::cuda {

#define KITE_KERNEL_ENTRY(op, plan) {op, plan},

const Kernels& kernels() {
  static const Kernels tables("CUDA", {KITE_DEVICE_PRIMITIVE_KERNELS(KITE_KERNEL_ENTRY)},
                              {KITE_DEVICE_FUSED_KERNELS(KITE_KERNEL_ENTRY)});
  return tables;
}

#undef KITE_KERNEL_ENTRY

}  // namespace kite::cuda
