// NVVM IR written by hand for the libNVVM tests of both tiers (issue 34 part 9): typed pointers and
// `!nvvm.annotations`, the NVVM IR 2.0 form that libNVVM reads for every architecture (opaque pointers
// only from compute_100 on).
#pragma once

namespace cudrv::test {

// The 64-bit data layout the NVVM IR specification requires (nvvmVerifyProgram refuses another).
#define CUDRV_TEST_NVVM_HEADER                                                                             \
  "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-" \
  "f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"                                     \
  "target triple = \"nvptx64-nvidia-cuda\"\n"

// y[i] = a * x[i] + y[i] for i < n, one element a thread. The kernel is in @llvm.used, or nvJitLink
// drops it when it links the LTO-IR of this module. tests/cpu/nvvm_bitcode.inc holds this text as
// bitcode.
inline constexpr const char* nvvm_saxpy_ir = CUDRV_TEST_NVVM_HEADER R"(
@llvm.used = appending global [1 x i8*] [i8* bitcast (void (float, float*, float*, i32)* @saxpy to i8*)], section "llvm.metadata"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define void @saxpy(float %a, float* %x, float* %y, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %inside = icmp slt i32 %i, %n
  br i1 %inside, label %body, label %done
body:
  %idx = sext i32 %i to i64
  %px = getelementptr float, float* %x, i64 %idx
  %py = getelementptr float, float* %y, i64 %idx
  %vx = load float, float* %px
  %vy = load float, float* %py
  %ax = fmul float %a, %vx
  %r = fadd float %ax, %vy
  store float %r, float* %py
  br label %done
done:
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (float, float*, float*, i32)* @saxpy, !"kernel", i32 1}
!nvvmir.version = !{!1}
!1 = !{i32 2, i32 0}
)";

// x[i] = sinf(x[i]) for i < n through libdevice's __nv_sinf: needs nvvm_options::libdevice.
inline constexpr const char* nvvm_sines_ir = CUDRV_TEST_NVVM_HEADER R"(
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare float @__nv_sinf(float)

define void @sines(float* %x, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %inside = icmp slt i32 %i, %n
  br i1 %inside, label %body, label %done
body:
  %idx = sext i32 %i to i64
  %p = getelementptr float, float* %x, i64 %idx
  %v = load float, float* %p
  %s = call float @__nv_sinf(float %v)
  store float %s, float* %p
  br label %done
done:
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (float*, i32)* @sines, !"kernel", i32 1}
!nvvmir.version = !{!1}
!1 = !{i32 2, i32 0}
)";

// A kernel with the ptx_kernel calling convention instead of the annotation: out[0] = twice(in).
// twice() is defined in nvvm_twice_ir, a second module.
inline constexpr const char* nvvm_caller_ir = CUDRV_TEST_NVVM_HEADER R"(
declare i32 @twice(i32)

define ptx_kernel void @caller(i32* %out, i32 %in) {
entry:
  %r = call i32 @twice(i32 %in)
  store i32 %r, i32* %out
  ret void
}

!nvvmir.version = !{!0}
!0 = !{i32 2, i32 0}
)";

inline constexpr const char* nvvm_twice_ir = CUDRV_TEST_NVVM_HEADER R"(
define i32 @twice(i32 %v) {
entry:
  %r = shl i32 %v, 1
  ret i32 %r
}

!nvvmir.version = !{!0}
!0 = !{i32 2, i32 0}
)";

#undef CUDRV_TEST_NVVM_HEADER

}  // namespace cudrv::test
