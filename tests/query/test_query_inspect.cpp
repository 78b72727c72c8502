// issue 36: inspect. cudrv::inspect and cudrv-query --inspect on images nvcc, fatbinary and ptxas make
// here (every figure compared with what cuobjdump -res-usage, -lelf and -lptx print for the same file,
// parsed from its output: the test never states a figure itself), and on truncated and garbage files
// (a typed error, the exit statuses, the JSON document against the schema). No GPU or driver needed.
// The comparison needs nvcc and cuobjdump (the toolkit's, NVIDIA's wheel in .venv, or
// $CUDRV_TEST_CUOBJDUMP): without them it says SKIPPED.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <cudrv/code_inspection.hpp>
#include <cudrv/device.hpp>
#include <cudrv/error.hpp>
#include <cudrv/kernel.hpp>
#include <cudrv/library.hpp>

#include "query_test_support.hpp"
#include "support/test_support.hpp"

namespace {

using query_test::run_process;
using query_test::run_query;

bool executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string cuobjdump() {
  if (const char* e = std::getenv("CUDRV_TEST_CUOBJDUMP"); e != nullptr && executable(e)) {
    return e;
  }
  return executable(CUDRV_TEST_CUOBJDUMP) ? CUDRV_TEST_CUOBJDUMP : "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A temporary folder, removed (with its files) at destruction.
class temp_dir {
 public:
  temp_dir() {
    char name[] = "/tmp/cudrv_inspect_test_XXXXXX";
    if (mkdtemp(name) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = name;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() { (void)run_process({"rm", "-rf", path_}); }
  [[nodiscard]] std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Kernels with every resource the inspector reads: static shared memory, __constant__ and __device__
// data, __launch_bounds__, __cluster_dims__, a large by-value parameter, spills (with -maxrregcount) and
// a C++ (mangled) name.
constexpr const char* source = R"(#include <cstdio>
__constant__ float table[64];
__constant__ int small_table[3];
__device__ int counter;
template <class T> __global__ void __launch_bounds__(256, 2) staged(T* p, int n) {
  __shared__ T s[128];
  s[threadIdx.x % 128] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = s[(threadIdx.x + 1) % 128] * table[n % 64] + small_table[n % 3];
}
template __global__ void staged<float>(float*, int);
template __global__ void staged<double>(double*, int);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CLUSTER __cluster_dims__(2, 1, 1)
#else
#define CLUSTER
#endif
extern "C" __global__ void CLUSTER clustered(int* p) { p[threadIdx.x] = counter; }
extern "C" __global__ void spilling(float* p, int n) {
  float a[64];
  for (int i = 0; i < 64; ++i) a[i] = p[i * n];
  float s = 0;
  for (int i = 0; i < 64; ++i) s += a[(i * 7 + n) % 64];
  p[0] = s;
  printf("%f\n", s);
}
struct big { int x[100]; };
extern "C" __global__ void by_value(big b, int* out) { out[0] = b.x[threadIdx.x % 100]; }
int main() { return 0; }
)";

// PTX directives nvcc has no attribute for: .reqntid, .maxntid with .maxnreg, an explicit cluster, a
// cluster rank limit.
constexpr const char* ptx_source = R"(.version 8.8
.target sm_90
.address_size 64
.visible .entry required(.param .u64 p) .reqntid 128, 1, 1 { ret; }
.visible .entry capped(.param .u64 p) .maxntid 256, 1, 1 .maxnreg 32 { ret; }
.visible .entry explicit_cluster(.param .u64 p) .explicitcluster .reqnctapercluster 2, 2, 1 { ret; }
.visible .entry ranked(.param .u64 p, .param .u32 n) .maxclusterrank 8 { ret; }
)";

// A texture, a surface and a sampler reference, declared the old way (independent texture mode).
constexpr const char* texref_source = R"(.version 8.8
.target sm_90, texmode_independent
.address_size 64
.global .texref tex0;
.global .surfref surf0;
.global .samplerref samp0;
.visible .entry sample(.param .u64 p) {
  .reg .f32 %f<5>;
  .reg .b64 %rd<2>;
  .reg .s32 %r<2>;
  mov.s32 %r1, 0;
  tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex0, samp0, {%r1}];
  ld.param.u64 %rd1, [p];
  st.global.f32 [%rd1], %f1;
  ret;
}
)";

// One "Function" or "Common" line of cuobjdump -res-usage: NAME -> {REG: 10, CONSTANT[0]: 540, ...}.
using figures = std::map<std::string, long long>;
struct res_usage_block {
  figures common;
  std::map<std::string, figures> functions;
};

figures parse_figures(const std::string& line) {
  figures f;
  static const std::regex pair(R"(([A-Z]+(?:\[\d+\])?):(\d+))");
  for (std::sregex_iterator i(line.begin(), line.end(), pair), end; i != end; ++i) {
    f[(*i)[1]] = std::stoll((*i)[2]);
  }
  return f;
}

// Every "Resource usage:" block of cuobjdump -res-usage, in order (one per SASS image).
std::vector<res_usage_block> parse_res_usage(const std::string& text) {
  std::vector<res_usage_block> blocks;
  std::istringstream in(text);
  std::string line;
  std::string function;
  bool common = false;
  while (std::getline(in, line)) {
    if (line.rfind("Resource usage:", 0) == 0) {
      blocks.emplace_back();
      function.clear();
      common = false;
    } else if (!blocks.empty() && line.rfind(" Common:", 0) == 0) {
      common = true;
    } else if (!blocks.empty() && line.rfind(" Function ", 0) == 0) {
      function = line.substr(10, line.size() - 11);  // " Function NAME:"
      common = false;
    } else if (!blocks.empty() && line.rfind("  ", 0) == 0) {
      (common ? blocks.back().common : blocks.back().functions[function]) = parse_figures(line);
    }
  }
  return blocks;
}

// The architectures of cuobjdump -lelf / -lptx ("ELF file    1: x.2.sm_90a.cubin"), sorted.
std::multiset<std::string> listed(const std::string& text, const std::string& kind) {
  std::multiset<std::string> out;
  static const std::regex line(R"(^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$)");
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    std::smatch m;
    if (std::regex_match(l, m, line) && m[1] == kind) {
      out.insert(m[2]);
    }
  }
  return out;
}

