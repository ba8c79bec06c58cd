// Op parameters resolved from attributes and input values: the one place
// where Slice's starts/ends/steps, Pad's pads, Tile's repeats, Reshape's
// target, reduction axes, Range's length ... become the numbers a kernel
// iterates with. The op rules (infer_types) derive output shapes from them,
// and every backend's kernels use them (at prepare for constants, at run for
// values computed at run), so a rule and a kernel cannot disagree.
//
// Nothing here allocates or throws: a kernel's run may call it. Arrays are
// the caller's; a shape has at most KITE_MAX_RANK dims. Arithmetic is
// overflow-checked, so hostile values give an error, never undefined
// behaviour. A failure is described in a RuleError without the node's label,
// which the caller adds ("Slice 'x': <message>").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kite/backend.h"
#include "kite/kite.h"

namespace kite::ops {

// A failure message in a fixed buffer (formatted without allocating).
struct RuleError {
  char message[256] = {};
  // Formats the message; returns false so callers can `return err->fail(...)`.
  bool fail(const char* format, ...) __attribute__((format(printf, 2, 3)));
  // "<what> [v0, v1, ...]<tail>" with the tail formatted like printf (at
  // most 2 * KITE_MAX_RANK values shown); returns false.
  bool fail_values(const char* what, const int64_t* values, int64_t count, const char* format, ...)
      __attribute__((format(printf, 5, 6)));
  // Appends "[a, b, c]" or text (cut at the buffer's end).
  void append_ints(const int64_t* values, int64_t count);
  void append(const char* text);
};

// ---------------------------------------------------------------- axes --

// Axis in [-rank, rank) to [0, rank); -1 when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank);
// n axes, each in range and all distinct, normalized into out (n entries).
// `what` names them in the message ("Slice axes").
bool normalize_axes(const char* what, const int64_t* axes, int64_t n, int64_t rank, int64_t* out,
                    RuleError* err);

// --------------------------------------------------------------- Slice --

// One axis of a slice: `count` elements from `start`, `step` apart. When
// count <= 1 the step is 1 (it never moves), so count > 1 implies
// |step| * (count - 1) < dim and start + step * k stays in [0, dim):
// strided offsets cannot overflow. When count == 0, start is 0.
struct SliceAxis {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};
// ONNX Slice on one axis of size dim >= 0: negative start/end count from the
// end, then clamp ([0, dim] for step > 0, [-1, dim - 1] for step < 0).
// Defined for every int64 start, end and step != 0 (INT64_MIN included).
SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step);

// starts/ends (count entries), axes (null: 0..count-1) and steps (null: 1)
// over an input of `rank` dims into one SliceAxis per input dim (dims not
// named are taken whole).
struct SliceSpec {
  const int64_t* starts = nullptr;
  const int64_t* ends = nullptr;
  const int64_t* axes = nullptr;
  const int64_t* steps = nullptr;
  int64_t count = 0;
};
bool resolve_slice(const int64_t* dims, int64_t rank, const SliceSpec& spec, SliceAxis* out,
                   RuleError* err);

// ----------------------------------------------------------------- Pad --

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
// "constant", "reflect", "edge", "wrap"; false for anything else.
bool parse_pad_mode(const char* name, PadMode* out);
const char* pad_mode_name(PadMode mode);

// One axis of a Pad: negative pads first crop the input (ONNX Runtime's
// order), then `begin`/`end` (>= 0) elements are added, read in `mode` from
// the `kept` input elements that start at `crop`. out = kept + begin + end.
struct PadAxis {
  int64_t crop = 0;   // input elements cropped at the start
  int64_t kept = 0;   // input elements kept
  int64_t begin = 0;  // elements added before
  int64_t end = 0;    // elements added after
  int64_t out = 0;    // output dim
};
// pads: 2 * naxes values (all begins, then all ends) for the axes (null:
// naxes == rank, every axis in order). Checks what the mode needs (reflect
// pads smaller than the kept size, wrap pads not larger, no growth of an
// empty axis except with constant).
bool resolve_pad(const int64_t* dims, int64_t rank, PadMode mode, const int64_t* pads,
                 int64_t num_pads, const int64_t* axes, int64_t naxes, PadAxis* out,
                 RuleError* err);
