// Run-time compiled kernels that include the CUDA toolkit's CCCL headers (CUB, cuda::std,
// cuda::barrier): finding the headers, compiling with NVRTC for sm_90, precompiled headers, and the
// compile cache keying these compilations (hits, staleness, refusals). NVRTC needs no GPU.
#include <catch2/catch.hpp>

#include <cudrv/compile_cache.hpp>
#include <cudrv/program.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/catch_support.hpp"
#include "support/cccl_kernels.hpp"
#include "support/scratch.hpp"
#include "support/test_support.hpp"

using cudrv::test::cwd_guard;
using cudrv::test::temp_dir;

extern char** environ;

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::is_cuda_elf;
using cudrv::test::require_invalid_argument;
namespace fs = std::filesystem;

namespace {

const cudrv::compile_options sm90_cccl{.arch = "sm_90", .toolkit_headers = true};

void write_all(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::trunc) << text; }

cudrv::program block_sum_program() { return cudrv::program("block_sum.cu", cudrv::test::cub_block_sum_source); }

const std::vector<std::string> block_sum_expr{"block_sum<int, 256>"};

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs the cache writer (tests/cpu/cache_writer.cpp) on a CUB kernel with the toolkit's headers, in a
// process of its own whose CUDA_PATH is @p cuda_path; returns its output.
std::string run_writer(const fs::path& dir, const std::string& cache_dir, const std::string& cuda_path) {
  const fs::path start = dir / "start";
  write_all(start, "go");
  const fs::path out = dir / "writer.out";
  std::vector<std::string> args{CUDRV_TEST_CACHE_WRITER,
                                cache_dir,
                                start.string(),
                                "block_sum.cu",
                                std::string(cudrv::test::cub_block_sum_source) +
                                    "\ntemplate __global__ void block_sum<int, 128>(const int*, int*, unsigned);\n",
                                "toolkit"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env_strings{"CUDA_PATH=" + cuda_path};
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("CUDA_PATH=")) {
      env_strings.emplace_back(*e);
    }
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, CUDRV_TEST_CACHE_WRITER, &actions, nullptr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  REQUIRE(spawned == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string output = read_all(out);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return output;
}

}  // namespace

TEST_CASE("find_toolkit_headers: CCCL's directory and the toolkit's include directory", "[program][cccl]") {
  const cudrv::toolkit_header_dirs& tk = cudrv::find_toolkit_headers();
  CHECK(&tk == &cudrv::find_toolkit_headers());  // found once
  CHECK(fs::is_regular_file(fs::path(tk.cccl) / "cub" / "block" / "block_reduce.cuh"));
  CHECK(fs::is_regular_file(fs::path(tk.cccl) / "cuda" / "std" / "__cccl" / "version.h"));
  CHECK(fs::is_regular_file(fs::path(tk.include) / "cuda_runtime.h"));
  CHECK(fs::path(tk.cccl) == fs::canonical(tk.cccl));
  CHECK(tk.cccl_version >= 2000000);
  CHECK((tk.found_by == "CUDA_PATH" || tk.found_by == "CUDA_HOME" || tk.found_by == "NVRTC" || tk.found_by == "build"));
  const auto paths = tk.include_paths();
  REQUIRE(!paths.empty());
  CHECK(paths.front() == tk.cccl);
  CHECK(paths.back() == tk.include);
}

