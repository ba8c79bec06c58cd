// Weights in the layout the CPU kernels read them, packed offline by the
// converter (kite-convert --pack-for, format 1.1) or, when the file has no
// form for this process's ISA level, at prepare.
//
// One home for the rules: which constant inputs of a node the kernels read
// packed, in which layout, and how to pack them. The kernels (conv.cpp,
// gemm.cpp) ask for their weights through acquire(); the converter packs
// with layouts() and pack(); the backend's supports2 uses layouts() to say
// in the placement when a node's weights will be packed at load.
//
// A form's key is "cpu/<isa level>/<layout>". The level is the GEMM
// micro-kernel's (sgemm::MicroKernel); the layout names the panel shape and
// the parameters that the tensor's shape does not give:
//   conv-a6-g<G>   Conv weight (M, C/G, k...): per group the (M/G x C/G*k)
//                  matrix as sgemm A panels of 6 rows, groups one after another
//   wino43-a6, wino23-a6  Conv weight (M, C, 3, 3) of a Conv run as
//                  Winograd F(4x4, 3x3) or F(2x2, 3x3) (winograd.h): the 36
//                  or 16 matrices (M x C) of G g G^T, each as sgemm A
//                  panels of 6 rows
//   stem-w8        Conv weight (M, C, kh, kw) of a Conv with few input
//                  channels run directly (stem.h; x86-avx512 and x86-avx2): per
//                  block of 8 output channels, per tap, the block's 8 weights
//   dw-c16         Conv weight (C, 1, kh, kw) of a depthwise Conv run 16
//                  channels at a time (depthwise::Channels; x86-avx512 and
//                  x86-avx2): per block of 16 channels, per tap, the
//                  block's 16 weights, zeros past the last channel
//   convt-a6-g<G>  ConvTranspose weight (C, M/G, k...): per group W_g^T
//   gemm-a6, gemm-a6t  a constant A (m x k; t: stored k x m); Gemm's alpha
//                  other than 1 scales it while packed: "-x<alpha's bits>"
//                  follows
//   gemm-b8, gemm-b8t  a constant B (k x n; t: stored n x k), every matrix
//                  of the tensor's batch dims in order
// Every level packs 6x8 panels the same way, so the converter stores one
// blob under several levels' keys; a level with a kernel of its own (the
// stem kernel and the 16-channel depthwise one on x86-avx512 and x86-avx2)
// gets its own layout name under those keys only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../kernel.h"
#include "kite/ops/op_node.h"
#include "sgemm.h"

namespace kite::cpu::weight_pack {

// "portable", "x86-avx2", "x86-avx512", "arm64-neon".
const char* isa_name(sgemm::MicroKernel level);
// The level the GEMM runs at in this process (sgemm::micro_kernel_in_use).
std::string host_isa();
// Every level name, for --pack-for.
const std::vector<std::string>& isa_names();
bool is_isa_name(const std::string& name);
inline std::string key(const std::string& isa, const std::string& layout) {
  return "cpu/" + isa + "/" + layout;
}

struct Layout {
  int input = -1;       // which input of the node
  std::string name;     // "conv-a6-g1", ...
  int64_t floats = 0;   // size of the packed form
};

// The constant float32 inputs (OpNode inputs with data) that the CPU kernel
// for this node reads packed. op: a primitive Conv, ConvTranspose, Gemm or
// MatMul, or the fused FusedConv, FusedGemm, FusedMatMul (same input slots);
// anything else has none. Shapes the kernel would refuse give none.
// winograd: whether the kernels may run 3x3 convolutions as Winograd
// (the CPU backend's option winograd=0|1; the converter packs for 1).
// level: the ISA level the kernels run at (this process's by default; the
// converter asks for each level it packs for).
std::vector<Layout> layouts(const kite::ops::OpNode& op, bool winograd = true,
                            sgemm::MicroKernel level = sgemm::micro_kernel_in_use());
// The level of an isa_name(); false for an unknown name.
bool level_of(const std::string& name, sgemm::MicroKernel* level);

// Packs input layout.input of op (its data) into dst (layout.floats floats).
void pack(const kite::ops::OpNode& op, const Layout& layout, float* dst);

// What a kernel calls for a constant weight. Returns the file's form of
// input layout.input under this level's key when the file has one (it is
// used in place, from the mapping), else packs into *own and returns its
// data. Null, with err naming node, tensor and key, when the file's form has
// the wrong size (a malformed file).
const float* acquire(const KernelArgs& args, const Layout& layout, std::vector<float>* own,
                     std::string* err);

}  // namespace kite::cpu::weight_pack
