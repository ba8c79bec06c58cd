// The arena planner driven by hand-written lifetimes, and its checker.
#include <gtest/gtest.h>

#include "memory/planner.h"

namespace {

using kite::memory::ArenaPlanner;
using kite::memory::Placement;

TEST(Planner, ChainReusesMemory) {
  // a -> b -> c -> d: each buffer lives two steps; only neighbours overlap.
  ArenaPlanner p(256);
  p.add_buffer(1024, 0, 1);
  p.add_buffer(1024, 1, 2);
  p.add_buffer(1024, 2, 3);
  p.add_buffer(1024, 3, 4);
  const Placement best = p.best();
  EXPECT_EQ(p.check(best), "");
  EXPECT_EQ(p.lower_bound(), 2048u);
  EXPECT_EQ(best.arena_size, 2048u);
  EXPECT_EQ(p.naive_size(), 4096u);
  EXPECT_EQ(p.naive().arena_size, 4096u);
}

TEST(Planner, BestFitFillsTheSmallestGap) {
  ArenaPlanner p(1);
  // Long-lived 100 and 300 with a 50-byte hole between two short ones.
  p.add_buffer(100, 0, 10);
  p.add_buffer(50, 0, 1);
  p.add_buffer(300, 0, 10);
  p.add_buffer(40, 5, 6);  // fits where the 50 was
  const Placement g = p.greedy_by_size();
  EXPECT_EQ(p.check(g), "");
  EXPECT_EQ(g.arena_size, 450u);
}

TEST(Planner, AlignmentIsRespected) {
  ArenaPlanner p(256);
  p.add_buffer(10, 0, 0);
  p.add_buffer(10, 0, 0);
  const Placement g = p.best();
  EXPECT_EQ(p.check(g), "");
  for (uint64_t o : g.offsets) EXPECT_EQ(o % 256, 0u);
}

TEST(Planner, CheckerCatchesPlantedOverlap) {
  ArenaPlanner p(1);
  p.add_buffer(100, 0, 2);
  p.add_buffer(100, 1, 3);
  Placement bad;
  bad.offsets = {0, 50};
  bad.arena_size = 150;
  EXPECT_NE(p.check(bad).find("share bytes"), std::string::npos);
  bad.offsets = {0, 100};
  bad.arena_size = 150;
  EXPECT_NE(p.check(bad).find("leaves the arena"), std::string::npos);
  bad.arena_size = 200;
  EXPECT_EQ(p.check(bad), "");
}

}  // namespace
