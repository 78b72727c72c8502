// sgemm: C = A * B in FP32 on the CUDA cores (no tensor cores), row-major A (N x N), B and C, against
// cuBLAS SGEMM in pedantic FP32 in the same run.
//
//   example_sgemm [N]       an N x N x N product; default: 4096, then 8192. N a multiple of 128, at most 32768
//
// The kernels (examples/kernels/sgemm.hpp) are templates over their tiling, sgemm<BM, BN, BK, TM, TN, STAGES>
// and sgemm_db<...>: a block of (BM / TM) * (BN / TN) threads computes a BM x BN tile of C, each thread
// a TM x TN tile in registers; tiles of A and B move from global to shared memory with cp.async copies,
// STAGES deep, so that the copies of the next tiles overlap the FFMAs of the current one. sgemm_db
// stores the A tile transposed and double-buffers the fragments of A and B in registers. NVRTC compiles the
// instantiations named in kernels::name_expressions through the compile cache (a second run loads
// the cubin from the cache), each is launched through a typed kernel, checked and timed, and the
// fastest is reported.
//
// The reference is cuBLAS, loaded at run time (examples/reference/cublas.hpp; never linked), in
// CUBLAS_PEDANTIC_MATH mode. Each variant's result is checked against
//   - cuBLAS's, over every element: ||C - C_cublas|| / ||C_cublas||;
//   - the host in double on 256 random entries: ||c - c_host|| / ||c_host|| over those entries;
//   - the host in double through a random vector x (every element weighs in): ||C x - A (B x)|| / ||A (B x)||;
//   - itself: the result left by the timed runs, poisoned first, is bitwise the one checked.
// The bound is 1e-5 for K <= 8192 (FP32 sums of K products in different orders differ by ~2e-6 there),
// growing as sqrt(K) beyond. C is poisoned with NaN before every checked run.
//
// Figure: TFLOP/s = 2 N^3 / time (median of the timed runs; two rounds, cuBLAS and every variant
// interleaved, the better round of each counts), against cuBLAS's TFLOP/s; target 0.95. Without
// cuBLAS the figure is reported against the FP32 peak computed from the device attributes
// (SMs x FP32 lanes per SM x 2 x clock), with no target.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler (or
// cuBLAS) error, 5 a result differs from the reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "example_main.hpp"
#include "kernels/sgemm.hpp"
#include "reference/cublas.hpp"

