// hopper_gemm: C = A * B^T in BF16 with FP32 accumulation on Hopper's tensor cores, fed by the Tensor
// Memory Accelerator, against cuBLAS GemmEx (BF16, FP32 accumulate, "TN") in the same run.
//
//   example_hopper_gemm [N | M N K]   default: 4096^3, 8192^3, then M = 8192, N = 4096, K = 16384
//                                     M and N multiples of 256, K a multiple of 64, each at most 65536
//
// A (M x K) and B (N x K) are row-major, K contiguous in both: "K-major" operands, the TN case of a
// column-major BLAS, which is what wgmma reads without transposition. C is M x N row-major BF16.
//
// What cudrv does for the kernel (examples/kernels/hopper_gemm.hpp, explained step by step in
// docs/examples.md):
//   - cudrv::program / compile_cache: NVRTC compiles the kernel for sm_90a (wgmma and setmaxnreg exist
//     only on the arch-specific target), the tile shape and cluster size as template parameters, one
//     name expression per instantiation; a second run loads the cubin from the cache;
//   - cudrv::make_tiled_tensor_map: one TMA descriptor per operand, BF16, 2-D, a box of 64 x rows
//     (64 bf16 = one 128-byte row) with the 128-byte swizzle that the wgmma descriptors name, passed by
//     value as `const __grid_constant__` kernel parameters; and one for C (boxes of 64 x 64, the same
//     swizzle), which the epilogues through shared memory store with;
//   - kernel_ref::set_max_dynamic_shared_memory: the 4 x 48 KiB ring of stages (and the epilogue's
//     staging buffers) is above the default 48 KiB limit;
//   - kernel_ref::max_active_clusters: how many clusters of two 384-thread blocks fit at once, the size
//     of the persistent grid;
//   - cudrv::launch with launch_config::cluster: the cluster launch (cuLaunchKernelEx), cooperative
//     (launch_config::cooperative) for the stream-K schedules, whose clusters wait for each other.
//
// A configuration is an instantiation and a schedule: one tile per cluster, or persistent with tile
// groups of 8 or 16, or persistent with a stream-K tail (1: the last partial wave's tiles split by K
// blocks over every cluster; 2: those and one more wave), whose partial sums meet in a device workspace.
//
// Every configuration is checked, from a C poisoned with NaN:
//   - against cuBLAS over every element: |c - c_cublas| <= 2^-7 |c_cublas| + 2^-12 rms(C) (one BF16
//     ulp of the value: both round an FP32 sum to BF16, and the sums differ in order), and the relative
//     Frobenius error ||C - C_cublas|| / ||C_cublas|| below 2^-8;
//   - against the host, in double from the same BF16 inputs, on 256 random entries:
//     |c - c_exact| <= 2^-8 |c_exact| + 2^-12 rms(C) (half an ulp of rounding, plus the FP32 sum's error);
//   - against itself: the C left by the timed runs is bit for bit the checked one;
//   - stream-K: no wait for a partial sum gave up (the kernel's bounded waits set an error flag).
//
// Figure: TFLOP/s = 2 M N K / time (median of the timed runs; two rounds, cuBLAS and every
// configuration interleaved, the better round of each counts), against cuBLAS's TFLOP/s; target 1.0
// (at 4096^3 and 8192^3; the other shapes, small ones included, are reported against the same target).
//
// example_hopper_gemm_fp8 is this file built with HOPPER_GEMM_FP8 defined (examples/CMakeLists.txt):
// the same kernel on E4M3 A and B (hopper_gemm<..., e4m3_operands>: wgmma m64n256k32, K blocks of 128),
// C still BF16 with FP32 accumulation, against cuBLASLt's FP8 GEMM (examples/reference/cublaslt.hpp)
// with and without its fast accumulation, the faster of the two being the figure's reference; target
// 0.95; default shapes 4096^3 and 8192^3; K a multiple of 128. Its inputs are multiples of 1/8 in
// [-1, 1] (exact in E4M3), so every product is a multiple of 2^-6 and every partial sum below 2^8 in
// magnitude is exact in any accumulator of 14 or more significant bits (the tensor cores' included):
// the checks and their bounds are the ones above, with rms(C) = sqrt(9 K / 64).
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA, compiler or cuBLAS
// error, or a device that is not compute capability 9.0 ("needs a Hopper GPU"; the GPU tier counts it as
// skipped), 5 a result differs from the reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "example_main.hpp"
#include "kernels/hopper_gemm.hpp"
#include "reference/cublas.hpp"
#ifdef HOPPER_GEMM_FP8
#include "reference/cublaslt.hpp"
#endif

