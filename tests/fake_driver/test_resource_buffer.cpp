// cudrv::resource_buffer against the stand-in driver of fake_cuda.cpp (device 1; device 0 is unavailable):
// a counting resource over host memory shows what the buffer asks of its resource (which call, which
// pointer, size, alignment and stream, how often), the cudrv resources show what reaches the driver, and
// the DLPack export (when CMake found DLPack's header) shows the tensor's fields and the free in its deleter.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>
#if defined(CUDRV_TEST_DLPACK)
#include <cudrv/dlpack.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// One call a resource received.
struct resource_call {
  std::string what;  // "allocate", "deallocate", "allocate_async", "deallocate_async"
  void* pointer = nullptr;
  std::size_t bytes = 0;
  std::size_t alignment = 0;
  CUstream stream = nullptr;  // the stream-ordered calls' stream
};

// The calls a counting_resource received; kept outside it, so that they can be read after it is gone.
struct call_log {
  std::vector<resource_call> calls;
  std::size_t count(const std::string& what) const {
    std::size_t n = 0;
    for (const resource_call& c : calls) {
      n += c.what == what ? 1 : 0;
    }
    return n;
  }
  const resource_call& last() const { return calls.back(); }
};

// A resource over host memory (operator new) that logs every call and describes its memory as told.
class counting_resource final : public cudrv::memory_resource {
 public:
  counting_resource(call_log& log, cudrv::memory_properties props) : log_(&log), props_(props) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = ::operator new(bytes, std::align_val_t(alignment));
    log_->calls.push_back({"allocate", p, bytes, alignment, nullptr});
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept override {
    log_->calls.push_back({"deallocate", p, bytes, alignment, nullptr});
    ::operator delete(p, std::align_val_t(alignment));
  }
  void* do_allocate_async(std::size_t bytes, std::size_t alignment, cudrv::stream_ref s) override {
    void* p = ::operator new(bytes, std::align_val_t(alignment));
    log_->calls.push_back({"allocate_async", p, bytes, alignment, s.native_handle()});
    return p;
  }
  void do_deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cudrv::stream_ref s) noexcept override {
    log_->calls.push_back({"deallocate_async", p, bytes, alignment, s.native_handle()});
    ::operator delete(p, std::align_val_t(alignment));
  }
  [[nodiscard]] cudrv::memory_properties do_properties() const noexcept override { return props_; }

  call_log* log_;
  cudrv::memory_properties props_;
};

constexpr cudrv::memory_properties device_only{1, true, false};
constexpr cudrv::memory_properties host_only{-1, false, true};
constexpr cudrv::memory_properties shared_memory{-1, true, true};

std::string text_of(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

// The ownership rules, at compile time: move-only, views only from lvalues, temporaries refused.
using rb = cudrv::resource_buffer;
static_assert(!std::is_copy_constructible_v<rb> && !std::is_copy_assignable_v<rb>);
static_assert(std::is_nothrow_move_constructible_v<rb> && std::is_nothrow_move_assignable_v<rb>);
static_assert(std::is_nothrow_destructible_v<rb>);
static_assert(!std::is_convertible_v<rb, bool> && std::is_constructible_v<bool, rb>);  // explicit operator bool
static_assert(requires(rb & b) {
  { b.as<float>() } -> std::same_as<cudrv::device_span<float>>;
});
static_assert(requires(const rb& b) {
  { b.as<float>() } -> std::same_as<cudrv::device_span<const float>>;
});
static_assert(requires(rb & b) {
  { b.as_host<int>() } -> std::same_as<std::span<int>>;
});
// Misuse forms, checked through concepts so that a form that does not compile reads as false.
template <class B>
concept views_on_device = requires(B&& b) {
  std::forward<B>(b).template as<float>();
};
template <class B>
concept views_on_host = requires(B&& b) {
  std::forward<B>(b).template as_host<float>();
};
template <class R>
concept adopts_from = requires(R&& r) {
  rb::from_native_handle(std::forward<R>(r), rb::allocation{});
};
template <class R, class S>
concept adopts_on = requires(R&& r, S&& s) {
  rb::from_native_handle(std::forward<R>(r), rb::allocation{}, std::forward<S>(s));
};
template <class S>
concept moves_to = requires(rb& b, S&& s) {
  b.set_stream(std::forward<S>(s));
};
static_assert(views_on_device<rb&> && views_on_device<const rb&> && !views_on_device<rb>);  // a temporary buffer
static_assert(views_on_host<rb&> && views_on_host<const rb&> && !views_on_host<rb>);
static_assert(!std::is_constructible_v<rb, counting_resource&&, std::size_t>);  // a temporary resource
static_assert(!std::is_constructible_v<rb, counting_resource&&, std::size_t, cudrv::stream_ref>);
static_assert(!std::is_constructible_v<rb, counting_resource&&, std::size_t, std::size_t, cudrv::stream_ref>);
static_assert(std::is_constructible_v<rb, counting_resource&, std::size_t, cudrv::stream&>);
static_assert(!std::is_constructible_v<rb, counting_resource&, std::size_t, cudrv::stream&&>);  // a temporary stream
static_assert(!std::is_constructible_v<rb, counting_resource&, std::size_t, std::size_t, cudrv::stream&&>);
static_assert(adopts_from<counting_resource&> && !adopts_from<counting_resource>);
static_assert(adopts_on<counting_resource&, cudrv::stream&> && !adopts_on<counting_resource, cudrv::stream&> &&
              !adopts_on<counting_resource&, cudrv::stream>);
static_assert(moves_to<cudrv::stream&> && moves_to<cudrv::stream_ref> && !moves_to<cudrv::stream>);

}  // namespace

