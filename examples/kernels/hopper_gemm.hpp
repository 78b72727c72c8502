// The device code of example_hopper_gemm, compiled at run time by NVRTC for sm_90a (no host headers):
// C = A * B^T in BF16 with FP32 accumulation, A M x K and B N x K both row-major ("K-major", the
// TN case of a column-major BLAS), C M x N row-major BF16. M must be a multiple of BM * CLUSTER, N of
// BN and K of BK (the host checks). The same kernel is example_hopper_gemm_fp8's with E4M3 operands
// (OPERANDS = e4m3_operands: wgmma m64n256k32, BK = 128 E4M3 per 128-byte row; C still BF16).
//
// One block of 384 threads = three warpgroups of four warps:
//   - warpgroup 0, the producer: after giving registers back (setmaxnreg.dec), one thread walks the
//     block's tiles and their K blocks and, for each, waits for a free stage of the shared-memory ring
//     (its "empty" mbarrier), announces the bytes to come on the stage's "full" mbarrier
//     (arrive.expect_tx) and starts the Tensor Memory Accelerator: one cp.async.bulk.tensor for the
//     BM x BK tile of A, one for the block's share of the BN x BK tile of B;
//   - warpgroups 1 and 2, the consumers: after taking registers (setmaxnreg.inc), each waits for a
//     stage to be full, multiplies its 64 rows of the A tile by the whole B tile with four
//     wgmma.mma_async m64n256k16 (FP32 accumulators: 128 registers per thread), waits for them, and
//     releases the stage by arriving on its empty mbarrier; after the last K block of a tile it
//     converts the accumulators to BF16 and stores them: from registers (STORE_BUFFERS = 0), or
//     through swizzled staging buffers in shared memory and TMA stores (store_through_shared), which
//     drain while the consumer returns to the MMAs of its next tile.
// The tiles land in shared memory in the 128-byte swizzled layout the tensor map asks for (each 64
// bf16 = 128-byte row of a tile has its 16-byte chunks permuted by its row index modulo 8), which is
// the layout the wgmma descriptors name (layout type 1, "128B swizzle"): the tensor cores read the
// tiles without bank conflicts, and no thread ever touches them.
//
// Clusters (CLUSTER = 2): the two blocks of a cluster compute vertically adjacent tiles (the same
// columns of C), so they need the same B tile. Each block loads half of it with .multicast::cluster,
// which writes the half into the shared memory of both blocks at the same offset and signals both
// blocks' full barriers: B is read from L2 once per cluster instead of once per block. A stage can
// then be overwritten only when the consumers of BOTH blocks are done with it, so every consumer warp
// arrives on the empty barrier of every block of the cluster (mapa + mbarrier.arrive.shared::cluster),
// and each empty barrier expects 8 * CLUSTER arrivals.
//
// Persistent schedule: the grid holds as many clusters as fit on the device at once (the host asks
// the driver), and cluster c computes tiles c, c + clusters, c + 2 * clusters, ... of an order that
// walks group_m (an argument) rows of cluster tiles column by column (grouped rasterization), so that the clusters
// resident at the same time share panels of A and B in L2. The producer runs ahead into the next tile
// while the consumers store the current one. A grid of one cluster per tile is the non-persistent
// schedule, with the same code. With sk_tiles > 0 (an argument), the last sk_tiles tiles of the order
// are shared out by K blocks instead (stream-K, tile_walk): every cluster gets an equal contiguous
// range of their K blocks, and the partial sums of a tile split between clusters meet in a global
// workspace, so that the last wave keeps every SM busy.
#pragma once

#include <string>
#include <vector>