long long bank_of(const std::vector<cudrv::constant_bank>& banks, int bank) {
  for (const auto& b : banks) {
    if (b.bank == bank) return static_cast<long long>(b.bytes);
  }
  return 0;
}

// Our figures of one SASS image against cuobjdump's block for it.
void compare(const cudrv::code_image& image, const res_usage_block& block, const std::string& what) {
  INFO(what << ", image " << image.arch_name);
  CHECK(image.global_bytes == static_cast<std::size_t>(block.common.count("GLOBAL") ? block.common.at("GLOBAL") : 0));
  for (const auto& [key, value] : block.common) {
    if (key.rfind("CONSTANT[", 0) == 0) {
      CHECK(bank_of(image.constant, std::stoi(key.substr(9))) == value);
    }
  }
  for (const auto& b : image.constant) {
    CHECK(block.common.count("CONSTANT[" + std::to_string(b.bank) + "]") == 1);
  }
  std::set<std::string> ours;
  for (const cudrv::kernel_resources& k : image.kernels) {
    ours.insert(k.name);
    INFO("kernel " << k.name);
    REQUIRE(block.functions.count(k.name) == 1);
    const figures& f = block.functions.at(k.name);
    CHECK(k.registers == f.at("REG"));
    CHECK(static_cast<long long>(k.stack_bytes) == f.at("STACK"));
    CHECK(static_cast<long long>(k.shared_bytes) == f.at("SHARED"));
    CHECK(static_cast<long long>(k.local_bytes) == f.at("LOCAL"));
    for (const auto& [key, value] : f) {
      if (key.rfind("CONSTANT[", 0) == 0) {
        CHECK(bank_of(k.constant, std::stoi(key.substr(9))) == value);
      }
    }
    // Bound texture, surface and sampler references, which cudrv does not report: none on these
    // architectures, texture references in PTX included (the directives section has one).
    for (const char* bound : {"TEXTURE", "SURFACE", "SAMPLER"}) {
      const auto at = f.find(bound);
      REQUIRE(at != f.end());
      CHECK(at->second == 0);
    }
    for (const auto& b : k.constant) {
      CHECK(f.count("CONSTANT[" + std::to_string(b.bank) + "]") == 1);
    }
  }
  // cuobjdump lists the __device__ functions with code in the image too (-G, -rdc): the image's other
  // functions.
  ours.insert(image.device_functions.begin(), image.device_functions.end());
  std::set<std::string> theirs;
  for (const auto& [name, f] : block.functions) theirs.insert(name);
  CHECK(ours == theirs);
}

// The inspection of path against cuobjdump's view of the same file; returns the inspection.
cudrv::code_inspection compare_with_cuobjdump(const std::string& tool, const std::string& path) {
  const std::string bytes = read_file(path);
  const cudrv::code_kind kind = cudrv::detect_code_kind(bytes);
  const cudrv::code_inspection r = cudrv::inspect(cudrv::object_code(kind, bytes, path));
  const query_test::process_result usage = run_process({tool, "-res-usage", path});
  INFO(path << "\ncuobjdump -res-usage:\n" << usage.out << usage.err);
  REQUIRE(usage.exit_code == 0);
  const std::vector<res_usage_block> blocks = parse_res_usage(usage.out);
  std::vector<const cudrv::code_image*> sass;
  std::multiset<std::string> sass_arches;
  std::multiset<std::string> ptx_arches;
  for (const cudrv::code_image& image : r.images) {
    CHECK(image.unreadable.empty());
    if (image.kind == cudrv::code_image_kind::sass) {
      sass.push_back(&image);
      sass_arches.insert(image.arch_name);
    } else if (image.kind == cudrv::code_image_kind::ptx) {
      ptx_arches.insert("sm_" + image.arch_name.substr(8));  // cuobjdump names PTX files sm_XX too
    }
  }
  REQUIRE(sass.size() == blocks.size());
  for (std::size_t i = 0; i < sass.size(); ++i) {
    compare(*sass[i], blocks[i], path);
  }
  const query_test::process_result list = run_process({tool, "-lelf", "-lptx", path});
  INFO("cuobjdump -lelf -lptx:\n" << list.out << list.err);
  CHECK(listed(list.out, "ELF") == sass_arches);
  CHECK(listed(list.out, "PTX") == ptx_arches);
  return r;
}

