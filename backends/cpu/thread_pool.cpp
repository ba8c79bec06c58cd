#include "thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kite::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins until done() or kSpin has passed; true if done() became true.
template <typename F>
bool spin_until(F done) {
  const auto deadline = std::chrono::steady_clock::now() + ThreadPool::kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

constexpr uint32_t generation_of(uint64_t state) { return static_cast<uint32_t>(state >> 32); }
constexpr uint32_t chunk_of(uint64_t state) { return static_cast<uint32_t>(state); }
// The chunk index of a closed (odd) generation: past any job's chunks.
constexpr uint64_t kNoChunk = 0xffffffffu;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  workers_.reserve(static_cast<size_t>(threads - 1));
  try {
    for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this] { worker_loop(); });
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
    stop_.store(true);
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
  // A few chunks per thread balance uneven work.
  const int64_t target_chunks = threads * 4;
  const int64_t chunk = std::max(min_chunk, (n + target_chunks - 1) / target_chunks);
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (chunks == 1) {
    fn(ctx, 0, n);
    return;
  }

  // Publish as a seqlock does. First an odd generation (closed: nothing to
  // claim), so that a claimer late from the previous job, which may read
  // the fields written next, fails its compare-and-swap: without it, such
  // a claimer could read this job's larger chunk count, still find the old
  // generation in state_, and claim a chunk past the old job's end with
  // whatever fields it read (a worker ran a finished job's lambda on a
  // dead stack frame that way). Then the fields, then the next, even,
  // generation with chunk 0 (release): open.
  const uint32_t closed = generation_of(state_.load(std::memory_order_relaxed)) + 1;
  state_.store(static_cast<uint64_t>(closed) << 32 | kNoChunk, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  job_ctx_.store(ctx, std::memory_order_relaxed);
  job_fn_.store(fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunk_.store(chunk, std::memory_order_relaxed);
  job_chunks_.store(chunks, std::memory_order_relaxed);
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = closed + 1;
  state_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_release);
  // Sleeping workers check state_ under the mutex before they wait: taking
  // it here orders this publication before their check or their wait.
  { std::lock_guard<std::mutex> lock(mutex_); }
  work_cv_.notify_all();

  // The caller works too, then waits for the chunks that workers hold.
  claim_chunks(generation);
  auto finished = [&] { return chunks_done_.load(std::memory_order_acquire) == chunks; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, finished);
  }
}

void ThreadPool::claim_chunks(uint32_t generation) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(s) != generation) return;
    const int64_t chunks = job_chunks_.load(std::memory_order_relaxed);
    const int64_t c = chunk_of(s);
    if (c >= chunks) return;
    void* const ctx = job_ctx_.load(std::memory_order_relaxed);
    const Trampoline fn = job_fn_.load(std::memory_order_relaxed);
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    const int64_t chunk = job_chunk_.load(std::memory_order_relaxed);
    // Pairs with the publisher's release fence: if a field above came from
    // a later job, its closing store is visible to the CAS, which fails.
    std::atomic_thread_fence(std::memory_order_acquire);
    // Succeeds only if no other thread claimed meanwhile and the job is
    // still `generation`: then the fields read above are that job's.
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const int64_t begin = c * chunk;
    fn(ctx, begin, std::min(n, begin + chunk));
    if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      // The caller may be asleep: it checks chunks_done_ under the mutex.
      { std::lock_guard<std::mutex> lock(mutex_); }
      done_cv_.notify_one();
    }
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    // An even generation other than the last one seen: a job is open (odd
    // ones are being published).
    auto ready = [&] {
      if (stop_.load(std::memory_order_acquire)) return true;
      const uint32_t g = generation_of(state_.load(std::memory_order_acquire));
      return g != seen && g % 2 == 0;
    };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, ready);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_of(state_.load(std::memory_order_acquire));
    if (seen % 2 == 0) claim_chunks(seen);  // odd: the next job is being published
  }
}

}  // namespace kite::cpu