namespace example::hopper_gemm_kernels {

inline constexpr const char* source = R"CUDA(
typedef unsigned int u32;
typedef unsigned long long u64;

// A CUtensorMap as the kernel receives it (NVRTC has no cuda.h): 128 opaque bytes, 64-byte aligned.
struct alignas(64) tensor_map_param {
  u64 opaque[16];
};

__device__ __forceinline__ u32 shared_address(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- mbarriers ---------------------------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// One arrival that also announces `bytes` of asynchronous copies to come (the transaction count).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits for the completion of the phase of parity `parity` (0 or 1).
__device__ __forceinline__ void mbarrier_wait(u32 bar, u32 parity) {
  u32 done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void mbarrier_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrives on the barrier at the same shared-memory offset in block `rank` of the cluster (mapa maps
// the local shared address into that block's window). Default semantics (release at CTA scope): the
// only thing the arrival publishes is that this warp's wgmma reads of the stage, already waited for,
// are over; a .release.cluster arrival would fence every earlier memory access of the thread at
// cluster scope, each K block (measured: 2 to 2.6 times slower).
__device__ __forceinline__ void mbarrier_arrive_cluster(u32 bar, u32 rank) {
  asm volatile(
      "{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1; "
      "mbarrier.arrive.shared::cluster.b64 _, [remote]; }" ::"r"(bar),
      "r"(rank)
      : "memory");
}

// ---- clusters ------------------------------------------------------------------------------------
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- TMA -----------------------------------------------------------------------------------------
// The box at (x, y) (x innermost) of `map` into shared memory at `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load(u32 dst, const tensor_map_param* map, u32 bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
// The same into the shared memory of every block of `mask` (bit r: cluster rank r), at the same
// offsets, completing on each block's barrier at the offset of `bar`.
__device__ __forceinline__ void tma_load_multicast(u32 dst, const tensor_map_param* map, u32 bar, int x, int y,
                                                   unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;"
      ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(bar), "h"(mask)
      : "memory");
}

// ---- TMA store (the epilogue through shared memory) -------------------------------------------------
// The box of `map` at (x, y) from shared memory at `src` (laid out as the map's swizzle says), as one
// bulk async-group of the issuing thread.
__device__ __forceinline__ void tma_store(const tensor_map_param* map, u32 src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               ::"l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(src)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until at most `Pending` bulk async-groups of this thread are still reading shared memory.
template <int Pending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
}
// Waits until every bulk async-group of this thread is complete (its writes done).
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Makes this thread's generic-proxy writes to shared memory visible to the async proxy (the TMA).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Synchronises the `count` threads (whole warps) that use named barrier `id` (1 to 15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(u32 id, u32 count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void st_shared_u32(u32 address, u32 value) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(address), "r"(value) : "memory");
}

// ---- wgmma ---------------------------------------------------------------------------------------
// A shared-memory matrix descriptor for a K-major tile in the 128-byte swizzle: rows of 128 bytes,
// groups of 8 rows 1024 bytes apart (the stride byte offset), layout type 1 (128B swizzle) in bits
// 62-63; the leading byte offset is unused by this layout (1 by convention). The tile starts on a
// 1024-byte boundary, so the base offset (bits 49-51) is 0; stepping 16 elements along K adds 32
// bytes to the start address (the swizzle is applied to the address bits by the hardware).
__device__ __forceinline__ u64 smem_descriptor(u32 address) {
  return static_cast<u64>((address & 0x3FFFF) >> 4) | (static_cast<u64>(1) << 16) |
         (static_cast<u64>(1024 >> 4) << 32) | (static_cast<u64>(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}
// The operand formats: each selects the wgmma instruction, the K of one instruction and the bytes of an
// element. A 128-byte swizzled row holds 128 / BYTES elements, so BK = 128 / BYTES, and one
// instruction's K step is 32 bytes along the row in both formats.
struct bf16_operands {
  static constexpr int BYTES = 2;
  static constexpr int K_STEP = 16;  // wgmma m64n256k16 .bf16
};
struct e4m3_operands {
  static constexpr int BYTES = 1;
  static constexpr int K_STEP = 32;  // wgmma m64n256k32 .e4m3 (K-major only: no transpose operands)
};

// The 64 x 256 FP32 accumulator of an m64n256 wgmma, 128 registers per thread: the register list
// (%0 to %127) and the matching asm operands.
#define HOPPER_GEMM_D_REGISTERS \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define HOPPER_GEMM_D_OPERANDS(d) \
      "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// d (64 x 256 over the warpgroup, FP32) = A (64 x K_STEP, descriptor a) * B (256 x K_STEP, descriptor
// b)^T + (accumulate ? d : 0). Both operands K-major, scales +1 (BF16: transpose flags 0; E4M3 has none).
template <class OPERANDS>
__device__ __forceinline__ void wgmma_m64n256(float (&d)[128], u64 a, u64 b, int accumulate) {
  if constexpr (OPERANDS::K_STEP == 32) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {" HOPPER_GEMM_D_REGISTERS "}, "
                 "%128, %129, p, 1, 1;\n}\n"
                 : HOPPER_GEMM_D_OPERANDS(d)
                 : "l"(a), "l"(b), "r"(accumulate));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" HOPPER_GEMM_D_REGISTERS "}, "
                 "%128, %129, p, 1, 1, 0, 0;\n}\n"
                 : HOPPER_GEMM_D_OPERANDS(d)
                 : "l"(a), "l"(b), "r"(accumulate));
  }
}

