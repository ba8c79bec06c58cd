// A small fixed pool of worker threads for CPU kernels. parallel_for splits
// [0, n) into contiguous chunks and blocks until all are done; it never
// allocates, so kernels may call it from their run step.
#pragma once

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

 private:
  using Trampoline = void (*)(void*, int64_t, int64_t);
  void run_chunks(int64_t n, int64_t min_chunk, void* ctx, Trampoline fn);
  void worker_loop(int index);
  // Runs chunks of the current job (caller and workers alike) until none is
  // left unclaimed; called and returns with the lock held.
  void claim_chunks(std::unique_lock<std::mutex>& lock);
  void shutdown();  // stops and joins the workers

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // Current job.
  void* job_ctx_ = nullptr;
  Trampoline job_fn_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  int64_t job_chunks_ = 0;
  int64_t next_chunk_ = 0;
  int64_t chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace kite::cpu
