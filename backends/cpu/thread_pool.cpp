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

constexpr uint32_t generation_of(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
constexpr int64_t front_of(uint64_t range) { return static_cast<int64_t>((range >> 16) & 0xffffu); }
constexpr int64_t back_of(uint64_t range) { return static_cast<int64_t>(range & 0xffffu); }
constexpr uint64_t range_word(uint32_t generation, int64_t front, int64_t back) {
  return static_cast<uint64_t>(generation) << 32 | static_cast<uint64_t>(front) << 16 | static_cast<uint64_t>(back);
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  ranges_.reset(new Range[static_cast<size_t>(threads)]);
  done_.reset(new Done[static_cast<size_t>(threads)]);
  workers_.reserve(static_cast<size_t>(threads - 1));
  try {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
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

void ThreadPool::run_chunks(int64_t n, int64_t chunk, int64_t participants, void* ctx, Trampoline fn) {
  if (n <= 0) return;
  chunk = std::max<int64_t>({chunk, 1, (n + kMaxChunks - 1) / kMaxChunks});
  const int64_t threads = size();
  participants = std::min(participants, threads);
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (participants <= 1 || chunks == 1 || inline_) {
    fn(ctx, 0, 0, n);
    return;
  }
  participants = std::min(participants, chunks);

  // Publish as a seqlock does, range by range: first close it under an odd
  // generation, so that a claimer late from the previous job, which may
  // read the fields written next, fails its compare-and-swap (without it,
  // such a claimer could read this job's larger chunk count, still find the
  // old generation in the range, and claim a chunk past the old job's end
  // with whatever fields it read: a worker ran a finished job's lambda on a
  // dead stack frame that way). Then the fields, then the range under the
  // next, even, generation (a release store: a claimer that reads an open
  // range reads this job's fields), which wakes its worker.
  const uint32_t closed = generation_ + 1;
  const uint32_t generation = closed + 1;
  generation_ = generation;
  for (int64_t i = 0; i < threads; ++i) {
    Range& range = ranges_[i];
    range.word.store(range_word(closed, 0, 0), std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    range.ctx.store(ctx, std::memory_order_relaxed);
    range.fn.store(fn, std::memory_order_relaxed);
    range.n.store(n, std::memory_order_relaxed);
    range.chunk.store(chunk, std::memory_order_relaxed);
    range.participants.store(participants, std::memory_order_relaxed);
    // Thread i's share: chunks [chunks * i / p, chunks * (i + 1) / p). A
    // release store (not a fence and a relaxed one): ThreadSanitizer does
    // not model fences, and this store is what orders the caller's writes
    // before the job's chunks.
    const int64_t front = i < participants ? chunks * i / participants : 0;
    const int64_t back = i < participants ? chunks * (i + 1) / participants : 0;
    range.word.store(range_word(generation, front, back), std::memory_order_release);
  }
  if (sleepers_.load(std::memory_order_relaxed) > 0) {
    // Taking the mutex orders this publication before a sleeping worker's
    // check of its range or its wait.
    { std::lock_guard<std::mutex> lock(mutex_); }
    work_cv_.notify_all();
  }

  // The caller works too, then waits for the chunks that workers hold.
  const int64_t own = claim_chunks(generation, 0);
  auto finished = [&] {
    int64_t sum = own;
    for (int64_t i = 1; i < threads; ++i) {
      const uint64_t w = done_[i].word.load(std::memory_order_acquire);
      if (generation_of(w) == generation) sum += static_cast<int64_t>(w & 0xffffffffu);
    }
    return sum == chunks;
  };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_asleep_.store(true, std::memory_order_relaxed);
    // Pairs with the workers' fence after their last count: either this
    // check sees it, or the worker sees caller_asleep_ and notifies.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    done_cv_.wait(lock, finished);
    caller_asleep_.store(false, std::memory_order_relaxed);
  }
}

int64_t ThreadPool::claim_chunks(uint32_t generation, int self) {
  const int threads = size();
  int64_t ran = 0;
  // Its own range first (from the front), then the others' (from the back,
  // which their owners reach last).
  for (int k = 0; k < threads; ++k) {
    const bool own = k == 0;
    Range& range = ranges_[(self + k) % threads];
    uint64_t r = range.word.load(std::memory_order_acquire);
    for (;;) {
      if (generation_of(r) != generation) break;  // the job is over
      const int64_t front = front_of(r), back = back_of(r);
      if (front >= back) break;
      void* const ctx = range.ctx.load(std::memory_order_relaxed);
      const Trampoline fn = range.fn.load(std::memory_order_relaxed);
      const int64_t n = range.n.load(std::memory_order_relaxed);
      const int64_t chunk = range.chunk.load(std::memory_order_relaxed);
      // Pairs with the publisher's release fence: if a field above came from
      // a later job, the closing store is visible to the CAS, which fails.
      std::atomic_thread_fence(std::memory_order_acquire);
      // Succeeds only if no other thread claimed from this range meanwhile
      // and the job is still `generation`: then the fields read above are
      // that job's.
      const uint64_t next = own ? r + (uint64_t{1} << 16) : r - 1;
      if (!range.word.compare_exchange_weak(r, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        continue;
      }
      const int64_t c = own ? front : back - 1;
      const int64_t begin = c * chunk;
      fn(ctx, self, begin, std::min(n, begin + chunk));
      ++ran;
      if (self > 0) {
        done_[self].word.store(static_cast<uint64_t>(generation) << 32 | static_cast<uint64_t>(ran),
                               std::memory_order_release);
      }
      r = range.word.load(std::memory_order_acquire);
    }
  }
  if (self > 0 && ran > 0) {
    // The caller may be asleep: it checks the counts under the mutex after
    // setting caller_asleep_ (and a fence).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (caller_asleep_.load(std::memory_order_relaxed)) {
      { std::lock_guard<std::mutex> lock(mutex_); }
      done_cv_.notify_one();
    }
  }
  return ran;
}

void ThreadPool::worker_loop(int self) {
  Range& mine = ranges_[self];
  uint32_t seen = 0;
  for (;;) {
    // An even generation in its own range other than the last one seen: a
    // job is open (odd ones are being published). The range's line holds
    // the job's fields too, so this spin brings the whole job in one
    // transfer.
    auto ready = [&] {
      if (stop_.load(std::memory_order_acquire)) return true;
      const uint32_t g = generation_of(mine.word.load(std::memory_order_acquire));
      return g != seen && g % 2 == 0;
    };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      work_cv_.wait(lock, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    const uint32_t g = generation_of(mine.word.load(std::memory_order_acquire));
    if (g == seen || g % 2 != 0) continue;  // closed again for the next job
    seen = g;
    // Threads past the job's participants sit it out (their slice index
    // would be out of range). A value from a later job fails the claims.
    if (self < mine.participants.load(std::memory_order_relaxed)) claim_chunks(seen, self);
  }
}

}  // namespace kite::cpu