// Two FP32 values as a packed bf16x2 (round to nearest even), lo at the lower address.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The epilogue through shared memory: a consumer warpgroup's 64 x 256 FP32 accumulators `d` as BF16,
// stored to C at (row0, col0) in four 64 x 64 sub-tiles. Each sub-tile is written to one of BUFFERS
// 8 KiB staging buffers at `staging` (1024-byte aligned) in the 128-byte swizzled layout of the C map
// (the 16-byte chunk c of row r at chunk c ^ (r % 8)), then one thread stores it with one TMA. The
// swizzle also spreads the writes over the banks: the 8 rows x 4 words of one st.shared per warp fall
// in 32 distinct banks. Before a buffer is rewritten, the store that read it (BUFFERS sub-tiles
// earlier, perhaps in the previous tile) must have finished reading it; the last stores drain while
// the warpgroup goes back to the MMAs of its next tile.
template <int BUFFERS>
__device__ __forceinline__ void store_through_shared(const float (&d)[128], u32 staging, const tensor_map_param* c_map,
                                                     u32 barrier_id, int thread, int row0, int col0) {
  const int warp = thread / 32;
  const int lane = thread % 32;
  const u32 r = static_cast<u32>(lane / 4);  // the row within its group of 8; the thread's rows are
  const u32 row_offset = (warp * 16 + r) * 128 + (lane % 4) * 4;  // 16 warp + r and 16 warp + r + 8
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const u32 buffer = staging + (j % BUFFERS) * 8192;
    if (thread == 0) {
      tma_store_wait_read<BUFFERS - 1>();
    }
    named_barrier_sync(barrier_id, 128);
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const u32 chunk = (static_cast<u32>(jj) ^ r) * 16;
      const int i = 4 * (8 * j + jj);
      st_shared_u32(buffer + row_offset + chunk, pack_bf16x2(d[i + 0], d[i + 1]));
      st_shared_u32(buffer + row_offset + 8 * 128 + chunk, pack_bf16x2(d[i + 2], d[i + 3]));
    }
    fence_proxy_async_shared();
    named_barrier_sync(barrier_id, 128);
    if (thread == 0) {
      tma_store(c_map, buffer, col0 + 64 * j, row0);
    }
  }
}

// The tile of C (row tm of cluster tiles, column tn) that is `tile` in the grouped order: group_m rows
// of cluster tiles walked column by column, then the next group_m rows.
__device__ __forceinline__ void tile_coordinates(int tile, int tiles_m, int tiles_n, int group_m, int& tm, int& tn) {
  const int per_group = group_m * tiles_n;
  const int group = tile / per_group;
  const int first = group * group_m;
  const int rows = min(tiles_m - first, group_m);
  const int in_group = tile - group * per_group;
  tm = first + in_group % rows;
  tn = in_group / rows;
}

