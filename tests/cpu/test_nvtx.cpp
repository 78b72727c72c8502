// NVTX: what cudrv emits, recorded by the injection library of tests/nvtx_injection.
//
// ctest runs the [nvtx] cases with NVTX_INJECTION64_PATH naming that library, so the first NVTX call
// of the process loads it and every annotation lands in its list, which the tests read back through
// dlopen/dlsym. The cases that also carry [driverless] run with CUDRV_LIBCUDA naming a library that
// does not exist: their launches and copies fail at the driver call, after the automatic range was
// pushed, which must be popped all the same. [nvtx-env] runs with CUDRV_NVTX_AUTO=1.
//
// With CUDRV_ENABLE_NVTX=OFF (CUDRV_DISABLE_NVTX) only the last cases are compiled: with the
// injection library loaded, nothing cudrv does reaches NVTX.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <cudrv/nvtx.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nvtx_injection/nvtx_recorder.h"
#include "support/test_support.hpp"

#if defined(CUDRV_DISABLE_NVTX)
#include <nvtx3/nvtx3.hpp>  // only for the probe that shows the injection library is attached
#endif

namespace {

// One recorded NVTX call, with its strings copied.
struct recorded {
  int kind = 0;
  std::string api;
  std::uint64_t domain = 0;
  std::string domain_name;
  bool has_message = false;
  std::string message;
  int message_type = 0;
  std::uint32_t category = 0;
  int color_type = 0;
  std::uint32_t color = 0;
  int payload_type = 0;
  std::uint64_t payload = 0;
  std::uint64_t handle = 0;
  int level = 0;
  std::uint64_t thread = 0;

  // The payload read back as the type the caller gave it.
  template <class T>
  [[nodiscard]] T payload_as() const {
    static_assert(sizeof(T) <= sizeof(payload));
    T value{};
    std::memcpy(&value, &payload, sizeof(T));
    return value;
  }
};

// The recording library, opened at the path NVTX loads it from (dlopen gives the same instance).
class recorder {
 public:
  // Null when NVTX_INJECTION64_PATH is not set (the case runs outside ctest).
  static const recorder* instance() {
    static const recorder* r = []() -> const recorder* {
      const char* path = std::getenv("NVTX_INJECTION64_PATH");
      if (path == nullptr || path[0] == '\0') {
        return nullptr;
      }
      void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) {
        FAIL("cannot open the NVTX injection library " << path << ": " << dlerror());
      }
      auto* rec = new recorder;
      rec->count_ = reinterpret_cast<decltype(rec->count_)>(dlsym(lib, "cudrv_nvtx_recorder_count"));
      rec->get_ = reinterpret_cast<decltype(rec->get_)>(dlsym(lib, "cudrv_nvtx_recorder_get"));
      rec->clear_ = reinterpret_cast<decltype(rec->clear_)>(dlsym(lib, "cudrv_nvtx_recorder_clear"));
      rec->initializations_ =
          reinterpret_cast<decltype(rec->initializations_)>(dlsym(lib, "cudrv_nvtx_recorder_initializations"));
      if (rec->count_ == nullptr || rec->get_ == nullptr || rec->clear_ == nullptr ||
          rec->initializations_ == nullptr) {
        FAIL(path << " lacks the cudrv_nvtx_recorder_* functions");
      }
      return rec;
    }();
    return r;
  }

  // Every record since the last clear(), domain creations left out (they happen once per process,
  // in whichever case first touches a domain).
  [[nodiscard]] std::vector<recorded> events() const {
    std::vector<recorded> out;
    const std::size_t n = count_();
    for (std::size_t i = 0; i < n; ++i) {
      cudrv_nvtx_record raw{};
      if (get_(i, &raw) == 0) {
        break;
      }
      if (raw.kind == CUDRV_NVTX_DOMAIN_CREATE) {
        continue;
      }
      recorded r;
      r.kind = raw.kind;
      r.api = raw.api;
      r.domain = raw.domain;
      r.domain_name = raw.domain_name;
      r.has_message = raw.has_message != 0;
      r.message = raw.message;
      r.message_type = raw.message_type;
      r.category = raw.category;
      r.color_type = raw.color_type;
      r.color = raw.color;
      r.payload_type = raw.payload_type;
      r.payload = raw.payload;
      r.handle = raw.handle;
      r.level = raw.level;
      r.thread = raw.thread;
      out.push_back(std::move(r));
    }
    return out;
  }
  void clear() const { clear_(); }
  [[nodiscard]] int initializations() const { return initializations_(); }

