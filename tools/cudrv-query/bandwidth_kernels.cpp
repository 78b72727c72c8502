// cudrv-query --bandwidth: the kernels, as PTX the driver JIT-compiles for each device (as --bench's
// empty kernel), so that the tool needs no nvcc to build.
//
//  cudrv_bw_spin(flag, timeout_clocks, timed_out)
//                                            one thread spins until *flag (host memory) is non-zero or
//                                            the timeout passes: it blocks its stream while a sample is
//                                            enqueued. On the timeout it writes 1 to *timed_out (host
//                                            memory too), so that the host can refuse the sample.
//  cudrv_bw_copy(threads, loops, dst, src, chunk)
//                                            the striding copy of large buffers: thread t copies the
//                                            16-byte elements t, t + threads, ... (chunk of them),
//                                            twelve loads in flight before twelve stores, `loops` times.
//  cudrv_bw_copy_small(loops, dst, src)      one 16-byte element per thread, `loops` times (buffers
//                                            under 64 MiB), loads and stores cached in L2 only.
//  cudrv_bw_copy_split(loops, dst, src)      as copy_small, but odd warps copy src to dst and even warps
//                                            dst to src: both directions at once.
//  cudrv_bw_chase(data, accesses, target)    in block `target` only, one thread follows `accesses` links
//                                            of a pointer chain from data (the dependent loads of a
//                                            latency test); traps if it ever reads a null link.
#include <string>

#include "bandwidth_detail.hpp"

