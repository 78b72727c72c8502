// <cudrv/dlpack.hpp> with real cudrv buffers and streams, against the stand-in driver of fake_cuda.cpp
// (loaded through CUDRV_LIBCUDA): a device_buffer moved into a managed tensor is freed exactly once,
// by the deleter; a shared one outlives the tensor; the stream exchange records an event on the
// producer and makes the consumer wait for it. Compiled only when CMake found DLPack's header.
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_DLPACK)
#include <cudrv/cudrv.hpp>
#include <cudrv/dlpack.hpp>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::contains;

namespace {

// The fake's counters and log, and its count of cuMemFree calls.
struct fake_probe : cudrv::test::fake_probe {
  long long frees() const { return counter("frees"); }
};

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

}  // namespace

TEST_CASE("fake driver: dlpack export moves a device_buffer in, and the deleter frees it once",
          "[fake-driver][dlpack]") {
  fake_probe f;
  cudrv::device d1(1);  // device 0 of the fake is unavailable
  cudrv::device_buffer<float> buf(d1, 24);
  const CUdeviceptr address = buf.data();
  const std::int64_t shape[] = {4, 6};
  const long long frees_before = f.frees();
  auto exported = cudrv::to_dlpack(std::move(buf), shape);
  CHECK_FALSE(buf);
  REQUIRE(exported);
  const DLTensor& t = exported->dl_tensor;
  CHECK(reinterpret_cast<CUdeviceptr>(t.data) == address);
  CHECK(t.device.device_type == kDLCUDA);
  CHECK(t.device.device_id == 1);
  CHECK(t.ndim == 2);
  CHECK(t.strides[0] == 6);
  CHECK(t.strides[1] == 1);
  CHECK(f.is_live(address));
  {
    CHECK_THROWS_WITH(cudrv::from_dlpack<float>(std::move(exported), cudrv::dlpack_requirements::device(0)),
                      Catch::Contains("CUDA device 1, not on device 0"));
    REQUIRE(exported);  // kept after the refusal
    auto imported = cudrv::from_dlpack<float>(std::move(exported), cudrv::dlpack_requirements::device(1, true));
    CHECK(imported.view().data() == address);
    CHECK(imported.view().span().size() == 24);
    auto moved = std::move(imported);
    CHECK(f.is_live(address));
    CHECK(f.frees() == frees_before);
  }
  CHECK_FALSE(f.is_live(address));
  CHECK(f.frees() == frees_before + 1);
}