TEST_CASE("compile_options: toolkit_headers and the PCH options in the NVRTC option list", "[program][cccl]") {
  const cudrv::toolkit_header_dirs& tk = cudrv::find_toolkit_headers();
  cudrv::compile_options o{.arch = "sm_90", .include_paths = {"/mine"}, .toolkit_headers = true};
  o.pch = {
      .automatic = true, .directory = "/tmp/pch", .verbose = false, .messages = true, .instantiate_templates = false};
  o.extra_options = {"-w"};
  const auto list = o.to_nvrtc_options(cudrv::code_kind::cubin);
  std::vector<std::string> expected{"-arch=sm_90", "-I/mine"};
  for (const auto& p : tk.include_paths()) {
    expected.push_back("-I" + p);  // after the user's, before the extra options
  }
  for (const char* x : {"-pch", "--pch-dir=/tmp/pch", "--pch-verbose=false", "--pch-messages=true",
                        "--instantiate-templates-in-pch=false", "-w"}) {
    expected.emplace_back(x);
  }
  CHECK(list == expected);

  cudrv::compile_options create{.arch = "sm_90", .pch = {.create = "cub.pch"}};
  CHECK(create.to_nvrtc_options(cudrv::code_kind::ptx).back() == "--create-pch=cub.pch");
  cudrv::compile_options use{.arch = "sm_90", .pch = {.use = "cub.pch"}};
  CHECK(use.to_nvrtc_options(cudrv::code_kind::ptx).back() == "--use-pch=cub.pch");

  SECTION("two modes at once") {
    cudrv::compile_options bad{.arch = "sm_90", .pch = {.automatic = true, .use = "x.pch"}};
    auto e = require_invalid_argument("two PCH modes", [&] { (void)bad.to_nvrtc_options(cudrv::code_kind::ptx); });
    CHECK(contains(e.what(), "more than one mode"));
  }
  SECTION("a directory without a mode") {
    cudrv::compile_options bad{.arch = "sm_90", .pch = {.directory = "/tmp"}};
    auto e = require_invalid_argument("PCH dir alone", [&] { (void)bad.to_nvrtc_options(cudrv::code_kind::ptx); });
    CHECK(contains(e.what(), "no mode"));
  }
  SECTION("verbose without automatic mode") {
    cudrv::compile_options bad{.arch = "sm_90", .pch = {.create = "x.pch", .verbose = true}};
    auto e = require_invalid_argument("verbose", [&] { (void)bad.to_nvrtc_options(cudrv::code_kind::ptx); });
    CHECK(contains(e.what(), "pch.verbose"));
  }
}

TEST_CASE("program: a CUB BlockReduce kernel compiles to a cubin for sm_90", "[program][cccl]") {
  const auto r = block_sum_program().compile(cudrv::code_kind::cubin, sm90_cccl, block_sum_expr);
  CHECK(is_cuda_elf(r.code.bytes()));
  CHECK(r.pch == cudrv::pch_status::not_requested);
  const std::string& lowered = r.lowered_name("block_sum<int, 256>");
  CHECK(lowered.starts_with("_Z9block_sumIiLi256EE"));  // block_sum<int, 256>, mangled
  CHECK(contains(r.code.bytes(), lowered));
}

TEST_CASE("program: cuda::std compiles, its values reach the code", "[program][cccl]") {
  const auto r =
      cudrv::program("limits.cu", cudrv::test::cuda_std_source)
          .compile(cudrv::code_kind::ptx, {.arch = "sm_90", .cpp_standard = "c++20", .toolkit_headers = true});
  const std::string& ptx = r.code.bytes();
  CHECK(contains(ptx, ".entry limits"));
  // The three stored constants, computed on the host: numeric_limits<short>::max(), CCCL_VERSION as
  // found on disk, popcount.
  CHECK(contains(ptx, ", " + std::to_string(std::numeric_limits<short>::max()) + ";"));
  CHECK(contains(ptx, ", " + std::to_string(cudrv::find_toolkit_headers().cccl_version) + ";"));
  CHECK(contains(ptx, ", " + std::to_string(std::popcount(0xF0F1u)) + ";"));
}

TEST_CASE("program: cuda::barrier compiles to mbarrier instructions on sm_90", "[program][cccl]") {
  const cudrv::program prog("rotate.cu", cudrv::test::cuda_barrier_source);
  const auto ptx = prog.compile(cudrv::code_kind::ptx, sm90_cccl);
  CHECK(contains(ptx.code.bytes(), "mbarrier"));
  const auto cubin = prog.compile(cudrv::code_kind::cubin, sm90_cccl);
  CHECK(is_cuda_elf(cubin.code.bytes()));
}

TEST_CASE("program: without the toolkit's headers, or with a wrong path, CUB is a compile error with the log",
          "[program][cccl]") {
  for (const auto& options : {cudrv::compile_options{.arch = "sm_90"},
                              cudrv::compile_options{.arch = "sm_90", .include_paths = {"/nonexistent/cccl"}}}) {
    auto e = catch_as<cudrv::compile_error>(
        [&] { (void)block_sum_program().compile(cudrv::code_kind::ptx, options, block_sum_expr); });
    REQUIRE(e);
    CHECK(e->name() == "NVRTC_ERROR_COMPILATION");
    CHECK(contains(e->log(), "cub/block/block_reduce.cuh"));
    CHECK(contains(e->what(), "block_sum.cu"));
  }
}