namespace {

namespace kernels = example::hopper_gemm_kernels;
using gemm_fn = void(cudrv::tensor_map, cudrv::tensor_map, std::uint16_t*, int, int, int, int, cudrv::tensor_map,
                     float*, std::uint32_t*, int);

constexpr std::size_t m_multiple = 256;  // BM x the largest cluster
constexpr std::size_t n_multiple = 256;  // BN
constexpr std::size_t max_extent = 65536;
constexpr int samples = 256;
constexpr int rounds = 2;
constexpr std::uint16_t bf16_nan = 0xFFFF;

struct shape {
  std::size_t m, n, k;
};

// The operands of this build: BF16 (example_hopper_gemm) or E4M3 (example_hopper_gemm_fp8).
#ifdef HOPPER_GEMM_FP8
struct format {
  using element = std::uint8_t;  // E4M3 bits
  static constexpr const char* example = "hopper_gemm_fp8";
  static constexpr const char* operands = "E4M3 in, BF16 out, FP32 accumulation, inputs multiples of 1/8 in [-1, 1]";
  static constexpr std::size_t k_multiple = 128;  // BK: 128 E4M3 in a 128-byte row
  static constexpr cudrv::tensor_map_data_type map_type = cudrv::tensor_map_data_type::uint8;
  static constexpr double product_mean_square = 9.0 / 64.0;  // inputs v / 8, v uniform in -8..8: E[x^2] = 3/8
  static constexpr double target = 0.95;
  static constexpr const char* usage =
      "usage: example_hopper_gemm_fp8 [N | M N K]  (default 4096^3 and 8192^3; M and N multiples of 256, K of 128, "
      "each at most 65536)";
  static const std::vector<std::string>& expressions() { return kernels::fp8_name_expressions; }
  static std::vector<shape> default_shapes() { return {{4096, 4096, 4096}, {8192, 8192, 8192}}; }
};
#else
struct format {
  using element = std::uint16_t;  // BF16 bits
  static constexpr const char* example = "hopper_gemm";
  static constexpr const char* operands = "BF16 in and out, FP32 accumulation, inputs uniform in [-1, 1)";
  static constexpr std::size_t k_multiple = 64;  // BK
  static constexpr cudrv::tensor_map_data_type map_type = cudrv::tensor_map_data_type::bfloat16;
  static constexpr double product_mean_square = 1.0 / 9.0;  // two values uniform in [-1, 1), each of mean square 1/3
  static constexpr double target = 1.0;
  static constexpr const char* usage =
      "usage: example_hopper_gemm [N | M N K]  (default 4096^3, 8192^3 and 8192 x 4096 x 16384; M and N multiples "
      "of 256, K of 64, each at most 65536)";
  static const std::vector<std::string>& expressions() { return kernels::name_expressions; }
  static std::vector<shape> default_shapes() { return {{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 4096, 16384}}; }
};
#endif

// One instantiation of the kernel, with its template arguments read back from the name expression.
struct variant {
  variant(std::string e, cudrv::typed_kernel<gemm_fn> k) : expression(std::move(e)), kernel(std::move(k)) {}
  std::string expression;
  cudrv::typed_kernel<gemm_fn> kernel;
  int bm = 0, bn = 0, bk = 0, stages = 0, cluster = 0, producer_regs = 0, consumer_regs = 0;
  bool overlap = false;
  int store_buffers = 0;  // 0: the epilogue stores from registers; else staging buffers per consumer, TMA stores
  std::size_t shared_bytes = 0;
  int registers = 0;
  int local_bytes = 0;
  int max_clusters = 0;  // clusters (blocks when cluster == 1) resident at once: the persistent grid
};

constexpr int threads = 384;  // producer warpgroup + two consumer warpgroups

// `cooperative`: the stream-K schedules, whose clusters wait for each other's partial sums, ask the driver
// to refuse a grid that cannot be resident at once instead of trusting the occupancy query.
cudrv::launch_config config_of(const variant& v, unsigned clusters, bool cooperative = false) {
  cudrv::launch_config c{.grid = clusters * static_cast<unsigned>(v.cluster),
                         .block = threads,
                         .dynamic_shared_memory = v.shared_bytes,
                         .cooperative = cooperative};
  if (v.cluster > 1) {
    c.cluster = cudrv::dims(v.cluster);
  }
  return c;
}

variant make_variant(const cudrv::library& lib, const cudrv::device& dev, const std::string& expression) {
  variant v(expression, lib.get_kernel<gemm_fn>(expression));
  char overlap[8] = "";
  // The last template argument, STORE_BUFFERS, may be left to its default (0).
  const int fields =
      std::sscanf(expression.c_str(), "hopper_gemm<%d, %d, %d, %d, %d, %d, %d, %7[a-z], %d>", &v.bm, &v.bn, &v.bk,
                  &v.stages, &v.cluster, &v.producer_regs, &v.consumer_regs, overlap, &v.store_buffers);
  if ((fields != 8 && fields != 9) || m_multiple % static_cast<std::size_t>(v.bm * v.cluster) != 0 ||
      n_multiple % static_cast<std::size_t>(v.bn) != 0 || format::k_multiple % static_cast<std::size_t>(v.bk) != 0) {
    throw std::logic_error("hopper_gemm: unexpected name expression " + expression);
  }
  v.overlap = std::string(overlap) == "true";
  // The ring of stages, the epilogue's staging buffers (8 KiB each, per consumer warpgroup), 1 KiB of
  // slack to align them to 1024 bytes, and two mbarriers per stage.
  v.shared_bytes = static_cast<std::size_t>(v.stages) * static_cast<std::size_t>(v.bm + v.bn) *
                       static_cast<std::size_t>(v.bk) * sizeof(format::element) +
                   static_cast<std::size_t>(2 * v.store_buffers) * 8192 + 1024 +
                   static_cast<std::size_t>(v.stages) * 16;
  v.kernel.set_max_dynamic_shared_memory(dev, v.shared_bytes);
  const cudrv::kernel_attributes attributes = v.kernel.attributes(dev);
  v.registers = attributes.num_regs;
  v.local_bytes = attributes.local_size_bytes;
  if (v.cluster > 1) {
    v.max_clusters = v.kernel.max_active_clusters(dev, config_of(v, 1));
  } else {
    v.max_clusters = v.kernel.max_active_blocks_per_multiprocessor(dev, threads, v.shared_bytes) *
                     dev.attribute(cudrv::device_attributes::multiprocessor_count);
  }
  if (v.max_clusters < 1) {
    throw std::runtime_error("hopper_gemm: " + expression + " cannot be resident on this device");
  }
  return v;
}

// One way to run a variant: its grid (persistent: as many clusters as fit; or one cluster per tile),
// the group size of the tile order, and the stream-K tail of the persistent grid: 0 none; 1 the tiles
// of the last partial wave (tiles % clusters); 2 those and one more wave.
struct configuration {
  std::size_t variant;
  bool persistent;
  int group_m;
  int stream_k = 0;
};

// The tiles the kernel spreads over every cluster by stream-K (its last argument), out of `tiles`
// cluster tiles on a grid of `clusters`.
int stream_k_tiles(const configuration& c, std::size_t tiles, std::size_t clusters) {
  if (!c.persistent || c.stream_k == 0 || tiles <= clusters) {
    return 0;
  }
  return static_cast<int>(tiles % clusters + (c.stream_k == 2 ? clusters : 0));
}

using example::random_source;

// BF16 <-> float: a bf16 is the upper half of a float's bits.
float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
#ifdef HOPPER_GEMM_FP8
// An E4M3 value (1 sign, 4 exponent bits of bias 7, 3 significand bits; 0x7F and 0xFF are NaN) as a float.
float operand_to_float(std::uint8_t x) {
  const int exponent = (x >> 3) & 0xF;
  const int significand = x & 0x7;
  if (exponent == 0xF && significand == 0x7) {
    return std::numeric_limits<float>::quiet_NaN();
  }
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(significand), -9)
                                        : std::ldexp(static_cast<float>(8 + significand), exponent - 10);
  return (x & 0x80) != 0 ? -magnitude : magnitude;
}
// Random E4M3 values v / 8, v uniform in -8..8 (exact in E4M3: |v| has at most 4 significant bits).
std::vector<std::uint8_t> random_operands(std::size_t count, random_source& rng) {
  std::vector<std::uint8_t> v(count);
  for (std::uint8_t& x : v) {
    const int value = static_cast<int>(rng.next() % 17) - 8;
    const int magnitude = value < 0 ? -value : value;
    std::uint8_t code = 0;
    if (magnitude != 0) {
      int e = 0;  // magnitude = 1.f x 2^e, e in 0..3; the value's exponent is e - 3, biased e + 4
      while ((magnitude >> (e + 1)) != 0) {
        ++e;
      }
      code = static_cast<std::uint8_t>(((e + 4) << 3) | (((magnitude << (3 - e)) - 8) & 0x7));
    }
    x = static_cast<std::uint8_t>(code | (value < 0 ? 0x80 : 0));
    if (operand_to_float(x) != static_cast<float>(value) / 8.0f) {
      throw std::logic_error("hopper_gemm_fp8: E4M3 encoding of " + std::to_string(value) + " / 8");
    }
  }
  return v;
}
#else
float operand_to_float(std::uint16_t h) { return bf16_to_float(h); }
// Random BF16 values uniform in [-1, 1): 8 random bits of significand, exact in BF16.
std::vector<std::uint16_t> random_operands(std::size_t count, random_source& rng) {
  std::vector<std::uint16_t> v(count);
  for (std::uint16_t& x : v) {
    const float f = static_cast<float>(static_cast<int>(rng.next() >> 56) - 128) / 128.0f;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    x = static_cast<std::uint16_t>(bits >> 16);  // exact: f has at most 8 significant bits
  }
  return v;
}
#endif