TEST_CASE("fake driver: a resource_buffer allocated synchronously reports itself and frees once",
          "[fake-driver][resource][resource-buffer]") {
  call_log log;
  counting_resource mr(log, device_only);
  cudrv::test::destruction_error_counter errors;
  void* p = nullptr;
  {
    cudrv::resource_buffer b(mr, 1000, 64);
    REQUIRE(log.count("allocate") == 1);
    p = log.last().pointer;
    CHECK(b.get() == p);
    CHECK(b.data() == reinterpret_cast<CUdeviceptr>(p));
    CHECK(b.size() == 1000);
    CHECK(b.size_bytes() == 1000);
    CHECK(b.alignment() == 64);
    CHECK(log.last().alignment == 64);
    CHECK(static_cast<bool>(b));
    CHECK_FALSE(b.empty());
    CHECK(b.properties() == device_only);
    CHECK(&b.resource() == &mr);
    CHECK_FALSE(b.is_stream_ordered());
    auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)b.stream(); });
    REQUIRE(e);
    CHECK(contains(e->what(), "synchronously"));
    CHECK(log.count("deallocate") == 0);
  }
  REQUIRE(log.calls.size() == 2);
  CHECK(log.last().what == "deallocate");
  CHECK(log.last().pointer == p);
  CHECK(log.last().bytes == 1000);
  CHECK(log.last().alignment == 64);

  // reset() frees now, once; the destructor then frees nothing.
  {
    cudrv::resource_buffer b(mr, 16);
    CHECK(b.alignment() == cudrv::memory_resource::default_alignment);
    b.reset();
    CHECK_FALSE(b);
    CHECK(log.count("deallocate") == 2);
    b.reset();
  }
  CHECK(log.count("deallocate") == 2);
  CHECK(log.count("allocate") == 2);

  // Zero bytes: the resource returns null, the buffer holds nothing and frees nothing.
  {
    cudrv::resource_buffer none(mr, 0);
    CHECK_FALSE(none);
    CHECK(none.empty());
    CHECK(none.properties() == cudrv::memory_properties{});
    CHECK_THROWS_AS((void)none.resource(), cudrv::invalid_argument_error);
  }
  CHECK(log.calls.size() == 4);
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: a stream-ordered resource_buffer frees on its stream, or on the one reset names",
          "[fake-driver][resource][resource-buffer]") {
  cudrv::test::fake_probe f;
  const cudrv::device d1(1);
  call_log log;
  counting_resource mr(log, shared_memory);
  cudrv::test::destruction_error_counter errors;
  cudrv::stream s(d1);
  cudrv::stream t(d1);
  {
    cudrv::resource_buffer b(mr, 256, s);
    REQUIRE(log.count("allocate_async") == 1);
    CHECK(log.last().stream == s.native_handle());
    CHECK(b.is_stream_ordered());
    CHECK(b.stream() == s);
    CHECK(b.properties() == shared_memory);
  }
  CHECK(log.count("deallocate_async") == 1);
  CHECK(log.last().stream == s.native_handle());
  CHECK(log.last().pointer == log.calls[0].pointer);

  // reset(stream) frees once, ordered on the stream it names; also memory allocated synchronously.
  {
    cudrv::resource_buffer b(mr, 128, s);
    b.reset(t);
    CHECK_FALSE(b);
    CHECK(log.count("deallocate_async") == 2);
    CHECK(log.last().stream == t.native_handle());
    cudrv::resource_buffer c(mr, 64);
    c.reset(t);
    CHECK(log.count("deallocate") == 0);
    CHECK(log.count("deallocate_async") == 3);
    CHECK(log.last().stream == t.native_handle());
  }
  CHECK(log.count("deallocate_async") == 3);

  // set_stream: t waits for s (an event recorded on s), and the free goes to t.
  {
    cudrv::resource_buffer b(mr, 64, s);
    const std::size_t start = f.log().size();
    b.set_stream(t);
    CHECK(b.stream() == t);
    const std::string since = f.log().substr(start);
    CHECK(contains(since, "event_record "));
    CHECK(contains(since, " on " + text_of(s.native_handle())));
    CHECK(contains(since, "stream_wait " + text_of(t.native_handle())));
    cudrv::resource_buffer sync(mr, 64);
    CHECK_THROWS_AS(sync.set_stream(t), cudrv::invalid_argument_error);
  }
  CHECK(log.calls[log.calls.size() - 2].what == "deallocate");  // sync, destroyed first
  CHECK(log.last().what == "deallocate_async");
  CHECK(log.last().stream == t.native_handle());

  // An owned stream is kept alive until the buffer is freed on it.
  {
    std::optional<cudrv::stream> owner(std::in_place, d1);
    const CUstream handle = owner->native_handle();
    const long long destroyed = f.counter("streams_destroyed");
    cudrv::resource_buffer b(mr, 32, *owner);
    owner.reset();
    CHECK(f.counter("streams_destroyed") == destroyed);  // the buffer still holds it
    b.reset();
    CHECK(log.last().stream == handle);
    CHECK(f.counter("streams_destroyed") == destroyed + 1);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: resource_buffer moves, releases and adopts", "[fake-driver][resource][resource-buffer]") {
  const cudrv::device d1(1);
  call_log log;
  counting_resource mr(log, host_only);
  cudrv::stream s(d1);
  cudrv::test::destruction_error_counter errors;

  cudrv::resource_buffer a(mr, 100, s);
  void* pa = a.get();
  cudrv::resource_buffer b(std::move(a));
  CHECK_FALSE(a);  // NOLINT: checking the moved-from state
  CHECK(a.size() == 0);
  CHECK(a.properties() == cudrv::memory_properties{});
  CHECK_FALSE(a.is_stream_ordered());
  CHECK_THROWS_AS((void)a.resource(), cudrv::invalid_argument_error);
  CHECK(b.get() == pa);
  CHECK(b.stream() == s);
  CHECK(b.properties() == host_only);

  // Move assignment frees what the target held first, once.
  cudrv::resource_buffer c(mr, 50);
  void* pc = c.get();
  c = std::move(b);
  CHECK(log.count("deallocate") == 1);
  CHECK(log.last().pointer == pc);
  CHECK(c.get() == pa);
  auto& self = c;
  c = std::move(self);
  CHECK(c.get() == pa);
  CHECK(log.count("deallocate_async") == 0);

  // release hands the memory off with what deallocate needs; nothing is freed.
  const cudrv::resource_buffer::allocation handed = c.release();
  CHECK_FALSE(c);
  CHECK(handed.pointer == pa);
  CHECK(handed.bytes == 100);
  CHECK(handed.alignment == cudrv::memory_resource::default_alignment);
  c.reset();
  CHECK(log.count("deallocate_async") == 0);

  // from_native_handle adopts it back, freed once on the named stream.
  {
    auto adopted = cudrv::resource_buffer::from_native_handle(mr, handed, s);
    CHECK(adopted.get() == pa);
    CHECK(adopted.size() == 100);
    CHECK(adopted.stream() == s);
    CHECK(adopted.properties() == host_only);
  }
  CHECK(log.count("deallocate_async") == 1);
  CHECK(log.last().pointer == pa);
  CHECK(log.last().bytes == 100);
  void* q = mr.allocate(48, 16);
  {
    auto adopted = cudrv::resource_buffer::from_native_handle(mr, {q, 48, 16});
    CHECK_FALSE(adopted.is_stream_ordered());
    CHECK(adopted.alignment() == 16);
  }
  CHECK(log.last().what == "deallocate");
  CHECK(log.last().pointer == q);
  CHECK(log.last().alignment == 16);
  auto none = cudrv::resource_buffer::from_native_handle(mr, {nullptr, 0});
  CHECK_FALSE(none);
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: resource_buffer views its memory typed, where it is accessible",
          "[fake-driver][resource][resource-buffer]") {
  call_log log;
  counting_resource host_mr(log, host_only);
  counting_resource device_mr(log, device_only);
  counting_resource both_mr(log, shared_memory);

  cudrv::resource_buffer h(host_mr, 40);
  std::span<int> ints = h.as_host<int>();
  CHECK(ints.size() == 10);
  CHECK(static_cast<void*>(ints.data()) == h.get());
  for (int i = 0; i < 10; ++i) {
    ints[static_cast<std::size_t>(i)] = i * i;
  }
  const cudrv::resource_buffer& ch = h;
  CHECK(ch.as_host<int>()[9] == 81);
  auto not_device = catch_as<cudrv::invalid_argument_error>([&] { (void)h.as<int>(); });
  REQUIRE(not_device);
  CHECK(contains(not_device->what(), "not device-accessible"));

  cudrv::resource_buffer d(device_mr, 64);
  cudrv::device_span<double> doubles = d.as<double>();
  CHECK(doubles.size() == 8);
  CHECK(doubles.data() == d.data());
  CHECK(std::as_const(d).as<std::uint16_t>().size() == 32);
  auto not_host = catch_as<cudrv::invalid_argument_error>([&] { (void)d.as_host<float>(); });
  REQUIRE(not_host);
  CHECK(contains(not_host->what(), "not host-accessible"));

  cudrv::resource_buffer odd(both_mr, 10);
  CHECK(odd.as<std::uint16_t>().size() == 5);
  CHECK(odd.as_host<char>().size() == 10);
  auto partial = catch_as<cudrv::invalid_argument_error>([&] { (void)odd.as<float>(); });
  REQUIRE(partial);
  CHECK(contains(partial->what(), "10 bytes"));
  // An adopted address that is not aligned for the element type is refused.
  auto shifted = cudrv::resource_buffer::from_native_handle(both_mr, {static_cast<char*>(odd.get()) + 1, 8, 1});
  CHECK_THROWS_WITH(shifted.as<float>(), Catch::Contains("not aligned"));
  CHECK(shifted.as<char>().size() == 8);
  (void)shifted.release();  // not the resource's own allocation: never freed through it

  cudrv::resource_buffer empty;
  CHECK_THROWS_WITH(empty.as<int>(), Catch::Contains("holds no memory"));
}

TEST_CASE("fake driver: resource_buffer refuses bad inputs with typed errors, allocating nothing",
          "[fake-driver][resource][resource-buffer]") {
  const cudrv::device d1(1);
  call_log log;
  counting_resource mr(log, device_only);
  cudrv::stream s(d1);
  cudrv::stream gone(d1);
  cudrv::stream moved = std::move(gone);

  auto odd = catch_as<cudrv::invalid_argument_error>([&] { cudrv::resource_buffer b(mr, 64, 3); });
  REQUIRE(odd);
  CHECK(contains(odd->what(), "power of two"));
  auto empty_stream = catch_as<cudrv::invalid_argument_error>([&] { cudrv::resource_buffer b(mr, 64, gone); });
  REQUIRE(empty_stream);
  CHECK(contains(empty_stream->what(), "moved-from"));
  auto per_thread = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::resource_buffer b(mr, 64, cudrv::stream_ref::per_thread_default()); });
  REQUIRE(per_thread);
  CHECK(contains(per_thread->what(), "per-thread"));
  CHECK(log.calls.empty());

  int x = 0;
  CHECK_THROWS_WITH(cudrv::resource_buffer::from_native_handle(mr, {nullptr, 16}), Catch::Contains("no pointer"));
  CHECK_THROWS_WITH(cudrv::resource_buffer::from_native_handle(mr, {&x, 0}), Catch::Contains("0 bytes"));
  CHECK_THROWS_WITH(cudrv::resource_buffer::from_native_handle(mr, {&x, 4, 6}), Catch::Contains("power of two"));
  CHECK_THROWS_AS(cudrv::resource_buffer::from_native_handle(mr, {&x, 4, 4}, gone), cudrv::invalid_argument_error);

  cudrv::resource_buffer b(mr, 64, s);
  auto refused = catch_as<cudrv::invalid_argument_error>([&] { b.reset(gone); });
  REQUIRE(refused);
  CHECK(b);  // kept after the refusal
  CHECK_THROWS_AS(b.set_stream(gone), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(b.set_stream(cudrv::stream_ref::per_thread_default()), cudrv::invalid_argument_error);
  CHECK(b.stream() == s);
  CHECK(log.count("deallocate_async") == 0);
  b.reset(cudrv::stream_ref::legacy_default());
  CHECK(log.last().stream == CU_STREAM_LEGACY);
  CHECK(log.count("deallocate_async") == 1);
}

