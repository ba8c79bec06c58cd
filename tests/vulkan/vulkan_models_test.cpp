// The model set on Vulkan through the ABI v2 (the harness), before and
// independently of the runtime's v2 scheduler: each .kite file in
// KITE_VULKAN_MODELS_DIR (converted at -O2) runs on the CPU backend and on
// the Vulkan plugin, the whole main graph as one recorded segment, with the
// memory plan's own arena offsets (in-place ops, views and Concat slices as
// the converter planned them), in both memory modes; outputs within
// 1e-3 x max|ref| of the CPU (issue 13's bound for whole models: float32
// sums in another order through ~50-150 layers).
// Every node must be accepted by the Vulkan backend (the model set's CNNs
// and transformers alike: the placement the runtime will show).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <map>
#include <numeric>

#include "harness.h"

namespace kite::vktest {
namespace {

std::vector<std::string> model_files() {
  std::vector<std::string> files;
  const char* dir = std::getenv("KITE_VULKAN_MODELS_DIR");
  if (!dir) return files;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".kite") == 0) files.push_back(std::string(dir) + "/" + name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(VulkanModels, ModelSetMatchesCpu) {
  const std::vector<std::string> files = model_files();
  if (files.empty()) GTEST_SKIP() << "no .kite files in KITE_VULKAN_MODELS_DIR";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    Graph g;
    std::string err;
    ASSERT_TRUE(load_kite_graph(path, &g, &err)) << err;
    Values ref;
    ASSERT_TRUE(run_cpu(g, &ref, &err)) << err;
    for (bool unified : {true, false}) {
      VulkanOptions o;
      o.unified = unified;
      o.segment = true;
      o.runs = std::getenv("KITE_VULKAN_MODEL_RUNS") ? std::atoi(std::getenv("KITE_VULKAN_MODEL_RUNS")) : 2;
      Values got;
      RunReport report;
      const bool ok = run_vulkan(g, o, &got, &err, nullptr, &report);
      for (const std::string& d : report.declined) ADD_FAILURE() << "declined: " << d;
      ASSERT_TRUE(ok) << err;
      std::string where;
      const double e = normalized_error(g, ref, got, &where);
      std::vector<double> runs = report.run_ms;
      std::sort(runs.begin(), runs.end());
      std::vector<double> cpu = report.run_cpu_ms;
      std::sort(cpu.begin(), cpu.end());
      std::printf("%-28s %s: %zu nodes on Vulkan, error %.2e of max|ref|, prepare %.0f ms, run %.1f ms "
                  "(CPU time %.1f ms; best of %zu)\n",
                  path.substr(path.rfind('/') + 1).c_str(), unified ? "unified" : "staging", g.nodes.size(), e,
                  report.prepare_ms, runs.empty() ? 0.0 : runs.front(), cpu.empty() ? 0.0 : cpu.front(), runs.size());
      EXPECT_LE(e, 1e-3) << where;
      if (std::getenv("KITE_VULKAN_PROFILE_MODELS") && unified) {
        // GPU time per op type (timestamps), for tuning.
        VulkanOptions p = o;
        p.profile = true;
        p.runs = 2;
        std::vector<uint64_t> ns;
        Values ignored;
        ASSERT_TRUE(run_vulkan(g, p, &ignored, &err, &ns)) << err;
        std::map<std::string, double> per_op;
        double total = 0.0;
        for (size_t i = 0; i < ns.size(); ++i) {
          const std::string key = g.nodes[i].op + (g.nodes[i].pattern.empty() ? "" : "[" + g.nodes[i].pattern + "]");
          per_op[key] += ns[i] / 1e6;
          total += ns[i] / 1e6;
        }
        std::vector<size_t> order(ns.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ns[a] > ns[b]; });
        for (size_t r = 0; r < std::min<size_t>(8, order.size()); ++r) {
          const Node& n = g.nodes[order[r]];
          std::string shapes;
          for (int i : n.inputs) {
            if (i < 0) continue;
            shapes += " " + kite::ops::shape_string(g.tensors[static_cast<size_t>(i)].shape);
          }
          std::printf("    %8.2f ms  %s%s\n", ns[order[r]] / 1e6, n.op.c_str(), shapes.c_str());
        }
        for (const auto& kv : per_op) std::printf("    %-40s %9.2f ms %5.1f%%\n", kv.first.c_str(), kv.second, 100.0 * kv.second / total);
      }
      const std::vector<std::string> log = take_log_messages();
      EXPECT_TRUE(log.empty()) << log.front();
    }
  }
}

}  // namespace
}  // namespace kite::vktest