 private:
  std::size_t (*count_)() = nullptr;
  int (*get_)(std::size_t, cudrv_nvtx_record*) = nullptr;
  void (*clear_)() = nullptr;
  int (*initializations_)() = nullptr;
};

// A driver-less launch target: fake handles, only passed to a driver that cannot be loaded.
CUstream fake_stream() { return reinterpret_cast<CUstream>(std::uintptr_t{0x5100}); }
CUkernel fake_kernel() { return reinterpret_cast<CUkernel>(std::uintptr_t{0x5200}); }
constexpr CUdeviceptr fake_device_memory = 0x7f0000001000;

}  // namespace

/// Starts an [nvtx] case: ends it with a message when the recording library is not loaded (the
/// case was started by hand, without NVTX_INJECTION64_PATH; ctest always sets it).
#define CUDRV_REQUIRE_NVTX_RECORDER(name)                                                                             \
  const recorder* name = recorder::instance();                                                                        \
  do {                                                                                                                \
    if (name == nullptr) {                                                                                            \
      std::cout << "SKIPPED: NVTX_INJECTION64_PATH does not name the recording library (ctest sets it)" << std::endl; \
      return;                                                                                                         \
    }                                                                                                                 \
    name->clear();                                                                                                    \
  } while (0)

#if !defined(CUDRV_DISABLE_NVTX)

namespace {

std::ostream& operator<<(std::ostream& os, const recorded& r) {
  return os << r.api << " kind " << r.kind << " [" << r.domain_name << "] \"" << r.message << "\" level " << r.level;
}

// Restores the automatic ranges' switch when a case ends.
struct automatic_ranges_restorer {
  bool before = cudrv::nvtx::automatic_ranges_enabled();
  automatic_ranges_restorer() = default;
  automatic_ranges_restorer(const automatic_ranges_restorer&) = delete;
  automatic_ranges_restorer& operator=(const automatic_ranges_restorer&) = delete;
  ~automatic_ranges_restorer() { cudrv::nvtx::enable_automatic_ranges(before); }
};

struct test_domain {
  static constexpr const char* name{"cudrv tests"};
};
struct step_message {
  static constexpr const char* message{"registered on first use"};
};
struct io_category {
  static constexpr const char* name{"I/O"};
  static constexpr std::uint32_t id{11};
};

void check_push(const recorded& r, const std::string& message, int level, const std::string& domain = "cudrv") {
  INFO(r);
  CHECK(r.kind == CUDRV_NVTX_PUSH);
  CHECK(r.api == "nvtxDomainRangePushEx");
  CHECK(r.domain_name == domain);
  CHECK(r.has_message);
  CHECK(r.message == message);
  CHECK(r.level == level);
}

void check_pop(const recorded& r, int level, const std::string& domain = "cudrv") {
  INFO(r);
  CHECK(r.kind == CUDRV_NVTX_POP);
  CHECK(r.api == "nvtxDomainRangePop");
  CHECK(r.domain_name == domain);
  CHECK(r.level == level);
}

// A launch that reaches the driver call and fails there (no driver in the [driverless] cases).
void failing_launch() {
  auto k = cudrv::typed_kernel_ref<void(int, float)>::from_native_handle(fake_kernel());
  CHECK_THROWS_AS(cudrv::launch(cudrv::stream_ref(fake_stream()), {.grid = 1, .block = 32}, k, 1, 2.0f), cudrv::error);
}

}  // namespace

