// The device code of example_sgemm, compiled at run time by NVRTC (no host headers): a row-major
// FP32 GEMM, C = alpha * A * B + beta * C, with A M x K, B K x N and C M x N, all row-major with
// leading dimensions K, N and N. M must be a multiple of BM, N of BN and K of BK (the host checks).
//
// The scheme, per block of THREADS = (BM / TM) * (BN / TN) threads:
//   - the block computes a BM x BN tile of C; the grid is one-dimensional and walked in groups of
//     GROUP_M block rows (grouped rasterization), so that blocks resident at the same time share
//     panels of A and B in L2;
//   - the K dimension is walked in tiles of BK; STAGES shared-memory buffers each hold one BM x BK
//     tile of A and one BK x BN tile of B, filled by 16-byte cp.async copies (global -> shared without
//     registers), one commit group per tile: while the FFMAs read stage s, the copies of the next
//     STAGES - 1 tiles are in flight (STAGES = 2 is double buffering);
//   - each thread holds a TM x TN tile of C in registers (register blocking) and, per step of k,
//     performs TM * TN independent FFMAs on TM values of A and TN values of B read from shared memory
//     with 128-bit loads.
//
// Shared-memory layouts, chosen so that the inner loop's loads are 128 bits wide and free of bank
// conflicts, and so that cp.async can copy 16 contiguous bytes of global memory as they are:
//   - A tile as in global memory, row m holding its BK values of k, rows padded to BK + 4 floats. A
//     thread reads float4 (four consecutive k) of row m, so it keeps TM x 4 values of A and uses them
//     over four steps of k. Its rows are m = ty + i * (BM / TM): a warp spans 4 consecutive rows, and
//     with the odd row stride (BK + 4) / 4 in 16-byte units those land in 4 distinct groups of 4 banks.
//   - B tile as in global memory, row k holding BN values of n. A thread reads float4 at columns
//     n = 4 * tx + j * 4 * (BN / TN): a warp spans 8 consecutive tx, 128 contiguous bytes.
// Lanes with the same ty (or tx) read the same address: a broadcast, no extra wavefront.
//
// sgemm_db (below) keeps the scheme with the A tile transposed in shared memory (4-byte cp.async copies
// transpose it), 4 x 4 sub-tiles per thread, and the fragments of A and B double-buffered in registers.
#pragma once

#include <string>
#include <vector>

namespace example::sgemm_kernels {

inline constexpr const char* source = R"CUDA(
// 16-byte asynchronous copy global -> shared, bypassing L1 (.cg), with an L2 prefetch hint of 128 B.
__device__ __forceinline__ void cp_async_16(unsigned shared_address, const void* global) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(shared_address),
               "l"(__cvta_generic_to_global(global))
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most Pending of this thread's commit groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

template <int C>
__device__ __forceinline__ float component(const float4& v) {
  static_assert(C >= 0 && C < 4, "a float4 has four components");
  return C == 0 ? v.x : C == 1 ? v.y : C == 2 ? v.z : v.w;
}

// One step of k (the component Kk of the float4s of A): TM * TN independent FFMAs.
template <int Kk, int TM, int TN, int TX>
__device__ __forceinline__ void fma_step(float (&acc)[TM][TN], const float4 (&a)[TM], const float* b_row) {
  float b[TN];
#pragma unroll
  for (int j = 0; j < TN / 4; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(b_row + j * 4 * TX);
    b[4 * j + 0] = v.x;
    b[4 * j + 1] = v.y;
    b[4 * j + 2] = v.z;
    b[4 * j + 3] = v.w;
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const float ai = component<Kk>(a[i]);
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      acc[i][j] = fmaf(ai, b[j], acc[i][j]);
    }
  }
}