TEST_CASE("program: automatic precompiled headers are created once, then used, and change no code",
          "[program][cccl][pch]") {
  // NVRTC names internal-linkage symbols with random numbers unless given a seed: without it no two
  // compilations are byte-identical. PTX: a cubin records the options (-pch) in a note.
  cudrv::compile_options plain = sm90_cccl;
  plain.extra_options = {"-frandom-seed=1"};
  cudrv::compile_options pch = plain;
  pch.pch.automatic = true;
  const auto reference = block_sum_program().compile(cudrv::code_kind::ptx, plain, block_sum_expr);
  const auto first = block_sum_program().compile(cudrv::code_kind::ptx, pch, block_sum_expr);
  // Another program with the same leading include: the PCH of the first fits.
  const cudrv::program other("block_sum.cu", std::string(cudrv::test::cub_block_sum_source) + "\n// another\n");
  const auto second = other.compile(cudrv::code_kind::ptx, pch, block_sum_expr);
  INFO(first.log << "\n" << second.log);
  if (first.pch == cudrv::pch_status::created) {
    CHECK(first.pch_heap_required > 0);
    CHECK(first.pch_heap_required <= cudrv::nvrtc_pch_heap_size());
    CHECK(contains(first.log, "creating precompiled header"));
    CHECK(second.pch == cudrv::pch_status::not_attempted);
    CHECK(contains(second.log, "using precompiled header"));
  } else {
    // Another test of this process created one first: this compilation used it.
    CHECK(first.pch == cudrv::pch_status::not_attempted);
  }
  CHECK(first.code.bytes() == reference.code.bytes());
  CHECK(second.code.bytes() == reference.code.bytes());
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool sanitized_build = true;
#else
constexpr bool sanitized_build = false;
#endif
#else
constexpr bool sanitized_build = false;
#endif

TEST_CASE("compile_cache: a CUB kernel is cached, a hit takes at most 1 ms", "[compile_cache][cccl]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  const auto prog = block_sum_program();
  const auto miss = cache.compile(prog, cudrv::code_kind::cubin, sm90_cccl, block_sum_expr);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().uncacheable == 0);
  const auto hit = cache.compile(prog, cudrv::code_kind::cubin, sm90_cccl, block_sum_expr);
  CHECK(cache.stats().hits == 1);
  CHECK(hit.code.bytes() == miss.code.bytes());
  CHECK(hit.lowered_names == miss.lowered_names);
  // A second handle on the directory (another run of the program) hits too.
  cudrv::compile_cache again((dir.path / "cache").string());
  using clock = std::chrono::steady_clock;
  std::vector<double> us;
  for (int i = 0; i < 101; ++i) {
    const auto t0 = clock::now();
    (void)again.compile(prog, cudrv::code_kind::cubin, sm90_cccl, block_sum_expr);
    us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
  }
  CHECK(again.stats().hits == 101);
  std::sort(us.begin(), us.end());
  WARN("compile_cache with CUB: hit median " << us[50] << " us (min " << us.front() << ", max " << us.back()
                                             << ", 101 hits)");
  // The bound is the plain build's: an AddressSanitizer tree (CI runs its CPU tier beside the README
  // command's, on the same two cores) hashes and reads the entry instrumented, about 1.3 ms there.
  CHECK(us[50] <= (sanitized_build ? 10000.0 : 1000.0));
}

TEST_CASE("compile_cache: a changed user header next to CUB is never served stale", "[compile_cache][cccl]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  const fs::path user = dir.path / "user";
  fs::create_directories(user);
  const cudrv::program prog("scaled_sum.cu", R"(
#include <cub/block/block_reduce.cuh>
#include "scale.cuh"
extern "C" __global__ void scaled_sum(const int* in, int* out) {
  using reduce = cub::BlockReduce<int, 128>;
  __shared__ reduce::TempStorage storage;
  const int sum = reduce(storage).Sum(in[threadIdx.x]);
  if (threadIdx.x == 0) *out = sum * SCALE;
}
)");
  cudrv::compile_options options{.arch = "sm_90", .include_paths = {user.string()}, .toolkit_headers = true};
  auto scale_in = [](const cudrv::compile_result& r, int v) {
    return contains(r.code.bytes(), ", " + std::to_string(v) + ";");
  };
  write_all(user / "scale.cuh", "#define SCALE 1234567\n");
  CHECK(scale_in(cache.compile(prog, cudrv::code_kind::ptx, options), 1234567));
  CHECK(scale_in(cache.compile(prog, cudrv::code_kind::ptx, options), 1234567));
  CHECK(cache.stats().hits == 1);
  write_all(user / "scale.cuh", "#define SCALE 7654321\n");  // same source, same options, new header
  const auto changed = cache.compile(prog, cudrv::code_kind::ptx, options);
  CHECK(scale_in(changed, 7654321));
  CHECK_FALSE(scale_in(changed, 1234567));
  CHECK(cache.stats().misses == 2);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().uncacheable == 0);
}

