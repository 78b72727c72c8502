// GPU tier: <cudrv/dlpack.hpp> on real memory. A device_buffer filled by a copy is exported (moved into
// the managed tensor), imported back, and read back through the imported view: same data pointer,
// same contents as the host reference. Managed and pinned buffers export as kDLCUDAManaged and
// kDLCUDAHost. The stream exchange orders a consumer stream's read after a producer stream's
// delayed write. Compiled only when CMake found DLPack's header (CUDRV_TEST_DLPACK).
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_DLPACK)
#include <cudrv/cudrv.hpp>
#include <cudrv/dlpack.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;
using namespace std::chrono_literals;

namespace {

// Exports a copy-filled device buffer as M, imports it back and checks pointer and contents.
template <class M>
void device_round_trip() {
  const cudrv::device dev(0);
  const std::size_t rows = 64, cols = 48;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto reference = random_vector<float>(rows * cols, seed);
  cudrv::device_buffer<float> buf(dev, rows * cols);
  cudrv::copy(buf, reference);
  const CUdeviceptr address = buf.data();
  const std::int64_t shape[] = {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)};

  auto exported = cudrv::to_dlpack<M>(std::move(buf), shape);
  CHECK(exported->dl_tensor.device.device_type == kDLCUDA);
  CHECK(exported->dl_tensor.device.device_id == dev.ordinal());
  auto tensor = cudrv::from_dlpack<float>(std::move(exported), cudrv::dlpack_requirements::device(dev.ordinal(), true));
  CHECK(tensor.view().data() == address);  // no copy: the same allocation
  REQUIRE(tensor.view().ndim() == 2);
  CHECK(tensor.view().extent(0) == static_cast<std::int64_t>(rows));

  std::vector<float> back(rows * cols, poison_value<float>());
  cudrv::copy(std::span(back), tensor.view().span());
  CHECK(mismatch(back, reference).empty());
  INFO(mismatch(back, reference));
}

}  // namespace

TEST_CASE("dlpack: a device_buffer exported and imported back is the same memory", "[gpu][dlpack]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  SECTION("legacy DLManagedTensor") { device_round_trip<DLManagedTensor>(); }
#if CUDRV_DLPACK_HAS_VERSIONED
  SECTION("DLManagedTensorVersioned") { device_round_trip<DLManagedTensorVersioned>(); }
#endif
  CHECK(errors.count() == 0);
}

