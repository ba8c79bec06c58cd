// Conv and ConvTranspose (float32, 1 to 3 spatial dims, NC[D][H]W).
//
// Conv: im2col written straight into the GEMM's packed-B layout, then one
// packed GEMM per group with the weights packed once at prepare time. Convs
// whose output channels each read one input channel (depthwise) run a direct
// loop instead, the vectorised planes with scratch declared in the workspace. ConvTranspose: GEMM (W^T * X) then col2im.
//
// Geometry is always handled as 3-D: a 1-D or 2-D op gets leading dims of
// size 1 (kernel 1, stride 1, no padding).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "depthwise.h"
#include "fused_common.h"
#include "kernels.h"
#include "sgemm.h"
#include "stem.h"
#include "weight_pack.h"
#include "winograd.h"

namespace kite::cpu {
namespace {

struct Geometry3 {
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0};  // begin pads; end pads only bound the output size
  int64_t group = 1;

  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_numel() const { return kernel[0] * kernel[1] * kernel[2]; }
};

bool to_geometry3(const kite::ops::WindowGeometry& g, Geometry3* out) {
  const size_t r = g.input.size();
  if (r < 1 || r > 3 || g.output.size() != r || g.kernel.size() != r || g.strides.size() != r ||
      g.dilations.size() != r || g.pads_begin.size() != r) {
    return false;
  }
  const size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    out->in[lead + i] = g.input[i];
    out->out[lead + i] = g.output[i];
    out->kernel[lead + i] = g.kernel[i];
    out->stride[lead + i] = g.strides[i];
    out->dilation[lead + i] = g.dilations[i];
    out->pad[lead + i] = g.pads_begin[i];
  }
  out->group = g.group;
  return true;
}

std::string check_float_conv(const OpNode& op) {
  for (size_t i = 0; i < op.inputs.size() && i < 3; ++i) {
    std::string why = expect_dtype(op, i, {KITE_DTYPE_FLOAT32});
    if (!why.empty()) return why;
  }
  if (op.has_input(0)) {
    const int r = op.inputs[0].rank();
    if (r < 3 || r > 5) {
      return input_label(op, 0) + " has " + std::to_string(r) +
             " dims; the CPU kernel takes 1 to 3 spatial dims";
    }
  }
  return "";
}

// Range of output positions o in [0, out) with 0 <= o*stride + offset < in.
inline void valid_range(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t* lo,
                        int64_t* hi) {
  // o >= ceil(-offset / stride) and o <= floor((in - 1 - offset) / stride).
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t last_excl;
  if (in - 1 - offset < 0) {
    last_excl = 0;
  } else {
    last_excl = (in - 1 - offset) / stride + 1;
  }
  *lo = std::min(first, out);
  *hi = std::max(*lo, std::min(last_excl, out));
}

// A Conv or ConvTranspose weight (input 1) in the GEMM's packed-A layout,
// floats long: a constant one from the file's form when it has one
// (weight_pack.h), else packed into *own once by pack(); a computed one gets
// *own sized here and packed at every run. Null (with err) when the file's
// form is malformed.
template <typename Pack>
const float* packed_conv_weights(const KernelArgs& args, bool constant, int64_t floats,
                                 std::vector<float>* own, Pack pack, std::string* err) {
  if (constant) {
    for (const weight_pack::Layout& l : weight_pack::layouts(*args.op, args.winograd)) {
      if (l.input != 1) continue;
      if (l.floats != floats) break;  // the rules disagree: pack here
      return weight_pack::acquire(args, l, own, err);
    }
  }
  own->resize(static_cast<size_t>(floats));
  if (constant) pack();
  return own->data();
}

// out[0..7] = in[0], in[2], ..., in[14]: a stride-2 row of an im2col panel
// (a fixed count, which the compiler unrolls).
inline void even_of_16(const float* in, float* out) {
  for (int i = 0; i < 8; ++i) out[i] = in[2 * i];
}

class ConvKernel : public Kernel {
 public:
  ConvKernel(const Geometry3& g, int64_t batch, int64_t channels, int64_t out_channels,
             const float* x, const float* w, const float* bias, float* y, bool w_constant,
             int64_t winograd_tile, bool stem, bool channel_blocks)
      : g_(g), batch_(batch), channels_(channels), out_channels_(out_channels), x_(x), w_(w),
        bias_(bias), y_(y), w_constant_(w_constant),
        winograd_(winograd_tile > 0 && w_constant), wino_tile_(winograd_tile),
        channel_blocks_(channel_blocks) {
    cg_ = channels_ / g_.group;
    mg_ = out_channels_ / g_.group;
    k_ = cg_ * g_.kernel_numel();
    pixels_ = g_.out_numel();
    direct_ = cg_ == 1;
    pointwise_ = g_.kernel_numel() == 1 && g_.pad[0] == 0 && g_.pad[1] == 0 && g_.pad[2] == 0 &&
                 g_.stride[0] == 1 && g_.stride[1] == 1 && g_.stride[2] == 1;
    // A stem (few input channels) directly, without im2col, where
    // stem::takes says so (the GEMM level AVX-512 or AVX2). Measured on an
    // AMD EPYC (Zen 4), 1 thread, against im2col + GEMM (kite-run --profile,
    // the two libraries alternately): resnet18's 7x7 stride-2 stem 3.99 ->
    // 2.90 ms, mobilenet_v2's 3x3 stride-2 1.01 -> 0.55, squeezenet's 1.49
    // -> 1.06, efficientnet_b0's 1.02 -> 0.71, unet_small's 3x3 stride-1
    // 0.43 -> 0.25. On AVX2 (AMD EPYC Zen 3, 1 thread, the convolution
    // alone, best of alternating runs): resnet18's 3.61 -> 2.85, mobilenet_v2's
    // 0.55 -> 0.36, mobilenet_v3_small's 0.60 -> 0.20, squeezenet's 0.84 ->
    // 0.71, unet_small's (against Winograd) 0.84 -> 0.34. One input channel
    // too: the stem kernel, not the depthwise loop.
    stem_ = stem && w_constant_;
    if (stem_) direct_ = winograd_ = false;
  }