// Sampled entries of A * B^T in double, from the inputs.
struct host_reference {
  std::vector<std::size_t> rows, cols;
  std::vector<double> entries;

  host_reference(const std::vector<format::element>& a, const std::vector<format::element>& b, const shape& s,
                 random_source& rng) {
    for (int i = 0; i < samples; ++i) {
      const std::size_t r = static_cast<std::size_t>(rng.next() % s.m);
      const std::size_t c = static_cast<std::size_t>(rng.next() % s.n);
      double sum = 0;
      for (std::size_t k = 0; k < s.k; ++k) {
        sum += static_cast<double>(operand_to_float(a[r * s.k + k])) *
               static_cast<double>(operand_to_float(b[c * s.k + k]));
      }
      rows.push_back(r);
      cols.push_back(c);
      entries.push_back(sum);
    }
  }
};

struct check_result {
  double vs_cublas = -1;        // relative Frobenius error against cuBLAS; -1: no cuBLAS
  std::size_t over_cublas = 0;  // elements outside the element bound against cuBLAS
  double worst_cublas = 0;      // the largest |c - c_cublas| / bound
  double vs_samples = 0;        // relative error on the sampled entries
  std::size_t over_samples = 0;
  std::size_t not_finite = 0;
  bool ok = false;
};

check_result check(const std::vector<std::uint16_t>& c, const shape& s, const host_reference& host,
                   const std::vector<float>* cublas_c, double rms) {
  check_result r;
  const double abs_term = std::ldexp(rms, -12);
  if (cublas_c != nullptr) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const double x = bf16_to_float(c[i]);
      const double ref = (*cublas_c)[i];
      if (!std::isfinite(x)) {
        ++r.not_finite;
        continue;
      }
      const double d = std::fabs(x - ref);
      const double bound = std::fabs(ref) * 0x1p-7 + abs_term;  // = ldexp(|ref|, -7), without a call per element
      r.worst_cublas = std::max(r.worst_cublas, d / bound);
      r.over_cublas += d > bound ? 1 : 0;
      num += d * d;
      den += ref * ref;
    }
    r.vs_cublas = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  } else {
    r.not_finite = static_cast<std::size_t>(
        std::count_if(c.begin(), c.end(), [](std::uint16_t h) { return !std::isfinite(bf16_to_float(h)); }));
  }
  double num = 0, den = 0;
  for (int i = 0; i < samples; ++i) {
    const double x = bf16_to_float(c[host.rows[i] * s.n + host.cols[i]]);
    const double exact = host.entries[i];
    const double d = std::fabs(x - exact);
    // Written so that a NaN counts as over the bound.
    r.over_samples += d <= std::ldexp(std::fabs(exact), -8) + abs_term ? 0 : 1;
    num += d * d;
    den += exact * exact;
  }
  r.vs_samples = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  r.ok = r.not_finite == 0 && r.over_cublas == 0 && r.over_samples == 0 &&
         (cublas_c == nullptr || r.vs_cublas < std::ldexp(1.0, -8));
  return r;
}

