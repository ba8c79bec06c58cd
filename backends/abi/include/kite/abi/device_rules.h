// Rules the device backends (Vulkan, CUDA) apply alike when they plan a
// node: how a strided index space collapses for a kernel of bounded rank,
// which Resize, Transpose, Slice and fused Attention their kernels run, and the
// checks of a fused Add+LayerNormalization. One home, so the backends cannot
// drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kite/abi/device_node.h"
#include "kite/ops/resolve.h"

namespace kite::abi {

// An index space walked by two strided views (element strides per axis),
// with its size-1 axes dropped and each axis merged into its outer
// neighbour wherever both walks continue that neighbour contiguously:
// the fewest axes for a kernel that takes a bounded rank. Empty dims when
// every axis has size 1.
struct MergedAxes {
  std::vector<int64_t> dims, a, b;
};
MergedAxes merge_axes(const std::vector<int64_t>& dims, const std::vector<int64_t>& a_strides,
                      const std::vector<int64_t>& b_strides);

// A float32 Resize as the device kernels run it: over the two innermost
// axes (in_h x in_w -> out_h x out_w) of every plane the leading axes
// form, which must keep their size at scale 1. Rank 1 (ONNX allows any
// rank >= 1) resizes w, with a unit h axis at scale 1.
struct InnerResize {
  kite::ops::ResizeSampling sampling;
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  float scale_h = 1.0f, scale_w = 1.0f;
};
// "" and *out, or why `backend` ("Vulkan") cannot run the node. Scales
// (input 2) must be a constant; without them the declared output gives
// the sizes. The per-axis sizes and scales come from the op rule
// (kite::ops::resolve_resize), as on the CPU backend. X is float32, or also
// float16 when `float16` (a backend with fp16-storage kernels); roi and
// scales stay float32.
std::string inner_resize_of(const NodeView& n, const char* backend, InnerResize* out, bool float16 = false);

// The fused Attention as the device kernels run it: the op rule
// (kite::ops::attention_shapes), float32 inputs and output, and
// nan_to_zero (the guard: a NaN probability counts as 0) 0 or 1, as on the
// CPU. "" with the scores' shape [.., S, T] and the
// output's [.., S, Dv], or why `backend` cannot run the node.
std::string device_attention_of(const NodeView& n, const char* backend, std::vector<int64_t>* scores,
                                std::vector<int64_t>* out);

// Transpose's perm: attribute perm (absent: the dims reversed), a
// permutation of input 0's dims by the op rule (kite::ops::resolve_perm).
// "" and *out, or why not.
std::string perm_of(const NodeView& n, std::vector<int64_t>* out);

// Slice as the device kernels run it: starts, ends, axes and steps from
// inputs 1-4 (opset 10+, each a constant) or the attributes (before opset
// 10), resolved over input 0 by the op rule (kite::ops::resolve_slice): one
// SliceAxis per input dim. "" and *out, or why `backend` cannot run the
// node.
std::string slice_of(const NodeView& n, const char* backend, std::vector<kite::ops::SliceAxis>* out);

// The checks of a fused Add+LayerNormalization (inputs a, b, scale
// [, bias]; outputs y [, a + b]): a and b float32 of one shape, each
// output float32 of that shape. "" or why `backend` cannot run the node.
std::string check_skip_layer_norm(const NodeView& n, const char* backend);

// A Pad node resolved for a device kernel: the mode, one PadAxis per input
// dimension (crop always 0) and the constant's 4 bytes.
struct PadSpec {
  kite::ops::PadMode mode = kite::ops::PadMode::kConstant;
  std::vector<kite::ops::PadAxis> axes;
  uint32_t value_bits = 0;
};

// Reads a Pad node of a 4-byte dtype or float16: mode (constant, reflect or
// edge: the device kernels have no wrap), pads (input 1, a constant, or the
// attribute), constant_value (input 2 when present and not empty: a
// constant with one element of the input's dtype, a float16 one widened to
// float32 bits; else the float attribute 'value', 0 by default) and axes (input 3, a constant, or every axis), and
// resolves them with the op rule's resolve_pad. Negative pads (cropping)
// are refused: the device kernels only add elements. "" or why `backend`
// cannot run the node.
std::string pad_of(const NodeView& n, const char* backend, PadSpec* out);

// The checks of InstanceNormalization (inputs x, scale, B): all float32, x of
// rank >= 3, scale and B of shape [C] with C = x's dimension 1 (as the op
// rule states them). "" or why `backend` cannot run the node.
std::string check_instance_norm(const NodeView& n, const char* backend);

}  // namespace kite::abi