namespace {

namespace kernels = example::sgemm_kernels;
using sgemm_fn = void(int, int, int, float, const float*, const float*, float, float*);

constexpr std::size_t size_multiple = 128;  // the largest tile edge of the instantiations
constexpr std::size_t max_size = 32768;     // keeps every matrix under 2^31 elements (32-bit offsets)
constexpr int samples = 256;                // entries checked against the host in double
constexpr int rounds = 2;                   // timing rounds, cuBLAS and the variants interleaved
const char* const usage =
    "usage: example_sgemm [N]  (N x N x N; default 4096, then 8192; N a multiple of 128, at most 32768)";

// One instantiation of the kernel, with the tiling read back from its name expression.
struct variant {
  variant(std::string e, cudrv::typed_kernel<sgemm_fn> k) : expression(std::move(e)), kernel(std::move(k)) {}
  std::string expression;
  cudrv::typed_kernel<sgemm_fn> kernel;
  int bm = 0, bn = 0, bk = 0, tm = 0, tn = 0, stages = 0;
  int threads = 0;
  std::size_t shared_bytes = 0;  // dynamic shared memory per block: STAGES x (A tile, padded, + B tile)
  int registers = 0;
  int local_bytes = 0;
  int blocks_per_sm = 0;
};

variant make_variant(const cudrv::library& lib, const cudrv::device& dev, const std::string& expression) {
  variant v(expression, lib.get_kernel<sgemm_fn>(expression));
  const char* const e = expression.c_str();
  bool transposed_a = false;  // sgemm_db keeps the A tile as [BK][BM + 4], sgemm as [BM][BK + 4]
  if (std::sscanf(e, "sgemm_db<%d, %d, %d, %d, %d, %d>", &v.bm, &v.bn, &v.bk, &v.tm, &v.tn, &v.stages) == 6) {
    transposed_a = true;
  } else if (std::sscanf(e, "sgemm<%d, %d, %d, %d, %d, %d>", &v.bm, &v.bn, &v.bk, &v.tm, &v.tn, &v.stages) != 6) {
    throw std::logic_error("sgemm: unexpected name expression " + expression);
  }
  if (size_multiple % static_cast<std::size_t>(v.bm) != 0 || size_multiple % static_cast<std::size_t>(v.bn) != 0) {
    throw std::logic_error("sgemm: a tile of " + expression + " does not divide " + std::to_string(size_multiple));
  }
  v.threads = (v.bm / v.tm) * (v.bn / v.tn);
  const int a_tile = transposed_a ? v.bk * (v.bm + 4) : v.bm * (v.bk + 4);
  v.shared_bytes = static_cast<std::size_t>(v.stages) * (a_tile + v.bk * v.bn) * sizeof(float);
  v.kernel.set_max_dynamic_shared_memory(dev, v.shared_bytes);  // above 48 KiB needs the opt-in
  v.kernel.set_preferred_shared_memory_carveout(dev, 100);      // all of L1 as shared memory: cp.async.cg skips L1
  const cudrv::kernel_attributes attributes = v.kernel.attributes(dev);
  v.registers = attributes.num_regs;
  v.local_bytes = attributes.local_size_bytes;
  v.blocks_per_sm = v.kernel.max_active_blocks_per_multiprocessor(dev, v.threads, v.shared_bytes);
  return v;
}

using example::random_source;

// The FP32 FFMA peak from the device attributes: SMs x FP32 lanes per SM x 2 flops x clock. 128 lanes
// per SM from compute capability 8.6 on (and 6.1); 64 on 6.0, 7.x and 8.0.
double fp32_peak_tflops(const cudrv::device& dev) {
  const cudrv::compute_capability cc = dev.compute_capability();
  const int lanes = (cc.major == 7 || cc.as_int() == 80 || cc.as_int() == 60) ? 64 : 128;
  const double sms = dev.attribute(cudrv::device_attributes::multiprocessor_count);
  const double hz = dev.attribute(cudrv::device_attributes::clock_rate_khz) * 1e3;
  return sms * lanes * 2.0 * hz / 1e12;
}

// The host's references for one size: sampled entries of A * B in double, and A (B x) for a random x.
struct host_reference {
  std::vector<std::size_t> rows, cols;
  std::vector<double> entries;  // (A * B)[rows[s]][cols[s]]
  std::vector<double> x;        // random, N long
  std::vector<double> abx;      // A (B x)

  host_reference(const std::vector<float>& a, const std::vector<float>& b, std::size_t n, random_source& rng) {
    for (int s = 0; s < samples; ++s) {
      const std::size_t i = static_cast<std::size_t>(rng.next() % n);
      const std::size_t j = static_cast<std::size_t>(rng.next() % n);
      double sum = 0;
      for (std::size_t k = 0; k < n; ++k) {
        sum += static_cast<double>(a[i * n + k]) * static_cast<double>(b[k * n + j]);
      }
      rows.push_back(i);
      cols.push_back(j);
      entries.push_back(sum);
    }
    x.resize(n);
    for (double& v : x) {
      v = rng.uniform();
    }
    abx = times_x(b, n, x);
    abx = times_x(a, n, abx);
  }

  // m (row-major n x n) times v, in double.
  static std::vector<double> times_x(const std::vector<float>& m, std::size_t n, const std::vector<double>& v) {
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      double sum = 0;
      const float* row = m.data() + i * n;
      for (std::size_t k = 0; k < n; ++k) {
        sum += static_cast<double>(row[k]) * v[k];
      }
      out[i] = sum;
    }
    return out;
  }
};

struct check_result {
  double vs_cublas = -1;      // -1: no cuBLAS
  double max_vs_cublas = -1;  // the largest element difference from cuBLAS; -1: no cuBLAS
  double vs_samples = 0;
  double vs_cx = 0;
  std::size_t not_finite = 0;
  bool ok = false;
};

