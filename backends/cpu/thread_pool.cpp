#include "thread_pool.h"

#include <algorithm>

namespace kite::cpu {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  workers_.reserve(static_cast<size_t>(threads - 1));
  try {
    for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (...) {
    // No destructor runs for a constructor that throws: stop and join the
    // workers started so far (a joinable std::thread would terminate).
    shutdown();
    throw;
  }
}

void ThreadPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

ThreadPool::~ThreadPool() { shutdown(); }

void ThreadPool::run_chunks(int64_t n, int64_t min_chunk, void* ctx, Trampoline fn) {
  if (n <= 0) return;
  if (min_chunk < 1) min_chunk = 1;
  const int64_t threads = size();
  if (threads == 1 || n <= min_chunk) {
    fn(ctx, 0, n);
    return;
  }
  // A few chunks per thread balance uneven work; chunks are claimed in order
  // under the mutex, which is cheap at this granularity.
  const int64_t target_chunks = threads * 4;
  const int64_t chunk = std::max(min_chunk, (n + target_chunks - 1) / target_chunks);
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (chunks == 1) {
    fn(ctx, 0, n);
    return;
  }

  std::unique_lock<std::mutex> lock(mutex_);
  job_ctx_ = ctx;
  job_fn_ = fn;
  job_n_ = n;
  job_chunk_ = chunk;
  job_chunks_ = chunks;
  next_chunk_ = 0;
  chunks_done_ = 0;
  ++generation_;
  lock.unlock();
  work_cv_.notify_all();

  // The caller works too, then waits for the chunks that workers hold.
  lock.lock();
  claim_chunks(lock);
  done_cv_.wait(lock, [this] { return chunks_done_ == job_chunks_; });
  job_ctx_ = nullptr;
  job_fn_ = nullptr;
  job_chunks_ = 0;
  next_chunk_ = 0;
}

void ThreadPool::claim_chunks(std::unique_lock<std::mutex>& lock) {
  // The job's fields stay fixed until every chunk is done, and this thread
  // holds one of them until it reports back.
  void* const ctx = job_ctx_;
  const Trampoline fn = job_fn_;
  const int64_t n = job_n_, chunk = job_chunk_;
  while (next_chunk_ < job_chunks_) {
    const int64_t c = next_chunk_++;
    lock.unlock();
    const int64_t begin = c * chunk;
    fn(ctx, begin, std::min(n, begin + chunk));
    lock.lock();
    // The caller waits for the last chunk (it may be the one finishing it).
    if (++chunks_done_ == job_chunks_) done_cv_.notify_one();
  }
}

void ThreadPool::worker_loop(int /*index*/) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || next_chunk_ < job_chunks_; });
    if (stop_) return;
    claim_chunks(lock);
  }
}

}  // namespace kite::cpu