// ---- the tile walk: data-parallel tiles, then a stream-K tail ---------------------------------------
// The first tiles - sk_tiles tiles of the order are whole units: cluster c takes tiles c, c + clusters,
// ... of them. The K blocks of the last sk_tiles tiles, sk_tiles * k_blocks "iterations" in all, are
// then cut into `clusters` contiguous ranges of (almost) equal length, one per cluster, so that the
// last partial wave of tiles is spread over every cluster instead of leaving some idle. A range may
// start or end inside a tile: a unit is a tile and a range [kb_begin, kb_end) of its K blocks. The
// cluster that owns a tile's K block 0 finishes the tile (adds the other owners' partial sums and
// stores C); the others publish their partial sums. Only a range's first unit can start inside a
// tile, so a cluster publishes at most one partial (its slot of the workspace), and it does so first,
// before any wait of its own: a finisher never waits for a cluster that is waiting.

// Where cluster c's stream-K range starts, out of `work` iterations: floor(work * c / clusters), in
// 32-bit arithmetic (work < 2^27, c and clusters < 2^8: the remainder's product stays below 2^16).
__device__ __forceinline__ int sk_begin(int c, int work, int clusters) {
  return (work / clusters) * c + (work % clusters) * c / clusters;
}
// The cluster whose stream-K range holds iteration x: the last c with sk_begin(c) <= x.
__device__ __forceinline__ int sk_owner(int x, int work, int clusters) {
  int c = x / max(work / clusters, 1);
  c = min(c, clusters - 1);
  while (c + 1 < clusters && sk_begin(c + 1, work, clusters) <= x) {
    ++c;
  }
  while (c > 0 && sk_begin(c, work, clusters) > x) {
    --c;
  }
  return c;
}

// Iterations fit in an int: at most 2^17 tiles of 2^10 K blocks.
struct tile_walk {
  int tile = 0, kb_begin = 0, kb_end = 0;  // the current unit
  int next_tile, dp_tiles, clusters, k_blocks, it, it_end;

  __device__ tile_walk(int cluster_id, int clusters_, int tiles, int sk_tiles, int k_blocks_)
      : next_tile(cluster_id), dp_tiles(tiles - sk_tiles), clusters(clusters_), k_blocks(k_blocks_) {
    const int work = sk_tiles * k_blocks;
    it = sk_begin(cluster_id, work, clusters);
    it_end = sk_begin(cluster_id + 1, work, clusters);
  }
  // The stream-K iterations of all clusters (sk_tiles * k_blocks).
  __device__ int work(int tiles) const { return (tiles - dp_tiles) * k_blocks; }
  // Moves to the next unit of this cluster; false when there is none.
  __device__ bool next() {
    if (next_tile < dp_tiles) {
      tile = next_tile;
      kb_begin = 0;
      kb_end = k_blocks;
      next_tile += clusters;
      return true;
    }
    if (it < it_end) {
      tile = dp_tiles + it / k_blocks;
      kb_begin = it % k_blocks;
      kb_end = min(k_blocks, kb_begin + (it_end - it));
      it += kb_end - kb_begin;
      return true;
    }
    return false;
  }
  // The unit covers only part of its tile's K blocks.
  __device__ bool partial() const { return kb_begin > 0 || kb_end < k_blocks; }
  // The clusters after `cluster_id` that own K blocks of the current tile: [first, last]; empty ranges
  // (possible when there are fewer iterations than clusters) own nothing and are skipped by the caller.
  __device__ int last_owner(int tiles) const {
    return sk_owner((tile - dp_tiles + 1) * k_blocks - 1, work(tiles), clusters);
  }
  __device__ bool owns_iterations(int c, int tiles) const {
    return sk_begin(c, work(tiles), clusters) < sk_begin(c + 1, work(tiles), clusters);
  }
};