// The input index (in [0, dim)) that output index o of a padded axis reads,
// or -1 for the constant (mode kConstant, or a position outside the input).
inline int64_t pad_source(const PadAxis& a, PadMode mode, int64_t o) {
  int64_t i = o - a.begin;  // index into the kept elements
  const int64_t n = a.kept;
  if (i < 0 || i >= n) {
    if (mode == PadMode::kConstant || n == 0) return -1;
    if (mode == PadMode::kEdge) {
      i = i < 0 ? 0 : n - 1;
    } else if (mode == PadMode::kWrap) {
      i = ((i % n) + n) % n;
    } else if (n == 1) {  // reflect
      i = 0;
    } else {
      const int64_t period = 2 * (n - 1);
      const int64_t m = ((i % period) + period) % period;
      i = m >= n ? period - m : m;
    }
  }
  return a.crop + i;
}

// ---------------------------------------------------- Expand, Tile, ... --

// Numpy broadcast of two shapes into out (max(na, nb) dims, *out_rank);
// false (no message) if a dim is negative or they do not broadcast.
bool broadcast_dims(const int64_t* a, int64_t na, const int64_t* b, int64_t nb, int64_t* out,
                    int64_t* out_rank);
// Expand: the input broadcast with the shape value `target` (n dims).
bool resolve_expand(const int64_t* in, int64_t rank, const int64_t* target, int64_t n,
                    int64_t* out, int64_t* out_rank, RuleError* err);
// Tile: out[d] = in[d] * repeats[d] (rank repeats, each >= 0).
bool resolve_tile(const int64_t* in, int64_t rank, const int64_t* repeats, int64_t* out,
                  RuleError* err);
// Reshape: target (n dims) with 0 = copy the input dim (unless allowzero)
// and one -1 = inferred; the element count must stay.
bool resolve_reshape(const int64_t* in, int64_t rank, const int64_t* target, int64_t n,
                     bool allowzero, int64_t* out, RuleError* err);
// Squeeze: the axes given (n of them; given=false: every dim of size 1).
bool resolve_squeeze(const int64_t* in, int64_t rank, const int64_t* axes, int64_t n, bool given,
                     int64_t* out, int64_t* out_rank, RuleError* err);
// Unsqueeze: n axes of the output (rank + n dims) get a new dim of size 1.
bool resolve_unsqueeze(const int64_t* in, int64_t rank, const int64_t* axes, int64_t n,
                       int64_t* out, int64_t* out_rank, RuleError* err);
// Split of a dim into num_outputs parts: `sizes` (num_outputs values,
// each >= 0, adding up to dim), or null for equal parts (opset 18's
// num_outputs: ceil(dim / n) each, the last one smaller, when uneven_ok).
bool resolve_split(int64_t dim, int64_t num_outputs, const int64_t* sizes, bool uneven_ok,
                   int64_t* out, RuleError* err);
// Transpose: perm (null: reversed dims) must be a permutation of 0..rank-1.
bool resolve_perm(int64_t rank, const int64_t* perm, int64_t n, int64_t* out, RuleError* err);
// Shape's start/end attributes: clamped [begin, end) of the dims.
void shape_op_range(int64_t rank, int64_t start, int64_t end, int64_t* begin, int64_t* stop);

// ------------------------------------------------------- Gemm, MatMul --

// A matrix product y[batch..., m, n] = a[..., m, k] x b[..., k, n] over
// broadcast batch dims. For MatMul a 1-D A is a row vector and a 1-D B a
// column vector (numpy.matmul): the added dim is counted in m or n and
// dropped from `out`.
struct MatMulShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t a_batch[KITE_MAX_RANK] = {}, b_batch[KITE_MAX_RANK] = {}, batch[KITE_MAX_RANK] = {};
  int64_t a_batch_rank = 0, b_batch_rank = 0, batch_rank = 0;
  int64_t out[KITE_MAX_RANK] = {};
  int64_t out_rank = 0;
};
// Gemm: 2-D A (m x k, or k x m with trans_a) and B (k x n, or n x k).
bool resolve_gemm(const int64_t* a, const int64_t* b, bool trans_a, bool trans_b,
                  MatMulShape* out, RuleError* err);