TEST_CASE("dlpack: managed and pinned buffers export with their memory kinds", "[gpu][dlpack]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto reference = random_vector<std::int32_t>(1000, seed);
  SECTION("pinned: kDLCUDAHost, readable on the host") {
    cudrv::pinned_buffer<std::int32_t> pinned(dev, reference.size());
    std::copy(reference.begin(), reference.end(), pinned.begin());
    auto t = cudrv::from_dlpack<const std::int32_t>(cudrv::to_dlpack(std::move(pinned)),
                                                    cudrv::dlpack_requirements::host(true));
    CHECK(t.view().device().device_type == kDLCUDAHost);
    CHECK(mismatch(t.get(), reference.data(), reference.size()).empty());
    CHECK_THROWS_WITH(cudrv::from_dlpack<const std::int32_t>(
                          cudrv::to_dlpack(cudrv::pinned_buffer<std::int32_t>(dev, 4))),
                      Catch::Contains("kDLCUDAHost"));
  }
  SECTION("managed: kDLCUDAManaged, usable as device memory and on the host") {
    cudrv::managed_buffer<std::int32_t> managed(dev, reference.size());
    std::copy(reference.begin(), reference.end(), managed.begin());
    auto t = cudrv::from_dlpack<std::int32_t>(cudrv::to_dlpack(std::move(managed)),
                                              cudrv::dlpack_requirements::device(dev.ordinal(), true));
    CHECK(t.view().device().device_type == kDLCUDAManaged);
    std::vector<std::int32_t> back(reference.size(), poison_value<std::int32_t>());
    cudrv::copy(std::span(back), t.view().span());
    CHECK(mismatch(back, reference).empty());
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("dlpack: the stream exchange orders the consumer after the producer", "[gpu][dlpack]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  cudrv::stream producer(dev);
  cudrv::stream consumer(dev);
  const std::size_t n = 1 << 20;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto reference = random_vector<float>(n, seed);
  cudrv::pinned_buffer<float> source(dev, n);
  std::copy(reference.begin(), reference.end(), source.begin());
  cudrv::pinned_buffer<float> result(dev, n);
  std::fill(result.begin(), result.end(), poison_value<float>());

  // The producer's data lands late: a host task holds its stream for 50 ms before the copy.
  cudrv::device_buffer<float> buf(dev, n);
  const std::vector<float> poison(n, poison_value<float>());
  cudrv::copy(buf, poison, producer);  // ordered before the late write, on the producer's stream
  auto ran = std::make_shared<std::atomic<bool>>(false);
  producer.enqueue([ran] {
    std::this_thread::sleep_for(50ms);
    *ran = true;
  });
  cudrv::copy(buf, source.view(), producer);
  auto exported = cudrv::to_dlpack(std::move(buf));

  // The consumer asks for its stream (protocol value: the handle); the producer makes it wait.
  const std::intptr_t consumer_value = cudrv::dlpack_stream_value_of(consumer);
  cudrv::dlpack_stream_exchange(producer, consumer_value);
  auto tensor = cudrv::from_dlpack<const float>(std::move(exported), cudrv::dlpack_requirements::device(0, true));
  cudrv::copy(result.view(), tensor.view().span(), consumer);
  consumer.synchronize();
  CHECK(*ran);
  CHECK(mismatch(result.data(), reference.data(), n).empty());
  producer.synchronize();
  CHECK(errors.count() == 0);
}

// The device a tensor names is where its memory is: a buffer of device 0's pool allocated on a device-1
// stream lives on device 0, and was exported as {kDLCUDA, 1} before the fix, which would have sent PyTorch
// or CuPy to the wrong GPU.
TEST_CASE("dlpack: a pool buffer allocated on another device's stream names the pool's device",
          "[gpu][dlpack][needs-2-gpus]") {
  CUDRV_REQUIRE_GPUS(2);
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d0(0);
  const cudrv::device d1(1);
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::size_t n = (1 << 16) + 7;
  const auto reference = random_vector<float>(n, seed);
  {
    if (!d1.can_access_peer(d0)) {
      WARN("device 1 cannot access device 0's memory: the buffer cannot be used on its stream, nothing checked");
      return;
    }
    cudrv::stream s1(d1);
    cudrv::memory_pool pool0(d0);
    pool0.set_access(d1);  // device 1's stream copies into device 0's memory
    cudrv::device_buffer<float> buf(pool0, s1, n);
    cudrv::copy(buf, reference, s1);
    s1.synchronize();
    REQUIRE(cudrv::get_pointer_attributes(buf.data()).device_ordinal == 0);  // the driver's word
    const CUdeviceptr address = buf.data();
    auto exported = cudrv::to_dlpack(std::move(buf));
    CHECK(exported->dl_tensor.device.device_type == kDLCUDA);
    CHECK(exported->dl_tensor.device.device_id == 0);
    CHECK_THROWS_AS(cudrv::from_dlpack<float>(std::move(exported), cudrv::dlpack_requirements::device(1)),
                    cudrv::invalid_argument_error);
    REQUIRE(exported);
    auto tensor = cudrv::from_dlpack<float>(std::move(exported), cudrv::dlpack_requirements::device(0, true));
    CHECK(tensor.view().data() == address);
    std::vector<float> back(n, poison_value<float>());
    cudrv::copy(std::span(back), tensor.view().span());
    CHECK(mismatch(back, reference).empty());
  }  // the tensor frees the buffer on its own stream (s1), which it keeps alive
  CHECK(errors.count() == 0);
  INFO(errors.messages());
}

// Tensors from foreign code are checked against the driver: device memory of the named device, pinned and
// managed memory as such, and every byte the view reaches in memory the driver knows, including memory
// mapped in pieces (a growable buffer's chunks, as PyTorch's expandable segments map them).
TEST_CASE("dlpack: imports are checked against the driver, also over memory mapped in pieces",
          "[gpu][dlpack][bad_input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  auto import = [](std::uintptr_t at, std::int64_t n, DLDevice device) {
    const std::int64_t shape[] = {n};
    cudrv::dlpack_requirements req;
    req.memory = cudrv::dlpack_memory::cuda | cudrv::dlpack_memory::cuda_host | cudrv::dlpack_memory::cuda_managed;
    return cudrv::from_dlpack<float>(cudrv::to_dlpack(cudrv::strided_view<float>(at, shape, {}, device), nullptr), req);
  };
  // Three chunks of the device's minimum granularity, mapped one after the other, checked with no context
  // current (the pointer attributes only: the memory names no context) and with one (each mapping's extent).
  for (const bool with_context : {false, true}) {
    INFO((with_context ? "with a context current" : "with no context current"));
    std::optional<cudrv::context_guard> current;
    if (with_context) {
      current.emplace(dev.primary_context());
    }
    cudrv::growable_buffer<float> grow(dev, 1 << 24, {.chunk_bytes = 2u << 20});
    grow.resize(3 * (2u << 20) / sizeof(float));
    const auto address = static_cast<std::uintptr_t>(grow.data());
    const auto n = static_cast<std::int64_t>(grow.size());
    CHECK(import(address, n, {kDLCUDA, 0}).size() == grow.size());  // across the chunks
    CHECK(import(address + 100 * sizeof(float), n - 100, {kDLCUDA, 0}).size() == grow.size() - 100);
    // One element past what is mapped (the capacity: growth maps whole chunks) reaches the reservation's
    // unmapped part, which the pointer attributes count in the range but not as memory.
    const auto mapped = static_cast<std::int64_t>(grow.capacity());
    CHECK(import(address, mapped, {kDLCUDA, 0}).size() == grow.capacity());
    CHECK_THROWS_WITH(import(address, mapped + 1, {kDLCUDA, 0}), Catch::Contains("kDLCUDA 0 memory the driver knows"));
  }
  {
    cudrv::device_buffer<float> buf(dev, 1000);
    const auto address = static_cast<std::uintptr_t>(buf.data());
    CHECK(import(address, 1000, {kDLCUDA, 0}).size() == 1000);
    CHECK_THROWS_WITH(import(address, 1001, {kDLCUDA, 0}), Catch::Contains("only 4000"));
    if (cudrv::device_count() > 1) {
      CHECK_THROWS_WITH(import(address, 1000, {kDLCUDA, 1}), Catch::Contains("of device 0"));
    }
    CHECK_THROWS_WITH(import(address, 1000, {kDLCUDAHost, 0}), Catch::Contains("claims to be kDLCUDAHost"));
    cudrv::pinned_buffer<float> pinned(dev, 1000);
    const auto host = reinterpret_cast<std::uintptr_t>(pinned.data());
    CHECK(import(host, 1000, {kDLCUDAHost, 0}).size() == 1000);
    CHECK_THROWS_WITH(import(host, 1000, {kDLCUDA, 0}), Catch::Contains("pinned host memory"));
    cudrv::managed_buffer<float> managed(dev, 1000);
    const auto unified = reinterpret_cast<std::uintptr_t>(managed.data());
    CHECK(import(unified, 1000, {kDLCUDAManaged, 0}).size() == 1000);
    CHECK(import(unified, 1000, {kDLCUDA, 0}).size() == 1000);  // managed memory handed out as kDLCUDA
    std::vector<float> pageable(1000);
    CHECK_THROWS_WITH(import(reinterpret_cast<std::uintptr_t>(pageable.data()), 1000, {kDLCUDAHost, 0}),
                      Catch::Contains("memory the driver does not know"));
  }
  CHECK(errors.count() == 0);
  INFO(errors.messages());
}

#endif
