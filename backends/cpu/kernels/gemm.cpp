// Gemm and MatMul (float32) on the packed GEMM of sgemm.h.
//
// Both are a batch of products C_b = alpha * A_b * B_b where each operand is
// a strided view into its tensor. A constant operand (weights) is packed once
// at prepare; the other is packed at run into buffers allocated at prepare.
// Batches run one after another with the GEMM parallelised inside, or, when
// there are at least as many batches as threads, side by side on "lanes"
// that each own a packing buffer.
#include <algorithm>
#include <string>
#include <vector>

#include "common.h"
#include "fused_common.h"
#include "kernels.h"
#include "sgemm.h"
#include "weight_pack.h"

namespace kite::cpu {
namespace {

struct Operand {
  const float* data = nullptr;
  bool constant = false;
  int64_t row_stride = 0;  // between rows of the (m x k) or (k x n) view
  int64_t col_stride = 0;
  std::vector<int64_t> offsets;  // per output batch: offset of its matrix
  std::vector<int64_t> slots;    // per output batch: which pre-packed matrix (constant)
};

class MatrixProductKernel : public Kernel {
 public:
  MatrixProductKernel(int64_t m, int64_t n, int64_t k, float alpha, Operand a, Operand b,
                      float* c, int threads)
      : m_(m), n_(n), k_(k), alpha_(alpha), a_(std::move(a)), b_(std::move(b)), c_(c) {
    batches_ = static_cast<int64_t>(a_.offsets.size());
    lanes_ = threads > 1 && batches_ >= threads ? threads : 1;
  }

  // Gemm's C input: Y = beta * C (broadcast) before accumulating alpha*A*B.
  void set_addend(const float* c_in, const Shape& c_shape, float beta) {
    addend_ = c_in;
    beta_ = beta;
    addend_plan_ = make_broadcast_plan({m_, n_}, {&c_shape});
  }

  // Relu and Clip in the GEMM's store, the activations vmath computes by
  // its tile hook on each task's block (FusedGemm), as Conv does.
  bool take_activation(const kite::ops::FusedActivation& act) override {
    if (epilogue_.tile != nullptr) return false;
    tile_act_ = act;
    return fused::activation_into_epilogue(tile_act_, true, &epilogue_);
  }
  bool take_tile_hook(sgemm::TileHook hook, const void* ctx) override {
    if (epilogue_.tile != nullptr || epilogue_.kind != sgemm::Epilogue::kNone) return false;
    epilogue_.tile = hook;
    epilogue_.tile_ctx = ctx;
    return true;
  }

  // false with err when the file's packed form of a weight is malformed.
  bool prepare(const KernelArgs& args, std::string* err) {
    const int64_t a_size = sgemm::packed_a_floats(m_, k_);
    const int64_t b_size = sgemm::packed_b_floats(k_, n_);
    if (a_.constant && !pre_pack(args, 0, a_, a_size, &packed_a_, &pa_, err)) return false;
    if (b_.constant && !pre_pack(args, 1, b_, b_size, &packed_b_, &pb_, err)) return false;
    // The run-time packing buffers of the non-constant operands live in the
    // backend's shared workspace (declared here, handed over at bind), not
    // in memory of this kernel's own: a folded batch (see prepare_matmul)
    // packs thousands of rows, once per node otherwise.
    work_a_floats_ = a_.constant ? 0 : lanes_ * a_size;
    work_b_floats_ = b_.constant ? 0 : lanes_ * b_size;
    shared_ = args.workspace;
    workspace()->reserve(static_cast<size_t>(work_a_floats_ + work_b_floats_));
    return true;
  }

  void run(ThreadPool& pool) override {
    if (m_ == 0 || n_ == 0 || batches_ == 0) return;
    if (addend_) fill_addend(pool);
    if (lanes_ == 1) {
      for (int64_t batch = 0; batch < batches_; ++batch) product(batch, 0, &pool);
      return;
    }
    pool.parallel_for(lanes_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t lane = begin; lane < end; ++lane) {
        for (int64_t batch = lane; batch < batches_; batch += lanes_) {
          product(batch, lane, nullptr);
        }
      }
    });
  }