check_result check(const std::vector<float>& c, std::size_t n, const host_reference& host,
                   const std::vector<double>* cublas_c, double bound) {
  check_result r;
  r.not_finite = static_cast<std::size_t>(std::count_if(c.begin(), c.end(), [](float v) { return !std::isfinite(v); }));
  // A norm hides an error confined to a few elements (one product missing from one sum), so every
  // element is also compared: two FP32 sums of K products of values in [-1, 1) differ by about
  // u * sqrt(K) * sqrt(K / 9) = u * K / 3 (rounding errors of random sign, terms of mean square 1/9);
  // 64 times that still catches any missing or doubled product above it (K = 8192: 0.01).
  const double max_bound = 64.0 * std::ldexp(1.0, -24) * static_cast<double>(n) / 3.0;
  bool elements_ok = true;
  if (cublas_c != nullptr) {
    r.vs_cublas = example::relative_error(c, *cublas_c);
    r.max_vs_cublas = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      r.max_vs_cublas = std::max(r.max_vs_cublas, std::fabs(static_cast<double>(c[i]) - (*cublas_c)[i]));
    }
    elements_ok = r.max_vs_cublas <= max_bound;  // NaN fails: not_finite counts it too
  }
  std::vector<float> sampled;
  for (int s = 0; s < samples; ++s) {
    sampled.push_back(c[host.rows[s] * n + host.cols[s]]);
  }
  r.vs_samples = example::relative_error(sampled, host.entries);
  r.vs_cx = example::relative_error(host_reference::times_x(c, n, host.x), host.abx);
  // Written as "below the bound" so that a NaN fails.
  r.ok = r.not_finite == 0 && elements_ok && (cublas_c == nullptr || r.vs_cublas < bound) && r.vs_samples < bound &&
         r.vs_cx < bound;
  return r;
}

