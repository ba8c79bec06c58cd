#include "emu_exec.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kite_emu {

namespace {

thread_local ThreadState t_state;

constexpr size_t kStackBytes = 128 * 1024;

struct Fiber {
  ucontext_t context;
  Dim3 thread;
  bool done = false;
};

struct BlockRun {
  const KernelEntry* kernel = nullptr;
  const void* params = nullptr;
  bool fibers = false;
  unsigned threads = 0;
  std::vector<Fiber> fiber;
  ucontext_t scheduler;
  size_t current = 0;
  float exchange[1024];
};

thread_local BlockRun* t_block = nullptr;
thread_local std::vector<std::unique_ptr<char[]>> t_stacks;

void fiber_main() {
  BlockRun* b = t_block;
  b->kernel->call(b->params);
  b->fiber[b->current].done = true;
  // Returning resumes uc_link: the scheduler.
}

unsigned linear_thread() {
  const ThreadState& s = t_state;
  return (s.thread.z * s.block_dim.y + s.thread.y) * s.block_dim.x + s.thread.x;
}

// getcontext in a frame of its own: no loop variable lives across it.
__attribute__((noinline)) void make_fiber(ucontext_t* context, char* stack, ucontext_t* link) {
  getcontext(context);
  context->uc_stack.ss_sp = stack;
  context->uc_stack.ss_size = kStackBytes;
  context->uc_link = link;
  makecontext(context, fiber_main, 0);
}

// Runs one block's threads as fibers until all finished.
void run_block_as_fibers(BlockRun& run, Dim3 block) {
  for (unsigned t = 0; t < run.threads; ++t) {
    Fiber& f = run.fiber[t];
    f.done = false;
    f.thread = Dim3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
    make_fiber(&f.context, t_stacks[t].get(), &run.scheduler);
  }
  // Rounds: every live thread runs to its next barrier (or its end).
  for (bool live = true; live;) {
    live = false;
    for (unsigned t = 0; t < run.threads; ++t) {
      Fiber& f = run.fiber[t];
      if (f.done) continue;
      run.current = t;
      t_state.thread = f.thread;
      swapcontext(&run.scheduler, &f.context);
      if (!f.done) live = true;
    }
  }
}

}  // namespace

ThreadState& state() { return t_state; }

void barrier() {
  BlockRun* b = t_block;
  if (!b || !b->fibers) {
    std::fprintf(stderr, "kite CUDA emulator: kernel %s synchronises but kernel_list.h says it does not\n",
                 b && b->kernel ? b->kernel->name : "?");
    std::abort();
  }
  Fiber& f = b->fiber[b->current];
  swapcontext(&f.context, &b->scheduler);
}

float shfl_xor(float v, int lane_mask) {
  BlockRun* b = t_block;
  const unsigned me = linear_thread();
  b->exchange[me] = v;
  barrier();
  const unsigned other = (me & ~31u) | ((me & 31u) ^ static_cast<unsigned>(lane_mask & 31));
  const float r = other < b->threads ? b->exchange[other] : v;
  barrier();
  return r;
}

int atomic_cas(int* address, int compare, int value) {
  const int old = *address;
  if (old == compare) *address = value;
  return old;
}

void launch(const KernelEntry& kernel, Dim3 grid, Dim3 block, const void* params) {
  BlockRun run;
  run.kernel = &kernel;
  run.params = params;
  run.fibers = kernel.sync;
  run.threads = block.x * block.y * block.z;
  if (run.threads > 1024) {
    std::fprintf(stderr, "kite CUDA emulator: %s launched with %u threads per block\n", kernel.name, run.threads);
    std::abort();
  }
  BlockRun* outer = t_block;
  t_block = &run;
  t_state.grid_dim = grid;
  t_state.block_dim = block;
  if (run.fibers) {
    while (t_stacks.size() < run.threads) t_stacks.emplace_back(new char[kStackBytes]);
    run.fiber.resize(run.threads);
  }
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        t_state.block = Dim3{bx, by, bz};
        if (!run.fibers) {
          for (unsigned t = 0; t < run.threads; ++t) {
            t_state.thread = Dim3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            kernel.call(params);
          }
          continue;
        }
        run_block_as_fibers(run, block);
      }
    }
  }
  t_block = outer;
}

}  // namespace kite_emu