TEST_CASE("fake driver: dlpack export of a shared buffer keeps it alive until both let go", "[fake-driver][dlpack]") {
  fake_probe f;
  cudrv::device d1(1);
  auto shared = std::make_shared<cudrv::device_buffer<std::int32_t>>(d1, 16);
  const CUdeviceptr address = shared->data();
  auto legacy = cudrv::to_dlpack<DLManagedTensor>(shared);
#if CUDRV_DLPACK_HAS_VERSIONED
  auto versioned = cudrv::to_dlpack(std::shared_ptr<const cudrv::device_buffer<std::int32_t>>(shared));
  CHECK((versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);  // shared as const: read-only
#else
  auto versioned = cudrv::to_dlpack<DLManagedTensor>(shared);
#endif
  legacy.reset();
  versioned.reset();
  CHECK(f.is_live(address));
  shared.reset();
  CHECK_FALSE(f.is_live(address));
}

TEST_CASE("fake driver: a refused dlpack export leaves the buffer with the caller", "[fake-driver][dlpack]") {
  fake_probe f;
  cudrv::device d1(1);
  cudrv::device_buffer<double> buf(d1, 10);
  const std::int64_t wrong[] = {3, 4};
  CHECK_THROWS_WITH(cudrv::to_dlpack(std::move(buf), wrong),
                    Catch::Contains("the shape holds 12 elements but the buffer holds 10"));
  CHECK(buf);
  CHECK(f.is_live(buf.data()));
  cudrv::device_buffer<double> empty(std::move(buf));
  CHECK_THROWS_WITH(cudrv::to_dlpack(std::move(buf)), Catch::Contains("holds no memory"));
  CHECK_THROWS_WITH(cudrv::to_dlpack(std::shared_ptr<cudrv::device_buffer<double>>()), Catch::Contains("null"));
}

TEST_CASE("fake driver: dlpack stream exchange records on the producer and waits on the consumer",
          "[fake-driver][dlpack]") {
  fake_probe f;
  cudrv::device d1(1);
  cudrv::stream producer(d1);
  cudrv::stream consumer(d1);
  const std::size_t before = f.log().size();
  cudrv::dlpack_stream_exchange(producer, reinterpret_cast<std::intptr_t>(consumer.native_handle()));
  const std::string log = f.log().substr(before);
  const auto recorded = log.find("event_record ");
  const auto waited = log.find("stream_wait " + hex(consumer.native_handle()) + " for ");
  REQUIRE(recorded != std::string::npos);
  REQUIRE(waited != std::string::npos);
  CHECK(recorded < waited);
  CHECK(contains(log, " on " + hex(producer.native_handle())));
  // The event the consumer waits for is the one recorded on the producer.
  const std::string event = log.substr(recorded + 13, log.find(' ', recorded + 13) - (recorded + 13));
  CHECK(contains(log.substr(waited), "for " + event));

  const std::size_t quiet = f.log().size();
  cudrv::dlpack_stream_exchange(producer, std::intptr_t{-1});                                          // no sync asked
  cudrv::dlpack_stream_exchange(producer, reinterpret_cast<std::intptr_t>(producer.native_handle()));  // same stream
  cudrv::dlpack_stream_exchange(producer, std::optional<cudrv::stream_ref>{});
  CHECK_FALSE(contains(f.log().substr(quiet), "stream_wait"));
  CHECK_FALSE(contains(f.log().substr(quiet), "event_record"));
  cudrv::stream moved(std::move(producer));
  CHECK_THROWS_AS(cudrv::dlpack_stream_exchange(producer, consumer), cudrv::invalid_argument_error);
}

// The device a tensor names is where its memory is, not the device of the stream it was allocated on:
// before the fix, a buffer of device 0's pool allocated on a device-1 stream was exported as {kDLCUDA, 1},
// and PyTorch or CuPy would have placed it on the wrong GPU.
TEST_CASE("fake driver: dlpack names the memory's own device, not the allocating stream's", "[fake-driver][dlpack]") {
  fake_probe f;
  const cudrv::device d0(0);  // its contexts are unavailable in the fake; its pool is not
  const cudrv::device d1(1);
  cudrv::stream s1(d1);
  cudrv::memory_pool pool0(d0);
  cudrv::device_buffer<float> buf(pool0, s1, 32);
  REQUIRE(buf.properties().device_ordinal == 0);
  auto exported = cudrv::to_dlpack(std::move(buf));
  REQUIRE(exported);
  CHECK(exported->dl_tensor.device.device_type == kDLCUDA);
  CHECK(exported->dl_tensor.device.device_id == 0);
  // The same through a shared buffer, and the other way round: device 1's pool from a device-1 stream.
  auto shared = std::make_shared<cudrv::device_buffer<float>>(pool0, s1, 8);
  CHECK(cudrv::to_dlpack(shared)->dl_tensor.device.device_id == 0);
  cudrv::device_buffer<float> own(s1, 8);
  CHECK(cudrv::to_dlpack(std::move(own))->dl_tensor.device.device_id == 1);
  exported.reset();
  shared.reset();
  s1.synchronize();
  CHECK(f.counter("primary_retain:0") == 0);  // device 0's context was never needed
}

// A tensor from foreign code is checked against the driver, not only against its own description: the
// memory must be what the tensor says it is (device memory of the device it names), and every byte the
// view reaches must lie in memory the driver knows.
TEST_CASE("fake driver: dlpack import checks the tensor's memory against the driver", "[fake-driver][dlpack]") {
  fake_probe f;
  const cudrv::device d1(1);
  cudrv::device_buffer<float> buf(d1, 64);
  const auto address = static_cast<std::uintptr_t>(buf.data());
  auto import = [&](std::uintptr_t at, std::int64_t n, DLDevice device, bool check = true) {
    const std::int64_t shape[] = {n};
    cudrv::dlpack_requirements req;
    req.memory = cudrv::dlpack_memory::cuda | cudrv::dlpack_memory::cuda_host | cudrv::dlpack_memory::cuda_managed;
    req.check_memory = check;
    return cudrv::from_dlpack<float>(cudrv::to_dlpack(cudrv::strided_view<float>(at, shape, {}, device), nullptr), req);
  };
  const long long queries = f.counter("pointer_queries");
  const long long ranges = f.counter("address_range_queries");
  CHECK(import(address, 64, {kDLCUDA, 1}).size() == 64);  // the whole buffer
  CHECK(f.counter("pointer_queries") == queries + 1);     // two driver calls: what it is, and its extent
  CHECK(f.counter("address_range_queries") == ranges + 1);
  CHECK(import(address + 16 * sizeof(float), 48, {kDLCUDA, 1}).size() == 48);  // a tail

  // The wrong device: the driver knows the memory as device 1's.
  CHECK_THROWS_WITH(import(address, 64, {kDLCUDA, 0}),
                    Catch::Contains("claims to be kDLCUDA 0") && Catch::Contains("device memory of device 1"));
  // Past the allocation's end.
  CHECK_THROWS_WITH(import(address, 65, {kDLCUDA, 1}), Catch::Contains("260 bytes") && Catch::Contains("only 256"));
  CHECK_THROWS_WITH(import(address + 8 * sizeof(float), 57, {kDLCUDA, 1}), Catch::Contains("only 224"));
  // Memory the driver does not know, and device memory claimed as pinned or managed.
  std::vector<float> host(64);
  CHECK_THROWS_WITH(import(reinterpret_cast<std::uintptr_t>(host.data()), 64, {kDLCUDA, 1}),
                    Catch::Contains("memory the driver does not know"));
  CHECK_THROWS_WITH(import(address, 64, {kDLCUDAHost, 0}), Catch::Contains("claims to be kDLCUDAHost"));
  CHECK_THROWS_WITH(import(address, 64, {kDLCUDAManaged, 0}), Catch::Contains("claims to be kDLCUDAManaged"));
  // Opting out keeps the structural checks only; host memory (kDLCPU) is not the driver's to check.
  CHECK(import(address, 65, {kDLCUDA, 0}, false).size() == 65);
  const std::int64_t shape[] = {64};
  auto cpu = cudrv::from_dlpack<float>(cudrv::to_dlpack(cudrv::strided_view<float>(host.data(), shape, {}, {kDLCPU, 0}),
                                                        nullptr),
                                       cudrv::dlpack_requirements::host());
  CHECK(cpu.size() == 64);
}

#endif