bool run_size(const cudrv::device& dev, cudrv::stream_ref stream, std::vector<variant>& variants,
              const example::reference::cublas& cublas, std::size_t size, double peak) {
  const int n = static_cast<int>(size);
  const std::size_t count = size * size;
  const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  const double bound = 1e-5 * std::max(1.0, std::sqrt(static_cast<double>(size) / 8192.0));
  const int repetitions = size >= 8192 ? 10 : size >= 4096 ? 20 : 50;

  std::printf("sgemm: N = %d: C = A * B, row-major FP32, inputs uniform in [-1, 1), %.4g GFLOP per product\n", n,
              flops * 1e-9);
  random_source rng{0x5eed0000ull + size};
  std::vector<float> a(count), b(count), c(count);
  for (float& v : a) {
    v = static_cast<float>(rng.uniform());
  }
  for (float& v : b) {
    v = static_cast<float>(rng.uniform());
  }
  const host_reference host(a, b, size, rng);

  cudrv::device_buffer<float> da(dev, count), db(dev, count), dc(dev, count), dref(dev, count);
  cudrv::copy(da, a, stream);
  cudrv::copy(db, b, stream);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  // cuBLAS's product, once, as the reference of every variant.
  std::vector<double> cublas_c;
  if (cublas.available()) {
    cudrv::fill(dref, nan, stream);
    cublas.sgemm_row_major(n, n, n, 1.0f, da.get(), db.get(), 0.0f, dref.get());
    cudrv::copy(c, dref, stream);
    stream.synchronize();
    cublas_c.assign(c.begin(), c.end());
    // cuBLAS against the host too: a wrong reference would fail every variant, say so first.
    const check_result r = check(c, size, host, nullptr, bound);
    std::printf("  cuBLAS against the host: %.2e on %d entries, %.2e on C x%s\n", r.vs_samples, samples, r.vs_cx,
                r.ok ? "" : "  WRONG");
    if (!r.ok) {
      std::fprintf(stderr, "sgemm: cuBLAS's result differs from the host's (bound %.1e)\n", bound);
      return false;
    }
  }

  auto launch = [&](const variant& v, cudrv::stream_ref s) {
    const std::size_t blocks = (size / static_cast<std::size_t>(v.bm)) * (size / static_cast<std::size_t>(v.bn));
    const cudrv::launch_config config{.grid = cudrv::dims::checked(blocks),
                                      .block = v.threads,
                                      .dynamic_shared_memory = v.shared_bytes};
    cudrv::launch(s, config, v.kernel, n, n, n, 1.0f, da.get(), db.get(), 0.0f, dc.get());
  };

  // Check every variant once, from a poisoned C.
  std::vector<check_result> checks;
  std::vector<std::uint64_t> hashes;
  for (const variant& v : variants) {
    cudrv::fill(dc, nan, stream);
    launch(v, stream);
    cudrv::copy(c, dc, stream);
    stream.synchronize();
    checks.push_back(check(c, size, host, cublas.available() ? &cublas_c : nullptr, bound));
    hashes.push_back(example::hash_bits(c));
  }

  // Time: cuBLAS and every variant that passed, interleaved, in rounds; each round's figure is a median.
  std::vector<std::vector<double>> variant_ms(variants.size());
  std::vector<double> cublas_ms;
  std::vector<bool> stable(variants.size(), true);
  for (int round = 0; round < rounds; ++round) {
    if (cublas.available()) {
      cublas_ms.push_back(example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref) {  // the handle's stream
        cublas.sgemm_row_major(n, n, n, 1.0f, da.get(), db.get(), 0.0f, dref.get());
      }));
    }
    for (std::size_t i = 0; i < variants.size(); ++i) {
      if (!checks[i].ok) {
        continue;
      }
      cudrv::fill(dc, nan, stream);
      variant_ms[i].push_back(
          example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref s) { launch(variants[i], s); }));
      // The timed runs rewrote the poisoned C: it must be bit for bit the checked result.
      cudrv::copy(c, dc, stream);
      stream.synchronize();
      stable[i] = stable[i] && example::hash_bits(c) == hashes[i];
    }
  }

  const double best_cublas_ms = cublas_ms.empty() ? 0 : *std::min_element(cublas_ms.begin(), cublas_ms.end());
  const double cublas_tflops = best_cublas_ms > 0 ? flops / (best_cublas_ms * 1e9) : 0;
  if (cublas_tflops > 0) {
    std::printf("  %-34s %s %7.2f TFLOP/s  %.3f x FP32 peak\n", "cuBLAS SGEMM (pedantic FP32)",
                example::format_rounds(cublas_ms).c_str(), cublas_tflops, cublas_tflops / peak);
  }
  bool ok = true;
  std::size_t best = variants.size();
  std::vector<double> best_ms(variants.size(), 0.0);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const variant& v = variants[i];
    const check_result& r = checks[i];
    const bool passed = r.ok && stable[i];
    ok = ok && passed;
    char errors[200];
    char vs_cublas[80] = "";
    if (r.vs_cublas >= 0) {
      std::snprintf(vs_cublas, sizeof vs_cublas, "%.1e vs cuBLAS (largest element %.1e), ", r.vs_cublas,
                    r.max_vs_cublas);
    }
    std::snprintf(errors, sizeof errors, "error %s%.1e on %d entries, %.1e on C x%s", vs_cublas, r.vs_samples, samples,
                  r.vs_cx, r.not_finite != 0 ? ", non-finite elements" : "");
    if (!passed) {
      std::printf("  %-34s WRONG: %s%s (bound %.1e)\n", v.expression.c_str(), errors,
                  r.ok ? ", and the timed runs left a different C" : "", bound);
      continue;
    }
    best_ms[i] = *std::min_element(variant_ms[i].begin(), variant_ms[i].end());
    const double tflops = flops / (best_ms[i] * 1e9);
    std::printf("  %-34s %s %7.2f TFLOP/s", v.expression.c_str(), example::format_rounds(variant_ms[i]).c_str(),
                tflops);
    if (cublas_tflops > 0) {
      std::printf("  %.3f x cuBLAS", tflops / cublas_tflops);
    }
    std::printf("  %s\n", errors);
    if (best == variants.size() || best_ms[i] < best_ms[best]) {
      best = i;
    }
  }
  if (!ok) {
    std::fprintf(stderr, "sgemm: N = %d: a result differs from the reference (bound %.1e)\n", n, bound);
  }
  if (best == variants.size()) {
    return false;
  }

  const variant& v = variants[best];
  const double tflops = flops / (best_ms[best] * 1e9);
  char reference[64] = "no cuBLAS";
  if (cublas_tflops > 0) {
    std::snprintf(reference, sizeof reference, "cuBLAS %.3f ms", best_cublas_ms);
  }
  char detail[320];
  std::snprintf(detail, sizeof detail,
                "N=%d, %s (%d threads, %d regs, %.0f KiB smem, %d blocks/SM), %.3f ms; %s; %.3f x FP32 peak %.1f", n,
                v.expression.c_str(), v.threads, v.registers, static_cast<double>(v.shared_bytes) / 1024.0,
                v.blocks_per_sm, best_ms[best], reference, tflops / peak, peak);
  example::report({.example = "sgemm",
                   .metric = "TFLOP/s",
                   .value = tflops,
                   .reference = cublas_tflops > 0 ? cublas_tflops : peak,
                   .reference_name = cublas_tflops > 0 ? "cuBLAS SGEMM (pedantic FP32)" : "FP32 peak (no cuBLAS)",
                   .target = cublas_tflops > 0 ? 0.95 : 0.0,
                   .detail = detail,
                   .bytes = 3.0 * static_cast<double>(count) * sizeof(float),
                   .flops = flops,
                   .seconds = best_ms[best] * 1e-3});
  return ok;
}