 private:
  // A constant operand, every matrix of it packed once: matrix i of the
  // tensor (offset i * rows * cols) at slot i, so broadcast batches share
  // one. From the file's form (weight_pack.h) when it has one, else here.
  bool pre_pack(const KernelArgs& args, int input, Operand& op, int64_t size, std::vector<float>* own,
                const float** packed, std::string* err) {
    const bool is_a = input == 0;
    const int64_t matrix = is_a ? m_ * k_ : k_ * n_;
    int64_t count = 0;
    op.slots.resize(op.offsets.size());
    for (size_t i = 0; i < op.offsets.size(); ++i) {
      op.slots[i] = matrix > 0 ? op.offsets[i] / matrix : 0;
      count = std::max(count, op.slots[i] + 1);
    }
    for (const weight_pack::Layout& l : weight_pack::layouts(*args.op)) {
      if (l.input != input) continue;
      if (l.floats < count * size || l.floats % size != 0) break;  // the rules disagree: pack here
      *packed = weight_pack::acquire(args, l, own, err);
      return *packed != nullptr;
    }
    own->resize(static_cast<size_t>(count * size));
    for (int64_t s = 0; s < count; ++s) {
      if (is_a) {
        sgemm::pack_a(op.data + s * matrix, op.row_stride, op.col_stride, m_, k_, alpha_,
                      own->data() + s * size, nullptr);
      } else {
        sgemm::pack_b(op.data + s * matrix, op.row_stride, op.col_stride, k_, n_,
                      own->data() + s * size, nullptr);
      }
    }
    *packed = own->data();
    return true;
  }

  void product(int64_t batch, int64_t lane, ThreadPool* pool) {
    const int64_t a_size = sgemm::packed_a_floats(m_, k_);
    const int64_t b_size = sgemm::packed_b_floats(k_, n_);
    const float* pa;
    const float* pb;
    if (a_.constant) {
      pa = pa_ + a_.slots[batch] * a_size;
    } else {
      float* w = workspace()->data() + lane * a_size;
      sgemm::pack_a(a_.data + a_.offsets[batch], a_.row_stride, a_.col_stride, m_, k_, alpha_, w,
                    pool);
      pa = w;
    }
    if (b_.constant) {
      pb = pb_ + b_.slots[batch] * b_size;
    } else {
      float* w = workspace()->data() + work_a_floats_ + lane * b_size;
      sgemm::pack_b(b_.data + b_.offsets[batch], b_.row_stride, b_.col_stride, k_, n_, w, pool);
      pb = w;
    }
    sgemm::gemm_packed(m_, n_, k_, pa, pb, c_ + batch * m_ * n_, n_, nullptr, addend_ != nullptr,
                       pool, &epilogue_);
  }

  void fill_addend(ThreadPool& pool) {
    const BroadcastPlan& plan = addend_plan_;
    const float beta = beta_;
    const float* src = addend_;
    float* dst = c_;
    pool.parallel_for(plan.rows, rows_per_chunk(plan.inner), [&](int64_t begin, int64_t end) {
      plan.for_rows(begin, end, [&](const int64_t* off, int64_t out) {
        const int64_t s = plan.inner_stride[0];
        for (int64_t i = 0; i < plan.inner; ++i) dst[out + i] = beta * src[off[0] + i * s];
      });
    });
  }

  sgemm::Epilogue epilogue_;             // kNone and no hook unless a fused node handed one over
  kite::ops::FusedActivation tile_act_;  // epilogue_.tile's activation, when take_activation set it
  int64_t m_, n_, k_;
  float alpha_;
  Operand a_, b_;
  float* c_;
  int64_t batches_ = 0;
  int64_t lanes_ = 1;
  const float* addend_ = nullptr;
  float beta_ = 0.0f;
  BroadcastPlan addend_plan_;
  std::vector<float> packed_a_, packed_b_;
  int64_t work_a_floats_ = 0, work_b_floats_ = 0;  // in the workspace: A's, then B's
  Workspace* shared_ = nullptr;       // the backend's, when built by one
  mutable Workspace own_workspace_;   // else this kernel's own
  Workspace* workspace() const { return shared_ ? shared_ : &own_workspace_; }
  // Constant operands packed: packed_a_/packed_b_, or the file's forms.
  const float* pa_ = nullptr;
  const float* pb_ = nullptr;
};

}  // namespace

std::string check_gemm(const OpNode& op) { return expect_dtypes(op, 0, 3, {KITE_DTYPE_FLOAT32}); }

