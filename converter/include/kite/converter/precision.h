// Half precision in the converter (issue 18): kite-convert --precision
// fp32|fp16|mixed.
//
// A node "in fp16" reads and writes float16 tensors: its weights are stored
// as float16 constants in the file (half their bytes) and its float
// activations live in the arena as float16. Cast nodes are inserted only
// where a float16 tensor meets a float32 reader (or the reverse) -- at the
// boundaries between fp16 and fp32 regions -- and the graph's inputs and
// outputs keep their float32 type, so an application sees no difference.
//
// Which nodes may run in fp16:
//   - arithmetic: Conv, ConvTranspose, MatMul, Gemm, their fused forms
//     (FusedConv, FusedMatMul, FusedGemm), elementwise activations and
//     binary ops, MaxPool/AveragePool windows; GEMM/convolution accumulate
//     in fp32 on every backend that runs them;
//   - data movement (Reshape, Transpose, Concat, Slice, ...): exact in any
//     precision, so it follows its input: fp16 when what it reads is fp16;
//   - never: reductions, Softmax/LogSoftmax, every normalization (Batch-,
//     Layer-, Instance-, Group-, the fused LayerNorm/SkipLayerNorm), the
//     fused attention, exp/log/pow-like math, Cast, control flow, and any
//     node whose result a subgraph reads.
// fp16 puts every arithmetic node it may in fp16. mixed measures (below).
//
// mixed: the graph runs in fp32 on the calibration inputs with Kite's CPU
// kernels (src/const_eval.h, one node at a time), then once per arithmetic
// node with that node simulated in fp16 -- its float inputs, weights and
// outputs rounded to half (ties to even), which is what fp16 storage does --
// and the error at the graph's outputs, max|out - ref| / max|ref| per
// output, is compared with the tolerance. A node whose fp32 values exceed
// half's range (65504) or whose error exceeds the tolerance stays fp32.
// Since errors compound, the whole chosen graph is simulated once more; while
// it exceeds the tolerance, the fp16 node with the largest own error moves
// to fp32. The report gives each node's precision and why.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kite/converter/ir.h"

namespace kite::converter {

enum class Precision { kFp32, kFp16, kMixed };

// "fp32", "fp16", "mixed"; false for anything else.
bool parse_precision(const std::string& text, Precision* out);
const char* precision_name(Precision p);

// One value of a graph input (little-endian element bytes, as
// ir::Tensor::data); it must have the input's dtype and element count.
struct CalibrationValue {
  kite_dtype dtype = KITE_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
// One set of values for the graph's inputs, by input name. A graph with a
// single input takes a sample's single value whatever its name (a
// calibration directory of one .npy file per sample).
using CalibrationSample = std::map<std::string, CalibrationValue>;

struct PrecisionOptions {
  Precision precision = Precision::kFp32;
  // Largest error allowed at each output, relative to that output's
  // max|ref| (mixed).
  double tolerance = 1e-2;
  // Calibration inputs (mixed); when empty, `random_samples` seeded random
  // samples: floats uniform in [-1, 1], integers and bools zero.
  std::vector<CalibrationSample> samples;
  int random_samples = 1;
  uint64_t seed = 18;
};

struct NodePrecision {
  std::string name;
  std::string op;
  bool fp16 = false;
  std::string reason;
  double error = -1;  // its own measured relative error at the outputs (mixed); -1: not measured
};

struct PrecisionReport {
  Precision precision = Precision::kFp32;
  double tolerance = 0;
  std::string inputs;                 // "calibration (N samples)" or "random (N samples, seed S)"
  std::vector<NodePrecision> nodes;   // main graph, in order, before casts were inserted
  int fp16_nodes = 0;
  int fp32_nodes = 0;
  int casts = 0;                      // Cast nodes inserted at precision boundaries
  double final_error = -1;            // whole chosen graph vs fp32 (mixed); -1: not measured
  uint64_t weight_bytes_before = 0;   // constants' bytes before and after
  uint64_t weight_bytes_after = 0;
};

// Chooses each main-graph node's precision and rewrites the model (float16
// constants and activations, Cast nodes at the boundaries). Run after the
// optimizer and materialize_outputs, before memory planning. fp32 leaves the
// model untouched. False with *err naming the node on failure.
bool apply_precision(ir::Model* model, const PrecisionOptions& options, PrecisionReport* report,
                     std::string* err);

// The report's "precision" object (JSON).
std::string precision_report_json(const PrecisionReport& report);

}  // namespace kite::converter