TEST_CASE("nvtx: ranges nest as pushes and pops in the cudrv domain", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  {
    cudrv::nvtx::range outer{"outer"};
    { cudrv::nvtx::range inner{"inner"}; }
    cudrv::nvtx::range<> second{std::string("second, from a std::string")};
  }
  auto events = rec->events();
  REQUIRE(events.size() == 6);
  check_push(events[0], "outer", 0);
  check_push(events[1], "inner", 1);
  check_pop(events[2], 1);
  check_push(events[3], "second, from a std::string", 1);
  check_pop(events[4], 1);
  check_pop(events[5], 0);
  CHECK(events[0].domain != 0);
  CHECK(events[0].message_type == NVTX_MESSAGE_TYPE_ASCII);
  CHECK(events[0].color_type == NVTX_COLOR_UNKNOWN);
  CHECK(events[0].payload_type == NVTX_PAYLOAD_UNKNOWN);
  CHECK(events[0].category == 0);
  CHECK(rec->initializations() >= 1);
}

TEST_CASE("nvtx: a range without attributes, and one in a user domain", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  {
    cudrv::nvtx::range plain;
    cudrv::nvtx::range<test_domain> mine{"in my domain"};
    nvtx3::scoped_range_in<cudrv::nvtx::domain> raw{"nvtx3 itself, in the cudrv domain"};
  }
  auto events = rec->events();
  REQUIRE(events.size() == 6);
  CHECK(events[0].kind == CUDRV_NVTX_PUSH);
  CHECK(events[0].domain_name == "cudrv");
  CHECK_FALSE(events[0].has_message);
  CHECK(events[0].message_type == NVTX_MESSAGE_UNKNOWN);
  check_push(events[1], "in my domain", 1, "cudrv tests");
  check_push(events[2], "nvtx3 itself, in the cudrv domain", 2);
  check_pop(events[3], 2);
  check_pop(events[4], 1, "cudrv tests");
  check_pop(events[5], 0);
  CHECK(events[1].domain != events[0].domain);
  CHECK(events[2].domain == events[0].domain);
}

TEST_CASE("nvtx: colours, categories and payloads reach NVTX as given", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  {
    cudrv::nvtx::range a{"rgb", cudrv::nvtx::rgb{0x11, 0x22, 0x33}, cudrv::nvtx::category{7},
                         cudrv::nvtx::payload{std::int64_t{-5}}};
    cudrv::nvtx::range b{cudrv::nvtx::payload{std::uint64_t{0xFFFFFFFFFFFFFFF0ull}}, cudrv::nvtx::argb{0x80, 1, 2, 3},
                         "argb, message last"};
    cudrv::nvtx::range c{"hex colour", cudrv::nvtx::color{0xFF00FF00u}, cudrv::nvtx::payload{2.5}};
    cudrv::nvtx::range d{"32-bit payloads", cudrv::nvtx::payload{std::int32_t{-7}}};
    cudrv::nvtx::range e{"unsigned 32", cudrv::nvtx::payload{std::uint32_t{4000000000u}}};
    cudrv::nvtx::range f{"float", cudrv::nvtx::payload{0.25f}};
    const cudrv::nvtx::event_attributes reused{"reused", cudrv::nvtx::category{3}, cudrv::nvtx::rgb{9, 8, 7}};
    cudrv::nvtx::range g{reused};
  }
  auto events = rec->events();
  REQUIRE(events.size() == 14);
  const auto& a = events[0];
  CHECK(a.message == "rgb");
  CHECK(a.color_type == NVTX_COLOR_ARGB);
  CHECK(a.color == 0xFF112233u);  // rgb is opaque
  CHECK(a.category == 7);
  CHECK(a.payload_type == NVTX_PAYLOAD_TYPE_INT64);
  CHECK(a.payload_as<std::int64_t>() == -5);

  const auto& b = events[1];
  CHECK(b.message == "argb, message last");
  CHECK(b.color == 0x80010203u);
  CHECK(b.category == 0);
  CHECK(b.payload_type == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64);
  CHECK(b.payload_as<std::uint64_t>() == 0xFFFFFFFFFFFFFFF0ull);

  const auto& c = events[2];
  CHECK(c.color == 0xFF00FF00u);
  CHECK(c.payload_type == NVTX_PAYLOAD_TYPE_DOUBLE);
  CHECK(c.payload_as<double>() == 2.5);

  CHECK(events[3].payload_type == NVTX_PAYLOAD_TYPE_INT32);
  CHECK(events[3].payload_as<std::int32_t>() == -7);
  CHECK(events[4].payload_type == NVTX_PAYLOAD_TYPE_UNSIGNED_INT32);
  CHECK(events[4].payload_as<std::uint32_t>() == 4000000000u);
  CHECK(events[5].payload_type == NVTX_PAYLOAD_TYPE_FLOAT);
  CHECK(events[5].payload_as<float>() == 0.25f);

  const auto& g = events[6];
  CHECK(g.message == "reused");
  CHECK(g.category == 3);
  CHECK(g.color == 0xFF090807u);
  for (int i = 0; i < 7; ++i) {
    check_push(events[static_cast<std::size_t>(i)], events[static_cast<std::size_t>(i)].message, i);
    check_pop(events[static_cast<std::size_t>(13 - i)], i);
  }
}

