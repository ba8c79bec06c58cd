// A small fixed pool of worker threads for CPU kernels. parallel_for splits
// [0, n) into contiguous chunks and blocks until all are done; it never
// allocates, so kernels may call it from their run step.
//
// Workers and the caller spin for a short while (kSpin) before they sleep on
// a condition variable: a model runs one parallel_for after another with
// little serial work between them, and waking a sleeping thread costs tens
// of microseconds (a futex wake, more under a hypervisor), which on a small
// layer is longer than the layer. Chunks are claimed with one atomic
// compare-and-swap on (job generation, next chunk), and a job is published
// as a seqlock (an odd generation while its fields are written), so a worker
// still busy with an old job can never claim a chunk of the next one or a
// chunk past the old one's end.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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

  // Calls fn(begin, end) over chunks covering [0, n); chunks are at least
  // min_chunk long. Runs inline when n is small or the pool has one thread.
  // Not reentrant: fn must not call parallel_for on the same pool, and one
  // pool serves one caller at a time (one session).
  template <typename F>
  void parallel_for(int64_t n, int64_t min_chunk, F&& fn) {
    run_chunks(n, min_chunk, &fn, [](void* ctx, int64_t b, int64_t e) {
      (*static_cast<std::remove_reference_t<F>*>(ctx))(b, e);
    });
  }

  // Calls fn(slice, task) for every task in [0, tasks), on up to `slices`
  // threads at once (slices <= size()), each running with its own slice
  // index in [0, slices) (for scratch of its own). Tasks are claimed one at
  // a time from a shared counter, not split in fixed ranges: a thread that
  // starts late or runs slower takes fewer (a static split of 18 depthwise
  // tasks left the caller waiting on the worker for a fifth of the layer).
  template <typename F>
  void for_each_task(int64_t slices, int64_t tasks, F&& fn) {
    std::atomic<int64_t> next{0};
    parallel_for(slices, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        for (int64_t t = next.fetch_add(1, std::memory_order_relaxed); t < tasks;
             t = next.fetch_add(1, std::memory_order_relaxed)) {
          fn(s, t);
        }
      }
    });
  }

  // How long a thread spins before it sleeps.
  static constexpr std::chrono::microseconds kSpin{100};

 private:
  using Trampoline = void (*)(void*, int64_t, int64_t);
  void run_chunks(int64_t n, int64_t min_chunk, void* ctx, Trampoline fn);
  void worker_loop();
  // Claims and runs chunks of job `generation` until none is left.
  void claim_chunks(uint32_t generation);
  void shutdown();  // stops and joins the workers

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // The current job: (generation << 32) | next unclaimed chunk. The fields
  // below are written by the caller before it publishes a generation, and
  // read by claimers, who check with the compare-and-swap on state_ that
  // they read the fields of the generation they claim in (atomics: a late
  // reader may race with the next job's writes, then fails its CAS).
  std::atomic<uint64_t> state_{0};
  std::atomic<void*> job_ctx_{nullptr};
  std::atomic<Trampoline> job_fn_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunk_{0};
  std::atomic<int64_t> job_chunks_{0};
  std::atomic<int64_t> chunks_done_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace kite::cpu
