// GPU tier: cudrv next to the CUDA runtime and cuBLAS, the contract of docs/interop.md ("The CUDA
// runtime"): the runtime's primary context is cudrv's, runtime work (cudaMemsetAsync, cudaMemcpyAsync,
// cudaMallocFromPoolAsync, cuBLAS SAXPY and SGEMM) runs on cudrv streams and cudrv memory, a
// cudaEvent_t is waited on through cudrv and a cudrv event through the runtime, and a cudaStream_t (the
// default streams included) runs cudrv copies.
//
// This is its own binary, cudrv_runtime_tests (tests/CMakeLists.txt), because it links the shared CUDA
// runtime and cuBLAS, which libcudrv never does and cudrv_gpu_tests must not (it carries the static
// runtime of its nvcc-built kernels). Every case skips without a device. Data is random (the seed is
// printed on failure; CUDRV_TEST_SEED replays it), outputs are poisoned first and compared with a host
// reference. Ordering is shown with gates: a host callable holds a stream back, and what must wait
// for it is checked not to have run before the gate opens.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "support/catch_support.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::gate;
using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

// Requires a runtime call to succeed, naming the call and the runtime's error.
#define RT_REQUIRE(call)                                                                                  \
  do {                                                                                                    \
    const cudaError_t rt_status_ = (call);                                                                \
    INFO(#call << ": " << cudaGetErrorName(rt_status_) << " (" << cudaGetErrorString(rt_status_) << ")"); \
    REQUIRE(rt_status_ == cudaSuccess);                                                                   \
  } while (0)
// Requires a cuBLAS call to succeed.
#define BLAS_REQUIRE(call)                                    \
  do {                                                        \
    const cublasStatus_t blas_status_ = (call);               \
    INFO(#call << ": " << cublasGetStatusName(blas_status_)); \
    REQUIRE(blas_status_ == CUBLAS_STATUS_SUCCESS);           \
  } while (0)

namespace {

// Owners of the runtime's handles, so that a failed REQUIRE leaks nothing.
struct runtime_stream {
  cudaStream_t handle = nullptr;
  explicit runtime_stream(unsigned flags = cudaStreamNonBlocking) {
    RT_REQUIRE(cudaStreamCreateWithFlags(&handle, flags));
  }
  runtime_stream(const runtime_stream&) = delete;
  runtime_stream& operator=(const runtime_stream&) = delete;
  ~runtime_stream() {
    if (handle != nullptr) {
      cudaStreamDestroy(handle);
    }
  }
};
struct runtime_event {
  cudaEvent_t handle = nullptr;
  explicit runtime_event(unsigned flags) { RT_REQUIRE(cudaEventCreateWithFlags(&handle, flags)); }
  runtime_event(const runtime_event&) = delete;
  runtime_event& operator=(const runtime_event&) = delete;
  ~runtime_event() {
    if (handle != nullptr) {
      cudaEventDestroy(handle);
    }
  }
};
struct runtime_allocation {
  void* pointer = nullptr;
  explicit runtime_allocation(std::size_t bytes) { RT_REQUIRE(cudaMalloc(&pointer, bytes)); }
  runtime_allocation(const runtime_allocation&) = delete;
  runtime_allocation& operator=(const runtime_allocation&) = delete;
  ~runtime_allocation() { cudaFree(pointer); }
};
struct blas_handle {
  cublasHandle_t handle = nullptr;
  blas_handle() { BLAS_REQUIRE(cublasCreate(&handle)); }
  blas_handle(const blas_handle&) = delete;
  blas_handle& operator=(const blas_handle&) = delete;
  ~blas_handle() {
    if (handle != nullptr) {
      cublasDestroy(handle);
    }
  }
};

// Floats uniform in [-1, 1) from the test seed.
std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    x = dist(gen);
  }
  return v;
}

template <class T>
std::vector<T> read_back(const cudrv::device_buffer<T>& buf, cudrv::stream_ref s) {
  std::vector<T> host(buf.size(), poison_value<T>());
  cudrv::copy(std::span(host), buf, s);
  s.synchronize();
  return host;
}

}  // namespace