TEST_CASE("nvtx: marks in the cudrv domain and in a user domain", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  cudrv::nvtx::mark("checkpoint", cudrv::nvtx::rgb{255, 0, 0}, cudrv::nvtx::payload{std::int64_t{42}});
  cudrv::nvtx::mark();
  cudrv::nvtx::mark<test_domain>("elsewhere", cudrv::nvtx::category{5});
  auto events = rec->events();
  REQUIRE(events.size() == 3);
  CHECK(events[0].kind == CUDRV_NVTX_MARK);
  CHECK(events[0].api == "nvtxDomainMarkEx");
  CHECK(events[0].domain_name == "cudrv");
  CHECK(events[0].message == "checkpoint");
  CHECK(events[0].color == 0xFFFF0000u);
  CHECK(events[0].payload_as<std::int64_t>() == 42);
  CHECK(events[1].kind == CUDRV_NVTX_MARK);
  CHECK_FALSE(events[1].has_message);
  CHECK(events[2].kind == CUDRV_NVTX_MARK);
  CHECK(events[2].domain_name == "cudrv tests");
  CHECK(events[2].message == "elsewhere");
  CHECK(events[2].category == 5);
}

TEST_CASE("nvtx: registered strings and named categories of the cudrv domain", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  const cudrv::nvtx::registered_string hello{"registered once"};
  const cudrv::nvtx::named_category io{21, "memory"};
  {
    cudrv::nvtx::range r{hello, io};
    cudrv::nvtx::range s{cudrv::nvtx::registered_string::get<step_message>(),
                         cudrv::nvtx::named_category::get<io_category>()};
  }
  cudrv::nvtx::mark(hello);
  auto events = rec->events();
  REQUIRE(events.size() == 9);
  CHECK(events[0].kind == CUDRV_NVTX_REGISTER_STRING);
  CHECK(events[0].api == "nvtxDomainRegisterStringA");
  CHECK(events[0].domain_name == "cudrv");
  CHECK(events[0].message == "registered once");
  CHECK(events[1].kind == CUDRV_NVTX_NAME_CATEGORY);
  CHECK(events[1].api == "nvtxDomainNameCategoryA");
  CHECK(events[1].domain_name == "cudrv");
  CHECK(events[1].category == 21);
  CHECK(events[1].message == "memory");

  check_push(events[2], "registered once", 0);
  CHECK(events[2].message_type == NVTX_MESSAGE_TYPE_REGISTERED);
  CHECK(events[2].category == 21);
  // get<T>() registers and names on first use, in the order the arguments are evaluated.
  int registered = 0, named = 0;
  for (std::size_t i = 3; i < 5; ++i) {
    registered += events[i].kind == CUDRV_NVTX_REGISTER_STRING && events[i].message == "registered on first use";
    named += events[i].kind == CUDRV_NVTX_NAME_CATEGORY && events[i].category == 11 && events[i].message == "I/O";
  }
  CHECK(registered == 1);
  CHECK(named == 1);
  check_push(events[5], "registered on first use", 1);
  CHECK(events[5].category == 11);
  check_pop(events[6], 1);
  check_pop(events[7], 0);
  CHECK(events[8].kind == CUDRV_NVTX_MARK);
  CHECK(events[8].message == "registered once");
}

