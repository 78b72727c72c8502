// CPU tier: the C++ side of the PyTorch example (examples/torch_extension/) that needs neither PyTorch
// nor a GPU. The kernel both of its builds launch compiles with NVRTC for sm_90 through the compile
// cache (the second compilation is a hit), under the name the extension looks up, without FMA
// contraction (the premise of its bit-for-bit comparison with PyTorch); the launch configuration covers
// every element; and the DLPack deleter counter the extension reports to Python counts exactly one call
// per tensor, whoever deletes it, for both managed structs. The run in PyTorch and CuPy is
// examples/torch_extension/run.py, in the GPU tier (scripts/gpu-suite.sh).
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_DLPACK)
#define CUDRV_TORCH_GLUE_DLPACK 1
#endif
#include "torch_extension/cudrv_torch_glue.hpp"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace {

// A fresh cache directory, removed at scope exit.
struct scratch_cache {
  std::filesystem::path path;
  scratch_cache() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cudrv-torch-glue-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  scratch_cache(const scratch_cache&) = delete;
  scratch_cache& operator=(const scratch_cache&) = delete;
  ~scratch_cache() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("torch example: the kernel compiles with NVRTC for sm_90 through the cache", "[torch][examples]") {
  scratch_cache dir;
  cudrv::compile_cache cache(dir.path.string());
  const cudrv::compile_result first = cudrv_torch::compile_kernel(cache, "sm_90");
  CHECK(first.code.kind() == cudrv::code_kind::cubin);
  CHECK(first.code.bytes().size() > 0);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 0);

  // What the extension does in a later process: another cache object over the same directory.
  cudrv::compile_cache again(dir.path.string());
  const cudrv::compile_result second = cudrv_torch::compile_kernel(again, "sm_90");
  CHECK(again.stats().hits == 1);
  CHECK(again.stats().misses == 0);
  CHECK(second.code.bytes() == first.code.bytes());

  // The PTX: the entry has the unmangled name the extension asks the library for, and a * x + b * y is
  // two rounded products and a rounded sum (no fma), as plain_op.cu (nvcc -fmad=false) and PyTorch do.
  const cudrv::compile_result ptx = cudrv_torch::compile_kernel(cache, "sm_90", cudrv::code_kind::ptx);
  const std::string& text = ptx.code.bytes();
  INFO(text);
  CHECK(cudrv::test::contains(text, std::string(".entry ") + cudrv_torch::kernel_name));
  CHECK(cudrv::test::contains(text, "mul.rn.f32"));
  CHECK(cudrv::test::contains(text, "add.rn.f32"));
  CHECK_FALSE(cudrv::test::contains(text, "fma.rn.f32"));
}

TEST_CASE("torch example: the launch configuration covers every element", "[torch][examples]") {
  for (std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{257}, std::size_t{1} << 20,
                        std::size_t{1} << 32}) {
    INFO(n);
    const cudrv::launch_config c = cudrv_torch::config_for(n);
    CHECK(c.block.x == cudrv_torch::block_size);
    CHECK(c.grid.x >= 1);
    CHECK(c.grid.x <= cudrv_torch::max_blocks);
    // One thread per element up to the cap; the grid-stride loop covers what lies beyond it.
    const std::size_t threads = std::size_t{c.grid.x} * c.block.x;
    CHECK((threads >= n || c.grid.x == cudrv_torch::max_blocks));
    CHECK(threads < n + cudrv_torch::block_size);
    CHECK_FALSE(c.needs_extended_launch());
  }
}

#if defined(CUDRV_TEST_DLPACK)

