// The persistent compile cache: hits and misses, the key, corrupt entries, the environment, store
// failures, concurrent writers (threads and processes) and the speed of a hit.
#include <catch2/catch.hpp>

#include <cudrv/compile_cache.hpp>
#include <cudrv/program.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/scratch.hpp"
#include "support/test_support.hpp"

using cudrv::test::cwd_guard;
using cudrv::test::env_guard;
using cudrv::test::temp_dir;

extern char** environ;

using cudrv::test::catch_as;
using cudrv::test::contains;
namespace fs = std::filesystem;

namespace {

constexpr const char* saxpy_source = R"(
#include "config.cuh"
template <class T>
__global__ void saxpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + OFFSET;
}
)";

cudrv::program saxpy_program(std::string header = "#define OFFSET 0\n") {
  return cudrv::program("saxpy.cu", saxpy_source, {{"config.cuh", std::move(header)}});
}

const cudrv::compile_options sm90{.arch = "sm_90"};
const std::vector<std::string> float_expr{"saxpy<float>"};

std::vector<fs::path> files_in(const fs::path& dir, std::string_view suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().ends_with(suffix)) {
      out.push_back(e.path());
    }
  }
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

void check_same(const cudrv::compile_result& a, const cudrv::compile_result& b) {
  CHECK(a.code.kind() == b.code.kind());
  CHECK(a.code.bytes() == b.code.bytes());
  CHECK(a.code.name() == b.code.name());
  CHECK(a.log == b.log);
  CHECK(a.lowered_names == b.lowered_names);
}

}  // namespace

TEST_CASE("compile_cache: a miss compiles and stores, then a hit returns the same result", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str() + "/");  // a trailing slash is dropped
  CHECK(cache.enabled());
  CHECK(cache.directory() == dir.str());

  const auto prog = saxpy_program();
  const auto first = cache.compile(prog, cudrv::code_kind::cubin, sm90, {"saxpy<float>", "saxpy<double>"});
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 0);
  const auto entries = files_in(dir.path, ".entry");
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].filename().string().size() == 32 + 6);  // 128-bit hash in hex + ".entry"
  CHECK(files_in(dir.path, ".tmp").empty());
  CHECK((fs::status(entries[0]).permissions() & fs::perms::others_read) == fs::perms::none);

  const auto second = cache.compile(prog, cudrv::code_kind::cubin, sm90, {"saxpy<float>", "saxpy<double>"});
  const auto s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.corrupt_entries == 0);
  CHECK(s.store_failures == 0);
  check_same(first, second);
  CHECK(second.lowered_name("saxpy<double>") == first.lowered_name("saxpy<double>"));

  // The same as compiling directly, and another cache object on the directory hits too.
  check_same(prog.compile(cudrv::code_kind::cubin, sm90, {"saxpy<float>", "saxpy<double>"}), second);
  cudrv::compile_cache other(dir.str());
  check_same(other.compile(prog, cudrv::code_kind::cubin, sm90, {"saxpy<float>", "saxpy<double>"}), first);
  CHECK(other.stats().hits == 1);
  // Copies share the statistics; a moved-from cache stays usable (a move copies the handle).
  cudrv::compile_cache copy = cache;
  (void)copy.compile(prog, cudrv::code_kind::cubin, sm90, {"saxpy<float>", "saxpy<double>"});
  CHECK(cache.stats().hits == 2);
  cudrv::compile_cache moved = std::move(copy);
  CHECK(moved.stats().hits == 2);
  CHECK(copy.directory() == dir.str());  // NOLINT(bugprone-use-after-move)
  copy = cudrv::compile_cache::disabled();
  CHECK_FALSE(copy.enabled());
  CHECK(moved.enabled());
  moved = other;
  CHECK(moved.stats().hits == 1);
}

TEST_CASE("compile_cache: the log is cached with the code", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const cudrv::program prog("warn.cu", "extern \"C\" __global__ void k() { int unused_variable; }\n");
  const auto miss = cache.compile(prog, cudrv::code_kind::ptx, sm90);
  const auto hit = cache.compile(prog, cudrv::code_kind::ptx, sm90);
  CHECK(cache.stats().hits == 1);
  CHECK(contains(hit.log, "unused_variable"));
  check_same(miss, hit);
}

TEST_CASE("compile_cache: any change to the key is a miss", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const auto base = saxpy_program();
  (void)cache.compile(base, cudrv::code_kind::ptx, sm90, float_expr);
  REQUIRE(cache.stats().misses == 1);

  std::uint64_t expected_misses = 1;
  auto expect_miss = [&](const char* what, const cudrv::program& prog, cudrv::code_kind kind,
                         const cudrv::compile_options& options, const std::vector<std::string>& exprs) {
    INFO(what);
    (void)cache.compile(prog, kind, options, exprs);
    CHECK(cache.stats().misses == ++expected_misses);
    CHECK(cache.stats().hits == 0);
    CHECK(files_in(dir.path, ".entry").size() == expected_misses);
  };
  expect_miss("source", cudrv::program("saxpy.cu", std::string(saxpy_source) + "\n// changed\n", base.headers()),
              cudrv::code_kind::ptx, sm90, float_expr);
  expect_miss("program name", cudrv::program("other.cu", base.source(), base.headers()), cudrv::code_kind::ptx, sm90,
              float_expr);
  expect_miss("header content", saxpy_program("#define OFFSET 1\n"), cudrv::code_kind::ptx, sm90, float_expr);
  expect_miss("header name", cudrv::program("saxpy.cu", base.source(), {base.headers()[0], {"unused.cuh", ""}}),
              cudrv::code_kind::ptx, sm90, float_expr);
  expect_miss("a define", base, cudrv::code_kind::ptx, {.arch = "sm_90", .defines = {"X=1"}}, float_expr);
  expect_miss("a flag", base, cudrv::code_kind::ptx, {.arch = "sm_90", .fmad = false}, float_expr);
  expect_miss("an extra option", base, cudrv::code_kind::ptx, {.arch = "sm_90", .extra_options = {"-default-device"}},
              float_expr);
  expect_miss("arch", base, cudrv::code_kind::ptx, {.arch = "sm_80"}, float_expr);
  expect_miss("target", base, cudrv::code_kind::cubin, sm90, float_expr);
  expect_miss("target ltoir", base, cudrv::code_kind::ltoir, sm90, float_expr);
  expect_miss("name expressions", base, cudrv::code_kind::ptx, sm90, {"saxpy<double>"});
  expect_miss("no name expression", base, cudrv::code_kind::ptx, sm90, {});

  // Spellings that give the same option list are the same key.
  (void)cache.compile(base, cudrv::code_kind::ptx, {.arch = "compute_90"}, float_expr);
  (void)cache.compile(base, cudrv::code_kind::ptx, {.arch = "90"}, float_expr);
  CHECK(cache.stats().hits == 2);
  CHECK(cache.stats().misses == expected_misses);
}

