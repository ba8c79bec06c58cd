// Resize's sampling rule (kite/ops/resolve.h): where an output index reads
// its input along one axis, and with which weights.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kite/ops/op_node.h"
#include "kite/ops/resolve.h"

namespace kite::ops {
namespace {

float source_coordinate(ResizeCoordinate mode, int64_t x, float scale, int64_t in_len, int64_t out_len) {
  const float xf = static_cast<float>(x);
  switch (mode) {
    case ResizeCoordinate::kAsymmetric:
      return xf / scale;
    case ResizeCoordinate::kAlignCorners:
      return out_len == 1 ? 0.0f : xf * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
    case ResizeCoordinate::kPytorchHalfPixel:
      return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoordinate::kTfHalfPixelForNn:
      return (xf + 0.5f) / scale;
    case ResizeCoordinate::kHalfPixelSymmetric: {
      // Centres the sampling grid when the output length was rounded.
      const float adjustment = static_cast<float>(out_len) / (scale * static_cast<float>(in_len));
      const float center = static_cast<float>(in_len) / 2.0f;
      return center * (1.0f - adjustment) + (xf + 0.5f) / scale - 0.5f;
    }
    case ResizeCoordinate::kHalfPixel:
      break;
  }
  return (xf + 0.5f) / scale - 0.5f;
}

int64_t nearest_index(ResizeRounding mode, float x) {
  if (mode == ResizeRounding::kFloor) return static_cast<int64_t>(std::floor(x));
  if (mode == ResizeRounding::kCeil) return static_cast<int64_t>(std::ceil(x));
  const float f = std::floor(x);
  if (x - f == 0.5f) return static_cast<int64_t>(mode == ResizeRounding::kRoundPreferCeil ? f + 1.0f : f);
  return static_cast<int64_t>(std::round(x));
}

// Keys cubic convolution weights for the taps at -1, 0, 1, 2 from floor(x).
void cubic_weights(float s, float a, float* w) {
  const float s1 = s + 1.0f, t = 1.0f - s, t1 = 2.0f - s;
  w[0] = ((a * s1 - 5.0f * a) * s1 + 8.0f * a) * s1 - 4.0f * a;
  w[1] = ((a + 2.0f) * s - (a + 3.0f)) * s * s + 1.0f;
  w[2] = ((a + 2.0f) * t - (a + 3.0f)) * t * t + 1.0f;
  w[3] = ((a * t1 - 5.0f * a) * t1 + 8.0f * a) * t1 - 4.0f * a;
}

bool is_identity(int64_t in_len, int64_t out_len, float scale) { return in_len == out_len && scale == 1.0f; }

}  // namespace

bool parse_resize_sampling(const char* mode, const char* coordinate, const char* nearest, float cubic_a,
                           bool exclude_outside, ResizeSampling* out, RuleError* err) {
  ResizeSampling s;
  if (std::strcmp(mode, "nearest") == 0) s.mode = ResizeMode::kNearest;
  else if (std::strcmp(mode, "linear") == 0) s.mode = ResizeMode::kLinear;
  else if (std::strcmp(mode, "cubic") == 0) s.mode = ResizeMode::kCubic;
  else return err->fail("mode '%s' is not supported", mode);
  if (std::strcmp(coordinate, "half_pixel") == 0) s.coordinate = ResizeCoordinate::kHalfPixel;
  else if (std::strcmp(coordinate, "pytorch_half_pixel") == 0) s.coordinate = ResizeCoordinate::kPytorchHalfPixel;
  else if (std::strcmp(coordinate, "align_corners") == 0) s.coordinate = ResizeCoordinate::kAlignCorners;
  else if (std::strcmp(coordinate, "asymmetric") == 0) s.coordinate = ResizeCoordinate::kAsymmetric;
  else if (std::strcmp(coordinate, "tf_half_pixel_for_nn") == 0) s.coordinate = ResizeCoordinate::kTfHalfPixelForNn;
  else if (std::strcmp(coordinate, "half_pixel_symmetric") == 0) s.coordinate = ResizeCoordinate::kHalfPixelSymmetric;
  else return err->fail("coordinate_transformation_mode '%s' is not supported", coordinate);
  if (std::strcmp(nearest, "round_prefer_floor") == 0) s.nearest = ResizeRounding::kRoundPreferFloor;
  else if (std::strcmp(nearest, "round_prefer_ceil") == 0) s.nearest = ResizeRounding::kRoundPreferCeil;
  else if (std::strcmp(nearest, "floor") == 0) s.nearest = ResizeRounding::kFloor;
  else if (std::strcmp(nearest, "ceil") == 0) s.nearest = ResizeRounding::kCeil;
  else return err->fail("nearest_mode '%s' is not supported", nearest);
  s.cubic_a = cubic_a;
  s.exclude_outside = exclude_outside;
  *out = s;
  return true;
}

bool resize_sampling_of(const OpNode& op, ResizeSampling* out, RuleError* err) {
  return parse_resize_sampling(op.attr_string("mode", "nearest").c_str(),
                               op.attr_string("coordinate_transformation_mode", "half_pixel").c_str(),
                               op.attr_string("nearest_mode", "round_prefer_floor").c_str(),
                               op.attr_float("cubic_coeff_a", -0.75f), op.attr_int("exclude_outside", 0) != 0, out,
                               err);
}

int resize_taps(const ResizeSampling& s, int64_t in_len, int64_t out_len, float scale) {
  if (is_identity(in_len, out_len, scale) || s.mode == ResizeMode::kNearest) return 1;
  return s.mode == ResizeMode::kLinear ? 2 : 4;
}

void resize_tap(const ResizeSampling& s, int64_t in_len, int64_t out_len, float scale, int64_t o,
                int64_t index[4], float weight[4]) {
  for (int t = 0; t < 4; ++t) {
    index[t] = o;
    weight[t] = t == 0 ? 1.0f : 0.0f;
  }
  if (is_identity(in_len, out_len, scale)) return;
  const float x = source_coordinate(s.coordinate, o, scale, in_len, out_len);
  if (s.mode == ResizeMode::kNearest) {
    const float c = std::min(std::max(x, -1.0f), static_cast<float>(in_len));
    index[0] = std::min(std::max<int64_t>(nearest_index(s.nearest, c), 0), in_len - 1);
  } else if (s.mode == ResizeMode::kLinear) {
    const float c = std::min(std::max(x, 0.0f), static_cast<float>(in_len - 1));
    index[0] = std::min(static_cast<int64_t>(c), in_len - 1);
    index[1] = std::min(index[0] + 1, in_len - 1);
    weight[1] = index[1] == index[0] ? 0.0f : c - static_cast<float>(index[0]);
    weight[0] = 1.0f - weight[1];
  } else {
    const float c = std::min(std::max(x, -2.0f), static_cast<float>(in_len + 1));
    const float f = std::floor(c);
    cubic_weights(c - f, s.cubic_a, weight);
    float total = 0.0f;
    for (int t = 0; t < 4; ++t) {
      const int64_t i = static_cast<int64_t>(f) - 1 + t;
      if (s.exclude_outside && (i < 0 || i >= in_len)) weight[t] = 0.0f;
      total += weight[t];
      index[t] = std::min(std::max<int64_t>(i, 0), in_len - 1);
    }
    if (s.exclude_outside && total != 0.0f) {
      for (int t = 0; t < 4; ++t) weight[t] /= total;
    }
  }
}

}  // namespace kite::ops
