// Every example's device code compiles with NVRTC for the GPU it is tuned for (sm_90, sm_90a where
// it needs the arch-specific instructions), lowers each of its name expressions, and keeps everything
// in registers: ptxas reports no spills and no stack frame for any of its kernels. No GPU needed.
#include <catch2/catch.hpp>

#include <cudrv/program.hpp>

#include <regex>
#include <string>
#include <vector>

#include "kernels/heat.hpp"
#include "kernels/heat_halo.hpp"
#include "kernels/histogram.hpp"
#include "kernels/hopper_gemm.hpp"
#include "kernels/integer_sum.hpp"
#include "kernels/monte_carlo_pi.hpp"
#include "kernels/overlap.hpp"
#include "kernels/pdl.hpp"
#include "kernels/reduce.hpp"
#include "kernels/saxpy.hpp"
#include "kernels/sgemm.hpp"
#include "kernels/texture_resize.hpp"
#include "kernels/transpose.hpp"
#include "kernels/vector_add.hpp"

namespace {

struct example_source {
  const char* name;
  const char* source;
  const std::vector<std::string>* name_expressions;
  bool arch_specific;
};

#define CUDRV_EXAMPLE_SOURCE(ns)                                                                                       \
  example_source {                                                                                                     \
#ns, example::ns##_kernels::source, &example::ns##_kernels::name_expressions, example::ns##_kernels::arch_specific \
  }

// The same source's E4M3 instantiations (<ns>_kernels::fp8_name_expressions), as example_<ns>_fp8.
#define CUDRV_EXAMPLE_FP8(ns)                                                                \
  example_source {                                                                           \
#ns "_fp8", example::ns##_kernels::source, &example::ns##_kernels::fp8_name_expressions, \
        example::ns##_kernels::arch_specific                                                 \
  }

const std::vector<example_source>& all_examples() {
  static const std::vector<example_source> all{
      CUDRV_EXAMPLE_SOURCE(vector_add),     CUDRV_EXAMPLE_SOURCE(saxpy),
      CUDRV_EXAMPLE_SOURCE(reduce),         CUDRV_EXAMPLE_SOURCE(transpose),
      CUDRV_EXAMPLE_SOURCE(sgemm),          CUDRV_EXAMPLE_SOURCE(histogram),
      CUDRV_EXAMPLE_SOURCE(heat),           CUDRV_EXAMPLE_SOURCE(monte_carlo_pi),
      CUDRV_EXAMPLE_SOURCE(overlap),        CUDRV_EXAMPLE_SOURCE(pdl),
      CUDRV_EXAMPLE_SOURCE(integer_sum),    CUDRV_EXAMPLE_SOURCE(heat_halo),
      CUDRV_EXAMPLE_SOURCE(texture_resize), CUDRV_EXAMPLE_SOURCE(hopper_gemm),
      CUDRV_EXAMPLE_FP8(hopper_gemm),
  };
  return all;
}

}  // namespace

TEST_CASE("every example kernel compiles with NVRTC for sm_90 without spills or stack", "[examples]") {
  for (const example_source& e : all_examples()) {
    DYNAMIC_SECTION(e.name) {
      cudrv::compile_options options;
      options.arch = e.arch_specific ? "sm_90a" : "sm_90";
      if (std::string(e.name) == "overlap") {  // as examples/overlap.cpp compiles it, to match the host bit for bit
        options.fmad = false;
        options.ftz = false;
      }
      options.cpp_standard = "c++17";  // as example::compile does
      options.extra_options = {"--ptxas-options=-v"};
      const cudrv::program prog(std::string(e.name) + ".cu", e.source);
      const cudrv::compile_result r = prog.compile(cudrv::code_kind::cubin, options, *e.name_expressions);
      CHECK(r.code.kind() == cudrv::code_kind::cubin);
      CHECK(r.code.bytes().size() > 0);
      for (const std::string& expression : *e.name_expressions) {
        INFO(expression);
        CHECK_FALSE(r.lowered_name(expression).empty());
      }
      // ptxas -v: one "N bytes stack frame, N bytes spill stores, N bytes spill loads" line per kernel.
      INFO(r.log);
      const std::regex properties(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
      int kernels = 0;
      for (auto it = std::sregex_iterator(r.log.begin(), r.log.end(), properties); it != std::sregex_iterator(); ++it) {
        ++kernels;
        CHECK((*it)[1] == "0");
        CHECK((*it)[2] == "0");
        CHECK((*it)[3] == "0");
      }
      CHECK(kernels > 0);
      // The Hopper GEMMs (BF16 and FP8) are __launch_bounds__(384, 1): ptxas gives each the whole
      // per-thread share of the register file, 168, which setmaxnreg then moves between the warpgroups.
      if (std::string(e.name).rfind("hopper_gemm", 0) == 0) {
        const std::regex used(R"(Used (\d+) registers)");
        for (auto it = std::sregex_iterator(r.log.begin(), r.log.end(), used); it != std::sregex_iterator(); ++it) {
          CHECK((*it)[1] == "168");
        }
      }
      // ptxas's C7508-style notes: a setmaxnreg it ignored, or wgmma it had to serialise (accumulators
      // moved between the asynchronous MMAs) would silently cost the Hopper GEMM its speed.
      CHECK(r.log.find("setmaxnreg") == std::string::npos);
      CHECK(r.log.find("serialized") == std::string::npos);
    }
  }
}