TEST_CASE("compile_cache: corrupt entries are detected, counted, removed and rewritten", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const auto prog = saxpy_program();
  const auto good = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  const auto entries = files_in(dir.path, ".entry");
  REQUIRE(entries.size() == 1);
  const fs::path entry = entries[0];
  const std::string original = read_all(entry);
  REQUIRE(original.size() > 100);

  auto corrupt_and_check = [&](const char* what, const std::string& bytes, std::uint64_t n) {
    INFO(what);
    write_all(entry, bytes);
    const auto r = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
    check_same(r, good);
    CHECK(cache.stats().corrupt_entries == n);
    CHECK(read_all(entry) == original);  // recompiled and stored again
    const auto hits = cache.stats().hits;
    (void)cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
    CHECK(cache.stats().hits == hits + 1);
  };
  corrupt_and_check("truncated to half", original.substr(0, original.size() / 2), 1);
  corrupt_and_check("last byte missing", original.substr(0, original.size() - 1), 2);
  std::string flipped = original;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x10);
  corrupt_and_check("one bit flipped in the payload", flipped, 3);
  std::string bad_sum = original;
  bad_sum.back() = static_cast<char>(bad_sum.back() ^ 1);
  corrupt_and_check("checksum changed", bad_sum, 4);
  corrupt_and_check("empty file", "", 5);
  corrupt_and_check("garbage", std::string(4096, 'x'), 6);
  std::string extended = original + "trailing";
  corrupt_and_check("trailing bytes", extended, 7);
  std::string older_version = original;
  const std::uint32_t version_2 = 2;  // the format before the rename
  std::memcpy(older_version.data() + 8, &version_2, sizeof version_2);
  corrupt_and_check("an older format version", older_version, 8);
  std::string older_magic = original;
  older_magic.replace(0, 8, std::string("OTHERNVC"));  // another name's magic
  corrupt_and_check("another magic", older_magic, 9);
  CHECK(cache.stats().store_failures == 0);
}

TEST_CASE("compile_cache: a foreign entry in the directory is never read and left alone", "[compile_cache]") {
  // An entry of an earlier format has another tag and version in its key, so another file name: it
  // sits in the directory like this one, which no key of this format names.
  temp_dir dir;
  const auto prog = saxpy_program();
  std::string new_entry_bytes;
  {
    temp_dir fresh;
    cudrv::compile_cache probe(fresh.str());
    (void)probe.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
    new_entry_bytes = read_all(files_in(fresh.path, ".entry").at(0));
  }
  std::string old_entry = new_entry_bytes;
  old_entry.replace(0, 8, std::string("OTHERNVC"));
  const std::uint32_t version_2 = 2;
  std::memcpy(old_entry.data() + 8, &version_2, sizeof version_2);
  const fs::path old_file = dir.path / "0123456789abcdef0123456789abcdef.entry";
  write_all(old_file, old_entry);

  cudrv::compile_cache cache(dir.str());
  const auto r = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  CHECK(r.code.bytes().size() > 0);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 0);
  CHECK(cache.stats().corrupt_entries == 0);  // never read
  CHECK(read_all(old_file) == old_entry);     // and never touched
  CHECK(files_in(dir.path, ".entry").size() == 2);
}

TEST_CASE("compile_cache: an entry of another key under this key's name is a miss, not a wrong result",
          "[compile_cache]") {
  // Simulates a hash collision: the entry is valid, but its stored key differs.
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const auto a = saxpy_program("#define OFFSET 1\n");
  const auto b = saxpy_program("#define OFFSET 2\n");
  const auto result_a = cache.compile(a, cudrv::code_kind::ptx, sm90, float_expr);
  const fs::path entry_a = files_in(dir.path, ".entry").at(0);
  const auto result_b = cache.compile(b, cudrv::code_kind::ptx, sm90, float_expr);
  fs::path entry_b;
  for (const auto& p : files_in(dir.path, ".entry")) {
    if (p != entry_a) {
      entry_b = p;
    }
  }
  REQUIRE_FALSE(entry_b.empty());
  REQUIRE(result_a.code.bytes() != result_b.code.bytes());

  fs::copy_file(entry_a, entry_b, fs::copy_options::overwrite_existing);  // b's name, a's content
  const auto again_b = cache.compile(b, cudrv::code_kind::ptx, sm90, float_expr);
  check_same(again_b, result_b);
  CHECK(cache.stats().corrupt_entries == 0);  // valid, just not ours
  CHECK(cache.stats().misses == 3);
  CHECK(cache.stats().hits == 0);
}

TEST_CASE("compile_cache: compile errors are not cached", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const cudrv::program broken("broken.cu", "__global__ void k() { int x = ; }\n");
  for (int i = 0; i < 2; ++i) {
    CHECK_THROWS_AS(cache.compile(broken, cudrv::code_kind::ptx, sm90), cudrv::compile_error);
  }
  CHECK(cache.stats().misses == 2);
  CHECK(fs::is_empty(dir.path));
  // Invalid options throw before anything is looked up.
  CHECK_THROWS_AS(cache.compile(broken, cudrv::code_kind::ptx, {.arch = "sm_90", .max_registers = 0}),
                  cudrv::invalid_argument_error);
  CHECK(cache.stats().misses == 2);
}