std::string describe(const variant& v, const configuration& c) {
  return v.expression + (c.persistent ? " persistent" : " 1 tile/cluster") + " g" + std::to_string(c.group_m) +
         (c.stream_k == 0 ? "" : " stream-K" + std::to_string(c.stream_k));
}

#ifdef HOPPER_GEMM_FP8
// The vendor's product every configuration is checked and timed against: cuBLASLt's FP8 GEMM in two modes,
// 0 with fast accumulation (the kernel's own arithmetic: the partial sums stay in the tensor cores'
// accumulators), 1 cuBLASLt's default. The faster is the figure's reference.
class vendor_reference {
 public:
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;
  vendor_reference(const cudrv::device& dev, cudrv::stream_ref stream) : stream_(stream.native_handle()) {
    if (lt_.available()) {
      workspace_ = std::make_unique<cudrv::device_buffer<unsigned char>>(dev, workspace_bytes);
    }
  }
  [[nodiscard]] bool available() const { return lt_.available(); }
  [[nodiscard]] std::string description() const {
    if (!available()) {
      return "none: " + lt_.unavailable_reason() + "; results are checked against the host only";
    }
    const int ver = lt_.version();
    return lt_.library_name() + " (cuBLASLt " + std::to_string(ver / 10000) + "." + std::to_string(ver / 100 % 100) +
           "." + std::to_string(ver % 100) +
           "), cublasLtMatmul E4M3 TN, BF16 D, CUBLAS_COMPUTE_32F, 32 MiB workspace, the heuristic's first algorithm";
  }
  [[nodiscard]] static constexpr std::size_t modes() { return 2; }
  [[nodiscard]] static const char* name(std::size_t mode) {
    return mode == 0 ? "cuBLASLt FP8 TN, fast accumulation" : "cuBLASLt FP8 TN, default accumulation";
  }
  static constexpr const char* short_name = "cuBLASLt";
  void prepare(const shape& s) {
    for (std::size_t mode = 0; mode < modes(); ++mode) {
      plans_[mode] = lt_.plan_fp8_gemm_tn(static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k),
                                          mode == 0, workspace_bytes);
    }
  }
  void gemm(std::size_t mode, const std::uint8_t* a, const std::uint8_t* b, std::uint16_t* c) const {
    plans_[mode]->run(a, b, c, workspace_->get(), workspace_bytes, stream_);
  }

 private:
  example::reference::cublaslt lt_;
  CUstream stream_;
  std::unique_ptr<cudrv::device_buffer<unsigned char>> workspace_;
  std::unique_ptr<example::reference::cublaslt::fp8_gemm_tn> plans_[2];  // destroyed before lt_
};
#else
// The vendor's product every configuration is checked and timed against: cuBLAS GemmEx, BF16 TN.
class vendor_reference {
 public:
  vendor_reference(const cudrv::device&, cudrv::stream_ref stream) : cublas_(CUBLAS_DEFAULT_MATH) {
    if (available()) {
      cublas_.set_stream(stream.native_handle());
    }
  }
  [[nodiscard]] bool available() const { return cublas_.available() && cublas_.has_gemm_ex(); }
  [[nodiscard]] std::string description() const {
    if (!available()) {
      return std::string("none: ") + (cublas_.available() ? "no cublasGemmEx" : cublas_.unavailable_reason()) +
             "; results are checked against the host only";
    }
    const int ver = cublas_.version();
    return cublas_.library_name() + " (cuBLAS " + std::to_string(ver / 10000) + "." + std::to_string(ver / 100 % 100) +
           "." + std::to_string(ver % 100) + "), cublasGemmEx BF16 TN, CUBLAS_COMPUTE_32F";
  }
  [[nodiscard]] static constexpr std::size_t modes() { return 1; }
  [[nodiscard]] static const char* name(std::size_t) { return "cuBLAS GemmEx BF16 TN"; }
  static constexpr const char* short_name = "cuBLAS";
  void prepare(const shape& s) { s_ = s; }
  void gemm(std::size_t, const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* c) const {
    cublas_.bf16_gemm_tn(static_cast<int>(s_.m), static_cast<int>(s_.n), static_cast<int>(s_.k), a, b, c);
  }

