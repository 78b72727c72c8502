// The argument checks of the example's operator, shared by its two builds (cudrv_op.cpp and
// plain_op.cu), so that both refuse the same tensors with the same messages. Needs PyTorch only.
#pragma once

#include <torch/extension.h>

namespace cudrv_torch {

/// Checks that t can be an operand of axpby next to first (the first operand): a CUDA tensor, float32,
/// contiguous, on first's device and of first's shape. TORCH_CHECK raises a RuntimeError in Python.
inline void check_operand(const char* op, const char* name, const torch::Tensor& t, const torch::Tensor& first) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor; it is on ", t.device());
  TORCH_CHECK(t.scalar_type() == at::kFloat, op, ": ", name, " must be float32; it is ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (call .contiguous() first); its strides are ",
              t.strides(), " for the sizes ", t.sizes());
  TORCH_CHECK(t.device() == first.device(), op, ": ", name, " is on ", t.device(), " but x is on ", first.device(),
              "; every operand must be on the same device");
  TORCH_CHECK(t.sizes() == first.sizes(), op, ": ", name, " has the shape ", t.sizes(), " but x has the shape ",
              first.sizes(), "; the shapes must be equal (no broadcasting)");
}

/// Checks the three operands of out = alpha * x + beta * y.
inline void check_operands(const char* op, const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& out) {
  check_operand(op, "x", x, x);
  check_operand(op, "y", y, x);
  check_operand(op, "out", out, x);
}

}  // namespace cudrv_torch