// The value a probe kernel stores (`*p = VALUE;`), read back from its PTX: "mov.u32 %r1, <VALUE>;".
bool stores(const cudrv::compile_result& r, int value) {
  return contains(r.code.bytes(), ", " + std::to_string(value) + ";");
}

constexpr const char* probe_source = "#include \"probe_inc.h\"\nextern \"C\" __global__ void k(int* p) { *p = VAL; }\n";

TEST_CASE("compile_cache: a header found next to the program is part of the key", "[compile_cache]") {
  // The reported case: program name inc/probe.cu, NVRTC finds probe_inc.h in inc/ (the directory of the
  // program's name); editing it twice gave three hits on the first version's PTX.
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  fs::create_directories(dir.path / "inc");
  cwd_guard cwd(dir.path);
  const cudrv::program prog("inc/probe.cu", probe_source);
  for (int value : {1111, 2222, 3333}) {
    write_all(dir.path / "inc" / "probe_inc.h", "#define VAL " + std::to_string(value) + "\n");
    const auto miss = cache.compile(prog, cudrv::code_kind::ptx, sm90);
    CHECK(stores(miss, value));
    const auto hit = cache.compile(prog, cudrv::code_kind::ptx, sm90);  // unchanged: served from the entry
    CHECK(stores(hit, value));
  }
  CHECK(cache.stats().misses == 3);
  CHECK(cache.stats().hits == 3);
  CHECK(cache.stats().uncacheable == 0);
  // Back to the first version: its entry is valid again and served.
  write_all(dir.path / "inc" / "probe_inc.h", "#define VAL 1111\n");
  CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 1111));
  CHECK(cache.stats().hits == 4);
}

TEST_CASE("compile_cache: headers in the current directory and include paths are part of the key", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  const fs::path include_dir = dir.path / "include";
  fs::create_directories(include_dir);
  cwd_guard cwd(dir.path);
  SECTION("the current directory (a program name without a directory)") {
    const cudrv::program prog("probe.cu", probe_source);
    write_all(dir.path / "probe_inc.h", "#define VAL 41\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 41));
    write_all(dir.path / "probe_inc.h", "#define VAL 42\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 42));
    CHECK(cache.stats().misses == 2);
  }
  SECTION("include_paths and a raw -I option are cached, and edits are seen") {
    const cudrv::program prog("disk.cu", probe_source);
    cudrv::compile_options options{.arch = "sm_90", .include_paths = {include_dir.string()}};
    cudrv::compile_options raw{.arch = "sm_90", .extra_options = {"-I" + include_dir.string()}};
    write_all(include_dir / "probe_inc.h", "#define VAL 1111\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 1111));
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 1111));
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, raw), 1111));
    write_all(include_dir / "probe_inc.h", "#define VAL 2222\n");  // edited on disk
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 2222));
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, raw), 2222));
    // Both spellings give NVRTC the same option list, hence the same entries.
    CHECK(cache.stats().hits == 3);
    CHECK(cache.stats().misses == 2);
    CHECK(cache.stats().uncacheable == 0);
  }
  SECTION("a header that appears earlier in the search shadows the one the entry was made with") {
    const cudrv::program prog("inc/probe.cu", probe_source);
    fs::create_directories(dir.path / "inc");
    cudrv::compile_options options{.arch = "sm_90", .include_paths = {include_dir.string()}};
    write_all(include_dir / "probe_inc.h", "#define VAL 7\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 7));
    write_all(dir.path / "inc" / "probe_inc.h", "#define VAL 8\n");  // the program's directory comes first
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 8));
    fs::remove(dir.path / "inc" / "probe_inc.h");  // gone again: the first entry is right again
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 7));
    CHECK(cache.stats().misses == 2);
    CHECK(cache.stats().hits == 1);
  }
  SECTION("a header included by a header on disk, relative to it") {
    const cudrv::program prog("disk.cu", probe_source);
    cudrv::compile_options options{.arch = "sm_90", .include_paths = {include_dir.string()}};
    fs::create_directories(include_dir / "sub");
    write_all(include_dir / "probe_inc.h", "#include \"sub/inner.h\"\n#define VAL (INNER + 1)\n");
    write_all(include_dir / "sub" / "inner.h", "#include \"deepest.h\"\n#define INNER (DEEPEST * 10)\n");
    write_all(include_dir / "sub" / "deepest.h", "#define DEEPEST 5\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 51));
    write_all(include_dir / "sub" / "deepest.h", "#define DEEPEST 6\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 61));
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 61));
    CHECK(cache.stats().hits == 1);
  }
  SECTION("__has_include: a header that appears later changes the key") {
    const cudrv::program prog("disk.cu",
                              "#if __has_include(\"opt.h\")\n#include \"opt.h\"\n#else\n#define VAL 3\n#endif\n"
                              "extern \"C\" __global__ void k(int* p) { *p = VAL; }\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 3));
    write_all(dir.path / "opt.h", "#define VAL 4\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 4));
    CHECK(cache.stats().hits == 0);
  }
  SECTION("a removed header is a compile error, not a hit on the old entry") {
    const cudrv::program prog("probe.cu", probe_source);
    write_all(dir.path / "probe_inc.h", "#define VAL 9\n");
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 9));
    fs::remove(dir.path / "probe_inc.h");
    CHECK_THROWS_AS(cache.compile(prog, cudrv::code_kind::ptx, sm90), cudrv::compile_error);
  }
}

