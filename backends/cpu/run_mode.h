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

#include <cstdint>

namespace kite::cpu {

class RunModeChooser {
 public:
  // Spread runs longer than this: spread always, no more trials.
  static constexpr int64_t kMaxSpreadNs = 1000000;
  // Runs go in blocks of kBlock one way: after the first run (cold caches,
  // first touches), a block spread, then one on the caller alone; then the
  // faster way, with a block the other way in every kProbeEvery runs.
  static constexpr int64_t kBlock = 8;
  static constexpr int64_t kProbeEvery = 128;
  // Only runs after this many the same way are counted: a change of way
  // costs the first runs after it (spread after the caller alone: the
  // workers slept and are woken, and a core that idled runs its first
  // millisecond of FMAs slower, docs/CPU.md; the caller alone after spread:
  // half the data is in the other core's cache).
  static constexpr int64_t kSettle = 4;

  // Whether the next run keeps its chunks on the caller.
  bool next_inline() {
    bool way = false;
    if (settled_spread_ || runs_ == 0) {
      way = false;
    } else if (runs_ <= 2 * kBlock) {
      way = runs_ > kBlock;
    } else {
      const bool best = mean_[1] < mean_[0];
      way = runs_ % kProbeEvery < kBlock ? !best : best;
    }
    same_ = way == current_ ? same_ + 1 : 0;
    return current_ = way;
  }

  // That run's time (ns).
  void record(int64_t ns) {
    const bool counted = runs_ > 0 && same_ >= kSettle;
    ++runs_;
    if (!counted || settled_spread_) return;
    double& m = mean_[current_ ? 1 : 0];
    m = m < 0 ? static_cast<double>(ns) : m + kWeight * (static_cast<double>(ns) - m);
    if (!current_ && m > static_cast<double>(kMaxSpreadNs)) settled_spread_ = true;
  }

  bool settled_spread() const { return settled_spread_; }

 private:
  static constexpr double kWeight = 0.25;  // of the newest run in a way's moving mean
  int64_t runs_ = 0;
  int64_t same_ = 0;  // runs the same way before the current one
  bool current_ = false;
  double mean_[2] = {-1.0, -1.0};  // spread, inline; < 0: not yet timed
  bool settled_spread_ = false;
};

}  // namespace kite::cpu