// Grouped rasterization of a one-dimensional grid: consecutive blocks go down GROUP_M = 8 block rows,
// then to the next block column, so that blocks resident at the same time share panels of A and B in L2.
template <int BM, int BN>
__device__ __forceinline__ void block_tile(int M, int N, int& block_m, int& block_n) {
  constexpr int GROUP_M = 8;
  const int grid_m = M / BM;
  const int grid_n = N / BN;
  const int per_group = GROUP_M * grid_n;
  const int group = static_cast<int>(blockIdx.x) / per_group;
  const int first_m = group * GROUP_M;
  const int group_rows = min(grid_m - first_m, GROUP_M);
  const int in_group = static_cast<int>(blockIdx.x) - group * per_group;
  block_m = first_m + in_group % group_rows;
  block_n = in_group / group_rows;
}

// Blocks per SM that __launch_bounds__ asks for: 32768 accumulators per SM (512 threads of 8 x 8, 128
// registers each; 256 threads of 8 x 16, 255 registers each), at least one block.
// Both kernels' accumulators start at zero.
template <int TM, int TN>
__device__ __forceinline__ void zero_accumulators(float (&acc)[TM][TN]) {
#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      acc[i][j] = 0.0f;
    }
  }
}

// Both kernels' prologue: tiles 0 .. STAGES - 2 in flight, one commit group each (empty past the end,
// so that the count of groups stays the same on every path).
template <int STAGES, class Load>
__device__ __forceinline__ void start_pipeline(int tiles, Load&& load_tile) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) {
      load_tile(s);
    }
    cp_async_commit();
  }
}

// out = alpha * (v0, v1, v2, v3) + beta * out as one float4 store; with beta == 0 C is not read (it may
// hold anything, NaN included), as in BLAS.
__device__ __forceinline__ void store_scaled(float* out_address, float alpha, float beta, float v0, float v1, float v2,
                                             float v3) {
  float4* const out = reinterpret_cast<float4*>(out_address);
  float4 v = make_float4(alpha * v0, alpha * v1, alpha * v2, alpha * v3);
  if (beta != 0.0f) {
    const float4 old = *out;
    v.x = fmaf(beta, old.x, v.x);
    v.y = fmaf(beta, old.y, v.y);
    v.z = fmaf(beta, old.z, v.z);
    v.w = fmaf(beta, old.w, v.w);
  }
  *out = v;
}

template <int THREADS, int TM, int TN>
struct min_blocks {
  static constexpr int value = 32768 / (TM * TN) / THREADS > 0 ? 32768 / (TM * TN) / THREADS : 1;
};

