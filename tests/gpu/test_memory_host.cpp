// GPU tier: host-side memory. pinned_buffer with every flag, host_registration of a std::vector,
// managed_buffer (host access, advice, prefetch, stream attachment) and round trips of real data
// through the device.
//
// Every test case makes device 0's primary context current for its duration (and restores what was
// current before). Managed allocations stay small (64 KiB). Data is random (the seed is printed on
// failure; CUDRV_TEST_SEED replays it) and destinations are poisoned first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <span>
#include <utility>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

/// An int-valued range attribute of managed memory (cuMemRangeGetAttribute, not wrapped by cudrv).
int range_attribute(const void* pointer, std::size_t bytes, CUmem_range_attribute attribute) {
  auto fn = reinterpret_cast<PFN_cuMemRangeGetAttribute_v8000>(
      cudrv::driver::get_entry_point("cuMemRangeGetAttribute", 8000));
  int value = 0;
  if (CUresult status = fn(&value, sizeof(value), attribute, reinterpret_cast<CUdeviceptr>(pointer), bytes);
      status != CUDA_SUCCESS) {
    throw cudrv::error(status, "cuMemRangeGetAttribute (test)");
  }
  return value;
}

}  // namespace

TEST_CASE("pinned_buffer: every flag combination gives host memory the device can use", "[gpu][memory][pinned]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 16384;  // 64 KiB: write-combined memory is slow to read on the host
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  struct kind {
    cudrv::pinned_flags flags;
    const char* name;
  };
  const kind kinds[] = {
      {cudrv::pinned_flags::none, "none"},
      {cudrv::pinned_flags::portable, "portable"},
      {cudrv::pinned_flags::mapped, "mapped"},
      {cudrv::pinned_flags::write_combined, "write_combined"},
      {cudrv::pinned_flags::portable | cudrv::pinned_flags::mapped, "portable | mapped"},
      {cudrv::pinned_flags::portable | cudrv::pinned_flags::mapped | cudrv::pinned_flags::write_combined,
       "portable | mapped | write_combined"},
  };
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint32_t> d(dev, n);
    for (const kind& k : kinds) {
      INFO("pinned_flags " << k.name);
      cudrv::pinned_buffer<std::uint32_t> p(dev, n, k.flags);
      REQUIRE(bool(p));
      CHECK(p.data() != nullptr);
      CHECK(p.size() == n);
      CHECK(p.size_bytes() == n * sizeof(std::uint32_t));
      CHECK_FALSE(p.empty());
      CHECK(p.begin() == p.data());
      CHECK(p.end() == p.data() + n);
      CHECK(p.view().size() == n);
      CHECK(p.context() == dev.primary_context());
      const std::span<std::uint32_t> as_span(p);
      CHECK(as_span.data() == p.data());

      const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(p.data());
      CHECK(attr.memory_type == CU_MEMORYTYPE_HOST);
      CHECK_FALSE(attr.is_managed);
      CHECK(attr.host_pointer == static_cast<void*>(p.data()));
      INFO("device_ordinal " << attr.device_ordinal);
      CHECK((attr.device_ordinal == -1 || attr.device_ordinal == dev.ordinal()));

      const cudrv::device_span<std::uint32_t> dv = p.device_view();
      CHECK(dv.size() == n);
      CHECK(dv.data() != 0);
      CHECK(dv.data() == attr.device_address);

      // Host writes, host -> device, device -> host into the poisoned buffer.
      std::copy(data.begin(), data.end(), p.begin());
      cudrv::fill(d, poison_value<std::uint32_t>(), s);
      cudrv::copy(d, p, s);
      s.synchronize();
      std::fill(p.begin(), p.end(), poison_value<std::uint32_t>());
      cudrv::copy(p, d, s);
      s.synchronize();
      CHECK(mismatch(p.data(), data.data(), n).empty());

      // The device view is a device address the copy engines can read.
      cudrv::fill(d, poison_value<std::uint32_t>(), s);
      cudrv::copy(d, dv, s);
      std::vector<std::uint32_t> back(n, poison_value<std::uint32_t>());
      cudrv::copy(back, d, s);
      s.synchronize();
      CHECK(mismatch(back, data).empty());
    }
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("pinned_buffer: move, release, adopt and zero elements", "[gpu][memory][pinned]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 4096 + 1;
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(n, seed);
  {
    cudrv::pinned_buffer<std::uint8_t> a(dev, n);
    std::copy(data.begin(), data.end(), a.begin());
    std::uint8_t* const pointer = a.data();

    cudrv::pinned_buffer<std::uint8_t> b(std::move(a));
    CHECK_FALSE(bool(a));
    CHECK(a.data() == nullptr);
    CHECK(a.size() == 0);
    CHECK(a.empty());
    CHECK(b.data() == pointer);
    CHECK(b.size() == n);
    CHECK(mismatch(b.data(), data.data(), n).empty());

    cudrv::pinned_buffer<std::uint8_t> c(dev, 10);
    c = std::move(b);  // frees c's old memory
    CHECK_FALSE(bool(b));
    CHECK(c.data() == pointer);

    std::uint8_t* const raw = c.release();
    CHECK(raw == pointer);
    CHECK_FALSE(bool(c));
    CHECK(c.size() == 0);
    auto adopted = cudrv::pinned_buffer<std::uint8_t>::from_native_handle(raw, n, dev.primary_context());
    CHECK(adopted.data() == raw);
    CHECK(adopted.size() == n);
    CHECK(mismatch(adopted.data(), data.data(), n).empty());
    CHECK(cudrv::get_pointer_attributes(adopted.data()).memory_type == CU_MEMORYTYPE_HOST);

    cudrv::pinned_buffer<std::uint8_t> zero(dev, 0);
    CHECK_FALSE(bool(zero));
    CHECK(zero.empty());
    CHECK(zero.data() == nullptr);
    CHECK(zero.view().empty());
    CHECK_THROWS_AS(zero.device_view(), cudrv::invalid_argument_error);
  }  // adopted is freed by cudrv
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("host_registration: a std::vector is page-locked exactly for the registration's lifetime",
          "[gpu][memory][pinned]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 20) + 123;
  std::vector<std::uint8_t> host = cudrv::test::random_bytes(n, seed);
  const std::vector<std::uint8_t> data = host;

  auto type_of = [](const void* p) { return cudrv::get_pointer_attributes(p).memory_type; };
  CHECK(type_of(host.data()) == 0);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint8_t> d(dev, n);
    {
      cudrv::host_registration reg(dev, std::span(host));
      REQUIRE(bool(reg));
      CHECK(reg.data() == static_cast<void*>(host.data()));
      CHECK(reg.size_bytes() == n);
      CHECK(type_of(host.data()) == CU_MEMORYTYPE_HOST);
      CHECK(type_of(host.data() + n / 2) == CU_MEMORYTYPE_HOST);
      CHECK(type_of(host.data() + n - 1) == CU_MEMORYTYPE_HOST);
      CHECK_FALSE(cudrv::get_pointer_attributes(host.data()).is_managed);

      // Copies through the registered vector, both ways.
      cudrv::fill(d, poison_value<std::uint8_t>(), s);
      cudrv::copy(d, host, s);
      s.synchronize();
      std::fill(host.begin(), host.end(), poison_value<std::uint8_t>());
      cudrv::copy(host, d, s);
      s.synchronize();
      CHECK(mismatch(host, data).empty());

      // Moving the registration keeps the memory registered; the moved-from object is empty.
      cudrv::host_registration moved(std::move(reg));
      CHECK_FALSE(bool(reg));
      CHECK(reg.data() == nullptr);
      CHECK(moved.data() == static_cast<void*>(host.data()));
      CHECK(type_of(host.data()) == CU_MEMORYTYPE_HOST);
    }  // unregistered
    CHECK(type_of(host.data()) == 0);
    CHECK_FALSE(cudrv::get_pointer_attributes(host.data()).is_known());

    // A mapped registration: its device address is the one the driver reports.
    {
      cudrv::host_registration reg(dev, host.data(), n,
                                   cudrv::host_register_flags::portable | cudrv::host_register_flags::mapped);
      const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(host.data());
      CHECK(attr.memory_type == CU_MEMORYTYPE_HOST);
      CHECK(reg.device_address() != 0);
      CHECK(reg.device_address() == attr.device_address);
    }
    CHECK(type_of(host.data()) == 0);

    // release() hands the registration over: the memory stays registered until the caller ends it.
    {
      cudrv::host_registration reg(dev, host.data(), n);
      void* raw = reg.release();
      CHECK(raw == static_cast<void*>(host.data()));
      CHECK_FALSE(bool(reg));
      CHECK(type_of(host.data()) == CU_MEMORYTYPE_HOST);
      auto unregister =
          reinterpret_cast<PFN_cuMemHostUnregister_v4000>(cudrv::driver::get_entry_point("cuMemHostUnregister", 4000));
      REQUIRE(unregister(raw) == CUDA_SUCCESS);
    }
    CHECK(type_of(host.data()) == 0);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("managed_buffer: host access, advice, prefetch and round trips through the device",
          "[gpu][memory][managed]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 16384;  // 64 KiB of managed memory
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  const std::vector<std::uint32_t> other = random_vector<std::uint32_t>(n, seed + 1);

  const cudrv::memory_location on_device(dev);
  CHECK_FALSE(on_device.is_host());
  CHECK(on_device.device_ordinal() == dev.ordinal());
  CHECK(cudrv::memory_location::host().is_host());
  CHECK(cudrv::memory_location::host().device_ordinal() == -1);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint32_t> d(dev, n);
    cudrv::managed_buffer<std::uint32_t> m(dev, n);
    REQUIRE(bool(m));
    CHECK(m.size() == n);
    CHECK(m.size_bytes() == n * sizeof(std::uint32_t));
    CHECK_FALSE(m.empty());
    CHECK(m.begin() == m.data());
    CHECK(m.end() == m.data() + n);
    CHECK(m.view().size() == n);
    CHECK(m.device_view().data() == reinterpret_cast<CUdeviceptr>(m.data()));
    CHECK(m.device_view().size() == n);
    CHECK(m.context() == dev.primary_context());
    const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(m.data());
    CHECK(attr.is_managed);
    CHECK(attr.is_known());

    // The host writes the memory directly.
    for (std::size_t i = 0; i < n; ++i) {
      m[i] = data[i];
    }
    CHECK(mismatch(m.data(), data.data(), n).empty());

    const bool concurrent = dev.attribute(cudrv::device_attributes::concurrent_managed_access);
    if (concurrent) {
      const void* p = m.data();
      const std::size_t bytes = m.size_bytes();
      m.advise(CU_MEM_ADVISE_SET_READ_MOSTLY);
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY) == 1);
      m.advise(CU_MEM_ADVISE_UNSET_READ_MOSTLY);
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY) == 0);
      m.advise(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev);
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == dev.ordinal());
      m.advise(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cudrv::memory_location::host());
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == CU_DEVICE_CPU);
      m.advise(CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION);
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION) == CU_DEVICE_INVALID);
      m.advise(CU_MEM_ADVISE_SET_READ_MOSTLY);

      // To the device, read there by a copy, and back to the host.
      m.prefetch(dev, s);
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == dev.ordinal());
      cudrv::fill(d, poison_value<std::uint32_t>(), s);
      cudrv::copy(d, m, s);
      m.prefetch(cudrv::memory_location::host(), s);
      CHECK(range_attribute(p, bytes, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) == CU_DEVICE_CPU);
      s.synchronize();
      m.advise(CU_MEM_ADVISE_UNSET_READ_MOSTLY);
    } else {
      std::cout << "note: the device has no concurrent managed access; advice and prefetch are not tested" << std::endl;
      cudrv::fill(d, poison_value<std::uint32_t>(), s);
      cudrv::copy(d, m, s);
      s.synchronize();
    }
    std::vector<std::uint32_t> back(n, poison_value<std::uint32_t>());
    cudrv::copy(back, d, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());
    CHECK(mismatch(m.data(), data.data(), n).empty());  // the host still reads its values

    // The device writes, the host reads.
    cudrv::copy(d, other, s);
    cudrv::copy(m, d, s);
    s.synchronize();
    CHECK(mismatch(m.data(), other.data(), n).empty());

    // A fill through the device view changes exactly the chosen elements.
    cudrv::fill(m.device_view().subspan(10, 20), std::uint32_t{0x01020304}, s);
    s.synchronize();
    std::vector<std::uint32_t> expected = other;
    std::fill(expected.begin() + 10, expected.begin() + 30, std::uint32_t{0x01020304});
    CHECK(mismatch(m.data(), expected.data(), n).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("managed_buffer: stream attachment, host attachment, moves and release", "[gpu][memory][managed]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 65536;
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(n, seed);
  const std::vector<std::uint8_t> other = cudrv::test::random_bytes(n, seed + 1);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint8_t> d(dev, n);
    std::vector<std::uint8_t> back(n, poison_value<std::uint8_t>());

    // Attached to one stream: once that stream is idle the host may use the memory.
    cudrv::managed_buffer<std::uint8_t> m(dev, n);
    m.attach(s);
    s.synchronize();
    std::copy(data.begin(), data.end(), m.begin());
    cudrv::fill(d, poison_value<std::uint8_t>(), s);
    cudrv::copy(d, m, s);
    cudrv::copy(back, d, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());
    cudrv::copy(d, other, s);
    cudrv::copy(m, d, s);
    s.synchronize();
    CHECK(mismatch(m.data(), other.data(), n).empty());

    // Allocated attached to the host, written there, then attached globally and read by the device.
    cudrv::managed_buffer<std::uint8_t> h(dev, n, cudrv::managed_attach::host);
    REQUIRE(bool(h));
    std::copy(data.begin(), data.end(), h.begin());
    h.attach(s, cudrv::managed_attach::global);
    std::fill(back.begin(), back.end(), poison_value<std::uint8_t>());
    cudrv::fill(d, poison_value<std::uint8_t>(), s);
    cudrv::copy(d, h, s);
    cudrv::copy(back, d, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());

    // Moves and release/adopt.
    std::uint8_t* const pointer = h.data();
    cudrv::managed_buffer<std::uint8_t> moved(std::move(h));
    CHECK_FALSE(bool(h));
    CHECK(h.data() == nullptr);
    CHECK(h.size() == 0);
    CHECK(moved.data() == pointer);
    m = std::move(moved);  // frees m's old memory
    CHECK(m.data() == pointer);
    CHECK_FALSE(bool(moved));
    std::uint8_t* const raw = m.release();
    CHECK_FALSE(bool(m));
    auto adopted = cudrv::managed_buffer<std::uint8_t>::from_native_handle(raw, n, dev.primary_context());
    CHECK(adopted.data() == raw);
    CHECK(adopted.size() == n);
    CHECK(mismatch(adopted.data(), data.data(), n).empty());

    cudrv::managed_buffer<std::uint8_t> zero(dev, 0);
    CHECK_FALSE(bool(zero));
    CHECK(zero.empty());
    CHECK_THROWS_AS(zero.prefetch(dev, s), cudrv::invalid_argument_error);
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