TEST_CASE("compile_cache: includes the key cannot hold are never cached", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  SECTION("an include through a macro") {
    const cudrv::program prog("macro.cu",
                              "#define HEADER \"value.cuh\"\n#include HEADER\n"
                              "extern \"C\" __global__ void k(int* p) { *p = VALUE; }\n",
                              {{"value.cuh", "#define VALUE 5\n"}});
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 5));
    CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, sm90), 5));
    CHECK(cache.stats().uncacheable == 2);
  }
  SECTION("explicit precompiled header files and timing files") {
    const auto prog = saxpy_program();
    fs::create_directories(dir.path / "pch");
    cudrv::compile_options pch{.arch = "sm_90",
                               .extra_options = {"--create-pch=" + (dir.path / "pch" / "s.pch").string()}};
    (void)cache.compile(prog, cudrv::code_kind::ptx, pch, float_expr);
    cudrv::compile_options timed{.arch = "sm_90", .extra_options = {"-time=" + (dir.path / "time.csv").string()}};
    (void)cache.compile(prog, cudrv::code_kind::ptx, timed, float_expr);
    CHECK(cache.stats().uncacheable == 2);
  }
  CHECK(cache.stats().hits == 0);
  CHECK_FALSE(fs::exists(dir.path / "cache"));  // nothing was stored
}

TEST_CASE("compile_cache: a disabled cache compiles every time and writes nothing", "[compile_cache]") {
  temp_dir dir;
  env_guard disable("CUDRV_DISABLE_CACHE", "1");
  env_guard location("CUDRV_CACHE_DIR", dir.str());
  cudrv::compile_cache cache = cudrv::compile_cache::from_environment();
  CHECK_FALSE(cache.enabled());
  CHECK(cache.directory().empty());
  const auto prog = saxpy_program();
  const auto a = cache.compile(prog, cudrv::code_kind::ptx, sm90, float_expr);
  const auto b = cache.compile(prog, cudrv::code_kind::ptx, sm90, float_expr);
  check_same(a, b);
  CHECK(cache.stats().misses == 2);
  CHECK(cache.stats().hits == 0);
  CHECK(fs::is_empty(dir.path));
  cache.clear();  // nothing to do

  const auto off = cudrv::compile_cache::disabled();
  CHECK_FALSE(off.enabled());
  CHECK_THROWS_AS(cudrv::compile_cache(""), cudrv::invalid_argument_error);
}

TEST_CASE("compile_cache: from_environment follows the documented rules", "[compile_cache]") {
  env_guard disable("CUDRV_DISABLE_CACHE", std::nullopt);
  env_guard dir("CUDRV_CACHE_DIR", std::nullopt);
  env_guard xdg("XDG_CACHE_HOME", std::nullopt);
  env_guard home("HOME", "/home/someone");
  CHECK(cudrv::compile_cache::from_environment().directory() == "/home/someone/.cache/cudrv/nvrtc");
  {
    env_guard x("XDG_CACHE_HOME", "/var/cache/me");
    CHECK(cudrv::compile_cache::from_environment().directory() == "/var/cache/me/cudrv/nvrtc");
    env_guard d("CUDRV_CACHE_DIR", "/tmp/my-cache");
    CHECK(cudrv::compile_cache::from_environment().directory() == "/tmp/my-cache");
    env_guard empty("CUDRV_CACHE_DIR", "");  // set but empty: as if unset
    CHECK(cudrv::compile_cache::from_environment().directory() == "/var/cache/me/cudrv/nvrtc");
  }
  {
    env_guard x("XDG_CACHE_HOME", "relative/path");  // not absolute: ignored, as the XDG spec says
    CHECK(cudrv::compile_cache::from_environment().directory() == "/home/someone/.cache/cudrv/nvrtc");
  }
  {
    env_guard zero("CUDRV_DISABLE_CACHE", "0");
    CHECK(cudrv::compile_cache::from_environment().enabled());
    env_guard empty("CUDRV_DISABLE_CACHE", "");
    CHECK(cudrv::compile_cache::from_environment().enabled());
    env_guard yes("CUDRV_DISABLE_CACHE", "yes");
    CHECK_FALSE(cudrv::compile_cache::from_environment().enabled());
  }
  {
    env_guard no_home("HOME", std::nullopt);
    CHECK_FALSE(cudrv::compile_cache::from_environment().enabled());
  }
}

TEST_CASE("compile_cache: the directory is created on the first store, mode 0700", "[compile_cache]") {
  temp_dir dir;
  const fs::path nested = dir.path / "a" / "b" / "c";
  cudrv::compile_cache cache(nested.string());
  CHECK_FALSE(fs::exists(nested));  // nothing is created before a store
  (void)cache.compile(saxpy_program(), cudrv::code_kind::ptx, sm90, float_expr);
  CHECK(cache.stats().store_failures == 0);
  for (const fs::path& p : {dir.path / "a", dir.path / "a" / "b", nested}) {
    INFO(p);
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
  }
  CHECK(files_in(nested, ".entry").size() == 1);
}

TEST_CASE("compile_cache: a store failure does not fail the compilation", "[compile_cache]") {
  temp_dir dir;
  // A directory below a regular file cannot be created, even by root.
  write_all(dir.path / "a-file", "not a directory");
  cudrv::compile_cache cache((dir.path / "a-file" / "cache").string());
  const auto prog = saxpy_program();
  const auto r = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  CHECK_FALSE(r.code.empty());
  check_same(r, prog.compile(cudrv::code_kind::cubin, sm90, float_expr));
  (void)cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  const auto s = cache.stats();
  CHECK(s.store_failures == 2);
  CHECK(s.misses == 2);
  CHECK(s.hits == 0);
  CHECK(s.corrupt_entries == 0);
}

TEST_CASE("compile_cache: clear removes the entries and nothing else", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  (void)cache.compile(saxpy_program(), cudrv::code_kind::ptx, sm90, float_expr);
  (void)cache.compile(saxpy_program(), cudrv::code_kind::cubin, sm90, float_expr);
  write_all(dir.path / "README", "keep me");
  write_all(dir.path / ".0123456789abcdef0123456789abcdef.1.2.3.tmp", "stale temporary file");
  REQUIRE(files_in(dir.path, ".entry").size() == 2);
  cache.clear();
  CHECK(files_in(dir.path, ".entry").empty());
  CHECK(files_in(dir.path, ".tmp").empty());
  CHECK(fs::exists(dir.path / "README"));
  (void)cache.compile(saxpy_program(), cudrv::code_kind::ptx, sm90, float_expr);
  CHECK(cache.stats().misses == 3);
  cudrv::compile_cache(dir.str() + "/missing").clear();  // no directory: nothing to do
}