  // false with err when the file's packed form of the weights is malformed.
  bool prepare(const KernelArgs& args, std::string* err) {
    channel_blocks_ = channel_blocks_ && vector_depthwise();  // (a stem is not)
    if (direct_) {
      if (vector_depthwise()) {
        // One padded plane of scratch per thread, declared here so that run
        // allocates nothing (every plane of the node has the same size).
        plane_scratch_ = depthwise::scratch_floats(depthwise_plane(0, 0));
        // Sixteen channels at a time where the buffer fits
        // (depthwise::Channels). Measured on an AMD EPYC (Zen 4), 1 thread,
        // against the per-plane kernel: convnext_tiny's 7x7 layers on 56x56
        // 0.67 -> 0.52 ms, on 28x28 0.35 -> 0.27.
        const auto& k = g_.kernel;
        const auto& s = g_.stride;
        const auto& p = g_.pad;
        if (channel_blocks_) {
          // Constant weights one vector a tap (depthwise::Channels::
          // lane_weights), from the file's "dw-c16" form when it has one.
          if (w_constant_) {
            lane_w_ = packed_conv_weights(
                args, true, depthwise::lane_weight_floats(out_channels_, g_.kernel_numel()), &own_lane_w_,
                [this] {
                  depthwise::arrange_channel_weights(w_, out_channels_, g_.kernel_numel(),
                                                     own_lane_w_.data());
                },
                err);
            if (!lane_w_) return false;
          }
          // (The per-plane scratch stays: run falls back to it when the level
          // changes, as the tests force.)
          plane_scratch_ = std::max(plane_scratch_, depthwise::channel_scratch_floats(
                                                        g_.in[1], g_.in[2], g_.out[1], g_.out[2], k[1],
                                                        k[2], s[1], s[2], p[1], p[2]));
        }
        workspace()->reserve(static_cast<size_t>(plane_scratch_ * std::max(1, threads)));
      }
      // Per kernel column, the output columns whose input column is inside.
      width_ranges_.resize(static_cast<size_t>(g_.kernel[2]) * 2);
      for (int64_t t = 0; t < g_.kernel[2]; ++t) {
        valid_range(t * g_.dilation[2] - g_.pad[2], g_.stride[2], g_.in[2], g_.out[2],
                    &width_ranges_[t * 2], &width_ranges_[t * 2 + 1]);
      }
      return true;
    }
    if (stem_) {
      stem_g_ = stem_geometry();
      weights_ = packed_conv_weights(
          args, true, stem::weight_floats(stem_g_), &packed_w_,
          [this] { stem::arrange_weights(stem_g_, w_, packed_w_.data()); }, err);
      workspace()->reserve(static_cast<size_t>(stem::scratch_floats(stem_g_)));
      return weights_ != nullptr;
    }
    if (winograd_) {
      wino_ = winograd::Conv(wino_tile_, channels_, out_channels_, g_.in[1], g_.in[2], g_.out[1],
                             g_.out[2], g_.pad[1], g_.pad[2]);
      weights_ = packed_conv_weights(
          args, true, winograd::packed_weight_floats(wino_tile_, out_channels_, channels_), &packed_w_,
          [this] { winograd::pack_weights(wino_tile_, w_, out_channels_, channels_, packed_w_.data()); },
          err);
      workspace()->reserve(static_cast<size_t>(wino_.workspace_floats(threads)));
      return weights_ != nullptr;
    }
    if (!acquire_weights(args, g_.group * sgemm::packed_a_floats(mg_, k_), err)) return false;
    // A projection's k split in two (sgemm::k_split_at) on planes narrower
    // than kSplitMaxWidth (14x14, 13x13, 7x7: their rows are not whole
    // cache lines, so the layers around split them by channels, not by
    // pixels; from the width, so that a band of the plane, under a memory
    // budget, takes the split as the whole plane does and gives its bits).
    // Scratch for the second half's sums, after packed B where there is
    // one. One group only: groups may run side by side, each GEMM on one
    // thread, where a split taken on one thread but not on several would
    // change the bits.
    constexpr int64_t kSplitMaxWidth = 28;
    split_floats_ = pointwise_ && g_.group == 1 && g_.out[2] < kSplitMaxWidth
                        ? sgemm::k_split_floats(mg_, pixels_, k_)
                        : 0;
    if (pointwise_ && sgemm::reads_b_in_place(mg_, pixels_)) {
      // The input is the GEMM's B as it lies (row c: channel c's plane): no
      // packing pass and no scratch. Measured on an Intel Xeon (AVX-512),
      // mobilenet_v2 9.3 -> 8.8 ms at 1 thread (p50, alternating runs).
      direct_b_ = true;
      workspace()->reserve(static_cast<size_t>(split_floats_));
      return true;
    }
    // Column blocks of about kBlockFloats of packed B each (a multiple of
    // kNR columns) for convolutions with few output channels, whose GEMM
    // reuses each im2col value only mg_ times and so waits on memory, when
    // there are enough blocks to keep every thread busy (run_blocked); else
    // the whole matrix at once and the GEMM threaded. Measured on an Intel
    // Xeon (AVX-512), unet_small 15.7 -> 13.2 ms at 1 thread, 8.4 -> 7.4 at
    // 2; with many output channels (resnet18's 64 and up) blocking did not
    // help and 64K-float blocks cost 10% (A re-read per block).
    constexpr int64_t kBlockFloats = 64 * 1024;
    constexpr int64_t kMaxRows = 32;
    const int64_t nr = sgemm::kNR;
    const int64_t cols = std::max<int64_t>(4 * nr, kBlockFloats / std::max<int64_t>(k_, 1) / nr * nr);
    const int64_t slots = std::max(1, threads);
    // Also when the whole im2col matrix would be far larger than L2 and the
    // weights re-read per block are small: resnet18's 7x7 stride-2 stem
    // (147 x 12544 floats, 7 MB, for 37 KB of weights): 4.0 -> 3.3 ms at 1
    // thread on an Intel Xeon (AVX-512).
    constexpr int64_t kLargeIm2colFloats = 512 * 1024;
    constexpr int64_t kSmallWeightFloats = 32 * 1024;
    const bool few_rows = mg_ <= kMaxRows;
    const bool big_im2col = !pointwise_ && k_ * pixels_ > kLargeIm2colFloats &&
                            mg_ * k_ <= kSmallWeightFloats;
    if (g_.group == 1 && (few_rows || big_im2col) && (pixels_ + cols - 1) / cols >= 2 * slots) {
      block_cols_ = cols;
      block_slots_ = slots;
      workspace()->reserve(static_cast<size_t>(slots * sgemm::packed_b_floats(k_, cols)));
    } else {
      workspace()->reserve(static_cast<size_t>(g_.group * sgemm::packed_b_floats(k_, pixels_) + split_floats_));
    }
    if (!pointwise_) {
      // Each panel of kNR output pixels as runs of pixels in one output row,
      // with the input position of the first pixel's window corner.
      constexpr int64_t nr = sgemm::kNR;
      const int64_t panels = (pixels_ + nr - 1) / nr;
      panel_runs_.assign(static_cast<size_t>(panels) + 1, 0);
      for (int64_t jp = 0; jp < panels; ++jp) {
        const int64_t j0 = jp * nr, j1 = std::min(pixels_, j0 + nr);
        for (int64_t j = j0; j < j1;) {
          const int64_t ow = j % g_.out[2];
          const int64_t oh = j / g_.out[2] % g_.out[1];
          const int64_t od = j / (g_.out[2] * g_.out[1]);
          const int64_t count = std::min(j1 - j, g_.out[2] - ow);
          runs_.push_back({j - j0, count, od * g_.stride[0] - g_.pad[0],
                           oh * g_.stride[1] - g_.pad[1], ow * g_.stride[2] - g_.pad[2]});
          j += count;
        }
        panel_runs_[jp + 1] = static_cast<int64_t>(runs_.size());
      }
    }
    return true;
  }

