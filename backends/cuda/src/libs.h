// cuDNN and cuBLASLt, opened with dlopen when a session wants them (not in
// lean mode): tables of the functions the plugin calls, typed by hand from
// the headers (which the build needs for the types only). The plugin has
// no link-time dependency on either library.
//
// cuDNN: the legacy convolution API (cudnnConvolutionForward,
// cudnnConvolutionBiasActivationForward, algorithm search), present in
// cuDNN 8 (JetPack 5 and 6) and, deprecated, in cuDNN 9.
// cuBLASLt: cublasLtMatmul with the BIAS, RELU_BIAS and GELU_BIAS
// epilogues (CUDA 11.3+; batched layouts through the layout attributes).
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <string>

namespace kite::cuda {

#define KITE_CUDNN_FUNCTIONS(X)                                                                         \
  X(GetVersion, "cudnnGetVersion", size_t, ())                                                           \
  X(GetErrorString, "cudnnGetErrorString", const char*, (cudnnStatus_t))                                \
  X(Create, "cudnnCreate", cudnnStatus_t, (cudnnHandle_t*))                                              \
  X(Destroy, "cudnnDestroy", cudnnStatus_t, (cudnnHandle_t))                                             \
  X(SetStream, "cudnnSetStream", cudnnStatus_t, (cudnnHandle_t, cudaStream_t))                           \
  X(CreateTensorDescriptor, "cudnnCreateTensorDescriptor", cudnnStatus_t, (cudnnTensorDescriptor_t*))    \
  X(SetTensor4dDescriptor, "cudnnSetTensor4dDescriptor", cudnnStatus_t,                                  \
    (cudnnTensorDescriptor_t, cudnnTensorFormat_t, cudnnDataType_t, int, int, int, int))                 \
  X(DestroyTensorDescriptor, "cudnnDestroyTensorDescriptor", cudnnStatus_t, (cudnnTensorDescriptor_t))   \
  X(CreateFilterDescriptor, "cudnnCreateFilterDescriptor", cudnnStatus_t, (cudnnFilterDescriptor_t*))    \
  X(SetFilter4dDescriptor, "cudnnSetFilter4dDescriptor", cudnnStatus_t,                                  \
    (cudnnFilterDescriptor_t, cudnnDataType_t, cudnnTensorFormat_t, int, int, int, int))                 \
  X(DestroyFilterDescriptor, "cudnnDestroyFilterDescriptor", cudnnStatus_t, (cudnnFilterDescriptor_t))   \
  X(CreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor", cudnnStatus_t,                      \
    (cudnnConvolutionDescriptor_t*))                                                                      \
  X(SetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor", cudnnStatus_t,                        \
    (cudnnConvolutionDescriptor_t, int, int, int, int, int, int, cudnnConvolutionMode_t, cudnnDataType_t)) \
  X(SetConvolutionGroupCount, "cudnnSetConvolutionGroupCount", cudnnStatus_t,                            \
    (cudnnConvolutionDescriptor_t, int))                                                                  \
  X(SetConvolutionMathType, "cudnnSetConvolutionMathType", cudnnStatus_t,                                \
    (cudnnConvolutionDescriptor_t, cudnnMathType_t))                                                      \
  X(DestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor", cudnnStatus_t,                    \
    (cudnnConvolutionDescriptor_t))                                                                       \
  X(CreateActivationDescriptor, "cudnnCreateActivationDescriptor", cudnnStatus_t,                        \
    (cudnnActivationDescriptor_t*))                                                                       \
  X(SetActivationDescriptor, "cudnnSetActivationDescriptor", cudnnStatus_t,                              \
    (cudnnActivationDescriptor_t, cudnnActivationMode_t, cudnnNanPropagation_t, double))                 \
  X(DestroyActivationDescriptor, "cudnnDestroyActivationDescriptor", cudnnStatus_t,                      \
    (cudnnActivationDescriptor_t))                                                                        \
  X(GetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7", cudnnStatus_t,          \
    (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,     \
     cudnnTensorDescriptor_t, int, int*, cudnnConvolutionFwdAlgoPerf_t*))                                \
  X(FindConvolutionForwardAlgorithmEx, "cudnnFindConvolutionForwardAlgorithmEx", cudnnStatus_t,          \
    (cudnnHandle_t, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,         \
     cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int, int*,                            \
     cudnnConvolutionFwdAlgoPerf_t*, void*, size_t))                                                     \
  X(GetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize", cudnnStatus_t,        \
    (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,     \
     cudnnTensorDescriptor_t, cudnnConvolutionFwdAlgo_t, size_t*))                                       \
  X(ConvolutionForward, "cudnnConvolutionForward", cudnnStatus_t,                                        \
    (cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t,         \
     const void*, cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t, void*, size_t, const void*,  \
     cudnnTensorDescriptor_t, void*))                                                                    \
  X(ConvolutionBiasActivationForward, "cudnnConvolutionBiasActivationForward", cudnnStatus_t,            \
    (cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t,         \
     const void*, cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t, void*, size_t, const void*,  \
     cudnnTensorDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,                         \
     cudnnActivationDescriptor_t, cudnnTensorDescriptor_t, void*))

#define KITE_CUBLASLT_FUNCTIONS(X)                                                                        \
  X(GetVersion, "cublasLtGetVersion", size_t, ())                                                          \
  X(Create, "cublasLtCreate", cublasStatus_t, (cublasLtHandle_t*))                                         \
  X(Destroy, "cublasLtDestroy", cublasStatus_t, (cublasLtHandle_t))                                        \
  X(MatmulDescCreate, "cublasLtMatmulDescCreate", cublasStatus_t,                                          \
    (cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t))                                          \
  X(MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute", cublasStatus_t,                              \
    (cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*, size_t))                           \
  X(MatmulDescDestroy, "cublasLtMatmulDescDestroy", cublasStatus_t, (cublasLtMatmulDesc_t))                \
  X(MatrixLayoutCreate, "cublasLtMatrixLayoutCreate", cublasStatus_t,                                      \
    (cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t))                                 \
  X(MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute", cublasStatus_t,                          \
    (cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, const void*, size_t))                        \
  X(MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", cublasStatus_t, (cublasLtMatrixLayout_t))          \
  X(MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", cublasStatus_t, (cublasLtMatmulPreference_t*)) \
  X(MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute", cublasStatus_t,                  \
    (cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void*, size_t))               \
  X(MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", cublasStatus_t, (cublasLtMatmulPreference_t)) \
  X(MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic", cublasStatus_t,                              \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,               \
     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,                      \
     cublasLtMatmulHeuristicResult_t*, int*))                                                              \
  X(Matmul, "cublasLtMatmul", cublasStatus_t,                                                              \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,            \
     const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,        \
     cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t))

struct Cudnn {
#define KITE_LIB_MEMBER(member, symbol, ret, params) ret (*member) params = nullptr;
  KITE_CUDNN_FUNCTIONS(KITE_LIB_MEMBER)
  std::string library;        // the file opened
  size_t version = 0;         // cudnnGetVersion(): 90190 for 9.19.0
  std::string describe(cudnnStatus_t s, const std::string& call) const;
};

struct CublasLt {
  KITE_CUBLASLT_FUNCTIONS(KITE_LIB_MEMBER)
#undef KITE_LIB_MEMBER
  std::string library;
  size_t version = 0;         // 130100 for 13.1.0
  std::string describe(cublasStatus_t s, const std::string& call) const;
};

// The process's libraries, opened once (KITE_CUDNN_LIBRARY and
// KITE_CUBLASLT_LIBRARY name other files). Null with the reason when
// missing.
const Cudnn* cudnn_library(std::string* why);
const CublasLt* cublaslt_library(std::string* why);

}  // namespace kite::cuda