TEST_CASE("compile_cache: threads compiling one key at once all succeed and leave one entry", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const auto prog = saxpy_program();
  const std::string expected = prog.compile(cudrv::code_kind::cubin, sm90, float_expr).code.bytes();
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      try {
        results[t] = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr).code.bytes();
      } catch (const std::exception& e) {
        results[t] = std::string("exception: ") + e.what();
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  for (const auto& r : results) {
    CHECK(r == expected);
  }
  const auto s = cache.stats();
  CHECK(s.hits + s.misses == 4);
  CHECK(s.store_failures == 0);
  CHECK(s.corrupt_entries == 0);
  CHECK(files_in(dir.path, ".entry").size() == 1);
  CHECK(files_in(dir.path, ".tmp").empty());
}

TEST_CASE("compile_cache: two processes storing one key at once both succeed", "[compile_cache]") {
  temp_dir dir;
  const std::string start = (dir.path / "start").string();
  const std::string cache_dir = (dir.path / "cache").string();
  const std::string name = "two_processes.cu";
  const std::string source = "extern \"C\" __global__ void from_two_processes(int* x) { x[threadIdx.x] += 7; }\n";

  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args{CUDRV_TEST_CACHE_WRITER, cache_dir, start, name, source};
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, CUDRV_TEST_CACHE_WRITER, nullptr, nullptr, argv.data(), environ) == 0);
    children.push_back(pid);
  }
  write_all(start, "go");  // both start compiling now
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("child " << pid << " status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(files_in(cache_dir, ".entry").size() == 1);
  CHECK(files_in(cache_dir, ".tmp").empty());

  cudrv::compile_cache cache(cache_dir);
  const cudrv::program prog(name, source);
  const auto r = cache.compile(prog, cudrv::code_kind::cubin, sm90);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().corrupt_entries == 0);
  check_same(r, prog.compile(cudrv::code_kind::cubin, sm90));
}

TEST_CASE("compile_cache: an empty arch is resolved before the lookup", "[compile_cache][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  auto e = catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cache.compile(saxpy_program(), cudrv::code_kind::ptx, {}, float_expr); });
  REQUIRE(e.has_value());
  CHECK(contains(e->what(), "arch"));
  CHECK(fs::is_empty(dir.path));
  CHECK(cache.stats().hits + cache.stats().misses == 0);
}

TEST_CASE("compile_cache: a hit is fast", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const auto prog = saxpy_program();
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  (void)cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  const auto miss = clock::now() - t0;
  constexpr int hits = 200;
  t0 = clock::now();
  for (int i = 0; i < hits; ++i) {
    (void)cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  }
  const auto per_hit = (clock::now() - t0) / hits;
  CHECK(cache.stats().hits == hits);
  using us = std::chrono::duration<double, std::micro>;
  WARN("compile_cache: miss (NVRTC compile + store) " << us(miss).count() << " us, hit " << us(per_hit).count()
                                                      << " us (mean of " << hits << ")");
}

// --- issue 31: what NVRTC reads, and a directory that others can write -----------------------------

namespace {

// A kernel storing VAL, which only the header val.h defines.
constexpr const char* val_kernel = "extern \"C\" __global__ void k(int* p) { *p = VAL; }\n";

// Compiles prog with options through cache around an edit of header (VAL 1111, then 2222): the second
// compilation must see the edit, whether it is a miss or a hit.
void check_edit_is_seen(cudrv::compile_cache& cache, const cudrv::program& prog, const cudrv::compile_options& options,
                        const fs::path& header) {
  write_all(header, "#define VAL 1111\n");
  CHECK(stores(cache.compile(prog, cudrv::code_kind::ptx, options), 1111));
  write_all(header, "#define VAL 2222\n");
  const auto after = cache.compile(prog, cudrv::code_kind::ptx, options);
  CHECK(stores(after, 2222));
  CHECK(stores(prog.compile(cudrv::code_kind::ptx, options), 2222));  // what NVRTC itself reads
}

}  // namespace

TEST_CASE("compile_cache: include options with the blanks NVRTC strips key the headers NVRTC reads",
          "[compile_cache]") {
  // NVRTC drops blanks around an option and after -I, so "-I <dir>" searches <dir>; the cache keyed
  // " <dir>", found no header there and served the first entry after an edit.
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  const fs::path inc = dir.path / "inc";
  fs::create_directories(dir.path / "work");
  fs::create_directories(inc);
  cwd_guard cwd(dir.path / "work");  // no val.h here or next to the program
  const cudrv::program prog("probe.cu", std::string("#include \"val.h\"\n") + val_kernel);
  SECTION("\"-I <dir>\"") {
    check_edit_is_seen(cache, prog, {.arch = "sm_90", .extra_options = {"-I " + inc.string()}}, inc / "val.h");
  }
  SECTION("\"-I<dir> \"") {
    check_edit_is_seen(cache, prog, {.arch = "sm_90", .extra_options = {"-I" + inc.string() + " "}}, inc / "val.h");
  }
  SECTION("\" -I<dir>\" and \"--include-path=<dir>\\t\"") {
    check_edit_is_seen(cache, prog, {.arch = "sm_90", .extra_options = {" -I" + inc.string()}}, inc / "val.h");
    check_edit_is_seen(cache, prog, {.arch = "sm_90", .extra_options = {"--include-path=" + inc.string() + "\t"}},
                       inc / "val.h");
  }
  SECTION("include_paths = {\" <dir>\"}, written -I <dir>") {
    check_edit_is_seen(cache, prog, {.arch = "sm_90", .include_paths = {" " + inc.string()}}, inc / "val.h");
  }
  SECTION("\"--pre-include=<file> \"") {
    const cudrv::program pre("pre.cu", val_kernel);
    check_edit_is_seen(cache, pre,
                       {.arch = "sm_90", .extra_options = {"--pre-include=" + (inc / "val.h").string() + " "}},
                       inc / "val.h");
  }
  SECTION("\"-I\" and the directory as the next option") {
    check_edit_is_seen(cache, prog, {.arch = "sm_90", .extra_options = {"-I", inc.string()}}, inc / "val.h");
  }
  CHECK(cache.stats().hits + cache.stats().misses + cache.stats().uncacheable > 0);
}