template <int BM, int BN, int BK, int TM, int TN, int STAGES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks<(BM / TM) * (BN / TN), TM, TN>::value)
sgemm(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
      float* __restrict__ C) {
  constexpr int TX = BN / TN;          // threads along n
  constexpr int TY = BM / TM;          // threads along m
  constexpr int THREADS = TX * TY;
  constexpr int WARPS_X = TX / 8;      // a warp is 4 (m) x 8 (n) threads
  constexpr int A_STRIDE = BK + 4;     // padded row of the A tile, in floats
  constexpr int A_STAGE = BM * A_STRIDE;
  constexpr int B_STAGE = BK * BN;
  constexpr int A_CHUNKS = BM * BK / 4 / THREADS;  // 16-byte copies per thread and tile
  constexpr int B_CHUNKS = BK * BN / 4 / THREADS;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "TM and TN are multiples of 4");
  static_assert(TX % 8 == 0 && TY % 4 == 0 && THREADS % 32 == 0, "warps of 4 x 8 threads tile the block");
  static_assert(BK % 8 == 0, "BK a multiple of 8 keeps the padded A row an odd number of 16-byte units");
  static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "copies divide among the threads");
  static_assert(STAGES >= 2, "at least double buffering");

  extern __shared__ float4 shared_tiles[];
  float* const As = reinterpret_cast<float*>(shared_tiles);  // STAGES x [BM][A_STRIDE]
  float* const Bs = As + STAGES * A_STAGE;                    // STAGES x [BK][BN]

  int block_m = 0;
  int block_n = 0;
  block_tile<BM, BN>(M, N, block_m, block_n);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int ty = (warp / WARPS_X) * 4 + lane / 8;
  const int tx = (warp % WARPS_X) * 8 + lane % 8;

  // What this thread copies: A_CHUNKS 16-byte pieces of one row of the A tile and B_CHUNKS of one row
  // of the B tile, spread along the row so that a warp's copies cover whole rows (contiguous bytes).
  constexpr int A_ROW_THREADS = BK / 4 / A_CHUNKS;  // threads sharing a row of the A tile
  constexpr int B_ROW_THREADS = BN / 4 / B_CHUNKS;
  static_assert(A_ROW_THREADS * A_CHUNKS == BK / 4 && B_ROW_THREADS * B_CHUNKS == BN / 4,
                "a thread's copies lie in one row");
  const int a_row = tid / A_ROW_THREADS;
  const int a_col = (tid % A_ROW_THREADS) * 4;
  const int b_row = tid / B_ROW_THREADS;
  const int b_col = (tid % B_ROW_THREADS) * 4;
  // Element offsets in 32 bits (the host keeps (K + BK) * N, the furthest a source pointer runs, under 2^31): fewer registers live
  // across the main loop than 64-bit pointers.
  int a_src = (block_m * BM + a_row) * K + a_col;
  int b_src = b_row * N + block_n * BN + b_col;
  const unsigned a_dst = static_cast<unsigned>(__cvta_generic_to_shared(As + a_row * A_STRIDE + a_col));
  const unsigned b_dst = static_cast<unsigned>(__cvta_generic_to_shared(Bs + b_row * BN + b_col));

  // Copies the next tile into stage s, then moves the sources on by one tile (A by BK columns, B by BK rows).
  auto load_tile = [&](int s) {
#pragma unroll
    for (int c = 0; c < A_CHUNKS; ++c) {
      cp_async_16(a_dst + static_cast<unsigned>((s * A_STAGE + c * 4 * A_ROW_THREADS) * 4),
                  A + a_src + c * 4 * A_ROW_THREADS);
    }
#pragma unroll
    for (int c = 0; c < B_CHUNKS; ++c) {
      cp_async_16(b_dst + static_cast<unsigned>((s * B_STAGE + c * 4 * B_ROW_THREADS) * 4),
                  B + b_src + c * 4 * B_ROW_THREADS);
    }
    a_src += BK;
    b_src += BK * N;
  };

  float acc[TM][TN];
  zero_accumulators(acc);

  const int tiles = K / BK;
  start_pipeline<STAGES>(tiles, load_tile);

  int read_stage = 0;
  int write_stage = STAGES - 1;
  for (int kt = 0; kt < tiles; ++kt) {
    // Tile kt has landed for this thread's copies; the barrier makes every thread's copies visible,
    // and tells that every thread is done reading the stage written next (it held tile kt - 1).
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < tiles) {
      load_tile(write_stage);  // tile kt + STAGES - 1
    }
    cp_async_commit();

    const float* a_tile = As + read_stage * A_STAGE + ty * A_STRIDE;
    const float* b_tile = Bs + read_stage * B_STAGE + tx * 4;
#pragma unroll
    for (int k4 = 0; k4 < BK; k4 += 4) {
      float4 a[TM];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        a[i] = *reinterpret_cast<const float4*>(a_tile + i * TY * A_STRIDE + k4);
      }
      fma_step<0, TM, TN, TX>(acc, a, b_tile + (k4 + 0) * BN);
      fma_step<1, TM, TN, TX>(acc, a, b_tile + (k4 + 1) * BN);
      fma_step<2, TM, TN, TX>(acc, a, b_tile + (k4 + 2) * BN);
      fma_step<3, TM, TN, TX>(acc, a, b_tile + (k4 + 3) * BN);
    }
    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
    write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();  // nothing is in flight at exit (only empty groups can remain)

  // Epilogue: float4 stores, a warp writing 4 rows of 128 contiguous bytes per store.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    float* const c_row = C + (block_m * BM + ty + i * TY) * N + block_n * BN + tx * 4;
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      store_scaled(c_row + j * 4 * TX, alpha, beta, acc[i][4 * j + 0], acc[i][4 * j + 1], acc[i][4 * j + 2],
                   acc[i][4 * j + 3]);
    }
  }
}

