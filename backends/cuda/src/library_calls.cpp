#include "library_calls.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "backend.h"

namespace kite::cuda {

namespace {

uint64_t alignment_of(CUdeviceptr p) {
  uint64_t a = 1;
  while (a < 256 && p % (a * 2) == 0) a *= 2;
  return a;
}

// ------------------------------------------------------------- cuDNN --

class CudnnConv : public LibraryCall {
 public:
  ~CudnnConv() override {
    if (!lib_) return;
    if (x_desc_) lib_->DestroyTensorDescriptor(x_desc_);
    if (y_desc_) lib_->DestroyTensorDescriptor(y_desc_);
    if (b_desc_) lib_->DestroyTensorDescriptor(b_desc_);
    if (w_desc_) lib_->DestroyFilterDescriptor(w_desc_);
    if (conv_desc_) lib_->DestroyConvolutionDescriptor(conv_desc_);
    if (act_desc_) lib_->DestroyActivationDescriptor(act_desc_);
  }
  uint64_t workspace_bytes() const override { return ws_; }
  const char* what() const override { return "cuDNN convolution"; }

  kite_status resolve(Backend& b, std::string* err) override {
    x_ = b.address(xo_);
    w_ = b.address(wo_);
    y_ = b.address(yo_);
    bias_ = fused_ ? b.address(bo_) : 0;
    if (!x_ || !w_ || !y_ || (fused_ && !bias_)) {
      *err = "a cuDNN operand has no device buffer";
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    return KITE_OK;
  }

  kite_status run(Backend& b, CUstream stream, std::string* err) override {
    std::lock_guard<std::mutex> lock(b.device().cudnn_mutex());
    cudnnStatus_t s = lib_->SetStream(handle_, reinterpret_cast<cudaStream_t>(stream));
    if (s != CUDNN_STATUS_SUCCESS) {
      *err = lib_->describe(s, "cudnnSetStream");
      return KITE_ERROR_BACKEND;
    }
    const float one = 1.0f, zero = 0.0f;
    void* ws = ws_ ? reinterpret_cast<void*>(b.scratch()) : nullptr;
    if (fused_) {
      s = lib_->ConvolutionBiasActivationForward(handle_, &one, x_desc_, ptr(x_), w_desc_, ptr(w_), conv_desc_, algo_, ws,
                                                 ws_, &zero, y_desc_, ptr(y_), b_desc_, ptr(bias_), act_desc_, y_desc_,
                                                 ptr(y_));
      if (s != CUDNN_STATUS_SUCCESS) {
        *err = lib_->describe(s, "cudnnConvolutionBiasActivationForward");
        return KITE_ERROR_BACKEND;
      }
    } else {
      s = lib_->ConvolutionForward(handle_, &one, x_desc_, ptr(x_), w_desc_, ptr(w_), conv_desc_, algo_, ws, ws_, &zero,
                                   y_desc_, ptr(y_));
      if (s != CUDNN_STATUS_SUCCESS) {
        *err = lib_->describe(s, "cudnnConvolutionForward");
        return KITE_ERROR_BACKEND;
      }
    }
    return KITE_OK;
  }

  static void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

  const Cudnn* lib_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, b_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnActivationDescriptor_t act_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  uint64_t ws_ = 0;
  bool fused_ = false;
  Operand xo_, wo_, bo_, yo_;
  CUdeviceptr x_ = 0, w_ = 0, y_ = 0, bias_ = 0;
};

}  // namespace

std::shared_ptr<LibraryCall> make_cudnn_conv(Backend& backend, const ConvShape& s, const Operand& x, const Operand& w,
                                             const Operand& bias, const Operand& y, bool relu, bool fuse_bias,
                                             float* measured_ms, std::string* why) {
  const Cudnn* lib = nullptr;
  cudnnHandle_t handle = backend.device().cudnn(&lib, why);
  if (!handle) return nullptr;
  auto call = std::make_shared<CudnnConv>();
  call->lib_ = lib;
  call->handle_ = handle;
  call->xo_ = x;
  call->wo_ = w;
  call->bo_ = bias;
  call->yo_ = y;
  // cudnnConvolutionBiasActivationForward fuses the bias with ReLU (any
  // algorithm); other activations, or no bias, take Kite's epilogue kernel.
  call->fused_ = fuse_bias && relu;
  auto check = [&](cudnnStatus_t st, const char* what) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    *why = lib->describe(st, what);
    return false;
  };
  if (!check(lib->CreateTensorDescriptor(&call->x_desc_), "cudnnCreateTensorDescriptor") ||
      !check(lib->CreateTensorDescriptor(&call->y_desc_), "cudnnCreateTensorDescriptor") ||
      !check(lib->CreateFilterDescriptor(&call->w_desc_), "cudnnCreateFilterDescriptor") ||
      !check(lib->CreateConvolutionDescriptor(&call->conv_desc_), "cudnnCreateConvolutionDescriptor") ||
      !check(lib->SetTensor4dDescriptor(call->x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w),
             "cudnnSetTensor4dDescriptor(x)") ||
      !check(lib->SetTensor4dDescriptor(call->y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.m, s.oh, s.ow),
             "cudnnSetTensor4dDescriptor(y)") ||
      !check(lib->SetFilter4dDescriptor(call->w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.m, s.c / s.groups, s.kh, s.kw),
             "cudnnSetFilter4dDescriptor") ||
      !check(lib->SetConvolution2dDescriptor(call->conv_desc_, s.ph, s.pw, s.sh, s.sw, s.dh, s.dw, CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT),
             "cudnnSetConvolution2dDescriptor") ||
      !check(lib->SetConvolutionGroupCount(call->conv_desc_, s.groups), "cudnnSetConvolutionGroupCount") ||
      !check(lib->SetConvolutionMathType(call->conv_desc_, backend.allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
             "cudnnSetConvolutionMathType")) {
    return nullptr;
  }
  if (call->fused_) {
    if (!check(lib->CreateTensorDescriptor(&call->b_desc_), "cudnnCreateTensorDescriptor") ||
        !check(lib->SetTensor4dDescriptor(call->b_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.m, 1, 1),
               "cudnnSetTensor4dDescriptor(bias)") ||
        !check(lib->CreateActivationDescriptor(&call->act_desc_), "cudnnCreateActivationDescriptor") ||
        !check(lib->SetActivationDescriptor(call->act_desc_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
               "cudnnSetActivationDescriptor")) {
      return nullptr;
    }
  }
  // Measured choice of algorithm on the session's own buffers, with a
  // temporary workspace as large as the hungriest candidate (at most 256 MiB).
  const CUdeviceptr xp = backend.address(x), wp = backend.address(w), yp = backend.address(y);
  if (!xp || !wp || !yp) {
    *why = "cuDNN setup before the buffers exist";
    return nullptr;
  }
  size_t want = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    size_t bytes = 0;
    if (lib->GetConvolutionForwardWorkspaceSize(handle, call->x_desc_, call->w_desc_, call->conv_desc_, call->y_desc_,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(a), &bytes) == CUDNN_STATUS_SUCCESS) {
      want = std::max(want, bytes);
    }
  }
  const size_t cap = size_t{256} << 20;
  size_t ws_size = std::min(want, cap);
  CUdeviceptr ws = ws_size ? backend.temp_alloc(ws_size) : 0;
  if (ws_size && !ws) ws_size = 0;  // search without a workspace: fewer candidates
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  cudnnStatus_t st;
  {
    std::lock_guard<std::mutex> lock(backend.device().cudnn_mutex());
    st = lib->SetStream(handle, reinterpret_cast<cudaStream_t>(backend.stream()));
    if (st == CUDNN_STATUS_SUCCESS) {
      st = lib->FindConvolutionForwardAlgorithmEx(handle, call->x_desc_, CudnnConv::ptr(xp), call->w_desc_,
                                                  CudnnConv::ptr(wp), call->conv_desc_, call->y_desc_, CudnnConv::ptr(yp),
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf,
                                                  ws ? CudnnConv::ptr(ws) : nullptr, ws_size);
    }
  }
  if (ws) backend.drv().MemFree(ws);
  if (st != CUDNN_STATUS_SUCCESS) {
    *why = lib->describe(st, "cudnnFindConvolutionForwardAlgorithmEx");
    return nullptr;
  }
  int chosen = -1;
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_size) {
      chosen = i;
      break;  // sorted by time
    }
  }
  if (chosen < 0) {
    *why = "cuDNN found no algorithm for this convolution";
    return nullptr;
  }
  call->algo_ = perf[chosen].algo;
  call->ws_ = perf[chosen].memory;
  lib->SetConvolutionMathType(call->conv_desc_, perf[chosen].mathType);
  if (measured_ms) *measured_ms = perf[chosen].time;
  return call;
}