TEST_CASE("runtime: the default-stream handles of the runtime are cudrv's, viewed and never owned", "[runtime]") {
  // No device needed: views of handles, and refusals made before any driver call.
  CHECK(cudrv::stream_ref(cudaStreamLegacy) == cudrv::stream_ref::legacy_default());
  CHECK(cudrv::stream_ref(cudaStreamPerThread) == cudrv::stream_ref::per_thread_default());
  const cudaStream_t zero = nullptr;  // the runtime's stream 0
  CHECK(cudrv::stream_ref(zero) == cudrv::stream_ref::legacy_default());
  CHECK(cudrv::stream_ref(zero).native_handle() == cudaStreamLegacy);
  // They are viewed, never owned: adopting one as an owner is refused before the driver is asked.
  for (const cudaStream_t s : {cudaStreamLegacy, cudaStreamPerThread, zero}) {
    const auto e = cudrv::test::require_invalid_argument("stream::from_native_handle of a runtime default stream",
                                                         [&] { (void)cudrv::stream::from_native_handle(s); });
    CHECK(e.api() == "cudrv::stream::from_native_handle");
    CHECK(cudrv::test::contains(e.what(), "default stream cannot be owned"));
  }
}

TEST_CASE("runtime: the runtime's primary context is cudrv's primary context", "[gpu][runtime]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::test::raw_set_current_context(nullptr);

  // The runtime makes its context current: it is the one cudrv names for the device.
  RT_REQUIRE(cudaSetDevice(0));
  RT_REQUIRE(cudaFree(nullptr));
  const CUcontext runtime_ctx = cudrv::test::raw_current_context();
  REQUIRE(runtime_ctx != nullptr);
  CHECK(runtime_ctx == dev.primary_context().native_handle());
  CHECK(cudrv::context_ref::current() == dev.primary_context());
  CHECK(cudrv::device::current() == dev);
  CHECK(cudrv::test::raw_current_context() == runtime_ctx);  // asking cudrv changed nothing

  // And the other way: cudrv makes the primary context current, the runtime sees device 0 in it.
  cudrv::test::raw_set_current_context(nullptr);
  dev.set_current();
  int runtime_device = -1;
  RT_REQUIRE(cudaGetDevice(&runtime_device));
  CHECK(runtime_device == 0);
  {
    runtime_allocation p(4096);
    CHECK(cudrv::get_pointer_attributes(p.pointer).context == dev.primary_context().native_handle());
    CHECK(cudrv::test::raw_current_context() == dev.primary_context().native_handle());
  }
  // Memory cudrv allocates for the device is device 0's memory for the runtime.
  cudrv::device_buffer<float> buf(dev, 1000);
  cudaPointerAttributes attr{};
  RT_REQUIRE(cudaPointerGetAttributes(&attr, buf.get()));
  CHECK(attr.type == cudaMemoryTypeDevice);
  CHECK(attr.device == 0);
  CHECK(attr.devicePointer == static_cast<void*>(buf.get()));
  // A stream the runtime creates belongs to the primary context.
  runtime_stream rs;
  CHECK(cudrv::stream_ref(rs.handle).context() == dev.primary_context());
}

TEST_CASE("runtime: with a cudrv::context current, runtime calls use that context", "[gpu][runtime]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context ctx(dev);
  REQUIRE(ctx.native_handle() != dev.primary_context().native_handle());
  {
    const cudrv::context_guard guard(ctx);
    runtime_allocation p(4096);
    CHECK(cudrv::get_pointer_attributes(p.pointer).context == ctx.native_handle());
    CHECK(cudrv::test::raw_current_context() == ctx.native_handle());
  }
}