 private:
  example::reference::cublas cublas_;
  shape s_{};
};
#endif

bool run_shape(const cudrv::device& dev, cudrv::stream_ref stream, std::vector<variant>& variants,
               const std::vector<configuration>& configs, vendor_reference* cublas, const shape& s) {
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  const int repetitions = flops > 5e11 ? 20 : flops > 1e10 ? 50 : 5;  // test sizes: a few (the sanitizer)
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  std::printf("%s: M = %d, N = %d, K = %d: C = A * B^T, %s, %.4g GFLOP per product\n", format::example, m, n, k,
              format::operands, flops * 1e-9);

  random_source rng{0x6e44000ull + s.m * 3 + s.n * 5 + s.k * 7};
  const std::vector<format::element> a = random_operands(s.m * s.k, rng);
  const std::vector<format::element> b = random_operands(s.n * s.k, rng);
  const host_reference host(a, b, s, rng);
  // The typical size of an element of C: K products of two random inputs, each product of mean square
  // format::product_mean_square.
  const double rms = std::sqrt(static_cast<double>(s.k) * format::product_mean_square);

  cudrv::device_buffer<format::element> da(dev, a.size()), db(dev, b.size());
  cudrv::device_buffer<std::uint16_t> dc(dev, s.m * s.n), dref(dev, s.m * s.n);
  cudrv::copy(da, a, stream);
  cudrv::copy(db, b, stream);
  std::vector<std::uint16_t> c(s.m * s.n);

  // The tensor maps: BF16 (FP8: bytes), 2-D (K innermost), boxes of BK x rows (one 128-byte row: 64
  // BF16 or 128 E4M3) with the 128-byte swizzle. A's box is one block's BM rows; B's is the share of BN
  // rows that each block of a cluster loads.
  auto make_map = [&](const cudrv::device_buffer<format::element>& buffer, std::size_t rows, int box_rows) {
    cudrv::tiled_tensor_map_desc desc;
    desc.data_type = format::map_type;
    desc.rank = 2;
    desc.global_address = buffer.view().data();
    desc.global_dims = {s.k, rows};
    desc.global_strides = {s.k * sizeof(format::element)};
    desc.box_dims = {static_cast<std::uint32_t>(format::k_multiple), static_cast<std::uint32_t>(box_rows)};
    desc.swizzle = cudrv::tensor_map_swizzle::bytes_128;
    desc.l2_promotion = cudrv::tensor_map_l2_promotion::bytes_256;
    return cudrv::make_tiled_tensor_map(desc);
  };
  std::vector<cudrv::tensor_map> a_maps, b_maps;
  for (const variant& v : variants) {
    a_maps.push_back(make_map(da, s.m, v.bm));
    b_maps.push_back(make_map(db, s.n, v.bn / v.cluster));
  }
  // C's map, for the epilogues that store through shared memory: BF16, 2-D (N innermost), boxes of
  // 64 columns (one 128-byte row) x 64 rows in the 128-byte swizzle the staging buffers are written in.
  cudrv::tiled_tensor_map_desc c_desc;
  c_desc.data_type = cudrv::tensor_map_data_type::bfloat16;
  c_desc.rank = 2;
  c_desc.global_address = dc.view().data();
  c_desc.global_dims = {s.n, s.m};
  c_desc.global_strides = {s.n * 2};
  c_desc.box_dims = {64, 64};
  c_desc.swizzle = cudrv::tensor_map_swizzle::bytes_128;
  const cudrv::tensor_map c_map = cudrv::make_tiled_tensor_map(c_desc);

  // Stream-K's workspace: one 64 x 256 FP32 slot per consumer warpgroup of the largest grid, and its
  // flags: flags[0] is set by a wait that gave up (then the configuration counts as wrong), flags[1 + i]
  // say slot i is published; the kernel clears each after reading it.
  std::size_t max_blocks = 0;
  for (const variant& v : variants) {
    max_blocks = std::max(max_blocks, static_cast<std::size_t>(v.max_clusters * v.cluster));
  }
  cudrv::device_buffer<float> workspace(dev, max_blocks * 2 * 64 * 256);
  cudrv::device_buffer<std::uint32_t> flags(dev, 1 + max_blocks * 2);
  std::vector<std::uint32_t> host_flags(1 + max_blocks * 2);
  cudrv::fill(flags, 0u, stream);
  // Whether a stream-K wait gave up since the last call (and clears the flags for the next run).
  auto stream_k_failed = [&] {
    cudrv::copy(host_flags, flags, stream);
    stream.synchronize();
    const bool failed = host_flags[0] != 0;
    if (failed) {
      cudrv::fill(flags, 0u, stream);
    }
    return failed;
  };

  // The vendor's product, once per mode, checked against the host (and, from the second on, every element
  // against the mode checked before it); mode 0's is the reference of every configuration. A vendor result
  // that fails its check fails the run, but the configurations are still checked against the host and timed.
  std::vector<float> cublas_c;
  bool vendor_ok = true;
  if (cublas != nullptr) {
    cublas->prepare(s);
    for (std::size_t mode = vendor_reference::modes(); mode-- > 0;) {
      cudrv::fill(dref, bf16_nan, stream);
      cublas->gemm(mode, da.get(), db.get(), dref.get());
      cudrv::copy(c, dref, stream);
      stream.synchronize();
      const check_result r = check(c, s, host, cublas_c.empty() ? nullptr : &cublas_c, rms);
      std::printf("  %s against the host: %.2e on %d entries%s\n", vendor_reference::name(mode), r.vs_samples, samples,
                  r.ok ? "" : "  WRONG");
      if (!r.ok) {
        std::fprintf(stderr, "%s: %s's result differs from the host's\n", format::example,
                     vendor_reference::name(mode));
        vendor_ok = false;
        break;
      }
      cublas_c.resize(c.size());
      std::transform(c.begin(), c.end(), cublas_c.begin(), bf16_to_float);
    }
    if (!vendor_ok) {
      cublas_c.clear();
    }
  }

  auto launch = [&](const configuration& cfg, cudrv::stream_ref st) {
    const variant& v = variants[cfg.variant];
    const std::size_t tiles =
        (s.m / static_cast<std::size_t>(v.bm * v.cluster)) * (s.n / static_cast<std::size_t>(v.bn));
    const std::size_t clusters = cfg.persistent ? std::min(tiles, static_cast<std::size_t>(v.max_clusters)) : tiles;
    const int split = stream_k_tiles(cfg, tiles, clusters);
    cudrv::launch(st, config_of(v, static_cast<unsigned>(clusters), split != 0), v.kernel, a_maps[cfg.variant],
                  b_maps[cfg.variant], dc.get(), m, n, k, cfg.group_m, c_map, workspace.get(), flags.get(), split);
  };

  std::vector<check_result> checks;
  std::vector<std::uint64_t> hashes;
  const bool trace = std::getenv("HOPPER_GEMM_TRACE") != nullptr;  // names each launch first (a hang shows where)
  for (const configuration& cfg : configs) {
    if (trace) {
      std::printf("  checking %s\n", describe(variants[cfg.variant], cfg).c_str());
      std::fflush(stdout);
    }
    cudrv::fill(dc, bf16_nan, stream);
    launch(cfg, stream);
    cudrv::copy(c, dc, stream);
    stream.synchronize();
    checks.push_back(check(c, s, host, cublas_c.empty() ? nullptr : &cublas_c, rms));
    hashes.push_back(example::hash_bits(c));
    if (stream_k_failed()) {
      checks.back().ok = false;
      std::printf("  %s: a stream-K wait gave up (partial sums never published)\n",
                  describe(variants[cfg.variant], cfg).c_str());
    }
  }

  std::vector<std::vector<double>> config_ms(configs.size());
  std::vector<std::vector<double>> cublas_ms(cublas != nullptr ? vendor_reference::modes() : 0);
  std::vector<bool> stable(configs.size(), true);
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t mode = 0; mode < cublas_ms.size(); ++mode) {
      cublas_ms[mode].push_back(example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref) {
        cublas->gemm(mode, da.get(), db.get(), dref.get());
      }));
    }
    for (std::size_t i = 0; i < configs.size(); ++i) {
      if (!checks[i].ok) {
        continue;
      }
      cudrv::fill(dc, bf16_nan, stream);
      config_ms[i].push_back(
          example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref st) { launch(configs[i], st); }));
      cudrv::copy(c, dc, stream);
      stream.synchronize();
      const bool gave_up = stream_k_failed();
      stable[i] = stable[i] && example::hash_bits(c) == hashes[i] && !gave_up;
    }
  }

  // The reference is the vendor's fastest mode (its best round).
  double best_cublas_ms = 0;
  const char* cublas_name = "no reference";
  for (std::size_t mode = 0; mode < cublas_ms.size(); ++mode) {
    const double ms = *std::min_element(cublas_ms[mode].begin(), cublas_ms[mode].end());
    std::printf("  %-78s %s %7.1f TFLOP/s\n", vendor_reference::name(mode),
                example::format_rounds(cublas_ms[mode]).c_str(), flops / (ms * 1e9));
    if (best_cublas_ms == 0 || ms < best_cublas_ms) {
      best_cublas_ms = ms;
      cublas_name = vendor_reference::name(mode);
    }
  }
  const double cublas_tflops = best_cublas_ms > 0 ? flops / (best_cublas_ms * 1e9) : 0;
  bool ok = true;
  std::size_t best = configs.size();
  std::vector<double> best_ms(configs.size(), 0.0);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const check_result& r = checks[i];
    const std::string name = describe(variants[configs[i].variant], configs[i]);
    char errors[240];
    std::snprintf(errors, sizeof errors,
                  "error %.1e vs %s (%zu elements over the bound, worst %.2f of it), %.1e on %d entries (%zu "
                  "over)%s",
                  r.vs_cublas, vendor_reference::short_name, r.over_cublas, r.worst_cublas, r.vs_samples, samples,
                  r.over_samples, r.not_finite != 0 ? ", NON-FINITE elements" : "");
    if (!r.ok || !stable[i]) {
      ok = false;
      std::printf("  %-78s WRONG: %s%s\n", name.c_str(), errors, r.ok ? ", and the timed runs left a different C" : "");
      continue;
    }
    best_ms[i] = *std::min_element(config_ms[i].begin(), config_ms[i].end());
    const double tflops = flops / (best_ms[i] * 1e9);
    std::printf("  %-78s %s %7.1f TFLOP/s", name.c_str(), example::format_rounds(config_ms[i]).c_str(), tflops);
    if (cublas_tflops > 0) {
      std::printf("  %.3f x %s", tflops / cublas_tflops, vendor_reference::short_name);
    }
    std::printf("  %s\n", errors);
    if (best == configs.size() || best_ms[i] < best_ms[best]) {
      best = i;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "%s: M = %d, N = %d, K = %d: a result differs from the reference\n", format::example, m, n, k);
  }
  ok = ok && vendor_ok;
  if (best == configs.size()) {
    return false;
  }
  const configuration& cfg = configs[best];
  const variant& v = variants[cfg.variant];
  const double tflops = flops / (best_ms[best] * 1e9);
  char detail[400];
  std::snprintf(detail, sizeof detail,
                "M=%d N=%d K=%d, %s (%d threads, %d regs at entry, %.0f KiB smem, %d %s resident), %.3f ms; %s %.3f ms",
                m, n, k, describe(v, cfg).c_str(), threads, v.registers, static_cast<double>(v.shared_bytes) / 1024.0,
                v.max_clusters, v.cluster > 1 ? "clusters" : "blocks", best_ms[best], cublas_name, best_cublas_ms);
  char json[240];
  std::snprintf(json, sizeof json,
                "\"m\": %d, \"n\": %d, \"k\": %d, \"cluster\": %d, \"persistent\": %s, \"stages\": %d, "
                "\"store_buffers\": %d, \"stream_k\": %d",
                m, n, k, v.cluster, cfg.persistent ? "true" : "false", v.stages, v.store_buffers, cfg.stream_k);
  example::report({.example = format::example,
                   .metric = "TFLOP/s",
                   .value = tflops,
                   .reference = cublas_tflops,
                   .reference_name = cublas_name,
                   .target = cublas_tflops > 0 ? format::target : 0.0,
                   .detail = detail,
                   .bytes = static_cast<double>((s.m * s.k + s.n * s.k) * sizeof(format::element) + s.m * s.n * 2),
                   .flops = flops,
                   .seconds = best_ms[best] * 1e-3,
                   .json = json});
  return ok;
}