bool run(const std::vector<std::size_t>& sizes) {
  for (const std::size_t s : sizes) {
    if (s % size_multiple != 0 || s > max_size) {
      throw example::usage_error{"N = " + std::to_string(s) + " is not a multiple of 128 up to 32768; " + usage};
    }
  }
  cudrv::device dev(0);
  dev.set_current();  // cuBLAS (the runtime) works in the current context: make it dev's primary context
  if (dev.compute_capability().major < 8) {
    throw std::runtime_error("the kernel needs cp.async, compute capability 8.0 or later; device 0 is " + dev.arch());
  }
  cudrv::stream stream(dev);

  const double peak = fp32_peak_tflops(dev);
  std::printf("sgemm: %s (%s, %d SMs, %.2f GHz): FP32 peak %.1f TFLOP/s\n", dev.name().c_str(), dev.arch().c_str(),
              dev.attribute(cudrv::device_attributes::multiprocessor_count),
              dev.attribute(cudrv::device_attributes::clock_rate_khz) * 1e-6, peak);

  cudrv::library lib = example::compile(dev, "sgemm.cu", kernels::source, kernels::name_expressions);
  std::vector<variant> variants;
  for (const std::string& expression : kernels::name_expressions) {
    variants.push_back(make_variant(lib, dev, expression));
    const variant& v = variants.back();
    std::printf("  %-34s %3d threads, %3d registers, %5.1f KiB shared, %d blocks/SM%s\n", v.expression.c_str(),
                v.threads, v.registers, static_cast<double>(v.shared_bytes) / 1024.0, v.blocks_per_sm,
                v.local_bytes != 0 ? ", LOCAL MEMORY (spills)" : "");
  }

  const example::reference::cublas cublas;
  if (cublas.available()) {
    const int ver = cublas.version();
    std::printf("  reference: %s (cuBLAS %d.%d.%d), CUBLAS_PEDANTIC_MATH\n", cublas.library_name().c_str(), ver / 10000,
                ver / 100 % 100, ver % 100);
    cublas.set_stream(stream.native_handle());
  } else {
    std::printf("  reference: none: %s; results are checked against the host only, the figure against the "
                "FP32 peak\n",
                cublas.unavailable_reason().c_str());
  }

  bool ok = true;
  for (const std::size_t s : sizes) {
    ok = run_size(dev, stream, variants, cublas, s, peak) && ok;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("sgemm", [&] {
    if (argc > 2) {
      throw example::usage_error{usage};
    }
    std::vector<std::size_t> sizes{4096, 8192};
    if (argc == 2) {
      sizes = {example::size_arg(argc, argv, 1, 0, "N")};
    }
    return run(sizes);
  });
}
