// Threads (issue 7), run by every preset and by the `tsan` preset
// (ThreadSanitizer; its test preset selects names matching Thread|Sessions):
//   - several sessions of one model on several threads, each with a CPU
//     backend of 2 worker threads, give the single-threaded results
//   - the model handle destroyed while its sessions run elsewhere
//   - sessions created and destroyed concurrently
//   - one session misused from two threads: overlapping calls are detected
//     and refused (kite.h, "Thread safety"), nothing races
//   - kite_last_error() is per thread
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "kite/kite.h"
#include "test_models.h"

namespace {

std::string last() { return kite_last_error(); }

std::vector<float> input_for(int seed) {
  std::vector<float> x(100);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((static_cast<int>(i) * 13 + seed * 7) % 23) / 11.0f - 1.0f;
  }
  return x;
}

kite_session* make_session(kite_model* model, int threads) {
  kite_session_options* o = nullptr;
  if (kite_session_options_create(&o) != KITE_OK) return nullptr;
  kite_session_options_set_threads(o, threads);
  kite_session* s = nullptr;
  if (kite_session_create(model, o, &s) != KITE_OK) s = nullptr;
  kite_session_options_destroy(o);
  return s;
}

bool run_once(kite_session* s, const std::vector<float>& x, std::vector<float>* y) {
  y->assign(100, 0.0f);
  return kite_session_set_input(s, 0, x.data(), x.size() * sizeof(float)) == KITE_OK &&
         kite_session_run(s) == KITE_OK &&
         kite_session_get_output(s, 0, y->data(), y->size() * sizeof(float)) == KITE_OK;
}

class Threading : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = kite::test::serialize_or_die(kite::test::conv_relu_add_model(false));
    ASSERT_EQ(kite_model_load_memory(bytes_.data(), bytes_.size(), &model_), KITE_OK) << last();
    // Reference outputs from one single-threaded session.
    kite_session* s = make_session(model_, 1);
    ASSERT_NE(s, nullptr) << last();
    for (int seed = 0; seed < kSeeds; ++seed) {
      std::vector<float> y;
      ASSERT_TRUE(run_once(s, input_for(seed), &y)) << last();
      expected_.push_back(y);
    }
    kite_session_destroy(s);
  }
  void TearDown() override { kite_model_destroy(model_); }

  bool matches(int seed, const std::vector<float>& y) const {
    const std::vector<float>& e = expected_[static_cast<size_t>(seed)];
    for (size_t i = 0; i < y.size(); ++i) {
      if (std::fabs(y[i] - e[i]) > 1e-5f * (1.0f + std::fabs(e[i]))) return false;
    }
    return true;
  }

  static constexpr int kSeeds = 8;
  std::vector<uint8_t> bytes_;
  kite_model* model_ = nullptr;
  std::vector<std::vector<float>> expected_;
};

TEST_F(Threading, SessionsOfOneModelOnSeveralThreadsWithTwoWorkersEach) {
  constexpr int kThreads = 4;
  std::vector<int> good(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      kite_session* s = make_session(model_, 2);
      if (s == nullptr) return;
      bool ok = true;
      std::vector<float> y;
      for (int iter = 0; iter < 40 && ok; ++iter) {
        const int seed = (t + iter) % kSeeds;
        ok = run_once(s, input_for(seed), &y) && matches(seed, y);
      }
      kite_session_destroy(s);
      good[static_cast<size_t>(t)] = ok ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(good[static_cast<size_t>(t)], 1) << "thread " << t;
}

TEST_F(Threading, ModelHandleDestroyedWhileSessionsRunOnOtherThreads) {
  constexpr int kThreads = 3;
  std::vector<kite_session*> sessions;
  for (int t = 0; t < kThreads; ++t) {
    sessions.push_back(make_session(model_, 2));
    ASSERT_NE(sessions.back(), nullptr) << last();
  }
  std::atomic<int> started{0};
  std::vector<int> good(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      started.fetch_add(1);
      bool ok = true;
      std::vector<float> y;
      for (int iter = 0; iter < 30 && ok; ++iter) {
        const int seed = (iter * 3 + t) % kSeeds;
        ok = run_once(sessions[static_cast<size_t>(t)], input_for(seed), &y) && matches(seed, y);
      }
      good[static_cast<size_t>(t)] = ok ? 1 : 0;
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  kite_model_destroy(model_);  // the sessions keep the model alive
  model_ = nullptr;
  for (auto& th : threads) th.join();
  for (kite_session* s : sessions) kite_session_destroy(s);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(good[static_cast<size_t>(t)], 1) << "thread " << t;
}

TEST_F(Threading, SessionsCreatedAndDestroyedConcurrently) {
  constexpr int kThreads = 4;
  std::vector<int> good(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      bool ok = true;
      for (int iter = 0; iter < 10 && ok; ++iter) {
        kite_session* s = make_session(model_, iter % 3);
        std::vector<float> y;
        ok = s != nullptr && run_once(s, input_for(t), &y) && matches(t, y);
        kite_session_destroy(s);
      }
      good[static_cast<size_t>(t)] = ok ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(good[static_cast<size_t>(t)], 1) << "thread " << t;
}

TEST_F(Threading, OneSessionFromTwoThreadsIsDetectedAndRefused) {
  // Misuse that kite.h forbids: two threads call into one session at once.
  // Defined behaviour: a run/set_input/get_output overlapping another fails
  // with KITE_ERROR_INVALID_ARGUMENT ("in use by another call") and touches
  // nothing; every call that is not refused works; nothing races (tsan).
  kite_session* s = make_session(model_, 2);
  ASSERT_NE(s, nullptr) << last();
  std::atomic<int> refused{0}, other_errors{0}, go{0};
  std::atomic<bool> stop{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto hammer = [&](int who) {
    go.fetch_add(1);
    while (go.load() < 2) std::this_thread::yield();
    const std::vector<float> x = input_for(0);
    std::vector<float> y(100);
    for (int iter = 0; !stop.load(); ++iter) {
      kite_status st;
      switch ((iter + who) % 3) {
        case 0: st = kite_session_set_input(s, 0, x.data(), x.size() * sizeof(float)); break;
        case 1: st = kite_session_run(s); break;
        default: st = kite_session_get_output(s, 0, y.data(), y.size() * sizeof(float)); break;
      }
      if (st == KITE_ERROR_INVALID_ARGUMENT && last().find("in use by another call") != std::string::npos) {
        refused.fetch_add(1);
      } else if (st != KITE_OK) {
        other_errors.fetch_add(1);
      }
      if (iter >= 2000 && refused.load() > 0) stop.store(true);
      if (std::chrono::steady_clock::now() > deadline) stop.store(true);
    }
  };
  std::thread a(hammer, 0), b(hammer, 1);
  a.join();
  b.join();
  EXPECT_GT(refused.load(), 0) << "no overlapping call was seen in 20 s";
  EXPECT_EQ(other_errors.load(), 0) << last();
  // The session is intact: a normal run gives the reference result.
  std::vector<float> y;
  ASSERT_TRUE(run_once(s, input_for(5), &y)) << last();
  EXPECT_TRUE(matches(5, y));
  kite_session_destroy(s);
}

TEST(ThreadingErrors, LastErrorIsPerThread) {
  kite_model* m = nullptr;
  ASSERT_NE(kite_model_load_memory("nope", 4, &m), KITE_OK);
  const std::string mine = last();
  std::string theirs = "unset";
  std::thread t([&]() {
    theirs = kite_last_error();
    kite_session_run(nullptr);
  });
  t.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(last(), mine);
}

}  // namespace