TEST_CASE("runtime: cudaMemsetAsync, cudaMemcpyAsync and cudaMallocFromPoolAsync on cudrv streams and memory",
          "[gpu][runtime]") {
  CUDRV_REQUIRE_GPU();
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED)");
  const cudrv::device dev(0);
  dev.set_current();
  cudrv::stream s(dev);
  const std::size_t n = 100003;

  // cudaMemsetAsync on a cudrv stream into part of a poisoned cudrv buffer.
  std::mt19937_64 gen(seed);
  const std::size_t offset = 1 + gen() % 1000;
  const std::size_t length = n - offset - 1 - gen() % 1000;
  auto value = static_cast<std::uint8_t>(gen());
  if (value == 0xA5) {
    value = 0x5A;
  }
  cudrv::device_buffer<std::uint8_t> bytes(dev, n);
  cudrv::fill(bytes, std::uint8_t{0xA5}, s);
  RT_REQUIRE(cudaMemsetAsync(bytes.get() + offset, value, length, s.native_handle()));
  std::vector<std::uint8_t> expected(n, 0xA5);
  std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(offset), length, value);
  CHECK(mismatch(read_back(bytes, s), expected).empty());

  // cudaMemcpyAsync between a cudrv buffer and a stream-ordered cudrv buffer, on the cudrv stream.
  const std::vector<float> data = random_vector<float>(n, seed + 1);
  cudrv::device_buffer<float> src(dev, n);
  cudrv::device_buffer<float> dst(s, n);  // cuMemAllocAsync on s
  cudrv::copy(src, data, s);
  cudrv::fill(dst, poison_value<float>(), s);
  RT_REQUIRE(cudaMemcpyAsync(dst.get(), src.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, s.native_handle()));
  CHECK(mismatch(read_back(dst, s), data).empty());

  // The runtime allocates from a cudrv pool (a CUmemoryPool is a cudaMemPool_t) on the cudrv stream.
  cudrv::memory_pool pool(dev);
  void* p = nullptr;
  RT_REQUIRE(cudaMallocFromPoolAsync(&p, n * sizeof(float), pool.native_handle(), s.native_handle()));
  CHECK(cudrv::get_pointer_attributes(p).pool == pool.native_handle());
  const cudrv::device_span<float> pooled(static_cast<float*>(p), n);
  cudrv::fill(pooled, poison_value<float>(), s);
  cudrv::copy(pooled, src, s);
  std::vector<float> back(n, poison_value<float>());
  cudrv::copy(std::span(back), pooled, s);
  RT_REQUIRE(cudaFreeAsync(p, s.native_handle()));
  s.synchronize();
  CHECK(mismatch(back, data).empty());
  CHECK(pool.used_current() == 0);
}

