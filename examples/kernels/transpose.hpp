// Device code of example_transpose (examples/transpose.cpp): out = in^T for a square n x n float
// matrix stored row-major, in two versions compiled at run time by NVRTC.
#pragma once

#include <string>
#include <vector>

namespace example::transpose_kernels {

inline constexpr const char* source = R"CUDA(
// The naive transpose: thread (x, y) moves in[y][x] to out[x][y]. A warp (32 consecutive x) reads
// one 128-byte line of a row, but its 32 writes land 4 * n bytes apart: 32 lines for 128 bytes.
extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < n && y < n) {
    out[static_cast<unsigned long long>(x) * n + y] = in[static_cast<unsigned long long>(y) * n + x];
  }
}

// The tiled transpose: a block of 8 x 32 threads moves one 64 x 64 tile. It reads the tile's rows
// with 16-byte loads (four per thread, all in flight before the first use), writes them to shared
// memory, and after the barrier reads the tile's columns from shared memory to write the output's
// rows with 16-byte stores: both device-memory directions are coalesced.
//
// Shared memory has 32 banks of 4 bytes; word w lies in bank w % 32. A row of 65 words (one of
// padding) puts tile[r][c] in bank (r + c) % 32, so the 32 lanes of a warp (tx = lane % 8 picks a
// group of 4 columns, ty = lane / 8 one of 4 rows) touch 32 different banks both when they store
// row pieces (r + 4 tx + k) and when they load column pieces (4 tx + k + j). Without the padding, a
// column read would find its 8 rows of one column in one bank (row stride 64 words): 8-way conflicts.
constexpr int TILE = 64;

extern "C" __global__ void __launch_bounds__(256) transpose_tiled(const float* __restrict__ in,
                                                                  float* __restrict__ out, int n) {
  __shared__ float tile[TILE][TILE + 1];
  const int tx = threadIdx.x;  // 0..7: which 4 columns of a 32-column half
  const int ty = threadIdx.y;  // 0..31: which row of a 32-row half
  const int row0 = blockIdx.y * TILE;
  const int col0 = blockIdx.x * TILE;
  // Full tiles of a matrix whose rows start 16-byte aligned (n a multiple of 4, and in and out
  // 16-byte aligned, as cudrv's device buffers are) take the vector path; the tiles along the right
  // and bottom edges of any other side take the checked scalar path.
  const bool full = n % 4 == 0 && row0 + TILE <= n && col0 + TILE <= n;

  if (full) {
    float4 v[2][2];
#pragma unroll
    for (int a = 0; a < 2; ++a) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const unsigned long long row = row0 + ty + 32 * a;
        v[a][b] = *reinterpret_cast<const float4*>(in + row * n + col0 + 4 * (tx + 8 * b));
      }
    }
#pragma unroll
    for (int a = 0; a < 2; ++a) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        float* t = &tile[ty + 32 * a][4 * (tx + 8 * b)];
        t[0] = v[a][b].x;
        t[1] = v[a][b].y;
        t[2] = v[a][b].z;
        t[3] = v[a][b].w;
      }
    }
  } else {
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 2; ++b) {
        for (int k = 0; k < 4; ++k) {
          const int r = ty + 32 * a;
          const int c = 4 * (tx + 8 * b) + k;
          if (row0 + r < n && col0 + c < n) {
            tile[r][c] = in[static_cast<unsigned long long>(row0 + r) * n + col0 + c];
          }
        }
      }
    }
  }
  __syncthreads();

  // Output row col0 + j holds input column col0 + j; this thread writes its elements
  // row0 + i .. row0 + i + 3, which are tile[i .. i + 3][j].
  if (full) {
#pragma unroll
    for (int a = 0; a < 2; ++a) {
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int j = ty + 32 * a;
        const int i = 4 * (tx + 8 * b);
        const float4 w = make_float4(tile[i][j], tile[i + 1][j], tile[i + 2][j], tile[i + 3][j]);
        const unsigned long long row = col0 + j;
        *reinterpret_cast<float4*>(out + row * n + row0 + i) = w;
      }
    }
  } else {
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 2; ++b) {
        for (int k = 0; k < 4; ++k) {
          const int j = ty + 32 * a;
          const int i = 4 * (tx + 8 * b) + k;
          if (col0 + j < n && row0 + i < n) {
            out[static_cast<unsigned long long>(col0 + j) * n + row0 + i] = tile[i][j];
          }
        }
      }
    }
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::transpose_kernels
