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
  // One thread's range of the current job's chunks, on its own cache line.
  struct alignas(64) Range {
    std::atomic<uint64_t> word{0};
  };

  void run_chunks(int64_t n, int64_t chunk, int64_t participants, void* ctx, Trampoline fn);
  void worker_loop(int self);
  // Runs chunks of job `generation` as thread `self`: its own range first,
  // then the others' from their backs, until none is left.
  void claim_chunks(uint32_t generation, int self);
  void shutdown();  // stops and joins the workers

  std::vector<std::thread> workers_;
  std::unique_ptr<Range[]> ranges_;  // size() of them
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // (generation << 32) | participants: even generations are open jobs,
  // odd ones are being published; threads from `participants` up sit the
  // job out. The fields below are written by the caller while every range
  // is closed, and read by claimers, who check with the compare-and-swap
  // on a range word that they read the fields of the generation they claim
  // in (atomics: a late reader may race with the next job's writes, then
  // fails its CAS).
  alignas(64) std::atomic<uint64_t> state_{0};
  std::atomic<void*> job_ctx_{nullptr};
  std::atomic<Trampoline> job_fn_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunk_{0};
  std::atomic<int64_t> job_chunks_{0};
  std::atomic<bool> stop_{false};
  bool inline_ = false;  // the caller's alone: set_inline
  // Counted up by every chunk's end, on a line of its own: on the line of
  // the job's fields, each count took the line from under the threads
  // about to read them for their next claim.
  alignas(64) std::atomic<int64_t> chunks_done_{0};
};

}  // namespace kite::cpu
