// The reference of the example's launch-cost comparison: the same kernel (axpby_kernel.cuh) in a plain
// PyTorch CUDA extension, compiled by nvcc through torch.utils.cpp_extension (with -fmad=false, as
// cudrv compiles it) and launched with <<<>>> on PyTorch's current stream, checked as PyTorch's own
// extensions do (C10_CUDA_KERNEL_LAUNCH_CHECK after each launch; cudrv checks each launch's status too).
// Same operand checks (operand_checks.hpp) and launch configuration (cudrv_torch_glue.hpp's values).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "operand_checks.hpp"

#define CUDRV_TORCH_KERNEL(...) __VA_ARGS__
#include "axpby_kernel.cuh"
#undef CUDRV_TORCH_KERNEL

namespace {

// As cudrv_torch::block_size and cudrv_torch::max_blocks (cudrv_torch_glue.hpp, which needs C++20 and
// cudrv's headers, so nvcc does not read it here).
constexpr unsigned block_size = 256;
constexpr unsigned max_blocks = 65535;

unsigned grid_for(std::int64_t n) {
  return static_cast<unsigned>(std::min<std::int64_t>((n + block_size - 1) / block_size, max_blocks));
}

torch::Tensor axpby_out(const torch::Tensor& x, const torch::Tensor& y, torch::Tensor out, double alpha, double beta) {
  cudrv_torch::check_operands("plain_torch.axpby_out", x, y, out);
  const c10::cuda::CUDAGuard guard(x.device());
  const std::int64_t n = x.numel();
  if (n > 0) {
    cudrv_axpby<<<grid_for(n), block_size, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(alpha),
        static_cast<float>(beta), static_cast<unsigned long long>(n));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return out;
}

torch::Tensor axpby(const torch::Tensor& x, const torch::Tensor& y, double alpha, double beta) {
  cudrv_torch::check_operand("plain_torch.axpby", "x", x, x);
  return axpby_out(x, y, torch::empty(x.sizes(), x.options()), alpha, beta);
}

double bench_launches(const torch::Tensor& x, const torch::Tensor& y, torch::Tensor out, double alpha, double beta,
                      std::int64_t iterations) {
  cudrv_torch::check_operands("plain_torch.bench_launches", x, y, out);
  TORCH_CHECK(iterations > 0 && x.numel() > 0, "plain_torch.bench_launches: needs iterations > 0 and elements");
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const std::int64_t n = x.numel();
  const unsigned grid = grid_for(n);
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const auto a = static_cast<float>(alpha);
  const auto b = static_cast<float>(beta);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) {
    cudrv_axpby<<<grid, block_size, 0, stream>>>(px, py, po, a, b, static_cast<unsigned long long>(n));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "out = alpha * x + beta * y, the same kernel compiled by nvcc and launched with <<<>>>";
  m.def("axpby", &axpby, pybind11::arg("x"), pybind11::arg("y"), pybind11::arg("alpha"), pybind11::arg("beta"));
  m.def("axpby_out", &axpby_out, pybind11::arg("x"), pybind11::arg("y"), pybind11::arg("out"), pybind11::arg("alpha"),
        pybind11::arg("beta"));
  m.def("bench_launches", &bench_launches, pybind11::arg("x"), pybind11::arg("y"), pybind11::arg("out"),
        pybind11::arg("alpha"), pybind11::arg("beta"), pybind11::arg("iterations"));
}