TEST_CASE("compile_cache: a directory that could shadow the toolkit's headers makes the compilation uncacheable",
          "[compile_cache][cccl]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  cwd_guard cwd(dir.path);
  const auto prog = block_sum_program();
  (void)cache.compile(prog, cudrv::code_kind::ptx, sm90_cccl, block_sum_expr);
  CHECK(cache.stats().uncacheable == 0);
  // A "cub" folder in the current directory: CCCL's own `#include <cub/...>` would look there first.
  fs::create_directories(dir.path / "cub");
  const auto r = cache.compile(prog, cudrv::code_kind::ptx, sm90_cccl, block_sum_expr);
  CHECK(contains(r.code.bytes(), ".entry"));
  CHECK(cache.stats().uncacheable == 1);
  CHECK(cache.stats().hits == 0);
  fs::remove(dir.path / "cub");
  (void)cache.compile(prog, cudrv::code_kind::ptx, sm90_cccl, block_sum_expr);
  CHECK(cache.stats().hits == 1);
}

TEST_CASE("compile_cache: automatic PCH is cached, explicit PCH files are not", "[compile_cache][cccl][pch]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  cudrv::compile_options automatic = sm90_cccl;
  automatic.pch.automatic = true;
  const auto prog = block_sum_program();
  const auto miss = cache.compile(prog, cudrv::code_kind::cubin, automatic, block_sum_expr);
  const auto hit = cache.compile(prog, cudrv::code_kind::cubin, automatic, block_sum_expr);
  CHECK(cache.stats().hits == 1);
  CHECK(hit.code.bytes() == miss.code.bytes());
  CHECK(hit.pch == cudrv::pch_status::not_requested);  // nothing was compiled
  cudrv::compile_options create = sm90_cccl;
  create.pch.create = (dir.path / "explicit.pch").string();
  (void)cache.compile(prog, cudrv::code_kind::cubin, create, block_sum_expr);
  CHECK(cache.stats().uncacheable == 1);
}

TEST_CASE("compile_cache: CUDA_PATH chooses the toolkit, and a toolkit update is a miss, in new processes",
          "[compile_cache][cccl]") {
  temp_dir dir;
  // A toolkit of our own: a copy of the real CCCL under <root>/include/cccl.
  const fs::path root = dir.path / "toolkit";
  fs::create_directories(root / "include");
  fs::copy(cudrv::find_toolkit_headers().cccl, root / "include" / "cccl", fs::copy_options::recursive);
  const std::string cache_dir = (dir.path / "cache").string();
  const std::string found = "toolkit=CUDA_PATH:" + fs::canonical(root / "include" / "cccl").string() + " ";

  const std::string first = run_writer(dir.path, cache_dir, root.string());
  CHECK(first.starts_with(found));
  CHECK(contains(first, "hits=0 misses=1"));
  const std::string second = run_writer(dir.path, cache_dir, root.string());  // another run: a hit
  CHECK(contains(second, "hits=1 misses=0"));
  // The toolkit is updated (CCCL's version file rewritten): the entry is not served.
  const fs::path version = root / "include" / "cccl" / "cuda" / "std" / "__cccl" / "version.h";
  const std::string text = read_all(version);
  fs::remove(version);
  write_all(version, text);
  fs::last_write_time(version, fs::last_write_time(version) + std::chrono::seconds(5));
  const std::string third = run_writer(dir.path, cache_dir, root.string());
  CHECK(contains(third, "hits=0 misses=1"));
}

TEST_CASE("program: a PCH heap too small is reported with the size needed, resized, the PCH is created",
          "[program][cccl][pch]") {
  const std::size_t original = cudrv::nvrtc_pch_heap_size();
  CHECK(original > 0);
  cudrv::set_nvrtc_pch_heap_size(std::size_t{1} << 20);
  CHECK(cudrv::nvrtc_pch_heap_size() == std::size_t{1} << 20);
  cudrv::compile_options pch = sm90_cccl;
  pch.pch.automatic = true;
  const auto small = block_sum_program().compile(cudrv::code_kind::cubin, pch, block_sum_expr);
  INFO(small.log);
  CHECK(is_cuda_elf(small.code.bytes()));  // the code is still produced
  REQUIRE(small.pch == cudrv::pch_status::heap_exhausted);
  CHECK(small.pch_heap_required > (std::size_t{1} << 20));
  cudrv::set_nvrtc_pch_heap_size(small.pch_heap_required);
  const auto resized = block_sum_program().compile(cudrv::code_kind::cubin, pch, block_sum_expr);
  CHECK(resized.pch == cudrv::pch_status::created);
  cudrv::set_nvrtc_pch_heap_size(original);
  CHECK(cudrv::nvrtc_pch_heap_size() == original);
}