const cudrv::kernel_resources* find_kernel(const cudrv::code_image& image, const std::string& name) {
  for (const auto& k : image.kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

bool compile(const std::vector<std::string>& argv) {
  const query_test::process_result r = run_process(argv);
  INFO(argv.front() << ": " << r.out << r.err);
  CHECK(r.exit_code == 0);
  return r.exit_code == 0;
}

}  // namespace

TEST_CASE("inspect: every figure of nvcc's images equals cuobjdump's", "[query][inspect]") {
  const std::string tool = cuobjdump();
  const std::string nvcc = CUDRV_TEST_NVCC;
  if (tool.empty() || !executable(nvcc)) {
    WARN("SKIPPED: the comparison needs cuobjdump (CUDRV_TEST_CUOBJDUMP, the toolkit's, or scripts/install-deps.sh "
         "--ci) and nvcc; cuobjdump: '"
         << tool << "', nvcc: '" << nvcc << "'");
    return;
  }
  const std::string bin = nvcc.substr(0, nvcc.rfind('/') + 1);
  temp_dir dir;
  const std::string cu = dir.file("kernels.cu");
  write_file(cu, source);
  write_file(dir.file("directives.ptx"), ptx_source);

  SECTION("a cubin with spills (-maxrregcount 24), launch bounds, static shared and constant data") {
    REQUIRE(compile({nvcc, "-cubin", "-arch=sm_90", "-maxrregcount=24", cu, "-o", dir.file("k.cubin")}));
    const auto r = compare_with_cuobjdump(tool, dir.file("k.cubin"));
    REQUIRE(r.images.size() == 1);
    const auto& image = r.images[0];
    CHECK(image.arch == 90);
    CHECK(image.arch_name == "sm_90");
    const auto* staged = find_kernel(image, "_Z6stagedIfEvPT_i");
    REQUIRE(staged != nullptr);
    CHECK(staged->demangled_name == "void staged<float>(float*, int)");
    REQUIRE(staged->max_threads.has_value());
    CHECK(staged->max_threads->x == 256);
    CHECK(staged->parameters.size() == 2);
    const auto* clustered = find_kernel(image, "clustered");
    REQUIRE(clustered != nullptr);
    REQUIRE(clustered->cluster_dims.has_value());
    CHECK(clustered->cluster_dims->x == 2);
    const auto* spilling = find_kernel(image, "spilling");
    REQUIRE(spilling != nullptr);
    CHECK(spilling->max_registers == 24);
    CHECK(spilling->stack_bytes > 0);  // equal to cuobjdump's STACK above
    CHECK(spilling->frame_bytes > 0);  // the spills
    const auto* by_value = find_kernel(image, "by_value");
    REQUIRE(by_value != nullptr);
    REQUIRE(by_value->parameters.size() == 2);
    CHECK(by_value->parameters[0].size == 400);
    CHECK(by_value->parameter_bytes == by_value->parameters[1].offset + by_value->parameters[1].size);
  }
  SECTION("an arch-specific cubin (sm_90a)") {
    REQUIRE(compile({nvcc, "-cubin", "-arch=sm_90a", cu, "-o", dir.file("a.cubin")}));
    const auto r = compare_with_cuobjdump(tool, dir.file("a.cubin"));
    CHECK(r.images.at(0).arch_name == "sm_90a");
  }
  SECTION("a compressed fatbin with two SASS architectures and PTX (zstd), and the same with LZ4") {
    REQUIRE(compile({nvcc, "-fatbin", "-gencode=arch=compute_80,code=sm_80",
                     "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]", "-Xfatbin", "-compress-all", cu, "-o",
                     dir.file("z.fatbin")}));
    const auto r = compare_with_cuobjdump(tool, dir.file("z.fatbin"));
    REQUIRE(r.images.size() == 3);
    for (const auto& image : r.images) {
      CHECK(image.compressed());
      CHECK(image.bytes > image.stored_bytes);
    }
    const std::string cubin = dir.file("for_lz4.cubin");
    REQUIRE(compile({nvcc, "-cubin", "-arch=sm_90", cu, "-o", cubin}));
    REQUIRE(compile({bin + "fatbinary", "--create=" + dir.file("l.fatbin"), "-64",
                     "--image3=kind=elf,sm=90,file=" + cubin, "-compress-all", "-compress-mode=speed"}));
    const auto l = compare_with_cuobjdump(tool, dir.file("l.fatbin"));
    REQUIRE(l.images.size() == 1);
    CHECK(l.images[0].compression == "lz4");
    CHECK(l.images[0].bytes == read_file(cubin).size());  // decompressed: the cubin itself
  }
  SECTION("an executable with an embedded fatbin, and an -rdc object (__nv_relfatbin)") {
    REQUIRE(compile({nvcc, "-gencode=arch=compute_90,code=[sm_90,compute_90]", "-gencode=arch=compute_80,code=sm_80",
                     cu, "-o", dir.file("program")}));
    const auto r = compare_with_cuobjdump(tool, dir.file("program"));
    // Its images and the CUDA runtime's (linked statically), all in .nv_fatbin: ours are the ones
    // with our kernels, for sm_90, sm_80 and compute_90.
    std::multiset<std::string> ours;
    for (const auto& image : r.images) {
      CHECK(image.container == ".nv_fatbin");
      if (find_kernel(image, "spilling") != nullptr) ours.insert(image.arch_name);
    }
    CHECK(ours == std::multiset<std::string>{"compute_90", "sm_80", "sm_90"});
    REQUIRE(compile({nvcc, "-c", "-rdc=true", "-arch=sm_90", cu, "-o", dir.file("rdc.o")}));
    const auto o = compare_with_cuobjdump(tool, dir.file("rdc.o"));
    REQUIRE(!o.images.empty());
    CHECK(o.images.at(0).container == "__nv_relfatbin");
  }
  SECTION("the project's kernels: the GPU tier's (a cubin, a fatbin, sm_100, -G) and an example's") {
    const std::string gpu = std::string(CUDRV_TEST_SOURCE_DIR) + "/tests/gpu/kernels/";
    REQUIRE(compile({nvcc, "-std=c++17", "-cubin", "-arch=sm_90", gpu + "test_kernels.cu", "-o", dir.file("t.cubin")}));
    REQUIRE(compile({nvcc, "-std=c++17", "-fatbin", "-gencode=arch=compute_90,code=[sm_90,compute_90]",
                     gpu + "test_kernels.cu", "-o", dir.file("t.fatbin")}));
    REQUIRE(compile({nvcc, "-std=c++17", "-cubin", "-arch=sm_100", gpu + "other_arch.cu", "-o", dir.file("o.cubin")}));
    REQUIRE(compile(
        {nvcc, "-std=c++17", "-cubin", "-arch=sm_90", "-G", gpu + "device_functions.cu", "-o", dir.file("g.cubin")}));
    REQUIRE(compile({nvcc, "-std=c++17", "-fatbin", "-gencode=arch=compute_80,code=sm_80",
                     "-gencode=arch=compute_90,code=sm_90",
                     std::string(CUDRV_TEST_SOURCE_DIR) + "/examples/kernels/scale.cu", "-o", dir.file("s.fatbin")}));
    for (const char* name : {"t.cubin", "t.fatbin", "o.cubin", "g.cubin", "s.fatbin"}) {
      const auto r = compare_with_cuobjdump(tool, dir.file(name));
      CHECK(!r.images.empty());
    }
  }
  SECTION("PTX directives: .reqntid, .maxntid, .maxnreg, explicit clusters, .maxclusterrank (ptxas)") {
    REQUIRE(compile({bin + "ptxas", "-arch=sm_90", dir.file("directives.ptx"), "-o", dir.file("d.cubin")}));
    write_file(dir.file("texref.ptx"), texref_source);
    REQUIRE(compile({bin + "ptxas", "-arch=sm_90", dir.file("texref.ptx"), "-o", dir.file("texref.cubin")}));
    CHECK(compare_with_cuobjdump(tool, dir.file("texref.cubin")).images.at(0).kernels.size() == 1);
    const auto r = compare_with_cuobjdump(tool, dir.file("d.cubin"));
    const auto& image = r.images.at(0);
    const auto* required = find_kernel(image, "required");
    REQUIRE((required != nullptr && required->required_threads.has_value()));
    CHECK(required->required_threads->x == 128);
    const auto* capped = find_kernel(image, "capped");
    REQUIRE((capped != nullptr && capped->max_threads.has_value()));
    CHECK(capped->max_threads->x == 256);
    CHECK(capped->max_registers == 32);
    const auto* cluster = find_kernel(image, "explicit_cluster");
    REQUIRE((cluster != nullptr && cluster->cluster_dims.has_value()));
    CHECK(cluster->explicit_cluster);
    CHECK(cluster->cluster_dims->y == 2);
    const auto* ranked = find_kernel(image, "ranked");
    REQUIRE(ranked != nullptr);
    CHECK(ranked->max_cluster_rank == 8u);
    // The PTX itself: its target and the same entries with the same parameters.
    const auto p = cudrv::inspect(cudrv::object_code(cudrv::code_kind::ptx, ptx_source, "directives.ptx"));
    REQUIRE(p.images.size() == 1);
    CHECK(p.images[0].arch_name == "compute_90");
    CHECK(p.images[0].kernels.size() == image.kernels.size());
    const auto* ptx_ranked = find_kernel(p.images[0], "ranked");
    REQUIRE(ptx_ranked != nullptr);
    CHECK(ptx_ranked->parameters.size() == ranked->parameters.size());
    CHECK(ptx_ranked->parameter_bytes == ranked->parameter_bytes);
  }
}

TEST_CASE("inspect: the project's own images (the fuzz seeds) equal cuobjdump's", "[query][inspect]") {
  const std::string tool = cuobjdump();
  if (tool.empty()) {
    WARN("SKIPPED: no cuobjdump (CUDRV_TEST_CUOBJDUMP, the toolkit's, or scripts/install-deps.sh --ci)");
    return;
  }
  temp_dir dir;
  for (const char* seed : {"cubin_scale", "fatbin_scale", "fatbin_compressed"}) {
    // fuzz_image seeds: one kind byte, then the image (fuzz/make_seeds.py).
    const std::string bytes = read_file(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/" + seed);
    REQUIRE(bytes.size() > 1);
    write_file(dir.file(seed), bytes.substr(1));
    const auto r = compare_with_cuobjdump(tool, dir.file(seed));
    CHECK(!r.images.empty());
  }
}

TEST_CASE("inspect: truncated, garbage and unsupported inputs are typed errors that say what is wrong",
          "[query][inspect]") {
  const std::string cubin = read_file(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/cubin_scale").substr(1);
  const std::string fatbin = read_file(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/fatbin_scale").substr(1);
  REQUIRE(cudrv::detect_code_kind(cubin) == cudrv::code_kind::cubin);
  REQUIRE(cudrv::detect_code_kind(fatbin) == cudrv::code_kind::fatbin);
  const auto whole = cudrv::inspect(cudrv::object_code(cudrv::code_kind::cubin, cubin, "scale.cubin"));
  REQUIRE(whole.images.size() == 1);
  CHECK(whole.images[0].kernels.at(0).name == "scale");

  auto message_of = [](cudrv::code_kind kind, const std::string& bytes) -> std::string {
    try {
      (void)cudrv::inspect(cudrv::object_code(kind, bytes, "bad"));
    } catch (const cudrv::invalid_image_error& e) {
      return e.what();
    }
    return "no error";
  };
  // Every truncation of the cubin and the fatbin is refused, never read past its end (the sanitizer
  // tree checks the reads).
  for (std::size_t n = 0; n < cubin.size(); n += 61) {
    CHECK(message_of(cudrv::code_kind::cubin, cubin.substr(0, n)) != "no error");
  }
  for (std::size_t n = 0; n < fatbin.size(); n += 61) {
    INFO("fatbin cut to " << n << " bytes");
    CHECK(message_of(cudrv::code_kind::fatbin, fatbin.substr(0, n)) != "no error");
  }
  CHECK_THAT(message_of(cudrv::code_kind::cubin, cubin.substr(0, 3000 < cubin.size() ? 3000 : cubin.size() / 2)),
             Catch::Contains("truncated"));
  CHECK_THAT(message_of(cudrv::code_kind::object, "not an ELF file at all, just text"),
             Catch::Contains("not an ELF file"));
  CHECK_THAT(message_of(cudrv::code_kind::fatbin, std::string("\x50\xed\x55\xba\x01\x00\x10\x00", 8) +
                                                      std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8)),
             Catch::Contains("exceeds the image size"));
  // A host file whose sections hold no .nv_fatbin: nothing embedded. (A host ELF whose .nv_fatbin holds
  // a cut fatbin: "crafted host ELF files", below.)
  std::string elf = cubin;
  elf[18] = 62;  // EM_X86_64
  CHECK(cudrv::inspect(cudrv::object_code(cudrv::code_kind::object, elf, "host")).images.empty());
  CHECK_THROWS_AS(cudrv::inspect(cudrv::object_code(cudrv::code_kind::ltoir, "x", "x.ltoir")),
                  cudrv::invalid_argument_error);
  CHECK(cudrv::detect_code_kind("!<arch>\nmember") == cudrv::code_kind::library);
  CHECK_THROWS_AS(cudrv::inspect(cudrv::object_code(cudrv::code_kind::library, "!<arch>\n", "x.a")),
                  cudrv::invalid_argument_error);
}

TEST_CASE("cudrv-query --inspect: text, JSON against the schema, exit statuses", "[query][inspect][cli]") {
  temp_dir dir;
  const std::string cubin = read_file(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/cubin_scale").substr(1);
  const std::string fatbin = read_file(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/fatbin_compressed").substr(1);
  write_file(dir.file("scale.cubin"), cubin);
  write_file(dir.file("scale.fatbin"), fatbin);
  write_file(dir.file("cut.cubin"), cubin.substr(0, cubin.size() / 2));

  // No driver is loaded: the view works where none exists.
  const auto text = run_query({"--inspect", dir.file("scale.cubin")}, {query_test::no_driver});
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("Function scale"));
  CHECK_THAT(text.out, Catch::Contains("REG:"));
  CHECK(text.err.empty());

  for (const std::string& file : {dir.file("scale.cubin"), dir.file("scale.fatbin")}) {
    const auto json = run_query({"--inspect", file, "--json"}, {query_test::no_driver});
    INFO(json.out << json.err);
    CHECK(json.exit_code == 0);
    bool valid = false;
    const std::string why = query_test::validate(json.out, valid);
    CHECK(valid);
    INFO(why);
    const auto doc = query_test::parse(json.out);
    CHECK(doc["view"] == "inspect");
    const auto ours =
        cudrv::inspect(cudrv::object_code(cudrv::detect_code_kind(read_file(file)), read_file(file), file));
    REQUIRE(doc["inspect"]["images"].size() == ours.images.size());
    for (std::size_t i = 0; i < ours.images.size(); ++i) {
      CHECK(doc["inspect"]["images"][i]["arch_name"] == ours.images[i].arch_name);
      CHECK(doc["inspect"]["images"][i]["kernels"].size() == ours.images[i].kernels.size());
    }
  }

  // A malformed file: status 4 (an error while querying the file), one line, a valid JSON document.
  const auto cut = run_query({"--inspect", dir.file("cut.cubin"), "--json"});
  CHECK(cut.exit_code == 4);
  CHECK_THAT(cut.err, Catch::Contains("truncated"));
  bool valid = false;
  CHECK((query_test::validate(cut.out, valid), valid));
  CHECK(query_test::parse(cut.out)["status"] == "cuda_error");
  // A file that cannot be opened: status 1 (a bad value of --inspect).
  const auto missing = run_query({"--inspect", dir.file("missing.cubin")});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains("cannot open"));
  const auto missing_json = run_query({"--inspect", dir.file("missing.cubin"), "--json"});
  CHECK(missing_json.exit_code == 1);
  CHECK((query_test::validate(missing_json.out, valid), valid));
  CHECK(query_test::parse(missing_json.out)["status"] == "usage_error");
  CHECK(query_test::parse(missing_json.out)["view"] == "inspect");
  // Options that do not apply, and views combined: usage errors.
  CHECK(run_query({"--inspect", dir.file("scale.cubin"), "-d", "0"}).exit_code == 1);
  CHECK(run_query({"--inspect", dir.file("scale.cubin"), "--details"}).exit_code == 1);
  CHECK(run_query({"--inspect"}).exit_code == 1);
}

TEST_CASE("cudrv-query --help lists --inspect and its exit statuses", "[query][inspect][cli]") {
  const auto help = run_query({"--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--inspect FILE"));
  CHECK_THAT(help.out, Catch::Contains("--inspect: FILE is not a well-formed image"));
}

// --- issue 36: inspect review fixes: crafted inputs ---------------------------------------------------

// A small ELF64 writer for crafted files: sections with their bytes (or headers that name another
// section's bytes), a section name table, and the header table at the end; extended numbering on request.
struct elf_writer {
  struct section {
    std::string name;
    std::uint32_t type = 1;  // SHT_PROGBITS
    std::string data;
    std::uint32_t link = 0;
    int alias_of = -1;  // >= 0: this header names the bytes of that section (by index in sections)
  };
  std::uint16_t machine = 62;  // EM_X86_64; 190 for a cubin
  std::vector<section> sections;

  template <class T>
  static void put(std::string& b, std::size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
  }

  std::string build(bool extended_numbering = false) const {
    std::string b(64, '\0');
    b.replace(0, 7,
              std::string("\x7f"
                          "ELF\x02\x01\x01",
                          7));
    put<std::uint8_t>(b, 8, 8);  // ELF ABI version (a cubin's e_flags then hold the architecture at bits 8-15)
    std::string names(1, '\0');
    std::vector<std::uint32_t> name_at;
    std::vector<std::uint64_t> offset;
    for (const section& s : sections) {
      name_at.push_back(static_cast<std::uint32_t>(names.size()));
      names += s.name + '\0';
      b.resize((b.size() + 7) / 8 * 8, '\0');
      offset.push_back(b.size());
      b += s.alias_of >= 0 ? std::string() : s.data;
    }
    const std::uint32_t names_name = static_cast<std::uint32_t>(names.size());
    names += std::string(".shstrtab") + '\0';
    const std::uint64_t names_at = b.size();
    b += names;
    b.resize((b.size() + 7) / 8 * 8, '\0');
    const std::uint64_t shoff = b.size();
    const std::uint64_t count = sections.size() + 2;  // the null section, the sections, .shstrtab
    const std::uint64_t shstrndx = count - 1;
    b.resize(b.size() + count * 64, '\0');
    for (std::size_t i = 0; i < sections.size(); ++i) {
      const section& s = sections[i];
      const std::size_t src = s.alias_of >= 0 ? static_cast<std::size_t>(s.alias_of) : i;
      const std::size_t h = shoff + (i + 1) * 64;
      put<std::uint32_t>(b, h, name_at[i]);
      put<std::uint32_t>(b, h + 4, s.type);
      put<std::uint64_t>(b, h + 24, offset[src]);
      put<std::uint64_t>(b, h + 32, sections[src].data.size());
      put<std::uint32_t>(b, h + 40, s.link);
      put<std::uint64_t>(b, h + 56, s.type == 2 ? 24 : 0);  // sh_entsize of a symbol table
    }
    const std::size_t last = shoff + shstrndx * 64;
    put<std::uint32_t>(b, last, names_name);
    put<std::uint32_t>(b, last + 4, 3);  // SHT_STRTAB
    put<std::uint64_t>(b, last + 24, names_at);
    put<std::uint64_t>(b, last + 32, names.size());
    put<std::uint16_t>(b, 16, 1);  // ET_REL
    put<std::uint16_t>(b, 18, machine);
    put<std::uint32_t>(b, 20, 1);
    put<std::uint64_t>(b, 40, shoff);
    put<std::uint32_t>(b, 48, 90u << 8);  // e_flags: sm_90 for a cubin
    put<std::uint16_t>(b, 52, 64);
    put<std::uint16_t>(b, 58, 64);
    put<std::uint16_t>(b, 60, extended_numbering ? 0 : static_cast<std::uint16_t>(count));
    put<std::uint16_t>(b, 62, extended_numbering ? 0xffff : static_cast<std::uint16_t>(shstrndx));
    if (extended_numbering) {
      put<std::uint64_t>(b, shoff + 32, count);     // section 0's sh_size: the section count
      put<std::uint32_t>(b, shoff + 40, shstrndx);  // section 0's sh_link: the name table's index
    }
    return b;
  }
};

// One Elf64_Sym: a function symbol (STT_FUNC), an entry (a kernel) when entry is true, defined in section 1.
std::string function_symbol(std::uint32_t name, bool entry) {
  std::string s(24, '\0');
  elf_writer::put<std::uint32_t>(s, 0, name);
  elf_writer::put<std::uint8_t>(s, 4, 0x12);  // STB_GLOBAL, STT_FUNC
  elf_writer::put<std::uint8_t>(s, 5, entry ? 0x10 : 0);
  elf_writer::put<std::uint16_t>(s, 6, 1);
  return s;
}

// A cubin whose only content is a symbol table of symbols (one 24-byte Elf64_Sym each) over strings.
elf_writer cubin_with_symbols(const std::string& symbols, const std::string& strings) {
  elf_writer w;
  w.machine = 190;  // EM_CUDA
  w.sections.push_back({".strtab", 3, strings});
  w.sections.push_back({".symtab", 2, std::string(24, '\0') + symbols, 1});  // link: .strtab (section 1)
  return w;
}

std::string inspect_error(cudrv::code_kind kind, const std::string& bytes) {
  try {
    (void)cudrv::inspect(cudrv::object_code(kind, bytes, "crafted"));
  } catch (const cudrv::invalid_image_error& e) {
    return e.what();
  }
  return "no error";
}

TEST_CASE("inspect: crafted host ELF files: fatbin sections read once, extended numbering, cut fatbins",
          "[query][inspect]") {
  const std::string fatbin = read_file(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/fatbin_scale").substr(1);
  REQUIRE(cudrv::detect_code_kind(fatbin) == cudrv::code_kind::fatbin);
  const auto alone = cudrv::inspect(cudrv::object_code(cudrv::code_kind::fatbin, fatbin, "scale.fatbin"));
  REQUIRE(!alone.images.empty());

  elf_writer w;
  w.sections.push_back({".text", 1, std::string(16, '\x90')});
  w.sections.push_back({".nv_fatbin", 1, fatbin});
  for (const bool extended : {false, true}) {
    INFO("extended numbering: " << extended);
    const std::string host = w.build(extended);
    REQUIRE(cudrv::detect_code_kind(host) == cudrv::code_kind::object);
    const auto r = cudrv::inspect(cudrv::object_code(cudrv::code_kind::object, host, "host"));
    REQUIRE(r.images.size() == alone.images.size());
    for (std::size_t i = 0; i < r.images.size(); ++i) {
      CHECK(r.images[i].container == ".nv_fatbin");
      CHECK(r.images[i].arch_name == alone.images[i].arch_name);
      CHECK(r.images[i].kernels.size() == alone.images[i].kernels.size());
    }
  }
  // Headers that name the same .nv_fatbin bytes again (a crafted file could name them 65535 times, each
  // read and decompressed anew): refused, saying which sections.
  elf_writer aliased = w;
  for (int i = 0; i < 3; ++i) {
    aliased.sections.push_back({".nv_fatbin", 1, {}, 0, 1});
  }
  CHECK_THAT(inspect_error(cudrv::code_kind::object, aliased.build()), Catch::Contains("share the bytes"));
  // Two fatbin sections with bytes of their own (the same fatbin twice): both read.
  elf_writer two = w;
  two.sections[0].data = fatbin;
  two.sections[0].name = "__nv_relfatbin";
  CHECK(cudrv::inspect(cudrv::object_code(cudrv::code_kind::object, two.build(), "two")).images.size() ==
        2 * alone.images.size());
  // A host ELF whose .nv_fatbin holds a cut fatbin: the section is checked like a fatbin file.
  elf_writer cut = w;
  cut.sections[1].data = fatbin.substr(0, fatbin.size() / 2);
  const std::string cut_error = inspect_error(cudrv::code_kind::object, cut.build());
  CHECK_THAT(cut_error, Catch::Contains(".nv_fatbin"));
  CHECK_THAT(cut_error, Catch::Contains("truncated"));
}

// A fatbin of count entries, each an LZ4-compressed PTX entry of 16 stored bytes that claims to
// decompress to claimed bytes.
std::string fatbin_of_compressed(std::size_t count, std::uint64_t claimed) {
  std::string body;
  for (std::size_t i = 0; i < count; ++i) {
    std::string e(64 + 16, '\x01');
    elf_writer::put<std::uint16_t>(e, 0, 1);  // PTX
    elf_writer::put<std::uint16_t>(e, 2, 0x101);
    elf_writer::put<std::uint32_t>(e, 4, 64);        // header size
    elf_writer::put<std::uint64_t>(e, 8, 16);        // payload size
    elf_writer::put<std::uint32_t>(e, 16, 16);       // compressed size
    elf_writer::put<std::uint32_t>(e, 28, 90);       // architecture
    elf_writer::put<std::uint64_t>(e, 40, 0x2000);   // flags: LZ4
    elf_writer::put<std::uint64_t>(e, 56, claimed);  // decompressed size
    body += e;
  }
  std::string b(16, '\0');
  elf_writer::put<std::uint32_t>(b, 0, 0xBA55ED50u);
  elf_writer::put<std::uint16_t>(b, 4, 1);
  elf_writer::put<std::uint16_t>(b, 6, 16);
  elf_writer::put<std::uint64_t>(b, 8, body.size());
  return b + body;
}

TEST_CASE("inspect: decompression has a total budget and implausible sizes are refused", "[query][inspect]") {
  // One entry that claims 2 GiB from 16 bytes: listed as unreadable, nothing allocated.
  const auto one = cudrv::inspect(
      cudrv::object_code(cudrv::code_kind::fatbin, fatbin_of_compressed(1, std::uint64_t{2} << 30), "x.fatbin"));
  REQUIRE(one.images.size() == 1);
  CHECK_THAT(one.images[0].unreadable, Catch::Contains("implausible"));
  // Each of 100 entries of 80 bytes claims 1 MiB (plausible alone): 100 MiB for an 8 KB file exceeds
  // the call's budget (min(4 GiB, max(64 MiB, 64 x the file size))).
  const std::string many = fatbin_of_compressed(100, std::uint64_t{1} << 20);
  CHECK_THAT(inspect_error(cudrv::code_kind::fatbin, many), Catch::Contains("work budget"));
  // 60 such entries fit the budget: each is listed (unreadable: its bytes are no LZ4 data, or there is no liblz4).
  const auto fits = cudrv::inspect(
      cudrv::object_code(cudrv::code_kind::fatbin, fatbin_of_compressed(60, std::uint64_t{1} << 20), "x.fatbin"));
  CHECK(fits.images.size() == 60);
}

TEST_CASE("inspect: crafted cubins: aliased symbol tables, repeated and long names, constant banks",
          "[query][inspect]") {
  // Many __device__ function symbols sharing one long name: listed once.
  const std::string long_name(1000, 'f');
  std::string symbols;
  for (int i = 0; i < 500; ++i) {
    symbols += function_symbol(1, false);
  }
  symbols += function_symbol(1002, true);
  const std::string strings = std::string(1, '\0') + long_name + '\0' + "kernel" + '\0';
  elf_writer w = cubin_with_symbols(symbols, strings);
  const auto r = cudrv::inspect(cudrv::object_code(cudrv::code_kind::cubin, w.build(), "x.cubin"));
  REQUIRE(r.images.size() == 1);
  CHECK(r.images[0].device_functions == std::vector<std::string>{long_name});
  REQUIRE(r.images[0].kernels.size() == 1);
  CHECK(r.images[0].kernels[0].name == "kernel");

  // A second SHT_SYMTAB header naming the same bytes: refused.
  elf_writer aliased = w;
  aliased.sections.push_back({".symtab", 2, {}, 1, 1});
  CHECK_THAT(inspect_error(cudrv::code_kind::cubin, aliased.build()), Catch::Contains("share the bytes"));

  // A name longer than 64 KiB: refused, saying so.
  const std::string huge(70000, 'g');
  const elf_writer too_long = cubin_with_symbols(function_symbol(1, false), std::string(1, '\0') + huge + '\0');
  CHECK_THAT(inspect_error(cudrv::code_kind::cubin, too_long.build()), Catch::Contains("longer than 65536"));

  // Constant banks, added in section order, come out sorted by bank.
  elf_writer banks = w;
  for (const char* name : {".nv.constant3", ".nv.constant0", ".nv.constant2"}) {
    banks.sections.push_back({name, 1, std::string(32, '\0')});
  }
  const auto b = cudrv::inspect(cudrv::object_code(cudrv::code_kind::cubin, banks.build(), "b.cubin"));
  REQUIRE(b.images.at(0).constant.size() == 3);
  CHECK(b.images[0].constant[0].bank == 0);
  CHECK(b.images[0].constant[1].bank == 2);
  CHECK(b.images[0].constant[2].bank == 3);
}

TEST_CASE("cudrv-query --inspect escapes control characters in names (text view)", "[query][inspect][cli]") {
  const std::string name = "dev\x1b[31mred\x07";
  std::string symbols = function_symbol(1, false);
  const elf_writer w = cubin_with_symbols(symbols, std::string(1, '\0') + name + '\0');
  temp_dir dir;
  write_file(dir.file("esc.cubin"), w.build());
  const auto text = run_query({"--inspect", dir.file("esc.cubin")}, {query_test::no_driver});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("Device functions: dev\\x1b[31mred\\x07"));
  CHECK(text.out.find('\x1b') == std::string::npos);
  CHECK(text.out.find('\x07') == std::string::npos);
  // The JSON document keeps the name as it is (escaped by JSON itself).
  const auto json = run_query({"--inspect", dir.file("esc.cubin"), "--json"}, {query_test::no_driver});
  CHECK(json.exit_code == 0);
  CHECK(query_test::parse(json.out)["inspect"]["images"][0]["device_functions"][0] == name);
}
// --- end of issue 36: inspect review fixes -----------------------------------------------------------------

// The GPU tier: the driver's own attributes of the kernels (cuKernelGetAttribute) agree with what the
// image says, for a cubin nvcc makes for the device's architecture.
TEST_CASE("inspect: registers, launch bounds and cluster dimensions equal the driver's attributes",
          "[query][gpu][inspect]") {
  CUDRV_REQUIRE_GPU();
  const std::string nvcc = CUDRV_TEST_NVCC;
  if (!executable(nvcc)) {
    std::cout << "SKIPPED: needs nvcc (none at '" << nvcc << "')" << std::endl;
    return;
  }
  const cudrv::device dev(0);
  const int cc = dev.compute_capability().as_int();
  if (cc < 90) {
    std::cout << "SKIPPED: needs compute capability 9.0 for __cluster_dims__ (this device has " << cc / 10 << "."
              << cc % 10 << ")" << std::endl;
    return;
  }
  temp_dir dir;
  write_file(dir.file("kernels.cu"), source);
  const std::string cubin = dir.file("k.cubin");
  REQUIRE(compile(
      {nvcc, "-cubin", "-arch=sm_" + std::to_string(cc), "-maxrregcount=24", dir.file("kernels.cu"), "-o", cubin}));
  const cudrv::object_code code(cudrv::code_kind::cubin, read_file(cubin), cubin);
  const auto r = cudrv::inspect(code);
  REQUIRE(r.images.size() == 1);
  const cudrv::code_image& image = r.images[0];
  CHECK(image.arch == cc);
  const cudrv::library lib(code);
  REQUIRE(image.kernels.size() == 5);
  for (const cudrv::kernel_resources& k : image.kernels) {
    INFO(k.name);
    const cudrv::kernel_attributes a = lib.get_kernel(k.name).attributes(dev);
    INFO("driver: regs " << a.num_regs << ", shared " << a.shared_size_bytes << ", local " << a.local_size_bytes
                         << ", const " << a.const_size_bytes << "; image: regs " << k.registers << ", shared "
                         << k.shared_bytes << ", local " << k.local_bytes << ", frame " << k.frame_bytes);
    CHECK(a.num_regs == k.registers);
    CHECK(a.binary_version == image.arch);
    CHECK(static_cast<std::size_t>(a.shared_size_bytes) <= k.shared_bytes);  // the image counts the reserved part too
    if (k.max_threads) {
      CHECK(a.max_threads_per_block <= static_cast<int>(k.max_threads->x * k.max_threads->y * k.max_threads->z));
    }
    if (k.cluster_dims) {
      CHECK(a.required_cluster_width == static_cast<int>(k.cluster_dims->x));
      CHECK(a.required_cluster_height == static_cast<int>(k.cluster_dims->y));
      CHECK(a.required_cluster_depth == static_cast<int>(k.cluster_dims->z));
    } else {
      CHECK(a.required_cluster_width == 0);
    }
    // Not compared: cluster_size_must_be_set (whether a compile-time cluster counts as "must be set" is
    // the driver's reading of EIATTR_EXPLICIT_CLUSTER), shared and local sizes (the reserved part).
    INFO("cluster_size_must_be_set " << a.cluster_size_must_be_set << ", explicit_cluster " << k.explicit_cluster);
  }
}