  // Relu and Clip go into the GEMM's store of each tile (sgemm::Epilogue),
  // or the vectorised depthwise plane's (depthwise::Plane::act); the other
  // direct loops leave them to the wrapper. Sigmoid, SiLU, hard sigmoid /
  // swish and GELU go to the tile hook (fused::activation_tile) on the GEMM
  // paths (each task's block of the output, in L2), the vectorised
  // depthwise ones (each band of sixteen channels before it goes back to
  // the planes, or each plane) and the stem (each output row of eight
  // channels), instead of a pass over the whole output afterwards.
  bool take_activation(const kite::ops::FusedActivation& act) override {
    if (direct_ && !vector_depthwise()) return false;
    tile_act_ = act;
    return fused::activation_into_epilogue(tile_act_, !winograd_, &epilogue_);
  }

  // A fused residual's hook (fused_conv.cpp) on each finished block of the
  // output, where it lies in y_ (the hook finds its residual by the
  // block's place): the GEMM paths' task blocks, the depthwise planes, the
  // stem's rows, Winograd's runs of output tiles. Not with an epilogue
  // already set, nor on the direct loops, nor on the depthwise channel
  // blocks, whose hook sees a band in its scratch layout.
  bool take_tile_hook(sgemm::TileHook hook, const void* ctx) override {
    if (epilogue_.kind != sgemm::Epilogue::kNone || epilogue_.tile != nullptr) return false;
    if ((direct_ && !vector_depthwise()) || channel_blocks_) return false;
    epilogue_.tile = hook;
    epilogue_.tile_ctx = ctx;
    return true;
  }

  void run(ThreadPool& pool) override {
    if (batch_ == 0 || out_channels_ == 0 || pixels_ == 0) return;
    if (direct_) {
      run_direct(pool);
      return;
    }
    if (stem_) {
      for (int64_t n = 0; n < batch_; ++n) {
        stem::run(stem_g_, x_ + n * channels_ * g_.in_numel(), weights_, bias_, epilogue_,
                  y_ + n * out_channels_ * pixels_, workspace()->data(), pool);
      }
      return;
    }
    if (winograd_) {
      for (int64_t n = 0; n < batch_; ++n) {
        wino_.run(x_ + n * channels_ * g_.in_numel(), weights_, bias_, epilogue_,
                  y_ + n * out_channels_ * pixels_, col(), threads, pool);
      }
      return;
    }
    if (!w_constant_) pack_weights(&pool);
    const int64_t in_plane = g_.in_numel();
    const int64_t col_group = sgemm::packed_b_floats(k_, pixels_);
    const int64_t w_group = sgemm::packed_a_floats(mg_, k_);
    for (int64_t n = 0; n < batch_; ++n) {
      const float* xn = x_ + n * channels_ * in_plane;
      float* yn = y_ + n * out_channels_ * pixels_;
      if (direct_b_) {
        for (int64_t g = 0; g < g_.group; ++g) {
          const float* xg = xn + g * cg_ * in_plane;
          float* yg = yn + g * mg_ * pixels_;
          const float* bg = bias_ ? bias_ + g * mg_ : nullptr;
          if (sgemm::gemm_direct_b(mg_, pixels_, k_, weights_ + g * w_group, xg, in_plane, yg,
                                   pixels_, bg, false, &pool, &epilogue_, split_scratch(0))) {
            continue;
          }
          // The GEMM level changed since prepare (tests force levels): pack
          // into memory of this kernel's own.
          unpacked_b_.resize(static_cast<size_t>(col_group));
          sgemm::pack_b(xg, in_plane, 1, k_, pixels_, unpacked_b_.data(), &pool);
          sgemm::gemm_packed(mg_, pixels_, k_, weights_ + g * w_group, unpacked_b_.data(), yg,
                             pixels_, bg, false, &pool, &epilogue_, split_scratch(0));
        }
        continue;
      }
      if (block_cols_ > 0) {
        run_blocked(xn, yn, pool);
        continue;
      }
      if (pointwise_) {
        for (int64_t g = 0; g < g_.group; ++g) {
          sgemm::pack_b(xn + g * cg_ * in_plane, in_plane, 1, k_, pixels_,
                        col() + g * col_group, &pool);
        }
      } else {
        im2col(xn, pool);
      }
      auto gemm_group = [&](int64_t g, ThreadPool* p) {
        sgemm::gemm_packed(mg_, pixels_, k_, weights_ + g * w_group,
                           col() + g * col_group, yn + g * mg_ * pixels_, pixels_,
                           bias_ ? bias_ + g * mg_ : nullptr, false, p, &epilogue_,
                           split_scratch(g_.group * col_group));
      };
      if (g_.group >= pool.size() && g_.group > 1) {
        pool.parallel_for(g_.group, 1, [&](int64_t b, int64_t e) {
          for (int64_t g = b; g < e; ++g) gemm_group(g, nullptr);
        });
      } else {
        for (int64_t g = 0; g < g_.group; ++g) gemm_group(g, &pool);
      }
    }
  }