// ---- sgemm_db: A transposed in shared memory, fragments double-buffered in registers ----------------
// 4-byte asynchronous copy global -> shared (.ca: copies under 16 bytes only have that cache mode).
__device__ __forceinline__ void cp_async_4(unsigned shared_address, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(shared_address),
               "l"(__cvta_generic_to_global(global))
               : "memory");
}

// Component c (a compile-time constant once the callers' loops are unrolled) of a float4.
__device__ __forceinline__ float component_at(const float4& v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

// One step of k's fragments: TM values of A (row k of the transposed tile, columns m = 4 ty + 4 TY i + r)
// and TN of B (row k, columns n = 4 tx + 4 TX j + r), as TM / 4 and TN / 4 128-bit loads.
template <int TM, int TN, int TY, int TX>
__device__ __forceinline__ void load_fragments(float4 (&a)[TM / 4], float4 (&b)[TN / 4], const float* a_row,
                                               const float* b_row) {
#pragma unroll
  for (int i = 0; i < TM / 4; ++i) {
    a[i] = *reinterpret_cast<const float4*>(a_row + i * 4 * TY);
  }
#pragma unroll
  for (int j = 0; j < TN / 4; ++j) {
    b[j] = *reinterpret_cast<const float4*>(b_row + j * 4 * TX);
  }
}

// acc += a b^T for one step of k: TM * TN independent FFMAs.
template <int TM, int TN>
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float4 (&a)[TM / 4],
                                              const float4 (&b)[TN / 4]) {
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const float ai = component_at(a[i / 4], i % 4);
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      acc[i][j] = fmaf(ai, component_at(b[j / 4], j % 4), acc[i][j]);
    }
  }
}