namespace {

template <class M>
void check_counted_round_trip() {
  std::vector<float> host{1.5f, -2.0f, 3.25f, 4.0f, 5.5f, 6.0f};
  auto owner_deleted = std::make_shared<int>(0);
  std::shared_ptr<const void> owner(new int(0), [owner_deleted](const int* p) {
    ++*owner_deleted;
    delete p;
  });
  const std::int64_t shape[] = {2, 3};
  const cudrv::strided_view<float> view(host.data(), shape, {}, {kDLCPU, 0});
  auto calls = std::make_shared<std::atomic<int>>(0);

  SECTION("a consumer imports it and lets it go: one call") {
    auto counted = cudrv_torch::count_deleter(cudrv::to_dlpack<M>(view, std::move(owner)), calls);
    REQUIRE(counted);
    const DLTensor& t = counted->dl_tensor;  // the same description as the producer's
    CHECK(t.data == host.data());
    CHECK(t.ndim == 2);
    CHECK(t.shape[0] == 2);
    CHECK(t.shape[1] == 3);
    CHECK(t.strides[0] == 3);
    CHECK(t.strides[1] == 1);
    CHECK(t.dtype.code == kDLFloat);
    CHECK(t.dtype.bits == 32);
    auto imported = cudrv::from_dlpack<float>(std::move(counted), cudrv::dlpack_requirements::host(true));
    CHECK(imported.get() == host.data());  // no copy
    CHECK(imported.size() == host.size());
    CHECK(imported.view().span().size() == host.size());
    CHECK(calls->load() == 0);
    CHECK(*owner_deleted == 0);
    imported.reset();
    CHECK(calls->load() == 1);
    CHECK(*owner_deleted == 1);  // the producer's deleter ran behind the counter
    imported.reset();
    CHECK(calls->load() == 1);
  }
  SECTION("never consumed (a capsule dropped unused): one call") {
    {
      auto counted = cudrv_torch::count_deleter(cudrv::to_dlpack<M>(view, std::move(owner)), calls);
      CHECK(calls->load() == 0);
    }
    CHECK(calls->load() == 1);
    CHECK(*owner_deleted == 1);
  }
  SECTION("a consumer that refuses it deletes it: one call") {
    auto counted = cudrv_torch::count_deleter(cudrv::to_dlpack<M>(view, std::move(owner)), calls);
    M* raw = counted.release();
    // A CUDA-only consumer refuses host memory; the raw form deletes before it throws.
    CHECK_THROWS_AS(cudrv::from_dlpack<float>(raw, cudrv::dlpack_requirements::device(0)),
                    cudrv::invalid_argument_error);
    CHECK(calls->load() == 1);
    CHECK(*owner_deleted == 1);
  }
  SECTION("two counters in a row each count once") {
    auto second = std::make_shared<std::atomic<int>>(0);
    {
      auto counted =
          cudrv_torch::count_deleter(cudrv_torch::count_deleter(cudrv::to_dlpack<M>(view, std::move(owner)), calls),
                                     second);
      CHECK(counted->dl_tensor.data == host.data());
    }
    CHECK(calls->load() == 1);
    CHECK(second->load() == 1);
    CHECK(*owner_deleted == 1);
  }
}

}  // namespace

TEST_CASE("torch example: the DLPack deleter counter counts one call per tensor", "[torch][dlpack]") {
#if CUDRV_DLPACK_HAS_VERSIONED
  SECTION("DLManagedTensorVersioned") { check_counted_round_trip<DLManagedTensorVersioned>(); }
#endif
  SECTION("DLManagedTensor") { check_counted_round_trip<DLManagedTensor>(); }
}

#if CUDRV_DLPACK_HAS_VERSIONED
TEST_CASE("torch example: the counter keeps the version and the read-only flag", "[torch][dlpack]") {
  std::vector<float> host(4, 1.0f);
  const std::int64_t shape[] = {4};
  const cudrv::strided_view<const float> view(host.data(), shape, {}, {kDLCPU, 0});
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto counted = cudrv_torch::count_deleter(cudrv::to_dlpack(view, nullptr), calls);
  CHECK(counted->version.major == DLPACK_MAJOR_VERSION);
  CHECK((counted->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  // Read-only stays read-only behind the counter: a mutable import is refused.
  CHECK_THROWS_AS(cudrv::from_dlpack<float>(std::move(counted), cudrv::dlpack_requirements::host()),
                  cudrv::invalid_argument_error);
  CHECK(counted);  // the dlpack_ptr form keeps the tensor on a refusal
  auto imported = cudrv::from_dlpack<const float>(std::move(counted), cudrv::dlpack_requirements::host());
  CHECK(imported.read_only());
  imported.reset();
  CHECK(calls->load() == 1);
}
#endif

TEST_CASE("torch example: the counter refuses what it cannot count", "[torch][dlpack]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  CHECK_THROWS_AS(cudrv_torch::count_deleter(cudrv::dlpack_ptr<DLManagedTensor>(), calls),
                  cudrv::invalid_argument_error);
  std::vector<float> host(2, 0.0f);
  const std::int64_t shape[] = {2};
  auto deleted = std::make_shared<int>(0);
  std::shared_ptr<const void> owner(new int(0), [deleted](const int* p) {
    ++*deleted;
    delete p;
  });
  auto t = cudrv::to_dlpack<DLManagedTensor>(cudrv::strided_view<float>(host.data(), shape, {}, {kDLCPU, 0}),
                                             std::move(owner));
  const auto e = cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv_torch::count_deleter(std::move(t), nullptr); });
  REQUIRE(e.has_value());
  CHECK(cudrv::test::contains(e->what(), "the counter is null"));
  CHECK(*deleted == 1);  // the tensor given was deleted, not leaked
  CHECK(calls->load() == 0);
  CHECK(std::string(cudrv_torch::capsule_name<DLManagedTensor>()) == "dltensor");
  CHECK(std::string(cudrv_torch::used_capsule_name<DLManagedTensor>()) == "used_dltensor");
#if CUDRV_DLPACK_HAS_VERSIONED
  CHECK(std::string(cudrv_torch::capsule_name<DLManagedTensorVersioned>()) == "dltensor_versioned");
  CHECK(std::string(cudrv_torch::used_capsule_name<DLManagedTensorVersioned>()) == "used_dltensor_versioned");
#endif
}

#endif  // CUDRV_TEST_DLPACK