std::unique_ptr<Kernel> prepare_gemm(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  // m, n, k as the op rule resolves them (the rule checked the output and
  // that C broadcasts to m x n before prepare).
  const bool trans_a = op.attr_int("transA", 0) != 0;
  const bool trans_b = op.attr_int("transB", 0) != 0;
  kite::ops::MatMulShape product;
  kite::ops::RuleError rule_err;
  if (op.inputs[0].rank() != 2 || op.inputs[1].rank() != 2 || !has_output(args, 0) ||
      !kite::ops::resolve_gemm(op.inputs[0].shape.data(), op.inputs[1].shape.data(), trans_a,
                               trans_b, &product, &rule_err)) {
    return prepare_error(err, op, rule_err.message[0] ? rule_err.message : "A and B must be 2-D");
  }
  const int64_t m = product.m, n = product.n, k = product.k;
  const float alpha = op.attr_float("alpha", 1.0f);
  const float beta = op.attr_float("beta", 1.0f);
  Operand oa, ob;
  oa.data = static_cast<const float*>(args.input_data(0));
  oa.constant = args.node->inputs[0]->is_constant != 0;
  oa.row_stride = trans_a ? 1 : k;
  oa.col_stride = trans_a ? m : 1;
  oa.offsets = {0};
  ob.data = static_cast<const float*>(args.input_data(1));
  ob.constant = args.node->inputs[1]->is_constant != 0;
  ob.row_stride = trans_b ? 1 : n;
  ob.col_stride = trans_b ? k : 1;
  ob.offsets = {0};
  auto kernel = std::make_unique<MatrixProductKernel>(
      m, n, k, alpha, std::move(oa), std::move(ob), static_cast<float*>(args.output_data(0)),
      args.threads);
  if (op.has_input(2) && beta != 0.0f) {
    kernel->set_addend(static_cast<const float*>(args.input_data(2)), op.inputs[2].shape, beta);
  }
  if (!kernel->prepare(args, err)) return nullptr;
  return kernel;
}

std::string check_matmul(const OpNode& op) { return expect_dtypes(op, 0, 2, {KITE_DTYPE_FLOAT32}); }

std::unique_ptr<Kernel> prepare_matmul(const KernelArgs& args, std::string* err) {
  const OpNode& op = *args.op;
  // m, n, k and the batch dims as the op rule resolves them (numpy.matmul;
  // the rule checked the output shape before prepare).
  const Shape& a = op.inputs[0].shape;
  const Shape& b = op.inputs[1].shape;
  kite::ops::MatMulShape product;
  kite::ops::RuleError rule_err;
  if (!has_output(args, 0) ||
      !kite::ops::resolve_matmul(a.data(), static_cast<int64_t>(a.size()), b.data(),
                                 static_cast<int64_t>(b.size()), &product, &rule_err)) {
    return prepare_error(err, op, rule_err.message[0] ? rule_err.message : "output is missing");
  }
  const int64_t m = product.m, n = product.n, k = product.k;
  const Shape a_batch(product.a_batch, product.a_batch + product.a_batch_rank);
  const Shape b_batch(product.b_batch, product.b_batch + product.b_batch_rank);
  const Shape batch(product.batch, product.batch + product.batch_rank);
  // Offsets of each output batch's operand matrices (numpy broadcasting).
  const int64_t batches = shape_numel(batch);
  Operand oa, ob;
  oa.offsets.resize(static_cast<size_t>(batches));
  ob.offsets.resize(static_cast<size_t>(batches));
  if (batches > 0) {
    const BroadcastPlan plan = make_broadcast_plan(batch, {&a_batch, &b_batch});
    plan.for_rows(0, plan.rows, [&](const int64_t* off, int64_t out) {
      for (int64_t i = 0; i < plan.inner; ++i) {
        oa.offsets[out + i] = (off[0] + i * plan.inner_stride[0]) * m * k;
        ob.offsets[out + i] = (off[1] + i * plan.inner_stride[1]) * k * n;
      }
    });
  }
  oa.data = static_cast<const float*>(args.input_data(0));
  oa.constant = args.node->inputs[0]->is_constant != 0;
  oa.row_stride = k;
  oa.col_stride = 1;
  ob.data = static_cast<const float*>(args.input_data(1));
  ob.constant = args.node->inputs[1]->is_constant != 0;
  ob.row_stride = n;
  ob.col_stride = 1;
  // One B for every batch (a 2-D weight) and A's batches its own, in order:
  // the batches are consecutive row blocks of one (batches * m) x k matrix
  // and of the output, so one GEMM with batches * m rows does them all
  // (a sequence-first attention projection: 32 batches of m = 1 become one
  // GEMM of 32 rows). A constant A keeps its per-matrix packed layout.
  int64_t rows = m;
  if (batches > 1 && !oa.constant && shape_numel(b_batch) == 1 && shape_numel(a_batch) == batches) {
    rows = batches * m;
    oa.offsets = {0};
    ob.offsets = {0};
  }
  auto kernel = std::make_unique<MatrixProductKernel>(
      rows, n, k, 1.0f, std::move(oa), std::move(ob), static_cast<float*>(args.output_data(0)),
      args.threads);
  if (!kernel->prepare(args, err)) return nullptr;
  return kernel;
}

}  // namespace kite::cpu