 private:
  bool acquire_weights(const KernelArgs& args, int64_t floats, std::string* err) {
    weights_ = packed_conv_weights(args, w_constant_, floats, &packed_w_,
                                   [this] { pack_weights(nullptr); }, err);
    return weights_ != nullptr;
  }

  void pack_weights(ThreadPool* pool) {
    const int64_t w_group = sgemm::packed_a_floats(mg_, k_);
    for (int64_t g = 0; g < g_.group; ++g) {
      sgemm::pack_a(w_ + g * mg_ * k_, k_, 1, mg_, k_, 1.0f, packed_w_.data() + g * w_group, pool);
    }
  }

  // Writes every group's im2col matrix in packed-B layout: panel by panel,
  // each panel k_ rows of kNR columns.
  void im2col(const float* xn, ThreadPool& pool) {
    constexpr int64_t nr = sgemm::kNR;
    const int64_t panels = (pixels_ + nr - 1) / nr;
    const int64_t col_group = sgemm::packed_b_floats(k_, pixels_);
    const int64_t in_plane = g_.in_numel();
    pool.parallel_for(g_.group * panels, std::max<int64_t>(1, 2048 / std::max<int64_t>(k_, 1)),
                      [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t g = t / panels;
        const int64_t jp = t % panels;
        im2col_panel(xn + g * cg_ * in_plane, jp, col() + g * col_group + jp * k_ * nr);
      }
    });
  }

  // Panel jp (output pixels jp * kNR ...) of one group's im2col matrix into
  // dst (k_ x kNR). Columns past the last pixel are left as they are: the
  // GEMM computes them but stores only real columns.
  void im2col_panel(const float* xg, int64_t jp, float* dst) const {
    constexpr int64_t nr = sgemm::kNR;
    const int64_t D = g_.in[0], H = g_.in[1], W = g_.in[2];
    const int64_t in_plane = g_.in_numel();
    const int64_t sw = g_.stride[2];
    const Run* run_begin = runs_.data() + panel_runs_[jp];
    const Run* run_end = runs_.data() + panel_runs_[jp + 1];
    // Row p of the panel is (channel, kd, kh, kw) in that order, kw fastest.
    const int64_t KD = g_.kernel[0], KH = g_.kernel[1], KW = g_.kernel[2];
    const int64_t dd = g_.dilation[0], dh = g_.dilation[1], dw = g_.dilation[2];
    for (const Run* r = run_begin; r != run_end; ++r) {
      const int64_t n = r->count;
      float* d = dst + r->col;
      for (int64_t c = 0; c < cg_; ++c) {
        const float* plane = xg + c * in_plane;
        for (int64_t kd = 0; kd < KD; ++kd) {
          const int64_t id = r->d + kd * dd;
          for (int64_t kh = 0; kh < KH; ++kh, d += KW * nr) {
            const int64_t ih = r->h + kh * dh;
            if (id < 0 || id >= D || ih < 0 || ih >= H) {
              for (int64_t kw = 0; kw < KW; ++kw) {
                for (int64_t i = 0; i < n; ++i) d[kw * nr + i] = 0.0f;
              }
              continue;
            }
            const float* src = plane + (id * H + ih) * W;
            for (int64_t kw = 0; kw < KW; ++kw) {
              float* out = d + kw * nr;
              const int64_t iw = r->w + kw * dw;
              if (iw >= 0 && iw + (n - 1) * sw < W) {
                if (sw == 1 && n == nr) {
                  std::memcpy(out, src + iw, nr * sizeof(float));  // fixed size: inlined
                } else if (sw == 2 && n == nr && iw + 2 * nr <= W) {
                  even_of_16(src + iw, out);
                } else {
                  for (int64_t i = 0; i < n; ++i) out[i] = src[iw + i * sw];
                }
              } else {
                for (int64_t i = 0; i < n; ++i) {
                  const int64_t x = iw + i * sw;
                  out[i] = x >= 0 && x < W ? src[x] : 0.0f;
                }
              }
            }
          }
        }
      }
    }
  }

  // Group 1 convolutions with many pixels: each thread takes a contiguous
  // range of column blocks and, per block, writes its im2col panels (or
  // packs its pointwise input) into a slice of scratch that stays in its
  // core's L2, then runs the GEMM on it, single-threaded. No barrier between
  // the two steps and no im2col matrix the size of the whole image going
  // through memory (unet_small's dec1: 28 MB before).
  void run_blocked(const float* xn, float* yn, ThreadPool& pool) {
    constexpr int64_t nr = sgemm::kNR;
    const int64_t in_plane = g_.in_numel();
    const int64_t blocks = (pixels_ + block_cols_ - 1) / block_cols_;
    const int64_t block_floats = sgemm::packed_b_floats(k_, block_cols_);
    const int64_t slots = std::max<int64_t>(1, std::min<int64_t>({pool.size(), block_slots_, blocks}));
    pool.for_each_task(slots, blocks, [&](int64_t s, int64_t b) {
      float* mine = col() + s * block_floats;
      const int64_t j0 = b * block_cols_;
      const int64_t cols = std::min(block_cols_, pixels_ - j0);
      if (pointwise_) {
        sgemm::pack_b(xn + j0, in_plane, 1, k_, cols, mine, nullptr);
      } else {
        const int64_t first = j0 / nr, last = (j0 + cols + nr - 1) / nr;
        for (int64_t jp = first; jp < last; ++jp) im2col_panel(xn, jp, mine + (jp - first) * k_ * nr);
      }
      sgemm::gemm_packed(mg_, cols, k_, weights_, mine, yn + j0, pixels_, bias_, false, nullptr,
                         &epilogue_);
    });
  }

  // One input channel per output channel: 2-D planes the vectorised kernel
  // takes go there (depthwise.h); the rest accumulate kernel taps row by row.
  void run_direct(ThreadPool& pool) const {
    const int64_t in_plane = g_.in_numel();
    if (channel_blocks_) {
      run_channel_blocks(pool);
      return;
    }
    if (vector_depthwise()) {
      // A plane a task, on one scratch slice per thread.
      const int64_t planes = batch_ * out_channels_;
      const int64_t slices = std::max<int64_t>(
          1, std::min<int64_t>({static_cast<int64_t>(pool.size()), std::max(1, threads), planes}));
      float* scratch = workspace()->data();
      pool.for_each_task(slices, planes, [&](int64_t s, int64_t t) {
        run_depthwise_plane(t / out_channels_, t % out_channels_, scratch + s * plane_scratch_);
      });
      return;
    }
    const int64_t kk = g_.kernel_numel();
    const int64_t OD = g_.out[0], OH = g_.out[1], OW = g_.out[2];
    const int64_t H = g_.in[1], W = g_.in[2];
    pool.parallel_for(batch_ * out_channels_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t n = t / out_channels_;
        const int64_t m = t % out_channels_;
        const int64_t c = m / mg_;  // input channel (cg_ == 1)
        const float* plane = x_ + (n * channels_ + c) * in_plane;
        const float* wm = w_ + m * kk;
        float* out = y_ + t * pixels_;
        const float b = bias_ ? bias_[m] : 0.0f;
        for (int64_t i = 0; i < pixels_; ++i) out[i] = b;
        for (int64_t od = 0; od < OD; ++od) {
          for (int64_t oh = 0; oh < OH; ++oh) {
            float* orow = out + (od * OH + oh) * OW;
            for (int64_t kd = 0; kd < g_.kernel[0]; ++kd) {
              const int64_t id = od * g_.stride[0] - g_.pad[0] + kd * g_.dilation[0];
              if (id < 0 || id >= g_.in[0]) continue;
              for (int64_t kh = 0; kh < g_.kernel[1]; ++kh) {
                const int64_t ih = oh * g_.stride[1] - g_.pad[1] + kh * g_.dilation[1];
                if (ih < 0 || ih >= H) continue;
                const float* irow = plane + (id * H + ih) * W;
                for (int64_t kw = 0; kw < g_.kernel[2]; ++kw) {
                  const float wv = wm[(kd * g_.kernel[1] + kh) * g_.kernel[2] + kw];
                  const int64_t lo = width_ranges_[kw * 2], hi = width_ranges_[kw * 2 + 1];
                  const int64_t off = kw * g_.dilation[2] - g_.pad[2];
                  if (g_.stride[2] == 1) {
                    const float* src = irow + off;
                    for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * src[ow];
                  } else {
                    const int64_t s = g_.stride[2];
                    for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow * s + off];
                  }
                }
              }
            }
          }
        }
      }
    });
  }

  // Depthwise on small planes, sixteen channels a task (depthwise::Channels),
  // one scratch slice per thread. With more than one thread the blocks are
  // split by output rows too: on planes of kMinRowsPerPart rows a thread or
  // more whose GEMMs split by pixels, into one part a thread (two when
  // there is a single block: mobilenet_v3_small's 16-channel layer ran on
  // one thread). Tasks go part by part, so thread s's share of them
  // (ThreadPool::for_each_task) is its band of rows of every channel: the
  // rows of the pixels that the pointwise layers around it gave it and will
  // take from it, still in its core's caches (Zen 2 host, vCPUs ~220 ns
  // apart: channel blocks split between the threads made 2 threads slower
  // than 1 on mobilenet_v2's layers).
  void run_channel_blocks(ThreadPool& pool) const {
    constexpr int64_t lanes = depthwise::kChannelLanes;
    constexpr int64_t kMinRowsPerPart = 7;
    const int64_t blocks_per_item = (out_channels_ + lanes - 1) / lanes;
    const int64_t blocks = batch_ * blocks_per_item;
    const int64_t slices = std::max<int64_t>(
        1, std::min<int64_t>({static_cast<int64_t>(pool.size()), std::max(1, threads),
                              blocks * g_.out[1]}));
    int64_t parts = 1;
    // Rows only where the GEMMs around split by pixels too (planes of a
    // whole number of cache lines, sgemm's run_gemm): on 14x14 and 7x7
    // planes they split by channels, and so do these blocks.
    const bool pixel_split =
        sgemm::splits_columns_by_thread(g_.in_numel()) && sgemm::splits_columns_by_thread(pixels_);
    if (slices > 1 && pixel_split && g_.out[1] >= kMinRowsPerPart * slices) {
      parts = blocks == 1 ? 2 * slices : slices;
    } else if (slices > 1 && blocks >= 2 * slices) {
      // Two blocks a thread or more: whole blocks, one part. Each thread
      // then takes the channels the pointwise layers around it (split by
      // channels on these planes) gave it and will take from it, and reads
      // no rows twice. An odd count of blocks went by halves of the rows
      // (every thread reading half of its input from the other core and
      // the kernel's rows above and below each half twice: a 5x5 kernel on
      // 14x14, 11 input rows for 7 output ones). Zen 4, 2 threads, vCPUs
      // ~30 ns apart, kite-run --profile: mobilenet_v3_small's 240-channel
      // 5x5 layers 38.4 -> 34.6 us, the model 1.040 -> 0.985 ms, again
      // 1.008 -> 0.965; efficientnet_b0 0.997x.
      parts = 1;
    } else if (slices > 1) {
      // Few rows: each part would re-read the kernel's rows above and below
      // it and set up its rows again for little work (mobilenet_v3_small's
      // 7x7 layers in two parts 0.028 -> 0.037 ms), so the fewest parts
      // that give every thread the same number of tasks, two at least.
      const int64_t most = std::min<int64_t>(g_.out[1], 16);
      parts = std::min(most, (2 * slices + blocks - 1) / blocks);
      for (int64_t p = 1; p <= most; ++p) {
        if (blocks * p >= 2 * slices && blocks * p % slices == 0) {
          parts = p;
          break;
        }
      }
    }
    const int64_t tasks = blocks * parts;
    const int64_t in_plane = g_.in_numel();
    float* scratch = workspace()->data();
    // The node's geometry once; each task sets its planes.
    depthwise::Channels geometry{};
    geometry.in_stride = in_plane;
    geometry.h = g_.in[1];
    geometry.w = g_.in[2];
    geometry.out_stride = pixels_;
    geometry.oh = g_.out[1];
    geometry.ow = g_.out[2];
    geometry.kh = g_.kernel[1];
    geometry.kw = g_.kernel[2];
    geometry.stride_h = g_.stride[1];
    geometry.stride_w = g_.stride[2];
    geometry.pad_h = g_.pad[1];
    geometry.pad_w = g_.pad[2];
    geometry.act = plane_act();
    geometry.lo = epilogue_.lo;
    geometry.hi = epilogue_.hi;
    geometry.tile = epilogue_.tile;
    geometry.tile_ctx = epilogue_.tile_ctx;
    pool.for_each_task(slices, tasks, [&](int64_t s, int64_t t) {
      float* mine = scratch + s * plane_scratch_;
      const int64_t part = t / blocks, b = t % blocks;
      const int64_t n = b / blocks_per_item, c0 = b % blocks_per_item * lanes;
      depthwise::Channels c = geometry;
      c.oy_begin = part * g_.out[1] / parts;
      c.oy_end = (part + 1) * g_.out[1] / parts;
      c.in = x_ + (n * channels_ + c0) * in_plane;
      c.out = y_ + (n * out_channels_ + c0) * pixels_;
      c.weights = w_ + c0 * g_.kernel_numel();
      c.bias = bias_ ? bias_ + c0 : nullptr;
      c.count = std::min(lanes, out_channels_ - c0);
      if (lane_w_) c.lane_weights = lane_w_ + c0 * g_.kernel_numel();
      if (depthwise::run_channels(c, mine)) return;
      // The level changed since prepare (tests force levels): plane by
      // plane, by the task that has each block's first rows.
      if (part != 0) return;
      for (int64_t m = c0; m < c0 + c.count; ++m) run_depthwise_plane(n, m, mine);
    });
  }

  stem::Geometry stem_geometry() const {
    stem::Geometry s;
    s.c = channels_, s.h = g_.in[1], s.w = g_.in[2];
    s.m = out_channels_, s.oh = g_.out[1], s.ow = g_.out[2];
    s.kh = g_.kernel[1], s.kw = g_.kernel[2];
    s.stride = g_.stride[1];
    s.pad_top = g_.pad[1], s.pad_left = g_.pad[2];
    return s;
  }

  // 2-D planes the vectorised depthwise kernel takes (depthwise.h).
  bool vector_depthwise() const {
    return direct_ && g_.in[0] == 1 && g_.out[0] == 1 && g_.kernel[0] == 1 &&
           depthwise::handles(g_.stride[2], g_.dilation[2]);
  }
  // The vectorised depthwise kernel on output channel m of batch item n,
  // then the tile hook, when there is one, on the plane.
  void run_depthwise_plane(int64_t n, int64_t m, float* scratch) const {
    const depthwise::Plane p = depthwise_plane(n, m);
    depthwise::run_plane(p, scratch);
    if (epilogue_.tile) epilogue_.tile(epilogue_.tile_ctx, p.out, pixels_, 1, pixels_);
  }
  // Output channel m of batch item n as a depthwise plane.
  depthwise::Plane depthwise_plane(int64_t n, int64_t m) const {
    const int64_t c = m / mg_;  // input channel (cg_ == 1)
    return {x_ + (n * channels_ + c) * g_.in_numel(), g_.in[1], g_.in[2],
            y_ + (n * out_channels_ + m) * pixels_, g_.out[1], g_.out[2],
            w_ + m * g_.kernel_numel(), g_.kernel[1], g_.kernel[2],
            g_.stride[1], g_.stride[2], g_.pad[1], g_.pad[2],
            g_.dilation[1], bias_ ? bias_[m] : 0.0f, plane_act(), epilogue_.lo, epilogue_.hi};
  }
  // The fused activation as the depthwise kernels take it.
  depthwise::Plane::Act plane_act() const {
    return epilogue_.kind == sgemm::Epilogue::kRelu   ? depthwise::Plane::kRelu
           : epilogue_.kind == sgemm::Epilogue::kClip ? depthwise::Plane::kClip
                                                      : depthwise::Plane::kNone;
  }

  Geometry3 g_;
  int64_t batch_, channels_, out_channels_;
  const float* x_;
  const float* w_;
  const float* bias_;
  float* y_;
  bool w_constant_;
  bool winograd_;        // Winograd (winograd.h) instead of im2col + GEMM
  int64_t wino_tile_;    // its output tile: 4 (F(4x4, 3x3)) or 2 (F(2x2, 3x3))
  winograd::Conv wino_;  // its plan, when winograd_
  int64_t cg_ = 0, mg_ = 0, k_ = 0, pixels_ = 0;
  bool direct_ = false, pointwise_ = false;
  bool direct_b_ = false;  // pointwise, its input read in place by the GEMM (gemm_direct_b)
  std::vector<float> unpacked_b_;  // direct_b_ when the GEMM level no longer reads B in place
  int64_t block_cols_ = 0;   // > 0: run_blocked with blocks of this many columns
  int64_t split_floats_ = 0;  // the k split's scratch (sgemm::k_split_floats), 0: none
  int64_t block_slots_ = 1;  // scratch slices reserved for run_blocked
  sgemm::Epilogue epilogue_;  // kNone unless a fused node handed one over
  kite::ops::FusedActivation tile_act_;  // epilogue_.tile's activation, when set
  int64_t plane_scratch_ = 0;  // floats of depthwise scratch per thread
  bool channel_blocks_ = false;  // depthwise on small planes, 16 channels a task
  const float* lane_w_ = nullptr;   // channel_blocks_' constant weights, arranged
  std::vector<float> own_lane_w_;  // lane_w_ when the file has no form of them
  bool stem_ = false;            // few input channels: stem::run, weights_ in its order
  stem::Geometry stem_g_;
  std::vector<float> packed_w_;
  const float* weights_ = nullptr;  // packed_w_, or the file's form in the mapping
  mutable Workspace own_workspace_;

 public:
  Workspace* shared_workspace = nullptr;  // the backend's, when built by one
  int threads = 1;  // the pool size run will get: depthwise scratch slices

 private:
  Workspace* workspace() const { return shared_workspace ? shared_workspace : &own_workspace_; }
  float* col() const { return workspace()->data(); }
  // The k split's scratch at `offset` floats into the workspace (null when
  // this convolution's GEMM takes no split).
  float* split_scratch(int64_t offset) const { return split_floats_ > 0 ? col() + offset : nullptr; }
  struct Run {
    int64_t col;      // first column inside the panel
    int64_t count;    // pixels, all in one output row
    int64_t d, h, w;  // input position of the first pixel's window corner
  };
  std::vector<Run> runs_;
  std::vector<int64_t> panel_runs_;  // panel jp's runs: [panel_runs_[jp], panel_runs_[jp + 1])
  std::vector<int64_t> width_ranges_;
};

