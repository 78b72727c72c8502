// The reference example_sgemm is measured against: cuBLAS SGEMM in pedantic FP32 (CUBLAS_PEDANTIC_MATH:
// no tensor cores, no TF32, no reduced-precision tricks), and example_hopper_gemm's: cuBLAS GemmEx on
// BF16 with FP32 accumulation (CUBLAS_DEFAULT_MATH, tensor cores), loaded at run time with dlopen so
// that neither cudrv nor the examples link cuBLAS. Only <cublas_v2.h> is used at build time, for the types,
// the enums and the prototypes (the function pointer types are taken from them with decltype).
//
// The runtime's cudaStream_t and the driver's CUstream are the same type, so the product is enqueued on
// a cudrv stream and timed like any other work. cuBLAS works in the current device's primary context,
// the one cudrv allocates in for a cudrv::device: make it current first (dev.set_current()).
#pragma once

#include <cublas_v2.h>
#include <cuda.h>

#include "reference/loaded_library.hpp"

#include <stdexcept>
#include <string>

namespace example::reference {

/// A cuBLAS handle in a given math mode (pedantic FP32 by default), with the library it came from: the handle is
/// destroyed, then the library closed, by the destructor. Neither copied nor moved (one per example).
///
/// Loading never throws: when no cuBLAS can be loaded (or a function is missing, or the handle cannot
/// be created) available() is false and unavailable_reason() says why, so that the example can go on
/// without the reference. Calls on an available handle throw std::runtime_error on a cuBLAS error.
class cublas {
 public:
  /// Tries libcublas.so.13, libcublas.so.12, then libcublas.so, and sets the handle's math mode.
  explicit cublas(cublasMath_t math = CUBLAS_PEDANTIC_MATH) {
    if (!library_.open({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, "cuBLAS")) {
      return;
    }
    if (!library_.resolve(create_, "cublasCreate_v2") || !library_.resolve(destroy_, "cublasDestroy_v2") ||
        !library_.resolve(set_stream_, "cublasSetStream_v2") ||
        !library_.resolve(set_math_mode_, "cublasSetMathMode") || !library_.resolve(sgemm_, "cublasSgemm_v2")) {
      close();
      return;
    }
    // Optional: better messages and the version, when the library has them.
    library_.resolve_optional(status_string_, "cublasGetStatusString");
    library_.resolve_optional(get_version_, "cublasGetVersion_v2");
    library_.resolve_optional(gemm_ex_, "cublasGemmEx");

    cublasHandle_t handle = nullptr;
    if (const cublasStatus_t s = create_(&handle); s != CUBLAS_STATUS_SUCCESS) {
      library_.set_reason(library_.name() + ": cublasCreate_v2 failed: " + status_name(s));
      close();
      return;
    }
    handle_ = handle;
    if (const cublasStatus_t s = set_math_mode_(handle_, math); s != CUBLAS_STATUS_SUCCESS) {
      library_.set_reason(library_.name() + ": cublasSetMathMode(" + std::to_string(static_cast<int>(math)) +
                          ") failed: " + status_name(s));
      close();
      return;
    }
    if (get_version_ != nullptr) {
      int v = 0;
      if (get_version_(handle_, &v) == CUBLAS_STATUS_SUCCESS) {
        version_ = v;
      }
    }
  }

  cublas(const cublas&) = delete;
  cublas& operator=(const cublas&) = delete;
  /// Destroys the handle, then closes the library.
  ~cublas() { close(); }

  /// Whether the handle is usable.
  [[nodiscard]] bool available() const noexcept { return handle_ != nullptr; }
  /// Why it is not (empty when it is).
  [[nodiscard]] const std::string& unavailable_reason() const noexcept { return library_.reason(); }
  /// The name the library was loaded by, e.g. "libcublas.so.13".
  [[nodiscard]] const std::string& library_name() const noexcept { return library_.name(); }
  /// cuBLAS's version as major * 10000 + minor * 100 + patch (CUDA 12 and later), or 0 if unknown.
  [[nodiscard]] int version() const noexcept { return version_; }

  /// Makes later calls enqueue on stream.
  void set_stream(CUstream stream) const { check(set_stream_(handle_, stream), "cublasSetStream_v2"); }

  /// C = alpha * A * B + beta * C for row-major A (m x k), B (k x n) and C (m x n), leading dimensions
  /// k, n and n. cuBLAS is column-major, and a row-major matrix read column-major is its transpose, so
  /// this asks cuBLAS for the column-major C^T (n x m) = B^T (n x k) * A^T (k x m): the same bytes.
  void sgemm_row_major(int m, int n, int k, float alpha, const float* a, const float* b, float beta, float* c) const {
    check(sgemm_(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, n, a, k, &beta, c, n), "cublasSgemm_v2");
  }

  /// Whether the library has cublasGemmEx (for bf16_gemm_tn).
  [[nodiscard]] bool has_gemm_ex() const noexcept { return gemm_ex_ != nullptr; }

  /// C = A * B^T in BF16 with FP32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F) for row-major A
  /// (m x k), B (n x k) and C (m x n), leading dimensions k, k and n; the elements are the bits of
  /// bf16 values. Read column-major, A is A^T (k x m), B is B^T (k x n) and C is C^T (n x m), so this
  /// asks for C^T = (B^T)^T * A^T: op T on B, op N on A, the "TN" case. Throws std::runtime_error
  /// when the library has no cublasGemmEx.
  void bf16_gemm_tn(int m, int n, int k, const void* a, const void* b, void* c) const {
    if (gemm_ex_ == nullptr) {
      throw std::runtime_error("cuBLAS: " + library_.name() + " has no cublasGemmEx");
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    check(gemm_ex_(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, k, a, CUDA_R_16BF, k, &beta, c,
                   CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

 private:
  std::string status_name(cublasStatus_t s) const { return describe_status(status_string_, s); }

  void check(cublasStatus_t s, const char* what) const {
    check_status(s, CUBLAS_STATUS_SUCCESS, "cuBLAS", what, status_string_);
  }

  void close() noexcept {
    if (handle_ != nullptr) {
      (void)destroy_(handle_);
      handle_ = nullptr;
    }
    library_.close();
  }

  loaded_library library_;
  cublasHandle_t handle_ = nullptr;
  int version_ = 0;
  decltype(&cublasCreate_v2) create_ = nullptr;
  decltype(&cublasDestroy_v2) destroy_ = nullptr;
  decltype(&cublasSetStream_v2) set_stream_ = nullptr;
  decltype(&cublasSetMathMode) set_math_mode_ = nullptr;
  decltype(&cublasSgemm_v2) sgemm_ = nullptr;
  decltype(&cublasGetStatusString) status_string_ = nullptr;
  decltype(&cublasGetVersion_v2) get_version_ = nullptr;
  // cublasGemmEx's C entry point (C++ sees overloads of the name, so decltype cannot pick one).
  using gemm_ex_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  gemm_ex_fn gemm_ex_ = nullptr;
};

}  // namespace example::reference
