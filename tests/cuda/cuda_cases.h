// Shape sweeps that both the float32 tests (cuda_ops_test.cpp) and the
// float16 ones (cuda_half_test.cpp) run: each builder adds its graph in the
// Graph's float dtype (Graph::use_float16 first for float16), on shapes that
// reach the kernels' corners (partial tiles, K tails, groups, strides,
// padding, broadcasting, negative steps).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_graphs.h"

namespace kite::cudatest {

struct ConvCase {
  Shape x, w;
  std::vector<kite::ops::Attr> attrs;
  bool bias;
};
const std::vector<ConvCase>& conv_cases();
// Conv, or FusedConv "Conv+<act>" when act is not empty.
void conv_graph(Graph& g, const ConvCase& c, const std::string& act = "");

// MatMul operand shapes.
const std::vector<std::pair<Shape, Shape>>& matmul_cases();

struct GemmCase {
  bool ta, tb;
  Shape c;
  float alpha, beta;
};
const std::vector<GemmCase>& gemm_cases();
void gemm_graph(Graph& g, const GemmCase& c);

// FusedMatMul "MatMul+Add[+<act>]" (act may be empty) over [1, 37, 48] x
// [48, 80]; FusedGemm "Gemm+HardSwish" of an [rows, 64] input.
void fused_matmul_graph(Graph& g, const std::string& act);
void fused_gemm_graph(Graph& g, int64_t rows);

// Binary operand shapes that broadcast.
const std::vector<std::pair<Shape, Shape>>& broadcast_cases();

// The data-movement graphs: Transpose, Concat, Split, Slice, Expand,
// Reshape, then Pad in each mode; copy_graph builds number i < copy_graph_count().
int copy_graph_count();
void copy_graph(Graph& g, int i);

struct ResizeCase {
  const char* mode;
  const char* ct;
  std::vector<float> scales;
};
const std::vector<ResizeCase>& resize_cases();
// Resize of a [1, 3, 6, 8] input (roi and scales float32, as ONNX has them).
void resize_graph(Graph& g, const ResizeCase& c);

// The sweeps: each builds every graph of its cases (float16 tensors when
// half) and hands it to check with a label naming the case.
using CaseCheck = std::function<void(Graph& g, const std::string& label)>;
void sweep_convs(bool half, const CaseCheck& check);
// FusedConv with each activation, dense (implicit GEMM) and depthwise (direct).
void sweep_fused_convs(bool half, const CaseCheck& check);
void sweep_matmuls(bool half, const CaseCheck& check);
void sweep_gemms(bool half, const CaseCheck& check);
// FusedMatMul with each activation, FusedGemm on both GEMM kernels.
void sweep_fused_products(bool half, const CaseCheck& check);
// Add, Sub, Mul, Div over broadcast_cases().
void sweep_binary(bool half, const CaseCheck& check);
// Every unary op (Clip with constant min and max, LeakyRelu with alpha).
void sweep_unary(bool half, const CaseCheck& check);
void sweep_copies(bool half, const CaseCheck& check);
void sweep_resizes(bool half, const CaseCheck& check);

}  // namespace kite::cudatest