bool run(const std::vector<shape>& shapes) {
  for (const shape& s : shapes) {
    if (s.m % m_multiple != 0 || s.n % n_multiple != 0 || s.k % format::k_multiple != 0 || s.m > max_extent ||
        s.n > max_extent || s.k > max_extent) {
      throw example::usage_error{"M = " + std::to_string(s.m) + ", N = " + std::to_string(s.n) +
                                 ", K = " + std::to_string(s.k) + " is not allowed; " + format::usage};
    }
  }
  cudrv::device dev(0);
  dev.set_current();  // cuBLAS (the runtime) works in the current context: make it dev's primary context
  const cudrv::compute_capability cc = dev.compute_capability();
  if (cc.major != 9 || cc.minor != 0) {
    throw std::runtime_error("needs a Hopper GPU: the kernel is sm_90a code (wgmma, setmaxnreg, TMA multicast), for "
                             "compute capability 9.0 (H100, H200) only; device 0 is " +
                             dev.name() + ", " + dev.arch());
  }
  cudrv::stream stream(dev);
  std::printf("%s: %s (%s, %d SMs, %.2f GHz)\n", format::example, dev.name().c_str(), dev.arch().c_str(),
              dev.attribute(cudrv::device_attributes::multiprocessor_count),
              dev.attribute(cudrv::device_attributes::clock_rate_khz) * 1e-6);

  cudrv::compile_options options;
  options.arch = example::arch_of(dev, kernels::arch_specific);  // sm_90a
  cudrv::library lib = example::compile(dev, "hopper_gemm.cu", kernels::source, format::expressions(), options);
  std::vector<variant> variants;
  for (const std::string& expression : format::expressions()) {
    variants.push_back(make_variant(lib, dev, expression));
    const variant& v = variants.back();
    std::printf("  %-62s %d threads, %3d registers at entry, %5.1f KiB shared, %d %s resident%s\n",
                v.expression.c_str(), threads, v.registers, static_cast<double>(v.shared_bytes) / 1024.0,
                v.max_clusters, v.cluster > 1 ? "clusters" : "blocks",
                v.local_bytes != 0 ? ", LOCAL MEMORY (spills)" : "");
  }
  std::vector<configuration> configs;
  // HOPPER_GEMM_VARIANT=i runs the i-th instantiation only (for profiling one kernel).
  const char* only = std::getenv("HOPPER_GEMM_VARIANT");
  for (std::size_t i = 0; i < variants.size(); ++i) {
    if (only != nullptr && std::to_string(i) != only) {
      continue;
    }
    configs.push_back({i, false, 8});
    configs.push_back({i, true, 8});
    configs.push_back({i, true, 16});
    configs.push_back({i, true, 8, 1});
    configs.push_back({i, true, 8, 2});
  }

  vendor_reference cublas(dev, stream);
  std::printf("  reference: %s\n", cublas.description().c_str());
  bool ok = true;
  for (const shape& s : shapes) {
    ok = run_shape(dev, stream, variants, configs, cublas.available() ? &cublas : nullptr, s) && ok;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run(format::example, [&] {
    if (argc != 1 && argc != 2 && argc != 4) {
      throw example::usage_error{format::usage};
    }
    std::vector<shape> shapes = format::default_shapes();
    if (argc == 2) {
      const std::size_t n = example::size_arg(argc, argv, 1, 0, "N");
      shapes = {{n, n, n}};
    } else if (argc == 4) {
      shapes = {{example::size_arg(argc, argv, 1, 0, "M"), example::size_arg(argc, argv, 2, 0, "N"),
                 example::size_arg(argc, argv, 3, 0, "K")}};
    }
    return run(shapes);
  });
}