TEST_CASE("compile_cache: a header reached through a link and directly is scanned from both directories",
          "[compile_cache]") {
  // NVRTC looks for a header's includes in the directory it opened the header through: inc/alias.h, a
  // link to sub/h3.h, includes "h0.h" from inc/, and sub/h3.h itself from inc/sub/. The scan read the
  // file once (by its canonical path), from inc/ only, and never keyed inc/sub/h0.h (fuzz_cache_deps).
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  const fs::path inc = dir.path / "inc";
  fs::create_directories(inc / "sub");
  fs::create_directories(dir.path / "work");
  cwd_guard cwd(dir.path / "work");
  write_all(inc / "sub" / "h3.h", "#include \"h0.h\"\n");
  fs::create_symlink("sub/h3.h", inc / "alias.h");
  write_all(inc / "h0.h", "// nothing here\n");
  const cudrv::program prog("probe.cu", std::string("#include \"alias.h\"\n#include \"sub/h3.h\"\n") + val_kernel);
  check_edit_is_seen(cache, prog, {.arch = "sm_90", .include_paths = {inc.string()}}, inc / "sub" / "h0.h");
}

TEST_CASE("compile_cache: headers that include themselves by ever longer paths end the scan", "[compile_cache]") {
  // h.h includes "sub/../h.h": the same file from the same directory, spelled longer each time. Keyed
  // by the spelled directory, the scan recursed until the stack overflowed (fuzz_cache_deps); named
  // headers that include one another in a chain longer than the depth bound are refused, not recursed.
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  fs::create_directories(dir.path / "sub");
  cwd_guard cwd(dir.path);
  const cudrv::program prog("probe.cu", std::string("#include \"h.h\"\n") + val_kernel);
  write_all(dir.path / "h.h", "#pragma once\n#include \"sub/../h.h\"\n#include \"val.h\"\n");
  check_edit_is_seen(cache, prog, sm90, dir.path / "val.h");
  CHECK(cache.stats().uncacheable == 0);

  std::vector<cudrv::header> chain;
  for (int i = 0; i < 1000; ++i) {
    // Appended piece by piece: g++ 12 reports a false -Wrestrict for "c" + std::to_string(i) + ".h".
    std::string name = "c";
    name += std::to_string(i);
    name += ".h";
    std::string body = "#include \"c";
    body += std::to_string(i + 1);
    body += ".h\"\n";
    chain.push_back({std::move(name), std::move(body)});
  }
  chain.push_back({"c1000.h", "#define VAL 7\n"});
  const cudrv::program deep("deep.cu", std::string("#include \"c0.h\"\n") + val_kernel, chain);
  const auto before = cache.stats().uncacheable;
  CHECK(stores(cache.compile(deep, cudrv::code_kind::ptx, sm90), 7));
  CHECK(cache.stats().uncacheable == before + 1);
}

TEST_CASE("compile_cache: a directive after a comment or spelled with a digraph is keyed", "[compile_cache]") {
  // `/* generated */ #include "val.h"` is a directive; the scan skipped every line not starting with '#'.
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  cwd_guard cwd(dir.path);
  for (const std::string directive :
       {"/* generated */ #include \"val.h\"\n", "/* a comment\n   over lines */ #include \"val.h\"\n",
        "#/**/include/**/\"val.h\"\n", "%:include \"val.h\"\n", "#inc\\\nlude \"va\\\nl.h\"\n"}) {
    INFO(directive);
    const cudrv::program prog("probe.cu", directive + val_kernel);
    check_edit_is_seen(cache, prog, sm90, dir.path / "val.h");
  }
}

namespace {

// The entry file of prog's compilation for sm90 PTX in an empty cache directory: compiled once, found,
// then removed, so the caller can put something else under that name.
fs::path entry_path_of(const fs::path& cache_dir, const cudrv::program& prog) {
  cudrv::compile_cache probe(cache_dir.string());
  (void)probe.compile(prog, cudrv::code_kind::ptx, sm90);
  const auto entries = files_in(cache_dir, ".entry");
  REQUIRE(entries.size() == 1);
  fs::remove(entries[0]);
  return entries[0];
}

const cudrv::program val_program("probe.cu", "extern \"C\" __global__ void k(int* p) { *p = 5150; }\n");

}  // namespace

TEST_CASE("compile_cache: a directory writable by group or others is not used", "[compile_cache]") {
  temp_dir dir;
  for (const ::mode_t mode : {0777, 0770, 0722, 01777}) {
    INFO("mode " << std::oct << mode);
    fs::remove_all(dir.path / "cache");
    fs::create_directories(dir.path / "cache");
    REQUIRE(::chmod((dir.path / "cache").c_str(), mode) == 0);
    cudrv::compile_cache cache((dir.path / "cache").string());
    const auto fresh = val_program.compile(cudrv::code_kind::ptx, sm90);
    for (int i = 0; i < 2; ++i) {
      check_same(cache.compile(val_program, cudrv::code_kind::ptx, sm90), fresh);
    }
    CHECK(cache.stats().hits == 0);
    CHECK(cache.stats().misses == 2);
    CHECK(cache.stats().untrusted_directory == 2);
    CHECK(cache.stats().store_failures == 0);
    CHECK(files_in(dir.path / "cache", ".entry").empty());  // nothing stored there either
  }
}

TEST_CASE("compile_cache: a directory owned by another user is not used", "[compile_cache]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a directory to another user; skipped");
    return;
  }
  temp_dir dir;
  const fs::path cache_dir = dir.path / "cache";
  fs::create_directories(cache_dir);
  REQUIRE(::chmod(cache_dir.c_str(), 0700) == 0);
  REQUIRE(::chown(cache_dir.c_str(), 4242, 4242) == 0);
  cudrv::compile_cache cache(cache_dir.string());
  (void)cache.compile(val_program, cudrv::code_kind::ptx, sm90);
  (void)cache.compile(val_program, cudrv::code_kind::ptx, sm90);
  CHECK(cache.stats().hits == 0);
  CHECK(cache.stats().untrusted_directory == 2);
  CHECK(files_in(cache_dir, ".entry").empty());
}

