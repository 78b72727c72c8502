/// @file launch.hpp
/// @brief Kernel launches (cudrv::launch) on a stream, with arguments marshalled on the stack,
/// checked at compile time (typed kernels) or against the kernel's parameter layout (untyped kernels).
///
/// Layer: execution (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "cudrv/kernel.hpp"
#include "cudrv/launch_config.hpp"
#include "cudrv/stream.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime_api.h>
#endif

namespace cudrv {

// Arguments are addressed with __builtin_addressof (what std::addressof is built on) to keep
// <memory>, which costs 0.7 s of compile time per translation unit, out of this header.
namespace detail {
/// @brief The launch itself (internal): `cuLaunchKernel`, or `cuLaunchKernelEx` when the configuration
/// needs launch attributes. A refusal throws @ref launch_error with a diagnosis.
void launch_kernel(CUstream stream, const launch_config& config, CUkernel kernel, void** args,
                   const kernel_signature* signature);

// Converts one argument to its parameter type into a local of this frame, records its address, and
// recurses; the last frame hands the pointer array to the sink (a stream launch or a graph node).
// Every converted value lives until the sink has returned (the driver copies the values).
template <class Sink, class P, class... Ps, class A, class... As>
inline void marshal_converted(Sink& sink, void** all, void** next, A&& arg, As&&... rest) {
  std::remove_cv_t<P> value(static_cast<P>(std::forward<A>(arg)));
  *next = static_cast<void*>(__builtin_addressof(value));
  if constexpr (sizeof...(Ps) == 0) {
    sink(all);
  } else {
    marshal_converted<Sink, Ps...>(sink, all, next + 1, std::forward<As>(rest)...);
  }
}

// Typed kernels: converts the arguments to Params... on the stack, then calls sink(void** args).
template <class... Params, class Sink, class... Args>
inline void marshal_typed(Sink& sink, Args&&... args) {
  static_assert(sizeof...(Args) == sizeof...(Params),
                "cudrv::launch: the number of arguments differs from the kernel's parameters");
  static_assert((std::is_convertible_v<Args&&, Params> && ...),
                "cudrv::launch: an argument does not convert to the kernel's parameter type");
  if constexpr (sizeof...(Params) == 0) {
    sink(static_cast<void**>(nullptr));
  } else {
    void* pointers[sizeof...(Params)];
    marshal_converted<Sink, Params...>(sink, pointers, pointers, std::forward<Args>(args)...);
  }
}

// The check of an untyped launch: inline when the library cached the layout, otherwise the driver is
// asked in the target's context.
inline void check_arguments(const kernel_base& kernel, const std::size_t* sizes, std::size_t count,
                            query_target target) {
  const kernel_signature* sig = kernel.cached_signature();
  if (sig != nullptr && sig->parameters_known) [[likely]] {
    if (sig->params.size() != count) [[unlikely]] {
      throw_argument_count(kernel.native_handle(), sig, sig->params.size(), count);
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (sig->params[i].size != sizes[i]) [[unlikely]] {
        throw_argument_size(kernel.native_handle(), sig, i, sig->params[i].size, sizes[i]);
      }
    }
    return;
  }
  check_arguments_slow(kernel.native_handle(), sig, sizes, count, target);
}

// Untyped kernels: checks the argument sizes against the kernel, then calls sink(void** args) with
// pointers to the arguments themselves.
template <class Sink, class... Args>
inline void marshal_untyped(Sink& sink, const kernel_base& kernel, query_target target, const Args&... args) {
  static_assert((std::is_trivially_copyable_v<Args> && ...),
                "cudrv::launch: kernel arguments must be trivially copyable (pass buffer.get(), not the buffer)");
  static_assert(!(std::is_array_v<Args> || ...),
                "cudrv::launch: an array argument would be passed by value, not as a pointer: pass a pointer "
                "(std::data(array)), or wrap the array in a struct");
  static_assert(!(std::is_null_pointer_v<Args> || ...),
                "cudrv::launch: pass a typed null pointer (static_cast<T*>(nullptr)), not nullptr");
  if constexpr (sizeof...(Args) == 0) {
    check_arguments(kernel, nullptr, 0, target);
    sink(static_cast<void**>(nullptr));
  } else {
    static constexpr std::size_t sizes[] = {sizeof(Args)...};
    check_arguments(kernel, sizes, sizeof...(Args), target);
    void* pointers[] = {const_cast<void*>(static_cast<const void*>(__builtin_addressof(args)))...};
    sink(pointers);
  }
}

template <class Signature>
struct typed_marshal;
template <class... Params>
struct typed_marshal<void(Params...)> {
  template <class Sink, class... Args>
  static void run(Sink& sink, Args&&... args) {
    marshal_typed<Params...>(sink, std::forward<Args>(args)...);
  }
};

// Any kernel handle: typed ones (a signature_type) convert the arguments, untyped ones check them.
template <class K, class Sink, class... Args>
inline void marshal(Sink& sink, const K& kernel, query_target target, Args&&... args) {
  if constexpr (requires { typename K::signature_type; }) {
    (void)target;
    typed_marshal<typename K::signature_type>::run(sink, std::forward<Args>(args)...);
  } else {
    marshal_untyped(sink, kernel, target, args...);
  }
}
}  // namespace detail

/// @brief Launches a kernel on @p stream: any kernel handle (@ref kernel, @ref kernel_ref,
/// @ref typed_kernel, @ref typed_kernel_ref) with its arguments, marshalled on the stack (no heap
/// allocation, no context switch, no query).
///
/// Typed kernels convert the arguments to the parameter types with the implicit conversions of a
/// function call, checked at compile time. Untyped kernels (from PTX or a cubin by name) pass each
/// argument's bytes as the corresponding parameter, after checking their number and sizes against the
/// kernel's parameters: pass `std::size_t{n}` to a `size_t` parameter, not `n` as an `int`. With a
/// kernel from a @ref library the check compares against the layout cached when the kernel was
/// obtained (a few instructions); for an adopted handle it asks the driver in the stream's context.
///
/// The kernel runs in the context of @p stream (for the legacy default stream, the current context).
/// A launch the driver refuses throws @ref launch_error naming the limit exceeded, with the numbers;
/// faults while the kernel runs surface at the next synchronisation, as for any asynchronous work.
///
/// @code
/// auto add = lib.get_kernel<void(const float*, const float*, float*, int)>("vector_add");
/// cudrv::launch(stream, {.grid = (n + 255) / 256, .block = 256}, add, a.get(), b.get(), c.get(), n);
///
/// cudrv::kernel k = lib.get_kernel("scale");              // extern "C" __global__ void scale(float*, float, int)
/// cudrv::launch(stream, {.grid = blocks, .block = 256}, k, data.get(), 0.5f, n);
/// // cudrv::launch(stream, cfg, k, data.get(), 0.5);      // throws launch_error: 2 arguments given,
/// //                                                      //   but the kernel has 3 parameters
/// @endcode
/// @throws invalid_argument_error for an empty (moved-from) stream; launch_error (source
///   @ref error_source::cudrv) for a wrong argument count or size of an untyped kernel, naming the
///   kernel, the parameter index, the expected and given sizes; launch_error (source
///   @ref error_source::driver) when the driver refuses the launch
template <class K, class... Args>
requires kernel_handle<K>
void launch(stream_ref stream, const launch_config& config, const K& kernel, Args&&... args) {
  auto sink = [&](void** pointers) {
    detail::launch_kernel(stream.native_handle(), config, kernel.native_handle(), pointers, kernel.cached_signature());
  };
  detail::marshal(sink, kernel, detail::query_target{stream.native_handle(), nullptr}, std::forward<Args>(args)...);
}

#if defined(__CUDACC__) || defined(CUDRV_DOXYGEN)
namespace detail {
[[noreturn]] void throw_runtime_error(int code, const char* name, const char* description, const char* api,
                                      std::string context);
}  // namespace detail

/// @brief The kernel of a `__global__` function compiled by nvcc in this program (`cudaGetKernel`),
/// typed by its signature. Only in translation units compiled by nvcc.
///
/// @code
/// __global__ void fill(int* out, int value, int n);
/// auto k = cudrv::get_kernel(fill);                  // typed_kernel_ref<void(int*, int, int)>
/// cudrv::launch(stream, {.grid = 4, .block = 256}, k, out.get(), 7, 1024);
/// @endcode
/// @throws error with @ref error_source::runtime when the runtime cannot find the kernel
template <class... Params>
[[nodiscard]] typed_kernel_ref<void(Params...)> get_kernel(void (*function)(Params...)) {
  cudaKernel_t handle = nullptr;
  cudaError_t status = ::cudaGetKernel(&handle, function);
  if (status != cudaSuccess) {
    detail::throw_runtime_error(static_cast<int>(status), ::cudaGetErrorName(status), ::cudaGetErrorString(status),
                                "cudaGetKernel", "a __global__ function of this program");
  }
  return typed_kernel_ref<void(Params...)>::from_native_handle(reinterpret_cast<CUkernel>(handle));
}

/// @brief Launches a `__global__` function compiled by nvcc in this program, through the same path
/// as every other launch. Looks the kernel up on each call; keep the result of @ref get_kernel to
/// launch it repeatedly.
template <class... Params, class... Args>
void launch(stream_ref stream, const launch_config& config, void (*function)(Params...), Args&&... args) {
  launch(stream, config, get_kernel(function), std::forward<Args>(args)...);
}
#endif

}  // namespace cudrv
