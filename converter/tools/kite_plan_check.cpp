// kite-plan-check: proves the memory plan stored in a .kite file. Loads and
// verifies the file with the runtime's loader, rebuilds the lifetimes from the
// stored node order, and runs the planner's checker: no two tensors live at
// the same time may share bytes unless one is a view or in-place output of
// the other at the same offset, and every tensor must lie inside the arena.
#include <cstdio>
#include <string>

#include "kite/converter/ir.h"
#include "kite/kite.h"
#include "memory/planner.h"
#include "model.h"

namespace {

kite::ir::Node to_ir(const kite::rt::NodeRec& n) {
  kite::ir::Node out;
  out.name = n.name;
  out.op = n.op;
  out.domain = n.domain;
  out.inputs = n.inputs;
  out.outputs = n.outputs;
  out.attrs = n.attrs;
  out.fused_pattern = n.fused_pattern;
  for (const auto& b : n.body) out.body.push_back(to_ir(b));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::printf("kite-plan-check %s (format %d.%d)\n", KITE_VERSION_STRING, KITE_FORMAT_MAJOR,
                KITE_FORMAT_MINOR);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: kite-plan-check MODEL.kite | --version\n");
    return 2;
  }
  std::shared_ptr<kite::rt::Model> m;
  const kite::rt::Status s = kite::rt::Model::load_file(argv[1], &m);
  if (!s.is_ok()) {
    std::fprintf(stderr, "kite-plan-check: %s\n", s.message().c_str());
    return 1;
  }
  kite::ir::Model ir;
  for (const auto& t : m->tensors) {
    kite::ir::Tensor x;
    x.name = t.name;
    x.dtype = t.dtype;
    x.shape = t.shape;
    x.shape_known = true;
    x.kind = t.kind;  // one enum (kite/ops/tensor_kind.h)
    ir.tensors.push_back(std::move(x));
    ir.plan.offsets.push_back(t.arena_offset);
  }
  for (const auto& g : m->graphs) {
    kite::ir::Graph out;
    out.name = g.name;
    out.inputs = g.inputs;
    out.outputs = g.outputs;
    for (const auto& n : g.nodes) out.nodes.push_back(to_ir(n));
    ir.graphs.push_back(std::move(out));
  }
  ir.plan.arena_size = m->plan.arena_size;
  ir.plan.alignment = m->plan.alignment;
  const std::string problem = kite::memory::check_plan(ir);
  if (!problem.empty()) {
    std::fprintf(stderr, "kite-plan-check: %s: plan is NOT sound: %s\n", argv[1], problem.c_str());
    return 1;
  }
  std::printf("kite-plan-check: %s: plan OK (%zu tensors, arena %llu bytes, lower bound %llu, "
              "naive %llu, strategy %s)\n",
              argv[1], m->tensors.size(), static_cast<unsigned long long>(m->plan.arena_size),
              static_cast<unsigned long long>(m->plan.lower_bound),
              static_cast<unsigned long long>(m->plan.naive_size), m->plan.strategy.c_str());
  return 0;
}
