// Failures of the CUDA driver, injected by the emulated plugin's driver
// (KITE_CUDAEMU_FAIL=SYMBOL[:sticky], KITE_CUDAEMU_NO_DEVICE): each is a
// clear error naming the backend and the call, never a crash. Each test runs
// in its own process (ctest lists them one by one): a sticky error or a
// missing device lasts for the process, as on a GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "cuda_graphs.h"

namespace kite::cudatest {
namespace {

Graph cnn() {
  Graph g;
  const int x = g.input({1, 3, 10, 10});
  const int w = g.weight({6, 3, 3, 3}), b = g.weight({6});
  g.begin_body();
  const int c = g.op("Relu", {g.op("Conv", {x, w, b}, {aints("pads", {1, 1, 1, 1})})});
  g.fuse("FusedConv", "Conv+Relu", {x, w, b}, {aints("pads", {1, 1, 1, 1}), as("activation", "Relu")}, {c});
  g.op("GlobalAveragePool", {c});
  return g;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(CudaFailure, OutOfDeviceMemoryNamesTheCall) {
  setenv("KITE_CUDAEMU_FAIL", "cuMemAlloc_v2", 1);
  Graph g = cnn();
  const Result r = run(g, "cudaemu");
  EXPECT_EQ(r.status, KITE_ERROR_OUT_OF_MEMORY);
  expect_contains(r.error, "backend 'cudaemu'");
  expect_contains(r.error, "cuMemAlloc_v2 of the arena");
  expect_contains(r.error, "CUDA_ERROR_OUT_OF_MEMORY");
}

TEST(CudaFailure, LaunchFailureNamesTheKernelAndTheNode) {
  setenv("KITE_CUDAEMU_FAIL", "cuLaunchKernel", 1);
  Graph g = cnn();
  const Result r = run(g, "cudaemu", {{"graphs", "0"}});
  EXPECT_EQ(r.status, KITE_ERROR_BACKEND);
  expect_contains(r.error, "cuLaunchKernel(kite_conv");
  expect_contains(r.error, "FusedConv");
  expect_contains(r.error, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
}

TEST(CudaFailure, StickyErrorLosesTheDeviceForGood) {
  // The first cuStreamSynchronize (at bind) passes; the run's fails with an
  // illegal address, and every later call sees it.
  setenv("KITE_CUDAEMU_FAIL", "cuStreamSynchronize:sticky", 1);
  setenv("KITE_CUDAEMU_FAIL_AFTER", "1", 1);
  Graph g = cnn();
  const Result r = run(g, "cudaemu", {}, true, 3);
  EXPECT_EQ(r.status, KITE_ERROR_DEVICE_LOST);
  expect_contains(r.error, "CUDA_ERROR_ILLEGAL_ADDRESS");
  expect_contains(r.error, "sticky error");
  Graph again = cnn();
  const Result later = run(again, "cudaemu");
  EXPECT_NE(later.status, KITE_OK);
}

TEST(CudaFailure, CaptureFailureRunsTheKernelsOneByOne) {
  setenv("KITE_CUDAEMU_FAIL", "cuStreamEndCapture", 1);
  Graph g = cnn();
  const Result ref = run(g, "cpu");
  const Result r = run(g, "cudaemu");
  ASSERT_EQ(r.status, KITE_OK) << r.error;
  std::string where;
  EXPECT_LE(normalized_error(ref, r, &where), 1e-4) << where;
}

TEST(CudaFailure, NoDeviceFallsBackWithTheReasonAndStrictFails) {
  setenv("KITE_CUDAEMU_NO_DEVICE", "1", 1);
  Graph g = cnn();
  const Result fallback = run(g, "cudaemu,cpu", {}, false);
  ASSERT_EQ(fallback.status, KITE_OK) << fallback.error;
  for (const std::string& b : fallback.placement) EXPECT_EQ(b, "cpu");
  const Result strict = run(g, "cudaemu,cpu", {}, true);
  EXPECT_NE(strict.status, KITE_OK);
  expect_contains(strict.error, "cuInit found no CUDA device");
}

}  // namespace
}  // namespace kite::cudatest
