// A small fixed pool of worker threads for CPU kernels. parallel_for splits
// [0, n) into contiguous chunks and blocks until all are done; it never
// allocates, so kernels may call it from their run step.
//
// Each thread owns a contiguous range of a job's chunks (the caller the
// first, worker i the (i+1)-th) and runs it front to back; a thread whose
// range is done takes chunks from the back of the others' ranges. So when
// the threads keep pace, thread i runs the same part of every job of the
// same shape: the part of a tensor it wrote in one layer is the part it
// reads in the next, from its own core's caches. On a host whose two
// vCPUs sat on different core complexes (a line moved between them in
// ~220 ns), chunks claimed from one shared counter, a different split
// every layer, left mobilenet_v2 barely faster on 2 threads than on 1.
//
// Workers and the caller spin for a short while (kSpin) before they sleep on
// a condition variable: a model runs one parallel_for after another with
// little serial work between them, and waking a sleeping thread costs tens
// of microseconds (a futex wake, more under a hypervisor), which on a small
// layer is longer than the layer. A chunk is claimed with one compare-and-
// swap on its owner's (job generation, front, back) word, and a job is
// published as a seqlock (every range closed under an odd generation while
// the job's fields are written), so a thread still busy with an old job
// can never claim a chunk of the next one or a chunk past the old one's end.
// Each range shares its line with the job's fields, and a worker spins on
// its own range; each worker counts the chunks it ran on a line of its own,
// which the caller sums while it waits. So a job crosses between two cores
// in a few line transfers (thread_pool.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace kite::cpu {

class ThreadPool {
 public:
  // threads <= 0: std::thread::hardware_concurrency(). 1: run inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // While set, every job runs on the caller, all its chunks in one call as
  // with one thread (slice 0 for for_each_task), and the workers, finding
  // no job, go to sleep after kSpin. size() is unchanged, so kernels cut
  // their work as for size() threads; run on one thread, each chunk
  // computes what it would have on its own, so the values are the same
  // bits either way (a kernel's chunks never depend on which thread runs
  // them). For runs too small to gain from a second core (RunModeChooser).
  void set_inline(bool on) { inline_ = on; }
  bool is_inline() const { return inline_; }

  // Calls fn(begin, end) over chunks covering [0, n); chunks are at least
  // min_chunk long. Runs inline when n is small or the pool has one thread.
  // Not reentrant: fn must not call parallel_for on the same pool, and one
  // pool serves one caller at a time (one session).
  template <typename F>
  void parallel_for(int64_t n, int64_t min_chunk, F&& fn) {
    if (n <= 0) return;
    // A few chunks per thread balance uneven work.
    const int64_t target_chunks = static_cast<int64_t>(size()) * 4;
    const int64_t chunk = std::max<int64_t>(std::max<int64_t>(1, min_chunk), (n + target_chunks - 1) / target_chunks);
    run_chunks(n, chunk, size(), &fn, [](void* ctx, int64_t, int64_t b, int64_t e) {
      (*static_cast<std::remove_reference_t<F>*>(ctx))(b, e);
    });
  }

  // Calls fn(slice, task) for every task in [0, tasks) on up to `slices`
  // threads (slices <= size()): thread s runs as slice s, so each slice is
  // one thread's at a time (for scratch of its own). Slice s first runs its
  // own contiguous share of the tasks in order, one at a time, then takes
  // tasks from the ends of the others' shares: a thread that starts late or
  // runs slower does fewer (a static split alone of 18 depthwise tasks left
  // the caller waiting on the worker for a fifth of the layer).
  template <typename F>
  void for_each_task(int64_t slices, int64_t tasks, F&& fn) {
    // Chunks of one task (more when there are over kMaxChunks: run_chunks).
    run_chunks(tasks, 1, slices, &fn, [](void* ctx, int64_t slice, int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) (*static_cast<std::remove_reference_t<F>*>(ctx))(slice, t);
    });
  }

  // How long a thread spins before it sleeps.
  static constexpr std::chrono::microseconds kSpin{100};

 private:
  using Trampoline = void (*)(void* ctx, int64_t thread, int64_t begin, int64_t end);
  // A range word: (generation << 32) | (front << 16) | back, so a job has
  // at most kMaxChunks chunks.
  static constexpr int64_t kMaxChunks = 0xffff;
  // One thread's range of the current job's chunks, with a copy of the
  // job's fields, on one cache line: a claimer reads the fields and the
  // range it claims from in one transfer (on a host whose vCPUs were ~200
  // ns apart, the fields on the line of a state word the workers spun on,
  // and one chunk counter every thread added to, cost a parallel_for of 8
  // chunks ~2 us more than the chunks themselves). A worker spins on its
  // own range: the job comes with it.
  struct alignas(64) Range {
    std::atomic<uint64_t> word{0};
    std::atomic<void*> ctx{nullptr};
    std::atomic<Trampoline> fn{nullptr};
    std::atomic<int64_t> n{0};
    std::atomic<int64_t> chunk{0};
    std::atomic<int64_t> participants{0};  // threads from it up sit the job out
  };
  // The chunks a worker has finished in a job, (generation << 32) | count,
  // on a line of its own that only the caller reads.
  struct alignas(64) Done {
    std::atomic<uint64_t> word{0};
  };

  void run_chunks(int64_t n, int64_t chunk, int64_t participants, void* ctx, Trampoline fn);
  void worker_loop(int self);
  // Runs chunks of job `generation` as thread `self`: its own range first,
  // then the others' from their backs, until none is left. Returns how
  // many it ran; a worker also counts them in done_[self].
  int64_t claim_chunks(uint32_t generation, int self);
  void shutdown();  // stops and joins the workers

  std::vector<std::thread> workers_;
  std::unique_ptr<Range[]> ranges_;  // size() of them
  std::unique_ptr<Done[]> done_;     // size() of them; 0, the caller's, unused
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // The last job's generation (even; its ranges were closed under the odd
  // one before it). The caller's alone: the workers spin on their ranges.
  uint32_t generation_ = 0;
  // Workers asleep on work_cv_ (or about to be): a job wakes them only
  // when there are any. A job published just as a worker goes to sleep
  // may not wake it; the caller then runs that worker's chunks (it takes
  // them from the back of the worker's range), and the next job wakes it.
  alignas(64) std::atomic<int> sleepers_{0};
  // The caller asleep on done_cv_: a worker that finishes its chunks
  // wakes it (both sides fence, so one of them sees the other).
  std::atomic<bool> caller_asleep_{false};
  std::atomic<bool> stop_{false};
  bool inline_ = false;  // the caller's alone: set_inline
};

}  // namespace kite::cpu
