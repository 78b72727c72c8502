// <cudrv/nccl.hpp> with the real NCCL and the stand-in driver: what happens when a driver call inside a
// group's end fails. ncclGroupStart and ncclGroupEnd need no GPU (they only count the nesting), so the
// group's bookkeeping is tested here; NCCL is asked directly afterwards whether a group is still open.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/nccl.hpp>

#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

TEST_CASE("fake driver: a group whose end fails before ncclGroupEnd stays open, and its destructor ends it",
          "[fake-driver][nccl]") {
  if (!cudrv::nccl::available()) {
    WARN("NCCL cannot be loaded here (" << cudrv::nccl::unavailable_reason() << "): nothing checked");
    return;
  }
  cudrv::test::fake_injection inject;
  void* lib = dlopen(cudrv::nccl::library_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto* group_end = reinterpret_cast<int (*)()>(dlsym(lib, "ncclGroupEnd"));
  dlclose(lib);  // cudrv keeps it loaded
  REQUIRE(group_end != nullptr);
  constexpr int nccl_invalid_usage = 5;        // ncclGroupEnd outside a group
  REQUIRE(group_end() == nccl_invalid_usage);  // no group open to begin with
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::nccl::group g;
    inject.fail_call(1, CUDA_ERROR_UNKNOWN);  // end()'s first driver call: reading the current context
    CHECK_THROWS_AS(g.end(), cudrv::error);
    CHECK(inject.failed_api() == "cuCtxGetCurrent");
    CHECK(g.is_open());                      // ncclGroupEnd never ran: the group is still open
  }                                          // the destructor ends it
  CHECK(group_end() == nccl_invalid_usage);  // before the fix a group stayed open, and this call ended it
  {
    cudrv::nccl::group g;
    inject.fail_call(1, CUDA_ERROR_UNKNOWN);  // the destructor's read of the current context fails
  }
  CHECK(inject.failed_api() == "cuCtxGetCurrent");
  CHECK(group_end() == nccl_invalid_usage);  // ended all the same
  CHECK(errors.count() == 0);
}