// The same product as sgemm, with two changes to the inner loop:
//   - the A tile is stored transposed, row k holding the BM values of m (padded to BM + 4 floats), so
//     that a step of k needs only TM values of A; 4-byte cp.async copies transpose it on the way (a warp
//     copies 4 rows of 8 consecutive k: 32-byte sectors in global memory, 32 distinct banks in shared);
//   - a thread's TM x TN outputs are (TM / 4) x (TN / 4) sub-tiles of 4 x 4, spaced 4 TY rows and
//     4 TX columns apart, and its fragments of A and B are double-buffered in registers: the loads of
//     step k + 1 are issued before the FFMAs of step k, and those of a tile's first step before the
//     FFMAs of the previous tile's last step (right after the barrier), so that shared-memory latency
//     hides behind FFMAs even with few warps per scheduler.
//
// COMPACT = false unrolls a k tile fully (BK steps of TM * TN FFMAs: 1024 instructions and more for
// 8 x 16 and a k tile of 8); true keeps two steps in a loop and the last two apart, a quarter of the
// code for a k tile of 8, in case the instruction cache is what the unrolled loop runs short of.
template <int BM, int BN, int BK, int TM, int TN, int STAGES, bool COMPACT = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks<(BM / TM) * (BN / TN), TM, TN>::value)
sgemm_db(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
         float* __restrict__ C) {
  constexpr int TX = BN / TN;  // threads along n
  constexpr int TY = BM / TM;  // threads along m
  constexpr int THREADS = TX * TY;
  constexpr int WARPS_X = TX / 8;   // a warp is 4 (m) x 8 (n) threads
  constexpr int A_STRIDE = BM + 4;  // padded row k of the transposed A tile, in floats
  constexpr int A_STAGE = BK * A_STRIDE;
  constexpr int B_STAGE = BK * BN;
  constexpr int A_COPIES = BM * BK / THREADS;  // 4-byte copies per thread and tile
  constexpr int A_ROWS_PER_COPY = THREADS / BK;
  constexpr int B_CHUNKS = BK * BN / 4 / THREADS;  // 16-byte copies per thread and tile
  constexpr int B_ROW_THREADS = BN / 4 / B_CHUNKS;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "TM and TN are multiples of 4");
  static_assert(TX % 8 == 0 && TY % 4 == 0 && THREADS % 32 == 0, "warps of 4 x 8 threads tile the block");
  static_assert(BK % 2 == 0, "an even BK: a tile's first step uses the first fragment buffer");
  static_assert(THREADS % BK == 0 && (BM * BK) % THREADS == 0, "A copies divide among the threads");
  static_assert((BK * BN / 4) % THREADS == 0 && B_ROW_THREADS * B_CHUNKS == BN / 4, "B copies lie in one row");
  static_assert(STAGES >= 2, "at least double buffering");

  extern __shared__ float4 shared_tiles[];
  float* const As = reinterpret_cast<float*>(shared_tiles);  // STAGES x [BK][A_STRIDE]
  float* const Bs = As + STAGES * A_STAGE;                    // STAGES x [BK][BN]

  int block_m = 0;
  int block_n = 0;
  block_tile<BM, BN>(M, N, block_m, block_n);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int ty = (warp / WARPS_X) * 4 + lane / 8;
  const int tx = (warp % WARPS_X) * 8 + lane % 8;

  // Copies: element (m, k) of the A tile goes to row k, column m of the transposed tile; thread tid
  // takes k = tid % BK and m = tid / BK + c * THREADS / BK. B as in sgemm.
  const int a_k = tid % BK;
  const int a_m = tid / BK;
  const int b_row = tid / B_ROW_THREADS;
  const int b_col = (tid % B_ROW_THREADS) * 4;
  int a_src = (block_m * BM + a_m) * K + a_k;  // 32-bit element offsets (the host keeps them under 2^31)
  int b_src = b_row * N + block_n * BN + b_col;
  const unsigned a_dst = static_cast<unsigned>(__cvta_generic_to_shared(As + a_k * A_STRIDE + a_m));
  const unsigned b_dst = static_cast<unsigned>(__cvta_generic_to_shared(Bs + b_row * BN + b_col));

  auto load_tile = [&](int s) {
#pragma unroll
    for (int c = 0; c < A_COPIES; ++c) {
      cp_async_4(a_dst + static_cast<unsigned>((s * A_STAGE + c * A_ROWS_PER_COPY) * 4),
                 A + a_src + c * A_ROWS_PER_COPY * K);
    }
#pragma unroll
    for (int c = 0; c < B_CHUNKS; ++c) {
      cp_async_16(b_dst + static_cast<unsigned>((s * B_STAGE + c * 4 * B_ROW_THREADS) * 4),
                  B + b_src + c * 4 * B_ROW_THREADS);
    }
    a_src += BK;
    b_src += BK * N;
  };

  float acc[TM][TN];
  zero_accumulators(acc);

  const int tiles = K / BK;
  start_pipeline<STAGES>(tiles, load_tile);
  cp_async_wait<STAGES - 2>();
  __syncthreads();

  float4 a_frag[2][TM / 4];
  float4 b_frag[2][TN / 4];
  const float* const a_thread = As + 4 * ty;
  const float* const b_thread = Bs + 4 * tx;
  load_fragments<TM, TN, TY, TX>(a_frag[0], b_frag[0], a_thread, b_thread);

  int read_stage = 0;
  int write_stage = STAGES - 1;
  for (int kt = 0; kt < tiles; ++kt) {
    // Every thread is past the barrier that ended its reads of the stage written now (tile kt - 1).
    if (kt + STAGES - 1 < tiles) {
      load_tile(write_stage);  // tile kt + STAGES - 1
    }
    cp_async_commit();
    // Tile kt + 1 has landed for this thread's copies; the barrier publishes every thread's, and tells
    // that all reads of tile kt are done (its last fragments are in registers). Then tile kt + 1's first
    // fragments are loaded, before the FFMAs of tile kt's last step.
    auto next_tile = [&] {
      if (kt + 1 < tiles) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
        write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
        load_fragments<TM, TN, TY, TX>(a_frag[0], b_frag[0], a_thread + read_stage * A_STAGE,
                                       b_thread + read_stage * B_STAGE);
      }
    };
    const float* a_tile = a_thread + read_stage * A_STAGE;
    const float* b_tile = b_thread + read_stage * B_STAGE;
    if constexpr (COMPACT) {
      // Steps 0 .. BK - 3 two at a time in a loop that is not unrolled; then the last two.
#pragma unroll 1
      for (int k = 0; k < BK - 2; k += 2) {
        load_fragments<TM, TN, TY, TX>(a_frag[1], b_frag[1], a_tile + A_STRIDE, b_tile + BN);
        outer_product<TM, TN>(acc, a_frag[0], b_frag[0]);
        load_fragments<TM, TN, TY, TX>(a_frag[0], b_frag[0], a_tile + 2 * A_STRIDE, b_tile + 2 * BN);
        outer_product<TM, TN>(acc, a_frag[1], b_frag[1]);
        a_tile += 2 * A_STRIDE;
        b_tile += 2 * BN;
      }
      load_fragments<TM, TN, TY, TX>(a_frag[1], b_frag[1], a_tile + A_STRIDE, b_tile + BN);
      outer_product<TM, TN>(acc, a_frag[0], b_frag[0]);
      next_tile();
      outer_product<TM, TN>(acc, a_frag[1], b_frag[1]);
    } else {
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        if (k < BK - 1) {
          load_fragments<TM, TN, TY, TX>(a_frag[(k + 1) % 2], b_frag[(k + 1) % 2], a_tile + (k + 1) * A_STRIDE,
                                         b_tile + (k + 1) * BN);
        } else {
          next_tile();
        }
        outer_product<TM, TN>(acc, a_frag[k % 2], b_frag[k % 2]);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: float4 stores, a warp writing 4 rows of 128 contiguous bytes per store.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    float* const c_row = C + (block_m * BM + 4 * ty + (i / 4) * 4 * TY + i % 4) * N + block_n * BN + 4 * tx;
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      store_scaled(c_row + j * 4 * TX, alpha, beta, acc[i][4 * j + 0], acc[i][4 * j + 1], acc[i][4 * j + 2],
                   acc[i][4 * j + 3]);
    }
  }
}
)CUDA";