// A consumer warpgroup's 64 x 256 partial sums (FP32) at workspace slot `slot` (64 KiB), each
// thread's 32 float4 interleaved with the other threads' (coalesced); L1 is bypassed (.cg).
__device__ __forceinline__ void stream_k_publish(const float (&d)[128], float* workspace, u32* flags, int slot,
                                                 u32 barrier_id, int thread) {
  float* p = workspace + static_cast<u64>(slot) * 16384 + 4 * thread;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p + 512 * j), "f"(d[4 * j]), "f"(d[4 * j + 1]),
                 "f"(d[4 * j + 2]), "f"(d[4 * j + 3])
                 : "memory");
  }
  __threadfence();
  named_barrier_sync(barrier_id, 128);
  if (thread == 0) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + slot), "r"(1u) : "memory");
  }
}
// Waits (one thread) for slot `slot`'s flag and clears it for the next launch. Bounded: after about
// 2^22 polls, or once another wait has given up, it sets the error flag (the host reports the
// configuration as wrong) and returns, so that a broken schedule fails instead of hanging the GPU.
__device__ __forceinline__ void stream_k_wait(u32* flags, int slot, u32* error) {
  for (u32 n = 0;; ++n) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + slot) : "memory");
    if (v != 0) {
      asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flags + slot), "r"(0u) : "memory");
      return;
    }
    if ((n & 1023) == 1023) {
      u32 e;
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(e) : "l"(error) : "memory");
      if (e != 0 || n >= (1u << 22)) {
        asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(error), "r"(1u) : "memory");
        return;
      }
    }
    __nanosleep(64);
  }
}
// Adds slot `slot`'s partial sums to `d`, once they are published.
__device__ __forceinline__ void stream_k_add(float (&d)[128], const float* workspace, u32* flags, int slot, u32* error,
                                             u32 barrier_id, int thread) {
  if (thread == 0) {
    stream_k_wait(flags, slot, error);
  }
  named_barrier_sync(barrier_id, 128);
  const float* p = workspace + static_cast<u64>(slot) * 16384 + 4 * thread;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    float x, y, z, w;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
                 : "l"(p + 512 * j)
                 : "memory");
    d[4 * j] += x;
    d[4 * j + 1] += y;
    d[4 * j + 2] += z;
    d[4 * j + 3] += w;
  }
}

// BM = 128 rows (two consumer warpgroups of 64), BN = 256 columns (one m64n256 wgmma per k16 step),
// BK = 64 bf16 (one 128-byte swizzled row per tile row), STAGES deep, CLUSTER blocks per cluster
// along M (1 or 2). PRODUCER_REGS / CONSUMER_REGS: the registers each warpgroup keeps after
// setmaxnreg (128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= 65536). OVERLAP: a consumer keeps one K
// block's wgmma group in flight while it waits for the next stage (wgmma.wait_group 1, releasing the
// stage before), instead of waiting for each group to finish (wait_group 0). STORE_BUFFERS: 0, the
// epilogue stores the accumulators from registers to C; 1, 2 or 4, it stages them through that many
// 8 KiB buffers of shared memory per consumer warpgroup and stores them with TMA through c_map
// (store_through_shared). OPERANDS: the format of A and B, bf16_operands (BK = 64) or e4m3_operands
// (BK = 128); C is BF16 in both.
template <int BM, int BN, int BK, int STAGES, int CLUSTER, int PRODUCER_REGS, int CONSUMER_REGS, bool OVERLAP,
          int STORE_BUFFERS = 0, class OPERANDS = bf16_operands>
