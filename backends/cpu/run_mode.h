// Whether a run of the CPU backend's kernels spreads their chunks over the
// thread pool or keeps them all on the calling thread
// (ThreadPool::set_inline). A second core pays off only when a run's work
// outweighs what handing chunks over and reading the other core's data
// cost, and that cost moves with where the hypervisor puts the vCPUs: on a
// 2-vCPU Zen 2 host whose vCPUs sat ~220 ns apart (kite-core-latency),
// vit_small ran in 0.20 ms on 2 threads and 0.12 on 1; minutes later, on
// one core complex, 2 threads were the faster. So the backend times its
// runs both ways and keeps the faster, trying the other way again now and
// then. Only runs of small models take part: from kMaxSpreadNs of spread
// run up, the caller alone is never tried (a probe would cost too much).
// The logic only: the backend times the runs (begin_run / end_run).
#pragma once

#include <algorithm>
#include <cstdint>

namespace kite::cpu {

class RunModeChooser {
 public:
  // Spread runs longer than this (kCount counted in a row): spread always,
  // no more trials.
  static constexpr int64_t kMaxSpreadNs = 1000000;
  // A process's first spread runs are slow, and not for a few runs only: a
  // 3x3 convolution's 2-thread runs (48 -> 192 channels on 13x13, Zen 2)
  // took 0.30-0.37 ms for the first 16, 0.14-0.21 for the next 32 and 0.12
  // from ~12 ms on, while the caller alone took 0.22 throughout (the other
  // core, idle until then, comes up to speed). Trials in that time chose
  // the caller alone, and the probes were too few to undo it for hundreds
  // of runs. So runs go spread, uncounted, for the first kWarmNs, and the
  // first probes come soon (kFirstProbeNs) to undo an early choice. (A
  // warm-up as long as the slow start, 20 ms, would be most of a short
  // benchmark of a small model: ~190 runs of vit_small.)
  static constexpr int64_t kWarmNs = 5000000;
  // Then a block on the caller alone and a block spread, and the faster
  // way from then on, with a block the other way after at least
  // kProbeEvery runs and a time that starts at kFirstProbeNs and doubles
  // up to kProbeEveryNs: a process's first runs can stay slow for longer
  // than kWarmNs (that convolution, 64 -> 256 channels: 0.35-0.65 ms spread
  // for its first 42 runs, 0.23 later), and the first probes undo a choice
  // made then. A block lasts until kCount of its runs have counted.
  static constexpr int64_t kCount = 4;
  static constexpr int64_t kProbeEvery = 32;
  static constexpr int64_t kFirstProbeNs = 10000000;
  static constexpr int64_t kProbeEveryNs = 100000000;
  // Only runs after kSettle runs and kSettleNs of the same way count: a
  // change of way costs the runs after it. The caller alone after spread:
  // half the data is in the other core's cache (kSettleInlineNs). Spread
  // after the caller alone, longer: the workers slept and are woken, and a
  // core idle for even 2 ms comes back slowly (the 48 -> 192 convolution's
  // spread runs after 9 on the caller took 0.21-0.31 ms for ~2 ms, then
  // 0.12 again).
  static constexpr int64_t kSettle = 4;
  static constexpr int64_t kSettleInlineNs = 1000000;
  static constexpr int64_t kSettleSpreadNs = 4000000;
  // A probe takes over only when kMargin faster than the way it probes
  // against (noise does not flip the way back and forth).
  static constexpr double kMargin = 0.05;

  // Whether the next run keeps its chunks on the caller.
  bool next_inline() const { return inline_; }

  // The time (ns) of the run that next_inline() chose.
  void record(int64_t ns) {
    if (settled_spread_) return;
    const bool counted =
        runs_in_way_ >= kSettle && ns_in_way_ >= (inline_ ? kSettleInlineNs : kSettleSpreadNs);
    ++runs_in_way_;
    ns_in_way_ += ns;
    if (counted && !inline_) {
      // kCount counted spread runs in a row over kMaxSpreadNs (one slow
      // run, an interrupt, must not settle it).
      long_spread_runs_ = ns > kMaxSpreadNs ? long_spread_runs_ + 1 : 0;
      if (long_spread_runs_ >= kCount) {
        settled_spread_ = true;
        return;
      }
    }
    switch (phase_) {
      case Phase::kWarm:
        // (and kCount counted runs, so that long ones settle spread first)
        if (ns_in_way_ >= kWarmNs && runs_in_way_ >= kSettle + kCount) {
          begin_block(Phase::kTrialInline, true);
        }
        return;
      case Phase::kTrialInline:
      case Phase::kTrialSpread:
      case Phase::kProbe:
        if (!counted) return;
        block_sum_ += static_cast<double>(ns);
        if (++block_count_ < kCount) return;
        mean_[way()] = block_sum_ / static_cast<double>(block_count_);
        if (phase_ == Phase::kTrialInline) {
          begin_block(Phase::kTrialSpread, false);
        } else if (phase_ == Phase::kTrialSpread) {
          settle_on(mean_[1] < mean_[0]);
        } else {
          // The probed way takes over only when clearly faster.
          const bool probed = inline_;
          settle_on(mean_[probed] < mean_[!probed] * (1.0 - kMargin) ? probed : !probed);
        }
        return;
      case Phase::kSteady:
        if (counted) {
          double& m = mean_[way()];
          m = m + kWeight * (static_cast<double>(ns) - m);
        }
        steady_ns_ += ns;
        if (++steady_runs_ >= kProbeEvery && steady_ns_ >= probe_after_ns_) {
          probe_after_ns_ = std::min(2 * probe_after_ns_, kProbeEveryNs);
          begin_block(Phase::kProbe, !inline_);
        }
        return;
    }
  }

  bool settled_spread() const { return settled_spread_; }

 private:
  enum class Phase { kWarm, kTrialInline, kTrialSpread, kProbe, kSteady };
  static constexpr double kWeight = 0.25;  // of the newest run in the way's moving mean

  int way() const { return inline_ ? 1 : 0; }
  void switch_to(bool way) {
    if (way != inline_) {
      inline_ = way;
      runs_in_way_ = 0;
      ns_in_way_ = 0;
    }
  }
  void begin_block(Phase phase, bool way) {
    phase_ = phase;
    block_sum_ = 0.0;
    block_count_ = 0;
    switch_to(way);
  }
  void settle_on(bool way) {
    phase_ = Phase::kSteady;
    steady_runs_ = 0;
    steady_ns_ = 0;
    switch_to(way);
  }

  Phase phase_ = Phase::kWarm;
  bool inline_ = false;
  int64_t runs_in_way_ = 0;  // runs since the last change of way
  int64_t ns_in_way_ = 0;    // and their time
  double block_sum_ = 0.0;   // the current block's counted runs
  int64_t block_count_ = 0;
  int64_t steady_runs_ = 0;  // and their time, since the last block
  int64_t steady_ns_ = 0;
  int64_t probe_after_ns_ = kFirstProbeNs;  // of steady runs before the next probe
  double mean_[2] = {0.0, 0.0};  // spread, inline: the last block's mean, then moving
  int64_t long_spread_runs_ = 0;
  bool settled_spread_ = false;
};

}  // namespace kite::cpu