class ConvTransposeKernel : public Kernel {
 public:
  ConvTransposeKernel(const Geometry3& g, int64_t batch, int64_t channels, int64_t out_channels,
                      const float* x, const float* w, const float* bias, float* y,
                      bool w_constant)
      : g_(g), batch_(batch), channels_(channels), out_channels_(out_channels), x_(x), w_(w),
        bias_(bias), y_(y), w_constant_(w_constant) {
    cg_ = channels_ / g_.group;
    mg_ = out_channels_ / g_.group;
    kk_ = g_.kernel_numel();
    in_pixels_ = g_.in_numel();
    out_pixels_ = g_.out_numel();
  }

  bool prepare(const KernelArgs& args, std::string* err) {
    if (!acquire_weights(args, g_.group * sgemm::packed_a_floats(mg_ * kk_, cg_), err)) return false;
    packed_x_floats_ = static_cast<size_t>(sgemm::packed_b_floats(cg_, in_pixels_));
    workspace()->reserve(packed_x_floats_ + static_cast<size_t>(mg_ * kk_ * in_pixels_));
    return true;
  }

  void run(ThreadPool& pool) override {
    if (batch_ == 0 || out_channels_ == 0 || out_pixels_ == 0) return;
    if (!w_constant_) pack_weights(&pool);
    const int64_t w_group = sgemm::packed_a_floats(mg_ * kk_, cg_);
    for (int64_t n = 0; n < batch_; ++n) {
      for (int64_t g = 0; g < g_.group; ++g) {
        const float* xg = x_ + (n * channels_ + g * cg_) * in_pixels_;
        float* yg = y_ + (n * out_channels_ + g * mg_) * out_pixels_;
        sgemm::pack_b(xg, in_pixels_, 1, cg_, in_pixels_, packed_x(), &pool);
        sgemm::gemm_packed(mg_ * kk_, in_pixels_, cg_, weights_ + g * w_group,
                           packed_x(), col(), in_pixels_, nullptr, false, &pool);
        const float* bias = bias_ ? bias_ + g * mg_ : nullptr;
        pool.parallel_for(mg_, 1, [&](int64_t begin, int64_t end) {
          for (int64_t m = begin; m < end; ++m) col2im(m, bias, yg + m * out_pixels_);
        });
      }
    }
  }

