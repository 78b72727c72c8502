// The reference example_hopper_gemm_fp8 is measured against: cuBLASLt's FP8 GEMM (cublasLtMatmul with
// E4M3 A and B, FP32 compute and scale, BF16 C and D, the heuristic's best algorithm), loaded at run
// time with dlopen so that neither cudrv nor the examples link cuBLASLt. Only <cublasLt.h> is used at
// build time, for the types, the enums and the prototypes (the function pointer types come from them).
//
// cublasLtMatmul takes the stream as an argument (the runtime's cudaStream_t is the driver's
// CUstream), so the product is enqueued on a cudrv stream and timed like any other work. cuBLASLt
// works in the current device's primary context: make it current first (dev.set_current()).
#pragma once

#include <cublasLt.h>
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "reference/loaded_library.hpp"

namespace example::reference {

/// A cuBLASLt handle with the library it came from. Loading never throws: when no cuBLASLt can be
/// loaded (or a function is missing, or the handle cannot be created) available() is false and
/// unavailable_reason() says why. Planning and running a product throw std::runtime_error on a cuBLASLt
/// error. Neither copied nor moved (one per example).
class cublaslt {
 public:
  /// One planned product D = A * B^T for row-major E4M3 A (m x k) and B (n x k) and BF16 D (m x n):
  /// the descriptors and the algorithm the heuristic ranked first. Destroyed before its cublaslt.
  class fp8_gemm_tn {
   public:
    fp8_gemm_tn(const fp8_gemm_tn&) = delete;
    fp8_gemm_tn& operator=(const fp8_gemm_tn&) = delete;
    ~fp8_gemm_tn() {
      for (cublasLtMatrixLayout_t l : {a_, b_, d_}) {
        if (l != nullptr) {
          (void)lt_.layout_destroy_(l);
        }
      }
      if (desc_ != nullptr) {
        (void)lt_.desc_destroy_(desc_);
      }
    }
    /// D = A * B^T on stream, with workspace_bytes (at most the planned size) of device workspace.
    void run(const void* a, const void* b, void* d, void* workspace, std::size_t workspace_bytes,
             CUstream stream) const {
      const float alpha = 1.0f;
      const float beta = 0.0f;
      // Column-major, row-major A is A^T (k x m) and B is B^T (k x n), D is D^T (n x m) = (B^T)^T * A^T:
      // op T on B, op N on A (the TN case, the one FP8 layout cuBLASLt supports on Hopper).
      lt_.check(lt_.matmul_(lt_.handle_, desc_, &alpha, b, a_, a, b_, &beta, d, d_, d, d_, &algo_, workspace,
                            workspace_bytes, stream),
                "cublasLtMatmul");
    }

   private:
    friend class cublaslt;
    explicit fp8_gemm_tn(const cublaslt& lt) : lt_(lt) {}
    const cublaslt& lt_;
    cublasLtMatmulDesc_t desc_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr;  // cuBLASLt's A: our B, k x n column-major
    cublasLtMatrixLayout_t b_ = nullptr;  // cuBLASLt's B: our A, k x m column-major
    cublasLtMatrixLayout_t d_ = nullptr;  // C and D: n x m column-major BF16
    cublasLtMatmulAlgo_t algo_{};
  };