TEST_CASE("fake driver: a resource destroyed before its buffers says so, and is never called again",
          "[fake-driver][resource][resource-buffer]") {
  call_log log;
  cudrv::test::destruction_error_counter errors;
  std::optional<counting_resource> mr(std::in_place, log, device_only);
  cudrv::resource_buffer first(*mr, 32);
  cudrv::resource_buffer second(*mr, 32);
  {
    cudrv::resource_buffer freed(*mr, 32);  // freed in time: not counted
  }
  void* p = first.get();
  void* q = second.get();
  mr.reset();
  REQUIRE(errors.count() == 1);
  CHECK(contains(errors.messages(), "CUDA_ERROR_ILLEGAL_STATE"));
  CHECK(contains(errors.messages(), "2 resource_buffers"));
  CHECK(first.get() == p);
  CHECK_THROWS_WITH(first.resource(), Catch::Contains("destroyed before it"));
  const std::size_t calls = log.calls.size();
  first.reset();
  second = cudrv::resource_buffer();
  CHECK(log.calls.size() == calls);  // nothing reached the destroyed resource
  CHECK(errors.count() == 1);
  // What the two buffers held is nobody's now: the test frees it (LeakSanitizer would count it).
  ::operator delete(p, std::align_val_t(cudrv::memory_resource::default_alignment));
  ::operator delete(q, std::align_val_t(cudrv::memory_resource::default_alignment));

  // A copy of a resource starts with no buffers of its own; the original keeps its own.
  counting_resource original(log, device_only);
  std::optional<cudrv::resource_buffer> kept(std::in_place, original, 8);
  {
    counting_resource copy = original;
    cudrv::resource_buffer b(copy, 8);
    CHECK(&b.resource() == &copy);
  }
  CHECK(errors.count() == 1);  // the copy had no buffer left
  CHECK(&kept->resource() == &original);
  kept.reset();
  CHECK(log.last().what == "deallocate");
}