 private:
  bool acquire_weights(const KernelArgs& args, int64_t floats, std::string* err) {
    weights_ = packed_conv_weights(args, w_constant_, floats, &packed_w_,
                                   [this] { pack_weights(nullptr); }, err);
    return weights_ != nullptr;
  }

  void pack_weights(ThreadPool* pool) {
    // W is (C, Mg, k...); group g's A = W_g^T has rows (m, tap) and columns c.
    const int64_t rows = mg_ * kk_;
    const int64_t w_group = sgemm::packed_a_floats(rows, cg_);
    for (int64_t g = 0; g < g_.group; ++g) {
      sgemm::pack_a(w_ + g * cg_ * rows, 1, rows, rows, cg_, 1.0f,
                    packed_w_.data() + g * w_group, pool);
    }
  }

  void col2im(int64_t m, const float* bias, float* out) const {
    const float b = bias ? bias[m] : 0.0f;
    for (int64_t i = 0; i < out_pixels_; ++i) out[i] = b;
    const int64_t OD = g_.out[0], OH = g_.out[1], OW = g_.out[2];
    const int64_t D = g_.in[0], H = g_.in[1], W = g_.in[2];
    int64_t tap = 0;
    for (int64_t kd = 0; kd < g_.kernel[0]; ++kd) {
      for (int64_t kh = 0; kh < g_.kernel[1]; ++kh) {
        for (int64_t kw = 0; kw < g_.kernel[2]; ++kw, ++tap) {
          const float* src = col() + (m * kk_ + tap) * in_pixels_;
          const int64_t off_w = kw * g_.dilation[2] - g_.pad[2];
          for (int64_t id = 0; id < D; ++id) {
            const int64_t od = id * g_.stride[0] - g_.pad[0] + kd * g_.dilation[0];
            if (od < 0 || od >= OD) continue;
            for (int64_t ih = 0; ih < H; ++ih) {
              const int64_t oh = ih * g_.stride[1] - g_.pad[1] + kh * g_.dilation[1];
              if (oh < 0 || oh >= OH) continue;
              float* orow = out + (od * OH + oh) * OW;
              const float* srow = src + (id * H + ih) * W;
              for (int64_t iw = 0; iw < W; ++iw) {
                const int64_t ow = iw * g_.stride[2] + off_w;
                if (ow >= 0 && ow < OW) orow[ow] += srow[iw];
              }
            }
          }
        }
      }
    }
  }