__global__ void __launch_bounds__(384, 1)
hopper_gemm(const __grid_constant__ tensor_map_param a_map, const __grid_constant__ tensor_map_param b_map,
            unsigned short* __restrict__ C, int M, int N, int K, int group_m,
            const __grid_constant__ tensor_map_param c_map, float* __restrict__ workspace, u32* __restrict__ flags,
            int sk_tiles) {
  static_assert(BM == 128 && BN == 256 && BK * OPERANDS::BYTES == 128,
                "the warpgroup layout assumes 128 x 256 tiles, K blocks of one 128-byte row");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 blocks along M");
  static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= 65536, "the register file holds 64K registers");
  static_assert(STORE_BUFFERS == 0 || STORE_BUFFERS == 1 || STORE_BUFFERS == 2 || STORE_BUFFERS == 4,
                "the four sub-tiles of an epilogue take turns over 1, 2 or 4 staging buffers");
  constexpr u32 A_BYTES = BM * BK * OPERANDS::BYTES;   // 16 KiB
  constexpr u32 B_BYTES = BN * BK * OPERANDS::BYTES;   // 32 KiB
  constexpr u32 B_SLICE_BYTES = B_BYTES / CLUSTER;     // what each block of a cluster loads
  constexpr u32 STAGE_BYTES = A_BYTES + B_BYTES;       // what lands in each block per stage
  constexpr u32 CONSUMER_WARPS = 8;

  // Dynamic shared memory, aligned up to 1024 bytes (the 128-byte swizzle repeats every 1024 bytes and
  // the descriptors assume tiles on that boundary): STAGES x (A tile, B tile), the epilogue's staging
  // buffers (STORE_BUFFERS x 8 KiB per consumer warpgroup), then the barriers.
  extern __shared__ unsigned char shared_raw[];
  const u32 raw = shared_address(shared_raw);
  const u32 base = (raw + 1023u) & ~1023u;
  const u32 a_tiles = base;
  const u32 b_tiles = base + STAGES * A_BYTES;
  const u32 c_staging = b_tiles + STAGES * B_BYTES;
  const u32 full_bars = c_staging + 2 * STORE_BUFFERS * 8192;  // STAGES x 8 bytes
  const u32 empty_bars = full_bars + STAGES * 8;       // STAGES x 8 bytes

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const u32 rank = CLUSTER > 1 ? cluster_rank() : 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(full_bars + 8 * s, 1);                         // the producer's arrive.expect_tx
      mbarrier_init(empty_bars + 8 * s, CONSUMER_WARPS * CLUSTER);  // every consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(&a_map)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(&b_map)) : "memory");
    if (STORE_BUFFERS > 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(&c_map)) : "memory");
    }
  }
  // Every barrier of the cluster is initialised before any block signals one of another block.
  if (CLUSTER > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }

  const int tiles_m = M / (BM * CLUSTER);  // rows of cluster tiles
  const int tiles_n = N / BN;
  const int tiles = tiles_m * tiles_n;
  const int k_blocks = K / BK;
  const int cluster_id = static_cast<int>(blockIdx.x) / CLUSTER;
  const int clusters = static_cast<int>(gridDim.x) / CLUSTER;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
    if (threadIdx.x == 0) {
      int stage = 0;
      u32 phase = 0;
      for (tile_walk walk(cluster_id, clusters, tiles, sk_tiles, k_blocks); walk.next();) {
        const int tile = walk.tile;
        int tm, tn;
        tile_coordinates(tile, tiles_m, tiles_n, group_m, tm, tn);
        const int m0 = (tm * CLUSTER + static_cast<int>(rank)) * BM;
        const int n0 = tn * BN;
        for (int kb = walk.kb_begin; kb < walk.kb_end; ++kb) {
          // A fresh barrier counts as having completed the phase before its first: parity 1 passes.
          mbarrier_wait(empty_bars + 8 * stage, phase ^ 1);
          const u32 full = full_bars + 8 * stage;
          mbarrier_arrive_expect_tx(full, STAGE_BYTES);
          tma_load(a_tiles + stage * A_BYTES, &a_map, full, kb * BK, m0);
          if (CLUSTER == 1) {
            tma_load(b_tiles + stage * B_BYTES, &b_map, full, kb * BK, n0);
          } else {
            tma_load_multicast(b_tiles + stage * B_BYTES + rank * B_SLICE_BYTES, &b_map, full, kb * BK,
                               n0 + static_cast<int>(rank) * (BN / CLUSTER),
                               static_cast<unsigned short>((1u << CLUSTER) - 1));
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));
    const int consumer = warpgroup - 1;        // which 64 rows of the tile
    const int thread = static_cast<int>(threadIdx.x) % 128;
    const int warp = thread / 32;
    const int lane = thread % 32;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) {
      d[i] = 0.0f;
    }
    // This warp's reads of a stage are done: release it in every block of the cluster, lane r
    // arriving on block r's barrier (the arrivals leave in parallel).
    auto release = [&](int s) {
      if (CLUSTER == 1) {
        if (lane == 0) {
          mbarrier_arrive(empty_bars + 8 * s);
        }
      } else if (lane < CLUSTER) {
        mbarrier_arrive_cluster(empty_bars + 8 * s, static_cast<u32>(lane));
      }
    };
    int stage = 0;
    int previous = 0;
    u32 phase = 0;
    for (tile_walk walk(cluster_id, clusters, tiles, sk_tiles, k_blocks); walk.next();) {
      const int tile = walk.tile;
      int tm, tn;
      tile_coordinates(tile, tiles_m, tiles_n, group_m, tm, tn);
      const int m0 = (tm * CLUSTER + static_cast<int>(rank)) * BM;
      const int n0 = tn * BN;
      for (int kb = walk.kb_begin; kb < walk.kb_end; ++kb) {
        mbarrier_wait(full_bars + 8 * stage, phase);
        const u32 a_tile = a_tiles + stage * A_BYTES + consumer * 64 * 128;
        const u32 b_tile = b_tiles + stage * B_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / OPERANDS::K_STEP; ++kk) {
          wgmma_m64n256<OPERANDS>(d, smem_descriptor(a_tile + kk * 32), smem_descriptor(b_tile + kk * 32),
                                  (kb > walk.kb_begin || kk > 0) ? 1 : 0);
        }
        wgmma_commit();
        if (OVERLAP) {
          // Keep this K block's MMAs in flight; wait for the previous block's and release its stage.
          wgmma_wait<1>();
          if (kb > walk.kb_begin) {
            release(previous);
          }
        } else {
          wgmma_wait<0>();
          release(stage);
        }
        previous = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      if (OVERLAP) {
        wgmma_wait<0>();
        release(previous);
      }
      // Stream-K: a unit that does not start its tile publishes its partial sums; the one that does adds
      // those of the clusters that own the rest of the tile, in their order (the same sum every run).
      if (walk.partial()) {
        // flags[0]: the error flag; flags[1 + slot]: the slot of (block b, consumer c), 2 b + c.
        if (walk.kb_begin > 0) {
          stream_k_publish(d, workspace, flags + 1, static_cast<int>(2 * blockIdx.x) + consumer,
                           static_cast<u32>(1 + consumer), thread);
          continue;
        }
        const int last = walk.last_owner(tiles);
        for (int c = cluster_id + 1; c <= last; ++c) {
          if (walk.owns_iterations(c, tiles)) {
            stream_k_add(d, workspace, flags + 1, 2 * (c * CLUSTER + static_cast<int>(rank)) + consumer, flags,
                         static_cast<u32>(1 + consumer), thread);
          }
        }
      }
      if constexpr (STORE_BUFFERS > 0) {
        store_through_shared<STORE_BUFFERS>(d, c_staging + consumer * STORE_BUFFERS * 8192, &c_map,
                                            static_cast<u32>(1 + consumer), thread, m0 + consumer * 64, n0);
        continue;
      }
      // Epilogue. Accumulator layout of m64nNk16: thread (warp w, lane l) holds rows 16 w + l / 4 and
      // 16 w + l / 4 + 8, columns 8 j + 2 (l % 4) + {0, 1}, in d[4 j + {0, 1}] and d[4 j + {2, 3}].
      const int row = m0 + consumer * 64 + warp * 16 + lane / 4;
      const int col = n0 + 2 * (lane % 4);
      u32* const out0 = reinterpret_cast<u32*>(C + static_cast<u64>(row) * N + col);
      u32* const out1 = reinterpret_cast<u32*>(C + static_cast<u64>(row + 8) * N + col);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        out0[4 * j] = pack_bf16x2(d[4 * j + 0], d[4 * j + 1]);
        out1[4 * j] = pack_bf16x2(d[4 * j + 2], d[4 * j + 3]);
      }
    }
    // The shared memory of the last stores stays valid until they are complete.
    if (STORE_BUFFERS > 0 && thread == 0) {
      tma_store_wait_all();
    }
  }
  // No block leaves while another may still arrive on its barriers.
  if (CLUSTER > 1) {
    cluster_sync();
  }
}
)CUDA";

