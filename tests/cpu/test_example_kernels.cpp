// Every example's device code compiles with NVRTC for the GPU it is tuned for (sm_90, sm_90a where
// it needs the arch-specific instructions), lowers each of its name expressions, and keeps everything
// in registers: ptxas reports no spills and no stack frame for any of its kernels. No GPU needed.
#include <catch2/catch.hpp>

#include <cudrv/program.hpp>

#include <algorithm>
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

// example_sgemm's kernels size their register budget through __launch_bounds__ (min_blocks in
// examples/kernels/sgemm.hpp: 32768 accumulators per SM); each must fit the blocks per SM it asks for,
// or the occupancy its tiling was chosen for is silently lost.
TEST_CASE("every sgemm instantiation fits its blocks per SM in the register file", "[examples][sgemm]") {
  cudrv::compile_options options;
  options.arch = "sm_90";
  options.cpp_standard = "c++17";
  options.extra_options = {"--ptxas-options=-v"};
  const cudrv::program prog("sgemm.cu", example::sgemm_kernels::source);
  const cudrv::compile_result r =
      prog.compile(cudrv::code_kind::cubin, options, example::sgemm_kernels::name_expressions);
  INFO(r.log);
  // "Compiling entry function '_Z8sgemm_dbILi128ELi128ELi8ELi8ELi8ELi4ELb0EE...'" ... "Used 128 registers"
  const std::regex entry(
      R"(Compiling entry function '_Z\d+sgemm\w*?I((?:Li\d+E){6})(?:Lb[01]E)?E\w*'[\s\S]*?Used (\d+) registers)");
  const std::regex parameter(R"(Li(\d+)E)");
  int kernels = 0;
  for (auto it = std::sregex_iterator(r.log.begin(), r.log.end(), entry); it != std::sregex_iterator(); ++it) {
    ++kernels;
    const std::string parameters = (*it)[1];
    std::vector<int> p;  // BM, BN, BK, TM, TN, STAGES
    for (auto q = std::sregex_iterator(parameters.begin(), parameters.end(), parameter); q != std::sregex_iterator();
         ++q) {
      p.push_back(std::stoi((*q)[1]));
    }
    REQUIRE(p.size() == 6);
    const int threads = (p[0] / p[3]) * (p[1] / p[4]);
    const int blocks = std::max(1, 32768 / (p[3] * p[4]) / threads);
    const int registers = std::stoi((*it)[2]);
    INFO(parameters << ": " << threads << " threads, " << blocks << " blocks per SM, " << registers << " registers");
    CHECK(registers * threads * blocks <= 65536);
  }
  CHECK(kernels == static_cast<int>(example::sgemm_kernels::name_expressions.size()));
}

// The Hopper GEMM's dynamic shared memory, as examples/hopper_gemm.cpp sizes it (the ring of STAGES x
// (A 128 x 64 + B 256 x 64 BF16), 2 x STORE_BUFFERS staging buffers of 8 KiB, 1 KiB of alignment slack,
// two mbarriers per stage), fits the 227 KiB an sm_90 block may have, for every instantiation.
TEST_CASE("every hopper_gemm instantiation fits the shared memory of one sm_90 block", "[examples]") {
  const std::regex expression(R"(hopper_gemm<128, 256, 64, (\d+), ([12]), (\d+), (\d+), (true|false)(?:, (\d+))?>)");
  for (const std::string& e : example::hopper_gemm_kernels::name_expressions) {
    INFO(e);
    std::smatch m;
    REQUIRE(std::regex_match(e, m, expression));
    const long stages = std::stol(m[1]);
    const long buffers = m[6].matched ? std::stol(m[6]) : 0;
    CHECK((buffers == 0 || buffers == 1 || buffers == 2 || buffers == 4));
    CHECK(128 * std::stol(m[3]) + 256 * std::stol(m[4]) <= 65536);
    const long bytes = stages * (128 + 256) * 64 * 2 + 2 * buffers * 8192 + 1024 + stages * 16;
    CHECK(bytes <= 227 * 1024);
  }
}