TEST_CASE("fake driver: resource_buffer over the cudrv resources reaches the driver as they do",
          "[fake-driver][resource][resource-buffer]") {
  cudrv::test::fake_probe f;
  const cudrv::device d1(1);
  cudrv::test::destruction_error_counter errors;
  cudrv::stream s(d1);
  cudrv::device_memory_resource device_mr(d1);
  {
    cudrv::resource_buffer b(device_mr, 4096);
    CHECK(f.is_live(b.data()));
    CHECK(b.properties() == cudrv::memory_properties{1, true, false});
    CHECK(&b.resource() == &device_mr);
    const CUdeviceptr address = b.data();
    b.reset();
    CHECK_FALSE(f.is_live(address));
  }
  cudrv::memory_pool pool(d1);
  cudrv::pool_memory_resource pool_mr(pool);
  const std::size_t log_start = f.log().size();
  void* p = nullptr;
  {
    cudrv::resource_buffer b(pool_mr, 1000, s);
    p = b.get();
    CHECK(contains(f.log().substr(log_start), "alloc_from_pool " + text_of(p) + " pool " +
                                                  text_of(pool.native_handle()) + " on " + text_of(s.native_handle())));
    CHECK(f.is_live(b.data()));
  }
  CHECK(contains(f.log().substr(log_start), "free_async " + text_of(p) + " on " + text_of(s.native_handle())));
  s.synchronize();
  CHECK(errors.count() == 0);
}