TEST_CASE("nvtx: naming devices, contexts, streams and events passes their handles", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  // Only the handle values travel: fake handles need no driver.
  const auto ctx = reinterpret_cast<CUcontext>(std::uintptr_t{0xC0DE0});
  const auto str = reinterpret_cast<CUstream>(std::uintptr_t{0x57EA0});
  const auto evt = reinterpret_cast<CUevent>(std::uintptr_t{0xE7E70});
  cudrv::nvtx::name(cudrv::device::from_native_handle(3), "third GPU");
  cudrv::nvtx::name(cudrv::context_ref(ctx), std::string("solver context"));
  cudrv::nvtx::name(cudrv::stream_ref(str), std::string_view("copies and more", 6));  // not NUL-terminated
  cudrv::nvtx::name(cudrv::event_ref(evt), "inputs ready");
  cudrv::nvtx::name(cudrv::stream_ref::legacy_default(), "legacy default");
  cudrv::nvtx::name(cudrv::stream_ref::per_thread_default(), "per-thread default");
  auto events = rec->events();
  REQUIRE(events.size() == 6);
  CHECK(events[0].kind == CUDRV_NVTX_NAME_CU_DEVICE);
  CHECK(events[0].api == "nvtxNameCuDeviceA");
  CHECK(events[0].handle == 3);
  CHECK(events[0].message == "third GPU");
  CHECK(events[1].kind == CUDRV_NVTX_NAME_CU_CONTEXT);
  CHECK(events[1].handle == 0xC0DE0);
  CHECK(events[1].message == "solver context");
  CHECK(events[2].kind == CUDRV_NVTX_NAME_CU_STREAM);
  CHECK(events[2].handle == 0x57EA0);
  CHECK(events[2].message == "copies");
  CHECK(events[3].kind == CUDRV_NVTX_NAME_CU_EVENT);
  CHECK(events[3].handle == 0xE7E70);
  CHECK(events[3].message == "inputs ready");
  CHECK(events[4].handle == reinterpret_cast<std::uintptr_t>(CU_STREAM_LEGACY));
  CHECK(events[5].handle == reinterpret_cast<std::uintptr_t>(CU_STREAM_PER_THREAD));
}

TEST_CASE("nvtx: naming an empty owner throws and names nothing", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  // Owners of fake handles, emptied with release() before anything would destroy them.
  auto s = cudrv::stream::from_native_handle(reinterpret_cast<CUstream>(std::uintptr_t{0x57EA0}));
  (void)s.release();
  auto e = cudrv::event::from_native_handle(reinterpret_cast<CUevent>(std::uintptr_t{0xE7E70}));
  (void)e.release();
  auto c = cudrv::context::from_native_handle(reinterpret_cast<CUcontext>(std::uintptr_t{0xC0DE0}));
  (void)c.release();
  auto se = cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { cudrv::nvtx::name(s, "x"); });
  REQUIRE(se);
  CHECK(se->api() == "cudrv::nvtx::name");
  CHECK(cudrv::test::contains(se->what(), "stream is empty"));
  CHECK_THROWS_AS(cudrv::nvtx::name(e, "x"), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(cudrv::nvtx::name(c, "x"), cudrv::invalid_argument_error);
  CHECK(rec->events().empty());
}

TEST_CASE("nvtx: automatic ranges are off by default", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  if (std::getenv("CUDRV_NVTX_AUTO") != nullptr) {
    std::cout << "SKIPPED: CUDRV_NVTX_AUTO is set in the environment" << std::endl;
    return;
  }
  CHECK_FALSE(cudrv::nvtx::automatic_ranges_enabled());
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(true);
  CHECK(cudrv::nvtx::automatic_ranges_enabled());
  cudrv::nvtx::enable_automatic_ranges(false);
  CHECK_FALSE(cudrv::nvtx::automatic_ranges_enabled());
  CHECK(rec->events().empty());
}