namespace cudrv_query::detail {

namespace {

constexpr int copy_unroll = 12;

constexpr const char* ptx_head = R"(
.version 6.0
.target sm_50
.address_size 64

.visible .entry cudrv_bw_spin(.param .u64 flag, .param .u64 timeout, .param .u64 timed_out)
{
  .reg .pred %p<3>;
  .reg .b32 %v, %one;
  .reg .b64 %f, %t, %now, %end, %out;
  ld.param.u64 %f, [flag];
  ld.param.u64 %t, [timeout];
  ld.param.u64 %out, [timed_out];
  mov.u64 %now, %clock64;
  add.u64 %end, %now, %t;
SPIN:
  ld.volatile.u32 %v, [%f];
  setp.ne.u32 %p1, %v, 0;
  @%p1 bra DONE;
  mov.u64 %now, %clock64;
  setp.lt.u64 %p2, %now, %end;
  @%p2 bra SPIN;
  mov.u32 %one, 1;
  st.volatile.u32 [%out], %one;
  membar.sys;
DONE:
  ret;
}

.visible .entry cudrv_bw_copy_small(.param .u64 loops, .param .u64 dst, .param .u64 src)
{
  .reg .pred %p;
  .reg .b32 %a<4>, %idx, %nt, %ct, %tx;
  .reg .b64 %n, %i, %d, %s, %off;
  ld.param.u64 %n, [loops];
  ld.param.u64 %d, [dst];
  ld.param.u64 %s, [src];
  cvta.to.global.u64 %d, %d;
  cvta.to.global.u64 %s, %s;
  mov.u32 %ct, %ctaid.x;
  mov.u32 %nt, %ntid.x;
  mov.u32 %tx, %tid.x;
  mad.lo.u32 %idx, %ct, %nt, %tx;
  mul.wide.u32 %off, %idx, 16;
  add.u64 %d, %d, %off;
  add.u64 %s, %s, %off;
  mov.u64 %i, 0;
LOOP:
  setp.ge.u64 %p, %i, %n;
  @%p bra END;
  ld.global.cg.v4.u32 {%a0, %a1, %a2, %a3}, [%s];
  st.global.cg.v4.u32 [%d], {%a0, %a1, %a2, %a3};
  add.u64 %i, %i, 1;
  bra LOOP;
END:
  ret;
}

.visible .entry cudrv_bw_copy_split(.param .u64 loops, .param .u64 dst, .param .u64 src)
{
  .reg .pred %p, %odd;
  .reg .b32 %a<4>, %idx, %nt, %ct, %tx, %warp;
  .reg .b64 %n, %i, %d, %s, %from, %to, %off;
  ld.param.u64 %n, [loops];
  ld.param.u64 %d, [dst];
  ld.param.u64 %s, [src];
  cvta.to.global.u64 %d, %d;
  cvta.to.global.u64 %s, %s;
  mov.u32 %ct, %ctaid.x;
  mov.u32 %nt, %ntid.x;
  mov.u32 %tx, %tid.x;
  mad.lo.u32 %idx, %ct, %nt, %tx;
  shr.u32 %warp, %idx, 5;
  and.b32 %warp, %warp, 1;
  setp.ne.u32 %odd, %warp, 0;
  mul.wide.u32 %off, %idx, 16;
  add.u64 %d, %d, %off;
  add.u64 %s, %s, %off;
  selp.b64 %from, %s, %d, %odd;
  selp.b64 %to, %d, %s, %odd;
  mov.u64 %i, 0;
LOOP:
  setp.ge.u64 %p, %i, %n;
  @%p bra END;
  ld.global.cg.v4.u32 {%a0, %a1, %a2, %a3}, [%from];
  st.global.cg.v4.u32 [%to], {%a0, %a1, %a2, %a3};
  add.u64 %i, %i, 1;
  bra LOOP;
END:
  ret;
}

.visible .entry cudrv_bw_chase(.param .u64 data, .param .u32 accesses, .param .u32 target)
{
  .reg .pred %p;
  .reg .b32 %ct, %tg, %n, %i;
  .reg .b64 %ptr;
  mov.u32 %ct, %ctaid.x;
  ld.param.u32 %tg, [target];
  setp.ne.u32 %p, %ct, %tg;
  @%p bra END;
  ld.param.u64 %ptr, [data];
  ld.param.u32 %n, [accesses];
  mov.u32 %i, 0;
LOOP:
  setp.ge.u32 %p, %i, %n;
  @%p bra CHECK;
  ld.global.u64 %ptr, [%ptr];
  add.u32 %i, %i, 1;
  bra LOOP;
CHECK:
  setp.eq.u64 %p, %ptr, 0;
  @%p trap;
END:
  ret;
}
)";

/// The striding copy: the twelve loads and twelve stores of its main loop are written out here.
std::string striding_copy_ptx() {
  std::string loads;
  std::string stores;
  for (int k = 0; k < copy_unroll; ++k) {
    const std::string regs = "{%r" + std::to_string(4 * k) + ", %r" + std::to_string(4 * k + 1) + ", %r" +
                             std::to_string(4 * k + 2) + ", %r" + std::to_string(4 * k + 3) + "}";
    loads += "  ld.global.v4.u32 " + regs + ", [%cs];\n  add.u64 %cs, %cs, %stride;\n";
    stores += "  st.global.v4.u32 [%cd], " + regs + ";\n  add.u64 %cd, %cd, %stride;\n";
  }
  return R"(
.visible .entry cudrv_bw_copy(.param .u64 threads, .param .u64 loops, .param .u64 dst, .param .u64 src,
                              .param .u64 chunk)
{
  .reg .pred %p;
  .reg .b32 %r<)" +
         std::to_string(4 * copy_unroll) +
         R"(>, %ct, %nt, %tx, %idx;
  .reg .b64 %threads, %n, %i, %d, %s, %chunk, %stride, %off, %big, %bigend, %end, %cd, %cs;
  ld.param.u64 %threads, [threads];
  ld.param.u64 %n, [loops];
  ld.param.u64 %d, [dst];
  ld.param.u64 %s, [src];
  ld.param.u64 %chunk, [chunk];
  cvta.to.global.u64 %d, %d;
  cvta.to.global.u64 %s, %s;
  mov.u32 %ct, %ctaid.x;
  mov.u32 %nt, %ntid.x;
  mov.u32 %tx, %tid.x;
  mad.lo.u32 %idx, %ct, %nt, %tx;
  mul.wide.u32 %off, %idx, 16;
  add.u64 %d, %d, %off;
  add.u64 %s, %s, %off;
  shl.b64 %stride, %threads, 4;
  div.u64 %big, %chunk, )" +
         std::to_string(copy_unroll) + R"(;
  mul.lo.u64 %big, %big, )" +
         std::to_string(copy_unroll) + R"(;
  mul.lo.u64 %bigend, %big, %stride;
  add.u64 %bigend, %bigend, %d;
  mul.lo.u64 %end, %chunk, %stride;
  add.u64 %end, %end, %d;
  mov.u64 %i, 0;
OUTER:
  setp.ge.u64 %p, %i, %n;
  @%p bra DONE;
  mov.u64 %cd, %d;
  mov.u64 %cs, %s;
BIG:
  setp.ge.u64 %p, %cd, %bigend;
  @%p bra REST;
)" + loads +
         stores +
         R"(  bra BIG;
REST:
  setp.ge.u64 %p, %cd, %end;
  @%p bra NEXT;
  ld.global.v4.u32 {%r0, %r1, %r2, %r3}, [%cs];
  st.global.v4.u32 [%cd], {%r0, %r1, %r2, %r3};
  add.u64 %cs, %cs, %stride;
  add.u64 %cd, %cd, %stride;
  bra REST;
NEXT:
  add.u64 %i, %i, 1;
  bra OUTER;
DONE:
  ret;
}
)";
}

}  // namespace

std::string bandwidth_kernels_ptx() { return ptx_head + striding_copy_ptx(); }

}  // namespace cudrv_query::detail