TEST_CASE("runtime: cuBLAS SAXPY and SGEMM on a cudrv stream, cudrv buffers and a cudrv workspace", "[gpu][runtime]") {
  CUDRV_REQUIRE_GPU();
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED)");
  const cudrv::device dev(0);
  dev.set_current();  // cuBLAS works in the current device's primary context
  cudrv::stream s(dev);
  cudrv::stream other(dev);
  blas_handle blas;
  BLAS_REQUIRE(cublasSetStream(blas.handle, s.native_handle()));
  BLAS_REQUIRE(cublasSetMathMode(blas.handle, CUBLAS_PEDANTIC_MATH));  // plain FP32: the bound below holds
  cudrv::device_buffer<std::byte> workspace(dev, std::size_t{4} << 20);
  BLAS_REQUIRE(cublasSetWorkspace(blas.handle, workspace.get(), workspace.size()));
  cudaStream_t bound = nullptr;
  BLAS_REQUIRE(cublasGetStream(blas.handle, &bound));
  CHECK(bound == s.native_handle());
  const float u = std::numeric_limits<float>::epsilon() / 2;

  SECTION("SAXPY: y = a x + y") {
    const std::size_t n = 50001;
    const std::vector<float> x = random_floats(n, seed);
    const std::vector<float> y0 = random_floats(n, seed + 1);
    const float a = random_floats(1, seed + 2)[0] * 4;
    cudrv::device_buffer<float> dx(dev, n), dy(dev, n);
    cudrv::copy(dx, x, s);
    cudrv::copy(dy, y0, s);
    BLAS_REQUIRE(cublasSaxpy(blas.handle, static_cast<int>(n), &a, dx.get(), 1, dy.get(), 1));
    const std::vector<float> y = read_back(dy, s);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double ref = static_cast<double>(a) * x[i] + y0[i];
      // One rounding of a x (none with an FMA) and one of the sum, with room for the product's error
      // carried into the sum: 3u (|a x| + |y|).
      const double bound_i = 3 * u * (std::fabs(static_cast<double>(a) * x[i]) + std::fabs(y0[i]));
      bad += std::fabs(y[i] - ref) <= bound_i ? 0 : 1;  // NaN counts as bad
    }
    CHECK(bad == 0);
  }

  SECTION("SGEMM: C = alpha A B, column-major, C poisoned; cuBLAS waits behind a gate on the cudrv stream") {
    const int m = 67, n = 45, k = 129;
    const std::vector<float> a = random_floats(static_cast<std::size_t>(m) * k, seed);
    const std::vector<float> b = random_floats(static_cast<std::size_t>(k) * n, seed + 1);
    const float alpha = 1.5f, beta = 0.0f;
    cudrv::device_buffer<float> da(dev, a.size()), db(dev, b.size()), dc(dev, static_cast<std::size_t>(m) * n);
    cudrv::copy(da, a, s);
    cudrv::copy(db, b, s);
    auto sgemm = [&] {
      BLAS_REQUIRE(cublasSgemm(blas.handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.get(), m, db.get(), k, &beta,
                               dc.get(), m));
    };
    sgemm();  // once before the gate: the first call loads cuBLAS's kernels, which must not wait for the gate
    cudrv::fill(dc, std::numeric_limits<float>::quiet_NaN(), s);
    s.synchronize();

    gate g;
    s.enqueue(g.blocker());
    sgemm();
    // Not run yet: C, read on another stream, is still all poison, and s is held back.
    const std::vector<float> early = read_back(dc, other);
    CHECK(std::all_of(early.begin(), early.end(), [](float v) { return std::isnan(v); }));
    CHECK_FALSE(s.is_done());
    g.open();

    const std::vector<float> c = read_back(dc, s);
    std::size_t bad = 0;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double ref = 0, mag = 0;
        for (int l = 0; l < k; ++l) {
          const double t =
              static_cast<double>(a[static_cast<std::size_t>(l) * m + i]) * b[static_cast<std::size_t>(j) * k + l];
          ref += t;
          mag += std::fabs(t);
        }
        ref *= alpha;
        mag *= alpha;
        // Any order of k products and sums in float: |error| <= gamma(k + 2) sum |alpha a b|.
        const double h = k + 2;
        const double bound_ij = h * u / (1 - h * u) * mag;
        const float got = c[static_cast<std::size_t>(j) * m + i];
        bad += std::fabs(got - ref) <= bound_ij ? 0 : 1;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("runtime: a cudaEvent_t waited on through cudrv, and a cudrv event through the runtime", "[gpu][runtime]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED)");
  const cudrv::device dev(0);
  dev.set_current();
  const std::size_t n = 65537;
  std::mt19937_64 gen(seed);
  const auto v = static_cast<std::uint8_t>(0x10 + gen() % 0x80);  // never the poison 0xA5
  {
    runtime_stream rs;
    runtime_event ev(cudaEventDisableTiming);
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint8_t> src(dev, n), dst(dev, n);
    cudrv::fill(src, std::uint8_t{0xA5}, s);
    cudrv::fill(dst, std::uint8_t{0xA5}, s);
    s.synchronize();

    // Runtime side: held back by a gate (queued through cudrv on the runtime's stream), then a memset
    // and a cudaEventRecord. cudrv side: s waits for the event, then copies src to dst.
    gate g;
    cudrv::stream_ref(rs.handle).enqueue(g.blocker());
    RT_REQUIRE(cudaMemsetAsync(src.get(), v, n, rs.handle));
    RT_REQUIRE(cudaEventRecord(ev.handle, rs.handle));
    const cudrv::event_ref e(ev.handle);
    CHECK_FALSE(e.is_done());
    s.wait(e);
    cudrv::copy(dst, src, s);
    CHECK_FALSE(s.is_done());
    g.open();
    e.synchronize();
    CHECK(cudaEventQuery(ev.handle) == cudaSuccess);
    CHECK(mismatch(read_back(dst, s), std::vector<std::uint8_t>(n, v)).empty());

    // The other way: a cudrv event recorded behind a gate on a cudrv stream, waited on by the runtime.
    gate g2;
    s.enqueue(g2.blocker());
    cudrv::fill(src, static_cast<std::uint8_t>(v + 1), s);
    const cudrv::event done = s.record();
    RT_REQUIRE(cudaStreamWaitEvent(rs.handle, done.native_handle(), 0));
    RT_REQUIRE(cudaMemcpyAsync(dst.get(), src.get(), n, cudaMemcpyDeviceToDevice, rs.handle));
    CHECK(cudaStreamQuery(rs.handle) == cudaErrorNotReady);
    g2.open();
    RT_REQUIRE(cudaStreamSynchronize(rs.handle));
    CHECK(mismatch(read_back(dst, s), std::vector<std::uint8_t>(n, static_cast<std::uint8_t>(v + 1))).empty());
  }
  {
    // Timed runtime events recorded through cudrv: cudrv and the runtime read the same elapsed time.
    runtime_event start(cudaEventDefault), stop(cudaEventDefault);
    cudrv::stream s(dev);
    const cudrv::event_ref a(start.handle), b(stop.handle);
    a.record(s);
    s.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
    b.record(s);
    b.synchronize();
    float runtime_ms = -1;
    RT_REQUIRE(cudaEventElapsedTime(&runtime_ms, start.handle, stop.handle));
    CHECK(cudrv::elapsed_time(a, b).count() == runtime_ms);
    CHECK(runtime_ms >= 4.0f);
  }
  {
    // Ownership: cudrv destroys an event and a stream the runtime created.
    cudaEvent_t raw_event = nullptr;
    RT_REQUIRE(cudaEventCreateWithFlags(&raw_event, cudaEventDisableTiming));
    cudrv::event owned = cudrv::event::from_native_handle(raw_event, dev.primary_context());
    cudaStream_t raw_stream = nullptr;
    RT_REQUIRE(cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking));
    cudrv::stream owned_stream = cudrv::stream::from_native_handle(raw_stream);
    owned.record(owned_stream);
    owned.synchronize();
    CHECK(owned.context() == dev.primary_context());
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("runtime: a cudaStream_t and the default streams run cudrv copies", "[gpu][runtime]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED)");
  const cudrv::device dev(0);
  dev.set_current();  // the default streams are those of the current context
  const std::size_t n = 70001;
  const std::vector<double> data = random_vector<double>(n, seed);
  {
    runtime_stream rs;
    const cudrv::stream_ref s(rs.handle);  // adopted, not owned
    CHECK(s.native_handle() == rs.handle);
    CHECK(s.context() == dev.primary_context());
    CHECK(s.device() == dev);
    CHECK(s.is_non_blocking());
    cudrv::device_buffer<double> buf(s, n);  // stream-ordered on the runtime's stream
    cudrv::copy(buf, data, s);
    std::vector<double> back(n, poison_value<double>());
    cudrv::copy(std::span(back), buf, s);
    RT_REQUIRE(cudaStreamSynchronize(rs.handle));  // the runtime's synchronisation covers cudrv's work
    CHECK(mismatch(back, data).empty());
    buf.reset();  // freed on the runtime's stream, before it is destroyed
    s.synchronize();
  }
  for (const cudaStream_t rt_stream : {cudaStreamLegacy, cudaStreamPerThread}) {
    // Runtime and cudrv work on the same default stream are ordered: the runtime's memset of the source,
    // then cudrv's copy of it.
    const cudrv::stream_ref s(rt_stream);
    INFO((rt_stream == cudaStreamLegacy ? "cudaStreamLegacy" : "cudaStreamPerThread"));
    cudrv::device_buffer<std::uint32_t> src(dev, n), dst(dev, n);
    cudrv::fill(dst, std::uint32_t{0xA5A5A5A5u}, s);
    RT_REQUIRE(cudaMemsetAsync(src.get(), 0x3C, n * sizeof(std::uint32_t), rt_stream));
    cudrv::copy(dst, src, s);
    CHECK(mismatch(read_back(dst, s), std::vector<std::uint32_t>(n, 0x3C3C3C3Cu)).empty());
  }
  CHECK(errors.count() == 0);
}