TEST_CASE("nvtx: automatic ranges off: failing launches and copies emit nothing", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(false);
  failing_launch();
  std::vector<float> host(16);
  CHECK_THROWS_AS(cudrv::copy(cudrv::device_span<float>(fake_device_memory, 16), host,
                              cudrv::stream_ref(fake_stream())),
                  cudrv::error);
  CHECK_THROWS_AS(cudrv::fill(cudrv::device_span<float>(fake_device_memory, 16), 1.0f,
                              cudrv::stream_ref(fake_stream())),
                  cudrv::error);
  CHECK(rec->events().empty());
}

TEST_CASE("nvtx: automatic ranges around a launch that fails at the driver call", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(true);

  SECTION("a typed launch: without a driver, no kernel name") {
    {
      cudrv::nvtx::range outer{"user range"};
      failing_launch();
    }
    auto events = rec->events();
    REQUIRE(events.size() == 4);
    check_push(events[0], "user range", 0);
    check_push(events[1], "cudrv::launch", 1);  // no driver, so no name
    check_pop(events[2], 1);
    check_pop(events[3], 0);
    CHECK(events[1].color_type == NVTX_COLOR_UNKNOWN);
    CHECK(events[1].category == 0);
    CHECK(events[1].payload_type == NVTX_PAYLOAD_UNKNOWN);
  }
  SECTION("the name cached by a library is used") {
    cudrv::detail::kernel_signature sig;
    sig.name = "_Z6saxpyifPKfPf";
    int n = 3;
    void* args[] = {&n};
    CHECK_THROWS_AS(cudrv::detail::launch_kernel(fake_stream(), {.grid = 4, .block = 128}, fake_kernel(), args, &sig),
                    cudrv::error);
    auto events = rec->events();
    REQUIRE(events.size() == 2);
    check_push(events[0], "cudrv::launch _Z6saxpyifPKfPf", 0);
    check_pop(events[1], 0);
  }
  SECTION("a launch refused before the driver call (empty stream) is annotated and popped too") {
    auto s = cudrv::stream::from_native_handle(fake_stream());
    (void)s.release();
    auto k = cudrv::typed_kernel_ref<void(int)>::from_native_handle(fake_kernel());
    CHECK_THROWS_AS(cudrv::launch(s, {.grid = 1, .block = 1}, k, 1), cudrv::invalid_argument_error);
    auto events = rec->events();
    REQUIRE(events.size() == 2);
    check_push(events[0], "cudrv::launch", 0);
    check_pop(events[1], 0);
  }
}

TEST_CASE("nvtx: automatic ranges around copies and fills that fail", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(true);
  const cudrv::stream_ref s(fake_stream());
  const cudrv::device_span<float> dev(fake_device_memory, 16);
  std::vector<float> host(16);

  std::string expected;
  SECTION("stream-ordered copy") {
    CHECK_THROWS_AS(cudrv::copy(dev, host, s), cudrv::error);
    expected = "cudrv::copy 64 bytes";
  }
  SECTION("synchronous copy of a count") {
    CHECK_THROWS_AS(cudrv::copy(host, dev, 5), cudrv::error);
    expected = "cudrv::copy 20 bytes";
  }
  SECTION("copy refused by cudrv before any driver call") {
    CHECK_THROWS_AS(cudrv::copy(dev, std::span<const float>(), s), cudrv::invalid_argument_error);
    expected = "cudrv::copy 0 bytes";
  }
  SECTION("peer copy") {
    const cudrv::context_ref ctx(reinterpret_cast<CUcontext>(std::uintptr_t{0xC0DE0}));
    CHECK_THROWS_AS(cudrv::copy_peer(dev, ctx, cudrv::device_span<const float>(fake_device_memory + 4096, 8), ctx, s),
                    cudrv::error);
    expected = "cudrv::copy_peer 32 bytes";
  }
  SECTION("pitched copy") {
    std::vector<float> a(8 * 4), b(8 * 4);
    CHECK_THROWS_AS(cudrv::copy(cudrv::pitched_span<float>::dense(a.data(), 8, 4),
                                cudrv::pitched_span<const float>::dense(b.data(), 8, 4), s),
                    cudrv::error);
    expected = "cudrv::copy 128 bytes";
  }
  SECTION("stream-ordered fill") {
    CHECK_THROWS_AS(cudrv::fill(dev, 1.0f, s), cudrv::error);
    expected = "cudrv::fill 64 bytes";
  }
  SECTION("synchronous fill of 2-byte elements") {
    CHECK_THROWS_AS(cudrv::fill(cudrv::device_span<std::uint16_t>(fake_device_memory, 8), std::uint16_t{7}),
                    cudrv::error);
    expected = "cudrv::fill 16 bytes";
  }
  auto events = rec->events();
  REQUIRE(events.size() == 2);
  check_push(events[0], expected, 0);
  check_pop(events[1], 0);
}