/// The instantiations example_hopper_gemm uses, hopper_gemm<BM, BN, BK, STAGES, CLUSTER, PRODUCER_REGS,
/// CONSUMER_REGS, OVERLAP[, STORE_BUFFERS]>: 128 x 256 x 64 tiles, four stages (4 x 48 KiB of shared
/// memory), without and with a cluster of two blocks sharing B by multicast, and with one wgmma group
/// kept in flight; first with the epilogue stored from registers, then through shared memory and TMA
/// stores: two 8 KiB staging buffers per consumer warpgroup beside four stages (225 KiB in all), or
/// four (the whole 64 x 256 share of the tile) beside three stages.
inline const std::vector<std::string> name_expressions{
    "hopper_gemm<128, 256, 64, 4, 1, 40, 232, false>",    "hopper_gemm<128, 256, 64, 4, 1, 40, 232, true>",
    "hopper_gemm<128, 256, 64, 4, 2, 40, 232, false>",    "hopper_gemm<128, 256, 64, 4, 2, 40, 232, true>",
    "hopper_gemm<128, 256, 64, 4, 1, 40, 232, false, 2>", "hopper_gemm<128, 256, 64, 4, 1, 40, 232, true, 2>",
    "hopper_gemm<128, 256, 64, 4, 2, 40, 232, false, 2>", "hopper_gemm<128, 256, 64, 4, 2, 40, 232, true, 2>",
    "hopper_gemm<128, 256, 64, 3, 1, 40, 232, true, 4>",  "hopper_gemm<128, 256, 64, 3, 2, 40, 232, true, 4>",
};

/// The instantiations example_hopper_gemm_fp8 uses: the same kernel on E4M3 operands, 128 x 256 x 128
/// tiles (128 E4M3 = one 128-byte row), four stages of 48 KiB, with and without the cluster of two and
/// OVERLAP (each also run persistent or not, by the host).
inline const std::vector<std::string> fp8_name_expressions{
    "hopper_gemm<128, 256, 128, 4, 1, 40, 232, false, 0, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 4, 1, 40, 232, true, 0, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 4, 2, 40, 232, false, 0, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 4, 2, 40, 232, true, 0, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 4, 1, 40, 232, true, 2, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 4, 2, 40, 232, true, 2, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 3, 1, 40, 232, true, 4, e4m3_operands>",
    "hopper_gemm<128, 256, 128, 3, 2, 40, 232, true, 4, e4m3_operands>",
};

/// wgmma and setmaxnreg exist only on the arch-specific target sm_90a.
inline constexpr bool arch_specific = true;

}  // namespace example::hopper_gemm_kernels