  /// Tries libcublasLt.so.13, libcublasLt.so.12, then libcublasLt.so, and creates the handle.
  cublaslt() {
    if (!library_.open({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "cuBLASLt")) {
      return;
    }
    if (!library_.resolve(create_, "cublasLtCreate") || !library_.resolve(destroy_, "cublasLtDestroy") ||
        !library_.resolve(desc_create_, "cublasLtMatmulDescCreate") ||
        !library_.resolve(desc_destroy_, "cublasLtMatmulDescDestroy") ||
        !library_.resolve(desc_set_, "cublasLtMatmulDescSetAttribute") ||
        !library_.resolve(layout_create_, "cublasLtMatrixLayoutCreate") ||
        !library_.resolve(layout_destroy_, "cublasLtMatrixLayoutDestroy") ||
        !library_.resolve(pref_create_, "cublasLtMatmulPreferenceCreate") ||
        !library_.resolve(pref_destroy_, "cublasLtMatmulPreferenceDestroy") ||
        !library_.resolve(pref_set_, "cublasLtMatmulPreferenceSetAttribute") ||
        !library_.resolve(heuristic_, "cublasLtMatmulAlgoGetHeuristic") ||
        !library_.resolve(matmul_, "cublasLtMatmul")) {
      unload();
      return;
    }
    library_.resolve_optional(status_string_, "cublasLtGetStatusString");
    decltype(&cublasLtGetVersion) get_version = nullptr;
    library_.resolve_optional(get_version, "cublasLtGetVersion");
    if (get_version != nullptr) {
      version_ = static_cast<int>(get_version());
    }
    cublasLtHandle_t handle = nullptr;
    if (const cublasStatus_t s = create_(&handle); s != CUBLAS_STATUS_SUCCESS) {
      library_.set_reason(library_.name() + ": cublasLtCreate failed: " + describe_status(status_string_, s));
      unload();
      return;
    }
    handle_ = handle;
  }

  cublaslt(const cublaslt&) = delete;
  cublaslt& operator=(const cublaslt&) = delete;
  /// Destroys the handle, then closes the library.
  ~cublaslt() { unload(); }

  /// Whether the handle is usable.
  [[nodiscard]] bool available() const noexcept { return handle_ != nullptr; }
  /// Why it is not (empty when it is).
  [[nodiscard]] const std::string& unavailable_reason() const noexcept { return library_.reason(); }
  /// The name the library was loaded by, e.g. "libcublasLt.so.13".
  [[nodiscard]] const std::string& library_name() const noexcept { return library_.name(); }
  /// cuBLASLt's version as major * 10000 + minor * 100 + patch, or 0 if unknown.
  [[nodiscard]] int version() const noexcept { return version_; }

  /// Plans D = A * B^T (see fp8_gemm_tn): CUBLAS_COMPUTE_32F, FP32 scale type, the A, B and D scale
  /// pointers left at their default (1.0), beta 0 with C = D. fast_accumulation sets
  /// CUBLASLT_MATMUL_DESC_FAST_ACCUM (the partial sums stay in the tensor cores' accumulators; off, the
  /// default, cuBLASLt may add them in FP32 on the CUDA cores). Throws std::runtime_error when the
  /// heuristic finds no algorithm within workspace_bytes.
  [[nodiscard]] std::unique_ptr<fp8_gemm_tn> plan_fp8_gemm_tn(int m, int n, int k, bool fast_accumulation,
                                                              std::size_t workspace_bytes) const {
    std::unique_ptr<fp8_gemm_tn> p(new fp8_gemm_tn(*this));
    check(desc_create_(&p->desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const std::int32_t op_t = CUBLAS_OP_T;
    const std::int32_t op_n = CUBLAS_OP_N;
    const std::int8_t fast = fast_accumulation ? 1 : 0;
    check(desc_set_(p->desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t), "cublasLtMatmulDescSetAttribute");
    check(desc_set_(p->desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n), "cublasLtMatmulDescSetAttribute");
    check(desc_set_(p->desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), "cublasLtMatmulDescSetAttribute");
    check(layout_create_(&p->a_, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n), k),
          "cublasLtMatrixLayoutCreate");
    check(layout_create_(&p->b_, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(m), k),
          "cublasLtMatrixLayoutCreate");
    check(layout_create_(&p->d_, CUDA_R_16BF, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m), n),
          "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    check(pref_create_(&pref), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t bytes = workspace_bytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t s = pref_set_(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = heuristic_(handle_, p->desc_, p->a_, p->b_, p->d_, p->d_, pref, 1, &result, &found);
    }
    (void)pref_destroy_(pref);
    check(s, "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
      throw std::runtime_error("cuBLASLt: no FP8 algorithm for M = " + std::to_string(m) +
                               ", N = " + std::to_string(n) + ", K = " + std::to_string(k));
    }
    p->algo_ = result.algo;
    return p;
  }

 private:
  void check(cublasStatus_t s, const char* what) const {
    check_status(s, CUBLAS_STATUS_SUCCESS, "cuBLASLt", what, status_string_);
  }

  void unload() noexcept {
    if (handle_ != nullptr) {
      (void)destroy_(handle_);
      handle_ = nullptr;
    }
    library_.close();
  }

  loaded_library library_;
  cublasLtHandle_t handle_ = nullptr;
  int version_ = 0;
  decltype(&cublasLtCreate) create_ = nullptr;
  decltype(&cublasLtDestroy) destroy_ = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create_ = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy_ = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set_ = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create_ = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy_ = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create_ = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy_ = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set_ = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic_ = nullptr;
  decltype(&cublasLtMatmul) matmul_ = nullptr;
  decltype(&cublasLtGetStatusString) status_string_ = nullptr;
};

}  // namespace example::reference
