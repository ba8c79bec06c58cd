// kite-core-latency: how far apart the first two CPUs this process may run
// on are, as the one-way time to move a cache line between them (a flag
// bounced between two pinned threads). On the 2-vCPU cloud hosts Kite is
// measured on, the hypervisor sometimes places the vCPUs in one core complex
// (~30 ns) and sometimes in different ones (~200+ ns), and 2-thread timings
// differ by up to 1.5x between the two: benchmarks/speed.py and ab_libs.py
// print this before and after their runs so that 2-thread figures say which
// placement they were measured on (docs/CPU.md, "Where the threads run").
//
// Prints one line: "core-to-core: <ns> ns (cpus A and B)", or a reason.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

alignas(64) std::atomic<int> g_flag{0};

// One-way nanoseconds over `rounds` round trips between cpu a (this thread)
// and cpu b.
double bounce(int a, int b, int rounds) {
  g_flag.store(-1);
  std::atomic<bool> pinned{true};
  std::thread other([&] {
    if (!pin(b)) pinned = false;
    g_flag.store(0, std::memory_order_release);  // ready
    for (int i = 0; i < rounds; ++i) {
      while (g_flag.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      g_flag.store(2 * i + 2, std::memory_order_release);
    }
  });
  if (!pin(a)) pinned = false;
  while (g_flag.load(std::memory_order_acquire) != 0) {
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    g_flag.store(2 * i + 1, std::memory_order_release);
    while (g_flag.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  other.join();
  return pinned ? ns / rounds / 2 : -1;
}

}  // namespace

int main() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    std::printf("core-to-core: unknown (sched_getaffinity failed)\n");
    return 0;
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) {
    std::printf("core-to-core: unknown (one CPU available)\n");
    return 0;
  }
  // The median of 5 runs of 20000 round trips (~20-50 ms in all).
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) runs.push_back(bounce(cpus[0], cpus[1], 20000));
  std::sort(runs.begin(), runs.end());
  if (runs[0] < 0) {
    std::printf("core-to-core: unknown (could not pin threads)\n");
    return 0;
  }
  std::printf("core-to-core: %.0f ns (cpus %d and %d)\n", runs[2], cpus[0], cpus[1]);
  return 0;
}