// ----------------------------------------------------------- cuBLASLt --

namespace {

class LtMatmul : public LibraryCall {
 public:
  ~LtMatmul() override {
    if (!lib_) return;
    if (a_) lib_->MatrixLayoutDestroy(a_);
    if (b_) lib_->MatrixLayoutDestroy(b_);
    if (c_) lib_->MatrixLayoutDestroy(c_);
    if (d_) lib_->MatrixLayoutDestroy(d_);
    if (desc_) lib_->MatmulDescDestroy(desc_);
  }
  uint64_t workspace_bytes() const override { return ws_; }
  const char* what() const override { return "cuBLASLt matmul"; }

  kite_status resolve(Backend& b, std::string* err) override {
    pa_ = b.address(ao_);
    pb_ = b.address(bo_);
    py_ = b.address(yo_);
    pc_ = has_c_ ? b.address(co_) : py_;
    pbias_ = has_bias_ ? b.address(biaso_) : 0;
    if (!pa_ || !pb_ || !py_ || !pc_ || (has_bias_ && !pbias_)) {
      *err = "a cuBLASLt operand has no device buffer";
      return KITE_ERROR_INVALID_ARGUMENT;
    }
    return set_bias(err);
  }

  kite_status set_bias(std::string* err) {
    if (!has_bias_) return KITE_OK;
    const void* bias = reinterpret_cast<const void*>(static_cast<uintptr_t>(pbias_));
    const cublasStatus_t s = lib_->MatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (s != CUBLAS_STATUS_SUCCESS) {
      *err = lib_->describe(s, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
      return KITE_ERROR_BACKEND;
    }
    return KITE_OK;
  }

  bool call(CUdeviceptr workspace, CUstream stream, std::string* err) {
    auto p = [](CUdeviceptr v) { return reinterpret_cast<void*>(static_cast<uintptr_t>(v)); };
    // Column-major view: D (N x M) = B-buffer op x A-buffer op.
    const cublasStatus_t s =
        lib_->Matmul(handle_, desc_, &alpha_, p(pb_), a_, p(pa_), b_, &beta_, p(pc_), c_, p(py_), d_, &algo_,
                     ws_ ? p(workspace) : nullptr, ws_, reinterpret_cast<cudaStream_t>(stream));
    if (s != CUBLAS_STATUS_SUCCESS) {
      *err = lib_->describe(s, "cublasLtMatmul");
      return false;
    }
    return true;
  }

  kite_status run(Backend& b, CUstream stream, std::string* err) override {
    return call(b.scratch(), stream, err) ? KITE_OK : KITE_ERROR_BACKEND;
  }

  const CublasLt* lib_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  uint64_t ws_ = 0;
  float alpha_ = 1.0f, beta_ = 0.0f;
  bool has_c_ = false, has_bias_ = false;
  Operand ao_, bo_, co_, biaso_, yo_;
  CUdeviceptr pa_ = 0, pb_ = 0, pc_ = 0, py_ = 0, pbias_ = 0;
};

}  // namespace

std::shared_ptr<LibraryCall> make_lt_matmul(Backend& backend, const LtShape& s, const Operand& a, const Operand& b,
                                            const Operand* c, const Operand* bias, const Operand& y, float* measured_ms,
                                            std::string* why) {
  const CublasLt* lib = nullptr;
  cublasLtHandle_t handle = backend.device().cublaslt(&lib, why);
  if (!handle) return nullptr;
  auto call = std::make_shared<LtMatmul>();
  call->lib_ = lib;
  call->handle_ = handle;
  call->ao_ = a;
  call->bo_ = b;
  call->yo_ = y;
  call->alpha_ = s.alpha;
  call->beta_ = c ? s.beta : 0.0f;
  call->has_c_ = c != nullptr;
  if (c) call->co_ = *c;
  call->has_bias_ = bias != nullptr;
  if (bias) call->biaso_ = *bias;
  auto check = [&](cublasStatus_t st, const char* what) {
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    *why = lib->describe(st, what);
    return false;
  };
  // matA of cuBLASLt is the B buffer, matB the A buffer (see the header).
  cublasOperation_t op_a, op_b;
  uint64_t a_rows, a_cols, b_rows, b_cols;
  int64_t lda, ldb;
  if (s.sbn == 1) {
    op_a = CUBLAS_OP_N, a_rows = s.N, a_cols = s.K, lda = s.sbk;
  } else if (s.sbk == 1) {
    op_a = CUBLAS_OP_T, a_rows = s.K, a_cols = s.N, lda = s.sbn;
  } else {
    *why = "B is strided along both axes";
    return nullptr;
  }
  if (s.sak == 1) {
    op_b = CUBLAS_OP_N, b_rows = s.K, b_cols = s.M, ldb = s.sam;
  } else if (s.sam == 1) {
    op_b = CUBLAS_OP_T, b_rows = s.M, b_cols = s.K, ldb = s.sak;
  } else {
    *why = "A is strided along both axes";
    return nullptr;
  }
  const cublasComputeType_t compute = backend.allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (s.epilogue == 1) epilogue = CUBLASLT_EPILOGUE_BIAS;
  if (s.epilogue == 2) epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
  if (s.epilogue == 3) epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  if (!check(lib->MatmulDescCreate(&call->desc_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate") ||
      !check(lib->MatmulDescSetAttribute(call->desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "TRANSA") ||
      !check(lib->MatmulDescSetAttribute(call->desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "TRANSB") ||
      !check(lib->MatmulDescSetAttribute(call->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "EPILOGUE") ||
      !check(lib->MatrixLayoutCreate(&call->a_, CUDA_R_32F, a_rows, a_cols, lda), "cublasLtMatrixLayoutCreate(A)") ||
      !check(lib->MatrixLayoutCreate(&call->b_, CUDA_R_32F, b_rows, b_cols, ldb), "cublasLtMatrixLayoutCreate(B)") ||
      !check(lib->MatrixLayoutCreate(&call->c_, CUDA_R_32F, s.N, s.M, s.N), "cublasLtMatrixLayoutCreate(C)") ||
      !check(lib->MatrixLayoutCreate(&call->d_, CUDA_R_32F, s.N, s.M, s.N), "cublasLtMatrixLayoutCreate(D)")) {
    return nullptr;
  }
  if (s.batch > 1) {
    const int32_t count = static_cast<int32_t>(s.batch);
    const int64_t offsets[4] = {s.sb, s.sa, s.sy, s.sy};
    cublasLtMatrixLayout_t layouts[4] = {call->a_, call->b_, call->c_, call->d_};
    for (int i = 0; i < 4; ++i) {
      if (!check(lib->MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                 "BATCH_COUNT") ||
          !check(lib->MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offsets[i],
                                               sizeof offsets[i]),
                 "STRIDED_BATCH_OFFSET")) {
        return nullptr;
      }
    }
  }
  std::string err;
  if (call->resolve(backend, &err) != KITE_OK) {
    *why = err;
    return nullptr;
  }
  // Heuristic candidates for these operands' actual alignments, within a
  // workspace of at most 32 MiB (8 MiB on integrated GPUs: little memory).
  const uint64_t max_ws = backend.device().props().integrated ? (uint64_t{8} << 20) : (uint64_t{32} << 20);
  cublasLtMatmulPreference_t pref = nullptr;
  if (!check(lib->MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate")) return nullptr;
  const uint32_t align_a = static_cast<uint32_t>(alignment_of(call->pb_)), align_b = static_cast<uint32_t>(alignment_of(call->pa_));
  const uint32_t align_c = static_cast<uint32_t>(alignment_of(call->pc_)), align_d = static_cast<uint32_t>(alignment_of(call->py_));
  bool ok = check(lib->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws),
                  "MAX_WORKSPACE_BYTES") &&
            check(lib->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a), "ALIGNMENT_A") &&
            check(lib->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b), "ALIGNMENT_B") &&
            check(lib->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c), "ALIGNMENT_C") &&
            check(lib->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d), "ALIGNMENT_D");
  cublasLtMatmulHeuristicResult_t results[4];
  int returned = 0;
  if (ok) {
    ok = check(lib->MatmulAlgoGetHeuristic(handle, call->desc_, call->a_, call->b_, call->c_, call->d_, pref, 4, results,
                                           &returned),
               "cublasLtMatmulAlgoGetHeuristic");
  }
  lib->MatmulPreferenceDestroy(pref);
  if (!ok) return nullptr;
  int chosen = -1;
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) {
      chosen = i;
      break;
    }
  }
  if (chosen < 0) {
    *why = "cuBLASLt has no algorithm for this product";
    return nullptr;
  }
  call->algo_ = results[chosen].algo;
  call->ws_ = results[chosen].workspaceSize;
  // Timed on the session's buffers with a temporary workspace.
  if (measured_ms) {
    CUdeviceptr ws = call->ws_ ? backend.temp_alloc(call->ws_) : 0;
    *measured_ms = -1.0f;
    if (!call->ws_ || ws) {
      std::string ignored;
      *measured_ms = backend.measure({}, [&] { return call->call(ws, backend.stream(), &ignored); });
    }
    if (ws) backend.drv().MemFree(ws);
  }
  return call;
}

}  // namespace kite::cuda