#if defined(CUDRV_TEST_DLPACK)
TEST_CASE("fake driver: dlpack export moves a resource_buffer in, and the deleter frees it through its resource once",
          "[fake-driver][dlpack][resource-buffer]") {
  const cudrv::device d1(1);
  call_log log;
  counting_resource mr(log, device_only);
  cudrv::stream s(d1);
  cudrv::resource_buffer buf(mr, 24 * sizeof(float), s);
  void* p = buf.get();
  const std::int64_t shape[] = {4, 6};
  auto exported = cudrv::to_dlpack<float>(std::move(buf), shape);
  CHECK_FALSE(buf);  // NOLINT: checking the moved-from state
  REQUIRE(exported);
  const DLTensor& t = exported->dl_tensor;
  CHECK(t.data == p);
  CHECK(t.device.device_type == kDLCUDA);
  CHECK(t.device.device_id == 1);
  CHECK(t.dtype.code == kDLFloat);
  CHECK(t.dtype.bits == 32);
  CHECK(t.dtype.lanes == 1);
  REQUIRE(t.ndim == 2);
  CHECK(t.shape[0] == 4);
  CHECK(t.shape[1] == 6);
  CHECK(t.strides[0] == 6);
  CHECK(t.strides[1] == 1);
  CHECK(t.byte_offset == 0);
  CHECK(log.count("deallocate_async") == 0);
  exported.reset();
  CHECK(log.count("deallocate_async") == 1);
  CHECK(log.last().pointer == p);
  CHECK(log.last().stream == s.native_handle());

  // Bytes by default (uint8, 1-D), as cuda.core's Buffer; host-only memory is kDLCPU.
  counting_resource host_mr(log, host_only);
  cudrv::resource_buffer bytes(host_mr, 10);
  auto raw = cudrv::to_dlpack(std::move(bytes));
  CHECK(raw->dl_tensor.dtype.code == kDLUInt);
  CHECK(raw->dl_tensor.dtype.bits == 8);
  REQUIRE(raw->dl_tensor.ndim == 1);
  CHECK(raw->dl_tensor.shape[0] == 10);
  CHECK(raw->dl_tensor.device.device_type == kDLCPU);

  // Memory both may access: the driver says whether it is managed (the fake: page-locked host memory).
  cudrv::pinned_memory_resource pinned(d1);
  cudrv::resource_buffer staged(pinned, 64);
  auto host_tensor = cudrv::to_dlpack<std::int32_t, DLManagedTensor>(std::move(staged));
  CHECK(host_tensor->dl_tensor.device.device_type == kDLCUDAHost);
  CHECK(host_tensor->dl_tensor.shape[0] == 16);
}

TEST_CASE("fake driver: a refused dlpack export of a resource_buffer leaves it with the caller",
          "[fake-driver][dlpack][resource-buffer]") {
  call_log log;
  counting_resource mr(log, device_only);
  cudrv::resource_buffer buf(mr, 24);
  const std::int64_t wrong[] = {5, 5};
  CHECK_THROWS_WITH(cudrv::to_dlpack<float>(std::move(buf), wrong), Catch::Contains("25 elements"));
  CHECK(buf);
  cudrv::resource_buffer ten(mr, 10);
  CHECK_THROWS_WITH(cudrv::to_dlpack<double>(std::move(ten)), Catch::Contains("whole number"));
  CHECK(ten);
  cudrv::resource_buffer none;
  CHECK_THROWS_WITH(cudrv::to_dlpack(std::move(none)), Catch::Contains("holds no memory"));
  counting_resource nowhere(log, cudrv::memory_properties{-1, true, false});
  cudrv::resource_buffer lost(nowhere, 8);
  CHECK_THROWS_WITH(cudrv::to_dlpack(std::move(lost)), Catch::Contains("no device"));
  CHECK(lost);
  CHECK(log.count("deallocate") == 0);
}
#endif