TEST_CASE("nvtx: automatic ranges around a graph launch that fails", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(true);
  auto exec =
      cudrv::graph_exec::from_native_handle(reinterpret_cast<CUgraphExec>(std::uintptr_t{0x6E00}),
                                            cudrv::context_ref(reinterpret_cast<CUcontext>(std::uintptr_t{0xC0DE0})));
  CHECK_THROWS_AS(exec.launch(cudrv::stream_ref(fake_stream())), cudrv::error);
  (void)exec.release();  // a fake handle: nothing to destroy
  auto events = rec->events();
  REQUIRE(events.size() == 2);
  check_push(events[0], "cudrv::graph_launch", 0);
  check_pop(events[1], 0);
}

TEST_CASE("nvtx: automatic ranges switch on and off at run time", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(true);
  failing_launch();
  cudrv::nvtx::enable_automatic_ranges(false);
  failing_launch();
  failing_launch();
  cudrv::nvtx::enable_automatic_ranges(true);
  failing_launch();
  auto events = rec->events();
  REQUIRE(events.size() == 4);
  check_push(events[0], "cudrv::launch", 0);
  check_pop(events[1], 0);
  check_push(events[2], "cudrv::launch", 0);
  check_pop(events[3], 0);
}

TEST_CASE("nvtx: automatic ranges stay on the thread that launches", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  automatic_ranges_restorer restore;
  cudrv::nvtx::enable_automatic_ranges(true);
  cudrv::nvtx::mark("main thread");
  std::thread worker([] {
    try {
      auto k = cudrv::typed_kernel_ref<void()>::from_native_handle(fake_kernel());
      cudrv::launch(cudrv::stream_ref(fake_stream()), {.grid = 1, .block = 1}, k);
    } catch (const cudrv::error&) {
    }
  });
  worker.join();
  auto events = rec->events();
  REQUIRE(events.size() == 3);
  CHECK(events[0].kind == CUDRV_NVTX_MARK);
  check_push(events[1], "cudrv::launch", 0);
  check_pop(events[2], 0);
  CHECK(events[1].thread == events[2].thread);
  CHECK(events[1].thread != events[0].thread);
}

TEST_CASE("nvtx: CUDRV_NVTX_AUTO=1 switches the automatic ranges on, read once", "[nvtx][nvtx-env]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  const char* env = std::getenv("CUDRV_NVTX_AUTO");
  if (env == nullptr || std::strcmp(env, "1") != 0) {
    std::cout << "SKIPPED: run with CUDRV_NVTX_AUTO=1 (ctest does)" << std::endl;
    return;
  }
  // A copy of nothing: refused by cudrv before any driver call, so it needs no driver.
  const cudrv::device_span<float> dev(fake_device_memory, 16);
  CHECK_THROWS_AS(cudrv::copy(dev, std::span<const float>(), cudrv::stream_ref(fake_stream())),
                  cudrv::invalid_argument_error);  // the first check reads the variable
  CHECK(cudrv::nvtx::automatic_ranges_enabled());
  setenv("CUDRV_NVTX_AUTO", "0", 1);  // read once: changing it now changes nothing
  CHECK(cudrv::nvtx::automatic_ranges_enabled());
  cudrv::nvtx::enable_automatic_ranges(false);  // the call overrides the variable
  CHECK_THROWS_AS(cudrv::copy(dev, std::span<const float>(), cudrv::stream_ref(fake_stream())),
                  cudrv::invalid_argument_error);
  auto events = rec->events();
  REQUIRE(events.size() == 2);
  check_push(events[0], "cudrv::copy 0 bytes", 0);
  check_pop(events[1], 0);
  CHECK_FALSE(cudrv::nvtx::automatic_ranges_enabled());
}

