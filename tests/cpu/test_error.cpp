// The error hierarchy, names and descriptions of CUresult codes, and the destruction handler.
// Tagged [driverless]: descriptions then come from the table built into cudrv, never the driver.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "support/test_support.hpp"

#if defined(CUDRV_TEST_INTERNALS)
// Internal entry point of cudrv (src/driver/driver_api.hpp): throws the subtype matching a failed call.
namespace cudrv::detail {
[[noreturn]] void throw_driver_error(CUresult status, const char* api, std::string context);
}
#endif

using cudrv::test::catch_as;
using cudrv::test::contains;

static_assert(std::is_base_of_v<std::runtime_error, cudrv::error>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::out_of_memory_error>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::driver_unavailable_error>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::not_supported_error>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::invalid_argument_error>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::host_callback_error>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::context_fault_error>);
static_assert(std::is_base_of_v<cudrv::driver_unavailable_error, cudrv::fork_error>);

TEST_CASE("error_name gives the symbolic name of every kind of code", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  struct named {
    CUresult code;
    const char* name;
  };
  // Spread over the whole range of values, so the table lookup is exercised at both ends.
  const named codes[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED"},
      {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
      {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
  };
  for (const named& n : codes) {
    INFO("code " << static_cast<int>(n.code));
    CHECK(cudrv::error_name(n.code) == n.name);
  }
  CHECK(cudrv::error_name(static_cast<CUresult>(12345)) == "CUDA_ERROR_12345");
  CHECK(cudrv::error_name(static_cast<CUresult>(-1)) == "CUDA_ERROR_-1");
}

TEST_CASE("error_description works without a driver", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const std::string oom = cudrv::error_description(CUDA_ERROR_OUT_OF_MEMORY);
  const std::string inval = cudrv::error_description(CUDA_ERROR_INVALID_VALUE);
  INFO(oom << " / " << inval);
  CHECK(contains(oom, "memory"));
  CHECK_FALSE(inval.empty());
  CHECK(inval != oom);
  CHECK(inval != "CUDA_ERROR_INVALID_VALUE");  // a description, not the name again
  const std::string unknown = cudrv::error_description(static_cast<CUresult>(12345));
  CHECK(contains(unknown, "12345"));
  CHECK(contains(unknown, "unknown"));
}

TEST_CASE("error composes what() from api, name, description and context", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::error e(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "device 0, 4 GiB requested");
  CHECK(e.source() == cudrv::error_source::driver);
  CHECK(e.code() == static_cast<int>(CUDA_ERROR_OUT_OF_MEMORY));
  CHECK(e.result() == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(e.name() == "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK(e.description() == cudrv::error_description(CUDA_ERROR_OUT_OF_MEMORY));
  CHECK(e.api() == "cuMemAlloc");
  CHECK(e.context() == "device 0, 4 GiB requested");
  const std::string what = e.what();
  INFO(what);
  CHECK(what.rfind("cuMemAlloc", 0) == 0);  // starts with the api
  CHECK(contains(what, "CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(contains(what, e.description()));
  CHECK(contains(what, "device 0, 4 GiB requested"));
  CHECK(what == "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (" + e.description() + ") [device 0, 4 GiB requested]");

  // Without context there is no empty bracket.
  const cudrv::error bare(CUDA_ERROR_INVALID_VALUE, "cuMemcpy");
  CHECK(bare.context().empty());
  CHECK(std::string(bare.what()) == "cuMemcpy: CUDA_ERROR_INVALID_VALUE (" + bare.description() + ")");

  // Every field explicit.
  const cudrv::error full(cudrv::error_source::cudrv, 7, "NAME", "DESCRIPTION", "API", "CONTEXT");
  CHECK(full.source() == cudrv::error_source::cudrv);
  CHECK(full.code() == 7);
  CHECK(std::string(full.what()) == "API: NAME (DESCRIPTION) [CONTEXT]");

  // An unknown code still gives a readable message.
  const cudrv::error odd(static_cast<CUresult>(12345), "cuSomething");
  CHECK(odd.name() == "CUDA_ERROR_12345");
  CHECK(contains(odd.what(), "CUDA_ERROR_12345"));

  // Copies keep every field.
  const cudrv::error copy = e;
  CHECK(std::string(copy.what()) == what);
  CHECK(copy.context() == e.context());
}

TEST_CASE("error subtypes are caught through the base and keep their fields", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  auto thrown = [](auto exception) {
    try {
      throw exception;
    } catch (const cudrv::error& e) {
      return std::string(e.name()) + "|" +
             (dynamic_cast<const decltype(exception)*>(&e) != nullptr ? "same" : "sliced");
    }
  };
  CHECK(thrown(cudrv::out_of_memory_error(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc")) == "CUDA_ERROR_OUT_OF_MEMORY|same");
  CHECK(thrown(cudrv::not_supported_error(CUDA_ERROR_NOT_SUPPORTED, "cuMemAdvise")) == "CUDA_ERROR_NOT_SUPPORTED|same");
  CHECK(thrown(cudrv::driver_unavailable_error(CUDA_ERROR_NO_DEVICE, "cuInit")) == "CUDA_ERROR_NO_DEVICE|same");
  CHECK(thrown(cudrv::context_fault_error(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize")) ==
        "CUDA_ERROR_ILLEGAL_ADDRESS|same");
  CHECK(thrown(cudrv::fork_error("cuMemAlloc", {})) == "CUDA_ERROR_NOT_INITIALIZED|same");
  // The figures of an out-of-memory error travel with it; unknown ones say so.
  const cudrv::out_of_memory_error oom(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "4 KiB requested",
                                       {.requested = 4096, .free = 1024, .total = 2048});
  CHECK(oom.requested_bytes() == 4096);
  CHECK(oom.free_bytes() == 1024);
  CHECK(oom.total_bytes() == 2048);
  CHECK(oom.pool_reserved_bytes() == cudrv::out_of_memory_error::unknown_bytes);
  CHECK(oom.pool_used_bytes() == cudrv::out_of_memory_error::unknown_bytes);
  CHECK(cudrv::out_of_memory_error(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc").requested_bytes() ==
        cudrv::out_of_memory_error::unknown_bytes);

  // Catchable as std::runtime_error / std::exception with the same message.
  try {
    throw cudrv::out_of_memory_error(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "1 TiB");
  } catch (const std::exception& e) {
    CHECK(contains(e.what(), "cuMemAlloc"));
    CHECK(contains(e.what(), "1 TiB"));
  }
}

#if defined(CUDRV_TEST_INTERNALS)
TEST_CASE("failed driver calls map to the matching error subtype", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  auto raise = [](CUresult code) { cudrv::detail::throw_driver_error(code, "cuTest", "ctx"); };
  CHECK(catch_as<cudrv::out_of_memory_error>([&] { raise(CUDA_ERROR_OUT_OF_MEMORY); }).has_value());
  CHECK(catch_as<cudrv::not_supported_error>([&] { raise(CUDA_ERROR_NOT_SUPPORTED); }).has_value());
  CHECK(catch_as<cudrv::not_supported_error>([&] { raise(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER); }).has_value());
  CHECK(catch_as<cudrv::not_supported_error>([&] { raise(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED); }).has_value());
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { raise(CUDA_ERROR_NO_DEVICE); }).has_value());
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { raise(CUDA_ERROR_STUB_LIBRARY); }).has_value());
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { raise(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH); }).has_value());
  // Sticky faults: the context is unusable, whatever the call was.
  for (CUresult code :
       {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ASSERT, CUDA_ERROR_MISALIGNED_ADDRESS}) {
    auto e = catch_as<cudrv::context_fault_error>([&] { raise(code); });
    REQUIRE(e.has_value());
    CHECK(e->is_sticky());
    CHECK(e->result() == code);
    CHECK(contains(e->what(), "reset_primary_context"));
  }
  // A forked child: the stubs' status (detail::forked_child_status of src/driver/driver_api.hpp) is a
  // fork_error, catchable as driver_unavailable_error.
  const auto forked_child_status = static_cast<CUresult>(0x7f0f0c01);
  auto forked = catch_as<cudrv::driver_unavailable_error>([&] { raise(forked_child_status); });
  REQUIRE(forked.has_value());
  CHECK(catch_as<cudrv::fork_error>([&] { raise(forked_child_status); }).has_value());
  CHECK(forked->api() == "cuTest");
  CHECK(contains(forked->what(), "forked"));
  CHECK(forked->source() == cudrv::error_source::cudrv);

  // Anything else is a plain cudrv::error (not one of the subtypes).
  for (CUresult code : {CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_READY}) {
    auto e = catch_as<cudrv::error>([&] { raise(code); });
    REQUIRE(e.has_value());
    CHECK(e->result() == code);
    CHECK(e->api() == "cuTest");
    CHECK(e->context() == "ctx");
    bool is_subtype = true;
    try {
      raise(code);
    } catch (const cudrv::invalid_argument_error&) {
    } catch (const cudrv::out_of_memory_error&) {
    } catch (const cudrv::not_supported_error&) {
    } catch (const cudrv::driver_unavailable_error&) {
    } catch (const cudrv::host_callback_error&) {
    } catch (const cudrv::context_fault_error&) {
    } catch (const cudrv::error&) {
      is_subtype = false;
    }
    CHECK_FALSE(is_subtype);
  }
}
#endif

TEST_CASE("invalid_argument_error carries INVALID_VALUE and the cudrv api", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::invalid_argument_error e("cudrv::copy", "the destination is smaller than the source");
  CHECK(e.source() == cudrv::error_source::cudrv);
  CHECK(e.code() == static_cast<int>(CUDA_ERROR_INVALID_VALUE));
  CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
  CHECK(e.name() == "CUDA_ERROR_INVALID_VALUE");
  CHECK(e.api() == "cudrv::copy");
  CHECK(e.description() == "the destination is smaller than the source");
  CHECK(e.context().empty());
  CHECK(std::string(e.what()) == "cudrv::copy: CUDA_ERROR_INVALID_VALUE (the destination is smaller than the source)");
  const cudrv::error& base = e;
  CHECK(dynamic_cast<const cudrv::invalid_argument_error*>(&base) != nullptr);
}

TEST_CASE("host_callback_error carries the original exception", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  SECTION("a std::exception") {
    const cudrv::host_callback_error e(std::make_exception_ptr(std::out_of_range("index 7 out of range")),
                                       "stream 0x1234");
    CHECK(e.source() == cudrv::error_source::cudrv);
    CHECK(e.api() == "cudrv::stream::enqueue");
    CHECK(e.context() == "stream 0x1234");
    CHECK(contains(e.what(), "index 7 out of range"));
    CHECK(contains(e.what(), "stream 0x1234"));
    REQUIRE(e.original() != nullptr);
    try {
      std::rethrow_exception(e.original());
    } catch (const std::out_of_range& original) {
      CHECK(std::string(original.what()) == "index 7 out of range");
    }
    // Copies share the original.
    const cudrv::host_callback_error copy = e;
    CHECK(copy.original() == e.original());
  }
  SECTION("something that is not a std::exception") {
    const cudrv::host_callback_error e(std::make_exception_ptr(42), "stream 0x1");
    CHECK(contains(e.what(), "not a std::exception"));
    REQUIRE(e.original() != nullptr);
    int value = 0;
    try {
      std::rethrow_exception(e.original());
    } catch (int v) {
      value = v;
    }
    CHECK(value == 42);
  }
  SECTION("no exception at all") {
    const cudrv::host_callback_error e(nullptr, "stream 0x1");
    CHECK(e.original() == nullptr);
    CHECK_FALSE(std::string(e.what()).empty());
  }
}

namespace {
int handler_a_calls = 0;
int handler_b_calls = 0;
void handler_a(const cudrv::error&) noexcept { ++handler_a_calls; }
void handler_b(const cudrv::error&) noexcept { ++handler_b_calls; }
}  // namespace

TEST_CASE("set_destruction_error_handler returns the previous handler", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::destruction_error_handler original = cudrv::get_destruction_error_handler();
  REQUIRE(original != nullptr);

  CHECK(cudrv::set_destruction_error_handler(&handler_a) == original);
  CHECK(cudrv::get_destruction_error_handler() == &handler_a);
  CHECK(cudrv::set_destruction_error_handler(&handler_b) == &handler_a);
  cudrv::get_destruction_error_handler()(cudrv::error(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy"));
  CHECK(handler_b_calls == 1);
  CHECK(handler_a_calls == 0);

  // nullptr restores the default handler and returns the one it replaced.
  CHECK(cudrv::set_destruction_error_handler(nullptr) == &handler_b);
  CHECK(cudrv::get_destruction_error_handler() == original);
  CHECK(cudrv::get_destruction_error_handler() != nullptr);
}

TEST_CASE("the default destruction handler writes one line to stderr", "[driverless][error]") {
  CUDRV_REQUIRE_DRIVERLESS();
  (void)cudrv::set_destruction_error_handler(nullptr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  ::dup2(::fileno(capture), STDERR_FILENO);
  cudrv::get_destruction_error_handler()(cudrv::error(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy"));
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);

  std::rewind(capture);
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), capture) != nullptr) {
    text += buffer;
  }
  std::fclose(capture);
  INFO(text);
  CHECK(contains(text, "cudrv"));
  CHECK(contains(text, "cuStreamDestroy"));
  CHECK(contains(text, "CUDA_ERROR_INVALID_HANDLE"));
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');
  CHECK(text.find('\n') == text.size() - 1);  // exactly one line
}