/// The instantiations example_sgemm uses, sgemm<BM, BN, BK, TM, TN, STAGES> and sgemm_db<...>; each is
/// checked and timed, and the fastest is reported. All compute 128 x 128 tiles, 2 blocks per SM: 256
/// threads of 8 x 8 outputs (128 registers or fewer, 16 warps per SM), or 128 threads of 8 x 16 or
/// 16 x 8 outputs (255 or fewer, 8 warps per SM); k tiles of 8 (half the shared memory per stage,
/// twice the barriers) or 16, three or four stages.
inline const std::vector<std::string> name_expressions{
    "sgemm<128, 128, 8, 8, 8, 4>",
    "sgemm_db<128, 128, 8, 8, 8, 4>",
    "sgemm_db<128, 128, 16, 8, 8, 3>",
    "sgemm_db<128, 128, 16, 8, 8, 4>",
    "sgemm_db<128, 128, 16, 8, 16, 3>",
    "sgemm_db<128, 128, 16, 16, 8, 3>",
    "sgemm_db<128, 128, 8, 8, 16, 3, true>",
    "sgemm_db<128, 128, 16, 8, 16, 3, true>",
    "sgemm_db<128, 128, 16, 8, 16, 4, true>",
    "sgemm_db<128, 128, 16, 16, 8, 3, true>",
    "sgemm_db<128, 128, 16, 8, 8, 3, true>",
    "sgemm_db<128, 128, 16, 8, 8, 4, true>",
    "sgemm_db<128, 128, 8, 8, 8, 4, true>",
};

/// Plain sm_90: cp.async is sm_80+, nothing here needs the arch-specific target.
inline constexpr bool arch_specific = false;

}  // namespace example::sgemm_kernels