#else  // CUDRV_DISABLE_NVTX

static_assert(!cudrv::nvtx::compiled_in);

namespace {
struct step_message {
  static constexpr const char* message{"registered on first use"};
};
struct io_category {
  static constexpr const char* name{"I/O"};
  static constexpr std::uint32_t id{11};
};
struct test_domain {
  static constexpr const char* name{"cudrv tests"};
};
}  // namespace

TEST_CASE("nvtx: with CUDRV_DISABLE_NVTX, cudrv emits nothing", "[nvtx][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  // The whole API compiles, and does nothing.
  {
    const cudrv::nvtx::registered_string hello{"registered once"};
    const cudrv::nvtx::named_category io{21, "memory"};
    cudrv::nvtx::range a{"rgb", cudrv::nvtx::rgb{1, 2, 3}, cudrv::nvtx::category{7},
                         cudrv::nvtx::payload{std::int64_t{-5}}};
    cudrv::nvtx::range b{hello, io, cudrv::nvtx::argb{1, 2, 3, 4}, cudrv::nvtx::color{0xFF00FF00u}};
    cudrv::nvtx::range c{cudrv::nvtx::registered_string::get<step_message>(),
                         cudrv::nvtx::named_category::get<io_category>()};
    cudrv::nvtx::range<test_domain> d{"mine"};
    cudrv::nvtx::range e;
    cudrv::nvtx::mark("checkpoint", cudrv::nvtx::payload{2.5});
    cudrv::nvtx::mark<test_domain>(cudrv::nvtx::event_attributes{"attributes", cudrv::nvtx::category{1}});
  }
  cudrv::nvtx::name(cudrv::device::from_native_handle(3), "third GPU");
  cudrv::nvtx::name(cudrv::stream_ref(fake_stream()), "stream");
  cudrv::nvtx::enable_automatic_ranges(true);
  CHECK_FALSE(cudrv::nvtx::automatic_ranges_enabled());
  auto k = cudrv::typed_kernel_ref<void(int)>::from_native_handle(fake_kernel());
  CHECK_THROWS_AS(cudrv::launch(cudrv::stream_ref(fake_stream()), {.grid = 1, .block = 1}, k, 1), cudrv::error);
  std::vector<float> host(16);
  CHECK_THROWS_AS(cudrv::copy(cudrv::device_span<float>(fake_device_memory, 16), host,
                              cudrv::stream_ref(fake_stream())),
                  cudrv::error);
  CHECK(rec->events().empty());
  CHECK(rec->initializations() == 0);  // not even NVTX's loader ran

  // The library is attached as soon as something annotates: this probe is the only record.
  nvtx3::mark("probe");
  auto events = rec->events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == CUDRV_NVTX_MARK);
  CHECK(events[0].message == "probe");
}

TEST_CASE("nvtx: with CUDRV_DISABLE_NVTX, naming still refuses an empty owner", "[nvtx]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  auto s = cudrv::stream::from_native_handle(fake_stream());
  (void)s.release();
  CHECK_THROWS_AS(cudrv::nvtx::name(s, "x"), cudrv::invalid_argument_error);
  CHECK_NOTHROW(cudrv::nvtx::name(cudrv::stream_ref(fake_stream()), "x"));
  CHECK(rec->events().empty());
}

TEST_CASE("nvtx: with CUDRV_DISABLE_NVTX, CUDRV_NVTX_AUTO changes nothing", "[nvtx][nvtx-env]") {
  CUDRV_REQUIRE_NVTX_RECORDER(rec);
  CHECK_FALSE(cudrv::nvtx::automatic_ranges_enabled());
  CHECK_THROWS_AS(cudrv::copy(cudrv::device_span<float>(fake_device_memory, 16), std::span<const float>(),
                              cudrv::stream_ref(fake_stream())),
                  cudrv::invalid_argument_error);
  CHECK(rec->events().empty());
}

#endif  // CUDRV_DISABLE_NVTX