TEST_CASE("compile_cache: a FIFO at an entry's path does not block compile", "[compile_cache]") {
  temp_dir dir;
  const fs::path entry = entry_path_of(dir.path, val_program);
  REQUIRE(::mkfifo(entry.c_str(), 0600) == 0);
  cudrv::compile_cache cache(dir.str());
  std::atomic<bool> done{false};
  std::optional<cudrv::compile_result> result;
  std::thread t([&] {
    result = cache.compile(val_program, cudrv::code_kind::ptx, sm90);
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool blocked = !done;
  if (blocked) {
    // Let the blocked open return (a writer appears and goes), so the thread can be joined.
    const int fd = ::open(entry.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) {
      ::close(fd);
    }
  }
  t.join();
  CHECK_FALSE(blocked);
  REQUIRE(result.has_value());
  check_same(*result, val_program.compile(cudrv::code_kind::ptx, sm90));
  CHECK(cache.stats().hits == 0);
  CHECK(cache.stats().corrupt_entries == 1);  // not a regular file: removed, and the entry stored
  CHECK(fs::is_regular_file(fs::symlink_status(entry)));
}

TEST_CASE("compile_cache: a huge sparse entry is refused before anything is allocated", "[compile_cache]") {
  temp_dir dir;
  const fs::path entry = entry_path_of(dir.path, val_program);
  {
    const int fd = ::open(entry.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    const bool grown = ::ftruncate(fd, off_t{1} << 40) == 0;  // 1 TiB, no block written
    ::close(fd);
    if (!grown) {
      WARN("the file system refuses a 1 TiB sparse file; skipped");
      return;
    }
  }
  cudrv::compile_cache cache(dir.str());
  std::optional<cudrv::compile_result> r;
  CHECK_NOTHROW(r = cache.compile(val_program, cudrv::code_kind::ptx, sm90));
  REQUIRE(r.has_value());
  check_same(*r, val_program.compile(cudrv::code_kind::ptx, sm90));
  CHECK(cache.stats().hits == 0);
  CHECK(cache.stats().corrupt_entries == 1);
  CHECK(fs::file_size(entry) < 4096);  // replaced by the real entry
}

TEST_CASE("compile_cache: a huge sparse header on disk does not make the scan allocate", "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache((dir.path / "cache").string());
  cwd_guard cwd(dir.path);
  {
    const int fd = ::open((dir.path / "huge.h").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    const bool grown = ::ftruncate(fd, off_t{1} << 40) == 0;
    ::close(fd);
    if (!grown) {
      WARN("the file system refuses a 1 TiB sparse file; skipped");
      return;
    }
  }
  // Never included by NVRTC (#if 0), but a candidate the scan looks at.
  const cudrv::program prog("probe.cu",
                            "#if 0\n#include \"huge.h\"\n#endif\nextern \"C\" __global__ void k(int* p) { *p = 1; }\n");
  std::optional<cudrv::compile_result> r;
  CHECK_NOTHROW(r = cache.compile(prog, cudrv::code_kind::ptx, sm90));
  REQUIRE(r.has_value());
  CHECK(cache.stats().uncacheable == 1);
}

// --- corrupted inputs (issue 19): entries that look valid but are not, and crashed writers ---------

#if defined(CUDRV_TEST_INTERNALS)
#include <algorithm>

#include "code/compile_cache_entry.hpp"

namespace {

// The key and payload of an entry file (header: magic, version, reserved, key size, payload size).
std::pair<std::string, std::string> split_entry(const std::string& entry) {
  std::uint64_t key_size = 0;
  std::uint64_t payload_size = 0;
  std::memcpy(&key_size, entry.data() + 16, sizeof key_size);
  std::memcpy(&payload_size, entry.data() + 24, sizeof payload_size);
  REQUIRE(32 + key_size + payload_size + 8 == entry.size());
  return {entry.substr(32, key_size), entry.substr(32 + key_size, payload_size)};
}

}  // namespace

TEST_CASE("compile_cache: entries with a valid checksum but a wrong version or a broken image are recompiled",
          "[compile_cache]") {
  temp_dir dir;
  cudrv::compile_cache cache(dir.str());
  const auto prog = saxpy_program();
  const auto good = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  const fs::path entry = files_in(dir.path, ".entry").at(0);
  const std::string original = read_all(entry);
  const auto [key, payload] = split_entry(original);
  // The encoder is the one the cache uses: re-encoding gives the file back.
  REQUIRE(cudrv::detail::encode_cache_entry(key, payload) == original);

  auto replace_and_check = [&](const char* what, const std::string& bytes, std::uint64_t corrupt) {
    INFO(what);
    write_all(entry, bytes);
    const auto r = cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
    check_same(r, good);
    CHECK(cache.stats().corrupt_entries == corrupt);
    CHECK(read_all(entry) == original);  // recompiled and stored again
  };
  const std::uint32_t version = cudrv::detail::cache_format_version();
  replace_and_check("the previous format version", cudrv::detail::encode_cache_entry(key, payload, version - 1), 1);
  replace_and_check("a future format version", cudrv::detail::encode_cache_entry(key, payload, version + 1), 2);

  // A writer that got the frame and checksum right around a truncated cubin: never handed out.
  cudrv::compile_result cut = good;
  cut.code = cudrv::object_code(cudrv::code_kind::cubin, good.code.bytes().substr(0, good.code.size() / 2), "cut");
  replace_and_check("a truncated cubin inside",
                    cudrv::detail::encode_cache_entry(key, cudrv::detail::encode_cache_payload(cut)), 3);
  // A crash after the file grew but before its data reached the disk leaves zeros.
  std::string zeroed = original;
  std::fill(zeroed.begin() + static_cast<std::ptrdiff_t>(zeroed.size() / 2), zeroed.end(), '\0');
  replace_and_check("the second half zeros", zeroed, 4);
  CHECK(cache.stats().hits == 0);
}

TEST_CASE("compile_cache: a forged entry under the right name is not served", "[compile_cache]") {
  // Another user who can write the directory writes an entry of this key holding their own code: the
  // name and key are computable from public inputs, and the checksum is no secret.
  temp_dir dir;
  const cudrv::program victim("victim.cu", "extern \"C\" __global__ void k(int* p) { *p = 1111; }\n");
  const cudrv::program other("other.cu", "extern \"C\" __global__ void k(int* p) { *p = 6666; }\n");
  const fs::path cache_dir = dir.path / "cache";
  fs::create_directories(cache_dir);
  REQUIRE(::chmod(cache_dir.c_str(), 0700) == 0);
  std::string forged;
  fs::path victim_entry;
  {
    cudrv::compile_cache setup(cache_dir.string());
    (void)setup.compile(victim, cudrv::code_kind::ptx, sm90);
    victim_entry = files_in(cache_dir, ".entry").at(0);
    const auto [key, payload] = split_entry(read_all(victim_entry));
    const auto evil = other.compile(cudrv::code_kind::ptx, sm90);
    forged = cudrv::detail::encode_cache_entry(key, cudrv::detail::encode_cache_payload(evil));
    fs::remove(victim_entry);
  }
  SECTION("in a directory others can write") {
    REQUIRE(::chmod(cache_dir.c_str(), 0777) == 0);
    write_all(victim_entry, forged);
  }
  SECTION("owned by another user, in the user's own directory (as root)") {
    if (::geteuid() != 0) {
      WARN("not root: cannot give a file to another user; skipped");
      return;
    }
    write_all(victim_entry, forged);
    REQUIRE(::chown(victim_entry.c_str(), 4242, 4242) == 0);
  }
  SECTION("writable by others, in the user's own directory") {
    write_all(victim_entry, forged);
    REQUIRE(::chmod(victim_entry.c_str(), 0666) == 0);
  }
  SECTION("a symbolic link to a file elsewhere") {
    write_all(dir.path / "elsewhere.entry", forged);
    fs::create_symlink(dir.path / "elsewhere.entry", victim_entry);
  }
  cudrv::compile_cache cache(cache_dir.string());
  const auto r = cache.compile(victim, cudrv::code_kind::ptx, sm90);
  CHECK(stores(r, 1111));
  CHECK_FALSE(stores(r, 6666));
  CHECK(cache.stats().hits == 0);
  // In the user's own directory, the forged file is replaced by the real entry, served from then on.
  if (cache.stats().untrusted_directory == 0) {
    CHECK(fs::is_regular_file(fs::symlink_status(victim_entry)));
    CHECK(stores(cache.compile(victim, cudrv::code_kind::ptx, sm90), 1111));
    CHECK(cache.stats().hits == 1);
  }
}

TEST_CASE("compile_cache: temporary files of a crashed writer are never read, and old ones are removed",
          "[compile_cache]") {
  temp_dir dir;
  const auto prog = saxpy_program();
  std::string entry_bytes;
  std::string hex;
  {
    cudrv::compile_cache first(dir.str());
    (void)first.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
    const fs::path entry = files_in(dir.path, ".entry").at(0);
    entry_bytes = read_all(entry);
    hex = entry.filename().string().substr(0, 32);
    fs::remove(entry);
  }
  // What a writer killed mid-write leaves: a temporary file of the same key, whole or cut short.
  const fs::path old_whole = dir.path / ("." + hex + ".4242.0.17.tmp");
  const fs::path old_cut = dir.path / ("." + hex + ".4242.1.17.tmp");
  const fs::path fresh = dir.path / ("." + hex + ".4343.0.18.tmp");
  write_all(old_whole, entry_bytes);
  write_all(old_cut, entry_bytes.substr(0, entry_bytes.size() / 3));
  write_all(fresh, entry_bytes.substr(0, 10));
  const auto an_hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(old_whole, an_hour_ago);
  fs::last_write_time(old_cut, an_hour_ago);

  cudrv::compile_cache cache(dir.str());
  (void)cache.compile(prog, cudrv::code_kind::cubin, sm90, float_expr);
  CHECK(cache.stats().hits == 0);  // a temporary file is never an entry
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().corrupt_entries == 0);
  CHECK(read_all(files_in(dir.path, ".entry").at(0)) == entry_bytes);
  CHECK_FALSE(fs::exists(old_whole));  // left by a dead writer long ago: removed by the first store
  CHECK_FALSE(fs::exists(old_cut));
  CHECK(fs::exists(fresh));  // may belong to a live writer: left alone
}

TEST_CASE("compile_cache: the fuzz seeds are entries of the current format", "[compile_cache]") {
  // fuzz/make_seeds.py writes entry files itself; these checks keep it in step with the format.
  auto seed = [](const char* name) {
    const std::string bytes = read_all(fs::path(CUDRV_TEST_FUZZ_CORPUS) / "fuzz_cache_entry" / name);
    REQUIRE(bytes.size() > 1);
    return bytes.substr(1);  // the mode byte
  };
  cudrv::compile_result r;
  REQUIRE(cudrv::detail::decode_cache_entry(seed("entry_ptx"), "fuzz seed key", "seed", r) ==
          cudrv::detail::cache_entry_status::hit);
  CHECK(r.code.kind() == cudrv::code_kind::ptx);
  CHECK(r.lowered_names == std::vector<std::pair<std::string, std::string>>{{"k", "k"}});
  CHECK(cudrv::detail::decode_cache_entry(seed("entry_cubin"), "fuzz seed key", "seed", r) ==
        cudrv::detail::cache_entry_status::hit);
  CHECK(r.code.kind() == cudrv::code_kind::cubin);
  CHECK(cudrv::detail::decode_cache_entry(seed("entry_cubin"), "another key", "seed", r) ==
        cudrv::detail::cache_entry_status::other_key);
  CHECK(cudrv::detail::decode_cache_entry(seed("entry_old_version"), "fuzz seed key", "seed", r) ==
        cudrv::detail::cache_entry_status::corrupt);
}
#endif  // CUDRV_TEST_INTERNALS
