// Device code of example_heat: Jacobi sweeps of the 2D heat equation, one of them measuring the
// largest change (the residual), and the check that decides on the device whether to go on.
#pragma once
#include <string>
#include <vector>

namespace example::heat_kernels {

inline constexpr const char* source = R"CUDA(
// The solver's progress, in device memory so that device code can decide whether to go on.
// (The host mirrors this layout as heat_state.)
struct solver_state {
  unsigned update_bits;  // largest |u_new - u| of the measured sweep, as float bits (see sweep_residual)
  int sweeps;            // sweeps done so far
  float residual;        // the largest change at the last check
};

// Fixed temperatures on the edges: a hot top edge, a warm left edge, a cool right edge, a cold bottom
// edge. The interior starts cold. (The host reference has the same function.)
__device__ float initial_value(int i, int j, int n) {
  if (i == 0) return 1.0f;
  if (j == 0) return 0.5f;
  if (j == n - 1) return 0.25f;
  return 0.0f;
}

// Writes the initial field into both buffers (the edges never change afterwards) and resets the state.
extern "C" __global__ void init(float* a, float* b, int n, solver_state* state) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < n && j < n) {
    const size_t c = (size_t)i * n + j;
    a[c] = b[c] = initial_value(i, j, n);
  }
  if (i == 0 && j == 0) {
    state->update_bits = 0u;
    state->sweeps = 0;
    state->residual = 0.0f;
  }
}

// One Jacobi step of the 5-point stencil at interior point c: the mean of the four neighbours,
// added in this order (the host reference adds in the same order, so the results agree bit for bit).
__device__ __forceinline__ float stencil(const float* __restrict__ u, size_t c, int n) {
  return 0.25f * ((u[c - n] + u[c + n]) + (u[c - 1] + u[c + 1]));
}

// A sweep over the interior, from u into v. Blocks of 32 x 8 threads, one point each.
extern "C" __global__ void __launch_bounds__(256) sweep(const float* __restrict__ u, float* __restrict__ v, int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i > 0 && i < n - 1 && j > 0 && j < n - 1) {
    const size_t c = (size_t)i * n + j;
    v[c] = stencil(u, c, n);
  }
}

// The same sweep, also measuring the largest change: each warp takes the max with shuffles, the
// block's eight warps meet in shared memory, and one thread per block folds the block's max into
// state->update_bits with atomicMax on the float's bits (for floats >= 0 the bit patterns are
// ordered like the values). Blocks that changed nothing skip the atomic.
extern "C" __global__ void __launch_bounds__(256)
sweep_residual(const float* __restrict__ u, float* __restrict__ v, int n, solver_state* state) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  float change = 0.0f;
  if (i > 0 && i < n - 1 && j > 0 && j < n - 1) {
    const size_t c = (size_t)i * n + j;
    const float next = stencil(u, c, n);
    v[c] = next;
    change = fabsf(next - u[c]);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    change = fmaxf(change, __shfl_xor_sync(0xffffffffu, change, offset));
  }
  __shared__ float warp_max[8];
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  if (t % 32 == 0) warp_max[t / 32] = change;
  __syncthreads();
  if (t < 32) {
    change = t < 8 ? warp_max[t] : 0.0f;
    for (int offset = 4; offset > 0; offset /= 2) {
      change = fmaxf(change, __shfl_xor_sync(0xffffffffu, change, offset));
    }
    if (t == 0 && change > 0.0f) atomicMax(&state->update_bits, __float_as_uint(change));
  }
}

// After a round of k sweeps (one thread): records the residual, clears the max for the next round,
// counts the sweeps, and says whether another round is needed.
__device__ bool finish_round(solver_state* state, int k, float tolerance, int max_sweeps) {
  const float residual = __uint_as_float(state->update_bits);
  state->update_bits = 0u;
  state->residual = residual;
  state->sweeps += k;
  return residual > tolerance && state->sweeps < max_sweeps;
}

// The host-driven loop's check: the host reads the state back and decides.
extern "C" __global__ void check(solver_state* state, int k, float tolerance, int max_sweeps) {
  (void)finish_round(state, k, tolerance, max_sweeps);
}

// NVRTC's built-in headers do not declare the device side of conditional nodes (nvcc gets it from
// cuda_device_runtime_api.h, which NVRTC does not ship). The call is a builtin that ptxas resolves
// itself, without the device runtime library, so this declaration is all it takes.
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);

// The graph's check: the device decides. The value set here is what the conditional WHILE node
// tests when this body graph ends: non-zero runs the body again, zero leaves the loop.
extern "C" __global__ void check_graph(cudaGraphConditionalHandle loop, solver_state* state, int k, float tolerance,
                                       int max_sweeps) {
  cudaGraphSetConditional(loop, finish_round(state, k, tolerance, max_sweeps) ? 1u : 0u);
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::heat_kernels