  Geometry3 g_;
  int64_t batch_, channels_, out_channels_;
  const float* x_;
  const float* w_;
  const float* bias_;
  float* y_;
  bool w_constant_;
  int64_t cg_ = 0, mg_ = 0, kk_ = 0, in_pixels_ = 0, out_pixels_ = 0;
  std::vector<float> packed_w_;
  const float* weights_ = nullptr;  // packed_w_, or the file's form in the mapping
  size_t packed_x_floats_ = 0;
  mutable Workspace own_workspace_;

 public:
  Workspace* shared_workspace = nullptr;  // the backend's, when built by one

 private:
  Workspace* workspace() const { return shared_workspace ? shared_workspace : &own_workspace_; }
  float* packed_x() const { return workspace()->data(); }
  float* col() const { return workspace()->data() + packed_x_floats_; }
};

// Shared prepare steps: geometry, and the output shape it implies.
bool conv_geometry(const KernelArgs& args, Geometry3* g, int64_t out_channels,
                   std::string* err, kite::ops::WindowGeometry* geometry = nullptr) {
  const OpNode& op = *args.op;
  kite::ops::WindowGeometry local;
  kite::ops::WindowGeometry& wg = geometry ? *geometry : local;
  std::string why;
  if (!kite::ops::window_geometry(op, &wg, &why)) {
    *err = why;
    return false;
  }
  if (!to_geometry3(wg, g)) {
    prepare_error(err, op, "window geometry has an unexpected rank");
    return false;
  }
  const Shape x = op.inputs[0].shape;
  Shape expected = {x[0], out_channels};
  expected.insert(expected.end(), wg.output.begin(), wg.output.end());
  if (!has_output(args, 0) || output_shape(args, 0) != expected) {
    prepare_error(err, op, "output shape disagrees with the window geometry " +
                               kite::ops::shape_string(expected));
    return false;
  }
  return true;
}

}  // namespace