bool resolve_matmul(const int64_t* a, int64_t a_rank, const int64_t* b, int64_t b_rank,
                    MatMulShape* out, RuleError* err);

// ---------------------------------------------------------- reductions --

// Which dims a reduction reduces (reduced[d]; rank entries). No axes: all
// dims, or none when noop_with_empty_axes (*identity = true).
bool resolve_reduce_axes(const char* op, const int64_t* axes, int64_t n, int64_t rank,
                         bool noop_with_empty_axes, bool* reduced, bool* identity, RuleError* err);

// --------------------------------------------------------------- Range --

// ONNX Range length max(ceil((limit - start) / delta), 0), exact for int64
// (no int64 overflow) and in float32 for float32 (as ONNX Runtime computes
// it). delta must not be 0.
bool range_length(int64_t start, int64_t limit, int64_t delta, int64_t* n, RuleError* err);
bool range_length(float start, float limit, float delta, int64_t* n, RuleError* err);

// -------------------------------------------------------------- Resize --

enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };
// keep_aspect_ratio_policy: "stretch", "not_larger", "not_smaller"; false
// for anything else.
bool parse_aspect_policy(const char* name, AspectPolicy* out);
// Per input dim: the output size and the scale the coordinate transform
// divides by (1 on dims not resized). From scales (roi, when non-null,
// gives the crop extent roi[n + k] - roi[k] per resized axis of
// tf_crop_and_resize) or from sizes with the keep-aspect policy (one common
// scale, output round(scale * in)).
struct ResizeAxis {
  int64_t out = 0;
  float scale = 1.0f;
};
bool resolve_resize(const int64_t* in, int64_t rank, const int64_t* axes, int64_t n,
                    const float* scales, const int64_t* sizes, const float* roi,
                    AspectPolicy policy, ResizeAxis* out, RuleError* err);

// How Resize samples its input along one axis, from the attributes mode,
// coordinate_transformation_mode, nearest_mode, cubic_coeff_a and
// exclude_outside. Every backend builds its per-axis index and weight
// tables at prepare from resize_taps/resize_tap, so they sample alike.
enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoordinate {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kHalfPixelSymmetric
};
enum class ResizeRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
struct ResizeSampling {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordinate coordinate = ResizeCoordinate::kHalfPixel;
  ResizeRounding nearest = ResizeRounding::kRoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
};
// The attribute names into *out; false naming the first one not supported
// ("mode 'area' is not supported"). tf_crop_and_resize is not.
bool parse_resize_sampling(const char* mode, const char* coordinate, const char* nearest, float cubic_a,
                           bool exclude_outside, ResizeSampling* out, RuleError* err);
// The same from a Resize node's attributes (ONNX defaults for absent ones).
// Unlike the rest of this header it allocates (attribute strings): for
// prepare, not run.
struct OpNode;
bool resize_sampling_of(const OpNode& op, ResizeSampling* out, RuleError* err);
// Taps per output index of an axis of in_len -> out_len at `scale`: 1 when
// the axis keeps its size at scale 1 (every index maps to itself) or for
// nearest, 2 for linear, 4 for cubic.
int resize_taps(const ResizeSampling& s, int64_t in_len, int64_t out_len, float scale);
// Output index o of that axis: the input index (clamped to [0, in_len)) and
// weight of each of its resize_taps() taps. Coordinates are computed in
// float, as reference runtimes do.
void resize_tap(const ResizeSampling& s, int64_t in_len, int64_t out_len, float scale, int64_t o,
                int64_t index[4], float weight[4]);

// ------------------------------------------------------- scalar values --

// One element of dtype d holding the number (an int when is_int, else f),
// converted like a C cast but defined for every value (float16: rounded to
// nearest even; float to int: truncated and saturated, NaN -> 0). False for
// a dtype without such elements. out holds dtype_size(d) <= 8 bytes.
bool encode_scalar(kite_dtype d, float f, int64_t i, bool is_int, void* out);

}  // namespace kite::ops
