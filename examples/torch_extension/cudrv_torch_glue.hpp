// The part of the PyTorch example that needs no PyTorch: the kernel's source and how cudrv compiles it
// (NVRTC through the compile cache), its launch configuration, and the DLPack helpers of the extension
// (a deleter that counts its calls, the capsule names of DLPack's Python protocol). cudrv_op.cpp uses
// it inside the extension; tests/cpu/test_torch_glue.cpp checks it on a machine without PyTorch or a GPU.
// The DLPack part compiles only where <dlpack/dlpack.h> is found (CUDRV_TORCH_GLUE_DLPACK).
#pragma once

#include <cudrv/compile_cache.hpp>
#include <cudrv/error.hpp>
#include <cudrv/launch_config.hpp>
#include <cudrv/program.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#if defined(CUDRV_TORCH_GLUE_DLPACK)
#include <cudrv/dlpack.hpp>
#endif

namespace cudrv_torch {

// The kernel's CUDA C++ source: axpby_kernel.cuh, stringified (plain_op.cu compiles the same text).
#define CUDRV_TORCH_KERNEL(...) #__VA_ARGS__
inline constexpr const char* kernel_source =
#include "axpby_kernel.cuh"
    ;
#undef CUDRV_TORCH_KERNEL

/// The kernel's name (extern "C": not mangled) and its signature, for a typed cudrv kernel.
inline constexpr const char* kernel_name = "cudrv_axpby";
using axpby_signature = void(const float*, const float*, float*, float, float, unsigned long long);

/// NVRTC options for arch ("sm_90"): C++17, and no contraction of a * x + b * y into an FMA, so that
/// the result is the two rounded products' rounded sum, as PyTorch's `alpha * x + beta * y` computes
/// it and as plain_op.cu compiles it (nvcc -fmad=false): the three agree bit for bit.
inline cudrv::compile_options compile_options_for(std::string arch) {
  cudrv::compile_options options;
  options.arch = std::move(arch);
  options.cpp_standard = "c++17";
  options.fmad = false;
  return options;
}

/// Compiles the kernel for arch with NVRTC through cache: a second call (in this process or a later
/// one, with the same cache directory) reads the cubin instead of compiling.
inline cudrv::compile_result compile_kernel(cudrv::compile_cache& cache, const std::string& arch,
                                            cudrv::code_kind kind = cudrv::code_kind::cubin) {
  const cudrv::program prog("cudrv_axpby.cu", kernel_source);
  return cache.compile(prog, kind, compile_options_for(arch));
}

/// Threads per block of every launch (both builds).
inline constexpr unsigned block_size = 256;
/// The most blocks of a launch: beyond, the grid-stride loop covers the rest.
inline constexpr unsigned max_blocks = 65535;

/// The grid for n elements (n > 0): one element per thread up to max_blocks blocks.
inline unsigned grid_for(std::size_t n) noexcept {
  return static_cast<unsigned>(std::min<std::size_t>((n + block_size - 1) / block_size, max_blocks));
}

/// The launch configuration for n elements (n > 0), as plain_op.cu launches it.
inline cudrv::launch_config config_for(std::size_t n) noexcept {
  return cudrv::launch_config{.grid = grid_for(n), .block = block_size};
}

#if defined(CUDRV_TORCH_GLUE_DLPACK)

/// The PyCapsule names of DLPack's Python protocol for the managed struct M, before and after a
/// consumer takes the tensor.
template <class M>
constexpr const char* capsule_name() noexcept {
  return cudrv::detail::is_dlpack_versioned_v<M> ? "dltensor_versioned" : "dltensor";
}
template <class M>
constexpr const char* used_capsule_name() noexcept {
  return cudrv::detail::is_dlpack_versioned_v<M> ? "used_dltensor_versioned" : "used_dltensor";
}

namespace detail {
// A managed tensor that stands in front of another: the same DLTensor (its shape and strides stay in
// the inner tensor, which lives until this one is deleted), a counter, and the inner tensor to delete.
template <class M>
struct counting_manager {
  M outer{};
  M* inner = nullptr;
  std::shared_ptr<std::atomic<int>> calls;

  static void deleter(M* self) noexcept {
    auto* manager = static_cast<counting_manager*>(self->manager_ctx);
    manager->calls->fetch_add(1, std::memory_order_relaxed);
    M* inner = manager->inner;
    delete manager;
    if (inner->deleter != nullptr) {
      inner->deleter(inner);
    }
  }
};
}  // namespace detail

/// Puts a counter in front of tensor's deleter: the returned tensor describes the same memory (the
/// DLTensor, and for the versioned struct the version and flags, are copied), and its deleter adds one
/// to *calls, then calls the original deleter. Whoever ends up owning the tensor (a consumer, a
/// cudrv::dlpack_tensor, a capsule that was never consumed) calls it, so *calls says how many times
/// the producer's deleter ran: exactly once per tensor handed out.
/// @throws cudrv::invalid_argument_error for an empty tensor or a null counter (tensor is then deleted)
template <class M>
cudrv::dlpack_ptr<M> count_deleter(cudrv::dlpack_ptr<M> tensor, std::shared_ptr<std::atomic<int>> calls) {
  if (!tensor || !calls) {
    throw cudrv::invalid_argument_error("cudrv_torch::count_deleter",
                                        tensor ? "the counter is null" : "the managed tensor is null");
  }
  auto manager = std::make_unique<detail::counting_manager<M>>();
  manager->outer = *tensor.get();
  manager->calls = std::move(calls);
  manager->outer.manager_ctx = manager.get();
  manager->outer.deleter = &detail::counting_manager<M>::deleter;
  manager->inner = tensor.release();
  return cudrv::dlpack_ptr<M>(&manager.release()->outer);
}

#endif  // CUDRV_TORCH_GLUE_DLPACK

}  // namespace cudrv_torch