std::string check_conv(const OpNode& op) { return check_float_conv(op); }

std::unique_ptr<Kernel> prepare_conv(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  Geometry3 g;
  kite::ops::WindowGeometry wg;
  if (!conv_geometry(args, &g, w[0], err, &wg)) return nullptr;
  if (g.group <= 0 || x[1] % g.group != 0 || w[0] % g.group != 0 || w[1] * g.group != x[1]) {
    return prepare_error(err, op, "channels do not match group " + std::to_string(g.group));
  }
  const float* bias = op.has_input(2) ? static_cast<const float*>(args.input_data(2)) : nullptr;
  auto kernel = std::make_unique<ConvKernel>(
      g, x[0], x[1], w[0], static_cast<const float*>(args.input_data(0)),
      static_cast<const float*>(args.input_data(1)), bias,
      static_cast<float*>(args.output_data(0)), args.node->inputs[1]->is_constant != 0,
      args.winograd ? winograd::tile_for(wg, x[1], w[0]) : 0,
      stem::takes(wg, x[1], sgemm::micro_kernel_in_use()),
      depthwise::channels_take(wg, x[1], w[0], sgemm::micro_kernel_in_use()));
  kernel->shared_workspace = args.workspace;
  kernel->threads = args.threads;
  if (!kernel->prepare(args, err)) return nullptr;
  return kernel;
}

std::string check_conv_transpose(const OpNode& op) { return check_float_conv(op); }

std::unique_ptr<Kernel> prepare_conv_transpose(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  const Shape& x = op.inputs[0].shape;
  const Shape& w = op.inputs[1].shape;
  Geometry3 g;
  const int64_t group = op.attr_int("group", 1);
  if (group <= 0) return prepare_error(err, op, "group must be positive");
  if (!conv_geometry(args, &g, w[1] * group, err)) return nullptr;
  if (x[1] % g.group != 0 || w[0] != x[1]) {
    return prepare_error(err, op, "channels do not match group " + std::to_string(g.group));
  }
  const float* bias = op.has_input(2) ? static_cast<const float*>(args.input_data(2)) : nullptr;
  auto kernel = std::make_unique<ConvTransposeKernel>(
      g, x[0], x[1], w[1] * g.group, static_cast<const float*>(args.input_data(0)),
      static_cast<const float*>(args.input_data(1)), bias,
      static_cast<float*>(args.output_data(0)), args.node->inputs[1]->is_constant != 0);
  kernel->shared_workspace = args.workspace;
  if (!kernel->prepare(args, err)) return nullptr;
  return kernel;
}

}  // namespace kite::cpu
