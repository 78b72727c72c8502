// GPU tier: profiler_range (issue 34 part 9). Without a profiler attached, cuProfilerStart and cuProfilerStop
// succeed and do nothing; the cases check that the ranges open and end in real contexts, nested and on two
// contexts, and that work inside a range runs as outside it.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <vector>

#include "support/test_support.hpp"

TEST_CASE("profiler_range: start and stop succeed in a context, nested and in two contexts", "[gpu][profiler]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  const cudrv::context_ref primary = dev.primary_context();
  cudrv::context created(dev);
  {
    cudrv::profiler_range outer(primary);
    REQUIRE(static_cast<bool>(outer));
    {
      cudrv::profiler_range inner(primary);
      cudrv::profiler_range other(created);
      CHECK(cudrv::profiler_range::open_ranges(primary) == 2);
      CHECK(cudrv::profiler_range::open_ranges(created) == 1);
      // Work inside the range: a fill read back.
      cudrv::stream s(dev);
      cudrv::device_buffer<int> b(dev, 4096);
      cudrv::fill(b, 7, s);
      std::vector<int> host(4096, -1);
      cudrv::copy(host, b, s);
      s.synchronize();
      CHECK(host == std::vector<int>(4096, 7));
    }
    CHECK(cudrv::profiler_range::open_ranges(primary) == 1);
    CHECK(cudrv::profiler_range::open_ranges(created) == 0);
    outer.end();  // cuProfilerStop, checked
    CHECK_FALSE(static_cast<bool>(outer));
  }
  CHECK(cudrv::profiler_range::open_ranges(primary) == 0);
}
