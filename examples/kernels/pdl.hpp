// Device code of example_pdl (examples/pdl.cpp), compiled at run time by NVRTC.
#pragma once

#include <string>
#include <vector>

namespace example::pdl_kernels {

// produce writes buf[i] = base(i) + iteration * step(i): every pair of the chain leaves different
// values, so a consumer that read the buffer too early (the previous iteration's values, or the
// poison) would be caught by the host.
//
// consume first does work that does not depend on the producer (its prologue: a per-thread weight,
// `rounds` rounds of an integer hash), then waits for the producer's grid (griddepcontrol.wait:
// until the grids it depends on have completed and their writes are visible), then adds
// weight * buf[i] to acc[i].
//
// The two PTX instructions of programmatic dependent launch (sm_90):
//   griddepcontrol.launch_dependents   this block no longer holds back the next kernel's launch: once
//                                      every block of the grid has said so (or exited), a kernel
//                                      launched with programmatic stream serialization may start.
//   griddepcontrol.wait                block until the grids this one depends on have completed and
//                                      flushed their memory. Returns at once when the kernel was
//                                      launched normally (the stream already waited for them).
// Both are no-ops without a dependent launch, so the same kernels serve both modes of the example.
//
// gate holds the stream until the host sets flags[0] (mapped pinned memory), so that the host can
// queue a whole chain before the GPU starts it; flags[1] = 1 says it gave up after timeout_ns.
inline constexpr const char* source = R"CUDA(
__device__ __forceinline__ unsigned base_value(unsigned i) { return i * 0x9E3779B9u; }
__device__ __forceinline__ unsigned step_value(unsigned i) { return (i * 0x85EBCA6Bu) | 1u; }

__device__ __forceinline__ unsigned weight(unsigned t, unsigned rounds) {
  unsigned w = t;
  for (unsigned r = 0; r < rounds; ++r) {
    w ^= w >> 16;
    w *= 0x7FEB352Du;
    w ^= w >> 15;
    w *= 0x846CA68Bu;
    w ^= w >> 16;
  }
  return w | 1u;
}

extern "C" __global__ void produce(unsigned* buf, unsigned n, unsigned iteration) {
  // Nothing the consumer does before its griddepcontrol.wait needs this kernel's output, so let it
  // launch now: its blocks fit beside ours, and its launch and prologue overlap our stores.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const unsigned stride = gridDim.x * blockDim.x;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    buf[i] = base_value(i) + iteration * step_value(i);
  }
}

extern "C" __global__ void consume(const unsigned* buf, unsigned* __restrict__ acc, unsigned n, unsigned rounds) {
  const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned stride = gridDim.x * blockDim.x;
  const unsigned w = weight(first, rounds);  // the prologue: independent of the producer
  asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll 4
  for (unsigned i = first; i < n; i += stride) {
    // __ldcg reads through L2 only: the producer wrote buf while this grid was already running, so the
    // read-only (non-coherent) cache path that const __restrict__ would allow is not for it.
    acc[i] += w * __ldcg(buf + i);
  }
}

extern "C" __global__ void gate(unsigned* flags, unsigned long long timeout_ns) {
  const volatile unsigned* go = flags;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*go == 0) {
    __nanosleep(500);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      flags[1] = 1;
      break;
    }
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::pdl_kernels
